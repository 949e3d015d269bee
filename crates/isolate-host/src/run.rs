//! The lifecycle of one run on its thread: transpile, attach the run to
//! a prepared isolate, start the program, drive its event loop until it
//! settles or is stopped, and turn what happened into the run's output
//! through the ledger.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use deno_core::{v8, PollEventLoopOptions};
use dsh_sandbox_ext::{HostSlot, RepliesFuture, ReplyBatch, SandboxHost, Settlement, StringsBeside};

use crate::bindings_descriptor::BindingsDescriptor;
use crate::bridge::{Argument, Bridge};
use crate::budget::RunBudget;
use crate::clocks::RunClocks;
use crate::compiler_zones::{zone_allowance, ZoneMeter};
use crate::config::RuntimeConfig;
use crate::control::{AttachedIsolate, RunControl, ZoneWatch};
use crate::external_memory::ExternalMemory;
use crate::icu_memory::ChargeIcu;
use crate::isolate::{heap_limit_for_stopped, PreparedIsolate};
use crate::ledger::{FailureKind, Output, OutputLedger};
use crate::mailbox::Mailbox;
use crate::transpile::{strip_types, PROGRAM_NAME};
use dsh_protocol::contract::COMPLETION_NOT_LOSSLESS;
use dsh_protocol::failure::{failure, StopReason};
use dsh_protocol::frame::{Answer, ExecutionCost, HistoryEnd, ReplyKind, RunSeed};
use dsh_protocol::out_of_band::RawString;
use dsh_protocol::readings::{Clock, Readings};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// One run, as the scheduler receives it.
pub struct RunJob {
  pub run_id: u32,
  /// Seeds the run's random numbers (`dsh_protocol::frame::RunSeed`).
  pub seed: RunSeed,
  /// What its history holds for a re-execution (`None` for a first
  /// execution). Boxed: a job waits in queues by value, and most have none.
  pub recorded: Option<Box<Recorded>>,
  pub program: String,
  /// The binding namespaces (calls are checked against their function
  /// counts; the isolate's driver installs them).
  pub bindings: BindingsDescriptor,
  /// Its budget, which holds its stop switch.
  pub budget: Arc<RunBudget>,
}

/// What a re-executed run is given of its history.
pub struct Recorded {
  /// The readings of its clocks, read before the live clocks.
  pub readings: Readings,
  /// Where the history ends.
  pub end: HistoryEnd,
}

/// What a run tells the harness while it executes, as it happens: the
/// host's channel (`main.rs`) sends each at once, so that the harness
/// knows which runs a dying host takes with it and keeps every log entry
/// they wrote.
pub trait RunEvents: Send + Sync {
  /// The run is about to work on its program (strip its types, then
  /// execute it).
  fn started(&self, run_id: u32);
  /// The program wrote a log entry (every entry offered to the run's
  /// ledger, in order).
  fn log(&self, run_id: u32, text: &[u16]);
  /// Readings of the run's clocks, sent before its next log entry or call
  /// (`clocks.rs`), with the CPU charged to the run then (in us).
  fn readings(&self, run_id: u32, cpu_us: f64, readings: &Readings);
  /// The run was stopped and its thread cannot be freed (`watchdog.rs`):
  /// the host ends next. `kind` and `message` are the failure its stop
  /// would have settled it with.
  fn unstoppable(&self, run_id: u32, kind: FailureKind, message: &[u16]);
}

/// What a run thread shares with every run it executes.
pub struct RunContext<'a> {
  pub config: &'a RuntimeConfig,
  pub bridge: &'a Arc<Bridge>,
  pub events: &'a Arc<dyn RunEvents>,
}

/// How close the CPU the harness knows of a run is to what it was charged.
const CPU_REPORTED_TO: std::time::Duration = std::time::Duration::from_millis(1);

