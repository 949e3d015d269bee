//! TypeScript to JavaScript: erasable syntax only, positions preserved.
//!
//! The program is the body of an async function. It is parsed inside the
//! same wrapper it will run in (so top-level `await` and `return` parse),
//! then type-stripped by swc's fast strip, which turns types into
//! whitespace: every line and column of the output is the line and column
//! of the program as written. Syntax that needs code generation (`enum`,
//! value `namespace`, parameter properties) is refused with a message that
//! names the construct.

use deno_ast::swc::parser::{Syntax, TsSyntax};
use deno_ast::{MediaType, ModuleSpecifier, ParseParams};

/// The first line of the wrapper; the program starts on the next line.
const WRAP_PREFIX: &str = "async function __dsh_program__() {\n";
const WRAP_SUFFIX: &str = "\n}";
/// The name positions are reported against.
pub const PROGRAM_NAME: &str = "program.ts";

/// The stack swc's parse, strip and drop of the syntax tree may take for
/// a level of nesting a bracket opens: each recurses once a level, and the
/// deepest levels are brackets' (measured a level: `(` ~3.3 KB, a type
/// argument's `<` ~4.3 KB, `[` ~2.2, `{` ~1.6, a template's `${` ~2.3),
/// with twice the room. A run's thread has 16 MiB, which a program of
/// ~5000 nested parentheses (10 KB) overflowed, ending its host.
const STRIP_STACK_PER_BRACKET: usize = 9 << 10;
/// The same for any other byte, whose levels are shallower (a prefix
/// operator `!` ~0.5 KB a level of one byte, `a=` ~0.36 KB of two, a
/// binary or member chain ~0.1 KB of two), with the same room.
const STRIP_STACK_PER_BYTE: usize = 3 << 9;
/// The most stack a strip is given: a program of ~110 KB of brackets alone
/// nested throughout, or of ~700 KB of anything else (a longer one nested
/// that deep would still overflow it). Only the pages the nesting reaches
/// are touched, and the stack is unmapped when the strip returns.
const MAX_STRIP_STACK: usize = 1 << 30;

/// The stack [`strip_types`] gives `program`: enough for it nested as deep
/// as its bytes can make it.
fn strip_stack(program: &str) -> usize {
  let per_byte = |byte: &u8| match byte {
    b'(' | b'[' | b'{' | b'<' | b'`' => STRIP_STACK_PER_BRACKET,
    _ => STRIP_STACK_PER_BYTE,
  };
  let wrapper = (WRAP_PREFIX.len() + WRAP_SUFFIX.len()) * STRIP_STACK_PER_BRACKET;
  program.as_bytes().iter().map(per_byte).fold(wrapper, usize::saturating_add).min(MAX_STRIP_STACK)
}

/// Strip `program`'s types. On success, the JavaScript body (same lines and
/// columns as `program`); on failure, the message of a SyntaxError-style
/// exception with positions in the program as written.
///
/// On a stack of its own when the thread's has less left than the program
/// may need ([`strip_stack`]): nesting deeper than V8 compiles (which
/// throws a `RangeError` at a few thousand levels) then fails there, not
/// in the host.
pub fn strip_types(program: &str) -> Result<String, String> {
  let stack = strip_stack(program);
  stacker::maybe_grow(stack, stack, || strip_types_here(program))
}

fn strip_types_here(program: &str) -> Result<String, String> {
  let wrapped = format!("{WRAP_PREFIX}{program}{WRAP_SUFFIX}");
  let specifier =
    ModuleSpecifier::parse(&format!("file:///{PROGRAM_NAME}")).map_err(|e| format!("internal error: {e}"))?;

  // Parse first: swc's strip reports a syntax error without a position.
  let syntax_error = |diagnostic: &deno_ast::ParseDiagnostic| {
    let position = diagnostic.display_position();
    let (line, column) = clamp_to_program(program, position.line_number.saturating_sub(1), position.column_number);
    format!("SyntaxError: {} at {PROGRAM_NAME}:{line}:{column}", diagnostic.kind().msg())
  };
  let parsed = deno_ast::parse_script(ParseParams {
    specifier: specifier.clone(),
    text: wrapped.clone().into(),
    media_type: MediaType::TypeScript,
    capture_tokens: false,
    scope_analysis: false,
    // The strip's own syntax (deno_ast::type_strip): no decorators, so they
    // are refused here, with a position, rather than by the strip without.
    maybe_syntax: Some(Syntax::Typescript(TsSyntax {
      decorators: false,
      disallow_ambiguous_jsx_like: true,
      dts: false,
      no_early_errors: true,
      tsx: false,
    })),
  })
  .map_err(|diagnostic| syntax_error(&diagnostic))?;
  // The parser recovers from some errors (an unterminated string or
  // comment, a decorator where none may stand) and reports them on the
  // side; the strip would then fail with a bare "Syntax error".
  if let Some(diagnostic) = parsed.diagnostics().first() {
    return Err(syntax_error(diagnostic));
  }
  // A program that closes the function body it runs in (`}); ...`) would
  // run outside the wrapper: refuse it as the syntax error it is.
  let statements = match parsed.program_ref() {
    deno_ast::ProgramRef::Script(script) => script.body.len(),
    deno_ast::ProgramRef::Module(module) => module.body.len(),
  };
  if statements != 1 {
    return Err(format!("SyntaxError: unexpected '}}' closing the program body at {PROGRAM_NAME}"));
  }

  let stripped = deno_ast::type_strip(&specifier, wrapped, deno_ast::TypeStripOptions { module: Some(false) })
    .map_err(|error| rewrite_positions(&error.to_string(), &specifier))?;

  stripped
    .strip_prefix(WRAP_PREFIX)
    .and_then(|rest| rest.strip_suffix(WRAP_SUFFIX))
    .map(str::to_owned)
    .ok_or_else(|| "internal error: type strip changed the program wrapper".to_owned())
}

