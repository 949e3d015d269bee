//! The supervisor thread and what operators see: the heartbeat (a host
//! that stops answering is killed and replaced), replacements started,
//! queued runs timed out at their wall ceiling, freed blocks let go of
//! (`large_block`), and `stats()`.

use std::sync::Weak;
use std::time::{Duration, Instant};

use dsh_protocol::failure::StopReason;
use dsh_protocol::frame::{HostStats, ToHost};
use dsh_protocol::large_block;
use dsh_protocol::ledger::Outcomes;
use dsh_protocol::lock::lock;
use dsh_protocol::protections::Protections;

use crate::host_process::HostEnd;

use super::host_life::{restart_delay, HOST_START_TIMEOUT};
use super::run_record::stopped;
use super::Supervisor;

/// How long `stats()` waits for the hosts' answers before it reports what
/// a silent host said last.
pub(super) const STATS_WAIT: Duration = Duration::from_millis(250);

/// What `stats()` reports, as the supervisor knows it (the napi edge,
/// `lib.rs`, makes `NativeStats` of it, where each figure is documented):
/// the hosts' figures added up, and the harness's own.
pub struct RuntimeStats {
  pub host: HostStats,
  pub outcomes: Outcomes,
  pub refused: u64,
  pub hosts: u32,
  pub host_restarts: u64,
  pub runs_lost_to_host_exits: u64,
  pub runs_reexecuted: u64,
  pub reexecutions_diverged: u64,
  pub history_bytes: u64,
  pub hosts_of_one_run: u32,
  pub quarantined_programs: usize,
  pub last_host_exit: Option<String>,
  pub host_pids: Vec<u32>,
  /// What every host alive has in effect.
  pub sandbox: Protections,
  pub host_recycles: u64,
}

impl Supervisor {
  /// The hosts' and the harness's counts, as fresh as the hosts can answer
  /// within [`STATS_WAIT`] (a host that does not answer contributes what it
  /// said last).
  pub fn stats(&self) -> RuntimeStats {
    let mut state = lock(&self.state);
    let seq = state.stats_requests.ask(Instant::now(), self.settings.unresponsive_after);
    let asked: Vec<u64> = state
      .slots
      .iter()
      .filter(|slot| slot.ready)
      .filter_map(|slot| slot.host.as_ref())
      .map(|host| {
        host.send(&ToHost::StatsRequest { seq });
        host.generation
      })
      .collect();
    let deadline = Instant::now() + STATS_WAIT;
    loop {
      let waiting = state.slots.iter().any(|slot| {
        slot.host.as_ref().is_some_and(|host| asked.contains(&host.generation)) && slot.stats_answered < seq
      });
      let now = Instant::now();
      if !waiting || now >= deadline {
        break;
      }
      state = self.wait(state, deadline - now);
    }
    let mut host = HostStats::default();
    let (mut alive, mut alone) = (0, 0);
    let mut pids = Vec::new();
    let mut sandbox = Protections::all();
    for (index, slot) in state.slots.iter().enumerate() {
      let Some(live) = &slot.host else { continue };
      pids.push(live.pid);
      if !slot.ready {
        continue;
      }
      if self.settings.is_alone(index) {
        alone += 1;
      } else {
        alive += 1;
      }
      host.add(&slot.stats);
      sandbox = sandbox.intersection(slot.protections);
    }
    if alive == 0 {
      sandbox = state.protections.unwrap_or_default();
    }
    // The live hosts' figures added up, with the totals of the hosts that
    // ended, and the runs waiting in the harness's queue (for admission or
    // a host) in `queued`.
    host.add(&state.ended_hosts);
    let queued = state.pending.len() + state.pending_alone.len();
    host.queued = host.queued.saturating_add(u32::try_from(queued).unwrap_or(u32::MAX));
    RuntimeStats {
      host,
      outcomes: state.outcomes,
      refused: state.refused,
      hosts: alive,
      host_restarts: state.host_starts.saturating_sub(self.settings.shared_hosts() as u64),
      runs_lost_to_host_exits: state.runs_lost,
      runs_reexecuted: state.runs_reexecuted,
      reexecutions_diverged: state.reexecutions_diverged,
      history_bytes: state.history_bytes,
      hosts_of_one_run: alone,
      quarantined_programs: state.quarantine.len(Instant::now()),
      last_host_exit: state.last_host_end.clone(),
      host_pids: pids,
      sandbox,
      host_recycles: state.hosts_recycled,
    }
  }
}

/// A process's resident memory, from /proc/<pid>/statm (in pages).
pub(super) fn resident_bytes(pid: u32) -> Option<u64> {
  let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
  let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
  // SAFETY: sysconf has no preconditions.
  let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
  Some(pages.saturating_mul(u64::try_from(page).unwrap_or(4096)))
}

