//! The most a run's isolate heap held at once, for the run's report.
//!
//! V8 keeps no peak of the heap's used size, but the size only grows
//! between two garbage collections (allocation), so its most is reached
//! just before one of them, or at the end: a callback before each
//! collection keeps the largest size it sees, and the end adds the last.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use deno_core::v8;

/// The largest used heap size seen before a garbage collection.
#[derive(Default)]
pub struct HeapPeak {
  before_collections: AtomicUsize,
}

impl HeapPeak {
  /// Watch `isolate`'s collections; the peak must outlive the isolate (its
  /// owner declares it after the runtime, which is dropped first).
  pub fn watch(self: &std::sync::Arc<Self>, isolate: &mut v8::Isolate) {
    let data = std::sync::Arc::as_ptr(self) as *mut c_void;
    isolate.add_gc_prologue_callback(before_collection, data, v8::GCType::kGCTypeAll);
  }

  /// The most the heap held, its used size now included.
  pub fn bytes(&self, isolate: &mut v8::Isolate) -> u64 {
    let now = isolate.get_heap_statistics().used_heap_size();
    now.max(self.before_collections.load(Ordering::Relaxed)) as u64
  }
}

/// V8's callback before a garbage collection.
unsafe extern "C" fn before_collection(
  mut isolate: v8::UnsafeRawIsolatePtr,
  _type: v8::GCType,
  _flags: v8::GCCallbackFlags,
  data: *mut c_void,
) {
  // SAFETY: `data` is the `HeapPeak` that registered this callback, held by
  // the isolate's owner past the isolate's own end (`HeapPeak::watch`), so
  // it is alive whenever V8 collects this isolate's garbage.
  let peak = unsafe { &*(data as *const HeapPeak) };
  // SAFETY: V8 calls this on the isolate's own thread, with the isolate it
  // is about to collect, which may be read (its statistics) here.
  let isolate = unsafe { v8::Isolate::ref_from_raw_isolate_ptr_mut(&mut isolate) };
  let used = isolate.get_heap_statistics().used_heap_size();
  peak.before_collections.fetch_max(used, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
  use crate::isolate::PreparedIsolate;
  use crate::platform::with_test_isolate;

  /// A heap that held tens of MiB and dropped them has its peak kept,
  /// though the heap is small again at the end (a sandbox isolate, as a
  /// run gets it).
  #[test]
  fn the_peak_outlives_a_collection() {
    with_test_isolate(|isolate| {
      let peak = isolate.heap_peak.clone();
      let start = peak.bytes(isolate.runtime.v8_isolate());
      let run = |isolate: &mut PreparedIsolate, source: &'static str| {
        isolate.runtime.execute_script("heap_peak_test.js", source).expect("it runs");
      };
      run(isolate, "globalThis.held = Array.from({ length: 24 }, () => new Array(1 << 17).fill(1.5)); 0");
      let held = peak.bytes(isolate.runtime.v8_isolate());
      run(isolate, "globalThis.held = undefined; 0");
      isolate.runtime.v8_isolate().low_memory_notification();
      let now = isolate.runtime.v8_isolate().get_heap_statistics().used_heap_size() as u64;
      let after = peak.bytes(isolate.runtime.v8_isolate());
      assert!(held >= start + (20 << 20), "held {held}, start {start}");
      assert!(now < held / 2, "the heap is small again: {now} of {held}");
      assert!(after >= held, "the peak is kept: {after} of {held}");
    })
  }
}
