//! The protections an isolate host puts between a program that escapes V8
//! (native code in the host) and everything else, and the one bound on a
//! program's memory that rests on V8's internals (its compilers' zones):
//! what the host reports in `Ready`, what `stats().sandbox` shows, what
//! `requireSandbox` demands.
//!
//! The host applies them itself (`dsh_isolate_host::lockdown`) before any
//! program runs, so its report, sent before the first program, is its own
//! code speaking, not a program's. Each is best effort: a kernel that
//! refuses one (no seccomp, Landlock off, user namespaces forbidden) leaves
//! the host running with that protection off and saying so.

/// One protection. The discriminant is its bit in [`Protections`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
  /// A seccomp-bpf filter on every thread: only the system calls an
  /// isolate needs; the rest fail with `EPERM` (no files, sockets,
  /// processes, signals to others, ptrace, namespaces...).
  Seccomp = 1 << 0,
  /// `PR_SET_NO_NEW_PRIVS`: nothing the host runs can gain privileges.
  NoNewPrivs = 1 << 1,
  /// A Landlock domain that grants no file system access, no TCP
  /// bind/connect, no signals or abstract sockets out of the host.
  Landlock = 1 << 2,
  /// A user and a network namespace of its own: no network interface but
  /// a loopback that is down, and no capability in the harness's namespace.
  Namespaces = 1 << 3,
  /// No core dumps (`RLIMIT_CORE` 0) and not dumpable (which also stops
  /// ptrace by processes of the same user that lack the capability).
  NoDumps = 1 << 4,
  /// `oom_score_adj` 1000: the kernel's out-of-memory killer takes a host
  /// before the harness.
  OomFirst = 1 << 5,
  /// The watchdog reads what V8's compilers hold outside the heap for each
  /// run, and bounds it (`compiler_zones.rs` of the host: a field of V8's
  /// own, located once as the host starts).
  CompilerZones = 1 << 6,
}

impl Protection {
  /// Every protection, in the order `stats().sandbox` lists them.
  pub const ALL: [Protection; 7] = [
    Protection::Seccomp,
    Protection::NoNewPrivs,
    Protection::Landlock,
    Protection::Namespaces,
    Protection::NoDumps,
    Protection::OomFirst,
    Protection::CompilerZones,
  ];

  /// Its key in `stats().sandbox` (and in the README's table).
  pub fn name(self) -> &'static str {
    match self {
      Protection::Seccomp => "seccomp",
      Protection::NoNewPrivs => "noNewPrivs",
      Protection::Landlock => "landlock",
      Protection::Namespaces => "namespaces",
      Protection::NoDumps => "noDumps",
      Protection::OomFirst => "oomFirst",
      Protection::CompilerZones => "compilerZones",
    }
  }
}

/// A set of protections: the ones a host has in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Protections(u32);

impl Protections {
  /// Every protection.
  pub fn all() -> Protections {
    Protections(Protection::ALL.iter().fold(0, |bits, protection| bits | *protection as u32))
  }

  pub fn insert(&mut self, protection: Protection) {
    self.0 |= protection as u32;
  }

  pub fn contains(self, protection: Protection) -> bool {
    self.0 & protection as u32 != 0
  }

  /// The protections in both sets.
  pub fn intersection(self, other: Protections) -> Protections {
    Protections(self.0 & other.0)
  }

  /// The protections not in this set, by name ("seccomp, landlock").
  pub fn missing(self) -> Vec<&'static str> {
    Protection::ALL
      .iter()
      .filter(|protection| !self.contains(**protection))
      .map(|protection| protection.name())
      .collect()
  }

  /// The bits, as the `Ready` frame carries them.
  pub fn bits(self) -> u32 {
    self.0
  }

  /// From a `Ready` frame's bits; a bit no protection has is refused (the
  /// peer speaks another version of the protocol, or is broken).
  pub fn from_bits(bits: u32) -> Option<Protections> {
    (bits & !Protections::all().0 == 0).then_some(Protections(bits))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn bits_round_trip_and_unknown_bits_are_refused() {
    let mut some = Protections::default();
    some.insert(Protection::Seccomp);
    some.insert(Protection::OomFirst);
    assert_eq!(Protections::from_bits(some.bits()), Some(some));
    assert_eq!(some.missing(), vec!["noNewPrivs", "landlock", "namespaces", "noDumps", "compilerZones"]);
    assert_eq!(Protections::all().missing(), Vec::<&str>::new());
    assert_eq!(Protections::from_bits(1 << 7), None);
    assert_eq!(Protections::all().intersection(some), some);
  }
}
