//! maxmemory and eviction (Redis's `evict.c`): the eight policies, the
//! per-key access clock (LRU seconds or LFU minutes + logarithmic
//! counter), the sampled eviction pool, the time bound per call
//! (`maxmemory-eviction-tenacity`), and OBJECT IDLETIME / FREQ.
//!
//! What it owns: [`perform_evictions`] (called before every command while
//! `maxmemory` is set, as `processCommand` does, and from a time event
//! while a time-limited run left work), [`AccessMode`] (how a database
//! lookup updates a key's clock), the pool, and the policy settings.
//!
//! Memory is the server's estimate ([`Server::used_memory_for_eviction`]):
//! the databases' accounted bytes (exact per write) plus the clients'
//! part as of the last cron tick.

use std::time::{Duration, Instant};

use crate::cmd::Ctx;
use crate::server::Server;
use crate::util::Rng;

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    #[default]
    Noeviction,
}

/// In Redis's order (its CONFIG SET error lists them so).
pub const POLICIES: &[(&str, Policy)] = &[
    ("volatile-lru", Policy::VolatileLru),
    ("volatile-lfu", Policy::VolatileLfu),
    ("volatile-random", Policy::VolatileRandom),
    ("volatile-ttl", Policy::VolatileTtl),
    ("allkeys-lru", Policy::AllkeysLru),
    ("allkeys-lfu", Policy::AllkeysLfu),
    ("allkeys-random", Policy::AllkeysRandom),
    ("noeviction", Policy::Noeviction),
];

impl Policy {
    pub fn parse(s: &[u8]) -> Option<Policy> {
        POLICIES
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(s))
            .map(|(_, p)| *p)
    }
    pub fn name(self) -> &'static str {
        POLICIES
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("noeviction", |(n, _)| n)
    }
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::VolatileLfu | Policy::AllkeysLfu)
    }
    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }
}

/// The LRU clock's tick (ms) and its largest value. Redis ticks once a
/// second in 24 bits (wrapping after 194 days); here 31 bits tick every
/// 10 ms (wrapping after 248 days; the keyspace node keeps the 32nd bit,
/// see `db::node`). Within a second
/// Redis's sampled keys all look equally idle and the pool picks among
/// them blindly; at 10 ms the pool ranks them, which is most of what
/// keeps the hit ratio near true LRU's under a hot working set.
const LRU_TICK_MS: i64 = 10;
const LRU_CLOCK_MAX: u32 = u32::MAX >> 1;
/// Redis's `LFU_INIT_VAL`.
const LFU_INIT_VAL: u32 = 5;
/// Redis's `EVPOOL_SIZE`.
const EVPOOL_SIZE: usize = 16;

/// How a lookup updates a key's access clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessMode {
    /// LFU (`Some((lfu-log-factor, lfu-decay-time))`) or LRU.
    pub lfu: Option<(u32, u32)>,
    /// The time of the last lookup (new keys get it as their clock).
    pub now_ms: i64,
}

fn lru_clock(now_ms: i64) -> u32 {
    ((now_ms.max(0) / LRU_TICK_MS) as u64 & u64::from(LRU_CLOCK_MAX)) as u32
}

fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms.max(0) / 60_000) as u64 & 0xFFFF) as u32
}

