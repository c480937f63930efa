//! `limit_conn_zone` / `limit_conn` (nginx's `ngx_http_limit_conn_module`):
//! requests in progress per key, counted in a shared zone
//! (crate::limit_zone) across all workers, checked in the preaccess phase.
//!
//! A request that would exceed a limit is refused (`limit_conn_status`,
//! 503 by default) and logged at `limit_conn_log_level` as `limiting
//! connections by zone "addr"`; one that passes holds a count in each zone
//! until it ends, released by dropping its [`Hold`]s (when the request
//! object is reused or dropped, the connection closed mid-response
//! included, as nginx's pool cleanup). A state whose count is not zero is
//! never evicted: a zone full of them refuses new keys, as nginx's does.

use std::sync::{Arc, OnceLock};

use gyre_core::conf::{ConfCtx, Directive};

use crate::complex_value::ComplexValue;
use crate::conf::{HttpConf, LocSettings};
use crate::limit_zone::{parse_log_level, parse_status, Refusal, RefusalSet, State, Zone};
use crate::phases::{Ctx, Step};
use crate::request::HttpRequest;

/// A `limit_conn_zone`, possibly named by `limit_conn` before it is defined.
#[derive(Debug)]
pub struct ConnZone {
    pub name: String,
    inner: OnceLock<ZoneInner>,
}

#[derive(Debug)]
struct ZoneInner {
    key: ComplexValue,
    key_text: String,
    zone: Zone,
}

/// One `limit_conn ZONE NUMBER`.
#[derive(Debug, Clone)]
pub struct Limit {
    zone: Arc<ConnZone>,
    conn: i64,
}

#[derive(Debug, Clone, Default)]
pub struct LimitConnSet {
    pub limits: Option<Vec<Limit>>,
    pub refusal: RefusalSet,
}

#[derive(Debug, Clone)]
pub struct LimitConnConf {
    limits: Vec<Limit>,
    refusal: Refusal,
}

/// A count held in a zone by a request in progress; released on drop.
#[derive(Debug)]
pub struct Hold {
    zone: Arc<ConnZone>,
    key: Vec<u8>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(zi) = self.zone.inner.get() {
            let _ = zi.zone.with(
                &self.key,
                |_| false,
                |st| {
                    *st = match *st {
                        Some(s) if s.count > 1 => Some(State {
                            count: s.count - 1,
                            ..s
                        }),
                        _ => None,
                    };
                },
            );
        }
    }
}

pub fn resolve(levels: &[&LocSettings]) -> Option<Arc<LimitConnConf>> {
    use crate::conf::pick;
    let limits = pick(levels, |s| s.limit_conn.limits.clone())?;
    if limits.is_empty() {
        return None;
    }
    Some(Arc::new(LimitConnConf {
        limits,
        refusal: Refusal::resolve(levels.iter().map(|s| &s.limit_conn.refusal)),
    }))
}

fn zone_named(c: &mut HttpConf, name: &str) -> Arc<ConnZone> {
    if let Some(z) = c.limit_conn_zones.iter().find(|z| z.name == name) {
        return z.clone();
    }
    let z = Arc::new(ConnZone {
        name: name.to_string(),
        inner: OnceLock::new(),
    });
    c.limit_conn_zones.push(z.clone());
    z
}

/// `limit_conn_zone KEY zone=NAME:SIZE`.
pub fn set_zone(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let key_text = d.arg(0).to_string();
    let key = ComplexValue::compile(&key_text, &mut c.vars)?;
    let a = d.arg(1);
    if !a.starts_with("zone=") {
        return Err(format!("invalid parameter \"{a}\""));
    }
    let (name, size) = crate::limit_req::parse_zone(a, 8 * gyre_core::sys::shm::page_size())?;
    let z = zone_named(c, &name);
    if let Some(old) = z.inner.get() {
        return Err(format!(
            "{} \"{name}\" is already bound to key \"{}\"",
            d.name, old.key_text
        ));
    }
    let zone = Zone::new(&name, size)?;
    let _ = z.inner.set(ZoneInner {
        key,
        key_text,
        zone,
    });
    Ok(())
}

/// `limit_conn ZONE NUMBER`.
pub fn set_limit_conn(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let n = d.arg(1);
    let conn: i64 = n
        .parse()
        .ok()
        .filter(|v| (1..=65535).contains(v) && n.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("invalid number of connections \"{n}\""))?;
    let zone = zone_named(c, d.arg(0));
    let s = &mut c.settings(cx)?.limit_conn;
    let list = s.limits.get_or_insert_with(Vec::new);
    if list.iter().any(|l| Arc::ptr_eq(&l.zone, &zone)) {
        return Err(format!("\"{}\" directive is duplicate", d.name));
    }
    list.push(Limit { zone, conn });
    Ok(())
}

pub fn set_status(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.limit_conn.refusal.status = Some(parse_status(d)?);
    Ok(())
}

pub fn set_log_level(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.limit_conn.refusal.log_level = Some(parse_log_level(d)?);
    Ok(())
}

pub fn set_dry_run(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.limit_conn.refusal.dry_run = Some(v);
    Ok(())
}

pub fn check_zones(c: &HttpConf) -> Result<(), String> {
    for z in &c.limit_conn_zones {
        if z.inner.get().is_none() {
            return Err(format!("zero size shared memory zone \"{}\"", z.name));
        }
    }
    Ok(())
}

/// The preaccess handler (after limit_req's, as nginx orders them).
pub fn phase(cx: &mut Ctx<'_>, r: &mut HttpRequest) -> Step {
    if r.st.limit_conn_done {
        return Step::Next;
    }
    let Some(lc) = r.st.loc.limit_conn.clone() else {
        return Step::Next;
    };
    r.st.limit_conn_done = true;
    for l in &lc.limits {
        let Some(zi) = l.zone.inner.get() else {
            continue;
        };
        let mut key = Vec::new();
        {
            let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
            zi.key.eval(&cx.conf.vars, &mut r.vars, &env, &mut key);
        }
        if key.is_empty() {
            continue;
        }
        if key.len() > 255 {
            gyre_core::log_ctx!(
                gyre_core::errlog::ERROR,
                &crate::log_error::req(cx.conf, r),
                "the value of the \"{}\" key is more than 255 bytes: \"{}\"",
                zi.key_text,
                String::from_utf8_lossy(&key)
            );
            continue;
        }
        let now = cx.now;
        let max = l.conn;
        let took = zi.zone.with(
            &key,
            |s| s.count == 0,
            |st| match *st {
                Some(s) if s.count >= max => false,
                Some(s) => {
                    *st = Some(State {
                        count: s.count + 1,
                        last: now,
                        ..s
                    });
                    true
                }
                None => {
                    *st = Some(State {
                        count: 1,
                        last: now,
                        excess: 0,
                    });
                    true
                }
            },
        );
        match took {
            Some(true) => r.st.held.push(Hold {
                zone: l.zone.clone(),
                key,
            }),
            Some(false) => {
                let dry = lc.refusal.dry_note();
                gyre_core::log_ctx!(
                    lc.refusal.log_level,
                    &crate::log_error::req(cx.conf, r),
                    "limiting connections{dry} by zone \"{}\"",
                    l.zone.name
                );
                // nginx releases what the earlier limits took.
                r.st.held.clear();
                if lc.refusal.dry_run {
                    return Step::Next;
                }
                return Step::Error(lc.refusal.status);
            }
            None => {
                r.st.held.clear();
                return Step::Error(lc.refusal.status);
            }
        }
    }
    Step::Next
}
