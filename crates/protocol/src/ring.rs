//! The channel through shared memory: two rings of bytes, one each way,
//! in a region the harness and a host both map (`shared_region.rs`).
//!
//! Each ring is a byte stream with a socket's semantics (a write takes what
//! fits, a read takes what is there, either says `WouldBlock` rather than
//! wait), so frames cross it as they cross a socket (`frame.rs`,
//! `inbox.rs`). What it saves is the kernel: a writer copies into memory
//! both sides have mapped and publishes an index; a reader that is awake
//! (a run's reply pump spinning, Node's main thread lingering) sees the
//! bytes without a system call and without any thread being woken. A side
//! that is going to sleep says so in the ring first, then checks once more;
//! the other side, after publishing, rings its doorbell (`doorbell.rs`)
//! only if it said so, and not while a thread of the reading side watches
//! the ring (see [`RingReader`]): a quick round trip wakes nobody.
//!
//! The socket stays, carrying nothing: its hang-up is how each side learns
//! that the other has gone, and a sleeper waits on it beside its doorbell.
//!
//! Every index the other side writes is hostile (and so is everything it
//! can do to a doorbell: `doorbell.rs`). Each end keeps its own
//! index privately (the shared copy exists for the other side to read) and
//! checks the other's against it: a writer's index that runs backwards or
//! claims more than the ring holds, or a reader's that claims to have read
//! what was never written, is an error that ends the channel. Bytes are
//! copied out of the ring before anything reads them, so bytes the other
//! side changes after publishing them change only that copy, which the
//! reader then checks as it checks any frame.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::doorbell::{one_way_bell, BellListener, BellRinger, Doorbell, Woken};
use crate::shared_region::SharedRegion;

/// Bytes of data each way: a power of two (an index's position is its low
/// bits). A frame longer than this crosses in parts, as through a socket's
/// buffer (about 200 KiB for a Unix socket here).
pub const RING_DATA_BYTES: usize = 256 * 1024;

const PAGE: usize = 4096;

/// The most a write publishes, or a read consumes, at once: a long frame
/// crosses as pieces, each side copying one while the other copies the
/// next. Whole-ring steps made the two copies take turns (the writer
/// filled the ring and slept, the reader emptied it and slept), so a
/// frame of megabytes crossed at half the speed of one copy.
pub const PIECE_BYTES: usize = RING_DATA_BYTES / 4;

/// How long a side in the middle of a frame spins for the other's next
/// piece (or for room) before it sleeps: several pieces' copying, so that
/// while both copy, neither falls asleep for a wake-up that costs more
/// than the piece.
const MID_FRAME_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Spin until `ready` says so or [`MID_FRAME_SPIN`] has passed.
fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
  let started = std::time::Instant::now();
  loop {
    for _ in 0..64 {
      if ready() {
        return true;
      }
      std::hint::spin_loop();
    }
    if started.elapsed() >= MID_FRAME_SPIN {
      return ready();
    }
  }
}

/// One ring: a page of indices and flags, each on a cache line of its own
/// (the two sides write different lines), then the data.
const RING_BYTES: usize = PAGE + RING_DATA_BYTES;

/// The shared region: the ring to the host, then the ring from the host.
pub const REGION_BYTES: usize = 2 * RING_BYTES;

/// The region's layout, which both sides (and a test's hostile host) map.
pub mod layout {
  use super::{PAGE, RING_BYTES};

  /// Where each ring starts in the region.
  pub const TO_HOST: usize = 0;
  pub const FROM_HOST: usize = RING_BYTES;

  // Offsets in a ring's first page, each word a little-endian integer
  // written atomically.
  /// Bytes ever written (the writer's), a u64.
  pub const HEAD: usize = 0;
  /// Bytes ever read (the reader's), a u64.
  pub const TAIL: usize = 64;
  /// Non-zero while the reader sleeps, or is about to (the reader's), a u32.
  pub const READER_ASLEEP: usize = 128;
  /// Non-zero while the writer waits for room (the writer's), a u32.
  pub const WRITER_ASLEEP: usize = 192;
  /// The CPU the writer's thread was on when it last published (the
  /// writer's), a u32. A hint for the reader's side, which may keep its
  /// own threads off that CPU (the host: `cpu_placement.rs`); nothing else
  /// reads it, and the harness never reads the host's.
  pub const WRITER_CPU: usize = 256;
  /// Non-zero while the reading side's Node main thread listens on the
  /// Node bell (the reader's, a u32; the harness writes it in the ring
  /// from the host): a writer then rings that bell, not the data bell,
  /// for a frame for Node (see [`RingWriter::write_all_for_node`](super::RingWriter::write_all_for_node)).
  pub const NODE_LISTENS: usize = 320;
  /// Where a ring's data starts.
  pub const DATA: usize = PAGE;
}

use layout::{DATA, FROM_HOST, HEAD, NODE_LISTENS, READER_ASLEEP, TAIL, TO_HOST, WRITER_ASLEEP, WRITER_CPU};

const _: () = assert!(RING_DATA_BYTES.is_power_of_two() && RING_DATA_BYTES >= PAGE);

/// Descriptors a host finds the shared channel at (beside the channel's
/// socket at 0 and the journal at `frame::JOURNAL_FD`): the region, then
/// for each ring the bell its reader waits on (bytes came) and the bell its
/// writer waits on (room came), each bell two descriptors: the end rings
/// are sent on, then the end its sleeper polls (`doorbell.rs`); then the
/// Node bell's ringing end alone (its listening end stays in the harness).
pub const REGION_FD: i32 = crate::frame::JOURNAL_FD + 1;
pub const TO_HOST_DATA_FD: i32 = REGION_FD + 1;
pub const TO_HOST_ROOM_FD: i32 = REGION_FD + 3;
pub const FROM_HOST_DATA_FD: i32 = REGION_FD + 5;
pub const FROM_HOST_ROOM_FD: i32 = REGION_FD + 7;
pub const NODE_BELL_FD: i32 = FROM_HOST_ROOM_FD + 2;
/// The last descriptor the harness hands a host.
pub const LAST_HANDED_FD: i32 = NODE_BELL_FD;
/// How many descriptors the channel's rings hand a host.
pub const HANDED_FDS: usize = (LAST_HANDED_FD - REGION_FD + 1) as usize;

