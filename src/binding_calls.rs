//! Binding calls crossing from the isolate hosts' reader threads to Node's
//! main thread, and replies crossing back: the layouts both sides read
//! (napi constants the TS layer imports, so the numbers are defined once),
//! the outbox the reader threads fill, and the threadsafe function that
//! wakes the main thread ONCE per batch: while a wake-up is pending,
//! further calls only join the outbox, and the wake-up carries them all.
//! Calls the main thread takes itself when a host's Node bell wakes it
//! (`node_bell.rs`) it hands to JS at once ([`OnCallsHere`]).

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use dsh_protocol::config::spinning_helps;
use dsh_protocol::frame::{BindingCall, ReplyKind, ReplyText};
use dsh_protocol::inbox::Watching;
use dsh_protocol::lock::lock;
use dsh_protocol::out_of_band::RawString;
use dsh_protocol::text::{NotText, SharedBytes, Text};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi::{JsString, JsStringLatin1, JsStringUtf16};
use napi_derive::napi;

/// Numbers per binding call in the `ids` that `onCalls(ids, args)` receives:
/// run id, call id, namespace index, function index.
#[napi]
pub const BINDING_CALL_IDS: u32 = 4;

/// Numbers per reply in the `ids` that `reply(ids, texts)` takes: run id,
/// call id, how its text answers the call (one of the three below), and
/// how many long strings cross beside a JSON reply's text.
#[napi]
pub const REPLY_IDS: u32 = 4;

/// Reject the call with the message whose JSON string literal is the text.
#[napi]
pub const REPLY_REJECT: u32 = ReplyKind::Reject as u32;

/// Resolve the call with the value whose lossless JSON is the text.
#[napi]
pub const REPLY_JSON: u32 = ReplyKind::Json as u32;

/// Resolve the call with the text itself (a well-formed string).
#[napi]
pub const REPLY_TEXT: u32 = ReplyKind::Text as u32;

/// The seam's exact strings the harness produces too (`dsh_protocol::contract`).
/// Read by the TypeScript layer only (napi registers them outside test builds).
#[napi]
#[cfg_attr(test, allow(dead_code))]
pub const ARGUMENTS_NOT_LOSSLESS: &str = dsh_protocol::contract::ARGUMENTS_NOT_LOSSLESS;

/// See [`ARGUMENTS_NOT_LOSSLESS`].
#[napi]
#[cfg_attr(test, allow(dead_code))]
pub const RESOLUTION_NOT_LOSSLESS: &str = dsh_protocol::contract::RESOLUTION_NOT_LOSSLESS;

/// The binding calls of one wake-up, handed to `onCalls(ids, args)`:
/// call `i` is `(ids[4i], ids[4i+1], ids[4i+2], ids[4i+3], args[i])` =
/// (run id, call id, namespace index, function index, argument; see
/// [`BindingCallArgs`]). Columns, not one object per call: `Promise.all` over
/// thousands of calls crosses in one call with two arguments. The ids are
/// copied into a fresh ArrayBuffer: no finalizer, no reference to release.
pub struct BindingCallIds(Vec<u32>);

impl ToNapiValue for BindingCallIds {
  // Unsafe only because the trait is; napi-rs calls it on the JS thread.
  unsafe fn to_napi_value(raw_env: sys::napi_env, ids: Self) -> Result<sys::napi_value> {
    let env = Env::from_raw(raw_env);
    Ok(Uint32ArraySlice::copy_from(&env, &ids.0)?.raw())
  }
}

/// The arguments of one wake-up's calls, as `onCalls` receives them:
/// `args[i]` is call `i`'s lossless JSON text; or, when long strings of it
/// crossed beside the JSON (`dsh_protocol::out_of_band`, their places
/// checked when the frame was decoded), `[json, paths, ...strings]`. Each
/// such string is made from the bytes it crossed as (one-byte or UTF-16,
/// as the isolate held it), with no UTF-8 or JSON pass: see
/// [`argument_string`].
pub struct BindingCallArgs(Vec<BindingCall>);

