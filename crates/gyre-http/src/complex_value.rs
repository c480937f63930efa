//! nginx's "complex values" (`ngx_http_complex_value_t`,
//! `ngx_http_script_compile`): a directive argument with variables, such as
//! `"$scheme://$host$request_uri"`, compiled once at configuration time
//! into literal and variable parts, and evaluated per request into a
//! caller's buffer.
//!
//! Syntax as nginx's: `$name` (letters, digits, `_`), `${name}` to end a
//! name inside a word, `$1`..`$9` for regex captures (one digit, as
//! nginx). A value without variables keeps its text shared, so using it
//! copies nothing.

use std::sync::Arc;

use crate::variables::{capture, VarCache, VarEnv, VarIndex, Variables};

/// One piece of a compiled value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// `text[start..end]`.
    Lit(usize, usize),
    Var(VarIndex),
    /// `$1`..`$9` (`$0`, the whole match, too).
    Capture(u8),
}

/// How the rewrite module copies regex captures into a value when the
/// request's URI came %-escaped or with `+` (nginx's `e->quote` and
/// `e->is_args`): escaped again ([`crate::uri::escape_args`]), since the
/// URI they were taken from was decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureEscape {
    /// As they are (every value outside the rewrite module).
    None,
    /// Every capture (`set`, `return`, `if`, a redirecting `rewrite`).
    All,
    /// Those after the replacement's `?` (an internal `rewrite`).
    InArgs,
}

/// A compiled directive argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComplexValue {
    /// The argument as written.
    pub text: Arc<str>,
    parts: Vec<Part>,
}

impl ComplexValue {
    /// Compiles `text`, indexing its variables in `vars`.
    pub fn compile(text: &str, vars: &mut Variables) -> Result<ComplexValue, String> {
        let b = text.as_bytes();
        let mut parts = Vec::new();
        let mut lit_start = 0;
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                i += 1;
                continue;
            }
            if lit_start < i {
                parts.push(Part::Lit(lit_start, i));
            }
            i += 1;
            match b.get(i) {
                Some(d) if d.is_ascii_digit() => {
                    parts.push(Part::Capture(d - b'0'));
                    i += 1;
                }
                Some(b'{') => {
                    let close = b[i..].iter().position(|&c| c == b'}').ok_or_else(|| {
                        format!("the closing bracket in \"{text}\" variable is missing")
                    })?;
                    let name = &text[i + 1..i + close];
                    if name.is_empty() {
                        return Err(format!("invalid variable name in \"{text}\""));
                    }
                    parts.push(Part::Var(vars.index(name)?));
                    i += close + 1;
                }
                _ => {
                    let start = i;
                    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                        i += 1;
                    }
                    if start == i {
                        return Err(format!("invalid variable name in \"{text}\""));
                    }
                    parts.push(Part::Var(vars.index(&text[start..i])?));
                }
            }
            lit_start = i;
        }
        if lit_start < b.len() {
            parts.push(Part::Lit(lit_start, b.len()));
        }
        Ok(ComplexValue {
            text: text.into(),
            parts,
        })
    }

    /// A value without variables.
    pub fn literal(text: &str) -> ComplexValue {
        ComplexValue {
            text: text.into(),
            parts: vec![Part::Lit(0, text.len())],
        }
    }

    /// True when the value has no variables: [`ComplexValue::text`] is it.
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Lit(..)))
    }

    /// True when the value uses regex captures.
    pub fn uses_captures(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Capture(_)))
    }

    /// Appends the value for a request to `out`. Variables that are not
    /// found add nothing (nginx's empty value).
    pub fn eval(
        &self,
        vars: &Variables,
        cache: &mut VarCache,
        env: &VarEnv<'_>,
        out: &mut Vec<u8>,
    ) {
        self.eval_escaping(vars, cache, env, out, CaptureEscape::None);
    }

    /// [`ComplexValue::eval`] with regex captures copied as `esc` says.
    pub fn eval_escaping(
        &self,
        vars: &Variables,
        cache: &mut VarCache,
        env: &VarEnv<'_>,
        out: &mut Vec<u8>,
        esc: CaptureEscape,
    ) {
        // nginx's `e->is_args`: past a literal `?`.
        let mut in_args = false;
        for p in &self.parts {
            match *p {
                Part::Lit(s, e) => {
                    let lit = self.text.as_bytes().get(s..e).unwrap_or(&[]);
                    in_args |= esc == CaptureEscape::InArgs && lit.contains(&b'?');
                    out.extend_from_slice(lit)
                }
                Part::Capture(n) if esc == CaptureEscape::All || in_args => {
                    if let Some(v) = capture(env, usize::from(n)) {
                        crate::uri::escape_args(v, out);
                    }
                }
                Part::Var(i) => match cache.value(vars, i, env) {
                    Some(v) => out.extend_from_slice(v),
                    None if env.loc.uninitialized_variable_warn && vars.is_user(i) => {
                        log::warn!("using uninitialized \"{}\" variable", vars.name(i));
                    }
                    None => {}
                },
                Part::Capture(n) => {
                    if let Some(v) = capture(env, usize::from(n)) {
                        out.extend_from_slice(v);
                    }
                }
            }
        }
    }

    /// Appends the value with each variable's value passed through `put`
    /// (the access log's escaping; `None` for a variable not found).
    pub fn eval_with(
        &self,
        vars: &Variables,
        cache: &mut VarCache,
        env: &VarEnv<'_>,
        out: &mut Vec<u8>,
        put: impl Fn(Option<&[u8]>, &mut Vec<u8>),
    ) {
        for p in &self.parts {
            match *p {
                Part::Lit(s, e) => {
                    out.extend_from_slice(self.text.as_bytes().get(s..e).unwrap_or(&[]))
                }
                Part::Var(i) => put(cache.value(vars, i, env), out),
                Part::Capture(n) => put(capture(env, usize::from(n)), out),
            }
        }
    }

    /// The variables the value reads, for checks at configuration time.
    pub fn variables(&self) -> impl Iterator<Item = VarIndex> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(i) => Some(*i),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_parts() {
        let mut v = Variables::default();
        let cv = ComplexValue::compile("$scheme://${host}x$request_uri$1", &mut v).unwrap();
        assert_eq!(
            cv.parts,
            vec![
                Part::Var(0),
                Part::Lit(7, 10),
                Part::Var(1),
                Part::Lit(17, 18),
                Part::Var(2),
                Part::Capture(1)
            ]
        );
        assert!(!cv.is_literal());
        assert!(cv.uses_captures());
        assert!(ComplexValue::compile("plain text", &mut v)
            .unwrap()
            .is_literal());
        assert_eq!(
            ComplexValue::compile("a${b", &mut v).unwrap_err(),
            "the closing bracket in \"a${b\" variable is missing"
        );
        assert!(ComplexValue::compile("a$", &mut v).is_err());
    }
}
