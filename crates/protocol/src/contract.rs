//! The seam's exact strings that more than one realm produces
//! (docs/CONTRACT.md §3 and §8), defined here once: the isolate's JS reads
//! them from the protocol table (`op_dsh_protocol`), the harness's
//! TypeScript from the addon's exports, the Rust code from here.

/// A binding call whose argument is not lossless JSON (refused in the
/// isolate, and again in the harness for what a host sends).
pub const ARGUMENTS_NOT_LOSSLESS: &str = "binding arguments must be lossless JSON";
/// A host function whose resolution is not lossless JSON (refused in the
/// harness, and again in the isolate for what a harness sends).
pub const RESOLUTION_NOT_LOSSLESS: &str = "binding resolution must be lossless JSON";
/// A program whose completion value is not lossless JSON (`invalid-output`).
pub const COMPLETION_NOT_LOSSLESS: &str = "program completion must be lossless JSON";

/// The strings by the names the JS realms know them by.
pub const MESSAGES: [(&str, &str); 3] = [
  ("argumentsNotLossless", ARGUMENTS_NOT_LOSSLESS),
  ("resolutionNotLossless", RESOLUTION_NOT_LOSSLESS),
  ("completionNotLossless", COMPLETION_NOT_LOSSLESS),
];
