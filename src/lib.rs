//! `dsh-code-runtime-v8`: the napi surface, and the harness's side of
//! the isolate hosts. `NativeRuntime` converts between JS values and the
//! supervisor (`supervisor`), which places runs on an isolate-host process
//! (`host_process`) and settles them, whatever becomes of the host. No V8
//! runs in this process: programs run only in hosts. How binding calls and
//! results cross to JS is in `binding_calls` and `run_result`.

#![deny(clippy::unwrap_used)]
// Unit tests may unwrap: a panic there is a failed test, not a crashed host.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod binding_calls;
mod config;
mod config_keys;
mod host_process;
mod node_bell;
mod quarantine;
mod run_report;
mod run_result;
mod supervisor;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dsh_protocol::bindings_descriptor::BindingsDescriptor;
use dsh_protocol::config::NodeFacts;
use dsh_protocol::frame::{Answer, HostStats, Reply, ReplyKind, StatNumber};
use dsh_protocol::ledger::{FailureKind, Outcomes, OutputLedger};
use dsh_protocol::protections::Protection;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;

use crate::binding_calls::{
  binding_call_batch, BindingCallBatch, CallOutbox, JsReplyText, LingeredCalls, NodeWake, OnCallsHere, REPLY_IDS,
  REPLY_JSON, REPLY_REJECT, REPLY_TEXT,
};
use crate::config_keys::NativeConfig;
use crate::node_bell::NodeListener;
use crate::run_report::RunCost;
use crate::run_result::NativeRunResult;
use crate::supervisor::{queue_full, RunEnd, RuntimeStats, Supervisor};

/// The napi twin of `Outcomes`, made from the one list of kinds.
macro_rules! native_outcomes {
  ($(($variant:ident, $name:literal, $field:ident)),* $(,)?) => {
    /// Finished runs by outcome: `ok` for a completion, else the seam's
    /// failure kind.
    #[napi(object, object_from_js = false)]
    #[derive(Default)]
    pub struct NativeOutcomes {
      pub ok: f64,
      $(pub $field: f64),*
    }

    impl From<Outcomes> for NativeOutcomes {
      fn from(outcomes: Outcomes) -> Self {
        NativeOutcomes { ok: outcomes.ok as f64, $($field: outcomes.$field as f64),* }
      }
    }
  };
}

dsh_protocol::failure_kinds!(native_outcomes);

