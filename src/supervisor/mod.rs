//! The supervisor: the runs of one runtime and the isolate hosts they run
//! in, seen from the harness.
//!
//! It owns one record per run from `run()` until its result is delivered,
//! and `isolateHosts` host slots: it starts their hosts (the runtime is
//! ready when every first host is), admits runs and places each on a
//! host, reads everything a host sends (one reader thread per host), hears
//! from each at least every heartbeat, and replaces a host that ends.
//!
//! Admission is the harness's: at most `maxConcurrentRuns` runs are placed
//! on hosts at once (a host's own scheduler then admits by its compute
//! slots), the rest wait here in a FIFO queue of at most `maxQueuedRuns`.
//! A run goes to the ready host with the fewest runs placed, so a host's
//! death costs about its share of the runs in flight, not all of them.
//!
//! A host's end is a run outcome, never the harness's. Each run keeps its
//! history here (`dsh_protocol::history`: its calls and their replies; its
//! log entries are in the harness's replay of its ledger, fed from the
//! host's journal, whose bytes are in the kernel as soon as they are
//! written). When its host ends, a run that had not started goes back to
//! the front of the queue; a run that was waiting on a tool is executed
//! again on another host from its history, its recorded calls answered
//! from it (no tool is called twice) and its recorded log entries not
//! written twice; any other run (it may be what ended the host) settles
//! `worker-exit` with what happened and the logs it wrote. A run on
//! [`MAX_HOSTS_LOST`] hosts that ended fails instead. Deaths that follow each other
//! quickly (a program that kills every host it lands on, retried) back off
//! before the next start ([`restart_delay`]): hosts are never spawned
//! without bound, and runs that wait meanwhile still meet their wall
//! ceiling.
//!
//! Who does what: Node's main thread submits, aborts, replies and asks for
//! stats; the reader thread of each host turns its frames into record
//! updates, binding calls and results, reading the host's journal before each
//! frame of its channel and once the host has ended; the supervisor thread sends heartbeats,
//! kills a host that stops answering, starts replacements and times out
//! runs waiting in the queue.
//!
//! Here: the runs' and the hosts' state under one lock, and what Node's
//! main thread calls (submit, abort, reply, shutdown). Each other subject
//! has a file: `placement.rs` (admission, and which host a run goes to),
//! `host_life.rs` (a host's start, back-off, recycling and end, and what
//! becomes of its runs), `inbound.rs` (what a host sends, read and checked
//! by its reader thread), `heartbeat.rs` (the supervisor thread and
//! `stats()`), `stats_requests.rs` (the numbers of its requests, which
//! only a host that read one can answer), `run_record.rs` (a run's record
//! and its fate).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dsh_protocol::config::RuntimeConfig;
use dsh_protocol::failure::{HostLoss, StopReason};
use dsh_protocol::frame::{encode_replies, HostStats, Reply, RunSeed, SplicedFrames, ToHost};
use dsh_protocol::history::ReplyVerdict;
use dsh_protocol::ledger::{Completion, FailureKind, Outcomes, Output};
use dsh_protocol::lock::lock;
use dsh_protocol::protections::Protections;

use crate::binding_calls::CallOutbox;
use crate::config::Settings;
use crate::host_process::HostEnd;
use crate::node_bell::NodeBells;
use crate::quarantine::Quarantine;
use crate::run_report::RunCost;

use heartbeat::supervise;
pub use heartbeat::RuntimeStats;
use host_life::{Host, Slot, HOST_START_TIMEOUT};
use run_record::{stopped, FinishWith, Outgoing, RunRecord};
use stats_requests::StatsRequests;

mod heartbeat;
mod host_life;
mod inbound;
mod listening;
mod placement;
mod run_record;
mod stats_requests;

/// The most hosts of one run alive at once (beside the `isolateHosts`
/// shared ones): each holds a run that may end it (a run that was
/// computing when its shared host died, a run on its second dead host, a
/// quarantined program), so that run's end costs nobody else. Runs beyond
/// them wait for one.
pub const MAX_HOSTS_OF_ONE_RUN: usize = 2;

