//! nginx's rewrite module (`ngx_http_rewrite_module.c`): `rewrite`,
//! `return`, `set`, `if`, `break`, compiled at configuration time into a
//! script per server (run in the server-rewrite phase) and per location
//! (the rewrite phase), and executed per request.
//!
//! The script is a list of [`Op`]s; `if` holds its own list, run when the
//! condition holds (nginx switches to the `if` block's configuration; only
//! the rewrite module's directives may appear inside one here).

use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};
use gyre_core::errlog::NOTICE;

use crate::conf::HttpConf;

use crate::complex_value::{CaptureEscape, ComplexValue};
use crate::log_error;
use crate::regex::{MatchCache, Regex};
use crate::request::HttpRequest;
use crate::response::{Body, Response, Text};
use crate::variables::{VarIndex, Variables};

/// `rewrite`'s flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// No flag: go on with the next directive.
    None,
    Last,
    Break,
    /// 302.
    Redirect,
    /// 301.
    Permanent,
}

/// An `if` condition.
#[derive(Debug, Clone)]
pub enum Cond {
    /// `if ($var)`: true unless empty or "0".
    Value(ComplexValue),
    /// `=` / `!=`.
    Eq {
        left: ComplexValue,
        right: ComplexValue,
        negate: bool,
    },
    /// `~`, `~*`, `!~`, `!~*`.
    Match {
        left: ComplexValue,
        re: Arc<Regex>,
        negate: bool,
    },
    /// `-f`, `-d`, `-e`, `-x` and `!-…`.
    File {
        test: u8,
        path: ComplexValue,
        negate: bool,
    },
}

/// One compiled directive of the rewrite module.
#[derive(Debug, Clone)]
pub enum Op {
    Rewrite {
        re: Arc<Regex>,
        repl: ComplexValue,
        flag: Flag,
        /// The replacement starts with `http://`, `https://` or `$scheme`.
        external: bool,
    },
    Return {
        code: u16,
        text: Option<ComplexValue>,
        /// The text when it has no variables (no copy per response).
        lit: Option<Arc<[u8]>>,
    },
    Set {
        var: VarIndex,
        value: ComplexValue,
    },
    If {
        cond: Cond,
        ops: Vec<Op>,
        /// The directives of a location's `if` other than the rewrite
        /// module's (`root`, `add_header`, `expires`, `proxy_pass`, ...),
        /// as read: nginx makes the block a configuration of its own,
        /// merged over the location's.
        set: Option<Box<crate::conf::LocSettings>>,
        /// That configuration, resolved (`http_init`): the request's once
        /// the condition holds (nginx's `ngx_http_script_if_code`).
        conf: Option<Arc<crate::conf::LocConf>>,
    },
    Break,
}

/// How a script ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Ran to the end (or `rewrite` without a flag changed the URI).
    Continue,
    /// `break` or `rewrite … break`: no more rewrite directives.
    Break,
    /// `rewrite … last`: stop here, find the location again.
    Last,
    /// `return` or a redirecting `rewrite`: the response is filled in.
    Respond,
}

/// What a script needs besides the request.
pub struct Env<'a> {
    pub conf: &'a crate::conf::HttpConf,
    pub matches: &'a mut MatchCache,
    pub now: gyre_core::event::Msec,
    pub unix_ms: u64,
    pub scratch: &'a mut Vec<u8>,
    /// nginx's `e->quote`: captures copied into `set`, `return` and `if`
    /// values are escaped (see [`CaptureEscape`]); true when a script
    /// starts, false after a `rewrite` without a flag matched.
    pub quote: bool,
}

/// How `v` copies captures for `r` under `want`: escaped only when the
/// request's URI came escaped (nginx's `quoted_uri || plus_in_uri`).
fn cap_escape(v: &ComplexValue, r: &HttpRequest, want: CaptureEscape) -> CaptureEscape {
    if want == CaptureEscape::None
        || !v.uses_captures()
        || !crate::uri::quoted_or_plus(r.st.req.target())
    {
        return CaptureEscape::None;
    }
    want
}