/// The ChaCha20 key of a run's seed: its words, little-endian.
fn seed_bytes(seed: &RunSeed) -> [u8; 32] {
  let mut bytes = [0u8; 32];
  for (chunk, word) in bytes.chunks_exact_mut(8).zip(seed) {
    chunk.copy_from_slice(&word.to_le_bytes());
  }
  bytes
}

fn utf16(text: &str) -> Vec<u16> {
  text.encode_utf16().collect()
}

/// The run's side of the ops (see [`SandboxHost`]).
struct RunHost {
  run_id: u32,
  function_counts: Vec<u32>,
  control: Arc<RunControl>,
  bridge: Arc<Bridge>,
  mailbox: Arc<Mailbox>,
  ledger: RefCell<Option<OutputLedger>>,
  events: Arc<dyn RunEvents>,
  settlement: RefCell<Option<(Settlement, Vec<u16>)>>,
  started: Instant,
  external_memory: Arc<ExternalMemory>,
  budget: Arc<RunBudget>,
  /// The run's random numbers, from the seed the harness chose.
  random: RefCell<ChaCha20Rng>,
  clocks: RefCell<RunClocks>,
  /// The CPU last reported to the harness (us), and when the run's CPU
  /// clock was last read for it.
  cpu_reported: Cell<f64>,
  cpu_read_at: Cell<Instant>,
  /// Calls and log entries this execution has still to make again before
  /// its history is made (`None` once it is, or for a first execution).
  replay_left: Cell<Option<(u32, u32)>>,
  /// The event loop's turns so far: `drive` counts each poll of it.
  turns: Rc<Cell<u32>>,
}

impl RunHost {
  /// Send the readings the run took since its last log entry or call, and
  /// the CPU charged to it if it has moved by a millisecond or more (the
  /// harness carries it into a re-execution: `budget.rs`).
  fn hand_over_readings(&self) {
    let cpu = self.cpu_moved();
    let taken = self.clocks.borrow_mut().take();
    if taken.is_none() && cpu.is_none() {
      return;
    }
    let cpu_us = cpu.unwrap_or(self.cpu_reported.get());
    self.events.readings(self.run_id, cpu_us, &taken.unwrap_or_default());
  }

  /// The CPU charged to the run, if it is a millisecond or more past what
  /// was reported. The clock (a system call) is read at most once a
  /// millisecond of wall time, in which the run cannot have spent more.
  fn cpu_moved(&self) -> Option<f64> {
    let now = Instant::now();
    if now.duration_since(self.cpu_read_at.get()) < CPU_REPORTED_TO {
      return None;
    }
    self.cpu_read_at.set(now);
    let cpu_us = self.budget.cpu_used().as_secs_f64() * 1e6;
    if cpu_us < self.cpu_reported.get() + CPU_REPORTED_TO.as_secs_f64() * 1e6 {
      return None;
    }
    self.cpu_reported.set(cpu_us);
    Some(cpu_us)
  }

  /// A call made or a log entry written: once the execution has made its
  /// history again, what it spends is charged (`budget.rs`).
  fn made(&self, calls: u32, logs: u32) {
    if let Some((calls_left, logs_left)) = self.replay_left.get() {
      let left = (calls_left.saturating_sub(calls), logs_left.saturating_sub(logs));
      if left == (0, 0) {
        self.replay_left.set(None);
        self.budget.end_replay();
      } else {
        self.replay_left.set(Some(left));
      }
    }
  }

  fn read(&self, clock: Clock, live: impl FnOnce() -> f64) -> f64 {
    let (value, hand_over) = self.clocks.borrow_mut().read(clock, live);
    if hand_over {
      self.hand_over_readings();
    }
    value
  }
}

impl SandboxHost for RunHost {
  fn log(&self, text: Vec<u16>) -> bool {
    // Once the completion settled, the run's output is decided: what the
    // program's leftovers write is not part of it (as in the reference,
    // whose worker is ended once it posts its result).
    if self.settlement.borrow().is_some() {
      return true;
    }
    self.hand_over_readings();
    self.events.log(self.run_id, &text);
    self.made(0, 1);
    let admitted = self.ledger.borrow_mut().as_mut().is_some_and(|ledger| ledger.admit(&text));
    if !admitted {
      self.control.stop(StopReason::OutputLimit);
    }
    admitted
  }

