//! ICU's heap, counted per program.
//!
//! `Intl.*` objects, `String.prototype.normalize`, `localeCompare`,
//! `toLocale*String` and friends are ICU objects and buffers that V8 holds
//! outside its heap, and V8 reports them to nobody: an `Intl.Collator`
//! costs ~100 bytes of heap and kilobytes of ICU memory, and
//! `Intl.Segmenter#segment` copies its whole input. ICU lets its embedder
//! supply its allocator (`u_setMemoryFunctions`, once, before ICU's first
//! use), so every ICU allocation made while a program runs on a thread is
//! charged to that program's external-memory account, and given back when
//! it is freed, on whichever thread and whenever that happens.
//!
//! Each block carries a header naming the account it was charged to (or
//! none), and the account is kept alive by the blocks charged to it: ICU
//! caches some objects for the life of the process, and their frees must
//! still find a valid account.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;

use crate::external_memory::ExternalMemory;

/// ICU's allocator callbacks (`UMemAllocFn`, `UMemReallocFn`, `UMemFreeFn`).
type AllocFn = unsafe extern "C" fn(context: *const c_void, size: usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(context: *const c_void, block: *mut c_void, size: usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(context: *const c_void, block: *mut c_void);

unsafe extern "C" {
  // ICU renames its C API with its major version; the `v8` crate's ICU is
  // 77 (a newer crate with another ICU fails to link here, loudly).
  fn u_setMemoryFunctions_77(
    context: *const c_void,
    alloc: Option<AllocFn>,
    realloc: Option<ReallocFn>,
    free: Option<FreeFn>,
    status: *mut i32,
  );
}

/// The header in front of every block: the account charged (null if none)
/// and the size the caller asked for. Its size keeps the block aligned as
/// malloc's own blocks are (16 bytes on x86-64).
#[repr(C)]
struct Header {
  account: *const ExternalMemory,
  size: usize,
}

const HEADER: usize = std::mem::size_of::<Header>();
const _: () = assert!(HEADER == 16);

thread_local! {
  /// The account ICU allocations on this thread are charged to. A raw
  /// pointer, valid while a [`ChargeIcu`] guard of this thread holds it.
  static CURRENT: Cell<*const ExternalMemory> = const { Cell::new(std::ptr::null()) };
}

/// Route ICU's allocations through this module. Must run before ICU is
/// first used in the process, i.e. before V8 is initialised.
pub fn install() -> Result<(), String> {
  let mut status = 0i32;
  // SAFETY: called once, before V8 (the only user of this ICU copy, which
  // is linked privately into the isolate host) has made any ICU call; the
  // callbacks are plain functions valid for the life of the process.
  unsafe { u_setMemoryFunctions_77(std::ptr::null(), Some(alloc), Some(realloc), Some(free), &mut status) };
  // U_ZERO_ERROR is 0; warnings are negative, failures positive.
  if status > 0 {
    return Err(format!("ICU refused the isolate host's allocator (UErrorCode {status})"));
  }
  Ok(())
}

/// While alive, ICU allocations on this thread are charged to `account`.
pub struct ChargeIcu {
  previous: *const ExternalMemory,
  _account: Arc<ExternalMemory>,
}

impl ChargeIcu {
  pub fn to(account: &Arc<ExternalMemory>) -> ChargeIcu {
    let previous = CURRENT.replace(Arc::as_ptr(account));
    ChargeIcu { previous, _account: account.clone() }
  }
}

impl Drop for ChargeIcu {
  fn drop(&mut self) {
    CURRENT.set(self.previous);
  }
}

/// The current account, with one more strong reference taken for a block.
fn current_account() -> *const ExternalMemory {
  let account = CURRENT.get();
  if !account.is_null() {
    // SAFETY: a non-null CURRENT is held by a live ChargeIcu guard on this
    // thread (an `Arc`), so it is a live Arc allocation; the reference
    // taken here is released by the block's free.
    unsafe { Arc::increment_strong_count(account) };
  }
  account
}

/// Give back a block's charge and the reference it held.
fn settle(header: &Header) {
  if header.account.is_null() {
    return;
  }
  // SAFETY: a non-null header account holds the strong reference taken by
  // `current_account` when the block was charged.
  let account = unsafe { Arc::from_raw(header.account) };
  account.release(header.size);
}

/// Write the header in front of `base` and charge its account.
///
/// SAFETY (callers): `base` is a malloc block of at least HEADER + size bytes.
unsafe fn finish(base: *mut c_void, size: usize, account: *const ExternalMemory) -> *mut c_void {
  // SAFETY: per the caller, `base` has room for the header, and malloc's
  // alignment suits it.
  unsafe { base.cast::<Header>().write(Header { account, size }) };
  if !account.is_null() {
    // SAFETY: `current_account` took a strong reference for this block.
    unsafe { &*account }.charge(size);
  }
  // SAFETY: the block is HEADER + size bytes long.
  unsafe { base.cast::<u8>().add(HEADER).cast() }
}

unsafe extern "C" fn alloc(_context: *const c_void, size: usize) -> *mut c_void {
  let Some(total) = size.checked_add(HEADER) else { return std::ptr::null_mut() };
  // SAFETY: plain malloc of a non-zero size.
  let base = unsafe { libc::malloc(total) };
  if base.is_null() {
    return base;
  }
  // SAFETY: `base` is a fresh block of HEADER + size bytes.
  unsafe { finish(base, size, current_account()) }
}

unsafe extern "C" fn realloc(context: *const c_void, block: *mut c_void, size: usize) -> *mut c_void {
  if block.is_null() {
    // SAFETY: same contract as `alloc`.
    return unsafe { alloc(context, size) };
  }
  let Some(total) = size.checked_add(HEADER) else { return std::ptr::null_mut() };
  // SAFETY: every block ICU holds came from `alloc`/`realloc`, so a header
  // precedes it.
  let base = unsafe { block.cast::<u8>().sub(HEADER).cast::<c_void>() };
  // SAFETY: as above, the header is initialised.
  let old = unsafe { base.cast::<Header>().read() };
  // SAFETY: `base` is the malloc block of this allocation.
  let moved = unsafe { libc::realloc(base, total) };
  if moved.is_null() {
    // The old block stands, with its header and charge.
    return moved;
  }
  // The old charge is given back and the new size charged to the account
  // of now, so that a block grown by a later program is that program's.
  settle(&old);
  // SAFETY: `moved` is a block of HEADER + size bytes.
  unsafe { finish(moved, size, current_account()) }
}

unsafe extern "C" fn free(_context: *const c_void, block: *mut c_void) {
  if block.is_null() {
    return;
  }
  // SAFETY: the block came from `alloc`/`realloc`: a header precedes it.
  let base = unsafe { block.cast::<u8>().sub(HEADER).cast::<c_void>() };
  // SAFETY: as above, the header is initialised.
  settle(unsafe { &*base.cast::<Header>() });
  // SAFETY: `base` is the malloc block of this allocation.
  unsafe { libc::free(base) };
}