/// Appends `v`'s value to `e.scratch` (the values of `set`, `return` and
/// `if`): its captures escaped while `e.quote` holds ([`cap_escape`]).
fn eval_quoted(v: &ComplexValue, e: &mut Env<'_>, r: &mut HttpRequest) {
    let want = if e.quote {
        CaptureEscape::All
    } else {
        CaptureEscape::None
    };
    let esc = cap_escape(v, r, want);
    let env = r.st.env(e.conf, None, e.now, e.unix_ms);
    v.eval_escaping(&e.conf.vars, &mut r.vars, &env, e.scratch, esc);
}

/// Runs `ops` for `r`.
pub fn run(ops: &[Op], e: &mut Env<'_>, r: &mut HttpRequest, out: &mut Response) -> End {
    for op in ops {
        match op {
            Op::Break => return End::Break,
            Op::Return { code, text, lit } => {
                return_response(*code, text.as_ref(), lit.as_ref(), e, r, out);
                return End::Respond;
            }
            Op::Set { var, value } => {
                e.scratch.clear();
                eval_quoted(value, e, r);
                r.vars.set(*var, e.scratch);
            }
            Op::If {
                cond, ops, conf, ..
            } => {
                if test(cond, e, r) {
                    if let Some(c) = conf {
                        r.st.loc = c.clone();
                    }
                    match run(ops, e, r, out) {
                        End::Continue => {}
                        end => return end,
                    }
                }
            }
            Op::Rewrite {
                re,
                repl,
                flag,
                external,
            } => {
                let loc = r.st.loc.clone();
                if !e.matches.exec(re, &r.st.uri, &mut r.st.caps) {
                    if loc.rewrite_log {
                        gyre_core::log_ctx!(
                            NOTICE,
                            &log_error::req(e.conf, r),
                            "\"{}\" does not match \"{}\"",
                            re.source,
                            String::from_utf8_lossy(&r.st.uri)
                        );
                    }
                    continue;
                }
                r.st.cap_src.clear();
                r.st.cap_src.extend_from_slice(&r.st.uri);
                set_named(re, r);
                if loc.rewrite_log {
                    gyre_core::log_ctx!(
                        NOTICE,
                        &log_error::req(e.conf, r),
                        "\"{}\" matches \"{}\"",
                        re.source,
                        String::from_utf8_lossy(&r.st.uri)
                    );
                }
                if let Some(end) = apply_rewrite(repl, *flag, *external, e, r, out) {
                    return end;
                }
                e.quote = false;
            }
        }
    }
    End::Continue
}

/// Named captures become variables when their regex matches.
pub fn set_named(re: &Regex, r: &mut HttpRequest) {
    for &(var, group) in &re.name_vars {
        let v = match r.st.caps.get(group) {
            Some(&(s, e)) => r.st.cap_src.get(s..e).unwrap_or(&[]),
            None => &[],
        };
        r.vars.set(var, v);
    }
}

