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
  /// Parse the JSON text the TS layer sends. Its globals and error class
  /// names become the program function's parameters (written into its
  /// source), so each must be an identifier of the seam's portable subset,
  /// as the TS layer has already checked.
  pub fn parse(json: &str) -> Result<Self, String> {
    let descriptor: BindingsDescriptor =
      serde_json::from_str(json).map_err(|error| format!("invalid bindings descriptor: {error}"))?;
    match descriptor.program_parameters().into_iter().find(|name| !is_portable_identifier(name)) {
      Some(name) => Err(format!("invalid bindings descriptor: {name:?} is not an identifier")),
      None => Ok(descriptor),
    }
  }

  /// The names the program is handed its bindings by, in the order of the
  /// values the isolate's driver returns for them (`installBindings` in
  /// crates/sandbox-ext/js/99_bootstrap.js): each namespace's global, then
  /// each error class, as the reference backend orders its parameters.
  pub fn program_parameters(&self) -> Vec<&str> {
    let globals = self.namespaces.iter().map(|namespace| namespace.global.as_str());
    let classes =
      self.namespaces.iter().filter_map(|namespace| namespace.error_class.as_ref().map(|class| class.name.as_str()));
    globals.chain(classes).collect()
  }

  /// How many functions each namespace has, by namespace index.
  pub fn function_counts(&self) -> Vec<u32> {
    self.namespaces.iter().map(|namespace| u32::try_from(namespace.functions.len()).unwrap_or(u32::MAX)).collect()
  }
}

/// `[A-Za-z_][A-Za-z0-9_]*`: the seam's language-portable identifiers.
fn is_portable_identifier(name: &str) -> bool {
  let mut bytes = name.bytes();
  bytes.next().is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
    && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
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
    assert_eq!(descriptor.program_parameters(), vec!["tools", "kv", "ToolError"]);
  }

  /// The names go into the program's source: anything but an identifier is
  /// refused, whichever of the two it is.
  #[test]
  fn refuses_names_that_are_not_identifiers() {
    for bad in ["", "1a", "a b", "a)", "a,b", "x=1", r"t\u0061", "é"] {
      let name = serde_json::to_string(bad).unwrap();
      let global = format!(r#"{{"namespaces":[{{"global":{name},"functions":[]}}]}}"#);
      assert!(BindingsDescriptor::parse(&global).is_err(), "global {bad:?}");
      let class = format!(
        r#"{{"namespaces":[{{"global":"t","functions":[],"errorClass":{{"name":{name},"memberNameProperty":"m"}}}}]}}"#
      );
      assert!(BindingsDescriptor::parse(&class).is_err(), "error class {bad:?}");
    }
    assert!(BindingsDescriptor::parse(r#"{"namespaces":[{"global":"_t0","functions":[]}]}"#).is_ok());
  }
}
