//! `error_log` in `http`, `server` and `location` (nginx's
//! `ngx_http_core_error_log`): each level's lines make the chain its
//! requests' and connections' error-log lines are written to
//! (gyre_core::errlog's chains). A level without `error_log` inherits the
//! nearest outer one; with none up to `http`, lines go to the main log.

use gyre_core::conf::{ConfCtx, ConfError, Directive};
use gyre_core::errlog::LogChain;

use super::{HttpConf, LocSettings};

/// One `error_log FILE|stderr [LEVEL]` line: one more log of its level.
pub fn set_error_log(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    if d.arg(0).starts_with("syslog:") || d.arg(0).starts_with("memory:") {
        // nginx's word for a log target this build does not have.
        return Err(format!("unsupported log target \"{}\"", d.arg(0)));
    }
    let log = gyre_core::conf::parse_error_log(d, cx)?;
    c.settings(cx)?
        .error_log
        .get_or_insert_with(Vec::new)
        .push(log);
    Ok(())
}

/// The chain of the innermost level with `error_log` lines: its files
/// opened (or shared with another level naming the same path). nginx
/// opens them after reading the configuration, so a path it cannot open
/// is reported without a line number, as here.
pub fn resolve(levels: &[&LocSettings]) -> Result<Option<LogChain>, ConfError> {
    let Some(logs) = levels.iter().rev().find_map(|s| s.error_log.as_ref()) else {
        return Ok(None);
    };
    gyre_core::errlog::make_chain(logs)
        .map(Some)
        .map_err(ConfError::new)
}
