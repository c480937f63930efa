//! `limit_req_zone` / `limit_req` (nginx's `ngx_http_limit_req_module`):
//! the leaky bucket per key, in a shared zone (crate::limit_zone) counted
//! across all workers, run in the preaccess phase.
//!
//! As nginx: the rate is kept in requests per 1000 seconds and the excess
//! in 1/1000 requests; a request adds 1000 to its key's excess after the
//! excess leaked at the rate since the key's last request. Over the burst
//! it is refused (`limit_req_status`, 503 by default, logged at
//! `limit_req_log_level` as `limiting requests, excess: 0.500 by zone
//! "one"`); over the `delay` threshold (0 by default, the burst with
//! `nodelay`) it waits on a timer until its excess has leaked below it
//! (`delaying request, …` one level lower) and then goes on. Several
//! `limit_req` in a location are checked in order and all accounted once
//! none refuses. A request is limited once, not again after an internal
//! redirect. `*_dry_run on` logs (with `, dry run`) and lets it through.

use std::sync::{Arc, OnceLock};

use gyre_core::conf::{ConfCtx, Directive};
use log::Level;

use crate::complex_value::ComplexValue;
use crate::conf::{HttpConf, LocSettings};
use crate::limit_zone::{parse_log_level, parse_status, Refusal, RefusalSet, State, Zone};
use crate::phases::{Ctx, Step};
use crate::request::{Content, HttpRequest, Wake};

/// A `limit_req_zone`, possibly named by `limit_req` before it is defined.
#[derive(Debug)]
pub struct ReqZone {
    pub name: String,
    inner: OnceLock<ZoneInner>,
}

#[derive(Debug)]
struct ZoneInner {
    key: ComplexValue,
    key_text: String,
    /// Requests per 1000 s.
    rate: u64,
    zone: Zone,
}

/// One `limit_req` line.
#[derive(Debug, Clone)]
pub struct Limit {
    zone: Arc<ReqZone>,
    /// In 1/1000 requests.
    burst: u64,
    delay: u64,
}

/// This level's `limit_req*` settings (inherited as nginx merges them:
/// the `limit_req` lines of the innermost level that has any).
#[derive(Debug, Clone, Default)]
pub struct LimitReqSet {
    pub limits: Option<Vec<Limit>>,
    pub refusal: RefusalSet,
}

/// A location's resolved settings.
#[derive(Debug, Clone)]
pub struct LimitReqConf {
    limits: Vec<Limit>,
    refusal: Refusal,
}

/// nginx's delay log level: one below the refusal's.
fn lower(l: Level) -> Level {
    match l {
        Level::Error => gyre_core::errlog::WARN,
        Level::Warn => gyre_core::errlog::NOTICE,
        Level::Info => gyre_core::errlog::INFO,
        _ => gyre_core::errlog::DEBUG,
    }
}

/// The settings a location ends up with (None: no `limit_req`).
pub fn resolve(levels: &[&LocSettings]) -> Option<Arc<LimitReqConf>> {
    use crate::conf::pick;
    let limits = pick(levels, |s| s.limit_req.limits.clone())?;
    if limits.is_empty() {
        return None;
    }
    Some(Arc::new(LimitReqConf {
        limits,
        refusal: Refusal::resolve(levels.iter().map(|s| &s.limit_req.refusal)),
    }))
}

fn zone_named(c: &mut HttpConf, name: &str) -> Arc<ReqZone> {
    if let Some(z) = c.limit_req_zones.iter().find(|z| z.name == name) {
        return z.clone();
    }
    let z = Arc::new(ReqZone {
        name: name.to_string(),
        inner: OnceLock::new(),
    });
    c.limit_req_zones.push(z.clone());
    z
}

/// `zone=NAME:SIZE` (the whole argument), nginx's checks.
pub fn parse_zone(arg: &str, min: usize) -> Result<(String, usize), String> {
    let v = arg.strip_prefix("zone=").unwrap_or(arg);
    let (name, size) = v
        .rsplit_once(':')
        .ok_or_else(|| format!("invalid zone size \"{arg}\""))?;
    let n = gyre_core::conf::parse_size(size)
        .filter(|_| !name.is_empty())
        .ok_or_else(|| format!("invalid zone size \"{arg}\""))?;
    if n < min {
        return Err(format!("zone \"{arg}\" is too small"));
    }
    Ok((name.to_string(), n))
}

