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

/// The most stack swc's parse, strip and drop of the syntax tree take per
/// byte of source: each recurses once a level of nesting, and the deepest
/// nesting a byte can open is one parenthesis (~3.3 KB a level, measured;
/// generic type arguments ~4.3 KB a level of six bytes, `Array<`; a binary
/// chain ~100 bytes a level). A run's thread has 16 MiB, which a program of
/// ~5000 nested parentheses (10 KB) overflowed, ending its host.
const STRIP_STACK_PER_BYTE: usize = 3584;
/// The most stack a strip is given (a program of up to ~300 KB is covered
/// nested throughout). Only the pages the nesting reaches are touched, and
/// the stack is unmapped when the strip returns.
const MAX_STRIP_STACK: usize = 1 << 30;

/// Strip `program`'s types. On success, the JavaScript body (same lines and
/// columns as `program`); on failure, the message of a SyntaxError-style
/// exception with positions in the program as written.
///
/// On a stack of its own when the thread's has less left than the
/// program's length may need ([`STRIP_STACK_PER_BYTE`]): nesting deeper
/// than V8 compiles (which throws a `RangeError` at a few thousand levels)
/// then fails there, not in the host.
pub fn strip_types(program: &str) -> Result<String, String> {
  let stack = program.len().saturating_add(WRAP_PREFIX.len() + WRAP_SUFFIX.len()).saturating_mul(STRIP_STACK_PER_BYTE);
  let stack = stack.min(MAX_STRIP_STACK);
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

  /// Each shape nested past what V8 compiles, on a run thread's 16 MiB:
  /// the strip returns (V8 then throws its `RangeError`) instead of
  /// overflowing the thread's stack, which ended the host.
  #[test]
  fn nesting_deeper_than_a_run_threads_stack_holds_is_stripped_on_a_stack_of_its_own() {
    let depth = 20_000;
    let shapes = [
      format!("return {}1{}", "(".repeat(depth), ")".repeat(depth)),
      format!("return {}{}", "[".repeat(depth), "]".repeat(depth)),
      format!("{}{}", "{".repeat(depth), "}".repeat(depth)),
      format!("let x: {}number{} = 1", "Array<".repeat(depth), ">".repeat(depth)),
      format!("return {}1", "()=>".repeat(depth)),
      format!("return {}1{}", "`${".repeat(depth), "}`".repeat(depth)),
      format!("return {}1", "!".repeat(100 * depth)),
      format!("return {}1", "1+".repeat(100 * depth)),
    ];
    for program in shapes {
      let stripped = std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(move || strip_types(&program).map(|code| code.len()))
        .expect("a thread")
        .join()
        .expect("no overflow");
      assert!(stripped.is_ok(), "{stripped:?}");
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
