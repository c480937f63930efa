//! The MEMORY command (Redis's `memoryCommand` in `object.c`): what a key
//! costs (USAGE), the server's memory broken down (STATS), a report on
//! it (DOCTOR), and giving free heap pages back (PURGE).
//!
//! The figures are the kv process's own estimates (the same ones INFO's
//! `used_memory` sums: see [`crate::db::ENTRY_OVERHEAD`] and the objects'
//! `mem`) and its real RSS, sampled by serverCron. gyre runs on glibc's
//! malloc, so the allocator's own figures (`allocator.*`) are the estimate
//! and the RSS, and MALLOC-STATS says what Redis says without jemalloc.

use crate::cmd::{eq, help_lines, no_handler, parse_ll, spec, CommandSpec, Ctx, RO_SLOW};
use crate::resp;
use crate::server::Server;
use crate::t_zset::reply_score;

/// `used_memory` below which DOCTOR declines to judge (Redis's 5 MiB).
const DOCTOR_MIN_USED: u64 = 5 << 20;
/// Where the kv process's fixed start-up memory is counted (the `BASE` of
/// [`Server::used_memory`]).
pub(crate) const STARTUP: u64 = 900 * 1024;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: MEMORY_SUBS,
    ..spec!(
        "memory",
        -2,
        &[],
        0,
        0,
        0,
        "server",
        "4.0.0",
        "A container for memory diagnostics commands",
        no_handler
    )
}];

static MEMORY_SUBS: &[CommandSpec] = &[
    spec!(
        "doctor",
        2,
        &[],
        0,
        0,
        0,
        "server",
        "4.0.0",
        "Outputs memory problems report",
        doctor
    ),
    spec!(
        "help",
        2,
        &["loading", "stale"],
        0,
        0,
        0,
        "server",
        "4.0.0",
        "Show helpful text about the different subcommands",
        help
    ),
    spec!(
        "malloc-stats",
        2,
        &[],
        0,
        0,
        0,
        "server",
        "4.0.0",
        "Show allocator internal stats",
        malloc_stats
    ),
    spec!(
        "purge",
        2,
        &[],
        0,
        0,
        0,
        "server",
        "4.0.0",
        "Ask the allocator to release memory",
        purge
    ),
    spec!(
        "stats",
        2,
        &[],
        0,
        0,
        0,
        "server",
        "4.0.0",
        "Show memory usage details",
        stats
    ),
    spec!(
        "usage",
        -3,
        RO_SLOW,
        2,
        2,
        1,
        "server",
        "4.0.0",
        "Estimate the memory usage of a key",
        usage
    ),
];

fn help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
}

/// MEMORY USAGE key [SAMPLES count]: the key's node and everything its
/// value owns (the estimate is exact, so every count samples "all").
fn usage(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut j = 3;
    while j < ctx.argc() {
        if eq(ctx.arg(j), "samples") && j + 1 < ctx.argc() {
            let Some(n) = parse_ll(ctx, j + 1) else {
                return;
            };
            if n < 0 {
                return ctx.syntax();
            }
            j += 2;
        } else {
            return ctx.syntax();
        }
    }
    match server.dbs[ctx.db].key_memory(ctx.arg(2)) {
        Some(n) => ctx.int(i64::try_from(n).unwrap_or(i64::MAX)),
        None => ctx.null(),
    }
}

/// The figures STATS, DOCTOR and INFO's memory section read.
pub(crate) struct Overview {
    pub peak: u64,
    pub total: u64,
    pub clients: u64,
    /// (db index, keyspace overhead, expires overhead) of the non-empty ones.
    pub dbs: Vec<(usize, u64, u64)>,
    pub overhead: u64,
    pub keys: u64,
    pub rss: u64,
}

