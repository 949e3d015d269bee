//! When a host gives freed memory back to the OS, and how.
//!
//! Two stores keep what runs freed: glibc's arenas (ICU, small buffers, V8's
//! zones and tables) and V8's pool of heap pages (kept mapped for the next
//! isolates). Neither gives much back on its own, so a host that ran big
//! programs would stay big. This module owns the policy; the scheduler owns
//! its state ([`MemoryReturn`], under the scheduler's lock) and calls it at
//! two points: a run thread after it disposed of a spent isolate
//! ([`MemoryReturn::after_disposal`]), and the scheduler thread when it looks
//! at an idle runtime ([`MemoryReturn::when_idle`]). The returns themselves
//! ([`return_freed_memory`], [`release_v8_page_pool`]) run outside the lock.

use std::time::{Duration, Instant};

use crate::config::RuntimeConfig;
use crate::isolate::PreparedIsolate;
use crate::run::Disposal;
use crate::time_left::left_of;

/// A run whose isolate made the allocator hold at least this much (see
/// `SpentIsolate::dispose`), or that was stopped at a memory cap, has its
/// freed memory returned to the OS once the isolate is gone. glibc keeps
/// freed blocks in the run thread's arena and can give back only the
/// arena's top on its own: whatever the next isolate allocates there pins
/// the rest. Small runs are not worth the trim's walk over every arena
/// (measured: trimming after every run cost one-at-a-time Code Mode runs
/// ~20%); what many of them freed is returned once the runtime is idle.
/// A run whose heap allocated this much has left pages in V8's page pool,
/// which is released once the runtime is idle (see [`release_v8_page_pool`]).
pub const RETURN_FREED_MEMORY_AFTER: usize = 16 << 20;

/// Idle for this long after the last isolate was disposed, the scheduler
/// returns what the runs since the last return freed (1000 runs at once
/// leave ~500 MiB free in glibc's arenas). Long enough that runs which
/// follow each other closely never pay for it.
pub const IDLE_RETURN_AFTER: Duration = Duration::from_millis(250);

/// What has been freed and not yet returned.
#[derive(Debug, Default)]
pub struct MemoryReturn {
  /// Times freed memory was returned (`stats().memoryReturns`).
  pub returns: u64,
  /// When the last isolate whose freed memory was not all returned at
  /// once was disposed (cleared by the next return).
  unreturned_disposal: Option<Instant>,
  /// A run since the last return left heap pages in V8's page pool.
  v8_pool_due: bool,
}

/// What the scheduler thread should do about an idle runtime's memory.
#[derive(Debug, PartialEq, Eq)]
pub enum IdleReturn {
  /// Nothing is owed.
  Nothing,
  /// Look again after this long.
  After(Duration),
  /// Return the arenas' free memory now, and V8's pool too if `v8_pool`.
  Now { v8_pool: bool },
}

impl MemoryReturn {
  /// Whether the run thread that disposed of an isolate should return the
  /// freed memory at once (before it takes its next run). It calls
  /// [`MemoryReturn::disposed`] afterwards with the answer.
  pub fn return_at_once(disposal: &Disposal) -> bool {
    disposal.hit_cap || disposal.held >= RETURN_FREED_MEMORY_AFTER
  }

  /// An isolate was disposed of, its freed memory returned at once or not.
  pub fn disposed(&mut self, disposal: &Disposal, returned: bool) {
    if returned {
      self.returns += 1;
    }
    self.v8_pool_due |= disposal.hit_cap || disposal.heap_allocated >= RETURN_FREED_MEMORY_AFTER as u64;
    self.unreturned_disposal = if returned && !self.v8_pool_due { None } else { Some(Instant::now()) };
  }

  /// Prepared isolates were dropped unused (a reserve back to its size at
  /// rest): what they freed is returned once the runtime has been idle.
  pub fn dropped_unused(&mut self) {
    self.unreturned_disposal = Some(Instant::now());
  }

  /// The scheduler thread looks at the runtime; `idle` when no run is in
  /// flight or queued. After a `Now`, it calls [`MemoryReturn::returned`]
  /// once the memory is back (so that the count never runs ahead of it).
  pub fn when_idle(&mut self, idle: bool) -> IdleReturn {
    let Some(since) = self.unreturned_disposal else { return IdleReturn::Nothing };
    if !idle {
      return IdleReturn::Nothing;
    }
    match left_of(IDLE_RETURN_AFTER, since.elapsed()) {
      Some(left) => IdleReturn::After(left),
      None => {
        self.unreturned_disposal = None;
        IdleReturn::Now { v8_pool: std::mem::take(&mut self.v8_pool_due) }
      }
    }
  }

