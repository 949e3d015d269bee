//! The bound on `structuredClone`'s serialized copy while V8 writes it.
//!
//! V8's serializer writes the value into one buffer it grows through its
//! delegate, and rusty_v8's delegate grows it with Rust's global
//! allocator, which asks no one: a string is written each time the value
//! refers to it, so `structuredClone(new Array(50).fill('x'.repeat(8 <<
//! 20)))` made a 400 MiB copy under a 64 MiB external cap, and more
//! references made more. The isolate host's global allocator is
//! [`CopyBoundingAllocator`]: while a clone is written on a thread, a growth
//! of its buffer that would take the copies being written there past a
//! ceiling is refused (null), and V8 gives up the clone ("out of memory";
//! `structured_clone.rs` then stops the run at the external cap).
//!
//! Which block is the buffer: the one allocation on the thread while the
//! serializer writes its header ([`SerializedCopy::find_buffer`]: V8 makes
//! its buffer there, before any JS can run), then whatever `realloc` of
//! that block returns. Only that block is ever refused: a refused
//! allocation anywhere else (an op a getter calls meanwhile) would abort
//! the process. (That V8 makes its buffer there, through the delegate, is
//! V8's and rusty_v8's way today: were it to change, the bound would be
//! gone, and `__test__/memory.test.ts`'s clone of one string referred to
//! 50 times would fail on the host's growth.)
//!
//! The ceiling depends on the value alone (never on garbage a collection
//! would free), so a clone refused once is refused each time it is
//! executed: twice the cap, for all the copies being written on the thread
//! at once (a getter may clone while its own object is written), because
//! V8 grows a buffer to twice its size and 64 bytes, so a copy written
//! alone whose bytes fit the cap (with 64 to spare) is never refused;
//! copies written at once share the ceiling. Once written, the copy's
//! bytes are held against the cap itself (`structured_clone.rs`), as any
//! other memory a run holds outside the heap.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The copy being written on this thread, if any.
#[derive(Clone, Copy)]
struct Watch {
  /// Whether a copy is being written (the rest is meaningless if not).
  active: bool,
  /// The serializer is writing its header: its next allocation is the buffer.
  finding: bool,
  /// The buffer, once found (null before).
  buffer: *mut u8,
  /// The buffer's size, as last grown.
  size: usize,
  /// What the copies being written around this one hold (a getter of
  /// theirs is writing this one).
  enclosing: usize,
  /// What all of them may hold together.
  ceiling: usize,
  /// The total a refused growth asked for.
  refused: Option<usize>,
}

impl Watch {
  const NONE: Watch = Watch {
    active: false,
    finding: false,
    buffer: std::ptr::null_mut(),
    size: 0,
    enclosing: 0,
    ceiling: 0,
    refused: None,
  };
}

thread_local! {
  // A `Cell` of a `Copy` value, initialized by a constant: reading it
  // never allocates and needs no destructor, so the allocator may read it
  // at any time, even as the thread ends.
  static WATCH: Cell<Watch> = const { Cell::new(Watch::NONE) };
}

fn update(change: impl FnOnce(&mut Watch)) {
  WATCH.with(|cell| {
    let mut watch = cell.get();
    change(&mut watch);
    cell.set(watch);
  });
}

/// One clone's copy, watched on this thread from [`SerializedCopy::watch`]
/// until dropped (which gives the thread back to the copy it interrupted,
/// if any).
pub struct SerializedCopy {
  outer: Watch,
}

impl SerializedCopy {
  /// Watch the copy a serializer made after this is about to write, all
  /// copies written on the thread at once held to `ceiling` bytes.
  pub fn watch(ceiling: usize) -> Self {
    let outer = WATCH.with(Cell::get);
    let enclosing = if outer.active { outer.enclosing.saturating_add(outer.size) } else { 0 };
    WATCH.with(|cell| cell.set(Watch { active: true, enclosing, ceiling, ..Watch::NONE }));
    SerializedCopy { outer }
  }

  /// Call `write_header` (the serializer's first write, which makes its
  /// buffer) with the buffer looked for.
  pub fn find_buffer<T>(&self, write_header: impl FnOnce() -> T) -> T {
    update(|watch| watch.finding = true);
    let written = write_header();
    update(|watch| watch.finding = false);
    written
  }

  /// The total a refused growth asked for, if one was refused.
  pub fn refused(&self) -> Option<usize> {
    WATCH.with(Cell::get).refused
  }
}

impl Drop for SerializedCopy {
  fn drop(&mut self) {
    WATCH.with(|cell| cell.set(self.outer));
  }
}

/// The isolate host's global allocator: the system's, with the growth of a
/// clone's serialized copy held to its ceiling (see the module's comment).
pub struct CopyBoundingAllocator;

impl CopyBoundingAllocator {
  /// Make (`old` null) or grow the watched buffer to `size` bytes by
  /// `allocate`, unless that takes the copies past their ceiling.
  fn grow(mut watch: Watch, size: usize, allocate: impl FnOnce() -> *mut u8) -> *mut u8 {
    let total = watch.enclosing.saturating_add(size);
    if total > watch.ceiling {
      watch.refused = Some(total);
      WATCH.with(|cell| cell.set(watch));
      return std::ptr::null_mut();
    }
    let block = allocate();
    if !block.is_null() {
      watch.buffer = block;
      watch.size = size;
      WATCH.with(|cell| cell.set(watch));
    }
    block
  }
}