pub(crate) fn overview(server: &Server) -> Overview {
    let total = server.used_memory();
    let peak = server.stats.used_memory_peak.max(total);
    let data: u64 = server.dbs.iter().map(crate::db::Db::used_memory).sum();
    let clients = total.saturating_sub(STARTUP + data);
    let dbs: Vec<(usize, u64, u64)> = server
        .dbs
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.is_empty())
        .map(|(i, d)| {
            (
                i,
                d.len() as u64 * crate::db::ENTRY_OVERHEAD,
                d.expires_len() as u64 * 16,
            )
        })
        .collect();
    let overhead = STARTUP + clients + dbs.iter().map(|&(_, m, e)| m + e).sum::<u64>();
    let keys = server.dbs.iter().map(|d| d.len() as u64).sum();
    let rss = match server.stats.process_rss {
        0 => crate::util::process_rss().unwrap_or(total),
        r => r,
    };
    Overview {
        peak,
        total,
        clients,
        dbs,
        overhead,
        keys,
        rss,
    }
}

impl Overview {
    /// `used_memory` over the start-up figure (Redis's `net_usage`).
    pub fn net(&self) -> u64 {
        self.total.saturating_sub(STARTUP)
    }

    /// What the keys and values themselves hold.
    pub fn dataset(&self) -> u64 {
        self.total.saturating_sub(self.overhead)
    }

    /// The dataset's share of `net`, in percent.
    pub fn dataset_perc(&self) -> f64 {
        ratio(self.dataset(), self.net()) * 100.0
    }

    /// `used_memory` against its peak, in percent.
    pub fn peak_perc(&self) -> f64 {
        ratio(self.total, self.peak) * 100.0
    }

    /// RSS over `used_memory` (INFO's `mem_fragmentation_ratio`).
    pub fn frag(&self) -> f64 {
        ratio(self.rss, self.total)
    }

