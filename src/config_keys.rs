//! Every config key, defined once: its name, type, default, bounds, the
//! one-line description and the long doc, in the table at the end of this
//! file. Everything else follows from the table: the napi struct
//! `NativeConfig` (whose field docs `npm run build:bindings` carries into
//! `index.d.ts` as `V8CodeRuntimeConfig`), the checks (`config.rs`), the
//! schemastery schema (`ts/config.ts` reads `configKeys()`) and the
//! README's table (`npm run config-table` writes it from `configKeys()`;
//! `__test__/docs.test.ts` fails when it is stale). Adding a key is one row
//! here plus its consumer (`config::check`, which maps the keys to what the
//! hosts and the supervisor take).

use dsh_protocol::config::{
  available_cores, concurrent_runs_ceiling, machine_max_map_count, machine_memory_mb, LINUX_DEFAULT_MAX_MAP_COUNT,
  MAPPINGS_PER_RUN, MIN_OUTPUT_BYTES,
};
use napi::bindgen_prelude::Either;
use napi_derive::napi;

/// The longest wall ceiling (and any other duration a key sets): Node's
/// `setTimeout` ceiling, which the seam takes as `maxWallMs`'s bound.
pub const MAX_MS: f64 = 2_147_483_647.0;

/// The most isolate-host processes one runtime may have: each is a process
/// with a V8 of its own, and past a few per core they only add memory.
pub const MAX_ISOLATE_HOSTS: f64 = 64.0;

/// The largest `maxOutputBytes`: a result of 1 GiB of JSON is already
/// more than the harness can hand a model, and a V8 string holds at most
/// 2^29 UTF-16 units.
pub const MAX_OUTPUT_BYTES: f64 = (1u64 << 30) as f64;

/// The most of anything counted in a `u32` (runs waiting, runs in flight
/// before the machine's own limit).
pub const MAX_COUNT: f64 = u32::MAX as f64;

/// Prepared isolates per core at most: each is a thread and an isolate
/// (~2-3 MiB) made before any run asks for it; a host making thousands
/// never becomes ready.
pub const PREPARED_PER_CORE: usize = 64;

/// The shortest `hostUnresponsiveMs`: the heartbeat goes at most every
/// 10 ms, and a host needs a few beats to answer one.
pub const MIN_UNRESPONSIVE_MS: f64 = 100.0;

/// What values a key takes. Every number is finite and positive.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
  /// A number, fractions allowed.
  Number { min: Min, max: Max },
  /// A whole number (counted in the runtime, so a fraction is refused
  /// rather than cut).
  Whole { min: Min, max: Max },
  /// `true` or `false`.
  Boolean,
}

/// The smallest value a number key takes.
#[derive(Clone, Copy, Debug)]
pub enum Min {
  /// Anything above zero.
  Positive,
  /// At least this.
  AtLeast(f64),
}

/// The largest value a number key takes: always one this machine can
/// honour, so no value that passes can end a host or the harness later.
#[derive(Clone, Copy, Debug)]
pub enum Max {
  /// A constant.
  Const(f64),
  /// This machine's memory, in MiB.
  MachineMemoryMb,
  /// What the machine's memory mappings allow runs in flight
  /// (`vm.max_map_count`: `RuntimeConfig::check_machine_limits`), and at
  /// most [`MAX_COUNT`] where the kernel does not say.
  MachineMappings,
  /// This many per core this process may use.
  PerCore(usize),
}

impl Max {
  /// The largest value this bound lets a key take on this machine.
  pub fn on_this_machine(self) -> f64 {
    match self {
      Max::Const(bound) => bound,
      Max::MachineMemoryMb => machine_memory_mb(),
      Max::MachineMappings => machine_max_map_count().map_or(MAX_COUNT, |count| concurrent_runs_ceiling(count) as f64),
      Max::PerCore(per_core) => (per_core * available_cores()) as f64,
    }
  }
}

/// A key's default.
#[derive(Clone, Copy, Debug)]
pub enum DefaultValue {
  /// This number.
  Number(f64),
  /// This boolean.
  Boolean(bool),
  /// The cores this process may use, as Node's `os.availableParallelism()`
  /// counts them.
  AvailableCores,
  /// This number, or the key's bound on this machine where that is less:
  /// the default of a key bounded by the machine, so that a config with no
  /// keys passes on a small machine too.
  AtMostTheBound(f64),
}

