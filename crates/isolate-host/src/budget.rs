//! One run's budget, in one place: its wall-clock deadline, its CPU meter,
//! and the phase the run is in (queued, computing, waiting, ended), which is
//! what both the watchdog and the scheduler need to know about it.
//!
//! Who moves it, and when:
//! - `run()` creates it at submission ([`RunBudget::new`]): the wall ceiling
//!   counts from there, queueing included. Phase `Queued`.
//! - The scheduler admits the run ([`RunBudget::admit`]): phase `Computing`
//!   (starting counts as computing: it is about to use a CPU).
//! - The run's own thread starts the CPU meter as it takes the program up,
//!   before its types are stripped ([`RunBudget::meter_this_thread`]); the
//!   returned [`Metering`] guard ends the meter when dropped, on every path
//!   out of the run.
//! - While metered, the thread's tokio park hooks ([`before_park`],
//!   [`after_unpark`]) move the run between `Computing` and `Waiting` and
//!   credit the CPU that parking itself costs; waits for the host that spin
//!   instead of parking go through [`uncharged`]. Nothing of the program runs
//!   during either, so a credit never covers program work.
//! - The scheduler ends it ([`RunBudget::end`]) once the output exists, on
//!   every path (run, reaped while queued, substrate failure): phase `Ended`.
//!
//! A re-executed run (its host died; `dsh_protocol::history`) starts
//! charged with what it had spent by the end of its history
//! ([`RunBudget::carry`]), and is not charged again for making its history
//! again: until its thread says the history is made ([`RunBudget::end_replay`]),
//! it is charged what it carried or what the replay took, whichever is more
//! (so a replay that runs away is still stopped at `computeMs`); from then
//! on, what it carried plus what it spends live.
//!
//! CPU is the run's thread's own CPU clock. Each run has a thread of its own
//! while it is in flight (see `scheduler.rs`), so the clock counts this run's
//! work and nothing else: another run's computation is never charged here.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::control::RunControl;
use crate::time_left::left_of;

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

/// What a run is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
  /// Submitted, not admitted yet.
  Queued = 0,
  /// Admitted and using (or about to use) a CPU: starting, or running JS.
  Computing = 1,
  /// Its thread is parked: waiting on binding calls or timers.
  Waiting = 2,
  /// Its output exists.
  Ended = 3,
}

impl Phase {
  fn from_u8(value: u8) -> Phase {
    match value {
      0 => Phase::Queued,
      1 => Phase::Computing,
      2 => Phase::Waiting,
      _ => Phase::Ended,
    }
  }
}

/// Told when a run starts or stops computing (the scheduler's admission
/// depends on how many runs compute). Called on the run's own thread, from
/// tokio's park hooks: it must be cheap and must not run JavaScript.
pub trait PhaseObserver: Send + Sync {
  fn started_computing(&self);
  fn stopped_computing(&self);
}

