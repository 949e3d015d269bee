//! `dsh-isolate-host`: one isolate-host process. The harness's addon
//! starts it with the channel (a Unix socket as its standard input, and
//! the shared rings beside it: `dsh_protocol::ring`), nothing in its
//! environment and `/` as its working directory, and speaks
//! `dsh_protocol::frame` over it: a `Configure` frame first, then
//! submissions, aborts, replies and stats requests; the host answers with
//! `Ready`, then each run's binding calls and result. Each run's start and
//! log entries go to the journal (`JOURNAL_FD`), which nobody waits on.
//!
//! Before any program runs, the host locks itself down (`lockdown`): no
//! file system, network, other process or privilege; its `Ready` says
//! which protections the kernel granted.
//!
//! The host lives only as long as the harness wants it: it asks the kernel
//! to kill it when the harness dies (`PR_SET_PDEATHSIG`), and it exits at
//! once when the channel closes. A panic anywhere ends the process (the
//! harness settles its runs as `worker-exit`), never a thread alone, which
//! would leave a run that never settles.

use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_isolate_host::bindings_descriptor::BindingsDescriptor;
use dsh_isolate_host::bridge::Bridge;
use dsh_isolate_host::compiler_zones;
use dsh_isolate_host::config::RuntimeConfig;
use dsh_isolate_host::live_runs::LiveRuns;
use dsh_isolate_host::lock::lock;
use dsh_isolate_host::lockdown;
use dsh_isolate_host::mailbox::ReplyChannel;
use dsh_isolate_host::memory_return;
use dsh_isolate_host::platform::{self, OptimizingCompiler};
use dsh_isolate_host::run::{Recorded, RunEvents, RunJob};
use dsh_isolate_host::scheduler::{Scheduler, Submission};
use dsh_protocol::failure::StopReason;
use dsh_protocol::frame::{ExecutionCost, FromHost, HistoryEnd, Reply, RunSeed, SplicedFrames, ToHost, JOURNAL_FD};
use dsh_protocol::inbox::{short_enough_to_take, Inbox, Next, Watching};
use dsh_protocol::ledger::{FailureKind, OutputLedger};
use dsh_protocol::protections::Protection;
use dsh_protocol::readings::Readings;
use dsh_protocol::ring::{RingEnds, RingWriter};
use dsh_protocol::socket::{self, send_now};
use dsh_protocol::text::{FrameBuffer, SharedFrame};

/// The system's allocator, with `structuredClone`'s serialized copy held
/// to a ceiling while V8 writes it (V8 grows that buffer with Rust's
/// allocator, asking no one).
#[global_allocator]
static ALLOCATOR: dsh_sandbox_ext::serialized_copy::CopyBoundingAllocator =
  dsh_sandbox_ext::serialized_copy::CopyBoundingAllocator;

/// The host's writing end of the channel, written by every thread that has
/// something to say: each frame is one `write_all` under the lock, so
/// frames never interleave. A write that fails means the harness is gone:
/// the host ends.
struct Channel {
  ring: Mutex<RingWriter>,
}

impl Channel {
  /// Send one frame: a call's long one-byte strings are written into the
  /// ring from where the call holds them, not copied into the frame first.
  ///
  /// A run's calls or its end (`FromHost::FOR_NODE_TAGS`), in a frame short
  /// enough for Node's main thread to take itself
  /// (`inbox::short_enough_to_take`, in one piece), rings the Node bell
  /// when that thread listens there (`RingWriter::write_all_for_node`): it
  /// wakes the thread that acts on them, not the reader thread that would
  /// wake it in turn.
  fn send(&self, message: &FromHost) {
    let mut frames = SplicedFrames::default();
    message.encode_spliced(&mut frames);
    let ring = lock(&self.ring);
    // The frame's tag follows its length.
    let for_node = frames.bytes.get(4).is_some_and(|tag| FromHost::FOR_NODE_TAGS.contains(tag))
      && frames.spliced.is_empty()
      && short_enough_to_take(frames.bytes.len());
    let written = if for_node {
      ring.write_all_for_node(&frames.bytes).is_ok()
    } else {
      frames.pieces().all(|piece| ring.write_all(piece).is_ok())
    };
    if !written {
      gone();
    }
  }
}

