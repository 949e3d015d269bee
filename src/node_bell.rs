//! The Node bell, the harness's side: how a host wakes Node's main thread
//! itself for what that thread acts on.
//!
//! A host's frames are read by the host's reader thread, which wakes Node's
//! main thread for the calls and the run ends among them (`binding_calls`,
//! and the runs' promises). For a call made while both threads sleep, that
//! is two wake-ups in a row before a tool runs, each of a thread that may
//! sleep on a halted virtual CPU. So each host also has a Node bell
//! (`dsh_protocol::ring::NODE_BELL_FD`): the host rings it, instead of the
//! reader's data bell, for a frame of calls or a run's end short enough to
//! be taken whole (`FromHost::FOR_NODE_TAGS`), while the harness says it
//! listens (`ring::layout::NODE_LISTENS`). Every host's bell is in one
//! epoll set ([`NodeBells`]), which Node's main thread polls on its event
//! loop ([`NodeListener`], a libuv poll), so a ring wakes that thread
//! alone; it takes those frames off the host's channel as its linger takes
//! calls (`Supervisor::node_bell_rang`), and wakes the reader only for
//! what else is there.
//!
//! A host is hostile: it may ring its bell with nothing behind it, or
//! flood it. Each look at a ring costs Node's main thread a read of the
//! bell and a look at the channel's head, and a host whose rings bring far
//! fewer frames than looks ([`RingsInVain`]) is no longer listened to: its
//! frames go through its reader again, which serves every host that way
//! where Node is not there to poll (the crate's unit tests).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use napi::Env;

/// The epoll set of every live host's Node bell, for one runtime: each
/// registered under its host's generation.
pub struct NodeBells {
  epoll: OwnedFd,
}

/// The most hosts one look at the set reports (the rest stay ready for the
/// next look, level-triggered).
const READY_AT_ONCE: usize = 16;

impl NodeBells {
  pub fn new() -> io::Result<NodeBells> {
    // SAFETY: epoll_create1 takes a flag and returns a new descriptor.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
      return Err(io::Error::last_os_error());
    }
    // SAFETY: just returned by epoll_create1, open and owned by nobody.
    Ok(NodeBells { epoll: unsafe { OwnedFd::from_raw_fd(fd) } })
  }

  /// The descriptor Node's main thread polls: readable while a bell is.
  pub fn fd(&self) -> RawFd {
    self.epoll.as_raw_fd()
  }

  /// Listen to the bell at `bell` (a host's listening end), for the host of
  /// `generation`.
  pub fn add(&self, bell: RawFd, generation: u64) -> io::Result<()> {
    let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: generation };
    // SAFETY: epoll_ctl reads the live local `event`; both descriptors are
    // open (the caller holds the bell's).
    if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, bell, &mut event) } < 0 {
      return Err(io::Error::last_os_error());
    }
    Ok(())
  }

  /// Stop listening to the bell at `bell` (a host that ended, or is no
  /// longer listened to). A bell not in the set is no error.
  pub fn remove(&self, bell: RawFd) {
    let mut event = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: as in `add`; the event is ignored by EPOLL_CTL_DEL.
    unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, bell, &mut event) };
  }

  /// The generations of the hosts whose bells have rung, without waiting.
  pub fn rung(&self) -> Vec<u64> {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; READY_AT_ONCE];
    loop {
      // SAFETY: epoll_wait writes at most READY_AT_ONCE events into the
      // live local array; a timeout of 0 never waits.
      let ready = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), READY_AT_ONCE as c_int, 0) };
      if ready >= 0 {
        return events[..ready as usize].iter().map(|event| event.u64).collect();
      }
      if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
        return Vec::new();
      }
    }
  }
}

/// A host's record of its Node bell: how many of the looks its rings
/// cost found frames to take. Past [`RingsInVain::TOLERATED`] looks in
/// vain beyond [`RingsInVain::PER_FRAME`] per look that took frames, the
/// host is no longer listened to: a flood costs Node's main thread a
/// bounded number of looks per frame the host really sent.
#[derive(Default)]
pub struct RingsInVain {
  in_vain: AtomicU64,
  fruitful: AtomicU64,
}

impl RingsInVain {
  /// Looks in vain forgiven outright: an honest host's ring finds nothing
  /// when its reader, awake anyway, took the frame first.
  pub const TOLERATED: u64 = 64;
  /// Looks in vain forgiven per look that took frames.
  pub const PER_FRAME: u64 = 8;

