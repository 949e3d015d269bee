//! A run's mailbox: the replies to its binding calls waiting for its reply
//! pump, and what the pump needs to wait for them well (whether to spin
//! before it parks, how many calls are unanswered). It lives in the run's
//! record among the host's live runs (`live_runs.rs`), open only while the
//! run executes; the bridge (`bridge.rs`) delivers into it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use dsh_protocol::config::spinning_helps;
use dsh_protocol::frame::Answer;
use dsh_protocol::inbox::Watching;

use crate::budget;
use crate::cpu_placement;
use crate::lock::lock;

/// The replies waiting for one run's pump.
#[derive(Default)]
pub struct Mailbox {
  replies: Mutex<Vec<(u32, Answer)>>,
  /// Set with every delivery: the pump's brief spin watches this, not the lock.
  pending: AtomicBool,
  /// The pump is parked (or about to park): only then does a delivery
  /// notify it. Notifying a pump that caught its reply while spinning would
  /// leave a permit behind, and the next wait would burn a second spin.
  parked: AtomicBool,
  arrived: Notify,
  /// Calls of this run the host has not answered yet (for `stats()`).
  unanswered: AtomicUsize,
  /// The id of the run's next call: a run's calls are numbered from 0 in
  /// the order it makes them, so that the harness can match each call of
  /// a re-executed run with the same call in the run's history, and a
  /// host that sends an id twice is caught (`dsh_protocol::history`).
  next_call: AtomicU32,
  /// The run executes: replies are delivered here, and it counts as
  /// waiting on the host while calls are unanswered.
  open: AtomicBool,
  /// The channel the replies cross, which the pump reads itself while it
  /// spins for them (set when the mailbox opens).
  channel: OnceLock<Arc<ReplyChannel>>,
  /// The run's last wait for replies ended within [`SPIN_BEFORE_PARK`], so
  /// the next one spins (see [`Mailbox::take`]). Off for a run's first wait.
  spin_next: AtomicBool,
  /// The run's waits for replies so far (its round trips).
  round_trips: AtomicU32,
  /// Its round trips when its thread last moved off the answerer's CPU
  /// (`cpu_placement`), plus one; 0: never.
  moved_at: AtomicU32,
}

/// Takes the replies at the head of the channel, if any are there whole,
/// and delivers them (`main.rs`, over `dsh_protocol::inbox`): a pump that
/// spins for its reply reads it itself instead of waiting for the host's
/// main thread to be woken for it.
/// It is called over and over while the pump spins, with the spin's
/// [`Watching`], so that the host's main thread is not woken for the
/// replies the pump takes.
pub type TakeReplies = Box<dyn Fn(&mut Watching) + Send + Sync>;

/// The channel the replies cross, as a run's pump reads it (`main.rs`).
pub struct ReplyChannel {
  pub take_replies: TakeReplies,
  /// The CPU the harness last wrote to the channel from (Node's main
  /// thread, answering), as the harness says (`ring::layout::WRITER_CPU`):
  /// a pump in a chain of calls keeps its thread off it (`cpu_placement`).
  pub answerer_cpu: Box<dyn Fn() -> Option<u32> + Send + Sync>,
}

/// How long the pump spins for a reply before parking its thread. A reply
/// to a quick binding crosses to the harness and back: two process hops
/// and Node's main thread, 60-150 us on a 2-core VM, while waking the
/// parked thread afterwards costs tens of microseconds more (measured: the
/// sequential round trip went from ~170 us at a 40 us spin to ~90-110 us
/// at 200 us). The spin's CPU time is credited back to the run's budget:
/// waiting on a binding is never charged.
///
/// A pump spins only when its run's previous wait ended within this
/// (`Mailbox::spin_next`): a run calling a quick binding over and over,
/// whose reply the harness's lingering main thread sends back at once. A
/// run's first call, or one after a slow reply, parks at once. A spin that
/// cannot be answered soon does worse than cost its CPU: it holds a CPU the
/// other side of the round trip needs (the harness's reader and main
/// threads, on a machine of two). Measured on Code Mode shaped runs (5
/// tool calls each): the channel polls of spinning pumps fell from ~500 to
/// ~170 a run, and the hosts' CPU by ~1 ms a run.
///
/// The spin yields its CPU at every turn (`sched_yield`). The thread the
/// reply comes from is often woken onto the CPU the pump spins on: traced
/// with the scheduler's events on a 2-vCPU VM, Node's main thread, woken by
/// its reader for the run's next call, waited in that CPU's run queue for
/// the pump's whole spin (~200 us) while the other CPU idled, since the
/// kernel lets a running thread finish its slice even against a woken
/// thread of a higher priority. Yielding, the sequential round trip took
/// 0.64-0.77x the time (A/B, both orders), Code Mode shaped runs alike.
/// (The harness's linger does not yield: there it made Code Mode shaped
/// runs ~20% slower, the main thread giving its CPU to a host's isolate
/// preparation for a whole slice.)
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(200);

