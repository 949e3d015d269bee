//! `dsh-code-runtime-v8`: the napi surface. `NativeRuntime` converts
//! between JS values and the Rust run lifecycle (`run`, `scheduler`,
//! `bridge`, `ledger`, `transpile`) and keeps the one piece of state that
//! belongs to the surface: the live runs by id, which `abort()` and
//! disposal stop. How host calls and results cross to JS is in
//! `host_calls` and `run_result`.

#![deny(clippy::unwrap_used)]
// Unit tests may unwrap: a panic there is a failed test, not a crashed host.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod allocator;
mod bindings_descriptor;
mod bridge;
mod budget;
mod config;
mod control;
mod external_memory;
mod host_calls;
mod icu_memory;
mod isolate;
#[cfg(test)]
mod isolate_cost;
pub mod ledger;
mod lock;
mod platform;
mod run;
mod run_result;
mod sandbox_ext;
mod scheduler;
pub mod transpile;
mod watchdog;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;

use crate::bindings_descriptor::BindingsDescriptor;
use crate::bridge::Bridge;
use crate::config::{HostFacts, RuntimeConfig};
use crate::control::{RunControl, StopReason};
use crate::host_calls::{host_call_batch, HostCallIds, HostWake, REPLY_IDS};
use crate::ledger::{FailureKind, OutputLedger};
use crate::lock::lock;
use crate::run::RunJob;
use crate::run_result::{NativeRunResult, MIN_OUTPUT_BYTES};
use crate::scheduler::{Outcomes, Scheduler, SchedulerStats, Submission};

/// The runtime's caps (`V8CodeRuntimeConfig`), validated by the TypeScript
/// layer in the seam's order and again here. Defaults live in the schema.
#[napi(object)]
pub struct NativeConfig {
  /// CPU time a program may burn, in ms (its isolate thread's CPU clock;
  /// waiting on bindings or timers is free). Default 60000.
  pub compute_ms: f64,
  /// Wall-clock ceiling of a run from its submission, in ms, at most
  /// 2147483647. Default 600000.
  pub max_wall_ms: f64,
  /// Exact JSON byte cap over logs plus the value or failure message.
  /// Default 67108864.
  pub max_output_bytes: f64,
  /// Heap cap of a program's isolate, in MiB. Default 512.
  pub max_old_generation_size_mb: f64,
  /// Cap on ArrayBuffer / typed-array memory outside the heap, in MiB.
  /// Default 512.
  pub max_external_memory_mb: f64,
  /// Runs in flight at once, each with a thread and an isolate of its own
  /// (waiting runs included: a run waiting on a tool costs memory, not
  /// CPU). Beyond it runs queue. Default 2048; at most three quarters of
  /// vm.max_map_count / 16 (3071 with Linux's default).
  pub max_concurrent_runs: u32,
  /// Runs that may wait in the queue for admission; beyond it run()
  /// rejects. Default 10000.
  pub max_queued_runs: u32,
  /// Isolates kept prepared from the snapshot on idle threads, so that a
  /// run arriving at an idle runtime starts at once. Default: available
  /// cores.
  pub prepared_isolates: u32,
}

/// Finished runs by outcome: `ok` for a completion, else the seam's
/// failure kind.
#[napi(object, object_from_js = false)]
pub struct NativeOutcomes {
  pub ok: f64,
  pub exception: f64,
  pub timeout: f64,
  pub abort: f64,
  pub worker_exit: f64,
  pub invalid_output: f64,
  pub output_limit: f64,
}

impl From<Outcomes> for NativeOutcomes {
  fn from(outcomes: Outcomes) -> Self {
    NativeOutcomes {
      ok: outcomes.ok as f64,
      exception: outcomes.exception as f64,
      timeout: outcomes.timeout as f64,
      abort: outcomes.abort as f64,
      worker_exit: outcomes.worker_exit as f64,
      invalid_output: outcomes.invalid_output as f64,
      output_limit: outcomes.output_limit as f64,
    }
  }
}

/// A snapshot of the runtime for operators. The run counts are taken
/// together: `inFlight === starting + computing + waiting`.
#[napi(object, object_from_js = false)]
pub struct NativeStats {
  /// Runs submitted and waiting for admission.
  pub queued: u32,
  /// Runs admitted and not finished.
  pub in_flight: u32,
  /// In flight, waiting for a thread and an isolate.
  pub starting: u32,
  /// In flight, running (or runnable) on their thread.
  pub computing: u32,
  /// In flight, their thread parked on binding calls or timers.
  pub waiting: u32,
  /// Runs with at least one binding call the host has not answered.
  pub waiting_on_host: u32,
  /// Run threads alive (running a run, or idle with a prepared isolate).
  pub threads: u32,
  /// Idle threads holding a prepared isolate.
  pub prepared_isolates: u32,
  /// Finished runs by outcome, since the runtime started.
  pub outcomes: NativeOutcomes,
  /// run() calls refused because the queue was full.
  pub refused: f64,
  /// CPU time charged to programs (finished and in flight), in ms.
  pub cpu_ms: f64,
  /// Isolates disposed of after their runs. A run's result is delivered
  /// first; its isolate counts here once its thread is done with it,
  /// freed memory returned to the OS included.
  pub isolates_disposed: f64,
  /// Times freed memory was returned to the OS: after a run that held
  /// 16 MiB or more outside V8's own mappings or was stopped at a memory
  /// cap, and once the runtime has been idle for 250 ms after other runs.
  pub memory_returns: f64,
}

