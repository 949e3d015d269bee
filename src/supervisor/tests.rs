use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::mpsc;

use dsh_protocol::doorbell::Doorbell;
use dsh_protocol::failure::Divergence;
use dsh_protocol::frame::{BindingCall, ExecutionCost, FromHost, HostStats};
use dsh_protocol::history::Identity;
use dsh_protocol::inbox::Watching;
use dsh_protocol::out_of_band::RawString;
use dsh_protocol::protections::Protection;
use dsh_protocol::ring::{layout, REGION_BYTES, RING_DATA_BYTES};
use dsh_protocol::shared_region::SharedRegion;

use crate::config::HistoryCaps;
use crate::node_bell::RingsInVain;

use super::host_life::restart_delay;
use super::run_record::{fate, Fate};
use super::*;

fn config() -> RuntimeConfig {
  RuntimeConfig::small()
}

/// A host that speaks the protocol until the first run arrives (passing
/// over what comes before it, the heartbeat's first request), says in
/// its journal that it started, then sends `hostile` (hex, `RUN`
/// standing for the run id as the wire writes it; on the channel, or
/// after `journal:` on the journal, followed by `JournalFull` on the
/// channel) and waits for the end of the channel or Shutdown: a host
/// taken over by a program, as far as the harness can tell. It is this
/// test binary ([`hostile_host_fixture`], which writes its valid frames
/// with the protocol's own encoder), started through a shell script that
/// tells it what to send (the supervisor starts a host with an empty
/// environment).
fn hostile_host(name: &str, hostile: &str) -> PathBuf {
  hostile_host_protected(name, Protections::all(), hostile)
}

/// As [`hostile_host`], saying in its `Ready` that it has `protections`.
fn hostile_host_protected(name: &str, protections: Protections, hostile: &str) -> PathBuf {
  let binary = std::env::current_exe().expect("the test binary's path");
  let script = format!(
    "#!/bin/sh\nexport {HOSTILE}='{hostile}' {HOSTILE_PROTECTIONS}={protections}\n\
     exec '{binary}' --exact supervisor::tests::hostile_host_fixture --ignored --test-threads=1 -q\n",
    protections = protections.bits(),
    binary = binary.display(),
  );
  let dir = std::env::temp_dir().join(format!("dsh-hostile-host-{}", std::process::id()));
  std::fs::create_dir_all(&dir).unwrap();
  let path = dir.join(name);
  // The executable is written by a child process, never through a
  // descriptor of this one: the tests run in parallel threads, and a
  // descriptor open for writing here, inherited by another test's host
  // between its fork and its exec, would make exec'ing this file fail
  // with "Text file busy".
  let source = dir.join(format!("{name}.sh"));
  std::fs::write(&source, script).unwrap();
  let copied = std::process::Command::new("cp").arg(&source).arg(&path).status().unwrap();
  assert!(copied.success(), "cp {} {}", source.display(), path.display());
  std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
  path
}

/// What the hostile host sends (see [`hostile_host`]), and the
/// protections its `Ready` claims (their bits).
const HOSTILE: &str = "DSH_HOSTILE_HOST";
const HOSTILE_PROTECTIONS: &str = "DSH_HOSTILE_HOST_PROTECTIONS";

