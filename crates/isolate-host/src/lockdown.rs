//! The host's second wall. V8 is the first; a V8 bug that gives a program
//! native code in this process puts the attacker here, and this module
//! makes "here" worth nothing: no secret (the harness starts the host with
//! an empty environment and `/` as its working directory), no file
//! descriptor but the channel and stdio, no file system, no network, no
//! other process, no privilege, and the first process the kernel kills
//! when memory runs out. What it can still do is what a program could do
//! anyway: compute, and talk to the harness through the channel, whose
//! every byte the harness treats as hostile.
//!
//! Two steps, because the kernel allows some things only to a process with
//! one thread:
//! - [`before_threads`], first in `main`: inherited descriptors closed, no
//!   core dumps and not dumpable, `oom_score_adj` 1000, a user and a
//!   network namespace of its own, and a Landlock domain that grants
//!   nothing (before Landlock ABI 8, a domain covers only the thread that
//!   enters it and the threads it creates later, so it must come before
//!   V8 starts any).
//! - [`seal`], once V8 and the scheduler are initialised (the last files
//!   and system calls only start-up needs are behind it) and before the
//!   first program: the seccomp filter, on every thread at once (TSYNC).
//!
//! Every step is best effort: a kernel that refuses one leaves the host
//! running with that protection off, and the host says which in its
//! `Ready` ([`Protections`]); `requireSandbox` turns a missing one into a
//! refusal to start.

use std::collections::BTreeMap;

use dsh_protocol::protections::{Protection, Protections};
use seccompiler::{
  BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// What a refused system call returns: an error the caller sees (and a
/// test can check), not a kill, so that a refusal is never a crash of the
/// host's other runs.
const REFUSED: u32 = libc::EPERM as u32;

/// `prctl` naming an anonymous memory range (glibc names its thread
/// stacks' guards), not in the libc crate for glibc targets.
const PR_SET_VMA: i32 = 0x53564d41;

/// The steps that need a process with one thread. Call first in `main`.
pub fn before_threads() -> Protections {
  let mut applied = Protections::default();
  close_inherited_descriptors();
  // Before dumpable is cleared: a process that is not dumpable no longer
  // owns its /proc files, and could not write this one.
  if std::fs::write("/proc/self/oom_score_adj", "1000").is_ok() {
    applied.insert(Protection::OomFirst);
  }
  if no_dumps() {
    applied.insert(Protection::NoDumps);
  }
  // SAFETY: unshare only changes this process's namespaces; the process
  // has one thread, which CLONE_NEWUSER requires.
  if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } == 0 {
    applied.insert(Protection::Namespaces);
  }
  if landlock_nothing() {
    applied.insert(Protection::Landlock);
  }
  // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) only sets a flag of this process,
  // inherited by every thread it creates from here on.
  if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0 {
    applied.insert(Protection::NoNewPrivs);
  }
  applied
}

/// Install the seccomp filter on every thread. Call once the host is
/// initialised, before the first program runs.
pub fn seal(applied: &mut Protections) {
  if let Ok(filters) = filters() {
    // The filter that turns clone3 into ENOSYS goes first, the allow list
    // (which lets clone3 through to it) second: a later filter could not
    // be installed once the allow list refuses seccomp itself, and where
    // two filters return errors the later one's wins.
    let installed = filters.iter().all(|filter| seccompiler::apply_filter_all_threads(filter).is_ok());
    if installed {
      applied.insert(Protection::Seccomp);
    }
  }
}

/// Close every descriptor but the channel's socket (0), stdio (1, 2), the
/// journal (`JOURNAL_FD`) and the channel's shared region and doorbells
/// (up to `LAST_HANDED_FD`, the last the harness hands over), whatever the
/// process that started the host left open without `O_CLOEXEC`.
fn close_inherited_descriptors() {
  const FIRST_INHERITED: i32 = dsh_protocol::ring::LAST_HANDED_FD + 1;
  // SAFETY: close_range closes descriptors this process owns; nothing in
  // the host holds one above those handed over yet (this runs first in main).
  let closed = unsafe { libc::syscall(libc::SYS_close_range, FIRST_INHERITED as u32, u32::MAX, 0u32) } == 0;
  if !closed {
    // Kernels before 5.9: one by one, up to the descriptor limit.
    // SAFETY: sysconf has no preconditions.
    let limit = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(FIRST_INHERITED.into(), 1 << 20) as i32;
    for fd in FIRST_INHERITED..limit {
      // SAFETY: as above; a descriptor that is not open gives EBADF.
      unsafe { libc::close(fd) };
    }
  }
}

