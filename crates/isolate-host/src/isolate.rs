//! A fresh, sealed isolate, made from the startup snapshot ahead of the run
//! that will use it: a run thread prepares its next isolate while idle,
//! so a run never pays isolate creation on its critical path.

use std::rc::Rc;
use std::sync::Arc;

use deno_core::{v8, JsRuntime, ModuleLoadResponse, ModuleLoader, ModuleSpecifier, RuntimeOptions};
use deno_error::JsErrorBox;
use dsh_sandbox_ext::dsh_sandbox;

use crate::allocator::capped_allocator;
use crate::code_from_strings;
use crate::compiler_zones;
use crate::config::RuntimeConfig;
use crate::external_memory::ExternalMemory;
use crate::heap_peak::HeapPeak;

static SNAPSHOT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/SANDBOX_SNAPSHOT.bin"));

const MIB: f64 = 1024.0 * 1024.0;

/// The heap an isolate is made under when `maxOldGenerationSizeMb` is
/// smaller: deserializing the snapshot alone outgrows a cap of a few MiB
/// (V8 then ends the process). The program's cap is set back when its run
/// starts (`PreparedIsolate::cap_heap_for_the_program`).
const SANDBOX_HEAP_FLOOR: usize = 16 << 20;

/// A config's size in MiB (`maxOldGenerationSizeMb`, `maxExternalMemoryMb`),
/// in bytes.
fn mib_to_bytes(mib: f64) -> usize {
  (mib * MIB) as usize
}

/// Whether `config`'s heap cap is below [`SANDBOX_HEAP_FLOOR`]: a run
/// then starts near its limit (see `cap_heap_for_the_program`).
pub fn heap_cap_below_sandbox_floor(config: &RuntimeConfig) -> bool {
  mib_to_bytes(config.max_old_generation_size_mb) < SANDBOX_HEAP_FLOOR
}

/// A JsRuntime whose global has been sealed (no Deno, no ops reachable),
/// with the driver functions of the bootstrap (crates/sandbox-ext/js/99_bootstrap.js).
pub struct PreparedIsolate {
  pub runtime: JsRuntime,
  /// `install(bindings)`: the program's binding globals (the parsed
  /// descriptor, see bindings_descriptor.rs), before it runs.
  pub install: v8::Global<v8::Function>,
  /// `watch(completion)`: settles the run; returns a promise.
  pub watch: v8::Global<v8::Function>,
  /// `releaseCallbacks()`: fires the timers and immediates held back while
  /// the program's synchronous part's rejections were being reported.
  pub release_timers: v8::Global<v8::Function>,
  /// `warm()`: runs the sandbox's per-run code once before any program
  /// (see [`PreparedIsolate::warm`]).
  warm: v8::Global<v8::Function>,
  /// Memory outside the heap held for the program. Declared after
  /// `runtime` so that it is dropped after the isolate: the account's
  /// interrupts point at it (external_memory.rs).
  pub external_memory: Arc<ExternalMemory>,
  /// The most the heap held (for the run's report). Declared after
  /// `runtime`, for the same reason: its collections' callback points at it.
  pub heap_peak: Arc<HeapPeak>,
  /// The program's heap cap (`maxOldGenerationSizeMb`), in bytes.
  pub heap_bytes: usize,
}

/// The heap limit a near-heap-limit callback grants over `current`: V8
/// ends the process unless the callback's limit lets the heap grow at
/// once, and a cap far below the heap then live (a tiny
/// `maxOldGenerationSizeMb` leaves V8 an old generation of a few hundred
/// KiB) is not lifted past it by doubling alone.
pub fn heap_limit_with_room(current: usize) -> usize {
  const ROOM: usize = 8 << 20;
  current.saturating_mul(2).saturating_add(ROOM)
}

/// The most room past a program's heap cap that a stopped run may take
/// while V8 unwinds its termination (see [`heap_limit_for_stopped`]).
const STOPPED_HEAP_ROOM: usize = 64 << 20;