/// The host's end of its journal (`dsh_protocol::frame`): each run's start
/// and log entries, written by the run's thread as they happen. Nobody
/// waits on it, so a write wakes nobody; the harness reads it before each
/// frame of the channel and once the host has ended. Each frame is written
/// whole under the lock, so frames never interleave.
struct Journal {
  stream: Mutex<UnixStream>,
  /// The channel, to say the journal is full.
  channel: Arc<Channel>,
}

impl Journal {
  fn write(&self, frame: &[u8]) {
    let stream = lock(&self.stream);
    let mut written = 0;
    while written < frame.len() {
      match send_now(&stream, &frame[written..]) {
        Ok(sent) => written += sent,
        // Full: the harness reads the journal before it handles the frame
        // that says so, so once that frame is sent, room comes (or the
        // harness is gone, and the next send says so).
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
          self.channel.send(&FromHost::JournalFull);
          if socket::wait(&stream, libc::POLLOUT).is_err() {
            gone();
          }
        }
        _ => gone(),
      }
    }
  }
}

/// The harness closed the channel or died: nothing here is wanted any more.
fn gone() -> ! {
  // SAFETY: _exit ends the process without running destructors or atexit
  // handlers, which is what is wanted with V8 threads still running.
  unsafe { libc::_exit(0) }
}

/// Runs report their start and their log entries in the journal.
struct JournalEvents {
  journal: Journal,
  /// A log entry longer than this many units can never be admitted by the
  /// ledger (each unit is at least one JSON byte); only this much of it
  /// crosses, which decides the same for the harness's replay.
  max_log_units: usize,
}

impl RunEvents for JournalEvents {
  fn started(&self, run_id: u32) {
    let mut frame = Vec::new();
    FromHost::Started { run_id }.encode(&mut frame);
    self.journal.write(&frame);
  }

  fn log(&self, run_id: u32, text: &[u16]) {
    let mut frame = Vec::with_capacity(16 + text.len().min(self.max_log_units) * 2);
    dsh_protocol::frame::encode_log(&mut frame, run_id, &text[..text.len().min(self.max_log_units)]);
    self.journal.write(&frame);
  }

  fn readings(&self, run_id: u32, cpu_us: f64, readings: &Readings) {
    let mut frame = Vec::with_capacity(32 + readings.bytes() as usize);
    dsh_protocol::frame::encode_readings(&mut frame, run_id, cpu_us, readings);
    self.journal.write(&frame);
  }

  fn unstoppable(&self, run_id: u32, kind: FailureKind, message: &[u16]) {
    let mut frame = Vec::new();
    FromHost::Unstoppable { run_id, kind, message: message.to_vec() }.encode(&mut frame);
    self.journal.write(&frame);
  }
}

