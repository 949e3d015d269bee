//! Placement: admitting queued runs (at most `maxConcurrentRuns` in
//! flight), placing each on the ready host with the fewest runs, and the
//! hosts of one run that runs which may end their host wait for.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_protocol::frame::{encode_submit, Submission};

use super::host_life::{restart_delay, Slot};
use super::{Delivery, State, Supervisor, MAX_HOSTS_OF_ONE_RUN};

impl Supervisor {
  /// Place queued runs on hosts while fewer than `maxConcurrentRuns` are
  /// placed and a host is ready; runs that go alone, each on a ready host
  /// of one run that holds none (the supervisor thread starts those hosts:
  /// [`Supervisor::start_hosts_of_one_run`]).
  pub(super) fn admit(&self, state: &mut State) {
    let shared = self.settings.shared_hosts();
    let max_concurrent_runs = self.settings.config.max_concurrent_runs;
    while let Some(&first) = state.pending_alone.front() {
      // A run new to the runtime (a quarantined program submitted again)
      // waits for room as every new run does; one executed again, or
      // placed again after a host ended, was admitted already.
      let admitted_before = state.runs.get(&first).is_some_and(|record| record.hosts_lost + record.placements_lost > 0);
      if !admitted_before && state.in_flight() >= max_concurrent_runs {
        break;
      }
      let free = (shared..state.slots.len()).find(|&i| {
        let slot = &state.slots[i];
        slot.takes_runs() && slot.placed == 0 && !slot.taken
      });
      let Some(slot) = free else { break };
      let Some(run_id) = state.pending_alone.pop_front() else { break };
      state.slots[slot].taken = true;
      self.place(state, run_id, slot);
    }
    if !state.pending_alone.is_empty() {
      self.changed.notify_all();
    }
    while !state.pending.is_empty() && state.in_flight() < self.settings.config.max_concurrent_runs {
      let Some(slot) = state.least_loaded(shared) else { return };
      let Some(run_id) = state.pending.pop_front() else { return };
      self.place(state, run_id, slot);
    }
  }

  /// Start hosts of one run for the runs waiting for one, up to
  /// [`MAX_HOSTS_OF_ONE_RUN`] alive (the supervisor thread, which may
  /// start hosts). Their deaths back off on their own count.
  pub(super) fn start_hosts_of_one_run(
    self: &Arc<Self>,
    state: &mut State,
    now: Instant,
  ) -> (Option<Instant>, Vec<Delivery>) {
    let shared = self.settings.shared_hosts();
    loop {
      let alive = (shared..state.slots.len()).filter(|&i| state.slots[i].host.is_some()).count();
      let idle = (shared..state.slots.len())
        .filter(|&i| state.slots[i].host.is_some() && state.slots[i].placed == 0 && !state.slots[i].taken)
        .count();
      if state.disposing || state.pending_alone.len() <= idle || alive >= MAX_HOSTS_OF_ONE_RUN {
        return (None, Vec::new());
      }
      let empty = (shared..state.slots.len()).find(|&i| state.slots[i].host.is_none());
      let slot = match empty {
        Some(slot) => slot,
        None => {
          state.slots.push(Slot::default());
          state.slots.len() - 1
        }
      };
      if let Some(at) = state.slots[slot].restart_at.filter(|at| *at > now) {
        return (Some(at), Vec::new());
      }
      if let Err(why) = self.start_host(state, slot) {
        state.start_failures_alone += 1;
        state.quick_deaths_alone += 1;
        let delay = restart_delay(state.quick_deaths_alone).max(Duration::from_millis(50));
        state.slots[slot].restart_at = Some(now + delay);
        return (Some(now + delay), self.fail_alone_if_no_host_starts(state, &why));
      }
    }
  }

  /// Send a run to the host of `slot`.
  pub(super) fn place(&self, state: &mut State, run_id: u32, slot: usize) {
    let Some(host) = state.slots[slot].host.clone() else {
      if self.settings.is_alone(slot) {
        state.pending_alone.push_front(run_id);
      } else {
        state.pending.push_front(run_id);
      }
      return;
    };
    let Some(record) = state.runs.get_mut(&run_id) else { return };
    record.host = Some(host.generation);
    let wall_ms = record.deadline.saturating_duration_since(Instant::now()).as_secs_f64() * 1000.0;
    let readings = record.history.recorded_readings();
    let mut frame =
      Vec::with_capacity(64 + record.program.len() + record.bindings_json.len() + readings.bytes() as usize);
    encode_submit(
      &mut frame,
      &Submission {
        run_id,
        wall_ms,
        seed: &record.seed,
        readings,
        history_end: record.history.end(&record.ledger),
        program: &record.program,
        bindings_json: &record.bindings_json,
      },
    );
    state.slots[slot].placed += 1;
    host.link.send(frame);
  }
}