/// The heap limit the program's near-heap-limit callback grants over
/// `current`, the run being stopped, under a cap of `cap` bytes: room, as
/// [`heap_limit_with_room`] gives, but never past twice the cap (or the
/// sandbox's floor) and [`STOPPED_HEAP_ROOM`]. V8 honours a stop at its
/// next stack check, and some loops that allocate reach none for seconds
/// (`for (;;) keep.push(new Array(1000))`: each grant was used up before
/// the stop took, six times over, to 2 GiB of heap under a 64 MiB cap).
/// Past the bound V8's out-of-memory handler ends the host, which the
/// harness handles as any host's death: memory stays bounded.
pub fn heap_limit_for_stopped(current: usize, cap: usize) -> usize {
  let most = cap.max(SANDBOX_HEAP_FLOOR).saturating_mul(2).saturating_add(STOPPED_HEAP_ROOM);
  heap_limit_with_room(current).min(most).max(current)
}

/// Refuses every module: a program has no `import()` of anything.
struct NoModules;

fn no_module(specifier: &str) -> JsErrorBox {
  JsErrorBox::type_error(format!("Cannot import '{specifier}': modules are not available in this sandbox"))
}

impl ModuleLoader for NoModules {
  fn resolve(
    &self,
    specifier: &str,
    _referrer: &str,
    _kind: deno_core::ResolutionKind,
  ) -> Result<ModuleSpecifier, deno_core::error::ModuleLoaderError> {
    Err(no_module(specifier))
  }

  fn load(
    &self,
    specifier: &ModuleSpecifier,
    _referrer: Option<&deno_core::ModuleLoadReferrer>,
    _options: deno_core::ModuleLoadOptions,
  ) -> ModuleLoadResponse {
    ModuleLoadResponse::Sync(Err(no_module(specifier.as_str())))
  }
}

/// What `seal` is handed, as JSON texts: the harness's Node's facts (a
/// `HostFacts` always serializes), and the engine's: the V8 that runs the
/// program and the machine's architecture as Node names it
/// (`process.versions.v8`, `process.arch`).
fn seal_arguments(config: &RuntimeConfig) -> [String; 2] {
  let facts = serde_json::to_string(&config.node).unwrap_or_else(|_| "{}".to_owned());
  let engine = serde_json::json!({ "v8": v8::V8::get_version(), "arch": node_arch() });
  [facts, engine.to_string()]
}

/// Call `__dsh.seal(facts, engine)`, which returns the driver's functions:
/// a call, not a script. Compiling even a one-line script in a fresh
/// isolate (the compiler's first use there, the script's registration and
/// its compilation cache entry) took ~0.1 ms of a run thread's CPU per
/// isolate in a stream of trivial runs (perf), on every isolate the
/// reserve makes; its arguments are JSON, parsed as such.
fn seal(runtime: &mut JsRuntime, config: &RuntimeConfig) -> Result<v8::Global<v8::Value>, String> {
  deno_core::scope!(scope, runtime);
  v8::tc_scope!(let scope, scope);
  let failed = |scope: &mut v8::PinnedRef<'_, v8::TryCatch<'_, '_, v8::HandleScope<'_>>>| match scope.exception() {
    Some(exception) => exception.to_rust_string_lossy(scope),
    None => "the bootstrap has no seal".to_owned(),
  };
  let global = scope.get_current_context().global(scope);
  let Some(registry) = member::<v8::Object>(scope, global, b"__dsh") else { return Err(failed(scope)) };
  let Some(seal) = member::<v8::Function>(scope, registry, b"seal") else { return Err(failed(scope)) };
  let mut arguments = Vec::with_capacity(2);
  for text in seal_arguments(config) {
    let Some(text) = v8::String::new(scope, &text) else { return Err(failed(scope)) };
    let Some(value) = v8::json::parse(scope, text) else { return Err(failed(scope)) };
    arguments.push(value);
  }
  match seal.call(scope, registry.into(), &arguments) {
    Some(sealed) => Ok(v8::Global::new(scope, sealed)),
    None => Err(failed(scope)),
  }
}

/// `object[key]`, when it is a `T`.
fn member<'s, T>(
  scope: &mut v8::PinScope<'s, '_>,
  object: v8::Local<'s, v8::Object>,
  key: &[u8],
) -> Option<v8::Local<'s, T>>
where
  v8::Local<'s, T>: TryFrom<v8::Local<'s, v8::Value>>,
{
  let key = v8::String::new_from_one_byte(scope, key, v8::NewStringType::Internalized)?;
  object.get(scope, key.into()).and_then(|value| v8::Local::<T>::try_from(value).ok())
}

