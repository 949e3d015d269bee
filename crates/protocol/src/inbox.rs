//! A channel's reading end, shared by the thread that owns it and the
//! threads that wait awake for one kind of frame on it.
//!
//! Each end of the channel has an owner thread that reads every frame (the
//! harness's reader thread per host, the host's main thread). A round trip
//! of a binding call would otherwise wake that owner from its sleep twice, once
//! per side, and on a VM each wake of a sleeping thread (often of an idle,
//! halted virtual CPU) costs more than the call's whole work. But on each
//! side one thread is already awake, waiting for exactly that frame: the
//! run's thread spins for its replies, the harness's main thread lingers for
//! the next call. [`Inbox::try_take`] lets such a thread take the frame
//! itself, when it is at the head of the stream, whole and small, and of the
//! kind it waits for; everything else stays for the owner. On the channel's
//! ring (`ring.rs`) such a thread also watches, through [`Watching`], so
//! that the other side does not ring the sleeping owner for what it takes.
//! The stream is the channel's ring, or a socket (a host's journal, which
//! nobody waits on: [`Inbox::next_ready`]).
//!
//! Order is kept: a frame is read and handled under one lock, by whoever
//! holds it, so frames are handled in the order they were sent. The owner
//! takes the lock only when a frame is there to read (it waits for one
//! outside the lock) and may block while holding it (a long frame arriving
//! slowly); a waiting thread never blocks on it: it only tries the lock.
//! The owner reads in large chunks (a flood of small frames costs one read
//! per chunk, not one per frame) and keeps what it read past a frame in
//! the inbox, where a waiting thread looks first; a waiting thread reads
//! from the stream only when that is empty, and then exactly one frame. So
//! whoever holds the lock next finds the next frame at the head of what
//! the owner kept, or of the stream.
//!
//! Lock order: a frame is handled while the inbox's lock is held, so a
//! handler may take its side's other locks (the supervisor's state, the
//! host's scheduler), but nothing may wait for an inbox's lock while
//! holding one of those: only the owner blocks on it, holding nothing else.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use crate::frame::MAX_FRAME_BYTES;
use crate::ring::RingReader;
use crate::socket::recv;
use crate::text::BlockFrame;

/// The largest frame a waiting thread takes: replies and calls that answer
/// quickly are small; a large frame is read once, by the owner, rather than
/// peeked and read again.
pub const MAX_TAKEN_BYTES: usize = 64 * 1024;

/// Whether a frame of `wire_bytes` on the wire (its length field counted)
/// is short enough for a waiting thread to take.
pub const fn short_enough_to_take(wire_bytes: usize) -> bool {
  wire_bytes <= MAX_TAKEN_BYTES + 4
}

/// How much the owner reads at once: many small frames (a flood of log
/// entries) cost one read, not one each.
const READ_CHUNK: usize = 256 * 1024;

/// The shortest frame [`Inbox::next_in_blocks`] reads into a block of its
/// own (see `text::BlockFrame`), which the harness keeps for the next long
/// frame once let go. A 1 MB argument's frame is one: read into the
/// reader's buffer, its string was then copied into a fresh allocation, a
/// fault a page (256 a call), where a kept block takes it in pages
/// faulted in already and hands it to the tool as it is.
pub const BLOCK_FRAME_BYTES: usize = 256 * 1024;

/// Where an inbox's bytes come from.
pub enum Source {
  /// A socket: a host's journal.
  Socket(UnixStream),
  /// The channel's shared ring (`ring.rs`).
  Ring(RingReader),
}

impl From<UnixStream> for Source {
  fn from(stream: UnixStream) -> Source {
    Source::Socket(stream)
  }
}

impl From<RingReader> for Source {
  fn from(ring: RingReader) -> Source {
    Source::Ring(ring)
  }
}

impl Source {
  /// What is there now, up to `buf.len()` bytes, consumed unless `peek`:
  /// `WouldBlock` when nothing is, `Ok(0)` once nothing more will come.
  fn read_now(&self, buf: &mut [u8], peek: bool) -> io::Result<usize> {
    match self {
      Source::Socket(stream) => {
        let peek = if peek { libc::MSG_PEEK } else { 0 };
        recv(stream, buf, peek | libc::MSG_DONTWAIT)
      }
      Source::Ring(ring) => ring.read_now(buf, peek),
    }
  }