/// How long after disposal begins a host that has not exited is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How a run ends, for whoever waits on it.
pub enum RunEnd {
  /// Its output, and what it cost.
  Output(Output, RunCost),
  /// A host's queue was full (the harness's own queue refuses at `run()`).
  Refused,
}

/// Called once with a run's end, on whichever thread ends it.
pub type Deliver = Box<dyn FnOnce(RunEnd) + Send>;

impl Settings {
  /// What the host of `slot` is told: its share of the prepared reserve
  /// and of the machine's busy slots (the shares add up to the whole), and
  /// room for every run the harness may place on it.
  ///
  /// The whole reserve is the first host's: runs go to it whenever no host
  /// has fewer runs ([`State::least_loaded`]), so runs one after another
  /// all find their isolate there, and the others take runs only beside
  /// busier ones, making each run's isolate as it comes (as every run of a
  /// burst larger than the reserve does anyway).
  fn host_config(&self, slot: usize) -> RuntimeConfig {
    let hosts = self.shared_hosts();
    let mut config = self.config.clone();
    if self.is_alone(slot) {
      // One run, which makes its own isolate: nothing kept prepared.
      config.prepared_isolates = 0;
      config.busy_slots = 1;
      config.max_queued_runs = 1;
      return config;
    }
    let share = |total: usize| total / hosts + usize::from(slot < total % hosts);
    config.prepared_isolates = if slot == 0 { self.config.prepared_isolates } else { 0 };
    config.busy_slots = share(self.config.busy_slots).max(1);
    config.max_queued_runs = self.config.max_concurrent_runs;
    config
  }

  /// How many slots are the shared hosts' (the first ones).
  fn shared_hosts(&self) -> usize {
    self.hosts.max(1)
  }

  /// Whether `slot` is for hosts of one run (after the shared ones).
  fn is_alone(&self, slot: usize) -> bool {
    slot >= self.shared_hosts()
  }
}

#[derive(Default)]
struct State {
  runs: HashMap<u32, RunRecord>,
  /// Runs waiting for admission or for a host, in the order they came.
  pending: VecDeque<u32>,
  /// Runs waiting for a host of their own, in the order they came.
  pending_alone: VecDeque<u32>,
  /// Programs that ended a host, whose runs are placed alone.
  quarantine: Quarantine,
  /// Hosts of one run that died in a row within [`HEALTHY_LIFE`]: their
  /// own backoff, so that they never slow the shared hosts' restarts.
  quick_deaths_alone: u32,
  /// Hosts of one run that could not be started or died before ready, in
  /// a row.
  start_failures_alone: u32,
  slots: Vec<Slot>,
  generation: u64,
  quick_deaths: u32,
  start_failures: u32,
  readers: Vec<JoinHandle<()>>,
  /// What the last host to become ready said it has in effect.
  protections: Option<Protections>,
  hosts_recycled: u64,
  /// Disposal has begun ([`Supervisor::begin_disposal`]): no run is taken,
  /// and every run recorded ends `abort: runtime disposed`.
  disposing: bool,
  /// The hosts have been told to stop ([`Supervisor::shutdown`]).
  hosts_told_to_stop: bool,
  finished: bool,
  stats_requests: StatsRequests,
  /// CPU, disposals and memory returns of the hosts that have ended.
  ended_hosts: HostStats,
  outcomes: Outcomes,
  refused: u64,
  host_starts: u64,
  runs_lost: u64,
  runs_reexecuted: u64,
  reexecutions_diverged: u64,
  /// Bytes held by the histories of the runs in flight.
  history_bytes: u64,
  last_host_end: Option<String>,
}

impl State {
  fn in_flight(&self) -> usize {
    self.slots.iter().map(|slot| slot.placed).sum()
  }

