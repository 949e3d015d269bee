//! The output ledger: one exact JSON byte budget over the run's logs and its
//! completion value or failure message (docs/CONTRACT.md §6).
//!
//! Text is kept as UTF-16 code units, exactly as V8 and Node hold it, so a
//! lone surrogate is measured (and returned) as what it is rather than as a
//! lossy replacement character.

/// What the final result of a run carries besides its logs.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
  /// The program returned `undefined`: the result has no `value` key.
  NoValue,
  /// The program returned this compact JSON text.
  Value(String),
  /// The run failed.
  Failure { kind: FailureKind, message: Vec<u16> },
}

/// The seam's failure kinds (`CodeRunFailure.kind`), each written once:
/// its variant, the seam's spelling of it, and its field in the outcome
/// counts (`stats().outcomes`, camel-cased there). Every list of kinds is
/// made from this one: the enum and its channel codes here, the counts
/// here, the addon's napi outcome object (`failure_kinds!(native_outcomes)`
/// in its lib.rs). Expands `$then!` with the list.
#[macro_export]
macro_rules! failure_kinds {
  ($then:ident) => {
    $then! {
      (Exception, "exception", exception),
      (Timeout, "timeout", timeout),
      (Abort, "abort", abort),
      (WorkerExit, "worker-exit", worker_exit),
      (InvalidOutput, "invalid-output", invalid_output),
      (OutputLimit, "output-limit", output_limit),
    }
  };
}

macro_rules! define_failure_kinds {
  ($(($variant:ident, $name:literal, $field:ident)),* $(,)?) => {
    /// The failure taxonomy of the seam (`CodeRunFailure.kind`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FailureKind {
      $($variant),*
    }

    impl FailureKind {
      /// Every kind, in the order of its code on the channel
      /// (`frame.rs`: a failure crosses as its index here).
      const ALL: &[FailureKind] = &[$(FailureKind::$variant),*];

      /// The seam's spelling of the kind.
      pub fn as_str(self) -> &'static str {
        match self {
          $(FailureKind::$variant => $name),*
        }
      }
    }

    /// Finished runs by outcome (the seam's kinds, `ok` for a completion).
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
    pub struct Outcomes {
      pub ok: u64,
      $(pub $field: u64),*
    }

    impl Outcomes {
      pub fn count(&mut self, completion: &Completion) {
        let counter = match completion {
          Completion::Value(_) | Completion::NoValue => &mut self.ok,
          Completion::Failure { kind, .. } => match kind {
            $(FailureKind::$variant => &mut self.$field),*
          },
        };
        *counter += 1;
      }
    }
  };
}

failure_kinds!(define_failure_kinds);

impl FailureKind {
  /// The kind's code on the channel.
  pub fn code(self) -> u8 {
    FailureKind::ALL.iter().position(|kind| *kind == self).map_or(u8::MAX, |at| at as u8)
  }

  /// The kind with this code, if any.
  pub fn from_code(code: u8) -> Option<FailureKind> {
    FailureKind::ALL.get(usize::from(code)).copied()
  }

  /// The kind the seam spells `name`, if any.
  pub fn from_name(name: &str) -> Option<FailureKind> {
    FailureKind::ALL.iter().copied().find(|kind| kind.as_str() == name)
  }
}

/// A finished run's output, already within the cap.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
  pub logs: Logs,
  pub completion: Completion,
}

/// Log entries, packed: one buffer of UTF-16 units and the end offset of
/// each entry. The cap bounds the text, not the count: the default 64 MiB
/// admits ~22 million empty entries, which as one allocation (and 24-byte
/// header) apiece took 1.15 GB of the host's memory; packed they cost 8
/// bytes apiece beyond their text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Logs {
  units: Vec<u16>,
  ends: Vec<usize>,
}

impl Logs {
  pub fn push(&mut self, entry: &[u16]) {
    self.units.extend_from_slice(entry);
    self.ends.push(self.units.len());
  }

  pub fn len(&self) -> usize {
    self.ends.len()
  }

  pub fn is_empty(&self) -> bool {
    self.ends.is_empty()
  }

  /// The entries, in order.
  pub fn iter(&self) -> impl Iterator<Item = &[u16]> + '_ {
    self.iter_from(0)
  }

  /// The entries from index `first` on, in order.
  pub fn iter_from(&self, first: usize) -> impl Iterator<Item = &[u16]> + '_ {
    let mut start = first.checked_sub(1).and_then(|last| self.ends.get(last)).copied().unwrap_or(0);
    self.ends[first.min(self.ends.len())..].iter().map(move |&end| {
      let entry = &self.units[start..end];
      start = end;
      entry
    })
  }
}

/// JSON-string bytes of one code point (or lone surrogate) inside quotes.
fn unit_cost(unit: u16) -> u64 {
  match unit {
    0x22 | 0x5c => 2,                      // \" and \\
    0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2, // \b \t \n \f \r
    0x00..=0x1f => 6,                      // \u00XX
    0x20..=0x7f => 1,
    0x80..=0x7ff => 2,
    0xd800..=0xdfff => 6, // lone surrogate: \uXXXX
    _ => 3,
  }
}

