//! A run's binding namespaces, as the TS layer describes them
//! (`ts/bindings.ts`, which validates them against docs/CONTRACT.md first).
//! Parsed once, here: the scheduler checks calls against the function
//! counts, and the isolate's driver receives the parsed value (built in
//! the isolate with serde_v8), not the text again.

use serde::{Deserialize, Serialize};

/// Every namespace of one run, in the order the host lists them (a call
/// names its namespace and function by these indices).
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BindingsDescriptor {
  pub namespaces: Vec<NamespaceDescriptor>,
}

/// One namespace: the global the program sees, its functions' names, and
/// the error class its failed calls reject with, if it declares one.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceDescriptor {
  pub global: String,
  pub functions: Vec<String>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub error_class: Option<ErrorClassDescriptor>,
}

/// A namespace's error class: its global name, and the property of its
/// instances that names the function whose call failed.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorClassDescriptor {
  pub name: String,
  pub member_name_property: String,
}

impl BindingsDescriptor {
  /// Parse the JSON text the TS layer sends.
  pub fn parse(json: &str) -> Result<Self, String> {
    serde_json::from_str(json).map_err(|error| format!("invalid bindings descriptor: {error}"))
  }

  /// How many functions each namespace has, by namespace index.
  pub fn function_counts(&self) -> Vec<u32> {
    self.namespaces.iter().map(|namespace| u32::try_from(namespace.functions.len()).unwrap_or(u32::MAX)).collect()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn reads_what_the_ts_layer_writes_and_refuses_what_it_does_not() {
    let json = r#"{"namespaces":[{"global":"tools","functions":["a","b"],"errorClass":{"name":"ToolError","memberNameProperty":"tool"}},{"global":"kv","functions":[]}]}"#;
    let descriptor = BindingsDescriptor::parse(json).unwrap();
    assert_eq!(descriptor.function_counts(), vec![2, 0]);
    // What the isolate receives is what was sent (an absent error class stays absent).
    assert_eq!(serde_json::to_string(&descriptor).unwrap(), json);
    assert!(BindingsDescriptor::parse(r#"{"namespaces":[{"global":"t","functions":[],"extra":1}]}"#).is_err());
    assert!(BindingsDescriptor::parse(r#"{"namespaces":[{"functions":[]}]}"#).is_err());
  }
}
