//! The budget watchdog: one thread per runtime that enforces each live
//! run's wall-clock ceiling and CPU budget from OUTSIDE the isolate, so a
//! synchronous `for (;;) {}` is stopped as surely as a slow await. What a
//! run has used is its [`RunBudget`]'s to say; this thread only reads it.
//!
//! The watchdog sleeps exactly until the earliest moment any budget could
//! run out (a thread's CPU clock cannot advance faster than the wall clock),
//! so it costs nothing while runs are idle and overshoots a budget only by
//! scheduling noise.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::budget::{Phase, RunBudget};
use crate::control::StopReason;
use crate::lock::lock;

#[derive(Default)]
struct State {
  runs: Vec<Arc<RunBudget>>,
  shutdown: bool,
}

#[derive(Default)]
struct Shared {
  state: Mutex<State>,
  changed: Condvar,
}

/// The watchdog thread and its list of watched runs.
pub struct Watchdog {
  shared: Arc<Shared>,
  thread: Mutex<Option<JoinHandle<()>>>,
}

impl Watchdog {
  pub fn start() -> std::io::Result<Watchdog> {
    let shared = Arc::new(Shared::default());
    let thread = std::thread::Builder::new().name("dsh-v8-watchdog".into()).spawn({
      let shared = shared.clone();
      move || watch_loop(&shared)
    })?;
    Ok(Watchdog { shared, thread: Mutex::new(Some(thread)) })
  }

  /// Watch a run's budget until [`Watchdog::forget`]: its wall ceiling
  /// from now on, its CPU once metered. A meter that starts while the
  /// watchdog sleeps needs no wake-up: no sleep is longer than the CPU left
  /// to any watched run, which a meter started later cannot spend sooner.
  pub fn watch(&self, budget: Arc<RunBudget>) {
    lock(&self.shared.state).runs.push(budget);
    self.shared.changed.notify_one();
  }

  /// Stop watching a run.
  pub fn forget(&self, budget: &Arc<RunBudget>) {
    lock(&self.shared.state).runs.retain(|run| !Arc::ptr_eq(run, budget));
  }

  /// Stop the thread and wait for it.
  pub fn shutdown(&self) {
    lock(&self.shared.state).shutdown = true;
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
  let mut state = lock(&shared.state);
  loop {
    if state.shutdown {
      return;
    }
    let now = Instant::now();
    let mut next = IDLE_TICK;
    state.runs.retain(|run| {
      if run.phase() == Phase::Ended {
        return false;
      }
      if now >= run.wall_deadline() {
        run.control().stop(StopReason::WallCeiling);
        return false;
      }
      next = next.min(run.wall_deadline() - now);
      // A run not metered yet (queued, starting) has its whole budget left,
      // and it cannot be spent sooner than that much wall time from now.
      match run.cpu_left() {
        None => {
          run.control().stop(StopReason::ComputeBudget);
          return false;
        }
        Some(left) => next = next.min(left.max(MIN_TICK)),
      }
      true
    });
    state = match shared.changed.wait_timeout(state, next) {
      Ok((guard, _)) => guard,
      Err(poisoned) => poisoned.into_inner().0,
    };
  }
}
