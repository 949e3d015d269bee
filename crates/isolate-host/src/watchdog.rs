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
//! A stop terminates the isolate's JS, which V8 honours at its next stack
//! check; some work has none for as long as it lasts: compiling a source
//! of megabytes (`new Function`, `eval`: its time grows with the source
//! and the depth of its scopes, and a 1.6 MB source took 28 s here), one
//! call of a built-in over a huge input, or the TypeScript strip before
//! the program starts (swc's time grows exponentially with some
//! nestings). A stopped run (by any thread: a budget here, an abort or
//! disposal on the channel, the run's own caps) that its thread still
//! computes for [`UNSTOPPABLE_AFTER`] of its CPU ends the host: no other
//! way frees the thread. The watchdog looks for one every [`LIVE_TICK`]
//! while a run is live, not on the budgets' schedule, which a stop by
//! another thread does not wake and which may be as long as a run's whole
//! budget (a run stopped then would finish its compile first). Before it ends,
//! the host names the run in its journal with the failure its stop would
//! have settled it with ([`RunEvents::unstoppable`]): the harness settles
//! the run so (a run it stopped itself, aborted or disposed of, as it
//! stopped it) instead of executing it again to find out; the runs beside
//! it are carried on by its rules for any host's death.
//!
//! In the same look the watchdog reads what each run's compilers hold in
//! zones outside the heap (`compiler_zones.rs`): past the run's allowance (its external-memory cap, its
//! program's source and a room for V8's own compiles) it stops the run at
//! that cap; a stopped run whose zones still grow by the room past it is
//! in a compile its stop waits for (a regular expression or a source of
//! megabytes), and ends the host as above.
//!
//! [`RunBudget`]: crate::budget::RunBudget
//! [`RunEvents::unstoppable`]: crate::run::RunEvents::unstoppable

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::budget::Phase;
use crate::compiler_zones::{zone_verdict, ZoneVerdict};
use crate::config::RuntimeConfig;
use crate::live_runs::{LiveRun, LiveRuns};
use crate::lock::lock;
use crate::run::RunEvents;
use crate::time_left::left_of;
use dsh_protocol::failure::{failure, StopReason};

/// What other threads tell the watchdog, under its lock.
#[derive(Default)]
struct Signals {
  /// The watchdog is to stop.
  shutdown: bool,
  /// A run was registered since the watchdog last looked at the budgets.
  registered: bool,
}

struct Shared {
  signals: Mutex<Signals>,
  changed: Condvar,
  runs: Arc<LiveRuns>,
  /// Where an unstoppable run is named before the host ends.
  events: Arc<dyn RunEvents>,
  /// For the failure an unstoppable run's stop makes (its numbers).
  config: RuntimeConfig,
}

/// The watchdog thread.
pub struct Watchdog {
  shared: Arc<Shared>,
  thread: Mutex<Option<JoinHandle<()>>>,
}

impl Watchdog {
  /// Watch the live runs of `runs`, each from its registration until it
  /// ends or the watchdog stops it.
  pub fn start(runs: Arc<LiveRuns>, events: Arc<dyn RunEvents>, config: &RuntimeConfig) -> std::io::Result<Watchdog> {
    let shared = Arc::new(Shared {
      signals: Mutex::new(Signals::default()),
      changed: Condvar::new(),
      runs,
      events,
      config: config.clone(),
    });
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
    // sleeps: a run registered after that look is announced to the sleep,
    // and the flag says so whatever the wait reports.
    lock(&self.shared.signals).registered = true;
    self.shared.changed.notify_one();
  }

