//! `structuredClone` as Node's: V8's serializer, with the host objects Node
//! has (a `DOMException` clones as one, `process.env` as a plain object; a
//! `URL` or `URLSearchParams` refuses, as in Node), the `transfer` option's
//! ArrayBuffers moved into the clone, and V8's clone errors thrown as
//! Node's `DataCloneError` (`js/lazy/structured_clone.js`).
//!
//! deno_core's `structuredClone` marks host objects with
//! `Symbol.for("Deno.core.hostObject")`, which any program can reach: it
//! may brand its own objects, and an object of its own that carries that
//! key fails to clone where Node clones it. Here the brand is a V8 private
//! ([`op_dsh_host_object`]), which no program can read, set or forge; only
//! the sandbox's own classes carry it, each set as its instance is made.

use std::cell::RefCell;
use std::rc::Rc;

use deno_core::v8::{ValueDeserializerHelper, ValueSerializerHelper};
use deno_core::{op2, v8, OpState};
use deno_error::JsErrorBox;

use crate::serialized_copy::SerializedCopy;
use crate::{hold_or_stop, host, run_memory};

/// The private's name (V8 keeps one per name and isolate; JS cannot reach
/// privates at all).
const HOST_OBJECT: &str = "dsh.structuredClone.hostObject";

/// What a host object's entry in the serialized bytes starts with (its
/// kind follows).
const CLONED_HOST_OBJECT: u32 = 1;

/// The host objects that clone, by the kind their clone function gives
/// (`[kind, data]`; the number is the index here, which the JS reads as
/// `protocol.hostObjects`). Each is made while V8 rebuilds the clone,
/// where no JS may run (V8 is halfway through building objects, which JS
/// could reshape), so it is made empty there by V8's API alone, and given
/// its data by `adopt(kind, object, data)` once the clone is whole.
pub const HOST_OBJECTS: [&str; 2] = [
  // A plain object, given the data's own members (`process.env`'s copy).
  "plainObject",
  // An Error whose prototype is `DOMException.prototype`.
  "domException",
];
const PLAIN_OBJECT: u32 = 0;
const DOM_EXCEPTION: u32 = 1;

/// Node's message for an object it has no way to clone.
const UNSUPPORTED: &str = "Cannot clone object of unsupported type.";

/// Node's message for a transfer list's buffer that is detached.
const DETACHED_TRANSFER: &str = "Cannot transfer object of unsupported type.";

/// The messages the JS throws too (`protocol.cloneMessages`), by name.
pub const MESSAGES: [(&str, &str); 1] = [("detachedTransfer", DETACHED_TRANSFER)];

fn host_object_brand<'s>(scope: &v8::PinScope<'s, '_>) -> Result<v8::Local<'s, v8::Private>, JsErrorBox> {
  let name = v8::String::new(scope, HOST_OBJECT).ok_or_else(|| JsErrorBox::generic("no room for a name"))?;
  Ok(v8::Private::for_api(scope, Some(name)))
}

/// Brand `object` (made by the sandbox's own code) as a host object:
/// `clone_function`, a function, is called with the object as `this` to
/// give `[kind, data]`, from which its clone is made (see [`HOST_OBJECTS`]);
/// any other value makes the object one `structuredClone` refuses. (An object
/// with interceptors, as `process.env`, is a host object to V8 whatever
/// its brand: unbranded, it is refused.)
#[op2(nofast)]
pub fn op_dsh_host_object(
  scope: &mut v8::PinScope,
  object: v8::Local<v8::Object>,
  clone_function: v8::Local<v8::Value>,
) -> Result<(), JsErrorBox> {
  let brand = host_object_brand(scope)?;
  object.set_private(scope, brand, clone_function);
  Ok(())
}

