//! The budget watchdog: one thread per isolate host that enforces each live
//! run's wall-clock ceiling and CPU budget from OUTSIDE the isolate, so a
//! synchronous `for (;;) {}` is stopped as surely as a slow await. What a
//! run has used is its [`RunBudget`]'s to say; the runs are the host's
//! live runs (`live_runs.rs`); this thread only reads them, and stops a
//! run once.
//!
//! The watchdog sleeps exactly until the earliest moment any budget could
//! run out (a thread's CPU clock cannot advance faster than the wall clock),
//! so it costs nothing while runs are idle and overshoots a budget only by
//! scheduling noise.
//!
//! [`RunBudget`]: crate::budget::RunBudget

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::budget::Phase;
use crate::live_runs::LiveRuns;
use crate::lock::lock;
use dsh_protocol::failure::StopReason;

struct Shared {
  /// Set when the watchdog is to stop.
  shutdown: Mutex<bool>,
  changed: Condvar,
  runs: Arc<LiveRuns>,
}

/// The watchdog thread.
pub struct Watchdog {
  shared: Arc<Shared>,
  thread: Mutex<Option<JoinHandle<()>>>,
}

impl Watchdog {
  /// Watch the live runs of `runs`, each from its registration until it
  /// ends or the watchdog stops it.
  pub fn start(runs: Arc<LiveRuns>) -> std::io::Result<Watchdog> {
    let shared = Arc::new(Shared { shutdown: Mutex::new(false), changed: Condvar::new(), runs });
    let thread = dsh_named_thread::spawn("dsh-v8-watchdog", {
      let shared = shared.clone();
      move || watch_loop(&shared)
    })?;
    Ok(Watchdog { shared, thread: Mutex::new(Some(thread)) })
  }

  /// A run was registered: its wall ceiling may come before the
  /// watchdog's next look, which it must then bring forward. A meter that
  /// starts while the watchdog sleeps needs no wake-up: no sleep is longer
  /// than the CPU left to any watched run, which a meter started later
  /// cannot spend sooner.
  pub fn run_registered(&self) {
    // Under the lock the watchdog holds from its look at the runs until it
    // sleeps: a run registered after that look is announced to the sleep.
    let _shutdown = lock(&self.shared.shutdown);
    self.shared.changed.notify_one();
  }

  /// Stop the thread and wait for it.
  pub fn shutdown(&self) {
    *lock(&self.shared.shutdown) = true;
    self.shared.changed.notify_one();
    if let Some(thread) = lock(&self.thread).take() {
      let _ = thread.join();
    }
  }
}

/// How often a CPU meter is re-read at most, when it is far from its budget
/// the sleep is longer; this is the floor that bounds overshoot.
const MIN_TICK: Duration = Duration::from_micros(500);
/// The longest sleep with nothing to watch.
const IDLE_TICK: Duration = Duration::from_secs(3600);

fn watch_loop(shared: &Shared) {
  let mut shutdown = lock(&shared.shutdown);
  loop {
    if *shutdown {
      return;
    }
    let now = Instant::now();
    let mut next = IDLE_TICK;
    // Read outside the table's lock: a CPU clock is a system call per run.
    for run in shared.runs.snapshot() {
      let budget = run.budget();
      if !run.watched() || budget.phase() == Phase::Ended {
        continue;
      }
      if now >= budget.wall_deadline() {
        run.unwatch();
        run.control().stop(StopReason::WallCeiling);
        continue;
      }
      next = next.min(budget.wall_deadline() - now);
      // A run not metered yet (queued, starting) has its whole budget left,
      // and it cannot be spent sooner than that much wall time from now.
      match budget.cpu_left() {
        None => {
          run.unwatch();
          run.control().stop(StopReason::ComputeBudget);
        }
        Some(left) => next = next.min(left.max(MIN_TICK)),
      }
    }
    shutdown = match shared.changed.wait_timeout(shutdown, next) {
      Ok((guard, _)) => guard,
      Err(poisoned) => poisoned.into_inner().0,
    };
  }
}
