//! What arrives from a host, and its checks: each host's reader thread
//! (its journal read before each frame of its channel), every frame
//! decoded as hostile input, calls taken into the runs' histories before
//! any reaches a tool, results settled through the harness's own ledger.

use std::sync::{Arc, Weak};
use std::time::Instant;

use dsh_protocol::failure::{HostLoss, StopReason};
use dsh_protocol::frame::{Answer, BindingCall, FromHost, Reply, ReplyKind, ToHost};
use dsh_protocol::history::{CallVerdict, DeferredDigest, Identity, LogVerdict};
use dsh_protocol::inbox::{NextInBlocks, Ready, Watching};
use dsh_protocol::ledger::{Completion, FailureKind};
use dsh_protocol::lock::lock;
use dsh_protocol::protections::Protections;

use crate::host_process::HostEnd;

use super::host_life::Host;
use super::run_record::{diverge, stopped, FinishWith};
use super::{RunEnd, State, Supervisor};

impl Supervisor {
  /// One frame (its tag and fields) from `host`, read from its journal
  /// (`from_journal`) or its channel. An error is a protocol violation:
  /// the host is ended for it.
  pub(super) fn receive_frame(&self, host: &Arc<Host>, frame: &[u8], from_journal: bool) -> Result<(), String> {
    let message = FromHost::decode(frame).map_err(|error| error.0)?;
    self.receive(host, message, from_journal)
  }

  /// One message from `host` (see [`Supervisor::receive_frame`]).
  pub(super) fn receive(&self, host: &Arc<Host>, message: FromHost, from_journal: bool) -> Result<(), String> {
    if message.is_journal_entry() != from_journal {
      let (stream, belongs) = if from_journal { ("journal", "channel") } else { ("channel", "journal") };
      return Err(format!("a frame of the {belongs} on the {stream}"));
    }
    // Digests of the calls' arguments, begun before the state is locked.
    let identities: Vec<Identity> = match &message {
      FromHost::Calls(calls) => calls.iter().map(Identity::of).collect(),
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
      // A run that finished as its host named it (its `Finished` crossed
      // first) is left as it finished; a host naming a run it does not
      // hold changes nothing.
      FromHost::Unstoppable { run_id, kind, message } => {
        if let Some(record) = state.runs.get_mut(&run_id).filter(|record| record.host == Some(host.generation)) {
          if record.started {
            record.unstoppable = Some((kind, message));
          }
        }
      }
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
          return Err(format!("a binding call for run {}, which is not on this host", call.run_id));
        }
        let calls = calls.into_iter().zip(identities).filter(|(call, _)| on_this_host(&state, call.run_id)).collect();
        let (to_tools, answers, deferred, violation) = self.take_calls_into_histories(&mut state, host, calls);
        drop(state);
        if !answers.is_empty() {
          host.send(&ToHost::Replies(answers));
        }
        // The calls before a violation were taken into their histories:
        // their tools are called, once, whatever the host does next.
        if !to_tools.is_empty() {
          self.calls.push(to_tools);
        }
        self.finish_digests(deferred);
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
        if seq > state.stats_requests.latest() {
          return Err(format!("stats for request {seq}, which was never sent"));
        }
        let now = Instant::now();
        let recently_asked = state.stats_requests.asked_within(seq, now, self.settings.unresponsive_after);
        let slot = &mut state.slots[slot];
        // Only an answer to the heartbeat shows the host's own loop is
        // alive: its run threads could go on writing without it. An answer
        // to no request of the last `hostUnresponsiveMs`, or no newer than
        // the host's last, could be made up without reading the channel
        // (`stats_requests.rs`): it counts for nothing.
        if !recently_asked || seq <= slot.stats_answered {
          return Ok(());
        }
        slot.last_heard = Some(now);
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
  /// run; new calls recorded with their digests deferred are returned with
  /// them, for [`Supervisor::finish_digests`]. A call id out of turn is the
  /// host breaking the protocol: the calls before it are still returned,
  /// the violation last.
  pub(super) fn take_calls_into_histories(
    &self,
    state: &mut State,
    host: &Host,
    calls: Vec<(BindingCall, Identity)>,
  ) -> (Vec<BindingCall>, Vec<Reply>, Vec<DigestToFinish>, Option<String>) {
    let mut to_tools = Vec::with_capacity(calls.len());
    let mut answers = Vec::new();
    let mut deferred = Vec::new();
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
          if let Some(digest) = record.history.deferred_digest(call.call_id) {
            deferred.push(DigestToFinish { run_id, call_id: call.call_id, digest });
          }
          to_tools.push(call);
        }
        CallVerdict::Answer(answer) => answers.push(Reply { run_id, call_id: call.call_id, answer }),
        CallVerdict::Refused(text) => {
          record.cost.refused(call.call_id, self.settings.max_tool_calls);
          answers.push(Reply { run_id, call_id: call.call_id, answer: Answer::plain(ReplyKind::Reject, text) });
        }
        CallVerdict::AwaitAnswer => {}
        CallVerdict::Diverged(divergence) => diverge(record, run_id, divergence, host),
        CallVerdict::Violation(why) => return (to_tools, answers, deferred, Some(why)),
      }
      if grew > 0 {
        self.account_history(state, run_id);
      }
    }
    (to_tools, answers, deferred, None)
  }

  /// The digests of new calls' long strings, finished once their tools
  /// have the calls (the thread that took them, beside the tools, outside
  /// the state's lock), then filled into the histories. Before its reader
  /// hands a host's end to [`Supervisor::host_ended`], the only place a
  /// re-execution begins, every frame it took has been through here; and
  /// a history that compared a deferred identity first would finish it
  /// itself (`history.rs`).
  pub(super) fn finish_digests(&self, deferred: Vec<DigestToFinish>) {
    if deferred.is_empty() {
      return;
    }
    let finished: Vec<_> =
      deferred.into_iter().map(|deferred| (deferred.run_id, deferred.call_id, deferred.digest.finish())).collect();
    let mut state = lock(&self.state);
    for (run_id, call_id, identity) in finished {
      if let Some(record) = state.runs.get_mut(&run_id) {
        record.history.identify(call_id, identity);
      }
    }
  }

  /// How a run its host reports finished settles: as reported; or, for an
  /// execution that diverged or finished before making its history again,
  /// as a divergence. An abort, or a timeout, is what it says. Once
  /// disposal has begun, as disposed, whatever was reported.
  pub(super) fn finished_as(&self, state: &mut State, run_id: u32, completion: Completion) -> FinishWith {
    if state.disposing {
      return stopped(&StopReason::Disposed, &self.settings.config);
    }
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

  /// Node's main thread, lingering for a run's next call: take the frames
  /// for Node (a run's calls, into the call outbox; a run's end) that are
  /// at the head of a host's channel, whole, off the channel itself
  /// (`dsh_protocol::inbox`), one per host, as the host's reader would
  /// have. Never blocks on a reader. Whether any was taken: the run
  /// answered last may have ended instead of calling again, and a linger
  /// that took its end has nothing left to wait for.
  pub fn take_for_linger(&self, watching: &mut Watching) -> bool {
    let hosts = lock(&self.hosts).clone();
    let mut taken = false;
    for host in &hosts {
      taken |= self.take_frames(watching, host, &FromHost::FOR_NODE_TAGS, 1);
    }
    taken
  }

  /// A thread awake for them (Node's main thread, lingering or rung by a
  /// Node bell): take the frames tagged one of `tags` whole at the head of
  /// `host`'s channel, at most `most`, and handle them as its reader
  /// would: calls into the call outbox, any other after what the host
  /// wrote to its journal before it. A frame that breaks the protocol ends
  /// the host. Whether any was taken.
  pub(super) fn take_frames(&self, watching: &mut Watching, host: &Arc<Host>, tags: &[u8], most: usize) -> bool {
    let mut taken = 0;
    let mut violation = None;
    while taken < most
      && violation.is_none()
      && watching.try_take(&host.inbox, tags, |frame| {
        let journal_first = match frame.first() {
          Some(&tag) if tag != FromHost::CALLS_TAG => read_journal(self, host, &mut Vec::new()),
          _ => Ok(()),
        };
        violation = journal_first.and_then(|()| self.receive_frame(host, frame, false)).err();
      })
    {
      taken += 1;
    }
    if let Some(error) = violation {
      host.kill(HostEnd::ProtocolViolation(error));
    }
    taken > 0
  }
}

