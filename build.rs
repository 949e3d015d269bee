//! The napi glue of the addon (the harness side; V8 is in the isolate host),
//! and the isolate host's file name, which package.json defines once
//! (`napi.isolateHost`): the scripts ship it under that name, the host
//! crate builds it under that name (checked here), the addon starts it.

use std::path::Path;

fn main() {
  napi_build::setup();
  // Keep the addon mapped for the life of the process: its reader threads
  // may still be winding down when an environment is torn down.
  println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");

  let root = Path::new(env!("CARGO_MANIFEST_DIR"));
  let manifest = std::fs::read_to_string(root.join("package.json")).expect("package.json is readable");
  let manifest: serde_json::Value = serde_json::from_str(&manifest).expect("package.json is JSON");
  let host = manifest["napi"]["isolateHost"].as_str().expect("package.json names napi.isolateHost");
  let host_crate = std::fs::read_to_string(root.join("crates/isolate-host/Cargo.toml")).expect("the host crate");
  assert!(
    host_crate.contains(&format!("name = \"{host}\"")),
    "crates/isolate-host/Cargo.toml must build the binary package.json names ({host})"
  );
  println!("cargo:rustc-env=DSH_ISOLATE_HOST={host}");
  println!("cargo:rerun-if-changed=package.json");
  println!("cargo:rerun-if-changed=crates/isolate-host/Cargo.toml");
}