  /// What an idle runtime freed is back with the OS.
  pub fn returned(&mut self) {
    self.returns += 1;
  }
}

/// Give back the heap pages V8 keeps pooled. V8 pools the pages every
/// isolate frees, for the next isolates to reuse (a pooled page is already
/// mapped and faulted in), and releases the pool from a task that new
/// pooling schedules, at most once per `--memory-pool-timeout` + 4 s. The
/// pages an isolate pools when it is disposed after that task ran stay
/// until some later isolate pools more: a runtime gone idle after a big run
/// kept that run's heap resident indefinitely. So once the runtime is idle,
/// an isolate made here for the purpose asks V8, by a critical
/// memory-pressure notification, to release every isolate's pooled pages
/// (and runs a GC of its own small heap). Its own pages, pooled when it
/// goes, are one fresh isolate's worth, reused by the next.
pub fn release_v8_page_pool(config: &RuntimeConfig) {
  let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else { return };
  let _entered = runtime.enter();
  if let Ok(mut isolate) = PreparedIsolate::new(config) {
    isolate.release_pooled_pages();
  }
}

/// How many arenas glibc may give the host's threads (it gives each thread
/// that contends one of its own, up to eight per core). A host runs a
/// thread per run, and each arena keeps its own free blocks of the
/// isolates made and disposed on it: with two, 100 runs waiting on a tool
/// grew the harness and its hosts 211-212 MiB at their peak, against 215-216
/// with glibc's default (one arena: 211).
pub const MALLOC_ARENAS: libc::c_int = 2;

/// Limit glibc to [`MALLOC_ARENAS`] arenas. Called by the host's main
/// thread first thing, while it is the only thread (an arena made before
/// stays).
pub fn share_arenas() {
  // SAFETY: mallopt only sets a parameter of the allocator, which reads it
  // when a thread next needs an arena.
  unsafe { libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS) };
}

/// Give every arena's free pages back to the OS (`malloc_trim`).
pub fn return_freed_memory() {
  // SAFETY: malloc_trim only releases free memory; it is thread-safe and
  // locks each arena while it walks it.
  unsafe { libc::malloc_trim(0) };
}

#[cfg(test)]
mod tests {
  use super::*;

  fn disposal(held: usize, heap_allocated: u64, hit_cap: bool) -> Disposal {
    Disposal { held, heap_allocated, hit_cap }
  }

  #[test]
  fn big_runs_return_at_once_small_ones_once_idle_and_v8s_pool_only_when_a_heap_grew() {
    let mut memory = MemoryReturn::default();
    assert_eq!(memory.when_idle(true), IdleReturn::Nothing);
    // A small run: nothing at once; owed once idle, without V8's pool.
    let small = disposal(1 << 20, 1 << 20, false);
    assert!(!MemoryReturn::return_at_once(&small));
    memory.disposed(&small, false);
    assert_eq!(memory.when_idle(false), IdleReturn::Nothing);
    assert!(matches!(memory.when_idle(true), IdleReturn::After(left) if left <= IDLE_RETURN_AFTER));
    memory.unreturned_disposal = Some(Instant::now() - IDLE_RETURN_AFTER);
    assert_eq!(memory.when_idle(true), IdleReturn::Now { v8_pool: false });
    memory.returned();
    assert_eq!(memory.when_idle(true), IdleReturn::Nothing);
    assert_eq!(memory.returns, 1);
    // A run that held much: returned at once, nothing owed after.
    let held = disposal(RETURN_FREED_MEMORY_AFTER, 0, false);
    assert!(MemoryReturn::return_at_once(&held));
    memory.disposed(&held, true);
    assert_eq!(memory.when_idle(true), IdleReturn::Nothing);
    assert_eq!(memory.returns, 2);
    // One stopped at a cap: returned at once, and V8's pool owed once idle.
    let capped = disposal(0, 0, true);
    assert!(MemoryReturn::return_at_once(&capped));
    memory.disposed(&capped, true);
    memory.unreturned_disposal = Some(Instant::now() - IDLE_RETURN_AFTER);
    assert_eq!(memory.when_idle(true), IdleReturn::Now { v8_pool: true });
    assert_eq!(memory.returns, 3);
  }
}
