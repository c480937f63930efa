//! Per-command and per-error counters (Redis's `c->cmd->calls`,
//! `microseconds`, `rejected_calls`, `failed_calls` and `server.errors`):
//! INFO commandstats, INFO errorstats, and CONFIG RESETSTAT clearing them.
//!
//! A command's slot is its id in the command table
//! ([`crate::cmd::Resolved::id`]), so counting is an indexed add. Time is
//! read once per command, after it ran, and charged from the previous
//! reading (the start of the read batch or the end of the command
//! before): a command's `usec` includes parsing it, which Redis leaves
//! out, and costs one clock read instead of two.
//!
//! Errors are counted by their first word (`ERR`, `WRONGTYPE`, ...): a
//! command that reported errors has its reply scanned for them (EXEC's
//! array holds several). At most [`ERROR_TYPES_MAX`] different words are
//! kept, as Redis keeps at most 128: later new ones are not counted.
//!
//! With `latency-tracking yes` each call's time also goes into its
//! command's [`Histogram`] (INFO latencystats, LATENCY HISTOGRAM: see
//! [`crate::latency`]), made on the command's first call.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::histogram::Histogram;

/// The monotonic clock in nanoseconds: one vDSO call and a multiply-add
/// (`Instant` arithmetic costs ~40 instructions more per command).
#[inline]
pub fn clock_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Redis's `ERROR_STATS_NUMBER`.
pub const ERROR_TYPES_MAX: usize = 128;

/// One command's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmdStat {
    pub calls: u64,
    pub nanos: u64,
    pub rejected: u64,
    pub failed: u64,
}

#[derive(Debug)]
pub struct CommandStats {
    per: Vec<CmdStat>,
    /// Per command id: its latency histogram once it ran with tracking on.
    latency: Vec<Option<Box<Histogram>>>,
    /// `latency-tracking`.
    pub(crate) tracking: bool,
    errors: BTreeMap<String, u64>,
    /// The last clock reading (see the module documentation).
    pub(crate) clock: u64,
    /// Errors of the commands EXEC ran, already counted: EXEC itself
    /// fails only for its own (EXECABORT), as in Redis.
    pub(crate) nested_errors: u64,
}

impl CommandStats {
    pub fn new(ids: usize) -> CommandStats {
        CommandStats {
            per: vec![CmdStat::default(); ids],
            latency: vec![None; ids],
            tracking: true,
            errors: BTreeMap::new(),
            clock: clock_ns(),
            nested_errors: 0,
        }
    }

    /// Start timing a batch of commands.
    #[inline]
    pub fn start(&mut self) {
        self.clock = clock_ns();
    }

    /// Command `id` ran (`failed`: it replied with an error); the
    /// call's time in ns.
    #[inline]
    pub fn ran(&mut self, id: u32, failed: bool) -> u64 {
        let ns = self.ran_untimed(id, failed);
        if self.tracking {
            self.record_latency(id, ns);
        }
        ns
    }

    /// [`CommandStats::ran`] without the latency histogram (a command
    /// that blocked: Redis records its latency when it is served); the
    /// call's time in ns.
    #[inline]
    pub fn ran_untimed(&mut self, id: u32, failed: bool) -> u64 {
        let now = clock_ns();
        let ns = now.saturating_sub(self.clock);
        self.clock = now;
        if let Some(s) = self.per.get_mut(id as usize) {
            s.calls += 1;
            s.nanos += ns;
            s.failed += u64::from(failed);
        }
        ns
    }

    /// Put one call of command `id` that took `ns` in its histogram.
    #[inline]
    pub(crate) fn record_latency(&mut self, id: u32, ns: u64) {
        if let Some(slot) = self.latency.get_mut(id as usize) {
            slot.get_or_insert_with(Box::default).record(ns);
        }
    }

    /// Command `id`'s latency histogram, if it has one.
    pub fn histogram(&self, id: u32) -> Option<&Histogram> {
        self.latency.get(id as usize)?.as_deref()
    }

    /// A call of command `id` counted earlier failed after all (a blocked
    /// command ended by CLIENT UNBLOCK, as Redis's `updateStatsOnUnblock`
    /// counts it).
    pub fn failed(&mut self, id: u32) {
        if let Some(s) = self.per.get_mut(id as usize) {
            s.failed += 1;
        }
    }

    /// Command `id` was refused before running.
    pub fn rejected(&mut self, id: u32) {
        if let Some(s) = self.per.get_mut(id as usize) {
            s.rejected += 1;
        }
    }

    pub fn get(&self, id: u32) -> CmdStat {
        self.per.get(id as usize).copied().unwrap_or_default()
    }

