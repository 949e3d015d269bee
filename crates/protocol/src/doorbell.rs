//! A doorbell: how one side of a shared ring (`ring.rs`) wakes the other
//! when that side has said it is going to sleep. An eventfd, so that a
//! sleeper can wait on it and on its channel's socket at once (the socket
//! carries no data once a ring does: it is how either side learns that the
//! other has gone).
//!
//! The harness makes every doorbell and hands the host its ends at fixed
//! descriptors (`ring.rs`), as it makes the journal: a host's lockdown
//! refuses it new descriptors of its own.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// One eventfd, non-blocking: ringing never waits, and neither does
/// clearing it.
pub struct Doorbell {
  fd: OwnedFd,
}

/// What ended a [`Doorbell::wait`].
#[derive(Debug, PartialEq, Eq)]
pub enum Woken {
  /// The bell rang (or had rung since it was last cleared).
  Rang,
  /// The socket has something to say: the other side hung up (or, on a
  /// socket that still carries data, data came).
  Socket,
}

impl Doorbell {
  /// A new doorbell, closed on exec (the harness hands a host its ends by
  /// `dup2`, which clears that flag on the copy).
  pub fn new() -> io::Result<Doorbell> {
    // SAFETY: eventfd has no memory preconditions; a descriptor it returns
    // is new and owned by nobody else.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
      return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd, open and owned by nobody.
    Ok(Doorbell { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
  }

  /// The doorbell at `fd`, handed over by the process that made it. The
  /// descriptor is made non-blocking here, whatever it was.
  pub fn from_fd(fd: OwnedFd) -> io::Result<Doorbell> {
    // SAFETY: fcntl on a descriptor this process owns (`fd`, open for as
    // long as it is borrowed).
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
      return Err(io::Error::last_os_error());
    }
    Ok(Doorbell { fd })
  }

  /// The descriptor, to hand to a host.
  pub fn fd(&self) -> &OwnedFd {
    &self.fd
  }

  /// Wake whoever waits on this bell (or the next to wait). Never blocks:
  /// a counter already at its maximum has rung anyway.
  pub fn ring(&self) {
    let one = 1u64.to_ne_bytes();
    loop {
      // SAFETY: writes the 8 bytes of `one`, a live local, to a descriptor
      // this doorbell owns.
      let written = unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
      if written >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
        return;
      }
    }
  }

  /// Forget every ring so far, without waiting.
  pub fn clear(&self) {
    let mut count = [0u8; 8];
    loop {
      // SAFETY: reads at most 8 bytes into `count`, a live local, from a
      // descriptor this doorbell owns (non-blocking: an unrung bell gives
      // EAGAIN at once).
      let read = unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
      if read >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
        return;
      }
    }
  }

  /// Whether the bell has rung since it was last cleared (clearing it).
  #[cfg(test)]
  pub(crate) fn rang(&self) -> bool {
    let mut count = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live local from a descriptor
    // this doorbell owns (non-blocking).
    unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) == 8 }
  }

  /// Block until the bell rings or `socket` has something to say (the
  /// other side hung up), then clear the bell. A ring from before the
  /// wait, not yet cleared, ends it at once: a sleeper that says it sleeps,
  /// checks its ring once more and then waits misses no wake-up.
  pub fn wait(&self, socket: &UnixStream) -> io::Result<Woken> {
    let mut polls = [
      libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
      libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLIN | libc::POLLRDHUP, revents: 0 },
    ];
    loop {
      // SAFETY: `polls` is two valid pollfds for the duration of the call,
      // their descriptors open while `self` and `socket` are borrowed.
      let ready = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, -1) };
      if ready >= 0 {
        break;
      }
      let error = io::Error::last_os_error();
      if error.kind() != io::ErrorKind::Interrupted {
        return Err(error);
      }
    }
    if polls[0].revents != 0 {
      self.clear();
      return Ok(Woken::Rang);
    }
    Ok(Woken::Socket)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_ring_before_the_wait_ends_it_and_is_cleared_by_it() {
    let (socket, _other) = UnixStream::pair().unwrap();
    let bell = Doorbell::new().unwrap();
    bell.ring();
    bell.ring();
    assert_eq!(bell.wait(&socket).unwrap(), Woken::Rang);
    // Cleared: the next wait needs a new ring (or the socket).
    drop(_other);
    assert_eq!(bell.wait(&socket).unwrap(), Woken::Socket);
  }

  #[test]
  fn a_sleeper_is_woken_by_a_ring_from_another_thread() {
    let (socket, _other) = UnixStream::pair().unwrap();
    let bell = std::sync::Arc::new(Doorbell::new().unwrap());
    let ringer = bell.clone();
    let (started, waiting) = std::sync::mpsc::channel();
    let sleeper = std::thread::spawn(move || {
      started.send(()).unwrap();
      bell.wait(&socket).unwrap()
    });
    waiting.recv().unwrap();
    ringer.ring();
    assert_eq!(sleeper.join().unwrap(), Woken::Rang);
  }

  #[test]
  fn a_hang_up_wakes_a_sleeper_whose_bell_never_rings() {
    let (socket, other) = UnixStream::pair().unwrap();
    let bell = Doorbell::new().unwrap();
    let sleeper = std::thread::spawn(move || bell.wait(&socket).unwrap());
    drop(other);
    assert_eq!(sleeper.join().unwrap(), Woken::Socket);
  }

  #[test]
  fn a_handed_over_descriptor_rings_the_same_bell() {
    let (socket, _other) = UnixStream::pair().unwrap();
    let bell = Doorbell::new().unwrap();
    let copy = Doorbell::from_fd(bell.fd().try_clone().unwrap()).unwrap();
    copy.ring();
    assert_eq!(bell.wait(&socket).unwrap(), Woken::Rang);
  }
}