/// From how many units a long string of an argument is handed to V8 as an
/// external string over the bytes it crossed as, instead of copied into
/// V8's heap. A copy of megabytes goes into fresh pages of V8's large
/// object space, a fault each: measured (A/B in one process, both orders),
/// 10 calls with a 4 MB argument took 0.64-0.65x the time with external
/// strings and 1 MB arguments 0.90-0.96x. Below this a copy is cheap, and
/// V8 copies short strings anyway.
const EXTERNAL_STRING_UNITS: usize = 64 * 1024;

/// One long string of a call's argument, as the tool will see it. Past
/// [`EXTERNAL_STRING_UNITS`] an external string: V8 reads the bytes where
/// they are (`SharedBytes`, which nothing writes once made, or the call's
/// own UTF-16 units, moved here) and the finalizer, which Node runs once V8
/// has collected the string (or at once, when V8 copies after all), drops
/// them. Their size is reported to V8 as external memory for as long as
/// the string holds them ([`ExternalBytes`]).
fn argument_string(env: &Env, string: RawString) -> Result<JsString<'_>> {
  match string {
    RawString::Latin1(bytes) if bytes.len() >= EXTERNAL_STRING_UNITS => {
      let (data, len) = (bytes.as_bytes().as_ptr(), bytes.len());
      let held = ExternalBytes::report(env, len, bytes);
      // SAFETY: the `len` bytes at `data` are `bytes`' own (an `Arc`'s,
      // immutable), and `bytes` itself, inside `held`, is the finalizer's
      // hint: they stay where they are, unchanged, until V8 finalizes the
      // string.
      Ok(unsafe { JsStringLatin1::from_external(env, data, len, held, ExternalBytes::release) }?.into_value())
    }
    RawString::Utf16(units) if units.len() >= EXTERNAL_STRING_UNITS => {
      let (data, len) = (units.as_ptr(), units.len());
      let held = ExternalBytes::report(env, len * 2, units);
      // SAFETY: the `len` units at `data` are the heap buffer of `units`,
      // which becomes the finalizer's hint inside `held` (moving a `Vec`
      // does not move its buffer) and is not written again: they stay
      // until V8 finalizes the string.
      Ok(unsafe { JsStringUtf16::from_external(env, data, len, held, ExternalBytes::release) }?.into_value())
    }
    RawString::Latin1(bytes) => env.create_string_latin1(&bytes),
    RawString::Utf16(units) => env.create_string_utf16(&units),
  }
}

/// What an external string of a tool's argument holds, reported to V8 as
/// external memory while it does. V8 does not count an external string's
/// bytes towards collecting it, and Node's heap sees only a small string
/// object each: without the report, a harness whose tools took 4 MB
/// arguments grew by 40 MB a run (10 calls), past 1 GB in 30 runs with no
/// collection at all, each argument's block mapped until then. Reported,
/// V8 starts collecting once they add up past its external-memory limit
/// (every 40-60 MB of them here), and the blocks come back to be read into
/// again (`large_block`).
struct ExternalBytes<T> {
  held: T,
  /// What V8 was told of (0 when it refused the report).
  reported: i64,
}

impl<T> ExternalBytes<T> {
  /// `held`, whose `bytes` V8 now counts. Balanced by [`Self::release`],
  /// which napi-rs calls exactly once whether the string is made or not
  /// (at once, when V8 copies the bytes or the call fails), past its own
  /// checks (a null pointer, a length past `isize::MAX`), which a buffer
  /// of 64 Ki units never fails.
  fn report(env: &Env, bytes: usize, held: T) -> ExternalBytes<T> {
    let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
    // Advice to V8's collector: a refusal changes when it collects, never
    // what the tool sees; what was not reported is not taken back.
    let reported = if env.adjust_external_memory(bytes).is_ok() { bytes } else { 0 };
    ExternalBytes { held, reported }
  }

  /// The string's finalizer: drop what it held, and take its report back.
  fn release(env: Env, held: ExternalBytes<T>) {
    drop(held.held);
    if held.reported != 0 {
      let _ = env.adjust_external_memory(-held.reported);
    }
  }
}

