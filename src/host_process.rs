//! One isolate-host process as the harness sees it: how it is started,
//! the harness's end of its channel, and how its end is described to the
//! runs it takes with it.
//!
//! Writes to a host never block the caller (Node's main thread submits and
//! replies): a frame the ring cannot take at once waits in the link's
//! backlog, which a flusher thread writes out in order. A host that stops
//! reading is found by the supervisor's heartbeat and killed, which ends
//! the backlog with it.

use std::collections::VecDeque;
use std::ffi::{CStr, OsStr};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};

use dsh_protocol::doorbell::BellListener;
use dsh_protocol::frame::{SplicedFrames, JOURNAL_FD};
use dsh_protocol::lock::lock;
use dsh_protocol::ring::{RingEnds, RingWriter, HANDED_FDS, LAST_HANDED_FD};
use napi_derive::napi;

/// A host's journal's descriptor (`dsh_protocol::frame::JOURNAL_FD`);
/// then the channel's shared region's, which the host closes once it has
/// mapped it, and its doorbells' ends, up to the last descriptor a host is
/// handed (`dsh_protocol::ring`). For a look at a host from outside
/// (lockdown.test); the TypeScript layer reads none of them.
#[napi]
#[cfg_attr(test, allow(dead_code))]
pub const HOST_JOURNAL_FD: u32 = JOURNAL_FD as u32;

/// See [`HOST_JOURNAL_FD`].
#[napi]
#[cfg_attr(test, allow(dead_code))]
pub const HOST_REGION_FD: u32 = dsh_protocol::ring::REGION_FD as u32;

/// See [`HOST_JOURNAL_FD`].
#[napi]
#[cfg_attr(test, allow(dead_code))]
pub const HOST_LAST_HANDED_FD: u32 = LAST_HANDED_FD as u32;

/// The host executable's file name (package.json's `napi.isolateHost`, via
/// build.rs); it ships beside the addon's `.node` file (in the platform
/// package, and in a development checkout).
pub const HOST_EXECUTABLE: &str = env!("DSH_ISOLATE_HOST");

/// How much of a host's standard error is kept (its last bytes): enough
/// for V8's fatal report, which is what names a crash.
const STDERR_KEPT: usize = 16 * 1024;

/// Where the host executable is: beside the file this addon was loaded from.
pub fn host_executable() -> Result<PathBuf, String> {
  // SAFETY: an all-zero Dl_info is a valid value of the plain C struct,
  // which dladdr only writes to.
  let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
  // SAFETY: dladdr only reads the loader's tables for an address inside a
  // loaded object (this function's own), and writes `info`.
  let found = unsafe { libc::dladdr(host_executable as *const libc::c_void, &mut info) };
  if found == 0 || info.dli_fname.is_null() {
    return Err("the addon could not find the file it was loaded from".to_owned());
  }
  // SAFETY: dli_fname is a NUL-terminated path the loader owns, valid while
  // the addon stays loaded (it is linked -z nodelete: for the process's life).
  let addon = PathBuf::from(OsStr::from_bytes(unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes()));
  let dir = addon.parent().ok_or("the addon's path has no directory")?;
  Ok(dir.join(HOST_EXECUTABLE))
}

/// A started host: its process, its channel, its journal, its standard
/// error.
pub struct Spawned {
  pub child: Child,
  /// The harness's ends of the channel (`dsh_protocol::ring`).
  pub channel: RingEnds,
  /// The harness's end of the journal (`dsh_protocol::frame`).
  pub journal: UnixStream,
  pub stderr: StderrTail,
  /// The listening end of its Node bell (the host holds the ringing end).
  pub node_bell: BellListener,
}