  fn output_remaining(&self) -> f64 {
    self.ledger.borrow().as_ref().map_or(0.0, |ledger| ledger.remaining() as f64)
  }

  fn call(
    &self,
    namespace: u32,
    function: u32,
    json: String,
    paths: String,
    strings: Vec<RawString>,
  ) -> Result<u32, String> {
    let known = self.function_counts.get(namespace as usize).is_some_and(|count| function < *count);
    if !known {
      return Err("unknown binding".to_owned());
    }
    // A settled run's leftovers call no tools: its outcome is decided, and
    // a tool must not act for a run that has ended.
    if self.settlement.borrow().is_some() {
      return Err("the run has already settled".to_owned());
    }
    self.hand_over_readings();
    let argument = Argument { json, paths, strings };
    let id = self.bridge.call(&self.mailbox, self.run_id, namespace, function, argument);
    self.made(1, 0);
    Ok(id)
  }

  fn replies(&self) -> RepliesFuture {
    let mailbox = self.mailbox.clone();
    let bridge = self.bridge.clone();
    Box::pin(async move {
      // The pump's first poll sends what is queued (at least the call that
      // armed it) before it waits for any reply.
      bridge.flush();
      let mut batch = ReplyBatch::default();
      for (id, Answer { kind, text, paths, strings }) in mailbox.take().await {
        batch.ids.push(id);
        batch.oks.push(kind != ReplyKind::Reject);
        batch.raws.push(kind == ReplyKind::Text);
        batch.texts.push(text);
        batch.beside.push((!strings.is_empty()).then_some(StringsBeside { paths, strings }));
      }
      batch
    })
  }

  fn settle(&self, settlement: Settlement, text: Vec<u16>) {
    let mut slot = self.settlement.borrow_mut();
    if slot.is_none() && self.control.settle() {
      *slot = Some((settlement, text));
    }
  }

  fn exit(&self, code: i32) {
    self.control.stop(StopReason::Exit(code));
  }

  fn read_clock(&self, clock: Clock) -> f64 {
    self.read(clock, || match clock {
      // As V8's own Date.now(): whole milliseconds.
      Clock::Wall => {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |since| since.as_millis() as f64)
      }
      Clock::Monotonic => self.started.elapsed().as_secs_f64() * 1000.0,
      Clock::Cpu => self.budget.cpu_used().as_secs_f64() * 1e6,
      Clock::Memory => 0.0,
    })
  }

  fn read_memory(&self, figures: &mut [f64]) {
    for figure in figures {
      *figure = self.read(Clock::Memory, || *figure);
    }
  }

  fn recorded_order(&self) -> Vec<u32> {
    self.clocks.borrow().recorded_order().to_vec()
  }

  fn events(&self, events: &[u32]) {
    let hand_over = self.clocks.borrow_mut().events(events);
    if hand_over {
      self.hand_over_readings();
    }
  }

  fn turn(&self) -> u32 {
    self.turns.get()
  }

  fn external_memory_used(&self) -> f64 {
    self.external_memory.used() as f64
  }

  fn memory_check(&self, isolate: &mut v8::Isolate, v8_buffers: bool) -> bool {
    self.external_memory.check(isolate, v8_buffers)
  }

  fn admit_transient_memory(&self, isolate: &mut v8::Isolate, bytes: usize) -> bool {
    self.external_memory.admit_transient(isolate, bytes)
  }

  fn charge_external_memory(&self, bytes: f64) -> Option<Box<dyn FnOnce()>> {
    // A size is a safe integer no larger than the address space (V8
    // refused the buffer otherwise); anything else is refused here too.
    if !(bytes.is_finite() && bytes >= 0.0 && bytes <= usize::MAX as f64) {
      return None;
    }
    let bytes = bytes as usize;
    if !self.external_memory.reserve(bytes) {
      return None;
    }
    let account = self.external_memory.clone();
    Some(Box::new(move || account.release(bytes)))
  }

  fn fill_random(&self, buffer: &mut [u8]) {
    self.random.borrow_mut().fill_bytes(buffer);
  }
}

