//! The scheduler: which runs are in flight, and the threads they run on.
//!
//! Every run in flight has an OS thread of its own (with a current-thread
//! tokio runtime and a fresh isolate), so a run that waits on the host or a
//! timer is a thread parked in the kernel: it costs memory, never CPU, and
//! never keeps another run from starting or progressing. CPU-bound runs
//! share the cores through the kernel's scheduler, and each run's CPU
//! budget is its own thread's CPU clock (see `budget.rs`), so sharing a core
//! never charges one run for another's work.
//!
//! Admission. A submitted run waits in a bounded FIFO queue until it may
//! start: fewer than `maxConcurrentRuns` runs are in flight, and fewer than
//! `busySlots` (this host's share of two per core: `config.rs`) of them
//! are *busy*, i.e. computing and
//! for less than [`ADMISSION_QUANTUM`] without a pause. So a burst of short
//! runs costs what it did with a fixed pool (a few isolates at a time),
//! while a run that starts to wait hands its slot on at once and a run that
//! computes on and on hands it on after one quantum: neither waiting runs
//! nor long computations hold up the queue.
//!
//! Threads. Threads are made for admitted runs and retire when they find
//! nothing to do, except the reserve's (`reserve.rs`), which stay with an
//! isolate prepared from the snapshot so that a run arriving at an idle
//! runtime starts at once: this host's share of `preparedIsolates`, more
//! while runs that call no tool follow one another faster than a thread
//! makes the next isolate. The reserve does not grow with concurrency.
//!
//! Runs. Every run the scheduler takes is registered among the host's
//! live runs (`live_runs.rs`) until its output exists: admission, stats and
//! the watchdog read the runs there; the queues here hold the runs in
//! their order, each with its registration, which [`Shared::finish`]
//! drops.
//!
//! Who does what: `submit` (the channel's thread) queues and admits; a run's own
//! thread admits the next runs when it ends; the scheduler thread
//! ([`schedule_loop`]) makes threads, admits runs when a quantum runs out or
//! a run starts to wait, finishes runs stopped while queued (abort, wall
//! ceiling, disposal) at once, and joins retired threads.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::bridge::Bridge;
use crate::budget::{self, Phase, PhaseObserver, RunBudget};
use crate::config::RuntimeConfig;
use crate::control::RunControl;
use crate::isolate::PreparedIsolate;
use crate::isolate_anchor::IsolateAnchor;
use crate::ledger::{Output, OutputLedger};
use crate::live_runs::{LiveRuns, RunRegistration};
use crate::lock::lock;
use crate::memory_return::{release_v8_page_pool, return_freed_memory, IdleReturn, MemoryReturn};
use crate::program_priority;
use crate::reserve::{Reserve, Shrink};
use crate::run::{execute, finish_stopped, RunContext, RunEvents, RunJob};
use crate::time_left::left_of;
use crate::watchdog::Watchdog;
use dsh_protocol::failure::{failure, StopReason};
use dsh_protocol::frame::{ExecutionCost, HostStats};

/// How long a run may compute without a pause (a wait on the host or a
/// timer) before it stops counting against the compute slots, letting the
/// next queued run start beside it. Long enough that a burst of ordinary
/// short runs is admitted a few at a time, short enough that a queued
/// run behind CPU-bound ones starts within a scheduling quantum.
pub const ADMISSION_QUANTUM: Duration = Duration::from_millis(10);

/// How soon the scheduler looks again for retired threads still exiting.
const RETIRED_RECHECK: Duration = Duration::from_millis(100);

/// A run's thread's stack: well above V8's own stack limit (~1 MiB), so
/// deep recursion ends in a RangeError, never in a guard-page fault. Only
/// the pages a run touches are resident.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

/// A job plus what to do with its output (called on whichever thread
/// finishes the run, after the run's accounting is done).
pub struct Submission {
  pub job: RunJob,
  pub deliver: Deliver,
}

/// Takes a run's output and what its execution cost (nothing, for a run
/// stopped or failed before it ran).
pub type Deliver = Box<dyn FnOnce(Output, ExecutionCost) + Send>;

/// A submission the scheduler took, with its record among the live runs.
struct Accepted {
  submission: Submission,
  /// Dropped when the run finishes, which removes its record.
  registration: RunRegistration,
  /// Admitted: counted in flight.
  admitted: bool,
}

struct State {
  /// Submitted runs waiting for admission.
  queue: VecDeque<Accepted>,
  /// Admitted runs waiting for a thread.
  ready: VecDeque<Accepted>,
  /// Admitted, unfinished runs.
  in_flight: usize,
  /// Threads idle with a prepared isolate, waiting for a ready run.
  idle: usize,
  /// Of those, the threads whose isolate is not warmed yet
  /// ([`PreparedIsolate::warm`]): they warm it once the host is quiet.
  idle_unwarmed: usize,
  /// The scheduler thread let one of those warm its isolate; the first to
  /// see it takes it (see [`Shared::take_ready`]).
  warm_ticket: bool,
  /// A thread is warming its isolate (one at a time).
  warming: bool,
  /// Threads preparing an isolate (or warming one), which will then take a
  /// ready run.
  preparing: usize,
  /// Of those, the threads making the next isolate for the reserve right
  /// after their run ended: a run that waits for one came right after it.
  refilling: usize,
  /// Run threads alive.
  threads: usize,
  /// Threads that retired and wait to be joined.
  retired: Vec<usize>,
  next_thread: usize,
  /// How many prepared isolates to keep.
  reserve: Reserve,
  /// Since when the reserve of prepared isolates has been short.
  reserve_short_since: Option<Instant>,
  /// The reserve grew: top it up now, not after a quantum.
  reserve_grew: bool,
  shutdown: bool,
  /// CPU charged to the runs that finished.
  finished_cpu: Duration,
  isolates_disposed: u64,
  isolates_warmed: u64,
  memory: MemoryReturn,
}