impl Mailbox {
  /// The run starts to execute: replies are delivered here from now on,
  /// and its pump may take them off the channel with `take_replies`.
  pub fn open(&self, channel: Option<&Arc<ReplyChannel>>) {
    if let Some(channel) = channel {
      let _ = self.channel.set(channel.clone());
    }
    self.open.store(true, Ordering::Release);
  }

  /// The run stops executing: replies for it are dropped.
  pub fn close(&self) {
    self.open.store(false, Ordering::Release);
  }

  pub fn is_open(&self) -> bool {
    self.open.load(Ordering::Acquire)
  }

  /// A call of the run leaves: its id, and it counts as unanswered.
  pub fn next_call(&self) -> u32 {
    self.unanswered.fetch_add(1, Ordering::Relaxed);
    self.next_call.fetch_add(1, Ordering::Relaxed)
  }

  /// How many calls the run has made.
  pub fn calls_made(&self) -> u32 {
    self.next_call.load(Ordering::Relaxed)
  }

  /// A reply arrives (the pump is woken by [`Mailbox::wake`], once per
  /// batch).
  pub fn deliver(&self, call_id: u32, reply: Answer) {
    lock(&self.replies).push((call_id, reply));
    // A reply to no call (a direct caller of reply()) must not wrap the count.
    let _ = self.unanswered.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
  }

  fn try_take(&self) -> Option<Vec<(u32, Answer)>> {
    let mut replies = lock(&self.replies);
    self.pending.store(false, Ordering::Release);
    (!replies.is_empty()).then(|| std::mem::take(&mut *replies))
  }

  /// Wait until at least one reply is here, then take them all. The spin
  /// (see [`SPIN_BEFORE_PARK`]) is not charged to the run's budget.
  pub async fn take(&self) -> Vec<(u32, Answer)> {
    let waiting_since = Instant::now();
    let replies = self.wait().await;
    self.spin_next.store(waiting_since.elapsed() < SPIN_BEFORE_PARK, Ordering::Relaxed);
    self.keep_off_the_answerers_cpu();
    replies
  }

  /// In a chain of calls, move the run's thread off the CPU its answer
  /// was written from (see `cpu_placement`).
  fn keep_off_the_answerers_cpu(&self) {
    let round_trips = self.round_trips.fetch_add(1, Ordering::Relaxed).saturating_add(1);
    let moved_at = self.moved_at.load(Ordering::Relaxed).checked_sub(1);
    if !spinning_helps() || !cpu_placement::may_move(round_trips, moved_at) {
      return;
    }
    let Some(cpu) = self.channel.get().and_then(|channel| (channel.answerer_cpu)()) else { return };
    if cpu_placement::leave(cpu).is_some() {
      self.moved_at.store(round_trips.saturating_add(1), Ordering::Relaxed);
    }
  }