/// One ring as this process maps it.
#[derive(Clone)]
struct Ring {
  /// Held so that `start` stays mapped.
  _region: Arc<SharedRegion>,
  /// The ring's first byte in the region.
  start: NonNull<u8>,
  /// Its reader waits on this for bytes.
  data: Arc<Doorbell>,
  /// Its writer waits on this for room.
  room: Arc<Doorbell>,
  /// The channel's socket: its hang-up wakes a sleeper.
  socket: Arc<UnixStream>,
  /// The other side has gone: learnt by a sleeper its socket woke (looking
  /// at the socket costs a system call, so only a wait does), for both
  /// rings of this side.
  gone: Arc<AtomicBool>,
  /// This side shut the channel (a host it ends): for both rings of this
  /// side, from now on nothing is read, whatever the other side publishes.
  shut: Arc<AtomicBool>,
}

// SAFETY: `start` points into `region`, which the ring holds; the region
// is shared memory every access of which is atomic or a copy (see
// `SharedRegion`), so the pointer may cross threads.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Ring {
  fn new(
    region: &Arc<SharedRegion>,
    offset: usize,
    data: Arc<Doorbell>,
    room: Arc<Doorbell>,
    socket: Arc<UnixStream>,
    gone: Arc<AtomicBool>,
    shut: Arc<AtomicBool>,
  ) -> io::Result<Ring> {
    if region.len() < offset + RING_BYTES {
      return Err(io::Error::new(io::ErrorKind::InvalidInput, "a region too small for the channel's rings"));
    }
    // SAFETY: `offset + RING_BYTES` is within the region (checked above).
    let start = unsafe { region.base().add(offset) };
    Ok(Ring { _region: region.clone(), start, data, room, socket, gone, shut })
  }

  fn word64(&self, offset: usize) -> &AtomicU64 {
    // SAFETY: `offset` is one of the 8-aligned offsets above, within the
    // ring's first page of the page-aligned region the ring holds alive;
    // the other process only ever accesses it atomically too.
    unsafe { &*self.start.as_ptr().add(offset).cast::<AtomicU64>() }
  }

  fn word32(&self, offset: usize) -> &AtomicU32 {
    // SAFETY: as in `word64`, 4-aligned.
    unsafe { &*self.start.as_ptr().add(offset).cast::<AtomicU32>() }
  }

  fn data_at(&self, index: u64) -> *mut u8 {
    let position = (index as usize) & (RING_DATA_BYTES - 1);
    // SAFETY: `position` < RING_DATA_BYTES, and the data follows the first
    // page within the ring's RING_BYTES.
    unsafe { self.start.as_ptr().add(DATA + position) }
  }

  /// Copy `len` bytes starting at stream index `from` out of the ring to
  /// `out` (at most RING_DATA_BYTES, which the callers' checked counts are).
  ///
  /// # Safety
  /// `out` must be valid for writes of `len` bytes.
  unsafe fn copy_out(&self, from: u64, out: *mut u8, len: usize) {
    let position = (from as usize) & (RING_DATA_BYTES - 1);
    let first = len.min(RING_DATA_BYTES - position);
    // SAFETY: the source ranges lie within the ring's data (`first` bytes
    // from `position` up to its end, the rest from its start, together at
    // most RING_DATA_BYTES); `out` takes `len` bytes (the caller's promise).
    // The other process may write the same bytes meanwhile. Rust has no
    // atomic memcpy (a racing plain copy is outside its memory model, as
    // in every shared-memory channel written in it today); what the copy
    // can yield is some byte values, any of which is valid, and nothing
    // reads them but through this copy, which the reader checks afterwards.
    unsafe {
      std::ptr::copy_nonoverlapping(self.data_at(from), out, first);
      std::ptr::copy_nonoverlapping(self.data_at(0), out.add(first), len - first);
    }
  }

  /// Copy `bytes` into the ring at stream index `at` (as `copy_out`; at
  /// most a ring's length of them, which the writer's room always is).
  fn copy_in(&self, at: u64, bytes: &[u8]) {
    let bytes = &bytes[..bytes.len().min(RING_DATA_BYTES)];
    let position = (at as usize) & (RING_DATA_BYTES - 1);
    let first = bytes.len().min(RING_DATA_BYTES - position);
    // SAFETY: as in `copy_out`, the other way.
    unsafe {
      std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.data_at(at), first);
      std::ptr::copy_nonoverlapping(bytes.as_ptr().add(first), self.data_at(0), bytes.len() - first);
    }
  }

  fn gone(&self) -> bool {
    self.gone.load(Ordering::Acquire)
  }

  /// This side shut the channel: nothing more is read from it.
  fn shut(&self) -> bool {
    self.shut.load(Ordering::Acquire)
  }

  /// Sleep on `bell` (the caller said it sleeps and looked once more), then
  /// note whether the socket woke it: its hang-up (or failure) means the
  /// other side has gone, or this side shut the channel.
  fn sleep_on(&self, bell: &Doorbell) -> io::Result<()> {
    if bell.wait(&self.socket)? == Woken::Socket {
      self.gone.store(true, Ordering::Release);
    }
    Ok(())
  }
}

fn hostile(what: &str) -> io::Error {
  io::Error::new(io::ErrorKind::InvalidData, format!("the shared ring: {what}"))
}

/// The reading end of one ring. One reader at a time: its callers
/// serialize reads (an inbox's lock); a wait may overlap them.
///
/// **Watching.** The reading side has one owner, which reads every frame
/// it is left (and sleeps in [`RingReader::wait`] when there is none), and
/// may have waiting threads, which spin on the ring for one kind of frame
/// and take it themselves (`inbox.rs`). While any of them is awake on the
/// ring, the writer need not ring: the ring's READER_ASLEEP says "nobody
/// here is watching", set by the last to stop. So a frame a spinning
/// thread takes wakes nobody, and a frame it will not take wakes the
/// sleeping owner through that thread ([`RingReader::nudge`]).
pub struct RingReader {
  ring: Ring,
  /// Bytes read: this end's own count, which the shared TAIL only mirrors.
  tail: AtomicU64,
  /// Threads of this side awake on the ring: the owner unless it sleeps,
  /// and each waiting thread while it spins.
  watching: AtomicU32,
  /// The owner sleeps (or is about to), so only a ring wakes it.
  owner_asleep: AtomicBool,
  /// The writer's HEAD when a waiting thread last woke the owner for bytes
  /// it would not take (once per new bytes, not once per spin).
  nudged_at: AtomicU64,
}

impl RingReader {
  /// Say whether this side's Node main thread listens on the Node bell
  /// (see [`layout::NODE_LISTENS`]). Once it stops, the caller looks at the
  /// ring again (a take through `inbox::Watching`, which wakes the owner
  /// for what it leaves): a writer that saw it listening just before it
  /// stopped rang the Node bell for bytes nobody else was told of.
  pub fn say_node_listens(&self, heard: bool) {
    self.ring.word32(NODE_LISTENS).store(u32::from(heard), Ordering::SeqCst);
    // Ordered before the caller's next look at HEAD (see `publish`).
    fence(Ordering::SeqCst);
  }