/// Start a host. Its environment is empty (it holds no secret of the
/// harness's), its working directory `/`, its standard input the channel's
/// socket, its standard output nothing, its `JOURNAL_FD` the journal and the
/// descriptors from `REGION_FD` on the channel's shared region and
/// doorbells (`dsh_protocol::ring`); it is told the harness's pid, so that
/// it can tell when the harness has gone (see `main.rs` of the host).
pub fn spawn(executable: &PathBuf) -> Result<Spawned, String> {
  let (socket, host_end) = UnixStream::pair().map_err(|error| format!("no channel for the isolate host: {error}"))?;
  let (channel, handed, node_bell) =
    RingEnds::create(socket).map_err(|error| format!("no shared channel for the isolate host: {error}"))?;
  let (journal, host_journal) =
    UnixStream::pair().map_err(|error| format!("no journal for the isolate host: {error}"))?;
  let mut placements = [(host_journal.as_raw_fd(), JOURNAL_FD); 1 + HANDED_FDS];
  placements[1..].copy_from_slice(&handed.placements());
  let mut command = Command::new(executable);
  command
    .arg(std::process::id().to_string())
    .env_clear()
    .current_dir("/")
    .stdin(Stdio::from(OwnedFd::from(host_end)))
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
  // SAFETY: the closure runs in the child between fork and exec, after
  // its stdio is in place, and makes only async-signal-safe calls (fcntl,
  // dup2) on descriptors the child inherited: each of `placements` is open
  // there, since `host_journal` and `handed` live until `spawn` returns.
  unsafe {
    command.pre_exec(move || {
      // Each first above every fixed number (closed on exec), so that no
      // placement overwrites a descriptor still to be placed; then at its
      // number, where dup2 leaves it open across exec.
      let mut above = [0; 1 + HANDED_FDS];
      for (at, (fd, _)) in placements.iter().enumerate() {
        above[at] = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, LAST_HANDED_FD + 1);
        if above[at] == -1 {
          return Err(std::io::Error::last_os_error());
        }
      }
      for (at, (_, number)) in placements.iter().enumerate() {
        if libc::dup2(above[at], *number) == -1 {
          return Err(std::io::Error::last_os_error());
        }
      }
      Ok(())
    });
  }
  let spawned = command.spawn();
  drop((host_journal, handed));
  // No path in the message: it may reach a model, in the runs it fails.
  let mut child = spawned.map_err(|error| format!("the isolate host could not be started: {error}"))?;
  let stderr = match child.stderr.take() {
    Some(pipe) => StderrTail::follow(pipe),
    None => StderrTail::default(),
  };
  Ok(Spawned { child, channel, journal, stderr, node_bell })
}

/// The last bytes a host wrote to its standard error, read by a thread of
/// their own until the host's end of the pipe closes.
#[derive(Default, Clone)]
pub struct StderrTail {
  shared: Arc<TailShared>,
}

#[derive(Default)]
struct TailShared {
  tail: Mutex<Tail>,
  ended: Condvar,
}

#[derive(Default)]
struct Tail {
  bytes: Vec<u8>,
  /// The pipe is closed: nothing more will come.
  closed: bool,
}

impl StderrTail {
  fn follow(mut pipe: impl Read + Send + 'static) -> StderrTail {
    let tail = StderrTail::default();
    let shared = tail.shared.clone();
    let spawned = dsh_named_thread::spawn("dsh-host-stderr", move || {
      let mut chunk = [0u8; 4096];
      loop {
        let read = loop {
          match pipe.read(&mut chunk) {
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            result => break result.unwrap_or(0),
          }
        };
        let mut tail = lock(&shared.tail);
        if read == 0 {
          tail.closed = true;
          shared.ended.notify_all();
          return;
        }
        tail.bytes.extend_from_slice(&chunk[..read]);
        let excess = tail.bytes.len().saturating_sub(STDERR_KEPT);
        tail.bytes.drain(..excess);
      }
    });
    if spawned.is_err() {
      lock(&tail.shared.tail).closed = true;
    }
    tail
  }