  /// Block until there is something to read (or the end).
  fn wait(&self) -> io::Result<()> {
    match self {
      Source::Socket(stream) => crate::socket::wait(stream, libc::POLLIN),
      Source::Ring(ring) => ring.wait(),
    }
  }

  /// As [`Source::wait`], inside a frame whose rest is on its way: a
  /// ring's reader spins for the writer's next piece first.
  fn wait_mid_frame(&self) -> io::Result<()> {
    match self {
      Source::Socket(_) => self.wait(),
      Source::Ring(ring) => ring.wait_mid_frame(),
    }
  }

  /// Fill `buf`, waiting for its bytes as they come.
  fn read_exactly_into(&self, buf: &mut [u8]) -> io::Result<()> {
    let ended = || io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame");
    match self {
      Source::Socket(stream) => {
        let mut stream: &UnixStream = stream;
        match stream.read_exact(buf) {
          Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Err(ended()),
          done => done,
        }
      }
      Source::Ring(ring) => {
        let mut at = 0;
        while at < buf.len() {
          match ring.read_now(&mut buf[at..], false) {
            Ok(0) => return Err(ended()),
            Ok(read) => at += read,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => ring.wait_mid_frame()?,
            Err(error) => return Err(error),
          }
        }
        Ok(())
      }
    }
  }

  /// Append exactly `count` more bytes to `frame`, waiting for them as they
  /// come (`frame` grows only with the bytes that arrive).
  fn read_exactly(&self, frame: &mut Vec<u8>, count: usize) -> io::Result<()> {
    let ended = || io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame");
    match self {
      Source::Socket(stream) => {
        if stream.take(count as u64).read_to_end(frame)? != count {
          return Err(ended());
        }
      }
      Source::Ring(ring) => {
        let mut rest = count;
        while rest > 0 {
          match ring.read_to_vec(frame, rest) {
            Ok(0) => return Err(ended()),
            Ok(read) => rest -= read,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => ring.wait_mid_frame()?,
            Err(error) => return Err(error),
          }
        }
      }
    }
    Ok(())
  }
}

/// The reading end of one channel.
pub struct Inbox {
  source: Source,
  /// Held while a frame is read and handled (see the module doc).
  reading: Mutex<Buffered>,
}

/// Bytes the owner has read past the frames it has handled: whole frames
/// and at most one partial frame, never anything a waiting thread read.
#[derive(Default)]
struct Buffered {
  /// Storage: the unhandled bytes are `bytes[start..end]`; the rest is room
  /// to read into (zeroed once, when the storage grows).
  bytes: Vec<u8>,
  start: usize,
  end: usize,
  /// Scratch for a waiting thread's peek (kept, so a spin allocates once).
  peeked: Vec<u8>,
}

impl Buffered {
  fn unhandled(&self) -> &[u8] {
    &self.bytes[self.start..self.end]
  }

  /// Keep `bytes` (read off the stream by a waiting thread, which found the
  /// owner's bytes empty) as the head of the unhandled bytes.
  fn keep(&mut self, bytes: &[u8]) {
    let room = self.room();
    room[..bytes.len()].copy_from_slice(bytes);
    self.end += bytes.len();
  }

  /// Room for at least [`READ_CHUNK`] more bytes after `end`.
  fn room(&mut self) -> &mut [u8] {
    if self.bytes.len() - self.end < READ_CHUNK {
      // (Nothing to move when the head is already at the start: a long
      // frame arriving in many reads is never copied onto itself.)
      if self.start > 0 {
        self.bytes.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
      }
      if self.bytes.len() - self.end < READ_CHUNK {
        self.bytes.resize(self.end + READ_CHUNK, 0);
      }
    }
    &mut self.bytes[self.end..]
  }

  /// The length of the whole frame at the head of the buffer, if it is
  /// all there: `Err` for a length no frame may have.
  fn whole_frame(&self) -> io::Result<Option<usize>> {
    let head = self.unhandled();
    let Some(len) = frame_len(head)? else { return Ok(None) };
    Ok((head.len() >= len + 4).then_some(len))
  }