  /// The CPU the writer was on when it last published (see
  /// [`layout::WRITER_CPU`]): whatever the other side wrote there.
  pub fn writer_cpu(&self) -> u32 {
    self.ring.word32(WRITER_CPU).load(Ordering::Relaxed)
  }

  /// Bytes written and not yet read, the writer's HEAD checked against this
  /// end's own count: it must lie within one ring's length ahead of it
  /// (so it never runs backwards past what was read).
  ///
  /// The count first (Acquire, against `consume`'s Release), then HEAD: a
  /// thread that sees a count a waiting thread moved sees a HEAD at least
  /// as far, so an honest writer's HEAD is never found behind it.
  fn unread(&self) -> io::Result<usize> {
    let tail = self.tail.load(Ordering::Acquire);
    let head = self.ring.word64(HEAD).load(Ordering::Acquire);
    match head.checked_sub(tail) {
      Some(unread) if unread <= RING_DATA_BYTES as u64 => Ok(unread as usize),
      _ => Err(hostile("the writer's index is not within the ring")),
    }
  }

  /// How many bytes are there to read now: `WouldBlock` when none is, or
  /// `Ok(0)` when none is and none will come (a wait found the writer gone).
  fn available(&self) -> io::Result<usize> {
    if self.ring.shut() {
      return Ok(0);
    }
    let unread = self.unread()?;
    if unread > 0 {
      return Ok(unread);
    }
    if !self.ring.gone() {
      return Err(io::ErrorKind::WouldBlock.into());
    }
    // What it wrote before it went was published before its end closed.
    self.unread()
  }

  /// Copy up to `buf.len()` bytes that are there now into `buf`, and
  /// consume them unless `peek`: how many (0 only for an empty `buf`), or
  /// `WouldBlock` when none is there, or `Ok(0)` when none is there and
  /// none will come (a wait found the writer gone: this looks at no socket,
  /// so a spinning reader makes no system call).
  pub fn read_now(&self, buf: &mut [u8], peek: bool) -> io::Result<usize> {
    if buf.is_empty() {
      return Ok(0);
    }
    // A peek consumes nothing, so it takes all there is (a waiting thread
    // peeks a whole frame of up to `inbox::MAX_TAKEN_BYTES` and its header).
    let count = self.available()?.min(buf.len());
    let count = if peek { count } else { count.min(PIECE_BYTES) };
    // SAFETY: `buf` takes `count` <= `buf.len()` bytes.
    unsafe { self.ring.copy_out(self.tail.load(Ordering::Relaxed), buf.as_mut_ptr(), count) };
    if !peek {
      self.consume(count);
    }
    Ok(count)
  }

  /// Append up to `max` bytes that are there now to `out`, consumed (its
  /// room grows only by what is there): as [`RingReader::read_now`].
  pub fn read_to_vec(&self, out: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    if max == 0 {
      return Ok(0);
    }
    let count = self.available()?.min(max).min(PIECE_BYTES);
    out.reserve(count);
    // SAFETY: `reserve` made room for `count` bytes past the length; they
    // are written (never read) by the copy, then taken into the length.
    unsafe {
      self.ring.copy_out(self.tail.load(Ordering::Relaxed), out.as_mut_ptr().add(out.len()), count);
      out.set_len(out.len() + count);
    }
    self.consume(count);
    Ok(count)
  }

  /// Consume `count` bytes already read with a peek.
  pub fn consume(&self, count: usize) {
    let tail = self.tail.load(Ordering::Relaxed).wrapping_add(count as u64);
    self.tail.store(tail, Ordering::Release);
    // Released: the bytes were copied out before the writer may reuse them.
    self.ring.word64(TAIL).store(tail, Ordering::Release);
    // Ordered before the flag's load (the writer stores its flag, then loads
    // TAIL): one of the two sees the other.
    fence(Ordering::SeqCst);
    if self.ring.word32(WRITER_ASLEEP).load(Ordering::Relaxed) != 0 {
      self.ring.room.ring();
    }
  }

  /// The owner: block until bytes are there to read or the writer has
  /// gone (then `read_now` says which). It stops watching first, then looks
  /// once more: a writer that published after the look rings the bell (or
  /// a waiting thread still watching wakes it, see [`RingReader::nudge`]).
  pub fn wait(&self) -> io::Result<()> {
    self.owner_asleep.store(true, Ordering::SeqCst);
    self.unwatch();
    // Ordered before the look at HEAD whoever was the last to stop
    // watching (a waiting thread that nudges reads the flag above after
    // it read HEAD).
    fence(Ordering::SeqCst);
    // Anything but an empty ring (bytes, or an index to refuse) is for
    // `read_now` to say, under the inbox's lock.
    let woken = match self.unread() {
      Ok(0) if !self.ring.gone() && !self.ring.shut() => self.ring.sleep_on(&self.ring.data),
      _ => Ok(()),
    };
    self.watch();
    self.owner_asleep.store(false, Ordering::SeqCst);
    woken
  }

  /// As [`RingReader::wait`], in the middle of a frame whose next piece
  /// the writer is copying: spins for it first (see [`MID_FRAME_SPIN`]).
  pub fn wait_mid_frame(&self) -> io::Result<()> {
    if spin_until(|| !matches!(self.unread(), Ok(0)) || self.ring.gone() || self.ring.shut()) {
      return Ok(());
    }
    self.wait()
  }

  /// A waiting thread starts to spin on the ring (see the type's doc);
  /// [`RingReader::unwatch`] when it stops.
  pub fn watch(&self) {
    self.watching.fetch_add(1, Ordering::SeqCst);
    self.ring.word32(READER_ASLEEP).store(0, Ordering::SeqCst);
  }

  /// A thread stops watching. The last to stop says nobody watches, then
  /// looks once more: bytes a writer published before it could see that
  /// (and so rang nobody for) wake the owner.
  pub fn unwatch(&self) {
    if self.watching.fetch_sub(1, Ordering::SeqCst) != 1 {
      return;
    }
    self.ring.word32(READER_ASLEEP).store(1, Ordering::Relaxed);
    // Ordered before the look at HEAD (the writer stores HEAD, then loads
    // the flag): one of the two sees the other.
    fence(Ordering::SeqCst);
    if !matches!(self.unread(), Ok(0)) {
      self.ring.data.ring();
    }
  }

  /// A waiting thread found bytes at the head that it will not take: if
  /// the owner sleeps, wake it for them (once per new bytes: a spin that
  /// keeps finding them rings once).
  pub fn nudge(&self) {
    fence(Ordering::SeqCst);
    if !self.owner_asleep.load(Ordering::SeqCst) {
      return;
    }
    let head = self.ring.word64(HEAD).load(Ordering::Acquire);
    if head != self.tail.load(Ordering::Relaxed) && self.nudged_at.swap(head, Ordering::Relaxed) != head {
      self.ring.data.ring();
    }
  }
}

