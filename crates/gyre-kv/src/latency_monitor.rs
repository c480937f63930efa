//! Redis 7.0's latency *monitor* (`latency.c`'s event part and
//! `sparkline.c`): `latency-monitor-threshold`, the per-event history of
//! spikes, and LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR.
//!
//! An event is a named code path (`command`, `fast-command`,
//! `expire-cycle`, ...) timed where it runs; a run that took at least
//! the threshold (milliseconds, 0 = off) becomes a sample. Each event
//! keeps its last [`TS_LEN`] samples, one per wall-clock second (a
//! second spike in the same second only raises that second's value), and
//! its all-time maximum. Events are created on their first sample and
//! listed in that order (Redis lists them in its hash table's order).
//!
//! The check callers make is one compare against
//! [`LatencyMonitor::threshold_ns`] (`u64::MAX` when off), so a disabled
//! monitor costs nothing more per command.

use std::fmt::Write;

use crate::cmd::Ctx;
use crate::resp;
use crate::server::Server;

/// Redis's `LATENCY_TS_LEN`: samples kept per event.
pub const TS_LEN: usize = 160;

/// LATENCY GRAPH's width (`LATENCY_GRAPH_COLS`).
const GRAPH_COLS: usize = 80;
/// LATENCY GRAPH's height in rows.
const GRAPH_ROWS: usize = 4;

/// Redis's default `slowlog-log-slower-than` (gyre has no slow log, so
/// DOCTOR's slow log advice reads the setting's default).
const SLOWLOG_LOG_SLOWER_THAN_US: i64 = 10_000;

#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    /// Unix time in seconds; 0 = an empty slot.
    time: i64,
    /// Milliseconds.
    latency: u64,
}

#[derive(Debug)]
struct Series {
    samples: [Sample; TS_LEN],
    /// The next slot to fill.
    idx: usize,
    max: u64,
}

impl Series {
    fn new() -> Series {
        Series {
            samples: [Sample::default(); TS_LEN],
            idx: 0,
            max: 0,
        }
    }

    /// The filled samples, oldest first.
    fn ordered(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..TS_LEN)
            .map(move |j| self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.time != 0)
    }

    fn last(&self) -> Sample {
        self.samples[(self.idx + TS_LEN - 1) % TS_LEN]
    }
}

#[derive(Debug)]
pub struct LatencyMonitor {
    /// `latency-monitor-threshold` in ns; `u64::MAX` when it is 0.
    pub(crate) threshold_ns: u64,
    /// `latency-monitor-threshold` in ms.
    threshold_ms: u64,
    events: Vec<(&'static str, Box<Series>)>,
}

impl Default for LatencyMonitor {
    fn default() -> Self {
        LatencyMonitor {
            threshold_ns: u64::MAX,
            threshold_ms: 0,
            events: Vec::new(),
        }
    }
}

/// Wall-clock seconds (Redis's `time(NULL)`).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl LatencyMonitor {
    /// Apply `latency-monitor-threshold` (ms).
    pub fn set_threshold(&mut self, ms: u64) {
        self.threshold_ms = ms;
        self.threshold_ns = if ms == 0 {
            u64::MAX
        } else {
            ms.saturating_mul(1_000_000)
        };
    }

    /// Redis's `latencyAddSampleIfNeeded`: `event` took `ns`.
    #[inline]
    pub fn sample_if_needed(&mut self, event: &'static str, ns: u64) {
        if ns >= self.threshold_ns {
            self.add_sample(event, ns / 1_000_000, unix_now());
        }
    }

    /// A command took at least the threshold: a `fast-command` or
    /// `command` sample (Redis's `call`), by the command's `fast` flag.
    #[cold]
    pub fn command_spike(&mut self, spec: &crate::cmd::CommandSpec, ns: u64) {
        let event = if spec.flags.contains(&"fast") {
            "fast-command"
        } else {
            "command"
        };
        self.sample_if_needed(event, ns);
    }

