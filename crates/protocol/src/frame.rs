//! The channel between the harness (the addon) and an isolate host: every
//! message either side sends, and how it is framed. This file is the one
//! declaration of the protocol; both sides encode and decode through it.
//!
//! A host has two streams to the harness, each a Unix socket. The
//! **channel** (the host's standard input) carries everything both ways
//! that someone acts on when it arrives; the harness's reader thread waits
//! on it. The **journal** ([`JOURNAL_FD`], host to harness only) carries
//! what the harness needs only by the time a run ends or its host dies: a
//! run's start, its log entries and clock readings, and the run a host
//! ends for ([`FromHost::is_journal_entry`]). Nobody
//! waits on the journal, so writing to it wakes nobody (a `console.log`
//! costs the run one write, not a thread hop in the harness), and what was
//! written is in the kernel, so a host that dies loses none of it. The
//! harness reads the journal before it handles each frame of the channel
//! (so everything a host wrote there before a frame is handled before that
//! frame), and once more when the host has ended. Should the journal's
//! buffer fill, the host says so on the channel ([`FromHost::JournalFull`])
//! and waits until it can write again.
//!
//! A frame is `len: u32` (the bytes that follow), `tag: u8`, then the
//! message's fields in order: integers and floats little-endian, text as
//! `u32 length + UTF-8 bytes`, text that may hold lone surrogates (log
//! entries, abort reasons, failure messages) as `u32 units + UTF-16LE`.
//! Bulk text crosses as the bytes it already is: a long reply's text or
//! one-byte string argument is spliced into its frame from where it is
//! held ([`SplicedFrames`]) and written from there; a short one is copied
//! into the frame; one read on the other side.
//!
//! The harness treats every byte a host sends as hostile (a host runs
//! model code): decoding never panics, never trusts a length beyond the
//! bytes actually present, and a frame that does not decode exactly (an
//! unknown tag, a short field, bytes left over, invalid UTF-8, a frame
//! longer than [`MAX_FRAME_BYTES`]) is a [`ProtocolError`], which ends
//! that host, never the harness.

use std::fmt;
use std::io::{self, Read};

use crate::config::RuntimeConfig;
use crate::ledger::{Completion, FailureKind};
use crate::out_of_band::{check_places, RawString};
use crate::protections::Protections;
use crate::readings::{Readings, Repeated, CLOCKS, REPEATED_BYTES};
use crate::text::{BlockFrame, FrameBuffer, SharedBytes, SharedFrame, Text};

/// The host's file descriptor of the journal (see the module doc): the
/// harness places the host's end there when it starts the host, and the
/// host keeps it when it closes every other descriptor it inherited.
pub const JOURNAL_FD: i32 = 3;

/// The largest frame either side accepts: a V8 string holds at most 2^29
/// UTF-16 units, so no single text a program can make needs more.
pub const MAX_FRAME_BYTES: u32 = 1 << 31;

/// The most UTF-16 units a V8 string holds (`v8::String::kMaxLength` on
/// 64-bit targets).
pub const MAX_STRING_UNITS: usize = (1 << 29) - 24;

/// A frame that does not decode: the peer is broken or hostile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0)
  }
}

/// The harness to a host.
#[derive(Debug, Clone, PartialEq)]
pub enum ToHost {
  /// The first frame, exactly once: the runtime's caps and the host's facts.
  Configure { config: Box<RuntimeConfig> },
  /// Run a program. `wall_ms` is what is left of its wall ceiling (a run
  /// placed again after its first host died has spent some of it); `seed`
  /// seeds its random numbers (`RunSeed`); `readings`, those its history
  /// holds (`readings.rs`), which a re-executed run reads before its
  /// clocks (none for a first execution); `history_end`, where a
  /// re-execution's history ends and the CPU it had spent by then (all
  /// zero for a first execution).
  Submit {
    run_id: u32,
    wall_ms: f64,
    seed: RunSeed,
    readings: Readings,
    history_end: HistoryEnd,
    program: String,
    bindings_json: String,
  },
  /// Stop a run with `abort` and this reason.
  Abort { run_id: u32, reason: Vec<u16> },
  /// Answers to binding calls.
  Replies(Vec<Reply>),
  /// Ask for a [`FromHost::Stats`] carrying `seq` (also the heartbeat).
  StatsRequest { seq: u64 },
  /// Stop every run (`abort: runtime disposed`), finish them, exit.
  Shutdown,
}

/// Append a [`ToHost::Replies`] frame of (run id, call id, answer)
/// replies, from wherever their answers are held (the harness holds them in
/// the runs' histories, and encodes them from there): their long texts are
/// spliced in, not copied.
pub fn encode_replies(out: &mut SplicedFrames, replies: &[(u32, u32, &Answer)]) {
  let SplicedFrames { bytes, spliced } = out;
  let mut frame = FrameWriter::new(bytes, REPLIES).u32(len32(replies.len()));
  for &(run_id, call_id, answer) in replies {
    frame = frame.u32(run_id).u32(call_id).u8(answer.kind as u8).reply_text(&answer.text, spliced);
    frame = frame.u32(len32(answer.strings.len()));
    if !answer.strings.is_empty() {
      frame = frame.text(&answer.paths);
      for string in &answer.strings {
        frame = frame.reply_text(string, spliced);
      }
    }
  }
  frame.finish()
}

/// A text at least this long is spliced into the frames that send it
/// ([`SplicedFrames`]) rather than copied into them: below it, a copy
/// costs less than writing one more piece.
pub const SPLICED_TEXT_BYTES: usize = 64 * 1024;

/// Frames whose long texts are shared, not copied into them: `bytes`, with
/// each of `spliced` (a text's bytes and the offset into `bytes` where
/// they go, in order) sent in its place. On the wire they are the frames
/// `bytes` would be with every text written in.
#[derive(Debug, Default)]
pub struct SplicedFrames {
  pub bytes: Vec<u8>,
  pub spliced: Vec<(usize, SharedBytes)>,
}

impl SplicedFrames {
  /// Their bytes, in the pieces they go out in.
  pub fn pieces(&self) -> impl Iterator<Item = &[u8]> {
    let mut from = 0;
    let texts = self.spliced.iter().flat_map(move |(at, text)| {
      let before = self.bytes.get(from..*at).unwrap_or_default();
      from = *at;
      [before, text.as_bytes()]
    });
    let last = self.spliced.last().map_or(0, |(at, _)| *at);
    texts.chain(std::iter::once(self.bytes.get(last..).unwrap_or_default()))
  }

  /// How many bytes they are on the wire.
  pub fn len(&self) -> usize {
    self.bytes.len() + self.spliced.iter().map(|(_, text)| text.len()).sum::<usize>()
  }

  pub fn is_empty(&self) -> bool {
    self.len() == 0
  }

  /// Their bytes in one buffer (`bytes` itself when nothing is spliced).
  pub fn into_bytes(self) -> Vec<u8> {
    if self.spliced.is_empty() {
      return self.bytes;
    }
    self.flattened()
  }

  /// Their bytes, written in one buffer.
  pub fn flattened(&self) -> Vec<u8> {
    let mut out = Vec::with_capacity(self.len());
    for piece in self.pieces() {
      out.extend_from_slice(piece);
    }
    out
  }
}

impl From<Vec<u8>> for SplicedFrames {
  fn from(bytes: Vec<u8>) -> SplicedFrames {
    SplicedFrames { bytes, spliced: Vec::new() }
  }
}

/// The seed of a run's random numbers (`Math.random`,
/// `crypto.getRandomValues`, `crypto.randomUUID`: one ChaCha20 stream in
/// the host), chosen by the harness when the run is submitted and kept in
/// its record: a run executed again draws the same numbers in the same
/// order, so randomness needs no record of its own in the run's history.
pub type RunSeed = [u64; 4];

/// Where a run's history ends, as a re-execution is told it: the calls
/// and log entries it holds, and the CPU the run had been charged by the
/// last of them (in us). A re-executed run is not charged for making its
/// history again; it starts charged with `cpu_us`, so that what it spent
/// before its host died counts once.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HistoryEnd {
  pub cpu_us: f64,
  pub calls: u32,
  pub logs: u32,
}

/// One answer to a binding call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
  pub run_id: u32,
  pub call_id: u32,
  pub answer: Answer,
}

/// What answers a call: how, its text, and (a JSON answer only) the long
/// strings of its value that cross beside the text, as a call's argument's
/// do (`out_of_band`): a tool's `{ path, text }` crosses without its text
/// passing through JSON on either side. The strings are well-formed (UTF-8
/// carries them exactly); one that is not stays in the JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
  pub kind: ReplyKind,
  /// The JSON text (with `null` where each of `strings` goes), the string
  /// itself, or the rejection's message as a JSON string literal.
  pub text: ReplyText,
  /// When `strings` is not empty: the JSON array of their paths into `text`.
  pub paths: String,
  pub strings: Vec<ReplyText>,
}

