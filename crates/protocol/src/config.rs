//! The runtime's caps and sizes, as the harness hands them to each isolate
//! host (checked first against their bounds: the addon's `config.rs`).

/// The smallest `maxOutputBytes`: the room for `[]` and an empty failure
/// message's quotes.
pub const MIN_OUTPUT_BYTES: u32 = 4;

/// Every cap of one runtime; no hidden default lives anywhere else. The
/// harness validates it and hands it to each isolate host (as JSON, in
/// the channel's first frame).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RuntimeConfig {
  /// CPU time a program may burn, in milliseconds.
  pub compute_ms: f64,
  /// Wall-clock ceiling of a run from its submission, in milliseconds.
  pub max_wall_ms: f64,
  /// Exact JSON byte cap over logs plus value or failure message.
  pub max_output_bytes: u64,
  /// Heap cap of a program's isolate, in MiB.
  pub max_old_generation_size_mb: f64,
  /// Cap on the memory a program holds outside the heap, by every route, in MiB.
  pub max_external_memory_mb: f64,
  /// Runs in flight at once (each with its own thread and isolate).
  pub max_concurrent_runs: usize,
  /// Runs that may wait for admission before run() is refused.
  pub max_queued_runs: usize,
  /// Isolates kept prepared ahead of runs (each on an idle thread) at
  /// rest; more while runs follow one another quickly (see
  /// [`RESERVE_GROWTH`]).
  pub prepared_isolates: usize,
  /// How many runs may be busy at once (computing, for less than a
  /// scheduling quantum) before admission waits: this host's share of
  /// [`machine_busy_slots`].
  pub busy_slots: usize,
  /// What the program's Node APIs report of the harness's Node
  /// (crates/sandbox-ext/js/99_bootstrap.js, seal()).
  pub node: NodeFacts,
}

/// How many times its `prepared_isolates` a host's reserve grows to at
/// most, while its runs follow one another faster than it makes isolates
/// (the host's `reserve.rs`; the `preparedIsolates` key's doc says so).
pub const RESERVE_GROWTH: usize = 8;

/// How long a host is idle (no run in flight or queued) before a grown
/// reserve is back to `prepared_isolates`, its extra isolates dropped.
pub const RESERVE_SHRINK_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The harness's Node as it reports itself, for the program's `navigator`
/// and the APIs that follow the harness's Node line (console rendering,
/// Buffer).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
  /// Major version of the Node that hosts the runtime.
  pub node_major: u32,
  /// Its whole version without the `v` (`22.19.0`): the program's
  /// `process.version` and `process.versions.node`.
  pub node_version: String,
  /// `navigator.hardwareConcurrency`: libuv's available parallelism, as
  /// Node's `os.availableParallelism()`.
  pub hardware_concurrency: u32,
  /// `navigator.platform`, as Node spells it (`Linux x86_64`).
  pub platform: String,
}

impl NodeFacts {
  /// `navigator.platform` as Node derives it from its platform and arch.
  pub fn navigator_platform() -> String {
    let arch = match std::env::consts::ARCH {
      "x86_64" => "x86_64",
      "x86" => "i686",
      "aarch64" => "arm64",
      other => other,
    };
    match std::env::consts::OS {
      "linux" => format!("Linux {arch}"),
      "macos" => "MacIntel".to_owned(),
      "windows" => "Win32".to_owned(),
      other => format!("{other} {arch}"),
    }
  }
}

/// The cores this process may use (its affinity and its cgroup's limit, as
/// the standard library counts them), at least one: the bound of a config
/// key per core, and what the busy slots and the spins below depend on.
pub fn available_cores() -> usize {
  std::thread::available_parallelism().map_or(1, |cores| cores.get())
}

/// This machine's memory, in MiB (the bound of every memory key).
pub fn machine_memory_mb() -> f64 {
  // SAFETY: sysconf has no preconditions.
  let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
  if pages <= 0 || page <= 0 {
    return f64::MAX;
  }
  (pages as f64 * page as f64 / (1024.0 * 1024.0)).floor()
}