/// No core file, and not dumpable: a crash leaves no image of the host's
/// memory on disk, and processes of the same user cannot ptrace it or read
/// its memory through /proc without the capability to.
fn no_dumps() -> bool {
  let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
  // SAFETY: setrlimit reads the struct; prctl(PR_SET_DUMPABLE) sets a flag.
  unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) == 0 && libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 }
}

/// A Landlock domain that handles every access right this code knows
/// (files, TCP bind and connect, signals and abstract sockets out of the
/// domain) and grants none. True when the kernel enforced it.
fn landlock_nothing() -> bool {
  use landlock::{Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetStatus, Scope, ABI};
  // The newest ABI whose rights were vetted for this list.
  let abi = ABI::V6;
  let status = Ruleset::default()
    .handle_access(AccessFs::from_all(abi))
    .and_then(|ruleset| ruleset.handle_access(AccessNet::from_all(abi)))
    .and_then(|ruleset| ruleset.scope(Scope::from_all(abi)))
    .and_then(|ruleset| ruleset.create())
    .and_then(|ruleset| ruleset.restrict_self());
  matches!(status, Ok(status) if status.ruleset != RulesetStatus::NotEnforced)
}

/// The two seccomp programs, in installation order.
fn filters() -> Result<Vec<BpfProgram>, seccompiler::Error> {
  let arch = TargetArch::try_from(std::env::consts::ARCH)?;
  // glibc tries clone3 first and falls back to clone on ENOSYS; clone3's
  // flags are behind a pointer a filter cannot read, clone's are not.
  let clone3 = SeccompFilter::new(
    BTreeMap::from([(libc::SYS_clone3, vec![])]),
    SeccompAction::Allow,
    SeccompAction::Errno(libc::ENOSYS as u32),
    arch,
  )?;
  let allowed = SeccompFilter::new(allow_list()?, SeccompAction::Errno(REFUSED), SeccompAction::Allow, arch)?;
  Ok(vec![clone3.try_into()?, allowed.try_into()?])
}

/// The system calls a host makes once initialised: V8 and its allocator
/// (memory maps and protection keys for JIT code), threads (created, named,
/// synchronised, ended), clocks and sleeps, reading and writing the
/// descriptors it already has (the channel, stdio). Nothing opens a path,
/// makes a descriptor, or reaches another process.
fn allow_list() -> Result<BTreeMap<i64, Vec<SeccompRule>>, seccompiler::Error> {
  let any = |syscall: i64| (syscall, vec![]);
  let mut rules: BTreeMap<i64, Vec<SeccompRule>> = [
    // The descriptors the host has.
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_recvmsg,
    libc::SYS_sendmsg,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_lseek,
    libc::SYS_fcntl,
    libc::SYS_close,
    // Memory.
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_pkey_alloc,
    libc::SYS_pkey_free,
    libc::SYS_pkey_mprotect,
    libc::SYS_membarrier,
    // Threads: their start (clone is below, with its flags checked), their
    // signal masks and stacks, their synchronisation, their end.
    libc::SYS_clone3,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_set_tid_address,
    libc::SYS_sigaltstack,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigreturn,
    libc::SYS_futex,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_getparam,
    libc::SYS_gettid,
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_restart_syscall,
    // Time, randomness, and facts about the machine a program may already
    // know (the CPU's architecture, the kernel's release).
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_gettimeofday,
    libc::SYS_getrandom,
    libc::SYS_getrusage,
    libc::SYS_uname,
    libc::SYS_getrlimit,
  ]
  .into_iter()
  .map(any)
  .collect();

  let when = |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions);
  let arg = |index: u8, op: SeccompCmpOp, value: u64| SeccompCondition::new(index, SeccompCmpArgLen::Qword, op, value);
  // Threads, never processes: clone only with CLONE_THREAD.
  let thread = libc::CLONE_THREAD as u64;
  rules.insert(libc::SYS_clone, vec![when(vec![arg(0, SeccompCmpOp::MaskedEq(thread), thread)?])?]);
  // Signals only to itself (abort() raises SIGABRT with tgkill).
  // SAFETY: getpid has no preconditions.
  let pid = unsafe { libc::getpid() } as u64;
  rules.insert(libc::SYS_tgkill, vec![when(vec![arg(0, SeccompCmpOp::Eq, pid)?])?]);
  // prctl only to name threads and memory (V8, glibc), never to undo a
  // protection (PR_SET_DUMPABLE, PR_SET_PDEATHSIG, ...).
  rules.insert(
    libc::SYS_prctl,
    [libc::PR_SET_NAME, libc::PR_GET_NAME, PR_SET_VMA]
      .into_iter()
      .map(|option| when(vec![arg(0, SeccompCmpOp::Eq, option as u64)?]))
      .collect::<Result<_, _>>()?,
  );
  // The one priority change: a run thread lowering itself into the
  // program plane (`program_priority`), never back up, never by another
  // amount, never another thread's (all three are ints to the kernel).
  let word = |index: u8, value: u64| SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value);
  rules.insert(
    libc::SYS_setpriority,
    vec![when(vec![
      word(0, libc::PRIO_PROCESS as u64)?,
      word(1, 0)?,
      // As the kernel reads it: an int (a negative nice is its two's complement).
      word(2, u64::from(crate::program_priority::program_nice() as u32))?,
    ])?],
  );
  // Its own thread's CPUs, never another's (`cpu_placement`: a run's
  // thread moving off the CPU its answers come from). A thread the kernel
  // would let it place (within the host's own CPUs) is a thread the
  // scheduler may place there anyway.
  rules.insert(libc::SYS_sched_setaffinity, vec![when(vec![word(0, 0)?])?]);
  // Its own limits, read, never raised.
  rules.insert(libc::SYS_prlimit64, vec![when(vec![arg(0, SeccompCmpOp::Eq, 0)?, arg(2, SeccompCmpOp::Eq, 0)?])?]);
  Ok(rules)
}