  /// Move the head frame's tag and fields (`len` bytes) into `frame`.
  fn pop_into(&mut self, len: usize, frame: &mut Vec<u8>) {
    frame.clear();
    frame.extend_from_slice(&self.bytes[self.start + 4..self.start + 4 + len]);
    self.consume(len + 4);
  }

  fn consume(&mut self, count: usize) {
    self.start += count;
    if self.start == self.end {
      self.start = 0;
      self.end = 0;
    }
  }
}

/// The length a frame's header (the first four bytes of `head`) claims,
/// once the header is there; an error for a length no frame may have.
fn frame_len(head: &[u8]) -> io::Result<Option<usize>> {
  if head.len() < 4 {
    return Ok(None);
  }
  let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
  if len == 0 || len > MAX_FRAME_BYTES {
    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {len} bytes")));
  }
  Ok(Some(len as usize))
}

/// What the owner found.
pub enum Next<'a> {
  /// A frame (its tag and fields), handled while this guard is held.
  Frame(InboxGuard<'a>),
  /// The stream ended between frames.
  Ended,
}

/// What the owner found ([`Inbox::next_in_blocks`]): as [`Next`], or a
/// long frame read into a block of its own.
pub enum NextInBlocks<'a> {
  /// A frame in the owner's `Vec`, handled while this guard is held.
  Frame(InboxGuard<'a>),
  /// A frame of [`BLOCK_FRAME_BYTES`] or more in a block of its own,
  /// handled while this guard is held.
  Block(InboxGuard<'a>, BlockFrame),
  /// The stream ended between frames.
  Ended,
}

/// What the owner of a stream nobody waits on found ([`Inbox::next_ready`]).
pub enum Ready<'a> {
  /// A frame (its tag and fields), handled while this guard is held.
  Frame(InboxGuard<'a>),
  /// No whole frame is here now (part of one may be, kept for later).
  Empty,
  /// The stream ended between frames.
  Ended,
}

/// The lock and the frame it protects: handle the frame, then drop this.
pub struct InboxGuard<'a> {
  _reading: MutexGuard<'a, Buffered>,
}

impl Inbox {
  pub fn new(source: impl Into<Source>) -> Inbox {
    Inbox { source: source.into(), reading: Mutex::new(Buffered::default()) }
  }

  /// The CPU the writer was on when it last published, on a ring (see
  /// `ring::layout::WRITER_CPU`); a socket does not say.
  pub fn writer_cpu(&self) -> Option<u32> {
    match &self.source {
      Source::Ring(ring) => Some(ring.writer_cpu()),
      Source::Socket(_) => None,
    }
  }

  /// Say whether this side's Node main thread listens on the Node bell
  /// (`ring::RingReader::say_node_listens`); a socket has none.
  pub fn say_node_listens(&self, heard: bool) {
    if let Source::Ring(ring) = &self.source {
      ring.say_node_listens(heard);
    }
  }