  /// Count one look; whether the host is still worth listening to.
  pub fn looked(&self, found: bool) -> bool {
    let counter = if found { &self.fruitful } else { &self.in_vain };
    counter.fetch_add(1, Ordering::Relaxed);
    let in_vain = self.in_vain.load(Ordering::Relaxed);
    in_vain <= Self::TOLERATED + Self::PER_FRAME * self.fruitful.load(Ordering::Relaxed)
  }
}

/// libuv's functions this needs, looked up in the process (Node exports
/// libuv's symbols to addons; a process without them, such as the crate's
/// unit tests, has no Node loop to poll from).
struct Uv {
  handle_size: HandleSize,
  handle_type_name: HandleTypeName,
  poll_init: PollInit,
  poll_start: PollStart,
  poll_stop: HandleCall,
  close: Close,
  unref: HandleUnref,
}

// libuv's signatures (uv.h), handles as untyped pointers.
type HandleSize = unsafe extern "C" fn(c_int) -> usize;
type HandleTypeName = unsafe extern "C" fn(c_int) -> *const c_char;
type PollInit = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int) -> c_int;
type PollStart = unsafe extern "C" fn(*mut c_void, c_int, PollCallback) -> c_int;
type HandleCall = unsafe extern "C" fn(*mut c_void) -> c_int;
type Close = unsafe extern "C" fn(*mut c_void, CloseCallback);
type HandleUnref = unsafe extern "C" fn(*mut c_void);
type PollCallback = unsafe extern "C" fn(*mut c_void, c_int, c_int);
type CloseCallback = unsafe extern "C" fn(*mut c_void);

/// `UV_POLL` in libuv's `uv_handle_type` (checked by its name at lookup).
const UV_POLL: c_int = 8;
/// `UV_READABLE` in libuv's `uv_poll_event`.
const UV_READABLE: c_int = 1;

impl Uv {
  fn get() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| {
      let symbol = |name: &CStr| {
        // SAFETY: dlsym with RTLD_DEFAULT only looks a name up in the
        // objects already loaded; the name is a NUL-terminated literal.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        (!found.is_null()).then_some(found)
      };
      // SAFETY (each transmute): the symbol is libuv's function of that
      // name, whose C signature the field's type states (uv.h, stable
      // across libuv 1.x).
      let uv = unsafe {
        Uv {
          handle_size: std::mem::transmute::<*mut c_void, HandleSize>(symbol(c"uv_handle_size")?),
          handle_type_name: std::mem::transmute::<*mut c_void, HandleTypeName>(symbol(c"uv_handle_type_name")?),
          poll_init: std::mem::transmute::<*mut c_void, PollInit>(symbol(c"uv_poll_init")?),
          poll_start: std::mem::transmute::<*mut c_void, PollStart>(symbol(c"uv_poll_start")?),
          poll_stop: std::mem::transmute::<*mut c_void, HandleCall>(symbol(c"uv_poll_stop")?),
          close: std::mem::transmute::<*mut c_void, Close>(symbol(c"uv_close")?),
          unref: std::mem::transmute::<*mut c_void, HandleUnref>(symbol(c"uv_unref")?),
        }
      };
      // SAFETY: uv_handle_type_name returns a static string, or NULL for a
      // type it does not know.
      let name = unsafe { (uv.handle_type_name)(UV_POLL) };
      // SAFETY: a non-null name is a NUL-terminated static string.
      (!name.is_null() && unsafe { CStr::from_ptr(name) } == c"poll").then_some(uv)
    })
    .as_ref()
  }
}

/// What a poll's callback reaches through its handle's `data`.
struct PollState {
  /// A bell rang (or several did).
  on_ring: Box<dyn Fn()>,
  /// Nothing listens any more (the poll closed or broke): the supervisor
  /// stops saying it listens (`Supervisor::node_stops_listening`).
  on_stop: Box<dyn Fn()>,
}

/// Node's main thread polling a runtime's [`NodeBells`] on its event
/// loop (a libuv poll, unreferenced: it keeps no process alive). Made,
/// used and closed on that thread only (it is neither `Send` nor `Sync`).
pub struct NodeListener {
  uv: &'static Uv,
  /// The `uv_poll_t` (libuv's size, allocated here), its `data` the
  /// boxed [`PollState`]; null once closed.
  handle: std::cell::Cell<*mut c_void>,
}

/// The layout of a `uv_poll_t` allocation of `size` bytes.
fn handle_layout(size: usize) -> Option<std::alloc::Layout> {
  std::alloc::Layout::from_size_align(size, 16).ok()
}

