//! What V8's compilers hold outside the heap for an isolate, read from any
//! thread: the watchdog's view of a compile it cannot interrupt.
//!
//! V8's parser, bytecode generator, regular-expression compiler and
//! optimizing compilers work in zones, memory outside the heap that
//! neither cap sees. Code compiled from a string is admitted by its size
//! before V8 parses it (`code_from_strings.rs`), but V8 asks no embedder
//! before it compiles a regular expression (`new RegExp('a|'.repeat(2e6))`
//! held ~850 MiB while its first `test` compiled it: ~225 bytes a unit of
//! source) or the program's own source, and such a compile reaches no
//! stack check, so a stop waits for its end. Each isolate counts its zones
//! in its `AccountingAllocator` (`src/zone/accounting-allocator.h`: an
//! atomic V8 keeps current as segments come and go), which V8's public API
//! shows only through `GetHeapStatistics`, on the isolate's own thread; the
//! watchdog reads the counter itself ([`ZoneMeter`]), through the pointer
//! the isolate keeps to its allocator.
//!
//! That pointer is a private field of V8's `Isolate`, at an offset this
//! binary's V8 fixed when it was compiled; [`locate`] finds it once, in the
//! first isolate the host makes: the word of the isolate that points at an
//! object whose first two words are the `TracingAccountingAllocator`
//! vtable (the isolate's allocator's class) and the isolate itself. Every
//! word is read through a pipe made before the host locks itself down
//! ([`prepare`]), so an address that is not readable is an error the kernel
//! returns, never a fault. Where nothing matches (another V8 layout), the
//! host runs without the meter and reports the protection off
//! ([`located`], before its `Ready`).

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use deno_core::v8;

use crate::lock::lock;

/// The offset of `Isolate::allocator_` in this binary's V8, once located.
static ALLOCATOR_FIELD: OnceLock<usize> = OnceLock::new();
/// Whether [`locate`] found it, once it has looked; and its waiters.
static DECISION: (Mutex<Option<bool>>, Condvar) = (Mutex::new(None), Condvar::new());
/// The pipe [`locate`] reads through ([`prepare`]).
static PROBE: Mutex<Option<MemoryProbe>> = Mutex::new(None);

/// `AccountingAllocator`'s words (accounting-allocator.h of the V8 the `v8`
/// crate pins, 150.4.0): its vtable pointer, `isolate_`,
/// `current_memory_usage_` (a `std::atomic<size_t>`), `max_memory_usage_`.
const VTABLE_WORD: usize = 0;
const ISOLATE_WORD: usize = 1;
const CURRENT_USAGE_WORD: usize = 2;

/// How far into an isolate [`locate`] looks for the field: V8's `Isolate`
/// is tens of KiB (the field is at 61080 in the V8 the `v8` crate pins,
/// among its last members), and a match past the object's end would be
/// another object's pointer to the allocator, at an offset no other
/// isolate shares.
const SEARCHED_BYTES: usize = 128 << 10;

extern "C" {
  /// The vtable of `v8::internal::TracingAccountingAllocator`, the class of
  /// every isolate's allocator (`Isolate::Isolate`). Only its address is
  /// used: an object of the class holds it plus two words (the offset to
  /// the top and the type info come first).
  #[link_name = "_ZTVN2v88internal26TracingAccountingAllocatorE"]
  static TRACING_ACCOUNTING_ALLOCATOR_VTABLE: [u8; 0];
}

/// The value of a `TracingAccountingAllocator`'s vtable pointer.
fn allocator_vtable() -> usize {
  // Only the address of the static is taken, never its bytes.
  let table = std::ptr::addr_of!(TRACING_ACCOUNTING_ALLOCATOR_VTABLE) as usize;
  table + 2 * size_of::<usize>()
}

