//! The binding bridge: host calls out of the isolates, replies back in.
//!
//! A program-side `await tools.x(args)` queues the call here through a sync
//! op and gets a call id. The host (Node's main thread) is woken ONCE per
//! batch: while a wake-up is pending, further calls only join the outbox,
//! and the wake-up itself carries the whole batch to JS. Replies come back in
//! batches too, into the run's mailbox, and the run's single reply pump (an
//! async op armed only while calls are pending) takes them all at once. So
//! `Promise.all` over thousands of calls costs a few thread hops and no
//! per-call future, waker or channel. A reply for a run that has ended finds
//! no mailbox and is dropped.
//!
//! Sequential calls (`await tools.a(); await tools.b()`) are bound by the
//! two thread wake-ups of each round trip, not by work. Both ends therefore
//! wait briefly, awake, for the other's next message before they sleep: the
//! reply pump for the reply ([`SPIN_BEFORE_PARK`]), the host for the next
//! call ([`HostSpin`]). See each for what it costs and why it is bounded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::budget;
use crate::lock::lock;

/// One call from a program to a host function.
#[derive(Debug)]
pub struct HostCall {
  pub run_id: u32,
  pub call_id: u32,
  pub namespace: u32,
  pub function: u32,
  /// Lossless JSON text of the argument.
  pub args: String,
}

/// A host function's answer: resolution JSON text, or the rejection
/// message as a JSON string literal.
pub type Reply = Result<String, String>;

/// The replies waiting for one run's pump.
#[derive(Default)]
pub struct Mailbox {
  replies: Mutex<Vec<(u32, Reply)>>,
  /// Set with every delivery: the pump's brief spin watches this, not the lock.
  pending: AtomicBool,
  /// The pump is parked (or about to park): only then does a delivery
  /// notify it. Notifying a pump that caught its reply while spinning would
  /// leave a permit behind, and the next wait would burn a second spin.
  parked: AtomicBool,
  arrived: Notify,
  /// Calls of this run the host has not answered yet (for `stats()`).
  unanswered: AtomicUsize,
}

/// How long the pump spins for a reply before parking its thread. A host
/// reply to a quick binding often lands within tens of microseconds, while
/// waking a parked thread costs about that much again (far more on a VM with
/// idle vCPUs). The spin's CPU time is credited back to the run's budget:
/// waiting on a binding is never charged.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(40);

/// Waiting awake for the other thread only helps when that thread can run
/// meanwhile: with one CPU available, a spin would only delay it (measured
/// under `taskset -c 0`: sequential round trip 45 us spinning, 31 us not).
fn spinning_helps() -> bool {
  static HELPS: OnceLock<bool> = OnceLock::new();
  *HELPS.get_or_init(|| std::thread::available_parallelism().is_ok_and(|cpus| cpus.get() > 1))
}

impl Mailbox {
  fn try_take(&self) -> Option<Vec<(u32, Reply)>> {
    let mut replies = lock(&self.replies);
    self.pending.store(false, Ordering::Release);
    (!replies.is_empty()).then(|| std::mem::take(&mut *replies))
  }

  /// Wait until at least one reply is here, then take them all. The spin
  /// (see [`SPIN_BEFORE_PARK`]) is not charged to the run's budget.
  pub async fn take(&self) -> Vec<(u32, Reply)> {
    loop {
      if let Some(replies) = self.try_take() {
        return replies;
      }
      if spinning_helps() {
        budget::uncharged(|| {
          let until = Instant::now() + SPIN_BEFORE_PARK;
          while !self.pending.load(Ordering::Acquire) && Instant::now() < until {
            std::hint::spin_loop();
          }
        });
        if let Some(replies) = self.try_take() {
          return replies;
        }
      }
      // Announce the park, then look once more: a delivery sets `pending`
      // before it reads `parked` (both SeqCst), so either this sees the
      // delivery or the delivery sees the park and notifies (notify_one
      // stores a permit when nobody waits yet: no lost wake-up).
      self.parked.store(true, Ordering::SeqCst);
      if self.pending.load(Ordering::SeqCst) {
        self.parked.store(false, Ordering::SeqCst);
        continue;
      }
      self.arrived.notified().await;
    }
  }

  /// Replies were added: let the pump know (waking it only if it parked).
  fn wake(&self) {
    self.pending.store(true, Ordering::SeqCst);
    if self.parked.swap(false, Ordering::SeqCst) {
      self.arrived.notify_one();
    }
  }
}

#[derive(Default)]
struct Outbox {
  calls: Vec<HostCall>,
  /// A wake-up is on its way to the host; no need to send another.
  wake_pending: bool,
}

/// How long the host thread, having answered, stays awake for the program's
/// next call before returning to its event loop (where it would sleep and
/// need waking). A program that awaits a quick binding issues its next call a
/// few microseconds after the reply lands; waking Node's sleeping main thread
/// instead costs 15-25 us on a VM. The wait is bounded, never runs JS, and
/// backs off when it keeps missing (programs that compute between calls), so
/// it cannot hold the host's event loop for more than this per answered batch.
const HOST_SPIN: Duration = Duration::from_micros(30);

/// The host's adaptive wait for the next call (see [`HOST_SPIN`]). After `n`
/// consecutive misses the next `2^n - 1` (at most 63) answered batches skip
/// the wait, so a program that never calls right back costs the host at most
/// one wait in 64 answers; one hit restores it.
#[derive(Default)]
struct HostSpin {
  misses: AtomicU32,
  skip: AtomicU32,
}