/// Counts runs computing, from their budgets' phase changes; when one stops
/// computing while runs are queued, the scheduler thread is told.
#[derive(Default)]
struct Occupancy {
  computing: AtomicUsize,
  /// Mirrors `state.queue.len()`, read without the lock.
  queued: AtomicUsize,
  /// A run was stopped: look for stopped runs in the queue. An atomic,
  /// not state: stops come from threads holding other locks (the watchdog's).
  reap: AtomicBool,
  doorbell: Doorbell,
}

impl PhaseObserver for Occupancy {
  fn started_computing(&self) {
    self.computing.fetch_add(1, Ordering::AcqRel);
  }

  fn stopped_computing(&self) {
    self.computing.fetch_sub(1, Ordering::AcqRel);
    if self.queued.load(Ordering::Acquire) > 0 {
      self.doorbell.ring();
    }
  }
}

/// Wakes the scheduler thread. A separate lock from the state's: rung from
/// park hooks, which must never wait behind a long state operation.
#[derive(Default)]
struct Doorbell {
  rung: Mutex<bool>,
  bell: Condvar,
}

impl Doorbell {
  fn ring(&self) {
    *lock(&self.rung) = true;
    self.bell.notify_one();
  }

  /// Wait until rung or `timeout` passed; clears the bell.
  fn wait(&self, timeout: Option<Duration>) {
    let mut rung = lock(&self.rung);
    if !*rung {
      rung = match timeout {
        Some(timeout) => self.bell.wait_timeout(rung, timeout).map_or_else(|p| p.into_inner().0, |(g, _)| g),
        None => self.bell.wait(rung).unwrap_or_else(std::sync::PoisonError::into_inner),
      };
    }
    *rung = false;
  }
}

struct Shared {
  state: Mutex<State>,
  /// Signalled when a ready run waits for a thread, or at shutdown.
  work: Condvar,
  occupancy: Arc<Occupancy>,
  handles: Mutex<HashMap<usize, JoinHandle<()>>>,
  config: RuntimeConfig,
  runs: Arc<LiveRuns>,
  bridge: Arc<Bridge>,
  events: Arc<dyn RunEvents>,
  watchdog: Watchdog,
}

/// The scheduler of one runtime.
pub struct Scheduler {
  shared: Arc<Shared>,
  thread: Mutex<Option<JoinHandle<()>>>,
  /// Keeps an isolate alive in the host between runs (see
  /// `isolate_anchor`); dropped with the scheduler.
  _anchor: Option<IsolateAnchor>,
}

impl Scheduler {
  /// Start the scheduler of the runs registered in `runs` (the bridge's
  /// table too: it routes their replies).
  pub fn start(
    config: RuntimeConfig,
    runs: Arc<LiveRuns>,
    bridge: Arc<Bridge>,
    events: Arc<dyn RunEvents>,
  ) -> std::io::Result<Scheduler> {
    let shared = Arc::new(Shared {
      state: Mutex::new(State {
        queue: VecDeque::new(),
        ready: VecDeque::new(),
        in_flight: 0,
        idle: 0,
        idle_unwarmed: 0,
        warm_ticket: false,
        warming: false,
        preparing: 0,
        refilling: 0,
        threads: 0,
        retired: Vec::new(),
        next_thread: 0,
        reserve: Reserve::new(config.prepared_isolates, Instant::now()),
        reserve_short_since: None,
        reserve_grew: false,
        shutdown: false,
        finished_cpu: Duration::ZERO,
        isolates_disposed: 0,
        isolates_warmed: 0,
        memory: MemoryReturn::default(),
      }),
      work: Condvar::new(),
      occupancy: Arc::default(),
      handles: Mutex::default(),
      watchdog: Watchdog::start(runs.clone(), events.clone(), &config)?,
      config,
      runs,
      bridge,
      events,
    });
    let thread = dsh_named_thread::spawn("dsh-v8-scheduler", {
      let shared = shared.clone();
      move || schedule_loop(&shared)
    });
    match thread {
      Ok(thread) => {
        // The reserve, prepared from the start.
        let reserve = shared.config.prepared_isolates;
        let ids = shared.plan_threads(&mut lock(&shared.state), reserve);
        for id in ids {
          spawn_run_thread(&shared, id);
        }
        // Without an anchor (no thread to be had) the host works as
        // before, paying V8's rebuild whenever its last isolate goes.
        let anchor = IsolateAnchor::start(&shared.config).ok();
        Ok(Scheduler { shared, thread: Mutex::new(Some(thread)), _anchor: anchor })
      }
      Err(error) => {
        shared.watchdog.shutdown();
        Err(error)
      }
    }
  }

