//! Programs that ended an isolate host, kept for a while by their text, so
//! that a model resubmitting one takes down no shared host after its first:
//! a run of a quarantined program is placed alone, in a host of its own
//! (the supervisor's hosts of one run).
//!
//! A program is quarantined when it is shown to end hosts
//! (`Fate::ends_hosts`): it ended a shared host while it ran (not waiting
//! on a tool), and then ended the host it was re-executed in alone; or its
//! host named it as the stopped run it ended for. Bounded twice: a program stays
//! [`QUARANTINE_FOR`], and at most [`QUARANTINED_PROGRAMS`] are held (the
//! oldest goes first), so the quarantine's memory and the hosts of one run
//! it can ask for stay small whatever programs do.
//!
//! Pure: time is the caller's, so that the bounds are tested exactly.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long a program that ended a host runs alone when it is submitted
/// again.
pub const QUARANTINE_FOR: Duration = Duration::from_secs(10 * 60);

/// The most programs held at once.
pub const QUARANTINED_PROGRAMS: usize = 64;

/// The programs quarantined, oldest first: a BLAKE3 digest of each one's text,
/// and when it leaves.
#[derive(Default)]
pub struct Quarantine {
  programs: VecDeque<([u8; 32], Instant)>,
}

fn digest(program: &str) -> [u8; 32] {
  *blake3::hash(program.as_bytes()).as_bytes()
}

impl Quarantine {
  /// Quarantine `program` from `now` (again, if it was already).
  pub fn add(&mut self, program: &str, now: Instant) {
    let program = digest(program);
    self.programs.retain(|(held, _)| *held != program);
    if self.programs.len() == QUARANTINED_PROGRAMS {
      self.programs.pop_front();
    }
    self.programs.push_back((program, now + QUARANTINE_FOR));
  }

  /// Whether `program` is quarantined at `now`. Hashes the text only while
  /// some program is.
  pub fn holds(&mut self, program: &str, now: Instant) -> bool {
    self.expire(now);
    if self.programs.is_empty() {
      return false;
    }
    let program = digest(program);
    self.programs.iter().any(|(held, _)| *held == program)
  }

  /// How many programs are quarantined at `now`.
  pub fn len(&mut self, now: Instant) -> usize {
    self.expire(now);
    self.programs.len()
  }

  fn expire(&mut self, now: Instant) {
    while self.programs.front().is_some_and(|(_, until)| *until <= now) {
      self.programs.pop_front();
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_program_is_held_for_its_time_then_let_go() {
    let mut quarantine = Quarantine::default();
    let start = Instant::now();
    assert!(!quarantine.holds("crash()", start));
    quarantine.add("crash()", start);
    assert!(quarantine.holds("crash()", start + QUARANTINE_FOR - Duration::from_millis(1)));
    assert!(!quarantine.holds("crash() ", start));
    assert!(!quarantine.holds("crash()", start + QUARANTINE_FOR));
    assert_eq!(quarantine.len(start + QUARANTINE_FOR), 0);
  }

  #[test]
  fn at_most_so_many_programs_are_held_the_oldest_leaving_first() {
    let mut quarantine = Quarantine::default();
    let start = Instant::now();
    for i in 0..=QUARANTINED_PROGRAMS {
      quarantine.add(&format!("crash({i})"), start + Duration::from_secs(i as u64));
    }
    let now = start + Duration::from_secs(QUARANTINED_PROGRAMS as u64);
    assert_eq!(quarantine.len(now), QUARANTINED_PROGRAMS);
    assert!(!quarantine.holds("crash(0)", now));
    assert!(quarantine.holds("crash(1)", now));
    // Quarantined again: its time starts over, and it is held once.
    quarantine.add("crash(1)", now);
    assert_eq!(quarantine.len(now), QUARANTINED_PROGRAMS);
    assert!(quarantine.holds("crash(1)", start + QUARANTINE_FOR + Duration::from_secs(2)));
  }
}
