//! What a run cost, gathered by the harness while the run goes (its calls
//! and their bytes, the isolate hosts it ran on) and from the execution
//! that finished it (CPU, memory peaks), handed to JS with its result
//! (`run_result.rs`): the TS layer emits it as the run's report
//! (`code-runtime-v8/run-report`; the README's "Run reports" says what
//! each figure means).

use dsh_protocol::frame::{BindingCall, ExecutionCost};
use dsh_protocol::out_of_band::RawString;

/// A run's figures so far.
#[derive(Debug, Default, Clone)]
pub struct RunCost {
  /// Binding calls that reached a host function: each once, however
  /// often the run was executed (the history answers the repeats).
  pub calls: u32,
  /// Calls refused at `maxToolCalls` (the most any execution made).
  pub refused_calls: u32,
  /// Bytes of those calls' arguments as they crossed: their JSON (UTF-8)
  /// and their long strings out of band (Latin-1 a byte a character,
  /// UTF-16 two a unit).
  pub argument_bytes: u64,
  /// Bytes of their results as they crossed (a result's JSON, or its text
  /// for a string crossed as it is; a failure's message as JSON).
  pub result_bytes: u64,
  /// The pids of the isolate hosts it started on, in order.
  pub host_pids: Vec<u32>,
  /// What the execution that finished it reported; absent when none did
  /// (a run stopped before it started, or whose last host died).
  pub execution: Option<ExecutionCost>,
  /// Bytes of its logs as `maxOutputBytes` counts them (the JSON array:
  /// `[]` alone is 2), once it ended.
  pub log_bytes: u64,
  /// Times it was executed again after its host died, once it ended.
  pub reexecutions: u32,
}

impl RunCost {
  /// A call that goes to its host function.
  pub fn called(&mut self, call: &BindingCall) {
    let out_of_band: u64 = call
      .strings
      .iter()
      .map(|string| match string {
        RawString::Latin1(bytes) => bytes.len() as u64,
        RawString::Utf16(units) => 2 * units.len() as u64,
      })
      .sum();
    self.calls = self.calls.saturating_add(1);
    self.argument_bytes = self.argument_bytes.saturating_add(call.args.len() as u64 + out_of_band);
  }

  /// Call `call_id` was refused at the cap of `max_calls`.
  pub fn refused(&mut self, call_id: u32, max_calls: u32) {
    self.refused_calls = self.refused_calls.max(call_id.saturating_add(1).saturating_sub(max_calls));
  }

  /// A host function's result of `bytes` (`Answer::bytes`) was taken for
  /// one of its calls.
  pub fn answered(&mut self, bytes: u64) {
    self.result_bytes = self.result_bytes.saturating_add(bytes);
  }

  /// The run started on the host whose pid is `pid`.
  pub fn started_on(&mut self, pid: u32) {
    self.host_pids.push(pid);
  }

  /// The figures as the run ends, with what only its end knows: the
  /// bytes of its logs, and how often it was executed again.
  pub fn ended(mut self, log_bytes: u64, reexecutions: u32) -> RunCost {
    self.log_bytes = log_bytes;
    self.reexecutions = reexecutions;
    self
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_run_counts_each_call_once_and_its_bytes_as_they_crossed() {
    let mut cost = RunCost::default();
    let call = BindingCall {
      run_id: 1,
      call_id: 0,
      namespace: 0,
      function: 0,
      args: "{\"a\":null,\"b\":null}".into(),
      paths: "[[0,\"a\"],[1,\"b\"]]".into(),
      strings: vec![RawString::Latin1(vec![b'x'; 3].into()), RawString::Utf16(vec![0x20ac; 2])],
    };
    cost.called(&call);
    cost.answered(5);
    cost.refused(4, 3);
    cost.refused(2, 3);
    cost.started_on(10);
    cost.started_on(11);
    let ended = cost.ended(2, 1);
    assert_eq!((ended.calls, ended.argument_bytes, ended.result_bytes), (1, 19 + 3 + 4, 5));
    assert_eq!((ended.refused_calls, ended.host_pids, ended.log_bytes, ended.reexecutions), (2, vec![10, 11], 2, 1));
  }
}
