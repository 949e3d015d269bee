//! A run's clocks as its program reads them (`dsh_protocol::readings`):
//! the readings its history holds first, in order (a re-execution), then
//! live ones, each live reading kept until the run's next log entry or call
//! carries it to the journal; and the order of its events, which the
//! program's JS keeps (crates/sandbox-ext/js/17_event_order.js): the recorded order handed to
//! it, the live events it reports kept beside the readings.
//!
//! A monotonic clock ([`Clock::is_monotonic`]) read past its recorded
//! readings continues from the last of them, never back: its live value is
//! shifted by what the clock had recorded over what this execution's clock
//! showed when the recorded readings ran out.

use dsh_protocol::readings::{Clock, Readings, Replay, CLOCKS};

/// The live readings kept before they are handed over at once, whatever
/// comes next: a program that reads a clock in a loop without calling or
/// logging holds at most this many here.
const KEEP_AT_MOST: usize = 4096;

pub struct RunClocks {
  replay: Replay,
  /// Per clock, once its recorded readings ran out: what its live value is
  /// shifted by.
  shift: [Option<f64>; CLOCKS],
  /// Live readings not yet handed to the journal.
  taken: Readings,
}

impl RunClocks {
  /// The clocks of an execution whose history holds `recorded`.
  pub fn new(recorded: Readings) -> RunClocks {
    RunClocks { replay: Replay::new(recorded), shift: [None; CLOCKS], taken: Readings::default() }
  }

  /// Read `clock`, whose live value is `live` (called only once the
  /// recorded readings have run out). Returns the reading, and whether
  /// the live readings kept should be handed over now.
  pub fn read(&mut self, clock: Clock, live: impl FnOnce() -> f64) -> (f64, bool) {
    if let Some(recorded) = self.replay.next(clock) {
      return (recorded, false);
    }
    let live = live();
    let shift = *self.shift[clock as usize].get_or_insert_with(|| match self.replay.last(clock) {
      Some(last) if clock.is_monotonic() => (last - live).max(0.0),
      _ => 0.0,
    });
    let value = live + shift;
    self.taken.push(clock, value);
    (value, self.taken.entries() >= KEEP_AT_MOST)
  }

  /// The order of events its history recorded, for the program to replay.
  pub fn recorded_order(&self) -> &[u32] {
    self.replay.order()
  }

  /// Events that reached the program live. Returns whether the live
  /// readings kept should be handed over now.
  pub fn events(&mut self, events: &[u32]) -> bool {
    self.taken.push_order(events);
    self.taken.entries() >= KEEP_AT_MOST
  }

  /// The live readings kept since the last call, handed over (empty if
  /// none).
  pub fn take(&mut self) -> Option<Readings> {
    (!self.taken.is_empty()).then(|| std::mem::take(&mut self.taken))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn recorded_readings_come_first_then_monotonic_clocks_continue_from_the_last() {
    let mut recorded = Readings::default();
    recorded.push(Clock::Monotonic, 100.0);
    recorded.push(Clock::Wall, 5.0);
    let mut clocks = RunClocks::new(recorded);
    assert_eq!(clocks.read(Clock::Monotonic, || unreachable!()), (100.0, false));
    assert_eq!(clocks.read(Clock::Wall, || unreachable!()), (5.0, false));
    assert!(clocks.take().is_none());
    // This execution's clock started later: it continues from 100.
    assert_eq!(clocks.read(Clock::Monotonic, || 3.0).0, 100.0);
    assert_eq!(clocks.read(Clock::Monotonic, || 4.5).0, 101.5);
    // The wall clock is the world's, never shifted.
    assert_eq!(clocks.read(Clock::Wall, || 4.0).0, 4.0);
    // A clock with nothing recorded reads live.
    assert_eq!(clocks.read(Clock::Cpu, || 7.0).0, 7.0);
    let mut expected = Readings::default();
    for (clock, value) in [(Clock::Monotonic, 100.0), (Clock::Monotonic, 101.5), (Clock::Wall, 4.0), (Clock::Cpu, 7.0)]
    {
      expected.push(clock, value);
    }
    assert_eq!(clocks.take(), Some(expected));
    assert!(clocks.take().is_none());
  }

  #[test]
  fn the_recorded_order_is_handed_to_the_program_and_live_events_are_kept() {
    let mut recorded = Readings::default();
    recorded.push_order(&[0, 1]);
    let mut clocks = RunClocks::new(recorded);
    assert_eq!(clocks.recorded_order(), [0, 1]);
    assert!(!clocks.events(&[1, 4]));
    let mut expected = Readings::default();
    expected.push_order(&[1, 4]);
    assert_eq!(clocks.take(), Some(expected));
  }

  #[test]
  fn live_readings_are_handed_over_before_they_pile_up() {
    let mut clocks = RunClocks::new(Readings::default());
    let hand_over = (0..KEEP_AT_MOST).map(|n| clocks.read(Clock::Monotonic, || n as f64).1);
    assert_eq!(hand_over.filter(|now| *now).count(), 1);
    assert_eq!(clocks.take().map(|taken| taken.entries()), Some(KEEP_AT_MOST));
  }
}
