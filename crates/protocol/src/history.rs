//! A run's history, kept by the harness: what entered the run from outside,
//! in order, so that a run whose isolate host dies can be executed again on
//! another host and reach the same point without calling any tool twice.
//!
//! What it holds: each binding call the run made (which function, and a
//! digest of the argument as it crossed), in the order the run made them,
//! with the reply the harness's tool gave it once there is one; and the
//! readings of its clocks (`readings.rs`), which its host sends before the
//! log entry or call that follows them. Its random numbers need no record:
//! they come from a seed the harness keeps (`frame::RunSeed`). The run's
//! log entries are the other half of what the world saw of it; the
//! harness's replay of the run's ledger holds them (`ledger.rs`), and
//! [`RunHistory::log`] reads them there rather than keeping them twice.
//!
//! A run's calls are numbered by its host from 0 in the order it makes them
//! (the call id), in every execution. So an execution's k-th call is the
//! history's k-th call: the same function and argument, answered from the
//! history while it lasts (the tool is not called again), or by the tool's
//! pending answer when the call was in flight at the death; from the
//! history's end on, the run is live and its calls go to the tools. An id
//! other than the next one is a host breaking the protocol (a call sent
//! twice would call a tool twice).
//!
//! What re-execution cannot make equal is caught, never passed over: a
//! call or a log entry that is not the recorded one, or a finish before the
//! history is made again, is a [`Divergence`], and the run fails saying so.
//! Whatever the program did that nobody outside saw (values it computed
//! between calls, the order in which replies reached it) may differ between
//! executions: the run's result is one the world's record admits.
//!
//! Bounded: the replies held count against a per-run cap; past it the run
//! keeps running live, but its history is dropped ([`RunHistory::give_up`])
//! and a host death then ends it. The harness bounds all runs' histories
//! together with the same call.
//!
//! Pure: failures are data, every outcome goes through one path, and
//! nothing here knows about hosts, threads or napi.

use crate::failure::{tool_calls_over, Divergence};
use crate::frame::{Answer, BindingCall, HistoryEnd};
use crate::ledger::OutputLedger;
use crate::out_of_band::RawString;
use crate::readings::Readings;
use crate::text::SharedBytes;

/// What makes two calls the same call: the function, and a BLAKE3 digest
/// of the argument exactly as it crossed (its JSON, the paths and bytes of
/// its long strings, each length-prefixed so no two arguments run
/// together). BLAKE3, not SHA-256: for a 4 MB string argument SHA-256 (with
/// the CPU's SHA extensions) cost ~2.7 ms a call, a third of the call;
/// BLAKE3's SIMD lanes take a fraction of that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallIdentity {
  namespace: u32,
  function: u32,
  argument: [u8; 32],
}

/// A call's identity as it is taken into the history. Only a call the
/// history already holds (one a re-execution makes again) needs its
/// identity at once, to be compared; a new call's is only stored, for a
/// re-execution that may never come. So the digest of a new call's long
/// one-byte strings, most of the work for a long argument, can wait until
/// its tool has it: [`Identity::Deferred`], finished by whoever took the
/// call ([`DeferredDigest::finish`], then [`RunHistory::identify`]) outside
/// its locks. Exact either way: a history that must compare a deferred
/// identity before it is filled in finishes the digest itself.
#[derive(Debug, Clone)]
pub enum Identity {
  Known(CallIdentity),
  Deferred(DeferredDigest),
}

/// A call's digest begun: its JSON, paths and UTF-16 strings digested,
/// its long one-byte strings held (shared, not copied) to digest in
/// [`DeferredDigest::finish`]. The same bytes in the same order as a digest
/// made at once, so both give the same [`CallIdentity`].
#[derive(Debug, Clone)]
pub struct DeferredDigest {
  namespace: u32,
  function: u32,
  /// Boxed: a hasher is ~2 KB, and a history holds one per call deferred.
  digest: Box<blake3::Hasher>,
  strings: Vec<SharedBytes>,
}