  /// The budget of a run submitted now, from this runtime's `computeMs`
  /// and the `wall` left of its `maxWallMs` (all of it, unless the run was
  /// placed here again after its first host died). Its phases are reported to the scheduler, and its
  /// stop switch tells the scheduler after every stop, so that a run
  /// stopped while still queued is finished at once.
  pub fn new_budget(&self, wall: Duration) -> Arc<RunBudget> {
    let shared = Arc::downgrade(&self.shared);
    let on_stop: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
      if let Some(shared) = shared.upgrade() {
        if shared.occupancy.queued.load(Ordering::Acquire) > 0 {
          shared.occupancy.reap.store(true, Ordering::Release);
          shared.occupancy.doorbell.ring();
        }
      }
    });
    let config = &self.shared.config;
    Arc::new(RunBudget::new(
      Arc::new(RunControl::new(Some(on_stop))),
      Duration::from_secs_f64(config.compute_ms / 1000.0),
      wall,
      self.shared.occupancy.clone(),
    ))
  }

  /// Queue a run (admitting it at once when it may start): from now until
  /// its output exists it is among the live runs. Refused (handed back,
  /// never registered) when the queue is full or the scheduler is
  /// shutting down.
  pub fn submit(&self, submission: Submission) -> Result<(), Submission> {
    let shared = &self.shared;
    let mut state = lock(&shared.state);
    if state.shutdown || state.queue.len() >= shared.config.max_queued_runs {
      return Err(submission);
    }
    let registration = shared.runs.register(submission.job.run_id, submission.job.budget.clone());
    shared.watchdog.run_registered();
    state.queue.push_back(Accepted { submission, registration, admitted: false });
    shared.admit_and_hand_on(&mut state);
    Ok(())
  }

  /// What this host is doing, for the harness's `stats()`: the run
  /// counts are taken under the scheduler's lock, which admission and
  /// finishing take too, so that they add up
  /// (`in_flight == starting + computing + waiting`).
  pub fn stats(&self) -> HostStats {
    let state = lock(&self.shared.state);
    let live = self.shared.runs.snapshot();
    let (mut computing, mut waiting, mut waiting_on_host, mut cpu) = (0usize, 0usize, 0usize, state.finished_cpu);
    for run in &live {
      match run.budget().phase() {
        Phase::Queued | Phase::Ended => {}
        Phase::Computing => computing += 1,
        Phase::Waiting => waiting += 1,
      }
      if run.mailbox().waiting_on_a_tool() {
        waiting_on_host += 1;
      }
      cpu += run.budget().cpu_used();
    }
    let starting = state.ready.len();
    let count = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
    HostStats {
      queued: count(state.queue.len()),
      in_flight: count(state.in_flight),
      starting: count(starting),
      computing: count(computing.saturating_sub(starting)),
      waiting: count(waiting),
      waiting_on_host: count(waiting_on_host),
      threads: count(state.threads),
      prepared_isolates: count(state.idle),
      cpu_ms: cpu.as_secs_f64() * 1000.0,
      isolates_disposed: state.isolates_disposed,
      isolates_warmed: state.isolates_warmed,
      memory_returns: state.memory.returns,
    }
  }

  /// Admit no more runs: queued runs stay queued until they are stopped,
  /// then finish as stopped. The first step of disposal, before the runs
  /// are stopped: a queued run admitted while the others are being
  /// stopped could otherwise start and complete before its own stop.
  pub fn close(&self) {
    lock(&self.shared.state).shutdown = true;
    self.shared.work.notify_all();
    self.shared.occupancy.doorbell.ring();
  }

  /// Stop taking runs; queued runs finish as stopped (the caller stopped
  /// them), in-flight runs finish on their threads; join every thread.
  pub fn shutdown(&self) {
    self.close();
    if let Some(thread) = lock(&self.thread).take() {
      let _ = thread.join();
    }
    let handles: Vec<_> = lock(&self.shared.handles).drain().map(|(_, handle)| handle).collect();
    for handle in handles {
      let _ = handle.join();
    }
    self.shared.watchdog.shutdown();
  }
}

impl Shared {
  /// Runs currently busy (computing for less than a quantum), and how long
  /// until the first of them stops counting.
  fn busy(&self) -> (usize, Option<Duration>) {
    let mut busy = 0;
    let mut next = None::<Duration>;
    self.runs.each(|run| {
      if let Some(for_how_long) = run.budget().computing_for() {
        if let Some(left) = left_of(ADMISSION_QUANTUM, for_how_long) {
          busy += 1;
          next = sooner(next, left);
        }
      }
    });
    (busy, next)
  }

  /// Admit what may start now, from a thread other than the scheduler's
  /// (`submit`, a run's thread at its end). Runs left queued only because
  /// every slot is busy become admissible when a quantum runs out, an event
  /// no run reports: the scheduler thread must be told to time it, or it
  /// may sleep on until some run happens to end, with the queued run
  /// waiting as long (CPU-bound runs on every slot: minutes).
  fn admit_and_hand_on(&self, state: &mut State) {
    if self.admit(state).is_some() {
      self.occupancy.doorbell.ring();
    }
  }

  /// Admit queued runs while they may start (see the module doc). Returns
  /// when the scheduler should look again if runs are still queued only
  /// because every slot is busy: only the scheduler thread calls this
  /// directly, and sleeps no longer than that; other threads go through
  /// [`Shared::admit_and_hand_on`].
  fn admit(&self, state: &mut State) -> Option<Duration> {
    let mut busy: Option<(usize, Option<Duration>)> = None;
    let mut admitted = 0;
    let mut recheck = None;
    while !state.shutdown && !state.queue.is_empty() && state.in_flight < self.config.max_concurrent_runs {
      if self.occupancy.computing.load(Ordering::Acquire) >= self.config.busy_slots {
        let (count, next) = busy.get_or_insert_with(|| self.busy());
        if *count >= self.config.busy_slots {
          recheck = *next;
          break;
        }
        *count += 1;
      }
      let Some(mut accepted) = state.queue.pop_front() else { break };
      accepted.submission.job.budget.admit();
      accepted.admitted = true;
      state.in_flight += 1;
      if state.idle + usize::from(state.warming) <= state.ready.len() {
        // No prepared isolate is free for this run (one being warmed
        // will be in a moment): it waits for one.
        let (in_flight, refilling) = (state.in_flight, state.refilling);
        state.reserve_grew |= state.reserve.run_waited(in_flight, refilling);
      }
      state.ready.push_back(accepted);
      admitted += 1;
    }
    if admitted > 0 {
      state.reserve.active(Instant::now());
      state.warm_ticket = false;
    }
    self.occupancy.queued.store(state.queue.len(), Ordering::Release);
    if state.queue.is_empty() && state.idle > state.reserve.size() {
      // Threads kept for queued runs beyond the reserve: none is coming.
      self.work.notify_all();
    }
    if admitted > 0 {
      for _ in 0..admitted.min(state.idle) {
        self.work.notify_one();
      }
      if state.ready.len() > state.idle + state.preparing || state.reserve_grew {
        self.occupancy.doorbell.ring();
      }
    }
    recheck
  }