    /// Count one error reply by its message (`ERR ...`, without `-`).
    pub fn error(&mut self, msg: &[u8]) {
        // Redis looks for the space in the first 32 bytes, else says ERR.
        let head = &msg[..msg.len().min(31)];
        let word = match head.iter().position(|&b| b == b' ') {
            Some(i) => &msg[..i],
            None => b"ERR",
        };
        let word = String::from_utf8_lossy(word);
        if let Some(n) = self.errors.get_mut(word.as_ref()) {
            *n += 1;
        } else if self.errors.len() < ERROR_TYPES_MAX {
            self.errors.insert(word.into_owned(), 1);
        }
    }

    /// Count the error replies in `out` (one or more whole replies).
    pub fn errors_in(&mut self, out: &[u8]) {
        let mut pos = 0;
        while pos < out.len() {
            match scan(self, out, pos, 0) {
                Some(next) => pos = next,
                None => break,
            }
        }
    }

    pub fn error_counts(&self) -> impl Iterator<Item = (&str, u64)> {
        self.errors.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&mut self) {
        self.per.iter_mut().for_each(|s| *s = CmdStat::default());
        self.latency.iter_mut().for_each(|h| *h = None);
        self.errors.clear();
    }
}

/// Walk the reply at `pos`, counting its errors; the position after it.
fn scan(st: &mut CommandStats, b: &[u8], pos: usize, depth: u32) -> Option<usize> {
    if depth > 64 {
        return None;
    }
    let t = *b.get(pos)?;
    let end = pos + b.get(pos..)?.windows(2).position(|w| w == b"\r\n")?;
    let line = &b[pos + 1..end];
    let next = end + 2;
    let num = || crate::util::string2ll(line);
    match t {
        b'-' => {
            st.error(line);
            Some(next)
        }
        b'+' | b':' | b'_' | b',' | b'#' | b'(' => Some(next),
        b'$' | b'=' | b'!' => {
            let n = num()?;
            if n < 0 {
                return Some(next);
            }
            Some(next + usize::try_from(n).ok()? + 2)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = num()?;
            let n = if t == b'%' || t == b'|' { n * 2 } else { n };
            let mut p = next;
            for _ in 0..n.max(0) {
                p = scan(st, b, p, depth + 1)?;
            }
            Some(p)
        }
        _ => None,
    }
}

/// The `cmdstat_NAME:` line of INFO commandstats.
pub fn stat_line(out: &mut String, name: &str, s: CmdStat) {
    let usec = s.nanos / 1000;
    let per_call = if s.calls == 0 {
        0.0
    } else {
        usec as f64 / s.calls as f64
    };
    let _ = write!(
        out,
        "cmdstat_{name}:calls={},usec={usec},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
        s.calls, s.rejected, s.failed
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_counted_by_their_first_word() {
        let mut s = CommandStats::new(1);
        s.errors_in(b"-ERR no\r\n");
        s.errors_in(b"*3\r\n+OK\r\n-WRONGTYPE Operation\r\n*1\r\n-ERR x\r\n");
        s.errors_in(b"-NOSPACEINTHEFIRST32BYTESATALLREALLYNONE\r\n");
        s.errors_in(b"%1\r\n$1\r\nk\r\n-NOPERM v\r\n$3\r\nabc\r\n");
        let v: Vec<_> = s.error_counts().collect();
        assert_eq!(v, vec![("ERR", 3), ("NOPERM", 1), ("WRONGTYPE", 1)]);
    }

    #[test]
    fn error_kinds_are_bounded() {
        let mut s = CommandStats::new(1);
        for i in 0..ERROR_TYPES_MAX + 10 {
            s.error(format!("E{i} x").as_bytes());
        }
        assert_eq!(s.error_counts().count(), ERROR_TYPES_MAX);
    }

    #[test]
    fn calls_and_failures_add_up() {
        let mut s = CommandStats::new(2);
        s.ran(1, false);
        s.ran(1, true);
        s.rejected(1);
        s.ran(7, false); // an unknown id counts nowhere
        let c = s.get(1);
        assert_eq!((c.calls, c.failed, c.rejected), (2, 1, 1));
        let mut line = String::new();
        stat_line(
            &mut line,
            "get",
            CmdStat {
                calls: 4,
                nanos: 10_000,
                rejected: 0,
                failed: 1,
            },
        );
        assert_eq!(
            line,
            "cmdstat_get:calls=4,usec=10,usec_per_call=2.50,rejected_calls=0,failed_calls=1\r\n"
        );
    }
}
