//! A run's record in the supervisor, from `run()` until its result is
//! delivered, and what becomes of it: its fate when its host ends, how it
//! finishes, a divergence from its history, a reply on its way to its host.

use std::time::Instant;

use dsh_protocol::config::RuntimeConfig;
use dsh_protocol::failure::{failure, Divergence, HostLoss, StopReason, MAX_HOSTS_LOST};
use dsh_protocol::frame::{Answer, Reply, RunSeed, ToHost};
use dsh_protocol::history::RunHistory;
use dsh_protocol::ledger::{Completion, FailureKind, OutputLedger};

use crate::run_report::RunCost;

use super::host_life::Host;
use super::{Deliver, State};

pub(super) struct RunRecord {
  pub(super) deliver: Deliver,
  /// The harness's replay of the run's ledger, fed the streamed entries.
  pub(super) ledger: OutputLedger,
  /// The generation of the host it is placed on, if any.
  pub(super) host: Option<u64>,
  pub(super) started: bool,
  /// The abort sent to its host, if any: should that host die before the
  /// run reported its end, the run ends with it instead of going on.
  pub(super) aborted: Option<Vec<u16>>,
  /// Hosts that ended while it executed on them (it may have ended them).
  pub(super) hosts_lost: u32,
  /// Hosts that ended while it was placed on them and had not started:
  /// it did not run there, but a program that ends its host before it
  /// starts (while its isolate is made ready for it) must not be placed
  /// for ever.
  pub(super) placements_lost: u32,
  /// Everything that entered it from outside, to execute it again.
  pub(super) history: RunHistory,
  /// What it has cost so far (its report).
  pub(super) cost: RunCost,
  /// Its history's bytes as counted in [`State::history_bytes`].
  pub(super) history_counted: u64,
  /// The cap its history passed, when it was given up.
  pub(super) history_over: Option<HostLoss>,
  /// How the host whose end began its current execution ended.
  pub(super) lost_host: Option<String>,
  /// Its current execution is not the run its history records: it is
  /// being stopped on its host, and settles with this.
  pub(super) diverged: Option<Divergence>,
  /// Its host named it as stopped and computing past what a stop may take
  /// (`FromHost::Unstoppable`), with the failure its stop makes: the host
  /// is ending because of it, and it settles with this.
  pub(super) unstoppable: Option<(FailureKind, Vec<u16>)>,
  /// Its next placement is in a host of its own: it may end its host
  /// (see [`MAX_HOSTS_OF_ONE_RUN`]).
  pub(super) alone: bool,
  /// Seeds its random numbers in every execution (`RunSeed`).
  pub(super) seed: RunSeed,
  /// Kept for as long as the run may be executed again.
  pub(super) program: String,
  pub(super) bindings_json: String,
  pub(super) deadline: Instant,
}

impl RunRecord {
  /// A run just submitted: on no host yet, with an empty history.
  pub(super) fn new(
    deliver: Deliver,
    max_output_bytes: u64,
    max_calls: u32,
    seed: RunSeed,
    program: String,
    bindings_json: String,
    deadline: Instant,
  ) -> RunRecord {
    RunRecord {
      deliver,
      ledger: OutputLedger::new(max_output_bytes),
      host: None,
      started: false,
      aborted: None,
      hosts_lost: 0,
      placements_lost: 0,
      history: RunHistory::new(max_calls),
      cost: RunCost::default(),
      history_counted: 0,
      history_over: None,
      lost_host: None,
      diverged: None,
      unstoppable: None,
      alone: false,
      seed,
      program,
      bindings_json,
      deadline,
    }
  }
}

/// What becomes of a run whose host ended.
#[derive(Debug, PartialEq)]
pub(super) enum Fate {
  Disposed,
  /// Its caller aborted it (the host may not have stopped it yet).
  Aborted(Vec<u16>),
  /// Its host named it as the stopped run it could not free, and ended:
  /// it fails as its stop makes it fail, and it is the culprit.
  Unstoppable(FailureKind, Vec<u16>),
  /// It had not started: it is placed again, in a host of its own or not.
  PlacedAgain {
    alone: bool,
  },
  /// It is executed again from its history.
  Reexecuted {
    alone: bool,
  },
  /// It fails, with the host's end (or the end its re-execution followed).
  Lost(String, HostLoss),
}

