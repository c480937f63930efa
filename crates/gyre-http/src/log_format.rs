//! `log_format NAME [escape=default|json|none] STRING ...` (nginx's
//! `ngx_http_log_module.c`): a format compiled once into literal and
//! variable parts, written per request with nginx's escaping.
//!
//! The predefined `combined` format is index 0 and is written by the fast
//! path of [`crate::access_log`] (no variable lookups); a `log_format`
//! spelling out the same line gives the same bytes.

use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};

use crate::complex_value::ComplexValue;
use crate::conf::HttpConf;
use crate::variables::{VarCache, VarEnv, Variables};

/// How variable values are escaped in a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// `"`, `\` and bytes outside 0x20..0x7e as `\xXX`; a value not found
    /// is `-`.
    Default,
    /// JSON string escaping; a value not found is empty.
    Json,
    /// As is; a value not found is `-`.
    None,
}

/// One `log_format`.
#[derive(Debug, Clone)]
pub struct LogFormat {
    pub name: String,
    pub escape: Escape,
    /// The format strings joined; `None` for the built-in `combined`.
    pub value: Option<ComplexValue>,
}

impl LogFormat {
    /// The predefined `combined` format.
    pub fn combined() -> LogFormat {
        LogFormat {
            name: "combined".into(),
            escape: Escape::Default,
            value: None,
        }
    }

    /// Parses the directive's arguments.
    pub fn parse(args: &[String], vars: &mut Variables) -> Result<LogFormat, String> {
        let name = args.first().ok_or("invalid number of arguments")?.clone();
        let mut rest = args.get(1..).unwrap_or(&[]);
        let mut escape = Escape::Default;
        if let Some(e) = rest.first().and_then(|a| a.strip_prefix("escape=")) {
            escape = match e {
                "default" => Escape::Default,
                "json" => Escape::Json,
                "none" => Escape::None,
                _ => return Err(format!("unknown log format escaping \"{e}\"")),
            };
            rest = rest.get(1..).unwrap_or(&[]);
        }
        if rest.is_empty() {
            return Err("invalid number of arguments in \"log_format\" directive".into());
        }
        let text = rest.concat();
        Ok(LogFormat {
            name,
            escape,
            value: Some(ComplexValue::compile(&text, vars)?),
        })
    }

    /// Appends one line (newline included) for a request.
    pub fn write(
        &self,
        vars: &Variables,
        cache: &mut VarCache,
        env: &VarEnv<'_>,
        out: &mut Vec<u8>,
    ) {
        let Some(v) = &self.value else {
            return;
        };
        match self.escape {
            Escape::Default => v.eval_with(vars, cache, env, out, |val, out| match val {
                Some(b) => escape_default(b, out),
                None => out.push(b'-'),
            }),
            Escape::Json => v.eval_with(vars, cache, env, out, |val, out| {
                if let Some(b) = val {
                    escape_json(b, out);
                }
            }),
            Escape::None => v.eval_with(vars, cache, env, out, |val, out| match val {
                Some(b) => out.extend_from_slice(b),
                None => out.push(b'-'),
            }),
        }
        out.push(b'\n');
    }
}

// ---- configuration -------------------------------------------------------

/// A setter of the http module's directive table.
pub fn set_log_format(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let f = LogFormat::parse(&d.args, &mut c.vars)?;
    if f.name == "combined" || c.log_formats.iter().any(|x| x.name == f.name) {
        return Err(format!("duplicate \"log_format\" name \"{}\"", f.name));
    }
    c.log_formats.push(Arc::new(f));
    Ok(())
}

/// A setter of the http module's directive table.
pub fn set_access_log(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    if d.arg(0) == "off" {
        let s = c.settings(cx)?;
        s.access_log = Some(None);
        s.log_format = None;
        s.log_if = None;
        s.extra_logs.clear();
        return Ok(());
    }
    let mut format = None;
    let mut cond = None;
    for (i, a) in d.args.iter().enumerate().skip(1) {
        if let Some(v) = a.strip_prefix("buffer=") {
            // Lines are always buffered (64 KiB, flushed every second and
            // on exit); the size is checked as nginx checks it.
            gyre_core::conf::parse_size(v).ok_or_else(|| format!("invalid buffer size \"{v}\""))?;
        } else if let Some(v) = a.strip_prefix("flush=") {
            gyre_core::conf::parse_time_ms(v)
                .ok_or_else(|| format!("invalid flush time \"{v}\""))?;
        } else if let Some(v) = a.strip_prefix("if=") {
            cond = Some(ComplexValue::compile(v, &mut c.vars)?);
        } else if a.starts_with("gzip") {
            return Err(format!("invalid parameter \"{a}\""));
        } else if i == 1 {
            if a != "combined" && !c.log_formats.iter().any(|f| f.name == *a) {
                return Err(format!("unknown log format \"{a}\""));
            }
            format = Some(a.clone());
        } else {
            return Err(format!("invalid parameter \"{a}\""));
        }
    }
    let path = cx.full_path(d.arg(0));
    let s = c.settings(cx)?;
    match &s.access_log {
        // `off` at this level: nothing is logged here (nginx's `off`
        // flag wins over the level's other lines).
        Some(None) => return Ok(()),
        // A further line at this level: one more file.
        Some(Some(_)) => {
            s.extra_logs
                .push(crate::conf::extra_logs::ExtraLog { path, format, cond });
            return Ok(());
        }
        None => {}
    }
    s.access_log = Some(Some(path));
    s.log_format = format;
    s.log_if = cond;
    Ok(())
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// nginx's `ngx_http_log_escape`. Runs of plain bytes are copied at
/// once: a User-Agent is some 150 of them, and a push per byte was the
/// larger part of a line's cost.
pub fn escape_default(b: &[u8], out: &mut Vec<u8>) {
    let plain = |c: u8| c != b'"' && c != b'\\' && (0x20..0x7f).contains(&c);
    let mut rest = b;
    while let Some(run) = rest.iter().position(|&c| !plain(c)) {
        let c = rest[run];
        out.extend_from_slice(&rest[..run]);
        out.extend_from_slice(&[
            b'\\',
            b'x',
            HEX[usize::from(c >> 4)],
            HEX[usize::from(c & 15)],
        ]);
        rest = &rest[run + 1..];
    }
    out.extend_from_slice(rest);
}

/// nginx's `ngx_escape_json`.
pub fn escape_json(b: &[u8], out: &mut Vec<u8>) {
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 15)]);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_nginx() {
        let mut o = Vec::new();
        escape_default(b"a\"b\\c\x01\xff", &mut o);
        assert_eq!(o, b"a\\x22b\\x5Cc\\x01\\xFF");
        o.clear();
        escape_json(b"a\"b\\\n\x01", &mut o);
        assert_eq!(o, b"a\\\"b\\\\\\n\\u0001");
    }

    #[test]
    fn parses_escape_and_joins_strings() {
        let mut v = Variables::default();
        let f = LogFormat::parse(
            &[
                "j".into(),
                "escape=json".into(),
                "{\"u\":\"$uri\",".into(),
                "\"s\":$status}".into(),
            ],
            &mut v,
        )
        .unwrap();
        assert_eq!(f.escape, Escape::Json);
        assert_eq!(&*f.value.unwrap().text, "{\"u\":\"$uri\",\"s\":$status}");
        assert!(LogFormat::parse(&["x".into(), "escape=xml".into(), "a".into()], &mut v).is_err());
    }
}
