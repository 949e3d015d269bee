//! The binding bridge: host calls out of the isolates, replies back in.
//!
//! A program-side `await tools.x(args)` queues the call here through a sync
//! op and gets a call id. Calls leave in batches, one frame each, from the
//! run's own thread, with no thread in between: the first call of a batch
//! as soon as the run's reply pump is armed (its first poll), the rest when
//! the thread is about to park (its runtime's park hook), i.e. once the
//! program's turn is over. `Promise.all` over thousands of calls therefore
//! crosses in two frames; a call that a program makes and then computes on
//! without yielding waits for its turn to end. Replies come back in
//! batches too, into the run's mailbox, and the run's single reply pump (an
//! async op armed only while calls are pending) takes them all at once. So
//! `Promise.all` over thousands of calls costs a few thread hops and no
//! per-call future, waker or channel. Each run's mailbox is in its record
//! among the host's live runs (`live_runs.rs`), open only while the run
//! executes: a reply for a run that has ended (or has not started) is
//! dropped.
//!
//! Sequential calls (`await tools.a(); await tools.b()`) are bound by the
//! thread and process wake-ups of each round trip, not by work. Both ends
//! therefore wait briefly, awake, for the other's next message before they
//! sleep: the reply pump here for the reply ([`SPIN_BEFORE_PARK`]), the
//! harness for the next call (the addon's `HostSpin`). While they wait,
//! each takes the message it waits for off the channel itself
//! (`dsh_protocol::inbox`), so no sleeping reader has to be woken first.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use dsh_protocol::config::spinning_helps;
use dsh_protocol::frame::{HostCall, ReplyKind};
use dsh_protocol::out_of_band::RawString;

use crate::budget;
use crate::live_runs::LiveRuns;
use crate::lock::lock;

/// A host function's answer: how its text answers the call, and the text.
pub type Reply = (ReplyKind, String);

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
  /// The run executes: replies are delivered here, and it counts as
  /// waiting on the host while calls are unanswered.
  open: AtomicBool,
  /// Takes replies off the channel itself, while the pump spins for them
  /// (set when the mailbox opens).
  take_replies: OnceLock<Arc<TakeReplies>>,
}

/// Takes the replies at the head of the channel, if any are there whole,
/// and delivers them (`main.rs`, over `dsh_protocol::inbox`): a pump that
/// spins for its reply reads it itself instead of waiting for the host's
/// main thread to be woken for it.
pub type TakeReplies = Box<dyn Fn() + Send + Sync>;

/// How long the pump spins for a reply before parking its thread. A reply
/// to a quick binding crosses to the harness and back: two process hops
/// and Node's main thread, 60-150 us on a 2-core VM, while waking the
/// parked thread afterwards costs tens of microseconds more (measured: the
/// sequential round trip went from ~170 us at a 40 us spin to ~90-110 us
/// at 200 us). The spin's CPU time is credited back to the run's budget:
/// waiting on a binding is never charged. A run whose tool is slow burns
/// one spin per wait, then sleeps.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(200);

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
            match self.take_replies.get() {
              Some(take_replies) => take_replies(),
              None => std::hint::spin_loop(),
            }
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

  /// The run has calls the host has not answered, and is still there to
  /// take the replies.
  pub fn waiting_on_host(&self) -> bool {
    self.open.load(Ordering::Acquire) && self.unanswered.load(Ordering::Relaxed) > 0
  }

  /// Replies were added: let the pump know (waking it only if it parked).
  fn wake(&self) {
    self.pending.store(true, Ordering::SeqCst);
    if self.parked.swap(false, Ordering::SeqCst) {
      self.arrived.notify_one();
    }
  }
}

/// A call's argument as it leaves: its lossless JSON, and the long strings
/// that cross beside it (see `dsh_protocol::out_of_band`).
pub struct Argument {
  pub json: String,
  /// A JSON array of the strings' paths; empty when there are none.
  pub paths: String,
  pub strings: Vec<RawString>,
}

/// Carries a batch of calls to the harness (the channel, in `main.rs`).
pub type SendCalls = Box<dyn Fn(Vec<HostCall>) + Send + Sync>;

