//! The binding bridge: host calls out of the isolates, replies back in.
//!
//! A program-side `await tools.x(args)` becomes an async op on the isolate's
//! thread, which parks a oneshot here and queues the call. The host (Node's
//! main thread) is woken ONCE per batch: while a wake-up is pending, further
//! calls only join the outbox, so `Promise.all` over thousands of calls
//! costs one event-loop hop, not thousands. Replies come back one by one
//! from the host and are routed by (run id, call id); a reply for a run that
//! has ended finds nothing and is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::control::lock;
use crate::sandbox_ext::HostCallFuture;

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

#[derive(Default)]
struct Outbox {
  calls: Vec<HostCall>,
  /// A wake-up is on its way to the host; no need to send another.
  wake_pending: bool,
}

/// The per-runtime router between isolate threads and the host.
pub struct Bridge {
  outbox: Mutex<Outbox>,
  waiting: Mutex<HashMap<u32, HashMap<u32, oneshot::Sender<Reply>>>>,
  next_call: AtomicU32,
  wake_host: Box<dyn Fn() + Send + Sync>,
}

impl Bridge {
  /// `wake_host` asks the host thread to come and `drain()` the outbox.
  pub fn new(wake_host: Box<dyn Fn() + Send + Sync>) -> Self {
    Bridge { outbox: Mutex::default(), waiting: Mutex::default(), next_call: AtomicU32::new(1), wake_host }
  }

  /// Open a run's mailbox; calls of runs without one are refused.
  pub fn open(&self, run_id: u32) {
    lock(&self.waiting).insert(run_id, HashMap::new());
  }

  /// Close a run's mailbox: pending calls are abandoned (the host may still
  /// settle them; their replies are dropped).
  pub fn close(&self, run_id: u32) {
    lock(&self.waiting).remove(&run_id);
  }

  /// Queue a call for the host and return the future of its reply.
  pub fn call(&self, run_id: u32, namespace: u32, function: u32, args: String) -> HostCallFuture {
    let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
    let (sender, receiver) = oneshot::channel();
    match lock(&self.waiting).get_mut(&run_id) {
      Some(mailbox) => mailbox.insert(call_id, sender),
      None => return Box::pin(async { Err("the run has ended".to_owned()) }),
    };
    let wake = {
      let mut outbox = lock(&self.outbox);
      outbox.calls.push(HostCall { run_id, call_id, namespace, function, args });
      !std::mem::replace(&mut outbox.wake_pending, true)
    };
    if wake {
      (self.wake_host)();
    }
    Box::pin(async move { receiver.await.unwrap_or_else(|_| Err("the binding call was abandoned".to_owned())) })
  }

  /// Take every queued call (the host thread, once woken).
  pub fn drain(&self) -> Vec<HostCall> {
    let mut outbox = lock(&self.outbox);
    outbox.wake_pending = false;
    std::mem::take(&mut outbox.calls)
  }

  /// Deliver host replies (taking the mailbox lock once); replies to ended
  /// runs or unknown calls are dropped.
  pub fn reply_all(&self, replies: impl Iterator<Item = (u32, u32, Reply)>) {
    let mut senders = Vec::new();
    {
      let mut waiting = lock(&self.waiting);
      for (run_id, call_id, reply) in replies {
        if let Some(sender) = waiting.get_mut(&run_id).and_then(|mailbox| mailbox.remove(&call_id)) {
          senders.push((sender, reply));
        }
      }
    }
    for (sender, reply) in senders {
      let _ = sender.send(reply);
    }
  }
}