#[cfg(test)]
mod tests {
  //! The lockdown attacked from inside, as native code in a host would
  //! attack it: a child process of the test applies the very functions the
  //! host calls (`before_threads`, `seal`), then makes each forbidden call
  //! and reports what it got. The child is forked, so it starts with one
  //! thread, as the host's `main` does.

  use super::*;
  use std::io::Read;
  use std::net::TcpListener;
  use std::os::fd::{FromRawFd, OwnedFd};

  /// Run `body` in a forked child; return what it wrote to its pipe, and
  /// its exit status.
  fn in_child(body: impl FnOnce(&mut dyn FnMut(&str))) -> (String, i32) {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only runs `body` and _exits; glibc's fork leaves
    // malloc usable in the child.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
      // The child: its report goes to fd 1, where the host's stdout is;
      // lockdown closes everything above the journal.
      // SAFETY: dup2 and close on descriptors this child owns.
      unsafe {
        libc::dup2(fds[1], 1);
        libc::close(fds[0]);
      }
      let mut say = |line: &str| {
        let line = format!("{line}\n");
        // SAFETY: writes a buffer this closure owns to fd 1.
        unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
      };
      body(&mut say);
      // SAFETY: ends the child without running the test harness's code.
      unsafe { libc::_exit(0) };
    }
    // SAFETY: the parent owns the write end; closed here so that the read
    // ends when the child exits.
    unsafe { libc::close(fds[1]) };
    // SAFETY: the parent owns the read end, and nothing else closes it.
    let mut read = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fds[0]) });
    let mut report = String::new();
    read.read_to_string(&mut report).unwrap();
    let mut status = 0;
    // SAFETY: waits for the child this test forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    (report, status)
  }

  fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
  }

  /// `name=<errno>` for a call that returned -1, `name=ok` otherwise.
  fn outcome(name: &str, result: i64) -> String {
    if result == -1 {
      format!("{name}={}", errno())
    } else {
      format!("{name}=ok")
    }
  }

  #[test]
  fn every_protection_holds_against_native_code_in_the_host() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (report, status) = in_child(|say| {
      let mut applied = before_threads();
      // A thread that exists before the filter, as V8's do: TSYNC must
      // cover it too.
      let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
      let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
      let early = std::thread::spawn(move || {
        ready_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // SAFETY: a syscall with no pointer arguments.
        outcome("thread-socket", unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) } as i64)
      });
      ready_rx.recv().unwrap();
      // Landlock alone (before seccomp): opening a file is refused.
      let path = c"/etc/hostname";
      // SAFETY: a NUL-terminated path.
      say(&outcome("landlock-open", unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) } as i64));
      seal(&mut applied);
      // Every protection but the one the host's first isolate decides.
      applied.insert(Protection::CompilerZones);
      say(&format!("protections={}", applied.missing().join(",")));
      go_tx.send(()).unwrap();
      say(&early.join().unwrap());
      for (name, family) in [
        ("socket-inet", libc::AF_INET),
        ("socket-inet6", libc::AF_INET6),
        ("socket-netlink", libc::AF_NETLINK),
        ("socket-unix", libc::AF_UNIX),
        ("socket-packet", libc::AF_PACKET),
      ] {
        // SAFETY: a syscall with no pointer arguments.
        say(&outcome(name, unsafe { libc::socket(family, libc::SOCK_STREAM, 0) } as i64));
      }
      // SAFETY: an all-zero sockaddr_in is valid; connect reads it.
      let mut address: libc::sockaddr_in = unsafe { std::mem::zeroed() };
      address.sin_family = libc::AF_INET as u16;
      address.sin_port = port.to_be();
      address.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
      let length = std::mem::size_of::<libc::sockaddr_in>() as u32;
      // SAFETY: connect reads `length` bytes of `address` (fd 0 is the
      // channel's place in a host).
      say(
        &outcome("connect", unsafe { libc::connect(0, (&address as *const libc::sockaddr_in).cast(), length) } as i64)
      );
      // SAFETY: bind reads `length` bytes of `address`.
      say(&outcome("bind", unsafe { libc::bind(0, (&address as *const libc::sockaddr_in).cast(), length) } as i64));
      let written = c"/tmp/dsh-lockdown-test-file";
      // SAFETY: NUL-terminated paths.
      say(&outcome("open-write", unsafe { libc::open(written.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o600) } as i64));
      // SAFETY: as above.
      say(&outcome("open-read", unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) } as i64));
      // SAFETY: fork in the child; a child of the child would _exit at once.
      let forked = unsafe { libc::fork() };
      if forked == 0 {
        // SAFETY: ends the grandchild, had the filter let it exist.
        unsafe { libc::_exit(0) };
      }
      say(&outcome("fork", forked as i64));
      let true_path = c"/bin/true";
      let argv = [true_path.as_ptr(), std::ptr::null()];
      let envp = [std::ptr::null()];
      // SAFETY: NUL-terminated path, NULL-terminated argv and envp.
      say(&outcome("execve", unsafe { libc::execve(true_path.as_ptr(), argv.as_ptr(), envp.as_ptr()) } as i64));
      // SAFETY: getppid has no preconditions; ptrace and kill with no
      // pointer arguments.
      let parent = unsafe { libc::getppid() };
      say(&outcome("ptrace", unsafe { libc::ptrace(libc::PTRACE_ATTACH, parent, 0, 0) }));
      say(&outcome("kill-parent", unsafe { libc::kill(parent, 0) } as i64));
      for (name, syscall) in [
        ("unshare", libc::SYS_unshare),
        ("setns", libc::SYS_setns),
        ("mount", libc::SYS_mount),
        ("bpf", libc::SYS_bpf),
        ("perf_event_open", libc::SYS_perf_event_open),
        ("userfaultfd", libc::SYS_userfaultfd),
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("keyctl", libc::SYS_keyctl),
        ("kexec_load", libc::SYS_kexec_load),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("memfd_create", libc::SYS_memfd_create),
      ] {
        // SAFETY: each is made with zero arguments, which the filter
        // refuses before the kernel reads any.
        say(&outcome(name, unsafe { libc::syscall(syscall, 0, 0, 0, 0, 0, 0) }));
      }
      // SAFETY: prctl with integer arguments.
      say(&outcome("undo-dumpable", unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) } as i64));
      // Priority: the one change a run thread makes (`program_priority`),
      // and no other: not back up, not by another amount, not another
      // thread's or user's.
      let nice = crate::program_priority::program_nice();
      // SAFETY: setpriority with integer arguments.
      unsafe {
        say(&outcome("lower-self", libc::setpriority(libc::PRIO_PROCESS, 0, nice) as i64));
        say(&outcome("raise-self", libc::setpriority(libc::PRIO_PROCESS, 0, 0) as i64));
        say(&outcome("lower-more", libc::setpriority(libc::PRIO_PROCESS, 0, nice + 1) as i64));
        say(&outcome("lower-parent", libc::setpriority(libc::PRIO_PROCESS, parent as libc::id_t, nice) as i64));
        say(&outcome("lower-user", libc::setpriority(libc::PRIO_USER, 0, nice) as i64));
      }
      // Affinity: its own thread's, to the CPUs it has, and no other's.
      // SAFETY: a cpu_set_t on the stack, of the size given.
      unsafe {
        let mut cpus: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        say(&outcome("affinity-read", libc::sched_getaffinity(0, size, &mut cpus) as i64));
        say(&outcome("affinity-self", libc::sched_setaffinity(0, size, &cpus) as i64));
        say(&outcome("affinity-parent", libc::sched_setaffinity(parent, size, &cpus) as i64));
      }
      // What a host must still do: start a thread, map memory, name it.
      let thread = std::thread::Builder::new().name("after-seal".into()).spawn(|| 6 * 7).map(|t| t.join());
      say(&format!("thread={}", matches!(thread, Ok(Ok(42)))));
      let memory = vec![7u8; 64 << 20];
      say(&format!("memory={}", memory.iter().map(|byte| *byte as usize).sum::<usize>() == 7 * (64 << 20)));
    });
    assert_eq!(status, 0, "the child died: {report}");
    let eperm = libc::EPERM;
    let expected = [
      format!("landlock-open={}", libc::EACCES),
      "protections=".to_owned(),
      format!("thread-socket={eperm}"),
      format!("socket-inet={eperm}"),
      format!("socket-inet6={eperm}"),
      format!("socket-netlink={eperm}"),
      format!("socket-unix={eperm}"),
      format!("socket-packet={eperm}"),
      format!("connect={eperm}"),
      format!("bind={eperm}"),
      format!("open-write={eperm}"),
      format!("open-read={eperm}"),
      format!("fork={eperm}"),
      format!("execve={eperm}"),
      format!("ptrace={eperm}"),
      format!("kill-parent={eperm}"),
      format!("unshare={eperm}"),
      format!("setns={eperm}"),
      format!("mount={eperm}"),
      format!("bpf={eperm}"),
      format!("perf_event_open={eperm}"),
      format!("userfaultfd={eperm}"),
      format!("io_uring_setup={eperm}"),
      format!("keyctl={eperm}"),
      format!("kexec_load={eperm}"),
      format!("process_vm_readv={eperm}"),
      format!("memfd_create={eperm}"),
      format!("undo-dumpable={eperm}"),
      "lower-self=ok".to_owned(),
      format!("raise-self={eperm}"),
      format!("lower-more={eperm}"),
      format!("lower-parent={eperm}"),
      format!("lower-user={eperm}"),
      "affinity-read=ok".to_owned(),
      "affinity-self=ok".to_owned(),
      format!("affinity-parent={eperm}"),
      "thread=true".to_owned(),
      "memory=true".to_owned(),
    ];
    assert_eq!(report.lines().collect::<Vec<_>>(), expected);
    drop(listener);
  }

  #[test]
  fn a_kernel_that_refuses_a_protection_leaves_the_host_running_without_it() {
    let (report, status) = in_child(|say| {
      // The kernel of a locked-down container: Landlock, namespaces and
      // seccomp itself refused (by a filter installed first, as a
      // container runtime's would be).
      let refuse = |syscall: i64| (syscall, vec![]);
      let container = SeccompFilter::new(
        [libc::SYS_landlock_create_ruleset, libc::SYS_unshare, libc::SYS_seccomp].into_iter().map(refuse).collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        TargetArch::try_from(std::env::consts::ARCH).unwrap(),
      )
      .unwrap();
      seccompiler::apply_filter(&BpfProgram::try_from(container).unwrap()).unwrap();
      let mut applied = before_threads();
      seal(&mut applied);
      applied.insert(Protection::CompilerZones);
      say(&format!("missing={}", applied.missing().join(",")));
      let thread = std::thread::spawn(|| 1).join();
      say(&format!("thread={}", thread.is_ok()));
    });
    assert_eq!(status, 0, "the child died: {report}");
    assert_eq!(report.lines().collect::<Vec<_>>(), ["missing=seccomp,landlock,namespaces", "thread=true"]);
  }
}
