//! The runtime's caps and sizes. The TypeScript layer validates them with
//! the seam's messages; [`RuntimeConfig::validate`] checks them again so a
//! direct caller of the addon cannot hand the pool nonsense.

/// Every cap of one runtime; no hidden default lives anywhere else.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
  /// CPU time a program may burn, in milliseconds.
  pub compute_ms: f64,
  /// Wall-clock ceiling of a run from its submission, in milliseconds.
  pub max_wall_ms: f64,
  /// Exact JSON byte cap over logs plus value or failure message.
  pub max_output_bytes: u64,
  /// Heap cap of a program's isolate, in MiB.
  pub max_old_generation_size_mb: f64,
  /// Cap on ArrayBuffer memory outside the heap, in MiB.
  pub max_external_memory_mb: f64,
  /// Runs in flight at once (each with its own thread and isolate).
  pub max_concurrent_runs: usize,
  /// Runs that may wait for admission before run() is refused.
  pub max_queued_runs: usize,
  /// Isolates kept prepared ahead of runs (each on an idle thread).
  pub prepared_isolates: usize,
}

impl RuntimeConfig {
  pub fn validate(&self) -> Result<(), String> {
    let positive = [
      ("computeMs", self.compute_ms),
      ("maxWallMs", self.max_wall_ms),
      ("maxOldGenerationSizeMb", self.max_old_generation_size_mb),
      ("maxExternalMemoryMb", self.max_external_memory_mb),
    ];
    for (key, value) in positive {
      if !(value.is_finite() && value > 0.0) {
        return Err(format!("config.{key} must be a positive number, got {value}"));
      }
    }
    if self.max_output_bytes < 4 {
      return Err("config.maxOutputBytes must be a safe integer of at least 4".into());
    }
    let counts = [
      ("maxConcurrentRuns", self.max_concurrent_runs),
      ("maxQueuedRuns", self.max_queued_runs),
      ("preparedIsolates", self.prepared_isolates),
    ];
    for (key, value) in counts {
      if value == 0 {
        return Err(format!("config.{key} must be a positive whole number, got 0"));
      }
    }
    Ok(())
  }
}