fn isolate_address(isolate: &v8::Isolate) -> usize {
  // SAFETY: the pointer is only turned into an address here; it is read
  // at fixed offsets by `locate` (through the kernel) and `ZoneMeter::of`.
  let raw = unsafe { isolate.as_raw_isolate_ptr() };
  // SAFETY: `UnsafeRawIsolatePtr` is a transparent wrapper of a pointer.
  unsafe { std::mem::transmute::<v8::UnsafeRawIsolatePtr, *mut c_void>(raw) as usize }
}

/// Make the pipe [`locate`] reads through, before the host locks itself
/// down (its filter refuses `pipe2`); the pipe is kept until the first
/// isolate the host makes, which may come after, has looked.
pub fn prepare() {
  let mut probe = lock(&PROBE);
  if probe.is_none() {
    *probe = MemoryProbe::new().ok();
  }
}

/// Find where `isolate` (any isolate of this process: they share a layout)
/// keeps its allocator, for every later [`ZoneMeter::of`]; done once, by
/// the first isolate made (`PreparedIsolate::new` calls this for each).
pub fn locate(isolate: &v8::Isolate) {
  let mut decision = lock(&DECISION.0);
  if decision.is_some() {
    return;
  }
  prepare();
  let found = lock(&PROBE).as_ref().and_then(|probe| allocator_field(probe, isolate_address(isolate)));
  if let Some(offset) = found {
    let _ = ALLOCATOR_FIELD.set(offset);
  }
  decide(&mut decision, found.is_some());
}

/// The host's first isolate could not be made: nothing can be located, and
/// [`located`] need not wait.
pub fn unlocatable() {
  let mut decision = lock(&DECISION.0);
  if decision.is_none() {
    decide(&mut decision, false);
  }
}

/// Record whether the field was found, for [`located`]'s waiters.
fn decide(decision: &mut Option<bool>, found: bool) {
  *decision = Some(found);
  DECISION.1.notify_all();
  // Nothing reads through the pipe again: the host holds no descriptor it
  // does not need.
  *lock(&PROBE) = None;
}

/// Whether the field was found, once the host's first isolate has looked
/// (waiting at most [`DECISION_WAIT`] for it: a host that cannot make an
/// isolate runs no program either).
pub fn located() -> bool {
  let decision = lock(&DECISION.0);
  let decided = DECISION.1.wait_timeout_while(decision, DECISION_WAIT, |decision| decision.is_none());
  let decision = match decided {
    Ok((decision, _)) => *decision,
    Err(poisoned) => *poisoned.into_inner().0,
  };
  decision == Some(true)
}

/// The longest [`located`] waits for the host's first isolate.
const DECISION_WAIT: Duration = Duration::from_secs(10);

/// The offset in the isolate at `base` of the word that points at its
/// allocator: an object whose first words are the allocator class's vtable
/// and `base`. Words pointing into the binary's code (the builtins table:
/// most of the isolate's pointers) are not allocators, and are not read.
/// (Pointers into the isolate itself are: V8 may allocate the allocator
/// right after it.)
fn allocator_field(probe: &MemoryProbe, base: usize) -> Option<usize> {
  let vtable = allocator_vtable();
  let code = code_range();
  let word = size_of::<usize>();
  let mut page = [0u8; 4096];
  let mut offset = 0;
  while offset < SEARCHED_BYTES {
    // Page by page: the isolate's end is not known, and a read stops at
    // the first address that is not mapped.
    let chunk = page.len() - (base + offset) % page.len();
    if probe.read(base + offset, &mut page[..chunk]) != Probed::Read {
      return None;
    }
    for (index, bytes) in page[..chunk].chunks_exact(word).enumerate() {
      let candidate = usize::from_ne_bytes(bytes.try_into().unwrap_or_default());
      if candidate % word != 0 || candidate < 4096 || code.contains(&candidate) {
        continue;
      }
      let mut head = [0u8; 16];
      match probe.read(candidate, &mut head) {
        Probed::Read => {}
        Probed::Unreadable => continue,
        Probed::Broken => return None,
      }
      if usize::from_ne_bytes(head[..8].try_into().unwrap_or_default()) == vtable
        && usize::from_ne_bytes(head[8..].try_into().unwrap_or_default()) == base
      {
        return Some(offset + index * word);
      }
    }
    offset += chunk;
  }
  None
}

