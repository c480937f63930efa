//! Several `access_log` lines at one level: nginx writes a line to each.
//! The first is the level's `access_log` (the fast `combined` path and
//! the records of refused heads use it); the others are kept here and
//! written by the log phase in their own format, with their own `if=`.

use std::path::PathBuf;
use std::sync::Arc;

use gyre_core::conf::ConfError;

use super::LocSettings;
use crate::complex_value::ComplexValue;
use crate::log_format::LogFormat;

/// A second (third...) `access_log` of a level, as read.
#[derive(Debug, Clone)]
pub struct ExtraLog {
    pub path: PathBuf,
    /// The format's name (`None`: `combined`).
    pub format: Option<String>,
    pub cond: Option<ComplexValue>,
}

/// A resolved one: the format as its index in `log_formats` (0:
/// `combined`).
#[derive(Debug, Clone)]
pub struct ExtraLogConf {
    pub path: PathBuf,
    pub format: usize,
    pub cond: Option<ComplexValue>,
}

/// The extra logs of the innermost level that has an `access_log`, as
/// the first one's path and format come from it.
pub fn resolve(
    levels: &[&LocSettings],
    formats: &[Arc<LogFormat>],
) -> Result<Arc<[ExtraLogConf]>, ConfError> {
    let Some(level) = levels.iter().rev().find(|s| s.access_log.is_some()) else {
        return Ok(Arc::from([]));
    };
    level
        .extra_logs
        .iter()
        .map(|e| {
            let format = match &e.format {
                None => 0,
                Some(n) => formats
                    .iter()
                    .position(|f| f.name == *n)
                    .ok_or_else(|| ConfError::new(format!("unknown log format \"{n}\"")))?,
            };
            Ok(ExtraLogConf {
                path: e.path.clone(),
                format,
                cond: e.cond.clone(),
            })
        })
        .collect()
}