/// One length-prefixed, tagged part of an argument's digest.
fn digest_part(digest: &mut blake3::Hasher, tag: u8, bytes: &[u8]) {
  digest.update(&[tag]);
  digest.update(&(bytes.len() as u64).to_le_bytes());
  digest.update(bytes);
}

/// A UTF-16 string's part of an argument's digest: as [`digest_part`] of
/// its little-endian bytes, turned into bytes in pieces, so a long string
/// is not copied whole to be hashed (each piece large enough for BLAKE3 to
/// hash its chunks side by side).
fn digest_utf16(digest: &mut blake3::Hasher, units: &[u16]) {
  digest.update(b"u");
  digest.update(&(units.len() as u64 * 2).to_le_bytes());
  let mut piece = [0u8; 32 * 1024];
  for chunk in units.chunks(piece.len() / 2) {
    for (unit, bytes) in chunk.iter().zip(piece.chunks_exact_mut(2)) {
      bytes.copy_from_slice(&unit.to_le_bytes());
    }
    digest.update(&piece[..chunk.len() * 2]);
  }
}

impl Identity {
  /// The call's identity: known when its argument has no long one-byte
  /// strings (or has UTF-16 ones too, digested in their place), deferred
  /// otherwise.
  pub fn of(call: &BindingCall) -> Identity {
    let mut digest = blake3::Hasher::new();
    digest_part(&mut digest, b'j', call.args.as_bytes());
    digest_part(&mut digest, b'p', call.paths.as_bytes());
    let one_byte: Option<Vec<SharedBytes>> = call
      .strings
      .iter()
      .map(|string| match string {
        RawString::Latin1(bytes) => Some(bytes.clone()),
        RawString::Utf16(_) => None,
      })
      .collect();
    let Some(strings) = one_byte.filter(|strings| !strings.is_empty()) else {
      for string in &call.strings {
        match string {
          RawString::Latin1(bytes) => digest_part(&mut digest, b'l', bytes),
          RawString::Utf16(units) => digest_utf16(&mut digest, units),
        }
      }
      return Identity::Known(CallIdentity {
        namespace: call.namespace,
        function: call.function,
        argument: *digest.finalize().as_bytes(),
      });
    };
    Identity::Deferred(DeferredDigest {
      namespace: call.namespace,
      function: call.function,
      digest: Box::new(digest),
      strings,
    })
  }

  /// The identity, its digest finished here if it was deferred.
  pub fn known(&self) -> CallIdentity {
    match self {
      Identity::Known(identity) => *identity,
      Identity::Deferred(deferred) => deferred.finish(),
    }
  }
}

impl DeferredDigest {
  /// The identity: the long strings digested after what came before them.
  pub fn finish(&self) -> CallIdentity {
    let mut digest = (*self.digest).clone();
    for bytes in &self.strings {
      digest_part(&mut digest, b'l', bytes);
    }
    CallIdentity { namespace: self.namespace, function: self.function, argument: *digest.finalize().as_bytes() }
  }
}

/// How a recorded call stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Recorded {
  /// The tool has not answered yet.
  Awaited,
  /// The tool's answer, held to answer the call again.
  Held(Answer),
}

#[derive(Debug)]
struct RecordedCall {
  identity: Identity,
  answer: Recorded,
}

/// What one execution of the run (its first, or a re-execution) has
/// reached.
#[derive(Debug, Default)]
struct Execution {
  /// Calls it has made (the next call's id).
  calls: u32,
  /// Log entries it has written.
  logs: usize,
  /// Of its calls, those whose reply the harness has not sent it.
  unanswered: usize,
}

