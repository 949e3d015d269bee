//! A channel's reading end, shared by the thread that owns it and the
//! threads that wait awake for one kind of frame on it.
//!
//! Each end of the channel has an owner thread that reads every frame (the
//! harness's reader thread per host, the host's main thread). A round trip
//! of a host call would otherwise wake that owner from its sleep twice, once
//! per side, and on a VM each wake of a sleeping thread (often of an idle,
//! halted virtual CPU) costs more than the call's whole work. But on each
//! side one thread is already awake, waiting for exactly that frame: the
//! run's thread spins for its replies, the harness's main thread lingers for
//! the next call. [`Inbox::try_take`] lets such a thread take the frame
//! itself, when it is at the head of the stream, whole and small, and of the
//! kind it waits for; everything else stays for the owner.
//!
//! Order is kept: a frame is read and handled under one lock, by whoever
//! holds it, so frames are handled in the order they were sent. The owner
//! takes the lock only when a frame is there to read (it waits for one
//! outside the lock) and may block while holding it (a long frame arriving
//! slowly); a waiting thread never blocks on it: it only tries the lock.
//! Nothing is read ahead of a frame's end, so whoever holds the lock next
//! finds the next frame's header at the head of the stream.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, MutexGuard, TryLockError};

use crate::frame::{read_frame, MAX_FRAME_BYTES};

/// The largest frame a waiting thread takes: replies and calls that answer
/// quickly are small; a large frame is read once, by the owner, rather than
/// peeked and read again.
pub const MAX_TAKEN_BYTES: usize = 64 * 1024;

/// The reading end of one channel.
pub struct Inbox {
  stream: UnixStream,
  /// Held while a frame is read and handled (see the module doc).
  reading: Mutex<Scratch>,
}

/// The buffer a waiting thread peeks into (kept, so a spin allocates once).
#[derive(Default)]
struct Scratch {
  peeked: Vec<u8>,
}

/// What the owner found.
pub enum Next<'a> {
  /// A frame (its tag and fields), handled while this guard is held.
  Frame(InboxGuard<'a>),
  /// The stream ended between frames.
  Ended,
}

/// The lock and the frame it protects: handle the frame, then drop this.
pub struct InboxGuard<'a> {
  _reading: MutexGuard<'a, Scratch>,
}

impl Inbox {
  pub fn new(stream: UnixStream) -> Inbox {
    Inbox { stream, reading: Mutex::new(Scratch::default()) }
  }

  /// The owner: wait until a frame is here, then read it into `frame`
  /// under the lock, which the returned guard holds until the frame has
  /// been handled. An error ends the channel (a frame too long, a stream
  /// that ends inside a frame, a read that fails).
  pub fn next<'a>(&'a self, frame: &mut Vec<u8>) -> io::Result<Next<'a>> {
    loop {
      self.wait_readable()?;
      let reading = crate::lock::lock(&self.reading);
      // A waiting thread may have taken what woke this one.
      match self.peek_some()? {
        Peeked::Nothing => continue,
        Peeked::Ended => return Ok(Next::Ended),
        Peeked::Some => {}
      }
      return if read_frame(&mut ExactReader(&self.stream), frame)? {
        Ok(Next::Frame(InboxGuard { _reading: reading }))
      } else {
        Ok(Next::Ended)
      };
    }
  }

  /// A waiting thread: if the frame at the head of the stream is here
  /// whole, is tagged `tag` and is at most [`MAX_TAKEN_BYTES`], take it and
  /// hand its tag and fields to `handle` under the lock; else leave
  /// everything as it is. Never blocks. Returns whether a frame was taken.
  pub fn try_take(&self, tag: u8, handle: impl FnOnce(&[u8])) -> bool {
    let mut scratch = match self.reading.try_lock() {
      Ok(scratch) => scratch,
      Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
      Err(TryLockError::WouldBlock) => return false,
    };
    let peeked = &mut scratch.peeked;
    peeked.resize(MAX_TAKEN_BYTES + 4, 0);
    let Ok(got) = recv(&self.stream, peeked, libc::MSG_PEEK | libc::MSG_DONTWAIT) else { return false };
    if got < 5 || peeked[4] != tag {
      return false;
    }
    let len = u32::from_le_bytes([peeked[0], peeked[1], peeked[2], peeked[3]]) as usize;
    // A frame that is not all here yet, or too long to take (an invalid
    // length included), stays for the owner.
    if len == 0 || len > MAX_TAKEN_BYTES || got < len + 4 {
      return false;
    }
    // Consume exactly the frame just peeked: it is all in the socket, so a
    // non-blocking read of its length returns it whole.
    let mut taken = 0;
    while taken < len + 4 {
      match recv(&self.stream, &mut peeked[taken..len + 4], libc::MSG_DONTWAIT) {
        Ok(0) | Err(_) => return false,
        Ok(read) => taken += read,
      }
    }
    handle(&peeked[4..len + 4]);
    true
  }

  /// Block (outside the lock) until the stream has something to read or
  /// has ended.
  fn wait_readable(&self) -> io::Result<()> {
    let mut poll = libc::pollfd { fd: self.stream.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    loop {
      // SAFETY: `poll` is one valid pollfd for the duration of the call,
      // and its fd is this inbox's socket, open while `self` is.
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

  /// Whether a byte is there to read, the stream has ended, or neither.
  fn peek_some(&self) -> io::Result<Peeked> {
    let mut byte = [0u8; 1];
    match recv(&self.stream, &mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
      Ok(0) => Ok(Peeked::Ended),
      Ok(_) => Ok(Peeked::Some),
      Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(Peeked::Nothing),
      Err(error) => Err(error),
    }
  }
}

enum Peeked {
  Nothing,
  Some,
  Ended,
}

/// One `recv` with `flags`, retried when interrupted.
fn recv(stream: &UnixStream, buf: &mut [u8], flags: i32) -> io::Result<usize> {
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

/// Reads exactly what is asked of it (blocking), never more: [`read_frame`]
/// over it leaves the next frame's first byte at the head of the stream.
struct ExactReader<'a>(&'a UnixStream);

impl Read for ExactReader<'_> {
  fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
    recv(self.0, buf, 0)
  }
}

