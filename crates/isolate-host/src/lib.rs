//! The isolate host: the process that runs programs. Everything that runs
//! a program's JavaScript lives here (V8 and its platform, the scheduler
//! and its prepared isolates, budgets, the watchdog, memory accounting and
//! return, TypeScript stripping); the harness's addon starts hosts,
//! supervises them and speaks to each over one channel (`dsh_protocol`).
//! A host that dies (a V8 fatal, a signal, the OOM killer, a bug) takes
//! only its own runs with it. `main.rs` is the process; the modules below
//! are the engine, also exercised directly by the unit tests.

#![deny(clippy::unwrap_used)]
// Unit tests may unwrap: a panic there is a failed test, not a crashed host.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod allocator;
pub mod bridge;
mod budget;
mod clocks;
mod code_from_strings;
pub mod compiler_zones;
pub mod control;
mod cpu_placement;
mod external_memory;
mod heap_peak;
mod icu_memory;
mod isolate;
mod isolate_anchor;
#[cfg(test)]
mod isolate_cost;
pub mod live_runs;
pub mod lockdown;
pub mod mailbox;
pub mod memory_return;
pub mod platform;
pub mod program_priority;
mod reserve;
pub mod run;
pub mod scheduler;
mod time_left;
pub mod transpile;
mod watchdog;

pub use dsh_protocol::{bindings_descriptor, config, ledger, lock};
