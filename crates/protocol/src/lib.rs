//! What the harness (the napi addon) and an isolate host (the process that
//! runs programs) share: the channel's messages and framing (`frame`), the
//! runtime's configuration (`config`), a run's bindings (`bindings_descriptor`),
//! the failures the runtime decides (`failure`), the exact output ledger
//! (`ledger`), which the host keeps while a run executes and the harness
//! replays from the streamed log entries, so that a run whose host dies
//! still settles through the same ledger, and a run's history (`history`),
//! from which the harness executes a run again on another host, with the
//! readings of its clocks (`readings`); and the channel's shared-memory
//! rings (`ring`, in a `shared_region`, with `doorbell`s to wake a sleeper),
//! and the replies' texts that both sides share rather than copy (`text`,
//! long ones in a `large_block` each). Pure Rust: no V8, no napi.

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod bindings_descriptor;
pub mod config;
pub mod contract;
pub mod doorbell;
pub mod failure;
pub mod frame;
pub mod history;
pub mod inbox;
pub mod large_block;
pub mod ledger;
pub mod lock;
pub mod out_of_band;
pub mod protections;
pub mod readings;
pub mod ring;
pub mod shared_region;
pub mod socket;
pub mod text;
