//! The reverse proxy (nginx's `ngx_http_proxy_module` on the upstream
//! machinery of [`crate::upstream`]): `proxy_pass` and its directives
//! ([`conf`]), the URI rules ([`uri`]), the content handler and the
//! upstream state machine ([`handler`]), TLS to upstreams ([`ssl`]), the
//! `$upstream_*` records ([`vars`]); and the hook-up of `upstream {}` blocks: read with the
//! http block, resolved once the file is read ([`init_upstreams`]), and
//! per worker ([`Worker`]) the peers' balancing state and the keep-alive
//! caches.

pub mod conf;
pub mod cookie;
mod eval;
pub mod handler;
mod next;
mod peer;
mod pipe;
pub mod redirect;
mod request;
mod response;
pub mod ssl;
mod tunnel;
pub mod uri;
pub mod vars;

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use gyre_core::conf::{ConfCtx, ConfError, Directive};
use gyre_core::conn::splice::Pipe;
use gyre_core::event::{Core, Msec};

use crate::complex_value::ComplexValue;
use crate::conf::{HttpConf, Location};
use crate::upstream::keepalive::{self, Cache, SharedCache};
use crate::upstream::set::UpstreamSet;
use crate::upstream::{Method, Upstream};

/// `upstream NAME { … }`: kept as read; made into upstreams once the whole
/// file is known ([`init_upstreams`]).
pub fn set_upstream(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.upstream_blocks.push(d.clone());
    Ok(())
}

/// nginx's `ngx_http_upstream_init_main_conf` for this configuration: the
/// blocks first (`duplicate upstream`, their own errors), then every
/// `proxy_pass` target (a block's name, or an implicit upstream resolved
/// now), then the `hash` keys compiled.
pub fn init_upstreams(c: &mut HttpConf) -> Result<(), ConfError> {
    // The locations' TLS configurations are built after this, as they are
    // resolved: none of the last read's is reused.
    ssl::begin_read();
    let mut set = UpstreamSet::default();
    for d in &c.upstream_blocks {
        let (_, warnings) = set.add_block(d)?;
        for w in warnings {
            log::warn!("{w}");
        }
    }
    for s in &mut c.servers {
        for l in &mut s.locations {
            resolve_targets(l, &mut set)?;
        }
    }
    let mut keys = Vec::with_capacity(set.entries.len());
    for e in &set.entries {
        keys.push(match &e.upstream.method {
            Method::Hash { key, .. } => {
                Some(ComplexValue::compile(key, &mut c.vars).map_err(ConfError::new)?)
            }
            _ => None,
        });
    }
    c.upstream_keys = keys;
    c.upstreams = Arc::new(set);
    Ok(())
}

fn resolve_targets(l: &mut Location, set: &mut UpstreamSet) -> Result<(), ConfError> {
    if let Some(p) = l.set.proxy.pass.as_mut().filter(|p| p.vars.is_none()) {
        let default_port = if p.https { 443 } else { 80 };
        p.upstream = set.target(&p.host, p.port, default_port, &p.at)?;
    }
    for ch in &mut l.children {
        resolve_targets(ch, set)?;
    }
    Ok(())
}

/// A worker's upstream state: the peers (balancing, fails) of each
/// upstream, the keep-alive caches, pooled request states.
pub struct Worker {
    pub ups: RefCell<Vec<Upstream>>,
    /// Per upstream, its cache when it has `keepalive`.
    pub caches: Vec<Option<SharedCache>>,
    rng: Cell<u32>,
    #[allow(clippy::vec_box)]
    pool: RefCell<Vec<Box<handler::Proxy>>>,
    /// The pipe relayed bodies are spliced through (`pipe.rs`), empty
    /// between uses; made on first use, tried again a second after the
    /// system refused one.
    pub(super) splice: RefCell<Option<Pipe>>,
    splice_retry: Cell<Msec>,
    /// The configuration has a `$upstream_http_NAME` variable (the
    /// upstream's headers are kept for it only then).
    pub(super) upstream_http: bool,
}

/// Request states kept for reuse.
const POOL: usize = 64;

impl Worker {
    pub fn new(conf: &HttpConf) -> Worker {
        let ups: Vec<Upstream> = conf
            .upstreams
            .entries
            .iter()
            .map(|e| e.upstream.clone())
            .collect();
        let caches = ups
            .iter()
            .map(|u| {
                u.keepalive
                    .as_ref()
                    .map(|k| SharedCache::new(RefCell::new(Cache::new(k.max_cached))))
            })
            .collect();
        Worker {
            ups: RefCell::new(ups),
            caches,
            rng: Cell::new(std::process::id().wrapping_mul(2_654_435_761) | 1),
            pool: RefCell::new(Vec::new()),
            splice: RefCell::new(None),
            splice_retry: Cell::new(0),
            upstream_http: (0..conf.vars.len()).any(|i| {
                u16::try_from(i).is_ok_and(|i| conf.vars.name(i).starts_with("upstream_http_"))
            }),
        }
    }

    /// nginx's `ngx_time()` for the balancers.
    pub fn secs(&self, core: &Core) -> i64 {
        (core.clock().unix_ms() / 1000) as i64
    }

    /// xorshift32, for `random`.
    pub fn random(&self) -> u32 {
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng.set(x);
        x
    }

    /// Whether the splice pipe is there (made now if not, unless the
    /// system refused one less than a second ago).
    pub(super) fn has_pipe(&self, now: Msec) -> bool {
        let mut slot = self.splice.borrow_mut();
        if slot.is_some() {
            return true;
        }
        if self.splice_retry.get() != 0
            && gyre_core::event::msec_diff(now, self.splice_retry.get()) < 0
        {
            return false;
        }
        match Pipe::new() {
            Ok(p) => *slot = Some(p),
            Err(e) => {
                log::debug!("no pipe to splice proxied bodies through ({e})");
                self.splice_retry.set(now.wrapping_add(1000).max(1));
            }
        }
        slot.is_some()
    }

    /// A pooled request state, if any.
    pub fn take(&self) -> Option<Box<handler::Proxy>> {
        self.pool.borrow_mut().pop()
    }

    /// Keeps a request state for the next request.
    pub fn give_back(&self, p: Box<handler::Proxy>) {
        let mut pool = self.pool.borrow_mut();
        if pool.len() < POOL {
            pool.push(p);
        }
    }

    /// Closes every cached connection (worker exit).
    pub fn close_cached(&self, core: &mut Core) {
        for c in self.caches.iter().flatten() {
            keepalive::close_all(core, c);
        }
    }
}
