//! A config checked against the bounds of its keys (`config_keys.rs`, the
//! one table of keys), and mapped to what the hosts and the supervisor
//! take. Every key has an upper bound this machine can honour, so no value
//! that passes can end a host or the harness later (a `computeMs` too
//! large for a `Duration`, a reserve of isolates no host can start, caps
//! beyond the machine's memory). Refusals follow docs/CONTRACT.md §2:
//! every number positive first, then `maxOutputBytes`, counts whole, each
//! key at most its bound, at least its bound, then the machine's limits.

use std::path::PathBuf;
use std::time::Duration;

use dsh_protocol::config::{available_cores, machine_busy_slots, machine_memory_mb, NodeFacts, RuntimeConfig};

use crate::config_keys::{js, Key, Kind, Max, Min, Value, KEYS, MAX_COUNT};
use crate::NativeConfig;

/// What a checked config becomes: the supervisor's settings, with the
/// hosts' config among them.
pub struct Settings {
  pub config: RuntimeConfig,
  pub executable: PathBuf,
  /// A host silent for this long is killed and replaced.
  pub unresponsive_after: Duration,
  /// How many hosts share the runs.
  pub hosts: usize,
  /// A host that reports a protection off ends before it takes a run
  /// (`requireSandbox`).
  pub require_sandbox: bool,
  /// A host whose resident memory is above this many bytes, once it has
  /// run a program, takes no more runs and is replaced when its runs end
  /// (`hostMaxRssMb`).
  pub recycle_above_bytes: u64,
  /// What runs' histories may hold (`maxRunHistoryMb`, `maxHistoryMb`).
  pub history_caps: HistoryCaps,
  /// The most binding calls one run may make (`maxToolCalls`).
  pub max_tool_calls: u32,
}

/// The bounds of runs' histories (`maxRunHistoryMb`, `maxHistoryMb`).
#[derive(Clone, Copy, Debug)]
pub struct HistoryCaps {
  pub per_run_mb: f64,
  pub total_mb: f64,
}

impl HistoryCaps {
  pub fn per_run_bytes(&self) -> u64 {
    (self.per_run_mb * 1024.0 * 1024.0) as u64
  }

  pub fn total_bytes(&self) -> u64 {
    (self.total_mb * 1024.0 * 1024.0) as u64
  }
}

/// A number key's value, with whether it must be whole, its lower bound
/// and its upper bound.
fn number(key: &Key, config: &NativeConfig) -> Option<(f64, bool, Min, Max)> {
  match (key.kind, (key.read)(config)) {
    (Kind::Number { min, max }, Value::Number(value)) => Some((value, false, min, max)),
    (Kind::Whole { min, max }, Value::Number(value)) => Some((value, true, min, max)),
    _ => None,
  }
}

/// The upper bound checked before the machine's own limits, and the words
/// that follow it in the message; `None` for a bound checked last.
fn upper_bound(max: Max) -> Option<(f64, &'static str)> {
  match max {
    Max::Const(bound) => Some((bound, "")),
    Max::MachineMemoryMb => Some((machine_memory_mb(), " (this machine's memory)")),
    // Bounded first by what a count holds, so that the mappings' check
    // converts it exactly.
    Max::MachineMappings => Some((MAX_COUNT, "")),
    Max::PerCore(_) => None,
  }
}

/// Check every key against its bounds; the first refusal, as the message
/// the user sees.
fn check_bounds(config: &NativeConfig) -> Result<(), String> {
  let numbers: Vec<(&str, f64, bool, Min, Max)> = KEYS
    .iter()
    .filter_map(|key| number(key, config).map(|(value, whole, min, max)| (key.name, value, whole, min, max)))
    .collect();
  // Every number positive (and finite).
  for &(key, value, ..) in &numbers {
    if !(value.is_finite() && value > 0.0) {
      return Err(format!("config.{key} must be a positive number, got {}", js(value)));
    }
  }
  // A whole number with a lower bound of its own says its whole range at once.
  for &(key, value, whole, min, max) in &numbers {
    let (true, Min::AtLeast(min)) = (whole, min) else { continue };
    let bound = upper_bound(max).map_or(f64::MAX, |(bound, _)| bound);
    if value.fract() != 0.0 || value < min || value > bound {
      return Err(format!(
        "config.{key} must be a safe integer of at least {} and at most {}, got {}",
        js(min),
        js(bound),
        js(value)
      ));
    }
  }
  // Counts whole.
  for &(key, value, whole, min, _) in &numbers {
    if whole && matches!(min, Min::Positive) && value.fract() != 0.0 {
      return Err(format!("config.{key} must be a whole number, got {}", js(value)));
    }
  }
  // Each at most its bound (those per core last: `check_per_core`).
  for &(key, value, whole, min, max) in &numbers {
    if whole && matches!(min, Min::AtLeast(_)) {
      continue;
    }
    if let Some((bound, why)) = upper_bound(max) {
      if value > bound {
        return Err(format!("config.{key} must be at most {}{why}, got {}", js(bound), js(value)));
      }
    }
  }
  // Each at least its own lower bound.
  for &(key, value, whole, min, _) in &numbers {
    if let (false, Min::AtLeast(min)) = (whole, min) {
      if value < min {
        return Err(format!("config.{key} must be at least {}, got {}", js(min), js(value)));
      }
    }
  }
  Ok(())
}

/// The bounds per core, checked once the machine's mappings are.
fn check_per_core(config: &NativeConfig) -> Result<(), String> {
  for key in KEYS {
    let Some((value, _, _, Max::PerCore(per_core))) = number(key, config) else { continue };
    let bound = per_core * available_cores();
    if value > bound as f64 {
      return Err(format!("config.{} must be at most {bound} ({per_core} per core), got {}", key.name, js(value)));
    }
  }
  Ok(())
}

