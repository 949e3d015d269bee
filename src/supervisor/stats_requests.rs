//! The stats requests the harness sends its hosts (the heartbeat's, and
//! `stats()`'s), numbered so that only a host that read one can answer it.
//!
//! A host answers `StatsRequest { seq }` with `Stats { seq, .. }`, and an
//! answer is how the supervisor knows a host's own loop still reads its
//! channel. Were the numbers 1, 2, 3, ..., a host that stopped reading
//! (one a program took over) could keep answering requests it never read,
//! by counting heartbeats, and stay in service while every run placed on
//! it waited out its wall ceiling. So each number is the last plus a
//! random stride from the kernel's CSPRNG: still increasing (an answer
//! newer than any request sent is a protocol violation, and `stats()`
//! waits for answers at least as new as its own request), but not one a
//! host could make up. Only an answer to a request sent within the last
//! `hostUnresponsiveMs`, and newer than the host's previous answer, shows
//! its loop alive: an answer later than that comes from a host the
//! heartbeat would have found silent anyway, however many requests
//! `stats()` callers sent meanwhile.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::random_bytes;

/// The most requests remembered: far more than a heartbeat and `stats()`
/// callers send within any `hostUnresponsiveMs` in practice; past it the
/// oldest are forgotten first.
const MAX_REMEMBERED: usize = 1024;

pub(super) struct StatsRequests {
  latest: u64,
  /// The requests sent, oldest first, each with when.
  sent: VecDeque<(u64, Instant)>,
}

impl Default for StatsRequests {
  fn default() -> StatsRequests {
    // Far below u64::MAX, so that strides of up to 2^32 never wrap.
    StatsRequests { latest: random_u32().into(), sent: VecDeque::new() }
  }
}

impl StatsRequests {
  /// The number of a new request, sent at `now`; requests sent longer
  /// than `keep_for` before it are forgotten.
  pub(super) fn ask(&mut self, now: Instant, keep_for: Duration) -> u64 {
    self.latest = self.latest.saturating_add(1 + u64::from(random_u32()));
    while self.sent.front().is_some_and(|(_, at)| !sent_within(*at, now, keep_for)) || self.sent.len() >= MAX_REMEMBERED
    {
      self.sent.pop_front();
    }
    self.sent.push_back((self.latest, now));
    self.latest
  }

  /// The newest request's number: an answer past it answers nothing sent.
  pub(super) fn latest(&self) -> u64 {
    self.latest
  }

  /// Whether `seq` is the number of a request sent within `within` of `now`.
  pub(super) fn asked_within(&self, seq: u64, now: Instant, within: Duration) -> bool {
    self.sent.iter().any(|(asked, at)| *asked == seq && sent_within(*at, now, within))
  }
}

/// Whether a request sent `at` was sent within `window` of `now`.
fn sent_within(at: Instant, now: Instant, window: Duration) -> bool {
  now.saturating_duration_since(at) <= window
}

/// A random stride; without the kernel's randomness (never seen), a
/// stride of 1, which keeps the numbers increasing.
fn random_u32() -> u32 {
  let mut bytes = [0u8; 4];
  random_bytes(&mut bytes).map_or(0, |()| u32::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn numbers_increase_unpredictably_and_only_answers_to_recent_requests_count() {
    let mut requests = StatsRequests::default();
    let start = Instant::now();
    let keep_for = Duration::from_secs(10);
    let at = |ms: u64| start + Duration::from_millis(ms);
    // One request every 100 ms for 20 s.
    let asked: Vec<u64> = (0..200).map(|i| requests.ask(at(i * 100), keep_for)).collect();
    assert!(asked.windows(2).all(|pair| pair[0] < pair[1]), "{asked:?}");
    // Strides of 1 + a random u32: consecutive numbers say nothing of the next.
    let strides: Vec<u64> = asked.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(strides.iter().any(|stride| *stride != strides[0]), "{strides:?}");
    assert_eq!(requests.latest(), asked[199]);
    let now = at(19_900);
    // Sent within the window (the last 10 s): they count, however many.
    assert!(asked[100..].iter().all(|seq| requests.asked_within(*seq, now, keep_for)));
    // Sent before it, or never sent: they do not.
    assert!(asked[..99].iter().all(|seq| !requests.asked_within(*seq, now, keep_for)));
    assert!(!requests.asked_within(asked[150] + 1, now, keep_for));
    assert!(!requests.asked_within(0, now, keep_for));
    // At most MAX_REMEMBERED are kept, the newest.
    let burst: Vec<u64> = (0..MAX_REMEMBERED + 5).map(|_| requests.ask(now, keep_for)).collect();
    assert!(!requests.asked_within(burst[4], now, keep_for));
    assert!(requests.asked_within(burst[5], now, keep_for));
  }
}