// SAFETY: every block is the system allocator's, made and given back by it
// with the layout the caller gave; a refusal is a null, which GlobalAlloc
// allows for any request.
unsafe impl GlobalAlloc for CopyBoundingAllocator {
  unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
    let watch = WATCH.with(Cell::get);
    if watch.active && watch.finding {
      // Found once: what else the header's write allocates is not the buffer.
      let watch = Watch { finding: false, ..watch };
      // SAFETY: the caller's layout, passed on (GlobalAlloc::alloc's contract).
      return Self::grow(watch, layout.size(), || unsafe { System.alloc(layout) });
    }
    // SAFETY: as above.
    unsafe { System.alloc(layout) }
  }

  unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
    // SAFETY: the caller's layout, passed on.
    unsafe { System.alloc_zeroed(layout) }
  }

  unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
    // SAFETY: `ptr` was made by the system allocator (every block is).
    unsafe { System.dealloc(ptr, layout) }
  }

  unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    let watch = WATCH.with(Cell::get);
    if watch.active && !ptr.is_null() && ptr == watch.buffer {
      // SAFETY: the caller's block and layout, passed on (GlobalAlloc::realloc's contract).
      return Self::grow(watch, new_size, || unsafe { System.realloc(ptr, layout, new_size) });
    }
    // SAFETY: as above.
    unsafe { System.realloc(ptr, layout, new_size) }
  }
}

#[cfg(test)]
mod tests {
  use std::alloc::{alloc, dealloc, realloc, Layout};

  use super::{CopyBoundingAllocator, SerializedCopy};

  // The test binary's allocator is the host's, so these are its own
  // allocations, as V8's delegate makes them (`alloc`, then `realloc`).
  #[global_allocator]
  static ALLOCATOR: CopyBoundingAllocator = CopyBoundingAllocator;

  fn bytes(size: usize) -> Layout {
    Layout::from_size_align(size, 1).expect("a layout of bytes")
  }

  /// The buffer a serializer's header makes, as rusty_v8's delegate makes it.
  fn make_buffer(copy: &SerializedCopy) -> *mut u8 {
    // SAFETY: a non-zero layout; given back by each test.
    copy.find_buffer(|| unsafe { alloc(bytes(66)) })
  }

  #[test]
  fn the_buffer_grows_to_its_ceiling_and_no_further() {
    let copy = SerializedCopy::watch(4096);
    let buffer = make_buffer(&copy);
    assert!(!buffer.is_null());
    // SAFETY: `buffer` is that block, of 66 bytes.
    let grown = unsafe { realloc(buffer, bytes(66), 4096) };
    assert!(!grown.is_null());
    assert_eq!(copy.refused(), None);
    // SAFETY: `grown` is that block, now of 4096 bytes.
    let refused = unsafe { realloc(grown, bytes(4096), 4097) };
    assert!(refused.is_null());
    assert_eq!(copy.refused(), Some(4097));
    // Refused, the block is as it was, and still the caller's.
    // SAFETY: `grown`, of 4096 bytes, untouched by the refused realloc.
    unsafe { dealloc(grown, bytes(4096)) };
  }

  #[test]
  fn only_the_buffer_is_ever_refused() {
    let copy = SerializedCopy::watch(128);
    let buffer = make_buffer(&copy);
    // A getter's op allocating meanwhile, far past the ceiling, as it
    // pleases: never the buffer.
    let other = vec![1u8; 1 << 20];
    let mut grows = vec![0u8; 8];
    grows.resize(1 << 20, 1);
    assert_eq!(other.len() + grows.len(), 2 << 20);
    assert_eq!(copy.refused(), None);
    // SAFETY: `buffer`, of 66 bytes.
    unsafe { dealloc(buffer, bytes(66)) };
  }

  #[test]
  fn copies_written_at_once_share_the_ceiling_and_each_gives_the_thread_back() {
    let outer = SerializedCopy::watch(4096);
    let outer_buffer = make_buffer(&outer);
    // SAFETY: that block, of 66 bytes.
    let outer_buffer = unsafe { realloc(outer_buffer, bytes(66), 3000) };
    assert!(!outer_buffer.is_null());
    {
      // A getter clones while the outer copy is written.
      let inner = SerializedCopy::watch(4096);
      let inner_buffer = make_buffer(&inner);
      // SAFETY: that block, of 66 bytes.
      let refused = unsafe { realloc(inner_buffer, bytes(66), 2000) };
      assert!(refused.is_null());
      assert_eq!(inner.refused(), Some(5000));
      // SAFETY: `inner_buffer`, untouched by the refused realloc.
      unsafe { dealloc(inner_buffer, bytes(66)) };
    }
    // The outer copy is watched again, untouched by the inner's refusal.
    assert_eq!(outer.refused(), None);
    // SAFETY: `outer_buffer`, of 3000 bytes.
    let grown = unsafe { realloc(outer_buffer, bytes(3000), 4000) };
    assert!(!grown.is_null());
    // SAFETY: `grown`, of 4000 bytes.
    unsafe { dealloc(grown, bytes(4000)) };
  }

  #[test]
  fn a_buffer_whose_watch_ended_grows_as_its_owner_likes() {
    let copy = SerializedCopy::watch(128);
    let buffer = make_buffer(&copy);
    drop(copy);
    // Its owner now (a Vec, in the op) may grow it as it likes.
    // SAFETY: `buffer`, of 66 bytes.
    let grown = unsafe { realloc(buffer, bytes(66), 1 << 16) };
    assert!(!grown.is_null());
    // SAFETY: `grown`, of 64 KiB.
    unsafe { dealloc(grown, bytes(1 << 16)) };
  }
}