/// What to do with a call a host sent.
#[derive(Debug, PartialEq, Eq)]
pub enum CallVerdict {
  /// A new call: send it to the tool.
  Call,
  /// Made before: answer it with this (the tool is not called).
  Answer(Answer),
  /// Past the run's `maxToolCalls`: reject it with this text (a JSON
  /// string of the message); the tool is not called.
  Refused(String),
  /// Made before, and its tool has not answered yet: its answer will
  /// answer this execution's call too.
  AwaitAnswer,
  /// Not the call the history holds at its place.
  Diverged(Divergence),
  /// Not the id of the run's next call: the host breaks the protocol.
  Violation(String),
}

/// What to do with a tool's reply.
#[derive(Debug, PartialEq, Eq)]
pub enum ReplyVerdict {
  /// Held in the history; `send`: the current execution has made the call,
  /// so the reply goes to its host now (otherwise it waits here for the
  /// call). `grew`: the bytes the history grew by.
  Held { send: bool, grew: u64 },
  /// The history was given up: send this to the current execution, which
  /// made the call; nothing is held.
  Pass(Answer),
  /// No call waits for it (never made, or answered already).
  Unwanted,
}

/// What to do with a log entry a host sent.
#[derive(Debug, PartialEq, Eq)]
pub enum LogVerdict {
  /// A new entry: into the ledger.
  Admit,
  /// The recorded entry, written again: the ledger has it.
  Recorded,
  Diverged(Divergence),
}

/// A run's history (see the module doc).
#[derive(Debug)]
pub struct RunHistory {
  /// The most calls the run may make (`maxToolCalls`): a call past them
  /// is answered with a rejection here, and never reaches a tool.
  max_calls: u32,
  calls: Vec<RecordedCall>,
  readings: Readings,
  /// The most CPU its executions reported (`HistoryEnd::cpu_us`).
  cpu_us: f64,
  /// The bytes it holds (its calls' records and the replies held).
  bytes: u64,
  /// Dropped: past its cap, the run cannot be executed again.
  given_up: bool,
  /// Executions after the first.
  reexecutions: u32,
  current: Execution,
}

/// The bytes one recorded call costs besides its reply's text.
const CALL_RECORD_BYTES: u64 = std::mem::size_of::<RecordedCall>() as u64;

impl RunHistory {
  /// The history of a run that may make `max_calls` calls.
  pub fn new(max_calls: u32) -> RunHistory {
    RunHistory {
      max_calls,
      calls: Vec::new(),
      readings: Readings::default(),
      cpu_us: 0.0,
      bytes: 0,
      given_up: false,
      reexecutions: 0,
      current: Execution::default(),
    }
  }

  /// The bytes it holds: what counts against its cap.
  pub fn bytes(&self) -> u64 {
    self.bytes
  }

  /// Whether the run can be executed again from it.
  pub fn replayable(&self) -> bool {
    !self.given_up
  }

  /// Executions after the first so far.
  pub fn reexecutions(&self) -> u32 {
    self.reexecutions
  }

  /// The current execution made a call whose reply the harness has not
  /// sent it: it is waiting on a tool, not running its own code there.
  pub fn waiting_on_a_tool(&self) -> bool {
    self.current.unanswered > 0
  }

  /// Drop what the history holds: the run goes on live, its calls' ids
  /// still checked, but it cannot be executed again. Returns the bytes let
  /// go.
  pub fn give_up(&mut self) -> u64 {
    self.given_up = true;
    self.calls = Vec::new();
    self.readings = Readings::default();
    std::mem::take(&mut self.bytes)
  }

  /// Begin another execution of the run from its start.
  pub fn begin_reexecution(&mut self) {
    self.reexecutions += 1;
    self.current = Execution::default();
  }

