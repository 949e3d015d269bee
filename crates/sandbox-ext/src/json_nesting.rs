//! How deep JSON text nests, measured before V8's parser sees it: the
//! parser's native stack per open level is memory no cap sees otherwise
//! (`op_dsh_json_nesting_admitted`, js/11_memory_caps.js).

/// Native bytes V8's JSON parser holds per open nesting level, rounded
/// up from the ~85 measured.
pub const JSON_NESTING_LEVEL_BYTES: usize = 128;

/// The deepest nesting of arrays and objects in JSON text (brackets inside
/// strings do not count; malformed text is measured as far as it goes).
pub fn json_nesting<T: Copy + Into<u32>>(units: &[T]) -> usize {
  let (mut depth, mut deepest) = (0usize, 0usize);
  let (mut in_string, mut escaped) = (false, false);
  for &unit in units {
    let unit: u32 = unit.into();
    if in_string {
      if escaped {
        escaped = false;
      } else if unit == u32::from(b'\\') {
        escaped = true;
      } else if unit == u32::from(b'"') {
        in_string = false;
      }
      continue;
    }
    match u8::try_from(unit) {
      Ok(b'"') => in_string = true,
      Ok(b'[' | b'{') => {
        depth += 1;
        deepest = deepest.max(depth);
      }
      Ok(b']' | b'}') => depth = depth.saturating_sub(1),
      _ => {}
    }
  }
  deepest
}

#[cfg(test)]
mod tests {
  use super::json_nesting;

  fn depth(text: &str) -> usize {
    let units: Vec<u16> = text.encode_utf16().collect();
    let one_byte = json_nesting(text.as_bytes());
    assert_eq!(one_byte, json_nesting(&units), "one-byte and two-byte views agree");
    one_byte
  }

  #[test]
  fn json_nesting_counts_open_levels_outside_strings() {
    assert_eq!(depth("1"), 0);
    assert_eq!(depth("[[[]],[]]"), 3);
    assert_eq!(depth(r#"{"a":[{"b":[1]}]}"#), 4);
    assert_eq!(depth(r#"["[[[[", "\"[[", "\\", [1]]"#), 2);
    assert_eq!(depth("[[[[[["), 6, "unclosed text is measured as far as it goes");
    assert_eq!(depth("]]]["), 1, "stray closers do not go below zero");
  }
}