impl ToNapiValue for BindingCallArgs {
  // Unsafe only because the trait is; napi-rs calls it on the JS thread.
  unsafe fn to_napi_value(raw_env: sys::napi_env, args: Self) -> Result<sys::napi_value> {
    let env = Env::from_raw(raw_env);
    let mut out = env.create_array(index(args.0.len())?)?;
    for (at, call) in args.0.into_iter().enumerate() {
      if call.strings.is_empty() {
        out.set(index(at)?, call.args)?;
        continue;
      }
      let mut parts = env.create_array(index(call.strings.len() + 2)?)?;
      parts.set(0, call.args)?;
      parts.set(1, call.paths)?;
      for (at, string) in call.strings.into_iter().enumerate() {
        parts.set(index(at + 2)?, argument_string(&env, string)?)?;
      }
      out.set(index(at)?, parts)?;
    }
    Ok(out.raw())
  }
}

/// A reply's text as `reply(ids, texts)` takes it: a JS string as UTF-8
/// (a lone surrogate becomes U+FFFD, as with napi's own `String`; the
/// texts that must keep one cross as JSON literals). Unlike napi-rs's
/// `String`, which first asks V8 for the UTF-8 length (a pass over the
/// whole string, a tenth of what a 4 MB result cost) and zero-fills its
/// buffer, this writes once into room for the longest UTF-8 the string's
/// UTF-16 length allows (three bytes a unit; pages never written are never
/// touched) and gives back the rest. That room is a block of its own in
/// huge pages once it covers one (a text of ~700 K units on;
/// `dsh_protocol::text`), and the text is what the run's history keeps
/// and the reply's frame splices. A string written one byte a unit is all
/// ASCII (any other character takes two bytes or more a unit), so it
/// crosses as Latin-1 (`ReplyText::Latin1`), which nobody checks and V8
/// copies as it is; any other is checked to be UTF-8.
pub struct JsReplyText(pub ReplyText);

impl FromNapiValue for JsReplyText {
  // Unsafe only because the trait is; napi-rs calls it on the JS thread.
  unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
    let mut units = 0;
    // SAFETY: `env` and `value` are the live handles napi-rs passes; with
    // a null buffer napi only reports the string's length in UTF-16 units
    // (and fails with a status for a value that is not a string).
    let status = unsafe { sys::napi_get_value_string_utf16(env, value, std::ptr::null_mut(), 0, &mut units) };
    if status != sys::Status::napi_ok {
      return Err(Error::new(Status::StringExpected, "a reply's text must be a string"));
    }
    // Three UTF-8 bytes at most per unit (a pair of surrogates: four for two).
    let room = units.checked_mul(3).and_then(|bytes| bytes.checked_add(1));
    let room = room.ok_or_else(|| Error::new(Status::InvalidArg, "a reply's text too long"))?;
    let read = |buffer: &mut [MaybeUninit<u8>]| {
      let mut written = 0;
      // SAFETY: `buffer` is `buffer.len()` writable bytes, and napi writes
      // at most that many (the text and a NUL terminator) into it,
      // reporting in `written` how many bytes of text it wrote.
      let status =
        unsafe { sys::napi_get_value_string_utf8(env, value, buffer.as_mut_ptr().cast(), buffer.len(), &mut written) };
      if status != sys::Status::napi_ok || written >= buffer.len() {
        return Err(Error::new(Status::StringExpected, "a reply's text could not be read"));
      }
      Ok(written)
    };
    // SAFETY: napi initialised the `written` bytes it reports (checked
    // within the buffer above), and writes only bytes.
    let bytes = unsafe { SharedBytes::write(room, read) }?;
    let bytes = bytes.ok_or_else(|| Error::new(Status::InvalidArg, "a reply's text overran its room"))?;
    if bytes.len() == units {
      return Ok(JsReplyText(ReplyText::Latin1(bytes)));
    }
    // Checked, not assumed: V8 writes valid UTF-8, and a check costs a
    // fraction of the copy.
    let text = Text::checked(bytes).map_err(|NotText| Error::new(Status::InvalidArg, "a reply's text is not UTF-8"))?;
    Ok(JsReplyText(ReplyText::Utf8(text)))
  }
}

impl TypeName for JsReplyText {
  fn type_name() -> &'static str {
    "String"
  }

  fn value_type() -> ValueType {
    ValueType::String
  }
}

impl ValidateNapiValue for JsReplyText {}

