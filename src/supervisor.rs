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
//! updates, host calls and results, reading the host's journal before each
//! frame of its channel and once the host has ended; the supervisor thread sends heartbeats,
//! kills a host that stops answering, starts replacements and times out
//! runs waiting in the queue.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dsh_protocol::config::RuntimeConfig;
use dsh_protocol::failure::{failure, HostLoss, StopReason, MAX_HOSTS_LOST};
use dsh_protocol::frame::{
  encode_replies, encode_submit, Answer, FromHost, HostCall, HostStats, Reply, ReplyKind, RunSeed, Submission, ToHost,
};
use dsh_protocol::history::{CallIdentity, CallVerdict, Divergence, LogVerdict, ReplyVerdict, RunHistory};
use dsh_protocol::inbox::{Inbox, Next, Ready};
use dsh_protocol::ledger::{Completion, FailureKind, Outcomes, Output, OutputLedger};
use dsh_protocol::lock::lock;
use dsh_protocol::protections::{Protection, Protections};

use crate::config::HistoryCaps;
use crate::host_calls::CallOutbox;
use crate::host_process::{spawn, HostEnd, HostLink, Spawned, StderrTail};
use crate::quarantine::Quarantine;
use crate::run_report::RunCost;
use crate::NativeStats;

/// The most hosts of one run alive at once (beside the `isolateHosts`
/// shared ones): each holds a run that may end it (a run that was
/// computing when its shared host died, a run on its second dead host, a
/// quarantined program), so that run's end costs nobody else. Runs beyond
/// them wait for one.
pub const MAX_HOSTS_OF_ONE_RUN: usize = 2;

/// How long a host may take from its start to `Ready`.
const HOST_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Hosts that died before they were ready, in a row, after which the runs
/// waiting for a host fail (`worker-exit`) instead of waiting on.
const MAX_START_FAILURES: u32 = 3;

/// A host that lived at least this long before it died ends a crash loop:
/// the next host starts at once.
const HEALTHY_LIFE: Duration = Duration::from_secs(5);

/// How long after disposal begins a host that has not exited is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long `stats()` waits for the hosts' answers before it reports what
/// a silent host said last.
const STATS_WAIT: Duration = Duration::from_millis(250);

/// The wait before starting a host after `quick_deaths` hosts in a row died
/// within [`HEALTHY_LIFE`] of their start: none for the first, then 50 ms
/// doubling up to 2 s. A program that kills every host it lands on,
/// retried as fast as it fails, so starts at most one host per 2 s.
pub fn restart_delay(quick_deaths: u32) -> Duration {
  match quick_deaths {
    0 | 1 => Duration::ZERO,
    n => Duration::from_millis(50u64 << (n - 2).min(6)).min(Duration::from_secs(2)),
  }
}

/// How a run ends, for whoever waits on it.
pub enum RunEnd {
  /// Its output, and what it cost.
  Output(Output, RunCost),
  /// A host's queue was full (the harness's own queue refuses at `run()`).
  Refused,
}

/// Called once with a run's end, on whichever thread ends it.
pub type Deliver = Box<dyn FnOnce(RunEnd) + Send>;

/// What the supervisor settles for, from the runtime's config.
pub struct Settings {
  pub config: RuntimeConfig,
  pub executable: PathBuf,
  /// A host silent for this long is killed and replaced.
  pub unresponsive_after: Duration,
  /// How many hosts share the runs.
  pub hosts: usize,
  /// A host that reports a protection off ends before it takes a run
  /// (`requireSandbox`).
  pub require_sandbox: bool,
  /// A host whose resident memory is above this many bytes, once it has
  /// run a program, takes no more runs and is replaced when its runs end
  /// (`hostMaxRssMb`).
  pub recycle_above_bytes: u64,
  /// What runs' histories may hold (`maxRunHistoryMb`, `maxHistoryMb`).
  pub history_caps: HistoryCaps,
  /// The most binding calls one run may make (`maxToolCalls`).
  pub max_tool_calls: u32,
}

impl Settings {
  /// What the host of `slot` is told: its share of the prepared reserve
  /// and of the machine's busy slots (the shares add up to the whole), and
  /// room for every run the harness may place on it.
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
    config.prepared_isolates = share(self.config.prepared_isolates);
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

struct RunRecord {
  deliver: Deliver,
  /// The harness's replay of the run's ledger, fed the streamed entries.
  ledger: OutputLedger,
  /// The generation of the host it is placed on, if any.
  host: Option<u64>,
  started: bool,
  /// The abort sent to its host, if any: should that host die before the
  /// run reported its end, the run ends with it instead of going on.
  aborted: Option<Vec<u16>>,
  /// Hosts that ended while it executed on them (it may have ended them).
  hosts_lost: u32,
  /// Hosts that ended while it was placed on them and had not started:
  /// it did not run there, but a program that ends its host before it
  /// starts (while it is transpiled) must not be placed for ever.
  placements_lost: u32,
  /// Everything that entered it from outside, to execute it again.
  history: RunHistory,
  /// What it has cost so far (its report).
  cost: RunCost,
  /// Its history's bytes as counted in [`State::history_bytes`].
  history_counted: u64,
  /// The cap its history passed, when it was given up.
  history_over: Option<HostLoss>,
  /// How the host whose end began its current execution ended.
  lost_host: Option<String>,
  /// Its current execution is not the run its history records: it is
  /// being stopped on its host, and settles with this.
  diverged: Option<Divergence>,
  /// Its next placement is in a host of its own: it may end its host
  /// (see [`MAX_HOSTS_OF_ONE_RUN`]).
  alone: bool,
  /// Seeds its random numbers in every execution (`RunSeed`).
  seed: RunSeed,
  /// Kept for as long as the run may be executed again.
  program: String,
  bindings_json: String,
  deadline: Instant,
}

impl RunRecord {
  /// A run just submitted: on no host yet, with an empty history.
  fn new(
    deliver: Deliver,
    max_output_bytes: u64,
    max_calls: u32,
    seed: RunSeed,
    program: String,
    bindings_json: String,
    deadline: Instant,
  ) -> RunRecord {
    RunRecord {
      deliver,
      ledger: OutputLedger::new(max_output_bytes),
      host: None,
      started: false,
      aborted: None,
      hosts_lost: 0,
      placements_lost: 0,
      history: RunHistory::new(max_calls),
      cost: RunCost::default(),
      history_counted: 0,
      history_over: None,
      lost_host: None,
      diverged: None,
      alone: false,
      seed,
      program,
      bindings_json,
      deadline,
    }
  }
}

/// One live host.
struct Host {
  generation: u64,
  /// Its slot in [`State::slots`].
  slot: usize,
  pid: u32,
  link: Arc<HostLink>,
  /// The reading end of its channel: its reader thread reads every frame;
  /// Node's main thread, lingering for a call, may take calls itself.
  inbox: Inbox,
  /// The reading end of its journal (its runs' starts and log entries),
  /// read by its reader thread before each frame of the channel and once
  /// the host has ended (`dsh_protocol::frame`).
  journal: Inbox,
  child: Mutex<Child>,
  stderr: StderrTail,
  born: Instant,
  /// Why the supervisor killed it, if it did.
  killed_for: Mutex<Option<HostEnd>>,
}

impl Host {
  fn send(&self, message: &ToHost) {
    let mut frame = Vec::new();
    message.encode(&mut frame);
    self.link.send(frame);
  }

