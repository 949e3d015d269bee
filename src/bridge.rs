//! The binding bridge: host calls out of the isolates, replies back in.
//!
//! A program-side `await tools.x(args)` queues the call here through a sync
//! op and gets a call id. The host (Node's main thread) is woken ONCE per
//! batch: while a wake-up is pending, further calls only join the outbox.
//! Replies come back in batches too, into the run's mailbox, and the run's
//! single reply pump (an async op armed only while calls are pending) takes
//! them all at once. So `Promise.all` over thousands of calls costs a few
//! thread hops and no per-call future, waker or channel. A reply for a run
//! that has ended finds no mailbox and is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::control::lock;
use crate::watchdog::CpuClock;

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

/// A host function's answer: resolution JSON text, or rejection message.
pub type Reply = Result<String, String>;

/// The replies waiting for one run's pump.
#[derive(Default)]
pub struct Mailbox {
  replies: Mutex<Vec<(u32, Reply)>>,
  /// Set with every delivery: the pump's brief spin watches this, not the lock.
  pending: AtomicBool,
  arrived: Notify,
}

/// How long the pump spins for a reply before parking its thread. A host
/// reply to a quick binding often lands within tens of microseconds, while
/// waking a parked thread costs about that much again (far more on a VM with
/// idle vCPUs). The spin's CPU time is credited back to the run's budget:
/// waiting on a binding is never charged.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(40);

impl Mailbox {
  fn try_take(&self) -> Option<Vec<(u32, Reply)>> {
    let mut replies = lock(&self.replies);
    self.pending.store(false, Ordering::Release);
    (!replies.is_empty()).then(|| std::mem::take(&mut *replies))
  }

  /// Wait until at least one reply is here, then take them all. `credit`
  /// receives the CPU time spent spinning (see [`SPIN_BEFORE_PARK`]).
  pub async fn take(&self, clock: Option<CpuClock>, credit: &AtomicU64) -> Vec<(u32, Reply)> {
    loop {
      if let Some(replies) = self.try_take() {
        return replies;
      }
      if let Some(clock) = clock {
        let cpu_before = clock.now();
        let until = Instant::now() + SPIN_BEFORE_PARK;
        while !self.pending.load(Ordering::Acquire) && Instant::now() < until {
          std::hint::spin_loop();
        }
        if let (Some(before), Some(after)) = (cpu_before, clock.now()) {
          credit.fetch_add(after.saturating_sub(before).as_nanos() as u64, Ordering::Relaxed);
        }
        if let Some(replies) = self.try_take() {
          return replies;
        }
      }
      // notify_one stores a permit when nobody waits: no lost wake-up.
      self.arrived.notified().await;
    }
  }
}

#[derive(Default)]
struct Outbox {
  calls: Vec<HostCall>,
  /// A wake-up is on its way to the host; no need to send another.
  wake_pending: bool,
}

/// The per-runtime router between isolate threads and the host.
pub struct Bridge {
  outbox: Mutex<Outbox>,
  mailboxes: Mutex<HashMap<u32, Arc<Mailbox>>>,
  next_call: AtomicU32,
  wake_host: Box<dyn Fn() + Send + Sync>,
}

impl Bridge {
  /// `wake_host` asks the host thread to come and `drain()` the outbox.
  pub fn new(wake_host: Box<dyn Fn() + Send + Sync>) -> Self {
    Bridge { outbox: Mutex::default(), mailboxes: Mutex::default(), next_call: AtomicU32::new(1), wake_host }
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

  /// Queue a call for the host; returns its id.
  pub fn call(&self, run_id: u32, namespace: u32, function: u32, args: String) -> u32 {
    let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
    let wake = {
      let mut outbox = lock(&self.outbox);
      outbox.calls.push(HostCall { run_id, call_id, namespace, function, args });
      !std::mem::replace(&mut outbox.wake_pending, true)
    };
    if wake {
      (self.wake_host)();
    }
    call_id
  }

  /// Take every queued call (the host thread, once woken).
  pub fn drain(&self) -> Vec<HostCall> {
    let mut outbox = lock(&self.outbox);
    outbox.wake_pending = false;
    std::mem::take(&mut outbox.calls)
  }

  /// Deliver host replies, waking each run's pump once; replies for ended
  /// runs are dropped.
  pub fn reply_all(&self, replies: impl Iterator<Item = (u32, u32, Reply)>) {
    let mut touched: Vec<Arc<Mailbox>> = Vec::new();
    {
      let mailboxes = lock(&self.mailboxes);
      for (run_id, call_id, reply) in replies {
        if let Some(mailbox) = mailboxes.get(&run_id) {
          lock(&mailbox.replies).push((call_id, reply));
          if !touched.iter().any(|seen| Arc::ptr_eq(seen, mailbox)) {
            touched.push(mailbox.clone());
          }
        }
      }
    }
    for mailbox in touched {
      mailbox.pending.store(true, Ordering::Release);
      mailbox.arrived.notify_one();
    }
  }
}