fn count(value: usize) -> u32 {
  u32::try_from(value).unwrap_or(u32::MAX)
}

impl NativeStats {
  fn new(stats: SchedulerStats, waiting_on_host: usize) -> Self {
    NativeStats {
      queued: count(stats.queued),
      in_flight: count(stats.in_flight),
      starting: count(stats.starting),
      computing: count(stats.computing),
      waiting: count(stats.waiting),
      waiting_on_host: count(waiting_on_host),
      threads: count(stats.threads),
      prepared_isolates: count(stats.prepared_isolates),
      outcomes: stats.outcomes.into(),
      refused: stats.refused as f64,
      cpu_ms: stats.cpu.as_secs_f64() * 1000.0,
      isolates_disposed: stats.isolates_disposed as f64,
      memory_returns: stats.memory_returns as f64,
    }
  }
}

struct Core {
  scheduler: Scheduler,
  bridge: Arc<Bridge>,
  live: Mutex<HashMap<u32, Arc<RunControl>>>,
  disposed: AtomicBool,
  max_output_bytes: u64,
}

impl Core {
  /// Stop every live run with `reason`, stop and join every thread.
  fn shutdown(&self, reason: StopReason) {
    self.disposed.store(true, Ordering::SeqCst);
    self.scheduler.close();
    let live: Vec<_> = lock(&self.live).values().cloned().collect();
    for control in live {
      control.stop(reason.clone());
    }
    self.scheduler.shutdown();
  }
}

/// Runs programs in V8 isolates, each on a thread of its own while in
/// flight (one `V8CodeRuntime`).
#[napi]
pub struct NativeRuntime {
  core: Arc<Core>,
}

type Resolver<T> = Box<dyn FnOnce(Env) -> Result<T> + Send>;

#[napi]
impl NativeRuntime {
  /// Start the runtime. `onCalls(ids, args)` receives each batch of host calls
  /// (layout: `HOST_CALL_IDS` numbers per call) and answers them through
  /// `reply()` (`REPLY_IDS` numbers per reply).
  #[napi(constructor)]
  pub fn new(
    env: Env,
    config: NativeConfig,
    #[napi(ts_arg_type = "(ids: Uint32Array, args: string[]) => void")] on_calls: Function<
      FnArgs<(HostCallIds, Vec<String>)>,
      Unknown<'static>,
    >,
  ) -> Result<Self> {
    let config = RuntimeConfig {
      compute_ms: config.compute_ms,
      max_wall_ms: config.max_wall_ms,
      max_output_bytes: if config.max_output_bytes.is_finite() && config.max_output_bytes >= f64::from(MIN_OUTPUT_BYTES)
      {
        config.max_output_bytes as u64
      } else {
        0
      },
      max_old_generation_size_mb: config.max_old_generation_size_mb,
      max_external_memory_mb: config.max_external_memory_mb,
      max_concurrent_runs: config.max_concurrent_runs as usize,
      max_queued_runs: config.max_queued_runs as usize,
      prepared_isolates: config.prepared_isolates as usize,
      host: HostFacts {
        node_major: env.get_node_version()?.major,
        hardware_concurrency: platform::available_parallelism(),
        platform: HostFacts::navigator_platform(),
      },
    };
    config.validate().map_err(|message| Error::new(Status::InvalidArg, message))?;
    config.check_machine_limits().map_err(|message| Error::new(Status::InvalidArg, message))?;
    platform::ensure_initialized().map_err(|message| Error::new(Status::GenericFailure, message))?;

    let bridge = Arc::new(Bridge::default());
    let weak_bridge = Arc::downgrade(&bridge);
    let wake: HostWake = on_calls
      .build_threadsafe_function::<()>()
      .weak::<true>()
      .build_callback(move |_| Ok(host_call_batch(&weak_bridge)))?;
    bridge.connect_host(Box::new(move || {
      wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
    }));
    let max_output_bytes = config.max_output_bytes;
    let scheduler = Scheduler::start(config, bridge.clone())
      .map_err(|error| Error::new(Status::GenericFailure, format!("starting the scheduler failed: {error}")))?;
    let core =
      Arc::new(Core { scheduler, bridge, live: Mutex::default(), disposed: AtomicBool::new(false), max_output_bytes });
    // At environment teardown (process exit, worker exit) stop and join
    // every thread: no isolate thread may outlive the environment that owns it.
    env.add_env_cleanup_hook(core.clone(), |core| core.shutdown(StopReason::Disposed))?;
    Ok(NativeRuntime { core })
  }

