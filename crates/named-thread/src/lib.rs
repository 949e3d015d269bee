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
  /// The threads of this process named `name`, by task id.
  fn named(name: &str) -> Vec<std::ffi::OsString> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("the process's threads");
    tasks
      .flatten()
      .filter(|task| std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim() == name)
      .map(|task| task.file_name())
      .collect()
  }

  #[test]
  fn the_thread_runs_under_its_name_once_spawn_returns() {
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let handle = super::spawn("dsh-test-named", move || wait.recv().is_ok()).expect("spawned");
    assert_eq!(named("dsh-test-named").len(), 1, "listed under its name before it does anything else");
    release.send(()).expect("the thread waits");
    assert!(handle.join().expect("joined"));
  }

  #[test]
  fn a_thread_made_by_a_named_thread_never_shows_its_makers_name() {
    // What the host's scheduler thread does when it starts run threads:
    // at no moment after each spawn does the maker's name show twice.
    let maker = super::spawn("dsh-test-maker", || {
      let mut children = Vec::new();
      let mut twins = 0;
      for id in 0..8 {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let child = super::spawn_with_stack(format!("dsh-test-kid-{id}"), 256 * 1024, move || wait.recv().is_ok())
          .expect("spawned");
        twins += named("dsh-test-maker").len() - 1;
        children.push((release, child));
      }
      for (release, child) in children {
        release.send(()).expect("the child waits");
        assert!(child.join().expect("joined"));
      }
      twins
    })
    .expect("spawned");
    assert_eq!(maker.join().expect("joined"), 0);
  }
}