/// A new call whose digest is still to be finished
/// ([`Supervisor::finish_digests`]).
pub(super) struct DigestToFinish {
  run_id: u32,
  call_id: u32,
  digest: DeferredDigest,
}

/// A host's reader thread: every frame it sends, until it ends.
pub(super) fn read_host(supervisor: &Weak<Supervisor>, host: &Arc<Host>) {
  let (mut frame, mut journal_frame) = (Vec::new(), Vec::new());
  let violation = loop {
    // Handled under the inbox's lock (held by `_reading`), so that calls
    // the main thread takes itself are handled in the order they were sent.
    // A long frame is read into a block of its own (see `BlockFrame`).
    let (_reading, block) = match host.inbox.next_in_blocks(&mut frame) {
      Ok(NextInBlocks::Frame(reading)) => (reading, None),
      Ok(NextInBlocks::Block(reading, block)) => (reading, Some(block)),
      // Ended by the harness itself when writing found the ring broken.
      Ok(NextInBlocks::Ended) => break host.link.violation(),
      Err(error) if error.kind() == std::io::ErrorKind::InvalidData => break Some(error.to_string()),
      Err(_) => break host.link.violation(),
    };
    let Some(supervisor) = supervisor.upgrade() else { break None };
    // What the host wrote to its journal before this frame comes first.
    if let Err(error) = read_journal(&supervisor, host, &mut journal_frame) {
      break Some(error);
    }
    // A long frame's calls' long strings are decoded as parts of its block.
    let message = match &block {
      Some(block) => FromHost::decode_shared(block),
      None => FromHost::decode(&frame),
    };
    if let Err(error) = message.map_err(|error| error.0).and_then(|message| supervisor.receive(host, message, false)) {
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
pub(super) fn read_journal(supervisor: &Supervisor, host: &Arc<Host>, frame: &mut Vec<u8>) -> Result<(), String> {
  loop {
    let _reading = match host.journal.next_ready(frame) {
      Ok(Ready::Frame(reading)) => reading,
      Ok(Ready::Empty | Ready::Ended) => return Ok(()),
      Err(error) => return Err(format!("its journal: {error}")),
    };
    supervisor.receive_frame(host, frame, true)?;
  }
}
