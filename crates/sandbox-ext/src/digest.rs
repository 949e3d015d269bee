//! crypto.subtle.digest's algorithms (RustCrypto's hashes), for
//! `op_dsh_digest` and the protocol table's sizes.

/// crypto.subtle.digest's algorithms; the number `op_dsh_digest` takes is
/// the index here (js/lazy/crypto.js reads both through `op_dsh_protocol`).
pub const DIGESTS: [&str; 4] = ["SHA-1", "SHA-256", "SHA-384", "SHA-512"];

/// The digest of `data` by the algorithm named as in [`DIGESTS`].
pub fn digest(name: &str, data: &[u8]) -> Option<Vec<u8>> {
  use sha2::Digest;
  Some(match name {
    "SHA-1" => sha1::Sha1::digest(data).to_vec(),
    "SHA-256" => sha2::Sha256::digest(data).to_vec(),
    "SHA-384" => sha2::Sha384::digest(data).to_vec(),
    "SHA-512" => sha2::Sha512::digest(data).to_vec(),
    _ => return None,
  })
}
