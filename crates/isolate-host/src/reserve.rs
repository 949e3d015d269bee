//! How many prepared isolates a host keeps: its reserve's size.
//!
//! A prepared isolate waits on an idle thread, made from the snapshot, so
//! that a run starts at once. At rest the reserve is the host's share of
//! `preparedIsolates` (its *base*). Making an isolate costs its thread ~2
//! ms of CPU after every run (disposing of the spent one, deserializing
//! the next), so runs that follow one another on a host faster than that
//! find the thread that ran the last one still making the next isolate,
//! and wait for it. When a run waits so (no prepared isolate free, a
//! thread refilling the reserve after its run, and the run alone in
//! flight: the wait is the rate's, not concurrency's, which the reserve
//! does not follow; eight clients running back to back grew it to its
//! most on the tail of their runs under a looser rule, no more in flight
//! than the reserve holds, and the host held ~15 MiB more afterwards), and
//! the host's last run called no tool, the reserve grows by one, up to
//! [`RESERVE_GROWTH`] times its base. A run's thread refills at once only
//! up to [`REFILLED_AT_ONCE`] times the base after its run; the isolates
//! beyond are made by new threads once the host has been quiet for
//! [`QUIET_BEFORE_GROWN_REFILL`] (between runs back to back it is idle
//! for tens of microseconds): made as each run ended, up to 16 at once
//! took the CPUs from a burst's next runs, some of which then took 1.5-2
//! ms; made once the host is quiet, a burst of 20 finds 16 made before
//! it, and each of those runs takes ~0.35-0.5 ms. Not for runs that call
//! tools: such a run is a chain of hand-offs to the harness and back, each
//! a wake-up that may queue behind the making beside it, and measured,
//! Code Mode shaped runs (5 calls) back to back were ~7% slower with a
//! grown reserve than waiting for the refill, where runs that call nothing
//! were twice as fast at the median.
//! So a run that called a tool also puts a grown reserve back to its base
//! at once. It is back to its base too once the host has been idle (no run
//! in flight or queued) for [`RESERVE_SHRINK_AFTER`]: the extra threads
//! retire with their isolates, so an idle host holds what it held before
//! it grew.
//!
//! Pure: the scheduler (`scheduler.rs`) owns it under its lock, tells it
//! what happened and does what it answers.

use std::time::{Duration, Instant};

use crate::time_left::left_of;
use dsh_protocol::config::{RESERVE_GROWTH, RESERVE_SHRINK_AFTER};

/// How many times its base a reserve refills as its isolates are taken,
/// each by the thread whose run just ended: runs that keep coming one
/// after another (a steady stream, never quiet) keep finding isolates
/// made while the run before them ran (200 trivial runs back to back took
/// ~0.5 ms each so, and ~1.0 ms when only the base was refilled at once).
pub const REFILLED_AT_ONCE: usize = 2;

/// How long a host is quiet (no run in flight or queued) before the
/// isolates of a grown reserve beyond [`REFILLED_AT_ONCE`] times its base
/// are made, and before its prepared isolates are warmed (`scheduler.rs`).
/// Runs one after another leave it idle for a few tens of microseconds
/// between them.
pub const QUIET_BEFORE_GROWN_REFILL: Duration = Duration::from_millis(2);

#[derive(Debug)]
pub struct Reserve {
  /// The size at rest: this host's share of `preparedIsolates`.
  base: usize,
  size: usize,
  /// When a run was last admitted or finished.
  last_active: Instant,
  /// The last run to finish called a tool.
  last_run_called: bool,
}

/// Whether the reserve is back to its base.
#[derive(Debug, PartialEq, Eq)]
pub enum Shrink {
  /// No: it is at its base, or stays grown.
  Nothing,
  /// Look again after this long.
  After(Duration),
  /// It is back to its base now: let the threads beyond it retire.
  Now,
}

