//! Threads spawned under a name, and running under it by the time the call
//! that made them returns: the harness's threads (`dsh-supervisor`, ...)
//! and the isolate host's (`dsh-v8-scheduler`, `dsh-v8-run-N`, ...).
//!
//! The standard library names a thread from inside it, when it first runs:
//! until the kernel's scheduler gets to it (late, on a loaded machine), the
//! thread shows the name of the thread that made it, so a host's scheduler
//! thread would seem to have a twin while it starts a run thread. Whoever
//! lists a process's threads right after the call that made one (an
//! operator, the tests' leak and priority checks) must find each under its
//! own name.

use std::thread::{Builder, JoinHandle};

/// Spawn `body` on a thread named `name`; returns once the thread runs
/// under that name.
pub fn spawn<T: Send + 'static>(
  name: impl Into<String>,
  body: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
  spawn_from(Builder::new().name(name.into()), body)
}

/// [`spawn`], with a stack of `stack_bytes`.
pub fn spawn_with_stack<T: Send + 'static>(
  name: impl Into<String>,
  stack_bytes: usize,
  body: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
  spawn_from(Builder::new().name(name.into()).stack_size(stack_bytes), body)
}

fn spawn_from<T: Send + 'static>(
  builder: Builder,
  body: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
  let (started, running) = std::sync::mpsc::sync_channel::<()>(1);
  let handle = builder.spawn(move || {
    // The first thing the thread does (the standard library has named it
    // by now): nothing it waits for can hold it up.
    let _ = started.send(());
    body()
  })?;
  // Fails only if the thread ended without sending, which it cannot.
  let _ = running.recv();
  Ok(handle)
}

#[cfg(test)]
mod tests {
  /// The threads of this process named `name`. A listing of
  /// /proc/self/task can skip a thread while another exits, so this crate
  /// has one test, and no thread of it ends while it lists them.
  fn named(name: &str) -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").expect("the process's threads");
    tasks
      .flatten()
      .filter(|task| std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim() == name)
      .count()
  }

  /// What the host's scheduler thread does when it starts run threads: each
  /// runs under its own name once spawn returns, and at no moment does the
  /// maker's name show twice.
  #[test]
  fn a_thread_runs_under_its_name_once_spawn_returns_never_under_its_makers() {
    let maker = super::spawn("dsh-test-maker", || {
      let mut children = Vec::new();
      let mut seen = Vec::new();
      for id in 0..8 {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let name = format!("dsh-test-kid-{id}");
        let child = super::spawn_with_stack(name.clone(), 256 * 1024, move || wait.recv().is_ok()).expect("spawned");
        seen.push((named(&name), named("dsh-test-maker")));
        children.push((release, child));
      }
      for (release, child) in children {
        release.send(()).expect("the child waits");
        assert!(child.join().expect("joined"));
      }
      seen
    })
    .expect("spawned");
    assert_eq!(maker.join().expect("joined"), vec![(1, 1); 8]);
  }
}
