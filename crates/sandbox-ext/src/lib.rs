//! The deno_core extension that is a program's only door to the host.
//!
//! A crate of its own because two use it: the isolate host, and its
//! `build.rs`, which bakes the extension's JS (`js/*.js`) into the startup
//! snapshot. It depends on nothing of the host's: every op delegates to
//! the [`SandboxHost`] that the run puts into the `OpState`.
//!
//! Every op treats its caller as hostile: the bootstrap captures the ops
//! and deletes `Deno` before program code runs, but an op must still
//! validate what it receives, as if a program could call it directly.

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use deno_core::convert::ToV8;
use deno_core::{op2, v8, OpState};
use deno_error::JsErrorBox;
use dsh_protocol::frame::{encoded_call_len, ReplyText, MAX_CALL_BYTES};
use dsh_protocol::out_of_band::RawString;
use dsh_protocol::readings::Clock;
use dsh_protocol::text::SharedBytes;

// What the ops call, each beside its subject.
mod digest;
mod json_nesting;
pub mod lazy_sources;
mod process_env;
pub mod serialized_copy;
mod structured_clone;
mod whatwg_url;

use digest::{digest, DIGESTS};
use json_nesting::{json_nesting, JSON_NESTING_LEVEL_BYTES};
use lazy_sources::LAZY_SOURCES;
use process_env::op_dsh_process_env;
use structured_clone::{op_dsh_host_object, op_dsh_structured_clone, HOST_OBJECTS, MESSAGES as CLONE_MESSAGES};
use whatwg_url::{URL_PARTS, URL_SETTERS};

/// The run's reply pump: resolves with every reply that has arrived (at
/// least one).
pub type RepliesFuture = Pin<Box<dyn Future<Output = ReplyBatch>>>;

/// Replies to binding calls, as columns: reply `i` answers call `ids[i]`,
/// resolving when `oks[i]` with `texts[i]` itself when `raws[i]`, else with
/// the value whose JSON text it is (with `beside[i]`'s strings in their
/// places, when it has some); rejecting otherwise, with the message whose
/// JSON string literal is `texts[i]`. The bootstrap's pump receives it as
/// an object of these five arrays (`beside[i]` null or `{ paths, strings }`).
#[derive(Debug, Default)]
pub struct ReplyBatch {
  pub ids: Vec<u32>,
  pub oks: Vec<bool>,
  pub raws: Vec<bool>,
  pub texts: Vec<ReplyText>,
  pub beside: Vec<Option<StringsBeside>>,
}

/// The long strings of a JSON reply that crossed beside its text
/// (`dsh_protocol::frame::Answer`): the JSON array of their paths, and the
/// strings in that order.
#[derive(Debug)]
pub struct StringsBeside {
  pub paths: String,
  pub strings: Vec<ReplyText>,
}

/// Made by hand rather than by serde, for the texts' sake: serde makes
/// every string from UTF-8 (V8 checks and decodes it), while a Latin-1
/// text becomes a one-byte string copied as it is.
impl<'a> ToV8<'a> for ReplyBatch {
  type Error = JsErrorBox;

  fn to_v8<'i>(self, scope: &mut v8::PinScope<'a, 'i>) -> Result<v8::Local<'a, v8::Value>, JsErrorBox> {
    let ids: Vec<_> = self.ids.iter().map(|id| v8::Integer::new_from_unsigned(scope, *id).into()).collect();
    let oks: Vec<_> = self.oks.iter().map(|ok| v8::Boolean::new(scope, *ok).into()).collect();
    let raws: Vec<_> = self.raws.iter().map(|raw| v8::Boolean::new(scope, *raw).into()).collect();
    let texts = self.texts.iter().map(|text| reply_text(scope, text)).collect::<Result<Vec<_>, _>>()?;
    let mut beside = Vec::with_capacity(self.beside.len());
    for strings in &self.beside {
      let Some(StringsBeside { paths, strings }) = strings else {
        beside.push(v8::null(scope).into());
        continue;
      };
      let strings = strings.iter().map(|text| reply_text(scope, text)).collect::<Result<Vec<_>, _>>()?;
      let strings = v8::Array::new_with_elements(scope, &strings).into();
      let paths = v8::String::new(scope, paths).map(Into::into).ok_or_else(too_long)?;
      beside.push(object(scope, &[("paths", paths), ("strings", strings)])?);
    }
    let columns = [("ids", ids), ("oks", oks), ("raws", raws), ("texts", texts), ("beside", beside)];
    let columns = columns.map(|(name, column)| (name, v8::Array::new_with_elements(scope, &column).into()));
    object(scope, &columns)
  }
}

