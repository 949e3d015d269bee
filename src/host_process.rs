//! One isolate-host process as the harness sees it: how it is started,
//! the harness's end of its channel, and how its end is described to the
//! runs it takes with it.
//!
//! Writes to a host never block the caller (Node's main thread submits and
//! replies): a frame the socket cannot take at once waits in the link's
//! backlog, which a flusher thread writes out in order. A host that stops
//! reading is found by the supervisor's heartbeat and killed, which ends
//! the backlog with it.

use std::collections::VecDeque;
use std::ffi::{CStr, OsStr};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};

use dsh_protocol::frame::JOURNAL_FD;
use dsh_protocol::lock::lock;
use dsh_protocol::socket::send_now;

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
  /// The harness's end of the channel.
  pub channel: UnixStream,
  /// The harness's end of the journal (`dsh_protocol::frame`).
  pub journal: UnixStream,
  pub stderr: StderrTail,
}

/// Start a host. Its environment is empty (it holds no secret of the
/// harness's), its working directory `/`, its standard input the channel,
/// its standard output nothing, its `JOURNAL_FD` the journal; it is told
/// the harness's pid, so that it can tell when the harness has gone (see
/// `main.rs` of the host).
pub fn spawn(executable: &PathBuf) -> Result<Spawned, String> {
  let (channel, host_end) = UnixStream::pair().map_err(|error| format!("no channel for the isolate host: {error}"))?;
  let (journal, host_journal) =
    UnixStream::pair().map_err(|error| format!("no journal for the isolate host: {error}"))?;
  let host_journal_fd = host_journal.as_raw_fd();
  let mut command = Command::new(executable);
  command
    .arg(std::process::id().to_string())
    .env_clear()
    .current_dir("/")
    .stdin(Stdio::from(OwnedFd::from(host_end)))
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
  // SAFETY: the closure runs in the child between fork and exec, after
  // its stdio is in place, and makes only async-signal-safe calls (dup2,
  // fcntl) on descriptors the child inherited: `host_journal_fd` is open
  // there, since `host_journal` lives until `spawn` returns.
  unsafe {
    command.pre_exec(move || {
      if host_journal_fd == JOURNAL_FD {
        // Already in place: only its close-on-exec flag must go.
        if libc::fcntl(JOURNAL_FD, libc::F_SETFD, 0) == -1 {
          return Err(std::io::Error::last_os_error());
        }
      } else if libc::dup2(host_journal_fd, JOURNAL_FD) == -1 {
        return Err(std::io::Error::last_os_error());
      }
      Ok(())
    });
  }
  let spawned = command.spawn();
  drop(host_journal);
  // No path in the message: it may reach a model, in the runs it fails.
  let mut child = spawned.map_err(|error| format!("the isolate host could not be started: {error}"))?;
  let stderr = match child.stderr.take() {
    Some(pipe) => StderrTail::follow(pipe),
    None => StderrTail::default(),
  };
  Ok(Spawned { child, channel, journal, stderr })
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
          "the isolate host could not lock itself down ({missing} refused by this machine) and requireSandbox is set"
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
/// follows names machine paths and is never used.
pub fn fatal_line(stderr: &str) -> Option<String> {
  let line = stderr.lines().map(|line| line.trim_start_matches('#').trim()).find(|line| {
    (line.starts_with("Fatal") && !line.starts_with("Fatal error")) || line.starts_with("dsh-isolate-host:")
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
  stream: UnixStream,
  backlog: Mutex<Backlog>,
  bell: Condvar,
}

#[derive(Default)]
struct Backlog {
  /// Frames waiting, in order, as they were sent (a long one is never
  /// copied into a buffer of the backlog's own); of the first,
  /// `first_written` bytes are already out.
  frames: VecDeque<Vec<u8>>,
  first_written: usize,
  /// The flusher owns the stream's writing until the backlog is empty.
  flushing: bool,
  closed: bool,
}

impl HostLink {
  /// A link over `stream`, with its flusher thread started.
  pub fn start(stream: UnixStream) -> std::io::Result<Arc<HostLink>> {
    let link = Arc::new(HostLink { stream, backlog: Mutex::default(), bell: Condvar::new() });
    let flusher = link.clone();
    dsh_named_thread::spawn("dsh-host-link", move || flusher.flush())?;
    Ok(link)
  }

  /// Send one or more whole frames, in order after every earlier send;
  /// never blocks on the host. What the socket does not take at once
  /// waits in the backlog as it is (moved, not copied).
  pub fn send(&self, frames: Vec<u8>) {
    let mut backlog = lock(&self.backlog);
    if backlog.closed {
      return;
    }
    if backlog.flushing {
      backlog.frames.push_back(frames);
      return;
    }
    let mut sent = 0;
    while sent < frames.len() {
      let error = match send_now(&self.stream, &frames[sent..]) {
        Ok(written) => {
          sent += written;
          continue;
        }
        Err(error) => error,
      };
      match error.kind() {
        std::io::ErrorKind::WouldBlock => {
          backlog.frames.push_back(frames);
          backlog.first_written = sent;
          backlog.flushing = true;
          self.bell.notify_one();
        }
        _ => backlog.closed = true,
      }
      return;
    }
  }

  /// End the channel both ways: the host's reads and writes fail, and so
  /// do the harness's reader's (it sees the end of the stream).
  pub fn shut_down(&self) {
    let _ = self.stream.shutdown(std::net::Shutdown::Both);
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
      let mut from = first_written;
      for frame in frames {
        if (&self.stream).write_all(frame.get(from..).unwrap_or_default()).is_err() {
          lock(&self.backlog).closed = true;
          return;
        }
        from = 0;
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
    assert_eq!(fatal_line(""), None);
  }
}
