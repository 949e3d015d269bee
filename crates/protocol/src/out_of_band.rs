//! Long strings of a binding call's argument that cross beside its JSON, as
//! the bytes V8 holds them in, instead of inside it: encoding, sending and
//! parsing a string of megabytes as JSON is most of what such a call costs
//! (a tool's result does the same the other way: `frame::Answer`).
//! The argument's JSON holds `null` where each of them goes, and a JSON
//! array of their places says where, in the order the places appear in the
//! JSON text: each place the index of its string, then its path
//! (`[[0, "text"], [1, 0, "a"], [0, "again"]]`: object keys as the JSON
//! string tokens the encoder wrote for them, array indices as numbers). A
//! string in several places crosses once: the strings are in the order of
//! their first places, and each has at least one.
//!
//! The harness checks a host's claim before anything of it reaches a tool:
//! [`check_places`] scans the JSON once and refuses paths that do not lead,
//! in order, to a `null` each. It is a scanner of structure, not a full
//! JSON parser: a text it passes that is not JSON is refused later, by
//! `JSON.parse`, as any argument that is not lossless JSON.

use crate::text::SharedBytes;

/// A long string as it crosses: the one-byte (Latin-1) or two-byte
/// (UTF-16, lone surrogates and all) contents of the V8 string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawString {
  Latin1(SharedBytes),
  Utf16(Vec<u16>),
}

impl RawString {
  /// Its length in UTF-16 units (what V8 counts).
  pub fn units(&self) -> usize {
    match self {
      RawString::Latin1(bytes) => bytes.len(),
      RawString::Utf16(units) => units.len(),
    }
  }
}

/// One step of a path: an object key (its JSON string token, quotes and
/// escapes included, compared byte for byte) or an array index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step<'a> {
  Key(&'a [u8]),
  Index(u64),
}

/// Check that `paths_json` is a JSON array of places, each naming one of
/// `count` strings (the first place of each in their order, every one
/// named) and leading to a `null` of `json`, in the order they appear in it.
pub fn check_places(json: &str, paths_json: &str, count: usize) -> Result<(), String> {
  let places = parse_places(paths_json)?;
  let mut named = 0;
  for (string, _) in &places {
    if *string > named as u64 || *string >= count as u64 {
      return Err(format!("a place names string {string}, past the {named} named before it of {count}"));
    }
    if *string == named as u64 {
      named += 1;
    }
  }
  if named != count {
    return Err(format!("{count} out-of-band strings, but {named} with a place"));
  }
  let paths: Vec<Vec<Step>> = places.into_iter().map(|(_, path)| path).collect();
  let mut scan = Scanner { bytes: json.as_bytes(), at: 0 };
  // The path of the value about to be read, and how many of its leading
  // steps agree with the next string's path (kept as steps change, so each
  // value costs O(1), not O(depth)).
  let mut steps: Vec<Step> = Vec::new();
  let mut next = 0;
  let mut matched = 0;
  'value: loop {
    scan.space();
    let target = paths.get(next);
    if target.is_some_and(|path| matched == steps.len() && path.len() == steps.len()) {
      if !scan.literal(b"null") {
        return Err("an out-of-band string's place in the JSON is not null".to_owned());
      }
      next += 1;
      matched = common_prefix(&steps, paths.get(next));
    } else {
      match scan.peek() {
        Some(b'[') => {
          scan.at += 1;
          scan.space();
          if scan.peek() != Some(b']') {
            steps.push(Step::Index(0));
            matched = agree(&steps, matched, paths.get(next));
            continue 'value;
          }
          scan.at += 1;
        }
        Some(b'{') => {
          scan.at += 1;
          scan.space();
          if scan.peek() != Some(b'}') {
            let key = scan.key()?;
            steps.push(Step::Key(key));
            matched = agree(&steps, matched, paths.get(next));
            continue 'value;
          }
          scan.at += 1;
        }
        Some(b'"') => {
          scan.string()?;
        }
        _ => scan.scalar()?,
      }
    }
    // A value ended: close containers until one has a next member.
    loop {
      scan.space();
      let Some(last) = steps.last_mut() else { break 'value };
      let is_array = matches!(last, Step::Index(_));
      match (scan.byte(), is_array) {
        (Some(b','), true) => {
          if let Step::Index(index) = last {
            *index += 1;
          }
        }
        (Some(b','), false) => {
          scan.space();
          *last = Step::Key(scan.key()?);
        }
        (Some(b']'), true) | (Some(b'}'), false) => {
          steps.pop();
          matched = matched.min(steps.len());
          continue;
        }
        _ => return Err("the JSON of a call's argument is malformed".to_owned()),
      }
      // The last step changed: it no longer agrees with what it did.
      matched = matched.min(steps.len() - 1);
      matched = agree(&steps, matched, paths.get(next));
      continue 'value;
    }
  }
  scan.space();
  if scan.at != scan.bytes.len() {
    return Err("bytes after the JSON of a call's argument".to_owned());
  }
  if next != paths.len() {
    return Err("an out-of-band string's path leads to no place in the JSON, in order".to_owned());
  }
  Ok(())
}

