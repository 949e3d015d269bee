//! Freed blocks kept for reuse (`large_block::keep_freed_blocks`), in a
//! test process of their own: keeping is process-wide, and the crate's unit
//! tests expect fresh, zeroed blocks.

use std::time::Instant;

use dsh_protocol::large_block::{
  keep_freed_blocks, release_unused_blocks, LargeBlock, HUGE_PAGE, KEPT_BYTES, KEPT_FOR,
};

/// Whether `address` lies in a mapping of this process.
fn mapped(address: usize) -> bool {
  let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
  maps.lines().any(|line| {
    let range = line.split_whitespace().next().unwrap();
    let (start, end) = range.split_once('-').unwrap();
    let (start, end) = (usize::from_str_radix(start, 16).unwrap(), usize::from_str_radix(end, 16).unwrap());
    (start..end).contains(&address)
  })
}

/// `block` (3 huge pages long) with `tag` written at its start, shrunk to
/// one huge page and dropped: kept whole (an unmap within a huge page
/// splits it, and a kept block goes back as it was mapped) and mapped
/// still. Where it starts.
fn dropped_whole(mut block: LargeBlock, tag: &[u8; 5]) -> usize {
  block.bytes_mut()[..5].copy_from_slice(tag);
  block.shrink(HUGE_PAGE);
  assert_eq!(block.bytes().len(), 3 * HUGE_PAGE, "kept whole: an unmap within a huge page splits it");
  let at = block.bytes().as_ptr() as usize;
  drop(block);
  assert!(mapped(at), "kept, not unmapped");
  at
}

#[test]
fn freed_blocks_are_reused_by_fitting_ones_kept_within_bounds_and_let_go_once_unused() {
  keep_freed_blocks();
  let now = Instant::now();
  // Whatever an earlier block left kept goes first.
  release_unused_blocks(now + KEPT_FOR);

  // A dropped block's mapping is the next block's, of a length it holds
  // and at most twice as long, with what was written in it.
  let at = dropped_whole(LargeBlock::in_huge_pages(3 * HUGE_PAGE).unwrap(), b"first");
  let too_long = LargeBlock::in_huge_pages(3 * HUGE_PAGE + 1).unwrap();
  assert_ne!(too_long.bytes().as_ptr() as usize, at);
  let too_short = LargeBlock::in_huge_pages(HUGE_PAGE).unwrap();
  assert_ne!(too_short.bytes().as_ptr() as usize, at);
  let reused = LargeBlock::in_huge_pages(2 * HUGE_PAGE).unwrap();
  assert_eq!(reused.bytes().as_ptr() as usize, at);
  assert_eq!(&reused.bytes()[..5], b"first");
  drop((too_long, too_short, reused));

  // Kept blocks unused for KEPT_FOR are unmapped; a new block is fresh.
  release_unused_blocks(Instant::now() + KEPT_FOR);
  assert!(!mapped(at));
  let fresh = LargeBlock::in_huge_pages(2 * HUGE_PAGE).unwrap();
  assert!(fresh.bytes().iter().all(|byte| *byte == 0));
  drop(fresh);

  // A block in small pages (a long frame's, whose strings a tool may keep)
  // is kept alike, and taken again by a block of either kind.
  release_unused_blocks(Instant::now() + KEPT_FOR);
  let at = dropped_whole(LargeBlock::new(3 * HUGE_PAGE).unwrap(), b"small");
  let again = LargeBlock::new(3 * HUGE_PAGE).unwrap();
  assert_eq!((again.bytes().as_ptr() as usize, &again.bytes()[..5]), (at, &b"small"[..]));
  drop(again);
  let huge = LargeBlock::in_huge_pages(2 * HUGE_PAGE).unwrap();
  assert_eq!(huge.bytes().as_ptr() as usize, at);
  drop(huge);
  release_unused_blocks(Instant::now() + KEPT_FOR);
  assert!(!mapped(at));

  // No more than KEPT_BYTES are kept: the blocks dropped past it are unmapped.
  release_unused_blocks(Instant::now() + KEPT_FOR);
  let count = KEPT_BYTES / HUGE_PAGE + 2;
  let blocks: Vec<LargeBlock> = (0..count).map(|_| LargeBlock::in_huge_pages(HUGE_PAGE).unwrap()).collect();
  let starts: Vec<usize> = blocks.iter().map(|block| block.bytes().as_ptr() as usize).collect();
  drop(blocks);
  let kept = starts.iter().filter(|start| mapped(**start)).count();
  assert_eq!(kept, KEPT_BYTES / HUGE_PAGE);
  release_unused_blocks(Instant::now() + KEPT_FOR);
  assert!(starts.iter().all(|start| !mapped(*start)));
}
