//! A block of memory mapped on its own (one in huge pages at a huge
//! page's boundary): where a long text is written once on its way across the
//! channel ([`crate::text`]).
//!
//! Why: each long text crosses into fresh memory (a tool's reply read out
//! of Node's string on the harness's main thread; the host's copy of it),
//! since each is kept (in the run's history, in the program) while the
//! next arrives. The system allocator maps such a block page by page, and
//! would keep or return it by its own rules; a block of its own goes back
//! to the OS when dropped, and can be kept for reuse where that pays.
//!
//! Only huge pages the block covers whole are used: the mapping is the
//! block's length rounded up to a small page, so it holds no more memory
//! than its length, to the page; its tail is in small pages. Dropping it
//! unmaps it: the memory goes back to the OS at once.
//!
//! Except in a process that keeps freed blocks ([`keep_freed_blocks`]:
//! the harness, where every reply's text is one, and so is every long
//! argument string a tool is handed): dropped, a block is kept, up to
//! [`KEPT_BYTES`], for the next block it can hold, and unmapped once
//! unused for [`KEPT_FOR`] ([`release_unused_blocks`], called
//! periodically, and for all of them when the harness's runtime ends).
//! Each reply text of a run is kept until the run ends (its history), so a
//! run's long replies are each a new block, and the next run's find theirs
//! faulted in: writing a 1 MB reply into a fresh block
//! cost about a quarter of the harness's main thread's time for the call
//! (the kernel zeroing a huge page, and unmapping the tail after it).
//! There [`LargeBlock::shrink`] keeps the mapping (an unmap within a huge
//! page splits it): such a block holds what was written rounded up to a
//! huge page. A call's long argument crosses in a block (its frame's) that
//! a tool may keep as long as it likes: it comes back when Node collects
//! the tool's string, which Node does promptly because the harness reports
//! such strings as external memory (`binding_calls.rs`); kept, the next
//! long argument is read into pages faulted in already, where a fresh
//! block cost a fault per page: 1024 faults, ~2.8 ms, for each 4 MB
//! argument (perf, this VM), most of what the harness spent on the call.
//!
//! A block in huge pages ([`LargeBlock::in_huge_pages`], a reply's text:
//! written again and again) is advised to use transparent huge pages
//! (`MADV_HUGEPAGE`): faulted in once, in a few faults, then written into
//! again and again. A block in small pages ([`LargeBlock::new`]: a long
//! frame the harness reads, whose strings a tool is handed; the host's
//! copy of a call's string) is not. On the VMs this runs on, the
//! guest hands free memory back to its host in large runs (free page
//! reporting, `page_reporting_order=11` on the kernel's command line), a
//! fresh huge page is cut from such a run, and the kernel's zeroing of it
//! ran at ~0.4 GB/s, a third of the harness's reader's time for a call
//! with a 4 MB argument (perf), where small pages come from memory freed
//! a moment before: 10 calls with a 4 MB argument 96 -> 50 ms, alternating
//! in one process, other payload rows alike. Where transparent huge pages
//! are off (`/sys/kernel/mm/transparent_hugepage/enabled` is `never`) the
//! advice is ignored and the block is in small pages.

use std::ptr::NonNull;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lock::lock;

/// A transparent huge page on x86-64 (and on aarch64 with 4 KiB pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// The small page (4 KiB on every target this builds for; a larger page
/// only rounds a mapping further).
const PAGE: usize = 4096;

/// At most this many bytes of freed blocks are kept (by their mappings'
/// lengths, of which only the pages once written hold memory).
pub const KEPT_BYTES: usize = 128 << 20;

/// How long a freed block is kept unused before it is unmapped.
pub const KEPT_FOR: Duration = Duration::from_secs(1);

/// The blocks freed and kept (see the module doc).
static FREED: Mutex<FreedBlocks> = Mutex::new(FreedBlocks { keep: false, blocks: Vec::new(), bytes: 0 });

struct FreedBlocks {
  /// Whether this process keeps freed blocks at all.
  keep: bool,
  blocks: Vec<Freed>,
  /// The sum of `blocks`' lengths.
  bytes: usize,
}

/// A mapping no block owns any more, kept since `at`.
struct Freed {
  start: NonNull<u8>,
  len: usize,
  at: Instant,
}

