//! `limit_except METHOD ... { ... }` (nginx's `ngx_http_core_limit_except`):
//! the methods named (GET bringing HEAD) keep the location's settings; any
//! other method gets the block's — the location's settings with the
//! block's `allow` / `deny`, `auth_basic`, `auth_basic_user_file` and
//! `access_log` over them, the only directives nginx accepts there (its
//! `NGX_HTTP_LMT_CONF`; `proxy_pass`, which nginx also accepts, is refused
//! by gyre). find-config switches the request to that configuration, as
//! nginx's `ngx_http_update_location_config` does, so the access phase and
//! the log phase see it.

use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};

use crate::conf::{HttpConf, LocConf, LocSettings};

/// nginx's method names `limit_except` knows, with their bits.
const METHODS: &[(&str, u32)] = &[
    ("GET", 1 << 1),
    ("HEAD", 1 << 2),
    ("POST", 1 << 3),
    ("PUT", 1 << 4),
    ("DELETE", 1 << 5),
    ("MKCOL", 1 << 6),
    ("COPY", 1 << 7),
    ("MOVE", 1 << 8),
    ("OPTIONS", 1 << 9),
    ("PROPFIND", 1 << 10),
    ("PROPPATCH", 1 << 11),
    ("LOCK", 1 << 12),
    ("UNLOCK", 1 << 13),
    ("PATCH", 1 << 14),
];

/// The bit of a request's method (0 for one nginx does not know: it is
/// never among the allowed, as nginx's `NGX_HTTP_UNKNOWN`).
pub fn method_bit(method: &str) -> u32 {
    METHODS
        .iter()
        .find(|(n, _)| *n == method)
        .map_or(0, |(_, b)| *b)
}

/// A `limit_except` block as read.
#[derive(Debug, Clone, Default)]
pub struct LimitExcept {
    /// The methods allowed without the block's settings.
    pub allowed: u32,
    /// The block's own directives.
    pub set: LocSettings,
}

/// A location's `limit_except`, resolved.
#[derive(Debug, Clone)]
pub struct LimitExceptConf {
    pub allowed: u32,
    /// What the other methods get.
    pub conf: Arc<LocConf>,
}

impl LimitExceptConf {
    /// The configuration a request with `method` gets, if not the
    /// location's own.
    #[inline]
    pub fn for_method(&self, method: &str) -> Option<&Arc<LocConf>> {
        (self.allowed & method_bit(method) == 0).then_some(&self.conf)
    }
}

/// True when the directive being read is inside a `limit_except` block.
pub fn in_limit_except(cx: &ConfCtx) -> bool {
    cx.blocks().last().is_some_and(|n| n == "limit_except")
}

/// `limit_except METHOD ... {`: opens the block.
pub fn set_limit_except(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let mut allowed = 0;
    for a in &d.args {
        let up = a.to_ascii_uppercase();
        let Some((_, bit)) = METHODS.iter().find(|(n, _)| *n == up) else {
            return Err(format!("invalid method \"{a}\""));
        };
        allowed |= bit;
        if up == "GET" {
            allowed |= method_bit("HEAD");
        }
    }
    let l = c.current_location(cx)?;
    if l.limit_except.is_some() {
        return Err(d.error("is duplicate"));
    }
    l.limit_except = Some(LimitExcept {
        allowed,
        set: LocSettings::default(),
    });
    Ok(())
}

/// `proxy_pass` inside `limit_except`: nginx allows it, gyre does not yet
/// (the block would need its own content handler); inside `if`, without a
/// URI part as nginx; elsewhere the proxy's setter.
pub fn set_proxy_pass(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    if in_limit_except(cx) {
        return Err(
            "\"proxy_pass\" inside \"limit_except\" is not supported by gyre; put the access rules in the block and proxy_pass in the location"
                .into(),
        );
    }
    if cx.blocks().last().is_some_and(|n| n == "if") {
        // nginx: a URL with a URI part cannot be used in an `if`.
        let url = d.arg(0);
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        if rest.contains('/') {
            return Err("\"proxy_pass\" cannot have URI part in location given by regular expression, or inside named location, or inside \"if\" statement, or inside \"limit_except\" block".into());
        }
    }
    crate::proxy::conf::set_pass(c, d, cx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_brings_head_and_unknown_methods_are_limited() {
        let allowed = method_bit("GET") | method_bit("HEAD");
        let le = LimitExceptConf {
            allowed,
            conf: Arc::new(HttpConf::server_loc(&Default::default()).as_ref().clone()),
        };
        assert!(le.for_method("GET").is_none());
        assert!(le.for_method("HEAD").is_none());
        assert!(le.for_method("POST").is_some());
        assert!(le.for_method("FOO").is_some());
        assert!(
            le.for_method("get").is_some(),
            "methods are case-sensitive on the wire"
        );
    }
}
