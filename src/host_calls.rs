//! Host calls crossing to the Node thread and replies crossing back: the
//! layouts both sides read (napi constants the TS layer imports, so the
//! numbers are defined once), and the threadsafe function that wakes the
//! host with a batch.

use std::sync::Weak;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use crate::bridge::Bridge;

/// Numbers per host call in the `ids` that `onCalls(ids, args)` receives:
/// run id, call id, namespace index, function index.
#[napi]
pub const HOST_CALL_IDS: u32 = 4;

/// Numbers per reply in the `ids` that `reply(ids, texts)` takes: run id,
/// call id, and 1 to resolve the call with its text or 0 to reject it.
#[napi]
pub const REPLY_IDS: u32 = 3;

/// The program-to-host calls of one wake-up, handed to `onCalls(ids, args)`:
/// call `i` is `(ids[4i], ids[4i+1], ids[4i+2], ids[4i+3], args[i])` =
/// (run id, call id, namespace index, function index, lossless JSON text of
/// the argument). Columns, not one object per call: `Promise.all` over
/// thousands of calls crosses in one call with two arguments. The ids are
/// copied into a fresh ArrayBuffer: no finalizer, no reference to release.
pub struct HostCallIds(Vec<u32>);

impl ToNapiValue for HostCallIds {
  // Unsafe only because the trait is; napi-rs calls it on the JS thread.
  unsafe fn to_napi_value(raw_env: sys::napi_env, ids: Self) -> Result<sys::napi_value> {
    let env = Env::from_raw(raw_env);
    Ok(Uint32ArraySlice::copy_from(&env, &ids.0)?.raw())
  }
}

pub fn host_call_batch(bridge: &Weak<Bridge>) -> FnArgs<(HostCallIds, Vec<String>)> {
  let calls = bridge.upgrade().map(|bridge| bridge.drain()).unwrap_or_default();
  let mut ids = Vec::with_capacity(calls.len() * HOST_CALL_IDS as usize);
  let mut args = Vec::with_capacity(calls.len());
  for call in calls {
    ids.extend([call.run_id, call.call_id, call.namespace, call.function]);
    args.push(call.args);
  }
  FnArgs::from((HostCallIds(ids), args))
}

/// The host side of the bridge: a wake-up that hands the Node thread the
/// queued calls (see [`host_call_batch`]). Weak (unref'd): pending runs keep
/// Node alive through their own promises, an idle runtime does not. Its JS
/// callback is ours (`HostCalls.receive`), never throws, and its return
/// value is ignored.
pub type HostWake = ThreadsafeFunction<(), Unknown<'static>, FnArgs<(HostCallIds, Vec<String>)>, Status, false, true>;