extern "C" {
  /// The linker's bounds of the executable's code (V8's builtins are in
  /// it, embedded).
  static __executable_start: [u8; 0];
  static etext: [u8; 0];
}

fn code_range() -> std::ops::Range<usize> {
  // Only the addresses of the linker's symbols are taken.
  std::ptr::addr_of!(__executable_start) as usize..std::ptr::addr_of!(etext) as usize
}

/// What a unit of source may hold in V8's zones while it compiles, rounded
/// up from the ~165 measured for the worst shape
/// (`var [a,{b,c:[d]}]=x;` repeated; an expression chain `x+x+...` ~50):
/// what a source compiled from a string is admitted by
/// (`code_from_strings.rs`; with the default 512 MiB cap, a source of up
/// to ~2.8 M units compiles), and what a program's own source adds to its
/// allowance here.
pub const ZONE_BYTES_PER_UNIT: usize = 192;

/// Room V8's compilers have past the run's external-memory cap and what
/// its program's own source may take ([`zone_allowance`]): the optimizing
/// compilers' graphs and a source from a string admitted whole
/// (`code_from_strings.rs`, which holds its zones within the cap) stay
/// well within it. The same at every cap.
pub const ZONE_ROOM: usize = 64 << 20;

/// What a run's compiler zones may hold before it is stopped: its
/// external-memory cap, what compiling its program's `source_units` may
/// take (`ZONE_BYTES_PER_UNIT` a unit, as for code compiled from a
/// string), and [`ZONE_ROOM`].
pub fn zone_allowance(cap: usize, source_units: usize) -> usize {
  cap.saturating_add(source_units.saturating_mul(ZONE_BYTES_PER_UNIT)).saturating_add(ZONE_ROOM)
}

/// What a run's compiler zones call for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneVerdict {
  Within,
  /// Past its allowance: the run is stopped at the external memory cap (a
  /// compile on V8's worker threads stops with it).
  Stop,
  /// A stopped run's zones still grew past its allowance by [`ZONE_ROOM`]:
  /// a compile its stop waits for, which only ending the host frees.
  EndHost,
}

/// The verdict on `zones` bytes of a run whose [`zone_allowance`] is
/// `stop_at`, stopped already (for any reason) or not.
pub fn zone_verdict(zones: usize, stop_at: usize, stopped: bool) -> ZoneVerdict {
  if zones <= stop_at {
    ZoneVerdict::Within
  } else if stopped && zones > stop_at.saturating_add(ZONE_ROOM) {
    ZoneVerdict::EndHost
  } else {
    ZoneVerdict::Stop
  }
}

/// An isolate's count of the bytes its zones hold now. Valid while the
/// isolate lives: whoever holds one must drop it before the isolate is
/// disposed (`RunControl` detaches it when the run ends).
pub struct ZoneMeter {
  usage: NonNull<AtomicUsize>,
}

// SAFETY: the meter only loads an atomic, which any thread may do; its
// owner keeps the isolate (and so the allocator) alive while it is held.
unsafe impl Send for ZoneMeter {}
// SAFETY: as above: shared, it is only read atomically.
unsafe impl Sync for ZoneMeter {}

