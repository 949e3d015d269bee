//! The program's `process.env`, made as Node makes its own: an object whose
//! named properties V8 hands to interceptors (Node's `node_env_var.cc`),
//! here over a `Map` of the run's own, which starts empty. So it behaves as
//! Node's does where a plain object or a Proxy would not: every value set
//! is a string (a Symbol key or value throws V8's `TypeError`), a
//! descriptor other than a writable, enumerable, configurable data one is
//! refused with Node's error, a Symbol key reads as `undefined` and is never
//! a member, `delete` says `true`, and `Object.freeze` refuses it in V8's
//! words. (`structuredClone` copies it into a plain object, as Node's
//! does: `js/lazy/process.js` brands it for `structured_clone.rs`.)

use deno_core::{op2, v8};

/// Node's code for a descriptor `process.env` refuses.
const INVALID_DEFINE: &str = "ERR_INVALID_OBJECT_DEFINE_PROPERTY";
const DATA_ONLY: &str = "'process.env' only accepts a configurable, writable, and enumerable data descriptor";
const NO_ACCESSORS: &str = "'process.env' does not accept an accessor(getter/setter) descriptor";

/// A fresh, empty `process.env`.
#[op2]
pub fn op_dsh_process_env<'s>(scope: &mut v8::PinScope<'s, '_>) -> Option<v8::Local<'s, v8::Object>> {
  let members = v8::Map::new(scope);
  let template = v8::ObjectTemplate::new(scope);
  template.set_named_property_handler(
    v8::NamedPropertyHandlerConfiguration::new()
      .getter(get)
      .setter(set)
      .query(query)
      .deleter(delete)
      .enumerator(enumerate)
      .definer(define)
      .data(members.into()),
  );
  template.new_instance(scope)
}

fn members<'s>(args: &v8::PropertyCallbackArguments<'s>) -> Option<v8::Local<'s, v8::Map>> {
  v8::Local::<v8::Map>::try_from(args.data()).ok()
}

fn get<'s>(
  scope: &mut v8::PinScope<'s, '_>,
  key: v8::Local<'s, v8::Name>,
  args: v8::PropertyCallbackArguments<'s>,
  mut rv: v8::ReturnValue<v8::Value>,
) -> v8::Intercepted {
  if key.is_symbol() {
    rv.set_undefined();
    return v8::Intercepted::kYes;
  }
  let Some(members) = members(&args) else { return v8::Intercepted::kNo };
  // Every member is a string: undefined is no member.
  match members.get(scope, key.into()) {
    Some(value) if !value.is_undefined() => {
      rv.set(value);
      v8::Intercepted::kYes
    }
    _ => v8::Intercepted::kNo,
  }
}

/// Node's setter: the key and then the value converted to strings (either
/// conversion may throw, which stands).
fn store<'s>(
  scope: &mut v8::PinScope<'s, '_>,
  key: v8::Local<'s, v8::Name>,
  value: v8::Local<'_, v8::Value>,
  args: &v8::PropertyCallbackArguments<'s>,
) -> v8::Intercepted {
  let key: v8::Local<v8::Value> = key.into();
  let Some(key) = key.to_string(scope) else { return v8::Intercepted::kYes };
  let Some(value) = value.to_string(scope) else { return v8::Intercepted::kYes };
  if let Some(members) = members(args) {
    members.set(scope, key.into(), value.into());
  }
  v8::Intercepted::kYes
}

fn set<'s>(
  scope: &mut v8::PinScope<'s, '_>,
  key: v8::Local<'s, v8::Name>,
  value: v8::Local<'s, v8::Value>,
  args: v8::PropertyCallbackArguments<'s>,
  _rv: v8::ReturnValue<()>,
) -> v8::Intercepted {
  store(scope, key, value, &args)
}

fn query<'s>(
  scope: &mut v8::PinScope<'s, '_>,
  key: v8::Local<'s, v8::Name>,
  args: v8::PropertyCallbackArguments<'s>,
  mut rv: v8::ReturnValue<v8::Integer>,
) -> v8::Intercepted {
  let Some(members) = members(&args) else { return v8::Intercepted::kNo };
  if key.is_symbol() || members.has(scope, key.into()) != Some(true) {
    return v8::Intercepted::kNo;
  }
  // No attributes: writable, enumerable, configurable.
  rv.set_int32(0);
  v8::Intercepted::kYes
}

fn delete<'s>(
  scope: &mut v8::PinScope<'s, '_>,
  key: v8::Local<'s, v8::Name>,
  args: v8::PropertyCallbackArguments<'s>,
  mut rv: v8::ReturnValue<v8::Boolean>,
) -> v8::Intercepted {
  if let (false, Some(members)) = (key.is_symbol(), members(&args)) {
    members.delete(scope, key.into());
  }
  // Node's deleter says true for every key.
  rv.set_bool(true);
  v8::Intercepted::kYes
}

fn enumerate<'s>(
  scope: &mut v8::PinScope<'s, '_>,
  args: v8::PropertyCallbackArguments<'s>,
  mut rv: v8::ReturnValue<v8::Array>,
) {
  let Some(members) = members(&args) else { return };
  // [key, value, key, value, ...]
  let pairs = members.as_array(scope);
  let keys: Vec<_> = (0..pairs.length()).step_by(2).filter_map(|at| pairs.get_index(scope, at)).collect();
  rv.set(v8::Array::new_with_elements(scope, &keys));
}

fn define<'s>(
  scope: &mut v8::PinScope<'s, '_>,
  key: v8::Local<'s, v8::Name>,
  descriptor: &v8::PropertyDescriptor,
  args: v8::PropertyCallbackArguments<'s>,
  _rv: v8::ReturnValue<()>,
) -> v8::Intercepted {
  if descriptor.has_value() {
    let flags = descriptor.has_writable() && descriptor.has_enumerable() && descriptor.has_configurable();
    if flags && descriptor.writable() && descriptor.enumerable() && descriptor.configurable() {
      return store(scope, key, descriptor.value(), &args);
    }
    refuse(scope, DATA_ONLY);
  } else if descriptor.has_get() || descriptor.has_set() {
    refuse(scope, NO_ACCESSORS);
  } else {
    refuse(scope, DATA_ONLY);
  }
  v8::Intercepted::kYes
}

/// Throw Node's error for a refused descriptor: as Node's C++ makes it, a
/// `TypeError` with an enumerable `code` (its stack's first line without
/// the code).
fn refuse(scope: &mut v8::PinScope<'_, '_>, message: &str) {
  let (Some(message), Some(code_key), Some(code)) =
    (v8::String::new(scope, message), v8::String::new(scope, "code"), v8::String::new(scope, INVALID_DEFINE))
  else {
    return;
  };
  let error = v8::Exception::type_error(scope, message);
  if let Ok(object) = v8::Local::<v8::Object>::try_from(error) {
    object.set(scope, code_key.into(), code.into());
  }
  scope.throw_exception(error);
}