impl HostSpin {
  fn wait_for(&self, ready: impl Fn() -> bool) {
    let skip = self.skip.load(Ordering::Relaxed);
    if skip > 0 {
      self.skip.store(skip - 1, Ordering::Relaxed);
      return;
    }
    let until = Instant::now() + HOST_SPIN;
    while !ready() {
      if Instant::now() >= until {
        let misses = (self.misses.load(Ordering::Relaxed) + 1).min(6);
        self.misses.store(misses, Ordering::Relaxed);
        self.skip.store((1 << misses) - 1, Ordering::Relaxed);
        return;
      }
      std::hint::spin_loop();
    }
    self.misses.store(0, Ordering::Relaxed);
  }
}

/// The host's wake-up: asks Node's main thread to come and take the outbox.
pub type WakeHost = Box<dyn Fn() + Send + Sync>;

/// The per-runtime router between isolate threads and the host.
#[derive(Default)]
pub struct Bridge {
  outbox: Mutex<Outbox>,
  /// Mirrors `!outbox.calls.is_empty()` for the host's spin (no lock).
  calls_waiting: AtomicBool,
  mailboxes: Mutex<HashMap<u32, Arc<Mailbox>>>,
  next_call: AtomicU32,
  /// Set once, right after construction: the wake-up carries the bridge
  /// (weakly), so the bridge cannot be handed it at construction.
  wake_host: OnceLock<WakeHost>,
  host_spin: HostSpin,
}

impl Bridge {
  /// Connect the host's wake-up; a second call is ignored.
  pub fn connect_host(&self, wake_host: WakeHost) {
    let _ = self.wake_host.set(wake_host);
  }

  /// Open a run's mailbox; replies for runs without one are dropped.
  pub fn open(&self, run_id: u32) -> Arc<Mailbox> {
    let mailbox = Arc::new(Mailbox::default());
    lock(&self.mailboxes).insert(run_id, mailbox.clone());
    mailbox
  }

  /// Close a run's mailbox: calls still with the host are abandoned (the
  /// host may still settle them; their replies are dropped).
  pub fn close(&self, run_id: u32) {
    lock(&self.mailboxes).remove(&run_id);
  }

  /// Runs with at least one call the host has not answered.
  pub fn runs_waiting_on_host(&self) -> usize {
    lock(&self.mailboxes).values().filter(|mailbox| mailbox.unanswered.load(Ordering::Relaxed) > 0).count()
  }

  /// Queue a call from the run whose mailbox is `mailbox` for the host;
  /// returns its id.
  pub fn call(&self, mailbox: &Mailbox, run_id: u32, namespace: u32, function: u32, args: String) -> u32 {
    mailbox.unanswered.fetch_add(1, Ordering::Relaxed);
    let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
    let wake = {
      let mut outbox = lock(&self.outbox);
      outbox.calls.push(HostCall { run_id, call_id, namespace, function, args });
      self.calls_waiting.store(true, Ordering::Release);
      !std::mem::replace(&mut outbox.wake_pending, true)
    };
    if wake {
      if let Some(wake_host) = self.wake_host.get() {
        wake_host();
      }
    }
    call_id
  }

  /// Take every queued call (the host thread, once woken).
  pub fn drain(&self) -> Vec<HostCall> {
    let mut outbox = lock(&self.outbox);
    outbox.wake_pending = false;
    self.calls_waiting.store(false, Ordering::Relaxed);
    std::mem::take(&mut outbox.calls)
  }

  /// Deliver host replies, waking each run's pump once; replies for ended
  /// runs are dropped. Returns whether a live run was answered (its next
  /// call is then likely imminent: see [`Bridge::linger`]).
  pub fn reply_all(&self, replies: impl Iterator<Item = (u32, u32, Reply)>) -> bool {
    let mut touched: Vec<Arc<Mailbox>> = Vec::new();
    {
      let mailboxes = lock(&self.mailboxes);
      for (run_id, call_id, reply) in replies {
        if let Some(mailbox) = mailboxes.get(&run_id) {
          lock(&mailbox.replies).push((call_id, reply));
          // A reply to no call (a direct caller of reply()) must not wrap the count.
          let _ = mailbox.unanswered.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
          if !touched.iter().any(|seen| Arc::ptr_eq(seen, mailbox)) {
            touched.push(mailbox.clone());
          }
        }
      }
    }
    let answered = !touched.is_empty();
    for mailbox in touched {
      mailbox.wake();
    }
    answered
  }

  /// The host thread, having answered a live run and finished its turn,
  /// waits briefly (see [`HOST_SPIN`]) for the run's next call, so that the
  /// call's wake-up finds it awake instead of asleep in its event loop. Run
  /// after the host's turn ends (not inside it), so each call is still taken
  /// in a turn of its own and the host's other work interleaves with them.
  pub fn linger(&self) {
    if !spinning_helps() {
      return;
    }
    self.host_spin.wait_for(|| self.calls_waiting.load(Ordering::Acquire));
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::cell::Cell;

  /// How many of `answers` waits consulted `ready` (i.e. were not skipped).
  fn waits(spin: &HostSpin, answers: usize, ready: bool) -> usize {
    let consulted = Cell::new(0);
    for _ in 0..answers {
      let seen = Cell::new(false);
      spin.wait_for(|| {
        seen.set(true);
        ready
      });
      consulted.set(consulted.get() + usize::from(seen.get()));
    }
    consulted.get()
  }

  #[test]
  fn host_spin_backs_off_while_calls_do_not_follow_and_recovers_on_a_hit() {
    let spin = HostSpin::default();
    // Misses back off 1, 3, 7, ... 63 answers: 200 answers wait 8 times.
    assert_eq!(waits(&spin, 200, false), 8);
    // Once the backoff has run out, one hit restores waiting on every answer.
    let skipped = spin.skip.load(Ordering::Relaxed) as usize;
    waits(&spin, skipped, true);
    assert_eq!(waits(&spin, 1, true), 1);
    assert_eq!(waits(&spin, 50, true), 50);
  }
}