/// The heartbeat in use: often enough that a silent host is found within
/// `unresponsive_after`, at most once a second.
pub(super) fn heartbeat(unresponsive_after: Duration) -> Duration {
  (unresponsive_after / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// The supervisor thread (see the module doc).
pub(super) fn supervise(supervisor: &Weak<Supervisor>) {
  // Replies' texts are blocks of their own, each kept until its run ends:
  // the next run's reuse them (see `large_block`), and each beat lets go
  // of those unused for a while; once the runtime is gone, of all of them.
  large_block::keep_freed_blocks();
  beat_until_finished(supervisor);
  large_block::release_unused_blocks(Instant::now() + large_block::KEPT_FOR);
}

/// The supervisor thread's loop, until its runtime is finished or gone.
fn beat_until_finished(supervisor: &Weak<Supervisor>) {
  let mut next_beat = Instant::now();
  loop {
    let Some(supervisor) = supervisor.upgrade() else { return };
    let beat = heartbeat(supervisor.settings.unresponsive_after);
    // Before the state's lock: unmapping blocks need not hold it up.
    let now = Instant::now();
    if now >= next_beat {
      large_block::release_unused_blocks(now);
    }
    let mut state = lock(&supervisor.state);
    if state.finished {
      return;
    }
    let now = Instant::now();
    let mut wake = now + beat;
    let beating = now >= next_beat;
    if beating {
      state.stats_requests.ask(now, supervisor.settings.unresponsive_after);
      next_beat = now + beat;
    }
    let seq = state.stats_requests.latest();
    let mut deliveries = Vec::new();
    for index in 0..state.slots.len() {
      if state.disposing {
        break;
      }
      let slot = &state.slots[index];
      match (&slot.host, slot.restart_at) {
        (Some(host), _) => {
          let silent = slot.last_heard.map_or(Duration::ZERO, |heard| now.saturating_duration_since(heard));
          // A host still starting has as long as the first hosts have: a
          // replacement started on a loaded machine is not silent, only slow.
          let allowed = if slot.ready {
            supervisor.settings.unresponsive_after
          } else {
            supervisor.settings.unresponsive_after.max(HOST_START_TIMEOUT)
          };
          if silent >= allowed {
            host.kill(HostEnd::Unresponsive { silent_ms: silent.as_millis() as u64 });
          } else if beating && slot.ready {
            host.send(&ToHost::StatsRequest { seq });
            supervisor.recycle_if_over(&mut state, index);
          }
        }
        // Hosts of one run start when a run waits for one (below).
        (None, _) if supervisor.settings.is_alone(index) => {}
        (None, Some(at)) if at > now => wake = wake.min(at),
        (None, _) => {
          if let Err(why) = supervisor.start_host(&mut state, index) {
            state.start_failures += 1;
            state.quick_deaths += 1;
            let delay = restart_delay(state.quick_deaths).max(Duration::from_millis(50));
            state.slots[index].restart_at = Some(now + delay);
            deliveries.extend(supervisor.fail_queue_if_no_host_starts(&mut state, &why));
          }
        }
      }
    }
    let (restart_at, failed) = supervisor.start_hosts_of_one_run(&mut state, now);
    if let Some(at) = restart_at {
      wake = wake.min(at);
    }
    deliveries.extend(failed);
    wake = wake.min(next_beat);
    // Runs waiting in the queues still meet their wall ceiling.
    let overdue: Vec<u32> = state
      .pending
      .iter()
      .chain(&state.pending_alone)
      .copied()
      .filter(|run_id| state.runs.get(run_id).is_some_and(|record| record.deadline <= now))
      .collect();
    if !overdue.is_empty() {
      state.pending.retain(|run_id| !overdue.contains(run_id));
      state.pending_alone.retain(|run_id| !overdue.contains(run_id));
      for run_id in overdue {
        let ceiling = stopped(&StopReason::WallCeiling, &supervisor.settings.config);
        deliveries.extend(supervisor.finish(&mut state, run_id, ceiling));
      }
    }
    let waiting = state.pending.iter().chain(&state.pending_alone);
    if let Some(first) = waiting.filter_map(|run_id| state.runs.get(run_id)).map(|r| r.deadline).min() {
      wake = wake.min(first);
    }
    if !deliveries.is_empty() {
      drop(state);
      for delivery in deliveries {
        delivery.deliver();
      }
      continue;
    }
    let timeout = wake.saturating_duration_since(Instant::now());
    drop(supervisor.wait(state, timeout));
  }
}