  /// Stop the thread and wait for it.
  pub fn shutdown(&self) {
    lock(&self.shared.signals).shutdown = true;
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
/// The CPU a stopped run may still spend on its thread before the host is
/// ended to stop it (see the module doc): far past what a stop takes
/// anywhere V8 checks for it (a few ms; `node bench/overshoot.mjs`, which
/// also finds the built-in calls 12_interruptible.js leaves alone running
/// under a second past one: `toUpperCase` of megabytes), well short of a
/// compile's minutes.
pub const UNSTOPPABLE_AFTER: Duration = Duration::from_secs(2);
/// How often the live runs are looked at for what a stop does not reach
/// ([`watch_live`]): a compile that grows its zones (~0.5 GB/s here for a
/// regular expression) overshoots their bound by what it makes in this
/// long; a stopped run is seen computing on within it. A look is a lock of
/// the run table, atomic reads, and a CPU clock read for a stopped run
/// only; the budgets are looked at on their own schedule.
const LIVE_TICK: Duration = Duration::from_millis(10);

fn watch_loop(shared: &Shared) {
  let mut signals = lock(&shared.signals);
  let mut budgets_due = Instant::now();
  loop {
    if signals.shutdown {
      return;
    }
    if std::mem::take(&mut signals.registered) {
      budgets_due = Instant::now();
    }
    let live_next = watch_live(shared);
    let now = Instant::now();
    if now >= budgets_due {
      budgets_due = now + watch_budgets(shared, now);
    }
    let sleep = budgets_due.saturating_duration_since(Instant::now()).min(live_next);
    signals = match shared.changed.wait_timeout(signals, sleep) {
      Ok((guard, _)) => guard,
      Err(poisoned) => poisoned.into_inner().0,
    };
  }
}

/// Look at every live run's budgets; returns how soon to look again.
fn watch_budgets(shared: &Shared, now: Instant) -> Duration {
  let mut next = IDLE_TICK;
  // Read outside the table's lock: a CPU clock is a system call per run.
  for run in shared.runs.snapshot() {
    let budget = run.budget();
    if budget.phase() == Phase::Ended {
      continue;
    }
    if !run.watched() {
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
  next
}

/// Look at every live run that may be past what a stop reaches: a stopped
/// run that goes on computing (its CPU since the watchdog first saw it
/// stopped), and every run's compiler zones (where the host could read
/// them). Returns how soon to look again: [`LIVE_TICK`] while any run is
/// live, since nothing wakes the watchdog when a run starts computing,
/// computes again after a tool's answer, or is stopped by another thread
/// (each would cost a wake-up on the run's path), and the budgets' own
/// schedule may be as long as a run's whole budget.
fn watch_live(shared: &Shared) -> Duration {
  let mut next = IDLE_TICK;
  for run in shared.runs.snapshot() {
    let budget = run.budget();
    if budget.phase() == Phase::Ended {
      continue;
    }
    next = LIVE_TICK;
    let control = run.control();
    let stop = control.reason();
    // Whatever its phase says: a thread that waits spends no CPU, so only
    // one that computes can pass the mark.
    if let (Some(stop), Some(now)) = (stop.as_ref(), budget.metered_now()) {
      let past_stop = now.saturating_sub(run.cpu_at_stop(now));
      if left_of(UNSTOPPABLE_AFTER, past_stop).is_none() {
        end_host_for(
          shared,
          &run,
          stop,
          format_args!(
            "a run went on computing for {} ms of CPU after it was stopped (V8 cannot interrupt a compile, nor some single built-in calls, nor the TypeScript strip)",
            UNSTOPPABLE_AFTER.as_millis()
          ),
        )
      }
    }
    // None where the host could not locate them.
    let Some((zones, stop_at)) = control.zones() else { continue };
    match (zone_verdict(zones, stop_at, stop.is_some()), stop) {
      (ZoneVerdict::Within, _) => {}
      (ZoneVerdict::Stop, _) | (ZoneVerdict::EndHost, None) => {
        control.stop(StopReason::ExternalMemory);
      }
      (ZoneVerdict::EndHost, Some(stop)) => end_host_for(
        shared,
        &run,
        &stop,
        format_args!(
          "a run's compile held {} MiB outside the heap after it was stopped (V8 cannot interrupt a compile)",
          zones >> 20
        ),
      ),
    }
  }
  next
}

/// A stopped run whose thread cannot be freed (see the module doc): name
/// it in the journal with the failure its stop makes, then end the host,
/// saying `why` on stderr, whose `dsh-isolate-host:` line the harness
/// takes as how the host ended.
fn end_host_for(shared: &Shared, run: &LiveRun, stop: &StopReason, why: std::fmt::Arguments) -> ! {
  let (kind, message) = failure(stop, &shared.config);
  shared.events.unstoppable(run.run_id(), kind, &message);
  eprintln!("dsh-isolate-host: {why}, so its host was ended");
  // SAFETY: _exit ends the process without running destructors or atexit
  // handlers, which is what is wanted with V8 threads still running (one
  // of them inside V8 for as long as the compile lasts).
  unsafe { libc::_exit(3) }
}