  /// The live host of `generation`, if it is still its slot's.
  fn host(&self, generation: u64) -> Option<&Arc<Host>> {
    self.slots.iter().filter_map(|slot| slot.host.as_ref()).find(|host| host.generation == generation)
  }

  /// The ready host with the fewest runs placed, the first of them on a
  /// tie: runs one after another go to the same host, the one holding the
  /// prepared reserve ([`Settings::host_config`]), whose threads the last
  /// run left awake. Taking ties in turn instead sent every other run to a
  /// host that had slept since the run before last: measured on a 2-vCPU
  /// VM, Code Mode shaped runs one at a time after an idle spell took
  /// 2.6-3.0 ms at the median that way, 2.0-2.3 ms this way.
  fn least_loaded(&self, shared: usize) -> Option<usize> {
    let count = shared.min(self.slots.len());
    (0..count)
      .filter(|&i| self.slots[i].takes_runs() && self.slots[i].retiring.is_none())
      .min_by_key(|&i| self.slots[i].placed)
  }
}

pub struct Supervisor {
  settings: Settings,
  state: Mutex<State>,
  /// Signalled on every change the waiters below care about: a host ready,
  /// stats answered, a host ended, disposal.
  changed: Condvar,
  calls: Arc<CallOutbox>,
  thread: Mutex<Option<JoinHandle<()>>>,
  /// The hosts alive, for the main thread's [`Supervisor::take_for_linger`]
  /// (apart from the state, whose lock a reader may hold a while). Lock
  /// order: `state` before `hosts` (`start_host`), and an inbox's lock
  /// before `state` (a frame's handling): so `hosts` is never held while an
  /// inbox or the state is taken (`take_for_linger` copies the list first).
  hosts: Mutex<Vec<Arc<Host>>>,
  /// The hosts' Node bells, for Node's main thread to poll (`node_bell.rs`);
  /// None where the set could not be made (the readers pass every call on).
  node_bells: Option<NodeBells>,
  /// Node's main thread polls `node_bells`: hosts are told to ring them
  /// (changed, and read for a new host, under `hosts`' lock).
  node_listening: AtomicBool,
}

impl Supervisor {
  /// Start the supervisor and its hosts; returns once every host is ready,
  /// or with why one could not be.
  pub fn start(settings: Settings, calls: Arc<CallOutbox>) -> Result<Arc<Supervisor>, String> {
    let hosts = settings.shared_hosts();
    let supervisor = Arc::new(Supervisor {
      settings,
      state: Mutex::default(),
      changed: Condvar::new(),
      calls,
      thread: Mutex::new(None),
      hosts: Mutex::default(),
      node_bells: NodeBells::new().ok(),
      node_listening: AtomicBool::new(false),
    });
    {
      let mut state = lock(&supervisor.state);
      state.slots.resize_with(hosts, Slot::default);
      let started = (0..hosts).try_for_each(|slot| supervisor.start_host(&mut state, slot));
      let deadline = Instant::now() + HOST_START_TIMEOUT;
      let failure = loop {
        if let Err(message) = &started {
          break Some(message.clone());
        }
        if state.slots.iter().all(|slot| slot.ready) {
          break None;
        }
        if state.slots.iter().any(|slot| slot.host.is_none()) {
          break Some(state.last_host_end.clone().unwrap_or_else(|| "it ended".to_owned()));
        }
        let now = Instant::now();
        if now >= deadline {
          break Some(format!("no answer within {} s", HOST_START_TIMEOUT.as_secs()));
        }
        state = supervisor.wait(state, deadline - now);
      };
      if let Some(why) = failure {
        state.disposing = true;
        for host in state.slots.iter().filter_map(|slot| slot.host.clone()) {
          host.kill(HostEnd::Unresponsive { silent_ms: 0 });
        }
        let at = supervisor.settings.executable.display();
        return Err(format!("the isolate host did not start: {why} (the host executable: {at})"));
      }
    }
    let weak = Arc::downgrade(&supervisor);
    let thread = dsh_named_thread::spawn("dsh-supervisor", move || supervise(&weak))
      .map_err(|error| format!("the supervisor thread could not start: {error}"))?;
    *lock(&supervisor.thread) = Some(thread);
    Ok(supervisor)
  }