    /// Redis's `latencyAddSample`: `ms` at unix second `now`.
    #[cold]
    fn add_sample(&mut self, event: &'static str, ms: u64, now: i64) {
        let ts = match self.events.iter().position(|(e, _)| *e == event) {
            Some(i) => &mut self.events[i].1,
            None => {
                self.events.push((event, Box::new(Series::new())));
                let last = self.events.len() - 1;
                &mut self.events[last].1
            }
        };
        ts.max = ts.max.max(ms);
        let prev = (ts.idx + TS_LEN - 1) % TS_LEN;
        if ts.samples[prev].time == now {
            ts.samples[prev].latency = ts.samples[prev].latency.max(ms);
            return;
        }
        ts.samples[ts.idx] = Sample {
            time: now,
            latency: ms,
        };
        ts.idx = (ts.idx + 1) % TS_LEN;
    }

    fn get(&self, event: &[u8]) -> Option<(&'static str, &Series)> {
        self.events
            .iter()
            .find(|(e, _)| e.as_bytes() == event)
            .map(|(e, s)| (*e, &**s))
    }

    /// LATENCY RESET's count: events named `event` (any case), or all.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.events.len();
        self.events
            .retain(|(e, _)| event.is_some_and(|x| !e.as_bytes().eq_ignore_ascii_case(x)));
        before - self.events.len()
    }
}

/// What DOCTOR needs to know about the server besides the events.
pub struct DoctorContext {
    pub hz: u32,
    pub fsync_always: bool,
    /// `AnonHugePages` bytes of the process (THP in use).
    pub anon_huge_pages: u64,
}

/// Redis's `analyzeLatencyForEvent`: (samples, avg, mean deviation,
/// period in seconds).
fn analyze(ts: &Series, now: i64) -> (u64, u64, u64, i64) {
    let mut n = 0u64;
    let mut sum = 0u64;
    let mut oldest = 0i64;
    for s in ts.ordered() {
        n += 1;
        sum += s.latency;
        if oldest == 0 || s.time < oldest {
            oldest = s.time;
        }
    }
    if n == 0 {
        return (0, 0, 0, 0);
    }
    let avg = sum / n;
    let period = (now - oldest).max(0);
    let period = if period == 0 { 1 } else { period };
    let dev: u64 = ts.ordered().map(|s| avg.abs_diff(s.latency)).sum();
    (n, avg, dev / n, period)
}

#[derive(Default, PartialEq)]
struct Advice {
    slowlog_tuning: bool,
    slowlog_inspect: bool,
    scheduler: bool,
    local_disk: bool,
    ssd: bool,
    data_writeback: bool,
    disk_contention: bool,
    no_appendfsync: bool,
    relax_fsync: bool,
    hz: bool,
    large_objects: bool,
    mass_eviction: bool,
    disable_thp: bool,
}

impl Advice {
    /// Some advice applies (Redis counts them; only "none" matters).
    fn any(&self) -> bool {
        *self != Advice::default()
    }
}

