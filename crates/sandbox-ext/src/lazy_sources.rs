//! The sandbox's JS that is not in the snapshot: the lazy globals' modules
//! (`op_dsh_lazy_source`, js/14_lazy_globals.js).

/// The sandbox's JS kept out of the snapshot, by name: each is compiled in
/// an isolate only when a program first touches one of the globals it
/// makes (js/14_lazy_globals.js says which). Few programs use them, and in
/// the snapshot they would be deserialized into every isolate: more memory
/// per waiting run and more time to prepare each isolate. The number
/// `op_dsh_lazy_source` takes is the index here.
pub const LAZY_SOURCES: [(&str, &str); 10] = [
  // The `buffer` package, bundled (scripts/vendor-buffer.mjs): a script that
  // leaves the package's exports in `bufferPackage`.
  ("bufferPackage", include_str!("../js/vendor/buffer_package.js")),
  ("buffer", include_str!("../js/lazy/buffer.js")),
  ("crypto", include_str!("../js/lazy/crypto.js")),
  ("events", include_str!("../js/lazy/events.js")),
  ("navigator", include_str!("../js/lazy/navigator.js")),
  ("performance", include_str!("../js/lazy/performance.js")),
  ("domException", include_str!("../js/lazy/dom_exception.js")),
  ("encoding", include_str!("../js/lazy/encoding.js")),
  ("url", include_str!("../js/lazy/url.js")),
  ("structuredClone", include_str!("../js/lazy/structured_clone.js")),
];