  /// Account for a finished run and hand back its output's delivery. The
  /// accounting comes first, and the run leaves the live runs, so that a
  /// caller who sees the result sees it counted and the run gone.
  fn finish(
    &self,
    accepted: Accepted,
    output: Output,
    cost: ExecutionCost,
    state: &mut MutexGuard<'_, State>,
  ) -> Delivery {
    let Accepted { submission, registration, admitted } = accepted;
    if admitted {
      state.in_flight -= 1;
      state.reserve.active(Instant::now());
      if state.in_flight == 0 && state.queue.is_empty() && state.idle_unwarmed > 0 {
        // The host is quiet from now: the scheduler times the spell after
        // which an idle thread may warm its isolate (see `take_ready`).
        self.occupancy.doorbell.ring();
      }
    }
    let budget = &submission.job.budget;
    state.finished_cpu += budget.cpu_used();
    budget.end();
    drop(registration);
    Delivery { deliver: submission.deliver, output, cost }
  }

  /// Take stopped runs out of the queue.
  fn reap(&self, state: &mut MutexGuard<'_, State>) -> Vec<Delivery> {
    let mut stopped = Vec::new();
    let mut kept = VecDeque::with_capacity(state.queue.len());
    while let Some(accepted) = state.queue.pop_front() {
      match accepted.submission.job.budget.control().reason() {
        Some(reason) => {
          let output = finish_stopped(OutputLedger::new(self.config.max_output_bytes), &reason, &self.config);
          stopped.push(self.finish(accepted, output, ExecutionCost::default(), state));
        }
        None => kept.push_back(accepted),
      }
    }
    state.queue = kept;
    self.occupancy.queued.store(state.queue.len(), Ordering::Release);
    stopped
  }

  /// A thread about to look for work (the one calling, having prepared its
  /// isolate, or warmed it, for the reason given; `warmed`: whether its
  /// isolate is): take a ready run, or wait for one as part of the
  /// reserve, or warm its isolate first, or retire.
  ///
  /// An idle thread warms its isolate ([`PreparedIsolate::warm`]) when the
  /// scheduler thread lets it: once the host has been quiet (no run in
  /// flight or queued) for
  /// [`QUIET_BEFORE_GROWN_REFILL`](crate::reserve::QUIET_BEFORE_GROWN_REFILL),
  /// one thread at a time, and only for the reserve's base (the isolates
  /// beyond it retire after a quiet second). Warming costs about what it
  /// spares the run, so while runs follow one another it would only move
  /// that CPU onto the next run's path (trivial runs back to back ~0.2 ms
  /// slower when every isolate was warmed as it was made), where a host
  /// an agent's runs reach between model turns is quiet most of the time.
  /// One at a time, so that a run arriving meanwhile finds the other
  /// prepared isolates free; a run that finds none waits for the warming
  /// thread, as for a thread preparing. The scheduler is rung when the
  /// host turns quiet with an unwarmed thread idle (`finish`), when an
  /// unwarmed thread goes idle on a quiet host, and when a warm ends.
  fn take_ready(&self, prepared: Preparing, warmed: bool) -> NextWork {
    let mut state = lock(&self.state);
    state.stop_preparing(prepared);
    if prepared == Preparing::Warming {
      state.warming = false;
      if state.idle_unwarmed > 0 {
        // The scheduler lets the next one warm.
        self.occupancy.doorbell.ring();
      }
    }
    let (mut announced, mut nudged) = (false, false);
    loop {
      if let Some(accepted) = state.ready.pop_front() {
        if state.idle + state.preparing < state.reserve.size() {
          // The reserve is short: the scheduler tops it up if it stays so.
          self.occupancy.doorbell.ring();
        }
        return NextWork::Run(accepted);
      }
      // Beyond the reserve a thread stays only for runs still queued: it
      // takes one as soon as it is admitted, with its isolate prepared. A
      // warmed isolate is kept over an unwarmed one: while one of those is
      // idle beside it, that one retires instead (every idle thread looks
      // when the reserve shrinks).
      let beyond = state.idle >= state.reserve.size() && state.queue.is_empty();
      if state.shutdown || (beyond && (!warmed || state.idle_unwarmed == 0)) {
        return NextWork::Retire;
      }
      if beyond && !nudged {
        // Stays in the place of an unwarmed one, which must look again.
        nudged = true;
        self.work.notify_all();
      }
      let quiet = state.in_flight == 0 && state.queue.is_empty();
      if !warmed && state.warm_ticket && quiet {
        state.warm_ticket = false;
        state.warming = true;
        state.start_preparing(Preparing::Warming);
        return NextWork::Warm;
      }
      if !warmed && quiet && !announced {
        // The scheduler times the quiet spell after which it may warm.
        announced = true;
        self.occupancy.doorbell.ring();
      }
      state.idle += 1;
      state.idle_unwarmed += usize::from(!warmed);
      state = self.work.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
      state.idle -= 1;
      state.idle_unwarmed -= usize::from(!warmed);
    }
  }

