//! Node's main thread listening on the hosts' Node bells
//! (`crate::node_bell`): which hosts are told to ring them, and what a
//! ring makes that thread do.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use dsh_protocol::frame::FromHost;
use dsh_protocol::inbox::Watching;
use dsh_protocol::lock::lock;

use super::host_life::Host;
use super::Supervisor;

/// The most frames one ring makes Node's main thread take off a host's
/// channel (more wait for the next ring, or for the reader).
const FRAMES_PER_RING: usize = 16;

impl Supervisor {
  /// The descriptor Node's main thread polls for rings, if there is one.
  pub fn node_bells_fd(&self) -> Option<std::os::fd::RawFd> {
    self.node_bells.as_ref().map(|bells| bells.fd())
  }

  /// Node's main thread polls the Node bells from now on: every host is
  /// told to ring its own.
  pub fn node_starts_listening(&self) {
    if self.node_bells.is_none() {
      return;
    }
    let hosts = lock(&self.hosts);
    self.node_listening.store(true, Ordering::SeqCst);
    for host in hosts.iter() {
      self.listen_to(host);
    }
  }

  /// Node's main thread no longer polls them: every host is told so, and
  /// each channel is looked at once more (what a host rang for before it
  /// was told wakes its reader). Any thread.
  pub fn node_stops_listening(&self) {
    let hosts = {
      let hosts = lock(&self.hosts);
      self.node_listening.store(false, Ordering::SeqCst);
      for host in hosts.iter() {
        self.stop_listening_to(host);
      }
      hosts.clone()
    };
    let mut watching = Watching::default();
    for host in &hosts {
      self.take_for_node(&mut watching, host);
    }
  }

  /// Put `host`'s bell in the set and tell the host (the caller holds
  /// `hosts`' lock).
  pub(super) fn listen_to(&self, host: &Arc<Host>) {
    let Some(bells) = &self.node_bells else { return };
    if host.node_bell_heard.swap(true, Ordering::SeqCst) {
      return;
    }
    if bells.add(host.node_bell.fd(), host.generation).is_ok() {
      host.inbox.say_node_listens(true);
    }
  }

  /// Take `host`'s bell out of the set and tell the host (the caller holds
  /// `hosts`' lock). The caller then looks at its channel once more if it
  /// may still be read (see [`Supervisor::node_stops_listening`]).
  pub(super) fn stop_listening_to(&self, host: &Arc<Host>) {
    let Some(bells) = &self.node_bells else { return };
    if !host.node_bell_heard.swap(false, Ordering::SeqCst) {
      return;
    }
    host.inbox.say_node_listens(false);
    bells.remove(host.node_bell.fd());
  }

  /// Node's main thread, woken by the Node bells: for each host that rang,
  /// take the rings, then the frames for Node whole at the head of its
  /// channel (see [`Supervisor::take_for_node`]); the host's reader is
  /// woken for anything else there. A host whose rings keep finding
  /// nothing to take is no longer listened to (`RingsInVain`).
  pub fn node_bell_rang(&self) {
    let Some(bells) = &self.node_bells else { return };
    let rung = bells.rung();
    if rung.is_empty() {
      return;
    }
    let hosts = lock(&self.hosts).clone();
    let mut watching = Watching::default();
    for generation in rung {
      let Some(host) = hosts.iter().find(|host| host.generation == generation) else { continue };
      host.node_bell.take_rings();
      let found = self.take_for_node(&mut watching, host);
      if !host.rings.looked(found) {
        let _hosts = lock(&self.hosts);
        self.stop_listening_to(host);
        // Looked at once more as `watching` ends (below): its reader is
        // woken for what is there.
      }
    }
  }

  /// Take the frames for Node (`FromHost::FOR_NODE_TAGS`) whole at the
  /// head of `host`'s channel, at most [`FRAMES_PER_RING`] (see
  /// [`Supervisor::take_frames`]). Whether any was taken.
  fn take_for_node(&self, watching: &mut Watching, host: &Arc<Host>) -> bool {
    self.take_frames(watching, host, &FromHost::FOR_NODE_TAGS, FRAMES_PER_RING)
  }
}