  async fn wait(&self) -> Vec<(u32, Answer)> {
    loop {
      if let Some(replies) = self.try_take() {
        return replies;
      }
      if spinning_helps() && self.spin_next.load(Ordering::Relaxed) {
        budget::uncharged(|| {
          let until = Instant::now() + SPIN_BEFORE_PARK;
          let mut watching = Watching::default();
          while !self.pending.load(Ordering::Acquire) && Instant::now() < until {
            if let Some(channel) = self.channel.get() {
              (channel.take_replies)(&mut watching);
            }
            // Each turn gives way to a thread waiting for this CPU (see
            // SPIN_BEFORE_PARK); on a CPU nobody else wants it returns at once.
            std::thread::yield_now();
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
  pub fn waiting_on_a_tool(&self) -> bool {
    self.is_open() && self.unanswered.load(Ordering::Relaxed) > 0
  }

  /// Replies were added: let the pump know (waking it only if it parked).
  pub fn wake(&self) {
    self.pending.store(true, Ordering::SeqCst);
    if self.parked.swap(false, Ordering::SeqCst) {
      self.arrived.notify_one();
    }
  }
}

#[cfg(test)]
mod tests {
  use std::future::Future;
  use std::pin::pin;
  use std::sync::atomic::AtomicUsize;
  use std::task::{Context, Poll, Waker};

  use dsh_protocol::frame::ReplyKind;

  use super::*;
  use crate::budget::{burn, PhaseObserver, RunBudget};
  use crate::control::RunControl;
  use crate::cpu_placement::test_affinity::{affinity, confine};

  struct NoAdmission;

  impl PhaseObserver for NoAdmission {
    fn started_computing(&self) {}
    fn stopped_computing(&self) {}
  }

  fn deliver_one(mailbox: &Mailbox) {
    mailbox.deliver(0, Answer::plain(ReplyKind::Json, "1".to_owned()));
    mailbox.wake();
  }

  /// A run in a chain of round trips whose answers are written from the
  /// CPU its thread is on moves its thread off it, once the chain is long
  /// enough (`cpu_placement::CHAIN_OF_ROUND_TRIPS`).
  #[test]
  fn a_pump_in_a_chain_of_round_trips_leaves_the_cpu_its_answers_come_from() {
    if !spinning_helps() {
      eprintln!("one CPU: a pump never moves here");
      return;
    }
    std::thread::spawn(|| {
      let allowed = affinity();
      // On `first`, with every CPU it had to go to (a running thread is
      // moved when its CPU leaves its set, not when the set grows).
      let first = allowed[0];
      confine(&[first]);
      confine(&allowed);
      let mailbox = Mailbox::default();
      let answerer = first as u32;
      mailbox.open(Some(&Arc::new(ReplyChannel {
        take_replies: Box::new(|_: &mut Watching| {}),
        answerer_cpu: Box::new(move || Some(answerer)),
      })));
      let round_trip = || {
        deliver_one(&mailbox);
        let mut context = Context::from_waker(Waker::noop());
        assert!(matches!(pin!(mailbox.take()).poll(&mut context), Poll::Ready(replies) if replies.len() == 1));
      };
      for _ in 1..cpu_placement::CHAIN_OF_ROUND_TRIPS {
        round_trip();
      }
      assert_eq!(mailbox.moved_at.load(Ordering::Relaxed), 0, "not moved before the chain is long enough");
      round_trip();
      let moved_at = mailbox.moved_at.load(Ordering::Relaxed);
      assert_eq!(moved_at, cpu_placement::CHAIN_OF_ROUND_TRIPS + 1, "moved off the answerer's CPU");
    })
    .join()
    .expect("the test's thread");
  }

  /// A pump whose last wait was short spins for its next reply, reading the
  /// channel itself, and that spin is not charged to the run. The channel
  /// read here burns CPU, as a spin does while the reply crosses, then
  /// finds the reply. Whether a wait spins depends on how long the one
  /// before took (`SPIN_BEFORE_PARK`), which a loaded machine can stretch
  /// by descheduling this thread, so the test tries until a wait spun: the
  /// read ran, or the pump parked and is answered from here. (With one CPU
  /// a pump never spins, and there is nothing to test.)
  #[test]
  fn a_pump_spinning_for_its_reply_reads_the_channel_itself_and_is_not_charged() {
    if !spinning_helps() {
      eprintln!("one CPU: a pump never spins here");
      return;
    }
    let mailbox = Arc::new(Mailbox::default());
    let reads = Arc::new(AtomicUsize::new(0));
    let read_cost = Duration::from_millis(20);
    let channel = {
      let (mailbox, reads) = (Arc::downgrade(&mailbox), reads.clone());
      Arc::new(ReplyChannel {
        take_replies: Box::new(move |_: &mut Watching| {
          reads.fetch_add(1, Ordering::SeqCst);
          burn(read_cost);
          if let Some(mailbox) = mailbox.upgrade() {
            deliver_one(&mailbox);
          }
        }),
        answerer_cpu: Box::new(|| None),
      })
    };
    mailbox.open(Some(&channel));
    let run = Arc::new(RunBudget::new(
      Arc::new(RunControl::new(None)),
      Duration::from_secs(10),
      Duration::from_secs(60),
      Arc::new(NoAdmission),
    ));
    run.admit();
    let metering = run.meter_this_thread();
    let mut context = Context::from_waker(Waker::noop());
    for _attempt in 0..1000 {
      // A wait answered at once: the next one spins.
      deliver_one(&mailbox);
      assert!(matches!(pin!(mailbox.take()).poll(&mut context), Poll::Ready(replies) if replies.len() == 1));
      let (charged_before, reads_before) = (run.cpu_used(), reads.load(Ordering::SeqCst));
      let mut wait = pin!(mailbox.take());
      let replies = match wait.as_mut().poll(&mut context) {
        Poll::Ready(replies) => replies,
        Poll::Pending => {
          // Parked without a spin: answer it and try again.
          deliver_one(&mailbox);
          let Poll::Ready(replies) = wait.as_mut().poll(&mut context) else { panic!("a parked pump missed its reply") };
          assert_eq!(replies.len(), 1);
          continue;
        }
      };
      assert_eq!(replies.len(), 1);
      assert_eq!(reads.load(Ordering::SeqCst), reads_before + 1, "the spin read the channel once, and found its reply");
      let charged = run.cpu_used() - charged_before;
      assert!(charged < read_cost / 4, "the spin's {read_cost:?} of CPU was charged: {charged:?}");
      // The meter counts: the same CPU outside a wait is charged.
      let charged_before = run.cpu_used();
      burn(read_cost);
      assert!(run.cpu_used() - charged_before >= read_cost, "work outside a wait was not charged");
      drop(metering);
      return;
    }
    panic!("no wait spun in 1000 attempts");
  }
}