/// A position in a JS array (a batch is far shorter than 2^32 items; one
/// that is not fails the wake-up instead of wrapping).
fn index(at: usize) -> Result<u32> {
  u32::try_from(at).map_err(|_| Error::new(Status::GenericFailure, "a batch of binding calls too long for an array"))
}

/// What `onCalls` is called with: one wake-up's calls.
pub type BindingCallBatch = FnArgs<(BindingCallIds, BindingCallArgs)>;

pub fn binding_call_batch(outbox: &Weak<CallOutbox>) -> BindingCallBatch {
  let calls = outbox.upgrade().map(|outbox| outbox.drain()).unwrap_or_default();
  FnArgs::from(batch_of(calls))
}

/// A batch's two arguments: the ids (`BINDING_CALL_IDS` per call), then
/// the arguments.
fn batch_of(calls: Vec<BindingCall>) -> (BindingCallIds, BindingCallArgs) {
  let mut ids = Vec::with_capacity(calls.len() * BINDING_CALL_IDS as usize);
  for call in &calls {
    ids.extend([call.run_id, call.call_id, call.namespace, call.function]);
  }
  (BindingCallIds(ids), BindingCallArgs(calls))
}

/// The calls a linger took ([`CallOutbox::linger`]), handed back to JS as
/// the linger's result: `[ids, args]`, as `onCalls` takes them.
pub struct LingeredCalls(Vec<BindingCall>);

impl ToNapiValue for LingeredCalls {
  // Unsafe only because the trait is; napi-rs calls it on the JS thread.
  unsafe fn to_napi_value(raw_env: sys::napi_env, calls: Self) -> Result<sys::napi_value> {
    let env = Env::from_raw(raw_env);
    let (ids, args) = batch_of(calls.0);
    let mut batch = env.create_array(2)?;
    // SAFETY: on the JS thread, as this function is.
    batch.set(0, unsafe { BindingCallIds::to_napi_value(raw_env, ids) }?)?;
    // SAFETY: as above.
    batch.set(1, unsafe { BindingCallArgs::to_napi_value(raw_env, args) }?)?;
    Ok(batch.raw())
  }
}