impl ZoneMeter {
  /// The meter of `isolate`, if [`locate`] found the field.
  ///
  /// # Safety
  ///
  /// The meter must be dropped before `isolate` is disposed: it points
  /// into the isolate's allocator.
  pub unsafe fn of(isolate: &v8::Isolate) -> Option<ZoneMeter> {
    let offset = *ALLOCATOR_FIELD.get()?;
    let base = isolate_address(isolate);
    // SAFETY: `offset` was located within an isolate of this process (at
    // most SEARCHED_BYTES in), and every isolate of a process has its
    // layout: the word is the live isolate's `allocator_`, set when it was
    // made and kept until it is disposed.
    let allocator = unsafe { std::ptr::read_volatile((base + offset) as *const *const usize) };
    if allocator.is_null() {
      return None;
    }
    // SAFETY: `allocator` is the isolate's live allocator (the layout
    // above); its vtable and back pointer are read again as a last check
    // that the layout is the one located, not as what makes the reads safe.
    let (vtable, owner) = unsafe {
      (std::ptr::read_volatile(allocator.add(VTABLE_WORD)), std::ptr::read_volatile(allocator.add(ISOLATE_WORD)))
    };
    if vtable != allocator_vtable() || owner != base {
      return None;
    }
    // SAFETY: the word is the allocator's `std::atomic<size_t>`, which has
    // `AtomicUsize`'s size and alignment; V8 only changes it atomically.
    let usage = unsafe { allocator.add(CURRENT_USAGE_WORD) } as *mut AtomicUsize;
    NonNull::new(usage).map(|usage| ZoneMeter { usage })
  }

  /// The bytes the isolate's zones hold now.
  pub fn bytes(&self) -> usize {
    // SAFETY: see the type's doc: the isolate outlives the meter.
    unsafe { self.usage.as_ref() }.load(Ordering::Relaxed)
  }
}

/// Reads memory through a pipe: the kernel copies it, so an address that
/// is not readable fails the write (`EFAULT`) instead of faulting. Both
/// ends are non-blocking: a write of a page at most into the empty pipe,
/// and the read of what it took, never wait.
struct MemoryProbe {
  read_end: OwnedFd,
  write_end: OwnedFd,
}

/// What a [`MemoryProbe::read`] found.
#[derive(Debug, PartialEq, Eq)]
enum Probed {
  Read,
  Unreadable,
  /// The pipe could not be emptied: no read through it can be trusted.
  Broken,
}

impl MemoryProbe {
  fn new() -> std::io::Result<MemoryProbe> {
    let mut ends = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `ends`, owned from here on.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
      return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and belong to nothing else.
    Ok(unsafe { MemoryProbe { read_end: OwnedFd::from_raw_fd(ends[0]), write_end: OwnedFd::from_raw_fd(ends[1]) } })
  }

