//! An immutable UTF-8 text that is shared, not copied: a binding call's
//! reply as the harness holds it (in the run's history, and in the frame
//! that sends it, `frame::encode_replies`) and as the host hands it to the
//! program. A long one is written once, into a block of its own in huge
//! pages (`large_block`); a short one is a `String`.

use std::fmt;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::sync::Arc;

use crate::large_block::{LargeBlock, HUGE_PAGE};

/// See the module doc. Cloning shares it.
#[derive(Clone, Default)]
pub struct Text(Arc<Stored>);

enum Stored {
  Small(String),
  /// The first `len` bytes of `block` are UTF-8 (checked when written).
  Large {
    block: LargeBlock,
    len: usize,
  },
}

impl Default for Stored {
  fn default() -> Stored {
    Stored::Small(String::new())
  }
}

/// Bytes written as a text that are not UTF-8, or more than the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotText;

impl Text {
  /// A copy of `text`: in a block of its own when it is long.
  pub fn copy_of(text: &str) -> Text {
    if text.len() >= HUGE_PAGE {
      if let Some(mut block) = LargeBlock::new(text.len()) {
        block.bytes_mut()[..text.len()].copy_from_slice(text.as_bytes());
        return Text(Arc::new(Stored::Large { block, len: text.len() }));
      }
    }
    Text::from(text.to_owned())
  }

  /// The text `write` writes into a buffer of `room` bytes, returning how
  /// many it wrote; checked to be UTF-8. When it is expected to be long
  /// (`expected` bytes or so), the buffer is a block of its own (zeroed),
  /// cut to what was written; else a `String`'s (not initialised).
  ///
  /// # Safety
  /// `write` initialises the bytes at the start of the buffer that it
  /// reports it wrote (at most the buffer's length).
  pub unsafe fn write<E>(
    room: usize,
    expected: usize,
    write: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<usize, E>,
  ) -> Result<Result<Text, NotText>, E> {
    if expected >= HUGE_PAGE {
      if let Some(mut block) = LargeBlock::new(room) {
        let buffer = &mut block.bytes_mut()[..room];
        // SAFETY: a `u8` is a valid `MaybeUninit<u8>` with the same layout;
        // `write` only writes bytes (any of which is a valid `u8`).
        let len = write(unsafe { &mut *(buffer as *mut [u8] as *mut [MaybeUninit<u8>]) })?;
        let Some(bytes) = block.bytes().get(..len.min(room)) else { return Ok(Err(NotText)) };
        if len > room || std::str::from_utf8(bytes).is_err() {
          return Ok(Err(NotText));
        }
        block.shrink(len);
        return Ok(Ok(Text(Arc::new(Stored::Large { block, len }))));
      }
    }
    let mut bytes = Vec::with_capacity(room);
    let len = write(&mut bytes.spare_capacity_mut()[..room])?;
    if len > room {
      return Ok(Err(NotText));
    }
    // SAFETY: `write` initialised the first `len` bytes (the caller's
    // contract), within the capacity (checked above).
    unsafe { bytes.set_len(len) };
    bytes.shrink_to_fit();
    Ok(String::from_utf8(bytes).map(Text::from).map_err(|_| NotText))
  }

  pub fn as_str(&self) -> &str {
    match &*self.0 {
      Stored::Small(text) => text,
      Stored::Large { block, len } => {
        let bytes = block.bytes().get(..*len).unwrap_or_default();
        // SAFETY: a Large text's first `len` bytes were checked to be
        // UTF-8 when they were written (`write`) or copied from a `str`
        // (`copy_of`), and a block is never written again after.
        unsafe { std::str::from_utf8_unchecked(bytes) }
      }
    }
  }
}

impl From<String> for Text {
  fn from(text: String) -> Text {
    Text(Arc::new(Stored::Small(text)))
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

impl AsRef<[u8]> for Text {
  fn as_ref(&self) -> &[u8] {
    self.as_str().as_bytes()
  }
}

impl PartialEq for Text {
  fn eq(&self, other: &Text) -> bool {
    self.as_str() == other.as_str()
  }
}

impl Eq for Text {}

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
      for expected in [0, text.len()] {
        let written = write(text.len() * 3 + 1, expected, text.as_bytes(), text.len());
        assert_eq!(written, Ok(Ok(copied.clone())));
      }
      assert_eq!(copied.clone().as_ptr(), copied.as_ptr());
    }
  }

  /// `Text::write` with a writer that writes `bytes` and reports `len`.
  fn write(room: usize, expected: usize, bytes: &[u8], len: usize) -> Result<Result<Text, NotText>, ()> {
    // SAFETY: the writer initialises the first `bytes.len()` bytes, and
    // every test's `len` is at most that (or past the room, refused).
    unsafe {
      Text::write(room, expected, |buffer: &mut [MaybeUninit<u8>]| {
        for (slot, byte) in buffer.iter_mut().zip(bytes) {
          slot.write(*byte);
        }
        Ok(len)
      })
    }
  }

  #[test]
  fn writing_refuses_what_is_not_utf8_or_overruns_and_passes_the_writers_failure() {
    for (room, expected) in [(16, 0), (HUGE_PAGE, HUGE_PAGE)] {
      assert_eq!(write(room, expected, &[0xff], 1), Ok(Err(NotText)));
      assert_eq!(write(room, expected, &[], room + 1), Ok(Err(NotText)));
      // A character cut in the middle is not UTF-8.
      assert_eq!(write(room, expected, &"é".as_bytes()[..1], 1), Ok(Err(NotText)));
      // SAFETY: the writer writes nothing and reports nothing written.
      let failed = unsafe { Text::write(room, expected, |_: &mut [MaybeUninit<u8>]| Err::<usize, _>("failed")) };
      assert_eq!(failed, Err("failed"));
    }
  }
}