  /// The owner: wait until a whole frame is here, then move it into
  /// `frame` under the lock, which the returned guard holds until the
  /// frame has been handled. An error ends the channel (a frame too long, a
  /// stream that ends inside a frame, a read that fails). A long frame is
  /// read straight into `frame`, holding the lock while the rest arrives.
  pub fn next<'a>(&'a self, frame: &mut Vec<u8>) -> io::Result<Next<'a>> {
    match self.next_frame(frame, false)? {
      NextInBlocks::Frame(guard) => Ok(Next::Frame(guard)),
      NextInBlocks::Ended => Ok(Next::Ended),
      NextInBlocks::Block(..) => Err(io::Error::other("a frame read into a block unasked")),
    }
  }

  /// As [`Inbox::next`], but a frame of [`BLOCK_FRAME_BYTES`] or more is
  /// read into a block of its own (`text::BlockFrame`) when the OS maps one,
  /// for its long strings to be decoded as parts of it.
  pub fn next_in_blocks<'a>(&'a self, frame: &mut Vec<u8>) -> io::Result<NextInBlocks<'a>> {
    self.next_frame(frame, true)
  }

  fn next_frame<'a>(&'a self, frame: &mut Vec<u8>, blocks: bool) -> io::Result<NextInBlocks<'a>> {
    loop {
      let mut reading = crate::lock::lock(&self.reading);
      if let Some(len) = reading.whole_frame()? {
        reading.pop_into(len, frame);
        return Ok(NextInBlocks::Frame(InboxGuard { _reading: reading }));
      }
      if let Some(len) = frame_len(reading.unhandled())? {
        let block = if blocks && len >= BLOCK_FRAME_BYTES { BlockFrame::new(len) } else { None };
        if let Some(mut block) = block {
          // What is here, then the rest read straight into the block.
          let held = reading.unhandled().len() - 4;
          let bytes = block.bytes_mut().ok_or_else(|| io::Error::other("a fresh block already shared"))?;
          let (here, rest) = bytes.split_at_mut(held);
          here.copy_from_slice(&reading.unhandled()[4..]);
          reading.consume(held + 4);
          self.source.read_exactly_into(rest)?;
          return Ok(NextInBlocks::Block(InboxGuard { _reading: reading }, block));
        }
        if len > MAX_TAKEN_BYTES {
          // Long: what is here, then the rest read straight into `frame`,
          // which grows with the bytes that actually arrive (a length a
          // hostile peer claims but never sends costs nothing).
          let held = reading.unhandled().len() - 4;
          frame.clear();
          frame.extend_from_slice(&reading.unhandled()[4..]);
          reading.consume(held + 4);
          self.source.read_exactly(frame, len - held)?;
          return Ok(NextInBlocks::Frame(InboxGuard { _reading: reading }));
        }
      }
      // Nothing whole here: read what the stream has, without waiting.
      let read = self.source.read_now(reading.room(), false);
      reading.end += *read.as_ref().unwrap_or(&0);
      match read {
        Ok(0) if reading.unhandled().is_empty() => return Ok(NextInBlocks::Ended),
        Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame")),
        Ok(_) => continue,
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
        Err(error) => return Err(error),
      }
      // Nothing to read: wait for the stream, outside the lock (a waiting
      // thread may take what wakes this one; then this waits again).
      let mid_frame = !reading.unhandled().is_empty();
      drop(reading);
      if mid_frame {
        self.source.wait_mid_frame()?;
      } else {
        self.source.wait()?;
      }
    }
  }

  /// The owner of a stream that nobody waits on (the harness's end of a
  /// host's journal, `frame.rs`): the next whole frame, if one is here or
  /// can be read without waiting, moved into `frame` under the lock as
  /// [`Inbox::next`] does. Never blocks: what has arrived of a frame is
  /// kept until the rest comes (a long one grows the buffer only with the
  /// bytes that actually arrive). An error ends the stream, as there.
  pub fn next_ready<'a>(&'a self, frame: &mut Vec<u8>) -> io::Result<Ready<'a>> {
    let mut reading = crate::lock::lock(&self.reading);
    loop {
      if let Some(len) = reading.whole_frame()? {
        reading.pop_into(len, frame);
        return Ok(Ready::Frame(InboxGuard { _reading: reading }));
      }
      match self.source.read_now(reading.room(), false) {
        Ok(0) if reading.unhandled().is_empty() => return Ok(Ready::Ended),
        Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame")),
        Ok(read) => reading.end += read,
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(Ready::Empty),
        Err(error) => return Err(error),
      }
    }
  }

  /// A waiting thread: if the frame at the head of the stream is here
  /// whole, is tagged one of `tags` and is at most [`MAX_TAKEN_BYTES`], take it and
  /// hand its tag and fields to `handle` under the lock; else leave
  /// everything as it is (and, on a ring, wake its sleeping owner for what
  /// is there: `RingReader::nudge`). Never blocks. Returns whether a frame
  /// was taken. A thread that spins on this calls it through [`Watching`].
  pub fn try_take(&self, tags: &[u8], handle: impl FnOnce(&[u8])) -> bool {
    let taken = self.take_if_there(tags, handle);
    if let (false, Source::Ring(ring)) = (taken, &self.source) {
      ring.nudge();
    }
    taken
  }

  fn take_if_there(&self, tags: &[u8], handle: impl FnOnce(&[u8])) -> bool {
    let mut reading = match self.reading.try_lock() {
      Ok(reading) => reading,
      Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
      Err(TryLockError::WouldBlock) => return false,
    };
    let reading = &mut *reading;
    // What the owner has read comes first: the head of the stream is there.
    if !reading.unhandled().is_empty() {
      let Ok(Some(len)) = reading.whole_frame() else { return false };
      if !tags.contains(&reading.unhandled()[4]) || len > MAX_TAKEN_BYTES {
        return false;
      }
      // Consumed before it is handled (consuming moves only the indices,
      // so the bytes stay where they are): a frame whose handling panics
      // is never handled twice.
      let at = reading.start + 4;
      reading.consume(len + 4);
      handle(&reading.bytes[at..at + len]);
      return true;
    }
    // The header first (one small peek per spin when nothing is there for
    // this thread), then the whole frame.
    let mut header = [0u8; 5];
    match self.source.read_now(&mut header, true) {
      Ok(5) if tags.contains(&header[4]) => {}
      _ => return false,
    }
    // A frame too long to take (an invalid length included), or not all
    // here yet, stays for the owner.
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len == 0 || len > MAX_TAKEN_BYTES {
      return false;
    }
    let mut peeked = std::mem::take(&mut reading.peeked);
    peeked.resize(len + 4, 0);
    // The header read again with the frame must be the header looked at
    // (a ring's writer may rewrite what it published between the two).
    let taken = match self.source.read_now(&mut peeked, true) {
      Ok(got) if got == len + 4 && peeked[..5] == header => self.consume_peeked(reading, &mut peeked),
      _ => false,
    };
    if taken {
      handle(&peeked[4..]);
    }
    reading.peeked = peeked;
    taken
  }

  /// Read off the stream the frame just peeked (all of it is there, so
  /// non-blocking reads return it whole). Should a read stop short, what it
  /// took is kept at the head of the owner's bytes, where the stream goes
  /// on: the stream never loses its place.
  /// (It reads into `peeked` again: the same bytes.)
  fn consume_peeked(&self, reading: &mut Buffered, peeked: &mut [u8]) -> bool {
    if let Source::Ring(ring) = &self.source {
      // The ring's bytes were copied out by the peek: moving past them is all.
      ring.consume(peeked.len());
      return true;
    }
    let mut taken = 0;
    while taken < peeked.len() {
      match self.source.read_now(&mut peeked[taken..], false) {
        Ok(read) if read > 0 => taken += read,
        _ => {
          reading.keep(&peeked[..taken]);
          return false;
        }
      }
    }
    true
  }
}

