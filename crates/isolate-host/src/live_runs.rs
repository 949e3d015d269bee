//! The live runs of a host: one record per run, from the moment the
//! scheduler takes it until its output exists, in one table that every
//! part reaches by run id or by walking it.
//!
//! A record ([`LiveRun`]) holds what the parts need of a run: its budget
//! (with its stop switch), its mailbox for host replies, and whether the
//! watchdog is done with it. Who reads it:
//! - the scheduler ([`crate::scheduler`]) admits by the budgets' phases and
//!   reports stats from them;
//! - the watchdog ([`crate::watchdog`]) stops the runs past their wall
//!   ceiling or CPU budget;
//! - the bridge ([`crate::bridge`]) routes each host reply to its run's
//!   mailbox, and counts the runs waiting on the host;
//! - the channel (`main.rs`) stops a run on `Abort`, and every run on
//!   `Shutdown`.
//!
//! Only [`LiveRuns::register`] inserts a record, and it hands back the one
//! [`RunRegistration`], whose drop removes it: the scheduler holds the
//! registration with the run and drops it when it finishes the run (before
//! its output is delivered), or when it refuses or drops the run, so a
//! record is removed exactly once on every path.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::budget::RunBudget;
use crate::control::RunControl;
use crate::lock::lock;
use crate::mailbox::Mailbox;

/// One live run: what the host's parts need of it.
pub struct LiveRun {
  run_id: u32,
  budget: Arc<RunBudget>,
  mailbox: Arc<Mailbox>,
  /// The watchdog stopped the run (or found it settled past a budget):
  /// it looks at it no more.
  unwatched: AtomicBool,
  /// The CPU the run had used when the watchdog first saw it stopped.
  cpu_at_stop: OnceLock<Duration>,
}

impl LiveRun {
  pub fn run_id(&self) -> u32 {
    self.run_id
  }

  pub fn budget(&self) -> &Arc<RunBudget> {
    &self.budget
  }

  /// The run's stop switch.
  pub fn control(&self) -> &Arc<RunControl> {
    self.budget.control()
  }

  /// Where the host's replies to the run's calls go.
  pub fn mailbox(&self) -> &Arc<Mailbox> {
    &self.mailbox
  }

  /// Whether the watchdog still watches the run.
  pub fn watched(&self) -> bool {
    !self.unwatched.load(Ordering::Acquire)
  }

  /// The CPU the run had used when the watchdog first saw it stopped:
  /// `now`, the first time this is asked.
  pub fn cpu_at_stop(&self, now: Duration) -> Duration {
    *self.cpu_at_stop.get_or_init(|| now)
  }

  /// The watchdog is done with the run (it stopped it, or the run settled
  /// as a budget ran out: the stop changed nothing, and the run is ending).
  pub fn unwatch(&self) {
    self.unwatched.store(true, Ordering::Release);
  }
}

/// The table of a host's live runs, by run id.
#[derive(Default)]
pub struct LiveRuns {
  runs: Mutex<HashMap<u32, Arc<LiveRun>>>,
}

impl LiveRuns {
  /// Record a run the scheduler takes now. The record lasts until the
  /// returned registration is dropped. A run id the harness reuses while
  /// its first run is still here replaces it in the table (the harness
  /// never does: its run ids are unique among its live runs); each
  /// registration removes only its own record.
  pub fn register(self: &Arc<Self>, run_id: u32, budget: Arc<RunBudget>) -> RunRegistration {
    let run = Arc::new(LiveRun {
      run_id,
      budget,
      mailbox: Arc::new(Mailbox::default()),
      unwatched: AtomicBool::new(false),
      cpu_at_stop: OnceLock::new(),
    });
    lock(&self.runs).insert(run_id, run.clone());
    RunRegistration { runs: self.clone(), run }
  }

  /// The live run `run_id`, if it is here.
  pub fn get(&self, run_id: u32) -> Option<Arc<LiveRun>> {
    lock(&self.runs).get(&run_id).cloned()
  }

  /// Every live run now, to act on outside the table's lock (stopping
  /// runs, reading their CPU clocks).
  pub fn snapshot(&self) -> Vec<Arc<LiveRun>> {
    lock(&self.runs).values().cloned().collect()
  }

