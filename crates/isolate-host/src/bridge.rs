//! The binding bridge: binding calls out of the isolates, replies back in.
//!
//! A program-side `await tools.x(args)` queues the call here through a sync
//! op and gets a call id. Calls leave in batches, one frame each, from the
//! run's own thread, with no thread in between: the first call of a batch
//! as soon as the run's reply pump is armed (its first poll), the rest when
//! the thread is about to park (its runtime's park hook), i.e. once the
//! program's turn is over, or as soon as [`FLUSH_AT_CALLS`] are queued.
//! `Promise.all` over thousands of calls therefore crosses in a few
//! frames, the first of which the harness answers while the program makes
//! the rest; a call that a program makes and then computes on without
//! yielding waits for its turn to end. Replies come back in
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
//! sleep: the reply pump for the reply (`mailbox.rs`'s `SPIN_BEFORE_PARK`), the
//! harness for the next call (`src/binding_calls.rs`'s `LingerSpin`). While they wait,
//! each takes the message it waits for off the channel itself
//! (`dsh_protocol::inbox`), so no sleeping reader has to be woken first.
//!
//! A batch is written as frames of at most [`MAX_CALLS_FRAME_BYTES`] each
//! (a call longer than that alone in its own), in the order the calls were
//! made. Each call's argument is copied out of the program's heap and held
//! here until its frame is written, reserved against the run's
//! external-memory account meanwhile (`sandbox_ext::with_held`).

use std::sync::{Arc, Mutex, OnceLock};

use dsh_protocol::frame::{Answer, BindingCall, CALLS_FRAME_OVERHEAD};
use dsh_protocol::out_of_band::RawString;
use dsh_sandbox_ext::{take_handed, HeldMemory};

use crate::live_runs::LiveRuns;
use crate::lock::lock;
use crate::mailbox::{Mailbox, ReplyChannel};

/// A call's argument as it leaves: its lossless JSON, and the long strings
/// that cross beside it (see `dsh_protocol::out_of_band`).
pub struct Argument {
  pub json: String,
  /// A JSON array of the strings' paths; empty when there are none.
  pub paths: String,
  pub strings: Vec<RawString>,
}

/// Carries a batch of calls to the harness as one frame (the channel, in
/// `main.rs`); returns once the frame is written.
pub type SendCalls = Box<dyn Fn(Vec<BindingCall>) + Send + Sync>;

/// The most bytes a frame of calls is made of, unless one call alone is
/// longer. The harness refuses a frame over `MAX_FRAME_BYTES` (2 GiB) as
/// hostile, ending this host and every run on it, and copies each frame it
/// takes a few times (read buffer, frame, decoded strings): a turn's calls
/// together, each within its run's caps, could add up to either. Frames of
/// 64 MiB keep what a flush holds twice (the calls, and the frame encoded
/// from them) and what Node copies small, and still carry thousands of
/// ordinary calls each: the per-frame cost stays negligible.
pub const MAX_CALLS_FRAME_BYTES: usize = 64 << 20;

/// Calls in the outbox that leave at once, sent by the run thread whose
/// call made them this many (with whatever other runs on this host
/// queued), without waiting for a turn to end: the harness starts on them
/// while the program makes more, and its replies to them start back, so a
/// `Promise.all` over thousands of calls keeps both processes busy instead
/// of each waiting for the other's whole batch.
pub const FLUSH_AT_CALLS: usize = 512;

/// A call waiting in the outbox, with the reservation of its copies.
struct Queued {
  call: BindingCall,
  held: Option<HeldMemory>,
}

/// The per-runtime router between isolate threads and the host.
pub struct Bridge {
  /// Calls queued for the harness, sent by [`Bridge::flush`].
  outbox: Mutex<Vec<Queued>>,
  /// Held by a flush while it writes: the frames of two flushes (on two
  /// run threads) do not interleave, so calls reach the harness in the
  /// order they were queued.
  sending: Mutex<()>,
  /// The live runs, whose records hold their mailboxes.
  runs: Arc<LiveRuns>,
  /// Set once, when the channel is up.
  send_calls: OnceLock<SendCalls>,
  /// Set once, when the channel is up (see [`ReplyChannel`]).
  replies: OnceLock<Arc<ReplyChannel>>,
}