/// `rewrite REGEX REPLACEMENT FLAG` after a match.
fn apply_rewrite(
    repl: &ComplexValue,
    flag: Flag,
    external: bool,
    e: &mut Env<'_>,
    r: &mut HttpRequest,
    out: &mut Response,
) -> Option<End> {
    let redirect = external || matches!(flag, Flag::Redirect | Flag::Permanent);
    let want = if redirect {
        CaptureEscape::All
    } else {
        CaptureEscape::InArgs
    };
    let esc = cap_escape(repl, r, want);
    e.scratch.clear();
    {
        let env = r.st.env(e.conf, None, e.now, e.unix_ms);
        repl.eval_escaping(&e.conf.vars, &mut r.vars, &env, e.scratch, esc);
    }
    let new: &[u8] = e.scratch;
    // A replacement ending in `?` drops the original arguments; one with
    // `?` inside puts its own first.
    let (path, own_args, keep_args) = match new.iter().position(|&c| c == b'?') {
        Some(q) if q + 1 == new.len() => (&new[..q], None, false),
        Some(q) => (&new[..q], Some(&new[q + 1..]), true),
        None => (new, None, true),
    };
    if r.st.loc.rewrite_log {
        gyre_core::log_ctx!(
            NOTICE,
            &log_error::req(e.conf, r),
            "rewritten data: \"{}\", args: \"{}\"",
            String::from_utf8_lossy(path),
            String::from_utf8_lossy(own_args.unwrap_or(if keep_args { &r.st.args } else { b"" }))
        );
    }
    // The original arguments after the replacement's own, joined by `&`.
    let mut args = Vec::new();
    if let Some(a) = own_args {
        args.extend_from_slice(a);
    }
    if keep_args && !r.st.args.is_empty() {
        if own_args.is_some() {
            args.push(b'&');
        }
        args.extend_from_slice(&r.st.args);
    }
    if redirect {
        let mut location = path.to_vec();
        crate::uri::unescape_redirect(&mut location);
        if !args.is_empty() {
            location.push(b'?');
            location.extend_from_slice(&args);
        }
        let code = if flag == Flag::Permanent { 301 } else { 302 };
        out.set_error(code);
        out.location = Some(location.into());
        return Some(End::Respond);
    }
    r.st.uri.clear();
    r.st.uri.extend_from_slice(path);
    r.st.args = args;
    r.st.internal = true;
    match flag {
        Flag::Last => {
            r.st.uri_changed = true;
            Some(End::Last)
        }
        Flag::Break => {
            r.st.uri_changed = false;
            r.st.valid_location = false;
            Some(End::Break)
        }
        _ => {
            r.st.uri_changed = true;
            None
        }
    }
}

/// `return CODE [TEXT]`, `return URL`: nginx's `ngx_http_send_response`.
fn return_response(
    code: u16,
    text: Option<&ComplexValue>,
    lit: Option<&Arc<[u8]>>,
    e: &mut Env<'_>,
    r: &mut HttpRequest,
    out: &mut Response,
) {
    let Some(text) = text else {
        if code == 444 {
            out.reset(444);
            out.close = true;
            return;
        }
        out.set_error(code);
        return;
    };
    let redirect = matches!(code, 301 | 302 | 303 | 307 | 308);
    if let (Some(l), false) = (lit, redirect) {
        // A text without variables: the shared bytes, no copy.
        out.reset(code);
        out.content_type = Some((&r.st.loc.default_type).into());
        if r.st.is_head() {
            out.content_length = Some(l.len() as u64);
        } else {
            out.body = Body::shared(l.clone());
        }
        return;
    }
    let value: Text = if text.is_literal() {
        Text::Shared(text.text.clone())
    } else {
        e.scratch.clear();
        eval_quoted(text, e, r);
        Text::Owned(e.scratch.clone())
    };
    if redirect {
        out.set_error(code);
        out.location = Some(value);
        return;
    }
    out.reset(code);
    out.content_type = Some((&r.st.loc.default_type).into());
    let len = value.len() as u64;
    if r.st.is_head() {
        out.content_length = Some(len);
    } else {
        out.body = match value {
            Text::Owned(s) => Body::Bytes(s),
            v => Body::Bytes(v.as_bytes().to_vec()),
        };
    }
}

