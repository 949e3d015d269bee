//! The harness's own threads, each spawned under a name that starts with
//! `dsh-`, and running under it by the time [`spawn`] returns.
//!
//! The standard library names a thread from inside it, when it first runs:
//! until the scheduler gets to it (late, on a loaded machine), the thread
//! shows the name of the thread that made it. Whoever lists the process's
//! threads right after the call that made one (an operator, a leak check in
//! the tests) must find it under its own name.

use std::thread::JoinHandle;

/// Spawn `body` on a thread named `name`; returns once the thread runs
/// under that name.
pub fn spawn<T: Send + 'static>(
  name: &str,
  body: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
  let (started, running) = std::sync::mpsc::sync_channel::<()>(1);
  let handle = std::thread::Builder::new().name(name.to_owned()).spawn(move || {
    // The first thing the thread does: nothing it waits for can hold it up.
    let _ = started.send(());
    body()
  })?;
  // Fails only if the thread ended without sending, which it cannot.
  let _ = running.recv();
  Ok(handle)
}

#[cfg(test)]
mod tests {
  #[test]
  fn the_thread_runs_under_its_name_once_spawn_returns() {
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let handle = super::spawn("dsh-test-named", move || wait.recv().is_ok()).expect("spawned");
    let tid = {
      let mut found = None;
      for task in std::fs::read_dir("/proc/self/task").expect("the process's threads").flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == "dsh-test-named" {
          found = Some(task.file_name());
        }
      }
      found
    };
    assert!(tid.is_some(), "the thread is listed under its name before it does anything else");
    release.send(()).expect("the thread waits");
    assert!(handle.join().expect("joined"));
  }
}