impl Bridge {
  /// A bridge routing replies to the mailboxes of `runs`.
  pub fn new(runs: Arc<LiveRuns>) -> Bridge {
    Bridge {
      outbox: Mutex::default(),
      sending: Mutex::default(),
      runs,
      send_calls: OnceLock::new(),
      replies: OnceLock::new(),
    }
  }

  /// Connect the harness; a second call is ignored.
  pub fn connect_host(&self, send_calls: SendCalls) {
    let _ = self.send_calls.set(send_calls);
  }

  /// Let spinning pumps take their replies off the channel; a second call
  /// is ignored.
  pub fn connect_replies(&self, replies: ReplyChannel) {
    let _ = self.replies.set(Arc::new(replies));
  }

  /// Open a run's mailbox as it starts to execute; replies for runs whose
  /// mailbox is not open are dropped. A run that is not among the live
  /// runs gets a mailbox no reply reaches.
  pub fn open(&self, run_id: u32) -> Arc<Mailbox> {
    let mailbox = self.runs.get(run_id).map_or_else(Arc::default, |run| run.mailbox().clone());
    mailbox.open(self.replies.get());
    mailbox
  }

  /// Close a run's mailbox as it stops executing: calls still with the
  /// host are abandoned (the host may still settle them; their replies
  /// are dropped).
  pub fn close(&self, run_id: u32) {
    if let Some(run) = self.runs.get(run_id) {
      run.mailbox().close();
    }
  }

  /// Queue a call from the run whose mailbox is `mailbox` for the host;
  /// returns its id, the run's count of calls before it. The call holds the reservation the op handed it
  /// (`sandbox_ext::with_held`), if any.
  pub fn call(&self, mailbox: &Mailbox, run_id: u32, namespace: u32, function: u32, argument: Argument) -> u32 {
    let call_id = mailbox.next_call();
    let Argument { json: args, paths, strings } = argument;
    let call = BindingCall { run_id, call_id, namespace, function, args, paths, strings };
    let held = take_handed();
    let queued = {
      let mut outbox = lock(&self.outbox);
      outbox.push(Queued { call, held });
      outbox.len()
    };
    if queued >= FLUSH_AT_CALLS {
      self.flush();
    }
    call_id
  }

  /// Send every queued call to the harness, in frames of at most
  /// [`MAX_CALLS_FRAME_BYTES`] (see the module doc for who calls this, and
  /// when).
  pub fn flush(&self) {
    self.flush_within(MAX_CALLS_FRAME_BYTES);
  }

  /// [`Bridge::flush`] with frames of at most `bound` bytes, except a call
  /// longer than that, which goes alone (the call ops refused any that no
  /// frame could carry). Each frame's reservations are released once it
  /// is written.
  fn flush_within(&self, bound: usize) {
    let _sending = lock(&self.sending);
    let queued = std::mem::take(&mut *lock(&self.outbox));
    let Some(send_calls) = self.send_calls.get() else {
      return;
    };
    let mut frame = Vec::new();
    let mut held = Vec::new();
    let mut frame_len = CALLS_FRAME_OVERHEAD;
    for Queued { call, held: reservation } in queued {
      let len = call.encoded_len();
      if !frame.is_empty() && frame_len.saturating_add(len) > bound {
        send_calls(std::mem::take(&mut frame));
        held.clear();
        frame_len = CALLS_FRAME_OVERHEAD;
      }
      frame_len = frame_len.saturating_add(len);
      frame.push(call);
      held.extend(reservation);
    }
    if !frame.is_empty() {
      send_calls(frame);
    }
  }

