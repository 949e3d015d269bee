//! Keeping a run's thread off the CPU of the harness's thread that answers
//! its calls.
//!
//! A program that calls quick tools one after another (`for (...) await
//! tools.x()`) crosses to Node's main thread and back for each call. That
//! is fast while the two threads run on different CPUs and stay awake for
//! each other (the run's reply pump spins, Node's main thread lingers:
//! `mailbox.rs`, `binding_calls.rs`): no thread is woken, ~14 us a round
//! trip on a 2-vCPU VM. The kernel, though, often puts the two on one
//! CPU (a woken thread goes back to the CPU it last ran on when that CPU
//! is idle, and each side sleeps while the other answers), and keeps them
//! there: neither can then wait awake for the other (the spin holds the
//! CPU the answer needs), so every hand-off wakes a reader thread on the
//! other CPU, which wakes the real receiver, and the round trip takes
//! ~30 us. Traced with the scheduler's events: whole runs of 1000 calls in
//! one state or the other, about half each, whichever the run's first
//! calls fell into.
//!
//! So a run's thread that finds itself on the CPU the answer was written
//! from leaves it: it sets its own affinity to every CPU it may use but
//! that one (the kernel moves it before the call returns), then back to
//! all of them, so the scheduler stays free to place it afterwards. Only
//! in a chain of round trips ([`CHAIN_OF_ROUND_TRIPS`]), where the
//! hand-offs are most of the run's time, and at most once per
//! [`ROUND_TRIPS_BETWEEN_MOVES`]: moving costs ~10 us, and Code Mode
//! shaped runs (5 calls, back to back, the spent isolate's thread making
//! the next one on the other CPU) were ~30% slower when every co-located
//! round trip moved.

use std::mem::{size_of, zeroed};

/// A run's round trips (waits for replies) before its thread moves off
/// the answerer's CPU: a chain long enough to be the run's time.
pub const CHAIN_OF_ROUND_TRIPS: u32 = 16;

/// A run's round trips between two moves of its thread.
pub const ROUND_TRIPS_BETWEEN_MOVES: u32 = 64;

/// Whether a run that has made `round_trips` may move its thread now,
/// having last moved it after `moved_at` of them (`None`: never).
pub fn may_move(round_trips: u32, moved_at: Option<u32>) -> bool {
  round_trips >= CHAIN_OF_ROUND_TRIPS
    && moved_at.is_none_or(|at| round_trips.saturating_sub(at) >= ROUND_TRIPS_BETWEEN_MOVES)
}

/// If this thread runs on `cpu`, move it to another CPU it may use, and
/// give it back every CPU it could use before. Returns the CPU it moved
/// to, or `None` when it was elsewhere already or may use no other CPU.
pub fn leave(cpu: u32) -> Option<u32> {
  // SAFETY: sched_getcpu has no preconditions (glibc reads it from the
  // thread's rseq area or the vDSO: no system call).
  let here = unsafe { libc::sched_getcpu() };
  if here < 0 || here as u32 != cpu || here as usize >= libc::CPU_SETSIZE as usize {
    return None;
  }
  // SAFETY: an all-zero cpu_set_t is an empty set.
  let mut allowed: libc::cpu_set_t = unsafe { zeroed() };
  // SAFETY: the mask is a cpu_set_t of the size given, on this stack.
  if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut allowed) } != 0 {
    return None;
  }
  let mut elsewhere = allowed;
  // SAFETY: `here` < CPU_SETSIZE (checked above), within the set.
  unsafe { libc::CPU_CLR(here as usize, &mut elsewhere) };
  // SAFETY: counts the bits of a set on this stack.
  if unsafe { libc::CPU_COUNT(&elsewhere) } == 0 {
    return None;
  }
  // SAFETY: as above; pid 0 is this thread, the only one the host's
  // lockdown lets a thread set the affinity of.
  if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &elsewhere) } != 0 {
    return None;
  }
  // SAFETY: as above.
  let moved_to = unsafe { libc::sched_getcpu() };
  // SAFETY: as above.
  unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &allowed) };
  u32::try_from(moved_to).ok()
}

/// A test thread's CPUs, read and set (here and in `mailbox`'s tests).
#[cfg(test)]
pub(crate) mod test_affinity {
  use std::mem::{size_of, zeroed};

  /// The CPUs this thread may run on.
  pub fn affinity() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: the mask is a cpu_set_t of the size given, on this stack.
    assert_eq!(unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) }, 0);
    // SAFETY: every index < CPU_SETSIZE is within the set.
    (0..libc::CPU_SETSIZE as usize).filter(|cpu| unsafe { libc::CPU_ISSET(*cpu, &set) }).collect()
  }

  /// Confine this thread to `cpus` (each from `affinity`).
  pub fn confine(cpus: &[usize]) {
    // SAFETY: an all-zero cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    for cpu in cpus {
      // SAFETY: the CPUs come from `affinity`, each < CPU_SETSIZE.
      unsafe { libc::CPU_SET(*cpu, &mut set) };
    }
    // SAFETY: as in `affinity`.
    assert_eq!(unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) }, 0);
  }
}

#[cfg(test)]
mod tests {
  use super::test_affinity::{affinity, confine};
  use super::*;

  #[test]
  fn a_thread_moves_only_in_a_chain_of_round_trips_and_then_not_at_every_one() {
    assert!(!may_move(0, None));
    assert!(!may_move(CHAIN_OF_ROUND_TRIPS - 1, None));
    assert!(may_move(CHAIN_OF_ROUND_TRIPS, None));
    let moved_at = CHAIN_OF_ROUND_TRIPS;
    assert!(!may_move(moved_at + 1, Some(moved_at)));
    assert!(!may_move(moved_at + ROUND_TRIPS_BETWEEN_MOVES - 1, Some(moved_at)));
    assert!(may_move(moved_at + ROUND_TRIPS_BETWEEN_MOVES, Some(moved_at)));
  }

  /// On a thread of its own, whose affinity the test changes.
  #[test]
  fn a_thread_leaves_the_cpu_it_is_on_for_another_and_keeps_every_cpu_it_had() {
    std::thread::spawn(|| {
      let before = affinity();
      let first = before[0];
      // Confined to one CPU it runs there: a CPU it is not on is no
      // reason to move, and the one it is on leaves it nowhere to go.
      confine(&[first]);
      assert_eq!(leave(first as u32 + 1), None);
      assert_eq!(leave(first as u32), None);
      if before.len() < 2 {
        eprintln!("one CPU: nowhere to move");
        return;
      }
      // Given its CPUs back it is still on `first` (the kernel moves a
      // running thread when its CPU leaves the set, not when the set grows).
      confine(&before);
      let moved_to = leave(first as u32).expect("it moves");
      assert_ne!(moved_to as usize, first);
      assert!(before.contains(&(moved_to as usize)));
      assert_eq!(affinity(), before, "it may use every CPU it could before");
    })
    .join()
    .expect("the test's thread");
  }
}