/// Finish a run that was stopped, through the ledger.
pub fn finish_stopped(ledger: OutputLedger, reason: &StopReason, config: &RuntimeConfig) -> Output {
  match failure(reason, config) {
    (FailureKind::OutputLimit, _) => ledger.finish_output_limit(),
    (kind, message) => ledger.finish_failure(kind, message),
  }
}

/// An isolate that has run a program. It is never reused, terminated or
/// not; the run thread disposes of it after delivering the result, so that
/// isolate teardown is off the run's critical path.
pub struct SpentIsolate {
  isolate: PreparedIsolate,
  /// The run was stopped at its heap or external-memory cap: it held as
  /// much as it was allowed, by routes the account may not see (V8's own
  /// native structures: a JSON parser's nesting stack, timer and wait
  /// lists).
  hit_cap: bool,
}

/// What a disposed isolate's run made the process hold.
pub struct Disposal {
  /// The most the run made the process's allocator hold for it at once:
  /// ICU and small buffers through the account, V8's zones and tables
  /// through its statistics. V8's heap pages and large buffers are
  /// mappings of their own, given back by V8 and the allocator.
  pub held: usize,
  /// Bytes the run's heap allocated over its life: a heap that allocated
  /// much has freed pages to V8's page pool (see scheduler.rs).
  pub heap_allocated: u64,
  pub hit_cap: bool,
}

impl SpentIsolate {
  /// Dispose of the isolate, reporting what its run held.
  pub fn dispose(mut self) -> Disposal {
    let heap = self.isolate.runtime.v8_isolate().get_heap_statistics();
    let held = heap.peak_malloced_memory().saturating_add(self.isolate.external_memory.peak());
    let hit_cap = self.hit_cap;
    drop(self);
    Disposal { held, heap_allocated: heap.total_allocated_bytes(), hit_cap }
  }
}

/// Execute one run on `isolate`: its output, and what it cost.
pub async fn execute(
  isolate: PreparedIsolate,
  job: &RunJob,
  context: &RunContext<'_>,
) -> (Output, ExecutionCost, SpentIsolate) {
  let mut isolate = isolate;
  let output = execute_on(&mut isolate, job, context).await;
  let cost = ExecutionCost {
    cpu_us: job.budget.cpu_used().as_secs_f64() * 1e6,
    peak_heap_bytes: isolate.heap_peak.bytes(isolate.runtime.v8_isolate()),
    peak_external_bytes: isolate.external_memory.peak() as u64,
  };
  let hit_cap = matches!(job.budget.control().reason(), Some(StopReason::HeapLimit | StopReason::ExternalMemory));
  (output, cost, SpentIsolate { isolate, hit_cap })
}