  /// Kill the host and end its channel, so that its reader sees the end
  /// even if another process still holds the host's end of the socket.
  /// Never waits: a reader that holds the child is already reaping it.
  fn kill(&self, why: HostEnd) {
    lock(&self.killed_for).get_or_insert(why);
    if let Ok(mut child) = self.child.try_lock() {
      let _ = child.kill();
    }
    self.link.shut_down();
  }
}

/// A place for one host, and what the supervisor knows of it.
#[derive(Default)]
struct Slot {
  host: Option<Arc<Host>>,
  ready: bool,
  /// Runs placed on its host and not finished.
  placed: usize,
  /// When its next host may start (after a death, with backoff).
  restart_at: Option<Instant>,
  last_heard: Option<Instant>,
  /// The last stats request it answered, and its answer.
  stats_answered: u64,
  stats: HostStats,
  /// What its host said it has in effect, when it became ready.
  protections: Protections,
  /// Its host has started a program (until then it holds only what a
  /// fresh host holds, and recycling it would gain nothing).
  ran_any: bool,
  /// A host of one run that has been given its run: it takes no other,
  /// and is shut down once that run ends.
  taken: bool,
  /// Its host was found holding this many bytes, over
  /// `recycle_above_bytes`: no run is placed on it, and it is shut down
  /// once its runs end.
  retiring: Option<u64>,
}

impl Slot {
  /// Its host is alive and ready.
  fn takes_runs(&self) -> bool {
    self.ready && self.host.is_some()
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
  /// Where the search for the least loaded host starts (turns by one).
  next_slot: usize,
  generation: u64,
  quick_deaths: u32,
  start_failures: u32,
  readers: Vec<JoinHandle<()>>,
  /// What the last host to become ready said it has in effect.
  protections: Option<Protections>,
  hosts_recycled: u64,
  disposing: bool,
  finished: bool,
  stats_asked: u64,
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

  /// The ready host with the fewest runs placed (ties taken in turn).
  fn least_loaded(&mut self, shared: usize) -> Option<usize> {
    let count = shared.min(self.slots.len());
    let chosen = (0..count)
      .map(|i| (self.next_slot + i) % count)
      .filter(|&i| self.slots[i].ready && self.slots[i].retiring.is_none() && self.slots[i].host.is_some())
      .min_by_key(|&i| self.slots[i].placed)?;
    self.next_slot = (chosen + 1) % count;
    Some(chosen)
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
  /// The hosts alive, for the main thread's [`Supervisor::take_calls`]
  /// (apart from the state, whose lock a reader may hold a while). Lock
  /// order: `state` before `hosts` (`start_host`), and an inbox's lock
  /// before `state` (a frame's handling): so `hosts` is never held while an
  /// inbox or the state is taken (`take_calls` copies the list first).
  hosts: Mutex<Vec<Arc<Host>>>,
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

  /// Start a host in `slot` (the caller holds the state); its reader thread
  /// takes it from there.
  fn start_host(self: &Arc<Self>, state: &mut State, slot: usize) -> Result<(), String> {
    state.slots[slot].restart_at = None;
    let Spawned { mut child, channel, journal, stderr } = match spawn(&self.settings.executable) {
      Ok(spawned) => spawned,
      Err(message) => {
        state.last_host_end = Some(message.clone());
        return Err(message);
      }
    };
    let halves = channel.try_clone().and_then(|read_half| Ok((Inbox::new(read_half), HostLink::start(channel)?)));
    let (inbox, link) = match halves {
      Ok(halves) => halves,
      Err(error) => {
        // The host never got its channel: end it, and reap it here.
        let _ = child.kill();
        let _ = child.wait();
        let message = format!("the isolate host's channel could not be set up: {error}");
        state.last_host_end = Some(message.clone());
        return Err(message);
      }
    };
    state.generation += 1;
    if !self.settings.is_alone(slot) {
      state.host_starts += 1;
    }
    let host = Arc::new(Host {
      generation: state.generation,
      slot,
      pid: child.id(),
      link,
      inbox,
      journal: Inbox::new(journal),
      child: Mutex::new(child),
      stderr,
      born: Instant::now(),
      killed_for: Mutex::new(None),
    });
    host.send(&ToHost::Configure { config: Box::new(self.settings.host_config(slot)) });
    state.slots[slot] = Slot { host: Some(host.clone()), last_heard: Some(Instant::now()), ..Slot::default() };
    let supervisor = Arc::downgrade(self);
    let reader = dsh_named_thread::spawn("dsh-host-reader", move || read_host(&supervisor, &host));
    match reader {
      Ok(reader) => {
        if let Some(host) = &state.slots[slot].host {
          lock(&self.hosts).push(host.clone());
        }
        // The readers of hosts that ended are done: let them go.
        state.readers.retain(|reader| !reader.is_finished());
        state.readers.push(reader);
        Ok(())
      }
      Err(error) => {
        if let Some(host) = state.slots[slot].host.take() {
          host.kill(HostEnd::ProtocolViolation("no reader thread".to_owned()));
          host.link.close();
          // No reader will reap it: reap it here.
          let _ = lock(&host.child).wait();
        }
        Err(format!("the host's reader thread could not start: {error}"))
      }
    }
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

  /// Place queued runs on hosts while fewer than `maxConcurrentRuns` are
  /// placed and a host is ready; runs that go alone, each on a ready host
  /// of one run that holds none (the supervisor thread starts those hosts:
  /// [`Supervisor::start_hosts_of_one_run`]).
  fn admit(&self, state: &mut State) {
    let shared = self.settings.shared_hosts();
    let max_concurrent_runs = self.settings.config.max_concurrent_runs;
    while let Some(&first) = state.pending_alone.front() {
      // A run new to the runtime (a quarantined program submitted again)
      // waits for room as every new run does; one executed again, or
      // placed again after a host ended, was admitted already.
      let admitted_before = state.runs.get(&first).is_some_and(|record| record.hosts_lost + record.placements_lost > 0);
      if !admitted_before && state.in_flight() >= max_concurrent_runs {
        break;
      }
      let free = (shared..state.slots.len()).find(|&i| {
        let slot = &state.slots[i];
        slot.takes_runs() && slot.placed == 0 && !slot.taken
      });
      let Some(slot) = free else { break };
      let Some(run_id) = state.pending_alone.pop_front() else { break };
      state.slots[slot].taken = true;
      self.place(state, run_id, slot);
    }
    if !state.pending_alone.is_empty() {
      self.changed.notify_all();
    }
    while !state.pending.is_empty() && state.in_flight() < self.settings.config.max_concurrent_runs {
      let Some(slot) = state.least_loaded(shared) else { return };
      let Some(run_id) = state.pending.pop_front() else { return };
      self.place(state, run_id, slot);
    }
  }

  /// Start hosts of one run for the runs waiting for one, up to
  /// [`MAX_HOSTS_OF_ONE_RUN`] alive (the supervisor thread, which may
  /// start hosts). Their deaths back off on their own count.
  fn start_hosts_of_one_run(self: &Arc<Self>, state: &mut State, now: Instant) -> (Option<Instant>, Vec<Delivery>) {
    let shared = self.settings.shared_hosts();
    loop {
      let alive = (shared..state.slots.len()).filter(|&i| state.slots[i].host.is_some()).count();
      let idle = (shared..state.slots.len())
        .filter(|&i| state.slots[i].host.is_some() && state.slots[i].placed == 0 && !state.slots[i].taken)
        .count();
      if state.disposing || state.pending_alone.len() <= idle || alive >= MAX_HOSTS_OF_ONE_RUN {
        return (None, Vec::new());
      }
      let empty = (shared..state.slots.len()).find(|&i| state.slots[i].host.is_none());
      let slot = match empty {
        Some(slot) => slot,
        None => {
          state.slots.push(Slot::default());
          state.slots.len() - 1
        }
      };
      if let Some(at) = state.slots[slot].restart_at.filter(|at| *at > now) {
        return (Some(at), Vec::new());
      }
      if let Err(why) = self.start_host(state, slot) {
        state.start_failures_alone += 1;
        state.quick_deaths_alone += 1;
        let delay = restart_delay(state.quick_deaths_alone).max(Duration::from_millis(50));
        state.slots[slot].restart_at = Some(now + delay);
        return (Some(now + delay), self.fail_alone_if_no_host_starts(state, &why));
      }
    }
  }

  /// Send a run to the host of `slot`.
  fn place(&self, state: &mut State, run_id: u32, slot: usize) {
    let Some(host) = state.slots[slot].host.clone() else {
      if self.settings.is_alone(slot) {
        state.pending_alone.push_front(run_id);
      } else {
        state.pending.push_front(run_id);
      }
      return;
    };
    let Some(record) = state.runs.get_mut(&run_id) else { return };
    record.host = Some(host.generation);
    let wall_ms = record.deadline.saturating_duration_since(Instant::now()).as_secs_f64() * 1000.0;
    let readings = record.history.recorded_readings();
    let mut frame =
      Vec::with_capacity(64 + record.program.len() + record.bindings_json.len() + readings.bytes() as usize);
    encode_submit(
      &mut frame,
      &Submission {
        run_id,
        wall_ms,
        seed: &record.seed,
        readings,
        history_end: record.history.end(&record.ledger),
        program: &record.program,
        bindings_json: &record.bindings_json,
      },
    );
    state.slots[slot].placed += 1;
    host.link.send(frame);
  }

  /// Abort a run: on its host, or here if it waits in the queue.
  pub fn abort(&self, run_id: u32, reason: Vec<u16>) {
    let mut state = lock(&self.state);
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
    let frames: Vec<(Arc<Host>, Vec<u8>)> = by_host
      .into_iter()
      .map(|(host, batch)| {
        let mut frame = Vec::new();
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

  /// The hosts' and the harness's counts, as fresh as the hosts can answer
  /// within [`STATS_WAIT`] (a host that does not answer contributes what it
  /// said last).
  pub fn stats(&self) -> NativeStats {
    let mut state = lock(&self.state);
    state.stats_asked += 1;
    let seq = state.stats_asked;
    let asked: Vec<u64> = state
      .slots
      .iter()
      .filter(|slot| slot.ready)
      .filter_map(|slot| slot.host.as_ref())
      .map(|host| {
        host.send(&ToHost::StatsRequest { seq });
        host.generation
      })
      .collect();
    let deadline = Instant::now() + STATS_WAIT;
    loop {
      let waiting = state.slots.iter().any(|slot| {
        slot.host.as_ref().is_some_and(|host| asked.contains(&host.generation)) && slot.stats_answered < seq
      });
      let now = Instant::now();
      if !waiting || now >= deadline {
        break;
      }
      state = self.wait(state, deadline - now);
    }
    let mut host = HostStats::default();
    let (mut alive, mut alone) = (0, 0);
    let mut pids = Vec::new();
    let mut sandbox = Protections::all();
    for (index, slot) in state.slots.iter().enumerate() {
      let Some(live) = &slot.host else { continue };
      pids.push(live.pid);
      if !slot.ready {
        continue;
      }
      if self.settings.is_alone(index) {
        alone += 1;
      } else {
        alive += 1;
      }
      host.add(&slot.stats);
      sandbox = sandbox.intersection(slot.protections);
    }
    if alive == 0 {
      sandbox = state.protections.unwrap_or_default();
    }
    // The live hosts' figures added up, with the totals of the hosts that
    // ended, and the runs waiting in the harness's queue (for admission or
    // a host) in `queued`.
    host.add(&state.ended_hosts);
    let queued = state.pending.len() + state.pending_alone.len();
    host.queued = host.queued.saturating_add(u32::try_from(queued).unwrap_or(u32::MAX));
    NativeStats {
      outcomes: state.outcomes.into(),
      refused: state.refused as f64,
      hosts: alive,
      host_restarts: state.host_starts.saturating_sub(self.settings.shared_hosts() as u64) as f64,
      runs_lost_to_host_exits: state.runs_lost as f64,
      runs_reexecuted: state.runs_reexecuted as f64,
      reexecutions_diverged: state.reexecutions_diverged as f64,
      history_bytes: state.history_bytes as f64,
      hosts_of_one_run: alone,
      quarantined_programs: state.quarantine.len(Instant::now()) as f64,
      last_host_exit: state.last_host_end.clone(),
      host_pids: pids,
      sandbox: Protection::ALL
        .iter()
        .map(|protection| (protection.name().to_owned(), sandbox.contains(*protection)))
        .collect(),
      host_recycles: state.hosts_recycled as f64,
      ..NativeStats::of_hosts(host)
    }
  }

  /// Dispose: runs in the queue end `abort: runtime disposed`, each host
  /// stops its runs (each reports its result) and exits, or is killed after
  /// a grace period; returns once every host thread is done.
  pub fn shutdown(&self) {
    let mut state = lock(&self.state);
    if !state.disposing {
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

  /// One frame (its tag and fields) from `host`, read from its journal
  /// (`from_journal`) or its channel. An error is a protocol violation:
  /// the host is ended for it.
  fn receive_frame(&self, host: &Arc<Host>, frame: &[u8], from_journal: bool) -> Result<(), String> {
    let message = FromHost::decode(frame).map_err(|error| error.0)?;
    self.receive(host, message, from_journal)
  }

  /// One message from `host` (see [`Supervisor::receive_frame`]).
  fn receive(&self, host: &Arc<Host>, message: FromHost, from_journal: bool) -> Result<(), String> {
    if message.is_journal_entry() != from_journal {
      let (stream, belongs) = if from_journal { ("journal", "channel") } else { ("channel", "journal") };
      return Err(format!("a frame of the {belongs} on the {stream}"));
    }
    // Digests of the calls' arguments, made before the state is locked.
    let identities: Vec<CallIdentity> = match &message {
      FromHost::Calls(calls) => calls.iter().map(CallIdentity::of).collect(),
      _ => Vec::new(),
    };
    let mut state = lock(&self.state);
    if state.host(host.generation).is_none() {
      return Err("a frame from a host that was replaced".to_owned());
    }
    let slot = host.slot;
    let on_this_host =
      |state: &State, run_id: u32| state.runs.get(&run_id).is_some_and(|record| record.host == Some(host.generation));
    match message {
      FromHost::Ready { protections } => {
        if state.slots[slot].ready {
          return Err("ready twice".to_owned());
        }
        state.protections = Some(protections);
        if self.settings.require_sandbox && protections != Protections::all() {
          host.kill(HostEnd::Unsandboxed { missing: protections.missing().join(", ") });
          return Ok(());
        }
        state.slots[slot].protections = protections;
        state.slots[slot].ready = true;
        state.slots[slot].last_heard = Some(Instant::now());
        if self.settings.is_alone(slot) {
          state.start_failures_alone = 0;
        } else {
          state.start_failures = 0;
        }
        self.admit(&mut state);
        self.changed.notify_all();
      }
      FromHost::Started { run_id } => {
        if !on_this_host(&state, run_id) {
          return Err(format!("run {run_id} started, but it is not on this host"));
        }
        state.slots[slot].ran_any = true;
        if let Some(record) = state.runs.get_mut(&run_id) {
          record.started = true;
          record.cost.started_on(host.pid);
        }
      }
      FromHost::Log { run_id, text } => match state.runs.get_mut(&run_id) {
        Some(record) if record.host == Some(host.generation) => {
          if record.diverged.is_none() {
            match record.history.log(&text, &record.ledger) {
              LogVerdict::Admit => {
                record.ledger.admit(&text);
              }
              LogVerdict::Recorded => {}
              LogVerdict::Diverged(divergence) => diverge(record, run_id, divergence, host),
            }
          }
        }
        _ => return Err(format!("a log entry for run {run_id}, which is not on this host")),
      },
      FromHost::Readings { run_id, cpu_us, readings } => match state.runs.get_mut(&run_id) {
        Some(record) if record.host == Some(host.generation) => {
          record.history.charged(cpu_us);
          if record.diverged.is_none() && record.history.readings(&readings) > 0 {
            self.account_history(&mut state, run_id);
          }
        }
        _ => return Err(format!("readings for run {run_id}, which is not on this host")),
      },
      FromHost::Calls(calls) => {
        // A run's last calls may cross after its result (the run queued
        // them, then finished before its thread parked): such calls are
        // dropped, no one waits for them. A call for a run on another host
        // is a lie.
        if let Some(call) = calls.iter().find(|call| {
          state.runs.get(&call.run_id).is_some_and(|record| record.host.is_some_and(|on| on != host.generation))
        }) {
          return Err(format!("a host call for run {}, which is not on this host", call.run_id));
        }
        let calls = calls.into_iter().zip(identities).filter(|(call, _)| on_this_host(&state, call.run_id)).collect();
        let (to_tools, answers, violation) = self.take_calls_into_histories(&mut state, host, calls);
        drop(state);
        if !answers.is_empty() {
          host.send(&ToHost::Replies(answers));
        }
        // The calls before a violation were taken into their histories:
        // their tools are called, once, whatever the host does next.
        if !to_tools.is_empty() {
          self.calls.push(to_tools);
        }
        if let Some(violation) = violation {
          return Err(violation);
        }
      }
      FromHost::Finished { run_id, cost, completion } => {
        if !on_this_host(&state, run_id) {
          return Err(format!("run {run_id} finished, but it is not on this host"));
        }
        if let Some(record) = state.runs.get_mut(&run_id) {
          record.cost.execution = Some(cost);
        }
        let with = self.finished_as(&mut state, run_id, completion);
        let delivery = self.finish(&mut state, run_id, with);
        self.admit(&mut state);
        drop(state);
        if let Some(delivery) = delivery {
          delivery.deliver();
        }
      }
      FromHost::Refused { run_id } => {
        if !on_this_host(&state, run_id) {
          return Err(format!("run {run_id} refused, but it is not on this host"));
        }
        state.refused += 1;
        state.slots[slot].placed = state.slots[slot].placed.saturating_sub(1);
        let record = state.runs.remove(&run_id);
        self.admit(&mut state);
        drop(state);
        if let Some(record) = record {
          (record.deliver)(RunEnd::Refused);
        }
      }
      // The journal was read before this frame was handled: the room the
      // host waits for is there.
      FromHost::JournalFull => {}
      FromHost::Stats { seq, stats } => {
        if seq > state.stats_asked {
          return Err(format!("stats for request {seq}, which was never sent"));
        }
        let slot = &mut state.slots[slot];
        // Only an answer to the heartbeat shows the host's own loop is
        // alive: its run threads could go on writing without it.
        slot.last_heard = Some(Instant::now());
        slot.stats_answered = slot.stats_answered.max(seq);
        slot.stats = stats;
        self.changed.notify_all();
      }
    }
    Ok(())
  }

  /// Each call of a frame through its run's history: new calls go to the
  /// tools, calls the history answers are answered at once (returned as
  /// replies for `host`), a call that is not the recorded one stops its
  /// run. A call id out of turn is the host breaking the protocol: the
  /// calls before it are still returned, the violation last.
  fn take_calls_into_histories(
    &self,
    state: &mut State,
    host: &Host,
    calls: Vec<(HostCall, CallIdentity)>,
  ) -> (Vec<HostCall>, Vec<Reply>, Option<String>) {
    let mut to_tools = Vec::with_capacity(calls.len());
    let mut answers = Vec::new();
    for (call, identity) in calls {
      let run_id = call.run_id;
      let Some(record) = state.runs.get_mut(&run_id) else { continue };
      if record.diverged.is_some() {
        continue;
      }
      let (verdict, grew) = record.history.call(&call, identity);
      match verdict {
        CallVerdict::Call => {
          record.cost.called(&call);
          to_tools.push(call);
        }
        CallVerdict::Answer(answer) => answers.push(Reply { run_id, call_id: call.call_id, answer }),
        CallVerdict::Refused(text) => {
          record.cost.refused(call.call_id, self.settings.max_tool_calls);
          answers.push(Reply { run_id, call_id: call.call_id, answer: Answer::plain(ReplyKind::Reject, text) });
        }
        CallVerdict::AwaitAnswer => {}
        CallVerdict::Diverged(divergence) => diverge(record, run_id, divergence, host),
        CallVerdict::Violation(why) => return (to_tools, answers, Some(why)),
      }
      if grew > 0 {
        self.account_history(state, run_id);
      }
    }
    (to_tools, answers, None)
  }

  /// How a run its host reports finished settles: as reported; or, for an
  /// execution that diverged or finished before making its history again,
  /// as a divergence. An abort, or a timeout, is what it says.
  fn finished_as(&self, state: &mut State, run_id: u32, completion: Completion) -> FinishWith {
    let Some(record) = state.runs.get(&run_id) else { return FinishWith::Completion(completion) };
    let stopped_by_runtime =
      matches!(&completion, Completion::Failure { kind: FailureKind::Abort | FailureKind::Timeout, .. });
    let divergence = record.diverged.or_else(|| {
      let reexecuted = record.history.reexecutions() > 0 && !stopped_by_runtime;
      reexecuted.then(|| record.history.finish(&record.ledger).err()).flatten()
    });
    let Some(divergence) = divergence else { return FinishWith::Completion(completion) };
    if let Some(reason) = &record.aborted {
      return stopped(&StopReason::Abort(reason.clone()), &self.settings.config);
    }
    let end = record.lost_host.clone().unwrap_or_default();
    state.reexecutions_diverged += 1;
    state.runs_lost += 1;
    stopped(&StopReason::HostEnded { end, loss: HostLoss::Diverged(divergence) }, &self.settings.config)
  }

  /// Node's main thread, lingering for a run's next call: take the calls
  /// that are at the head of a host's channel, whole, off the channel
  /// itself (`dsh_protocol::inbox`), into the call outbox, as the host's
  /// reader would have. Never blocks on a reader.
  pub fn take_calls(&self) {
    let hosts = lock(&self.hosts).clone();
    for host in hosts {
      let mut violation = None;
      host.inbox.try_take(FromHost::CALLS_TAG, |frame| {
        violation = self.receive_frame(&host, frame, false).err();
      });
      if let Some(error) = violation {
        host.kill(HostEnd::ProtocolViolation(error));
      }
    }
  }

  /// When hosts do not start (`MAX_START_FAILURES` in a row, whether they
  /// died before ready or could not be spawned at all) and none is ready,
  /// fail the waiting runs rather than keep them waiting for a host that
  /// may never come.
  fn fail_queue_if_no_host_starts(&self, state: &mut State, why: &str) -> Vec<Delivery> {
    let shared = self.settings.shared_hosts().min(state.slots.len());
    let none_ready = !state.slots[..shared].iter().any(Slot::takes_runs);
    if state.disposing || !none_ready || state.start_failures < MAX_START_FAILURES {
      return Vec::new();
    }
    let failure: Vec<u16> = format!("no isolate host could be started ({why})").encode_utf16().collect();
    let pending: Vec<u32> = state.pending.drain(..).collect();
    pending
      .into_iter()
      .filter_map(|run_id| self.finish(state, run_id, FinishWith::Failure(FailureKind::WorkerExit, failure.clone())))
      .collect()
  }

  /// When hosts of one run do not start ([`MAX_START_FAILURES`] in a row)
  /// and none is ready, fail the runs waiting for one: a run to be
  /// executed again saying how its host ended and that none of its own
  /// could be started; a quarantined program as a run no host can take.
  fn fail_alone_if_no_host_starts(&self, state: &mut State, why: &str) -> Vec<Delivery> {
    let shared = self.settings.shared_hosts().min(state.slots.len());
    let none_ready = !state.slots[shared..].iter().any(Slot::takes_runs);
    if state.disposing || !none_ready || state.start_failures_alone < MAX_START_FAILURES {
      return Vec::new();
    }
    let pending: Vec<u32> = state.pending_alone.drain(..).collect();
    let mut deliveries = Vec::new();
    for run_id in pending {
      let Some(record) = state.runs.get(&run_id) else { continue };
      let with = match record.lost_host.clone() {
        Some(end) => {
          state.runs_lost += 1;
          stopped(&StopReason::HostEnded { end, loss: HostLoss::NoHostOfItsOwn(why.to_owned()) }, &self.settings.config)
        }
        None => FinishWith::Failure(
          FailureKind::WorkerExit,
          format!("no isolate host could be started ({why})").encode_utf16().collect(),
        ),
      };
      deliveries.extend(self.finish(state, run_id, with));
    }
    deliveries
  }

  /// Retire the host of `slot` if its resident memory is over the
  /// ceiling (read from /proc by the harness: a host cannot lie about it),
  /// and shut it down once it has no run left.
  fn recycle_if_over(&self, state: &mut State, slot: usize) {
    let entry = &mut state.slots[slot];
    let Some(host) = entry.host.clone() else { return };
    if entry.ran_any && entry.retiring.is_none() {
      entry.retiring = resident_bytes(host.pid).filter(|bytes| *bytes > self.settings.recycle_above_bytes);
    }
    if let (Some(resident), 0) = (entry.retiring, entry.placed) {
      // Its end is a recycling only from here: a host that dies while its
      // last runs finish is described as what it died of.
      lock(&host.killed_for).get_or_insert(HostEnd::Recycled { resident_mb: resident >> 20 });
      host.send(&ToHost::Shutdown);
    }
  }

  /// `host` has ended: settle what it took with it, queue again (first)
  /// what it had not started, and plan its replacement.
  fn host_ended(&self, host: &Arc<Host>, end: HostEnd) {
    lock(&self.hosts).retain(|alive| !Arc::ptr_eq(alive, host));
    let described = end.describe();
    let mut state = lock(&self.state);
    if state.host(host.generation).is_none() {
      return;
    }
    let alone_host = self.settings.is_alone(host.slot);
    let slot = std::mem::take(&mut state.slots[host.slot]);
    // What it counted stays counted.
    state.ended_hosts.add(&slot.stats.totals());
    let mut on_host: Vec<u32> =
      state.runs.iter().filter(|(_, record)| record.host == Some(host.generation)).map(|(run_id, _)| *run_id).collect();
    on_host.sort_unstable();
    // A host of one run shut down after its run is no news.
    if !alone_host || !on_host.is_empty() {
      state.last_host_end = Some(described.clone());
    }
    if !alone_host {
      if slot.ready {
        state.start_failures = 0;
      } else {
        state.start_failures += 1;
      }
    }
    let mut deliveries = Vec::new();
    let (mut again, mut again_alone) = (Vec::new(), Vec::new());
    for run_id in on_host.iter().copied() {
      let disposing = state.disposing;
      let Some(record) = state.runs.get_mut(&run_id) else { continue };
      let fate = fate(record, disposing, alone_host, &described);
      let with = match fate {
        Fate::Disposed => stopped(&StopReason::Disposed, &self.settings.config),
        Fate::Aborted(reason) => stopped(&StopReason::Abort(reason), &self.settings.config),
        Fate::PlacedAgain { alone } | Fate::Reexecuted { alone } => {
          record.alone = alone;
          if let Fate::Reexecuted { .. } = fate {
            record.history.begin_reexecution();
            record.lost_host = Some(described.clone());
            state.runs_reexecuted += 1;
          }
          if alone {
            again_alone.push(run_id);
          } else {
            again.push(run_id);
          }
          continue;
        }
        Fate::Lost(end, loss) => {
          match loss {
            HostLoss::Diverged(_) => state.reexecutions_diverged += 1,
            // Shown to end hosts: alone in one, it ended that one too.
            HostLoss::Running if alone_host => {
              let program = record.program.clone();
              state.quarantine.add(&program, Instant::now());
            }
            _ => {}
          }
          state.runs_lost += 1;
          stopped(&StopReason::HostEnded { end, loss }, &self.settings.config)
        }
      };
      deliveries.extend(self.finish(&mut state, run_id, with));
    }
    // Placed again ahead of the runs that came after them.
    for run_id in again.into_iter().rev() {
      state.pending.push_front(run_id);
    }
    for run_id in again_alone.into_iter().rev() {
      state.pending_alone.push_front(run_id);
    }
    if !state.disposing {
      let recycled = matches!(end, HostEnd::Recycled { .. });
      let quick = host.born.elapsed() < HEALTHY_LIFE && !recycled;
      if alone_host {
        // Deaths of hosts of one run back off on their own count, and
        // never delay the shared hosts' restarts.
        if !slot.ready {
          state.start_failures_alone += 1;
        }
        if !slot.ready || !on_host.is_empty() {
          state.quick_deaths_alone = if quick { state.quick_deaths_alone + 1 } else { 1 };
          state.slots[host.slot].restart_at = Some(Instant::now() + restart_delay(state.quick_deaths_alone));
        }
        deliveries.extend(self.fail_alone_if_no_host_starts(&mut state, &described));
      } else {
        deliveries.extend(self.fail_queue_if_no_host_starts(&mut state, &described));
        if recycled {
          state.hosts_recycled += 1;
        }
        state.quick_deaths = if quick { state.quick_deaths + 1 } else { 1 };
        state.slots[host.slot].restart_at = Some(Instant::now() + restart_delay(state.quick_deaths));
      }
      // The other hosts take what this one had not started.
      self.admit(&mut state);
    }
    self.changed.notify_all();
    drop(state);
    for delivery in deliveries {
      delivery.deliver();
    }
  }
}

/// What becomes of a run whose host ended.
#[derive(Debug, PartialEq)]
enum Fate {
  Disposed,
  /// Its caller aborted it (the host may not have stopped it yet).
  Aborted(Vec<u16>),
  /// It had not started: it is placed again, in a host of its own or not.
  PlacedAgain {
    alone: bool,
  },
  /// It is executed again from its history.
  Reexecuted {
    alone: bool,
  },
  /// It fails, with the host's end (or the end its re-execution followed).
  Lost(String, HostLoss),
}

/// The one decision of what becomes of a run whose host ended as
/// `described` (`alone_host`: a host of one run). A run waiting on a tool
/// did not end the host; a run that was computing may have: it is
/// executed again alone, and if it ends that host too it is the culprit.
/// Two counts, each bounded by [`MAX_HOSTS_LOST`]: hosts that ended while
/// the run executed there, and hosts that ended before it started there
/// (several hosts killed at once end runs just placed on them, which did
/// nothing). A run on its second host of either kind goes alone; on its
/// third, it fails.
fn fate(record: &mut RunRecord, disposing: bool, alone_host: bool, described: &str) -> Fate {
  record.host = None;
  let started = std::mem::replace(&mut record.started, false);
  if started {
    record.hosts_lost += 1;
  } else {
    record.placements_lost += 1;
  }
  let lost = record.hosts_lost.max(record.placements_lost);
  let alone = record.alone || lost + 1 >= MAX_HOSTS_LOST;
  if disposing {
    return Fate::Disposed;
  }
  if let Some(reason) = record.aborted.take() {
    return Fate::Aborted(reason);
  }
  if let Some(divergence) = record.diverged {
    let end = record.lost_host.clone().unwrap_or_else(|| described.to_owned());
    return Fate::Lost(end, HostLoss::Diverged(divergence));
  }
  if lost >= MAX_HOSTS_LOST {
    return Fate::Lost(described.to_owned(), HostLoss::TooManyHosts);
  }
  if !started {
    return Fate::PlacedAgain { alone };
  }
  let waiting = record.history.waiting_on_a_tool();
  if !waiting && alone_host {
    return Fate::Lost(described.to_owned(), HostLoss::Running);
  }
  if let Some(over) = record.history_over.clone() {
    return Fate::Lost(described.to_owned(), over);
  }
  Fate::Reexecuted { alone: alone || !waiting }
}

/// How a run is finished by the harness.
enum FinishWith {
  /// As its host reported (replayed through the harness's ledger).
  Completion(Completion),
  /// With a failure decided here.
  Failure(FailureKind, Vec<u16>),
}

/// A failure decided here, with its text from `dsh_protocol::failure`.
fn stopped(stop: &StopReason, config: &RuntimeConfig) -> FinishWith {
  let (kind, message) = failure(stop, config);
  FinishWith::Failure(kind, message)
}

/// A run's seed, from the kernel's CSPRNG: the run's random numbers are
/// a ChaCha20 stream from it, as strong as the kernel's own.
fn fresh_seed() -> Result<RunSeed, String> {
  let mut bytes = [0u8; 32];
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
      return Err(format!("no random seed for the run: {error}"));
    }
    filled += n as usize;
  }
  let mut seed = [0u64; 4];
  for (word, chunk) in seed.iter_mut().zip(bytes.chunks_exact(8)) {
    let mut le = [0u8; 8];
    le.copy_from_slice(chunk);
    *word = u64::from_le_bytes(le);
  }
  Ok(seed)
}

pub fn queue_full() -> String {
  "the run queue is full (config.maxQueuedRuns); wait for runs to finish or raise the limit".to_owned()
}

/// Stop a run whose current execution is not the run its history records:
/// its host stops it (as an abort would), and its end settles as the
/// divergence. Its calls and log entries from here on are not taken.
fn diverge(record: &mut RunRecord, run_id: u32, divergence: Divergence, host: &Host) {
  if record.diverged.is_none() {
    record.diverged = Some(divergence);
    host.send(&ToHost::Abort { run_id, reason: Vec::new() });
  }
}

/// A reply on its way to a host: held in its run's history (encoded from
/// there), or passed on by a run whose history was given up.
enum Outgoing {
  Held { run_id: u32, call_id: u32 },
  Passed(Reply),
}

impl Outgoing {
  fn answer<'a>(&'a self, state: &'a State) -> Option<(u32, u32, &'a Answer)> {
    match self {
      Outgoing::Held { run_id, call_id } => {
        let answer = state.runs.get(run_id)?.history.held(*call_id)?;
        Some((*run_id, *call_id, answer))
      }
      Outgoing::Passed(reply) => Some((reply.run_id, reply.call_id, &reply.answer)),
    }
  }
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

/// A host's reader thread: every frame it sends, until it ends.
fn read_host(supervisor: &Weak<Supervisor>, host: &Arc<Host>) {
  let (mut frame, mut journal_frame) = (Vec::new(), Vec::new());
  let violation = loop {
    // Handled under the inbox's lock (held by `_reading`), so that calls
    // the main thread takes itself are handled in the order they were sent.
    let _reading = match host.inbox.next(&mut frame) {
      Ok(Next::Frame(reading)) => reading,
      Ok(Next::Ended) => break None,
      Err(error) if error.kind() == std::io::ErrorKind::InvalidData => break Some(error.to_string()),
      Err(_) => break None,
    };
    let Some(supervisor) = supervisor.upgrade() else { break None };
    // What the host wrote to its journal before this frame comes first.
    if let Err(error) = read_journal(&supervisor, host, &mut journal_frame) {
      break Some(error);
    }
    if let Err(error) = supervisor.receive_frame(host, &frame, false) {
      break Some(error);
    }
  };
  if let Some(error) = violation {
    host.kill(HostEnd::ProtocolViolation(error));
  }
  // The channel is closed or broken: the host is gone or going. Make sure,
  // and learn how it ended.
  host.link.close();
  let status = {
    let mut child = lock(&host.child);
    let _ = child.kill();
    child.wait().ok()
  };
  let end =
    lock(&host.killed_for).take().unwrap_or_else(|| HostEnd::Exited { status, stderr: host.stderr.finished_text() });
  if let Some(supervisor) = supervisor.upgrade() {
    // Everything it wrote to its journal is there now: its runs' starts
    // decide which are placed again, their log entries are kept. A journal
    // that breaks off (a host that died writing, or lies) ends there.
    let _ = read_journal(&supervisor, host, &mut journal_frame);
    supervisor.host_ended(host, end);
  }
}

/// Handle every whole frame waiting in `host`'s journal (read into
/// `frame`, the reader's buffer for it); never waits for more. An error is
/// a protocol violation.
fn read_journal(supervisor: &Supervisor, host: &Arc<Host>, frame: &mut Vec<u8>) -> Result<(), String> {
  loop {
    let _reading = match host.journal.next_ready(frame) {
      Ok(Ready::Frame(reading)) => reading,
      Ok(Ready::Empty | Ready::Ended) => return Ok(()),
      Err(error) => return Err(format!("its journal: {error}")),
    };
    supervisor.receive_frame(host, frame, true)?;
  }
}

/// A process's resident memory, from /proc/<pid>/statm (in pages).
fn resident_bytes(pid: u32) -> Option<u64> {
  let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
  let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
  // SAFETY: sysconf has no preconditions.
  let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
  Some(pages.saturating_mul(u64::try_from(page).unwrap_or(4096)))
}

/// The heartbeat in use: often enough that a silent host is found within
/// `unresponsive_after`, at most once a second.
fn heartbeat(unresponsive_after: Duration) -> Duration {
  (unresponsive_after / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// The supervisor thread (see the module doc).
fn supervise(supervisor: &Weak<Supervisor>) {
  let mut next_beat = Instant::now();
  loop {
    let Some(supervisor) = supervisor.upgrade() else { return };
    let beat = heartbeat(supervisor.settings.unresponsive_after);
    let mut state = lock(&supervisor.state);
    if state.finished {
      return;
    }
    let now = Instant::now();
    let mut wake = now + beat;
    let beating = now >= next_beat;
    if beating {
      state.stats_asked += 1;
      next_beat = now + beat;
    }
    let seq = state.stats_asked;
    let mut deliveries = Vec::new();
    for index in 0..state.slots.len() {
      if state.disposing {
        break;
      }
      let slot = &state.slots[index];
      match (&slot.host, slot.restart_at) {
        (Some(host), _) => {
          let silent = slot.last_heard.map_or(Duration::ZERO, |heard| now.saturating_duration_since(heard));
          // A host still starting has as long as the first hosts have: a
          // replacement started on a loaded machine is not silent, only slow.
          let allowed = if slot.ready {
            supervisor.settings.unresponsive_after
          } else {
            supervisor.settings.unresponsive_after.max(HOST_START_TIMEOUT)
          };
          if silent >= allowed {
            host.kill(HostEnd::Unresponsive { silent_ms: silent.as_millis() as u64 });
          } else if beating && slot.ready {
            host.send(&ToHost::StatsRequest { seq });
            supervisor.recycle_if_over(&mut state, index);
          }
        }
        // Hosts of one run start when a run waits for one (below).
        (None, _) if supervisor.settings.is_alone(index) => {}
        (None, Some(at)) if at > now => wake = wake.min(at),
        (None, _) => {
          if let Err(why) = supervisor.start_host(&mut state, index) {
            state.start_failures += 1;
            state.quick_deaths += 1;
            let delay = restart_delay(state.quick_deaths).max(Duration::from_millis(50));
            state.slots[index].restart_at = Some(now + delay);
            deliveries.extend(supervisor.fail_queue_if_no_host_starts(&mut state, &why));
          }
        }
      }
    }
    let (restart_at, failed) = supervisor.start_hosts_of_one_run(&mut state, now);
    if let Some(at) = restart_at {
      wake = wake.min(at);
    }
    deliveries.extend(failed);
    wake = wake.min(next_beat);
    // Runs waiting in the queues still meet their wall ceiling.
    let overdue: Vec<u32> = state
      .pending
      .iter()
      .chain(&state.pending_alone)
      .copied()
      .filter(|run_id| state.runs.get(run_id).is_some_and(|record| record.deadline <= now))
      .collect();
    if !overdue.is_empty() {
      state.pending.retain(|run_id| !overdue.contains(run_id));
      state.pending_alone.retain(|run_id| !overdue.contains(run_id));
      for run_id in overdue {
        let ceiling = stopped(&StopReason::WallCeiling, &supervisor.settings.config);
        deliveries.extend(supervisor.finish(&mut state, run_id, ceiling));
      }
    }
    let waiting = state.pending.iter().chain(&state.pending_alone);
    if let Some(first) = waiting.filter_map(|run_id| state.runs.get(run_id)).map(|r| r.deadline).min() {
      wake = wake.min(first);
    }
    if !deliveries.is_empty() {
      drop(state);
      for delivery in deliveries {
        delivery.deliver();
      }
      continue;
    }
    let timeout = wake.saturating_duration_since(Instant::now());
    drop(supervisor.wait(state, timeout));
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::os::unix::fs::PermissionsExt;
  use std::sync::mpsc;

  fn config() -> RuntimeConfig {
    RuntimeConfig::small()
  }

  /// A host that speaks the protocol until the first run arrives (passing
  /// over what comes before it, the heartbeat's first request), says in
  /// its journal that it started, then sends `hostile` (hex, `RUN`
  /// standing for the run id as the wire writes it; on the channel, or
  /// after `journal:` on the journal, followed by `JournalFull` on the
  /// channel) and waits for the end of the channel or Shutdown: a host
  /// taken over by a program, as far as the harness can tell.
  fn hostile_host(name: &str, hostile: &str) -> PathBuf {
    hostile_host_protected(name, Protections::all(), hostile)
  }

  /// As [`hostile_host`], saying in its `Ready` that it has `protections`.
  fn hostile_host_protected(name: &str, protections: Protections, hostile: &str) -> PathBuf {
    let python = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
      .map(|dir| dir.join("python3"))
      .find(|path| path.is_file())
      .unwrap_or_else(|| PathBuf::from("/usr/bin/python3"));
    let script = format!(
      r#"#!{python}
import os, struct
def read_exact(n):
    data = b''
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            os._exit(0)
        data += chunk
    return data
def read_frame():
    return read_exact(struct.unpack('<I', read_exact(4))[0])
read_frame()
os.write(0, struct.pack('<IBI', 5, 1, {protections}))
frame = read_frame()
while frame[0] != 2:  # the heartbeat's stats requests may come first
    if frame[0] == 6:
        os._exit(0)
    frame = read_frame()
run = frame[1:5]
os.write({journal}, struct.pack('<IB', 5, 2) + run)
hostile = '{hostile}'
if hostile.startswith('journal:'):
    os.write({journal}, bytes.fromhex(hostile[8:].replace('RUN', run.hex())))
    os.write(0, struct.pack('<IB', 1, 8))
else:
    os.write(0, bytes.fromhex(hostile.replace('RUN', run.hex())))
while read_frame()[0] != 6:
    pass
"#,
      python = python.display(),
      protections = protections.bits(),
      journal = dsh_protocol::frame::JOURNAL_FD,
    );
    let dir = std::env::temp_dir().join(format!("dsh-hostile-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    // The executable is written by a child process, never through a
    // descriptor of this one: the tests run in parallel threads, and a
    // descriptor open for writing here, inherited by another test's host
    // between its fork and its exec, would make exec'ing this file fail
    // with "Text file busy".
    let source = dir.join(format!("{name}.py"));
    std::fs::write(&source, script).unwrap();
    let copied = std::process::Command::new("cp").arg(&source).arg(&path).status().unwrap();
    assert!(copied.success(), "cp {} {}", source.display(), path.display());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
  }

  /// One shared host of `executable`, with the small config.
  fn settings(executable: PathBuf) -> Settings {
    Settings {
      config: config(),
      executable,
      unresponsive_after: Duration::from_secs(60),
      hosts: 1,
      require_sandbox: false,
      recycle_above_bytes: u64::MAX,
      history_caps: HistoryCaps { per_run_mb: 64.0, total_mb: 1024.0 },
      max_tool_calls: u32::MAX,
    }
  }

  /// Submit `return 1` as run `run_id`, and wait for its end.
  fn run_one(supervisor: &Supervisor, run_id: u32) -> Completion {
    let (send, receive) = mpsc::channel();
    let deliver: Deliver = Box::new(move |end| {
      let _ = send.send(match end {
        RunEnd::Output(output, _) => Some(output.completion),
        RunEnd::Refused => None,
      });
    });
    supervisor.submit(run_id, "return 1".into(), r#"{"namespaces":[]}"#.into(), deliver).unwrap();
    receive.recv_timeout(Duration::from_secs(60)).expect("the run settles").expect("not refused")
  }

  /// Run one program against a hostile host: how did the run end?
  fn run_against(name: &str, hostile: &str) -> Completion {
    let supervisor = Supervisor::start(settings(hostile_host(name, hostile)), Arc::default()).unwrap();
    let completion = run_one(&supervisor, 1);
    assert_eq!(supervisor.stats().runs_lost_to_host_exits, 1.0, "{name}");
    supervisor.shutdown();
    completion
  }

  #[test]
  fn a_host_that_breaks_the_protocol_ends_its_runs_never_the_harness() {
    // Each: a frame that must not decode, or a message the host has no right to send.
    let cases = [
      ("unknown-tag", "0100000063"),
      ("field-cut-short", "03000000020102"),
      ("bytes-left-over", "0600000002RUN00"),
      ("frame-too-long", "01000080ff"),
      ("log-for-another-run", "journal:0b00000003e7030000010000004100"),
      // Each stream carries its own frames only.
      ("log-on-the-channel", "0b00000003RUN010000004100"),
      ("finished-on-the-journal", "journal:1e00000005RUN00000000000000000000000000000000000000000000000000"),
      ("journal-frame-too-long", "journal:01000080ff"),
      ("finished-with-an-unknown-completion", "1e00000005RUN00000000000000000000000000000000000000000000000009"),
      ("stats-never-asked-for", "4100000007ffffffffffffffff0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"),
      ("ready-twice", "05000000013f000000"),
      ("calls-with-a-count-it-cannot-hold", "0500000004ffffffff"),
      ("call-args-not-utf8", "1e0000000401000000RUN00000000000000000000000001000000ff00000000"),
      // A long string whose path leads to a place that holds a value, or to
      // no place at all (js/01_lossless_json.js writes null there).
      (
        "call-string-at-a-value",
        "350000000401000000RUN000000000000000000000000070000007b2261223a317d01000000070000005b5b2261225d5d000100000078",
      ),
      (
        "call-string-at-no-place",
        "380000000401000000RUN0000000000000000000000000a0000007b2261223a6e756c6c7d01000000070000005b5b2262225d5d000100000078",
      ),
      ("failure-of-an-unknown-kind", "2300000005RUN000000000000000000000000000000000000000000000000026300000000"),
    ];
    for (name, hostile) in cases {
      match run_against(name, hostile) {
        Completion::Failure { kind: FailureKind::WorkerExit, message } => {
          let message = String::from_utf16_lossy(&message);
          assert!(message.starts_with("the isolate host broke the channel's protocol ("), "{name}: {message}");
        }
        other => panic!("{name}: {other:?}"),
      }
    }
  }

  #[test]
  fn require_sandbox_refuses_a_host_that_could_not_lock_itself_down() {
    let mut partial = Protections::default();
    partial.insert(Protection::NoNewPrivs);
    partial.insert(Protection::OomFirst);
    let executable = hostile_host_protected("partial-lockdown", partial, "");
    let settings = |require_sandbox| Settings { require_sandbox, ..settings(executable.clone()) };
    let refused = Supervisor::start(settings(true), Arc::default()).err().expect("refused");
    assert_eq!(
      refused,
      format!(
        "the isolate host did not start: the isolate host could not lock itself down \
         (seccomp, landlock, namespaces, noDumps refused by this machine) and requireSandbox is set \
         (the host executable: {})",
        executable.display()
      )
    );
    // Without the requirement, the same host runs, and stats say what is off.
    let supervisor = Supervisor::start(settings(false), Arc::default()).unwrap();
    let sandbox = [
      ("seccomp", false),
      ("noNewPrivs", true),
      ("landlock", false),
      ("namespaces", false),
      ("noDumps", false),
      ("oomFirst", true),
    ];
    assert_eq!(supervisor.stats().sandbox, sandbox.map(|(name, on)| (name.to_owned(), on)).into());
    supervisor.shutdown();
  }

  fn record() -> RunRecord {
    let mut record =
      RunRecord::new(Box::new(|_| {}), 1 << 20, u32::MAX, [0; 4], "return 1".into(), String::new(), Instant::now());
    (record.host, record.started) = (Some(1), true);
    record
  }

  /// A record whose run made a call the tool has not answered.
  fn waiting() -> RunRecord {
    let mut record = record();
    let call = HostCall {
      run_id: 1,
      call_id: 0,
      namespace: 0,
      function: 0,
      args: "[]".into(),
      paths: String::new(),
      strings: Vec::new(),
    };
    record.history.call(&call, CallIdentity::of(&call));
    record
  }

  /// Every way a run leaves a host that ended, from one decision.
  #[test]
  fn what_becomes_of_a_run_whose_host_ended() {
    let end = "the isolate host stopped: killed";
    let lost = |loss| Fate::Lost(end.to_owned(), loss);
    // Waiting on a tool: executed again, on a shared host.
    assert_eq!(fate(&mut waiting(), false, false, end), Fate::Reexecuted { alone: false });
    // Computing: a suspect, executed again alone; alone, the culprit.
    assert_eq!(fate(&mut record(), false, false, end), Fate::Reexecuted { alone: true });
    assert_eq!(fate(&mut record(), false, true, end), lost(HostLoss::Running));
    // Waiting, on a host of its own: not the culprit.
    assert_eq!(fate(&mut waiting(), false, true, end), Fate::Reexecuted { alone: false });
    // Not started: placed again.
    let mut placed = record();
    placed.started = false;
    assert_eq!(fate(&mut placed, false, false, end), Fate::PlacedAgain { alone: false });
    // Its second host ended: alone; its third: it fails, started or not.
    let mut second = waiting();
    second.hosts_lost = 1;
    assert_eq!(fate(&mut second, false, false, end), Fate::Reexecuted { alone: true });
    second.started = true;
    assert_eq!(fate(&mut second, false, false, end), lost(HostLoss::TooManyHosts));
    let mut third = record();
    (third.started, third.placements_lost) = (false, 2);
    assert_eq!(fate(&mut third, false, false, end), lost(HostLoss::TooManyHosts));
    // Hosts that ended before it started count apart from those it ran on.
    let mut both = waiting();
    both.hosts_lost = 1;
    both.started = false;
    assert_eq!(fate(&mut both, false, false, end), Fate::PlacedAgain { alone: false });
    // A quarantined program stays alone.
    let mut quarantined = waiting();
    quarantined.alone = true;
    assert_eq!(fate(&mut quarantined, false, false, end), Fate::Reexecuted { alone: true });
    // Its history given up: it cannot be executed again.
    let mut over = waiting();
    over.history_over = Some(HostLoss::HistoryOverCap { key: "maxRunHistoryMb", mb: 1.0 });
    assert_eq!(fate(&mut over, false, false, end), lost(HostLoss::HistoryOverCap { key: "maxRunHistoryMb", mb: 1.0 }));
    // Diverged: the end its re-execution followed is the one it names.
    let mut diverged = waiting();
    diverged.diverged = Some(Divergence::FinishedEarly);
    diverged.lost_host = Some("the first end".into());
    assert_eq!(
      fate(&mut diverged, false, false, end),
      Fate::Lost("the first end".into(), HostLoss::Diverged(Divergence::FinishedEarly))
    );
    // The caller's abort, and disposal, win.
    let mut aborted = waiting();
    aborted.aborted = Some(vec![u16::from(b'x')]);
    assert_eq!(fate(&mut aborted, false, false, end), Fate::Aborted(vec![u16::from(b'x')]));
    assert_eq!(fate(&mut waiting(), true, false, end), Fate::Disposed);
  }

  /// A host that sends a call twice (the same run and call id) breaks the
  /// protocol: it is ended, and the tool is called once. The run, waiting
  /// on that call, is executed again on each host that replaces it (the
  /// same hostile script, which sends the call twice again: the recorded
  /// call waits for the tool's answer, the repeat ends the host), until it
  /// has been on three hosts that ended.
  #[test]
  fn a_host_that_repeats_a_call_is_ended_and_the_tool_is_called_once() {
    // Calls: one call of RUN, id 0, namespace 0, function 0, argument "[]".
    let call = "1f0000000401000000RUN000000000000000000000000020000005b5d00000000";
    let calls = Arc::new(CallOutbox::default());
    let executable = hostile_host("repeated-call", &format!("{call}{call}"));
    let supervisor = Supervisor::start(settings(executable), calls.clone()).unwrap();
    let completion = run_one(&supervisor, 1);
    let Completion::Failure { kind: FailureKind::WorkerExit, message } = completion else {
      panic!("{completion:?}");
    };
    let message = String::from_utf16_lossy(&message);
    assert!(
      message.starts_with("the isolate host broke the channel's protocol (call 0 of run 1, where its next call is 1)"),
      "{message}"
    );
    assert!(
      message.ends_with("; the run was on 3 isolate hosts that ended, and is not re-executed again"),
      "{message}"
    );
    let called = calls.drain();
    assert_eq!(called.len(), 1, "{called:?}");
    assert_eq!((called[0].run_id, called[0].call_id, called[0].args.as_str()), (1, 0, "[]"));
    let stats = supervisor.stats();
    assert_eq!((stats.runs_reexecuted, stats.runs_lost_to_host_exits), (2.0, 1.0));
    supervisor.shutdown();
  }

  #[test]
  fn runs_waiting_for_a_host_that_can_no_longer_be_started_fail_instead_of_waiting() {
    // A host that is ready, then breaks the protocol on its first run; by
    // then its executable is gone, so no replacement can be spawned.
    let executable = hostile_host("gone-after-start", "0100000063");
    let supervisor = Supervisor::start(settings(executable.clone()), Arc::default()).unwrap();
    std::fs::remove_file(&executable).unwrap();
    let run = |run_id| run_one(&supervisor, run_id);
    let message = |completion| match completion {
      Completion::Failure { kind: FailureKind::WorkerExit, message } => String::from_utf16_lossy(&message),
      other => panic!("{other:?}"),
    };
    let first = message(run(1));
    assert!(first.starts_with("the isolate host broke the channel's protocol"), "{first}");
    assert_eq!(
      message(run(2)),
      "no isolate host could be started (the isolate host could not be started: No such file or directory (os error 2))"
    );
    supervisor.shutdown();
  }

  #[test]
  fn restarts_back_off_to_one_per_two_seconds() {
    assert_eq!(restart_delay(0), Duration::ZERO);
    assert_eq!(restart_delay(1), Duration::ZERO);
    assert_eq!(restart_delay(2), Duration::from_millis(50));
    assert_eq!(restart_delay(3), Duration::from_millis(100));
    assert_eq!(restart_delay(7), Duration::from_millis(1600));
    assert_eq!(restart_delay(8), Duration::from_secs(2));
    assert_eq!(restart_delay(1000), Duration::from_secs(2));
  }
}
