//! One run's stop switch, shared by every thread that may end it: the
//! watchdog (budgets), the Node thread (abort, disposal) and the run's own
//! isolate thread (exit, output cap, heap and external-memory caps).
//!
//! The first reason wins. Stopping terminates the isolate's JS (a hot loop
//! included) and wakes the run's event loop, which may be parked waiting
//! on a binding call that termination alone would not interrupt.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use deno_core::v8;
use tokio::sync::Notify;

use crate::compiler_zones::ZoneMeter;
use crate::lock::lock;

/// Why a run was stopped (defined with the failure each reason reports).
use dsh_protocol::failure::StopReason;

/// The isolate a run's program runs on, as the other threads reach it.
pub struct AttachedIsolate {
  /// To terminate its JS.
  pub handle: v8::IsolateHandle,
  /// Its compilers' zones (none where the host could not locate them).
  pub zones: Option<ZoneWatch>,
}

/// A run's compiler zones, as the watchdog judges them.
pub struct ZoneWatch {
  pub meter: ZoneMeter,
  /// What they may hold before the run is stopped (`zone_allowance`).
  pub stop_at: usize,
}

/// The shared stop switch of one run.
#[derive(Default)]
pub struct RunControl {
  reason: Mutex<Option<StopReason>>,
  isolate: Mutex<Option<AttachedIsolate>>,
  /// Set once the program settled: later stop requests change nothing.
  settled: AtomicBool,
  wake: Notify,
  /// Told after every stop, on the stopping thread: the scheduler finishes
  /// a run that was stopped while still queued at once.
  on_stop: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl RunControl {
  /// A switch that calls `on_stop` after it is thrown.
  pub fn new(on_stop: Option<Arc<dyn Fn() + Send + Sync>>) -> Self {
    RunControl { on_stop, ..Self::default() }
  }

  /// Stop the run for `reason` unless it already stopped or settled.
  /// Returns whether this call was the one that stopped it.
  pub fn stop(&self, reason: StopReason) -> bool {
    {
      let mut slot = lock(&self.reason);
      if slot.is_some() || self.settled.load(Ordering::SeqCst) {
        return false;
      }
      *slot = Some(reason);
    }
    if let Some(isolate) = lock(&self.isolate).as_ref() {
      isolate.handle.terminate_execution();
    }
    self.wake.notify_one();
    if let Some(on_stop) = &self.on_stop {
      on_stop();
    }
    true
  }

  /// The reason the run was stopped, if it was.
  pub fn reason(&self) -> Option<StopReason> {
    lock(&self.reason).clone()
  }

  /// Record that the program settled; returns false if it had already
  /// been stopped (the stop then decides the outcome).
  pub fn settle(&self) -> bool {
    let slot = lock(&self.reason);
    if slot.is_some() {
      return false;
    }
    self.settled.store(true, Ordering::SeqCst);
    true
  }

  /// Whether the program settled.
  pub fn settled(&self) -> bool {
    self.settled.load(Ordering::SeqCst)
  }

  /// Attach the isolate that runs the program (a stop that came earlier
  /// terminates it at once); `None` detaches it when the run ends, before
  /// the isolate is disposed.
  pub fn attach_isolate(&self, isolate: Option<AttachedIsolate>) {
    let mut slot = lock(&self.isolate);
    *slot = isolate;
    if let Some(isolate) = slot.as_ref() {
      if lock(&self.reason).is_some() {
        isolate.handle.terminate_execution();
      }
    }
  }

  /// What the attached isolate's compilers hold in zones now, and what
  /// they may hold (`compiler_zones.rs`), where the host can read them.
  pub fn zones(&self) -> Option<(usize, usize)> {
    lock(&self.isolate).as_ref()?.zones.as_ref().map(|zones| (zones.meter.bytes(), zones.stop_at))
  }

  /// Resolves once the run has been stopped.
  pub async fn stopped(&self) {
    loop {
      let notified = self.wake.notified();
      if self.reason().is_some() {
        return;
      }
      notified.await;
    }
  }
}