async fn execute_on(isolate: &mut PreparedIsolate, job: &RunJob, context: &RunContext<'_>) -> Output {
  let config = context.config;
  let control = job.budget.control();
  let ledger = OutputLedger::new(config.max_output_bytes);
  if let Some(reason) = control.reason() {
    return finish_stopped(ledger, &reason, config);
  }
  // The strip is the run's work too, charged to its budget, and the run
  // has started with it: swc takes exponential time on some nestings
  // (`(<any>` repeated: 22 levels, 6 s), and a stopped run that goes on
  // computing ends its host (watchdog.rs), which names it.
  let metering = job.budget.meter_this_thread();
  context.events.started(job.run_id);
  let code = match strip_types(&job.program) {
    Ok(code) => code,
    Err(message) => return ledger.finish_failure(FailureKind::Exception, utf16(&message)),
  };
  // Stopped while its types were stripped (its budget, an abort): compiling
  // it now would be work no stop reaches.
  if let Some(reason) = control.reason() {
    return finish_stopped(ledger, &reason, config);
  }

  let host = Rc::new(RunHost {
    run_id: job.run_id,
    function_counts: job.bindings.function_counts(),
    control: control.clone(),
    bridge: context.bridge.clone(),
    mailbox: context.bridge.open(job.run_id),
    ledger: RefCell::new(Some(ledger)),
    events: context.events.clone(),
    settlement: RefCell::new(None),
    started: Instant::now(),
    external_memory: isolate.external_memory.clone(),
    budget: job.budget.clone(),
    random: RefCell::new(ChaCha20Rng::from_seed(seed_bytes(&job.seed))),
    clocks: RefCell::new(RunClocks::new(
      job.recorded.as_ref().map(|recorded| recorded.readings.clone()).unwrap_or_default(),
    )),
    cpu_reported: Cell::new(job.recorded.as_ref().map_or(0.0, |recorded| recorded.end.cpu_us)),
    cpu_read_at: Cell::new(Instant::now()),
    replay_left: Cell::new(None),
    turns: Rc::new(Cell::new(0)),
  });
  // The budget carries what the history's end says was spent (main.rs);
  // making the history again is not charged until it is made.
  if let Some(end) = job.recorded.as_ref().map(|recorded| recorded.end) {
    host.replay_left.set(Some((end.calls, end.logs)));
    host.made(0, 0);
  }
  isolate.runtime.op_state().borrow_mut().put(HostSlot(host.clone()));
  isolate.external_memory.attach(Some(control.clone()));
  let icu_charged = ChargeIcu::to(&isolate.external_memory);
  let v8_isolate = isolate.runtime.v8_isolate();
  // SAFETY: the meter is detached (dropped) when `attached` is, at the end
  // of this function or as a panic unwinds it, and the isolate is disposed
  // only after this function returns.
  let meter = unsafe { ZoneMeter::of(v8_isolate) };
  let cap = isolate.external_memory.limit();
  let zones = meter.map(|meter| ZoneWatch { meter, stop_at: zone_allowance(cap, code.len()) });
  let attached = Attached::to(control, AttachedIsolate { handle: v8_isolate.thread_safe_handle(), zones });
  isolate.cap_heap_for_the_program();
  {
    let control = control.clone();
    let external_memory = isolate.external_memory.clone();
    let cap = isolate.heap_bytes;
    isolate.runtime.add_near_heap_limit_callback(move |current, _initial| {
      // V8 also calls this as the last resort of a backing-store
      // allocation that the external-memory cap refused: that run hit the
      // external cap, not the heap's.
      let reason = if external_memory.refusal_stands() { StopReason::ExternalMemory } else { StopReason::HeapLimit };
      control.stop(reason);
      // Grant headroom so V8 unwinds the termination instead of aborting
      // the whole process on an out-of-memory fatal error; bounded, for a
      // loop that does not reach the stop (see heap_limit_for_stopped).
      heap_limit_for_stopped(current, cap)
    });
  }

  let loop_error = match start_program(isolate, &code, &job.bindings) {
    Err(message) => Some(message),
    Ok(promise) => {
      tokio::select! {
        biased;
        _ = control.stopped() => None,
        result = drive(isolate, promise, control, &host.turns) => result.err().map(|error| event_loop_failure(&error)),
      }
    }
  };

  drop(metering);
  context.bridge.close(job.run_id);
  drop(attached);
  drop(icu_charged);
  isolate.external_memory.attach(None);
  let ledger = host.ledger.borrow_mut().take().unwrap_or_else(|| OutputLedger::new(config.max_output_bytes));
  let settlement = host.settlement.borrow_mut().take();
  // Break the Rc cycle through OpState before the isolate is disposed.
  isolate.runtime.op_state().borrow_mut().try_take::<HostSlot>();

  if let Some((settlement, text)) = settlement {
    return match settlement {
      Settlement::Value => match String::from_utf16(&text) {
        Ok(json) => ledger.finish_value(json),
        Err(_) => ledger.finish_failure(FailureKind::InvalidOutput, utf16(COMPLETION_NOT_LOSSLESS)),
      },
      Settlement::NoValue => ledger.finish_no_value(),
      Settlement::Exception => ledger.finish_failure(FailureKind::Exception, text),
      Settlement::InvalidOutput => ledger.finish_failure(FailureKind::InvalidOutput, text),
      Settlement::OutputLimit => ledger.finish_output_limit(),
    };
  }
  if let Some(reason) = control.reason() {
    return finish_stopped(ledger, &reason, config);
  }
  let message = loop_error.unwrap_or_else(|| "the program ended without settling".to_owned());
  ledger.finish_failure(FailureKind::Exception, utf16(&message))
}