/// `process.arch`: Node's name for the architecture this host runs on.
fn node_arch() -> &'static str {
  match std::env::consts::ARCH {
    "x86_64" => "x64",
    "x86" => "ia32",
    "aarch64" => "arm64",
    "powerpc64" => "ppc64",
    other => other,
  }
}

impl PreparedIsolate {
  /// Create and seal an isolate. Must be called inside the run thread's
  /// tokio runtime context.
  pub fn new(config: &RuntimeConfig) -> Result<PreparedIsolate, String> {
    let external_memory = ExternalMemory::new(mib_to_bytes(config.max_external_memory_mb));
    let heap_bytes = mib_to_bytes(config.max_old_generation_size_mb);
    let params = v8::CreateParams::default()
      .heap_limits(0, heap_bytes.max(SANDBOX_HEAP_FLOOR))
      .array_buffer_allocator(capped_allocator(&external_memory))
      .allow_atomics_wait(false);
    let mut runtime = JsRuntime::try_new(RuntimeOptions {
      startup_snapshot: Some(SNAPSHOT),
      extensions: vec![dsh_sandbox::init()],
      create_params: Some(params),
      module_loader: Some(Rc::new(NoModules)),
      // The snapshot already holds the op bindings; binding ~200 ops again
      // in every isolate would be pure startup cost.
      skip_op_registration: true,
      ..Default::default()
    })
    .map_err(|error| {
      compiler_zones::unlocatable();
      format!("creating an isolate failed: {error}")
    })?;
    compiler_zones::locate(runtime.v8_isolate());
    external_memory.bind_isolate(runtime.v8_isolate().thread_safe_handle());
    code_from_strings::admit_by_size(&mut runtime, external_memory.clone());
    let heap_peak = Arc::new(HeapPeak::default());
    heap_peak.watch(runtime.v8_isolate());
    // The sandbox's own making (the snapshot's heap, the seal) and any GC
    // before a run takes the isolate are not the program's to pay for:
    // under a cap smaller than what they need, V8 would end the host before
    // any run. They are made under at least SANDBOX_HEAP_FLOOR, and given
    // room past it, until `cap_heap_for_the_program`.
    runtime.add_near_heap_limit_callback(|current, _initial| heap_limit_with_room(current));
    let sealed = seal(&mut runtime, config).map_err(|error| format!("sealing an isolate failed: {error}"))?;
    let (install, watch, release_timers, warm) = {
      deno_core::scope!(scope, runtime);
      let local = v8::Local::new(scope, sealed);
      let missing = || "the sandbox bootstrap did not return its driver".to_owned();
      let pair = v8::Local::<v8::Array>::try_from(local).map_err(|_| missing())?;
      let function = |index: u32| -> Result<v8::Global<v8::Function>, String> {
        let value = pair.get_index(scope, index).ok_or_else(missing)?;
        let function = v8::Local::<v8::Function>::try_from(value).map_err(|_| missing())?;
        Ok(v8::Global::new(scope, function))
      };
      (function(0)?, function(1)?, function(2)?, function(3)?)
    };
    Ok(PreparedIsolate { runtime, install, watch, release_timers, warm, external_memory, heap_peak, heap_bytes })
  }

  /// Run the sandbox's own per-run code (the bridge's encoder and decoder,
  /// the console's rendering) over sample values, so that a run taking
  /// this isolate finds it as a second run would: a fresh isolate pays
  /// for that code's first runs (~0.3 ms of a Code Mode shaped run's CPU)
  /// inside the run. Costs about as much here, so the scheduler calls it
  /// only on a quiet host. What a program could see of it (the realm's
  /// last match) each run's `install` undoes. Returns
  /// whether the warming code ran to its end: a throw (there is none to
  /// expect: the values are the sandbox's own) leaves the isolate as it
  /// was made, which runs programs as well, and is caught here.
  pub fn warm(&mut self) -> bool {
    deno_core::scope!(scope, self.runtime);
    v8::tc_scope!(let scope, scope);
    let warm = v8::Local::new(scope, &self.warm);
    let receiver = v8::undefined(scope).into();
    warm.call(scope, receiver, &[]).is_some()
  }

  /// Set the program's heap cap back, once a run has taken the isolate and
  /// before its own near-heap-limit callback goes in. V8 keeps the limit
  /// at least a quarter above the heap then live, so a cap smaller than
  /// the sandbox itself means "what the sandbox needs, and little more":
  /// a program past it is stopped as at any cap.
  pub fn cap_heap_for_the_program(&mut self) {
    self.runtime.remove_near_heap_limit_callback(self.heap_bytes);
  }

