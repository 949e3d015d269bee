//! Code a program compiles from a string (`eval`, `new Function` and the
//! other function constructors) is admitted by its size, against the run's
//! `maxExternalMemoryMb` account, before V8 parses it.
//!
//! V8's parser and bytecode generator hold their work in zones: memory
//! outside the heap, freed when the compile ends, that neither cap sees and
//! that grows with the source (30 shapes of source measured at 0.1 to ~165
//! bytes outside the heap per source unit; `new Function('x+'.repeat(1.2e7))`
//! held ~1 GiB under caps of 64 and 32 MiB). V8 shows an embedder each
//! source before compiling it only where the context refuses code from
//! strings and a callback decides instead
//! (`Isolate::SetModifyCodeGenerationFromStringsCallback`), so every
//! isolate's context refuses it and [`admit_source`] decides: a source is
//! compiled when [`ZONE_BYTES_PER_UNIT`] bytes per unit fit beside what the
//! account holds ([`ExternalMemory::admit_transient`]: after a GC if they do
//! not at first; a refusal stops the run as at its cap). Nothing stays
//! counted: the zones are gone when the compile returns. A function
//! compiled lazily later (an inner function's body, on its first call) is
//! part of a source admitted whole, so the zones and the account together
//! hold at most twice the cap.
//!
//! The program itself is compiled by the host (`run.rs`, `Script::compile`),
//! which asks no callback; its zones, and a regular expression's (which V8
//! compiles without asking either), are bounded from outside by the
//! watchdog (`compiler_zones.rs`).

use std::sync::Arc;

use deno_core::v8;

use crate::compiler_zones::ZONE_BYTES_PER_UNIT;
use crate::external_memory::ExternalMemory;

/// The isolate's account, for [`admit_source`] (an isolate slot: V8 gives
/// the callback no data of its own).
struct SourceAccount(Arc<ExternalMemory>);

/// Make `runtime`'s isolate admit each source compiled from a string by its
/// size against `account` (see the module doc).
pub fn admit_by_size(runtime: &mut deno_core::JsRuntime, account: Arc<ExternalMemory>) {
  let isolate = runtime.v8_isolate();
  isolate.set_slot(SourceAccount(account));
  // SAFETY: the pointer is the live isolate's, on the thread that owns it;
  // the callback is a plain function that lives as long as the process.
  unsafe { set_modify_code_generation_from_strings_callback(isolate.as_raw_isolate_ptr(), admit_source) };
  deno_core::scope!(scope, runtime);
  // V8 asks the callback only where the context refuses code from strings.
  scope.get_current_context().set_allow_generation_from_strings(false);
}

/// V8's `ModifyCodeGenerationFromStringsResult` (v8-callbacks.h of the
/// V8 the `v8` crate pins, 150.4.0): a bool, then a `MaybeLocal<String>`
/// (one pointer, null when empty; `Local` is trivially copyable there).
/// Sixteen bytes of two integer words, returned in registers as C++
/// returns it. The mangled name below checks the parameters' types at
/// link time, not this layout: a `v8` upgrade must check the header.
#[repr(C)]
struct CodeGenerationVerdict {
  codegen_allowed: bool,
  /// A replacement source; null keeps the program's own.
  modified_source: *const v8::String,
}

extern "C" {
  /// `void v8::Isolate::SetModifyCodeGenerationFromStringsCallback(
  /// ModifyCodeGenerationFromStringsCallback2)`, which rusty_v8 does not
  /// bind: a non-virtual member function, so the isolate is its first
  /// argument.
  #[link_name = "_ZN2v87Isolate42SetModifyCodeGenerationFromStringsCallbackEPFNS_37ModifyCodeGenerationFromStringsResultENS_5LocalINS_7ContextEEENS2_INS_5ValueEEEbE"]
  fn set_modify_code_generation_from_strings_callback(
    isolate: v8::UnsafeRawIsolatePtr,
    callback: extern "C" fn(v8::Local<v8::Context>, v8::Local<v8::Value>, bool) -> CodeGenerationVerdict,
  );
}

/// V8's callback before it compiles `source` from a string: compile it (as
/// it is) if its zones fit the account, else refuse (V8 throws an
/// `EvalError`, and the run is already stopped).
extern "C" fn admit_source(
  context: v8::Local<v8::Context>,
  source: v8::Local<v8::Value>,
  _is_code_like: bool,
) -> CodeGenerationVerdict {
  let allowed = |codegen_allowed| CodeGenerationVerdict { codegen_allowed, modified_source: std::ptr::null() };
  // A value that is not a string (V8 passes strings, but the type says
  // value): V8 then treats it as it would with code from strings allowed.
  let Ok(text) = v8::Local::<v8::String>::try_from(source) else {
    return allowed(true);
  };
  // SAFETY: V8 calls this on the isolate's thread, inside the compile
  // entry of a running program, with `context` live: where a callback may
  // open a scope on the isolate.
  v8::callback_scope!(unsafe scope, context);
  let Some(account) = scope.get_slot::<SourceAccount>().map(|slot| slot.0.clone()) else {
    return allowed(true);
  };
  let bytes = text.length().saturating_mul(ZONE_BYTES_PER_UNIT);
  allowed(account.admit_transient(scope, bytes))
}