/// A key's value in a config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
  /// A number key's (of either kind).
  Number(f64),
  /// A boolean key's.
  Boolean(bool),
}

impl From<f64> for Value {
  fn from(number: f64) -> Value {
    Value::Number(number)
  }
}

impl From<bool> for Value {
  fn from(boolean: bool) -> Value {
    Value::Boolean(boolean)
  }
}

/// A default as the field of its type (for the unit tests' configs).
#[cfg(test)]
trait IntoField<T> {
  fn into_field(self) -> T;
}

#[cfg(test)]
impl IntoField<f64> for Option<&Key> {
  fn into_field(self) -> f64 {
    match self.map(Key::default_value) {
      Some(Value::Number(number)) => number,
      _ => panic!("a number key whose default is not a number"),
    }
  }
}

#[cfg(test)]
impl IntoField<bool> for Option<&Key> {
  fn into_field(self) -> bool {
    match self.map(Key::default_value) {
      Some(Value::Boolean(boolean)) => boolean,
      _ => panic!("a boolean key whose default is not a boolean"),
    }
  }
}

/// One config key, as its row in the table defines it.
#[derive(Clone, Copy, Debug)]
pub struct Key {
  /// Its name in the config (`computeMs`).
  pub name: &'static str,
  /// One line, for the schema (and a UI that shows it).
  pub description: &'static str,
  /// Its type and bounds.
  pub kind: Kind,
  /// The value the schema fills in when the key is not given.
  pub default: DefaultValue,
  /// The long doc, a line per element (the field's doc comment).
  pub doc: &'static [&'static str],
  /// Its value in a config.
  pub read: fn(&crate::NativeConfig) -> Value,
}

impl Key {
  /// The long doc as one paragraph.
  pub fn doc(&self) -> String {
    self.doc.iter().map(|line| line.trim()).collect::<Vec<_>>().join(" ")
  }

  /// The values the key takes, in words that hold on every machine (the
  /// README's bounds column).
  pub fn bounds(&self) -> String {
    let (whole, min, max) = match self.kind {
      Kind::Boolean => return "`true` or `false`".to_owned(),
      Kind::Number { min, max } => (false, min, max),
      Kind::Whole { min, max } => (true, min, max),
    };
    let max = match max {
      Max::Const(bound) => js(bound),
      Max::MachineMemoryMb => "this machine's memory".to_owned(),
      Max::MachineMappings => format!(
        "`vm.max_map_count` × 3/4 / {MAPPINGS_PER_RUN} ({} with Linux's default)",
        concurrent_runs_ceiling(LINUX_DEFAULT_MAX_MAP_COUNT)
      ),
      Max::PerCore(per_core) => format!("{per_core} per core"),
    };
    match (whole, min) {
      (false, Min::Positive) => format!("at most {max}"),
      (true, Min::Positive) => format!("a whole number, at most {max}"),
      (false, Min::AtLeast(min)) => format!("from {} to {max}", js(min)),
      (true, Min::AtLeast(min)) => format!("a whole number from {} to {max}", js(min)),
    }
  }

  /// The default as the README words it.
  pub fn default_text(&self) -> String {
    match (self.default, self.kind) {
      (DefaultValue::Number(number), _) => js(number),
      (DefaultValue::Boolean(boolean), _) => boolean.to_string(),
      (DefaultValue::AvailableCores, _) => "available cores".to_owned(),
      (DefaultValue::AtMostTheBound(number), Kind::Number { max, .. } | Kind::Whole { max, .. }) => {
        let bound = match max {
          Max::Const(bound) => js(bound),
          Max::MachineMemoryMb => "this machine's memory".to_owned(),
          Max::MachineMappings => "what the mappings allow".to_owned(),
          Max::PerCore(per_core) => format!("{per_core} per core"),
        };
        format!("{} or {bound}, whichever is less", js(number))
      }
      (DefaultValue::AtMostTheBound(number), Kind::Boolean) => js(number),
    }
  }

