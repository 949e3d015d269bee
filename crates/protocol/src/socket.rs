//! Socket calls both rooms make that std has no safe form of: a send that
//! never waits (and never raises SIGPIPE), for writers that must not block
//! (a host's run writing its journal), the wait for a socket to be ready
//! (an inbox's owner for bytes, a journal's writer for room), and the
//! reads an inbox makes of a socket.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

/// Send what the socket takes of `bytes` now: how many it took (at least
/// one, unless `bytes` is empty), or `WouldBlock` when it takes none;
/// retried when interrupted.
pub fn send_now(stream: &UnixStream, bytes: &[u8]) -> io::Result<usize> {
  loop {
    // SAFETY: the pointer and length describe the live slice `bytes`, and
    // the fd is the stream's socket, open while `stream` is borrowed.
    let sent = unsafe {
      libc::send(stream.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    if sent > 0 || bytes.is_empty() {
      return Ok(sent.max(0) as usize);
    }
    if sent == 0 {
      return Err(io::Error::new(io::ErrorKind::WriteZero, "the socket took nothing"));
    }
    let error = io::Error::last_os_error();
    if error.kind() != io::ErrorKind::Interrupted {
      return Err(error);
    }
  }
}

/// Block until `stream` is ready for `events` (`POLLIN`, `POLLOUT`), or
/// has ended or failed (what the next call on it then says); retried when
/// interrupted.
pub fn wait(stream: &UnixStream, events: libc::c_short) -> io::Result<()> {
  let mut poll = libc::pollfd { fd: stream.as_raw_fd(), events, revents: 0 };
  loop {
    // SAFETY: `poll` is one valid pollfd for the duration of the call, and
    // its fd is the stream's socket, open while `stream` is borrowed.
    let ready = unsafe { libc::poll(&mut poll, 1, -1) };
    if ready >= 0 {
      return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.kind() != io::ErrorKind::Interrupted {
      return Err(error);
    }
  }
}

/// One `recv` with `flags`, retried when interrupted.
pub fn recv(stream: &UnixStream, buf: &mut [u8], flags: i32) -> io::Result<usize> {
  loop {
    // SAFETY: the pointer and length describe the live, writable `buf`, and
    // the fd is the stream's socket, open while `stream` is borrowed.
    let read = unsafe { libc::recv(stream.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
    if read >= 0 {
      return Ok(read as usize);
    }
    let error = io::Error::last_os_error();
    if error.kind() != io::ErrorKind::Interrupted {
      return Err(error);
    }
  }
}
