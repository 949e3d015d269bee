//! The one V8 platform of the process.
//!
//! Initialised once, on the host's main thread before any run thread
//! exists (a thread created before V8's platform on a CPU with memory
//! protection keys faults the first time it runs JS). Never torn down: V8
//! lives as long as the host process.

use std::sync::OnceLock;

use crate::config::RuntimeConfig;
use crate::icu_memory;
use crate::isolate::heap_cap_below_sandbox_floor;

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
///
/// `--invocation-count-for-maglev=2000 --invocation-count-for-turbofan=30000`
/// (V8's defaults 400 and 3000): every isolate is new, and optimizes its
/// hot functions anew, the sandbox's own among them (the bridge's call and
/// reply paths, the lossless-JSON walk); a run of many quick calls paid
/// for Maglev and TurboFan compiles, on V8's worker threads, that its few
/// milliseconds did not earn back, on CPUs the harness needed. Measured in
/// separate processes, alternating: a `Promise.all` of 10000 calls 32 ->
/// 27 ms; Code Mode shaped, trivial, compute (JSON, a loop, regex), fib(30)
/// and an allocation-heavy class program alike. A program's long loops are
/// optimized as before (on-stack replacement has counts of its own), its
/// hot functions a little later.
///
/// `--baseline-batch-compilation-threshold=65536` (V8's default 4 KiB):
/// the same for Sparkplug, V8's baseline compiler, which compiles a
/// function once it has run a few times, in batches of about this much
/// machine code, on a worker thread. In a fresh isolate every function is
/// new, so a short run that logs (the sandbox's `inspect`, run for the
/// first time in that isolate) or calls tools (the bridge's paths) filled
/// a few batches and paid for their compiles, beside the run and on the
/// CPUs the harness needed, for code it ran a few more times at most. At
/// 64 KiB a batch fills only in a run with that much warm code, long
/// enough to earn it back. Measured, alternating one process's runtimes
/// run by run: Code Mode shaped runs (5 calls, 20 log lines) 4.30 -> 3.75
/// ms at the median and 2.05 -> 1.94 ms of the run's CPU, with 5 ms
/// between runs; back to back 3.33 -> 2.62 ms; a `console.log` of a small
/// object in a fresh isolate ~50 -> ~30 us; no Sparkplug at all
/// (`--no-sparkplug`) measured the same. Sequential calls, `Promise.all`,
/// compute (JSON, a loop, regex), fib(27), a class-heavy loop and a
/// filter/map/sort over 20000 objects alike.
const V8_FLAGS: &str = "--memory-pool-timeout=1 --invocation-count-for-maglev=2000 \
   --invocation-count-for-turbofan=30000 --baseline-batch-compilation-threshold=65536";

/// Where V8 makes a run's optimized code, for every isolate of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizingCompiler {
  /// On V8's worker threads, beside the run (V8's default): a compute-bound
  /// program keeps running while its hot functions are optimized.
  Concurrent,
  /// On the run's own thread (`--no-concurrent-recompilation`).
  ///
  /// For a heap cap below the sandbox's floor. Under such a cap a run
  /// starts near its limit (`cap_heap_for_the_program` sets it to the cap
  /// or a quarter above the heap then live, whichever is more: under a cap
  /// of about 1 MiB, the old generation is full from the start), so the
  /// pages its background compile jobs allocate are refused and each job
  /// asks the run's thread for a GC. Two jobs asking at once, one of them
  /// for a last-resort GC, trip a check of V8's (`CollectionBarrier`: the
  /// major GC asked for while a last-resort one is pending never starts
  /// its timer, and `AwaitCollectionBackground` checks it), which ends the
  /// host: about 1 in 100 of a 0.5 MiB cap's bombs on a loaded 2-core
  /// machine, none in 300 with compile jobs on the run's thread. The
  /// sandbox's floor (16 MiB) is a margin over where it was seen.
  /// Concurrent compiling is worth ~20% on compute-bound programs, which a
  /// cap of a few MiB rules out anyway; under caps past the floor a
  /// background job meets a full heap only in a bomb's last moments.
  OnTheRunThread,
}

impl OptimizingCompiler {
  /// The compiler for the isolates of a host configured with `config`.
  pub fn for_runtime(config: &RuntimeConfig) -> OptimizingCompiler {
    if heap_cap_below_sandbox_floor(config) {
      OptimizingCompiler::OnTheRunThread
    } else {
      OptimizingCompiler::Concurrent
    }
  }

  fn flags(self) -> String {
    match self {
      OptimizingCompiler::Concurrent => V8_FLAGS.to_owned(),
      OptimizingCompiler::OnTheRunThread => format!("{V8_FLAGS} --no-concurrent-recompilation"),
    }
  }
}

/// Initialise V8 (and, before it, ICU's allocator) once, with concurrent
/// compiling; every later call returns the first call's outcome.
pub fn ensure_initialized() -> Result<(), String> {
  initialize(OptimizingCompiler::Concurrent)
}

/// Initialise V8 (and, before it, ICU's allocator) once, making optimized
/// code where `compiler` says; every later call returns the first call's
/// outcome (V8's flags are the process's, fixed at its initialisation).
pub fn initialize(compiler: OptimizingCompiler) -> Result<(), String> {
  INIT
    .get_or_init(|| {
      // ICU must get its allocator before its first use, which V8's
      // initialisation makes.
      icu_memory::install()?;
      deno_core::v8::V8::set_flags_from_string(&compiler.flags());
      deno_core::JsRuntime::init_platform(None);
      Ok(())
    })
    .clone()
}

/// For the crate's tests: run `test` on a prepared isolate of this
/// platform, as a run gets it (the small test config), with the
/// current-thread runtime deno_core needs entered while the isolate is
/// made, used and dropped.
#[cfg(test)]
pub(crate) fn with_test_isolate<R>(test: impl FnOnce(&mut crate::isolate::PreparedIsolate) -> R) -> R {
  ensure_initialized().expect("V8");
  let thread_runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
  let _entered = thread_runtime.enter();
  let mut isolate = crate::isolate::PreparedIsolate::new(&RuntimeConfig::small()).expect("an isolate");
  test(&mut isolate)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn only_a_heap_cap_below_the_sandbox_floor_compiles_on_the_run_thread() {
    let at = |mb: f64| {
      OptimizingCompiler::for_runtime(&RuntimeConfig { max_old_generation_size_mb: mb, ..RuntimeConfig::small() })
    };
    assert_eq!(at(0.5), OptimizingCompiler::OnTheRunThread);
    assert_eq!(at(15.0), OptimizingCompiler::OnTheRunThread);
    assert_eq!(at(16.0), OptimizingCompiler::Concurrent);
    assert_eq!(at(512.0), OptimizingCompiler::Concurrent);
    assert!(OptimizingCompiler::OnTheRunThread.flags().ends_with(" --no-concurrent-recompilation"));
    assert_eq!(OptimizingCompiler::Concurrent.flags(), V8_FLAGS);
  }
}