/// Check every key; the first refusal, as the message the user sees. Then
/// each key to its consumer: the hosts' `RuntimeConfig`, or the
/// supervisor's settings.
pub fn check(config: &NativeConfig, node: NodeFacts, executable: PathBuf) -> Result<Settings, String> {
  check_bounds(config)?;
  // Whole, positive and bounded above (the machine's mappings bound
  // maxConcurrentRuns, below): the conversions are exact.
  let runtime = RuntimeConfig {
    compute_ms: config.compute_ms,
    max_wall_ms: config.max_wall_ms,
    max_output_bytes: config.max_output_bytes as u64,
    max_old_generation_size_mb: config.max_old_generation_size_mb,
    max_external_memory_mb: config.max_external_memory_mb,
    max_concurrent_runs: config.max_concurrent_runs as usize,
    max_queued_runs: config.max_queued_runs as usize,
    prepared_isolates: config.prepared_isolates as usize,
    busy_slots: machine_busy_slots(),
    node,
  };
  runtime.check_machine_limits()?;
  check_per_core(config)?;
  Ok(Settings {
    config: runtime,
    executable,
    unresponsive_after: Duration::from_secs_f64(config.host_unresponsive_ms / 1000.0),
    hosts: config.isolate_hosts as usize,
    require_sandbox: config.require_sandbox,
    recycle_above_bytes: (config.host_max_rss_mb * 1024.0 * 1024.0) as u64,
    history_caps: HistoryCaps { per_run_mb: config.max_run_history_mb, total_mb: config.max_history_mb },
    // Whole, positive and at most u32::MAX (its bounds): exact.
    max_tool_calls: config.max_tool_calls as u32,
  })
}

#[cfg(test)]
mod tests {
  use super::*;

  fn node() -> NodeFacts {
    RuntimeConfig::small().node
  }

  fn refusal(change: impl FnOnce(&mut NativeConfig)) -> String {
    let mut config = NativeConfig::defaults();
    change(&mut config);
    check(&config, node(), PathBuf::new()).err().unwrap_or_default()
  }

  #[test]
  fn the_defaults_pass() {
    assert!(check(&NativeConfig::defaults(), node(), PathBuf::new()).is_ok());
  }

  /// The messages docs/CONTRACT.md §2 gives, byte for byte.
  #[test]
  fn each_refusal_names_the_key_and_its_bound() {
    type Change = fn(&mut NativeConfig);
    let cases: [(Change, &str); 12] = [
      (|c| c.compute_ms = 0.0, "config.computeMs must be a positive number, got 0"),
      (|c| c.max_wall_ms = -1.0, "config.maxWallMs must be a positive number, got -1"),
      (|c| c.max_output_bytes = f64::NAN, "config.maxOutputBytes must be a positive number, got NaN"),
      (
        |c| c.max_old_generation_size_mb = f64::INFINITY,
        "config.maxOldGenerationSizeMb must be a positive number, got Infinity",
      ),
      (
        |c| c.max_output_bytes = 3.0,
        "config.maxOutputBytes must be a safe integer of at least 4 and at most 1073741824, got 3",
      ),
      (
        |c| c.max_output_bytes = 10.5,
        "config.maxOutputBytes must be a safe integer of at least 4 and at most 1073741824, got 10.5",
      ),
      (|c| c.max_wall_ms = 2147483648.0, "config.maxWallMs must be at most 2147483647, got 2147483648"),
      (|c| c.max_queued_runs = 1.5, "config.maxQueuedRuns must be a whole number, got 1.5"),
      (|c| c.max_queued_runs = 2f64.powi(32), "config.maxQueuedRuns must be at most 4294967295, got 4294967296"),
      (|c| c.isolate_hosts = 65.0, "config.isolateHosts must be at most 64, got 65"),
      (|c| c.compute_ms = 1e300, "config.computeMs must be at most 2147483647, got 1e+300"),
      (|c| c.host_unresponsive_ms = 50.0, "config.hostUnresponsiveMs must be at least 100, got 50"),
    ];
    for (change, message) in cases {
      assert_eq!(refusal(change), message);
    }
    let memory = js(machine_memory_mb());
    assert_eq!(
      refusal(|c| c.host_max_rss_mb = 1e12),
      format!("config.hostMaxRssMb must be at most {memory} (this machine's memory), got 1000000000000")
    );
    let cores = available_cores();
    assert_eq!(
      refusal(|c| c.prepared_isolates = 1e300),
      format!("config.preparedIsolates must be at most {} (64 per core), got 1e+300", 64 * cores)
    );
    assert!(refusal(|c| c.max_concurrent_runs = 1e6)
      .starts_with("config.maxConcurrentRuns (1000000) is more than this machine allows ("));
  }

  /// Positive first (whatever the key's place in the table), then the
  /// seam's order.
  #[test]
  fn refusals_come_in_the_contracts_order() {
    let first = refusal(|c| {
      c.compute_ms = 1e300;
      c.max_queued_runs = 1.5;
      c.host_max_rss_mb = -1.0;
    });
    assert_eq!(first, "config.hostMaxRssMb must be a positive number, got -1");
    let second = refusal(|c| {
      c.compute_ms = 1e300;
      c.max_queued_runs = 1.5;
      c.max_output_bytes = 3.0;
    });
    assert!(second.starts_with("config.maxOutputBytes must be a safe integer"));
    assert_eq!(
      refusal(|c| {
        c.compute_ms = 1e300;
        c.max_queued_runs = 1.5;
      }),
      "config.maxQueuedRuns must be a whole number, got 1.5"
    );
  }
}