  /// Whether an idle thread may warm its isolate now, or when to look
  /// again (see [`Shared::take_ready`]); `idle`: no run in flight or queued.
  fn warm_when_quiet(&self, state: &mut State, idle: bool) -> Option<Duration> {
    if !idle {
      state.warm_ticket = false;
      return None;
    }
    let warmed_idle = state.idle - state.idle_unwarmed;
    if state.shutdown
      || state.warming
      || state.warm_ticket
      || state.idle_unwarmed == 0
      || warmed_idle >= state.reserve.base()
    {
      return None;
    }
    match state.reserve.quiet_in(idle, Instant::now()) {
      Some(Duration::ZERO) => {
        state.warm_ticket = true;
        // Every idle thread looks; the first unwarmed one takes it.
        self.work.notify_all();
        None
      }
      left => left,
    }
  }

  /// A thread finished a run: account for it, admit what may start now and
  /// say why the thread should prepare another isolate (for the runs ready
  /// or queued, or to refill the reserve), or None: it should retire.
  fn run_ended(&self, accepted: Accepted, output: Output, cost: ExecutionCost) -> (Delivery, Option<Preparing>) {
    let called = accepted.registration.run().mailbox().calls_made() > 0;
    let mut state = lock(&self.state);
    let delivery = self.finish(accepted, output, cost, &mut state);
    if state.reserve.run_finished(called) == Shrink::Now {
      self.reserve_shrank(&mut state);
    }
    // Decided before admitting, so that admission counts this thread as
    // coming for the next ready run instead of asking for a new one.
    // A thread is worth keeping for any run that will need one: reusing it
    // spares a thread's start and exit, and the memory its last isolate
    // freed is still mapped for the next one.
    let coming = state.idle + state.preparing;
    let work_ahead = state.ready.len() + state.queue.len();
    let next = if work_ahead > coming {
      Some(Preparing::ForRuns)
    } else if !state.shutdown && state.reserve.refill_at_once(coming) {
      Some(Preparing::Refill)
    } else {
      None
    };
    if let Some(next) = next {
      state.start_preparing(next);
    }
    if next != Some(Preparing::ForRuns) && state.idle + state.preparing < state.reserve.size() {
      // A grown reserve is short beyond what this thread refills: the
      // scheduler makes the rest once the host is quiet.
      self.occupancy.doorbell.ring();
    }
    self.admit_and_hand_on(&mut state);
    (delivery, next)
  }

  /// The reserve is back to its base: the threads beyond it retire,
  /// dropping their isolates, and what those freed is returned with the
  /// rest once the runtime is idle.
  fn reserve_shrank(&self, state: &mut State) {
    self.work.notify_all();
    state.memory.dropped_unused();
  }

  /// Count `count` new threads as alive and preparing; returns their ids
  /// (the caller spawns them, outside the lock).
  fn plan_threads(&self, state: &mut State, count: usize) -> Vec<usize> {
    let ids: Vec<usize> = (state.next_thread..state.next_thread + count).collect();
    state.next_thread += count;
    state.preparing += count;
    state.threads += count;
    ids
  }

  fn retire(&self, thread: usize) {
    let mut state = lock(&self.state);
    state.threads -= 1;
    state.retired.push(thread);
    drop(state);
    self.occupancy.doorbell.ring();
  }
}

/// Why a thread is making an isolate: whether a run that waits for it
/// came right after the thread's last run matters to the reserve
/// (`reserve.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Preparing {
  /// A new thread's first isolate, or the next one for runs ready or
  /// queued.
  ForRuns,
  /// The next isolate of a thread whose run just ended, for the reserve.
  Refill,
  /// Warming a prepared isolate, the host being quiet (see
  /// [`Shared::take_ready`]).
  Warming,
}

/// What a thread looking for work does next ([`Shared::take_ready`]).
enum NextWork {
  /// Run this.
  Run(Accepted),
  /// Warm its prepared isolate, then look again.
  Warm,
  /// Retire, dropping its isolate.
  Retire,
}

impl State {
  fn start_preparing(&mut self, why: Preparing) {
    self.preparing += 1;
    if why == Preparing::Refill {
      self.refilling += 1;
    }
  }

  fn stop_preparing(&mut self, why: Preparing) {
    self.preparing -= 1;
    if why == Preparing::Refill {
      self.refilling -= 1;
    }
  }
}

/// An output on its way to the caller: delivered outside every lock.
struct Delivery {
  deliver: Deliver,
  output: Output,
  cost: ExecutionCost,
}

impl Delivery {
  fn deliver(self) {
    (self.deliver)(self.output, self.cost);
  }
}

/// The sooner of a pending wake-up (if any) and one `after` from now.
fn sooner(pending: Option<Duration>, after: Duration) -> Option<Duration> {
  Some(pending.map_or(after, |pending| pending.min(after)))
}