  /// A call of the current execution, as its host sent it, and its
  /// identity (begun by the caller, which may do it outside its locks).
  /// Returns what to do, and the bytes the history grew by.
  pub fn call(&mut self, call: &BindingCall, identity: Identity) -> (CallVerdict, u64) {
    if call.call_id != self.current.calls {
      let expected = self.current.calls;
      let why = format!("call {} of run {}, where its next call is {expected}", call.call_id, call.run_id);
      return (CallVerdict::Violation(why), 0);
    }
    self.current.calls += 1;
    // Past the cap, every execution is refused alike (ids are the same in
    // each): nothing to record, and no tool called.
    if call.call_id >= self.max_calls {
      return (CallVerdict::Refused(tool_calls_over(self.max_calls)), 0);
    }
    if self.given_up {
      return (CallVerdict::Call, 0);
    }
    let Some(recorded) = self.calls.get(call.call_id as usize) else {
      self.calls.push(RecordedCall { identity, answer: Recorded::Awaited });
      self.current.unanswered += 1;
      self.bytes += CALL_RECORD_BYTES;
      return (CallVerdict::Call, CALL_RECORD_BYTES);
    };
    if recorded.identity.known() != identity.known() {
      return (CallVerdict::Diverged(Divergence::Call(u64::from(call.call_id) + 1)), 0);
    }
    let verdict = match &recorded.answer {
      Recorded::Held(answer) => CallVerdict::Answer(answer.clone()),
      Recorded::Awaited => {
        self.current.unanswered += 1;
        CallVerdict::AwaitAnswer
      }
    };
    (verdict, 0)
  }

  /// The digest call `call_id` was recorded with, if it is still to be
  /// finished (a copy sharing the strings): for the caller to finish
  /// outside its locks and give back through [`RunHistory::identify`].
  pub fn deferred_digest(&self, call_id: u32) -> Option<DeferredDigest> {
    match &self.calls.get(call_id as usize)?.identity {
      Identity::Deferred(deferred) => Some(deferred.clone()),
      Identity::Known(_) => None,
    }
  }

  /// The finished identity of call `call_id`, recorded deferred: stored in
  /// its place, letting its strings go. Nothing if the call is not there
  /// (the history given up) or its identity is known.
  pub fn identify(&mut self, call_id: u32, identity: CallIdentity) {
    if let Some(recorded) = self.calls.get_mut(call_id as usize) {
      if let Identity::Deferred(_) = recorded.identity {
        recorded.identity = Identity::Known(identity);
      }
    }
  }

  /// Readings the current execution took past those recorded (its host
  /// reads the recorded ones back first, and sends only what follows
  /// them). Returns the bytes the history grew by.
  pub fn readings(&mut self, readings: &Readings) -> u64 {
    if self.given_up {
      return 0;
    }
    let grew = self.readings.append(readings);
    self.bytes += grew;
    grew
  }

  /// The CPU the current execution reported as charged to the run (a
  /// re-execution counts from what the history ended with).
  pub fn charged(&mut self, cpu_us: f64) {
    if cpu_us.is_finite() && cpu_us > self.cpu_us {
      self.cpu_us = cpu_us;
    }
  }

  /// Where the history ends: what a re-execution is told (`ledger` holds
  /// the recorded log entries). Nothing once given up.
  pub fn end(&self, ledger: &OutputLedger) -> HistoryEnd {
    if self.given_up {
      return HistoryEnd::default();
    }
    let calls = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
    let logs = u32::try_from(ledger.entries()).unwrap_or(u32::MAX);
    HistoryEnd { cpu_us: self.cpu_us, calls, logs }
  }

  /// The readings recorded: what a re-execution reads before its clocks.
  pub fn recorded_readings(&self) -> &Readings {
    &self.readings
  }

  /// The tool's reply to call `call_id`, taken into the history (held
  /// once: the harness encodes it from here, [`RunHistory::held`]).
  pub fn reply(&mut self, call_id: u32, answer: Answer) -> ReplyVerdict {
    let made = call_id < self.current.calls;
    if self.given_up {
      return if made { ReplyVerdict::Pass(answer) } else { ReplyVerdict::Unwanted };
    }
    let Some(recorded) = self.calls.get_mut(call_id as usize) else { return ReplyVerdict::Unwanted };
    if recorded.answer != Recorded::Awaited {
      return ReplyVerdict::Unwanted;
    }
    let grew = answer.bytes();
    recorded.answer = Recorded::Held(answer);
    self.bytes += grew;
    if made {
      self.current.unanswered = self.current.unanswered.saturating_sub(1);
    }
    ReplyVerdict::Held { send: made, grew }
  }