  /// The default on this machine.
  pub fn default_value(&self) -> Value {
    match (self.default, self.kind) {
      (DefaultValue::Number(number), _) => Value::Number(number),
      (DefaultValue::Boolean(boolean), _) => Value::Boolean(boolean),
      (DefaultValue::AvailableCores, _) => Value::Number(f64::from(crate::available_parallelism())),
      (DefaultValue::AtMostTheBound(number), Kind::Number { max, .. } | Kind::Whole { max, .. }) => {
        Value::Number(number.min(max.on_this_machine()))
      }
      (DefaultValue::AtMostTheBound(number), Kind::Boolean) => Value::Number(number),
    }
  }
}

pub use dsh_protocol::failure::js;

/// One key for the TS layer, which builds its schema from these
/// (`ts/config.ts`), and for the README's table
/// (`scripts/config-table.mjs`).
#[napi(object, object_from_js = false)]
pub struct NativeConfigKey {
  /// Its name in the config (`computeMs`).
  pub name: String,
  /// What values it takes: the schema's type (a whole number is a number
  /// there, refused by the addon when it is not whole).
  #[napi(ts_type = "'number' | 'whole number' | 'boolean'")]
  pub kind: String,
  /// Its default on this machine.
  pub default_value: Either<f64, bool>,
  /// Its default in words that hold on every machine (`available cores`).
  pub default_text: String,
  /// The values it takes, in words that hold on every machine.
  pub bounds: String,
  /// Its smallest value, where it has one beyond being positive.
  pub at_least: Option<f64>,
  /// Its largest value on this machine.
  pub at_most: Option<f64>,
  /// One line, for the schema.
  pub description: String,
  /// The long doc, as one paragraph (Markdown).
  pub doc: String,
}

/// Every config key, in the table's order (the seam's four first).
#[napi]
pub fn config_keys() -> Vec<NativeConfigKey> {
  KEYS
    .iter()
    .map(|key| NativeConfigKey {
      name: key.name.to_owned(),
      kind: match key.kind {
        Kind::Number { .. } => "number",
        Kind::Whole { .. } => "whole number",
        Kind::Boolean => "boolean",
      }
      .to_owned(),
      default_value: match key.default_value() {
        Value::Number(number) => Either::A(number),
        Value::Boolean(boolean) => Either::B(boolean),
      },
      default_text: key.default_text(),
      bounds: key.bounds(),
      at_least: match key.kind {
        Kind::Number { min: Min::AtLeast(min), .. } | Kind::Whole { min: Min::AtLeast(min), .. } => Some(min),
        _ => None,
      },
      at_most: match key.kind {
        Kind::Number { max, .. } | Kind::Whole { max, .. } => Some(max.on_this_machine()),
        Kind::Boolean => None,
      },
      description: key.description.to_owned(),
      doc: key.doc(),
    })
    .collect()
}