  /// Run one program. Resolves with the run's result; rejects only when the
  /// runtime is disposed or the queue is full (`maxQueuedRuns` runs wait
  /// for admission behind `maxConcurrentRuns` in flight).
  #[napi(ts_return_type = "Promise<NativeRunResult>")]
  pub fn run<'env>(&self, env: &'env Env, run_id: u32, program: String, bindings_json: String) -> Result<Object<'env>> {
    if self.core.disposed.load(Ordering::SeqCst) {
      return Err(Error::new(Status::GenericFailure, "run() after disposal"));
    }
    let bindings =
      BindingsDescriptor::parse(&bindings_json).map_err(|message| Error::new(Status::InvalidArg, message))?;
    let (deferred, promise) = env.create_deferred::<NativeRunResult, Resolver<NativeRunResult>>()?;
    let budget = self.core.scheduler.new_budget();
    lock(&self.core.live).insert(run_id, budget.control().clone());
    let core = Arc::downgrade(&self.core);
    let submission = Submission {
      job: RunJob { run_id, program, bindings, budget },
      deliver: Box::new(move |output| {
        if let Some(core) = core.upgrade() {
          lock(&core.live).remove(&run_id);
        }
        let result = NativeRunResult::from(output);
        deferred.resolve(Box::new(move |_env| Ok(result)));
      }),
    };
    if let Err(refused) = self.core.scheduler.submit(submission) {
      lock(&self.core.live).remove(&run_id);
      let reason = if self.core.disposed.load(Ordering::SeqCst) {
        "run() after disposal"
      } else {
        "the run queue is full (config.maxQueuedRuns); wait for runs to finish or raise the limit"
      };
      drop(refused);
      return Err(Error::new(Status::GenericFailure, reason));
    }
    Ok(promise)
  }

  /// Abort a live run; its result reports `abort` with `reason`.
  #[napi]
  pub fn abort(&self, run_id: u32, reason: Utf16String) {
    let control = lock(&self.core.live).get(&run_id).cloned();
    if let Some(control) = control {
      control.stop(StopReason::Abort(reason.to_vec()));
    }
  }

  /// Answer host calls: reply `i` settles (run `ids[3i]`, call `ids[3i+1]`),
  /// resolving with the JSON text `texts[i]` when `ids[3i+2]` is 1, rejecting
  /// with the message whose JSON string literal is `texts[i]` otherwise (JSON
  /// keeps a lone surrogate, which a UTF-8 crossing would replace). Replies
  /// for runs that have ended are dropped. Returns whether a live run was
  /// answered: the host should then call `linger()` once its current turn is
  /// over.
  #[napi]
  pub fn reply(&self, ids: &[u32], texts: Vec<String>) -> Result<bool> {
    if ids.len() != texts.len() * REPLY_IDS as usize {
      return Err(Error::new(Status::InvalidArg, format!("reply ids must hold {REPLY_IDS} numbers per text")));
    }
    let replies = texts.into_iter().zip(ids.chunks_exact(REPLY_IDS as usize)).map(|(text, id)| {
      let reply = if id[2] == 1 { Ok(text) } else { Err(text) };
      (id[0], id[1], reply)
    });
    Ok(self.core.bridge.reply_all(replies))
  }

  /// Wait briefly, awake, for an answered run's next call (at most 30 us,
  /// backing off when calls do not follow), so that its wake-up does not
  /// find this thread asleep. Call it between event-loop turns
  /// (`setImmediate`), never inside the turn that answered.
  #[napi]
  pub fn linger(&self) {
    self.core.bridge.linger();
  }

  /// A result for a run that fails before it starts (a pre-aborted signal),
  /// through the same output ledger as every other result.
  #[napi]
  pub fn fail_before_start(&self, kind: String, message: Utf16String) -> Result<NativeRunResult> {
    let kind = match kind.as_str() {
      "abort" => FailureKind::Abort,
      "exception" => FailureKind::Exception,
      _ => return Err(Error::new(Status::InvalidArg, format!("unknown failure kind {kind}"))),
    };
    let output = OutputLedger::new(self.core.max_output_bytes).finish_failure(kind, message.to_vec());
    self.core.scheduler.count_outcome(&output.completion);
    Ok(output.into())
  }

  /// What the runtime is doing now, and what it has done (NativeStats).
  #[napi]
  pub fn stats(&self) -> NativeStats {
    NativeStats::new(self.core.scheduler.stats(), self.core.bridge.runs_waiting_on_host())
  }

  /// Dispose: live runs resolve `abort: runtime disposed`, every isolate
  /// thread is stopped and joined, then the promise resolves.
  #[napi(ts_return_type = "Promise<void>")]
  pub fn dispose<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
    let (deferred, promise) = env.create_deferred::<(), Resolver<()>>()?;
    let core = self.core.clone();
    std::thread::Builder::new()
      .name("dsh-v8-dispose".into())
      .spawn(move || {
        core.shutdown(StopReason::Disposed);
        deferred.resolve(Box::new(|_env| Ok(())));
      })
      .map_err(|error| Error::new(Status::GenericFailure, format!("disposal failed to start: {error}")))?;
    Ok(promise)
  }
}
