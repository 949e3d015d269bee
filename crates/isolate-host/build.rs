//! Builds the startup snapshot that holds the sandbox's bootstrap JS
//! (crates/sandbox-ext/js/*.js, in the `dsh_sandbox_ext` extension), so every
//! isolate starts with it already loaded.

use std::path::PathBuf;

fn main() {
  // Compile every bootstrap function now, not lazily in each isolate: the
  // snapshot keeps bytecode, so runs start with the sandbox's JS compiled.
  deno_core::v8::V8::set_flags_from_string("--no-lazy --no-lazy-eval");

  let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
  let output = deno_core::snapshot::create_snapshot(
    deno_core::snapshot::CreateSnapshotOptions {
      cargo_manifest_dir: env!("CARGO_MANIFEST_DIR"),
      startup_snapshot: None,
      skip_op_registration: false,
      extensions: vec![dsh_sandbox_ext::dsh_sandbox::init()],
      extension_transpiler: None,
      with_runtime_cb: None,
    },
    None,
  )
  .unwrap_or_else(|error| panic!("creating the startup snapshot failed: {error}"));
  std::fs::write(out_dir.join("SANDBOX_SNAPSHOT.bin"), &output.output)
    .unwrap_or_else(|error| panic!("writing the snapshot failed: {error}"));
  for path in output.files_loaded_during_snapshot {
    println!("cargo:rerun-if-changed={}", path.display());
  }
  println!("cargo:rerun-if-changed=../sandbox-ext/src");
  println!("cargo:rerun-if-changed=../sandbox-ext/js");
}