/// A reply's text as a V8 string (see [`ReplyText`]).
fn reply_text<'a>(scope: &mut v8::PinScope<'a, '_>, text: &ReplyText) -> Result<v8::Local<'a, v8::Value>, JsErrorBox> {
  let string = match text {
    ReplyText::Utf8(text) => v8::String::new_from_utf8(scope, text.as_bytes(), v8::NewStringType::Normal),
    ReplyText::Latin1(bytes) => v8::String::new_from_one_byte(scope, bytes, v8::NewStringType::Normal),
  };
  string.map(Into::into).ok_or_else(too_long)
}

fn too_long() -> JsErrorBox {
  JsErrorBox::range_error("a reply longer than a string can be")
}

/// An object of these properties and no prototype (as serde makes one):
/// defined, not set, so nothing a program put on `Object.prototype` sees
/// or changes them.
fn object<'a>(
  scope: &mut v8::PinScope<'a, '_>,
  properties: &[(&str, v8::Local<'a, v8::Value>)],
) -> Result<v8::Local<'a, v8::Value>, JsErrorBox> {
  let mut names = Vec::with_capacity(properties.len());
  for (name, _) in properties {
    let name = v8::String::new_from_one_byte(scope, name.as_bytes(), v8::NewStringType::Internalized);
    names.push(name.ok_or_else(|| JsErrorBox::range_error("a property name longer than a string can be"))?.into());
  }
  let values: Vec<_> = properties.iter().map(|(_, value)| *value).collect();
  let no_prototype = v8::null(scope).into();
  Ok(v8::Object::with_prototype_and_properties(scope, no_prototype, &names, &values).into())
}

/// How a program settled, as reported by the bootstrap's driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
  /// Completed with a lossless JSON value (the text is its JSON).
  Value,
  /// Completed with `undefined`.
  NoValue,
  /// Threw (the text is the rendered exception).
  Exception,
  /// Completed with a value that is not lossless JSON.
  InvalidOutput,
  /// Completed with a value too large for what the logs left.
  OutputLimit,
}

impl Settlement {
  /// Every settlement with the name the bootstrap knows it by; its code in
  /// `op_dsh_settle` is its index here (the one definition: the bootstrap
  /// reads the table through `op_dsh_protocol`).
  const ALL: [(Settlement, &'static str); 5] = [
    (Settlement::Value, "value"),
    (Settlement::NoValue, "noValue"),
    (Settlement::Exception, "exception"),
    (Settlement::InvalidOutput, "invalidOutput"),
    (Settlement::OutputLimit, "outputLimit"),
  ];

  fn from_code(code: u32) -> Option<Self> {
    Settlement::ALL.get(code as usize).map(|(settlement, _)| *settlement)
  }
}

/// The numbers the ops and the isolate's JS exchange, by name, defined in
/// this file once: the bootstrap (js/00_primordials.js) reads them while
/// the snapshot is made and refuses to build without every name it uses.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Protocol {
  /// `op_dsh_settle`'s codes.
  settle: std::collections::BTreeMap<&'static str, u32>,
  /// The components `op_dsh_url_parse` / `op_dsh_url_set` return, by index.
  url_parts: std::collections::BTreeMap<&'static str, u32>,
  /// `op_dsh_url_set`'s setters, by number.
  url_setters: std::collections::BTreeMap<&'static str, u32>,
  /// `op_dsh_digest`'s algorithms, by number.
  digests: std::collections::BTreeMap<&'static str, u32>,
  /// Each algorithm's digest size in bytes.
  digest_bytes: std::collections::BTreeMap<&'static str, u32>,
  /// `op_dsh_lazy_module`'s sources, by number.
  lazy_sources: std::collections::BTreeMap<&'static str, u32>,
  /// The seam's exact strings the isolate produces (`dsh_protocol::contract`).
  messages: std::collections::BTreeMap<&'static str, &'static str>,
  /// The words of a run's order of events (`dsh_protocol::readings`).
  event_order: std::collections::BTreeMap<&'static str, u32>,
  /// The kinds of host object a clone is made of (`structured_clone.rs`).
  host_objects: std::collections::BTreeMap<&'static str, u32>,
  /// Node's DataCloneError messages both sides throw (`structured_clone.rs`).
  clone_messages: std::collections::BTreeMap<&'static str, &'static str>,
}

