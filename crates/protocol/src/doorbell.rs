//! A doorbell: how one side of a shared ring (`ring.rs`) wakes the other
//! when that side has said it is going to sleep, and how a thread wakes its
//! own side's sleeper. A datagram socket pair: a sleeper polls one end
//! beside its channel's socket (whose hang-up says the other side has
//! gone), and whoever rings sends a datagram on the other end.
//!
//! Both processes hold both ends (the harness makes every doorbell and
//! hands the host its copies at fixed descriptors, as it hands the journal;
//! a host's lockdown refuses it new descriptors of its own), so everything
//! about them that a host can change is hostile. Whether a call waits is
//! said by each call (`MSG_DONTWAIT`), never by the descriptors' flags,
//! which the copies share: a host that clears `O_NONBLOCK` cannot make the
//! harness block. A datagram socket carries no out-of-band data, and a bell
//! that reads as ready with nothing in it (a host that shut it down, or
//! stole its datagrams) is refused, so a host cannot make a sleeper spin.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// One doorbell: the end rings are sent on, and the end a sleeper polls.
pub struct Doorbell {
  ring_end: OwnedFd,
  wait_end: OwnedFd,
}

/// What ended a [`Doorbell::wait`].
#[derive(Debug, PartialEq, Eq)]
pub enum Woken {
  /// The bell rang (or had rung since it was last cleared).
  Rang,
  /// The channel's socket hung up (or failed): the other side has gone,
  /// or this side shut the channel.
  Socket,
}

fn tampered() -> io::Error {
  io::Error::new(io::ErrorKind::InvalidData, "the shared ring: a doorbell was tampered with")
}

impl Doorbell {
  /// A new doorbell, its ends closed on exec (the harness hands a host its
  /// copies by `dup2`, which clears that flag on the copy).
  pub fn new() -> io::Result<Doorbell> {
    let mut ends = [0; 2];
    // SAFETY: socketpair writes two new descriptors into the live local.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0, ends.as_mut_ptr()) } < 0 {
      return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just returned by socketpair, open and owned by nobody.
    let (ring_end, wait_end) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    Ok(Doorbell { ring_end, wait_end })
  }

  /// The doorbell whose ends the process that made it handed over.
  pub fn from_ends(ring_end: OwnedFd, wait_end: OwnedFd) -> Doorbell {
    Doorbell { ring_end, wait_end }
  }

  /// Both ends, to hand to a host: the ring end, then the wait end.
  pub fn ends(&self) -> [&OwnedFd; 2] {
    [&self.ring_end, &self.wait_end]
  }

  /// The same bell through new descriptors.
  pub fn try_clone(&self) -> io::Result<Doorbell> {
    Ok(Doorbell { ring_end: self.ring_end.try_clone()?, wait_end: self.wait_end.try_clone()? })
  }

  /// Wake whoever waits on this bell (or the next to wait). Never blocks:
  /// a bell whose queue is full has rung anyway, and one a host broke
  /// wakes nobody but that host's own threads.
  pub fn ring(&self) {
    ring_on(&self.ring_end);
  }

  /// Forget every ring so far, without waiting: how many were taken
  /// (datagrams), or an error for a bell that reads as ended.
  fn clear(&self) -> io::Result<usize> {
    clear_on(&self.wait_end)
  }

  /// Whether the bell has rung since it was last cleared (clearing it).
  #[cfg(test)]
  pub(crate) fn rang(&self) -> bool {
    self.clear().is_ok_and(|taken| taken > 0)
  }

  /// Block until the bell rings or `socket` hangs up, then clear the bell.
  /// A ring from before the wait, not yet cleared, ends it at once: a
  /// sleeper that says it sleeps, checks its ring once more and then waits
  /// misses no wake-up. Only the socket's hang-up (or failure) wakes it:
  /// bytes a host sends on the socket, which carries none, are never
  /// waited for or read.
  pub fn wait(&self, socket: &UnixStream) -> io::Result<Woken> {
    let mut polls = [
      libc::pollfd { fd: self.wait_end.as_raw_fd(), events: libc::POLLIN, revents: 0 },
      libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLRDHUP, revents: 0 },
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
    if polls[1].revents != 0 {
      return Ok(Woken::Socket);
    }
    // Ready with nothing to take (or hung up, or failed): only a host that
    // broke the bell makes it so, and it would stay ready forever.
    if polls[0].revents & !libc::POLLIN != 0 || self.clear()? == 0 {
      return Err(tampered());
    }
    Ok(Woken::Rang)
  }
}

