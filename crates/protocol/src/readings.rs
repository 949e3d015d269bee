//! What a run read of the world outside it besides its tools' replies: its
//! clocks, and the order in which its timers and its tools' replies reached
//! it. Each is kept in the run's history (`history.rs`), so that a run
//! executed again after its host died reads the same values in the same
//! order and sees its events come in the same order, and its calls and log
//! entries that depend on them are the recorded ones.
//!
//! One stream per [`Clock`]: a run executed again from the same history
//! reads each clock the same number of times in the same order (whatever
//! it does differently shows in a call or a log entry, where the history
//! catches it), so the streams need not record how their readings
//! interleave. Runs of one value are kept once with a count: a program
//! that reads `Date.now()` in a loop reads the same millisecond many times.
//!
//! The order of events ([`Readings::order`]) is a list of what the run's
//! event loop handed to its program, each a timer that fired
//! ([`TIMER_FIRED`], then the timer's number: the run's timers are numbered
//! in the order it made them) or a batch of replies taken together (their
//! count, then their call ids). crates/sandbox-ext/js/17_event_order.js keeps it and, in a
//! re-execution, holds each event back until the ones before it have come.
//!
//! The host keeps the readings a run takes and writes them to its journal
//! before the run's next log entry or call (`frame::FromHost::Readings`):
//! whatever the world saw of the run that could depend on a reading comes
//! after it. What a run read after its last call and log entry need not
//! survive its host: nothing outside saw it.

/// A source a run reads that differs between executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
  /// Milliseconds since the Unix epoch: `Date.now()`, `new Date()`,
  /// `Date()`, `Intl.DateTimeFormat`'s `format()` without a date,
  /// `performance.timeOrigin`.
  Wall = 0,
  /// Milliseconds since the run started: `performance.now()`, marks,
  /// `console.time*`, `Event#timeStamp`, `process.hrtime`, `uptime`.
  Monotonic = 1,
  /// Microseconds of CPU charged to the run: `process.cpuUsage()`.
  Cpu = 2,
  /// `process.memoryUsage()`'s figures, five readings a call.
  Memory = 3,
}

impl Clock {
  /// Every clock, in the order their streams cross the wire.
  pub const ALL: [Clock; CLOCKS] = [Clock::Wall, Clock::Monotonic, Clock::Cpu, Clock::Memory];

  /// Whether the clock never goes back: a re-executed run that reads it
  /// past its recorded readings continues from the last of them.
  pub fn is_monotonic(self) -> bool {
    matches!(self, Clock::Monotonic | Clock::Cpu)
  }
}

/// How many clocks there are.
pub const CLOCKS: usize = 4;

/// One value read `times` times in a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Repeated {
  pub value: f64,
  pub times: u32,
}

/// The bytes one [`Repeated`] takes on the wire and in a history.
pub const REPEATED_BYTES: usize = 8 + 4;

/// The first word of a timer's entry in [`Readings::order`] (a batch of
/// replies starts with its count, at least 1).
pub const TIMER_FIRED: u32 = 0;

/// Readings of each clock, in the order they were read, and the order of
/// the run's events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readings {
  streams: [Vec<Repeated>; CLOCKS],
  order: Vec<u32>,
}

impl Readings {
  /// Readings from their streams and order, as they crossed the wire:
  /// `None` if a count of times is zero (no encoder makes one). The order's
  /// words are the program's concern alone (crates/sandbox-ext/js/17_event_order.js checks
  /// what it replays).
  pub fn from_parts(streams: [Vec<Repeated>; CLOCKS], order: Vec<u32>) -> Option<Readings> {
    streams.iter().flatten().all(|repeated| repeated.times > 0).then_some(Readings { streams, order })
  }

  /// The streams, in [`Clock::ALL`]'s order.
  pub fn streams(&self) -> &[Vec<Repeated>; CLOCKS] {
    &self.streams
  }

  /// The order of the run's events (see the module doc).
  pub fn order(&self) -> &[u32] {
    &self.order
  }

  /// Events that reached the run, after those already kept.
  pub fn push_order(&mut self, events: &[u32]) {
    self.order.extend_from_slice(events);
  }