impl AccessMode {
    /// The clock of a new key.
    pub fn new_key(&self, now_ms: i64) -> u32 {
        match self.lfu {
            Some(_) => (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL,
            None => lru_clock(now_ms),
        }
    }

    /// The clock after an access.
    #[inline]
    pub fn touch(&self, a: u32, now_ms: i64, rng: &mut Rng) -> u32 {
        match self.lfu {
            None => lru_clock(now_ms),
            Some((log_factor, decay)) => {
                let c = lfu_decr(a, now_ms, decay);
                let c = lfu_log_incr(c, log_factor, rng);
                (lfu_minutes(now_ms) << 8) | c
            }
        }
    }
}

/// Redis's `LFUTimeElapsed` + `LFUDecrAndReturn`: the counter decayed by
/// one per `decay` minutes since the last access.
pub fn lfu_decr(a: u32, now_ms: i64, decay: u32) -> u32 {
    let ldt = a >> 8;
    let counter = a & 255;
    let now = lfu_minutes(now_ms);
    let elapsed = if now >= ldt {
        now - ldt
    } else {
        65535 - ldt + now
    };
    let periods = elapsed.checked_div(decay).unwrap_or(0);
    counter.saturating_sub(periods)
}

/// Redis's `LFULogIncr`: increment with probability 1/((c-5)*factor+1).
fn lfu_log_incr(counter: u32, factor: u32, rng: &mut Rng) -> u32 {
    if counter >= 255 {
        return 255;
    }
    let r = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * f64::from(factor) + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

/// Redis's `estimateObjectIdleTime` in ms.
pub fn idle_ms(a: u32, now_ms: i64) -> u64 {
    let clock = lru_clock(now_ms);
    let ticks = if clock >= a {
        clock - a
    } else {
        clock + (LRU_CLOCK_MAX - a)
    };
    u64::from(ticks) * LRU_TICK_MS as u64
}

/// One eviction pool entry (Redis's `evictionPoolEntry`).
#[derive(Clone, Debug)]
struct PoolEntry {
    idle: u64,
    db: usize,
    key: Vec<u8>,
}

/// The eviction pool, ascending by idle score, at most 16 entries.
#[derive(Debug, Default)]
pub struct Pool {
    entries: Vec<PoolEntry>,
}

impl Pool {
    /// Redis's `evictionPoolPopulate` insertion: keep the best 16.
    fn insert(&mut self, e: PoolEntry) {
        if self.entries.iter().any(|x| x.db == e.db && x.key == e.key) {
            return;
        }
        let pos = self.entries.partition_point(|x| x.idle < e.idle);
        if self.entries.len() < EVPOOL_SIZE {
            self.entries.insert(pos, e);
        } else if pos > 0 {
            // Full: drop the entry with the smallest score.
            self.entries.remove(0);
            self.entries.insert(pos - 1, e);
        }
    }
}

/// Eviction settings (CONFIG names in the docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictConfig {
    /// `maxmemory-policy`.
    pub policy: Policy,
    /// `maxmemory-samples`.
    pub samples: u32,
    /// `maxmemory-eviction-tenacity` (0..=100).
    pub tenacity: u32,
    /// `lfu-log-factor`.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time` (minutes).
    pub lfu_decay_time: u32,
}

impl Default for EvictConfig {
    fn default() -> Self {
        EvictConfig {
            policy: Policy::Noeviction,
            samples: 5,
            tenacity: 10,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
        }
    }
}

/// Redis's `evictionTimeLimitUs`.
fn time_limit(tenacity: u32) -> Option<Duration> {
    if tenacity <= 10 {
        return Some(Duration::from_micros(50 * u64::from(tenacity)));
    }
    if tenacity < 100 {
        let us = 500.0 * 1.15f64.powf(f64::from(tenacity) - 10.0);
        return Some(Duration::from_micros(us as u64));
    }
    None
}

/// What [`perform_evictions`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Under the limit (nothing to do, or enough was freed).
    Ok,
    /// Out of time with work left: the driver continues it from a time
    /// event ([`Server::eviction_pending`]); commands still run.
    Running,
    /// Nothing (more) can be evicted and memory is over the limit.
    Fail,
}

/// Apply the access mode of the policy to every database.
pub fn sync_policy(server: &mut Server) {
    let e = server.config.evict;
    let lfu = e
        .policy
        .is_lfu()
        .then_some((e.lfu_log_factor, e.lfu_decay_time));
    for db in &mut server.dbs {
        db.access_mode.lfu = lfu;
    }
}

/// The pool score of a sampled key: higher is evicted first.
fn score(policy: Policy, access: u32, expire: i64, now: i64, decay: u32) -> u64 {
    match policy {
        Policy::VolatileTtl => u64::MAX - expire.max(0) as u64,
        p if p.is_lfu() => 255 - u64::from(lfu_decr(access, now, decay)),
        _ => idle_ms(access, now),
    }
}