/// Clone `value` (V8's serializer and deserializer, in one call): each
/// ArrayBuffer of `transfer` (checked by the caller to be distinct,
/// detachable and attached, as Node's messages say; checked again here
/// as a backstop) moves into the clone and is detached here; a host
/// object is made as [`HOST_OBJECTS`] says (a DOMException with
/// `dom_exception_prototype`) and given its data by `adopt(kind, object,
/// data)` once the clone is whole; V8's refusals (and a refused host
/// object) throw `dataCloneError(message)`.
///
/// The host objects' data is written after the value, in rounds (the
/// data of those the value holds, then of those that data holds, ...),
/// each a list V8 serializes as it does the value: so data may refer to
/// any object of the clone (a DOMException whose stack is itself, or
/// what holds it), and a chain of them is as many rounds, not as deep a
/// recursion.
///
/// The serialized copy is bounded while V8 writes it (`serialized_copy.rs`):
/// one V8 refuses to grow past its ceiling stops the run at the external
/// cap, as the copies being written together could never fit it. Once
/// written, it is held against the cap until the clone is read back.
#[op2(reentrant)]
pub fn op_dsh_structured_clone<'s>(
  state: Rc<RefCell<OpState>>,
  scope: &mut v8::PinScope<'s, '_>,
  value: v8::Local<'s, v8::Value>,
  transfer: v8::Local<'s, v8::Array>,
  data_clone_error: v8::Local<'s, v8::Function>,
  dom_exception_prototype: v8::Local<'s, v8::Object>,
  adopt: v8::Local<'s, v8::Function>,
) -> Result<v8::Local<'s, v8::Value>, JsErrorBox> {
  let brand = host_object_brand(scope)?;
  let cloner = || Cloner { brand, data_clone_error, dom_exception_prototype, host_objects: Rc::default() };
  let mut buffers = Vec::with_capacity(transfer.length() as usize);
  for index in 0..transfer.length() {
    // A backstop: the caller made the list (Node's checks and messages).
    let buffer = transfer.get_index(scope, index).and_then(|item| v8::Local::<v8::ArrayBuffer>::try_from(item).ok());
    let buffer = buffer.ok_or_else(|| JsErrorBox::type_error("a transfer list holds ArrayBuffers only"))?;
    if !buffer.is_detachable() || buffer.was_detached() || buffers.contains(&buffer) {
      return Err(JsErrorBox::type_error("a transfer list's ArrayBuffers are distinct, attached and detachable"));
    }
    buffers.push(buffer);
  }

  let host = host(&state.borrow())?;
  let account = run_memory();
  // Twice the cap (see serialized_copy.rs for why). Outside a run, no bound.
  let copy = SerializedCopy::watch(account.map_or(usize::MAX, |account| account.limit().saturating_mul(2)));
  let writing = Box::new(cloner());
  // The data of each host object serialized, in the order they were met.
  let found = writing.host_objects.clone();
  let serializer = v8::ValueSerializer::new(scope, writing);
  copy.find_buffer(|| serializer.write_header());
  for (id, buffer) in (0u32..).zip(&buffers) {
    serializer.transfer_array_buffer(id, *buffer);
  }
  v8::tc_scope!(let scope, scope);
  let mut written = serializer.write_value(scope.get_current_context(), value);
  let mut rounds_from = 0;
  while written == Some(true) {
    let round: Vec<_> = found.borrow()[rounds_from..].iter().map(|(_, data)| v8::Local::new(scope, data)).collect();
    rounds_from += round.len();
    serializer.write_uint32(round.len() as u32);
    if round.is_empty() {
      break;
    }
    let round = v8::Array::new_with_elements(scope, &round);
    written = serializer.write_value(scope.get_current_context(), round.into());
  }
  if let Some(asked) = copy.refused() {
    // V8 gave up the clone (its DataCloneError is caught above, never
    // seen): the copies it asked to hold cannot fit the cap, whatever
    // garbage a collection frees, so the run stops at it. The watch ends
    // first: the buffer's address, once freed, may be another block's
    // while garbage is collected, and that one must never be refused.
    drop(copy);
    drop(serializer);
    host.admit_transient_memory(scope, asked);
    return Err(JsErrorBox::range_error("external memory limit reached"));
  }
  if scope.has_caught() || scope.has_terminated() {
    scope.rethrow();
    return Ok(v8::undefined(scope).into());
  }
  if written != Some(true) {
    return Err(JsErrorBox::type_error("structuredClone could not serialize the value"));
  }
  // A getter may have transferred one of them elsewhere meanwhile (a
  // structuredClone of its own): Node refuses it, as a detached one given.
  if buffers.iter().any(|buffer| buffer.was_detached()) {
    let message =
      v8::String::new(scope, DETACHED_TRANSFER).ok_or_else(|| JsErrorBox::generic("no room for a message"))?;
    let undefined = v8::undefined(scope).into();
    if let Some(error) = data_clone_error.call(scope, undefined, &[message.into()]) {
      scope.throw_exception(error);
    }
    // Thrown inside the TryCatch: passed on to the program.
    scope.rethrow();
    return Ok(v8::undefined(scope).into());
  }
  let bytes = serializer.release();
  // The buffer is the bytes' now: no longer watched.
  drop(copy);
  // Held until the clone is read back, and the op returns.
  let _copy_held = hold_or_stop(scope, &*host, bytes.len())?;
  // Detached only now: V8 reads a transferred buffer's views while it
  // serializes, and refuses a view of a detached buffer.
  let mut stores = Vec::with_capacity(buffers.len());
  for buffer in &buffers {
    stores.push(buffer.get_backing_store());
    buffer.detach(None);
  }

  let reading = Box::new(cloner());
  // The host objects it makes, in the order it meets them: the order
  // their data was written in.
  let made = reading.host_objects.clone();
  let deserializer = v8::ValueDeserializer::new(scope, reading, &bytes);
  let unreadable = || JsErrorBox::type_error("structuredClone could not read what it serialized");
  if deserializer.read_header(scope.get_current_context()) != Some(true) {
    return Err(unreadable());
  }
  for (id, store) in (0u32..).zip(&stores) {
    let buffer = v8::ArrayBuffer::with_backing_store(scope, store);
    deserializer.transfer_array_buffer(id, buffer);
  }
  let clone = deserializer.read_value(scope.get_current_context());
  let mut data = Vec::new();
  let mut round_length = 0;
  while clone.is_some() && deserializer.read_uint32(&mut round_length) && round_length > 0 {
    let round = deserializer.read_value(scope.get_current_context());
    let Some(round) = round.and_then(|round| v8::Local::<v8::Array>::try_from(round).ok()) else { break };
    data.extend((0..round.length()).filter_map(|at| round.get_index(scope, at)));
  }
  drop(deserializer);
  if scope.has_caught() || scope.has_terminated() {
    scope.rethrow();
    return Ok(v8::undefined(scope).into());
  }
  let clone = clone.ok_or_else(unreadable)?;
  let made = made.take();
  if made.len() != data.len() {
    return Err(unreadable());
  }
  // The clone is whole: JS may run again.
  let undefined = v8::undefined(scope).into();
  for ((kind, object), data) in made.into_iter().zip(data) {
    let kind = v8::Integer::new_from_unsigned(scope, kind).into();
    let object = v8::Local::new(scope, object);
    if adopt.call(scope, undefined, &[kind, object, data]).is_none() {
      scope.rethrow();
      return Ok(v8::undefined(scope).into());
    }
  }
  Ok(clone)
}