/// LATENCY DOCTOR's report (Redis's `createLatencyReport`).
pub fn doctor(m: &LatencyMonitor, dc: &DoctorContext, now: i64) -> String {
    let mut r = String::new();
    if m.events.is_empty() && m.threshold_ms == 0 {
        r.push_str("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n");
        return r;
    }
    let mut a = Advice::default();
    for (num, (event, ts)) in m.events.iter().enumerate() {
        if num == 0 {
            r.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let (n, avg, mad, period) = analyze(ts, now);
        let _ = write!(
            r,
            "{}. {event}: {n} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
            num + 1,
            period as f64 / n.max(1) as f64,
            ts.max
        );
        match *event {
            "command" => {
                if SLOWLOG_LOG_SLOWER_THAN_US / 1000 > m.threshold_ms as i64 {
                    a.slowlog_tuning = true;
                }
                a.slowlog_inspect = true;
                a.large_objects = true;
            }
            "fast-command" => {
                a.scheduler = true;
            }
            "aof-write-pending-fsync" => {
                a.local_disk = true;
                a.disk_contention = true;
                a.ssd = true;
                a.data_writeback = true;
            }
            "aof-write-active-child" => {
                a.no_appendfsync = true;
                a.data_writeback = true;
                a.ssd = true;
            }
            "aof-write-alone" => {
                a.local_disk = true;
                a.data_writeback = true;
                a.ssd = true;
            }
            "aof-fsync-always" => {
                a.relax_fsync = true;
            }
            "aof-fstat" | "rdb-unlink-temp-file" => {
                a.disk_contention = true;
                a.local_disk = true;
            }
            "expire-cycle" => {
                a.hz = true;
                a.large_objects = true;
            }
            "eviction-del" => {
                a.large_objects = true;
            }
            "eviction-cycle" => {
                a.mass_eviction = true;
            }
            _ => {}
        }
        r.push('\n');
    }
    if dc.anon_huge_pages > 0 {
        a.disable_thp = true;
    }
    if m.events.is_empty() && !a.any() {
        r.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        return r;
    }
    if !a.any() {
        r.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        return r;
    }
    r.push_str("\nI have a few advices for you:\n\n");
    if a.slowlog_tuning {
        let _ = writeln!(r, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.", m.threshold_ms.saturating_mul(1000));
    }
    if a.slowlog_inspect {
        r.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if a.scheduler {
        r.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
    }
    if a.local_disk {
        r.push_str("- It is strongly advised to use local disks for persistence, especially if you are using AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n");
    }
    if a.ssd {
        r.push_str("- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and AOF log rewriting (resulting in smaller memory usage and smaller final AOF rewrite buffer flushes). With extremely high write load SSD disks can be a good option. However Redis should perform reasonably with high load using normal disks. Use this advice as a last resort.\n");
    }
    if a.data_writeback {
        r.push_str("- Mounting ext3/4 filesystems with data=writeback can provide a performance boost compared to data=ordered, however this mode of operation provides less guarantees, and sometimes it can happen that after a hard crash the AOF file will have a half-written command at the end and will require to be repaired before Redis restarts.\n");
    }
    if a.disk_contention {
        r.push_str("- Try to lower the disk contention. This is often caused by other disk intensive processes running in the same computer (including other Redis instances).\n");
    }
    if a.no_appendfsync {
        r.push_str("- Assuming from the point of view of data safety this is viable in your environment, you could try to enable the 'no-appendfsync-on-rewrite' option, so that fsync will not be performed while there is a child rewriting the AOF file or producing an RDB file (the moment where there is high disk contention).\n");
    }
    if a.relax_fsync && dc.fsync_always {
        r.push_str("- Your fsync policy is set to 'always'. It is very hard to get good performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n");
    }
    if a.hz && dc.hz < 100 {
        r.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
    }
    if a.large_objects {
        r.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    if a.mass_eviction {
        r.push_str("- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n");
    }
    if a.disable_thp {
        r.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
    }
    r
}

/// The process's `AnonHugePages` (Redis's `THPGetAnonHugePagesSize`),
/// 0 when unknown.
pub fn anon_huge_pages() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps_rollup") else {
        return 0;
    };
    text.lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .filter_map(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .sum()
}

/// "5s", "3m", "2h", "1d": how long ago, as GRAPH's labels.
fn ago(elapsed: i64) -> String {
    match elapsed {
        e if e < 60 => format!("{e}s"),
        e if e < 3600 => format!("{}m", e / 60),
        e if e < 86_400 => format!("{}h", e / 3600),
        e => format!("{}d", e / 86_400),
    }
}

/// LATENCY GRAPH's text for `event` (Redis's
/// `latencyCommandGenSparkeline`), `None` when it has no samples.
pub fn graph(m: &LatencyMonitor, event: &[u8], now: i64) -> Option<String> {
    let (name, ts) = m.get(event)?;
    let samples: Vec<(f64, String)> = ts
        .ordered()
        .map(|s| (s.latency as f64, ago(now - s.time)))
        .collect();
    let hi = ts.ordered().map(|s| s.latency).max().unwrap_or(0);
    let lo = ts.ordered().map(|s| s.latency).min().unwrap_or(0);
    let mut g = format!(
        "{name} - high {hi} ms, low {lo} ms (all time high {} ms)\n",
        ts.max
    );
    g.push_str(&"-".repeat(GRAPH_COLS));
    g.push('\n');
    sparkline(&mut g, &samples, GRAPH_COLS, GRAPH_ROWS);
    Some(g)
}

/// `sparkline.c` with `SPARKLINE_FILL`: `rows` rows of `_o#` and `|`
/// bars, then a blank row and each sample's label written downwards,
/// `columns` samples per block.
fn sparkline(out: &mut String, samples: &[(f64, String)], columns: usize, rows: usize) {
    const FILL: &[u8] = b"_o#";
    let Some(first) = samples.first() else {
        return;
    };
    let (mut min, mut max) = (first.0, first.0);
    for s in &samples[1..] {
        if s.0 < min {
            min = s.0;
        } else if s.0 > max {
            max = s.0;
        }
    }
    let relmax = if max - min == 0.0 { 1.0 } else { max - min };
    let steps = (FILL.len() * rows) as i64;
    let has_labels = samples.iter().any(|s| !s.1.is_empty());
    for (b, block) in samples.chunks(columns).enumerate() {
        if b > 0 {
            out.push('\n');
        }
        let mut row = 0usize;
        loop {
            let mut more = false;
            let mut line = vec![b' '; block.len()];
            for (j, (v, label)) in block.iter().enumerate() {
                let step = (((v - min) * steps as f64).trunc() / relmax) as i64;
                let step = step.clamp(0, steps - 1);
                if row < rows {
                    more = true;
                    let idx = step - ((rows - row - 1) * FILL.len()) as i64;
                    if (0..FILL.len() as i64).contains(&idx) {
                        line[j] = FILL[idx as usize];
                    } else if idx >= FILL.len() as i64 {
                        line[j] = b'|';
                    }
                } else {
                    if has_labels && row == rows {
                        more = true;
                        break;
                    }
                    let k = row - rows - 1;
                    if let Some(&c) = label.as_bytes().get(k) {
                        more = true;
                        line[j] = c;
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&line));
            out.push('\n');
        }
    }
}

/// LATENCY LATEST's rows: (event, time, latest ms, max ms).
pub fn latest(m: &LatencyMonitor) -> Vec<(&'static str, i64, u64, u64)> {
    m.events
        .iter()
        .map(|(e, ts)| {
            let l = ts.last();
            (*e, l.time, l.latency, ts.max)
        })
        .collect()
}

/// LATENCY HISTORY's rows: (time, ms), oldest first; empty when unknown.
pub fn history(m: &LatencyMonitor, event: &[u8]) -> Vec<(i64, u64)> {
    m.get(event).map_or(Vec::new(), |(_, ts)| {
        ts.ordered().map(|s| (s.time, s.latency)).collect()
    })
}

/// LATENCY LATEST.
pub(crate) fn latency_latest(server: &mut Server, ctx: &mut Ctx<'_>) {
    let rows = latest(&server.latmon);
    ctx.array(rows.len());
    for (e, t, l, max) in rows {
        ctx.array(4);
        ctx.bulk(e.as_bytes());
        ctx.int(t);
        ctx.int(l as i64);
        ctx.int(max as i64);
    }
}

/// LATENCY HISTORY event.
pub(crate) fn latency_history(server: &mut Server, ctx: &mut Ctx<'_>) {
    let rows = history(&server.latmon, ctx.arg(2));
    ctx.array(rows.len());
    for (t, l) in rows {
        ctx.array(2);
        ctx.int(t);
        ctx.int(l as i64);
    }
}

/// LATENCY RESET [event ...]: how many events were dropped.
pub(crate) fn latency_reset(server: &mut Server, ctx: &mut Ctx<'_>) {
    let n = if ctx.argc() == 2 {
        server.latmon.reset(None)
    } else {
        (2..ctx.argc())
            .map(|i| server.latmon.reset(Some(ctx.arg(i))))
            .sum()
    };
    ctx.int(n as i64);
}

/// LATENCY GRAPH event.
pub(crate) fn latency_graph(server: &mut Server, ctx: &mut Ctx<'_>) {
    match graph(&server.latmon, ctx.arg(2), unix_now()) {
        Some(g) => resp::write_verbatim(ctx.out, g.as_bytes(), ctx.proto),
        None => {
            let msg = format!(
                "ERR No samples available for event '{}'",
                String::from_utf8_lossy(ctx.arg(2))
            );
            ctx.err(&msg);
        }
    }
}

/// LATENCY DOCTOR.
pub(crate) fn latency_doctor(server: &mut Server, ctx: &mut Ctx<'_>) {
    let dc = DoctorContext {
        hz: server.config.hz,
        fsync_always: server.config.persist.aof.appendfsync == crate::aof::Fsync::Always,
        anon_huge_pages: anon_huge_pages(),
    };
    let text = doctor(&server.latmon, &dc, unix_now());
    resp::write_verbatim(ctx.out, text.as_bytes(), ctx.proto);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(ms: u64) -> LatencyMonitor {
        let mut m = LatencyMonitor::default();
        m.set_threshold(ms);
        m
    }

    #[test]
    fn threshold_gates_samples() {
        let mut m = on(0);
        m.sample_if_needed("command", u64::MAX - 1);
        assert!(latest(&m).is_empty());
        let mut m = on(5);
        m.sample_if_needed("command", 4_999_999);
        assert!(latest(&m).is_empty());
        m.sample_if_needed("command", 5_000_000);
        assert_eq!(latest(&m)[0].2, 5);
    }

    #[test]
    fn one_sample_per_second_and_ring_of_160() {
        let mut m = on(1);
        m.add_sample("command", 3, 100);
        m.add_sample("command", 7, 100);
        m.add_sample("command", 2, 100);
        assert_eq!(history(&m, b"command"), vec![(100, 7)]);
        for t in 0..200 {
            m.add_sample("command", t as u64, 1000 + t);
        }
        let h = history(&m, b"command");
        assert_eq!(h.len(), TS_LEN);
        assert_eq!(h[0], (1040, 40));
        assert_eq!(h[TS_LEN - 1], (1199, 199));
        assert_eq!(latest(&m)[0], ("command", 1199, 199, 199));
        assert!(history(&m, b"COMMAND").is_empty());
    }

    #[test]
    fn reset_is_case_insensitive() {
        let mut m = on(1);
        m.add_sample("command", 3, 100);
        m.add_sample("expire-cycle", 3, 100);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert_eq!(m.reset(Some(b"nope")), 0);
        assert_eq!(m.reset(None), 1);
    }

    #[test]
    fn graph_as_redis_draws_it() {
        let mut m = on(1);
        m.add_sample("command", 20, 100);
        let g = graph(&m, b"command", 100).unwrap();
        let want = format!(
            "command - high 20 ms, low 20 ms (all time high 20 ms)\n{}\n \n \n \n_\n \n0\ns\n",
            "-".repeat(80)
        );
        assert_eq!(g, want);
        m.add_sample("command", 10, 101);
        m.add_sample("command", 40, 102);
        let g = graph(&m, b"command", 102).unwrap();
        let body: Vec<&str> = g.lines().skip(2).collect();
        assert_eq!(body, vec!["  #", "  |", "o |", "|_|", "   ", "210", "sss"]);
        assert!(graph(&m, b"other", 100).is_none());
    }

    #[test]
    fn doctor_texts() {
        let dc = DoctorContext {
            hz: 10,
            fsync_always: false,
            anon_huge_pages: 0,
        };
        assert!(doctor(&on(0), &dc, 0).starts_with("I'm sorry, Dave"));
        assert!(doctor(&on(1), &dc, 0).starts_with("Dave, no latency spike"));
        let mut m = on(1);
        m.add_sample("command", 20, 100);
        let r = doctor(&m, &dc, 100);
        assert!(r.contains("1. command: 1 latency spikes (average 20ms, mean deviation 0ms, period 1.00 sec). Worst all time event 20ms.\n"));
        assert!(r.contains("'CONFIG SET slowlog-log-slower-than 1000'"));
    }
}