/// Pick the best key to evict; `None` when there is none.
fn pick(server: &mut Server, now: i64) -> Option<(usize, Vec<u8>)> {
    let e = server.config.evict;
    let volatile = e.policy.volatile();
    let ndb = server.dbs.len();
    if matches!(e.policy, Policy::AllkeysRandom | Policy::VolatileRandom) {
        for _ in 0..ndb {
            let j = server.evict_state.next_db % ndb;
            server.evict_state.next_db = server.evict_state.next_db.wrapping_add(1);
            if let Some(k) = server.dbs[j].random_for_eviction(volatile) {
                return Some((j, k));
            }
        }
        return None;
    }
    // Bounded: each round either finds a live pool entry or drops stale
    // ones; a pool refilled from empty databases ends the search.
    for _ in 0..EVPOOL_SIZE + 2 {
        let mut total = 0usize;
        let mut sample = Vec::new();
        for i in 0..ndb {
            let db = &mut server.dbs[i];
            let keys = if volatile { db.expires_len() } else { db.len() };
            if keys == 0 {
                continue;
            }
            total += keys;
            sample.clear();
            db.sample_for_eviction(e.samples.max(1) as usize, volatile, &mut sample);
            for (key, access, expire) in sample.drain(..) {
                let idle = score(e.policy, access, expire, now, e.lfu_decay_time);
                server
                    .evict_state
                    .pool
                    .insert(PoolEntry { idle, db: i, key });
            }
        }
        if total == 0 {
            return None;
        }
        while let Some(best) = server.evict_state.pool.entries.pop() {
            let db = &server.dbs[best.db];
            let live = if volatile {
                db.get_expire(&best.key).is_some()
            } else {
                db.contains_stored(&best.key)
            };
            if !live {
                continue;
            }
            // Re-rank an entry whose key was used since it was sampled
            // (Redis evicts it on its stale score): its score can only
            // have dropped, and with `now` fixed it is re-ranked at most
            // once, so the loop stays bounded by twice the pool.
            if e.policy != Policy::VolatileTtl {
                if let Some(access) = db.access_of(&best.key, now) {
                    let cur = score(e.policy, access, 0, now, e.lfu_decay_time);
                    if cur < best.idle {
                        server
                            .evict_state
                            .pool
                            .insert(PoolEntry { idle: cur, ..best });
                        continue;
                    }
                }
            }
            return Some((best.db, best.key));
        }
    }
    None
}

/// Redis's `performEvictions`: evict until under `maxmemory`, within the
/// tenacity's time limit.
pub fn perform_evictions(server: &mut Server, now: i64) -> Outcome {
    let max = server.config.maxmemory;
    if max == 0 {
        return Outcome::Ok;
    }
    // Eviction writes: it waits out a CLIENT PAUSE (Redis's EVICT_OK), and
    // a load (`isSafeToPerformEvictions`: a command served between two
    // loading slices must not evict keys the rest of the AOF still uses).
    if (server.pause_pending() && server.writes_paused(now)) || server.is_loading() {
        return Outcome::Ok;
    }
    let used = server.used_memory_for_eviction();
    if used <= max {
        server.evict_state.pending = false;
        server.evict_state.exceeded_end(now);
        return Outcome::Ok;
    }
    server.evict_state.exceeded_begin(now);
    if server.config.evict.policy == Policy::Noeviction {
        return Outcome::Fail;
    }
    let started = crate::cmdstats::clock_ns();
    let r = evict_until(server, now, used - max);
    // The latency monitor's `eviction-cycle` (Redis's performEvictions).
    let ns = crate::cmdstats::clock_ns().saturating_sub(started);
    server.latmon.sample_if_needed("eviction-cycle", ns);
    r
}

/// [`perform_evictions`]' loop: evict until `to_free` bytes are freed,
/// no key is left, or the time limit is spent.
fn evict_until(server: &mut Server, now: i64, to_free: u64) -> Outcome {
    let start = Instant::now();
    let limit = time_limit(server.config.evict.tenacity);
    let monitored = server.latmon.threshold_ns != u64::MAX;
    let mut freed = 0u64;
    let mut keys = 0u64;
    while freed < to_free {
        let Some((dbi, key)) = pick(server, now) else {
            server.evict_state.pending = false;
            return Outcome::Fail;
        };
        let del_start = monitored.then(crate::cmdstats::clock_ns);
        let Some(delta) = server.dbs[dbi].evict(&key) else {
            continue;
        };
        if let Some(t) = del_start {
            let ns = crate::cmdstats::clock_ns().saturating_sub(t);
            server.latmon.sample_if_needed("eviction-del", ns);
        }
        freed += delta;
        keys += 1;
        server.stats.evicted_keys += 1;
        server.dirty += 1;
        crate::notify::notify_keyspace_event(
            server,
            crate::notify::EVICTED,
            "evicted",
            &key,
            dbi,
            None,
            now,
        );
        if keys % 16 == 0 && limit.is_some_and(|l| start.elapsed() > l) {
            server.evict_state.pending = true;
            return Outcome::Running;
        }
    }
    server.evict_state.pending = false;
    server.evict_state.exceeded_end(now);
    Outcome::Ok
}