/// The table: a row per key makes `NativeConfig`'s field (documented by
/// the row's doc) and its entry in [`KEYS`].
macro_rules! config_keys {
  ($(
    $field:ident: $type:ty = Key {
      name: $name:tt,
      description: $description:expr,
      kind: $kind:expr,
      default: $default:expr,
      doc: [$($doc:tt),* $(,)?] $(,)?
    },
  )*) => {
    /// The runtime's configuration (`V8CodeRuntimeConfig`): every key is a
    /// row of the table in `src/config_keys.rs`, which holds its default
    /// and bounds (the README's configuration table lists them). Counts
    /// are numbers here, so that a fraction reaches the check instead of
    /// being cut.
    #[napi(object)]
    pub struct NativeConfig {
      $(
        $(#[doc = $doc])*
        #[napi(js_name = $name)]
        pub $field: $type,
      )*
    }

    /// Every key, in the table's order.
    pub static KEYS: &[Key] = &[$(
      Key {
        name: $name,
        description: $description,
        kind: $kind,
        default: $default,
        doc: &[$($doc),*],
        read: |config| Value::from(config.$field),
      },
    )*];

    #[cfg(test)]
    impl NativeConfig {
      /// Every key at its default, as the schema fills them in.
      pub fn defaults() -> NativeConfig {
        let mut keys = KEYS.iter();
        NativeConfig {
          $($field: keys.next().into_field(),)*
        }
      }
    }
  };
}

// The keys, in the seam's order (its four first). A row: the field of
// `NativeConfig` and its type (`f64` for every number, so that a fraction
// reaches the check instead of being cut), the key's name, its one-line
// description, what values it takes, its default, and its doc (the
// field's doc comment in `index.d.ts`, and the README's meaning column;
// plain strings, because napi copies only those into `index.d.ts`).
config_keys! {
  compute_ms: f64 = Key {
    name: "computeMs",
    description: "CPU time a program may burn (ms)",
    kind: Kind::Number { min: Min::Positive, max: Max::Const(MAX_MS) },
    default: DefaultValue::Number(60_000.0),
    doc: [
      "CPU time a program may burn, in ms: its isolate thread's CPU clock,",
      "so waiting on a binding or a timer is free. Over budget: `timeout`,",
      "`compute budget exhausted (<n>ms busy)`.",
    ],
  },
  max_wall_ms: f64 = Key {
    name: "maxWallMs",
    description: "wall-clock ceiling of a run (ms)",
    kind: Kind::Number { min: Min::Positive, max: Max::Const(MAX_MS) },
    default: DefaultValue::Number(600_000.0),
    doc: [
      "Wall-clock ceiling of a run from `run()`, in ms. Reached: `timeout`,",
      "`wall-clock ceiling reached (<n>ms)`.",
    ],
  },
  max_output_bytes: f64 = Key {
    name: "maxOutputBytes",
    description: "exact JSON byte cap over logs + value/message",
    kind: Kind::Whole { min: Min::AtLeast(MIN_OUTPUT_BYTES as f64), max: Max::Const(MAX_OUTPUT_BYTES) },
    default: DefaultValue::Number(67_108_864.0),
    doc: [
      "Exact JSON byte cap over logs plus the value (or the failure",
      "message).",
    ],
  },
  max_old_generation_size_mb: f64 = Key {
    name: "maxOldGenerationSizeMb",
    description: "heap cap of a program isolate (MiB)",
    kind: Kind::Number { min: Min::Positive, max: Max::MachineMemoryMb },
    default: DefaultValue::AtMostTheBound(512.0),
    doc: [
      "Heap cap of a program's isolate, in MiB. Reached: `worker-exit`",
      "naming the limit. Below what the sandbox itself holds (about 1 MiB)",
      "it means that, and a quarter more. Below 16 MiB, V8 optimizes a",
      "program's hot functions on its own thread rather than beside it.",
    ],
  },
  max_external_memory_mb: f64 = Key {
    name: "maxExternalMemoryMb",
    description: "memory cap outside the heap, every route (MiB)",
    kind: Kind::Number { min: Min::Positive, max: Max::MachineMemoryMb },
    default: DefaultValue::AtMostTheBound(512.0),
    doc: [
      "Cap on the memory a program holds outside the heap, by every route",
      "(buffers, resizable and growable buffers, `Intl` objects, ICU,",
      "waiters, JSON nesting: see [Memory containment](#memory-containment)),",
      "in MiB. Reached: `worker-exit` naming the limit.",
    ],
  },
  max_tool_calls: f64 = Key {
    name: "maxToolCalls",
    description: "binding calls one run may make",
    kind: Kind::Whole { min: Min::Positive, max: Max::Const(MAX_COUNT) },
    default: DefaultValue::Number(10_000.0),
    doc: [
      "The most binding calls one run may make, counted by the harness",
      "(once each, however often the run is re-executed). The call past",
      "it reaches no host function: it rejects in the program as a failed",
      "binding call does, `tool call limit reached: ...` (the exact",
      "message: docs/CONTRACT.md §8). The harness's recorded Code Mode",
      "runs make one or two calls, its runtime suite at most three: the",
      "default stops a runaway loop over a tool while admitting a",
      "Promise.all of 10000 calls (the bench's).",
    ],
  },
  max_concurrent_runs: f64 = Key {
    name: "maxConcurrentRuns",
    description: "runs in flight at once, waiting ones included",
    kind: Kind::Whole { min: Min::Positive, max: Max::MachineMappings },
    default: DefaultValue::AtMostTheBound(2048.0),
    doc: [
      "Runs in flight at once, each with a thread and an isolate of its",
      "own; waiting runs count (a run waiting on a tool costs memory, not",
      "CPU: see [Concurrency](#concurrency)). Beyond it runs",
      "queue. A value past what this machine's memory mappings allow is",
      "refused, naming the machine's limit.",
    ],
  },
  max_queued_runs: f64 = Key {
    name: "maxQueuedRuns",
    description: "runs that may wait for admission",
    kind: Kind::Whole { min: Min::Positive, max: Max::Const(MAX_COUNT) },
    default: DefaultValue::Number(10_000.0),
    doc: [
      "Runs that may wait in the FIFO queue for admission; beyond it",
      "`run()` rejects, saying the queue is full (the exact message:",
      "docs/CONTRACT.md §1).",
    ],
  },
  prepared_isolates: f64 = Key {
    name: "preparedIsolates",
    description: "isolates kept prepared",
    kind: Kind::Whole { min: Min::Positive, max: Max::PerCore(PREPARED_PER_CORE) },
    default: DefaultValue::AvailableCores,
    doc: [
      "Isolates kept prepared from the snapshot on idle threads, so that a",
      "run arriving at an idle runtime starts at once, each warmed once the",
      "host is quiet (`isolatesWarmed`). A reserve, kept by",
      "the first isolate host, which takes every run that finds no host less",
      "busy: it does not grow with concurrency. While runs that call no tool",
      "follow one another faster than the host makes isolates, it grows, up",
      "to eight times, what lies past twice it made while the host is quiet;",
      "back to it at a run that calls one or after 1 s without a run.",
    ],
  },
  host_unresponsive_ms: f64 = Key {
    name: "hostUnresponsiveMs",
    description: "silence after which an isolate host is replaced (ms)",
    kind: Kind::Number { min: Min::AtLeast(MIN_UNRESPONSIVE_MS), max: Max::Const(MAX_MS) },
    default: DefaultValue::Number(10_000.0),
    doc: [
      "How long, in ms, an isolate host may leave the harness's heartbeat",
      "(at least once a second) unanswered before it is killed and",
      "replaced, its runs going on as after any host's death (see",
      "[When a host dies](#when-a-host-dies)). The host answers from a",
      "thread of its own, whatever its runs do.",
    ],
  },
  isolate_hosts: f64 = Key {
    name: "isolateHosts",
    description: "isolate-host processes the runs are spread over",
    kind: Kind::Whole { min: Min::Positive, max: Max::Const(MAX_ISOLATE_HOSTS) },
    default: DefaultValue::Number(2.0),
    doc: [
      "Isolate-host processes the runs are spread over, each run going to",
      "the one with the fewest runs, the first on a tie (see",
      "[Isolation](#isolation-the-isolate-host)): a host that dies takes only",
      "its own runs with it, so more hosts divide what a crash costs, at a",
      "few MiB each. The first keeps the `preparedIsolates` reserve.",
    ],
  },
  host_max_rss_mb: f64 = Key {
    name: "hostMaxRssMb",
    description: "resident memory past which an isolate host is replaced once its runs end (MiB)",
    kind: Kind::Number { min: Min::Positive, max: Max::MachineMemoryMb },
    default: DefaultValue::AtMostTheBound(2048.0),
    doc: [
      "Resident memory, in MiB (read by the harness from `/proc`), past",
      "which a host that has run a program takes no more runs and is",
      "replaced once its runs end: what V8 and the allocator keep after big",
      "runs goes back with the process.",
    ],
  },
  max_run_history_mb: f64 = Key {
    name: "maxRunHistoryMb",
    description: "what one run's history may hold to be re-executed after its host dies (MiB)",
    kind: Kind::Number { min: Min::Positive, max: Max::MachineMemoryMb },
    default: DefaultValue::AtMostTheBound(64.0),
    doc: [
      "What one run's history (see [When a host dies](#when-a-host-dies))",
      "may hold, in MiB: chiefly its tools' replies, held to answer its",
      "calls again should it be re-executed on another host. Past it the",
      "run goes on, but its history is dropped and its host's death fails",
      "it, saying so.",
    ],
  },
  max_history_mb: f64 = Key {
    name: "maxHistoryMb",
    description: "what all runs' histories together may hold (MiB)",
    kind: Kind::Number { min: Min::Positive, max: Max::MachineMemoryMb },
    default: DefaultValue::AtMostTheBound(1024.0),
    doc: [
      "What the histories of all runs in flight may hold together, in MiB:",
      "a run whose history would take them past it has its history",
      "dropped, as if past `maxRunHistoryMb`.",
    ],
  },
  require_sandbox: bool = Key {
    name: "requireSandbox",
    description: "refuse to start where the kernel refuses an isolate host's protections",
    kind: Kind::Boolean,
    default: DefaultValue::Boolean(false),
    doc: [
      "Refuse to start (`ctx.plugin` rejects, naming what is off, and no",
      "host starts) where the kernel refuses any of a host's protections",
      "(see [The host's lockdown](#the-hosts-lockdown));",
      "without it a host runs with what the kernel grants, and",
      "`stats().sandbox` says what that is.",
    ],
  },
}

#[cfg(test)]
mod tests {
  use super::*;

  /// A key's name is the one napi gives its field (`index.d.ts`), so each
  /// is written once per row and means the same everywhere.
  #[test]
  fn names_are_unique_and_camel_case() {
    let mut names: Vec<&str> = KEYS.iter().map(|key| key.name).collect();
    assert!(names.iter().all(|name| name.chars().all(|c| c.is_ascii_alphanumeric())));
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), KEYS.len());
  }

  /// What the TS layer and the README read: one entry per key, in the
  /// table's order, in words that hold on every machine.
  #[test]
  fn config_keys_describe_each_key() {
    let keys = config_keys();
    assert_eq!(
      keys.iter().map(|key| key.name.as_str()).collect::<Vec<_>>(),
      KEYS.iter().map(|key| key.name).collect::<Vec<_>>()
    );
    let bounds = |name: &str| keys.iter().find(|key| key.name == name).map(|key| key.bounds.clone()).unwrap();
    assert_eq!(bounds("maxOutputBytes"), "a whole number from 4 to 1073741824");
    assert_eq!(
      bounds("maxConcurrentRuns"),
      "a whole number, at most `vm.max_map_count` × 3/4 / 16 (3071 with Linux's default)"
    );
    assert_eq!(bounds("hostUnresponsiveMs"), "from 100 to 2147483647");
    let prepared = keys.iter().find(|key| key.name == "preparedIsolates").unwrap();
    assert_eq!(prepared.default_text, "available cores");
    // The reserve's growth, in the words of the hosts' own constants.
    assert_eq!((dsh_protocol::config::RESERVE_GROWTH, dsh_protocol::config::RESERVE_SHRINK_AFTER.as_secs()), (8, 1));
    assert!(prepared.doc.contains("up to eight times,"));
    assert!(prepared.doc.contains("back to it at a run that calls one or after 1 s without a run."));
    assert!(matches!(prepared.default_value, Either::A(cores) if cores >= 1.0));
    assert!(keys.iter().all(|key| !key.doc.is_empty() && !key.doc.contains('\n') && !key.description.is_empty()));
  }

  /// Every default passes its own key's bounds on any machine: a default
  /// that is a plain number has constant bounds, and every default passes
  /// them on this one.
  #[test]
  fn defaults_are_within_the_bounds() {
    for key in KEYS {
      let (Kind::Number { min, max } | Kind::Whole { min, max }) = key.kind else {
        assert!(matches!(key.default, DefaultValue::Boolean(_)), "{}", key.name);
        continue;
      };
      match (key.default, max) {
        (DefaultValue::Number(_), Max::Const(_)) | (DefaultValue::AtMostTheBound(_), _) => {}
        (DefaultValue::AvailableCores, Max::PerCore(per_core)) => assert!(per_core >= 1, "{}", key.name),
        _ => panic!("{}: a default this machine's bound may not allow", key.name),
      }
      let Value::Number(default) = key.default_value() else { panic!("{}", key.name) };
      assert!(default > 0.0, "{}", key.name);
      if let Min::AtLeast(min) = min {
        assert!(default >= min, "{}", key.name);
      }
      assert!(default <= max.on_this_machine(), "{}", key.name);
      if let Kind::Whole { .. } = key.kind {
        assert_eq!(default.fract(), 0.0, "{}", key.name);
      }
    }
  }

  /// A default bounded by the machine says so in words that hold on every
  /// machine.
  #[test]
  fn a_default_bounded_by_the_machine_says_so() {
    let text = |name: &str| KEYS.iter().find(|key| key.name == name).unwrap().default_text();
    assert_eq!(text("hostMaxRssMb"), "2048 or this machine's memory, whichever is less");
    assert_eq!(text("maxConcurrentRuns"), "2048 or what the mappings allow, whichever is less");
  }
}
