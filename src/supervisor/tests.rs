use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::mpsc;

use dsh_protocol::failure::Divergence;
use dsh_protocol::frame::{BindingCall, FromHost};
use dsh_protocol::history::CallIdentity;
use dsh_protocol::out_of_band::RawString;
use dsh_protocol::protections::Protection;

use crate::config::HistoryCaps;

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
  let mut frame = Vec::new();
  message.encode(&mut frame);
  let hex: String = frame.iter().map(|byte| format!("{byte:02x}")).collect();
  hex.replace(&SOME_RUN.to_le_bytes().iter().map(|byte| format!("{byte:02x}")).collect::<String>(), "RUN")
}

/// A calls frame of one call whose argument is `json`, with one long
/// string (`x`) beside it at `places`.
fn call_with_a_string(json: &str, places: &str) -> String {
  hex_of(&FromHost::Calls(vec![BindingCall {
    run_id: SOME_RUN,
    call_id: 0,
    namespace: 0,
    function: 0,
    args: json.to_owned(),
    paths: places.to_owned(),
    strings: vec![RawString::Latin1(b"x".to_vec())],
  }]))
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
    // A long string whose place holds a value, or is no place at all
    // (js/01_lossless_json.js writes null there): frames the protocol's
    // own encoder writes, so that they follow its format.
    ("call-string-at-a-value", &call_with_a_string("{\"a\":1}", "[[0,\"a\"]]")),
    ("call-string-at-no-place", &call_with_a_string("{\"a\":null}", "[[0,\"b\"]]")),
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
  assert!(message.ends_with("; the run was on 3 isolate hosts that ended, and is not re-executed again"), "{message}");
  let called = calls.drain();
  assert_eq!(called.len(), 1, "{called:?}");
  assert_eq!((called[0].run_id, called[0].call_id, called[0].args.as_str()), (1, 0, "[]"));
  let stats = supervisor.stats();
  assert_eq!((stats.runs_reexecuted, stats.runs_lost_to_host_exits), (2, 1));
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
