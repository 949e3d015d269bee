//! A host's life: its slot, its start (the first hosts make the runtime
//! ready), the back-off of restarts, its recycling past `hostMaxRssMb`,
//! and its end, with what becomes of the runs it held.

use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dsh_protocol::doorbell::BellListener;
use dsh_protocol::failure::{HostLoss, StopReason};
use dsh_protocol::frame::{HostStats, ToHost};
use dsh_protocol::inbox::Inbox;
use dsh_protocol::ledger::FailureKind;
use dsh_protocol::lock::lock;
use dsh_protocol::protections::Protections;
use dsh_protocol::ring::RingEnds;

use crate::host_process::{spawn, HostEnd, HostLink, Spawned, StderrTail};
use crate::node_bell::RingsInVain;

use super::heartbeat::resident_bytes;
use super::inbound::read_host;
use super::run_record::{fate, stopped, Fate, FinishWith};
use super::{Delivery, State, Supervisor};

/// How long a host may take from its start to `Ready`.
pub(super) const HOST_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Hosts that died before they were ready, in a row, after which the runs
/// waiting for a host fail (`worker-exit`) instead of waiting on.
pub(super) const MAX_START_FAILURES: u32 = 3;

/// A host that lived at least this long before it died ends a crash loop:
/// the next host starts at once.
pub(super) const HEALTHY_LIFE: Duration = Duration::from_secs(5);

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

/// One live host.
pub(super) struct Host {
  pub(super) generation: u64,
  /// Its slot in [`State::slots`].
  pub(super) slot: usize,
  pub(super) pid: u32,
  pub(super) link: Arc<HostLink>,
  /// The reading end of its channel: its reader thread reads every frame;
  /// Node's main thread, lingering for a call, may take calls itself.
  pub(super) inbox: Arc<Inbox>,
  /// The reading end of its journal (its runs' starts and log entries),
  /// read by its reader thread before each frame of the channel and once
  /// the host has ended (`dsh_protocol::frame`).
  pub(super) journal: Inbox,
  pub(super) child: Mutex<Child>,
  pub(super) stderr: StderrTail,
  pub(super) born: Instant,
  /// Why the supervisor killed it, if it did.
  pub(super) killed_for: Mutex<Option<HostEnd>>,
  /// The listening end of its Node bell (`node_bell.rs`), which Node's
  /// main thread polls while `node_bell_heard`.
  pub(super) node_bell: BellListener,
  /// What its rings of that bell brought.
  pub(super) rings: RingsInVain,
  /// Its Node bell is in the runtime's set, and it has been told so.
  pub(super) node_bell_heard: AtomicBool,
}

impl Host {
  pub(super) fn send(&self, message: &ToHost) {
    let mut frame = Vec::new();
    message.encode(&mut frame);
    self.link.send(frame);
  }

  /// Kill the host and end its channel, so that its reader sees the end
  /// even if another process still holds the host's end of the socket.
  /// Never waits: a reader that holds the child is already reaping it.
  pub(super) fn kill(&self, why: HostEnd) {
    lock(&self.killed_for).get_or_insert(why);
    if let Ok(mut child) = self.child.try_lock() {
      let _ = child.kill();
    }
    self.link.shut_down();
  }
}

/// A place for one host, and what the supervisor knows of it.
#[derive(Default)]
pub(super) struct Slot {
  pub(super) host: Option<Arc<Host>>,
  pub(super) ready: bool,
  /// Runs placed on its host and not finished.
  pub(super) placed: usize,
  /// When its next host may start (after a death, with backoff).
  pub(super) restart_at: Option<Instant>,
  pub(super) last_heard: Option<Instant>,
  /// The last stats request it answered, and its answer.
  pub(super) stats_answered: u64,
  pub(super) stats: HostStats,
  /// What its host said it has in effect, when it became ready.
  pub(super) protections: Protections,
  /// Its host has started a program (until then it holds only what a
  /// fresh host holds, and recycling it would gain nothing).
  pub(super) ran_any: bool,
  /// A host of one run that has been given its run: it takes no other,
  /// and is shut down once that run ends.
  pub(super) taken: bool,
  /// Its host was found holding this many bytes, over
  /// `recycle_above_bytes`: no run is placed on it, and it is shut down
  /// once its runs end.
  pub(super) retiring: Option<u64>,
}

impl Slot {
  /// Its host is alive and ready.
  pub(super) fn takes_runs(&self) -> bool {
    self.ready && self.host.is_some()
  }
}

impl Supervisor {
  /// Start a host in `slot` (the caller holds the state); its reader thread
  /// takes it from there.
  pub(super) fn start_host(self: &Arc<Self>, state: &mut State, slot: usize) -> Result<(), String> {
    state.slots[slot].restart_at = None;
    let Spawned { mut child, channel, journal, stderr, node_bell } = match spawn(&self.settings.executable) {
      Ok(spawned) => spawned,
      Err(message) => {
        state.last_host_end = Some(message.clone());
        return Err(message);
      }
    };
    let RingEnds { reader, writer } = channel;
    let (inbox, link) = match HostLink::start(writer).map(|link| (Arc::new(Inbox::new(reader)), link)) {
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
      node_bell,
      rings: RingsInVain::default(),
      node_bell_heard: AtomicBool::new(false),
    });
    host.send(&ToHost::Configure { config: Box::new(self.settings.host_config(slot)) });
    state.slots[slot] = Slot { host: Some(host.clone()), last_heard: Some(Instant::now()), ..Slot::default() };
    let supervisor = Arc::downgrade(self);
    let reader = dsh_named_thread::spawn("dsh-host-reader", move || read_host(&supervisor, &host));
    match reader {
      Ok(reader) => {
        if let Some(host) = &state.slots[slot].host {
          let mut hosts = lock(&self.hosts);
          if self.node_listening.load(Ordering::SeqCst) {
            self.listen_to(host);
          }
          hosts.push(host.clone());
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

  /// When hosts do not start (`MAX_START_FAILURES` in a row, whether they
  /// died before ready or could not be spawned at all) and none is ready,
  /// fail the waiting runs rather than keep them waiting for a host that
  /// may never come.
  pub(super) fn fail_queue_if_no_host_starts(&self, state: &mut State, why: &str) -> Vec<Delivery> {
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
  pub(super) fn fail_alone_if_no_host_starts(&self, state: &mut State, why: &str) -> Vec<Delivery> {
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
  pub(super) fn recycle_if_over(&self, state: &mut State, slot: usize) {
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
  pub(super) fn host_ended(&self, host: &Arc<Host>, end: HostEnd) {
    {
      let mut hosts = lock(&self.hosts);
      self.stop_listening_to(host);
      hosts.retain(|alive| !Arc::ptr_eq(alive, host));
    }
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
      // Resubmitted, a program shown to end hosts runs in a host of its own.
      let culprit = fate.ends_hosts().then(|| record.program.clone());
      let with = match fate {
        Fate::Disposed => stopped(&StopReason::Disposed, &self.settings.config),
        Fate::Aborted(reason) => stopped(&StopReason::Abort(reason), &self.settings.config),
        Fate::Unstoppable(kind, message) => {
          state.runs_lost += 1;
          FinishWith::Failure(kind, message)
        }
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
          if let HostLoss::Diverged(_) = loss {
            state.reexecutions_diverged += 1;
          }
          state.runs_lost += 1;
          stopped(&StopReason::HostEnded { end, loss }, &self.settings.config)
        }
      };
      if let Some(program) = culprit {
        state.quarantine.add(&program, Instant::now());
      }
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