const _: () = assert!(MAX_TAKEN_BYTES as u64 <= MAX_FRAME_BYTES as u64);

#[cfg(test)]
mod tests {
  use super::*;
  use crate::frame::{FromHost, HostCall, ToHost};
  use std::io::Write;

  fn frame_of(message: &FromHost) -> Vec<u8> {
    let mut out = Vec::new();
    message.encode(&mut out);
    out
  }

  fn calls(run_id: u32) -> FromHost {
    FromHost::Calls(vec![HostCall { run_id, call_id: 1, namespace: 0, function: 0, args: "{}".to_owned() }])
  }

  #[test]
  fn a_waiting_thread_takes_only_a_whole_small_frame_of_its_kind_at_the_head() {
    let (mut writer, reader) = UnixStream::pair().unwrap();
    let inbox = Inbox::new(reader);
    let calls_tag = FromHost::CALLS_TAG;
    // Nothing there: nothing taken.
    assert!(!inbox.try_take(calls_tag, |_| panic!("nothing was sent")));
    // Another kind at the head: left for the owner, and so is what follows.
    writer.write_all(&frame_of(&FromHost::Started { run_id: 1 })).unwrap();
    writer.write_all(&frame_of(&calls(1))).unwrap();
    assert!(!inbox.try_take(calls_tag, |_| panic!("not at the head")));
    let mut frame = Vec::new();
    match inbox.next(&mut frame).unwrap() {
      Next::Frame(_guard) => assert_eq!(FromHost::decode(&frame).unwrap(), FromHost::Started { run_id: 1 }),
      Next::Ended => panic!("ended"),
    }
    // Now the calls are at the head: taken whole, decoded by the taker.
    let mut taken = None;
    assert!(inbox.try_take(calls_tag, |frame| taken = Some(FromHost::decode(frame).unwrap())));
    assert_eq!(taken, Some(calls(1)));
    // Half a frame: not taken; once the rest is there, taken.
    let whole = frame_of(&calls(2));
    writer.write_all(&whole[..7]).unwrap();
    assert!(!inbox.try_take(calls_tag, |_| panic!("half a frame")));
    writer.write_all(&whole[7..]).unwrap();
    assert!(inbox.try_take(calls_tag, |frame| assert_eq!(FromHost::decode(frame).unwrap(), calls(2))));
    // A frame too large to take stays for the owner, who reads it whole.
    let large = frame_of(&FromHost::Calls(vec![HostCall {
      run_id: 3,
      call_id: 1,
      namespace: 0,
      function: 0,
      args: "x".repeat(MAX_TAKEN_BYTES),
    }]));
    let sender = std::thread::spawn(move || {
      writer.write_all(&large).unwrap();
      writer
    });
    let mut frame = Vec::new();
    match inbox.next(&mut frame).unwrap() {
      Next::Frame(_guard) => assert!(matches!(FromHost::decode(&frame).unwrap(), FromHost::Calls(calls) if calls[0].run_id == 3)),
      Next::Ended => panic!("ended"),
    }
    drop(sender.join().unwrap());
    // The writer is gone: the owner sees the end.
    assert!(matches!(inbox.next(&mut frame).unwrap(), Next::Ended));
  }

  #[test]
  fn a_hostile_length_is_never_taken_and_ends_the_channel_for_the_owner() {
    let (mut writer, reader) = UnixStream::pair().unwrap();
    let inbox = Inbox::new(reader);
    // A header claiming 4 GiB, tagged as the waiting thread's kind.
    writer.write_all(&[0xff, 0xff, 0xff, 0xff, FromHost::CALLS_TAG, 1, 2, 3]).unwrap();
    assert!(!inbox.try_take(FromHost::CALLS_TAG, |_| panic!("a hostile length")));
    let mut frame = Vec::new();
    assert!(inbox.next(&mut frame).is_err());
    // And an empty frame (length 0) is refused by the owner too.
    let (mut writer, reader) = UnixStream::pair().unwrap();
    let inbox = Inbox::new(reader);
    writer.write_all(&[0, 0, 0, 0, ToHost::REPLIES_TAG]).unwrap();
    assert!(!inbox.try_take(ToHost::REPLIES_TAG, |_| panic!("an empty frame")));
    assert!(inbox.next(&mut frame).is_err());
  }
}