/// The scheduler thread (see the module doc).
fn schedule_loop(shared: &Arc<Shared>) {
  loop {
    let mut state = lock(&shared.state);
    let reap = shared.occupancy.reap.swap(false, Ordering::AcqRel) || state.shutdown;
    let stopped = if reap { shared.reap(&mut state) } else { Vec::new() };
    let mut recheck = shared.admit(&mut state);
    // Threads for the ready runs no thread is coming for yet, and for the
    // part of the reserve refilled at once when it has been short for a
    // quantum (runs that end soon refill it themselves; runs that wait
    // long do not), or at once when the reserve grew (runs arrive faster
    // than it refills: now). The rest of a grown reserve is made once the
    // host is quiet: made while runs follow one another, it took the CPUs
    // from those runs (see `reserve.rs`).
    let coming = state.idle + state.preparing;
    let for_ready = state.ready.len().saturating_sub(coming);
    let (at_once_short, reserve_short) = if state.shutdown {
      (0, 0)
    } else {
      let coming = coming + for_ready;
      (state.reserve.refilled_at_once().saturating_sub(coming), state.reserve.size().saturating_sub(coming))
    };
    let grew = std::mem::take(&mut state.reserve_grew);
    let mut for_reserve = 0;
    if at_once_short == 0 {
      state.reserve_short_since = None;
    } else if grew {
      for_reserve = at_once_short;
      state.reserve_short_since = None;
    } else {
      let since = *state.reserve_short_since.get_or_insert_with(Instant::now);
      match left_of(ADMISSION_QUANTUM, since.elapsed()) {
        Some(left) => recheck = sooner(recheck, left),
        None => {
          for_reserve = at_once_short;
          state.reserve_short_since = None;
        }
      }
    }
    let idle = state.in_flight == 0 && state.queue.is_empty();
    if reserve_short > at_once_short {
      match state.reserve.quiet_in(idle, Instant::now()) {
        Some(Duration::ZERO) => for_reserve = reserve_short,
        Some(left) => recheck = sooner(recheck, left),
        // Not idle: looked at again when a run ends (its thread rings).
        None => {}
      }
    }
    if let Some(left) = shared.warm_when_quiet(&mut state, idle) {
      recheck = sooner(recheck, left);
    }
    let spawn = shared.plan_threads(&mut state, for_ready + for_reserve);
    match state.reserve.when_idle(idle, Instant::now()) {
      Shrink::Nothing => {}
      Shrink::After(left) => recheck = sooner(recheck, left),
      Shrink::Now => shared.reserve_shrank(&mut state),
    }
    let memory = state.memory.when_idle(idle);
    if let IdleReturn::After(left) = memory {
      recheck = sooner(recheck, left);
    }
    let retired = std::mem::take(&mut state.retired);
    let done = state.shutdown && state.queue.is_empty() && spawn.is_empty();
    drop(state);

    for delivery in stopped {
      delivery.deliver();
    }
    if let IdleReturn::Now { v8_pool } = memory {
      if v8_pool {
        release_v8_page_pool(&shared.config);
      }
      return_freed_memory();
      lock(&shared.state).memory.returned();
    }
    for id in spawn {
      spawn_run_thread(shared, id);
    }
    // Join the retired threads that have exited; one still tearing down
    // is looked at again next time, so that this thread never waits on it.
    let mut still_exiting = Vec::new();
    for id in retired {
      let mut handles = lock(&shared.handles);
      match handles.get(&id).map(JoinHandle::is_finished) {
        Some(true) => {
          if let Some(handle) = handles.remove(&id) {
            drop(handles);
            let _ = handle.join();
          }
        }
        Some(false) => still_exiting.push(id),
        None => {}
      }
    }
    if !still_exiting.is_empty() {
      lock(&shared.state).retired.extend(still_exiting);
      recheck = sooner(recheck, RETIRED_RECHECK);
    }
    if done {
      return;
    }
    shared.occupancy.doorbell.wait(recheck);
  }
}

fn spawn_run_thread(shared: &Arc<Shared>, id: usize) {
  let thread_shared = shared.clone();
  let spawned = dsh_named_thread::spawn_with_stack(format!("dsh-v8-run-{id}"), THREAD_STACK_BYTES, move || {
    run_thread(&thread_shared, id)
  });
  match spawned {
    Ok(handle) => {
      lock(&shared.handles).insert(id, handle);
    }
    Err(error) => {
      // No thread: the ready run it was for waits for a thread that ends
      // its run, unless there is none, in which case it fails now.
      let mut state = lock(&shared.state);
      state.preparing -= 1;
      state.threads -= 1;
      let mut failed = Vec::new();
      if state.threads == 0 {
        while let Some(accepted) = state.ready.pop_front() {
          let output = substrate_failure(&shared.config, &format!("no thread could be started for the run: {error}"));
          failed.push(shared.finish(accepted, output, ExecutionCost::default(), &mut state));
        }
      }
      drop(state);
      for delivery in failed {
        delivery.deliver();
      }
    }
  }
}

