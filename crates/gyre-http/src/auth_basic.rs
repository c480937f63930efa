//! `auth_basic` / `auth_basic_user_file` (nginx's
//! `ngx_http_auth_basic_module`) and the `Authorization: Basic` parsing
//! that `$remote_user` shares (nginx's `ngx_http_auth_basic_user`).
//!
//! The user file is opened and read on every request, as nginx does (so
//! an edited file applies at once; it is read in 2 KiB chunks up to the
//! user's line, see [`crate::htpasswd::lookup`]). Both directives take
//! variables; a realm that evaluates to `off` switches the check off.

use std::io::ErrorKind;

use gyre_core::conf::{ConfCtx, Directive};

use crate::complex_value::ComplexValue;
use crate::conf::HttpConf;
use crate::htpasswd;
use crate::parse::Request;

/// The user and password an `Authorization: Basic …` header carries:
/// `(decoded "user:password", length of user)`. `None` as nginx declines:
/// no header, another scheme, bad base64, no `:` or an empty user.
pub fn basic_user(req: &Request) -> Option<(Vec<u8>, usize)> {
    let v = req.header("Authorization")?;
    if v.len() < 6 || !v[..6].eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let enc = &v[6..];
    let start = enc.iter().position(|&b| b != b' ')?;
    let decoded = htpasswd::base64_decode(&enc[start..])?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    if colon == 0 {
        return None;
    }
    Some((decoded, colon))
}

/// `auth_basic STRING|off`.
pub fn set_auth_basic(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let cv = ComplexValue::compile(d.arg(0), &mut c.vars)?;
    c.settings(cx)?.auth_basic = Some(cv);
    Ok(())
}

/// `auth_basic_user_file FILE` (relative to the configuration prefix).
pub fn set_user_file(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let a = d.arg(0);
    // A relative name is relative to the configuration's directory (nginx's
    // `conf_prefix`). One starting with a variable is used as it evaluates
    // (nginx would prefix a relative result at run time; not done here).
    let path = if a.starts_with('/') || a.starts_with('$') {
        a.to_string()
    } else {
        cx.conf_dir().join(a).to_string_lossy().into_owned()
    };
    let cv = ComplexValue::compile(&path, &mut c.vars)?;
    c.settings(cx)?.auth_basic_user_file = Some(cv);
    Ok(())
}

/// What the check concluded.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not configured here, or the realm is `off`.
    Declined,
    Ok,
    /// 401 with `WWW-Authenticate: Basic realm="…"` (the realm given).
    Challenge(Vec<u8>),
    /// 403 (no user file) or 500.
    Status(u16),
}

/// The check for a request with the evaluated realm and user-file name.
pub fn check(
    log: &dyn gyre_core::errlog::LogContext,
    req: &Request,
    realm: Vec<u8>,
    user_file: &[u8],
) -> Verdict {
    if realm == b"off" {
        return Verdict::Declined;
    }
    let Some((cred, ulen)) = basic_user(req) else {
        gyre_core::log_ctx!(
            gyre_core::errlog::INFO,
            log,
            "no user/password was provided for basic authentication"
        );
        return Verdict::Challenge(realm);
    };
    let (user, pass) = (&cred[..ulen], &cred[ulen + 1..]);
    let name = String::from_utf8_lossy(user_file).into_owned();
    let file = match std::fs::File::open(&name) {
        Ok(f) => f,
        Err(e) => {
            let msg = format!(
                "open() \"{name}\" failed ({})",
                gyre_core::sys_error_text(&e)
            );
            // nginx: a missing file is `[error]` and 403, others `[crit]`
            // and 500.
            gyre_core::log_ctx!(gyre_core::errlog::ERROR, log, "{msg}");
            return if e.kind() == ErrorKind::NotFound {
                Verdict::Status(403)
            } else {
                Verdict::Status(500)
            };
        }
    };
    let user_s = String::from_utf8_lossy(user);
    match htpasswd::lookup(file, user) {
        Err(e) => {
            gyre_core::log_ctx!(
                gyre_core::errlog::ERROR,
                log,
                "read() \"{name}\" failed ({e})"
            );
            Verdict::Status(500)
        }
        Ok(None) => {
            gyre_core::log_ctx!(
                gyre_core::errlog::ERROR,
                log,
                "user \"{user_s}\" was not found in \"{name}\""
            );
            Verdict::Challenge(realm)
        }
        Ok(Some(hash)) => {
            if htpasswd::verify(pass, &hash) {
                Verdict::Ok
            } else {
                gyre_core::log_ctx!(
                    gyre_core::errlog::ERROR,
                    log,
                    "user \"{user_s}\": password mismatch"
                );
                Verdict::Challenge(realm)
            }
        }
    }
}

/// `Basic realm="…"`, nginx's header value (the realm is not escaped).
pub fn challenge_value(realm: &[u8]) -> String {
    let mut v = String::from("Basic realm=\"");
    v.push_str(&String::from_utf8_lossy(realm));
    v.push('"');
    v
}