  /// The reply held for call `call_id`, if the history holds one.
  pub fn held(&self, call_id: u32) -> Option<&Answer> {
    match &self.calls.get(call_id as usize)?.answer {
      Recorded::Held(answer) => Some(answer),
      Recorded::Awaited => None,
    }
  }

  /// A log entry of the current execution: new, the recorded one again,
  /// or not the recorded one. `ledger` holds the recorded entries.
  pub fn log(&mut self, text: &[u16], ledger: &OutputLedger) -> LogVerdict {
    let index = self.current.logs;
    self.current.logs += 1;
    match ledger.entry(index) {
      None => LogVerdict::Admit,
      Some(recorded) if recorded == text => LogVerdict::Recorded,
      Some(_) => LogVerdict::Diverged(Divergence::Log(index as u64 + 1)),
    }
  }

  /// The current execution finished: it must have made the history again.
  pub fn finish(&self, ledger: &OutputLedger) -> Result<(), Divergence> {
    if (self.current.calls as usize) < self.calls.len() || self.current.logs < ledger.entries() {
      return Err(Divergence::FinishedEarly);
    }
    Ok(())
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::frame::ReplyKind;

  fn call(call_id: u32, args: &str) -> BindingCall {
    BindingCall {
      run_id: 7,
      call_id,
      namespace: 0,
      function: 1,
      args: args.to_owned(),
      paths: String::new(),
      strings: Vec::new(),
    }
  }

  fn record(history: &mut RunHistory, call: &BindingCall) -> (CallVerdict, u64) {
    history.call(call, Identity::of(call))
  }

  fn units(text: &str) -> Vec<u16> {
    text.encode_utf16().collect()
  }

  /// An answer whose long strings crossed beside its text is held whole
  /// (text, paths and strings), and counted whole in the history's bytes.
  #[test]
  fn an_answer_with_strings_beside_it_is_held_and_counted_whole() {
    let mut history = RunHistory::new(u32::MAX);
    assert_eq!(record(&mut history, &call(0, "[]")).0, CallVerdict::Call);
    let answer = Answer {
      kind: ReplyKind::Json,
      text: "{\"text\":null}".into(),
      paths: "[[0,\"text\"]]".into(),
      strings: vec!["é".repeat(10).into()],
    };
    let bytes = (answer.text.len() + 20) as u64;
    assert_eq!(answer.bytes(), bytes);
    assert_eq!(history.reply(0, answer.clone()), ReplyVerdict::Held { send: true, grew: bytes });
    assert_eq!(history.bytes(), CALL_RECORD_BYTES + bytes);
    history.begin_reexecution();
    assert_eq!(record(&mut history, &call(0, "[]")).0, CallVerdict::Answer(answer));
  }

  /// A run that made two calls (one answered), wrote a log entry and lost
  /// its host; executed again, it is answered from the history, waits on
  /// the call in flight, and goes on live after it.
  #[test]
  fn a_reexecution_is_answered_from_the_history_then_goes_on_live() {
    let mut history = RunHistory::new(u32::MAX);
    let mut ledger = OutputLedger::new(1 << 20);
    assert_eq!(record(&mut history, &call(0, "[1]")).0, CallVerdict::Call);
    assert!(history.waiting_on_a_tool());
    assert_eq!(history.reply(0, Answer::plain(ReplyKind::Json, "10")), ReplyVerdict::Held { send: true, grew: 2 });
    assert!(!history.waiting_on_a_tool());
    assert_eq!(history.log(&units("one"), &ledger), LogVerdict::Admit);
    ledger.admit(&units("one"));
    assert_eq!(record(&mut history, &call(1, "[2]")).0, CallVerdict::Call);
    assert!(history.waiting_on_a_tool());

    history.begin_reexecution();
    assert!(!history.waiting_on_a_tool());
    assert_eq!(record(&mut history, &call(0, "[1]")).0, CallVerdict::Answer(Answer::plain(ReplyKind::Json, "10")));
    assert_eq!(history.log(&units("one"), &ledger), LogVerdict::Recorded);
    assert_eq!(history.finish(&ledger), Err(Divergence::FinishedEarly));
    assert_eq!(record(&mut history, &call(1, "[2]")).0, CallVerdict::AwaitAnswer);
    assert!(history.waiting_on_a_tool());
    // The tool answers the call in flight at the death: the reply goes to
    // the execution that made it again.
    assert_eq!(history.reply(1, Answer::plain(ReplyKind::Text, "twenty")), ReplyVerdict::Held { send: true, grew: 6 });
    assert_eq!(history.held(1), Some(&Answer::plain(ReplyKind::Text, "twenty")));
    assert_eq!(history.reply(1, Answer::plain(ReplyKind::Text, "twice")), ReplyVerdict::Unwanted);
    assert_eq!(record(&mut history, &call(2, "[3]")).0, CallVerdict::Call);
    assert_eq!(history.log(&units("two"), &ledger), LogVerdict::Admit);
    assert_eq!(history.finish(&ledger), Ok(()));
    assert_eq!(history.reexecutions(), 1);
  }

  /// A reply that comes while no execution has made the call again waits
  /// in the history, and answers the call when it is made.
  #[test]
  fn a_reply_between_executions_waits_for_its_call() {
    let mut history = RunHistory::new(u32::MAX);
    record(&mut history, &call(0, "[]"));
    history.begin_reexecution();
    assert_eq!(history.reply(0, Answer::plain(ReplyKind::Json, "1")), ReplyVerdict::Held { send: false, grew: 1 });
    assert_eq!(record(&mut history, &call(0, "[]")).0, CallVerdict::Answer(Answer::plain(ReplyKind::Json, "1")));
  }

  #[test]
  fn what_differs_is_a_divergence_never_an_answer() {
    let mut history = RunHistory::new(u32::MAX);
    let ledger = {
      let mut ledger = OutputLedger::new(1 << 20);
      ledger.admit(&units("a"));
      ledger
    };
    record(&mut history, &call(0, "[1]"));
    history.log(&units("a"), &ledger);
    history.begin_reexecution();
    assert_eq!(record(&mut history, &call(0, "[2]")).0, CallVerdict::Diverged(Divergence::Call(1)));
    let mut other_function = call(0, "[1]");
    other_function.function = 2;
    history.begin_reexecution();
    assert_eq!(record(&mut history, &other_function).0, CallVerdict::Diverged(Divergence::Call(1)));
    history.begin_reexecution();
    assert_eq!(history.log(&units("b"), &ledger), LogVerdict::Diverged(Divergence::Log(1)));
    // A long string that crossed beside the JSON is part of the argument.
    let mut with_string = call(0, "[1]");
    with_string.paths = "[[0,0]]".into();
    with_string.strings = vec![RawString::Latin1(b"x".to_vec().into())];
    history.begin_reexecution();
    assert_eq!(record(&mut history, &with_string).0, CallVerdict::Diverged(Divergence::Call(1)));
    // The same text held as UTF-16 is another argument as it crossed.
    let mut wide = with_string.clone();
    wide.strings = vec![RawString::Utf16(vec![u16::from(b'x')])];
    assert_ne!(Identity::of(&with_string).known(), Identity::of(&wide).known());
    assert_eq!(Identity::of(&wide).known(), Identity::of(&wide.clone()).known());
    assert_eq!(Divergence::Call(1).to_string(), "its call number 1 is not the recorded one");
  }

  /// A call's long one-byte strings may be digested after it is taken
  /// (its identity deferred): finished later, or by the history itself
  /// when a re-execution must compare it first, it is the digest of the
  /// same bytes in the same order as one made at once.
  #[test]
  fn a_deferred_identity_is_the_digest_made_at_once_whoever_finishes_it() {
    let mut long = call(0, "[null,null]");
    long.paths = "[[0],[1]]".into();
    long.strings = vec![RawString::Latin1(vec![b'a'; 70_000].into()), RawString::Latin1(b"b".to_vec().into())];
    let mut by_hand = blake3::Hasher::new();
    for (tag, bytes) in
      [(b'j', long.args.as_bytes()), (b'p', long.paths.as_bytes()), (b'l', &[b'a'; 70_000]), (b'l', b"b")]
    {
      by_hand.update(&[tag]);
      by_hand.update(&(bytes.len() as u64).to_le_bytes());
      by_hand.update(bytes);
    }
    let expected = CallIdentity { namespace: 0, function: 1, argument: *by_hand.finalize().as_bytes() };
    let Identity::Deferred(deferred) = Identity::of(&long) else { panic!("one-byte strings are deferred") };
    assert_eq!(deferred.finish(), expected);
    // A UTF-16 string among them: all digested at once, in their order.
    let mut mixed = long.clone();
    mixed.strings.push(RawString::Utf16(vec![0x3b1]));
    assert!(matches!(Identity::of(&mixed), Identity::Known(_)));
    assert!(matches!(Identity::of(&call(0, "[]")), Identity::Known(_)));

    // Compared before it is filled in: the history finishes it itself.
    let mut history = RunHistory::new(u32::MAX);
    let mut other = long.clone();
    other.strings[1] = RawString::Latin1(b"c".to_vec().into());
    assert_eq!(record(&mut history, &long).0, CallVerdict::Call);
    assert_eq!(history.deferred_digest(0).map(|deferred| deferred.finish()), Some(expected));
    history.begin_reexecution();
    assert_eq!(record(&mut history, &other).0, CallVerdict::Diverged(Divergence::Call(1)));
    history.begin_reexecution();
    assert_eq!(record(&mut history, &long).0, CallVerdict::AwaitAnswer);
    // Filled in: known from then on, and compared the same.
    history.identify(0, expected);
    assert!(history.deferred_digest(0).is_none());
    history.begin_reexecution();
    assert_eq!(record(&mut history, &other).0, CallVerdict::Diverged(Divergence::Call(1)));
    history.begin_reexecution();
    assert_eq!(record(&mut history, &long).0, CallVerdict::AwaitAnswer);
    // A history given up holds nothing to fill in.
    history.give_up();
    history.identify(0, expected);
    assert!(history.deferred_digest(0).is_none());
  }

  /// A host that sends a call id twice, or skips one, would have a tool
  /// called twice, or a call answered out of place.
  /// A re-execution is told where the history ends: its calls, its log
  /// entries and the most CPU any execution reported.
  #[test]
  fn the_end_of_a_history_counts_its_calls_logs_and_cpu() {
    let mut history = RunHistory::new(u32::MAX);
    let mut ledger = OutputLedger::new(1 << 20);
    record(&mut history, &call(0, "[]"));
    history.log(&units("a"), &ledger);
    ledger.admit(&units("a"));
    history.charged(2500.0);
    history.charged(f64::NAN);
    history.charged(1000.0);
    assert_eq!(history.end(&ledger), HistoryEnd { cpu_us: 2500.0, calls: 1, logs: 1 });
    history.give_up();
    assert_eq!(history.end(&ledger), HistoryEnd::default());
  }

  /// Past `maxToolCalls`, a call is refused here in every execution: no
  /// tool is called, nothing is recorded, and a re-execution is refused
  /// the same call alike; its history's calls are answered as before.
  #[test]
  fn a_call_past_the_cap_is_refused_in_every_execution() {
    let refused = CallVerdict::Refused(crate::failure::tool_calls_over(2));
    let mut history = RunHistory::new(2);
    assert_eq!(record(&mut history, &call(0, "[]")).0, CallVerdict::Call);
    history.reply(0, Answer::plain(ReplyKind::Json, "0"));
    assert_eq!(record(&mut history, &call(1, "[]")).0, CallVerdict::Call);
    history.reply(1, Answer::plain(ReplyKind::Json, "1"));
    assert_eq!(record(&mut history, &call(2, "[]")), (refused, 0));
    assert_eq!(record(&mut history, &call(3, "[9]")).0, CallVerdict::Refused(crate::failure::tool_calls_over(2)));
    assert!(!history.waiting_on_a_tool());
    // Refused calls are counted: the next id is 4.
    assert!(matches!(record(&mut history, &call(3, "[]")).0, CallVerdict::Violation(_)));
    assert_eq!(record(&mut history, &call(4, "[]")).0, CallVerdict::Refused(crate::failure::tool_calls_over(2)));
    let ledger = OutputLedger::new(1 << 20);
    assert_eq!(history.end(&ledger).calls, 2);
    history.begin_reexecution();
    assert_eq!(record(&mut history, &call(0, "[]")).0, CallVerdict::Answer(Answer::plain(ReplyKind::Json, "0")));
    assert_eq!(record(&mut history, &call(1, "[]")).0, CallVerdict::Answer(Answer::plain(ReplyKind::Json, "1")));
    assert_eq!(record(&mut history, &call(2, "[]")).0, CallVerdict::Refused(crate::failure::tool_calls_over(2)));
    assert_eq!(history.bytes(), 2 * CALL_RECORD_BYTES + 2);
  }

  #[test]
  fn a_call_id_other_than_the_next_is_a_violation() {
    let mut history = RunHistory::new(u32::MAX);
    record(&mut history, &call(0, "[]"));
    assert!(matches!(record(&mut history, &call(0, "[]")).0, CallVerdict::Violation(_)));
    assert!(matches!(record(&mut history, &call(2, "[]")).0, CallVerdict::Violation(_)));
    assert_eq!(record(&mut history, &call(1, "[]")).0, CallVerdict::Call);
  }

  #[test]
  fn a_history_given_up_lets_its_replies_go() {
    let mut history = RunHistory::new(u32::MAX);
    let mut readings = Readings::default();
    readings.push(crate::readings::Clock::Wall, 1.0);
    assert_eq!(history.readings(&readings), crate::readings::REPEATED_BYTES as u64);
    assert_eq!(history.give_up(), crate::readings::REPEATED_BYTES as u64);
    assert!(history.recorded_readings().is_empty());
    assert_eq!(history.readings(&readings), 0);
    let mut history = RunHistory::new(u32::MAX);
    record(&mut history, &call(0, "[]"));
    history.reply(0, Answer::plain(ReplyKind::Text, "x".repeat(1000)));
    record(&mut history, &call(1, "[]"));
    assert_eq!(history.bytes(), 2 * CALL_RECORD_BYTES + 1000);
    assert_eq!(history.give_up(), 2 * CALL_RECORD_BYTES + 1000);
    assert!(!history.replayable());
    assert_eq!(
      history.reply(1, Answer::plain(ReplyKind::Text, "y")),
      ReplyVerdict::Pass(Answer::plain(ReplyKind::Text, "y"))
    );
    assert_eq!(history.held(0), None);
    assert_eq!(record(&mut history, &call(2, "[]")), (CallVerdict::Call, 0));
    assert!(matches!(record(&mut history, &call(2, "[]")).0, CallVerdict::Violation(_)));
    assert_eq!(history.bytes(), 0);
  }
}