    /// RSS minus `used_memory`.
    pub fn frag_bytes(&self) -> i64 {
        self.rss as i64 - self.total as i64
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A MEMORY STATS value.
enum Stat {
    Int(i64),
    Double(f64),
}

fn stats(server: &mut Server, ctx: &mut Ctx<'_>) {
    use Stat::{Double, Int};
    let o = overview(server);
    let int = |v: u64| Int(i64::try_from(v).unwrap_or(i64::MAX));
    let head = [
        ("peak.allocated", int(o.peak)),
        ("total.allocated", int(o.total)),
        ("startup.allocated", int(STARTUP)),
        ("replication.backlog", Int(0)),
        ("clients.slaves", Int(0)),
        ("clients.normal", int(o.clients)),
        ("cluster.links", Int(0)),
        ("aof.buffer", Int(0)),
        ("lua.caches", Int(0)),
        ("functions.caches", Int(0)),
    ];
    // No allocator of its own to ask: its view is the estimate and the RSS.
    let tail = [
        ("overhead.total", int(o.overhead)),
        ("keys.count", int(o.keys)),
        (
            "keys.bytes-per-key",
            int(o.net().checked_div(o.keys).unwrap_or(0)),
        ),
        ("dataset.bytes", int(o.dataset())),
        ("dataset.percentage", Double(o.dataset_perc())),
        ("peak.percentage", Double(o.peak_perc())),
        ("allocator.allocated", int(o.total)),
        ("allocator.active", int(o.total)),
        ("allocator.resident", int(o.rss)),
        ("allocator-fragmentation.ratio", Double(1.0)),
        ("allocator-fragmentation.bytes", Int(0)),
        ("allocator-rss.ratio", Double(o.frag())),
        ("allocator-rss.bytes", Int(o.frag_bytes())),
        ("rss-overhead.ratio", Double(1.0)),
        ("rss-overhead.bytes", Int(0)),
        ("fragmentation", Double(o.frag())),
        ("fragmentation.bytes", Int(o.frag_bytes())),
    ];
    let put = |ctx: &mut Ctx<'_>, k: &str, v: &Stat| {
        ctx.bulk(k.as_bytes());
        match *v {
            Int(n) => ctx.int(n),
            Double(d) => reply_score(ctx, d),
        }
    };
    ctx.map(head.len() + o.dbs.len() + tail.len());
    for (k, v) in &head {
        put(ctx, k, v);
    }
    for &(i, main, expires) in &o.dbs {
        ctx.bulk(format!("db.{i}").as_bytes());
        ctx.map(3);
        ctx.bulk(b"overhead.hashtable.main");
        ctx.int(i64::try_from(main).unwrap_or(i64::MAX));
        ctx.bulk(b"overhead.hashtable.expires");
        ctx.int(i64::try_from(expires).unwrap_or(i64::MAX));
        ctx.bulk(b"overhead.hashtable.slot-to-keys");
        ctx.int(0);
    }
    for (k, v) in &tail {
        put(ctx, k, v);
    }
}

/// The report's text: Redis's words for an instance too small to judge
/// and for one without issues; otherwise the issues found in the figures
/// this process has (a past peak, RSS well over what is allocated).
fn report(o: &Overview) -> String {
    if o.total < DOCTOR_MIN_USED {
        return "Hi Sam, this instance is empty or is using very little memory, my issues \
                detector can't be used in these conditions. Please, leave for your mission on \
                Earth and fill it with some data. The new Sam and I will be back to our \
                programming as soon as I finished rebooting.\n"
            .to_string();
    }
    let mut issues = Vec::new();
    if o.peak as f64 / o.total as f64 > 1.5 {
        issues.push(format!(
            "Peak memory: the instance once used {} bytes, more than 150% of the {} it \
             holds now. Freed memory is reused for new data, so a high fragmentation ratio \
             after a peak is expected; MEMORY PURGE gives the heap's free pages back.",
            o.peak, o.total
        ));
    }
    if o.rss as f64 / o.total as f64 > 1.4 && o.rss.saturating_sub(o.total) > 10 << 20 {
        issues.push(format!(
            "High fragmentation: the resident set ({} bytes) is more than 1.4 times the \
             memory in use ({} bytes). MEMORY PURGE gives the heap's free pages back.",
            o.rss, o.total
        ));
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account \
                for what occurs on this base.\n"
            .to_string();
    }
    let mut s =
        String::from("Sam, I detected a few issues in this Redis instance memory implants:\n\n");
    for i in issues {
        s.push_str(" * ");
        s.push_str(&i);
        s.push_str("\n\n");
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}

fn doctor(server: &mut Server, ctx: &mut Ctx<'_>) {
    let text = report(&overview(server));
    resp::write_verbatim(ctx.out, text.as_bytes(), ctx.proto);
}

fn malloc_stats(_: &mut Server, ctx: &mut Ctx<'_>) {
    resp::write_verbatim(
        ctx.out,
        b"Stats not supported for the current allocator",
        ctx.proto,
    );
}

fn purge(server: &mut Server, ctx: &mut Ctx<'_>) {
    gyre_core::sys::process::trim_heap();
    if let Some(rss) = crate::util::process_rss() {
        server.stats.process_rss = rss;
    }
    ctx.ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(total: u64, peak: u64, rss: u64) -> Overview {
        Overview {
            peak,
            total,
            clients: 0,
            dbs: Vec::new(),
            overhead: STARTUP,
            keys: 1,
            rss,
        }
    }

    #[test]
    fn the_report_judges_only_what_it_can() {
        assert!(report(&o(1 << 20, 1 << 20, 8 << 20)).starts_with("Hi Sam, this instance is empty"));
        assert!(report(&o(64 << 20, 70 << 20, 80 << 20)).starts_with("Hi Sam, I can't find any"));
        let r = report(&o(64 << 20, 200 << 20, 200 << 20));
        assert!(r.starts_with("Sam, I detected a few issues"), "{r}");
        assert!(
            r.contains("Peak memory") && r.contains("High fragmentation"),
            "{r}"
        );
        assert!(r.ends_with("I want to help you.\n"));
    }
}