impl Cloner<'_> {
  /// Throw Node's error for an object it does not clone.
  fn refuse(&self, scope: &mut v8::PinScope<'_, '_>) -> Option<bool> {
    let message = v8::String::new(scope, UNSUPPORTED)?;
    v8::ValueSerializerImpl::throw_data_clone_error(self, scope, message);
    None
  }
}

/// The host objects of one clone, in the order V8 met them: each one's
/// kind, and (writing) the data its clone function gave or (reading) the
/// object made for it.
type HostObjects = Rc<RefCell<Vec<(u32, v8::Global<v8::Value>)>>>;

/// The serializer's and deserializer's delegate.
struct Cloner<'a> {
  brand: v8::Local<'a, v8::Private>,
  data_clone_error: v8::Local<'a, v8::Function>,
  dom_exception_prototype: v8::Local<'a, v8::Object>,
  host_objects: HostObjects,
}

impl v8::ValueSerializerImpl for Cloner<'_> {
  fn throw_data_clone_error<'s>(&self, scope: &mut v8::PinScope<'s, '_>, message: v8::Local<'s, v8::String>) {
    let undefined = v8::undefined(scope).into();
    // None: the call threw (or the run is being stopped), which stands.
    if let Some(error) = self.data_clone_error.call(scope, undefined, &[message.into()]) {
      scope.throw_exception(error);
    }
  }

  fn has_custom_host_object(&self, _isolate: &v8::Isolate) -> bool {
    true
  }

  fn is_host_object<'s>(&self, scope: &mut v8::PinScope<'s, '_>, object: v8::Local<'s, v8::Object>) -> Option<bool> {
    object.has_private(scope, self.brand)
  }

  fn write_host_object<'s>(
    &self,
    scope: &mut v8::PinScope<'s, '_>,
    object: v8::Local<'s, v8::Object>,
    serializer: &dyn v8::ValueSerializerHelper,
  ) -> Option<bool> {
    // Every way out without writing throws: V8 takes a return without an
    // exception for a write.
    let clone_function = object.get_private(scope, self.brand)?;
    let Ok(clone_function) = v8::Local::<v8::Function>::try_from(clone_function) else {
      return self.refuse(scope);
    };
    // JS may run while V8 serializes (getters do): it reads the original.
    let cloned = clone_function.call(scope, object.into(), &[])?;
    let Ok(cloned) = v8::Local::<v8::Array>::try_from(cloned) else { return self.refuse(scope) };
    let kind = cloned.get_index(scope, 0)?.uint32_value(scope)?;
    let data = cloned.get_index(scope, 1)?;
    if kind as usize >= HOST_OBJECTS.len() {
      return self.refuse(scope);
    }
    serializer.write_uint32(CLONED_HOST_OBJECT);
    serializer.write_uint32(kind);
    self.host_objects.borrow_mut().push((kind, v8::Global::new(scope, data)));
    Some(true)
  }

  // A SharedArrayBuffer is refused (Node's clone shares its memory): the
  // external-memory account charges a growable one to its first object
  // until that is collected, and a clone sharing its memory would outlive
  // the charge.
  fn get_shared_array_buffer_id<'s>(
    &self,
    scope: &mut v8::PinScope<'s, '_>,
    _shared_array_buffer: v8::Local<'s, v8::SharedArrayBuffer>,
  ) -> Option<u32> {
    let message = v8::String::new(scope, "#<SharedArrayBuffer> could not be cloned.")?;
    self.throw_data_clone_error(scope, message);
    None
  }

  fn get_wasm_module_transfer_id(
    &self,
    _scope: &mut v8::PinScope<'_, '_>,
    _module: v8::Local<v8::WasmModuleObject>,
  ) -> Option<u32> {
    None
  }
}

