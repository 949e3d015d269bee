//! The one V8 platform of the process.
//!
//! Initialised once, on the Node thread that first constructs a runtime,
//! before any run thread exists (a thread created before V8's platform
//! on a CPU with memory protection keys faults the first time it runs JS).
//! Never torn down: V8 outlives every runtime, and the addon is linked
//! `-z nodelete` so it stays mapped until the process ends. Loading the
//! addon again from a worker thread shares this same initialisation.

use std::sync::Once;

static INIT: Once = Once::new();

pub fn ensure_initialized() {
  INIT.call_once(|| deno_core::JsRuntime::init_platform(None));
}