/// A text of an [`Answer`] as it crosses: UTF-8, or, for a text the
/// harness read out of Node one byte a character (so every character
/// ASCII: `JsReplyText` in the addon), those bytes as Latin-1. A Latin-1
/// text is checked by nobody (any bytes are Latin-1) and V8 copies it into
/// a string as it is; a UTF-8 one is checked on each side and decoded by
/// V8. For results of 1-4 MB those three passes were an eighth to a sixth
/// of what a call cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyText {
  Utf8(Text),
  Latin1(SharedBytes),
}

impl ReplyText {
  /// Its bytes, as they cross.
  pub fn shared_bytes(&self) -> &SharedBytes {
    match self {
      ReplyText::Utf8(text) => text.shared_bytes(),
      ReplyText::Latin1(bytes) => bytes,
    }
  }

  /// How many bytes it crosses as.
  pub fn len(&self) -> usize {
    self.shared_bytes().len()
  }

  pub fn is_empty(&self) -> bool {
    self.len() == 0
  }
}

/// Its characters.
impl fmt::Display for ReplyText {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match self {
      ReplyText::Utf8(text) => f.write_str(text),
      ReplyText::Latin1(bytes) => bytes.iter().try_for_each(|byte| fmt::Write::write_char(f, char::from(*byte))),
    }
  }
}

impl Default for ReplyText {
  fn default() -> ReplyText {
    ReplyText::Utf8(Text::default())
  }
}

impl<T: Into<Text>> From<T> for ReplyText {
  fn from(text: T) -> ReplyText {
    ReplyText::Utf8(text.into())
  }
}

impl Answer {
  /// An answer whose text is all of it.
  pub fn plain(kind: ReplyKind, text: impl Into<ReplyText>) -> Answer {
    Answer { kind, text: text.into(), paths: String::new(), strings: Vec::new() }
  }

  /// The bytes its value crossed as: the text and the strings beside it
  /// (UTF-8), their paths not counted (as a call's argument's are not).
  pub fn bytes(&self) -> u64 {
    let beside: u64 = self.strings.iter().map(|string| string.len() as u64).sum();
    (self.text.len() as u64).saturating_add(beside)
  }
}

/// How a [`Reply`]'s text answers its call. The codes are what the
/// harness's JS passes for each reply (the addon exports them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
  /// Reject with the message whose JSON string literal is the text (a
  /// literal, so that lone surrogates survive the UTF-8 crossing).
  Reject = 0,
  /// Resolve with the value whose lossless JSON is the text (and the
  /// answer's strings, each in its place).
  Json = 1,
  /// Resolve with the text itself: a tool's string result (well formed,
  /// so UTF-8 carries it exactly) crosses as it is, with no JSON pass on
  /// either side, which for a string of megabytes is most of the cost.
  Text = 2,
}

impl ReplyKind {
  pub fn from_code(code: u8) -> Option<ReplyKind> {
    [ReplyKind::Reject, ReplyKind::Json, ReplyKind::Text].into_iter().find(|kind| *kind as u8 == code)
  }
}

/// A host to the harness.
#[derive(Debug, Clone, PartialEq)]
pub enum FromHost {
  /// The host is initialised, locked down, and takes runs: the
  /// protections in effect (sent before any program ran in it).
  Ready { protections: Protections },
  /// On the journal. The run is about to work on its program (strip its
  /// types, then execute it): from here
  /// on, the host's death is the run's outcome; before it, the run can be
  /// placed again.
  Started { run_id: u32 },
  /// On the journal. A log entry the program wrote, sent as it is written,
  /// so that a host that dies loses none. Every entry the run's ledger was
  /// offered, in order (cut to the cap: a longer one can never be admitted).
  Log { run_id: u32, text: Vec<u16> },
  /// On the journal. Readings of its clocks the run took since its last
  /// log entry or call (`readings.rs`), written before its next one, and
  /// the CPU charged to it then, in us (read at most once a millisecond:
  /// within a millisecond of the truth). Written too when only the CPU
  /// has moved, by a millisecond or more.
  Readings { run_id: u32, cpu_us: f64, readings: Readings },
  /// The journal's buffer is full and a run waits to write to it: read it.
  JournalFull,
  /// On the journal. The run was stopped, and its thread went on computing
  /// past what a stop may take (work V8 cannot interrupt: the host's
  /// watchdog, `UNSTOPPABLE_AFTER`): the host ends next. Its outcome is
  /// this failure, the one its stop would have settled it with: the
  /// harness does not execute it again to find out whether it ends hosts
  /// (it does: its program is quarantined).
  Unstoppable { run_id: u32, kind: FailureKind, message: Vec<u16> },
  /// Calls from programs to host functions.
  Calls(Vec<BindingCall>),
  /// The run finished: what this execution of it cost, and its
  /// completion, as its ledger settled it.
  Finished { run_id: u32, cost: ExecutionCost, completion: Completion },
  /// The run was not taken: the host's queue is full.
  Refused { run_id: u32 },
  /// What the host is doing, answering the [`ToHost::StatsRequest`] `seq`.
  Stats { seq: u64, stats: HostStats },
}

/// What one execution of a run cost its host, as it finished: its part of
/// the run's report (the addon's `run_report.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExecutionCost {
  /// CPU charged to the run, in us, as `computeMs` counts it (an execution
  /// again from a history starts charged with what the history ended with).
  pub cpu_us: f64,
  /// The most its isolate's heap held, in bytes: its used size before each
  /// garbage collection, and at the end.
  pub peak_heap_bytes: u64,
  /// The most it held outside the heap at once, in bytes, as
  /// `maxExternalMemoryMb` counts it.
  pub peak_external_bytes: u64,
}

/// One call from a program to a host function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingCall {
  pub run_id: u32,
  pub call_id: u32,
  pub namespace: u32,
  pub function: u32,
  /// Lossless JSON text of the argument, with `null` where each of
  /// `strings` goes.
  pub args: String,
  /// When `strings` is not empty: a JSON array of their paths into `args`
  /// (see `out_of_band`; checked when a frame is decoded).
  pub paths: String,
  /// The argument's long strings, crossing beside its JSON as their bytes.
  pub strings: Vec<RawString>,
}

/// The bytes a [`FromHost::Calls`] frame takes besides its calls: its
/// length, its tag and its count of calls.
pub const CALLS_FRAME_OVERHEAD: usize = 4 + 1 + 4;

/// The most bytes one call's encoding may take: a frame carrying it alone
/// is then exactly [`MAX_FRAME_BYTES`] long (its length field not counted),
/// the most a harness accepts. A longer call can never cross.
pub const MAX_CALL_BYTES: usize = MAX_FRAME_BYTES as usize - (CALLS_FRAME_OVERHEAD - 4);

impl BindingCall {
  /// The bytes this call takes in a [`FromHost::Calls`] frame.
  pub fn encoded_len(&self) -> usize {
    let strings = self.strings.iter().map(|string| match string {
      RawString::Latin1(bytes) => bytes.len(),
      RawString::Utf16(units) => units.len().saturating_mul(2),
    });
    encoded_call_len(self.args.len(), self.paths.len(), strings)
  }
}

/// The bytes a call takes in a [`FromHost::Calls`] frame, from the byte
/// lengths of its JSON, its paths and each of its long strings: known
/// before the strings are copied out of the heap, so that a call that
/// cannot cross is refused before it costs anything. Saturates: a length
/// past `usize` is past every bound it is checked against.
pub fn encoded_call_len(args: usize, paths: usize, strings: impl IntoIterator<Item = usize>) -> usize {
  // run id, call id, namespace, function; the JSON's length; the count.
  let mut len = (4 * 4 + 4 + 4usize).saturating_add(args);
  let mut any = false;
  for bytes in strings {
    any = true;
    // Kind, length in units, the bytes.
    len = len.saturating_add(1 + 4).saturating_add(bytes);
  }
  if any {
    len = len.saturating_add(4).saturating_add(paths);
  }
  len
}