/// `matched` after the last of `steps` was set: one more if the steps
/// before it all agree with `path` and it does too.
fn agree(steps: &[Step], matched: usize, path: Option<&Vec<Step>>) -> usize {
  let last = steps.len() - 1;
  if matched == last && path.and_then(|path| path.get(last)) == steps.last() {
    last + 1
  } else {
    matched
  }
}

fn common_prefix(steps: &[Step], path: Option<&Vec<Step>>) -> usize {
  path.map_or(0, |path| steps.iter().zip(path).take_while(|(a, b)| a == b).count())
}

/// `[[string, step, ...], ...]`: a plain integer, then the steps, each a
/// JSON string token or a plain integer.
fn parse_places(text: &str) -> Result<Vec<(u64, Vec<Step<'_>>)>, String> {
  let bad = || "the places of a call's out-of-band strings are malformed".to_owned();
  let mut scan = Scanner { bytes: text.as_bytes(), at: 0 };
  let places = scan
    .list(|scan| {
      let mut steps = scan.list(|scan| {
        Ok(if scan.peek() == Some(b'"') { Step::Key(scan.string()?) } else { Step::Index(scan.index()?) })
      })?;
      match steps.first() {
        Some(&Step::Index(string)) => {
          steps.remove(0);
          Ok((string, steps))
        }
        _ => Err(bad()),
      }
    })
    .map_err(|_| bad())?;
  scan.space();
  if scan.at != scan.bytes.len() {
    return Err(bad());
  }
  Ok(places)
}

/// Reads JSON tokens; every read is bounds-checked (the bytes are a host's).
struct Scanner<'a> {
  bytes: &'a [u8],
  at: usize,
}

