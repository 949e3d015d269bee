//! What this machine allows the runtime: its memory and its cores, which
//! bound config keys (`config_keys.rs`'s `Max`).

/// This machine's memory, in MiB (the bound of every memory key).
pub fn machine_memory_mb() -> f64 {
  // SAFETY: sysconf has no preconditions.
  let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
  if pages <= 0 || page <= 0 {
    return f64::MAX;
  }
  (pages as f64 * page as f64 / (1024.0 * 1024.0)).floor()
}

/// The cores this process may use (the bound of a key per core).
pub fn cores() -> usize {
  std::thread::available_parallelism().map_or(1, |cores| cores.get())
}
