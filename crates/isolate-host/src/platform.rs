//! The one V8 platform of the process.
//!
//! Initialised once, on the host's main thread before any run thread
//! exists (a thread created before V8's platform on a CPU with memory
//! protection keys faults the first time it runs JS). Never torn down: V8
//! lives as long as the host process.

use std::sync::OnceLock;

use crate::icu_memory;

static INIT: OnceLock<Result<(), String>> = OnceLock::new();

/// V8's flags for every isolate of the process.
///
/// `--memory-pool-timeout=1`: V8 pools the heap pages of disposed isolates
/// for the next ones to reuse (which keeps isolate creation cheap: the
/// pooled pages are already mapped and faulted in), and releases pages
/// pooled for longer than the timeout. At V8's default of 8 s, the pages
/// of a run that filled a 512 MiB heap stayed resident for up to ~20 s
/// after it; at 1 s they go within ~6 s, while runs that follow each other
/// (the case the pool is for) still reuse them. V8 releases only while
/// isolates keep pooling, so the scheduler releases what a big run left
/// once the runtime is idle (`release_v8_page_pool`). Releasing them at once
/// on disposal instead (`--no-memory-pool-share-memory-on-teardown`) cost
/// trivial runs ~0.25 ms each and bursts of them ~25% of their throughput.
const V8_FLAGS: &str = "--memory-pool-timeout=1";

/// Initialise V8 (and, before it, ICU's allocator) once; every later call
/// returns the first call's outcome.
pub fn ensure_initialized() -> Result<(), String> {
  INIT
    .get_or_init(|| {
      // ICU must get its allocator before its first use, which V8's
      // initialisation makes.
      icu_memory::install()?;
      deno_core::v8::V8::set_flags_from_string(V8_FLAGS);
      deno_core::JsRuntime::init_platform(None);
      Ok(())
    })
    .clone()
}
