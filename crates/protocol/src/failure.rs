//! The failures the runtime decides, rather than the program: each stop's
//! kind and exact message (docs/CONTRACT.md §8), made here once whichever
//! side stops the run: an isolate host for a run it holds, the harness for
//! a run still queued or whose host is gone. Both then settle the output
//! through the same ledger (`OutputLedger::finish_failure`).

use std::fmt;

use crate::config::RuntimeConfig;
use crate::ledger::FailureKind;

/// The most isolate hosts that may die under one run: a run on this many
/// fails instead of being placed or executed again, so that a program
/// that draws the deaths (it holds memory the OOM killer goes for, or
/// kills every host it lands on) ends, with its neighbours spared.
pub const MAX_HOSTS_LOST: u32 = 3;

/// Why the runtime stopped a run before its program completed: the reason
/// a run's stop switch holds in a host (the first one wins), and the reason
/// the harness settles a run with itself (queued, or its host gone).
#[derive(Debug, Clone, PartialEq)]
pub enum StopReason {
  /// The request's signal fired; the text is `String(signal.reason)`.
  Abort(Vec<u16>),
  /// The runtime was disposed while the run was queued or live.
  Disposed,
  /// The program burned its CPU budget (`computeMs`).
  ComputeBudget,
  /// The wall-clock ceiling (`maxWallMs`) was reached.
  WallCeiling,
  /// The isolate reached its heap cap (`maxOldGenerationSizeMb`).
  HeapLimit,
  /// Memory outside the heap reached its cap (`maxExternalMemoryMb`).
  ExternalMemory,
  /// The program called `process.exit(code)`.
  Exit(i32),
  /// A log entry crossed the output cap: the ledger writes the message.
  OutputLimit,
  /// The run's substrate (its thread, its isolate) could not be made; the
  /// text says what failed. Decided by a host's scheduler before the run
  /// has a stop switch: never thrown on one.
  Substrate(String),
  /// The run's isolate host ended (`end` says how, in the harness's
  /// words), and the run was not carried past it (`loss` says why).
  HostEnded { end: String, loss: HostLoss },
}

/// Why a run did not outlive its host's end (see `history.rs`).
#[derive(Debug, Clone, PartialEq)]
pub enum HostLoss {
  /// It was not shown to be waiting on a tool: it may have ended the host.
  Running,
  /// It was executed again, and was not the run its history records.
  Diverged(Divergence),
  /// Its history passed a cap and was given up (the cap's name and MiB).
  HistoryOverCap { key: &'static str, mb: f64 },
  /// It was on [`MAX_HOSTS_LOST`] hosts that ended.
  TooManyHosts,
  /// It was to be executed again in a host of its own, and none could be
  /// started (the text says why).
  NoHostOfItsOwn(String),
}

/// A stopped run's failure kind and message (UTF-16, as the ledger takes
/// it; empty for `output-limit`, whose message the ledger writes).
pub fn failure(stop: &StopReason, config: &RuntimeConfig) -> (FailureKind, Vec<u16>) {
  let (kind, message) = match stop {
    StopReason::Abort(reason) => return (FailureKind::Abort, reason.clone()),
    StopReason::Disposed => (FailureKind::Abort, "runtime disposed".to_owned()),
    StopReason::ComputeBudget => {
      (FailureKind::Timeout, format!("compute budget exhausted ({}ms busy)", js(config.compute_ms)))
    }
    StopReason::WallCeiling => {
      (FailureKind::Timeout, format!("wall-clock ceiling reached ({}ms)", js(config.max_wall_ms)))
    }
    StopReason::HeapLimit => (
      FailureKind::WorkerExit,
      format!(
        "heap limit reached: the program exceeded maxOldGenerationSizeMb ({} MiB)",
        js(config.max_old_generation_size_mb)
      ),
    ),
    StopReason::ExternalMemory => (
      FailureKind::WorkerExit,
      format!(
        "external memory limit reached: the program's memory outside the heap exceeded maxExternalMemoryMb ({} MiB)",
        js(config.max_external_memory_mb)
      ),
    ),
    StopReason::Exit(code) => (FailureKind::WorkerExit, format!("worker exited with code {code} before completing")),
    StopReason::OutputLimit => (FailureKind::OutputLimit, String::new()),
    StopReason::Substrate(what) => (FailureKind::WorkerExit, what.clone()),
    StopReason::HostEnded { end, loss } => (FailureKind::WorkerExit, host_ended(end, loss)),
  };
  (kind, message.encode_utf16().collect())
}

fn host_ended(end: &str, loss: &HostLoss) -> String {
  match loss {
    HostLoss::Running => end.to_owned(),
    HostLoss::Diverged(divergence) => {
      format!("{end}; the run was re-executed on another isolate host and diverged from its history: {divergence}")
    }
    HostLoss::HistoryOverCap { key, mb } => {
      format!("{end}; the run's history passed {key} ({} MiB), so it could not be re-executed", js(*mb))
    }
    HostLoss::TooManyHosts => {
      format!("{end}; the run was on {MAX_HOSTS_LOST} isolate hosts that ended, and is not re-executed again")
    }
    HostLoss::NoHostOfItsOwn(why) => {
      format!("{end}; no isolate host of its own could be started to re-execute the run ({why})")
    }
  }
}

/// The rejection of a binding call past `maxToolCalls` (`max`): the reply
/// the program's call gets, a JSON string literal of the message the
/// program's error carries (docs/CONTRACT.md §8).
pub fn tool_calls_over(max: u32) -> String {
  let message =
    format!("tool call limit reached: the run already made maxToolCalls ({max}) binding calls; this call was not made");
  serde_json::to_string(&message).unwrap_or_default()
}

/// A number as JavaScript's `String(value)` writes it (a config's values
/// are the user's JS numbers, and messages name them as the user wrote
/// them: `1e-7`, not Rust's `0.0000001`).
pub fn js(value: f64) -> String {
  ryu_js::Buffer::new().format(value).to_owned()
}

/// Why a re-executed run is not the run the history records. Numbers count
/// from 1, as a reader counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Divergence {
  /// Its n-th call has another function or argument than the recorded one.
  Call(u64),
  /// Its n-th log entry is not the recorded one.
  Log(u64),
  /// It finished before it made every recorded call and log entry again.
  FinishedEarly,
}