/// The inboxes one waiting thread spins on, each watched (see
/// `ring::RingReader`: its owner is not woken for what this thread takes)
/// from the first time the spin looks at it until the spin ends, when this
/// is dropped.
#[derive(Default)]
pub struct Watching {
  inboxes: Vec<Arc<Inbox>>,
}

impl Watching {
  /// [`Inbox::try_take`] on `inbox`, watched from now until the spin ends.
  pub fn try_take(&mut self, inbox: &Arc<Inbox>, tags: &[u8], handle: impl FnOnce(&[u8])) -> bool {
    if !self.inboxes.iter().any(|watched| Arc::ptr_eq(watched, inbox)) {
      if let Source::Ring(ring) = &inbox.source {
        ring.watch();
      }
      self.inboxes.push(inbox.clone());
    }
    inbox.try_take(tags, handle)
  }
}

impl Drop for Watching {
  fn drop(&mut self) {
    for inbox in &self.inboxes {
      if let Source::Ring(ring) = &inbox.source {
        ring.unwatch();
      }
    }
  }
}

const _: () = assert!(MAX_TAKEN_BYTES as u64 <= MAX_FRAME_BYTES as u64);

#[cfg(test)]
mod tests {
  use super::*;
  use crate::frame::{BindingCall, FromHost, ToHost};
  use crate::out_of_band::RawString;
  use crate::ring::{tests::channel, RingEnds};
  use crate::text::SharedFrame;
  use std::io::Write;

  /// Each source an inbox reads, with the writing end of its stream.
  enum Writer {
    Socket(UnixStream),
    /// The host's ends of a shared channel (the inbox reads the harness's).
    Ring(RingEnds),
  }