// SAFETY: a kept mapping is owned by the list alone, and only moved out of
// it whole (into a block, or to be unmapped).
unsafe impl Send for Freed {}

/// From now on, blocks this process drops are kept for reuse (see the
/// module doc).
pub fn keep_freed_blocks() {
  lock(&FREED).keep = true;
}

/// Unmap the kept blocks unused since `now` less [`KEPT_FOR`].
pub fn release_unused_blocks(now: Instant) {
  let stale: Vec<Freed> = {
    let mut freed = lock(&FREED);
    let (stale, kept) = std::mem::take(&mut freed.blocks)
      .into_iter()
      .partition(|block| now.saturating_duration_since(block.at) >= KEPT_FOR);
    freed.blocks = kept;
    freed.bytes = freed.blocks.iter().map(|block| block.len).sum();
    stale
  };
  for block in stale {
    // SAFETY: a kept mapping is the list's alone, taken out of it above.
    unsafe { libc::munmap(block.start.as_ptr().cast(), block.len) };
  }
}

/// A kept block for `len` bytes (a whole number of pages): the shortest
/// that holds them, and not more than twice as long.
fn reuse(len: usize) -> Option<(NonNull<u8>, usize)> {
  let mut freed = lock(&FREED);
  let fits = |block: &&Freed| block.len >= len && block.len / 2 <= len;
  let (at, _) = freed.blocks.iter().enumerate().filter(|(_, block)| fits(block)).min_by_key(|(_, block)| block.len)?;
  let block = freed.blocks.swap_remove(at);
  freed.bytes -= block.len;
  Some((block.start, block.len))
}

/// An anonymous private mapping of `len` bytes (see the module doc).
pub struct LargeBlock {
  start: NonNull<u8>,
  /// The mapping's length: a whole number of small pages.
  len: usize,
}

// SAFETY: the block is plain memory owned by this value alone; access goes
// through `&self`/`&mut self`, so Rust's borrow rules order it.
unsafe impl Send for LargeBlock {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for LargeBlock {}

impl LargeBlock {
  /// A block of at least `len` bytes (`len` > 0) in small pages, or `None`
  /// when the OS refuses the mapping: zeroed, or a kept one, which holds
  /// what was last written into it (see the module doc). Unmapped when
  /// dropped, or kept where this process keeps freed blocks.
  pub fn new(len: usize) -> Option<LargeBlock> {
    LargeBlock::mapped(len, false)
  }

  /// [`LargeBlock::new`], in huge pages (see the module doc).
  pub fn in_huge_pages(len: usize) -> Option<LargeBlock> {
    LargeBlock::mapped(len, true)
  }