  /// What the host wrote, once it has closed its end (it has exited).
  pub fn finished_text(&self) -> String {
    let mut tail = lock(&self.shared.tail);
    while !tail.closed {
      tail = self.shared.ended.wait(tail).unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    String::from_utf8_lossy(&tail.bytes).into_owned()
  }
}

/// How a host ended, for the runs it took with it.
pub enum HostEnd {
  /// The process ended (its status, what it wrote to standard error).
  Exited { status: Option<ExitStatus>, stderr: String },
  /// The supervisor killed it: it stopped answering for this many ms.
  Unresponsive { silent_ms: u64 },
  /// It sent a frame that breaks the protocol; the supervisor killed it.
  ProtocolViolation(String),
  /// It could not lock itself down (these protections are off) and
  /// `requireSandbox` is set; the supervisor killed it before any run.
  Unsandboxed { missing: String },
  /// Its resident memory stayed above `hostMaxRssMb`; it was shut down
  /// once its runs had ended, and replaced.
  Recycled { resident_mb: u64 },
}

impl HostEnd {
  /// The message of the `worker-exit` its started runs settle with: what
  /// happened, in words a model can act on, with no machine paths.
  pub fn describe(&self) -> String {
    match self {
      HostEnd::Exited { status, stderr } => {
        let what = fatal_line(stderr).unwrap_or_else(|| match status {
          Some(status) => match (status.signal(), status.code()) {
            (Some(signal), _) => format!("killed by signal {signal} ({})", signal_name(signal)),
            (None, Some(code)) => format!("exited with code {code}"),
            (None, None) => "ended".to_owned(),
          },
          None => "ended".to_owned(),
        });
        format!("the isolate host stopped: {what}")
      }
      HostEnd::Unresponsive { silent_ms } => {
        format!("the isolate host stopped answering (nothing for {silent_ms} ms) and was replaced")
      }
      HostEnd::ProtocolViolation(error) => {
        format!("the isolate host broke the channel's protocol ({error}) and was replaced")
      }
      HostEnd::Unsandboxed { missing } => {
        format!(
          "the isolate host could not put its protections in place ({missing} off on this machine) and requireSandbox is set"
        )
      }
      HostEnd::Recycled { resident_mb } => {
        format!("the isolate host was recycled: it held {resident_mb} MiB, above hostMaxRssMb")
      }
    }
  }
}

fn signal_name(signal: i32) -> &'static str {
  match signal {
    libc::SIGKILL => "SIGKILL: the kernel's out-of-memory killer, or another process",
    libc::SIGSEGV => "SIGSEGV",
    libc::SIGABRT => "SIGABRT",
    libc::SIGTRAP => "SIGTRAP",
    libc::SIGILL => "SIGILL",
    libc::SIGBUS => "SIGBUS",
    libc::SIGTERM => "SIGTERM",
    _ => "a signal",
  }
}

/// The line that names a fatal error in what V8 (or the host itself)
/// wrote before the process ended: V8's report is a block of `#` lines,
/// one of which is the message (`# Fatal JavaScript invalid size error
/// 134217736 (see crbug.com/1201626)`), under a heading (`# Fatal error
/// with no security impact:`, or `# Fatal error in <V8 source file>, line
/// N`), which is left out, and so is the bug link; the C stack trace that
/// follows names machine paths and is never used. A failed check of V8's
/// own (`# Check failed: <condition>.` under `# Fatal error in <file>`)
/// is named by its condition: an engine invariant broken, not a program's
/// doing, which no other line of the report says.
pub fn fatal_line(stderr: &str) -> Option<String> {
  let line = stderr.lines().map(|line| line.trim_start_matches('#').trim()).find(|line| {
    (line.starts_with("Fatal") && !line.starts_with("Fatal error"))
      || line.starts_with("Check failed:")
      || line.starts_with("Debug check failed:")
      || line.starts_with("dsh-isolate-host:")
  })?;
  let line = line.strip_prefix("dsh-isolate-host: ").unwrap_or(line);
  let line = match line.find(" (see crbug.com/") {
    Some(at) => &line[..at],
    None => line,
  };
  Some(line.chars().take(300).collect())
}

/// The harness's writing end of one host's channel (see the module doc).
pub struct HostLink {
  ring: RingWriter,
  backlog: Mutex<Backlog>,
  bell: Condvar,
  /// What the host did to the ring that made writing to it stop (an index
  /// it may not write): the channel is shut down for it, and its reader
  /// reports it.
  violation: Mutex<Option<String>>,
}

#[derive(Default)]
struct Backlog {
  /// Frames waiting, in order, as they were sent (never copied into a
  /// buffer of the backlog's own); of the first, `first_written` bytes are
  /// already out.
  frames: VecDeque<SplicedFrames>,
  first_written: usize,
  /// The flusher owns the ring's writing until the backlog is empty.
  flushing: bool,
  closed: bool,
}

impl HostLink {
  /// A link over `ring`, with its flusher thread started.
  pub fn start(ring: RingWriter) -> std::io::Result<Arc<HostLink>> {
    let link =
      Arc::new(HostLink { ring, backlog: Mutex::default(), bell: Condvar::new(), violation: Mutex::default() });
    let flusher = link.clone();
    dsh_named_thread::spawn("dsh-host-link", move || flusher.flush())?;
    Ok(link)
  }

