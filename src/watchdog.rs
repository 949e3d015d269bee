//! The budget watchdog: one thread per runtime that enforces each live
//! run's wall-clock ceiling and CPU budget from OUTSIDE the isolate, so a
//! synchronous `for (;;) {}` is stopped as surely as a slow await.
//!
//! CPU time is the program thread's own CPU clock
//! (`pthread_getcpuclockid`), so time spent parked waiting for a binding or
//! a timer is never charged. The watchdog sleeps exactly until the earliest
//! moment any budget could run out (a thread's CPU clock cannot advance
//! faster than the wall clock), so it costs nothing while runs are idle and
//! overshoots a budget only by scheduling noise.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::control::{lock, RunControl, StopReason};

/// A thread's CPU clock, read from any thread.
#[derive(Clone, Copy)]
pub struct CpuClock(libc::clockid_t);

impl CpuClock {
  /// The CPU clock of the calling thread.
  pub fn current_thread() -> Option<CpuClock> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: pthread_self() is always a valid thread; `clock` is a valid out pointer.
    let status = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
    (status == 0).then_some(CpuClock(clock))
  }

  /// CPU time the thread has used so far.
  pub fn now(self) -> Option<Duration> {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `time` is a valid out pointer; a stale clock id returns an error, not UB.
    let status = unsafe { libc::clock_gettime(self.0, &mut time) };
    (status == 0).then(|| Duration::new(time.tv_sec as u64, time.tv_nsec as u32))
  }
}

/// The run metered on this pool thread, and where its last park began.
#[derive(Default)]
struct WaitCredit {
  run: Option<(Arc<RunControl>, CpuClock)>,
  parked_at: Option<Duration>,
}

impl WaitCredit {
  /// This thread's CPU time now, if a run is metered here.
  fn now(&self) -> Option<Duration> {
    self.run.as_ref().and_then(|(_, clock)| clock.now())
  }

  /// Credit the thread's CPU time since `since` to the metered run.
  fn credit_since(&self, since: Duration) {
    if let (Some(now), Some((control, _))) = (self.now(), self.run.as_ref()) {
      control.waiting_cpu().fetch_add(now.saturating_sub(since).as_nanos() as u64, Ordering::Relaxed);
    }
  }
}

thread_local! {
  static WAIT_CREDIT: RefCell<WaitCredit> = RefCell::default();
}

/// Meter this pool thread's waiting for `run` (None: for nobody): CPU the
/// thread spends waiting is credited back, never charged to the budget.
/// Two kinds of waiting burn some CPU: the reply pump's brief spin for a
/// host reply ([`uncharged`]), and parking (tokio's park hooks below), whose
/// syscalls and switch back in cost ~17 us per slow binding call, which
/// 5000 such calls turned into ~85 ms of "program" CPU. Nothing of the
/// program runs during either, so the credit can never cover program work.
pub fn credit_waiting_to(run: Option<(Arc<RunControl>, CpuClock)>) {
  WAIT_CREDIT.with(|credit| *credit.borrow_mut() = WaitCredit { run, parked_at: None });
}

/// Run `wait`, a wait for another thread that runs no program code,
/// without charging its CPU time to the run metered on this thread.
pub fn uncharged<T>(wait: impl FnOnce() -> T) -> T {
  let since = WAIT_CREDIT.with(|credit| credit.borrow().now());
  let result = wait();
  if let Some(since) = since {
    WAIT_CREDIT.with(|credit| credit.borrow().credit_since(since));
  }
  result
}

/// The pool thread's runtime is about to park (tokio `on_thread_park`).
pub fn before_park() {
  WAIT_CREDIT.with(|credit| {
    let mut credit = credit.borrow_mut();
    credit.parked_at = credit.now();
  });
}

/// The pool thread's runtime has unparked (tokio `on_thread_unpark`).
pub fn after_unpark() {
  WAIT_CREDIT.with(|credit| {
    let mut credit = credit.borrow_mut();
    if let Some(parked_at) = credit.parked_at.take() {
      credit.credit_since(parked_at);
    }
  });
}

struct CpuMeter {
  clock: CpuClock,
  start: Duration,
  budget: Duration,
}

struct Watched {
  control: Arc<RunControl>,
  wall_deadline: Instant,
  cpu: Option<CpuMeter>,
}

#[derive(Default)]
struct State {
  runs: Vec<Watched>,
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

  /// Start watching a run's wall-clock ceiling (from now).
  pub fn watch(&self, control: Arc<RunControl>, ceiling: Duration) {
    let wall_deadline = Instant::now() + ceiling;
    lock(&self.shared.state).runs.push(Watched { control, wall_deadline, cpu: None });
    self.shared.changed.notify_one();
  }

  /// Start charging the calling thread's CPU time to `control`'s budget.
  pub fn meter_cpu(&self, control: &Arc<RunControl>, clock: CpuClock, budget: Duration) {
    let Some(start) = clock.now() else { return };
    let mut state = lock(&self.shared.state);
    if let Some(run) = state.runs.iter_mut().find(|run| Arc::ptr_eq(&run.control, control)) {
      run.cpu = Some(CpuMeter { clock, start, budget });
    }
    drop(state);
    self.shared.changed.notify_one();
  }

  /// Stop watching a run.
  pub fn forget(&self, control: &Arc<RunControl>) {
    lock(&self.shared.state).runs.retain(|run| !Arc::ptr_eq(&run.control, control));
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
      if now >= run.wall_deadline {
        run.control.stop(StopReason::WallCeiling);
        return false;
      }
      next = next.min(run.wall_deadline - now);
      if let Some(cpu) = &run.cpu {
        let waiting = Duration::from_nanos(run.control.waiting_cpu().load(Ordering::Relaxed));
        let used = cpu.clock.now().map_or(Duration::ZERO, |t| t.saturating_sub(cpu.start).saturating_sub(waiting));
        if used >= cpu.budget {
          run.control.stop(StopReason::ComputeBudget);
          return false;
        }
        next = next.min((cpu.budget - used).max(MIN_TICK));
      }
      true
    });
    state = match shared.changed.wait_timeout(state, next) {
      Ok((guard, _)) => guard,
      Err(poisoned) => poisoned.into_inner().0,
    };
  }
}
