//! The core module's directives that shape how a connection is read and
//! closed: `lingering_close`, `lingering_time`, `lingering_timeout`,
//! `merge_slashes`, `underscores_in_headers`, `ignore_invalid_headers`.
//!
//! The HTTP machine already behaves by these ([`HttpSettings`]); this
//! module reads them from `http {}` and `server {}` and hands them over.
//! nginx takes the `lingering_*` ones in `location {}` too; gyre decides
//! lingering per connection, so it takes them where a connection's
//! settings come from (http and server), and refuses them in a location.

use gyre_core::conf::{ConfCtx, Directive};

use super::HttpConf;
use crate::settings::{HttpSettings, LingeringClose};

/// What the directives set at one level (`None`: inherited).
#[derive(Debug, Clone, Default)]
pub struct ConnDirectives {
    pub lingering_close: Option<LingeringClose>,
    pub lingering_time: Option<u64>,
    pub lingering_timeout: Option<u64>,
    pub merge_slashes: Option<bool>,
    pub underscores_in_headers: Option<bool>,
    pub ignore_invalid_headers: Option<bool>,
}

impl ConnDirectives {
    /// This level's values over the enclosing level's (nginx's merge).
    pub fn merged(&self, outer: &ConnDirectives) -> ConnDirectives {
        ConnDirectives {
            lingering_close: self.lingering_close.or(outer.lingering_close),
            lingering_time: self.lingering_time.or(outer.lingering_time),
            lingering_timeout: self.lingering_timeout.or(outer.lingering_timeout),
            merge_slashes: self.merge_slashes.or(outer.merge_slashes),
            underscores_in_headers: self.underscores_in_headers.or(outer.underscores_in_headers),
            ignore_invalid_headers: self.ignore_invalid_headers.or(outer.ignore_invalid_headers),
        }
    }

    /// Writes the values that are set into the machine's settings (the
    /// others keep nginx's defaults from [`HttpSettings::default`]).
    pub fn apply(&self, st: &mut HttpSettings) {
        if let Some(v) = self.lingering_close {
            st.lingering_close = v;
        }
        if let Some(v) = self.lingering_time {
            st.lingering_time = v;
        }
        if let Some(v) = self.lingering_timeout {
            st.lingering_timeout = v;
        }
        if let Some(v) = self.merge_slashes {
            st.merge_slashes = v;
        }
        if let Some(v) = self.underscores_in_headers {
            st.underscores_in_headers = v;
        }
        if let Some(v) = self.ignore_invalid_headers {
            st.ignore_invalid_headers = v;
        }
    }
}

fn target<'a>(c: &'a mut HttpConf, cx: &ConfCtx) -> Result<&'a mut ConnDirectives, String> {
    Ok(&mut c.server_settings(cx)?.conn)
}

/// `lingering_close off|on|always` (nginx's enum slot: `invalid value`).
pub(super) fn set_lingering_close(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = match d.arg(0) {
        "off" => LingeringClose::Off,
        "on" => LingeringClose::On,
        "always" => LingeringClose::Always,
        other => return Err(format!("invalid value \"{other}\"")),
    };
    target(c, cx)?.lingering_close = Some(v);
    Ok(())
}

pub(super) fn set_lingering_time(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.msec(0)?;
    target(c, cx)?.lingering_time = Some(v);
    Ok(())
}

pub(super) fn set_lingering_timeout(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.msec(0)?;
    target(c, cx)?.lingering_timeout = Some(v);
    Ok(())
}

/// `merge_slashes`, `underscores_in_headers`, `ignore_invalid_headers`.
pub(super) fn set_header_flag(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    let t = target(c, cx)?;
    match d.name.as_str() {
        "merge_slashes" => t.merge_slashes = Some(v),
        "underscores_in_headers" => t.underscores_in_headers = Some(v),
        _ => t.ignore_invalid_headers = Some(v),
    }
    Ok(())
}
