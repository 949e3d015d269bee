//! One isolate's account of the memory outside its V8 heap that a program
//! makes the process hold, counted against the one cap,
//! `maxExternalMemoryMb`: ArrayBuffer backing stores (the capped allocator,
//! `allocator.rs`), ICU's allocations behind `Intl` and the locale-sensitive
//! string methods (`icu_memory.rs`), and what the bootstrap charges for the
//! built-ins that hold memory behind the allocator's back
//! (`crates/sandbox-ext/js/11_memory_caps.js`: growable SharedArrayBuffers, Intl objects'
//! C++ owners, `Atomics.waitAsync` waiters, JSON nesting). The README's
//! "Memory containment" section lists every route and how it is bounded.
//!
//! Two kinds of charge, because the routes differ in what may fail:
//! - A *reservation* can be refused: V8 turns a refused backing store into
//!   a `RangeError` after collecting garbage and retrying; the bootstrap
//!   throws for a refused growable buffer, Intl object or JSON text.
//! - A *charge* never fails: ICU treats a failed allocation as fatal in
//!   places, so its allocations always succeed, and crossing the cap is
//!   dealt with by a check.
//!
//! Either way the run is stopped only by [`ExternalMemory::check`], on the
//! isolate's thread between bytecodes: synchronously after the wrapped
//! built-ins, or from an interrupt (`Isolate::RequestInterrupt`) when a
//! charge crosses the cap elsewhere, which in interpreted code can come
//! thousands of loop iterations late. It first collects garbage, because
//! an Intl object or buffer the program dropped is freed only by a GC, and
//! V8 does not count ICU memory towards its own GC heuristics. A program
//! still over the cap is stopped (`worker-exit`), so it cannot catch the
//! `RangeError` and probe on.
//!
//! A binding call's argument is copied out of the heap into the host's memory
//! until the frame that carries it to the harness is written
//! (`dsh_sandbox_ext`'s call ops, `bridge.rs`): one heap string passed N
//! times is N copies, so each call's copies are a [`Held`] reservation
//! against the account of the run that made it (the ops' [`RunMemory`]),
//! as is a clone's serialized copy while it is read back (the extension's
//! `structured_clone.rs`; `serialized_copy.rs` bounds it while written).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use deno_core::v8;
use dsh_sandbox_ext::{set_run_memory, HeldMemory, RunMemory};

use crate::control::RunControl;
use crate::lock::lock;
use dsh_protocol::failure::StopReason;

/// Per-isolate accounting of memory held outside the V8 heap.
pub struct ExternalMemory {
  limit: usize,
  used: AtomicUsize,
  /// The most `used` has been: decides whether the allocator's free
  /// memory is worth returning to the OS once the isolate is gone.
  peak: AtomicUsize,
  /// A reservation was refused and no reservation has succeeded since:
  /// V8's retries (each after a GC) all failed, so the program got a
  /// `RangeError`.
  refused: AtomicBool,
  /// A pressure check is requested and has not run yet.
  check_pending: AtomicBool,
  isolate: OnceLock<v8::IsolateHandle>,
  run: Mutex<Option<Arc<RunControl>>>,
  /// This account, for what it hands out to hold it ([`Held`], the ops).
  me: Weak<ExternalMemory>,
}

/// Bytes reserved against an account until this is dropped, on whichever
/// thread: a binding call's copies, held from the op that makes them until
/// the frame carrying them is written (by whichever run thread flushes).
pub struct Held {
  account: Arc<ExternalMemory>,
  bytes: usize,
}

impl Drop for Held {
  fn drop(&mut self) {
    self.account.release(self.bytes);
  }
}

impl ExternalMemory {
  pub fn new(limit: usize) -> Arc<Self> {
    Arc::new_cyclic(|me| ExternalMemory {
      limit,
      used: AtomicUsize::new(0),
      peak: AtomicUsize::new(0),
      refused: AtomicBool::new(false),
      check_pending: AtomicBool::new(false),
      isolate: OnceLock::new(),
      run: Mutex::new(None),
      me: me.clone(),
    })
  }

  /// The isolate whose memory this is; pressure checks interrupt it.
  pub fn bind_isolate(&self, isolate: v8::IsolateHandle) {
    let _ = self.isolate.set(isolate);
  }

  /// The run to stop when the cap is crossed. Called on the run's thread
  /// as it starts and ends (`Some`, then `None`), which makes this the
  /// thread's current account meanwhile ([`ExternalMemory::current`]).
  pub fn attach(&self, run: Option<Arc<RunControl>>) {
    let current = run.as_ref().and_then(|_| self.me.upgrade());
    set_run_memory(current.map(|account| account as Arc<dyn RunMemory>));
    *lock(&self.run) = run;
  }

  /// Reserve `bytes` until the returned [`Held`] is dropped; `None` (and
  /// a pressure check requested) past the cap, as [`ExternalMemory::reserve`].
  pub fn hold(&self, bytes: usize) -> Option<Held> {
    let account = self.me.upgrade()?;
    // Made only once reserved: a `Held` gives its bytes back when dropped.
    if !self.reserve(bytes) {
      return None;
    }
    Some(Held { account, bytes })
  }

  /// The cap, in bytes (the run's `maxExternalMemoryMb`).
  pub fn limit(&self) -> usize {
    self.limit
  }