/// Walk `text` by code points, yielding (units consumed, JSON bytes).
fn code_points(text: &[u16]) -> impl Iterator<Item = (usize, u64)> + '_ {
  let mut i = 0;
  std::iter::from_fn(move || {
    let unit = *text.get(i)?;
    let paired =
      (0xd800..=0xdbff).contains(&unit) && text.get(i + 1).is_some_and(|next| (0xdc00..=0xdfff).contains(next));
    let step = if paired { (2, 4) } else { (1, unit_cost(unit)) };
    i += step.0;
    Some(step)
  })
}

/// JSON string size of `text` (quotes included), or `None` once it would
/// exceed `max` (so a huge text is never walked past the budget).
pub fn json_string_bytes_up_to(text: &[u16], max: u64) -> Option<u64> {
  let mut bytes = 2u64;
  if bytes > max {
    return None;
  }
  for (_, cost) in code_points(text) {
    bytes += cost;
    if bytes > max {
      return None;
    }
  }
  Some(bytes)
}

/// The longest code-point-aligned prefix of `text` whose JSON string size
/// fits `max` bytes (empty when not even the quotes fit).
pub fn truncate_to_json_bytes(text: &[u16], max: u64) -> &[u16] {
  if max < 2 {
    return &[];
  }
  let mut bytes = 2u64;
  let mut end = 0usize;
  for (units, cost) in code_points(text) {
    if bytes + cost > max {
      break;
    }
    bytes += cost;
    end += units;
  }
  &text[..end]
}

/// The running account of one run's output.
pub struct OutputLedger {
  cap: u64,
  /// Bytes of the serialized logs array so far (starts at `[]`).
  used: u64,
  logs: Logs,
  /// The first entry that did not fit, cut to at most `cap` units: the
  /// output-limit result keeps a prefix of it.
  overflow: Option<Vec<u16>>,
}

impl OutputLedger {
  pub fn new(cap: u64) -> Self {
    OutputLedger { cap, used: 2, logs: Logs::default(), overflow: None }
  }

  /// Log entries admitted so far.
  pub fn entries(&self) -> usize {
    self.logs.len()
  }

  /// The admitted log entry at `index`, if there is one.
  pub fn entry(&self, index: usize) -> Option<&[u16]> {
    self.logs.iter_from(index).next()
  }

  /// Bytes of the logs admitted so far, as `maxOutputBytes` counts them:
  /// the JSON array of them (`[]` alone is 2).
  pub fn log_bytes(&self) -> u64 {
    self.used
  }

  /// Bytes left for the completion value or failure message.
  pub fn remaining(&self) -> u64 {
    self.cap.saturating_sub(self.used)
  }

  /// Admit one log entry. Returns false (and remembers the entry) when it
  /// does not fit: the run must then stop with output-limit.
  pub fn admit(&mut self, text: &[u16]) -> bool {
    if self.overflow.is_some() {
      return false;
    }
    let separator = u64::from(!self.logs.is_empty());
    let available = self.cap.saturating_sub(self.used + separator);
    match json_string_bytes_up_to(text, available) {
      Some(bytes) if self.used + separator + bytes <= self.cap => {
        self.used += separator + bytes;
        self.logs.push(text);
        true
      }
      _ => {
        // No prefix longer than `cap` units can ever be kept.
        let keep = usize::try_from(self.cap).unwrap_or(usize::MAX).min(text.len());
        self.overflow = Some(text[..keep].to_vec());
        false
      }
    }
  }

  /// Finish with a JSON completion value (already compact JSON text).
  pub fn finish_value(self, json: String) -> Output {
    if self.overflow.is_some() || json.len() as u64 > self.remaining() {
      return self.finish_output_limit();
    }
    Output { logs: self.logs, completion: Completion::Value(json) }
  }

  /// Finish with no value (the program returned `undefined`).
  pub fn finish_no_value(self) -> Output {
    if self.overflow.is_some() {
      return self.finish_output_limit();
    }
    Output { logs: self.logs, completion: Completion::NoValue }
  }

  /// Finish with a failure; an oversized message becomes output-limit.
  pub fn finish_failure(self, kind: FailureKind, message: Vec<u16>) -> Output {
    if self.overflow.is_some() || json_string_bytes_up_to(&message, self.remaining()).is_none() {
      return self.finish_output_limit();
    }
    Output { logs: self.logs, completion: Completion::Failure { kind, message } }
  }