impl Fate {
  /// Whether the run is shown to end hosts: its host named it as the run
  /// it could not stop, or it ended the host it ran alone in. (A run that
  /// was computing beside others may have ended its host: it is executed
  /// again alone to find out.)
  pub(super) fn ends_hosts(&self) -> bool {
    matches!(self, Fate::Unstoppable(..) | Fate::Lost(_, HostLoss::Running))
  }
}

/// The one decision of what becomes of a run whose host ended as
/// `described` (`alone_host`: a host of one run). A run waiting on a tool
/// did not end the host; a run that was computing may have: it is
/// executed again alone, and if it ends that host too it is the culprit.
/// Two counts, each bounded by [`MAX_HOSTS_LOST`]: hosts that ended while
/// the run executed there, and hosts that ended before it started there
/// (several hosts killed at once end runs just placed on them, which did
/// nothing). A run on its second host of either kind goes alone; on its
/// third, it fails.
pub(super) fn fate(record: &mut RunRecord, disposing: bool, alone_host: bool, described: &str) -> Fate {
  record.host = None;
  let started = std::mem::replace(&mut record.started, false);
  if started {
    record.hosts_lost += 1;
  } else {
    record.placements_lost += 1;
  }
  let lost = record.hosts_lost.max(record.placements_lost);
  let alone = record.alone || lost + 1 >= MAX_HOSTS_LOST;
  if disposing {
    return Fate::Disposed;
  }
  if let Some(reason) = record.aborted.take() {
    return Fate::Aborted(reason);
  }
  // A divergence wins over what its host said of it, as it wins over a
  // completion: the host stopped it for diverging.
  if let Some(divergence) = record.diverged {
    let end = record.lost_host.clone().unwrap_or_else(|| described.to_owned());
    return Fate::Lost(end, HostLoss::Diverged(divergence));
  }
  if let Some((kind, message)) = record.unstoppable.take() {
    return Fate::Unstoppable(kind, message);
  }
  if lost >= MAX_HOSTS_LOST {
    return Fate::Lost(described.to_owned(), HostLoss::TooManyHosts);
  }
  if !started {
    return Fate::PlacedAgain { alone };
  }
  let waiting = record.history.waiting_on_a_tool();
  if !waiting && alone_host {
    return Fate::Lost(described.to_owned(), HostLoss::Running);
  }
  if let Some(over) = record.history_over.clone() {
    return Fate::Lost(described.to_owned(), over);
  }
  Fate::Reexecuted { alone: alone || !waiting }
}

/// How a run is finished by the harness.
pub(super) enum FinishWith {
  /// As its host reported (replayed through the harness's ledger).
  Completion(Completion),
  /// With a failure decided here.
  Failure(FailureKind, Vec<u16>),
}

/// A failure decided here, with its text from `dsh_protocol::failure`.
pub(super) fn stopped(stop: &StopReason, config: &RuntimeConfig) -> FinishWith {
  let (kind, message) = failure(stop, config);
  FinishWith::Failure(kind, message)
}

/// Stop a run whose current execution is not the run its history records:
/// its host stops it (as an abort would), and its end settles as the
/// divergence. Its calls and log entries from here on are not taken.
pub(super) fn diverge(record: &mut RunRecord, run_id: u32, divergence: Divergence, host: &Host) {
  if record.diverged.is_none() {
    record.diverged = Some(divergence);
    host.send(&ToHost::Abort { run_id, reason: Vec::new() });
  }
}

/// A reply on its way to a host: held in its run's history (encoded from
/// there), or passed on by a run whose history was given up.
pub(super) enum Outgoing {
  Held { run_id: u32, call_id: u32 },
  Passed(Reply),
}

impl Outgoing {
  pub(super) fn answer<'a>(&'a self, state: &'a State) -> Option<(u32, u32, &'a Answer)> {
    match self {
      Outgoing::Held { run_id, call_id } => {
        let answer = state.runs.get(run_id)?.history.held(*call_id)?;
        Some((*run_id, *call_id, answer))
      }
      Outgoing::Passed(reply) => Some((reply.run_id, reply.call_id, &reply.answer)),
    }
  }
}