/// The writing end of one ring. One writer at a time: its callers
/// serialize writes (the link's lock); a wait may overlap them.
pub struct RingWriter {
  ring: Ring,
  /// Bytes written: this end's own count, which the shared HEAD only mirrors.
  head: AtomicU64,
  /// The reader's TAIL as last seen: it may only move forwards.
  tail_seen: AtomicU64,
  /// The Node bell's ringing end: a host's writer has it (the harness
  /// hands it at [`NODE_BELL_FD`]), the harness's has none.
  node_bell: Option<BellRinger>,
}

impl RingWriter {
  /// Room for more bytes: the reader's TAIL checked against this end's own
  /// count (it cannot have read what was not written, nor be more than a
  /// ring's length behind) and against itself (it never runs backwards).
  fn room(&self) -> io::Result<usize> {
    let tail = self.ring.word64(TAIL).load(Ordering::Acquire);
    if tail < self.tail_seen.load(Ordering::Relaxed) {
      return Err(hostile("the reader's index ran backwards"));
    }
    match self.head.load(Ordering::Relaxed).checked_sub(tail) {
      Some(used) if used <= RING_DATA_BYTES as u64 => {
        self.tail_seen.store(tail, Ordering::Relaxed);
        Ok(RING_DATA_BYTES - used as usize)
      }
      _ => Err(hostile("the reader's index is not within the ring")),
    }
  }

  /// Copy as much of `bytes` as fits now into the ring and publish it: how
  /// many bytes (at least one, unless `bytes` is empty), or `WouldBlock`
  /// when none fits; `BrokenPipe` once a wait has found the reader gone
  /// (bytes written before that are lost with it, as a socket's would be).
  pub fn write_now(&self, bytes: &[u8]) -> io::Result<usize> {
    self.publish(bytes, false)
  }

  /// Write all of `frame`, a frame for Node's main thread whole
  /// (`FromHost::FOR_NODE_TAGS`), as [`RingWriter::write_all`]; but the
  /// publish that completes it rings the Node bell instead of the data
  /// bell when the reading side's Node main thread listens there
  /// ([`layout::NODE_LISTENS`]): that thread takes the frame itself, and
  /// the reader thread, which would only have passed it on, sleeps on.
  /// Earlier parts of a frame that does not fit in one publish ring as any
  /// bytes do.
  pub fn write_all_for_node(&self, frame: &[u8]) -> io::Result<()> {
    self.write_all_ringing(frame, true)
  }

  /// [`RingWriter::write_now`], ringing the Node bell rather than the
  /// data bell (when it is heard) if `for_node` and the publish takes all
  /// of `bytes`.
  fn publish(&self, bytes: &[u8], for_node: bool) -> io::Result<usize> {
    if bytes.is_empty() {
      return Ok(0);
    }
    if self.ring.gone() {
      return Err(io::ErrorKind::BrokenPipe.into());
    }
    let count = self.room()?.min(bytes.len()).min(PIECE_BYTES);
    if count == 0 {
      return Err(io::ErrorKind::WouldBlock.into());
    }
    let head = self.head.load(Ordering::Relaxed);
    self.ring.copy_in(head, &bytes[..count]);
    let head = head.wrapping_add(count as u64);
    self.head.store(head, Ordering::Relaxed);
    // Released: the bytes are in the ring before the reader may see them.
    self.ring.word64(HEAD).store(head, Ordering::Release);
    // SAFETY: sched_getcpu has no preconditions (glibc reads it from the
    // thread's rseq area or the vDSO: no system call). -1 (unknown) is
    // stored as a CPU no reader is on.
    let cpu = unsafe { libc::sched_getcpu() };
    self.ring.word32(WRITER_CPU).store(cpu as u32, Ordering::Relaxed);
    // Ordered before the flags' loads (the reader stores its flag, then
    // loads HEAD; the harness, ceasing to listen on the Node bell, clears
    // NODE_LISTENS, then looks at HEAD): one of the two sees the other.
    fence(Ordering::SeqCst);
    if self.ring.word32(READER_ASLEEP).load(Ordering::Relaxed) != 0 {
      match &self.node_bell {
        Some(bell)
          if for_node && count == bytes.len() && self.ring.word32(NODE_LISTENS).load(Ordering::Relaxed) != 0 =>
        {
          bell.ring()
        }
        _ => self.ring.data.ring(),
      }
    }
    Ok(count)
  }

  /// Write all of `bytes`, waiting for room as needed; `BrokenPipe` once
  /// the reader has gone.
  pub fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
    self.write_all_ringing(bytes, false)
  }

  /// Write all of `bytes`, each publish as [`RingWriter::publish`] says
  /// with `for_node`.
  fn write_all_ringing(&self, mut bytes: &[u8], for_node: bool) -> io::Result<()> {
    while !bytes.is_empty() {
      match self.publish(bytes, for_node) {
        Ok(written) => bytes = &bytes[written..],
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.wait()?,
        Err(error) => return Err(error),
      }
    }
    Ok(())
  }

  /// Block until there is room or the reader has gone (then `write_now`
  /// says which). A writer waits only with a write in hand, so it spins
  /// for room first, as a reader inside a frame spins for its next piece
  /// ([`MID_FRAME_SPIN`]); then it says it waits, and looks once more: a
  /// reader that consumed after the look rings the bell.
  pub fn wait(&self) -> io::Result<()> {
    if spin_until(|| !matches!(self.room(), Ok(0)) || self.ring.gone()) {
      return self.room().map(drop);
    }
    let asleep = self.ring.word32(WRITER_ASLEEP);
    asleep.store(1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    let woken = match self.room() {
      Ok(0) if !self.ring.gone() => self.ring.sleep_on(&self.ring.room),
      Ok(_) => Ok(()),
      Err(error) => Err(error),
    };
    asleep.store(0, Ordering::Relaxed);
    woken
  }
}

impl RingWriter {
  /// End the channel both ways (its socket): the other side's sleepers
  /// wake and find it gone, and this side reads nothing more from it.
  pub fn shut_down(&self) {
    self.ring.shut.store(true, Ordering::Release);
    self.ring.gone.store(true, Ordering::Release);
    let _ = self.ring.socket.shutdown(std::net::Shutdown::Both);
  }
}

/// Reads that wait, as a blocking socket's (`frame::read_frame`).
impl io::Read for &RingReader {
  fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
    loop {
      match self.read_now(buf, false) {
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.wait()?,
        result => return result,
      }
    }
  }
}