/// The figures a host reports in [`FromHost::Stats`], each written once:
/// its field, its type on the channel, its kind, and its doc, which is the
/// user's: the same field of `stats()` (the addon's napi `NativeStats`,
/// made by `host_stats!(native_stats)` in its lib.rs, whose docs `npm run
/// build:bindings` carries into `index.d.ts`). The kinds are the two
/// sections: `gauges`, what a host holds now (added up over the live
/// hosts, gone with their host), and `totals`, counted since a host
/// started (kept once it has ended). Their order is their order on the
/// channel. Every use is made from this one list: [`HostStats`] with its
/// sum, its totals and its coding here, `NativeStats` and its conversion
/// there. Expands `$then!` with the list.
#[macro_export]
macro_rules! host_stats {
  ($then:ident) => {
    // Docs as `#[doc = "..."]`: a `///` inside a macro reaches napi-derive
    // as a raw string literal, whose text it does not unescape.
    $then! {
      gauges {
        #[doc = " Runs submitted and waiting for admission."]
        queued: u32,
        #[doc = " Runs admitted and not finished."]
        in_flight: u32,
        #[doc = " In flight, waiting for a thread and an isolate."]
        starting: u32,
        #[doc = " In flight, running (or runnable) on their thread."]
        computing: u32,
        #[doc = " In flight, their thread parked on binding calls or timers."]
        waiting: u32,
        #[doc = " Runs with at least one binding call the host has not answered."]
        waiting_on_host: u32,
        #[doc = " Run threads alive (running a run, or idle with a prepared isolate)."]
        threads: u32,
        #[doc = " Idle threads holding a prepared isolate."]
        prepared_isolates: u32,
      }
      totals {
        #[doc = " CPU time charged to programs (finished and in flight), in ms."]
        cpu_ms: f64,
        #[doc = " Isolates disposed of after their runs. A run's result is delivered"]
        #[doc = " first; its isolate counts here once its thread is done with it,"]
        #[doc = " freed memory returned to the OS included."]
        isolates_disposed: u64,
        #[doc = " Prepared isolates warmed: the sandbox's own per-run code run once in"]
        #[doc = " them, off a run's path, once their host had been quiet for 2 ms (one"]
        #[doc = " at a time, up to the reserve's size at rest)."]
        isolates_warmed: u64,
        #[doc = " Times freed memory was returned to the OS: after a run that held"]
        #[doc = " 16 MiB or more outside V8's own mappings or was stopped at a memory"]
        #[doc = " cap, and once the runtime has been idle for 250 ms after other runs."]
        memory_returns: u64,
      }
    }
  };
}

