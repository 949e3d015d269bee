//! An isolate that lives as long as the host's scheduler, so that the host
//! always has one.
//!
//! When a process's last isolate is disposed, V8 tears down what its
//! isolates share: the read-only heap deserialized from the snapshot and
//! the concurrent compiler's thread (`IsolateGroup::RemoveIsolate`); the
//! next isolate builds them again. A host whose share of the reserve is
//! one prepared isolate (the default: two per machine of two cores, over
//! two hosts) disposes of its last isolate after every run it takes when
//! runs come one at a time, so each next isolate cost that rebuild on top
//! of its own: measured with strace, ~10 fresh heap pages mapped and ~9
//! unmapped a run against ~3 in a host that keeps an isolate alive, and a
//! thread started and ended every few runs. Preparing isolates is what
//! bounds trivial runs one at a time, so the rebuild was on their path.
//!
//! The anchor is a prepared isolate no run takes: its thread makes it, then
//! sleeps until the scheduler is dropped. It costs one idle isolate's
//! memory (mostly pages of the snapshot's heaps, shared with nothing).

use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::config::RuntimeConfig;
use crate::isolate::PreparedIsolate;

/// The anchor's thread, held until dropped.
pub struct IsolateAnchor {
  /// Dropping it wakes the thread, which disposes of the isolate and ends.
  release: Option<mpsc::Sender<()>>,
  thread: Option<JoinHandle<()>>,
}

impl IsolateAnchor {
  /// Start the anchor's thread; it prepares its isolate in the background
  /// (an anchor whose isolate cannot be made anchors nothing, and the host
  /// works as without it).
  pub fn start(config: &RuntimeConfig) -> std::io::Result<IsolateAnchor> {
    let (release, released) = mpsc::channel::<()>();
    let config = config.clone();
    let thread = dsh_named_thread::spawn("dsh-v8-anchor", move || {
      let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else { return };
      let isolate = {
        let _entered = runtime.enter();
        PreparedIsolate::new(&config)
      };
      // Until the sender is dropped: nothing is ever sent.
      let _ = released.recv();
      let _entered = runtime.enter();
      drop(isolate);
    })?;
    Ok(IsolateAnchor { release: Some(release), thread: Some(thread) })
  }
}

impl Drop for IsolateAnchor {
  fn drop(&mut self) {
    drop(self.release.take());
    if let Some(thread) = self.thread.take() {
      let _ = thread.join();
    }
  }
}