impl Reserve {
  pub fn new(base: usize, now: Instant) -> Reserve {
    Reserve { base, size: base, last_active: now, last_run_called: false }
  }

  /// How many prepared isolates the host keeps now.
  pub fn size(&self) -> usize {
    self.size
  }

  /// How many it keeps at rest: its share of `preparedIsolates`.
  pub fn base(&self) -> usize {
    self.base
  }

  /// How many of its isolates are made again as they are taken: up to
  /// [`REFILLED_AT_ONCE`] times its base. The rest are made once the host
  /// is quiet ([`Reserve::quiet_in`]), not while runs follow one another.
  pub fn refilled_at_once(&self) -> usize {
    self.size.min(self.base.saturating_mul(REFILLED_AT_ONCE))
  }

  /// Whether a thread whose run just ended, with `coming` isolates
  /// prepared or being prepared, makes the next one at once.
  pub fn refill_at_once(&self, coming: usize) -> bool {
    coming < self.refilled_at_once()
  }

  /// With the host `idle` (no run in flight or queued), how long until it
  /// has been quiet for [`QUIET_BEFORE_GROWN_REFILL`]: `Some(ZERO)` when it
  /// has, `None` while it is not idle.
  pub fn quiet_in(&self, idle: bool, now: Instant) -> Option<Duration> {
    idle
      .then(|| left_of(QUIET_BEFORE_GROWN_REFILL, now.saturating_duration_since(self.last_active)).unwrap_or_default())
  }

  /// A run was admitted or finished.
  pub fn active(&mut self, now: Instant) {
    self.last_active = now;
  }

  /// A run finished, having `called` a tool or not.
  pub fn run_finished(&mut self, called: bool) -> Shrink {
    self.last_run_called = called;
    if called && self.size > self.base {
      self.size = self.base;
      return Shrink::Now;
    }
    Shrink::Nothing
  }

  /// A run was admitted with no prepared isolate free for it, `in_flight`
  /// runs in flight with it (itself included) and `refilling` threads
  /// making an isolate for the reserve after their run. Returns whether
  /// the reserve grew (it is short now: the scheduler tops up what is
  /// refilled at once now, the rest once the host is quiet).
  pub fn run_waited(&mut self, in_flight: usize, refilling: usize) -> bool {
    let grows = refilling > 0 && in_flight == 1 && !self.last_run_called && self.size < self.base * RESERVE_GROWTH;
    if grows {
      self.size += 1;
    }
    grows
  }