macro_rules! define_host_stats {
  (
    gauges { $($(#[doc = $gauge_doc:tt])* $gauge:ident: $gauge_type:ident,)* }
    totals { $($(#[doc = $total_doc:tt])* $total:ident: $total_type:ident,)* }
  ) => {
    /// A host's figures, as one snapshot (`in_flight == starting +
    /// computing + waiting`); the fields are [`host_stats!`]'s.
    #[derive(Debug, Clone, Copy, Default, PartialEq)]
    pub struct HostStats {
      $($(#[doc = $gauge_doc])* pub $gauge: $gauge_type,)*
      $($(#[doc = $total_doc])* pub $total: $total_type,)*
    }

    impl HostStats {
      /// Add `other`'s figures to these (saturating: a host's figures are
      /// its own word, and may be anything).
      pub fn add(&mut self, other: &HostStats) {
        $(self.$gauge = StatNumber::plus(self.$gauge, other.$gauge);)*
        $(self.$total = StatNumber::plus(self.$total, other.$total);)*
      }

      /// What stays counted once the host has ended: its totals since it
      /// started, none of its gauges.
      pub fn totals(&self) -> HostStats {
        HostStats { $($total: self.$total,)* ..HostStats::default() }
      }

      fn encode<'a>(&self, frame: FrameWriter<'a>) -> FrameWriter<'a> {
        $(let frame = WireNumber::put(self.$gauge, frame);)*
        $(let frame = WireNumber::put(self.$total, frame);)*
        frame
      }

      fn decode(fields: &mut Fields<'_>) -> Result<HostStats, ProtocolError> {
        // Fields are read in the order written (a struct literal's order).
        Ok(HostStats {
          $($gauge: WireNumber::take(fields)?,)*
          $($total: WireNumber::take(fields)?,)*
        })
      }
    }
  };
}

host_stats!(define_host_stats);

/// A number a stats figure is made of: how two hosts' figures add up,
/// and how it reaches JS (a number).
pub trait StatNumber: Copy {
  fn plus(self, other: Self) -> Self;
  fn to_f64(self) -> f64;
}

impl StatNumber for u32 {
  fn plus(self, other: Self) -> Self {
    self.saturating_add(other)
  }
  fn to_f64(self) -> f64 {
    f64::from(self)
  }
}

impl StatNumber for u64 {
  fn plus(self, other: Self) -> Self {
    self.saturating_add(other)
  }
  fn to_f64(self) -> f64 {
    self as f64
  }
}

impl StatNumber for f64 {
  fn plus(self, other: Self) -> Self {
    self + other
  }
  fn to_f64(self) -> f64 {
    self
  }
}

/// How a number crosses the channel.
trait WireNumber: Sized {
  fn put(self, frame: FrameWriter<'_>) -> FrameWriter<'_>;
  fn take(fields: &mut Fields<'_>) -> Result<Self, ProtocolError>;
}

impl WireNumber for u32 {
  fn put(self, frame: FrameWriter<'_>) -> FrameWriter<'_> {
    frame.u32(self)
  }
  fn take(fields: &mut Fields<'_>) -> Result<Self, ProtocolError> {
    fields.u32()
  }
}

impl WireNumber for u64 {
  fn put(self, frame: FrameWriter<'_>) -> FrameWriter<'_> {
    frame.u64(self)
  }
  fn take(fields: &mut Fields<'_>) -> Result<Self, ProtocolError> {
    fields.u64()
  }
}

impl WireNumber for f64 {
  fn put(self, frame: FrameWriter<'_>) -> FrameWriter<'_> {
    frame.f64(self)
  }
  fn take(fields: &mut Fields<'_>) -> Result<Self, ProtocolError> {
    fields.f64()
  }
}

// Tags: one list per direction, each used by exactly one encoder and the
// decoder's match.
const CONFIGURE: u8 = 1;
const SUBMIT: u8 = 2;
const ABORT: u8 = 3;
const REPLIES: u8 = 4;
const STATS_REQUEST: u8 = 5;
const SHUTDOWN: u8 = 6;

const READY: u8 = 1;
const STARTED: u8 = 2;
const LOG: u8 = 3;
const CALLS: u8 = 4;
const FINISHED: u8 = 5;
const REFUSED: u8 = 6;
const STATS: u8 = 7;
const JOURNAL_FULL: u8 = 8;
const READINGS: u8 = 9;
const UNSTOPPABLE: u8 = 10;

// Encodings of an out-of-band string inside CALLS (LATIN1, UTF16) and of
// a reply's texts inside REPLIES (UTF8, LATIN1).
const LATIN1: u8 = 0;
const UTF16: u8 = 1;
const UTF8: u8 = 2;

// Completion tags inside FINISHED.
const NO_VALUE: u8 = 0;
const VALUE: u8 = 1;
const FAILURE: u8 = 2;

/// Appends one frame to a buffer; [`FrameWriter::finish`] fills in its length.
pub struct FrameWriter<'a> {
  out: &'a mut Vec<u8>,
  start: usize,
  /// The bytes of the texts spliced in beside `out` ([`SplicedFrames`]).
  spliced: usize,
}

impl<'a> FrameWriter<'a> {
  fn new(out: &'a mut Vec<u8>, tag: u8) -> Self {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, tag]);
    FrameWriter { out, start, spliced: 0 }
  }

  fn u32(self, value: u32) -> Self {
    self.out.extend_from_slice(&value.to_le_bytes());
    self
  }

  fn u64(self, value: u64) -> Self {
    self.out.extend_from_slice(&value.to_le_bytes());
    self
  }

  fn f64(self, value: f64) -> Self {
    self.out.extend_from_slice(&value.to_le_bytes());
    self
  }

  fn u8(self, value: u8) -> Self {
    self.out.push(value);
    self
  }

  fn text(self, text: &str) -> Self {
    let this = self.u32(len32(text.len()));
    this.out.extend_from_slice(text.as_bytes());
    this
  }

  /// Bytes as [`FrameWriter::text`] writes a text's (their length, then
  /// them), spliced into `spliced` in place of the bytes when they are long.
  fn shared(mut self, bytes: &SharedBytes, spliced: &mut Vec<(usize, SharedBytes)>) -> Self {
    self = self.u32(len32(bytes.len()));
    if bytes.len() < SPLICED_TEXT_BYTES {
      return self.bytes(bytes);
    }
    spliced.push((self.out.len(), bytes.clone()));
    self.spliced += bytes.len();
    self
  }

  fn bytes(self, bytes: &[u8]) -> Self {
    self.out.extend_from_slice(bytes);
    self
  }

  /// A reply's text: its encoding, then its bytes (see [`Self::shared`]).
  fn reply_text(self, text: &ReplyText, spliced: &mut Vec<(usize, SharedBytes)>) -> Self {
    let encoding = match text {
      ReplyText::Utf8(_) => UTF8,
      ReplyText::Latin1(_) => LATIN1,
    };
    self.u8(encoding).shared(text.shared_bytes(), spliced)
  }

  fn utf16(self, units: &[u16]) -> Self {
    let this = self.u32(len32(units.len()));
    // Sized once, then filled pair by pair: a loop the compiler turns into
    // a plain copy (log floods cross here at memory speed).
    let start = this.out.len();
    this.out.resize(start + units.len() * 2, 0);
    for (pair, unit) in this.out[start..].chunks_exact_mut(2).zip(units) {
      pair.copy_from_slice(&unit.to_le_bytes());
    }
    this
  }

  /// Each clock's stream: its count, then (value, times) pairs; then the
  /// order of events: its count of words, then the words.
  fn readings(self, readings: &Readings) -> Self {
    let frame = readings.streams().iter().fold(self, |frame, stream| {
      stream
        .iter()
        .fold(frame.u32(len32(stream.len())), |frame, repeated| frame.f64(repeated.value).u32(repeated.times))
    });
    let order = readings.order();
    order.iter().fold(frame.u32(len32(order.len())), |frame, word| frame.u32(*word))
  }

  fn finish(self) {
    let len = len32(self.out.len() - self.start - 4 + self.spliced);
    self.out[self.start..self.start + 4].copy_from_slice(&len.to_le_bytes());
  }
}

/// A length as the wire's u32. Texts are bounded by V8's string length
/// (2^29 units), far below; saturating keeps an impossible one from
/// wrapping into a frame that decodes as something else (it fails to
/// decode instead).
fn len32(len: usize) -> u32 {
  u32::try_from(len).unwrap_or(u32::MAX)
}

impl ToHost {
  /// The tag of [`ToHost::Replies`], which a run waiting for its replies
  /// may take off the channel itself (`inbox`).
  pub const REPLIES_TAG: u8 = REPLIES;

  /// Append this message as one frame.
  pub fn encode(&self, out: &mut Vec<u8>) {
    match self {
      ToHost::Configure { config } => {
        let json = serde_json::to_string(config).unwrap_or_default();
        FrameWriter::new(out, CONFIGURE).text(&json).finish()
      }
      ToHost::Submit { run_id, wall_ms, seed, readings, history_end, program, bindings_json } => encode_submit(
        out,
        &Submission {
          run_id: *run_id,
          wall_ms: *wall_ms,
          seed,
          readings,
          history_end: *history_end,
          program,
          bindings_json,
        },
      ),
      ToHost::Abort { run_id, reason } => FrameWriter::new(out, ABORT).u32(*run_id).utf16(reason).finish(),
      ToHost::Replies(replies) => {
        let replies: Vec<_> = replies.iter().map(|reply| (reply.run_id, reply.call_id, &reply.answer)).collect();
        let mut frames = SplicedFrames::from(std::mem::take(out));
        encode_replies(&mut frames, &replies);
        *out = frames.into_bytes();
      }
      ToHost::StatsRequest { seq } => FrameWriter::new(out, STATS_REQUEST).u64(*seq).finish(),
      ToHost::Shutdown => FrameWriter::new(out, SHUTDOWN).finish(),
    }
  }

  /// Decode one frame's tag and fields (the length already taken off).
  pub fn decode(frame: &[u8]) -> Result<ToHost, ProtocolError> {
    ToHost::decode_fields(Fields::new(frame))
  }

  /// As [`ToHost::decode`], the frame in `buffer`: its long texts (a
  /// reply's, at least [`SPLICED_TEXT_BYTES`]) are parts of the buffer,
  /// not copies.
  pub fn decode_shared(buffer: &FrameBuffer) -> Result<ToHost, ProtocolError> {
    ToHost::decode_fields(Fields::sharing(buffer))
  }

  fn decode_fields(mut fields: Fields<'_>) -> Result<ToHost, ProtocolError> {
    let message = match fields.u8()? {
      CONFIGURE => {
        let json = fields.text()?;
        let config = serde_json::from_str(&json).map_err(|error| ProtocolError(format!("bad config: {error}")))?;
        ToHost::Configure { config: Box::new(config) }
      }
      SUBMIT => ToHost::Submit {
        run_id: fields.u32()?,
        wall_ms: fields.f64()?,
        seed: [fields.u64()?, fields.u64()?, fields.u64()?, fields.u64()?],
        readings: fields.readings()?,
        history_end: HistoryEnd { cpu_us: fields.f64()?, calls: fields.u32()?, logs: fields.u32()? },
        program: fields.text()?,
        bindings_json: fields.text()?,
      },
      ABORT => ToHost::Abort { run_id: fields.u32()?, reason: fields.utf16()? },
      REPLIES => {
        // Run id, call id, kind, the text's encoding and length, the
        // count of strings.
        let count = fields.count(4 + 4 + 1 + 1 + 4 + 4)?;
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
          let run_id = fields.u32()?;
          let call_id = fields.u32()?;
          let kind =
            ReplyKind::from_code(fields.u8()?).ok_or_else(|| ProtocolError("a reply of an unknown kind".to_owned()))?;
          let mut answer = Answer::plain(kind, fields.reply_text()?);
          let strings = fields.count(1 + 4)?;
          if strings > 0 {
            if kind != ReplyKind::Json {
              return Err(ProtocolError("strings beside an answer that is not JSON".to_owned()));
            }
            answer.paths = fields.text()?;
            answer.strings.reserve_exact(strings);
            for _ in 0..strings {
              answer.strings.push(fields.reply_text()?);
            }
          }
          replies.push(Reply { run_id, call_id, answer });
        }
        ToHost::Replies(replies)
      }
      STATS_REQUEST => ToHost::StatsRequest { seq: fields.u64()? },
      SHUTDOWN => ToHost::Shutdown,
      tag => return Err(ProtocolError(format!("unknown frame tag {tag} to a host"))),
    };
    fields.end()?;
    Ok(message)
  }
}

/// A [`ToHost::Submit`]'s fields, borrowed from where the harness keeps
/// them (the program and the readings are not copied twice on the way out).
pub struct Submission<'a> {
  pub run_id: u32,
  pub wall_ms: f64,
  pub seed: &'a RunSeed,
  pub readings: &'a Readings,
  pub history_end: HistoryEnd,
  pub program: &'a str,
  pub bindings_json: &'a str,
}

/// Append a [`ToHost::Submit`] frame.
pub fn encode_submit(out: &mut Vec<u8>, submission: &Submission<'_>) {
  let frame = FrameWriter::new(out, SUBMIT).u32(submission.run_id).f64(submission.wall_ms);
  let frame = submission.seed.iter().fold(frame, |frame, word| frame.u64(*word));
  let end = submission.history_end;
  frame
    .readings(submission.readings)
    .f64(end.cpu_us)
    .u32(end.calls)
    .u32(end.logs)
    .text(submission.program)
    .text(submission.bindings_json)
    .finish()
}

/// A [`FromHost::Readings`] frame, encoded from the borrowed readings.
pub fn encode_readings(out: &mut Vec<u8>, run_id: u32, cpu_us: f64, readings: &Readings) {
  FrameWriter::new(out, READINGS).u32(run_id).f64(cpu_us).readings(readings).finish()
}

/// A log entry, encoded from the borrowed text.
pub fn encode_log(out: &mut Vec<u8>, run_id: u32, text: &[u16]) {
  FrameWriter::new(out, LOG).u32(run_id).utf16(text).finish()
}

impl FromHost {
  /// The tag of [`FromHost::Calls`], which the harness's main thread,
  /// waiting for a run's next call, may take off the channel itself (`inbox`).
  pub const CALLS_TAG: u8 = CALLS;
  /// The tags of the frames Node's main thread acts on itself (a run's
  /// calls, whose tools it runs; a run's end, whose promise it settles):
  /// woken by the Node bell for them (`ring::RingWriter::write_all_for_node`),
  /// it takes them off the channel itself.
  pub const FOR_NODE_TAGS: [u8; 2] = [CALLS, FINISHED];

  /// Whether this message travels on the journal (see the module doc);
  /// every other one travels on the channel. One on the wrong stream breaks
  /// the protocol.
  pub fn is_journal_entry(&self) -> bool {
    matches!(
      self,
      FromHost::Started { .. } | FromHost::Log { .. } | FromHost::Readings { .. } | FromHost::Unstoppable { .. }
    )
  }

  /// Append this message as one frame, its long one-byte strings
  /// spliced in rather than copied (a `Calls` frame's: [`SplicedFrames`]).
  pub fn encode_spliced(&self, out: &mut SplicedFrames) {
    let FromHost::Calls(calls) = self else { return self.encode(&mut out.bytes) };
    let SplicedFrames { bytes, spliced } = out;
    let mut frame = FrameWriter::new(bytes, CALLS).u32(len32(calls.len()));
    for call in calls {
      frame = frame
        .u32(call.run_id)
        .u32(call.call_id)
        .u32(call.namespace)
        .u32(call.function)
        .text(&call.args)
        .u32(len32(call.strings.len()));
      if !call.strings.is_empty() {
        frame = frame.text(&call.paths);
        for string in &call.strings {
          frame = match string {
            RawString::Latin1(bytes) => frame.u8(LATIN1).shared(bytes, spliced),
            RawString::Utf16(units) => frame.u8(UTF16).utf16(units),
          };
        }
      }
    }
    frame.finish()
  }

  /// Append this message as one frame.
  pub fn encode(&self, out: &mut Vec<u8>) {
    match self {
      FromHost::Ready { protections } => FrameWriter::new(out, READY).u32(protections.bits()).finish(),
      FromHost::Started { run_id } => FrameWriter::new(out, STARTED).u32(*run_id).finish(),
      FromHost::Log { run_id, text } => encode_log(out, *run_id, text),
      FromHost::Calls(_) => {
        let mut frames = SplicedFrames::from(std::mem::take(out));
        self.encode_spliced(&mut frames);
        *out = frames.into_bytes();
      }
      FromHost::Finished { run_id, cost, completion } => {
        let frame = FrameWriter::new(out, FINISHED)
          .u32(*run_id)
          .f64(cost.cpu_us)
          .u64(cost.peak_heap_bytes)
          .u64(cost.peak_external_bytes);
        match completion {
          Completion::NoValue => frame.u8(NO_VALUE).finish(),
          Completion::Value(json) => frame.u8(VALUE).text(json).finish(),
          Completion::Failure { kind, message } => frame.u8(FAILURE).u8(kind.code()).utf16(message).finish(),
        }
      }
      FromHost::Refused { run_id } => FrameWriter::new(out, REFUSED).u32(*run_id).finish(),
      FromHost::Readings { run_id, cpu_us, readings } => encode_readings(out, *run_id, *cpu_us, readings),
      FromHost::JournalFull => FrameWriter::new(out, JOURNAL_FULL).finish(),
      FromHost::Unstoppable { run_id, kind, message } => {
        FrameWriter::new(out, UNSTOPPABLE).u32(*run_id).u8(kind.code()).utf16(message).finish()
      }
      FromHost::Stats { seq, stats } => stats.encode(FrameWriter::new(out, STATS).u64(*seq)).finish(),
    }
  }

  /// Decode one frame's tag and fields (the length already taken off).
  pub fn decode(frame: &[u8]) -> Result<FromHost, ProtocolError> {
    FromHost::decode_fields(Fields::new(frame))
  }

  /// As [`FromHost::decode`], a long frame read into a block of its own:
  /// its calls' long one-byte strings (at least [`SPLICED_TEXT_BYTES`])
  /// are parts of the block, not copies.
  pub fn decode_shared(frame: &BlockFrame) -> Result<FromHost, ProtocolError> {
    FromHost::decode_fields(Fields::sharing(frame))
  }

  fn decode_fields(mut fields: Fields<'_>) -> Result<FromHost, ProtocolError> {
    let message = match fields.u8()? {
      READY => FromHost::Ready {
        protections: Protections::from_bits(fields.u32()?)
          .ok_or_else(|| ProtocolError("a ready frame names a protection that does not exist".to_owned()))?,
      },
      STARTED => FromHost::Started { run_id: fields.u32()? },
      LOG => FromHost::Log { run_id: fields.u32()?, text: fields.utf16()? },
      CALLS => {
        let count = fields.count(24)?;
        let mut calls = Vec::with_capacity(count);
        for _ in 0..count {
          let mut call = BindingCall {
            run_id: fields.u32()?,
            call_id: fields.u32()?,
            namespace: fields.u32()?,
            function: fields.u32()?,
            args: fields.text()?,
            paths: String::new(),
            strings: Vec::new(),
          };
          let strings = fields.count(5)?;
          if strings > 0 {
            call.paths = fields.text()?;
            call.strings.reserve_exact(strings);
            for _ in 0..strings {
              let string = match fields.u8()? {
                LATIN1 => RawString::Latin1(fields.shared()?),
                UTF16 => RawString::Utf16(fields.utf16()?),
                code => return Err(ProtocolError(format!("an out-of-band string of unknown encoding {code}"))),
              };
              // Longer than any V8 string: Node could not make it.
              if string.units() > MAX_STRING_UNITS {
                return Err(ProtocolError("an out-of-band string longer than a V8 string can be".to_owned()));
              }
              call.strings.push(string);
            }
            check_places(&call.args, &call.paths, strings).map_err(ProtocolError)?;
          }
          calls.push(call);
        }
        FromHost::Calls(calls)
      }
      FINISHED => {
        let run_id = fields.u32()?;
        let cost =
          ExecutionCost { cpu_us: fields.f64()?, peak_heap_bytes: fields.u64()?, peak_external_bytes: fields.u64()? };
        let completion = match fields.u8()? {
          NO_VALUE => Completion::NoValue,
          VALUE => Completion::Value(fields.text()?),
          FAILURE => Completion::Failure { kind: fields.failure_kind()?, message: fields.utf16()? },
          tag => return Err(ProtocolError(format!("unknown completion tag {tag}"))),
        };
        FromHost::Finished { run_id, cost, completion }
      }
      REFUSED => FromHost::Refused { run_id: fields.u32()? },
      READINGS => FromHost::Readings { run_id: fields.u32()?, cpu_us: fields.f64()?, readings: fields.readings()? },
      JOURNAL_FULL => FromHost::JournalFull,
      UNSTOPPABLE => {
        FromHost::Unstoppable { run_id: fields.u32()?, kind: fields.failure_kind()?, message: fields.utf16()? }
      }
      STATS => FromHost::Stats { seq: fields.u64()?, stats: HostStats::decode(&mut fields)? },
      tag => return Err(ProtocolError(format!("unknown frame tag {tag} from a host"))),
    };
    fields.end()?;
    Ok(message)
  }
}

/// Reads a frame's fields in order, each checked against what is left.
struct Fields<'a> {
  rest: &'a [u8],
  /// The buffer the frame is in, when its long texts may share it.
  buffer: Option<&'a dyn SharedFrame>,
}

impl<'a> Fields<'a> {
  fn new(frame: &'a [u8]) -> Self {
    Fields { rest: frame, buffer: None }
  }

  fn sharing(buffer: &'a dyn SharedFrame) -> Self {
    Fields { rest: buffer.frame(), buffer: Some(buffer) }
  }

  /// Where the next field starts in the frame's buffer (0 without one).
  fn offset(&self) -> usize {
    self.buffer.map_or(0, |buffer| buffer.frame().len() - self.rest.len())
  }

  fn take(&mut self, len: usize) -> Result<&'a [u8], ProtocolError> {
    if self.rest.len() < len {
      return Err(ProtocolError(format!("a frame ends inside a field ({len} bytes wanted, {} left)", self.rest.len())));
    }
    let (head, rest) = self.rest.split_at(len);
    self.rest = rest;
    Ok(head)
  }

  fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtocolError> {
    let mut bytes = [0u8; N];
    bytes.copy_from_slice(self.take(N)?);
    Ok(bytes)
  }

  fn u8(&mut self) -> Result<u8, ProtocolError> {
    Ok(self.array::<1>()?[0])
  }

  fn u32(&mut self) -> Result<u32, ProtocolError> {
    Ok(u32::from_le_bytes(self.array()?))
  }

  fn failure_kind(&mut self) -> Result<FailureKind, ProtocolError> {
    let code = self.u8()?;
    FailureKind::from_code(code).ok_or_else(|| ProtocolError(format!("unknown failure kind {code}")))
  }

  fn u64(&mut self) -> Result<u64, ProtocolError> {
    Ok(u64::from_le_bytes(self.array()?))
  }

  fn f64(&mut self) -> Result<f64, ProtocolError> {
    Ok(f64::from_le_bytes(self.array()?))
  }

  /// A count of items each at least `min_item` bytes long: a count the
  /// frame cannot hold is refused before anything is allocated for it.
  fn count(&mut self, min_item: usize) -> Result<usize, ProtocolError> {
    let count = self.u32()? as usize;
    if count.saturating_mul(min_item) > self.rest.len() {
      return Err(ProtocolError(format!("a count of {count} items does not fit the frame")));
    }
    Ok(count)
  }

  fn text(&mut self) -> Result<String, ProtocolError> {
    let len = self.u32()? as usize;
    let bytes = self.take(len)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtocolError("text is not UTF-8".to_owned()))
  }

  /// A text, as [`Text`]: see [`Fields::bytes`].
  fn shared_text(&mut self) -> Result<Text, ProtocolError> {
    Text::checked(self.shared()?).map_err(|_| ProtocolError("text is not UTF-8".to_owned()))
  }

  /// Bytes as [`FrameWriter::shared`] writes them: their length, then
  /// them (see [`Fields::bytes`]).
  fn shared(&mut self) -> Result<SharedBytes, ProtocolError> {
    let len = self.u32()? as usize;
    self.bytes(len)
  }

  /// A reply's text (see [`FrameWriter::reply_text`]): a UTF-8 one checked,
  /// a Latin-1 one as it is.
  fn reply_text(&mut self) -> Result<ReplyText, ProtocolError> {
    match self.u8()? {
      UTF8 => Ok(ReplyText::Utf8(self.shared_text()?)),
      LATIN1 => Ok(ReplyText::Latin1(self.shared()?)),
      code => Err(ProtocolError(format!("a reply's text of unknown encoding {code}"))),
    }
  }

  /// The next `len` bytes: at least [`SPLICED_TEXT_BYTES`] of them part of
  /// the frame's buffer when the frame is decoded from one
  /// ([`Fields::sharing`]) and the buffer finds them worth sharing, else a
  /// copy (a long one in a block of its own).
  fn bytes(&mut self, len: usize) -> Result<SharedBytes, ProtocolError> {
    let at = self.offset();
    let bytes = self.take(len)?;
    if let Some(buffer) = self.buffer.filter(|buffer| len >= SPLICED_TEXT_BYTES && buffer.worth_sharing(len)) {
      return buffer.share(at, len).ok_or_else(|| ProtocolError("bytes outside their frame".to_owned()));
    }
    Ok(SharedBytes::copy_of(bytes))
  }

  fn utf16(&mut self) -> Result<Vec<u16>, ProtocolError> {
    let units = self.u32()? as usize;
    let bytes = self.take(units.checked_mul(2).ok_or_else(|| ProtocolError("text too long".to_owned()))?)?;
    Ok(bytes.chunks_exact(2).map(|pair| u16::from_le_bytes([pair[0], pair[1]])).collect())
  }

  fn readings(&mut self) -> Result<Readings, ProtocolError> {
    let mut streams: [Vec<Repeated>; CLOCKS] = Default::default();
    for stream in &mut streams {
      let count = self.count(REPEATED_BYTES)?;
      stream.reserve_exact(count);
      for _ in 0..count {
        stream.push(Repeated { value: self.f64()?, times: self.u32()? });
      }
    }
    let words = self.count(4)?;
    let mut order = Vec::with_capacity(words);
    for _ in 0..words {
      order.push(self.u32()?);
    }
    Readings::from_parts(streams, order).ok_or_else(|| ProtocolError("a reading repeated zero times".to_owned()))
  }

  fn end(&self) -> Result<(), ProtocolError> {
    if self.rest.is_empty() {
      Ok(())
    } else {
      Err(ProtocolError(format!("{} bytes left over after a frame's fields", self.rest.len())))
    }
  }
}

/// Read one frame's tag and fields into `frame` (its length taken off).
/// `Ok(false)`: the stream ended cleanly between frames. A frame longer
/// than [`MAX_FRAME_BYTES`], or a stream that ends inside a frame, is an
/// error. The buffer grows with the bytes that actually arrive, so a
/// length a peer claims but does not send costs nothing.
pub fn read_frame(reader: &mut impl Read, frame: &mut Vec<u8>) -> io::Result<bool> {
  let mut header = [0u8; 4];
  let mut got = 0;
  while got < header.len() {
    match reader.read(&mut header[got..]) {
      Ok(0) if got == 0 => return Ok(false),
      Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame header")),
      Ok(n) => got += n,
      Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
      Err(error) => return Err(error),
    }
  }
  let len = u32::from_le_bytes(header);
  if len == 0 || len > MAX_FRAME_BYTES {
    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {len} bytes")));
  }
  frame.clear();
  let read = reader.take(u64::from(len)).read_to_end(frame)?;
  if read != len as usize {
    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame"));
  }
  Ok(true)
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::readings::Clock;

  fn latin1(bytes: &[u8]) -> ReplyText {
    ReplyText::Latin1(SharedBytes::from(bytes.to_vec()))
  }

  fn round_trip_to_host(message: ToHost) {
    let mut out = Vec::new();
    message.encode(&mut out);
    let mut frame = Vec::new();
    assert!(read_frame(&mut out.as_slice(), &mut frame).unwrap());
    assert_eq!(ToHost::decode(&frame).unwrap(), message);
  }

  fn round_trip_from_host(message: FromHost) {
    let mut out = Vec::new();
    message.encode(&mut out);
    let mut frame = Vec::new();
    assert!(read_frame(&mut out.as_slice(), &mut frame).unwrap());
    assert_eq!(FromHost::decode(&frame).unwrap(), message);
  }

  fn some_readings() -> Readings {
    let mut readings = Readings::default();
    for (clock, value) in [(Clock::Wall, 1.7e12), (Clock::Wall, 1.7e12), (Clock::Memory, 3.0), (Clock::Cpu, 0.25)] {
      readings.push(clock, value);
    }
    readings.push_order(&[2, 5, 6]);
    readings
  }

  #[test]
  fn every_message_decodes_to_itself() {
    round_trip_to_host(ToHost::Submit {
      run_id: 7,
      wall_ms: 1.5,
      seed: [1, u64::MAX, 3, 1 << 63],
      readings: some_readings(),
      history_end: HistoryEnd { cpu_us: 12.5, calls: 3, logs: 4 },
      program: "return 'é'".into(),
      bindings_json: "{}".into(),
    });
    round_trip_to_host(ToHost::Abort { run_id: 1, reason: vec![0xd800, 0x41] });
    round_trip_to_host(ToHost::Replies(vec![
      Reply { run_id: 1, call_id: 2, answer: Answer::plain(ReplyKind::Json, "[1]") },
      Reply { run_id: 3, call_id: 4, answer: Answer::plain(ReplyKind::Reject, "\"no\"") },
      Reply { run_id: 5, call_id: 6, answer: Answer::plain(ReplyKind::Text, "as it is") },
      Reply {
        run_id: 7,
        call_id: 8,
        answer: Answer {
          kind: ReplyKind::Json,
          text: "{\"path\":\"a\",\"text\":null,\"more\":[null]}".into(),
          paths: "[[0,\"text\"],[1,\"more\",0]]".into(),
          strings: vec!["é".repeat(3).into(), ReplyText::default(), latin1(&[b'a', 0xe9])],
        },
      },
      // Latin-1: any bytes, as they are.
      Reply { run_id: 9, call_id: 10, answer: Answer::plain(ReplyKind::Text, latin1(&[b'a', 0xe9, 0xff, 0])) },
      Reply { run_id: 9, call_id: 11, answer: Answer::plain(ReplyKind::Json, latin1(b"[1]")) },
    ]));
    round_trip_to_host(ToHost::StatsRequest { seq: u64::MAX });
    round_trip_to_host(ToHost::Shutdown);
    round_trip_from_host(FromHost::Ready { protections: Protections::all() });
    round_trip_from_host(FromHost::Started { run_id: 9 });
    round_trip_from_host(FromHost::Log { run_id: 9, text: vec![0xdc00, 0, 0xffff] });
    round_trip_from_host(FromHost::Calls(vec![
      BindingCall {
        run_id: 1,
        call_id: 2,
        namespace: 3,
        function: 4,
        args: "{\"a\":1}".into(),
        paths: String::new(),
        strings: Vec::new(),
      },
      BindingCall {
        run_id: 1,
        call_id: 3,
        namespace: 0,
        function: 0,
        args: "{\"a\":null,\"b\":[null]}".into(),
        paths: "[[0,\"a\"],[1,\"b\",0]]".into(),
        strings: vec![RawString::Latin1(vec![0xe9, b'x'].into()), RawString::Utf16(vec![0xd800, 0x41])],
      },
    ]));
    let cost = ExecutionCost { cpu_us: 1.5, peak_heap_bytes: 2, peak_external_bytes: 3 };
    round_trip_from_host(FromHost::Finished { run_id: 1, cost, completion: Completion::NoValue });
    round_trip_from_host(FromHost::Finished { run_id: 1, cost, completion: Completion::Value("1".into()) });
    round_trip_from_host(FromHost::Finished {
      run_id: 1,
      cost: ExecutionCost::default(),
      completion: Completion::Failure { kind: FailureKind::OutputLimit, message: vec![0x41] },
    });
    round_trip_from_host(FromHost::Refused { run_id: 5 });
    round_trip_from_host(FromHost::JournalFull);
    round_trip_from_host(FromHost::Unstoppable { run_id: 4, kind: FailureKind::Timeout, message: vec![0x41, 0xd800] });
    round_trip_from_host(FromHost::Readings { run_id: 2, cpu_us: 1.5, readings: some_readings() });
    round_trip_from_host(FromHost::Readings { run_id: 2, cpu_us: 0.0, readings: Readings::default() });
    round_trip_from_host(FromHost::Stats {
      seq: 3,
      stats: HostStats { queued: 1, cpu_ms: 2.5, ..HostStats::default() },
    });
  }

  /// A snapshot whose every figure is different (1, 2, 3, ... in the list's order).
  macro_rules! numbered_stats {
    (
      gauges { $($(#[doc = $gauge_doc:tt])* $gauge:ident: $gauge_type:ident,)* }
      totals { $($(#[doc = $total_doc:tt])* $total:ident: $total_type:ident,)* }
    ) => {{
      let mut number = 0u8;
      HostStats {
        $($gauge: { number += 1; number.into() },)*
        $($total: { number += 1; number.into() },)*
      }
    }};
  }

  #[test]
  fn every_figure_crosses_adds_up_and_only_the_totals_outlive_their_host() {
    let stats = host_stats!(numbered_stats);
    round_trip_from_host(FromHost::Stats { seq: 1, stats });
    let mut sum = stats;
    sum.add(&stats);
    assert_eq!(
      (sum.queued, sum.prepared_isolates, sum.cpu_ms, sum.isolates_warmed, sum.memory_returns),
      (2, 16, 18.0, 22, 24)
    );
    let totals = stats.totals();
    assert_eq!(
      totals,
      HostStats { cpu_ms: 9.0, isolates_disposed: 10, isolates_warmed: 11, memory_returns: 12, ..HostStats::default() }
    );
    let mut saturated = HostStats { queued: u32::MAX, isolates_disposed: u64::MAX, ..HostStats::default() };
    saturated.add(&stats);
    assert_eq!((saturated.queued, saturated.isolates_disposed), (u32::MAX, u64::MAX));
  }

  /// A tiny deterministic generator (xorshift), so the fuzz cases are the
  /// same on every run and a failure names its seed.
  fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
  }

  #[test]
  fn a_calls_frame_is_as_long_as_its_calls_say() {
    // The host splits its calls into frames by these lengths: they must be
    // what encoding writes, or a frame could outgrow its bound.
    let calls = [
      BindingCall { args: "[]".into(), ..no_strings() },
      BindingCall {
        args: "[null,{\"a\":null}]".into(),
        paths: "[[0,0],[1,1,\"a\"]]".into(),
        strings: vec![RawString::Latin1(b"abc".to_vec().into()), RawString::Utf16(vec![0xdc00, 0x41])],
        ..no_strings()
      },
    ];
    for count in 0..=calls.len() {
      let calls = calls[..count].to_vec();
      let mut out = Vec::new();
      let expected = CALLS_FRAME_OVERHEAD + calls.iter().map(BindingCall::encoded_len).sum::<usize>();
      FromHost::Calls(calls).encode(&mut out);
      assert_eq!(out.len(), expected);
    }
  }

  #[test]
  fn hostile_frames_are_errors_never_panics() {
    let mut valid = Vec::new();
    FromHost::Calls(vec![
      BindingCall { run_id: 1, call_id: 2, namespace: 0, function: 0, args: "[]".into(), ..no_strings() },
      BindingCall {
        run_id: 1,
        call_id: 3,
        namespace: 0,
        function: 0,
        args: "[null,{\"a\":null}]".into(),
        paths: "[[0,0],[1,1,\"a\"]]".into(),
        strings: vec![RawString::Latin1(b"abc".to_vec().into()), RawString::Utf16(vec![0xdc00])],
      },
    ])
    .encode(&mut valid);
    FromHost::Finished {
      run_id: 1,
      cost: ExecutionCost { cpu_us: 1.0, peak_heap_bytes: 2, peak_external_bytes: 3 },
      completion: Completion::Failure { kind: FailureKind::Exception, message: vec![65] },
    }
    .encode(&mut valid);
    FromHost::Stats { seq: 1, stats: HostStats::default() }.encode(&mut valid);
    FromHost::Readings { run_id: 1, cpu_us: 2.0, readings: some_readings() }.encode(&mut valid);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for case in 0..200_000u32 {
      // Random bytes, and valid frames with bytes flipped, cut or grown.
      let mut bytes = if case % 2 == 0 {
        let len = (xorshift(&mut state) % 64) as usize;
        (0..len).map(|_| xorshift(&mut state) as u8).collect::<Vec<u8>>()
      } else {
        valid.clone()
      };
      if !bytes.is_empty() {
        for _ in 0..1 + xorshift(&mut state) % 4 {
          let at = (xorshift(&mut state) as usize) % bytes.len();
          bytes[at] = xorshift(&mut state) as u8;
        }
        bytes.truncate(1 + (xorshift(&mut state) as usize) % bytes.len());
      }
      let mut reader = bytes.as_slice();
      let mut buffer = FrameBuffer::default();
      while let Ok(true) = read_frame(&mut reader, buffer.next_frame()) {
        let _ = FromHost::decode(buffer.frame());
        let _ = ToHost::decode(buffer.frame());
        let _ = ToHost::decode_shared(&buffer);
        if let Some(mut block) = BlockFrame::new(buffer.frame().len().max(1)) {
          if let Some(bytes) = block.bytes_mut() {
            bytes[..buffer.frame().len()].copy_from_slice(buffer.frame());
          }
          let _ = FromHost::decode_shared(&block);
        }
      }
    }
  }

  /// A reading repeated zero times, or a count past the frame, is refused.
  #[test]
  fn readings_that_no_host_writes_are_refused() {
    let mut frame = Vec::new();
    FromHost::Readings { run_id: 1, cpu_us: 2.0, readings: some_readings() }.encode(&mut frame);
    // The wall stream's count of times: after it, the monotonic stream's
    // count, the CPU and memory streams (a count and an entry each) and the
    // order (its count, three words).
    let times_at = frame.len() - 4 * 4 - 3 * 4 - 12 * 2 - 4;
    let mut zero = frame.clone();
    zero[times_at..times_at + 4].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(FromHost::decode(&zero[4..]), Err(ProtocolError("a reading repeated zero times".into())));
    let mut long = frame.clone();
    long[17..21].copy_from_slice(&u32::MAX.to_le_bytes()); // the wall stream's count
    assert!(FromHost::decode(&long[4..]).is_err());
    assert!(FromHost::decode(&frame[4..]).is_ok());
  }

  /// Long texts are spliced in, not copied, and the pieces are the frame
  /// the texts written in would be, byte for byte: the length prefix
  /// counts them, and the other side decodes every reply.
  #[test]
  fn long_texts_are_spliced_into_reply_frames_as_they_would_be_written() {
    let long = Text::from("é".repeat(SPLICED_TEXT_BYTES));
    let short = Text::from("s".repeat(SPLICED_TEXT_BYTES - 1));
    let replies = [
      Reply { run_id: 1, call_id: 0, answer: Answer::plain(ReplyKind::Text, long.clone()) },
      Reply { run_id: 1, call_id: 1, answer: Answer::plain(ReplyKind::Json, short.clone()) },
      Reply {
        run_id: 2,
        call_id: 0,
        answer: Answer {
          kind: ReplyKind::Json,
          text: "[null,null]".into(),
          paths: "[[0,0],[1,1]]".into(),
          strings: vec![long.clone().into(), short.into()],
        },
      },
    ];
    let answers: Vec<_> = replies.iter().map(|reply| (reply.run_id, reply.call_id, &reply.answer)).collect();
    let mut frames = SplicedFrames::from(b"before".to_vec());
    encode_replies(&mut frames, &answers);
    encode_replies(&mut frames, &answers[..1]);
    // Each frame splices the long text (twice in the first), never the short.
    assert_eq!(frames.spliced.len(), 3);
    assert!(frames.spliced.iter().all(|(_, text)| text.as_ptr() == long.as_ptr()));
    let mut written = b"before".to_vec();
    let mut encoded = Vec::new();
    ToHost::Replies(replies.to_vec()).encode(&mut encoded);
    written.extend_from_slice(&encoded);
    ToHost::Replies(replies[..1].to_vec()).encode(&mut written);
    assert_eq!(frames.flattened(), written);
    assert_eq!(frames.len(), written.len());
    let mut wire = &frames.flattened()[6..];
    let mut frame = Vec::new();
    assert!(read_frame(&mut wire, &mut frame).unwrap());
    assert_eq!(ToHost::decode(&frame).unwrap(), ToHost::Replies(replies.to_vec()));
    assert!(read_frame(&mut wire, &mut frame).unwrap());
    assert_eq!(ToHost::decode(&frame).unwrap(), ToHost::Replies(replies[..1].to_vec()));
    assert!(wire.is_empty());
  }

  /// Decoded from a reader's buffer, a reply's long texts are parts of
  /// the buffer (its short ones copies), equal to a decode's; a buffer is
  /// read into again only once nothing decoded from it holds it (the other
  /// one, or a fresh one, meanwhile), and a UTF-8 text that is not UTF-8
  /// is refused either way (a Latin-1 one is taken as it is).
  #[test]
  fn long_reply_texts_decoded_from_a_buffer_share_it_until_they_are_gone() {
    let long = Text::from("é".repeat(SPLICED_TEXT_BYTES / 2));
    let short = Text::from("s".repeat(SPLICED_TEXT_BYTES - 1));
    let replies = ToHost::Replies(vec![
      Reply { run_id: 1, call_id: 0, answer: Answer::plain(ReplyKind::Text, long.clone()) },
      Reply {
        run_id: 1,
        call_id: 1,
        answer: Answer {
          kind: ReplyKind::Json,
          text: short.clone().into(),
          paths: "[[0]]".into(),
          strings: vec![long.clone().into()],
        },
      },
    ]);
    let mut encoded = Vec::new();
    replies.encode(&mut encoded);
    let mut buffer = FrameBuffer::default();
    let read_into = |buffer: &mut FrameBuffer, encoded: &[u8]| {
      let frame = buffer.next_frame();
      frame.clear();
      frame.extend_from_slice(&encoded[4..]);
      frame.as_ptr()
    };
    let first = read_into(&mut buffer, &encoded);
    let decoded = ToHost::decode_shared(&buffer).unwrap();
    assert_eq!(decoded, replies);
    let ToHost::Replies(decoded) = decoded else { unreachable!() };
    let in_buffer = |text: &ReplyText| buffer.frame().as_ptr_range().contains(&text.shared_bytes().as_ptr());
    assert!(in_buffer(&decoded[0].answer.text) && in_buffer(&decoded[1].answer.strings[0]));
    assert!(!in_buffer(&decoded[1].answer.text));
    // Held: the next frame goes into the other buffer; both held, into a
    // fresh one; the texts unchanged throughout.
    let kept = decoded[1].answer.strings[0].clone();
    drop(decoded);
    let second = read_into(&mut buffer, &encoded);
    assert_ne!(second, first);
    let also_kept = ToHost::decode_shared(&buffer).unwrap();
    let third = read_into(&mut buffer, &encoded);
    assert!(third != first && third != second);
    assert_eq!(kept, ReplyText::from(long.clone()));
    assert_eq!(also_kept, replies);
    // Let go: the buffers are read into again, in turn.
    drop((kept, also_kept));
    ToHost::decode_shared(&buffer).unwrap();
    assert_eq!(read_into(&mut buffer, &encoded), third);
    let held = ToHost::decode_shared(&buffer).unwrap();
    assert_eq!(read_into(&mut buffer, &encoded), second);
    drop(held);
    let at = buffer.frame().len() - long.len();
    buffer.next_frame()[at] = 0xff;
    assert_eq!(ToHost::decode_shared(&buffer), Err(ProtocolError("text is not UTF-8".into())));
    assert!(buffer.share(at, long.len() + 1).is_none());
    // The same bytes as Latin-1 are decoded as they are.
    let latin1_text = ReplyText::Latin1(long.shared_bytes().clone());
    let as_latin1 =
      ToHost::Replies(vec![Reply { run_id: 1, call_id: 0, answer: Answer::plain(ReplyKind::Text, latin1_text) }]);
    let mut encoded = Vec::new();
    as_latin1.encode(&mut encoded);
    read_into(&mut buffer, &encoded);
    // The text, then the count of strings beside it.
    let at = buffer.frame().len() - 4 - long.len();
    buffer.next_frame()[at] = 0xff;
    let ToHost::Replies(decoded) = ToHost::decode_shared(&buffer).unwrap() else { unreachable!() };
    assert_eq!(decoded[0].answer.text.shared_bytes()[0], 0xff);
  }

  /// A call's long one-byte strings are spliced in too, and decode back.
  #[test]
  fn long_one_byte_strings_are_spliced_into_calls_frames() {
    let long = SharedBytes::from(vec![0xe9; SPLICED_TEXT_BYTES]);
    let call = BindingCall {
      run_id: 1,
      call_id: 2,
      namespace: 0,
      function: 0,
      args: "[null,null,null]".into(),
      paths: "[[0,0],[1,1],[2,2]]".into(),
      strings: vec![
        RawString::Latin1(long.clone()),
        RawString::Latin1(vec![b's'; SPLICED_TEXT_BYTES - 1].into()),
        RawString::Utf16(vec![0xd800; SPLICED_TEXT_BYTES]),
      ],
    };
    let message = FromHost::Calls(vec![call]);
    let mut frames = SplicedFrames::default();
    message.encode_spliced(&mut frames);
    assert_eq!(frames.spliced.len(), 1);
    assert_eq!(frames.spliced[0].1.as_ptr(), long.as_ptr());
    let wire = frames.flattened();
    let mut frame = Vec::new();
    assert!(read_frame(&mut wire.as_slice(), &mut frame).unwrap());
    assert_eq!(FromHost::decode(&frame).unwrap(), message);
    // Decoded from a block of its own, a long one-byte string is a part of
    // the block when it is at least half the frame, else a copy.
    let block_of = |frame: &[u8]| {
      let mut block = BlockFrame::new(frame.len()).unwrap();
      block.bytes_mut().unwrap().copy_from_slice(frame);
      block
    };
    let in_block = |block: &BlockFrame, message: &FromHost| {
      let FromHost::Calls(calls) = message else { panic!("not calls") };
      let part = |string: &RawString| match string {
        RawString::Latin1(bytes) => block.frame().as_ptr_range().contains(&bytes.as_ptr()),
        RawString::Utf16(_) => false,
      };
      calls[0].strings.iter().map(part).collect::<Vec<_>>()
    };
    let block = block_of(&frame);
    let decoded = FromHost::decode_shared(&block).unwrap();
    assert_eq!(decoded, message);
    assert_eq!(in_block(&block, &decoded), [false, false, false]);
    let mostly = FromHost::Calls(vec![BindingCall {
      args: "[null,null]".into(),
      paths: "[[0,0],[1,1]]".into(),
      strings: vec![
        RawString::Latin1(vec![0xe9; 4 * SPLICED_TEXT_BYTES].into()),
        RawString::Latin1(vec![b's'; SPLICED_TEXT_BYTES].into()),
      ],
      ..no_strings()
    }]);
    let mut frame = Vec::new();
    mostly.encode(&mut frame);
    let mut block = block_of(&frame[4..]);
    let decoded = FromHost::decode_shared(&block).unwrap();
    assert_eq!(decoded, mostly);
    assert_eq!(in_block(&block, &decoded), [true, false]);
    // Shared, the block is read into no more; let go, it is.
    assert!(block.bytes_mut().is_none());
    drop(decoded);
    assert!(block.bytes_mut().is_some());
    // A string that claims to run past the frame is refused, not shared.
    assert!(FromHost::decode_shared(&block_of(&frame[4..frame.len() - 1])).is_err());
  }

  /// Only a JSON answer has places for strings beside its text.
  #[test]
  fn strings_beside_an_answer_that_is_not_json_are_refused() {
    for kind in [ReplyKind::Reject, ReplyKind::Text] {
      let answer = Answer { kind, text: "\"a\"".into(), paths: "[[]]".into(), strings: vec!["b".into()] };
      let mut frames = SplicedFrames::default();
      encode_replies(&mut frames, &[(1, 0, &answer)]);
      let frame = frames.flattened();
      assert_eq!(ToHost::decode(&frame[4..]), Err(ProtocolError("strings beside an answer that is not JSON".into())));
    }
  }

  fn no_strings() -> BindingCall {
    BindingCall {
      run_id: 1,
      call_id: 1,
      namespace: 0,
      function: 0,
      args: String::new(),
      paths: String::new(),
      strings: Vec::new(),
    }
  }

  /// A calls frame whose out-of-band strings do not match its JSON is an
  /// error (it ends the host), whatever the mismatch.
  #[test]
  fn calls_whose_out_of_band_strings_do_not_match_their_json_are_refused() {
    let decode = |args: &str, paths: &str, strings: Vec<RawString>| {
      let mut out = Vec::new();
      let call = BindingCall { args: args.into(), paths: paths.into(), strings, ..no_strings() };
      FromHost::Calls(vec![call]).encode(&mut out);
      FromHost::decode(&out[4..])
    };
    let one = || vec![RawString::Latin1(b"long".to_vec().into())];
    assert!(decode("{\"text\":null}", "[[0,\"text\"]]", one()).is_ok());
    // One string in two places.
    assert!(decode("[null,null]", "[[0,0],[0,1]]", one()).is_ok());
    // A place that holds a value, a path to nowhere, fewer paths than
    // strings, more, paths that are not paths.
    assert!(decode("{\"text\":\"short\"}", "[[0,\"text\"]]", one()).is_err());
    assert!(decode("{\"text\":null}", "[[0,\"other\"]]", one()).is_err());
    assert!(decode("{\"text\":null}", "[]", one()).is_err());
    assert!(decode("[null,null]", "[[0,0],[1,1]]", one()).is_err());
    assert!(decode("{\"text\":null}", "{\"text\":0}", one()).is_err());
    // An unknown encoding tag.
    let mut out = Vec::new();
    FromHost::Calls(vec![BindingCall { args: "null".into(), paths: "[[0]]".into(), strings: one(), ..no_strings() }])
      .encode(&mut out);
    let tag = out.len() - 4 - 4 - 1;
    assert_eq!(out[tag], LATIN1);
    out[tag] = 7;
    assert!(FromHost::decode(&out[4..]).is_err());
  }

  #[test]
  fn a_frame_that_claims_more_than_it_holds_fails_without_allocating_it() {
    let mut bytes = (MAX_FRAME_BYTES).to_le_bytes().to_vec();
    bytes.push(LOG);
    let mut frame = Vec::new();
    let error = read_frame(&mut bytes.as_slice(), &mut frame).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    assert!(frame.capacity() < 1 << 20);
    let too_long = (MAX_FRAME_BYTES + 1).to_le_bytes();
    assert_eq!(read_frame(&mut too_long.as_slice(), &mut frame).unwrap_err().kind(), io::ErrorKind::InvalidData);
    // A count of items the frame cannot hold is refused before allocation.
    let mut calls = Vec::new();
    FrameWriter::new(&mut calls, CALLS).u32(u32::MAX).finish();
    let mut frame = Vec::new();
    assert!(read_frame(&mut calls.as_slice(), &mut frame).unwrap());
    assert!(FromHost::decode(&frame).is_err());
  }
}