/// The per-runtime router between isolate threads and the host.
pub struct Bridge {
  /// Calls queued for the harness, sent by [`Bridge::flush`].
  outbox: Mutex<Vec<HostCall>>,
  /// The live runs, whose records hold their mailboxes.
  runs: Arc<LiveRuns>,
  next_call: AtomicU32,
  /// Set once, when the channel is up.
  send_calls: OnceLock<SendCalls>,
  /// Set once, when the channel is up (see [`TakeReplies`]).
  take_replies: OnceLock<Arc<TakeReplies>>,
}

impl Bridge {
  /// A bridge routing replies to the mailboxes of `runs`.
  pub fn new(runs: Arc<LiveRuns>) -> Bridge {
    Bridge {
      outbox: Mutex::default(),
      runs,
      next_call: AtomicU32::new(0),
      send_calls: OnceLock::new(),
      take_replies: OnceLock::new(),
    }
  }

  /// Connect the harness; a second call is ignored.
  pub fn connect_host(&self, send_calls: SendCalls) {
    let _ = self.send_calls.set(send_calls);
  }

  /// Let spinning pumps take their replies off the channel; a second call
  /// is ignored.
  pub fn connect_replies(&self, take_replies: TakeReplies) {
    let _ = self.take_replies.set(Arc::new(take_replies));
  }

  /// Open a run's mailbox as it starts to execute; replies for runs whose
  /// mailbox is not open are dropped. A run that is not among the live
  /// runs gets a mailbox no reply reaches.
  pub fn open(&self, run_id: u32) -> Arc<Mailbox> {
    let mailbox = self.runs.get(run_id).map_or_else(Arc::default, |run| run.mailbox().clone());
    if let Some(take_replies) = self.take_replies.get() {
      let _ = mailbox.take_replies.set(take_replies.clone());
    }
    mailbox.open.store(true, Ordering::Release);
    mailbox
  }

  /// Close a run's mailbox as it stops executing: calls still with the
  /// host are abandoned (the host may still settle them; their replies
  /// are dropped).
  pub fn close(&self, run_id: u32) {
    if let Some(run) = self.runs.get(run_id) {
      run.mailbox().open.store(false, Ordering::Release);
    }
  }

  /// Queue a call from the run whose mailbox is `mailbox` for the host;
  /// returns its id.
  pub fn call(&self, mailbox: &Mailbox, run_id: u32, namespace: u32, function: u32, argument: Argument) -> u32 {
    mailbox.unanswered.fetch_add(1, Ordering::Relaxed);
    let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
    let Argument { json: args, paths, strings } = argument;
    lock(&self.outbox).push(HostCall { run_id, call_id, namespace, function, args, paths, strings });
    call_id
  }

  /// Send every queued call to the harness, in one batch (see the module
  /// doc for who calls this, and when).
  pub fn flush(&self) {
    let calls = std::mem::take(&mut *lock(&self.outbox));
    if calls.is_empty() {
      return;
    }
    if let Some(send_calls) = self.send_calls.get() {
      send_calls(calls);
    }
  }

  /// Deliver host replies, waking each run's pump once; replies for runs
  /// that are not executing are dropped.
  pub fn reply_all(&self, replies: impl Iterator<Item = (u32, u32, Reply)>) {
    let mut touched: Vec<Arc<Mailbox>> = Vec::new();
    let replies = replies.map(|(run_id, call_id, reply)| (run_id, (call_id, reply)));
    self.runs.route(replies, |run, (call_id, reply)| {
      let Some(mailbox) = run.map(|run| run.mailbox()).filter(|mailbox| mailbox.open.load(Ordering::Acquire)) else {
        return;
      };
      lock(&mailbox.replies).push((call_id, reply));
      // A reply to no call (a direct caller of reply()) must not wrap the count.
      let _ = mailbox.unanswered.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
      if !touched.iter().any(|seen| Arc::ptr_eq(seen, mailbox)) {
        touched.push(mailbox.clone());
      }
    });
    for mailbox in touched {
      mailbox.wake();
    }
  }
}
