//! A host's threads in two planes, by CPU priority.
//!
//! The control plane keeps the priority the host was started with (the
//! harness's): the channel's thread (`main.rs`), the scheduler, the
//! watchdog, and V8's worker threads (started with V8's platform on the
//! channel's thread, which must start it: see `platform.rs`). The program
//! plane runs [`PROGRAM_NICE`] below it ([`program_nice`]): the run
//! threads, which execute programs and make and dispose of isolates.
//!
//! Why: a run's life is a chain of short hand-offs between threads of two
//! processes (the harness's main thread and channel reader, the host's
//! channel thread, the run's thread), and each hand-off wakes a thread on
//! some CPU. Between runs, a run thread spends ~2-3 ms of CPU disposing of
//! its isolate and preparing the next; a woken thread of the chain queued
//! behind that work waits for it, while the other CPU may sit idle (traced
//! on the 2-vCPU machines here: a host's channel thread waited 3.3 ms
//! behind another host's isolate preparation with the other vCPU idle).
//! At equal priority the kernel lets the running thread go on; at a lower
//! one it gives way sooner to the woken thread. Measured, alternating one
//! process's runtimes, Code Mode shaped runs one at a time (5 tool calls,
//! 20 log lines): 6-9% faster at nice 1, 5, 10 and 19 alike (lowering
//! V8's workers too added at most ~2%, within the noise).
//!
//! What it costs: a program competing for a CPU with a process at the
//! harness's priority gets about a tenth of that CPU's time (nice 10
//! against 0), never none. Programs against each other are as before; the
//! harness and the hosts' control threads now come first: the watchdog
//! that ends a runaway program and the channel thread that answers the
//! heartbeat are not held up by the programs they watch.
//!
//! The kernel lets an unprivileged thread lower its priority, never raise
//! it again, so a run thread enters the program plane once, as it starts,
//! for good. The seccomp allow list (`lockdown.rs`) admits exactly this
//! call and no other priority change.

use std::sync::OnceLock;

/// How much lower the program plane's priority is than the host's (a nice
/// value, added to the host's, which is the harness's).
pub const PROGRAM_NICE: libc::c_int = 10;

/// The lowest priority there is (the highest nice value).
const LOWEST: libc::c_int = 19;

/// The program plane's nice value: the host's, [`PROGRAM_NICE`] lower, or
/// the lowest there is. Read once, by the first thread that asks, which is
/// still at the host's priority: the host's main thread as it builds its
/// lockdown (which admits exactly this value), or a run thread before it
/// lowers itself. A harness started at nice 5 gets programs at 15, not 10.
pub fn program_nice() -> libc::c_int {
  static NICE: OnceLock<libc::c_int> = OnceLock::new();
  // SAFETY: getpriority with integer arguments reads the calling thread's
  // nice value (-1 on an error too, which then counts as nice -1).
  *NICE.get_or_init(|| (unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) } + PROGRAM_NICE).min(LOWEST))
}

/// Put the calling thread in the program plane (see the module doc). Best
/// effort: a thread the kernel (or a container's filter) does not let
/// lower itself runs at the host's priority, as before.
pub fn lower_this_thread() {
  let nice = program_nice();
  // SAFETY: setpriority with integer arguments; on Linux, PRIO_PROCESS
  // with `who` 0 sets the nice value of the calling thread only.
  unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
}

#[cfg(test)]
mod tests {
  use super::*;

  fn nice_of_this_thread() -> libc::c_int {
    // SAFETY: as above; getpriority reads the calling thread's nice value.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
  }

  #[test]
  fn lowers_only_the_calling_thread_and_what_it_starts() {
    let (own, started, other) = std::thread::spawn(|| {
      let before = nice_of_this_thread();
      // Started before the lowering: nice is a thread's own, set when the
      // thread starts, whenever this one reads it.
      let other = std::thread::spawn(nice_of_this_thread);
      lower_this_thread();
      let started = std::thread::spawn(nice_of_this_thread).join().unwrap();
      (nice_of_this_thread() - before, started - before, other.join().unwrap() - before)
    })
    .join()
    .unwrap();
    // PROGRAM_NICE lower than this test's own priority, or the lowest.
    let host = nice_of_this_thread();
    let lowered = (host + PROGRAM_NICE).min(LOWEST) - host;
    assert_eq!((own, started, other), (lowered, lowered, 0));
  }
}