/// The hostile host itself, when this binary runs as one (see
/// [`hostile_host`]); otherwise it does nothing.
#[test]
#[ignore = "the hostile host's entry point: the tests that need one start this binary as a host"]
fn hostile_host_fixture() {
  use std::io::Write;
  use std::os::fd::FromRawFd;
  use std::os::unix::net::UnixStream;

  let (Ok(hostile), Some(protections)) = (
    std::env::var(HOSTILE),
    std::env::var(HOSTILE_PROTECTIONS).ok().and_then(|bits| bits.parse().ok()).and_then(Protections::from_bits),
  ) else {
    return;
  };
  use dsh_protocol::ring::{RingEnds, FROM_HOST_DATA_FD, REGION_FD};
  // The hostile host's own hold on the region and on the bell the harness's
  // reader sleeps on, beside its ring's (which takes the originals over).
  let borrowed = |fd| {
    // SAFETY: the fixed descriptors the supervisor passed are open for the
    // life of the process; only a copy is made here.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned().expect("a handed descriptor")
  };
  let (region_fd, reader_bell_fd) = (borrowed(REGION_FD), borrowed(FROM_HOST_DATA_FD));
  let reader_bell_wait_fd = borrowed(FROM_HOST_DATA_FD + 1);
  // SAFETY: a host's standard input is its channel's socket, and its
  // shared region and doorbells are at their fixed descriptors, as the
  // supervisor passed them; nothing else in this process uses them.
  let ring = unsafe { RingEnds::inherited(UnixStream::from_raw_fd(0)) };
  let RingEnds { reader, writer } = ring.expect("the channel's shared ring");
  let mut channel = &writer;
  // SAFETY: as the channel: the journal socket the supervisor passed at
  // its fixed descriptor.
  let mut journal = unsafe { UnixStream::from_raw_fd(dsh_protocol::frame::JOURNAL_FD) };
  let mut frame = Vec::new();
  let mut next = move || match dsh_protocol::frame::read_frame(&mut &reader, &mut frame) {
    Ok(true) => ToHost::decode(&frame).ok(),
    _ => None,
  };
  let send = |stream: &mut dyn Write, message: FromHost| {
    let mut bytes = Vec::new();
    message.encode(&mut bytes);
    let _ = stream.write_all(&bytes);
  };
  let end = || std::process::exit(0);
  // Configure, then Ready; then, past the heartbeat's requests, a run.
  if next().is_none() {
    end();
  }
  send(&mut channel, FromHost::Ready { protections });
  let mut last_request = None;
  let run_id = loop {
    match next() {
      Some(ToHost::Submit { run_id, .. }) => break run_id,
      Some(ToHost::StatsRequest { seq }) => last_request = Some(seq),
      Some(ToHost::Shutdown) | None => end(),
      Some(_) => {}
    }
  };
  send(&mut journal, FromHost::Started { run_id });
  let hostile = hostile.replace("RUN", &to_hex(&run_id.to_le_bytes()));
  let bytes = |hex: &str| -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex")).collect()
  };
  // A host whose loop a program stopped, keeping itself in service: it
  // reads one more stats request after its run (a host of one run gets
  // its run before any), then nothing, and answers the requests it read
  // over and over (`replays-stats`), or counts on from the one before the
  // last towards it, never past a request sent (`counts-stats`).
  if hostile == "replays-stats" || hostile == "counts-stats" {
    let newest = loop {
      match next() {
        Some(ToHost::StatsRequest { seq }) => break seq,
        Some(ToHost::Shutdown) | None => end(),
        Some(_) => {}
      }
    };
    let from = last_request.unwrap_or(newest);
    for n in 0.. {
      let seq = match hostile.as_str() {
        "replays-stats" if n % 2 == 0 => from,
        "replays-stats" => newest,
        _ => from.saturating_add(n).min(newest),
      };
      send(&mut channel, FromHost::Stats { seq, stats: HostStats::default() });
      std::thread::sleep(Duration::from_millis(5));
    }
  }
  // The words of the ring from this host (its reader's and Node's flags).
  let region = SharedRegion::map(&region_fd, REGION_BYTES).expect("the region");
  let from_host_word = |at: usize| {
    // SAFETY: `at` is one of the layout's u32 words within the ring from
    // the host, in the page-aligned region, mapped until the process ends.
    unsafe { &*region.base().as_ptr().add(layout::FROM_HOST + at).cast::<std::sync::atomic::AtomicU32>() }
  };
  let acquire = std::sync::atomic::Ordering::Acquire;
  match hostile.split_once(':') {
    Some(("journal", hex)) => {
      let _ = journal.write_all(&bytes(hex));
      send(&mut channel, FromHost::JournalFull);
    }
    // A frame for Node, written once the harness's reader sleeps and
    // Node's main thread listens: the Node bell is all that is rung.
    Some(("node", hex)) => {
      while from_host_word(layout::READER_ASLEEP).load(acquire) == 0
        || from_host_word(layout::NODE_LISTENS).load(acquire) == 0
      {
        std::thread::yield_now();
      }
      let _ = writer.write_all_for_node(&bytes(hex));
    }
    // The Node bell rung over and over for nothing, for as long as the
    // harness listens to it; then a frame the harness refuses, which only
    // its reader can read once it has stopped listening.
    Some(("node-bell", "flood")) => {
      while from_host_word(layout::NODE_LISTENS).load(acquire) != 0 {
        // SAFETY: sends one byte of a live local on the bell's ringing end.
        unsafe { libc::send(dsh_protocol::ring::NODE_BELL_FD, b"x".as_ptr().cast(), 1, libc::MSG_DONTWAIT) };
      }
      send(&mut channel, FromHost::Ready { protections });
    }
    Some(("ring", attack)) => {
      let word = |at: usize| {
        // SAFETY: `at` is one of the layout's 8-aligned words within the
        // page-aligned region, which stays mapped until the process ends.
        unsafe { &*region.base().as_ptr().add(at).cast::<std::sync::atomic::AtomicU64>() }
      };
      let release = std::sync::atomic::Ordering::Release;
      match attack.split_once('=') {
        // Its own index, then the bell its reader sleeps on.
        Some(("head", value)) => {
          word(layout::FROM_HOST + layout::HEAD).store(value.parse().expect("a head"), release);
          Doorbell::from_ends(reader_bell_fd, reader_bell_wait_fd).ring();
        }
        // The harness's next write (the heartbeat's) reads it.
        Some(("tail", value)) => word(layout::TO_HOST + layout::TAIL).store(value.parse().expect("a tail"), release),
        // Bytes, out-of-band ones too, on the socket that carries none;
        // then a frame the harness refuses, which it reads only if they
        // neither stopped nor spun its reader.
        _ if attack == "socket" => {
          for flags in [0, libc::MSG_OOB] {
            // SAFETY: sends one byte of a live local on fd 0, the socket.
            unsafe { libc::send(0, b"x".as_ptr().cast(), 1, flags) };
          }
          send(&mut channel, FromHost::Ready { protections });
        }
        // Every doorbell made blocking (the flag its copies share) and
        // full, and this side asleep, so the harness rings: its next
        // write (the heartbeat's) must neither block nor fail; then a
        // frame it refuses.
        _ if attack == "bells-blocking" => {
          for fd in REGION_FD + 1..=dsh_protocol::ring::LAST_HANDED_FD {
            // SAFETY: fcntl and sends on descriptors this process holds.
            unsafe {
              libc::fcntl(fd, libc::F_SETFL, 0);
              while libc::send(fd, b"x".as_ptr().cast(), 1, libc::MSG_DONTWAIT) > 0 {}
            }
          }
          let asleep = word(layout::TO_HOST + layout::READER_ASLEEP);
          asleep.store(1, release);
          let _ = next();
          send(&mut channel, FromHost::Ready { protections });
        }
        // The bell the harness's reader sleeps on, shut down.
        _ if attack == "bell-shut" => {
          // SAFETY: shutdown on a descriptor this process holds.
          unsafe { libc::shutdown(FROM_HOST_DATA_FD + 1, libc::SHUT_RD) };
        }
        _ if attack == "shrink" => {
          for size in [0, (REGION_BYTES / 2) as libc::off_t] {
            // SAFETY: ftruncate on a descriptor this process owns.
            let shrunk = unsafe { libc::ftruncate(std::os::fd::AsRawFd::as_raw_fd(&region_fd), size) };
            // A region that shrank would make the harness fault on its
            // next read of the ring: the test process would die of it.
            assert_eq!(shrunk, -1, "the region shrank to {size}");
          }
          send(&mut channel, FromHost::Ready { protections });
        }
        _ => panic!("an unknown attack on the ring: {attack}"),
      }
      // Reading on would write this side's index over what the attack
      // wrote: wait for the channel's end on its socket alone.
      let mut byte = 0u8;
      // SAFETY: reads at most one byte into a live local from fd 0.
      while unsafe { libc::read(0, std::ptr::from_mut(&mut byte).cast(), 1) } > 0 {}
      end();
    }
    _ => {
      let _ = channel.write_all(&bytes(&hostile));
    }
  }
  while !matches!(next(), Some(ToHost::Shutdown) | None) {}
  end();
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
  submitted(supervisor, run_id).recv_timeout(Duration::from_secs(60)).expect("the run settles").expect("not refused")
}