  /// A kept block that holds `len` bytes, or a fresh mapping: when `huge`,
  /// at a huge page's boundary and advised to use huge pages (a kept one
  /// is as it was made).
  fn mapped(len: usize, huge: bool) -> Option<LargeBlock> {
    let len = len.max(1).checked_next_multiple_of(PAGE)?;
    if let Some((start, len)) = reuse(len) {
      return Some(LargeBlock { start, len });
    }
    if !huge {
      // Small pages only (see the module doc): no boundary to slide to.
      return Some(LargeBlock { start: map_anonymous(len)?.cast(), len });
    }
    // Room to slide to a huge page's boundary; the excess is unmapped.
    let reserved = len.checked_add(HUGE_PAGE)?;
    let base = map_anonymous(reserved)?.as_ptr() as usize;
    let start = base.next_multiple_of(HUGE_PAGE);
    let end = start + len;
    // SAFETY: both ranges lie within the mapping just made (before `start`,
    // and from `end` to its end), which nothing else knows of.
    unsafe {
      if start > base {
        libc::munmap(base as *mut libc::c_void, start - base);
      }
      if base + reserved > end {
        libc::munmap(end as *mut libc::c_void, base + reserved - end);
      }
      // Advice only: refused where transparent huge pages are unsupported,
      // and then the block is in small pages.
      libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    Some(LargeBlock { start: NonNull::new(start as *mut u8)?, len })
  }

  /// Its bytes (zero until written, in a fresh block).
  pub fn bytes(&self) -> &[u8] {
    // SAFETY: the mapping is `len` readable bytes while `self` lives.
    unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
  }

  /// Its bytes, to write.
  pub fn bytes_mut(&mut self) -> &mut [u8] {
    // SAFETY: the mapping is `len` writable bytes, borrowed uniquely.
    unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
  }

  /// Keep only the first `len` bytes (to the page); the rest is unmapped,
  /// unless this process keeps freed blocks (see the module doc).
  pub fn shrink(&mut self, len: usize) {
    if lock(&FREED).keep {
      return;
    }
    let kept = len.max(1).next_multiple_of(PAGE);
    if kept < self.len {
      // SAFETY: the tail lies within this block's mapping, past what it
      // keeps, and nothing borrows it (`&mut self`).
      unsafe { libc::munmap(self.start.as_ptr().add(kept).cast(), self.len - kept) };
      self.len = kept;
    }
  }
}

/// A fresh anonymous private mapping of `len` bytes (zeroed, read and
/// write), or `None` when the OS refuses it: the memory of a `LargeBlock`,
/// and of the isolate host's large ArrayBuffer backing stores.
pub fn map_anonymous(len: usize) -> Option<NonNull<libc::c_void>> {
  // SAFETY: an anonymous private mapping at an address the OS chooses;
  // no existing memory is touched.
  let block = unsafe {
    libc::mmap(
      std::ptr::null_mut(),
      len,
      libc::PROT_READ | libc::PROT_WRITE,
      libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
      -1,
      0,
    )
  };
  if block == libc::MAP_FAILED {
    return None;
  }
  NonNull::new(block)
}

impl Drop for LargeBlock {
  fn drop(&mut self) {
    let mut freed = lock(&FREED);
    if freed.keep && freed.bytes + self.len <= KEPT_BYTES {
      freed.bytes += self.len;
      freed.blocks.push(Freed { start: self.start, len: self.len, at: Instant::now() });
      return;
    }
    // Not held across the unmap, which other blocks' drops need not wait for.
    drop(freed);
    // SAFETY: the mapping is this block's alone, and nothing uses it after.
    unsafe { libc::munmap(self.start.as_ptr().cast(), self.len) };
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_block_is_zeroed_and_writable_and_one_in_huge_pages_starts_at_a_huge_page() {
    for len in [1, PAGE, HUGE_PAGE, HUGE_PAGE + 1, 5 * HUGE_PAGE + 12345] {
      for huge in [false, true] {
        let mut block = if huge { LargeBlock::in_huge_pages(len) } else { LargeBlock::new(len) }.unwrap();
        if huge {
          assert_eq!(block.bytes().as_ptr() as usize % HUGE_PAGE, 0);
        }
        assert_eq!(block.bytes().len(), len.next_multiple_of(PAGE));
        assert!(block.bytes().iter().all(|byte| *byte == 0));
        block.bytes_mut().fill(7);
        assert!(block.bytes().iter().all(|byte| *byte == 7));
      }
    }
  }

  /// The `VmFlags` of the mapping that holds `address` (/proc/self/smaps).
  fn vm_flags(address: usize) -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
      if let Some((range, _)) = line.split_once(' ') {
        if let Some((start, end)) = range.split_once('-') {
          if let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16)) {
            inside = (start..end).contains(&address);
            continue;
          }
        }
      }
      if inside {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
          return flags.to_owned();
        }
      }
    }
    panic!("no mapping holds {address:#x}");
  }

  #[test]
  fn only_a_block_in_huge_pages_asks_for_them() {
    let small = LargeBlock::new(3 * HUGE_PAGE).unwrap();
    let huge = LargeBlock::in_huge_pages(3 * HUGE_PAGE).unwrap();
    assert!(!vm_flags(small.bytes().as_ptr() as usize).split_whitespace().any(|flag| flag == "hg"));
    // Where the kernel has transparent huge pages at all, the advice holds.
    if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
      assert!(vm_flags(huge.bytes().as_ptr() as usize).split_whitespace().any(|flag| flag == "hg"));
    }
  }

  #[test]
  fn a_shrunk_block_keeps_its_head_to_the_page() {
    let mut block = LargeBlock::new(8 * HUGE_PAGE).unwrap();
    block.bytes_mut()[..10].copy_from_slice(b"0123456789");
    let start = block.bytes().as_ptr();
    block.shrink(HUGE_PAGE + 10);
    assert_eq!(block.bytes().as_ptr(), start);
    assert_eq!(block.bytes().len(), HUGE_PAGE + PAGE);
    assert_eq!(&block.bytes()[..10], b"0123456789");
  }
}
