//! The V8 ArrayBuffer allocator of an isolate: backing stores (ArrayBuffer,
//! typed arrays, non-growable SharedArrayBuffer) reserved against the
//! isolate's external-memory account (`external_memory.rs`) before they
//! are allocated. A refused reservation is a null block: V8 collects
//! garbage, retries, and throws a `RangeError` if it is still refused; the
//! account's pressure check then stops the run.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use deno_core::v8;
use dsh_protocol::large_block::map_anonymous;

use crate::external_memory::ExternalMemory;

/// A V8 allocator that charges `account`.
pub fn capped_allocator(account: &Arc<ExternalMemory>) -> v8::UniqueRef<v8::Allocator> {
  let handle = Arc::into_raw(account.clone());
  // SAFETY: `handle` stays valid until V8 calls `drop_handle`, which
  // releases exactly the reference created by `Arc::into_raw` above.
  unsafe { v8::new_rust_allocator(handle, &VTABLE) }
}

static VTABLE: v8::RustAllocatorVtable<ExternalMemory> =
  v8::RustAllocatorVtable { allocate, allocate_uninitialized, free, drop: drop_handle };

/// Blocks at least this large are mapped directly, so freeing one always
/// returns it to the OS: a program that churns big buffers cannot leave the
/// host process fragmented (glibc raises its own mmap threshold after the
/// first large free and would then serve such blocks from its arenas).
const MAPPED_BLOCK: usize = 64 * 1024;

/// A zeroed block of `len` bytes, or null.
fn obtain(len: usize, zeroed: bool) -> *mut c_void {
  if len >= MAPPED_BLOCK {
    return map_anonymous(len).map_or(std::ptr::null_mut(), NonNull::as_ptr);
  }
  if zeroed {
    // SAFETY: calloc with a non-zero size; V8 owns the block until `free`.
    unsafe { libc::calloc(len.max(1), 1) }
  } else {
    // SAFETY: malloc with a non-zero size; V8 owns the block until `free`.
    unsafe { libc::malloc(len.max(1)) }
  }
}

fn allocate_block(account: &ExternalMemory, len: usize, zeroed: bool) -> *mut c_void {
  if !account.reserve(len) {
    return std::ptr::null_mut();
  }
  let block = obtain(len, zeroed);
  if block.is_null() {
    account.release(len);
  }
  block
}

unsafe extern "C" fn allocate(account: &ExternalMemory, len: usize) -> *mut c_void {
  allocate_block(account, len, true)
}

unsafe extern "C" fn allocate_uninitialized(account: &ExternalMemory, len: usize) -> *mut c_void {
  allocate_block(account, len, false)
}

unsafe extern "C" fn free(account: &ExternalMemory, data: *mut c_void, len: usize) {
  if data.is_null() {
    return;
  }
  if len >= MAPPED_BLOCK {
    // SAFETY: blocks of this length were mapped by `obtain` with this exact length.
    unsafe { libc::munmap(data, len) };
  } else {
    // SAFETY: smaller blocks came from calloc/malloc in `obtain`.
    unsafe { libc::free(data) };
  }
  account.release(len);
}

unsafe extern "C" fn drop_handle(account: *const ExternalMemory) {
  // SAFETY: releases the reference leaked by `Arc::into_raw` in `capped_allocator()`.
  drop(unsafe { Arc::from_raw(account) });
}