thread_local! {
  /// This thread (Node's main thread, in the Node bell's poll callback or
  /// its linger) hands the calls it queues to JS itself once it has taken
  /// them ([`OnCallsHere`], [`CallOutbox::linger`]): [`CallOutbox::push`]
  /// sends no wake-up for them.
  static HANDS_CALLS_ITSELF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While it lives, this thread hands the calls it queues to JS itself
/// (see [`HANDS_CALLS_ITSELF`]); dropped however the take ends (a flag
/// left set would keep later calls from JS).
struct HandingCallsItself;

impl HandingCallsItself {
  fn start() -> HandingCallsItself {
    HANDS_CALLS_ITSELF.with(|flag| flag.set(true));
    HandingCallsItself
  }
}

impl Drop for HandingCallsItself {
  fn drop(&mut self) {
    HANDS_CALLS_ITSELF.with(|flag| flag.set(false));
  }
}

/// `onCalls`, called straight from Node's main thread outside any JS turn
/// (the Node bell's poll callback: `node_bell.rs`), in a callback scope of
/// its own (`napi_make_callback`: the microtasks its calls queue run when
/// it returns, as after the threadsafe function's call). A call taken
/// there would otherwise cost the thread a second wake-up, the threadsafe
/// function's, and a turn of its event loop. Made, used and released on
/// that thread only.
pub struct OnCallsHere {
  env: sys::napi_env,
  /// A strong reference to `onCalls`; null once released.
  function: std::cell::Cell<sys::napi_ref>,
  /// The async context the calls run in (for async hooks).
  context: std::cell::Cell<sys::napi_async_context>,
  /// `onCalls` is running (a tool it called may dispose of the runtime,
  /// which releases this: the release then waits until the call returns,
  /// since napi_make_callback still uses the context).
  calling: std::cell::Cell<bool>,
  release_pending: std::cell::Cell<bool>,
}

impl Drop for OnCallsHere {
  fn drop(&mut self) {
    self.release();
  }
}

impl OnCallsHere {
  pub fn new(env: &Env, on_calls: &Function<BindingCallBatch, Unknown<'static>>) -> Result<OnCallsHere> {
    let raw = env.raw();
    let mut function = std::ptr::null_mut();
    // SAFETY: `on_calls` is a live function of this env, on its thread;
    // napi writes the new reference into the local.
    check_status!(unsafe { sys::napi_create_reference(raw, on_calls.value().value, 1, &mut function) })?;
    let name = env.create_string("dsh-code-runtime-v8 calls")?;
    let mut context = std::ptr::null_mut();
    // SAFETY: a live string of this env names the context; a null resource
    // asks napi for an empty object; napi writes the context.
    let made = check_status!(unsafe { sys::napi_async_init(raw, std::ptr::null_mut(), name.raw(), &mut context) });
    if let Err(error) = made {
      // SAFETY: the reference made above, released once.
      unsafe { sys::napi_delete_reference(raw, function) };
      return Err(error);
    }
    Ok(OnCallsHere {
      env: raw,
      function: std::cell::Cell::new(function),
      context: std::cell::Cell::new(context),
      calling: std::cell::Cell::new(false),
      release_pending: std::cell::Cell::new(false),
    })
  }

  /// Run `take` (which queues calls in `outbox` without waking anyone),
  /// then hand what it queued to `onCalls` now. Once released, `take`
  /// runs as any other taker: its calls wake the threadsafe function.
  pub fn take_and_hand(&self, outbox: &CallOutbox, take: impl FnOnce()) {
    let function = self.function.get();
    if function.is_null() {
      take();
      return;
    }
    // Cleared however `take` ends (a panic is caught by the poll's callback).
    let handing = HandingCallsItself::start();
    take();
    drop(handing);
    let calls = outbox.drain_taken_here();
    if calls.is_empty() {
      return;
    }
    // SAFETY: on the env's own thread, outside any JS turn, with the
    // env alive (this is released before it is torn down); every value
    // made lives in the handle scope opened here and closed below.
    unsafe {
      let mut scope = std::ptr::null_mut();
      if sys::napi_open_handle_scope(self.env, &mut scope) != sys::Status::napi_ok {
        outbox.requeue(calls);
        return;
      }
      if let Err(calls) = self.call(calls) {
        outbox.requeue(calls);
      }
      sys::napi_close_handle_scope(self.env, scope);
    }
  }

  /// Call `onCalls` with `calls`; the calls back when it could not be
  /// reached (for the threadsafe function to hand over). A batch that
  /// cannot be made into JS values is lost here as it would be there.
  ///
  /// # Safety
  /// In an open handle scope of the env, on its thread, outside JS.
  unsafe fn call(&self, calls: Vec<BindingCall>) -> std::result::Result<(), Vec<BindingCall>> {
    // SAFETY: the caller's promise; each value is made in its scope.
    unsafe {
      let mut function = std::ptr::null_mut();
      let mut receiver = std::ptr::null_mut();
      if sys::napi_get_reference_value(self.env, self.function.get(), &mut function) != sys::Status::napi_ok
        || function.is_null()
        // napi_make_callback takes an object as `this` (undefined is
        // refused); `onCalls` is an arrow function, which ignores it.
        || sys::napi_get_global(self.env, &mut receiver) != sys::Status::napi_ok
      {
        return Err(calls);
      }
      let (ids, args) = batch_of(calls);
      let (Ok(ids), Ok(args)) =
        (BindingCallIds::to_napi_value(self.env, ids), BindingCallArgs::to_napi_value(self.env, args))
      else {
        return Ok(());
      };
      let argv = [ids, args];
      let mut result = std::ptr::null_mut();
      self.calling.set(true);
      let status = sys::napi_make_callback(
        self.env,
        self.context.get(),
        receiver,
        function,
        argv.len(),
        argv.as_ptr(),
        &mut result,
      );
      self.calling.set(false);
      if self.release_pending.replace(false) {
        self.release();
      }
      if status == sys::Status::napi_pending_exception {
        // `onCalls` never throws; should it, Node reports it as it would
        // a throw in the threadsafe function's call.
        let mut error = std::ptr::null_mut();
        if sys::napi_get_and_clear_last_exception(self.env, &mut error) == sys::Status::napi_ok {
          sys::napi_fatal_exception(self.env, error);
        }
      }
      Ok(())
    }
  }

  /// Let go of `onCalls` and the context (on the env's thread, while it
  /// lives: the Node bell's listener does so as it closes, before the
  /// env's teardown ends); a second call does nothing.
  pub fn release(&self) {
    if self.calling.get() {
      self.release_pending.set(true);
      return;
    }
    let function = self.function.replace(std::ptr::null_mut());
    let context = self.context.replace(std::ptr::null_mut());
    if !function.is_null() {
      // SAFETY: made in `new` for this env, released once (the cells are
      // null from now on), on the env's thread.
      unsafe {
        sys::napi_delete_reference(self.env, function);
        sys::napi_async_destroy(self.env, context);
      }
    }
  }
}

/// The harness's side of the bridge: a wake-up that hands Node's main thread the
/// queued calls (see [`binding_call_batch`]). Weak (unref'd): pending runs keep
/// Node alive through their own promises, an idle runtime does not. Its JS
/// callback is ours (`BindingCalls.receive`), never throws, and its return
/// value is ignored.
pub type NodeWake = ThreadsafeFunction<(), Unknown<'static>, BindingCallBatch, Status, false, true>;

/// The host's wake-up: asks Node's main thread to come and take the outbox.
pub type WakeNode = Box<dyn Fn() + Send + Sync>;

/// Takes the frames for Node waiting whole at the head of the hosts'
/// channels (calls into the outbox, runs' ends) for the main thread's
/// linger (the supervisor's `take_for_linger`), with the linger's
/// [`Watching`] (the hosts' reader threads are not woken for what it
/// takes). Whether it took any.
pub type TakeForLinger = Box<dyn Fn(&mut Watching) -> bool + Send + Sync>;

#[derive(Default)]
struct Queued {
  calls: Vec<BindingCall>,
  /// Calls Node's main thread took and hands to JS itself ([`OnCallsHere`]).
  taken_here: Vec<BindingCall>,
  /// A wake-up is on its way to the main thread; no need to send another.
  wake_pending: bool,
}

/// Calls from every host, waiting for Node's main thread.
#[derive(Default)]
pub struct CallOutbox {
  queued: Mutex<Queued>,
  /// Mirrors `!queued.calls.is_empty()` for the main thread's spin (no lock).
  calls_waiting: AtomicBool,
  /// Set once, right after construction: the wake-up carries the outbox
  /// (weakly), so the outbox cannot be handed it at construction.
  wake_node: OnceLock<WakeNode>,
  /// Set once, when the supervisor exists (see [`TakeForLinger`]).
  take_for_linger: OnceLock<TakeForLinger>,
  spin: LingerSpin,
}

impl CallOutbox {
  /// Connect the main thread's wake-up; a second call is ignored.
  pub fn connect(&self, wake_node: WakeNode) {
    let _ = self.wake_node.set(wake_node);
  }

  /// Let the linger take frames off the hosts' channels; a second call is
  /// ignored.
  pub fn connect_take_for_linger(&self, take_for_linger: TakeForLinger) {
    let _ = self.take_for_linger.set(take_for_linger);
  }

  /// Queue calls a host sent (its reader thread, or the lingering main thread), waking the main thread
  /// unless a wake-up is already on its way.
  pub fn push(&self, calls: Vec<BindingCall>) {
    if HANDS_CALLS_ITSELF.with(std::cell::Cell::get) {
      // Node's main thread, which hands them to JS once it has taken
      // them ([`OnCallsHere`]).
      lock(&self.queued).taken_here.extend(calls);
      return;
    }
    let wake = {
      let mut queued = lock(&self.queued);
      queued.calls.extend(calls);
      self.calls_waiting.store(true, Ordering::Release);
      !std::mem::replace(&mut queued.wake_pending, true)
    };
    if wake {
      if let Some(wake_node) = self.wake_node.get() {
        wake_node();
      }
    }
  }

  /// The calls Node's main thread queued to hand to JS itself, with every
  /// call queued before them (so that calls keep their order).
  fn drain_taken_here(&self) -> Vec<BindingCall> {
    let mut queued = lock(&self.queued);
    let mut calls = std::mem::take(&mut queued.calls);
    calls.append(&mut queued.taken_here);
    // A wake-up already sent finds nothing, and hands JS an empty batch.
    self.calls_waiting.store(false, Ordering::Relaxed);
    calls
  }

  /// Calls that could not be handed to JS here after all: queued as any
  /// other, with a wake-up.
  fn requeue(&self, calls: Vec<BindingCall>) {
    let mut queued = lock(&self.queued);
    let later = std::mem::replace(&mut queued.calls, calls);
    queued.calls.extend(later);
    drop(queued);
    self.push(Vec::new());
  }

  /// Take every queued call (the main thread, once woken).
  pub fn drain(&self) -> Vec<BindingCall> {
    let mut queued = lock(&self.queued);
    queued.wake_pending = false;
    self.calls_waiting.store(false, Ordering::Relaxed);
    std::mem::take(&mut queued.calls)
  }

  /// The main thread, having answered a live run and finished its turn,
  /// waits briefly (see [`LINGER_SPIN`]) for the run's next call, so that the
  /// call's wake-up finds it awake instead of asleep in its event loop. Run
  /// after the turn ends (not inside it), so each call is still taken in a
  /// turn of its own and the harness's other work interleaves with them.
  /// Returns the calls queued when it ends, which the caller hands to JS
  /// itself (the turn it runs in is theirs): queued for the threadsafe
  /// function, each would cost the thread a wake-up of its own and a turn
  /// of its loop.
  pub fn linger(&self) -> Option<LingeredCalls> {
    if !spinning_helps() {
      return None;
    }
    // While it waits, it reads the hosts' channels itself: a call found
    // there needs no reader thread woken to pass it on, and the run's end,
    // when the run ends instead of calling again, no Node bell rung. Either
    // ends the wait.
    let mut watching = Watching::default();
    let handing = HandingCallsItself::start();
    self.spin.wait_for(|| {
      let taken = self.take_for_linger.get().is_some_and(|take| take(&mut watching));
      taken || self.calls_waiting.load(Ordering::Acquire)
    });
    drop(handing);
    let calls = self.drain_taken_here();
    (!calls.is_empty()).then_some(LingeredCalls(calls))
  }
}

/// How long the main thread, having answered, stays awake for the
/// program's next call (or its end) before returning to its event loop
/// (where it would sleep and need waking). The wait is bounded, never runs
/// JS, and backs off when it keeps missing (programs that compute between
/// calls, or a round trip longer than the wait), so it holds the harness's
/// event loop for about this per answered batch: past it, only the
/// handling of one frame per host it took off a channel (which takes the
/// supervisor's lock, held by others only briefly).
///
/// The time from an answer to the run's next call (the reply's crossing,
/// the pump's turn, the program's next step) is ~10-20 us for most calls
/// of a run on a 2-vCPU VM, with a tail of 30-60 us (~12% of a chain of
/// sequential calls, measured with a histogram of the linger's hits). At
/// 30 us that tail made runs alternate between two states: a run whose
/// misses came close together backed off, its main thread then slept
/// between calls and each call woke it (~37 us more on this VM), and the
/// whole run stayed there: 1000 sequential calls took 22-30 us a call in
/// about half the runs and 60-110 us in the rest. At 60 us ~97% of the
/// waits hit and every run took 23-27 us a call; Code Mode shaped runs, 6
/// calls, gaps between runs and the main thread's busy time per run
/// measured alike (paired, alternating run by run); 100 us measured no
/// better than 60, and a longer linger holds longer a CPU that the host's
/// threads may need on a machine of two.
const LINGER_SPIN: Duration = Duration::from_micros(60);

/// The main thread's adaptive wait for the next call (see [`LINGER_SPIN`]).
/// After `n` consecutive misses the next `2^n - 1` (at most 63) answered
/// batches skip the wait, so a program that never calls right back costs
/// the harness at most one wait in 64 answers; one hit restores it.
#[derive(Default)]
struct LingerSpin {
  misses: AtomicU32,
  skip: AtomicU32,
}

impl LingerSpin {
  fn wait_for(&self, mut ready: impl FnMut() -> bool) {
    let skip = self.skip.load(Ordering::Relaxed);
    if skip > 0 {
      self.skip.store(skip - 1, Ordering::Relaxed);
      return;
    }
    let until = Instant::now() + LINGER_SPIN;
    while !ready() {
      if Instant::now() >= until {
        let misses = (self.misses.load(Ordering::Relaxed) + 1).min(6);
        self.misses.store(misses, Ordering::Relaxed);
        self.skip.store((1 << misses) - 1, Ordering::Relaxed);
        return;
      }
      std::hint::spin_loop();
    }
    self.misses.store(0, Ordering::Relaxed);
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::cell::Cell;
  use std::sync::Arc;

  /// How many of `answers` waits consulted `ready` (i.e. were not skipped).
  fn waits(spin: &LingerSpin, answers: usize, ready: bool) -> usize {
    let consulted = Cell::new(0);
    for _ in 0..answers {
      let seen = Cell::new(false);
      spin.wait_for(|| {
        seen.set(true);
        ready
      });
      consulted.set(consulted.get() + usize::from(seen.get()));
    }
    consulted.get()
  }

  #[test]
  fn the_linger_backs_off_while_calls_do_not_follow_and_recovers_on_a_hit() {
    let spin = LingerSpin::default();
    // Misses back off 1, 3, 7, ... 63 answers: 200 answers wait 8 times.
    assert_eq!(waits(&spin, 200, false), 8);
    // Once the backoff has run out, one hit restores waiting on every answer.
    let skipped = spin.skip.load(Ordering::Relaxed) as usize;
    waits(&spin, skipped, true);
    assert_eq!(waits(&spin, 1, true), 1);
    assert_eq!(waits(&spin, 50, true), 50);
  }

  fn call(run_id: u32, call_id: u32) -> BindingCall {
    BindingCall {
      run_id,
      call_id,
      namespace: 0,
      function: 0,
      args: "[]".into(),
      paths: String::new(),
      strings: Vec::new(),
    }
  }

  /// The calls a linger finds come back as its result, after the calls a
  /// reader queued before them, with no wake-up sent for those it took;
  /// calls queued after it wake the main thread as before. (With one CPU
  /// the linger does not wait, and there is nothing to test.)
  #[test]
  fn a_linger_hands_back_the_calls_it_finds_without_a_wake_up_for_them() {
    if !spinning_helps() {
      eprintln!("one CPU: the linger never waits here");
      return;
    }
    let outbox = Arc::new(CallOutbox::default());
    let wakes = Arc::new(AtomicU32::new(0));
    let counted = wakes.clone();
    outbox.connect(Box::new(move || {
      counted.fetch_add(1, Ordering::SeqCst);
    }));
    // As the supervisor's take: a call found on a host's channel is pushed.
    let pushing = Arc::downgrade(&outbox);
    let next_id = AtomicU32::new(1);
    outbox.connect_take_for_linger(Box::new(move |_: &mut Watching| {
      let Some(outbox) = pushing.upgrade() else { return false };
      outbox.push(vec![call(7, next_id.fetch_add(1, Ordering::SeqCst))]);
      true
    }));
    // A call the linger takes is handed back, with no wake-up sent.
    let LingeredCalls(calls) = outbox.linger().expect("the linger's calls");
    let ids: Vec<_> = calls.iter().map(|call| (call.run_id, call.call_id)).collect();
    assert_eq!(ids, [(7, 1)]);
    assert_eq!(wakes.load(Ordering::SeqCst), 0, "a wake-up for the call the linger took");
    // A reader's call, queued (and woken for) before the linger, comes
    // back first, and its wake-up then finds nothing.
    outbox.push(vec![call(7, 0)]);
    assert_eq!(wakes.load(Ordering::SeqCst), 1);
    let LingeredCalls(calls) = outbox.linger().expect("the linger's calls");
    let ids: Vec<_> = calls.iter().map(|call| (call.run_id, call.call_id)).collect();
    assert_eq!(ids, [(7, 0), (7, 2)], "the reader's call first, then the one the linger took");
    assert_eq!(wakes.load(Ordering::SeqCst), 1);
    assert!(outbox.drain().is_empty(), "the wake-up already sent finds nothing");
    // Outside the linger a call is queued for a wake-up again.
    outbox.push(vec![call(7, 9)]);
    assert_eq!(wakes.load(Ordering::SeqCst), 2);
    assert_eq!(outbox.drain().len(), 1);
  }
}