/// How many runs may be busy at once on this machine: two per core this
/// process may use. A starting run spends most of its first milliseconds
/// making its isolate, and some of them not on a CPU at all (its thread
/// starting, page faults); two per core keep every core busy through that,
/// and give starting runs a larger share of the cores against CPU-bound
/// runs beside them. More per core only adds isolates alive at once and
/// switching between them (the README's bench section has the comparison).
/// The isolate hosts share these out: with one machine's worth per host,
/// hosts slowed by each other let ever more runs in (measured: 1000 runs at
/// once on two hosts reached 207 threads and 3x the memory).
pub fn machine_busy_slots() -> usize {
  2 * available_cores()
}

/// Whether waiting awake for another thread (or process) can help: only
/// when that other side can run meanwhile. With one CPU available a spin
/// only delays it (measured under `taskset -c 0`: a sequential round trip
/// 45 us spinning, 31 us not).
pub fn spinning_helps() -> bool {
  static HELPS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
  *HELPS.get_or_init(|| available_cores() > 1)
}

impl RuntimeConfig {
  /// A small runtime for the crates' unit tests and measurements, which
  /// change the fields they are about (`RuntimeConfig { prepared_isolates:
  /// 0, ..RuntimeConfig::small() }`). Not the plugin's defaults: those are
  /// the addon's table of keys (`src/config_keys.rs`), which the schema
  /// reads.
  pub fn small() -> RuntimeConfig {
    RuntimeConfig {
      compute_ms: 60_000.0,
      max_wall_ms: 600_000.0,
      max_output_bytes: 1 << 20,
      max_old_generation_size_mb: 64.0,
      max_external_memory_mb: 64.0,
      max_concurrent_runs: 8,
      max_queued_runs: 8,
      prepared_isolates: 0,
      busy_slots: 4,
      node: NodeFacts {
        node_major: 22,
        node_version: "22.19.0".to_owned(),
        hardware_concurrency: 1,
        platform: NodeFacts::navigator_platform(),
      },
    }
  }

  /// Check the limits that depend on this machine: the kernel caps a
  /// process's memory mappings (`vm.max_map_count`), each run in flight
  /// holds some ([`MAPPINGS_PER_RUN`]), and a process past the cap cannot
  /// map memory at all, which V8 cannot survive. So `maxConcurrentRuns`
  /// may claim at most three quarters of the cap, leaving the rest to the
  /// host and to runs whose heaps grow (each 256 KiB heap page is a
  /// mapping of its own).
  pub fn check_machine_limits(&self) -> Result<(), String> {
    let Some(max_map_count) = machine_max_map_count() else {
      return Ok(());
    };
    let ceiling = concurrent_runs_ceiling(max_map_count);
    if self.max_concurrent_runs > ceiling {
      return Err(format!(
        "config.maxConcurrentRuns ({}) is more than this machine allows ({ceiling}): each run in flight holds \
         about {MAPPINGS_PER_RUN} memory mappings and vm.max_map_count is {max_map_count}",
        self.max_concurrent_runs
      ));
    }
    Ok(())
  }
}

/// The kernel's cap on a process's memory mappings (`vm.max_map_count`),
/// where it says.
pub fn machine_max_map_count() -> Option<usize> {
  std::fs::read_to_string("/proc/sys/vm/max_map_count").ok().and_then(|text| text.trim().parse::<usize>().ok())
}

/// The most runs in flight a process whose mappings the kernel caps at
/// `max_map_count` may have (see [`RuntimeConfig::check_machine_limits`]).
pub fn concurrent_runs_ceiling(max_map_count: usize) -> usize {
  max_map_count / 4 * 3 / MAPPINGS_PER_RUN
}

/// Linux's default `vm.max_map_count`, for words that hold on every
/// machine (the README's bound of `maxConcurrentRuns`).
pub const LINUX_DEFAULT_MAX_MAP_COUNT: usize = 65_530;

/// Memory mappings one run in flight holds, with margin: its thread's stack
/// and guard, its isolate's heap pages and malloc arenas (14 measured with
/// 4096 runs waiting).
pub const MAPPINGS_PER_RUN: usize = 16;