  /// One more reading of `clock`.
  pub fn push(&mut self, clock: Clock, value: f64) {
    let stream = &mut self.streams[clock as usize];
    match stream.last_mut() {
      Some(last) if last.value.to_bits() == value.to_bits() && last.times < u32::MAX => last.times += 1,
      _ => stream.push(Repeated { value, times: 1 }),
    }
  }

  /// `later`'s readings after these. Returns the bytes these grew by.
  pub fn append(&mut self, later: &Readings) -> u64 {
    let before = self.bytes();
    for (stream, more) in self.streams.iter_mut().zip(&later.streams) {
      for repeated in more {
        match stream.last_mut() {
          Some(last) if last.value.to_bits() == repeated.value.to_bits() => {
            last.times = last.times.saturating_add(repeated.times);
          }
          _ => stream.push(*repeated),
        }
      }
    }
    self.order.extend_from_slice(&later.order);
    self.bytes() - before
  }

  /// The values and words of order kept (a run of one value counts once).
  pub fn entries(&self) -> usize {
    self.streams.iter().map(Vec::len).sum::<usize>() + self.order.len()
  }

  pub fn is_empty(&self) -> bool {
    self.entries() == 0
  }

  /// What they take in a history.
  pub fn bytes(&self) -> u64 {
    let values: usize = self.streams.iter().map(Vec::len).sum();
    (values * REPEATED_BYTES + self.order.len() * 4) as u64
  }
}

/// Recorded readings read back in order, as a re-executed run reads its
/// clocks; each clock's stream runs out on its own.
#[derive(Debug, Default)]
pub struct Replay {
  readings: Readings,
  /// Per clock: the index of the next [`Repeated`], and how many of its
  /// times were read.
  next: [(usize, u32); CLOCKS],
}

impl Replay {
  pub fn new(readings: Readings) -> Replay {
    Replay { readings, next: [(0, 0); CLOCKS] }
  }

  /// The next recorded reading of `clock`, or `None` once its stream has
  /// run out.
  pub fn next(&mut self, clock: Clock) -> Option<f64> {
    let (index, taken) = &mut self.next[clock as usize];
    let repeated = self.readings.streams[clock as usize].get(*index)?;
    *taken += 1;
    if *taken >= repeated.times {
      *index += 1;
      *taken = 0;
    }
    Some(repeated.value)
  }

  /// The last value recorded of `clock`, once its stream has run out.
  pub fn last(&self, clock: Clock) -> Option<f64> {
    self.readings.streams[clock as usize].last().map(|repeated| repeated.value)
  }

  /// The recorded order of the run's events, which the program's event
  /// order (crates/sandbox-ext/js/17_event_order.js) replays itself.
  pub fn order(&self) -> &[u32] {
    &self.readings.order
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn repeated_values_are_kept_once_and_read_back_in_order() {
    let mut readings = Readings::default();
    for value in [5.0, 5.0, 5.0, 6.0] {
      readings.push(Clock::Wall, value);
    }
    readings.push(Clock::Monotonic, 0.5);
    assert_eq!(readings.entries(), 3);
    readings.push_order(&[TIMER_FIRED, 1]);
    let mut later = Readings::default();
    later.push(Clock::Wall, 6.0);
    later.push(Clock::Wall, 7.0);
    later.push_order(&[2, 0, 1]);
    assert_eq!(readings.append(&later), REPEATED_BYTES as u64 + 3 * 4);
    assert_eq!(readings.order(), [TIMER_FIRED, 1, 2, 0, 1]);
    let mut replay = Replay::new(readings);
    let wall: Vec<_> = std::iter::from_fn(|| replay.next(Clock::Wall)).collect();
    assert_eq!(wall, [5.0, 5.0, 5.0, 6.0, 6.0, 7.0]);
    assert_eq!(replay.next(Clock::Monotonic), Some(0.5));
    assert_eq!(replay.next(Clock::Monotonic), None);
    assert_eq!(replay.next(Clock::Cpu), None);
    assert_eq!(replay.last(Clock::Monotonic), Some(0.5));
    assert_eq!(replay.last(Clock::Cpu), None);
  }

  #[test]
  fn a_count_of_zero_is_refused() {
    let mut streams: [Vec<Repeated>; CLOCKS] = Default::default();
    streams[2].push(Repeated { value: 1.0, times: 0 });
    assert_eq!(Readings::from_parts(streams, Vec::new()), None);
  }
}