impl<'a> Scanner<'a> {
  /// `[item, ...]` (white space around each), each item read by `item`.
  fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T, String>) -> Result<Vec<T>, String> {
    let mut items = Vec::new();
    self.space();
    if self.byte() != Some(b'[') {
      return Err("a list without its [".to_owned());
    }
    self.space();
    if self.peek() == Some(b']') {
      self.at += 1;
      return Ok(items);
    }
    loop {
      self.space();
      items.push(item(self)?);
      self.space();
      match self.byte() {
        Some(b',') => {}
        Some(b']') => return Ok(items),
        _ => return Err("a list item without , or ] after it".to_owned()),
      }
    }
  }

  fn peek(&self) -> Option<u8> {
    self.bytes.get(self.at).copied()
  }

  fn byte(&mut self) -> Option<u8> {
    let byte = self.peek();
    self.at += usize::from(byte.is_some());
    byte
  }

  fn space(&mut self) {
    while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
      self.at += 1;
    }
  }

  fn literal(&mut self, word: &[u8]) -> bool {
    let found = self.bytes.get(self.at..).is_some_and(|rest| rest.starts_with(word));
    if found {
      self.at += word.len();
    }
    found
  }

  /// A string token, quotes and escapes included (not decoded: keys are
  /// compared as the tokens the encoder wrote).
  fn string(&mut self) -> Result<&'a [u8], String> {
    let start = self.at;
    if self.byte() != Some(b'"') {
      return Err("a JSON string was expected".to_owned());
    }
    loop {
      match self.byte() {
        Some(b'"') => return Ok(&self.bytes[start..self.at]),
        Some(b'\\') => {
          if self.byte().is_none() {
            break;
          }
        }
        Some(_) => {}
        None => break,
      }
    }
    Err("a JSON string does not end".to_owned())
  }

  /// An object member's key and its colon.
  fn key(&mut self) -> Result<&'a [u8], String> {
    let key = self.string()?;
    self.space();
    if self.byte() != Some(b':') {
      return Err("a JSON key without its colon".to_owned());
    }
    Ok(key)
  }

  /// A number or literal: its characters (JSON.parse judges them later).
  fn scalar(&mut self) -> Result<(), String> {
    let start = self.at;
    while matches!(self.peek(), Some(b'0'..=b'9' | b'a'..=b'z' | b'-' | b'+' | b'.' | b'E')) {
      self.at += 1;
    }
    if self.at == start {
      return Err("a JSON value was expected".to_owned());
    }
    Ok(())
  }

  /// An array index as JSON.stringify writes it: `0` or digits without a
  /// leading zero.
  fn index(&mut self) -> Result<u64, String> {
    let start = self.at;
    let mut value: u64 = 0;
    while let Some(digit @ b'0'..=b'9') = self.peek() {
      value = value
        .checked_mul(10)
        .and_then(|value| value.checked_add(u64::from(digit - b'0')))
        .ok_or_else(|| "an out-of-band string's path has an index too large".to_owned())?;
      self.at += 1;
    }
    let digits = self.at - start;
    if digits == 0 || (digits > 1 && self.bytes[start] == b'0') {
      return Err("an out-of-band string's path has a step that is neither a key nor an index".to_owned());
    }
    Ok(value)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn places_that_lead_to_nulls_in_order_pass() {
    assert_eq!(check_places("null", "[[0]]", 1), Ok(()));
    assert_eq!(check_places(r#"{"text":null}"#, r#"[[0,"text"]]"#, 1), Ok(()));
    assert_eq!(check_places(r#"[1,null,{"a":[null]}]"#, r#"[[0,1],[1,2,"a",0]]"#, 2), Ok(()));
    assert_eq!(check_places(r#"{"__proto__":null,"b":"x"}"#, r#"[[0,"__proto__"]]"#, 1), Ok(()));
    // Keys compared as the tokens the encoder wrote, escapes and all.
    assert_eq!(check_places(r#"{"a\"\\\ud800":null}"#, r#"[[0,"a\"\\\ud800"]]"#, 1), Ok(()));
    // White space is allowed where JSON allows it.
    assert_eq!(check_places(" { \"a\" : [ 1 , null ] } ", " [ [ 0 , \"a\" , 1 ] ] ", 1), Ok(()));
    // Deep nesting costs no stack.
    let deep = format!("{}null{}", "[".repeat(100_000), "]".repeat(100_000));
    let path = format!("[[0,{}]]", vec!["0"; 100_000].join(","));
    assert_eq!(check_places(&deep, &path, 1), Ok(()));
    // No strings, no places.
    assert_eq!(check_places(r#"{"a":[]}"#, "[]", 0), Ok(()));
  }

  /// One string in several places crosses once: each later place names it.
  #[test]
  fn a_string_in_several_places_is_named_by_each() {
    let json = r#"{"a":null,"b":[null,null],"c":null}"#;
    assert_eq!(check_places(json, r#"[[0,"a"],[1,"b",0],[0,"b",1],[1,"c"]]"#, 2), Ok(()));
    assert_eq!(check_places(json, r#"[[0,"a"],[0,"b",0],[0,"b",1],[0,"c"]]"#, 1), Ok(()));
    let refused = |places: &str, count: usize| check_places(json, places, count).is_err();
    // A string named before its first place, one never named, one past the count.
    assert!(refused(r#"[[1,"a"],[0,"b",0],[0,"b",1],[0,"c"]]"#, 2));
    assert!(refused(r#"[[0,"a"],[0,"b",0],[0,"b",1],[0,"c"]]"#, 2));
    assert!(refused(r#"[[0,"a"],[1,"b",0],[2,"b",1],[2,"c"]]"#, 2));
    // A place that names no string.
    assert!(refused(r#"[["a"],[0,"b",0],[0,"b",1],[0,"c"]]"#, 1));
  }

  #[test]
  fn any_bytes_are_an_answer_never_a_panic() {
    // Texts of JSON's own characters, so the scanner goes deep into them.
    let alphabet = b"[]{}\",:\\null01 9e-";
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      state
    };
    for _ in 0..50_000 {
      let mut text = || {
        let len = (next() % 24) as usize;
        (0..len).map(|_| char::from(alphabet[(next() % alphabet.len() as u64) as usize])).collect::<String>()
      };
      let (json, places) = (text(), text());
      let _ = check_places(&json, &places, 1);
      let _ = check_places(&json, "[[0,0]]", 1);
      let _ = check_places("[null,{\"a\":[null]}]", &places, 2);
    }
  }

  #[test]
  fn places_that_do_not_match_the_json_are_refused() {
    let refused = |json: &str, places: &str, count: usize| check_places(json, places, count).is_err();
    // The place holds something else.
    assert!(refused(r#"{"text":1}"#, r#"[[0,"text"]]"#, 1));
    assert!(refused(r#"{"text":{"a":null}}"#, r#"[[0,"text"]]"#, 1));
    // No such place; an index where a key is; out of document order.
    assert!(refused(r#"{"text":null}"#, r#"[[0,"other"]]"#, 1));
    assert!(refused(r#"[null]"#, r#"[[0,1]]"#, 1));
    assert!(refused(r#"{"0":null}"#, r#"[[0,0]]"#, 1));
    assert!(refused(r#"[null,null]"#, r#"[[0,1],[1,0]]"#, 2));
    assert!(refused(r#"[null]"#, r#"[[0,0],[1,0]]"#, 2));
    assert!(refused(r#"[null]"#, r#"[[0,0],[0,0]]"#, 1));
    assert!(refused(r#"{"a":null}"#, r#"[[0,"a","b"]]"#, 1));
    // A key written differently than the JSON writes it.
    assert!(refused(r#"{"a":null}"#, r#"[[0,"\u0061"]]"#, 1));
    // Counts that disagree; malformed places.
    assert!(refused("null", "[[0]]", 2));
    assert!(refused("null", "[[0]]", 0));
    for places in [
      "",
      "[",
      "[[0]",
      "[[0]]x",
      "[[]]",
      "[[-1]]",
      "[[01]]",
      "[[1.5]]",
      "[[99999999999999999999999]]",
      "[[null]]",
      "[[\"a\"]]",
      "{}",
    ] {
      assert!(refused("null", places, 1), "{places}");
    }
    // Malformed JSON around the places.
    for json in ["", "[null", "{\"a\" null}", "[null}", "{\"a\":null]", "null null", "\"abc", "[,]"] {
      assert!(refused(json, "[[0,0]]", 1) || refused(json, "[[0]]", 1), "{json}");
    }
  }
}