  /// Finish with output-limit: every whole entry that fits with room
  /// reserved for the message, then a prefix of the first that does not,
  /// then the message itself cut to what remains.
  pub fn finish_output_limit(self) -> Output {
    let message: Vec<u16> = format!("outer output exceeded {} bytes", self.cap).encode_utf16().collect();
    let message_bytes = message.len() as u64 + 2;
    let log_budget = self.cap.saturating_sub(message_bytes);
    let mut kept = Logs::default();
    let mut kept_bytes = 2u64;
    for text in self.logs.iter().chain(self.overflow.as_deref()) {
      let separator = u64::from(!kept.is_empty());
      let available = log_budget.saturating_sub(kept_bytes + separator);
      if kept_bytes + separator > log_budget {
        break;
      }
      if let Some(bytes) = json_string_bytes_up_to(text, available) {
        kept_bytes += separator + bytes;
        kept.push(text);
        continue;
      }
      let prefix = truncate_to_json_bytes(text, available);
      if !prefix.is_empty() {
        kept_bytes += separator + json_string_bytes_up_to(prefix, available).unwrap_or(available);
        kept.push(prefix);
      }
      break;
    }
    let message = truncate_to_json_bytes(&message, self.cap.saturating_sub(kept_bytes)).to_vec();
    Output { logs: kept, completion: Completion::Failure { kind: FailureKind::OutputLimit, message } }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn u(s: &str) -> Vec<u16> {
    s.encode_utf16().collect()
  }

  fn total(output: &Output) -> u64 {
    let logs: u64 = 2
      + output.logs.iter().map(|l| json_string_bytes_up_to(l, u64::MAX).unwrap()).sum::<u64>()
      + output.logs.len().saturating_sub(1) as u64;
    logs
      + match &output.completion {
        Completion::NoValue => 0,
        Completion::Value(json) => json.len() as u64,
        Completion::Failure { message, .. } => json_string_bytes_up_to(message, u64::MAX).unwrap(),
      }
  }

  #[test]
  fn string_costs_follow_the_contract() {
    assert_eq!(json_string_bytes_up_to(&u(""), 100), Some(2));
    assert_eq!(json_string_bytes_up_to(&u("\"\\"), 100), Some(6));
    assert_eq!(json_string_bytes_up_to(&u("\u{8}\t\n\u{c}\r"), 100), Some(12));
    assert_eq!(json_string_bytes_up_to(&u("\u{1}\u{1f}"), 100), Some(14));
    assert_eq!(json_string_bytes_up_to(&u("€"), 100), Some(5));
    assert_eq!(json_string_bytes_up_to(&u("é"), 100), Some(4));
    assert_eq!(json_string_bytes_up_to(&u("😀"), 100), Some(6));
    assert_eq!(json_string_bytes_up_to(&[0xd800], 100), Some(8));
    assert_eq!(json_string_bytes_up_to(&[0xdc00, 0xd800], 100), Some(14));
    assert_eq!(json_string_bytes_up_to(&u("abc"), 4), None);
  }

  #[test]
  fn value_and_logs_share_one_cap() {
    let mut ledger = OutputLedger::new(11);
    assert!(ledger.admit(&u("abc")));
    let out = ledger.finish_value("\"xy\"".into());
    assert_eq!(out.completion, Completion::Value("\"xy\"".into()));

    let mut ledger = OutputLedger::new(10);
    assert!(ledger.admit(&u("abc")));
    let out = ledger.finish_value("\"xy\"".into());
    assert!(matches!(out.completion, Completion::Failure { kind: FailureKind::OutputLimit, .. }));
    assert!(total(&out) <= 10);
  }

  #[test]
  fn euro_fits_seven_not_six() {
    assert!(matches!(OutputLedger::new(7).finish_value("\"€\"".into()).completion, Completion::Value(_)));
    assert!(matches!(
      OutputLedger::new(6).finish_value("\"€\"".into()).completion,
      Completion::Failure { kind: FailureKind::OutputLimit, .. }
    ));
  }

  #[test]
  fn output_limit_keeps_a_prefix_and_never_exceeds_the_cap() {
    for cap in 4..200u64 {
      let mut ledger = OutputLedger::new(cap);
      let mut i = 0;
      while ledger.admit(&u(&format!("line {i} €😀\"\n"))) {
        i += 1;
      }
      let out = ledger.finish_output_limit();
      assert!(total(&out) <= cap, "cap {cap}");
      if cap == 4 {
        assert_eq!(out.completion, Completion::Failure { kind: FailureKind::OutputLimit, message: vec![] });
      }
    }
  }

  #[test]
  fn logs_are_packed_and_read_back_in_order() {
    let mut logs = Logs::default();
    for entry in ["", "a", "", "€😀", ""] {
      logs.push(&u(entry));
    }
    assert_eq!(logs.len(), 5);
    let back: Vec<String> = logs.iter().map(String::from_utf16_lossy).collect();
    assert_eq!(back, ["", "a", "", "€😀", ""]);
    let rest: Vec<String> = logs.iter_from(3).map(String::from_utf16_lossy).collect();
    assert_eq!(rest, ["€😀", ""]);
    assert!(logs.iter_from(5).next().is_none());
    assert!(Logs::default().iter().next().is_none());
  }

  #[test]
  fn prefix_is_code_point_aligned() {
    assert_eq!(truncate_to_json_bytes(&u("a😀b"), 6), &u("a")[..]);
    assert_eq!(truncate_to_json_bytes(&u("a😀b"), 7), &u("a😀")[..]);
  }
}
