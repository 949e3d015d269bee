//! Immutable bytes that are shared, not copied ([`SharedBytes`]), and
//! UTF-8 texts made of them ([`Text`]): what crosses the channel long (a
//! tool's reply, a call's one-byte string argument) as each side holds it,
//! once: the harness in the run's history and in the frame that sends it
//! (`frame::SplicedFrames`) and, for a call's string in a long frame, in
//! the block that frame was read into ([`BlockFrame`]) while its tool
//! holds it; the host in the frame that sends a call and, for a reply, in
//! the buffer its frame was read into ([`FrameBuffer`]) until the program
//! has it. Long ones written here go into a block of their own
//! (`large_block`: a reply's text in huge pages); short ones are a `Vec`'s.

use std::fmt;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::sync::Arc;

use crate::large_block::{LargeBlock, HUGE_PAGE};

/// See the module doc. Cloning shares them.
#[derive(Clone, Default)]
pub struct SharedBytes(Arc<Stored>);

enum Stored {
  Small(Vec<u8>),
  /// The first `len` bytes of `block`.
  Large {
    block: LargeBlock,
    len: usize,
  },
  /// `len` bytes of a frame from `start`: a long text decoded out of the
  /// frame that carried it, in the reader's buffer ([`FrameBuffer`]).
  InFrame {
    frame: Arc<Vec<u8>>,
    start: usize,
    len: usize,
  },
  /// `len` bytes from `start` of a long frame read whole into a block of
  /// its own ([`BlockFrame`]).
  InBlock {
    frame: Arc<LargeBlock>,
    start: usize,
    len: usize,
  },
}

impl Default for Stored {
  fn default() -> Stored {
    Stored::Small(Vec::new())
  }
}

impl SharedBytes {
  /// A copy of `bytes`: in a block of its own when they are long.
  pub fn copy_of(bytes: &[u8]) -> SharedBytes {
    if bytes.len() >= HUGE_PAGE {
      if let Some(mut block) = LargeBlock::new(bytes.len()) {
        block.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        return SharedBytes(Arc::new(Stored::Large { block, len: bytes.len() }));
      }
    }
    SharedBytes::from(bytes.to_vec())
  }

  /// The bytes `write` writes into a buffer of `room` bytes, returning how
  /// many it wrote (`None`: more than the room). When the room covers a
  /// huge page, the buffer is a block of its own in huge pages (see
  /// `large_block`), cut to what was written: what is written first lands
  /// in a huge page, one fault per 2 MiB instead of one per 4 KiB (a room
  /// of three bytes a unit for a text of 1 MiB, say, which fresh small
  /// pages cost a fault each), or in a kept block's, faulted in already.
  /// Else the buffer is a `Vec`'s (not initialised).
  ///
  /// # Safety
  /// `write` initialises the bytes at the start of the buffer that it
  /// reports it wrote, and writes no uninitialised value anywhere in it (a
  /// block's memory is plain bytes, read as such after).
  pub unsafe fn write<E>(
    room: usize,
    write: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<usize, E>,
  ) -> Result<Option<SharedBytes>, E> {
    if room >= HUGE_PAGE {
      if let Some(mut block) = LargeBlock::in_huge_pages(room) {
        let buffer = &mut block.bytes_mut()[..room];
        // SAFETY: a `u8` is a valid `MaybeUninit<u8>` with the same layout,
        // and `write` writes only initialised bytes into it (the caller's
        // contract), so the block stays plain bytes.
        let len = write(unsafe { &mut *(buffer as *mut [u8] as *mut [MaybeUninit<u8>]) })?;
        if len > room {
          return Ok(None);
        }
        block.shrink(len);
        return Ok(Some(SharedBytes(Arc::new(Stored::Large { block, len }))));
      }
    }
    let mut bytes = Vec::with_capacity(room);
    let len = write(&mut bytes.spare_capacity_mut()[..room])?;
    if len > room {
      return Ok(None);
    }
    // SAFETY: `write` initialised the first `len` bytes (the caller's
    // contract), within the capacity (checked above).
    unsafe { bytes.set_len(len) };
    bytes.shrink_to_fit();
    Ok(Some(SharedBytes::from(bytes)))
  }

  pub fn as_bytes(&self) -> &[u8] {
    match &*self.0 {
      Stored::Small(bytes) => bytes,
      Stored::Large { block, len } => block.bytes().get(..*len).unwrap_or_default(),
      Stored::InFrame { frame, start, len } => frame.get(*start..*start + *len).unwrap_or_default(),
      Stored::InBlock { frame, start, len } => frame.bytes().get(*start..*start + *len).unwrap_or_default(),
    }
  }
}