/// Writes that wait for room, as a blocking socket's.
impl io::Write for &RingWriter {
  fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
    loop {
      match self.write_now(bytes) {
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.wait()?,
        result => return result,
      }
    }
  }

  fn flush(&mut self) -> io::Result<()> {
    Ok(())
  }
}

/// One side's two ends of the shared channel.
pub struct RingEnds {
  pub reader: RingReader,
  pub writer: RingWriter,
}

/// The four doorbells of a shared channel, as one side holds them.
pub struct Doorbells {
  pub to_host_data: Doorbell,
  pub to_host_room: Doorbell,
  pub from_host_data: Doorbell,
  pub from_host_room: Doorbell,
}

/// Which side of the channel a process is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
  Harness,
  Host,
}

impl RingEnds {
  /// This side's ends of the channel in `region`, a fresh one (the
  /// harness's, reading from the host and writing to it, or the host's, the
  /// other way), with the doorbells and the channel's socket.
  pub fn new(side: Side, region: Arc<SharedRegion>, bells: Doorbells, socket: UnixStream) -> io::Result<RingEnds> {
    let socket = Arc::new(socket);
    let bell = |bell: Doorbell| Arc::new(bell);
    // One socket, so one end of the other side for both rings.
    let (gone, shut) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let to_host = Ring::new(
      &region,
      TO_HOST,
      bell(bells.to_host_data),
      bell(bells.to_host_room),
      socket.clone(),
      gone.clone(),
      shut.clone(),
    )?;
    let from_host =
      Ring::new(&region, FROM_HOST, bell(bells.from_host_data), bell(bells.from_host_room), socket, gone, shut)?;
    let (incoming, outgoing) = match side {
      Side::Harness => (from_host, to_host),
      Side::Host => (to_host, from_host),
    };
    // A region serves one channel from its start: every index is 0.
    Ok(RingEnds {
      reader: RingReader {
        ring: incoming,
        tail: AtomicU64::new(0),
        watching: AtomicU32::new(1),
        owner_asleep: AtomicBool::new(false),
        nudged_at: AtomicU64::new(u64::MAX),
      },
      writer: RingWriter { ring: outgoing, head: AtomicU64::new(0), tail_seen: AtomicU64::new(0), node_bell: None },
    })
  }
}

/// What the harness hands a host for its ends of a shared channel: the
/// region and the doorbells, each to be placed at its fixed descriptor.
pub struct Handed {
  region: OwnedFd,
  bells: Doorbells,
  node_bell: BellRinger,
}

impl Handed {
  /// Each descriptor and the number the host finds it at.
  pub fn placements(&self) -> [(RawFd, RawFd); HANDED_FDS] {
    let bells = &self.bells;
    let [to_host_data, to_host_data_wait] = bells.to_host_data.ends();
    let [to_host_room, to_host_room_wait] = bells.to_host_room.ends();
    let [from_host_data, from_host_data_wait] = bells.from_host_data.ends();
    let [from_host_room, from_host_room_wait] = bells.from_host_room.ends();
    [
      (self.region.as_raw_fd(), REGION_FD),
      (to_host_data.as_raw_fd(), TO_HOST_DATA_FD),
      (to_host_data_wait.as_raw_fd(), TO_HOST_DATA_FD + 1),
      (to_host_room.as_raw_fd(), TO_HOST_ROOM_FD),
      (to_host_room_wait.as_raw_fd(), TO_HOST_ROOM_FD + 1),
      (from_host_data.as_raw_fd(), FROM_HOST_DATA_FD),
      (from_host_data_wait.as_raw_fd(), FROM_HOST_DATA_FD + 1),
      (from_host_room.as_raw_fd(), FROM_HOST_ROOM_FD),
      (from_host_room_wait.as_raw_fd(), FROM_HOST_ROOM_FD + 1),
      (self.node_bell.end().as_raw_fd(), NODE_BELL_FD),
    ]
  }
}

impl Doorbells {
  fn new() -> io::Result<Doorbells> {
    Ok(Doorbells {
      to_host_data: Doorbell::new()?,
      to_host_room: Doorbell::new()?,
      from_host_data: Doorbell::new()?,
      from_host_room: Doorbell::new()?,
    })
  }

  /// The same bells through new descriptors (for the other side).
  fn copies(&self) -> io::Result<Doorbells> {
    Ok(Doorbells {
      to_host_data: self.to_host_data.try_clone()?,
      to_host_room: self.to_host_room.try_clone()?,
      from_host_data: self.from_host_data.try_clone()?,
      from_host_room: self.from_host_room.try_clone()?,
    })
  }
}

impl RingEnds {
  /// The harness: a new shared channel beside `socket` (the harness's end
  /// of the channel's socket pair), its ends here, what to hand the host
  /// (closed on exec here: the host gets them at their fixed numbers), and
  /// the listening end of its Node bell, which stays here.
  pub fn create(socket: UnixStream) -> io::Result<(RingEnds, Handed, BellListener)> {
    let (region, fd) = SharedRegion::create(REGION_BYTES)?;
    let bells = Doorbells::new()?;
    let (node_bell, listener) = one_way_bell()?;
    let handed = Handed { region: fd, bells: bells.copies()?, node_bell };
    Ok((RingEnds::new(Side::Harness, Arc::new(region), bells, socket)?, handed, listener))
  }

  /// A host: its ends of the shared channel the harness handed it at the
  /// fixed descriptors, beside `socket` (the host's end of the channel's
  /// socket pair).
  ///
  /// # Safety
  /// The descriptors from [`REGION_FD`] to [`LAST_HANDED_FD`] must be the
  /// ones the harness handed over, owned by nothing else in this process:
  /// they are taken over here.
  pub unsafe fn inherited(socket: UnixStream) -> io::Result<RingEnds> {
    // SAFETY: the caller's promise: each fixed descriptor is open and
    // owned by nothing else; it is taken over exactly once.
    let take = |fd: RawFd| unsafe { OwnedFd::from_raw_fd(fd) };
    let region = SharedRegion::map(&take(REGION_FD), REGION_BYTES)?;
    let bell = |first: RawFd| Doorbell::from_ends(take(first), take(first + 1));
    let bells = Doorbells {
      to_host_data: bell(TO_HOST_DATA_FD),
      to_host_room: bell(TO_HOST_ROOM_FD),
      from_host_data: bell(FROM_HOST_DATA_FD),
      from_host_room: bell(FROM_HOST_ROOM_FD),
    };
    let mut ends = RingEnds::new(Side::Host, Arc::new(region), bells, socket)?;
    ends.writer.node_bell = Some(BellRinger::from_end(take(NODE_BELL_FD)));
    Ok(ends)
  }
}

#[cfg(test)]
pub(crate) mod tests {
  use super::*;