/// Submit `return 1` as run `run_id`: its end comes on the receiver (None
/// if it was refused).
fn submitted(supervisor: &Supervisor, run_id: u32) -> mpsc::Receiver<Option<Completion>> {
  let (send, receive) = mpsc::channel();
  let deliver: Deliver = Box::new(move |end| {
    let _ = send.send(match end {
      RunEnd::Output(output, _) => Some(output.completion),
      RunEnd::Refused => None,
    });
  });
  supervisor.submit(run_id, "return 1".into(), r#"{"namespaces":[]}"#.into(), deliver).unwrap();
  receive
}

/// Whether `fd` turns readable within `within` (as Node's poll of the Node
/// bells would be woken).
fn readable(fd: std::os::fd::RawFd, within: Duration) -> bool {
  let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
  // SAFETY: one valid pollfd for the call's duration.
  unsafe { libc::poll(&mut poll, 1, within.as_millis() as libc::c_int) == 1 }
}

/// Run one program against a hostile host: how did the run end?
fn run_against(name: &str, hostile: &str) -> Completion {
  let supervisor = Supervisor::start(settings(hostile_host(name, hostile)), Arc::default()).unwrap();
  let completion = run_one(&supervisor, 1);
  assert_eq!(supervisor.stats().runs_lost_to_host_exits, 1, "{name}");
  supervisor.shutdown();
  completion
}

/// A run id no test's run has, written where the hostile host puts its
/// run's id (`RUN` in its hex).
const SOME_RUN: u32 = 0xdead_beef;

/// The hex of `message` as the protocol encodes it, with `RUN` for
/// [`SOME_RUN`].
fn hex_of(message: &FromHost) -> String {
  altered(message, |_| {})
}

/// [`hex_of`] `message`, its frame's bytes altered by `alter` after its
/// length (which is set to what they are then): a frame no host writes.
fn altered(message: &FromHost, alter: impl FnOnce(&mut Vec<u8>)) -> String {
  let mut frame = Vec::new();
  message.encode(&mut frame);
  alter(&mut frame);
  let len = u32::try_from(frame.len() - 4).expect("a short frame");
  frame[..4].copy_from_slice(&len.to_le_bytes());
  hex(&frame)
}

/// The hex of `frame`, with `RUN` for [`SOME_RUN`].
fn hex(frame: &[u8]) -> String {
  to_hex(frame).replace(&to_hex(&SOME_RUN.to_le_bytes()), "RUN")
}

/// Two lowercase hex digits a byte, as the hostile host reads them.
fn to_hex(bytes: &[u8]) -> String {
  bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A `Finished` of [`SOME_RUN`] with `completion`.
fn finished(completion: Completion) -> FromHost {
  FromHost::Finished { run_id: SOME_RUN, cost: ExecutionCost::default(), completion }
}

/// A calls frame of one call whose argument is `json`, with one long
/// string (`x`) beside it at `places`.
fn call_with_a_string(json: &str, places: &str) -> String {
  hex_of(&FromHost::Calls(vec![BindingCall {
    args: json.to_owned(),
    paths: places.to_owned(),
    strings: vec![RawString::Latin1(b"x".to_vec().into())],
    ..no_strings()
  }]))
}

/// A call of [`SOME_RUN`], its first, with no long strings.
fn no_strings() -> BindingCall {
  BindingCall {
    run_id: SOME_RUN,
    call_id: 0,
    namespace: 0,
    function: 0,
    args: String::new(),
    paths: String::new(),
    strings: Vec::new(),
  }
}

/// Run one program against each hostile host: its run fails `worker-exit`,
/// saying the host broke the protocol and why.
fn each_is_refused(cases: &[(&str, String, &str)]) {
  for (name, hostile, why) in cases {
    match run_against(name, hostile) {
      Completion::Failure { kind: FailureKind::WorkerExit, message } => {
        let message = String::from_utf16_lossy(&message);
        let expected = format!("the isolate host broke the channel's protocol ({why}) and was replaced");
        assert_eq!(message, expected, "{name}");
      }
      other => panic!("{name}: {other:?}"),
    }
  }
}

#[test]
fn a_host_that_breaks_the_protocol_ends_its_runs_never_the_harness() {
  // Each: a frame that must not decode, or a message the host has no
  // right to send (valid frames from the protocol's encoder, malformed
  // ones by altering its bytes), and why the harness refuses it.
  let cases: [(&str, String, &str); 16] = [
    ("unknown-tag", "0100000063".into(), "unknown frame tag 99 from a host"),
    ("field-cut-short", "03000000020102".into(), "a frame ends inside a field (4 bytes wanted, 2 left)"),
    (
      "bytes-left-over",
      altered(&FromHost::Started { run_id: SOME_RUN }, |frame| frame.push(0)),
      "1 bytes left over after a frame's fields",
    ),
    ("frame-too-long", "01000080ff".into(), "a frame of 2147483649 bytes"),
    (
      "log-for-another-run",
      format!("journal:{}", hex_of(&FromHost::Log { run_id: 999, text: vec![0x41] })),
      "a log entry for run 999, which is not on this host",
    ),
    // Each stream carries its own frames only.
    (
      "log-on-the-channel",
      hex_of(&FromHost::Log { run_id: SOME_RUN, text: vec![0x41] }),
      "a frame of the journal on the channel",
    ),
    (
      "finished-on-the-journal",
      format!("journal:{}", hex_of(&finished(Completion::NoValue))),
      "a frame of the channel on the journal",
    ),
    ("journal-frame-too-long", "journal:01000080ff".into(), "its journal: a frame of 2147483649 bytes"),
    // The completion's code, last.
    (
      "finished-with-an-unknown-completion",
      altered(&finished(Completion::NoValue), |frame| *frame.last_mut().unwrap() = 9),
      "unknown completion tag 9",
    ),
    (
      "stats-never-asked-for",
      hex_of(&FromHost::Stats { seq: u64::MAX, stats: HostStats::default() }),
      "stats for request 18446744073709551615, which was never sent",
    ),
    ("ready-twice", hex_of(&FromHost::Ready { protections: Protections::all() }), "ready twice"),
    (
      "calls-with-a-count-it-cannot-hold",
      altered(&FromHost::Calls(Vec::new()), |frame| frame[5..9].fill(0xff)),
      "a count of 4294967295 items does not fit the frame",
    ),
    // The argument's one byte, before the count of its long strings.
    (
      "call-args-not-utf8",
      altered(&FromHost::Calls(vec![BindingCall { args: "a".into(), ..no_strings() }]), |frame| {
        let at = frame.len() - 5;
        frame[at] = 0xff;
      }),
      "text is not UTF-8",
    ),
    // A long string whose place holds a value, or is no place at all
    // (crates/sandbox-ext/js/01_lossless_json.js writes null there).
    (
      "call-string-at-a-value",
      call_with_a_string("{\"a\":1}", "[[0,\"a\"]]"),
      "an out-of-band string's place in the JSON is not null",
    ),
    (
      "call-string-at-no-place",
      call_with_a_string("{\"a\":null}", "[[0,\"b\"]]"),
      "an out-of-band string's path leads to no place in the JSON, in order",
    ),
    // The failure's kind, before its message's length (an empty message).
    (
      "failure-of-an-unknown-kind",
      altered(&finished(Completion::Failure { kind: FailureKind::Exception, message: Vec::new() }), |frame| {
        let at = frame.len() - 5;
        frame[at] = 0x63;
      }),
      "unknown failure kind 99",
    ),
  ];
  each_is_refused(&cases);
}

#[test]
fn a_host_that_tampers_with_the_shared_ring_ends_its_runs_never_the_harness() {
  // Each: what the host does to the ring its Ready and the harness's Submit
  // already crossed, and why the harness refuses it.
  let ring = RING_DATA_BYTES as u64;
  let not_written = "the shared ring: the writer's index is not within the ring";
  let not_read = "the shared ring: the reader's index is not within the ring";
  let cases: [(&str, String, &str); 8] = [
    // Claims more bytes than the ring holds, or runs back past what the
    // harness has read (its Ready, at least).
    ("ring-head-past-the-ring", format!("ring:head={}", ring * 3), not_written),
    ("ring-head-backwards", "ring:head=1".into(), not_written),
    ("ring-head-at-the-end-of-numbers", format!("ring:head={}", u64::MAX), not_written),
    // Claims to have read more than the harness wrote: found by the
    // harness's next write (the heartbeat's), which shuts the channel.
    ("ring-tail-past-what-was-written", format!("ring:tail={}", ring * 5), not_read),
    // The socket beside the rings carries nothing, and is not read.
    ("ring-socket-bytes", "ring:socket".into(), "ready twice"),
    // The doorbells, of which the host holds copies.
    ("ring-bells-blocking", "ring:bells-blocking".into(), "ready twice"),
    ("ring-bell-shut", "ring:bell-shut".into(), "the shared ring: a doorbell was tampered with"),
    // Its region's size is sealed: the attempt fails in the host (which
    // asserts so), and the harness reads on (then refuses a second Ready).
    ("ring-shrunk", "ring:shrink".into(), "ready twice"),
  ];
  each_is_refused(&cases);
}

/// A host that stops reading its channel but goes on answering stats
/// requests, with the numbers of requests it read or numbers it made up,
/// is ended as unresponsive: an answer counts only for a request sent
/// within `hostUnresponsiveMs`, newer than the host's last answer, and
/// requests are numbered with random strides.
#[test]
fn a_host_that_answers_the_heartbeat_without_reading_is_ended_as_unresponsive() {
  for attack in ["replays-stats", "counts-stats"] {
    let executable = hostile_host(attack, attack);
    let unresponsive_after = Duration::from_millis(300);
    let supervisor =
      Supervisor::start(Settings { unresponsive_after, ..settings(executable) }, Arc::default()).unwrap();
    // The run's hosts are each ended in turn, until the run fails of it.
    let completion = run_one(&supervisor, 1);
    let Completion::Failure { message, .. } = &completion else { panic!("{attack}: {completion:?}") };
    let message = String::from_utf16_lossy(message);
    assert!(message.contains("stopped answering"), "{attack}: {message}");
    supervisor.shutdown();
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
      "the isolate host did not start: the isolate host could not put its protections in place \
       (seccomp, landlock, namespaces, noDumps, compilerZones off on this machine) and requireSandbox is set \
       (the host executable: {})",
      executable.display()
    )
  );
  // Without the requirement, the same host runs, and stats say what is off.
  let supervisor = Supervisor::start(settings(false), Arc::default()).unwrap();
  assert_eq!(supervisor.stats().sandbox, partial);
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
  let call = BindingCall {
    run_id: 1,
    call_id: 0,
    namespace: 0,
    function: 0,
    args: "[]".into(),
    paths: String::new(),
    strings: Vec::new(),
  };
  record.history.call(&call, Identity::of(&call));
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
  assert!(lost(HostLoss::Running).ends_hosts(), "the culprit's program is quarantined");
  assert!(!Fate::Reexecuted { alone: true }.ends_hosts(), "a suspect is not");
  assert!(!lost(HostLoss::TooManyHosts).ends_hosts());
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
  // Named by its host as the stopped run it ended for: it fails with its
  // stop's failure, on a shared host or its own, never executed again.
  let budget = (FailureKind::Timeout, vec![u16::from(b't')]);
  for alone_host in [false, true] {
    let mut unstoppable = record();
    unstoppable.unstoppable = Some(budget.clone());
    let named = fate(&mut unstoppable, false, alone_host, end);
    assert!(named.ends_hosts());
    assert_eq!(named, Fate::Unstoppable(budget.0, budget.1.clone()));
  }
  // A divergence wins over its host's word.
  let mut diverged_unstoppable = record();
  diverged_unstoppable.diverged = Some(Divergence::Log(1));
  diverged_unstoppable.unstoppable = Some(budget.clone());
  assert_eq!(fate(&mut diverged_unstoppable, false, false, end), lost(HostLoss::Diverged(Divergence::Log(1))));
  // The caller's abort, and disposal, win.
  let mut aborted = waiting();
  aborted.aborted = Some(vec![u16::from(b'x')]);
  aborted.unstoppable = Some(budget);
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
  assert!(message.ends_with("; the run was on 3 isolate hosts that ended, and is not re-executed again"), "{message}");
  let called = calls.drain();
  assert_eq!(called.len(), 1, "{called:?}");
  assert_eq!((called[0].run_id, called[0].call_id, called[0].args.as_str()), (1, 0, "[]"));
  let stats = supervisor.stats();
  assert_eq!((stats.runs_reexecuted, stats.runs_lost_to_host_exits), (2, 1));
  supervisor.shutdown();
}

/// A host's call rung on its Node bell, with its reader asleep, reaches
/// the call outbox through a look at the bells (what Node's main thread
/// does when its poll of them wakes it): the bells' set turns readable, the
/// look takes the call, and the reader, never rung, has taken nothing.
#[test]
fn a_call_rung_on_the_node_bell_is_taken_by_a_look_at_the_bells() {
  // Calls: one call of RUN, id 0, namespace 0, function 0, argument "[]".
  let call = "1f0000000401000000RUN000000000000000000000000020000005b5d00000000";
  let calls = Arc::new(CallOutbox::default());
  let supervisor =
    Supervisor::start(settings(hostile_host("node-bell-call", &format!("node:{call}"))), calls.clone()).unwrap();
  let bells = supervisor.node_bells_fd().expect("the Node bells' set");
  assert!(!readable(bells, Duration::ZERO));
  supervisor.node_starts_listening();
  let _run = submitted(&supervisor, 1);
  assert!(readable(bells, Duration::from_secs(60)), "the Node bell never rang");
  assert!(calls.drain().is_empty(), "the call reached the outbox before the look");
  supervisor.node_bell_rang();
  let called = calls.drain();
  assert_eq!(called.len(), 1, "{called:?}");
  assert_eq!((called[0].run_id, called[0].call_id, called[0].args.as_str()), (1, 0, "[]"));
  assert!(!readable(bells, Duration::ZERO), "the look left the bell rung");
  supervisor.shutdown();
}

/// Node's main thread, lingering after an answer, takes what its run sends
/// next off the channel itself, one frame per look: a call, or the run's
/// end instead of another call (which ends the run without its reader).
/// The host writes both for Node once the reader sleeps, so only the Node
/// bell rings; the test waits for that ring, then looks as the linger does.
#[test]
fn a_lingering_main_thread_takes_a_call_and_the_runs_end_itself() {
  let call = "1f0000000401000000RUN000000000000000000000000020000005b5d00000000";
  let end = hex_of(&finished(Completion::Value("7".into())));
  let calls = Arc::new(CallOutbox::default());
  let supervisor =
    Supervisor::start(settings(hostile_host("linger-takes", &format!("node:{call}{end}"))), calls.clone()).unwrap();
  let bells = supervisor.node_bells_fd().expect("the Node bells' set");
  supervisor.node_starts_listening();
  let run = submitted(&supervisor, 1);
  assert!(readable(bells, Duration::from_secs(60)), "the Node bell never rang");
  let mut watching = Watching::default();
  assert!(supervisor.take_for_linger(&mut watching), "the call was not taken");
  let called = calls.drain();
  assert_eq!(called.len(), 1, "{called:?}");
  assert_eq!((called[0].run_id, called[0].call_id), (1, 0));
  assert!(run.try_recv().is_err(), "the run ended before its end was taken");
  assert!(supervisor.take_for_linger(&mut watching), "the run's end was not taken");
  let completion = run.try_recv().expect("the look ended the run").expect("not refused");
  assert!(matches!(&completion, Completion::Value(value) if value == "7"), "{completion:?}");
  assert!(!supervisor.take_for_linger(&mut watching), "a third frame was taken");
  drop(watching);
  supervisor.shutdown();
}

/// A live run whose result crosses after disposal has begun ends as
/// disposed, as the contract says of every run live at disposal: the host
/// writes the run's value only once the harness listens, which the test
/// has it do after `begin_disposal`.
#[test]
fn a_result_that_crosses_once_disposal_has_begun_ends_its_run_as_disposed() {
  let end = hex_of(&finished(Completion::Value("7".into())));
  let supervisor =
    Supervisor::start(settings(hostile_host("disposal-races", &format!("node:{end}"))), Arc::default()).unwrap();
  let bells = supervisor.node_bells_fd().expect("the Node bells' set");
  let run = submitted(&supervisor, 1);
  supervisor.begin_disposal();
  supervisor.node_starts_listening();
  assert!(readable(bells, Duration::from_secs(60)), "the Node bell never rang");
  supervisor.node_bell_rang();
  let completion = run.try_recv().expect("the look ended the run").expect("not refused");
  let Completion::Failure { kind: FailureKind::Abort, message } = completion else { panic!("{completion:?}") };
  assert_eq!(String::from_utf16_lossy(&message), "runtime disposed");
  supervisor.shutdown();
}

/// A host that rings its Node bell over and over for nothing costs Node's
/// main thread a bounded number of looks (`RingsInVain`), after which the
/// harness stops listening to it; its reader still reads what it sends
/// (here a frame that ends it). Each replacement host does the same.
#[test]
fn a_host_flooding_its_node_bell_is_no_longer_listened_to_after_bounded_looks() {
  let supervisor =
    Supervisor::start(settings(hostile_host("node-bell-flood", "node-bell:flood")), Arc::default()).unwrap();
  let bells = supervisor.node_bells_fd().expect("the Node bells' set");
  supervisor.node_starts_listening();
  let run = submitted(&supervisor, 1);
  let mut looks = 0u64;
  let completion = loop {
    if let Ok(end) = run.try_recv() {
      break end.expect("not refused");
    }
    // A bounded wait, not a measure: the loop ends on the run's end.
    if readable(bells, Duration::from_millis(50)) {
      supervisor.node_bell_rang();
      looks += 1;
      // Three hosts ended under the run, each listened to for at most this many looks.
      assert!(looks <= 3 * (RingsInVain::TOLERATED + 1), "{looks} looks");
    }
  };
  let Completion::Failure { kind: FailureKind::WorkerExit, message } = completion else { panic!("{completion:?}") };
  let message = String::from_utf16_lossy(&message);
  assert!(message.starts_with("the isolate host broke the channel's protocol (ready twice)"), "{message}");
  assert!(looks > RingsInVain::TOLERATED, "{looks} looks: the flood was never heard");
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