fn main() {
  // A panic on any thread ends the host: its runs settle as worker-exit in
  // the harness, instead of one of them waiting forever on a dead thread.
  std::panic::set_hook(Box::new(|info| {
    let message = info
      .payload()
      .downcast_ref::<&str>()
      .map(|text| (*text).to_owned())
      .or_else(|| info.payload().downcast_ref::<String>().cloned())
      .unwrap_or_else(|| "a panic".to_owned());
    eprintln!("dsh-isolate-host: internal error: {message}");
    std::process::abort();
  }));
  // First, while the process has one thread (see `lockdown`, and
  // `memory_return::share_arenas`).
  memory_return::share_arenas();
  let mut protections = lockdown::before_threads();
  die_with_parent();

  // SAFETY: the harness starts this process with the channel's socket, a
  // Unix stream socket, as standard input, and its shared region and
  // doorbells at their fixed descriptors, which `before_threads` kept open;
  // nothing else owns any of them.
  let ring = unsafe { RingEnds::inherited(UnixStream::from_raw_fd(0)) };
  let RingEnds { reader, writer } = ring.unwrap_or_else(|error| {
    eprintln!("dsh-isolate-host: the channel's shared ring could not be set up: {error}");
    std::process::exit(2);
  });
  let channel = Arc::new(Channel { ring: Mutex::new(writer) });
  // SAFETY: the harness starts this process with the journal, a Unix
  // stream socket, at JOURNAL_FD, which `before_threads` kept open and
  // nothing else owns.
  let journal = unsafe { UnixStream::from_raw_fd(JOURNAL_FD) };
  let journal = Journal { stream: Mutex::new(journal), channel: channel.clone() };
  let inbox = Arc::new(Inbox::new(reader));
  // A reply's long texts reach its run as parts of the buffer they were
  // read into (`FrameBuffer`), not copied out of it.
  let mut frames = FrameBuffer::default();

  let first = match inbox.next(frames.next_frame()) {
    Ok(Next::Frame(_guard)) => Some(ToHost::decode(frames.frame())),
    _ => None,
  };
  let config = match first {
    Some(Ok(ToHost::Configure { config })) => *config,
    _ => {
      eprintln!("dsh-isolate-host: the channel's first frame must configure the host");
      std::process::exit(2);
    }
  };
  if let Err(message) = platform::initialize(OptimizingCompiler::for_runtime(&config)) {
    eprintln!("dsh-isolate-host: {message}");
    std::process::exit(2);
  }
  // Before the lockdown, which refuses the pipe V8's memory is read through.
  compiler_zones::prepare();

  // Every run on this host, from its submission until its output exists:
  // the scheduler registers it, the bridge routes its replies, the
  // frames below reach it to stop it.
  let runs = Arc::new(LiveRuns::default());
  let bridge = Arc::new(Bridge::new(runs.clone()));
  {
    let channel = channel.clone();
    bridge.connect_host(Box::new(move |calls| channel.send(&FromHost::Calls(calls))));
    let (read_by_pumps, weak_bridge) = (inbox.clone(), Arc::downgrade(&bridge));
    let answerer = inbox.clone();
    bridge.connect_replies(ReplyChannel {
      take_replies: Box::new(move |watching: &mut Watching| {
        watching.try_take(&read_by_pumps, &[ToHost::REPLIES_TAG], |frame| {
          match (ToHost::decode(frame), weak_bridge.upgrade()) {
            (Ok(ToHost::Replies(replies)), Some(bridge)) => deliver_replies(&bridge, replies),
            (Ok(_), _) | (_, None) => {}
            (Err(_), _) => undecodable(),
          }
        });
      }),
      answerer_cpu: Box::new(move || answerer.writer_cpu()),
    });
  }
  let max_log_units = usize::try_from(config.max_output_bytes).unwrap_or(usize::MAX);
  let events = Arc::new(JournalEvents { journal, max_log_units });
  let scheduler = match Scheduler::start(config.clone(), runs.clone(), bridge.clone(), events) {
    Ok(scheduler) => scheduler,
    Err(error) => {
      eprintln!("dsh-isolate-host: starting the scheduler failed: {error}");
      std::process::exit(2);
    }
  };
  lockdown::seal(&mut protections);
  // Decided by the host's first isolate, which the scheduler is making.
  if compiler_zones::located() {
    protections.insert(Protection::CompilerZones);
  }
  channel.send(&FromHost::Ready { protections });

  loop {
    // Handled under the inbox's lock (held by `_reading`), so that frames
    // a spinning run takes itself are handled in the order they were sent.
    let _reading = match inbox.next(frames.next_frame()) {
      Ok(Next::Frame(reading)) => reading,
      // The harness closed the channel (or died): nothing here is wanted.
      Ok(Next::Ended) | Err(_) => gone(),
    };
    let Ok(message) = ToHost::decode_shared(&frames) else { undecodable() };
    match message {
      ToHost::Submit { run_id, wall_ms, seed, readings, history_end, program, bindings_json } => submit(
        &scheduler,
        &config,
        &channel,
        RunJobFrame { run_id, wall_ms, seed, readings, history_end, program },
        &bindings_json,
      ),
      ToHost::Abort { run_id, reason } => {
        if let Some(run) = runs.get(run_id) {
          run.control().stop(StopReason::Abort(reason));
        }
      }
      ToHost::Replies(replies) => deliver_replies(&bridge, replies),
      ToHost::StatsRequest { seq } => channel.send(&FromHost::Stats { seq, stats: scheduler.stats() }),
      ToHost::Shutdown => {
        // Disposal: no more admissions, every live run stopped (each still
        // reports its result), every thread joined; then the host is done.
        scheduler.close();
        for run in runs.snapshot() {
          run.control().stop(StopReason::Disposed);
        }
        scheduler.shutdown();
        std::process::exit(0);
      }
      ToHost::Configure { .. } => {
        eprintln!("dsh-isolate-host: the harness configured the host twice");
        std::process::exit(2);
      }
    }
  }
}