impl fmt::Display for Divergence {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match self {
      Divergence::Call(n) => write!(f, "its call number {n} is not the recorded one"),
      Divergence::Log(n) => write!(f, "its log entry number {n} is not the recorded one"),
      Divergence::FinishedEarly => f.write_str("it finished before making its recorded calls and log entries again"),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn message(stop: &StopReason, config: &RuntimeConfig) -> (FailureKind, String) {
    let (kind, message) = failure(stop, config);
    (kind, String::from_utf16_lossy(&message))
  }

  fn host_ended(loss: HostLoss) -> StopReason {
    StopReason::HostEnded { end: "the isolate host stopped: killed".to_owned(), loss }
  }

  /// The messages docs/CONTRACT.md §8 gives, byte for byte, with each
  /// number as JavaScript writes it.
  #[test]
  fn each_stop_has_its_kind_and_message() {
    let config = RuntimeConfig {
      compute_ms: 1.5,
      max_wall_ms: 600_000.0,
      max_old_generation_size_mb: 64.0,
      max_external_memory_mb: 1e-7,
      ..RuntimeConfig::small()
    };
    let abort: Vec<u16> = "stop".encode_utf16().collect();
    let cases = [
      (StopReason::Abort(abort), FailureKind::Abort, "stop"),
      (StopReason::Disposed, FailureKind::Abort, "runtime disposed"),
      (StopReason::ComputeBudget, FailureKind::Timeout, "compute budget exhausted (1.5ms busy)"),
      (StopReason::WallCeiling, FailureKind::Timeout, "wall-clock ceiling reached (600000ms)"),
      (
        StopReason::HeapLimit,
        FailureKind::WorkerExit,
        "heap limit reached: the program exceeded maxOldGenerationSizeMb (64 MiB)",
      ),
      (
        StopReason::ExternalMemory,
        FailureKind::WorkerExit,
        "external memory limit reached: the program's memory outside the heap exceeded maxExternalMemoryMb (1e-7 MiB)",
      ),
      (StopReason::Exit(3), FailureKind::WorkerExit, "worker exited with code 3 before completing"),
      (StopReason::OutputLimit, FailureKind::OutputLimit, ""),
      (StopReason::Substrate("no thread".to_owned()), FailureKind::WorkerExit, "no thread"),
      (host_ended(HostLoss::Running), FailureKind::WorkerExit, "the isolate host stopped: killed"),
      (
        host_ended(HostLoss::Diverged(Divergence::Log(2))),
        FailureKind::WorkerExit,
        "the isolate host stopped: killed; the run was re-executed on another isolate host and diverged from its \
         history: its log entry number 2 is not the recorded one",
      ),
      (
        host_ended(HostLoss::HistoryOverCap { key: "maxRunHistoryMb", mb: 0.5 }),
        FailureKind::WorkerExit,
        "the isolate host stopped: killed; the run's history passed maxRunHistoryMb (0.5 MiB), so it could not be \
         re-executed",
      ),
      (
        host_ended(HostLoss::NoHostOfItsOwn("no such file".to_owned())),
        FailureKind::WorkerExit,
        "the isolate host stopped: killed; no isolate host of its own could be started to re-execute the run (no \
         such file)",
      ),
      (
        host_ended(HostLoss::TooManyHosts),
        FailureKind::WorkerExit,
        "the isolate host stopped: killed; the run was on 3 isolate hosts that ended, and is not re-executed again",
      ),
    ];
    for (stop, kind, text) in cases {
      assert_eq!(message(&stop, &config), (kind, text.to_owned()));
    }
  }

  /// The reply to a call past the cap is the JSON string of the message
  /// docs/CONTRACT.md §8 gives.
  #[test]
  fn a_call_past_the_cap_is_rejected_naming_it() {
    assert_eq!(
      tool_calls_over(1000),
      "\"tool call limit reached: the run already made maxToolCalls (1000) binding calls; this call was not made\""
    );
  }
}
