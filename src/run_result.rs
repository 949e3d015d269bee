//! A finished run as it crosses to JS: its value or failure, and its logs,
//! handed out in chunks.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use dsh_protocol::ledger::{Completion, Logs, Output};

use crate::run_report::RunCost;

/// A finished run. `valueJson` is present iff the run completed with a
/// value; `errorKind`/`errorMessage` iff it failed. `report`: what it cost.
#[napi(object, object_from_js = false)]
pub struct NativeRunResult {
  pub logs: NativeLogs,
  pub value_json: Option<String>,
  pub error_kind: Option<String>,
  pub error_message: Option<Utf16String>,
  pub report: NativeRunReport,
}

impl NativeRunResult {
  pub fn new(output: Output, cost: RunCost) -> Self {
    let logs = NativeLogs { logs: output.logs, next: 0 };
    let report = NativeRunReport::from(cost);
    let (value_json, error_kind, error_message) = match output.completion {
      Completion::NoValue => (None, None, None),
      Completion::Value(json) => (Some(json), None, None),
      Completion::Failure { kind, message } => (None, Some(kind.as_str().to_owned()), Some(Utf16String::from(message))),
    };
    NativeRunResult { logs, value_json, error_kind, error_message, report }
  }
}

/// A run's figures as they cross to JS (`run_report.rs`; the TS layer adds
/// the outcome and the wall time). Byte counts are numbers: exact up to 2^53.
#[napi(object, object_from_js = false)]
pub struct NativeRunReport {
  /// Binding calls that reached a host function, each once.
  pub calls: u32,
  /// Binding calls refused at `maxToolCalls`.
  pub refused_calls: u32,
  /// Bytes of the calls' arguments as they crossed (JSON UTF-8, and long
  /// strings out of band).
  pub argument_bytes: f64,
  /// Bytes of the host functions' results as they crossed.
  pub result_bytes: f64,
  /// Bytes of the logs as `maxOutputBytes` counts them (the JSON array:
  /// `[]` alone is 2).
  pub log_bytes: f64,
  /// The isolate hosts' pids the run started on, in order.
  pub host_pids: Vec<u32>,
  /// Times the run was executed again after its host died.
  pub reexecutions: u32,
  /// CPU ms charged to the program, as `computeMs` counts it; absent when
  /// no execution of it finished on its host.
  pub compute_ms: Option<f64>,
  /// The most its isolate's heap held, in bytes; absent likewise.
  pub peak_heap_bytes: Option<f64>,
  /// The most it held outside the heap at once, in bytes, as
  /// `maxExternalMemoryMb` counts it; absent likewise.
  pub peak_external_bytes: Option<f64>,
}

impl From<RunCost> for NativeRunReport {
  fn from(cost: RunCost) -> Self {
    NativeRunReport {
      calls: cost.calls,
      refused_calls: cost.refused_calls,
      argument_bytes: cost.argument_bytes as f64,
      result_bytes: cost.result_bytes as f64,
      log_bytes: cost.log_bytes as f64,
      host_pids: cost.host_pids,
      reexecutions: cost.reexecutions,
      compute_ms: cost.execution.map(|execution| execution.cpu_us / 1000.0),
      peak_heap_bytes: cost.execution.map(|execution| execution.peak_heap_bytes as f64),
      peak_external_bytes: cost.execution.map(|execution| execution.peak_external_bytes as f64),
    }
  }
}

/// Text copied into JS strings per `fill` (8 MiB of UTF-16): a few ms.
const LOG_UNITS_PER_FILL: usize = 4 << 20;

/// A result's logs, still packed (see `ledger::Logs`), handed out in
/// chunks: a runaway program within the default cap can leave ~22 million
/// entries, and making them all into JS strings at once would hold the
/// harness's event loop for seconds. Node takes a chunk per turn.
#[napi]
pub struct NativeLogs {
  logs: Logs,
  /// Entries already taken.
  next: usize,
}

#[napi]
impl NativeLogs {
  /// Entries not taken yet.
  #[napi(getter)]
  pub fn remaining(&self) -> u32 {
    u32::try_from(self.logs.len() - self.next).unwrap_or(u32::MAX)
  }

  /// Store the next entries at their own indices of `out` (entry `i` at
  /// `out[i]`: the host sizes `out` once, up front; growing an array entry
  /// by entry costs ~9x more at these sizes): at most `max` entries, and no
  /// more once `LOG_UNITS_PER_FILL` UTF-16 units were copied (at least one entry
  /// is always stored). Returns how many were stored.
  #[napi(ts_args_type = "out: Array<string>, max: number")]
  pub fn fill(&mut self, env: &Env, mut out: Array, max: u32) -> Result<u32> {
    let first = u32::try_from(self.next).map_err(|_| Error::from_reason("too many log entries"))?;
    let mut stored = 0u32;
    let mut units = 0usize;
    for entry in self.logs.iter_from(self.next) {
      if stored == max || (stored > 0 && units >= LOG_UNITS_PER_FILL) {
        break;
      }
      out.set(first + stored, env.create_string_utf16(entry)?)?;
      stored += 1;
      units += entry.len();
    }
    self.next += stored as usize;
    Ok(stored)
  }
}
