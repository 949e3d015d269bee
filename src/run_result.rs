//! A finished run as it crosses to JS: its value or failure, and its logs,
//! handed out in chunks.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use dsh_protocol::ledger::{Completion, Logs, Output};

/// A finished run. `valueJson` is present iff the run completed with a
/// value; `errorKind`/`errorMessage` iff it failed.
#[napi(object, object_from_js = false)]
pub struct NativeRunResult {
  pub logs: NativeLogs,
  pub value_json: Option<String>,
  pub error_kind: Option<String>,
  pub error_message: Option<Utf16String>,
}

impl From<Output> for NativeRunResult {
  fn from(output: Output) -> Self {
    let logs = NativeLogs { logs: output.logs, next: 0 };
    match output.completion {
      Completion::NoValue => NativeRunResult { logs, value_json: None, error_kind: None, error_message: None },
      Completion::Value(json) => {
        NativeRunResult { logs, value_json: Some(json), error_kind: None, error_message: None }
      }
      Completion::Failure { kind, message } => NativeRunResult {
        logs,
        value_json: None,
        error_kind: Some(kind.as_str().to_owned()),
        error_message: Some(Utf16String::from(message)),
      },
    }
  }
}

/// Text copied into JS strings per `fill` (8 MiB of UTF-16): a few ms.
const LOG_UNITS_PER_FILL: usize = 4 << 20;

/// A result's logs, still packed (see `ledger::Logs`), handed out in
/// chunks: a runaway program within the default cap can leave ~22 million
/// entries, and making them all into JS strings at once would hold the
/// host's event loop for seconds. The host takes a chunk per turn.
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