fn test(cond: &Cond, e: &mut Env<'_>, r: &mut HttpRequest) -> bool {
    e.scratch.clear();
    match cond {
        Cond::Value(v) => {
            eval_quoted(v, e, r);
            !(e.scratch.is_empty() || e.scratch.as_slice() == b"0")
        }
        Cond::Eq {
            left,
            right,
            negate,
        } => {
            eval_quoted(left, e, r);
            let split = e.scratch.len();
            eval_quoted(right, e, r);
            let (a, b) = e.scratch.split_at(split);
            (a == b) != *negate
        }
        Cond::Match { left, re, negate } => {
            eval_quoted(left, e, r);
            let hit = e.matches.exec(re, e.scratch, &mut r.st.caps);
            if hit {
                r.st.cap_src.clear();
                r.st.cap_src.extend_from_slice(e.scratch);
                set_named(re, r);
            }
            hit != *negate
        }
        Cond::File { test, path, negate } => {
            eval_quoted(path, e, r);
            let p = std::path::Path::new(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(e.scratch),
            );
            let md = std::fs::metadata(p);
            let ok = match (test, &md) {
                (b'f', Ok(m)) => m.is_file(),
                (b'd', Ok(m)) => m.is_dir(),
                (b'e', Ok(_)) => true,
                (b'x', Ok(m)) => {
                    use std::os::unix::fs::PermissionsExt;
                    m.is_file() && m.permissions().mode() & 0o111 != 0
                }
                _ => false,
            };
            ok != *negate
        }
    }
}

// ---- configuration -------------------------------------------------------

/// A setter of the module's directive table.
pub fn set_return(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let op = parse_return(d, &mut c.vars)?;
    c.script(cx)?.push(op);
    Ok(())
}

/// A setter of the module's directive table.
pub fn set_rewrite(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let op = parse_rewrite(d, &mut c.vars, &mut c.regexes)?;
    c.script(cx)?.push(op);
    Ok(())
}

/// A setter of the module's directive table.
pub fn set_set(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let op = parse_set(d, &mut c.vars)?;
    c.script(cx)?.push(op);
    Ok(())
}

/// A setter of the module's directive table.
pub fn set_break(c: &mut HttpConf, _: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.script(cx)?.push(Op::Break);
    Ok(())
}

/// A setter of the module's directive table.
pub fn set_if(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let cond = parse_if(d, &mut c.vars, &mut c.regexes)?;
    c.script(cx)?.push(Op::If {
        cond,
        ops: Vec::new(),
        set: None,
        conf: None,
    });
    Ok(())
}

/// A setter of the module's directive table.
pub fn set_rewrite_log(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.rewrite_log = Some(v);
    Ok(())
}

/// A setter of the module's directive table.
pub fn set_uninitialized_variable_warn(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.uninitialized_variable_warn = Some(v);
    Ok(())
}

/// Compiles a regex for the configuration, indexing its named captures as
/// variables.
pub fn compile_regex(
    pattern: &str,
    caseless: bool,
    vars: &mut Variables,
    next_id: &mut usize,
) -> Result<Arc<Regex>, String> {
    let mut re = Regex::compile(pattern, caseless, *next_id)?;
    *next_id += 1;
    for (name, group) in re.names.clone() {
        let v = vars.define_user(&name)?;
        re.name_vars.push((v, group));
    }
    Ok(Arc::new(re))
}

/// `rewrite REGEX REPLACEMENT [FLAG]`.
pub fn parse_rewrite(
    d: &Directive,
    vars: &mut Variables,
    next_id: &mut usize,
) -> Result<Op, String> {
    let re = compile_regex(d.arg(0), false, vars, next_id)?;
    let text = d.arg(1);
    let repl = ComplexValue::compile(text, vars)?;
    let external =
        text.starts_with("http://") || text.starts_with("https://") || text.starts_with("$scheme");
    let flag = match d.args.get(2).map(String::as_str) {
        None => Flag::None,
        Some("last") => Flag::Last,
        Some("break") => Flag::Break,
        Some("redirect") => Flag::Redirect,
        Some("permanent") => Flag::Permanent,
        Some(f) => return Err(format!("invalid parameter \"{f}\"")),
    };
    Ok(Op::Rewrite {
        re,
        repl,
        flag,
        external,
    })
}