  /// Look at every live run under the table's lock: `visit` must be cheap
  /// (atomic reads) and take no lock, as every part waits on this one.
  pub fn each(&self, mut visit: impl FnMut(&LiveRun)) {
    for run in lock(&self.runs).values() {
      visit(run);
    }
  }

  /// Visit each of `items` with the live run its run id names, if any,
  /// under one lock of the table (a batch of replies). The same rule as
  /// [`LiveRuns::each`]: `visit` is cheap, and takes no lock but a
  /// mailbox's.
  pub fn route<T>(&self, items: impl Iterator<Item = (u32, T)>, mut visit: impl FnMut(Option<&Arc<LiveRun>>, T)) {
    let runs = lock(&self.runs);
    for (run_id, item) in items {
      visit(runs.get(&run_id), item);
    }
  }

  fn remove(&self, run: &Arc<LiveRun>) {
    let mut runs = lock(&self.runs);
    if runs.get(&run.run_id).is_some_and(|current| Arc::ptr_eq(current, run)) {
      runs.remove(&run.run_id);
    }
  }
}

/// A run's place in [`LiveRuns`]; dropping it removes the run's record.
pub struct RunRegistration {
  runs: Arc<LiveRuns>,
  run: Arc<LiveRun>,
}

impl RunRegistration {
  pub fn run(&self) -> &Arc<LiveRun> {
    &self.run
  }
}

impl Drop for RunRegistration {
  fn drop(&mut self) {
    self.runs.remove(&self.run);
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::budget::PhaseObserver;
  use dsh_protocol::frame::{Answer, ReplyKind};
  use std::time::Duration;

  struct Unobserved;

  impl PhaseObserver for Unobserved {
    fn started_computing(&self) {}
    fn stopped_computing(&self) {}
  }

  fn budget() -> Arc<RunBudget> {
    let control = Arc::new(RunControl::new(None));
    Arc::new(RunBudget::new(control, Duration::from_secs(1), Duration::from_secs(60), Arc::new(Unobserved)))
  }

  #[test]
  fn a_record_lasts_as_long_as_its_registration_and_no_longer() {
    let runs = Arc::new(LiveRuns::default());
    let first = runs.register(1, budget());
    let second = runs.register(2, budget());
    assert_eq!(runs.get(1).map(|run| run.run_id()), Some(1));
    assert_eq!(runs.snapshot().len(), 2);
    drop(first);
    assert!(runs.get(1).is_none());
    assert_eq!(runs.snapshot().len(), 1);
    drop(second);
    assert!(runs.snapshot().is_empty());
  }

  #[test]
  fn replies_reach_a_run_only_while_it_executes() {
    let runs = Arc::new(LiveRuns::default());
    let bridge = crate::bridge::Bridge::new(runs.clone());
    let _registration = runs.register(1, budget());
    let reply = |run_id: u32, call_id: u32| (run_id, call_id, Answer::plain(ReplyKind::Json, call_id.to_string()));
    let pump = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let ids = |mailbox: &Mailbox| pump.block_on(mailbox.take()).into_iter().map(|(id, _)| id).collect::<Vec<_>>();
    // Queued: not executing yet.
    bridge.reply_all([reply(1, 10)].into_iter());
    let mailbox = bridge.open(1);
    // Run 2 is not live.
    bridge.reply_all([reply(1, 11), reply(2, 12), reply(1, 13)].into_iter());
    assert_eq!(ids(&mailbox), [11, 13]);
    bridge.close(1);
    bridge.reply_all([reply(1, 14)].into_iter());
    // Opened again only to look inside: what came while it was closed is not there.
    let mailbox = bridge.open(1);
    bridge.reply_all([reply(1, 15)].into_iter());
    assert_eq!(ids(&mailbox), [15]);
  }

  #[test]
  fn a_registration_removes_only_its_own_record() {
    let runs = Arc::new(LiveRuns::default());
    let replaced = runs.register(7, budget());
    let current = runs.register(7, budget());
    drop(replaced);
    let found = runs.get(7).expect("the current record stays");
    assert!(Arc::ptr_eq(&found, current.run()));
    drop(current);
    assert!(runs.get(7).is_none());
  }
}
