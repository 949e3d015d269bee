//! The one way this crate locks a mutex.

use std::sync::Mutex;

/// Lock a mutex, recovering the data if a panicking thread poisoned it (the
/// state guarded here stays consistent under any interleaving).
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
  mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