/// Hand host replies to the runs' mailboxes.
fn deliver_replies(bridge: &Bridge, replies: Vec<Reply>) {
  bridge.reply_all(replies.into_iter().map(|reply| (reply.run_id, reply.call_id, reply.answer)))
}

/// The harness sent a frame this host cannot read: the two are out of step.
fn undecodable() -> ! {
  eprintln!("dsh-isolate-host: the harness sent a frame that does not decode");
  std::process::exit(2);
}

/// What a `Submit` frame says of its run, besides its bindings.
struct RunJobFrame {
  run_id: u32,
  wall_ms: f64,
  seed: RunSeed,
  readings: Readings,
  history_end: HistoryEnd,
  program: String,
}

/// Queue one run; its result (or its refusal) goes back on the channel.
fn submit(
  scheduler: &Scheduler,
  config: &RuntimeConfig,
  channel: &Arc<Channel>,
  frame: RunJobFrame,
  bindings_json: &str,
) {
  let RunJobFrame { run_id, wall_ms, seed, readings, history_end, program } = frame;
  let first_execution = readings.is_empty() && history_end == HistoryEnd::default();
  let recorded = (!first_execution).then(|| Box::new(Recorded { readings, end: history_end }));
  let bindings = match BindingsDescriptor::parse(bindings_json) {
    Ok(bindings) => bindings,
    Err(message) => {
      // The harness parsed it before sending; a host that cannot is
      // answered like any program whose bindings are unusable.
      let output = OutputLedger::new(config.max_output_bytes)
        .finish_failure(FailureKind::Exception, message.encode_utf16().collect());
      channel.send(&FromHost::Finished { run_id, cost: ExecutionCost::default(), completion: output.completion });
      return;
    }
  };
  let wall = Duration::from_secs_f64((wall_ms / 1000.0).clamp(0.0, config.max_wall_ms / 1000.0));
  let budget = scheduler.new_budget(wall);
  if let Some(recorded) = &recorded {
    // Before the watchdog first looks at the run: what it carries is spent.
    budget.carry(Duration::from_secs_f64((recorded.end.cpu_us / 1e6).clamp(0.0, config.compute_ms / 1000.0)));
  }
  let deliver = {
    let channel = channel.clone();
    Box::new(move |output: dsh_protocol::ledger::Output, cost| {
      channel.send(&FromHost::Finished { run_id, cost, completion: output.completion });
    })
  };
  let submission = Submission { job: RunJob { run_id, seed, recorded, program, bindings, budget }, deliver };
  if scheduler.submit(submission).is_err() {
    channel.send(&FromHost::Refused { run_id });
  }
}

/// Ask the kernel to kill this process when the harness dies, then make
/// sure the harness did not die before the request took effect (the
/// harness passes its pid as the only argument).
fn die_with_parent() {
  // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
  unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
  let expected = std::env::args().nth(1).and_then(|pid| pid.parse::<i32>().ok());
  // SAFETY: getppid has no preconditions.
  let parent = unsafe { libc::getppid() };
  if expected.is_some_and(|expected| expected != parent) {
    gone();
  }
}
