//! Every key of the runtime's configuration checked against its bounds, in
//! one place: the schema (`ts/config.ts`) gives each key its type and
//! default; what values a key may take, and the message that refuses one,
//! is here. Every key has an upper bound this machine can honour, so no
//! value that passes can end a host or the harness later (a `computeMs`
//! too large for a `Duration`, a reserve of isolates no host can start,
//! caps beyond the machine's memory). Refusals follow docs/CONTRACT.md §2:
//! every number positive first, then `maxOutputBytes`, then the rest.

use std::time::Duration;

use dsh_protocol::config::{machine_busy_slots, HostFacts, RuntimeConfig, MIN_OUTPUT_BYTES};

use crate::NativeConfig;

/// The longest wall ceiling (and any other duration a key sets): Node's
/// `setTimeout` ceiling, which the seam takes as `maxWallMs`'s bound.
pub const MAX_MS: f64 = 2_147_483_647.0;

/// The most isolate-host processes one runtime may have: each is a process
/// with a V8 of its own, and past a few per core they only add memory.
pub const MAX_ISOLATE_HOSTS: f64 = 64.0;

/// The largest `maxOutputBytes`: a result of 1 GiB of JSON is already
/// more than the harness can hand a model, and a V8 string holds at most
/// 2^29 UTF-16 units.
pub const MAX_OUTPUT_BYTES: f64 = (1u64 << 30) as f64;

/// Prepared isolates per core at most: each is a thread and an isolate
/// (~2-3 MiB) made before any run asks for it; a host making thousands
/// never becomes ready.
pub const PREPARED_PER_CORE: usize = 64;

/// The shortest `hostUnresponsiveMs`: the heartbeat goes at most every
/// 10 ms, and a host needs a few beats to answer one.
pub const MIN_UNRESPONSIVE_MS: f64 = 100.0;

/// What a checked config becomes: the hosts' config and the supervisor's.
pub struct Checked {
  pub runtime: RuntimeConfig,
  pub unresponsive_after: Duration,
  pub hosts: usize,
  pub require_sandbox: bool,
  pub recycle_above_bytes: u64,
}

/// A number as JavaScript's `String(value)` writes it, for messages about
/// values a user wrote in JavaScript.
fn js(value: f64) -> String {
  ryu_js::Buffer::new().format(value).to_owned()
}

/// This machine's memory, in MiB (the bound of every memory key).
fn machine_memory_mb() -> f64 {
  // SAFETY: sysconf has no preconditions.
  let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
  if pages <= 0 || page <= 0 {
    return f64::MAX;
  }
  (pages as f64 * page as f64 / (1024.0 * 1024.0)).floor()
}

/// Check every key; the first refusal, as the message the user sees.
pub fn check(config: &NativeConfig, host: HostFacts) -> Result<Checked, String> {
  let numbers = [
    ("computeMs", config.compute_ms),
    ("maxWallMs", config.max_wall_ms),
    ("maxOutputBytes", config.max_output_bytes),
    ("maxOldGenerationSizeMb", config.max_old_generation_size_mb),
    ("maxExternalMemoryMb", config.max_external_memory_mb),
    ("maxConcurrentRuns", config.max_concurrent_runs),
    ("maxQueuedRuns", config.max_queued_runs),
    ("preparedIsolates", config.prepared_isolates),
    ("hostUnresponsiveMs", config.host_unresponsive_ms),
    ("isolateHosts", config.isolate_hosts),
    ("hostMaxRssMb", config.host_max_rss_mb),
  ];
  for (key, value) in numbers {
    if !(value.is_finite() && value > 0.0) {
      return Err(format!("config.{key} must be a positive number, got {}", js(value)));
    }
  }
  let output = config.max_output_bytes;
  if output.fract() != 0.0 || output < f64::from(MIN_OUTPUT_BYTES) || output > MAX_OUTPUT_BYTES {
    return Err(format!(
      "config.maxOutputBytes must be a safe integer of at least {MIN_OUTPUT_BYTES} and at most {}, got {}",
      js(MAX_OUTPUT_BYTES),
      js(output)
    ));
  }
  let whole = [
    ("maxConcurrentRuns", config.max_concurrent_runs),
    ("maxQueuedRuns", config.max_queued_runs),
    ("preparedIsolates", config.prepared_isolates),
    ("isolateHosts", config.isolate_hosts),
  ];
  for (key, value) in whole {
    if value.fract() != 0.0 {
      return Err(format!("config.{key} must be a whole number, got {}", js(value)));
    }
  }
  let memory = machine_memory_mb();
  let at_most = [
    ("computeMs", config.compute_ms, MAX_MS, ""),
    ("maxWallMs", config.max_wall_ms, MAX_MS, ""),
    ("maxOldGenerationSizeMb", config.max_old_generation_size_mb, memory, " (this machine's memory)"),
    ("maxExternalMemoryMb", config.max_external_memory_mb, memory, " (this machine's memory)"),
    ("maxConcurrentRuns", config.max_concurrent_runs, f64::from(u32::MAX), ""),
    ("maxQueuedRuns", config.max_queued_runs, f64::from(u32::MAX), ""),
    ("hostUnresponsiveMs", config.host_unresponsive_ms, MAX_MS, ""),
    ("isolateHosts", config.isolate_hosts, MAX_ISOLATE_HOSTS, ""),
    ("hostMaxRssMb", config.host_max_rss_mb, memory, " (this machine's memory)"),
  ];
  for (key, value, bound, why) in at_most {
    if value > bound {
      return Err(format!("config.{key} must be at most {}{why}, got {}", js(bound), js(value)));
    }
  }
  if config.host_unresponsive_ms < MIN_UNRESPONSIVE_MS {
    return Err(format!(
      "config.hostUnresponsiveMs must be at least {}, got {}",
      js(MIN_UNRESPONSIVE_MS),
      js(config.host_unresponsive_ms)
    ));
  }
  // Whole, positive and bounded above (the machine's mappings bound
  // maxConcurrentRuns, below): the conversions are exact.
  let runtime = RuntimeConfig {
    compute_ms: config.compute_ms,
    max_wall_ms: config.max_wall_ms,
    max_output_bytes: output as u64,
    max_old_generation_size_mb: config.max_old_generation_size_mb,
    max_external_memory_mb: config.max_external_memory_mb,
    max_concurrent_runs: config.max_concurrent_runs as usize,
    max_queued_runs: config.max_queued_runs as usize,
    prepared_isolates: config.prepared_isolates as usize,
    busy_slots: machine_busy_slots(),
    host,
  };
  runtime.check_machine_limits()?;
  let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
  let prepared_bound = PREPARED_PER_CORE * cores;
  if runtime.prepared_isolates > prepared_bound {
    return Err(format!(
      "config.preparedIsolates must be at most {prepared_bound} ({PREPARED_PER_CORE} per core), got {}",
      runtime.prepared_isolates
    ));
  }
  Ok(Checked {
    runtime,
    unresponsive_after: Duration::from_secs_f64(config.host_unresponsive_ms / 1000.0),
    hosts: config.isolate_hosts as usize,
    require_sandbox: config.require_sandbox,
    recycle_above_bytes: (config.host_max_rss_mb * 1024.0 * 1024.0) as u64,
  })
}