/// A frame whose long texts and strings are decoded as parts of it
/// ([`SharedFrame::share`]) rather than copied out of it.
pub trait SharedFrame {
  /// The frame's bytes (its tag and fields).
  fn frame(&self) -> &[u8];
  /// `len` bytes of the frame from `start`, shared with it; `None` when
  /// they are not all in it.
  fn share(&self, start: usize, len: usize) -> Option<SharedBytes>;
  /// Whether a part of `len` bytes is worth sharing rather than copying,
  /// given what sharing it keeps.
  fn worth_sharing(&self, len: usize) -> bool;
}

/// A channel reader's buffers for the frames it reads, whose long texts
/// are decoded as parts of them ([`SharedFrame::share`]) instead of copied
/// out: a long reply then reaches its run in the bytes it arrived in. Two
/// buffers, taken in turn: a frame goes into one that nothing decoded from
/// an earlier frame still holds (a run takes its reply into V8 as soon as
/// it wakes, so with replies arriving one after another, one is in a run's
/// hands while the next is read into the other), and into a fresh one only
/// while both are held. A fresh buffer grows in fresh small pages as the
/// frame arrives: slower than reading into one already written.
#[derive(Default)]
pub struct FrameBuffer {
  current: Arc<Vec<u8>>,
  spare: Arc<Vec<u8>>,
}

impl FrameBuffer {
  /// The buffer to read the next frame into (see the type's doc).
  pub fn next_frame(&mut self) -> &mut Vec<u8> {
    if Arc::get_mut(&mut self.current).is_none() {
      if Arc::get_mut(&mut self.spare).is_some() {
        std::mem::swap(&mut self.current, &mut self.spare);
      } else {
        // Both held: the held spare is left to whoever holds it.
        self.spare = std::mem::take(&mut self.current);
      }
    }
    // Not shared by now, so this never copies.
    Arc::make_mut(&mut self.current)
  }
}

/// Its frame is the one read into it last.
impl SharedFrame for FrameBuffer {
  fn frame(&self) -> &[u8] {
    &self.current
  }

  fn share(&self, start: usize, len: usize) -> Option<SharedBytes> {
    self.current.get(start..start.checked_add(len)?)?;
    Some(SharedBytes(Arc::new(Stored::InFrame { frame: self.current.clone(), start, len })))
  }

  /// Always: the host's run takes its reply into V8 as soon as it wakes,
  /// and lets the part go.
  fn worth_sharing(&self, _len: usize) -> bool {
    true
  }
}

/// A long frame read whole into a block of its own (by the harness's
/// reader of a host's channel: `inbox::Inbox::next_in_blocks`), whose long
/// strings are decoded as parts of it: a tool then reads a call's long
/// argument in the bytes it arrived in, one copy out of the channel, where
/// reading the frame into the reader's kept `Vec` made two (into the
/// `Vec`, then out of it into a block of the string's own). A block per
/// frame, not read into again while anything shares it (an external string
/// a tool holds until Node collects it, a run's history): let go, the
/// harness keeps it for a later long frame (`large_block`), whose bytes
/// then land in pages faulted in already, where a `Vec` read into afresh
/// would fault in small pages and grow by copying.
pub struct BlockFrame {
  block: Arc<LargeBlock>,
  len: usize,
}

impl BlockFrame {
  /// A block for a frame of `len` bytes (> 0); `None` when the OS refuses
  /// the mapping. A fresh mapping costs only the pages written (a length
  /// a host claims and never sends costs nothing); a kept one is memory
  /// the harness holds anyway.
  pub fn new(len: usize) -> Option<BlockFrame> {
    Some(BlockFrame { block: Arc::new(LargeBlock::new(len)?), len })
  }

  /// Room for the frame's bytes, to read it into; `None` once a part of it
  /// is shared.
  pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
    let len = self.len;
    Arc::get_mut(&mut self.block).and_then(|block| block.bytes_mut().get_mut(..len))
  }
}

impl SharedFrame for BlockFrame {
  fn frame(&self) -> &[u8] {
    self.block.bytes().get(..self.len).unwrap_or_default()
  }

  fn share(&self, start: usize, len: usize) -> Option<SharedBytes> {
    self.frame().get(start..start.checked_add(len)?)?;
    Some(SharedBytes(Arc::new(Stored::InBlock { frame: self.block.clone(), start, len })))
  }

  /// A part kept keeps the whole block mapped (a tool may keep a call's
  /// argument as long as it likes): only a part of at least half the
  /// frame is shared, so what is kept holds at most twice its own size.
  fn worth_sharing(&self, len: usize) -> bool {
    len.saturating_mul(2) >= self.len
  }
}

impl From<Vec<u8>> for SharedBytes {
  fn from(bytes: Vec<u8>) -> SharedBytes {
    SharedBytes(Arc::new(Stored::Small(bytes)))
  }
}

impl Deref for SharedBytes {
  type Target = [u8];

  fn deref(&self) -> &[u8] {
    self.as_bytes()
  }
}

impl AsRef<[u8]> for SharedBytes {
  fn as_ref(&self) -> &[u8] {
    self.as_bytes()
  }
}

