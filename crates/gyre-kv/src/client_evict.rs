//! Client eviction (Redis 7.0's `maxmemory-clients` and `evictClients`):
//! when the clients together use more than the limit — bytes, or a
//! percentage of `maxmemory` — the biggest clients are disconnected, the
//! biggest first, until they fit. A client with CLIENT NO-EVICT ON is
//! never picked. Evictions count in INFO's `evicted_clients`.
//!
//! A client's memory is what CLIENT LIST shows as `tot-mem` ([`usage`]).
//! The total is kept incrementally: the client whose input just ran and
//! the clients others wrote to (pub/sub) are re-measured after each read
//! batch, and the cron measures everyone again (output the socket took
//! since, which the glue hands back, only makes the total smaller). The
//! search for the biggest client walks the clients, and happens only when
//! the total is over the limit.

use crate::server::{Client, ClientId, Server};

/// `maxmemory-clients`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Bytes(u64),
    /// Percent of `maxmemory` (0 with no `maxmemory`).
    Percent(u64),
}

impl Default for Limit {
    fn default() -> Limit {
        Limit::Bytes(0)
    }
}

/// Redis's parse of a memory-or-percent value; `Err` with its reason.
pub fn parse(v: &[u8]) -> Result<Limit, &'static str> {
    const BAD: &str = "argument must be a memory or percent value";
    if let Some(p) = v.strip_suffix(b"%") {
        let n = crate::util::string2ll(p).filter(|&n| n >= 0).ok_or(BAD)?;
        if n > 100 {
            return Err("percentage argument must be less or equal to 100");
        }
        return Ok(if n == 0 {
            Limit::Bytes(0)
        } else {
            Limit::Percent(n as u64)
        });
    }
    crate::util::memtoull(v).map(Limit::Bytes).ok_or(BAD)
}

/// CONFIG GET's form: bytes, or `N%`.
pub fn format(l: Limit) -> String {
    match l {
        Limit::Bytes(b) => b.to_string(),
        Limit::Percent(p) => format!("{p}%"),
    }
}

/// The limit in bytes (0: off).
pub fn limit_bytes(server: &Server) -> u64 {
    match server.config.maxmemory_clients {
        Limit::Bytes(b) => b,
        Limit::Percent(p) => server.config.maxmemory / 100 * p,
    }
}

/// A client's memory (CLIENT LIST's `tot-mem`): its fixed share, its
/// query buffer, its output buffers and its MULTI queue.
pub fn usage(c: &Client) -> u64 {
    let multi = c.mstate.as_ref().map_or(0, |m| m.bytes);
    2048 + c.parser.buffered_capacity() as u64
        + c.obuf.capacity() as u64
        + c.pending.capacity() as u64
        + multi
}

/// Re-measure client `id` into the total.
fn account(server: &mut Server, id: ClientId) {
    if let Some(c) = server.clients.get_mut(&id) {
        let now = usage(c);
        server.clients_mem_total = (server.clients_mem_total + now).saturating_sub(c.mem_counted);
        c.mem_counted = now;
    }
}

/// A client went away: its share leaves the total.
pub(crate) fn forget(server: &mut Server, counted: u64) {
    server.clients_mem_total = server.clients_mem_total.saturating_sub(counted);
}

/// After client `id`'s input ran: re-measure it and the clients it wrote
/// to, then evict while over the limit. True if `id` itself was evicted.
pub(crate) fn after_feed(server: &mut Server, id: ClientId, now_ms: i64) -> bool {
    account(server, id);
    let writers = std::mem::take(&mut server.writers);
    for &w in &writers {
        account(server, w);
    }
    server.writers = writers;
    evict(server, Some(id), now_ms)
}

/// serverCron: measure every client again, then evict while over.
pub(crate) fn cron(server: &mut Server, now_ms: i64) {
    recount(server);
    if limit_bytes(server) > 0 {
        evict(server, None, now_ms);
    }
}

/// Measure every client again (the total is kept only while a limit is
/// set: CONFIG SET of one starts from here).
pub(crate) fn recount(server: &mut Server) {
    let mut total = 0;
    for c in server.clients.values_mut() {
        c.mem_counted = usage(c);
        total += c.mem_counted;
    }
    server.clients_mem_total = total;
}

/// Redis's `evictClients`: the biggest evictable clients go until the
/// total fits. True if `current` was one of them.
fn evict(server: &mut Server, current: Option<ClientId>, now_ms: i64) -> bool {
    let limit = limit_bytes(server);
    let mut hit_current = false;
    while limit > 0 && server.clients_mem_total >= limit {
        let victim = server
            .clients
            .values()
            .filter(|c| !c.no_evict && !c.closing)
            .max_by_key(|c| c.mem_counted)
            .map(|c| c.id);
        let Some(v) = victim else { break };
        let info = crate::client::client_line(server, v, now_ms, None);
        log::info!("Evicting client: {info}");
        server.stats.evicted_clients += 1;
        if let Some(c) = server.clients.get_mut(&v) {
            let counted = std::mem::take(&mut c.mem_counted);
            server.clients_mem_total = server.clients_mem_total.saturating_sub(counted);
        }
        server.schedule_close(v);
        hit_current |= Some(v) == current;
    }
    hit_current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_as_redis_parses_them() {
        assert_eq!(parse(b"0"), Ok(Limit::Bytes(0)));
        assert_eq!(parse(b"1mb"), Ok(Limit::Bytes(1 << 20)));
        assert_eq!(parse(b"10%"), Ok(Limit::Percent(10)));
        assert_eq!(parse(b"0%"), Ok(Limit::Bytes(0)));
        assert_eq!(
            parse(b"101%"),
            Err("percentage argument must be less or equal to 100")
        );
        assert_eq!(
            parse(b"-5"),
            Err("argument must be a memory or percent value")
        );
        assert_eq!(
            parse(b"abc"),
            Err("argument must be a memory or percent value")
        );
        assert_eq!(format(Limit::Percent(10)), "10%");
        assert_eq!(format(Limit::Bytes(1 << 20)), "1048576");
    }
}