  /// Both sides' ends over two mappings of one region (as the harness and a
  /// host map it), with the doorbells' descriptors shared as a host
  /// inherits them: the harness's, the host's, the region's descriptor.
  pub(crate) fn channel() -> (RingEnds, RingEnds, OwnedFd) {
    let (harness_region, fd) = SharedRegion::create(REGION_BYTES).unwrap();
    let host_region = SharedRegion::map(&fd, REGION_BYTES).unwrap();
    let bells = Doorbells::new().unwrap();
    let host_bells = bells.copies().unwrap();
    let (harness_socket, host_socket) = UnixStream::pair().unwrap();
    let harness = RingEnds::new(Side::Harness, Arc::new(harness_region), bells, harness_socket).unwrap();
    let host = RingEnds::new(Side::Host, Arc::new(host_region), host_bells, host_socket).unwrap();
    (harness, host, fd)
  }

  /// A stream of `len` bytes no two nearby positions of which repeat.
  fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
      .map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
      })
      .collect()
  }

  fn read_exactly(reader: &RingReader, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut got = 0;
    while got < len {
      match reader.read_now(&mut out[got..], false) {
        Ok(0) => panic!("the stream ended after {got} of {len} bytes"),
        Ok(read) => got += read,
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => reader.wait().unwrap(),
        Err(error) => panic!("{error}"),
      }
    }
    out
  }

  #[test]
  fn bytes_cross_both_ways_in_order_across_the_rings_ends() {
    let (harness, host, _fd) = channel();
    // Lengths that wrap the ring at every offset class, and one longer
    // than the ring, which crosses in parts while the reader takes them.
    let lengths = [1, 5, 4096, RING_DATA_BYTES - 3, 7, RING_DATA_BYTES * 3 + 11, 64 * 1024];
    let sent: Vec<Vec<u8>> = lengths.iter().enumerate().map(|(at, len)| pattern(*len, at as u64 + 1)).collect();
    std::thread::scope(|scope| {
      let to_host = sent.clone();
      let writer = &harness.writer;
      scope.spawn(move || to_host.iter().for_each(|bytes| writer.write_all(bytes).unwrap()));
      let from_host = sent.clone();
      let host_writer = &host.writer;
      scope.spawn(move || from_host.iter().for_each(|bytes| host_writer.write_all(bytes).unwrap()));
      for bytes in &sent {
        assert!(read_exactly(&host.reader, bytes.len()) == *bytes, "to the host: {} bytes", bytes.len());
        assert!(read_exactly(&harness.reader, bytes.len()) == *bytes, "from the host: {} bytes", bytes.len());
      }
    });
  }

  /// Each publish says the CPU it was made on, for the reader's side to
  /// read; on a thread of its own, confined to one CPU at a time.
  #[test]
  fn a_writer_says_the_cpu_it_published_from() {
    let (harness, host, _fd) = channel();
    std::thread::scope(|scope| {
      scope.spawn(|| {
        // SAFETY: cpu_set_t values on this stack, of the size given; each
        // CPU set is one the thread was allowed.
        unsafe {
          let size = std::mem::size_of::<libc::cpu_set_t>();
          let mut allowed: libc::cpu_set_t = std::mem::zeroed();
          assert_eq!(libc::sched_getaffinity(0, size, &mut allowed), 0);
          for cpu in (0..libc::CPU_SETSIZE as usize).filter(|cpu| libc::CPU_ISSET(*cpu, &allowed)).take(2) {
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut one);
            assert_eq!(libc::sched_setaffinity(0, size, &one), 0);
            harness.writer.write_all(b"x").unwrap();
            assert_eq!(host.reader.writer_cpu(), cpu as u32);
            assert_eq!(read_exactly(&host.reader, 1), b"x");
          }
        }
      });
    });
  }

  #[test]
  fn a_peek_reads_without_consuming() {
    let (harness, host, _fd) = channel();
    harness.writer.write_all(b"hello").unwrap();
    let mut head = [0u8; 2];
    assert_eq!(host.reader.read_now(&mut head, true).unwrap(), 2);
    assert_eq!(&head, b"he");
    host.reader.consume(1);
    assert_eq!(read_exactly(&host.reader, 4), b"ello");
    assert_eq!(host.reader.read_now(&mut head, false).unwrap_err().kind(), io::ErrorKind::WouldBlock);
  }

  /// A write publishes, and a read takes, at most a piece: the reader has
  /// the first piece of a long write to copy while the writer copies the
  /// next, and the writer has room again once a piece is read. A peek,
  /// which takes nothing, sees all there is.
  #[test]
  fn long_bytes_are_published_and_read_a_piece_at_a_time() {
    let (harness, host, _fd) = channel();
    let long = pattern(RING_DATA_BYTES + PIECE_BYTES, 5);
    let mut out = vec![0u8; long.len()];
    assert_eq!(harness.writer.write_now(&long).unwrap(), PIECE_BYTES);
    assert_eq!(harness.writer.write_now(&long[PIECE_BYTES..]).unwrap(), PIECE_BYTES);
    assert_eq!(host.reader.read_now(&mut out, true).unwrap(), 2 * PIECE_BYTES);
    assert!(out[..2 * PIECE_BYTES] == long[..2 * PIECE_BYTES]);
    assert_eq!(host.reader.read_now(&mut out, false).unwrap(), PIECE_BYTES);
    let mut written = 2 * PIECE_BYTES;
    while written < long.len() {
      assert_eq!(harness.writer.write_now(&long[written..]).unwrap(), PIECE_BYTES);
      written += PIECE_BYTES;
    }
    let mut read = PIECE_BYTES;
    while read < long.len() {
      assert_eq!(host.reader.read_to_vec(&mut Vec::new(), usize::MAX).unwrap(), PIECE_BYTES);
      read += PIECE_BYTES;
    }
  }

  #[test]
  fn a_full_ring_says_would_block_and_its_writer_wakes_when_the_reader_takes_bytes() {
    let (harness, host, _fd) = channel();
    let full = pattern(RING_DATA_BYTES, 9);
    let mut written = 0;
    while written < full.len() {
      written += harness.writer.write_now(&full[written..]).unwrap();
    }
    assert_eq!(harness.writer.write_now(b"x").unwrap_err().kind(), io::ErrorKind::WouldBlock);
    std::thread::scope(|scope| {
      let writer = &harness.writer;
      // Blocks in wait() until the reader below takes a byte.
      let waiting = scope.spawn(move || writer.write_all(b"more"));
      assert_eq!(read_exactly(&host.reader, RING_DATA_BYTES), full);
      waiting.join().unwrap().unwrap();
    });
    assert_eq!(read_exactly(&host.reader, 4), b"more");
  }

  #[test]
  fn a_sleeping_reader_is_woken_by_the_bell_and_by_the_writers_end() {
    let (harness, host, _fd) = channel();
    std::thread::scope(|scope| {
      let reader = &host.reader;
      let woken = scope.spawn(move || read_exactly(reader, 3));
      harness.writer.write_all(b"abc").unwrap();
      assert_eq!(woken.join().unwrap(), b"abc");
    });
    // What a writer published before it went is read, then the end.
    harness.writer.write_all(b"last").unwrap();
    let RingEnds { reader: harness_reader, writer: harness_writer } = harness;
    drop(harness_reader);
    drop(harness_writer);
    assert_eq!(read_exactly(&host.reader, 4), b"last");
    let mut byte = [0u8; 1];
    host.reader.wait().unwrap();
    assert_eq!(host.reader.read_now(&mut byte, false).unwrap(), 0);
    assert_eq!(host.writer.write_now(b"x").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
  }

  /// The host's indices, as a hostile host writes them into its mapping.
  fn hostile_host_words(host: &RingEnds) -> (&AtomicU64, &AtomicU64) {
    (host.writer.ring.word64(HEAD), host.reader.ring.word64(TAIL))
  }

  #[test]
  fn a_hostile_writers_index_ends_the_channel_and_is_never_read_past() {
    let (harness, host, _fd) = channel();
    let (head, _) = hostile_host_words(&host);
    let mut buf = vec![0u8; 16];
    for claim in [RING_DATA_BYTES as u64 + 1, u64::MAX, u64::MAX / 2] {
      head.store(claim, Ordering::Release);
      let error = harness.reader.read_now(&mut buf, false).unwrap_err();
      assert_eq!(error.kind(), io::ErrorKind::InvalidData, "a head of {claim}");
      // A sleeper does not sleep on it: it returns, for the read to refuse.
      harness.reader.wait().unwrap();
    }
    // Backwards, after real bytes were read.
    head.store(0, Ordering::Release);
    host.writer.write_all(b"abcdef").unwrap();
    assert_eq!(read_exactly(&harness.reader, 6), b"abcdef");
    head.store(3, Ordering::Release);
    assert_eq!(harness.reader.read_now(&mut buf, false).unwrap_err().kind(), io::ErrorKind::InvalidData);
    // A whole ring's worth ahead is the most it may claim, and is read.
    head.store(6 + RING_DATA_BYTES as u64, Ordering::Release);
    let mut all = vec![0u8; RING_DATA_BYTES + 1];
    let mut read = 0;
    while read < RING_DATA_BYTES {
      read += harness.reader.read_now(&mut all[read..], false).unwrap();
    }
    assert_eq!(harness.reader.read_now(&mut all, false).unwrap_err().kind(), io::ErrorKind::WouldBlock);
  }

  #[test]
  fn a_hostile_readers_index_ends_the_channel() {
    let (harness, host, _fd) = channel();
    let (_, tail) = hostile_host_words(&host);
    harness.writer.write_all(b"abc").unwrap();
    // Claims to have read what was never written, or to be too far behind
    // (before the stream began).
    for claim in [4, u64::MAX, u64::MAX - RING_DATA_BYTES as u64] {
      tail.store(claim, Ordering::Release);
      assert_eq!(harness.writer.write_now(b"x").unwrap_err().kind(), io::ErrorKind::InvalidData, "a tail of {claim}");
      assert_eq!(harness.writer.wait().unwrap_err().kind(), io::ErrorKind::InvalidData);
    }
    // Claiming to have read exactly what was written frees the room; then
    // running backwards is refused.
    tail.store(3, Ordering::Release);
    let mut written = 0;
    while written < RING_DATA_BYTES {
      written += harness.writer.write_now(&vec![0; RING_DATA_BYTES - written]).unwrap();
    }
    tail.store(2, Ordering::Release);
    assert_eq!(harness.writer.write_now(b"x").unwrap_err().kind(), io::ErrorKind::InvalidData);
  }

  #[test]
  fn bytes_changed_after_they_were_published_change_only_what_the_reader_copies_next() {
    let (harness, host, _fd) = channel();
    host.writer.write_all(b"ok??").unwrap();
    let mut first = [0u8; 4];
    assert_eq!(harness.reader.read_now(&mut first, true).unwrap(), 4);
    // The host rewrites the published bytes.
    host.writer.ring.copy_in(0, b"NO!!");
    assert_eq!(&first, b"ok??", "the copy already taken is the reader's");
    assert_eq!(read_exactly(&harness.reader, 4), b"NO!!");
  }

  #[test]
  fn bytes_on_the_socket_wake_nobody_and_end_nothing() {
    let (harness, host, _fd) = channel();
    use std::io::Write;
    (&*host.writer.ring.socket).write_all(b"x").unwrap();
    host.writer.write_all(b"frame").unwrap();
    assert_eq!(read_exactly(&harness.reader, 5), b"frame");
  }

  #[test]
  fn a_shut_down_ends_the_channel_for_both_sides() {
    let (harness, host, _fd) = channel();
    harness.writer.shut_down();
    let mut byte = [0u8; 1];
    host.reader.wait().unwrap();
    assert_eq!(host.reader.read_now(&mut byte, false).unwrap(), 0);
    assert_eq!(host.writer.write_now(b"x").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(harness.writer.write_now(b"x").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(harness.reader.read_now(&mut byte, false).unwrap(), 0);
  }

  #[test]
  fn frames_cross_through_std_reads_and_writes() {
    use crate::frame::{read_frame, FromHost};
    let (harness, host, _fd) = channel();
    let messages = [FromHost::Started { run_id: 7 }, FromHost::Log { run_id: 7, text: vec![120; RING_DATA_BYTES] }];
    std::thread::scope(|scope| {
      let writer = &host.writer;
      let messages = &messages;
      scope.spawn(move || {
        for message in messages {
          let mut bytes = Vec::new();
          message.encode(&mut bytes);
          io::Write::write_all(&mut &*writer, &bytes).unwrap();
        }
      });
      let mut frame = Vec::new();
      for message in messages {
        assert!(read_frame(&mut &harness.reader, &mut frame).unwrap());
        assert_eq!(FromHost::decode(&frame).unwrap(), *message);
      }
    });
  }

  #[test]
  fn bytes_a_watching_thread_takes_wake_nobody_and_bytes_it_leaves_wake_the_owner() {
    let (harness, host, _fd) = channel();
    let reader = &harness.reader;
    let rang = || reader.ring.data.rang();
    // Nobody watches but the owner, awake: a write rings nobody.
    host.writer.write_all(b"a").unwrap();
    assert!(!rang());
    assert_eq!(read_exactly(reader, 1), b"a");
    // A waiting thread starts to spin; the owner goes to sleep (wait()'s
    // first steps, without the sleep itself).
    reader.watch();
    reader.owner_asleep.store(true, Ordering::SeqCst);
    reader.unwatch();
    // What the spinning thread takes rings nobody.
    host.writer.write_all(b"b").unwrap();
    assert!(!rang(), "a write rang the bell while a thread watched");
    let mut byte = [0u8; 1];
    assert_eq!(reader.read_now(&mut byte, false).unwrap(), 1);
    // What it will not take wakes the owner, once however often it looks.
    host.writer.write_all(b"c").unwrap();
    assert!(!rang());
    reader.nudge();
    reader.nudge();
    assert!(rang());
    assert!(!rang());
    // New bytes it leaves wake the owner again.
    host.writer.write_all(b"d").unwrap();
    reader.nudge();
    assert!(rang());
    // The spin ends with bytes unread: the owner is woken for them, and
    // from now on every write rings.
    reader.unwatch();
    assert!(rang());
    assert_eq!(read_exactly(reader, 2), b"cd");
    host.writer.write_all(b"e").unwrap();
    assert!(rang());
  }

  /// Frames for Node ring the Node bell, not the data bell, exactly while
  /// the reading side says its Node main thread listens and nobody watches
  /// the ring; bytes of any other write, and a long frame's first parts,
  /// ring the data bell as before.
  #[test]
  fn frames_for_node_ring_the_node_bell_while_node_listens() {
    let (harness, mut host, _fd) = channel();
    let (ringer, listener) = one_way_bell().unwrap();
    host.writer.node_bell = Some(ringer);
    let reader = &harness.reader;
    let data_rang = || reader.ring.data.rang();
    let node_rang = || listener.take_rings() > 0;
    let drain = |len| assert_eq!(read_exactly(reader, len).len(), len);
    // The owner asleep, nobody watching (wait()'s first steps).
    let sleep = || {
      reader.owner_asleep.store(true, Ordering::SeqCst);
      reader.unwatch();
    };
    let wake = || {
      reader.watch();
      reader.owner_asleep.store(false, Ordering::SeqCst);
    };
    sleep();
    // Node not listening: the data bell.
    host.writer.write_all_for_node(b"call").unwrap();
    assert!(data_rang() && !node_rang());
    reader.say_node_listens(true);
    host.writer.write_all_for_node(b"call").unwrap();
    assert!(node_rang() && !data_rang(), "a frame for Node rang the data bell while Node listened");
    // Any other write rings the data bell.
    host.writer.write_all(b"log").unwrap();
    assert!(data_rang() && !node_rang());
    // A frame longer than a publish: its first part wakes the reader (Node
    // takes only a frame whole), its last the Node bell.
    wake();
    drain(4 + 4 + 3);
    sleep();
    let long = vec![7u8; PIECE_BYTES + 10];
    host.writer.write_all_for_node(&long).unwrap();
    assert!(data_rang() && node_rang());
    // Someone watching (the linger, a look at a ring): no bell at all.
    reader.watch();
    host.writer.write_all_for_node(b"call").unwrap();
    assert!(!data_rang() && !node_rang());
    reader.unwatch();
    // ...until it stops watching with the bytes unread: the owner is woken.
    assert!(data_rang());
    // Node stops listening: the data bell again.
    reader.say_node_listens(false);
    host.writer.write_all_for_node(b"call").unwrap();
    assert!(data_rang() && !node_rang());
    wake();
    drain(long.len() + 8);
  }

  #[test]
  fn a_sleeping_owner_is_woken_for_bytes_that_came_while_a_spin_ended() {
    let (harness, host, _fd) = channel();
    std::thread::scope(|scope| {
      let reader = &harness.reader;
      reader.watch();
      // The owner sleeps while the spin watches; a write rings nobody;
      // the spin's end finds the bytes and wakes the owner.
      let owner = scope.spawn(move || read_exactly(reader, 1));
      while !reader.owner_asleep.load(Ordering::SeqCst) {
        std::thread::yield_now();
      }
      host.writer.write_all(b"z").unwrap();
      reader.unwatch();
      assert_eq!(owner.join().unwrap(), b"z");
    });
  }

  /// A hostile peer writing random indices and bytes into its words and
  /// its data, between every read and write of this side: each call answers
  /// with at most what was asked and a ring's length, or refuses, and this
  /// side's own count only moves as far as what it was handed.
  #[test]
  fn random_indices_and_bytes_from_the_other_side_are_bounded_or_refused() {
    let (harness, host, _fd) = channel();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      state
    };
    let (their_head, their_tail) = hostile_host_words(&host);
    let mut buf = vec![0u8; 2 * RING_DATA_BYTES];
    let mut grown = Vec::new();
    for _ in 0..20_000 {
      let pick = next();
      let near = harness.reader.tail.load(Ordering::Relaxed);
      // Values near this side's own counts (where the checks' edges are)
      // as often as anywhere.
      let value = match pick % 4 {
        0 => next(),
        1 => near.wrapping_add(next() % (3 * RING_DATA_BYTES as u64)),
        2 => near.wrapping_sub(next() % 64),
        _ => harness.writer.head.load(Ordering::Relaxed).wrapping_sub(next() % (2 * RING_DATA_BYTES as u64)),
      };
      match (pick >> 8) % 3 {
        0 => their_head.store(value, Ordering::Release),
        1 => their_tail.store(value, Ordering::Release),
        _ => host.writer.ring.copy_in(next(), &next().to_le_bytes()),
      }
      let want = (next() % (2 * RING_DATA_BYTES as u64)) as usize;
      let before = harness.reader.tail.load(Ordering::Relaxed);
      let result = match (pick >> 16) % 4 {
        0 => harness.reader.read_now(&mut buf[..want], false),
        1 => harness.reader.read_now(&mut buf[..want], true),
        2 => {
          grown.clear();
          harness.reader.read_to_vec(&mut grown, want)
        }
        _ => harness.writer.write_now(&buf[..want]),
      };
      match result {
        Ok(count) => assert!(count <= want.min(RING_DATA_BYTES), "{count} bytes for {want} asked"),
        Err(error) => {
          assert!(matches!(error.kind(), io::ErrorKind::InvalidData | io::ErrorKind::WouldBlock), "{error}")
        }
      }
      let moved = harness.reader.tail.load(Ordering::Relaxed).wrapping_sub(before);
      assert!(moved <= RING_DATA_BYTES as u64, "the reader's count moved by {moved}");
      assert!(grown.capacity() <= 2 * RING_DATA_BYTES.max(want), "{} bytes reserved", grown.capacity());
    }
  }
}