impl v8::ValueDeserializerImpl for Cloner<'_> {
  fn read_host_object<'s>(
    &self,
    scope: &mut v8::PinScope<'s, '_>,
    deserializer: &dyn v8::ValueDeserializerHelper,
  ) -> Option<v8::Local<'s, v8::Object>> {
    // Only bytes this op wrote are read here, each host object as
    // write_host_object wrote it. Nothing here runs JS: V8's API alone.
    let (mut tag, mut kind) = (0, 0);
    if !deserializer.read_uint32(&mut tag) || tag != CLONED_HOST_OBJECT || !deserializer.read_uint32(&mut kind) {
      return None;
    }
    let object = match kind {
      PLAIN_OBJECT => v8::Object::new(scope),
      DOM_EXCEPTION => {
        let empty = v8::String::empty(scope);
        let error = v8::Local::<v8::Object>::try_from(v8::Exception::error(scope, empty)).ok()?;
        // Its message is the prototype's getter's, from adopt's data.
        let message = v8::String::new(scope, "message")?;
        error.delete(scope, message.into())?;
        error.set_prototype(scope, self.dom_exception_prototype.into())?;
        error
      }
      _ => return None,
    };
    self.host_objects.borrow_mut().push((kind, v8::Global::new(scope, v8::Local::<v8::Value>::from(object))));
    Some(object)
  }

  fn get_shared_array_buffer_from_id<'s>(
    &self,
    _scope: &mut v8::PinScope<'s, '_>,
    _transfer_id: u32,
  ) -> Option<v8::Local<'s, v8::SharedArrayBuffer>> {
    None
  }

  fn get_wasm_module_from_id<'s>(
    &self,
    _scope: &mut v8::PinScope<'s, '_>,
    _clone_id: u32,
  ) -> Option<v8::Local<'s, v8::WasmModuleObject>> {
    None
  }
}