  /// The scheduler looks at the host, `idle` when no run is in flight or
  /// queued.
  pub fn when_idle(&mut self, idle: bool, now: Instant) -> Shrink {
    if self.size == self.base || !idle {
      return Shrink::Nothing;
    }
    match left_of(RESERVE_SHRINK_AFTER, now.saturating_duration_since(self.last_active)) {
      Some(left) => Shrink::After(left),
      None => {
        self.size = self.base;
        Shrink::Now
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn grows_while_runs_wait_for_a_refill_and_never_with_concurrency() {
    let start = Instant::now();
    let mut reserve = Reserve::new(1, start);
    // A burst of concurrent runs: the second found no isolate, but it is
    // not alone in flight.
    assert!(!reserve.run_waited(2, 1));
    // Runs before any ended (the reserve still being made at start, or
    // threads made for queued runs): no thread refills.
    assert!(!reserve.run_waited(1, 0));
    assert_eq!(reserve.size(), 1);
    // One run alone, waiting for the thread that ran the last one: one
    // more, and so on as runs keep waiting, as far as it goes.
    assert!(reserve.run_waited(1, 1));
    assert_eq!(reserve.size(), 2);
    for size in 3..=RESERVE_GROWTH {
      assert!(reserve.run_waited(1, 1));
      assert_eq!(reserve.size(), size);
    }
    assert!(!reserve.run_waited(1, 1));
    assert_eq!(reserve.size(), RESERVE_GROWTH);
    // Grown, it still does not follow concurrency.
    let mut grown = Reserve::new(2, start);
    assert!(grown.run_waited(1, 1));
    assert!(!grown.run_waited(2, 1));
    assert_eq!(grown.size(), 3);
    // No base (a host of one run): nothing to grow.
    let mut none = Reserve::new(0, start);
    assert!(!none.run_waited(0, 1));
    assert_eq!(none.size(), 0);
  }

  #[test]
  fn runs_that_call_tools_never_grow_it_and_shrink_it_at_once() {
    let mut reserve = Reserve::new(1, Instant::now());
    assert_eq!(reserve.run_finished(true), Shrink::Nothing);
    assert!(!reserve.run_waited(1, 1));
    // One that called none: it grows.
    assert_eq!(reserve.run_finished(false), Shrink::Nothing);
    assert!(reserve.run_waited(1, 1));
    assert_eq!(reserve.size(), 2);
    assert_eq!(reserve.run_finished(true), Shrink::Now);
    assert_eq!(reserve.size(), 1);
  }

  /// A run's thread refills up to twice the base at once; the rest of a
  /// grown reserve waits for the host to be quiet, counted from its last
  /// run.
  #[test]
  fn beyond_its_base_it_is_refilled_once_the_host_is_quiet() {
    let start = Instant::now();
    let mut reserve = Reserve::new(2, start);
    assert!(reserve.run_waited(1, 1));
    assert_eq!(reserve.size(), 3);
    // Grown by one: all of it is refilled at once.
    assert_eq!(reserve.refilled_at_once(), 3);
    assert!(reserve.refill_at_once(2));
    assert!(!reserve.refill_at_once(3));
    // Grown past twice its base: twice its base is, the rest once quiet.
    for _ in 0..4 {
      assert!(reserve.run_waited(1, 1));
    }
    assert_eq!(reserve.size(), 7);
    assert_eq!(reserve.refilled_at_once(), 2 * REFILLED_AT_ONCE);
    assert!(reserve.refill_at_once(2 * REFILLED_AT_ONCE - 1));
    assert!(!reserve.refill_at_once(2 * REFILLED_AT_ONCE));
    let ended = start + RESERVE_SHRINK_AFTER / 4;
    reserve.active(ended);
    assert_eq!(reserve.quiet_in(false, ended + QUIET_BEFORE_GROWN_REFILL), None);
    let part = QUIET_BEFORE_GROWN_REFILL / 4;
    assert_eq!(reserve.quiet_in(true, ended + part), Some(QUIET_BEFORE_GROWN_REFILL - part));
    assert_eq!(reserve.quiet_in(true, ended + QUIET_BEFORE_GROWN_REFILL), Some(Duration::ZERO));
  }

  #[test]
  fn shrinks_to_its_base_once_idle_for_the_span() {
    let start = Instant::now();
    let mut reserve = Reserve::new(1, start);
    assert_eq!(reserve.when_idle(true, start + RESERVE_SHRINK_AFTER), Shrink::Nothing);
    assert!(reserve.run_waited(1, 1));
    // Busy: never.
    assert_eq!(reserve.when_idle(false, start + 10 * RESERVE_SHRINK_AFTER), Shrink::Nothing);
    // Idle, counted from the last run's admission or end.
    let ended = start + RESERVE_SHRINK_AFTER;
    reserve.active(ended);
    let half = RESERVE_SHRINK_AFTER / 2;
    assert_eq!(reserve.when_idle(true, ended + half), Shrink::After(RESERVE_SHRINK_AFTER - half));
    assert_eq!(reserve.size(), 2);
    assert_eq!(reserve.when_idle(true, ended + RESERVE_SHRINK_AFTER), Shrink::Now);
    assert_eq!(reserve.size(), 1);
    assert_eq!(reserve.when_idle(true, ended + 2 * RESERVE_SHRINK_AFTER), Shrink::Nothing);
  }
}