/// A run's isolate attached to its control; detached when dropped, before
/// the isolate can be disposed, on every path out of the run.
struct Attached<'a>(&'a RunControl);

impl<'a> Attached<'a> {
  fn to(control: &'a RunControl, isolate: AttachedIsolate) -> Attached<'a> {
    control.attach_isolate(Some(isolate));
    Attached(control)
  }
}

impl Drop for Attached<'_> {
  fn drop(&mut self) {
    self.0.attach_isolate(None);
  }
}

/// Run the program's event loop until `promise` (the driver's) settles.
///
/// The first turn runs with timer and immediate firings held back
/// (crates/sandbox-ext/js/04_timers.js): the rejections the program's
/// synchronous part left unhandled are reported in that turn, and they
/// must fail the run before any timer callback runs, as in Node, however
/// late the turn comes. deno_core runs due timers before it reports
/// rejections within a turn, so a turn that starts after a short timer is
/// due would otherwise let the timer's continuation settle the run first.
/// Released, the immediates fire before the timers, as in the reference.
///
/// A run whose completion settled within that turn is done: its held
/// callbacks are dropped with every other leftover (docs/CONTRACT.md),
/// though a slow turn may have let them fall due.
async fn drive(
  isolate: &mut PreparedIsolate,
  promise: v8::Global<v8::Value>,
  control: &RunControl,
  turns: &Cell<u32>,
) -> Result<(), deno_core::error::CoreError> {
  let mut settled = std::pin::pin!(isolate.runtime.resolve(promise));
  let first = std::future::poll_fn(|cx| Poll::Ready(poll_turn(&mut isolate.runtime, turns, cx))).await;
  if let Poll::Ready(Err(error)) = first {
    return Err(error);
  }
  if control.settled() {
    return Ok(());
  }
  {
    let PreparedIsolate { runtime, release_timers, .. } = isolate;
    deno_core::scope!(scope, runtime);
    let release = v8::Local::new(scope, &*release_timers);
    let undefined = v8::undefined(scope).into();
    // Never throws: each callback is guarded, and a throw fails the run.
    let _ = release.call(scope, undefined, &[]);
  }
  // JsRuntime::with_event_loop_promise, each poll of the event loop
  // counted as a turn.
  let runtime = &mut isolate.runtime;
  std::future::poll_fn(|cx| {
    if let Poll::Ready(result) = settled.as_mut().poll(cx) {
      return Poll::Ready(result.map(drop).map_err(Into::into));
    }
    match poll_turn(runtime, turns, cx) {
      Poll::Pending => Poll::Pending,
      Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
      Poll::Ready(Ok(())) => Poll::Ready(match settled.as_mut().poll(cx) {
        Poll::Ready(result) => result.map(drop).map_err(Into::into),
        Poll::Pending => Err(deno_core::error::CoreErrorKind::PendingPromiseResolution.into_box()),
      }),
    }
  })
  .await
}

/// One poll of the run's event loop, counted as a turn (`op_dsh_turn`).
fn poll_turn(
  runtime: &mut deno_core::JsRuntime,
  turns: &Cell<u32>,
  cx: &mut std::task::Context,
) -> Poll<Result<(), deno_core::error::CoreError>> {
  turns.set(turns.get().wrapping_add(1));
  runtime.poll_event_loop(cx, PollEventLoopOptions::default())
}