  impl Writer {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
      match self {
        Writer::Socket(stream) => stream.write_all(bytes),
        Writer::Ring(host) => host.writer.write_all(bytes),
      }
    }
  }

  /// A socket's inbox, then a shared ring's.
  fn inboxes() -> impl Iterator<Item = (Writer, Inbox)> {
    (0..2).map(|kind| {
      if kind == 0 {
        let (writer, reader) = UnixStream::pair().unwrap();
        (Writer::Socket(writer), Inbox::new(reader))
      } else {
        let (harness, host, _region) = channel();
        (Writer::Ring(host), Inbox::new(harness.reader))
      }
    })
  }

  fn frame_of(message: &FromHost) -> Vec<u8> {
    let mut out = Vec::new();
    message.encode(&mut out);
    out
  }

  fn calls(run_id: u32) -> FromHost {
    FromHost::Calls(vec![BindingCall {
      run_id,
      call_id: 1,
      namespace: 0,
      function: 0,
      args: "{}".to_owned(),
      paths: String::new(),
      strings: Vec::new(),
    }])
  }

  #[test]
  fn a_waiting_thread_takes_only_a_whole_small_frame_of_its_kind_at_the_head() {
    for (writer, inbox) in inboxes() {
      a_waiting_thread_takes(writer, inbox);
    }
  }

  fn a_waiting_thread_takes(mut writer: Writer, inbox: Inbox) {
    let calls_tag = FromHost::CALLS_TAG;
    // Nothing there: nothing taken.
    assert!(!inbox.try_take(&[calls_tag], |_| panic!("nothing was sent")));
    // Another kind at the head: left for the owner, and so is what follows.
    writer.write_all(&frame_of(&FromHost::Started { run_id: 1 })).unwrap();
    writer.write_all(&frame_of(&calls(1))).unwrap();
    assert!(!inbox.try_take(&[calls_tag], |_| panic!("not at the head")));
    let mut frame = Vec::new();
    match inbox.next(&mut frame).unwrap() {
      Next::Frame(_guard) => assert_eq!(FromHost::decode(&frame).unwrap(), FromHost::Started { run_id: 1 }),
      Next::Ended => panic!("ended"),
    }
    // Now the calls are at the head: taken whole, decoded by the taker.
    let mut taken = None;
    assert!(inbox.try_take(&[calls_tag], |frame| taken = Some(FromHost::decode(frame).unwrap())));
    assert_eq!(taken, Some(calls(1)));
    // Half a frame: not taken; once the rest is there, taken.
    let whole = frame_of(&calls(2));
    writer.write_all(&whole[..7]).unwrap();
    assert!(!inbox.try_take(&[calls_tag], |_| panic!("half a frame")));
    writer.write_all(&whole[7..]).unwrap();
    assert!(inbox.try_take(&[calls_tag], |frame| assert_eq!(FromHost::decode(frame).unwrap(), calls(2))));
    // The longest frame a waiting thread takes (with its header, longer
    // than a ring's piece, `ring::PIECE_BYTES`): taken whole.
    let calls_of = |args: String| {
      FromHost::Calls(vec![BindingCall {
        run_id: 4,
        call_id: 1,
        namespace: 0,
        function: 0,
        args,
        paths: String::new(),
        strings: Vec::new(),
      }])
    };
    let around_args = frame_of(&calls_of(String::new())).len() - 4;
    let longest = calls_of("x".repeat(MAX_TAKEN_BYTES - around_args));
    let bytes = frame_of(&longest);
    assert_eq!(bytes.len(), MAX_TAKEN_BYTES + 4);
    writer.write_all(&bytes).unwrap();
    assert!(inbox.try_take(&[calls_tag], |frame| assert_eq!(FromHost::decode(frame).unwrap(), longest)));
    // A frame too large to take stays for the owner, who reads it whole.
    let large = frame_of(&FromHost::Calls(vec![BindingCall {
      run_id: 3,
      call_id: 1,
      namespace: 0,
      function: 0,
      args: "x".repeat(MAX_TAKEN_BYTES),
      paths: String::new(),
      strings: Vec::new(),
    }]));
    let sender = std::thread::spawn(move || {
      writer.write_all(&large).unwrap();
      writer
    });
    let mut frame = Vec::new();
    match inbox.next(&mut frame).unwrap() {
      Next::Frame(_guard) => {
        assert!(matches!(FromHost::decode(&frame).unwrap(), FromHost::Calls(calls) if calls[0].run_id == 3))
      }
      Next::Ended => panic!("ended"),
    }
    drop(sender.join().unwrap());
    // The writer is gone: the owner sees the end.
    assert!(matches!(inbox.next(&mut frame).unwrap(), Next::Ended));
  }

  #[test]
  fn what_the_owner_read_ahead_is_where_a_waiting_thread_looks_first() {
    for (writer, inbox) in inboxes() {
      what_the_owner_read_ahead(writer, inbox);
    }
  }

  fn what_the_owner_read_ahead(mut writer: Writer, inbox: Inbox) {
    let log = FromHost::Log { run_id: 1, text: vec![104, 105] };
    let mut burst = frame_of(&FromHost::Started { run_id: 1 });
    burst.extend(frame_of(&calls(1)));
    burst.extend(frame_of(&log));
    burst.extend(frame_of(&calls(2)));
    writer.write_all(&burst).unwrap();
    let mut frame = Vec::new();
    // The owner reads the burst at once and hands out its first frame.
    assert!(matches!(inbox.next(&mut frame).unwrap(), Next::Frame(_)));
    assert_eq!(FromHost::decode(&frame).unwrap(), FromHost::Started { run_id: 1 });
    // The calls behind it are taken from what the owner kept, in order.
    assert!(inbox.try_take(&[FromHost::CALLS_TAG], |frame| assert_eq!(FromHost::decode(frame).unwrap(), calls(1))));
    assert!(!inbox.try_take(&[FromHost::CALLS_TAG], |_| panic!("a log entry is at the head")));
    assert!(matches!(inbox.next(&mut frame).unwrap(), Next::Frame(_)));
    assert_eq!(FromHost::decode(&frame).unwrap(), log);
    assert!(inbox.try_take(&[FromHost::CALLS_TAG], |frame| assert_eq!(FromHost::decode(frame).unwrap(), calls(2))));
    drop(writer);
    assert!(matches!(inbox.next(&mut frame).unwrap(), Next::Ended));
  }

  #[test]
  fn a_long_frame_grows_with_what_arrives_not_with_what_its_header_claims() {
    for (writer, inbox) in inboxes() {
      a_long_frame_grows(writer, inbox);
    }
  }

  fn a_long_frame_grows(mut writer: Writer, inbox: Inbox) {
    // A header claiming (nearly) 2 GiB, then ten bytes, then the end.
    writer.write_all(&(MAX_FRAME_BYTES - 1).to_le_bytes()).unwrap();
    writer.write_all(&[FromHost::CALLS_TAG; 10]).unwrap();
    drop(writer);
    let mut frame = Vec::new();
    assert!(inbox.next(&mut frame).is_err());
    // The buffer grew with the bytes, not with the claim.
    assert!(frame.capacity() < 1 << 20, "{} bytes reserved", frame.capacity());
  }

  #[test]
  fn a_long_frame_read_in_blocks_is_a_block_of_its_own_and_its_strings_parts_of_it() {
    for (writer, inbox) in inboxes() {
      a_long_frame_in_a_block(writer, inbox);
    }
  }

  fn a_long_frame_in_a_block(mut writer: Writer, inbox: Inbox) {
    let long = FromHost::Calls(vec![BindingCall {
      run_id: 1,
      call_id: 0,
      namespace: 0,
      function: 0,
      args: "[null]".to_owned(),
      paths: "[[0,0]]".to_owned(),
      strings: vec![RawString::Latin1(vec![0xe9; BLOCK_FRAME_BYTES].into())],
    }]);
    let bytes = [frame_of(&long), frame_of(&calls(2))].concat();
    // Longer than the channel holds: written beside the reads.
    let writing = std::thread::spawn(move || writer.write_all(&bytes).map(|()| writer));
    let mut frame = Vec::new();
    let NextInBlocks::Block(guard, block) = inbox.next_in_blocks(&mut frame).unwrap() else {
      panic!("a long frame not in a block")
    };
    drop(guard);
    let decoded = FromHost::decode_shared(&block).unwrap();
    assert_eq!(decoded, long);
    let FromHost::Calls(decoded) = decoded else { unreachable!() };
    let RawString::Latin1(string) = &decoded[0].strings[0] else { panic!("not one-byte") };
    assert!(block.frame().as_ptr_range().contains(&string.as_ptr()));
    // A short frame after it is the owner's `Vec`'s, as with `next`.
    assert!(matches!(inbox.next_in_blocks(&mut frame).unwrap(), NextInBlocks::Frame(_)));
    assert_eq!(FromHost::decode(&frame).unwrap(), calls(2));
    drop(writing.join().unwrap().unwrap());
    assert!(matches!(inbox.next_in_blocks(&mut frame).unwrap(), NextInBlocks::Ended));
  }

  #[test]
  fn a_long_frame_claimed_and_never_sent_ends_the_channel_from_a_block_too() {
    for (mut writer, inbox) in inboxes() {
      writer.write_all(&(MAX_FRAME_BYTES - 1).to_le_bytes()).unwrap();
      writer.write_all(&[FromHost::CALLS_TAG; 10]).unwrap();
      drop(writer);
      assert!(inbox.next_in_blocks(&mut Vec::new()).is_err());
    }
  }

  #[test]
  fn a_stream_nobody_waits_on_hands_out_what_is_whole_and_keeps_the_rest() {
    let (mut writer, reader) = UnixStream::pair().unwrap();
    let inbox = Inbox::new(reader);
    let mut frame = Vec::new();
    let next = |frame: &mut Vec<u8>| match inbox.next_ready(frame).unwrap() {
      Ready::Frame(_guard) => Some(FromHost::decode(frame).unwrap()),
      Ready::Empty => None,
      Ready::Ended => panic!("ended"),
    };
    assert_eq!(next(&mut frame), None);
    let log = FromHost::Log { run_id: 1, text: vec![104, 105] };
    let mut burst = frame_of(&FromHost::Started { run_id: 1 });
    let whole_log = frame_of(&log);
    burst.extend_from_slice(&whole_log[..6]);
    writer.write_all(&burst).unwrap();
    assert_eq!(next(&mut frame), Some(FromHost::Started { run_id: 1 }));
    // Part of a frame: nothing yet, and nothing lost.
    assert_eq!(next(&mut frame), None);
    writer.write_all(&whole_log[6..]).unwrap();
    assert_eq!(next(&mut frame), Some(log));
    // A long frame arriving in pieces, each read as it comes (no wait).
    let long = FromHost::Log { run_id: 2, text: vec![120; 3 * READ_CHUNK] };
    let bytes = frame_of(&long);
    for piece in bytes.chunks(100_000) {
      assert_eq!(next(&mut frame), None);
      writer.write_all(piece).unwrap();
    }
    assert_eq!(next(&mut frame), Some(long));
    // The end between frames is the end; inside one, an error.
    drop(writer);
    assert!(matches!(inbox.next_ready(&mut frame).unwrap(), Ready::Ended));
    let (mut writer, reader) = UnixStream::pair().unwrap();
    let inbox = Inbox::new(reader);
    writer.write_all(&whole_log[..6]).unwrap();
    drop(writer);
    assert!(inbox.next_ready(&mut frame).is_err());
  }

  #[test]
  fn a_hostile_length_is_never_taken_and_ends_the_channel_for_the_owner() {
    let mut frame = Vec::new();
    for (mut writer, inbox) in inboxes() {
      // A header claiming 4 GiB, tagged as the waiting thread's kind.
      writer.write_all(&[0xff, 0xff, 0xff, 0xff, FromHost::CALLS_TAG, 1, 2, 3]).unwrap();
      assert!(!inbox.try_take(&[FromHost::CALLS_TAG], |_| panic!("a hostile length")));
      assert!(inbox.next(&mut frame).is_err());
    }
    // And an empty frame (length 0) is refused by the owner too.
    for (mut writer, inbox) in inboxes() {
      writer.write_all(&[0, 0, 0, 0, ToHost::REPLIES_TAG]).unwrap();
      assert!(!inbox.try_take(&[ToHost::REPLIES_TAG], |_| panic!("an empty frame")));
      assert!(inbox.next(&mut frame).is_err());
    }
  }
}