/// `return CODE [TEXT]` / `return URL`.
pub fn parse_return(d: &Directive, vars: &mut Variables) -> Result<Op, String> {
    let (code, text) = match d.args.as_slice() {
        [url]
            if url.starts_with("http://")
                || url.starts_with("https://")
                || url.starts_with("$scheme") =>
        {
            (302, Some(url.as_str()))
        }
        [code] => (parse_code(code)?, None),
        [code, text] => (parse_code(code)?, Some(text.as_str())),
        _ => return Err(d.error("invalid number of arguments")),
    };
    let text = text.map(|t| ComplexValue::compile(t, vars)).transpose()?;
    let lit = text
        .as_ref()
        .filter(|t| t.is_literal())
        .map(|t| Arc::<[u8]>::from(t.text.as_bytes()));
    Ok(Op::Return { code, text, lit })
}

fn parse_code(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(n) if n <= 999 => Ok(n),
        _ => Err(format!("invalid return code \"{s}\"")),
    }
}

/// `set $VAR VALUE`.
pub fn parse_set(d: &Directive, vars: &mut Variables) -> Result<Op, String> {
    let name = d
        .arg(0)
        .strip_prefix('$')
        .ok_or_else(|| format!("invalid variable name \"{}\"", d.arg(0)))?;
    if name.is_empty() {
        return Err(format!("invalid variable name \"{}\"", d.arg(0)));
    }
    let var = vars.define_user(name)?;
    let value = ComplexValue::compile(d.arg(1), vars)?;
    Ok(Op::Set { var, value })
}

/// `if (CONDITION)`, nginx's `ngx_http_rewrite_if_condition`.
pub fn parse_if(d: &Directive, vars: &mut Variables, next_id: &mut usize) -> Result<Cond, String> {
    let invalid = || format!("invalid condition \"{}\"", d.args.join(" "));
    let mut args: Vec<&str> = d.args.iter().map(String::as_str).collect();
    let first = args.first_mut().ok_or_else(invalid)?;
    *first = first.strip_prefix('(').ok_or_else(invalid)?;
    let last = args.last_mut().ok_or_else(invalid)?;
    *last = last.strip_suffix(')').ok_or_else(invalid)?;
    if args.first() == Some(&"") {
        args.remove(0);
    }
    if args.last() == Some(&"") {
        args.pop();
    }
    match args.as_slice() {
        [v] if v.starts_with('$') => Ok(Cond::Value(ComplexValue::compile(v, vars)?)),
        [l, op, rhs] if l.starts_with('$') => {
            let left = ComplexValue::compile(l, vars)?;
            match *op {
                "=" | "!=" => Ok(Cond::Eq {
                    left,
                    right: ComplexValue::compile(rhs, vars)?,
                    negate: *op == "!=",
                }),
                "~" | "~*" | "!~" | "!~*" => Ok(Cond::Match {
                    left,
                    re: compile_regex(rhs, op.ends_with('*'), vars, next_id)?,
                    negate: op.starts_with('!'),
                }),
                _ => Err(format!("unexpected \"{op}\" in condition")),
            }
        }
        [op, path] => {
            let (negate, t) = match op.strip_prefix('!') {
                Some(t) => (true, t),
                None => (false, *op),
            };
            let test = match t {
                "-f" => b'f',
                "-d" => b'd',
                "-e" => b'e',
                "-x" => b'x',
                _ => return Err(format!("invalid condition \"{op}\"")),
            };
            Ok(Cond::File {
                test,
                path: ComplexValue::compile(path, vars)?,
                negate,
            })
        }
        _ => Err(invalid()),
    }
}

/// Whether a location's script can change its URI (so post-rewrite must
/// look); every script can, but one with only `return`s cannot.
pub fn changes_uri(ops: &[Op]) -> bool {
    ops.iter().any(|o| match o {
        Op::Rewrite { .. } => true,
        Op::If { ops, .. } => changes_uri(ops),
        _ => false,
    })
}