impl NodeListener {
  /// Poll `fd` (a [`NodeBells`] set) on `env`'s event loop, calling
  /// `on_ring` on that thread whenever it is readable, and `on_stop` once
  /// it no longer polls (closed, or the poll failed). None where libuv is
  /// not in the process or the poll cannot start: the hosts' readers then
  /// pass every call on.
  pub fn start(env: &Env, fd: RawFd, on_ring: Box<dyn Fn()>, on_stop: Box<dyn Fn()>) -> Option<NodeListener> {
    let uv = Uv::get()?;
    let event_loop = env.get_uv_event_loop().ok().filter(|event_loop| !event_loop.is_null())?;
    // SAFETY: uv_handle_size takes a handle type and returns its size.
    let layout = handle_layout(unsafe { (uv.handle_size)(UV_POLL) })?;
    // SAFETY: the layout's size is libuv's non-zero size of a uv_poll_t.
    let handle = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<c_void>();
    if handle.is_null() {
      return None;
    }
    // SAFETY: `handle` is an allocation of a uv_poll_t's size for the
    // loop of this thread, which is where this runs; `fd` is open (the
    // supervisor holds it for as long as it lives, beyond this poll).
    if unsafe { (uv.poll_init)(event_loop.cast(), handle, fd) } != 0 {
      // A failed uv_poll_init leaves no handle in the loop: free it here.
      // SAFETY: allocated above with this layout, known to no one else.
      unsafe { std::alloc::dealloc(handle.cast(), layout) };
      return None;
    }
    let state = Box::into_raw(Box::new(PollState { on_ring, on_stop }));
    // SAFETY: a uv_handle_t's first field is `void* data`, the user's.
    unsafe { handle.cast::<*mut PollState>().write(state) };
    // SAFETY: an initialised poll handle; the callback reads `data`.
    let polling = unsafe { (uv.poll_start)(handle, UV_READABLE, on_poll) } == 0;
    // SAFETY: as above; unreferenced, the handle keeps no loop alive.
    unsafe { (uv.unref)(handle) };
    if !polling {
      // SAFETY: initialised, never started: closed once, and `on_closed`
      // frees it and its state.
      unsafe { (uv.close)(handle, on_closed) };
      return None;
    }
    Some(NodeListener { uv, handle: std::cell::Cell::new(handle) })
  }

  /// Stop polling and let the handle go (libuv frees it on the loop's next
  /// turn), saying first that nothing listens. A second call does nothing.
  pub fn close(&self) {
    let handle = self.handle.replace(std::ptr::null_mut());
    if handle.is_null() {
      return;
    }
    // SAFETY: a started poll handle of this thread's loop, its `data` the
    // state, freed only by `on_closed` below.
    unsafe { (*handle.cast::<*const PollState>().read()).stopped() };
    // SAFETY: closed once (the cell is null from now on); `on_closed`
    // frees the handle and its state.
    unsafe {
      (self.uv.poll_stop)(handle);
      (self.uv.close)(handle, on_closed);
    }
  }
}

impl Drop for NodeListener {
  fn drop(&mut self) {
    self.close();
  }
}

/// libuv's call when the polled set is readable (or the poll failed).
unsafe extern "C" fn on_poll(handle: *mut c_void, status: c_int, _events: c_int) {
  // SAFETY: libuv passes the handle it polls, whose `data` is the state
  // set before the poll started and freed only when the handle closes.
  let state = unsafe { &*handle.cast::<*const PollState>().read() };
  if status < 0 {
    // The set broke (it is the supervisor's, never closed before the
    // poll): stop looking at it; the readers pass every call on.
    state.stopped();
    if let Some(uv) = Uv::get() {
      // SAFETY: the started handle libuv called back with, on its thread.
      unsafe { (uv.poll_stop)(handle) };
    }
    return;
  }
  // A panic may not cross into libuv; the readers take over what it left.
  let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (state.on_ring)()));
}

impl PollState {
  fn stopped(&self) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.on_stop)()));
  }
}

/// libuv's call once a closed handle may be freed.
unsafe extern "C" fn on_closed(handle: *mut c_void) {
  // SAFETY: the handle was allocated by `NodeListener::start` with the
  // layout of libuv's size, its `data` the boxed state or null.
  unsafe {
    let state = handle.cast::<*mut PollState>().read();
    if !state.is_null() {
      drop(Box::from_raw(state));
    }
    if let Some(uv) = Uv::get() {
      if let Some(layout) = handle_layout((uv.handle_size)(UV_POLL)) {
        std::alloc::dealloc(handle.cast(), layout);
      }
    }
  }
}