/// `NativeStats`: the hosts' figures (a field each of
/// `dsh_protocol::host_stats!`, with its doc: the gauges, then the
/// totals) and the harness's own.
macro_rules! native_stats {
  (
    gauges { $($(#[doc = $gauge_doc:tt])* $gauge:ident: $gauge_type:ident,)* }
    totals { $($(#[doc = $total_doc:tt])* $total:ident: $total_type:ident,)* }
  ) => {
    /// A snapshot of the runtime for operators. The run counts are taken
    /// together: `inFlight === starting + computing + waiting`.
    #[napi(object, object_from_js = false)]
    #[derive(Default)]
    pub struct NativeStats {
      $($(#[doc = $gauge_doc])* pub $gauge: f64,)*
      /// Finished runs by outcome, since the runtime started.
      pub outcomes: NativeOutcomes,
      /// run() calls refused because the queue was full.
      pub refused: f64,
      $($(#[doc = $total_doc])* pub $total: f64,)*
      /// Shared isolate hosts alive and taking runs (fewer than
      /// `isolateHosts` while one is being replaced).
      pub hosts: u32,
      /// Hosts started to replace one that ended.
      pub host_restarts: f64,
      /// Runs that failed because their host ended: runs computing alone in
      /// a host of one run when it ended, runs their host named as the
      /// stopped run it could not free, runs whose re-execution diverged or
      /// whose history was dropped, and runs on the third host to end under
      /// them. Runs that had not started were placed again; other started
      /// runs were re-executed (`runsReexecuted`).
      pub runs_lost_to_host_exits: f64,
      /// Re-executions of started runs whose host ended (those waiting on a
      /// tool on a shared host, those computing alone in a host of one
      /// run): one per run and host death.
      pub runs_reexecuted: f64,
      /// Re-executed runs that failed because they were not the run their
      /// history records (a call or log entry other than the recorded one,
      /// or a finish before the history's end).
      pub reexecutions_diverged: f64,
      /// Bytes held in the histories of the runs in flight (chiefly tool
      /// replies, held to answer a re-executed run's calls).
      pub history_bytes: f64,
      /// Hosts of one run alive and ready (beside the `isolateHosts` shared
      /// ones, at most 2): each holds a run that may end its host (it was
      /// computing when its shared host died, its second host died, or its
      /// program is quarantined).
      pub hosts_of_one_run: u32,
      /// Programs that ended a host and, submitted again, run in a host of
      /// their own (for 10 minutes each, at most 64 held).
      pub quarantined_programs: f64,
      /// How the last host that ended ended, as its runs were told.
      pub last_host_exit: Option<String>,
      /// Process ids of the isolate hosts alive (to inspect them from
      /// outside: `/proc/<pid>/status`): the shared hosts first, in the
      /// order of their places, then the hosts of one run.
      pub host_pids: Vec<u32>,
      /// Each protection of the isolate hosts (`seccomp`, `noNewPrivs`,
      /// `landlock`, `namespaces`, `noDumps`, `oomFirst`, `compilerZones`),
      /// true when every host alive has it in effect.
      pub sandbox: BTreeMap<String, bool>,
      /// Hosts replaced because their resident memory stayed above
      /// `hostMaxRssMb` (also counted in `hostRestarts`).
      pub host_recycles: f64,
    }

    impl NativeStats {
      /// The hosts' figures, with the harness's own at zero for the
      /// supervisor to fill in (`Supervisor::stats`).
      fn of_hosts(host: HostStats) -> NativeStats {
        NativeStats {
          $($gauge: StatNumber::to_f64(host.$gauge),)*
          $($total: StatNumber::to_f64(host.$total),)*
          ..NativeStats::default()
        }
      }
    }
  };
}

dsh_protocol::host_stats!(native_stats);

impl From<RuntimeStats> for NativeStats {
  fn from(stats: RuntimeStats) -> NativeStats {
    NativeStats {
      outcomes: stats.outcomes.into(),
      refused: stats.refused as f64,
      hosts: stats.hosts,
      host_restarts: stats.host_restarts as f64,
      runs_lost_to_host_exits: stats.runs_lost_to_host_exits as f64,
      runs_reexecuted: stats.runs_reexecuted as f64,
      reexecutions_diverged: stats.reexecutions_diverged as f64,
      history_bytes: stats.history_bytes as f64,
      hosts_of_one_run: stats.hosts_of_one_run,
      quarantined_programs: stats.quarantined_programs as f64,
      last_host_exit: stats.last_host_exit,
      host_pids: stats.host_pids,
      sandbox: Protection::ALL
        .iter()
        .map(|protection| (protection.name().to_owned(), stats.sandbox.contains(*protection)))
        .collect(),
      host_recycles: stats.host_recycles as f64,
      ..NativeStats::of_hosts(stats.host)
    }
  }
}

struct Core {
  supervisor: Arc<Supervisor>,
  calls: Arc<CallOutbox>,
  disposed: AtomicBool,
  max_output_bytes: u64,
}

impl Core {
  /// Stop every run, then every host, and wait for them.
  fn shutdown(&self) {
    self.disposed.store(true, Ordering::SeqCst);
    self.supervisor.shutdown();
  }
}

/// Runs programs in isolate-host processes, each run in a V8 isolate of
/// its own on a thread of its own while in flight (one `V8CodeRuntime`).
#[napi]
pub struct NativeRuntime {
  core: Arc<Core>,
  /// Node's main thread polling the hosts' Node bells (`node_bell.rs`);
  /// closed at disposal, at the environment's teardown, or when this is
  /// collected.
  listener: Option<Rc<NodeListener>>,
}

type Resolver<T> = Box<dyn FnOnce(Env) -> Result<T> + Send>;

#[napi]
impl NativeRuntime {
  /// Start the runtime and its first isolate host (returns once the host
  /// is ready). `onCalls(ids, args)` receives each batch of binding calls
  /// (layout: `BINDING_CALL_IDS` numbers per call) and answers them through
  /// `reply()` (`REPLY_IDS` numbers per reply).
  #[napi(constructor)]
  pub fn new(
    env: Env,
    config: NativeConfig,
    #[napi(ts_arg_type = "(ids: Uint32Array, args: Array<string | string[]>) => void")] on_calls: Function<
      BindingCallBatch,
      Unknown<'static>,
    >,
  ) -> Result<Self> {
    let node = env.get_node_version()?;
    let facts = NodeFacts {
      node_major: node.major,
      node_version: format!("{}.{}.{}", node.major, node.minor, node.patch),
      hardware_concurrency: available_parallelism(),
      platform: NodeFacts::navigator_platform(),
    };
    let executable = host_process::host_executable().map_err(|message| Error::new(Status::GenericFailure, message))?;
    let settings =
      config::check(&config, facts, executable).map_err(|message| Error::new(Status::InvalidArg, message))?;

    let calls = Arc::new(CallOutbox::default());
    let weak_calls = Arc::downgrade(&calls);
    let on_calls_here = OnCallsHere::new(&env, &on_calls)?;
    let wake: NodeWake = on_calls
      .build_threadsafe_function::<()>()
      .weak::<true>()
      .build_callback(move |_| Ok(binding_call_batch(&weak_calls)))?;
    calls.connect(Box::new(move || {
      wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
    }));
    let max_output_bytes = settings.config.max_output_bytes;
    let supervisor =
      Supervisor::start(settings, calls.clone()).map_err(|message| Error::new(Status::GenericFailure, message))?;
    let weak_supervisor = Arc::downgrade(&supervisor);
    calls.connect_take_for_linger(Box::new(move |watching| {
      weak_supervisor.upgrade().is_some_and(|supervisor| supervisor.take_for_linger(watching))
    }));
    let listener = listen_on_node_bells(&env, &supervisor, &calls, on_calls_here).map(Rc::new);
    let core = Arc::new(Core { supervisor, calls, disposed: AtomicBool::new(false), max_output_bytes });
    // At environment teardown (process exit, worker exit) stop every run
    // and host: no host may outlive the environment that owns it; and no
    // libuv handle of ours may outlive the loop.
    let hook_listener = listener.clone();
    env.add_env_cleanup_hook(core.clone(), move |core| {
      if let Some(listener) = hook_listener {
        listener.close();
      }
      core.shutdown();
    })?;
    Ok(NativeRuntime { core, listener })
  }

  /// Run one program. Resolves with the run's result; rejects only when the
  /// runtime is disposed or the queue is full (`maxQueuedRuns` runs wait
  /// for admission behind `maxConcurrentRuns` in flight).
  #[napi(ts_return_type = "Promise<NativeRunResult>")]
  pub fn run<'env>(&self, env: &'env Env, run_id: u32, program: String, bindings_json: String) -> Result<Object<'env>> {
    if self.core.disposed.load(Ordering::SeqCst) {
      return Err(Error::new(Status::GenericFailure, "run() after disposal"));
    }
    BindingsDescriptor::parse(&bindings_json).map_err(|message| Error::new(Status::InvalidArg, message))?;
    let (deferred, promise) = env.create_deferred::<NativeRunResult, Resolver<NativeRunResult>>()?;
    let deliver = Box::new(move |end: RunEnd| match end {
      RunEnd::Output(output, cost) => {
        let result = NativeRunResult::new(output, cost);
        deferred.resolve(Box::new(move |_env| Ok(result)));
      }
      RunEnd::Refused => deferred.reject(Error::new(Status::GenericFailure, queue_full())),
    });
    self
      .core
      .supervisor
      .submit(run_id, program, bindings_json, deliver)
      .map_err(|message| Error::new(Status::GenericFailure, message))?;
    Ok(promise)
  }

  /// Abort a live run; its result reports `abort` with `reason`.
  #[napi]
  pub fn abort(&self, run_id: u32, reason: Utf16String) {
    self.core.supervisor.abort(run_id, reason.to_vec());
  }

  /// Answer binding calls: reply `i` settles (run `ids[4i]`, call `ids[4i+1]`)
  /// as `ids[4i+2]` says (`REPLY_REJECT`, `REPLY_JSON`, `REPLY_TEXT`: see
  /// `dsh_protocol::frame::ReplyKind`) with its text, the next of `texts`;
  /// a JSON reply with `ids[4i+3]` long strings beside it (0 for every
  /// other) takes the next `1 + ids[4i+3]` texts too: their paths, then
  /// the strings (`dsh_protocol::frame::Answer`). Replies for runs that
  /// have ended are dropped. Returns whether a live run was answered: the
  /// host should then call `linger()` once its current turn is over.
  #[napi(ts_args_type = "ids: Uint32Array, texts: Array<string>")]
  pub fn reply(&self, ids: &[u32], texts: Vec<JsReplyText>) -> Result<bool> {
    let invalid = |why: String| Error::new(Status::InvalidArg, why);
    if !ids.len().is_multiple_of(REPLY_IDS as usize) {
      return Err(invalid(format!("reply ids must hold {REPLY_IDS} numbers per reply")));
    }
    let mut texts = texts.into_iter().map(|JsReplyText(text)| text);
    let mut replies = Vec::with_capacity(ids.len() / REPLY_IDS as usize);
    for id in ids.chunks_exact(REPLY_IDS as usize) {
      let kind = match id[2] {
        REPLY_REJECT => ReplyKind::Reject,
        REPLY_JSON => ReplyKind::Json,
        REPLY_TEXT => ReplyKind::Text,
        other => return Err(invalid(format!("unknown reply kind {other}"))),
      };
      let missing = || invalid("fewer reply texts than the ids name".to_owned());
      let mut answer = Answer::plain(kind, texts.next().ok_or_else(missing)?);
      if id[3] > 0 {
        if kind != ReplyKind::Json {
          return Err(invalid("strings beside a reply that is not JSON".to_owned()));
        }
        answer.paths = texts.next().ok_or_else(missing)?.to_string();
        answer.strings = texts.by_ref().take(id[3] as usize).collect();
        if answer.strings.len() != id[3] as usize {
          return Err(missing());
        }
      }
      replies.push(Reply { run_id: id[0], call_id: id[1], answer });
    }
    if texts.next().is_some() {
      return Err(invalid("more reply texts than the ids name".to_owned()));
    }
    Ok(self.core.supervisor.reply(replies))
  }

  /// Wait briefly, awake, for an answered run's next call or its end (at
  /// most `LINGER_SPIN`, backing off when neither follows), so that its
  /// wake-up does not find this thread asleep. Call it between event-loop
  /// turns (`setImmediate`), never inside the turn that answered. Returns
  /// the calls waiting as it ends, `[ids, args]` as `onCalls` takes them,
  /// for the caller to hand to `onCalls` itself (undefined when none).
  #[napi(ts_return_type = "[Uint32Array, Array<string | string[]>] | undefined")]
  pub fn linger(&self) -> Option<LingeredCalls> {
    self.core.calls.linger()
  }

  /// A result for a run that fails before it starts (a pre-aborted signal),
  /// through the same output ledger as every other result.
  #[napi]
  pub fn fail_before_start(&self, kind: String, message: Utf16String) -> Result<NativeRunResult> {
    // The kinds a run can end with before it starts (a pre-aborted signal
    // is `abort`); the rest need a run.
    let kind = FailureKind::from_name(&kind)
      .filter(|kind| matches!(kind, FailureKind::Abort | FailureKind::Exception))
      .ok_or_else(|| Error::new(Status::InvalidArg, format!("a run cannot fail before it starts with {kind}")))?;
    let ledger = OutputLedger::new(self.core.max_output_bytes);
    let cost = RunCost::default().ended(ledger.log_bytes(), 0);
    let output = ledger.finish_failure(kind, message.to_vec());
    self.core.supervisor.count_outcome(&output.completion);
    Ok(NativeRunResult::new(output, cost))
  }

  /// What the runtime is doing now, and what it has done (NativeStats).
  #[napi]
  pub fn stats(&self) -> NativeStats {
    self.core.supervisor.stats().into()
  }

  /// Dispose: live runs resolve `abort: runtime disposed`, every isolate
  /// host is stopped and its exit awaited, then the promise resolves.
  #[napi(ts_return_type = "Promise<void>")]
  pub fn dispose<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
    let (deferred, promise) = env.create_deferred::<(), Resolver<()>>()?;
    self.core.supervisor.begin_disposal();
    if let Some(listener) = &self.listener {
      listener.close();
    }
    let core = self.core.clone();
    dsh_named_thread::spawn("dsh-v8-dispose", move || {
      core.shutdown();
      deferred.resolve(Box::new(|_env| Ok(())));
    })
    .map_err(|error| Error::new(Status::GenericFailure, format!("disposal failed to start: {error}")))?;
    Ok(promise)
  }
}

/// Node's main thread polling `supervisor`'s Node bells on `env`'s loop,
/// with the hosts told to ring them, and handing the calls a ring brings
/// to `onCalls` at once (`on_calls_here`); None where it cannot (see
/// [`NodeListener::start`]).
fn listen_on_node_bells(
  env: &Env,
  supervisor: &Arc<Supervisor>,
  calls: &Arc<CallOutbox>,
  on_calls_here: OnCallsHere,
) -> Option<NodeListener> {
  let fd = supervisor.node_bells_fd()?;
  let (rang, stopped) = (Arc::downgrade(supervisor), Arc::downgrade(supervisor));
  let calls = calls.clone();
  let on_calls_here = Rc::new(on_calls_here);
  let released = on_calls_here.clone();
  let listener = NodeListener::start(
    env,
    fd,
    Box::new(move || {
      if let Some(supervisor) = rang.upgrade() {
        on_calls_here.take_and_hand(&calls, || supervisor.node_bell_rang());
      }
    }),
    Box::new(move || {
      released.release();
      if let Some(supervisor) = stopped.upgrade() {
        supervisor.node_stops_listening();
      }
    }),
  )?;
  supervisor.node_starts_listening();
  Some(listener)
}

/// The CPUs this process may use, as the harness's Node counts them
/// (`os.availableParallelism()`, libuv's `uv_available_parallelism`, which
/// the node binary exports to addons), for the programs' `navigator`; the
/// standard library's count where the symbol is not there (unit tests).
fn available_parallelism() -> u32 {
  type UvAvailableParallelism = unsafe extern "C" fn() -> libc::c_uint;
  // SAFETY: dlsym with RTLD_DEFAULT only looks a name up in the objects
  // already loaded; the name is a NUL-terminated literal.
  let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"uv_available_parallelism".as_ptr()) };
  if symbol.is_null() {
    return std::thread::available_parallelism().map_or(1, |count| count.get() as u32);
  }
  // SAFETY: the symbol is libuv's `unsigned int uv_available_parallelism(void)`,
  // which takes nothing and only reads the process's CPU affinity and limits.
  let count = unsafe { std::mem::transmute::<*mut libc::c_void, UvAvailableParallelism>(symbol)() };
  count.max(1)
}