  /// Bytes counted now.
  pub fn used(&self) -> usize {
    self.used.load(Ordering::Relaxed)
  }

  /// The most bytes counted at once since the account was made.
  pub fn peak(&self) -> usize {
    self.peak.load(Ordering::Relaxed)
  }

  /// A reservation was refused and none has succeeded since.
  pub fn refusal_stands(&self) -> bool {
    self.refused.load(Ordering::Relaxed)
  }

  /// Count `len` bytes if they fit under the cap; false (and a pressure
  /// check requested) if not.
  pub fn reserve(&self, len: usize) -> bool {
    let mut used = self.used.load(Ordering::Relaxed);
    loop {
      let Some(next) = used.checked_add(len).filter(|next| *next <= self.limit) else {
        self.refused.store(true, Ordering::Relaxed);
        self.request_check();
        return false;
      };
      match self.used.compare_exchange_weak(used, next, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => {
          self.refused.store(false, Ordering::Relaxed);
          self.peak.fetch_max(next, Ordering::Relaxed);
          return true;
        }
        Err(actual) => used = actual,
      }
    }
  }

  /// Whether `bytes` that V8 or a built-in is about to hold for a moment
  /// (a compile's zones, `JSON.parse`'s nesting) fit beside what the
  /// account holds; nothing is counted. On the isolate's thread: before a
  /// refusal garbage is collected (what the program dropped is freed only
  /// then), and a refusal stops the run, as any crossing of the cap does.
  pub fn admit_transient(&self, isolate: &mut v8::Isolate, bytes: usize) -> bool {
    let fits = || self.used().checked_add(bytes).is_some_and(|total| total <= self.limit);
    if fits() {
      return true;
    }
    isolate.low_memory_notification();
    if fits() {
      return true;
    }
    if let Some(run) = lock(&self.run).as_ref() {
      run.stop(StopReason::ExternalMemory);
    }
    false
  }

  /// Count `len` bytes that are already allocated; past the cap a
  /// pressure check is requested.
  pub fn charge(&self, len: usize) {
    let next = self.used.fetch_add(len, Ordering::Relaxed).saturating_add(len);
    self.peak.fetch_max(next, Ordering::Relaxed);
    if next > self.limit {
      self.request_check();
    }
  }

  /// Stop counting `len` bytes (freed, or a reservation given back).
  pub fn release(&self, len: usize) {
    self.used.fetch_sub(len, Ordering::Relaxed);
  }

  fn request_check(&self) {
    if self.check_pending.swap(true, Ordering::AcqRel) {
      return;
    }
    let Some(isolate) = self.isolate.get() else {
      self.check_pending.store(false, Ordering::Release);
      return;
    };
    let data = self as *const ExternalMemory as *mut c_void;
    if !isolate.request_interrupt(pressure_check, data) {
      // The isolate is gone: nothing runs in it that could need stopping.
      self.check_pending.store(false, Ordering::Release);
    }
  }

  /// On the isolate's thread, between bytecodes: is the program within
  /// its cap? Collects garbage first if it looks over, then stops the run
  /// (and returns false) if it still is, or if a refusal stood.
  ///
  /// With `v8_buffers`, "over" also counts V8's own tally of non-shared
  /// ArrayBuffer memory, which includes what resizable buffers have
  /// committed (V8 commits their pages itself, outside the allocator);
  /// each tally is held to the cap on its own, so together they can reach
  /// twice the cap at most. Reading it takes V8's heap statistics, so the
  /// checks after Intl calls, which cannot change it, leave it out.
  pub fn check(&self, isolate: &mut v8::Isolate, v8_buffers: bool) -> bool {
    self.check_pending.store(false, Ordering::Release);
    let over = |isolate: &mut v8::Isolate| {
      self.used() > self.limit || (v8_buffers && isolate.get_heap_statistics().external_memory() > self.limit)
    };
    if over(isolate) {
      // Synchronous: finalizers of dropped Intl objects and buffers run
      // within this call, so what is counted after it is what the program
      // still holds.
      isolate.low_memory_notification();
    }
    if over(isolate) || self.refused.load(Ordering::Relaxed) {
      if let Some(run) = lock(&self.run).as_ref() {
        run.stop(StopReason::ExternalMemory);
      }
      return false;
    }
    true
  }
}

impl RunMemory for ExternalMemory {
  fn hold(&self, bytes: usize) -> Option<HeldMemory> {
    ExternalMemory::hold(self, bytes).map(|held| Box::new(held) as HeldMemory)
  }

  fn limit(&self) -> usize {
    self.limit
  }
}

/// The interrupt callback of a pressure check.
unsafe extern "C" fn pressure_check(mut isolate: v8::UnsafeRawIsolatePtr, data: *mut c_void) {
  // SAFETY: `data` is the account that requested the check. Interrupts
  // run only while the isolate is alive, and every isolate's account is
  // held by its `PreparedIsolate` beside the runtime and dropped after it
  // (field order there), so the account outlives every interrupt.
  let account = unsafe { &*(data as *const ExternalMemory) };
  // SAFETY: V8 passes the interrupted isolate, on its own thread, between
  // bytecodes: the one place where it may be used (and collect garbage).
  let isolate = unsafe { v8::Isolate::ref_from_raw_isolate_ptr_mut(&mut isolate) };
  account.check(isolate, true);
}
