//! Memory the harness and a host both map: a sealed memfd. The harness
//! makes it (a host's lockdown refuses `memfd_create`) and hands the host
//! its descriptor at a fixed number, as it does the journal's; what lives
//! in it is `ring.rs`'s.
//!
//! Its size is sealed before the host sees it: a host cannot shrink it
//! under the harness's mapping (a page the harness touches past the end
//! would raise SIGBUS in the harness) or grow it, and cannot add or remove
//! a seal.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// One mapping of a shared region, read and written by this process and
/// the other; unmapped when dropped.
pub struct SharedRegion {
  base: NonNull<u8>,
  len: usize,
}

// SAFETY: the region is plain memory mapped for the life of the value;
// its users reach the words both sides write only as atomics (references
// to `AtomicU64`/`AtomicU32`, which may be shared) and its bytes only
// through raw-pointer copies, never through a `&[u8]` or `&mut [u8]`, so
// sharing the pointer across threads is as sound as across the two
// processes.
unsafe impl Send for SharedRegion {}
// SAFETY: as above.
unsafe impl Sync for SharedRegion {}

/// The seals a region has before a host sees it.
const SEALS: i32 = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

impl SharedRegion {
  /// A new region of `len` bytes (zeroed), sealed against changes of size
  /// and of seals, and mapped here; its descriptor (closed on exec) to
  /// hand to the other process.
  pub fn create(len: usize) -> io::Result<(SharedRegion, OwnedFd)> {
    const NAME: &CStr = c"dsh-channel";
    // SAFETY: `NAME` is a NUL-terminated string that outlives the call;
    // a descriptor memfd_create returns is new and owned by nobody else.
    let fd = unsafe { libc::memfd_create(NAME.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
      return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create, open and owned by nobody.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let size = libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: ftruncate and fcntl on a descriptor this function owns.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } < 0
      // SAFETY: as above.
      || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } < 0
    {
      return Err(io::Error::last_os_error());
    }
    let region = SharedRegion::map(&fd, len)?;
    Ok((region, fd))
  }

  /// Map the region at `fd`, which must be `len` bytes long and sealed as
  /// [`SharedRegion::create`] seals it (anything else is refused: a region
  /// of another size or one that could change size is not ours).
  pub fn map(fd: &OwnedFd, len: usize) -> io::Result<SharedRegion> {
    // SAFETY: fcntl on a descriptor the caller owns, borrowed for the call.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    // SAFETY: `stat` is a plain struct libc fills; all-zero is a valid value.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one `stat` into the live local `stat`.
    let sized = unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } == 0;
    if seals < 0 || !sized {
      return Err(io::Error::last_os_error());
    }
    if seals & SEALS != SEALS || usize::try_from(stat.st_size).ok() != Some(len) || len == 0 {
      return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a sealed region of the expected size"));
    }
    // SAFETY: a new shared mapping of `len` bytes of a file `len` bytes
    // long that can no longer shrink, so every page of it stays backed;
    // no existing memory is affected (the kernel picks the address).
    let base = unsafe {
      libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0)
    };
    if base == libc::MAP_FAILED {
      return Err(io::Error::last_os_error());
    }
    let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable))?;
    Ok(SharedRegion { base, len })
  }

  /// The first byte (page-aligned).
  pub fn base(&self) -> NonNull<u8> {
    self.base
  }

  pub fn len(&self) -> usize {
    self.len
  }

  pub fn is_empty(&self) -> bool {
    self.len == 0
  }
}

impl Drop for SharedRegion {
  fn drop(&mut self) {
    // SAFETY: unmaps exactly the mapping `map` made, which nothing uses
    // any more (every user holds the region, which is being dropped).
    unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  const LEN: usize = 64 * 1024;

  #[test]
  fn two_mappings_of_one_region_see_each_others_bytes() {
    let (first, fd) = SharedRegion::create(LEN).unwrap();
    let second = SharedRegion::map(&fd, LEN).unwrap();
    assert_ne!(first.base(), second.base());
    // SAFETY: both point at LEN live bytes of the same region.
    unsafe {
      first.base().as_ptr().add(LEN - 1).write_volatile(7);
      assert_eq!(second.base().as_ptr().add(LEN - 1).read_volatile(), 7);
    }
  }

  #[test]
  fn its_size_cannot_change_nor_its_seals_go() {
    let (_region, fd) = SharedRegion::create(LEN).unwrap();
    for size in [0, LEN as libc::off_t / 2, 2 * LEN as libc::off_t] {
      // SAFETY: ftruncate on a descriptor the test owns.
      assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), size) }, -1, "resized to {size}");
      assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EPERM));
    }
    // SAFETY: fcntl on a descriptor the test owns.
    assert_eq!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_WRITE) }, -1);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) } & SEALS, SEALS);
  }

  #[test]
  fn a_region_of_another_size_or_unsealed_is_refused() {
    let (_region, fd) = SharedRegion::create(LEN).unwrap();
    assert!(SharedRegion::map(&fd, LEN * 2).is_err());
    // SAFETY: a new memfd, owned by the test once wrapped.
    let unsealed = unsafe { libc::memfd_create(c"unsealed".as_ptr(), libc::MFD_CLOEXEC) };
    // SAFETY: as above.
    let unsealed = unsafe { OwnedFd::from_raw_fd(unsealed) };
    // SAFETY: ftruncate on a descriptor the test owns.
    assert_eq!(unsafe { libc::ftruncate(unsealed.as_raw_fd(), LEN as libc::off_t) }, 0);
    assert!(SharedRegion::map(&unsealed, LEN).is_err());
  }
}
