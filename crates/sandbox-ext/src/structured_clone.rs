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

use deno_core::v8::{ValueDeserializerHelper, ValueSerializerHelper};
use deno_core::{op2, v8};
use deno_error::JsErrorBox;

/// The private's name (V8 keeps one per name and isolate; JS cannot reach
/// privates at all).
const HOST_OBJECT: &str = "dsh.structuredClone.hostObject";

/// What a host object's entry in the serialized bytes starts with.
const CLONED_HOST_OBJECT: u32 = 1;

/// Node's message for an object it has no way to clone.
const UNSUPPORTED: &str = "Cannot clone object of unsupported type.";

fn host_object_brand<'s>(scope: &v8::PinScope<'s, '_>) -> Result<v8::Local<'s, v8::Private>, JsErrorBox> {
  let name = v8::String::new(scope, HOST_OBJECT).ok_or_else(|| JsErrorBox::generic("no room for a name"))?;
  Ok(v8::Private::for_api(scope, Some(name)))
}

/// Brand `object` (made by the sandbox's own code) as a host object:
/// `clone`, a function, is called with the object as `this` to give the
/// data its clone is revived from (see [`op_dsh_structured_clone`]); any
/// other value makes the object one `structuredClone` refuses. (An object
/// with interceptors, as `process.env`, is a host object to V8 whatever
/// its brand: unbranded, it is refused.)
#[op2(nofast)]
pub fn op_dsh_host_object(
  scope: &mut v8::PinScope,
  object: v8::Local<v8::Object>,
  clone: v8::Local<v8::Value>,
) -> Result<(), JsErrorBox> {
  let brand = host_object_brand(scope)?;
  object.set_private(scope, brand, clone);
  Ok(())
}

/// Clone `value` (V8's serializer and deserializer, in one call): each
/// ArrayBuffer of `transfer` (checked by the caller to be distinct,
/// detachable and attached, as Node's messages say) moves into the clone
/// and is detached here; a host object's data is revived by `revive(data)`;
/// V8's refusals (and a refused host object) throw `dataCloneError(message)`.
#[op2(reentrant)]
pub fn op_dsh_structured_clone<'s>(
  scope: &mut v8::PinScope<'s, '_>,
  value: v8::Local<'s, v8::Value>,
  transfer: v8::Local<'s, v8::Array>,
  data_clone_error: v8::Local<'s, v8::Function>,
  revive: v8::Local<'s, v8::Function>,
) -> Result<v8::Local<'s, v8::Value>, JsErrorBox> {
  let brand = host_object_brand(scope)?;
  let mut buffers = Vec::with_capacity(transfer.length() as usize);
  for index in 0..transfer.length() {
    let buffer = transfer.get_index(scope, index).and_then(|item| v8::Local::<v8::ArrayBuffer>::try_from(item).ok());
    let buffer = buffer.ok_or_else(|| JsErrorBox::type_error("a transfer list holds ArrayBuffers only"))?;
    if !buffer.is_detachable() || buffer.was_detached() || buffers.contains(&buffer) {
      return Err(JsErrorBox::type_error("a transfer list's ArrayBuffers are distinct, attached and detachable"));
    }
    buffers.push(buffer);
  }

  let serializer = v8::ValueSerializer::new(scope, Box::new(Cloner { brand, data_clone_error, revive }));
  serializer.write_header();
  for (id, buffer) in (0u32..).zip(&buffers) {
    serializer.transfer_array_buffer(id, *buffer);
  }
  v8::tc_scope!(let scope, scope);
  let written = serializer.write_value(scope.get_current_context(), value);
  if scope.has_caught() || scope.has_terminated() {
    scope.rethrow();
    return Ok(v8::undefined(scope).into());
  }
  if written != Some(true) {
    return Err(JsErrorBox::type_error("structuredClone could not serialize the value"));
  }
  let bytes = serializer.release();
  // Detached only now: V8 reads a transferred buffer's views while it
  // serializes, and refuses a view of a detached buffer.
  let mut stores = Vec::with_capacity(buffers.len());
  for buffer in &buffers {
    stores.push(buffer.get_backing_store());
    buffer.detach(None);
  }

  let deserializer = v8::ValueDeserializer::new(scope, Box::new(Cloner { brand, data_clone_error, revive }), &bytes);
  if deserializer.read_header(scope.get_current_context()) != Some(true) {
    return Err(JsErrorBox::type_error("structuredClone could not read what it serialized"));
  }
  for (id, store) in (0u32..).zip(&stores) {
    let buffer = v8::ArrayBuffer::with_backing_store(scope, store);
    deserializer.transfer_array_buffer(id, buffer);
  }
  let clone = deserializer.read_value(scope.get_current_context());
  if scope.has_caught() || scope.has_terminated() {
    scope.rethrow();
    return Ok(v8::undefined(scope).into());
  }
  clone.ok_or_else(|| JsErrorBox::type_error("structuredClone could not read what it serialized"))
}

/// The serializer's and deserializer's delegate.
struct Cloner<'a> {
  brand: v8::Local<'a, v8::Private>,
  data_clone_error: v8::Local<'a, v8::Function>,
  revive: v8::Local<'a, v8::Function>,
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
    let clone = object.get_private(scope, self.brand)?;
    let Ok(clone) = v8::Local::<v8::Function>::try_from(clone) else {
      let message = v8::String::new(scope, UNSUPPORTED)?;
      self.throw_data_clone_error(scope, message);
      return None;
    };
    let data = clone.call(scope, object.into(), &[])?;
    serializer.write_uint32(CLONED_HOST_OBJECT);
    serializer.write_value(scope.get_current_context(), data)
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
    let mut tag = 0;
    // Only bytes this op wrote are read here, each host object as
    // write_host_object wrote it.
    if !deserializer.read_uint32(&mut tag) || tag != CLONED_HOST_OBJECT {
      return None;
    }
    let data = deserializer.read_value(scope.get_current_context())?;
    let undefined = v8::undefined(scope).into();
    let scope = std::pin::pin!(v8::AllowJavascriptExecutionScope::new(scope));
    let scope = &mut scope.init();
    self.revive.call(scope, undefined, &[data])?.to_object(scope)
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