/// Send one ring (a one-byte datagram) on `end`, never waiting (see
/// [`Doorbell::ring`]).
fn ring_on(end: &OwnedFd) {
  let one = [1u8];
  loop {
    // SAFETY: sends the one byte of a live local on a socket the caller
    // owns; MSG_DONTWAIT and MSG_NOSIGNAL: it neither waits nor raises
    // SIGPIPE, whatever the descriptor's flags.
    let sent =
      unsafe { libc::send(end.as_raw_fd(), one.as_ptr().cast(), one.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if sent >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
      return;
    }
  }
}

/// Take every ring waiting at `end` without waiting: how many, or an
/// error for an end that reads as ended (see [`Doorbell::clear`]).
fn clear_on(end: &OwnedFd) -> io::Result<usize> {
  let mut byte = [0u8; 1];
  let mut taken = 0;
  loop {
    // SAFETY: reads at most one byte into a live local from a socket the
    // caller owns, without waiting (MSG_DONTWAIT).
    let read = unsafe { libc::recv(end.as_raw_fd(), byte.as_mut_ptr().cast(), 1, libc::MSG_DONTWAIT) };
    match read {
      1.. => taken += 1,
      // An empty datagram is never sent here; a 0 is a shut-down bell.
      0 => return Err(tampered()),
      _ => match io::Error::last_os_error().kind() {
        io::ErrorKind::Interrupted => {}
        io::ErrorKind::WouldBlock => return Ok(taken),
        _ => return Err(tampered()),
      },
    }
  }
}

/// A bell rung one way only: the side that rings holds its ringing end
/// alone ([`BellRinger`]), the side that listens its listening end alone
/// ([`BellListener`]). The Node bell (`ring::NODE_BELL_FD`) is one: a
/// host rings it, Node's main thread listens, and a host, holding nothing
/// of the listening end, can do nothing to it but ring it.
pub fn one_way_bell() -> io::Result<(BellRinger, BellListener)> {
  let bell = Doorbell::new()?;
  Ok((BellRinger { end: bell.ring_end }, BellListener { end: bell.wait_end }))
}

/// The ringing end of a one-way bell (see [`one_way_bell`]).
pub struct BellRinger {
  end: OwnedFd,
}

impl BellRinger {
  /// The ringing end a process was handed.
  pub fn from_end(end: OwnedFd) -> BellRinger {
    BellRinger { end }
  }

  /// The end, to hand to the process that rings.
  pub fn end(&self) -> &OwnedFd {
    &self.end
  }

  /// As [`Doorbell::ring`].
  pub fn ring(&self) {
    ring_on(&self.end);
  }
}

/// The listening end of a one-way bell (see [`one_way_bell`]): readable
/// (for `poll` or `epoll`) while a ring waits in it.
pub struct BellListener {
  end: OwnedFd,
}

impl BellListener {
  /// The descriptor to poll.
  pub fn fd(&self) -> std::os::fd::RawFd {
    self.end.as_raw_fd()
  }

  /// Take the rings waiting, without waiting: how many (0 when none is).
  /// Every datagram is a ring, an empty one too (the ringer may send any:
  /// it is hostile). Takes at most [`BellListener::MOST_TAKEN`] at once, so a
  /// flood costs one bounded look per call, never a loop without end; what
  /// is left keeps the end readable for the next look.
  pub fn take_rings(&self) -> usize {
    let mut byte = [0u8; 1];
    let mut taken = 0;
    while taken < Self::MOST_TAKEN {
      // SAFETY: reads at most one byte into a live local from a socket
      // this end owns, without waiting (MSG_DONTWAIT).
      let read = unsafe { libc::recv(self.end.as_raw_fd(), byte.as_mut_ptr().cast(), 1, libc::MSG_DONTWAIT) };
      if read >= 0 {
        taken += 1;
      } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
        break;
      }
    }
    taken
  }

  /// The most rings [`BellListener::take_rings`] takes at once: more than
  /// the kernel queues on one bell (a few hundred datagrams), so that one
  /// take empties it; a bound all the same.
  pub const MOST_TAKEN: usize = 1024;
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_ring_before_the_wait_ends_it_and_is_cleared_by_it() {
    let (socket, other) = UnixStream::pair().unwrap();
    let bell = Doorbell::new().unwrap();
    bell.ring();
    bell.ring();
    assert_eq!(bell.wait(&socket).unwrap(), Woken::Rang);
    // Cleared: the next wait needs a new ring (or the socket).
    drop(other);
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
  fn a_handed_over_copy_rings_the_same_bell() {
    let (socket, _other) = UnixStream::pair().unwrap();
    let bell = Doorbell::new().unwrap();
    bell.try_clone().unwrap().ring();
    assert_eq!(bell.wait(&socket).unwrap(), Woken::Rang);
  }

  /// What the ringing side of a one-way bell can do to its listener: ring
  /// it with empty or long datagrams (each one ring), flood it (one take
  /// empties the queue), and shut its own end down (nothing changes on
  /// the listening end).
  #[test]
  fn a_one_way_bell_counts_every_datagram_and_bounds_a_flood() {
    let (ringer, listener) = one_way_bell().unwrap();
    assert_eq!(listener.take_rings(), 0);
    ringer.ring();
    for len in [0usize, 1000] {
      let bytes = vec![9u8; len];
      // SAFETY: sends `len` bytes of a live local on a socket the test owns.
      assert_eq!(unsafe { libc::send(ringer.end().as_raw_fd(), bytes.as_ptr().cast(), len, 0) }, len as isize);
    }
    assert_eq!(listener.take_rings(), 3);
    assert_eq!(listener.take_rings(), 0);
    // A flood fills the bell's queue, which the kernel bounds (a few
    // hundred datagrams), under the most one take takes: one take empties it.
    let mut sent = 0usize;
    // SAFETY: sends one byte of a live local, without waiting.
    while unsafe { libc::send(ringer.end().as_raw_fd(), b"x".as_ptr().cast(), 1, libc::MSG_DONTWAIT) } == 1 {
      sent += 1;
    }
    assert!(sent > 0 && sent < BellListener::MOST_TAKEN, "{sent}");
    assert_eq!(listener.take_rings(), sent);
    assert_eq!(listener.take_rings(), 0);
    // SAFETY: shutdown on a descriptor the test owns.
    assert_eq!(unsafe { libc::shutdown(ringer.end().as_raw_fd(), libc::SHUT_RDWR) }, 0);
    assert_eq!(listener.take_rings(), 0);
    let mut poll = libc::pollfd { fd: listener.fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no wait.
    assert_eq!(unsafe { libc::poll(&mut poll, 1, 0) }, 0, "a shut ringer made the listener readable");
  }

  /// What a host holding copies of both ends can do to a bell.
  #[test]
  fn a_bell_a_host_breaks_neither_blocks_nor_spins_its_sleeper() {
    use std::io::Write;
    let (socket, mut other) = UnixStream::pair().unwrap();
    // Bytes, out-of-band bytes too, on the channel's socket wake nobody:
    // the wait below ends with the ring, not with them.
    other.write_all(b"x").unwrap();
    // SAFETY: sends one byte of a live local on a socket the test owns.
    unsafe { libc::send(other.as_raw_fd(), b"y".as_ptr().cast(), 1, libc::MSG_OOB) };
    let bell = Doorbell::new().unwrap();
    bell.ring();
    assert_eq!(bell.wait(&socket).unwrap(), Woken::Rang);
    // Blocking flags set on the shared descriptions: ringing a full bell
    // still returns.
    let host = bell.try_clone().unwrap();
    for fd in host.ends() {
      // SAFETY: fcntl on a descriptor the test owns.
      assert_eq!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, 0) }, 0);
    }
    for _ in 0..100_000 {
      host.ring();
    }
    bell.ring();
    assert_eq!(bell.wait(&socket).unwrap(), Woken::Rang);
    // Its rings stolen between the poll and the read, or the bell shut
    // down: the sleeper is told, rather than woken over and over.
    // SAFETY: shutdown on a descriptor the test owns.
    assert_eq!(unsafe { libc::shutdown(host.ends()[1].as_raw_fd(), libc::SHUT_RD) }, 0);
    assert_eq!(bell.wait(&socket).unwrap_err().kind(), io::ErrorKind::InvalidData);
  }
}