  fn wait<'a>(&self, state: MutexGuard<'a, State>, timeout: Duration) -> MutexGuard<'a, State> {
    self.changed.wait_timeout(state, timeout).map_or_else(|p| p.into_inner().0, |(guard, _)| guard)
  }

  /// Take a run. Its end is delivered once, from whichever thread ends it.
  pub fn submit(&self, run_id: u32, program: String, bindings_json: String, deliver: Deliver) -> Result<(), String> {
    let mut state = lock(&self.state);
    if state.disposing {
      return Err("run() after disposal".to_owned());
    }
    let config = &self.settings.config;
    let starts_now = state.pending.is_empty()
      && state.in_flight() < config.max_concurrent_runs
      && state.slots.iter().any(|slot| slot.ready);
    if !starts_now && state.pending.len() + state.pending_alone.len() >= config.max_queued_runs {
      state.refused += 1;
      return Err(queue_full());
    }
    let deadline = Instant::now() + Duration::from_secs_f64(config.max_wall_ms / 1000.0);
    let mut record = RunRecord::new(
      deliver,
      config.max_output_bytes,
      self.settings.max_tool_calls,
      fresh_seed()?,
      program,
      bindings_json,
      deadline,
    );
    record.alone = state.quarantine.holds(&record.program, Instant::now());
    let alone = record.alone;
    state.runs.insert(run_id, record);
    if alone {
      state.pending_alone.push_back(run_id);
    } else {
      state.pending.push_back(run_id);
    }
    self.admit(&mut state);
    Ok(())
  }

  /// Abort a run: on its host, or here if it waits in the queue.
  pub fn abort(&self, run_id: u32, reason: Vec<u16>) {
    let mut state = lock(&self.state);
    // Disposal ends every run it finds, as disposed.
    if state.disposing {
      return;
    }
    let Some(record) = state.runs.get(&run_id) else { return };
    if let Some(host) = record.host.and_then(|generation| state.host(generation)).cloned() {
      host.send(&ToHost::Abort { run_id, reason: reason.clone() });
      if let Some(record) = state.runs.get_mut(&run_id) {
        record.aborted = Some(reason);
      }
      return;
    }
    state.pending.retain(|pending| *pending != run_id);
    state.pending_alone.retain(|pending| *pending != run_id);
    if let Some(delivery) = self.finish(&mut state, run_id, stopped(&StopReason::Abort(reason), &self.settings.config))
    {
      drop(state);
      delivery.deliver();
    }
  }

  /// Take the tools' replies into their runs' histories, and send each to
  /// the host its run is on when the run's current execution has made the
  /// call (a run being executed again gets it when it makes the call
  /// again). Returns whether a live run was answered.
  pub fn reply(&self, replies: Vec<Reply>) -> bool {
    let mut state = lock(&self.state);
    let mut by_host: Vec<(Arc<Host>, Vec<Outgoing>)> = Vec::new();
    let mut touched = Vec::new();
    for Reply { run_id, call_id, answer } in replies {
      let Some(record) = state.runs.get_mut(&run_id) else { continue };
      let bytes = answer.bytes();
      let verdict = record.history.reply(call_id, answer);
      if !matches!(verdict, ReplyVerdict::Unwanted) {
        record.cost.answered(bytes);
      }
      let outgoing = match verdict {
        ReplyVerdict::Unwanted | ReplyVerdict::Held { send: false, .. } => None,
        ReplyVerdict::Held { send: true, .. } => Some(Outgoing::Held { run_id, call_id }),
        ReplyVerdict::Pass(answer) => Some(Outgoing::Passed(Reply { run_id, call_id, answer })),
      };
      let on = record.host;
      touched.push(run_id);
      let (Some(outgoing), Some(host)) = (outgoing, on.and_then(|generation| state.host(generation))) else {
        continue;
      };
      match by_host.iter_mut().find(|(known, _)| known.generation == host.generation) {
        Some((_, batch)) => batch.push(outgoing),
        None => by_host.push((host.clone(), vec![outgoing])),
      }
    }
    let frames: Vec<(Arc<Host>, SplicedFrames)> = by_host
      .into_iter()
      .map(|(host, batch)| {
        let mut frame = SplicedFrames::default();
        let replies: Vec<_> = batch.iter().filter_map(|outgoing| outgoing.answer(&state)).collect();
        encode_replies(&mut frame, &replies);
        (host, frame)
      })
      .collect();
    // Only once the replies are encoded from the histories: a history past
    // its cap lets its replies go.
    touched.dedup();
    for run_id in touched {
      self.account_history(&mut state, run_id);
    }
    drop(state);
    let answered = !frames.is_empty();
    for (host, frame) in frames {
      host.link.send(frame);
    }
    answered
  }

  /// Count `run_id`'s history after it changed, and keep it within its
  /// cap and all runs' histories within theirs: a history past either is
  /// given up (the run goes on, but cannot be executed again).
  fn account_history(&self, state: &mut State, run_id: u32) {
    let caps = self.settings.history_caps;
    let Some(record) = state.runs.get_mut(&run_id) else { return };
    let bytes = record.history.bytes();
    state.history_bytes = state.history_bytes.saturating_sub(record.history_counted).saturating_add(bytes);
    record.history_counted = bytes;
    let over = if bytes > caps.per_run_bytes() {
      HostLoss::HistoryOverCap { key: "maxRunHistoryMb", mb: caps.per_run_mb }
    } else if state.history_bytes > caps.total_bytes() {
      HostLoss::HistoryOverCap { key: "maxHistoryMb", mb: caps.total_mb }
    } else {
      return;
    };
    record.history.give_up();
    record.history_over = Some(over);
    state.history_bytes = state.history_bytes.saturating_sub(std::mem::take(&mut record.history_counted));
  }

  /// A run that fails before it is submitted (a pre-aborted signal) is
  /// still counted.
  pub fn count_outcome(&self, completion: &Completion) {
    lock(&self.state).outcomes.count(completion);
  }

  /// Disposal begins, as `dispose()` is called (on Node's main thread,
  /// before it returns): from now on no run is taken, and every run still
  /// queued or live ends `abort: runtime disposed`, whatever its host
  /// reports after this. Without it a result crossing as disposal begins
  /// (a tool that disposes of its runtime, then answers) would race the
  /// hosts' stop. [`Supervisor::shutdown`] does the rest.
  pub fn begin_disposal(&self) {
    lock(&self.state).disposing = true;
  }

  /// Dispose: runs in the queue end `abort: runtime disposed`, each host
  /// stops its runs and exits, or is killed after a grace period, and
  /// every run it held ends the same; returns once every host thread is
  /// done.
  pub fn shutdown(&self) {
    let mut state = lock(&self.state);
    if !state.hosts_told_to_stop {
      state.hosts_told_to_stop = true;
      state.disposing = true;
      let mut pending: Vec<u32> = state.pending.drain(..).collect();
      pending.extend(state.pending_alone.drain(..));
      let mut deliveries = Vec::new();
      for run_id in pending {
        deliveries.extend(self.finish(&mut state, run_id, stopped(&StopReason::Disposed, &self.settings.config)));
      }
      for host in state.slots.iter().filter_map(|slot| slot.host.clone()) {
        host.send(&ToHost::Shutdown);
      }
      self.changed.notify_all();
      drop(state);
      for delivery in deliveries {
        delivery.deliver();
      }
      state = lock(&self.state);
    }
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    while state.slots.iter().any(|slot| slot.host.is_some()) {
      let now = Instant::now();
      if now >= deadline {
        for host in state.slots.iter().filter_map(|slot| slot.host.clone()) {
          host.kill(HostEnd::Unresponsive { silent_ms: SHUTDOWN_GRACE.as_millis() as u64 });
        }
        state = self.wait(state, Duration::from_millis(100));
        continue;
      }
      state = self.wait(state, deadline - now);
    }
    // Runs still recorded lost their host during disposal.
    let left: Vec<u32> = state.runs.keys().copied().collect();
    let mut deliveries = Vec::new();
    for run_id in left {
      deliveries.extend(self.finish(&mut state, run_id, stopped(&StopReason::Disposed, &self.settings.config)));
    }
    state.finished = true;
    let readers = std::mem::take(&mut state.readers);
    self.changed.notify_all();
    drop(state);
    for delivery in deliveries {
      delivery.deliver();
    }
    for reader in readers {
      let _ = reader.join();
    }
    if let Some(thread) = lock(&self.thread).take() {
      let _ = thread.join();
    }
  }

  /// Remove a run's record and settle its output through its ledger.
  fn finish(&self, state: &mut State, run_id: u32, with: FinishWith) -> Option<Delivery> {
    let record = state.runs.remove(&run_id)?;
    state.history_bytes = state.history_bytes.saturating_sub(record.history_counted);
    if let Some(host) = record.host.and_then(|generation| state.host(generation)).cloned() {
      state.slots[host.slot].placed = state.slots[host.slot].placed.saturating_sub(1);
      if self.settings.is_alone(host.slot) {
        // A host of one run: its run is over, and so is it.
        host.send(&ToHost::Shutdown);
      }
    }
    let ledger = record.ledger;
    let cost = record.cost.ended(ledger.log_bytes(), record.history.reexecutions());
    let output = match with {
      FinishWith::Completion(Completion::NoValue) => ledger.finish_no_value(),
      FinishWith::Completion(Completion::Value(json)) => ledger.finish_value(json),
      FinishWith::Completion(Completion::Failure { kind: FailureKind::OutputLimit, .. }) => {
        ledger.finish_output_limit()
      }
      FinishWith::Completion(Completion::Failure { kind, message }) | FinishWith::Failure(kind, message) => {
        ledger.finish_failure(kind, message)
      }
    };
    state.outcomes.count(&output.completion);
    Some(Delivery { deliver: record.deliver, end: RunEnd::Output(output, cost) })
  }
}