/// Why the event loop ended without the program settling.
fn event_loop_failure(error: &deno_core::error::CoreError) -> String {
  if matches!(*error.0, deno_core::error::CoreErrorKind::PendingPromiseResolution) {
    return "the program's top-level promise can never settle: nothing is pending that could resolve it \
            (an await on a promise that is never resolved)"
      .to_owned();
  }
  error.to_string()
}

/// Compile the program as the body of an async function (its line 1 is line
/// 1 of the script origin) and hand it to the driver. Returns the driver's
/// promise, or the message of a compile error.
fn start_program(
  isolate: &mut PreparedIsolate,
  code: &str,
  bindings: &BindingsDescriptor,
) -> Result<v8::Global<v8::Value>, String> {
  let PreparedIsolate { runtime, install, watch, .. } = isolate;
  deno_core::scope!(scope, runtime);
  v8::tc_scope!(let scope, scope);
  // The bindings, then the console, are parameters, as the reference
  // backend hands them (`new AsyncFunction(...globals, ...errorClasses,
  // 'console', body)`); the descriptor admits only identifiers as names.
  let mut parameters = bindings.program_parameters();
  parameters.push("console");
  let source_text = format!("(async function ({}) {{'use strict';\n{code}\n}})", parameters.join(", "));
  let source = v8::String::new(scope, &source_text).ok_or("the program is too large")?;
  let name = v8::String::new(scope, PROGRAM_NAME).ok_or("out of memory")?;
  let origin = v8::ScriptOrigin::new(scope, name.into(), -1, 0, false, 0, None, false, false, false, None);
  let Some(script) = v8::Script::compile(scope, source, Some(&origin)) else {
    return Err(compile_error(scope));
  };
  let Some(program) = script.run(scope) else {
    return Err(compile_error(scope));
  };
  let undefined = v8::undefined(scope).into();
  let install = v8::Local::new(scope, &*install);
  let Ok(descriptor) = deno_core::serde_v8::to_v8(scope, bindings) else {
    return Err("the bindings could not be handed to the isolate".to_owned());
  };
  let Some(arguments) = install.call(scope, undefined, &[descriptor]) else {
    return Err(compile_error(scope));
  };
  let arguments = v8::Local::<v8::Array>::try_from(arguments).map_err(|_| "the driver did not return the bindings")?;
  let arguments: Vec<_> = (0..arguments.length()).filter_map(|index| arguments.get_index(scope, index)).collect();
  if arguments.len() != parameters.len() {
    return Err("the driver did not return the bindings".to_owned());
  }
  // Called from here, not from JS: the program's stack has nothing beneath it.
  let program =
    v8::Local::<v8::Function>::try_from(program).map_err(|_| "the program did not compile to a function")?;
  let Some(completion) = program.call(scope, undefined, &arguments) else {
    return Err(compile_error(scope));
  };
  let watch = v8::Local::new(scope, &*watch);
  let Some(promise) = watch.call(scope, undefined, &[completion]) else {
    return Err(compile_error(scope));
  };
  Ok(v8::Global::new(scope, promise))
}

/// `SyntaxError: ... at program.ts:L:C` from the pending exception.
fn compile_error(scope: &mut v8::PinnedRef<'_, v8::TryCatch<'_, '_, v8::HandleScope<'_>>>) -> String {
  let Some(exception) = scope.exception() else {
    return "the program could not be started".to_owned();
  };
  let message = v8::Exception::create_message(scope, exception);
  let text = message.get(scope).to_rust_string_lossy(scope);
  let text = text.strip_prefix("Uncaught ").unwrap_or(&text).to_owned();
  match message.get_line_number(scope) {
    Some(line) => format!("{text} at {PROGRAM_NAME}:{line}:{}", message.get_start_column() + 1),
    None => text,
  }
}
