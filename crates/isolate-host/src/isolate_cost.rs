//! What one isolate costs, and how much of it is ours: a measurement, run
//! by `npm run bench:isolate` (an ignored test, since it asserts nothing).
//!
//! Three kinds of isolate, each made in a process where an isolate of the
//! same kind stays alive on another thread (as the runtime's reserve does,
//! so V8's read-only heap is set up once, not per isolate):
//! - a bare V8 isolate with one context (V8's own startup snapshot);
//! - a deno_core `JsRuntime` from a snapshot of deno_core alone (its own
//!   JS and ops, no extension);
//! - the sandbox's prepared isolate (`PreparedIsolate::new`: our snapshot,
//!   sealed).
//!
//! For each: the malloc'd bytes one more isolate holds, its V8 heap by
//! space, and the wall time to make and to drop one (a thread alone, fresh
//! isolates one after the other). A waiting run's memory is about the
//! prepared isolate's plus its thread's stack and what its program
//! allocates; the first two rows are the part of that no sandbox built on
//! V8 and deno_core can avoid.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use deno_core::{v8, JsRuntime, RuntimeOptions};

use crate::config::{NodeFacts, RuntimeConfig};
use crate::isolate::PreparedIsolate;
use crate::platform;

/// Isolates made one after the other for the timing.
const TIMED: u32 = 300;

#[derive(Clone, Copy)]
enum Kind {
  BareV8,
  DenoCoreOnly(&'static [u8]),
  Sandbox,
}

/// An isolate of some kind, held until dropped.
enum Made {
  /// The context is held only to keep it alive; it comes first because
  /// fields drop in order and its handle must go before its isolate.
  Bare(#[allow(dead_code)] v8::Global<v8::Context>, v8::OwnedIsolate),
  Runtime(Box<JsRuntime>),
  Prepared(Box<PreparedIsolate>),
}

impl Made {
  fn isolate(&mut self) -> &mut v8::Isolate {
    match self {
      Made::Bare(_, isolate) => isolate,
      Made::Runtime(runtime) => runtime.v8_isolate(),
      Made::Prepared(prepared) => prepared.runtime.v8_isolate(),
    }
  }
}

fn config() -> RuntimeConfig {
  RuntimeConfig {
    max_old_generation_size_mb: 512.0,
    max_external_memory_mb: 512.0,
    max_concurrent_runs: 1,
    max_queued_runs: 1,
    prepared_isolates: 1,
    node: NodeFacts { hardware_concurrency: 2, ..RuntimeConfig::small().node },
    ..RuntimeConfig::small()
  }
}

fn make(kind: Kind) -> Made {
  match kind {
    Kind::BareV8 => {
      let mut isolate = v8::Isolate::new(v8::CreateParams::default());
      let context = {
        v8::scope!(let scope, &mut isolate);
        let context = v8::Context::new(scope, Default::default());
        v8::Global::new(scope, context)
      };
      Made::Bare(context, isolate)
    }
    Kind::DenoCoreOnly(snapshot) => {
      Made::Runtime(Box::new(JsRuntime::new(RuntimeOptions { startup_snapshot: Some(snapshot), ..Default::default() })))
    }
    Kind::Sandbox => Made::Prepared(Box::new(PreparedIsolate::new(&config()).expect("a prepared isolate"))),
  }
}

fn malloc_in_use() -> usize {
  // SAFETY: mallinfo2 only reads the allocator's counters (every arena's).
  unsafe { libc::mallinfo2() }.uordblks
}

struct Cost {
  malloc: usize,
  spaces: Vec<(String, usize)>,
  make: Duration,
  drop: Duration,
}

/// Measure one kind on a thread of its own, with an anchor isolate of the
/// same kind alive on another.
fn measure(kind: Kind) -> Cost {
  let (release, released) = mpsc::channel::<()>();
  let (ready, anchored) = mpsc::channel::<()>();
  let anchor = std::thread::spawn(move || {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a tokio runtime");
    let _entered = runtime.enter();
    let _anchor = make(kind);
    let _ = ready.send(());
    let _ = released.recv();
  });
  let _ = anchored.recv();
  let cost = std::thread::spawn(move || {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a tokio runtime");
    let _entered = runtime.enter();
    drop(make(kind));
    let before = malloc_in_use();
    let mut one = make(kind);
    let malloc = malloc_in_use().saturating_sub(before);
    let isolate = one.isolate();
    let spaces = (0..isolate.number_of_heap_spaces())
      .filter_map(|index| isolate.get_heap_space_statistics(index))
      .map(|space| (space.space_name().to_string_lossy().into_owned(), space.space_used_size()))
      .filter(|(_, used)| *used > 0)
      .collect();
    drop(one);
    let (mut making, mut dropping) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..TIMED {
      let start = Instant::now();
      let made = make(kind);
      making += start.elapsed();
      let start = Instant::now();
      drop(made);
      dropping += start.elapsed();
    }
    Cost { malloc, spaces, make: making / TIMED, drop: dropping / TIMED }
  })
  .join()
  .expect("the measuring thread");
  let _ = release.send(());
  anchor.join().expect("the anchor thread");
  cost
}

#[test]
#[ignore = "a measurement, not a test: npm run bench:isolate"]
fn what_an_isolate_costs() {
  platform::ensure_initialized().expect("V8 initialises");
  let deno_core_only = deno_core::snapshot::create_snapshot(
    deno_core::snapshot::CreateSnapshotOptions {
      cargo_manifest_dir: env!("CARGO_MANIFEST_DIR"),
      startup_snapshot: None,
      skip_op_registration: false,
      extensions: vec![],
      extension_transpiler: None,
      with_runtime_cb: None,
    },
    None,
  )
  .expect("a deno_core-only snapshot");
  let deno_core_only: &'static [u8] = Box::leak(deno_core_only.output);
  let kinds = [
    ("bare V8 isolate + context", Kind::BareV8),
    ("deno_core alone (its snapshot)", Kind::DenoCoreOnly(deno_core_only)),
    ("sandbox (prepared isolate)", Kind::Sandbox),
  ];
  println!("| isolate | malloc | V8 heap used | of which old / trusted / new | make | drop |");
  println!("|---|---|---|---|---|---|");
  for (name, kind) in kinds {
    let cost = measure(kind);
    let used = |name: &str| cost.spaces.iter().find(|(space, _)| space == name).map_or(0, |(_, used)| *used);
    let heap: usize = cost.spaces.iter().map(|(_, used)| used).sum();
    println!(
      "| {name} | {} KiB | {} KiB | {} / {} / {} KiB | {:.2} ms | {:.2} ms |",
      cost.malloc / 1024,
      heap / 1024,
      used("old_space") / 1024,
      used("trusted_space") / 1024,
      used("new_space") / 1024,
      cost.make.as_secs_f64() * 1000.0,
      cost.drop.as_secs_f64() * 1000.0,
    );
  }
}