/// A run thread: prepare an isolate, run what is ready, repeat while wanted.
fn run_thread(shared: &Shared, id: usize) {
  program_priority::lower_this_thread();
  let bridge = shared.bridge.clone();
  let runtime = match tokio::runtime::Builder::new_current_thread()
    .enable_time()
    // Calls the program queued in its turn leave before the thread sleeps.
    .on_thread_park(move || {
      bridge.flush();
      budget::before_park();
    })
    .on_thread_unpark(budget::after_unpark)
    .build()
  {
    Ok(runtime) => runtime,
    Err(error) => {
      // Without a runtime this thread can run nothing: fail the run it was
      // made for (if it is still there) rather than leave it waiting. (It
      // has no isolate to warm: it says it is warmed.)
      if let NextWork::Run(accepted) = shared.take_ready(Preparing::ForRuns, true) {
        let output = substrate_failure(&shared.config, &format!("the run's thread could not start: {error}"));
        let (delivery, next) = shared.run_ended(accepted, output, ExecutionCost::default());
        if let Some(next) = next {
          lock(&shared.state).stop_preparing(next);
        }
        delivery.deliver();
      }
      return shared.retire(id);
    }
  };
  let context = RunContext { config: &shared.config, bridge: &shared.bridge, events: &shared.events };
  let mut why = Preparing::ForRuns;
  loop {
    let mut prepared = {
      let _entered = runtime.enter();
      PreparedIsolate::new(&shared.config)
    };
    // An isolate that could not be made has nothing to warm.
    let mut warmed = prepared.is_err();
    let accepted = loop {
      match shared.take_ready(why, warmed) {
        NextWork::Run(accepted) => break accepted,
        NextWork::Warm => {
          if let Ok(isolate) = &mut prepared {
            let _entered = runtime.enter();
            if isolate.warm() {
              lock(&shared.state).isolates_warmed += 1;
            }
          }
          // Once, whatever came of it: an isolate warming failed in runs
          // programs as well as one never warmed.
          warmed = true;
          why = Preparing::Warming;
        }
        NextWork::Retire => {
          let _entered = runtime.enter();
          drop(prepared);
          return shared.retire(id);
        }
      }
    };
    let (output, cost, spent) = match prepared {
      Ok(isolate) => {
        let (output, cost, spent) = runtime.block_on(execute(isolate, &accepted.submission.job, &context));
        (output, cost, Some(spent))
      }
      Err(message) => (substrate_failure(&shared.config, &message), ExecutionCost::default(), None),
    };
    let (delivery, next) = shared.run_ended(accepted, output, cost);
    delivery.deliver();
    // Delivery just woke the harness's channel reader. The kernel often
    // queues it on this CPU (wake-affine), behind this thread, which is about to spend
    // ~2 ms disposing of the spent isolate and preparing the next one: the
    // harness would see the result only then. Yield once so it runs first.
    std::thread::yield_now();
    if let Some(spent) = spent {
      let disposal = {
        let _entered = runtime.enter();
        spent.dispose()
      };
      let returned = MemoryReturn::return_at_once(&disposal);
      if returned {
        return_freed_memory();
      }
      let mut state = lock(&shared.state);
      state.isolates_disposed += 1;
      state.memory.disposed(&disposal, returned);
      drop(state);
      // The scheduler returns what small runs freed, and V8's pool, once
      // all is idle.
      shared.occupancy.doorbell.ring();
    }
    match next {
      Some(next) => why = next,
      None => return shared.retire(id),
    }
  }
}