  /// Copy `out.len()` bytes (a page at most, which the empty pipe takes
  /// whole) from `address`.
  fn read(&self, address: usize, out: &mut [u8]) -> Probed {
    let written = loop {
      // SAFETY: write reads the range in the kernel, which checks that it
      // is mapped and readable; nothing in this process touches it.
      let written = unsafe { libc::write(self.write_end.as_raw_fd(), address as *const c_void, out.len()) };
      if written >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
        break written;
      }
    };
    // A write that faulted on its first byte took nothing.
    let Ok(written) = usize::try_from(written) else { return Probed::Unreadable };
    let mut read = 0;
    while read < written {
      // SAFETY: reads at most what is left of `out` into it.
      let got = unsafe { libc::read(self.read_end.as_raw_fd(), out[read..].as_mut_ptr().cast(), written - read) };
      match usize::try_from(got) {
        Ok(got) if got > 0 => read += got,
        _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
        _ => return Probed::Broken,
      }
    }
    if written == out.len() {
      Probed::Read
    } else {
      Probed::Unreadable
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  /// The meter follows the zones of a compile V8 makes on the isolate's
  /// thread: the most it read (from a second thread, while a regular
  /// expression of a few hundred KiB compiles) is past what the zones held
  /// before, and is back once the compile ends.
  #[test]
  fn the_meter_reads_a_compile_from_another_thread() {
    crate::platform::with_test_isolate(|isolate| {
      assert!(located(), "the allocator field is found (PreparedIsolate::new looks)");
      // SAFETY: the meter is dropped at the closure's end, before the isolate.
      let meter = unsafe { ZoneMeter::of(isolate.runtime.v8_isolate()) }.expect("a meter");
      let before = meter.bytes();
      let most = AtomicUsize::new(0);
      let done = std::sync::atomic::AtomicBool::new(false);
      std::thread::scope(|threads| {
        let (most, done, meter) = (&most, &done, &meter);
        threads.spawn(move || {
          while !done.load(Ordering::Acquire) {
            most.fetch_max(meter.bytes(), Ordering::Relaxed);
            std::thread::yield_now();
          }
        });
        isolate
          .runtime
          .execute_script("zones_test.js", "new RegExp('a|'.repeat(200000) + 'b').test('zzzb')")
          .expect("it runs");
        done.store(true, Ordering::Release);
      });
      let most = most.load(Ordering::Relaxed);
      assert!(most >= before + (16 << 20), "a compile of 400 K units is seen: {most} against {before}");
      assert!(meter.bytes() <= before + (1 << 20), "its zones are gone: {} against {before}", meter.bytes());
    })
  }

  #[test]
  fn zones_stop_a_run_past_its_allowance_and_end_the_host_past_the_room_again() {
    let cap = 32 << 20;
    let allowance = zone_allowance(cap, 1000);
    assert_eq!(allowance, cap + 1000 * ZONE_BYTES_PER_UNIT + ZONE_ROOM);
    assert_eq!(zone_verdict(allowance, allowance, false), ZoneVerdict::Within);
    assert_eq!(zone_verdict(allowance + 1, allowance, false), ZoneVerdict::Stop);
    assert_eq!(
      zone_verdict(allowance + 3 * ZONE_ROOM, allowance, false),
      ZoneVerdict::Stop,
      "a run not stopped is stopped first"
    );
    assert_eq!(zone_verdict(allowance + ZONE_ROOM, allowance, true), ZoneVerdict::Stop);
    assert_eq!(zone_verdict(allowance + ZONE_ROOM + 1, allowance, true), ZoneVerdict::EndHost);
    assert_eq!(zone_allowance(usize::MAX, usize::MAX), usize::MAX);
    assert_eq!(zone_verdict(usize::MAX, usize::MAX, true), ZoneVerdict::Within);
  }

  #[test]
  fn a_read_running_into_an_unmapped_page_is_unreadable_and_the_pipe_stays_usable() {
    let probe = MemoryProbe::new().expect("a pipe");
    let page = 4096;
    // SAFETY: a fresh private mapping of two pages, the second unmapped at
    // once: only this test knows of it.
    let block = unsafe {
      libc::mmap(
        std::ptr::null_mut(),
        2 * page,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
      )
    };
    assert_ne!(block, libc::MAP_FAILED);
    // SAFETY: the second page of the mapping just made.
    assert_eq!(unsafe { libc::munmap(block.cast::<u8>().add(page).cast(), page) }, 0);
    let mut bytes = [0u8; 16];
    assert_eq!(probe.read(block as usize + page - 8, &mut bytes), Probed::Unreadable);
    let word = 0x5eed_u64;
    assert_eq!(probe.read(std::ptr::addr_of!(word) as usize, &mut bytes[..8]), Probed::Read);
    assert_eq!(u64::from_ne_bytes(bytes[..8].try_into().expect("8 bytes")), 0x5eed);
    // SAFETY: the first page, still mapped.
    unsafe { libc::munmap(block, page) };
  }

  #[test]
  fn an_unreadable_address_is_an_error_not_a_fault() {
    let probe = MemoryProbe::new().expect("a pipe");
    let mut bytes = [0u8; 16];
    assert_eq!(probe.read(8, &mut bytes), Probed::Unreadable);
    let word = 0x5eed_u64;
    assert_eq!(probe.read(std::ptr::addr_of!(word) as usize, &mut bytes[..8]), Probed::Read);
    assert_eq!(u64::from_ne_bytes(bytes[..8].try_into().expect("8 bytes")), 0x5eed);
  }
}