/// A position past the program's end (an error found at the wrapper's
/// closing brace, i.e. unexpected end of input) is reported at the end of
/// the program as written.
fn clamp_to_program(program: &str, line: usize, column: usize) -> (usize, usize) {
  let lines = program.split('\n').count();
  if line == 0 {
    return (1, 1);
  }
  if line > lines {
    let last = program.rsplit('\n').next().unwrap_or("");
    return (lines, last.encode_utf16().count() + 1);
  }
  (line, column)
}

/// Rewrite `file:///program.ts:L:C` positions (in the wrapped text) to
/// `program.ts:L-1:C` (in the program as written), and drop swc's
/// `[UnsupportedSyntax]` code prefix.
fn rewrite_positions(message: &str, specifier: &ModuleSpecifier) -> String {
  let needle = format!("{specifier}:");
  let mut out = String::with_capacity(message.len());
  let mut rest = message;
  while let Some(at) = rest.find(&needle) {
    out.push_str(&rest[..at]);
    rest = &rest[at + needle.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match rest[..digits].parse::<u64>() {
      Ok(line) => {
        out.push_str(&format!("{PROGRAM_NAME}:{}", line.saturating_sub(1)));
        rest = &rest[digits..];
      }
      Err(_) => out.push_str(&needle),
    }
  }
  out.push_str(rest);
  let out = out.trim_start();
  let out = out.strip_prefix('[').and_then(|s| s.split_once("] ")).map_or(out, |(_, tail)| tail);
  format!("SyntaxError: {out}")
}

#[cfg(test)]
mod tests {
  use super::*;

  /// Each shape nested past what V8 compiles, on a run thread's 16 MiB,
  /// closed and not (a program of openers alone recurses as deep before
  /// its syntax error): the strip returns (V8 then throws its
  /// `RangeError`) instead of overflowing the thread's stack, which ended
  /// the host. (Labels, `a:` repeated, are left out: swc checks each
  /// against the ones around it, 20000 took a minute of CPU, which the
  /// run's budget bounds.)
  #[test]
  fn nesting_deeper_than_a_run_threads_stack_holds_is_stripped_on_a_stack_of_its_own() {
    let depth = 20_000;
    let nested = |prefix: &str, open: &str, inner: &str, close: &str| {
      format!("{prefix}{}{inner}{}", open.repeat(depth), close.repeat(depth))
    };
    // (prefix, opener, innermost, closer): each closed, and as openers alone.
    let shapes = [
      ("return ", "(", "1", ")"),
      ("return ", "[", "", "]"),
      ("", "{", "", "}"),
      ("let x: ", "Array<", "number", ">"),
      ("let x: ", "(", "number", ")"),
      ("let x: ", "[", "number", "]"),
      ("let x: ", "{a:", "number", "}"),
      ("return ", "()=>", "1", ""),
      ("return ", "`${", "1", "}`"),
      ("return ", "{a:", "1", "}"),
      ("", "do ", "x;", " while(0)"),
      ("return ", "!", "1", ""),
      ("return ", "1+", "1", ""),
    ];
    let programs = shapes
      .iter()
      .flat_map(|(prefix, open, inner, close)| [nested(prefix, open, inner, close), nested(prefix, open, "", "")]);
    for program in programs {
      let head = program.chars().take(24).collect::<String>();
      let stripped = std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(move || strip_types(&program).map(|code| code.len()))
        .expect("a thread")
        .join();
      assert!(stripped.is_ok(), "the strip of {head}... overflowed");
    }
  }

  #[test]
  fn types_become_whitespace_and_lines_stay() {
    let js = strip_types("const x: number = 1;\nreturn x as number;").unwrap();
    assert_eq!(js, "const x         = 1;\nreturn x          ;");
  }

  #[test]
  fn top_level_await_and_return_parse() {
    assert!(strip_types("const v = await Promise.resolve(1);\nreturn v").is_ok());
  }

  #[test]
  fn enum_is_refused_with_its_position() {
    let err = strip_types("const a = 1;\nenum E { A }").unwrap_err();
    assert!(err.to_lowercase().contains("enum"), "{err}");
    assert!(err.contains("program.ts:2:"), "{err}");
  }

  #[test]
  fn syntax_error_names_line_and_column() {
    let err = strip_types("const a = 1;\nconst = 2;").unwrap_err();
    assert!(err.starts_with("SyntaxError:"), "{err}");
    assert!(err.contains("program.ts:2:"), "{err}");
  }

  #[test]
  fn closing_the_wrapper_is_refused() {
    assert!(strip_types("}); globalThis.x = 1; (async function () {").is_err());
  }
}