  /// Make V8 give back the heap pages it keeps pooled for reuse, every
  /// isolate's (see `release_v8_page_pool` in memory_return.rs for why). V8
  /// does so on a critical memory-pressure notification, which also runs a
  /// full GC of this isolate: cheap for one that has run nothing.
  pub fn release_pooled_pages(&mut self) {
    self.runtime.v8_isolate().memory_pressure_notification(v8::MemoryPressureLevel::Critical);
  }
}

#[cfg(test)]
mod tests {
  //! The snapshot's JS, read before any seal: what each file provides
  //! (crates/sandbox-ext/js/00_primordials.js, "__dsh") is frozen and defined once.

  use super::*;
  use crate::platform;

  /// The registry's entries by name, in load order, and what is wrong with
  /// them: an entry (or an array it holds, such as its globals) not frozen,
  /// an entry that could be replaced, a second provide() that went through.
  const CHECK_REGISTRY: &str = r#"(() => {
    const registry = globalThis.__dsh;
    const problems = [];
    for (const name of Object.keys(registry)) {
      const entry = registry[name];
      const descriptor = Object.getOwnPropertyDescriptor(registry, name);
      if (descriptor.writable || descriptor.configurable) problems.push(`${name} can be replaced`);
      if (!Object.isFrozen(entry)) problems.push(`${name} is not frozen`);
      // The primordials hold built-ins (Array.prototype is an array).
      if (name === "primordials") continue;
      for (const key of Object.keys(entry)) {
        if (Array.isArray(entry[key]) && !Object.isFrozen(entry[key])) problems.push(`${name}.${key} is not frozen`);
      }
    }
    if (!Object.isFrozen(registry.primordials.intrinsicGlobals)) problems.push("primordials.intrinsicGlobals is not frozen");
    try {
      registry.provide("inspect", { __proto__: null });
      problems.push("inspect was provided twice");
    } catch {}
    return JSON.stringify({ names: Object.keys(registry), problems });
  })()"#;

  /// An isolate from the snapshot, not sealed.
  fn unsealed() -> JsRuntime {
    platform::ensure_initialized().expect("V8 initialises");
    JsRuntime::new(RuntimeOptions {
      startup_snapshot: Some(SNAPSHOT),
      extensions: vec![dsh_sandbox::init()],
      skip_op_registration: true,
      ..Default::default()
    })
  }

  #[test]
  fn every_lazy_source_compiles_and_a_later_isolate_takes_it_from_the_code_cache() {
    use dsh_sandbox_ext::lazy_sources::{compile, LAZY_SOURCES};
    // The first isolate may or may not find a cache (another test of this
    // process may have touched a lazy global first); the second must.
    for round in ["first", "second"] {
      let mut runtime = unsealed();
      deno_core::scope!(scope, runtime);
      for (index, source) in LAZY_SOURCES.iter().enumerate() {
        let compiled = compile(scope, index).unwrap_or_else(|| panic!("{} does not compile", source.name));
        if round == "second" {
          assert!(compiled.from_cache, "{} was compiled again, not taken from the cache", source.name);
        }
      }
      assert!(compile(scope, LAZY_SOURCES.len()).is_none(), "a number past the table names no source");
    }
  }

  #[test]
  fn every_provider_is_frozen_and_defined_once() {
    let mut runtime = unsealed();
    let result = runtime.execute_script("ext:dsh_test/registry.js", CHECK_REGISTRY).expect("the check runs");
    let text = {
      deno_core::scope!(scope, runtime);
      let local = v8::Local::new(scope, result);
      local.to_rust_string_lossy(scope)
    };
    let report: serde_json::Value = serde_json::from_str(&text).expect("the check's JSON");
    assert_eq!(report["problems"], serde_json::json!([]));
    assert_eq!(
      report["names"],
      serde_json::json!([
        "primordials",
        "native",
        "api",
        "losslessJson",
        "inspect",
        "console",
        "timers",
        "builtinProxies",
        "memoryCaps",
        "nodeErrors",
        "lazyGlobals",
        "eventOrder",
        "run",
        "seal"
      ])
    );
  }
}
