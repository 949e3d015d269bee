//! The sandbox's JS that is not in the snapshot: the lazy globals' modules
//! (`op_dsh_lazy_module`, js/14_lazy_globals.js), and the code cache that
//! lets every isolate after a host's first skip compiling them.

use std::sync::OnceLock;

use deno_core::v8;

/// One of the sandbox's JS sources kept out of the snapshot: the body of a
/// function, compiled in an isolate only when a program first touches one
/// of the globals it makes (js/14_lazy_globals.js says which).
pub struct LazySource {
  /// Its name in `protocol.lazySources` and js/14_lazy_globals.js.
  pub name: &'static str,
  /// The script name its frames carry (`ext:` marks them as the
  /// sandbox's own, which a program's stack leaves out).
  pub origin: &'static str,
  /// The function's parameters.
  pub parameters: &'static [&'static str],
  /// The function's body.
  pub body: &'static str,
}

/// A module of js/lazy/: the body of a function of `dsh` (the registry),
/// `host` and `engine` (the host's facts), named by its file.
macro_rules! module {
  ($name:literal, $file:literal) => {
    LazySource {
      name: $name,
      origin: concat!("ext:dsh_sandbox/lazy/", $file),
      parameters: &["dsh", "host", "engine"],
      body: include_str!(concat!("../js/lazy/", $file)),
    }
  };
}

/// Few programs use these, and in the snapshot they would be deserialized
/// into every isolate: more memory per waiting run and more time to
/// prepare each isolate. The number `op_dsh_lazy_module` takes is the
/// index here.
pub const LAZY_SOURCES: [LazySource; 11] = [
  // The `buffer` package, bundled (scripts/vendor-buffer.mjs): a script that
  // leaves the package's exports in `bufferPackage`, read through
  // `intrinsics` (js/14_lazy_globals.js, `packageIntrinsics`).
  LazySource {
    name: "bufferPackage",
    origin: "ext:dsh_sandbox/vendor/buffer_package.js",
    parameters: &["intrinsics"],
    body: concat!(include_str!("../js/vendor/buffer_package.js"), "\nreturn bufferPackage;"),
  },
  module!("buffer", "buffer.js"),
  module!("crypto", "crypto.js"),
  module!("events", "events.js"),
  module!("navigator", "navigator.js"),
  module!("performance", "performance.js"),
  module!("domException", "dom_exception.js"),
  module!("encoding", "encoding.js"),
  module!("url", "url.js"),
  module!("structuredClone", "structured_clone.js"),
  module!("process", "process.js"),
];

// Each body is handed to V8 as an external one-byte string (no copy into
// the isolate's heap), which only ASCII text can be.
const _: () = {
  let mut index = 0;
  while index < LAZY_SOURCES.len() {
    assert!(LAZY_SOURCES[index].body.is_ascii(), "a lazy source is not ASCII");
    index += 1;
  }
};

/// The code cache of each source, made by the first isolate in this
/// process that compiled it. Compiling is most of a first touch's cost
/// (the `URL` module's ~0.4 ms of CPU in a fresh isolate); taking the
/// compiled form from the cache is a copy. The cache is V8's own output
/// for our own text, checked by V8 against that text and its flags when
/// taken (a mismatch is compiled as if there were no cache): nothing a
/// program does can put anything else in it.
static CODE_CACHES: [OnceLock<Box<[u8]>>; LAZY_SOURCES.len()] = [const { OnceLock::new() }; LAZY_SOURCES.len()];

/// A lazy source compiled.
pub struct Compiled<'s> {
  pub function: v8::Local<'s, v8::Function>,
  /// V8 took its compiled form from the code cache.
  pub from_cache: bool,
}

/// Lazy source number `index` compiled as a function in the scope's
/// context, or `None` for a number that names none, or when V8 did not
/// compile it (its exception, such as a `RangeError` at the end of the
/// stack, or the run's termination, is then pending).
pub fn compile<'s>(scope: &mut v8::PinScope<'s, '_>, index: usize) -> Option<Compiled<'s>> {
  let lazy = LAZY_SOURCES.get(index)?;
  let cache = CODE_CACHES.get(index)?;
  let body = v8::String::new_external_onebyte_static(scope, lazy.body.as_bytes())?;
  let name = v8::String::new_external_onebyte_static(scope, lazy.origin.as_bytes())?;
  let origin = v8::ScriptOrigin::new(scope, name.into(), 0, 0, false, 0, None, false, false, false, None);
  let mut parameters = Vec::with_capacity(lazy.parameters.len());
  for parameter in lazy.parameters {
    parameters.push(v8::String::new_external_onebyte_static(scope, parameter.as_bytes())?);
  }
  let cached = cache.get();
  let (mut source, options) = match cached {
    Some(bytes) => (
      v8::script_compiler::Source::new_with_cached_data(body, Some(&origin), v8::CachedData::new(bytes)),
      v8::script_compiler::CompileOptions::ConsumeCodeCache,
    ),
    None => {
      (v8::script_compiler::Source::new(body, Some(&origin)), v8::script_compiler::CompileOptions::NoCompileOptions)
    }
  };
  let function = v8::script_compiler::compile_function(
    scope,
    &mut source,
    &parameters,
    &[],
    options,
    v8::script_compiler::NoCacheReason::NoReason,
  )?;
  if cached.is_none() {
    if let Some(made) = function.create_code_cache() {
      // Another thread may have set it meanwhile: either is the same.
      let _ = cache.set(made.to_vec().into_boxed_slice());
    }
  }
  let from_cache = cached.is_some() && source.get_cached_data().is_some_and(|data| !data.rejected());
  Some(Compiled { function, from_cache })
}