/// Eviction state kept between calls.
#[derive(Debug, Default)]
pub struct EvictState {
    pool: Pool,
    next_db: usize,
    /// A time-limited run left work (the driver keeps calling
    /// [`Server::evict_slice`]).
    pub(crate) pending: bool,
    /// Since when memory is over `maxmemory` (ms), and the total of past
    /// such spells (INFO `current_/total_eviction_exceeded_time`).
    exceeded_since: Option<i64>,
    exceeded_total_ms: u64,
}

impl EvictState {
    fn exceeded_begin(&mut self, now: i64) {
        self.exceeded_since.get_or_insert(now);
    }

    fn exceeded_end(&mut self, now: i64) {
        if let Some(t) = self.exceeded_since.take() {
            self.exceeded_total_ms += (now - t).max(0) as u64;
        }
    }

    /// (total, current) ms spent over the limit, as INFO shows them.
    pub fn exceeded_ms(&self, now: i64) -> (u64, u64) {
        let cur = self.exceeded_since.map_or(0, |t| (now - t).max(0) as u64);
        (self.exceeded_total_ms + cur, cur)
    }
}

impl Server {
    /// Memory counted against `maxmemory`: the databases exactly, the
    /// clients as of the last cron.
    pub fn used_memory_for_eviction(&self) -> u64 {
        const BASE: u64 = 900 * 1024;
        let data: u64 = self.dbs.iter().map(crate::db::Db::used_memory).sum();
        BASE + data + self.clients_mem_cached
    }

    /// Whether a time-limited eviction run left work.
    pub fn eviction_pending(&self) -> bool {
        self.evict_state.pending
    }

    /// Continue eviction from a time event (Redis's `evictionTimeProc`).
    pub fn evict_slice(&mut self, now: i64) -> Outcome {
        let r = perform_evictions(self, now);
        if self.prop.on {
            self.propagate_expired_keys();
        }
        r
    }
}

/// The OOM refusal.
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// OBJECT FREQ.
pub fn object_freq(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(2);
    let Some(a) = server.dbs[db].access_of(key, now) else {
        server.dbs[db].expire_if_needed(key, now);
        return ctx.null();
    };
    if !server.config.evict.policy.is_lfu() {
        return ctx.err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
    }
    let decay = server.config.evict.lfu_decay_time;
    ctx.int(i64::from(lfu_decr(a, now, decay)));
}

/// OBJECT IDLETIME.
pub fn object_idletime(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(2);
    let Some(a) = server.dbs[db].access_of(key, now) else {
        server.dbs[db].expire_if_needed(key, now);
        return ctx.null();
    };
    if server.config.evict.policy.is_lfu() {
        return ctx.err("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
    }
    ctx.int((idle_ms(a, now) / 1000) as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_the_sixteen_best_in_order() {
        let mut p = Pool::default();
        for i in 0..40u64 {
            p.insert(PoolEntry {
                idle: (i * 7919) % 101,
                db: 0,
                key: i.to_string().into_bytes(),
            });
        }
        assert_eq!(p.entries.len(), EVPOOL_SIZE);
        assert!(p.entries.windows(2).all(|w| w[0].idle <= w[1].idle));
        let mut all: Vec<u64> = (0..40u64).map(|i| (i * 7919) % 101).collect();
        all.sort_unstable();
        assert_eq!(p.entries.last().unwrap().idle, *all.last().unwrap());
    }

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays() {
        let mut rng = Rng::new(1);
        let m = AccessMode {
            lfu: Some((10, 1)),
            now_ms: 0,
        };
        let now = 10 * 60_000;
        let mut a = m.new_key(now);
        assert_eq!(a & 255, LFU_INIT_VAL);
        for _ in 0..1000 {
            a = m.touch(a, now, &mut rng);
        }
        let c = a & 255;
        assert!(c > 10 && c < 40, "1000 hits at factor 10: {c}");
        // Five minutes without access at decay 1: five less.
        assert_eq!(lfu_decr(a, now + 5 * 60_000, 1), c - 5);
    }

    #[test]
    fn idle_time_wraps_with_the_clock() {
        assert_eq!(idle_ms(lru_clock(10_000), 25_000), 15_000);
        assert_eq!(idle_ms(lru_clock(10_000), 10_250), 250);
        let late = i64::from(LRU_CLOCK_MAX) * LRU_TICK_MS + 5000;
        assert!(idle_ms(lru_clock(late - 10_000), late) >= 9000);
    }

    #[test]
    fn tenacity_time_limits() {
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(0), Some(Duration::from_micros(0)));
        assert_eq!(time_limit(100), None);
    }
}
