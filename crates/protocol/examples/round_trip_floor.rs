//! The floor under a binding round trip on this machine: what the cheapest
//! hand-offs between two threads cost, each way and back, with nothing of
//! the runtime in between. A binding's round trip makes four such
//! hand-offs (the run's thread to the harness's reader, to Node's main
//! thread, back to the host's reader, to the run's thread), across two
//! processes; these say how far below it the machine's own floor is.
//!
//! `cargo run --release -p dsh_protocol --example round_trip_floor`
//!
//! Each figure is the median of batches of ping-pongs between two threads,
//! either pinned to two different CPUs or left to the kernel's scheduler:
//! - a Unix socket pair (what the channel is): a 1-byte write, read by
//!   the other side, which writes 1 byte back;
//! - a futex (what a parked thread's wake-up is): a word flipped and woken,
//!   waited on by the other side, which flips and wakes it back;
//! - a spin (a cache line crossing CPUs): a word flipped, spun on.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

const BATCHES: usize = 21;
const PER_BATCH: usize = 2000;

/// Pin the calling thread to `cpus`; false where the machine refuses.
fn pin(cpus: impl IntoIterator<Item = usize>) -> bool {
  // SAFETY: a zeroed cpu_set_t is the empty set, which CPU_SET then fills
  // (with CPUs below the machine's count); sched_setaffinity(0, ...) only
  // reads it, for the calling thread.
  unsafe {
    let mut set: libc::cpu_set_t = std::mem::zeroed();
    for cpu in cpus {
      libc::CPU_SET(cpu, &mut set);
    }
    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
  }
}

fn cpus() -> usize {
  std::thread::available_parallelism().map_or(1, usize::from)
}

fn futex_wait(word: &AtomicU32, while_value: u32) {
  // SAFETY: FUTEX_WAIT reads the aligned u32 the atomic holds, which lives
  // as long as the Arc both threads keep; it sleeps only while it still
  // holds `while_value`.
  unsafe {
    libc::syscall(
      libc::SYS_futex,
      word.as_ptr(),
      libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
      while_value,
      std::ptr::null::<libc::timespec>(),
    );
  }
}

fn futex_wake(word: &AtomicU32) {
  // SAFETY: FUTEX_WAKE only looks up waiters on the word's address.
  unsafe {
    libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
  }
}

/// The median round trip of `ping` (this thread) against `pong` (another),
/// in microseconds, each side on its own CPU when `pinned`.
fn measure(pinned: bool, mut ping: impl FnMut(), pong: impl FnMut() -> bool + Send + 'static) -> f64 {
  let mut pong = pong;
  let other = std::thread::spawn(move || {
    if pinned {
      pin([1]);
    } else {
      pin(0..cpus());
    }
    while pong() {}
  });
  if pinned {
    pin([0]);
  } else {
    pin(0..cpus());
  }
  let mut batches = Vec::with_capacity(BATCHES);
  for _ in 0..BATCHES {
    let started = Instant::now();
    for _ in 0..PER_BATCH {
      ping();
    }
    batches.push(started.elapsed().as_secs_f64() * 1e6 / PER_BATCH as f64);
  }
  drop(ping);
  let _ = other.join();
  batches.sort_by(f64::total_cmp);
  batches[BATCHES / 2]
}

fn socket(pinned: bool) -> f64 {
  let (mut a, mut b) = UnixStream::pair().expect("a socket pair");
  let mut left = BATCHES * PER_BATCH;
  let pong = move || {
    let mut byte = [0u8];
    if b.read_exact(&mut byte).is_err() || b.write_all(&byte).is_err() {
      return false;
    }
    left -= 1;
    left > 0
  };
  measure(
    pinned,
    move || {
      let mut byte = [1u8];
      a.write_all(&byte).expect("written");
      a.read_exact(&mut byte).expect("read");
    },
    pong,
  )
}

/// Ping-pong on one word: ping sets it to 1, pong back to 0; `sleep`
/// waits on a futex (and wakes the other), otherwise both spin.
fn word(pinned: bool, sleep: bool) -> f64 {
  let word = Arc::new(AtomicU32::new(0));
  let theirs = word.clone();
  let mut left = BATCHES * PER_BATCH;
  let pong = move || {
    while theirs.load(Ordering::Acquire) != 1 {
      if sleep {
        futex_wait(&theirs, 0);
      } else {
        std::hint::spin_loop();
      }
    }
    theirs.store(0, Ordering::Release);
    if sleep {
      futex_wake(&theirs);
    }
    left -= 1;
    left > 0
  };
  measure(
    pinned,
    move || {
      word.store(1, Ordering::Release);
      if sleep {
        futex_wake(&word);
      }
      while word.load(Ordering::Acquire) != 0 {
        if sleep {
          futex_wait(&word, 1);
        } else {
          std::hint::spin_loop();
        }
      }
    },
    pong,
  )
}

fn main() {
  println!("round trips between two threads, median of {BATCHES} batches of {PER_BATCH} (µs)");
  println!("{:<34} {:>10} {:>10}", "hand-off", "pinned", "unpinned");
  let pinned = cpus() >= 2 && pin([0]);
  let row = |name: &str, run: &dyn Fn(bool) -> f64| {
    let across = if pinned { format!("{:.2}", run(true)) } else { "-".to_owned() };
    println!("{name:<34} {across:>10} {:>10.2}", run(false));
  };
  row("Unix socket pair, 1 byte each way", &socket);
  row("futex wait and wake", &|pinned| word(pinned, true));
  if pinned {
    println!("{:<34} {:>10.2} {:>10}", "spin on a shared word", word(true, false), "-");
  }
}