/// The output of a run whose substrate (thread runtime or isolate) could
/// not be made: `worker-exit` with `message`, through the ledger.
fn substrate_failure(config: &RuntimeConfig, message: &str) -> Output {
  let (kind, message) = failure(&StopReason::Substrate(message.to_owned()), config);
  OutputLedger::new(config.max_output_bytes).finish_failure(kind, message)
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::bindings_descriptor::BindingsDescriptor;
  use crate::ledger::Completion;
  use crate::platform;

  /// Runs here tell nobody what they do.
  struct Unobserved;

  impl RunEvents for Unobserved {
    fn started(&self, _run_id: u32) {}
    fn log(&self, _run_id: u32, _text: &[u16]) {}
    fn readings(&self, _run_id: u32, _cpu_us: f64, _readings: &dsh_protocol::readings::Readings) {}
    fn unstoppable(&self, _run_id: u32, _kind: crate::ledger::FailureKind, _message: &[u16]) {}
  }

  /// Delivers a run's completion to `send`.
  fn completion_to(send: std::sync::mpsc::Sender<Completion>) -> Deliver {
    Box::new(move |output: Output, _| {
      let _ = send.send(output.completion);
    })
  }

  fn wall() -> Duration {
    Duration::from_secs_f64(config().max_wall_ms / 1000.0)
  }

  fn config() -> RuntimeConfig {
    // No reserve: nothing else gives the scheduler thread a reason to
    // wake, so only the hand-on under test can admit the queued run.
    RuntimeConfig { max_concurrent_runs: 64, max_queued_runs: 64, prepared_isolates: 0, ..RuntimeConfig::small() }
  }

  /// A run submitted while every compute slot is taken by runs that started
  /// computing within the quantum is queued; once the quantum is over it
  /// must start, although no run pauses or ends meanwhile. The busy runs
  /// here are live runs whose budgets were admitted just now, with no
  /// thread behind them: to admission they are CPU-bound runs that have
  /// just resumed, and nothing they do can wake the scheduler.
  #[test]
  fn a_run_queued_behind_busy_slots_starts_when_the_quantum_is_over() {
    platform::ensure_initialized().expect("V8 initialises");
    let runs = Arc::new(LiveRuns::default());
    let bridge = Arc::new(Bridge::new(runs.clone()));
    let scheduler =
      Scheduler::start(config(), runs.clone(), bridge, Arc::new(Unobserved)).expect("the scheduler starts");
    let busy: Vec<Arc<RunBudget>> = (0..config().busy_slots).map(|_| scheduler.new_budget(wall())).collect();
    let registrations: Vec<RunRegistration> = busy
      .iter()
      .enumerate()
      .map(|(i, budget)| {
        budget.admit();
        runs.register(1000 + i as u32, budget.clone())
      })
      .collect();
    // The busy runs count as busy for one quantum from their (re)start: a
    // machine that stalls this thread longer than that between the restart
    // and the reading lets the run in honestly, and the attempt is made
    // again; a run let in within the quantum is the failure.
    let mut queued_run = None;
    for attempt in 0..20u32 {
      let since = Instant::now();
      for budget in &busy {
        budget.admit();
      }
      let (send, receive) = std::sync::mpsc::channel();
      let job = RunJob {
        run_id: 1 + attempt,
        seed: [0; 4],
        recorded: None,
        program: "return 6 * 7".into(),
        bindings: BindingsDescriptor::parse(r#"{"namespaces":[]}"#).expect("an empty descriptor"),
        budget: scheduler.new_budget(wall()),
      };
      assert!(scheduler.submit(Submission { job, deliver: completion_to(send) }).is_ok());
      let queued = scheduler.stats().queued;
      if queued == 1 {
        queued_run = Some(receive);
        break;
      }
      assert!(since.elapsed() >= ADMISSION_QUANTUM, "every slot is busy: the run must wait for the quantum");
    }
    let receive = queued_run.expect("the machine let every attempt's quantum pass before the run was queued");
    // The hang net is far above a quantum; a lost hand-on never ends.
    match receive.recv_timeout(Duration::from_secs(60)) {
      Ok(Completion::Value(value)) => assert_eq!(value, "42"),
      Ok(_) => panic!("the run failed"),
      Err(_) => panic!("the queued run never started: {} queued", scheduler.stats().queued),
    }
    for budget in &busy {
      budget.end();
    }
    drop(registrations);
    scheduler.shutdown();
  }

  /// A scheduler of the test config with a reserve of `prepared` isolates,
  /// its runs observed by nobody.
  fn with_reserve(prepared: usize) -> Scheduler {
    platform::ensure_initialized().expect("V8 initialises");
    let runs = Arc::new(LiveRuns::default());
    let bridge = Arc::new(Bridge::new(runs.clone()));
    let config = RuntimeConfig { prepared_isolates: prepared, ..config() };
    Scheduler::start(config, runs, bridge, Arc::new(Unobserved)).expect("the scheduler starts")
  }

  /// Waits until `done` holds, looking every millisecond; the net is far
  /// above what any wait here takes, and a miss fails the test.
  fn until(what: &str, done: impl Fn() -> bool) {
    let net = Instant::now();
    while !done() {
      assert!(net.elapsed() < Duration::from_secs(60), "never: {what}");
      std::thread::sleep(Duration::from_millis(1));
    }
  }

  /// A quiet host warms each prepared isolate once, one at a time, and a
  /// run takes a warmed isolate as it would a fresh one: what warming ran
  /// (the encoder, the console's rendering) gives the run's own results,
  /// and the realm's last match is the empty one, not warming's. The
  /// isolate made after the run is warmed in turn, once the host is quiet
  /// again.
  #[test]
  fn a_quiet_host_warms_each_prepared_isolate_once() {
    let scheduler = with_reserve(2);
    until("the reserve is prepared and warmed", || {
      let stats = scheduler.stats();
      stats.prepared_isolates == 2 && stats.isolates_warmed == 2
    });
    let (send, receive) = std::sync::mpsc::channel();
    let job = RunJob {
      run_id: 1,
      seed: [0; 4],
      recorded: None,
      program: "const last = [RegExp.input, RegExp.lastMatch, RegExp.leftContext]\n\
                console.log({ seen: 40 }, [1, 'x'])\n\
                return { last, a: [1, 'x', null], b: { c: 0.5 } }"
        .into(),
      bindings: BindingsDescriptor::parse(r#"{"namespaces":[]}"#).expect("an empty descriptor"),
      budget: scheduler.new_budget(wall()),
    };
    let deliver: Deliver = Box::new(move |output: Output, _| {
      let _ = send.send(output);
    });
    assert!(scheduler.submit(Submission { job, deliver }).is_ok());
    let output = receive.recv_timeout(Duration::from_secs(60)).expect("the run ends");
    let logs: Vec<String> = output.logs.iter().map(String::from_utf16_lossy).collect();
    assert_eq!(logs, ["{ seen: 40 } [ 1, 'x' ]"]);
    match output.completion {
      Completion::Value(value) => assert_eq!(value, r#"{"last":["","",""],"a":[1,"x",null],"b":{"c":0.5}}"#),
      other => panic!("the run failed: {other:?}"),
    }
    until("the next isolate is prepared and warmed", || {
      let stats = scheduler.stats();
      stats.prepared_isolates == 2 && stats.isolates_warmed == 3
    });
    scheduler.shutdown();
  }

  /// A run submitted while the thread that ran the one before it (which
  /// called no tool) is making its next isolate for the reserve (here: from
  /// that run's delivery, which comes before the thread disposes of the
  /// spent isolate and makes the next) waits for it: the reserve grows by
  /// one. An idle spell brings it back to its size at rest, the extra
  /// thread retired with its isolate.
  #[test]
  fn runs_back_to_back_grow_the_reserve_and_an_idle_spell_shrinks_it() {
    let scheduler = Arc::new(with_reserve(1));
    let job = |run_id: u32| RunJob {
      run_id,
      seed: [0; 4],
      recorded: None,
      program: "return 6 * 7".into(),
      bindings: BindingsDescriptor::parse(r#"{"namespaces":[]}"#).expect("an empty descriptor"),
      budget: scheduler.new_budget(wall()),
    };
    until("the reserve is prepared", || scheduler.stats().prepared_isolates == 1);
    let (send, receive) = std::sync::mpsc::channel();
    let second = Submission { job: job(2), deliver: completion_to(send.clone()) };
    let first = Submission {
      job: job(1),
      deliver: Box::new({
        let (scheduler, deliver) = (scheduler.clone(), completion_to(send));
        move |output: Output, cost| {
          deliver(output, cost);
          assert!(scheduler.submit(second).is_ok());
        }
      }),
    };
    assert!(scheduler.submit(first).is_ok());
    for _ in 0..2 {
      match receive.recv_timeout(Duration::from_secs(60)) {
        Ok(Completion::Value(value)) => assert_eq!(value, "42"),
        other => panic!("a run failed: {other:?}"),
      }
    }
    until("the reserve grows by one", || scheduler.stats().prepared_isolates == 2);
    until("the reserve is back to its size at rest", || {
      let stats = scheduler.stats();
      stats.prepared_isolates == 1 && stats.threads == 1
    });
    scheduler.shutdown();
  }
}