/// A run's seed, from the kernel's CSPRNG: the run's random numbers are
/// a ChaCha20 stream from it, as strong as the kernel's own.
fn fresh_seed() -> Result<RunSeed, String> {
  let mut bytes = [0u8; 32];
  random_bytes(&mut bytes).map_err(|error| format!("no random seed for the run: {error}"))?;
  let mut seed = [0u64; 4];
  for (word, chunk) in seed.iter_mut().zip(bytes.chunks_exact(8)) {
    let mut le = [0u8; 8];
    le.copy_from_slice(chunk);
    *word = u64::from_le_bytes(le);
  }
  Ok(seed)
}

/// Fill `bytes` from the kernel's CSPRNG.
fn random_bytes(bytes: &mut [u8]) -> Result<(), std::io::Error> {
  let mut filled = 0;
  while filled < bytes.len() {
    let rest = &mut bytes[filled..];
    // SAFETY: getrandom writes at most `rest.len()` bytes into `rest`.
    let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
    if n < 0 {
      let error = std::io::Error::last_os_error();
      if error.kind() == std::io::ErrorKind::Interrupted {
        continue;
      }
      return Err(error);
    }
    filled += n as usize;
  }
  Ok(())
}

pub fn queue_full() -> String {
  "the run queue is full (config.maxQueuedRuns); wait for runs to finish or raise the limit".to_owned()
}

/// A run's end on its way to its caller: delivered outside every lock.
struct Delivery {
  deliver: Deliver,
  end: RunEnd,
}

impl Delivery {
  fn deliver(self) {
    (self.deliver)(self.end);
  }
}

#[cfg(test)]
mod tests;