  /// Deliver host replies, waking each run's pump once; replies for runs
  /// that are not executing are dropped.
  pub fn reply_all(&self, replies: impl Iterator<Item = (u32, u32, Answer)>) {
    let mut touched: Vec<Arc<Mailbox>> = Vec::new();
    let replies = replies.map(|(run_id, call_id, reply)| (run_id, (call_id, reply)));
    self.runs.route(replies, |run, (call_id, reply)| {
      let Some(mailbox) = run.map(|run| run.mailbox()).filter(|mailbox| mailbox.is_open()) else {
        return;
      };
      mailbox.deliver(call_id, reply);
      if !touched.iter().any(|seen| Arc::ptr_eq(seen, mailbox)) {
        touched.push(mailbox.clone());
      }
    });
    for mailbox in touched {
      mailbox.wake();
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::external_memory::ExternalMemory;
  use dsh_sandbox_ext::with_held;

  fn hold(account: &ExternalMemory, bytes: usize) -> Option<HeldMemory> {
    account.hold(bytes).map(|held| Box::new(held) as HeldMemory)
  }

  /// A bridge whose frames land in the returned list.
  fn bridge() -> (Bridge, Arc<Mutex<Vec<Vec<BindingCall>>>>) {
    let bridge = Bridge::new(Arc::default());
    let frames = Arc::new(Mutex::new(Vec::new()));
    let sent = frames.clone();
    bridge.connect_host(Box::new(move |calls| lock(&sent).push(calls)));
    (bridge, frames)
  }

  fn argument(len: usize) -> Argument {
    Argument { json: "x".repeat(len), paths: String::new(), strings: Vec::new() }
  }

  #[test]
  fn a_turn_longer_than_a_frame_crosses_in_several_in_order() {
    let (bridge, frames) = bridge();
    let mailbox = Mailbox::default();
    let bound = 1000;
    // Calls of 100 to 1500 bytes of JSON, the last few each longer than a
    // frame on their own.
    let lens: Vec<usize> = (0..40).map(|i| 100 + i * 37).collect();
    let ids: Vec<u32> = lens.iter().map(|len| bridge.call(&mailbox, 1, 0, 0, argument(*len))).collect();
    bridge.flush_within(bound);
    let frames = std::mem::take(&mut *lock(&frames));
    assert!(frames.len() > 1);
    for frame in &frames {
      let len = CALLS_FRAME_OVERHEAD + frame.iter().map(BindingCall::encoded_len).sum::<usize>();
      assert!(len <= bound || frame.len() == 1, "a frame of {} calls is {len} bytes", frame.len());
    }
    let sent: Vec<(u32, usize)> = frames.iter().flatten().map(|call| (call.call_id, call.args.len())).collect();
    let queued: Vec<(u32, usize)> = ids.into_iter().zip(lens).collect();
    assert_eq!(sent, queued);
    // Nothing is left to send.
    bridge.flush_within(bound);
    assert!(lock(&bridge.outbox).is_empty());
  }

  #[test]
  fn calls_leave_as_soon_as_a_frames_worth_is_queued_in_order() {
    let (bridge, frames) = bridge();
    let mailbox = Mailbox::default();
    let ids: Vec<u32> = (0..2 * FLUSH_AT_CALLS + 1).map(|_| bridge.call(&mailbox, 1, 0, 0, argument(10))).collect();
    // Two frames' worth left during the turn; the last call waits for it to end.
    let sizes: Vec<usize> = lock(&frames).iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![FLUSH_AT_CALLS, FLUSH_AT_CALLS]);
    assert_eq!(lock(&bridge.outbox).len(), 1);
    bridge.flush();
    let sent: Vec<u32> = lock(&frames).iter().flatten().map(|call| call.call_id).collect();
    assert_eq!(sent, ids);
  }

  #[test]
  fn a_call_holds_its_reservation_until_its_frame_is_written() {
    let account = ExternalMemory::new(1 << 20);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let bridge = Bridge::new(Arc::default());
    let (watched, log) = (account.clone(), seen.clone());
    bridge.connect_host(Box::new(move |calls| lock(&log).push((calls.len(), watched.used()))));
    let mailbox = Mailbox::default();
    for _ in 0..3 {
      with_held(hold(&account, 600), || bridge.call(&mailbox, 1, 0, 0, argument(600)));
    }
    assert_eq!(account.used(), 1800);
    // An unknown binding queues nothing: its reservation is given back.
    with_held(hold(&account, 600), || ());
    assert_eq!(account.used(), 1800);
    bridge.flush_within(1000);
    // One call a frame; while each is written, the later ones still hold.
    assert_eq!(*lock(&seen), vec![(1, 1800), (1, 1200), (1, 600)]);
    assert_eq!(account.used(), 0);
  }
}
