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
//! host could make up. Only an answer to one of the last
//! [`RECENT_REQUESTS`], and newer than the host's previous answer, shows
//! its loop alive.

use super::random_bytes;

/// The requests whose answers still count: a host answers in order, and
/// one that is this many requests behind has not been answering.
const RECENT_REQUESTS: usize = 16;

pub(super) struct StatsRequests {
  latest: u64,
  recent: [u64; RECENT_REQUESTS],
  next: usize,
}

impl Default for StatsRequests {
  fn default() -> StatsRequests {
    // Far below u64::MAX, so that strides of up to 2^32 never wrap.
    StatsRequests { latest: random_u32().into(), recent: [0; RECENT_REQUESTS], next: 0 }
  }
}

impl StatsRequests {
  /// The number of a new request.
  pub(super) fn ask(&mut self) -> u64 {
    self.latest = self.latest.saturating_add(1 + u64::from(random_u32()));
    self.recent[self.next] = self.latest;
    self.next = (self.next + 1) % RECENT_REQUESTS;
    self.latest
  }

  /// The newest request's number: an answer past it answers nothing sent.
  pub(super) fn latest(&self) -> u64 {
    self.latest
  }

  /// Whether `seq` is one of the recent requests' numbers.
  pub(super) fn recently_asked(&self, seq: u64) -> bool {
    seq != 0 && self.recent.contains(&seq)
  }
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
  fn numbers_increase_unpredictably_and_only_recent_ones_count() {
    let mut requests = StatsRequests::default();
    let asked: Vec<u64> = (0..3 * RECENT_REQUESTS).map(|_| requests.ask()).collect();
    assert!(asked.windows(2).all(|pair| pair[0] < pair[1]), "{asked:?}");
    // Strides of 1 + a random u32: consecutive numbers say nothing of the next.
    let strides: Vec<u64> = asked.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(strides.iter().any(|stride| *stride != strides[0]), "{strides:?}");
    assert_eq!(requests.latest(), asked[asked.len() - 1]);
    let (old, recent) = asked.split_at(asked.len() - RECENT_REQUESTS);
    assert!(recent.iter().all(|seq| requests.recently_asked(*seq)));
    assert!(old.iter().all(|seq| !requests.recently_asked(*seq)));
    // A number between two requests, or never sent, is not one.
    assert!(!requests.recently_asked(recent[0] + 1));
    assert!(!requests.recently_asked(0));
  }
}