/// `limit_req_zone KEY zone=NAME:SIZE rate=RATE[r/s|r/m]`.
pub fn set_zone(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let key_text = d.arg(0).to_string();
    let key = ComplexValue::compile(&key_text, &mut c.vars)?;
    let (mut name, mut size, mut rate) = (None, 0, 1000);
    for a in &d.args[1..] {
        if a.starts_with("zone=") {
            let (n, s) = parse_zone(a, 8 * gyre_core::sys::shm::page_size())?;
            name = Some(n);
            size = s;
        } else if let Some(v) = a.strip_prefix("rate=") {
            let (num, scale) = if let Some(n) = v.strip_suffix("r/s") {
                (n, 1)
            } else if let Some(n) = v.strip_suffix("r/m") {
                (n, 60)
            } else {
                (v, 1)
            };
            let n: u64 = num
                .parse()
                .ok()
                .filter(|n| *n > 0 && num.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("invalid rate \"{a}\""))?;
            rate = n.saturating_mul(1000) / scale;
        } else {
            return Err(format!("invalid parameter \"{a}\""));
        }
    }
    let Some(name) = name else {
        return Err(format!("\"{}\" must have \"zone\" parameter", d.name));
    };
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
        rate: rate.max(1),
        zone,
    });
    Ok(())
}

/// `limit_req zone=NAME [burst=N] [nodelay | delay=N]`.
pub fn set_limit_req(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let (mut zone, mut burst, mut delay, mut nodelay) = (None, 0u64, 0u64, false);
    for a in &d.args {
        if let Some(v) = a.strip_prefix("zone=") {
            zone = Some(v.to_string());
        } else if let Some(v) = a.strip_prefix("burst=") {
            burst = v
                .parse()
                .ok()
                .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("invalid burst value \"{a}\""))?;
        } else if let Some(v) = a.strip_prefix("delay=") {
            delay = v
                .parse()
                .ok()
                .filter(|n| *n > 0 && v.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("invalid delay value \"{a}\""))?;
        } else if a == "nodelay" {
            nodelay = true;
        } else {
            return Err(format!("invalid parameter \"{a}\""));
        }
    }
    let Some(name) = zone else {
        return Err(format!("\"{}\" must have \"zone\" parameter", d.name));
    };
    let z = zone_named(c, &name);
    let limit = Limit {
        zone: z,
        burst: burst.saturating_mul(1000),
        delay: if nodelay {
            u64::MAX / 2
        } else {
            delay.saturating_mul(1000)
        },
    };
    let s = &mut c.settings(cx)?.limit_req;
    let list = s.limits.get_or_insert_with(Vec::new);
    if list.iter().any(|l| Arc::ptr_eq(&l.zone, &limit.zone)) {
        return Err(format!("\"{}\" directive is duplicate", d.name));
    }
    list.push(limit);
    Ok(())
}

pub fn set_status(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.limit_req.refusal.status = Some(parse_status(d)?);
    Ok(())
}

pub fn set_log_level(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.limit_req.refusal.log_level = Some(parse_log_level(d)?);
    Ok(())
}

pub fn set_dry_run(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.limit_req.refusal.dry_run = Some(v);
    Ok(())
}

/// Every zone a `limit_req` names is defined (nginx's check of zones
/// without a size).
pub fn check_zones(c: &HttpConf) -> Result<(), String> {
    for z in &c.limit_req_zones {
        if z.inner.get().is_none() {
            return Err(format!("zero size shared memory zone \"{}\"", z.name));
        }
    }
    Ok(())
}

/// The leaky bucket for one key at `now` (nginx's `ngx_http_limit_req_lookup`):
/// the new excess, and whether it is over the burst. `account` writes it.
#[cfg(test)]
fn leak(st: Option<State>, rate: u64, now: u64) -> i64 {
    leak_ms(st, rate, now).0
}

/// [`leak`] and the time counted (0: `last` stays, as nginx's `if (ms)`).
fn leak_ms(st: Option<State>, rate: u64, now: u64) -> (i64, i64) {
    match st {
        None => (0, 0),
        Some(s) => {
            let mut ms = gyre_core::event::msec_diff(now, s.last);
            if ms < -60_000 {
                ms = 1;
            } else if ms < 0 {
                ms = 0;
            }
            let leaked = (rate as i64).saturating_mul(ms) / 1000;
            ((s.excess - leaked + 1000).max(0), ms)
        }
    }
}

/// Looks `key` up in a zone; with `account`, stores the new excess unless
/// it is over the burst. `None`: no slot could be had (nginx's
/// `NGX_ERROR`).
fn lookup(zi: &ZoneInner, key: &[u8], burst: u64, now: u64, account: bool) -> Option<(i64, bool)> {
    zi.zone.with(
        key,
        |_| true,
        |st| {
            let fresh = st.is_none();
            let (excess, ms) = leak_ms(*st, zi.rate, now);
            let busy = excess as u64 > burst;
            if account && !busy {
                let last = match *st {
                    Some(s) if ms == 0 => s.last,
                    _ => now,
                };
                *st = Some(State {
                    excess,
                    last,
                    count: 0,
                });
            } else if fresh {
                // nginx keeps the new node (with excess 0) even when it is not
                // the last limit; the LRU takes it if unused.
                *st = Some(State {
                    excess: 0,
                    last: now,
                    count: 0,
                });
            }
            (excess, busy)
        },
    )
}

