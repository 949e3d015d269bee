//! The isolate pool: a fixed set of OS threads, each with its own
//! current-thread tokio runtime, each running one program at a time in a
//! fresh isolate it prepared while idle. Runs beyond the pool wait in a
//! bounded FIFO queue.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::bridge::Bridge;
use crate::config::RuntimeConfig;
use crate::control::lock;
use crate::isolate::PreparedIsolate;
use crate::ledger::{FailureKind, Output, OutputLedger};
use crate::run::{execute, RunContext, RunJob};
use crate::watchdog::{self, CpuClock, Watchdog};

/// A job plus what to do with its output (called on the pool thread).
pub struct Submission {
  pub job: RunJob,
  pub deliver: Box<dyn FnOnce(Output) + Send>,
}

#[derive(Default)]
struct Queue {
  waiting: VecDeque<Submission>,
  shutdown: bool,
}

struct Shared {
  queue: Mutex<Queue>,
  available: Condvar,
  config: RuntimeConfig,
  bridge: Arc<Bridge>,
  watchdog: Watchdog,
}

/// The pool threads and their queue.
pub struct Pool {
  shared: Arc<Shared>,
  threads: Mutex<Vec<JoinHandle<()>>>,
}

/// A pool thread's stack: well above V8's own stack limit (~1 MiB), so deep
/// recursion ends in a RangeError, never in a guard-page fault.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

impl Pool {
  pub fn start(config: RuntimeConfig, bridge: Arc<Bridge>) -> std::io::Result<Pool> {
    let shared = Arc::new(Shared {
      queue: Mutex::default(),
      available: Condvar::new(),
      watchdog: Watchdog::start()?,
      config,
      bridge,
    });
    let mut threads = Vec::new();
    for index in 0..shared.config.pool_size {
      let thread_shared = shared.clone();
      let thread = std::thread::Builder::new()
        .name(format!("dsh-v8-{index}"))
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || thread_main(&thread_shared));
      match thread {
        Ok(thread) => threads.push(thread),
        Err(error) => {
          let pool = Pool { shared: shared.clone(), threads: Mutex::new(threads) };
          pool.shutdown();
          return Err(error);
        }
      }
    }
    Ok(Pool { shared, threads: Mutex::new(threads) })
  }

  /// Queue a run. Refused (handed back) when the queue is full or the pool
  /// is shutting down.
  pub fn submit(&self, submission: Submission) -> Result<(), Submission> {
    let mut queue = lock(&self.shared.queue);
    if queue.shutdown || queue.waiting.len() >= self.shared.config.max_queued_runs {
      return Err(submission);
    }
    let ceiling = std::time::Duration::from_secs_f64(self.shared.config.max_wall_ms / 1000.0);
    self.shared.watchdog.watch(submission.job.control.clone(), ceiling);
    queue.waiting.push_back(submission);
    drop(queue);
    self.shared.available.notify_one();
    Ok(())
  }

  /// Stop taking runs, let the threads finish what is queued (stopped runs
  /// finish at once), and join every thread.
  pub fn shutdown(&self) {
    lock(&self.shared.queue).shutdown = true;
    self.shared.available.notify_all();
    let threads = std::mem::take(&mut *lock(&self.threads));
    for thread in threads {
      let _ = thread.join();
    }
    self.shared.watchdog.shutdown();
  }
}

fn next_submission(shared: &Shared) -> Option<Submission> {
  let mut queue = lock(&shared.queue);
  loop {
    if let Some(submission) = queue.waiting.pop_front() {
      return Some(submission);
    }
    if queue.shutdown {
      return None;
    }
    queue = match shared.available.wait(queue) {
      Ok(guard) => guard,
      Err(poisoned) => poisoned.into_inner(),
    };
  }
}

fn thread_main(shared: &Shared) {
  let runtime = match tokio::runtime::Builder::new_current_thread()
    .enable_time()
    .on_thread_park(watchdog::before_park)
    .on_thread_unpark(watchdog::after_unpark)
    .build()
  {
    Ok(runtime) => runtime,
    Err(error) => return fail_every_run(shared, &format!("the pool thread could not start: {error}")),
  };
  let clock = CpuClock::current_thread();
  let context = RunContext { config: &shared.config, bridge: &shared.bridge, watchdog: &shared.watchdog, clock };
  loop {
    // Prepare the next isolate before waiting: creation is off the run's path.
    let prepared = {
      let _entered = runtime.enter();
      PreparedIsolate::new(&shared.config)
    };
    let Some(submission) = next_submission(shared) else {
      let _entered = runtime.enter();
      drop(prepared);
      return;
    };
    let (output, spent) = match prepared {
      Ok(isolate) => {
        let (output, spent) = runtime.block_on(execute(isolate, &submission.job, &context));
        (output, Some(spent))
      }
      Err(message) => (substrate_failure(&shared.config, &message), None),
    };
    shared.watchdog.forget(&submission.job.control);
    (submission.deliver)(output);
    // Delivery just woke Node's main thread. The scheduler often queues it
    // on this CPU (wake-affine), behind this thread, which is about to spend
    // ~2 ms disposing of the spent isolate and preparing the next one: the
    // host would see the result only then. Yield once so it runs first
    // (measured, 20 ms idle between runs: p50 2.9 -> 0.7 ms).
    std::thread::yield_now();
    let _entered = runtime.enter();
    drop(spent);
  }
}

fn fail_every_run(shared: &Shared, message: &str) {
  while let Some(submission) = next_submission(shared) {
    (submission.deliver)(substrate_failure(&shared.config, message));
  }
}

/// The output of a run whose substrate (thread runtime or isolate) could
/// not be made: `worker-exit` with `message`, through the ledger.
fn substrate_failure(config: &RuntimeConfig, message: &str) -> Output {
  OutputLedger::new(config.max_output_bytes).finish_failure(FailureKind::WorkerExit, message.encode_utf16().collect())
}