/// Monotonic nanoseconds since the first use, for phase timestamps.
fn now_ns() -> u64 {
  static EPOCH: OnceLock<Instant> = OnceLock::new();
  EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

struct CpuMeter {
  clock: CpuClock,
  start: Duration,
}

/// Sentinel of [`RunBudget::final_cpu_ns`]: the meter is still running.
const METER_LIVE: u64 = u64::MAX;

/// Sentinel of [`RunBudget::replay_ended_ns`]: the run is making its
/// history again.
const REPLAYING: u64 = u64::MAX;

/// One run's budget (see the module doc for who moves it).
pub struct RunBudget {
  control: Arc<RunControl>,
  compute: Duration,
  wall_deadline: Instant,
  observer: Arc<dyn PhaseObserver>,
  phase: AtomicU8,
  /// When the current phase began ([`now_ns`]).
  phase_since_ns: AtomicU64,
  meter: OnceLock<CpuMeter>,
  /// CPU time (ns) the run's thread spent waiting (spinning for a host
  /// reply, parking): not charged.
  waiting_cpu_ns: AtomicU64,
  /// The CPU charged when the meter ended, or [`METER_LIVE`].
  final_cpu_ns: AtomicU64,
  /// CPU (ns) an earlier execution had spent by the end of the run's
  /// history (0 for a first execution).
  carried_ns: AtomicU64,
  /// The meter's reading (ns) when the history was made again, or
  /// [`REPLAYING`] while it is being made (0 for a first execution).
  replay_ended_ns: AtomicU64,
}

impl RunBudget {
  /// The budget of a run submitted now: `compute` of CPU, `wall` from now.
  pub fn new(control: Arc<RunControl>, compute: Duration, wall: Duration, observer: Arc<dyn PhaseObserver>) -> Self {
    RunBudget {
      control,
      compute,
      wall_deadline: Instant::now() + wall,
      observer,
      phase: AtomicU8::new(Phase::Queued as u8),
      phase_since_ns: AtomicU64::new(now_ns()),
      meter: OnceLock::new(),
      waiting_cpu_ns: AtomicU64::new(0),
      final_cpu_ns: AtomicU64::new(METER_LIVE),
      carried_ns: AtomicU64::new(0),
      replay_ended_ns: AtomicU64::new(0),
    }
  }

  /// A re-execution: `carried` was spent before, and the run is making its
  /// history again until [`RunBudget::end_replay`]. Called before the run
  /// is registered with the watchdog, which sleeps no longer than the
  /// budget it saw left.
  pub fn carry(&self, carried: Duration) {
    self.carried_ns.store(carried.as_nanos().min(u128::from(REPLAYING - 1)) as u64, Ordering::Relaxed);
    self.replay_ended_ns.store(REPLAYING, Ordering::Release);
  }

  /// The run has made its history again: what it spends from now on is
  /// charged on top of what it carried.
  pub fn end_replay(&self) {
    if self.replay_ended_ns.load(Ordering::Acquire) == REPLAYING {
      let metered = self.metered().as_nanos().min(u128::from(REPLAYING - 1)) as u64;
      self.replay_ended_ns.store(metered, Ordering::Release);
    }
  }

  /// The run's stop switch.
  pub fn control(&self) -> &Arc<RunControl> {
    &self.control
  }

  pub fn wall_deadline(&self) -> Instant {
    self.wall_deadline
  }

  pub fn phase(&self) -> Phase {
    Phase::from_u8(self.phase.load(Ordering::Acquire))
  }

  /// How long the run has been computing without a pause, if it computes.
  pub fn computing_for(&self) -> Option<Duration> {
    if self.phase() != Phase::Computing {
      return None;
    }
    Some(Duration::from_nanos(now_ns().saturating_sub(self.phase_since_ns.load(Ordering::Acquire))))
  }

  /// Move to `next`, telling the observer when computing starts or stops.
  fn enter(&self, next: Phase) {
    self.phase_since_ns.store(now_ns(), Ordering::Release);
    let previous = Phase::from_u8(self.phase.swap(next as u8, Ordering::AcqRel));
    match (previous == Phase::Computing, next == Phase::Computing) {
      (false, true) => self.observer.started_computing(),
      (true, false) => self.observer.stopped_computing(),
      _ => {}
    }
  }

  /// The scheduler admitted the run.
  pub fn admit(&self) {
    self.enter(Phase::Computing);
  }

  /// The run's output exists: nothing of it runs any more.
  pub fn end(&self) {
    self.enter(Phase::Ended);
  }

  /// Start charging the calling thread's CPU time to this run, from now
  /// until the returned guard is dropped.
  pub fn meter_this_thread(self: &Arc<Self>) -> Metering {
    if let Some(clock) = CpuClock::current_thread() {
      if let Some(start) = clock.now() {
        let _ = self.meter.set(CpuMeter { clock, start });
      }
    }
    THREAD_METER.with(|slot| *slot.borrow_mut() = ThreadMeter { budget: Some(self.clone()), parked_at: None });
    Metering(self.clone())
  }

  /// CPU time charged to the run so far (its thread's CPU while metered,
  /// less the time spent waiting).
  pub fn cpu_used(&self) -> Duration {
    let frozen = self.final_cpu_ns.load(Ordering::Acquire);
    if frozen != METER_LIVE {
      return Duration::from_nanos(frozen);
    }
    let metered = self.metered();
    let carried = Duration::from_nanos(self.carried_ns.load(Ordering::Relaxed));
    match self.replay_ended_ns.load(Ordering::Acquire) {
      REPLAYING => carried.max(metered),
      ended => carried + metered.saturating_sub(Duration::from_nanos(ended)),
    }
  }

  /// The CPU its thread has spent on the run (less the time spent
  /// waiting) while the meter runs: none before it starts or once it
  /// ended. Unlike [`RunBudget::cpu_used`], it moves while a re-execution
  /// makes its history again.
  pub fn metered_now(&self) -> Option<Duration> {
    self.meter.get()?;
    (self.final_cpu_ns.load(Ordering::Acquire) == METER_LIVE).then(|| self.metered())
  }

  /// The thread's CPU since the meter started, less the time spent waiting.
  fn metered(&self) -> Duration {
    let Some(meter) = self.meter.get() else { return Duration::ZERO };
    let waiting = Duration::from_nanos(self.waiting_cpu_ns.load(Ordering::Relaxed));
    meter.clock.now().map_or(Duration::ZERO, |now| now.saturating_sub(meter.start).saturating_sub(waiting))
  }

  /// Whether the CPU budget is spent, and otherwise how much is left.
  pub fn cpu_left(&self) -> Option<Duration> {
    left_of(self.compute, self.cpu_used())
  }

  fn credit(&self, cpu: Duration) {
    self.waiting_cpu_ns.fetch_add(cpu.as_nanos() as u64, Ordering::Relaxed);
  }
}

/// The CPU meter of a run on its thread; dropping it freezes what was
/// charged and detaches the thread's park hooks from the run.
pub struct Metering(Arc<RunBudget>);

impl Drop for Metering {
  fn drop(&mut self) {
    let used = self.0.cpu_used();
    self.0.final_cpu_ns.store(used.as_nanos().min(u128::from(METER_LIVE - 1)) as u64, Ordering::Release);
    THREAD_METER.with(|slot| *slot.borrow_mut() = ThreadMeter::default());
  }
}

/// The run metered on this thread, and where its current park began.
#[derive(Default)]
struct ThreadMeter {
  budget: Option<Arc<RunBudget>>,
  parked_at: Option<Duration>,
}

impl ThreadMeter {
  fn cpu_now(&self) -> Option<Duration> {
    self.budget.as_ref().and_then(|budget| budget.meter.get()).and_then(|meter| meter.clock.now())
  }

  fn credit_since(&self, since: Duration) {
    if let (Some(now), Some(budget)) = (self.cpu_now(), self.budget.as_ref()) {
      budget.credit(now.saturating_sub(since));
    }
  }
}

thread_local! {
  static THREAD_METER: RefCell<ThreadMeter> = RefCell::default();
}

/// Run `wait`, a wait for another thread that runs no program code,
/// without charging its CPU time to the run metered on this thread.
pub fn uncharged<T>(wait: impl FnOnce() -> T) -> T {
  let since = THREAD_METER.with(|meter| meter.borrow().cpu_now());
  let result = wait();
  if let Some(since) = since {
    THREAD_METER.with(|meter| meter.borrow().credit_since(since));
  }
  result
}

/// The run thread's tokio runtime is about to park (`on_thread_park`): the
/// run waits from now, and the CPU the park costs is credited back.
pub fn before_park() {
  THREAD_METER.with(|meter| {
    let mut meter = meter.borrow_mut();
    meter.parked_at = meter.cpu_now();
    if let Some(budget) = meter.budget.as_ref() {
      budget.enter(Phase::Waiting);
    }
  });
}

/// The run thread's tokio runtime has unparked (`on_thread_unpark`).
pub fn after_unpark() {
  THREAD_METER.with(|meter| {
    let mut meter = meter.borrow_mut();
    if let Some(parked_at) = meter.parked_at.take() {
      meter.credit_since(parked_at);
    }
    if let Some(budget) = meter.budget.as_ref() {
      budget.enter(Phase::Computing);
    }
  });
}

/// Spend `cpu` of the calling thread's CPU time (the tests' stand-in for
/// work, or for a wait that spins).
#[cfg(test)]
pub(crate) fn burn(cpu: Duration) {
  let clock = CpuClock::current_thread().expect("a thread CPU clock");
  let start = clock.now().expect("the thread's CPU time");
  let mut x = 0u64;
  while clock.now().expect("the thread's CPU time") - start < cpu {
    x = std::hint::black_box(x.wrapping_add(1));
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::sync::atomic::AtomicIsize;

  /// Counts runs computing, as the scheduler's observer does.
  #[derive(Default)]
  struct Counter(AtomicIsize);

  impl PhaseObserver for Counter {
    fn started_computing(&self) {
      self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn stopped_computing(&self) {
      self.0.fetch_sub(1, Ordering::SeqCst);
    }
  }

  fn budget(counter: &Arc<Counter>, compute: Duration) -> Arc<RunBudget> {
    let control = Arc::new(RunControl::new(None));
    Arc::new(RunBudget::new(control, compute, Duration::from_secs(60), counter.clone()))
  }

  #[test]
  fn the_observer_sees_every_start_and_stop_of_computing_and_nothing_else() {
    let counter = Arc::new(Counter::default());
    let run = budget(&counter, Duration::from_secs(1));
    assert_eq!(run.phase(), Phase::Queued);
    assert_eq!(run.computing_for(), None);
    run.admit();
    assert_eq!((run.phase(), counter.0.load(Ordering::SeqCst)), (Phase::Computing, 1));
    assert!(run.computing_for().is_some());
    let metering = run.meter_this_thread();
    before_park();
    assert_eq!((run.phase(), counter.0.load(Ordering::SeqCst)), (Phase::Waiting, 0));
    after_unpark();
    assert_eq!((run.phase(), counter.0.load(Ordering::SeqCst)), (Phase::Computing, 1));
    drop(metering);
    // Park hooks after the meter ended belong to no run.
    before_park();
    assert_eq!(run.phase(), Phase::Computing);
    after_unpark();
    run.end();
    assert_eq!((run.phase(), counter.0.load(Ordering::SeqCst)), (Phase::Ended, 0));

    // A run ended while still queued never computed.
    let queued = budget(&counter, Duration::from_secs(1));
    queued.end();
    assert_eq!((queued.phase(), counter.0.load(Ordering::SeqCst)), (Phase::Ended, 0));
  }

  #[test]
  fn waiting_is_credited_and_work_is_charged_and_the_meter_freezes_at_its_end() {
    let counter = Arc::new(Counter::default());
    let run = budget(&counter, Duration::from_millis(40));
    run.admit();
    let metering = run.meter_this_thread();
    // CPU burned inside an uncharged wait is credited in full.
    uncharged(|| burn(Duration::from_millis(30)));
    assert!(run.cpu_used() < Duration::from_millis(10), "charged {:?}", run.cpu_used());
    assert!(run.cpu_left().is_some());
    // Work is charged: past the budget nothing is left.
    burn(Duration::from_millis(45));
    assert!(run.cpu_used() >= Duration::from_millis(40));
    assert_eq!(run.cpu_left(), None);
    drop(metering);
    let frozen = run.cpu_used();
    burn(Duration::from_millis(5));
    assert_eq!(run.cpu_used(), frozen);
  }

  /// A re-execution starts charged with what it carried; making its history
  /// again is not charged on top of it, unless it takes more than that (a
  /// runaway replay is still stopped); what it spends after is.
  #[test]
  fn a_reexecution_is_charged_once_for_what_it_did_before() {
    let counter = Arc::new(Counter::default());
    let run = budget(&counter, Duration::from_millis(100));
    run.carry(Duration::from_millis(50));
    run.admit();
    let metering = run.meter_this_thread();
    assert_eq!(run.cpu_used(), Duration::from_millis(50));
    burn(Duration::from_millis(20));
    assert_eq!(run.cpu_used(), Duration::from_millis(50), "the replay is not charged");
    run.end_replay();
    burn(Duration::from_millis(20));
    let used = run.cpu_used();
    assert!(used >= Duration::from_millis(70) && used < Duration::from_millis(85), "charged {used:?}");
    drop(metering);

    let runaway = budget(&counter, Duration::from_millis(40));
    runaway.carry(Duration::from_millis(10));
    runaway.admit();
    let metering = runaway.meter_this_thread();
    burn(Duration::from_millis(45));
    assert_eq!(runaway.cpu_left(), None, "a replay past the budget is stopped");
    drop(metering);
  }

  #[test]
  fn another_threads_work_is_not_charged() {
    let counter = Arc::new(Counter::default());
    let run = budget(&counter, Duration::from_secs(1));
    run.admit();
    let metering = run.meter_this_thread();
    std::thread::spawn(|| burn(Duration::from_millis(50))).join().expect("the other thread");
    assert!(run.cpu_used() < Duration::from_millis(25), "charged {:?}", run.cpu_used());
    drop(metering);
  }
}