fn thousandths(x: i64) -> String {
    format!("{}.{:03}", x / 1000, x % 1000)
}

/// The preaccess handler.
pub fn phase(cx: &mut Ctx<'_>, r: &mut HttpRequest) -> Step {
    if r.st.limit_req_done {
        return Step::Next;
    }
    let Some(lc) = r.st.loc.limit_req.clone() else {
        return Step::Next;
    };
    r.st.limit_req_done = true;
    let now = cx.now;
    let n = lc.limits.len();
    let mut keys: Vec<Option<Vec<u8>>> = Vec::with_capacity(n);
    let mut max_delay: u64 = 0;
    let mut delay_zone = String::new();
    let mut delay_excess = 0;
    for (i, l) in lc.limits.iter().enumerate() {
        let Some(zi) = l.zone.inner.get() else {
            keys.push(None);
            continue;
        };
        let mut key = Vec::new();
        {
            let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
            zi.key.eval(&cx.conf.vars, &mut r.vars, &env, &mut key);
        }
        if key.is_empty() {
            keys.push(None);
            continue;
        }
        if key.len() > 65535 {
            gyre_core::log_ctx!(
                gyre_core::errlog::ERROR,
                &crate::log_error::req(cx.conf, r),
                "the value of the \"{}\" key is more than 65535 bytes: \"{}\"",
                zi.key_text,
                String::from_utf8_lossy(&key[..64])
            );
            keys.push(None);
            continue;
        }
        let last = i + 1 == n;
        let found = lookup(zi, &key, l.burst, now, last);
        let (excess, busy) = match found {
            Some(x) => x,
            None => {
                gyre_core::log_ctx!(
                    gyre_core::errlog::ERROR,
                    &crate::log_error::req(cx.conf, r),
                    "could not allocate node in limit_req zone \"{}\"",
                    l.zone.name
                );
                (0, true)
            }
        };
        if busy {
            if found.is_some() {
                let dry = lc.refusal.dry_note();
                gyre_core::log_ctx!(
                    lc.refusal.log_level,
                    &crate::log_error::req(cx.conf, r),
                    "limiting requests{dry}, excess: {} by zone \"{}\"",
                    thousandths(excess),
                    l.zone.name
                );
            }
            if lc.refusal.dry_run {
                return Step::Next;
            }
            return Step::Error(lc.refusal.status);
        }
        if excess as u64 > l.delay {
            let d = (excess as u64 - l.delay) * 1000 / zi.rate;
            if d >= max_delay {
                max_delay = d;
                delay_zone.clone_from(&l.zone.name);
                delay_excess = excess;
            }
        }
        keys.push(Some(key));
    }
    // None refused: account the earlier limits too.
    for (l, key) in lc.limits.iter().zip(&keys).take(n.saturating_sub(1)) {
        if let (Some(zi), Some(key)) = (l.zone.inner.get(), key) {
            let _ = lookup(zi, key, u64::MAX / 2, now, true);
        }
    }
    if max_delay == 0 {
        return Step::Next;
    }
    let dry = lc.refusal.dry_note();
    gyre_core::log_ctx!(
        lower(lc.refusal.log_level),
        &crate::log_error::req(cx.conf, r),
        "delaying request{dry}, excess: {}, by zone \"{delay_zone}\"",
        thousandths(delay_excess)
    );
    if lc.refusal.dry_run {
        return Step::Next;
    }
    r.wake = Some(Wake::At(now.wrapping_add(max_delay)));
    r.content = Content::Delayed;
    Step::Again
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaky_bucket_as_nginx() {
        // 2 r/s: 2000 per 1000 s.
        let rate = 2000;
        assert_eq!(leak(None, rate, 0), 0);
        let s = |excess, last| {
            Some(State {
                excess,
                last,
                count: 0,
            })
        };
        // Right after a request: +1000.
        assert_eq!(leak(s(0, 100), rate, 100), 1000);
        // 250 ms later, 500 leaked.
        assert_eq!(leak(s(1000, 100), rate, 350), 1500);
        // Long after: back to one request's worth.
        assert_eq!(leak(s(1000, 100), rate, 100_000), 1000 - 1000);
        // A clock that went back a little counts as no time.
        assert_eq!(leak(s(500, 1000), rate, 990), 1500);
        assert_eq!(thousandths(500), "0.500");
        assert_eq!(thousandths(12_345), "12.345");
    }

    #[test]
    fn zones_parse_as_nginx() {
        assert_eq!(
            parse_zone("zone=one:10m", 32768).unwrap(),
            ("one".into(), 10 << 20)
        );
        assert_eq!(
            parse_zone("zone=one", 32768).unwrap_err(),
            "invalid zone size \"zone=one\""
        );
        assert!(parse_zone("zone=:10m", 32768).is_err());
        assert_eq!(
            parse_zone("zone=one:1k", 32768).unwrap_err(),
            "zone \"zone=one:1k\" is too small"
        );
    }
}
