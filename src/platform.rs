//! The one V8 platform of the process.
//!
//! Initialised once, on the Node thread that first constructs a runtime,
//! before any run thread exists (a thread created before V8's platform
//! on a CPU with memory protection keys faults the first time it runs JS).
//! Never torn down: V8 outlives every runtime, and the addon is linked
//! `-z nodelete` so it stays mapped until the process ends. Loading the
//! addon again from a worker thread shares this same initialisation.

use std::sync::OnceLock;

use crate::icu_memory;

static INIT: OnceLock<Result<(), String>> = OnceLock::new();

/// Initialise V8 (and, before it, ICU's allocator) once; every later call
/// returns the first call's outcome.
pub fn ensure_initialized() -> Result<(), String> {
  INIT
    .get_or_init(|| {
      // ICU must get its allocator before its first use, which V8's
      // initialisation makes.
      icu_memory::install()?;
      deno_core::JsRuntime::init_platform(None);
      Ok(())
    })
    .clone()
}