impl PartialEq for SharedBytes {
  fn eq(&self, other: &SharedBytes) -> bool {
    self.as_bytes() == other.as_bytes()
  }
}

impl Eq for SharedBytes {}

impl fmt::Debug for SharedBytes {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt::Debug::fmt(self.as_bytes(), f)
  }
}

/// [`SharedBytes`] that are UTF-8 (checked when made). Cloning shares it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Text(SharedBytes);

/// Bytes taken as a text that are not UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotText;

impl Text {
  /// A copy of `text`: in a block of its own when it is long.
  pub fn copy_of(text: &str) -> Text {
    Text(SharedBytes::copy_of(text.as_bytes()))
  }

  /// `bytes`, if they are UTF-8.
  pub fn checked(bytes: SharedBytes) -> Result<Text, NotText> {
    match std::str::from_utf8(&bytes) {
      Ok(_) => Ok(Text(bytes)),
      Err(_) => Err(NotText),
    }
  }

  /// Its bytes, shared.
  pub fn shared_bytes(&self) -> &SharedBytes {
    &self.0
  }

  pub fn as_str(&self) -> &str {
    // SAFETY: a Text's bytes were checked to be UTF-8 when it was made
    // (`checked`, `write`), or came from a `str` (`copy_of`,
    // `From<String>`), and shared bytes are never written again (a frame's
    // buffer only once nothing shares it: `FrameBuffer::next_frame`).
    unsafe { std::str::from_utf8_unchecked(self.0.as_bytes()) }
  }
}

impl From<String> for Text {
  fn from(text: String) -> Text {
    Text(SharedBytes::from(text.into_bytes()))
  }
}

impl From<&str> for Text {
  fn from(text: &str) -> Text {
    Text::copy_of(text)
  }
}

impl Deref for Text {
  type Target = str;

  fn deref(&self) -> &str {
    self.as_str()
  }
}

impl fmt::Debug for Text {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt::Debug::fmt(self.as_str(), f)
  }
}

impl serde::Serialize for Text {
  fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(self)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn short_and_long_texts_read_back_as_written_and_clones_share() {
    let long = "é".repeat(HUGE_PAGE);
    for text in ["", "a reply", long.as_str()] {
      let copied = Text::copy_of(text);
      assert_eq!(copied.as_str(), text);
      // Room in a `Vec`, and room past a huge page (a block).
      for room in [text.len() * 3 + 1, text.len() + HUGE_PAGE] {
        let written = write(room, text.as_bytes(), text.len());
        assert_eq!(written, Ok(Ok(copied.clone())));
      }
      assert_eq!(copied.clone().as_ptr(), copied.as_ptr());
    }
  }

  /// A writer that writes `bytes` and reports `len`.
  fn writer(bytes: &[u8], len: usize) -> impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<usize, ()> + '_ {
    move |buffer| {
      for (slot, byte) in buffer.iter_mut().zip(bytes) {
        slot.write(*byte);
      }
      Ok(len)
    }
  }

  /// Bytes written with [`writer`] (`SharedBytes::write`), then taken as
  /// a text (`Text::checked`), as the harness reads a reply's text: more
  /// than the room is not a text either.
  fn write(room: usize, bytes: &[u8], len: usize) -> Result<Result<Text, NotText>, ()> {
    // SAFETY: the writer initialises the first `bytes.len()` bytes, and
    // every test's `len` is at most that (or past the room, refused).
    let written = unsafe { SharedBytes::write(room, writer(bytes, len)) }?;
    Ok(written.ok_or(NotText).and_then(Text::checked))
  }

  #[test]
  fn shared_bytes_read_back_as_written_short_and_long() {
    let long: Vec<u8> = (0..HUGE_PAGE + 7).map(|at| at as u8).collect();
    for bytes in [&[][..], &[0xff, 0, 0xe9][..], &long[..]] {
      let copied = SharedBytes::copy_of(bytes);
      assert_eq!(copied.as_bytes(), bytes);
      // SAFETY: the writer initialises exactly the bytes it reports.
      let written = unsafe { SharedBytes::write(bytes.len(), writer(bytes, bytes.len())) };
      assert_eq!(written, Ok(Some(copied)));
    }
  }

  #[test]
  fn writing_refuses_what_is_not_utf8_or_overruns_and_passes_the_writers_failure() {
    for room in [16, HUGE_PAGE] {
      assert_eq!(write(room, &[0xff], 1), Ok(Err(NotText)));
      assert_eq!(write(room, &[], room + 1), Ok(Err(NotText)));
      // A character cut in the middle is not UTF-8.
      assert_eq!(write(room, &"é".as_bytes()[..1], 1), Ok(Err(NotText)));
      // SAFETY: the writer writes nothing and reports nothing written.
      let failed = unsafe { SharedBytes::write(room, |_: &mut [MaybeUninit<u8>]| Err::<usize, _>("failed")) };
      assert_eq!(failed, Err("failed"));
    }
  }
}