  /// Send one or more whole frames, in order after every earlier send;
  /// never blocks on the host. What the ring does not take at once
  /// waits in the backlog as it is (moved, not copied; a long text spliced
  /// into them stays where it is held, in the run's history).
  pub fn send(&self, frames: impl Into<SplicedFrames>) {
    let frames = frames.into();
    let mut backlog = lock(&self.backlog);
    if backlog.closed {
      return;
    }
    if backlog.flushing {
      backlog.frames.push_back(frames);
      return;
    }
    let Err((sent, error)) = self.write_now(&frames) else { return };
    match error.kind() {
      std::io::ErrorKind::WouldBlock => {
        backlog.frames.push_back(frames);
        backlog.first_written = sent;
        backlog.flushing = true;
        self.bell.notify_one();
      }
      _ => {
        backlog.closed = true;
        drop(backlog);
        self.failed(&error);
      }
    }
  }

  /// Write what the ring takes of `frames` now; on failure (`WouldBlock`:
  /// the ring is full), how many bytes it took.
  fn write_now(&self, frames: &SplicedFrames) -> Result<(), (usize, std::io::Error)> {
    let mut sent = 0;
    for piece in frames.pieces() {
      let mut at = 0;
      while at < piece.len() {
        let written = self.ring.write_now(&piece[at..]).map_err(|error| (sent, error))?;
        at += written;
        sent += written;
      }
    }
    Ok(())
  }

  /// Write `frames` whole but their first `skip` bytes, waiting for room.
  fn write_all_from(&self, frames: &SplicedFrames, mut skip: usize) -> std::io::Result<()> {
    for piece in frames.pieces() {
      if skip >= piece.len() {
        skip -= piece.len();
        continue;
      }
      self.ring.write_all(&piece[skip..])?;
      skip = 0;
    }
    Ok(())
  }

  /// Writing failed: the host is gone, or broke the ring (then say so, and
  /// end the channel, so that its reader ends the host for it).
  fn failed(&self, error: &std::io::Error) {
    if error.kind() == std::io::ErrorKind::InvalidData {
      lock(&self.violation).get_or_insert_with(|| error.to_string());
      self.ring.shut_down();
    }
  }

  /// How the host broke the ring, if writing found it broken.
  pub fn violation(&self) -> Option<String> {
    lock(&self.violation).clone()
  }

  /// End the channel both ways: the host's reads and writes fail, and so
  /// do the harness's reader's (it sees the end of the stream).
  pub fn shut_down(&self) {
    self.ring.shut_down();
    self.close();
  }

  /// Stop sending; the flusher ends.
  pub fn close(&self) {
    lock(&self.backlog).closed = true;
    self.bell.notify_one();
  }

  fn flush(&self) {
    loop {
      let (frames, first_written) = {
        let mut backlog = lock(&self.backlog);
        loop {
          if backlog.closed {
            return;
          }
          if !backlog.frames.is_empty() {
            break (std::mem::take(&mut backlog.frames), std::mem::take(&mut backlog.first_written));
          }
          backlog.flushing = false;
          backlog = self.bell.wait(backlog).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
      };
      let mut skip = first_written;
      for frame in frames {
        if let Err(error) = self.write_all_from(&frame, skip) {
          lock(&self.backlog).closed = true;
          self.failed(&error);
          return;
        }
        skip = 0;
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::fatal_line;

  #[test]
  fn the_fatal_line_is_v8s_message_without_its_source_file_or_bug_link() {
    let report = "\n\n#\n# Fatal error with no security impact:\n# Fatal JavaScript invalid size error 134217736 (see crbug.com/1201626)\n#\n\n==== C stack trace ===\n\n    /work/dsh-isolate-host(+0x1cfd31e) [0x55aa8b94231e]\n";
    assert_eq!(fatal_line(report).as_deref(), Some("Fatal JavaScript invalid size error 134217736"));
    assert_eq!(
      fatal_line("\n#\n# Fatal process out of memory: Zone\n#\n").as_deref(),
      Some("Fatal process out of memory: Zone")
    );
    assert_eq!(fatal_line("dsh-isolate-host: internal error: boom\n").as_deref(), Some("internal error: boom"));
    assert_eq!(fatal_line("# Fatal error in ../../v8/src/x.cc, line 3\n"), None);
    assert_eq!(
      fatal_line("#\n# Fatal error in ../../v8/src/heap/heap.cc, line 3\n# Check failed: a == b.\n#\n").as_deref(),
      Some("Check failed: a == b.")
    );
    assert_eq!(fatal_line(""), None);
  }
}