fn numbered(names: &[&'static str]) -> std::collections::BTreeMap<&'static str, u32> {
  names.iter().enumerate().map(|(index, name)| (*name, index as u32)).collect()
}

/// The protocol table, for the bootstrap at snapshot time.
#[op2]
#[serde]
fn op_dsh_protocol() -> Protocol {
  Protocol {
    settle: numbered(&Settlement::ALL.map(|(_, name)| name)),
    url_parts: numbered(&URL_PARTS),
    url_setters: numbered(&URL_SETTERS),
    digests: numbered(&DIGESTS),
    digest_bytes: DIGESTS.iter().map(|name| (*name, digest(name, &[]).map_or(0, |bytes| bytes.len() as u32))).collect(),
    lazy_sources: numbered(&LAZY_SOURCES.map(|source| source.name)),
    messages: dsh_protocol::contract::MESSAGES.into_iter().collect(),
    event_order: [("timerFired", dsh_protocol::readings::TIMER_FIRED)].into_iter().collect(),
    host_objects: numbered(&HOST_OBJECTS),
    clone_messages: CLONE_MESSAGES.into_iter().collect(),
  }
}

/// What the ops ask of the run that owns the isolate.
pub trait SandboxHost {
  /// Append one log entry; false when the output cap is crossed (the run
  /// is then being stopped).
  fn log(&self, text: Vec<u16>) -> bool;
  /// Bytes of the output cap still free.
  fn output_remaining(&self) -> f64;
  /// Ask the host to call `namespace`'s `function` with these JSON args
  /// (and the long strings that cross beside them: `strings`, placed by
  /// the JSON array of their `paths`); returns the call's id, or refuses
  /// an unknown binding.
  fn call(
    &self,
    namespace: u32,
    function: u32,
    args: String,
    paths: String,
    strings: Vec<RawString>,
  ) -> Result<u32, String>;
  /// Wait for replies to this run's calls and take them all.
  fn replies(&self) -> RepliesFuture;
  /// The program settled (first report wins).
  fn settle(&self, settlement: Settlement, text: Vec<u16>);
  /// `process.exit(code)`.
  fn exit(&self, code: i32);
  /// Read one of the run's clocks (`dsh_protocol::readings::Clock`):
  /// the Unix time in ms, ms since the run started, or the CPU charged to
  /// it in us (what `computeMs` counts). A re-executed run reads what its
  /// history recorded first (`clocks.rs`).
  fn read_clock(&self, clock: Clock) -> f64;
  /// `process.memoryUsage()`'s figures, measured now, as the run reads
  /// them (a re-executed run reads the recorded ones first).
  fn read_memory(&self, figures: &mut [f64]);
  /// The order of events the run's history recorded
  /// (`dsh_protocol::readings::Readings::order`), for js/17_event_order.js
  /// to replay.
  fn recorded_order(&self) -> Vec<u32>;
  /// Events that reached the program live, in that order's words.
  fn events(&self, events: &[u32]);
  /// The event loop's turn now (see `op_dsh_turn`).
  fn turn(&self) -> u32;
  /// Bytes the run's external-memory account counts now
  /// (`process.memoryUsage().external`).
  fn external_memory_used(&self) -> f64;
  /// Check the memory the program holds outside the heap against its cap,
  /// collecting garbage first if it is over; false (and the run stopped)
  /// if it is still over.
  fn memory_check(&self, isolate: &mut v8::Isolate, v8_buffers: bool) -> bool;
  /// Whether `bytes` of memory a built-in is about to hold for a moment
  /// fit under the cap (after a GC, if they do not at first); false (and
  /// the run stopped) if not.
  fn admit_transient_memory(&self, isolate: &mut v8::Isolate, bytes: usize) -> bool;
  /// Charge `bytes` of memory outside the heap; the returned function
  /// gives them back. `None` past the cap (the run is stopped unless a
  /// later charge fits).
  fn charge_external_memory(&self, bytes: f64) -> Option<Box<dyn FnOnce()>>;
  /// Fill `buffer` with the run's next random bytes: one stream per run,
  /// seeded by the harness (`dsh_protocol::frame::RunSeed`), so that a run
  /// executed again draws the same numbers.
  fn fill_random(&self, buffer: &mut [u8]);
}

/// What the memory a run's ops hold outside the heap is reserved against
/// (a binding call's copies, a clone's serialized copy): the run's
/// external-memory account (`external_memory.rs`), which makes itself the
/// thread's [`set_run_memory`] while its run is attached.
pub trait RunMemory: Send + Sync {
  /// Reserve `bytes` until the returned guard is dropped (on any thread);
  /// `None` past the cap.
  fn hold(&self, bytes: usize) -> Option<HeldMemory>;
  /// The cap, in bytes.
  fn limit(&self) -> usize;
}

/// A reservation, given back when dropped.
pub type HeldMemory = Box<dyn Send>;

thread_local! {
  /// The account of the run attached on this thread.
  static RUN_MEMORY: RefCell<Option<Arc<dyn RunMemory>>> = const { RefCell::new(None) };
  /// The reservation [`with_held`] hands to the call it wraps.
  static HANDED: Cell<Option<HeldMemory>> = const { Cell::new(None) };
}

/// Make `memory` what the ops on this thread reserve against (`None` as
/// its run ends).
pub fn set_run_memory(memory: Option<Arc<dyn RunMemory>>) {
  RUN_MEMORY.with(|slot| *slot.borrow_mut() = memory);
}

/// The account of the run attached on this thread, if any.
fn run_memory() -> Option<Arc<dyn RunMemory>> {
  RUN_MEMORY.with(|slot| slot.borrow().clone())
}

/// Run `queue` with `held` handed to the call it queues on this thread
/// ([`take_handed`], from `Bridge::call`), whose queued call then holds it
/// until its frame is written. The way from the op to the bridge (the
/// run's [`SandboxHost::call`]) carries the argument only, so the
/// reservation goes beside it; if no call is queued (an unknown binding),
/// it is given back on return.
pub fn with_held<T>(held: Option<HeldMemory>, queue: impl FnOnce() -> T) -> T {
  drop(HANDED.with(|slot| slot.replace(held)));
  let result = queue();
  drop(HANDED.with(Cell::take));
  result
}

/// The reservation [`with_held`] handed to the call being queued now.
pub fn take_handed() -> Option<HeldMemory> {
  HANDED.with(Cell::take)
}

/// The slot in `OpState` that holds the current run's host.
pub struct HostSlot(pub Rc<dyn SandboxHost>);

fn host(state: &OpState) -> Result<Rc<dyn SandboxHost>, JsErrorBox> {
  state
    .try_borrow::<HostSlot>()
    .map(|slot| slot.0.clone())
    .ok_or_else(|| JsErrorBox::generic("no run is attached to this isolate"))
}

fn utf16(isolate: &v8::Isolate, text: &v8::String) -> Vec<u16> {
  let mut buffer = vec![0u16; text.length()];
  text.write_v2(isolate, 0, &mut buffer, v8::WriteFlags::empty());
  buffer
}

#[op2(nofast)]
fn op_dsh_log(state: &mut OpState, scope: &mut v8::PinScope, text: v8::Local<v8::String>) -> Result<bool, JsErrorBox> {
  let text = utf16(scope, &text);
  Ok(host(state)?.log(text))
}

#[op2(fast)]
fn op_dsh_output_remaining(state: &mut OpState) -> Result<f64, JsErrorBox> {
  Ok(host(state)?.output_remaining())
}

/// A call whose argument is all in its JSON. Not a fast call: a refused
/// reservation collects garbage, which V8's fast API calls must never do.
#[op2(nofast)]
fn op_dsh_call(
  state: &mut OpState,
  scope: &mut v8::PinScope,
  namespace: u32,
  function: u32,
  #[string] args: String,
) -> Result<u32, JsErrorBox> {
  let host = host(state)?;
  let held = hold_call(scope, &*host, encoded_call_len(args.len(), 0, []))?;
  with_held(held, || host.call(namespace, function, args, String::new(), Vec::new())).map_err(JsErrorBox::type_error)
}

/// A call whose argument's long strings cross beside its JSON (see
/// `dsh_protocol::out_of_band`): `paths` is the JSON array of where each
/// of `strings` goes. Each string is copied out as V8 holds it, one byte or
/// two per unit: no UTF-8 pass, and lone surrogates survive.
///
/// Every copy is reserved against the run's external-memory account before
/// it is made, and held until the frame that carries it is written
/// (`bridge.rs`): one heap string passed N times is N copies here.
#[op2(nofast)]
fn op_dsh_call_with_strings(
  state: &mut OpState,
  scope: &mut v8::PinScope,
  namespace: u32,
  function: u32,
  #[string] args: String,
  #[string] paths: String,
  strings: v8::Local<v8::Array>,
) -> Result<u32, JsErrorBox> {
  let host = host(state)?;
  let count = strings.length();
  let mut locals = Vec::with_capacity(count as usize);
  for index in 0..count {
    let string = strings
      .get_index(scope, index)
      .and_then(|value| v8::Local::<v8::String>::try_from(value).ok())
      .ok_or_else(|| JsErrorBox::type_error("an out-of-band string that is not a string"))?;
    locals.push(string);
  }
  let bytes = locals.iter().map(|string| string.length().saturating_mul(if string.is_onebyte() { 1 } else { 2 }));
  let held = hold_call(scope, &*host, encoded_call_len(args.len(), paths.len(), bytes))?;
  let mut raw = Vec::with_capacity(locals.len());
  for string in locals {
    raw.push(if string.is_onebyte() {
      let len = string.length();
      let write = |buffer: &mut [MaybeUninit<u8>]| {
        string.write_one_byte_uninit_v2(scope, 0, buffer, v8::WriteFlags::empty());
        Ok::<_, Infallible>(len)
      };
      // SAFETY: V8 writes all `len` characters of a one-byte string of
      // that length into the `len` bytes it is given, and only them.
      let Ok(Some(bytes)) = (unsafe { SharedBytes::write(len, write) }) else {
        return Err(JsErrorBox::type_error(dsh_protocol::contract::ARGUMENTS_NOT_LOSSLESS));
      };
      RawString::Latin1(bytes)
    } else {
      RawString::Utf16(utf16(scope, &string))
    });
  }
  // The paths and strings are the program's encoder's, which a program
  // that tampered with built-ins may have skewed: a call whose strings do
  // not fit its JSON fails here, as its own, rather than reach the harness
  // as a frame that would end this host.
  dsh_protocol::out_of_band::check_places(&args, &paths, raw.len())
    .map_err(|_| JsErrorBox::type_error(dsh_protocol::contract::ARGUMENTS_NOT_LOSSLESS))?;
  with_held(held, || host.call(namespace, function, args, paths, raw)).map_err(JsErrorBox::type_error)
}

/// Before a call's argument is copied out of the heap (or, for its JSON,
/// right after): reserve the `len` bytes its encoding takes against the
/// run's external-memory account, to be held until its frame is written.
///
/// A call longer than any frame may be ([`MAX_CALL_BYTES`]) fails as its
/// own, as a call whose argument cannot cross: the harness would refuse
/// its frame as hostile and end the host. It is not the cap's stop: the
/// cap (which may be set above 2 GiB) is not what it crossed, and the
/// program may catch the error and send the data in parts. Otherwise it
/// is held as [`hold_or_stop`] holds.
fn hold_call(scope: &mut v8::PinScope, host: &dyn SandboxHost, len: usize) -> Result<Option<HeldMemory>, JsErrorBox> {
  if len > MAX_CALL_BYTES {
    return Err(JsErrorBox::type_error(dsh_protocol::contract::ARGUMENTS_NOT_LOSSLESS));
  }
  hold_or_stop(scope, host, len)
}

/// Reserve `len` bytes against the run's external-memory account. Past
/// the cap, garbage is collected (buffers the program dropped are freed
/// only then) and the reservation tried once more; still refused, the run
/// is stopped at its cap as by every other route (`worker-exit`, naming
/// maxExternalMemoryMb), and the op fails meanwhile. Outside a run (no
/// account on this thread) nothing is reserved.
fn hold_or_stop(
  scope: &mut v8::PinScope,
  host: &dyn SandboxHost,
  len: usize,
) -> Result<Option<HeldMemory>, JsErrorBox> {
  let Some(account) = run_memory() else {
    return Ok(None);
  };
  if let Some(held) = account.hold(len) {
    return Ok(Some(held));
  }
  scope.low_memory_notification();
  if let Some(held) = account.hold(len) {
    return Ok(Some(held));
  }
  // The refusal stands: the check stops the run now, synchronously.
  host.memory_check(scope, false);
  Err(JsErrorBox::range_error("external memory limit reached"))
}

#[op2]
async fn op_dsh_replies(state: Rc<RefCell<OpState>>) -> Result<ReplyBatch, JsErrorBox> {
  let replies = host(&state.borrow())?.replies();
  Ok(replies.await)
}

#[op2(nofast)]
fn op_dsh_settle(
  state: &mut OpState,
  scope: &mut v8::PinScope,
  code: u32,
  text: v8::Local<v8::String>,
) -> Result<(), JsErrorBox> {
  let settlement = Settlement::from_code(code).ok_or_else(|| JsErrorBox::type_error("unknown settlement"))?;
  let text = utf16(scope, &text);
  host(state)?.settle(settlement, text);
  Ok(())
}

#[op2(fast)]
fn op_dsh_exit(state: &mut OpState, code: i32) -> Result<(), JsErrorBox> {
  host(state)?.exit(code);
  Ok(())
}

/// The run's wall clock: `Date.now()` and every built-in that reads it
/// (js/16_clock.js).
#[op2(fast)]
fn op_dsh_wall_now(state: &mut OpState) -> Result<f64, JsErrorBox> {
  Ok(host(state)?.read_clock(Clock::Wall))
}

#[op2(fast)]
fn op_dsh_now(state: &mut OpState) -> Result<f64, JsErrorBox> {
  Ok(host(state)?.read_clock(Clock::Monotonic))
}

#[op2(fast)]
fn op_dsh_cpu_usage(state: &mut OpState) -> Result<f64, JsErrorBox> {
  Ok(host(state)?.read_clock(Clock::Cpu))
}

/// The order of events the run's history recorded (js/17_event_order.js),
/// empty for a first execution.
#[op2]
#[serde]
fn op_dsh_recorded_order(state: &mut OpState) -> Result<Vec<u32>, JsErrorBox> {
  Ok(host(state)?.recorded_order())
}

/// The event loop's turn now, counted from the run's start: every promise
/// job queued in an earlier turn has run (js/17_event_order.js runs a live
/// batch of replies at once only in a turn in which no other event ran).
#[op2(fast)]
fn op_dsh_turn(state: &mut OpState) -> Result<u32, JsErrorBox> {
  Ok(host(state)?.turn())
}

/// Resolves in the event loop's next turn, after what this turn queued
/// (ticks, promise jobs) has run: js/17_event_order.js runs one replayed
/// event per turn.
#[op2(async(deferred), fast)]
async fn op_dsh_next_turn() {}

/// Events that reached the program live: a timer that fired, or a batch of
/// replies (js/17_event_order.js).
#[op2(fast)]
fn op_dsh_events(state: &mut OpState, #[buffer] events: &[u32]) -> Result<(), JsErrorBox> {
  host(state)?.events(events);
  Ok(())
}

/// `process.memoryUsage()`: the run's own isolate, never the host process.
/// Fills `out` with rss (the heap's committed pages plus the external
/// account), heapTotal, heapUsed, external (the run's account: allocator,
/// ICU, charged built-ins) and arrayBuffers (what V8 counts for them).
#[op2(nofast)]
fn op_dsh_memory_usage(
  state: &mut OpState,
  scope: &mut v8::PinScope,
  #[buffer] out: &mut [f64],
) -> Result<(), JsErrorBox> {
  let host = host(state)?;
  let external = host.external_memory_used();
  let stats = scope.get_heap_statistics();
  let mut figures = [
    stats.total_physical_size() as f64 + external,
    stats.total_heap_size() as f64,
    stats.used_heap_size() as f64,
    external,
    (stats.external_memory() as f64).min(external),
  ];
  host.read_memory(&mut figures);
  for (slot, figure) in out.iter_mut().zip(figures) {
    *slot = figure;
  }
  Ok(())
}

/// After a built-in that holds memory outside the allocator's view
/// (js/11_memory_caps.js): is the program still within its cap? Outside a
/// run there is nothing to check.
///
/// Not a fast call: the check may collect garbage, which V8's fast API
/// calls must never do.
#[op2(nofast)]
fn op_dsh_memory_check(state: &mut OpState, scope: &mut v8::PinScope, v8_buffers: bool) -> bool {
  match state.try_borrow::<HostSlot>() {
    Some(slot) => slot.0.memory_check(scope, v8_buffers),
    None => true,
  }
}

/// Charges that last as long as an object does (js/11_memory_caps.js: a
/// growable SharedArrayBuffer's maximum, an Intl object's memory that
/// ICU's allocator does not see), each given back when its object is
/// collected. Each object is the only holder of what it was charged for:
/// a SharedArrayBuffer cannot be cloned here, and an Intl object's ICU
/// objects are its own.
#[derive(Default)]
struct ChargesUntilCollected(Vec<v8::Weak<v8::Object>>);

/// Charge `bytes` to the run until `object` is collected. A refused charge
/// collects garbage and tries once more; false if it is still refused
/// (the run is then being stopped).
#[op2(nofast)]
fn op_dsh_charge_until_collected(
  state: &mut OpState,
  scope: &mut v8::PinScope,
  object: v8::Local<v8::Object>,
  bytes: f64,
) -> bool {
  let Some(host) = state.try_borrow::<HostSlot>().map(|slot| slot.0.clone()) else {
    return true;
  };
  let release = match host.charge_external_memory(bytes) {
    Some(release) => release,
    None => {
      scope.low_memory_notification();
      match host.charge_external_memory(bytes) {
        Some(release) => release,
        None => return false,
      }
    }
  };
  let weak = v8::Weak::with_finalizer(scope, object, Box::new(move |_| release()));
  let charges = state.try_borrow_mut::<ChargesUntilCollected>();
  let charges = match charges {
    Some(charges) => charges,
    None => {
      state.put(ChargesUntilCollected::default());
      state.borrow_mut::<ChargesUntilCollected>()
    }
  };
  charges.0.retain(|weak| !weak.is_empty());
  charges.0.push(weak);
  true
}

/// Before `JSON.parse` of a long text: whether the native memory its
/// nesting will take fits the program's cap (js/11_memory_caps.js).
///
/// V8's JSON parser keeps a continuation per open array or object on a
/// native stack, ~85 bytes each (measured: 5 million levels, 426 MiB),
/// before it makes any of the arrays on its heap: one '[' of text is
/// ~85 bytes of memory no cap saw. A refusal stops the run.
#[op2(nofast)]
fn op_dsh_json_nesting_admitted(state: &mut OpState, scope: &mut v8::PinScope, text: v8::Local<v8::String>) -> bool {
  let Some(host) = state.try_borrow::<HostSlot>().map(|slot| slot.0.clone()) else {
    return true;
  };
  let depth = {
    // The view reads the string in place; nothing below allocates on the
    // heap, so the string cannot move while it is read.
    let view = v8::ValueView::new(scope, text);
    match view.data() {
      v8::ValueViewData::OneByte(units) => json_nesting(units),
      v8::ValueViewData::TwoByte(units) => json_nesting(units),
    }
  };
  host.admit_transient_memory(scope, depth.saturating_mul(JSON_NESTING_LEVEL_BYTES))
}

/// Buffer: the UTF-8 length of `text` as Node counts it (V8's count: a
/// lone surrogate is the 3 bytes of the U+FFFD written in its place).
#[op2(nofast)]
fn op_dsh_utf8_length(scope: &mut v8::PinScope, text: v8::Local<v8::String>) -> u32 {
  // A string has at most 2^29 units of at most 3 bytes: u32 holds it.
  text.utf8_length(scope) as u32
}

/// Buffer: writes `text` as UTF-8 into `buffer` (memory the program's
/// allocator gave it, so it counts against the caps), whole characters
/// only, a lone surrogate as U+FFFD, as Node's Buffer does. Returns the
/// bytes written.
#[op2(nofast)]
fn op_dsh_utf8_write(scope: &mut v8::PinScope, text: v8::Local<v8::String>, #[buffer] buffer: &mut [u8]) -> u32 {
  text.write_utf8_v2(scope, buffer, v8::WriteFlags::kReplaceInvalidUtf8, None) as u32
}

/// Buffer: writes the low byte of each UTF-16 unit of `text` into `buffer`
/// (Node's latin1, binary and ascii encodings), as many as fit.
#[op2(nofast)]
fn op_dsh_latin1_write(scope: &mut v8::PinScope, text: v8::Local<v8::String>, #[buffer] buffer: &mut [u8]) -> u32 {
  text.write_one_byte_v2(scope, 0, buffer, v8::WriteFlags::empty());
  text.length().min(buffer.len()) as u32
}

/// Lazy source number `index` compiled as a function (see [`LAZY_SOURCES`]);
/// `undefined` for a number that names none, or when V8 did not compile it,
/// its exception then pending for the caller.
#[op2]
fn op_dsh_lazy_module<'s>(scope: &mut v8::PinScope<'s, '_>, index: u32) -> v8::Local<'s, v8::Value> {
  match lazy_sources::compile(scope, index as usize) {
    Some(compiled) => compiled.function.into(),
    None => v8::undefined(scope).into(),
  }
}

/// crypto.subtle.digest: hashes `data` with algorithm number `algorithm`
/// into `out`, memory the program's allocator gave (sized by the script to
/// the algorithm's `digestBytes`). False for an unknown algorithm or a
/// wrong size.
#[op2(fast)]
fn op_dsh_digest(algorithm: u32, #[buffer] data: &[u8], #[buffer] out: &mut [u8]) -> bool {
  match DIGESTS.get(algorithm as usize).and_then(|name| digest(name, data)) {
    Some(bytes) if bytes.len() == out.len() => {
      out.copy_from_slice(&bytes);
      true
    }
    _ => false,
  }
}

/// Fill `buffer` with the run's next random bytes (`Math.random`,
/// `crypto.getRandomValues`, `crypto.randomUUID`): a ChaCha20 stream the
/// harness seeded, never the kernel's, so a run executed again from its
/// history draws the same numbers.
#[op2(fast)]
fn op_dsh_random(state: &OpState, #[buffer] buffer: &mut [u8]) -> Result<(), JsErrorBox> {
  host(state)?.fill_random(buffer);
  Ok(())
}

/// For inspect: the entries of a Map/Set iterator from its current position,
/// without advancing it, as `[entries, isKeyValue]`; `undefined` for
/// anything else.
#[op2]
fn op_dsh_preview_entries<'s, 'i>(
  scope: &mut v8::PinScope<'s, 'i>,
  value: v8::Local<'s, v8::Value>,
) -> v8::Local<'s, v8::Value> {
  let undefined = v8::undefined(scope).into();
  let Ok(object) = v8::Local::<v8::Object>::try_from(value) else {
    return undefined;
  };
  let (Some(entries), is_key_value) = object.preview_entries(scope) else {
    return undefined;
  };
  let out = v8::Array::new(scope, 2);
  out.set_index(scope, 0, entries.into());
  let flag = v8::Boolean::new(scope, is_key_value);
  out.set_index(scope, 1, flag.into());
  out.into()
}

/// WHATWG URL parsing (`new URL(href, base)`): the URL's components, or
/// `None` when it does not parse.
#[op2]
#[serde]
fn op_dsh_url_parse(#[string] href: String, #[string] base: Option<String>) -> Option<Vec<String>> {
  whatwg_url::parse(&href, base.as_deref())
}

/// Apply a WHATWG setter (`url.pathname = ...`) to `href`: the new
/// components, or `None` when `href` itself does not parse.
#[op2]
#[serde]
fn op_dsh_url_set(#[string] href: String, setter: u32, #[string] value: String) -> Option<Vec<String>> {
  whatwg_url::set(&href, setter, &value)
}

deno_core::extension!(
  dsh_sandbox,
  ops = [
    op_dsh_log,
    op_dsh_output_remaining,
    op_dsh_call,
    op_dsh_call_with_strings,
    op_dsh_replies,
    op_dsh_settle,
    op_dsh_exit,
    op_dsh_wall_now,
    op_dsh_now,
    op_dsh_cpu_usage,
    op_dsh_memory_usage,
    op_dsh_recorded_order,
    op_dsh_events,
    op_dsh_turn,
    op_dsh_next_turn,
    op_dsh_random,
    op_dsh_url_parse,
    op_dsh_url_set,
    op_dsh_host_object,
    op_dsh_structured_clone,
    op_dsh_process_env,
    op_dsh_preview_entries,
    op_dsh_memory_check,
    op_dsh_charge_until_collected,
    op_dsh_json_nesting_admitted,
    op_dsh_utf8_length,
    op_dsh_utf8_write,
    op_dsh_latin1_write,
    op_dsh_lazy_module,
    op_dsh_digest,
    op_dsh_protocol,
  ],
  js = [
    dir "js",
    "00_primordials.js",
    "01_lossless_json.js",
    "02_inspect.js",
    "03_console.js",
    "04_timers.js",
    "10_builtin_proxies.js",
    "11_memory_caps.js",
    "12_interruptible.js",
    "13_node_errors.js",
    "14_lazy_globals.js",
    "15_random.js",
    "16_clock.js",
    "17_event_order.js",
    "18_atomics_wait.js",
    "99_bootstrap.js",
  ],
  // Built-in ops a program has no business reaching, disabled even though
  // the bootstrap already makes every op unreachable.
  middleware = |op| match op.name {
    "op_print" | "op_panic" | "op_eval_context" | "op_import_sync" | "op_lazy_load_esm"
    | "op_load_ext_script" | "op_set_format_exception_callback" | "op_memory_usage"
    | "op_leak_tracing_enable" | "op_leak_tracing_submit" | "op_leak_tracing_get_all"
    | "op_leak_tracing_get" => op.disable(),
    _ => op,
  },
);
