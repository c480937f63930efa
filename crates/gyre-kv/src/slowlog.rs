//! The slow log (Redis's `slowlog.c`): commands whose execution took at
//! least `slowlog-log-slower-than` microseconds, newest first, at most
//! `slowlog-max-len` of them, each with its id, time, duration, arguments
//! (at most 32, each cut at 128 bytes, as Redis keeps them), the client's
//! address and name; SLOWLOG GET / LEN / RESET / HELP read and clear it.
//!
//! The duration is the command's own execution time (the same clock as
//! INFO commandstats); a command that blocks is logged neither when it
//! blocks nor when it is served (Redis logs it when served; noted as left).

use std::collections::VecDeque;

use crate::cmd::{help_lines, no_handler, spec, CommandSpec, Ctx};
use crate::server::Server;

/// Redis's `slowlog-log-slower-than` default (10 ms).
pub const DEFAULT_SLOWER_THAN: i64 = 10_000;
/// Redis's `slowlog-max-len` default.
pub const DEFAULT_MAX_LEN: u64 = 128;
/// Arguments kept of a command (`SLOWLOG_ENTRY_MAX_ARGC`).
const MAX_ARGC: usize = 32;
/// Bytes kept of an argument (`SLOWLOG_ENTRY_MAX_STRING`).
const MAX_STRING: usize = 128;

/// What a secret argument is logged as.
const REDACTED: &[u8] = b"(redacted)";

/// Hides the secrets a command carries before it is kept, as Redis's
/// `redactClientCommandArgument`: every argument of AUTH, the user and
/// password of HELLO's AUTH, the value of CONFIG SET's `requirepass` and
/// `masterauth`, MIGRATE's AUTH / AUTH2 credentials.
pub fn redact(args: &mut [&[u8]]) {
    let Some(name) = args.first() else {
        return;
    };
    let is = |a: &[u8], w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    if is(name, "auth") {
        for a in args.iter_mut().skip(1) {
            *a = REDACTED;
        }
    } else if is(name, "hello") {
        if let Some(i) = args.iter().position(|a| is(a, "auth")) {
            for a in args.iter_mut().skip(i + 1).take(2) {
                *a = REDACTED;
            }
        }
    } else if is(name, "config") && args.len() > 1 && is(args[1], "set") {
        let mut j = 2;
        while j + 1 < args.len() {
            if is(args[j], "requirepass") || is(args[j], "masterauth") {
                args[j + 1] = REDACTED;
            }
            j += 2;
        }
    } else if is(name, "migrate") {
        let mut j = 6;
        while j < args.len() {
            if is(args[j], "auth") {
                if let Some(a) = args.get_mut(j + 1) {
                    *a = REDACTED;
                }
                j += 2;
            } else if is(args[j], "auth2") {
                for a in args.iter_mut().skip(j + 1).take(2) {
                    *a = REDACTED;
                }
                j += 3;
            } else {
                j += 1;
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    id: u64,
    /// Unix time in seconds.
    time: i64,
    us: u64,
    argv: Vec<Vec<u8>>,
    peer: String,
    name: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct SlowLog {
    /// Newest first.
    entries: VecDeque<Entry>,
    next_id: u64,
}

impl SlowLog {
    /// Logs a command that took `us` microseconds, if the threshold says
    /// so: its arguments are gathered (and their secrets redacted) only
    /// then.
    #[allow(clippy::too_many_arguments)]
    pub fn push_if_needed<'a>(
        &mut self,
        slower_than: i64,
        max_len: u64,
        argv: impl Iterator<Item = &'a [u8]>,
        us: u64,
        time: i64,
        peer: &str,
        name: &[u8],
    ) {
        if slower_than < 0 || us < slower_than as u64 {
            return;
        }
        let mut argv: Vec<&[u8]> = argv.collect();
        redact(&mut argv);
        let kept = argv.len().min(MAX_ARGC);
        let mut args = Vec::with_capacity(kept);
        for (j, a) in argv.iter().take(kept).enumerate() {
            if kept != argv.len() && j == kept - 1 {
                args.push(format!("... ({} more arguments)", argv.len() - kept + 1).into_bytes());
            } else if a.len() > MAX_STRING {
                let mut v = a[..MAX_STRING].to_vec();
                v.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes(),
                );
                args.push(v);
            } else {
                args.push(a.to_vec());
            }
        }
        self.entries.push_front(Entry {
            id: self.next_id,
            time,
            us,
            argv: args,
            peer: peer.to_string(),
            name: name.to_vec(),
        });
        self.next_id += 1;
        self.trim(max_len);
    }

    /// Drops the oldest entries past `max_len` (also on CONFIG SET).
    pub fn trim(&mut self, max_len: u64) {
        while self.entries.len() as u64 > max_len {
            self.entries.pop_back();
        }
    }
}

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: SUBS,
    ..spec!(
        "slowlog",
        -2,
        &[],
        0,
        0,
        0,
        "server",
        "2.2.12",
        "A container for slow log commands",
        no_handler
    )
}];

static SUBS: &[CommandSpec] = &[
    spec!(
        "get",
        -2,
        &["admin", "loading", "stale"],
        0,
        0,
        0,
        "server",
        "2.2.12",
        "Get the slow log's entries",
        get
    ),
    spec!(
        "help",
        2,
        &["loading", "stale"],
        0,
        0,
        0,
        "server",
        "6.2.0",
        "Show helpful text about the different subcommands",
        help
    ),
    spec!(
        "len",
        2,
        &["admin", "loading", "stale"],
        0,
        0,
        0,
        "server",
        "2.2.12",
        "Get the slow log's length",
        len
    ),
    spec!(
        "reset",
        2,
        &["admin", "loading", "stale"],
        0,
        0,
        0,
        "server",
        "2.2.12",
        "Clear all entries from the slow log",
        reset
    ),
];

fn help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
}

fn get(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 3 {
        return ctx.err(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
            String::from_utf8_lossy(ctx.arg(1))
        ));
    }
    let mut count = 10usize;
    if ctx.argc() == 3 {
        // One error for a count that is no number or below -1, as Redis's
        // getRangeLongFromObjectOrReply with its message.
        let n = match crate::util::string2ll(ctx.arg(2)) {
            Some(n) if n >= -1 => n,
            _ => return ctx.err("ERR count should be greater than or equal to -1"),
        };
        count = usize::try_from(n).unwrap_or(usize::MAX);
    }
    let log = &server.slowlog.entries;
    let n = count.min(log.len());
    ctx.array(n);
    for e in log.iter().take(n) {
        ctx.array(6);
        ctx.int(i64::try_from(e.id).unwrap_or(i64::MAX));
        ctx.int(e.time);
        ctx.int(i64::try_from(e.us).unwrap_or(i64::MAX));
        ctx.array(e.argv.len());
        for a in &e.argv {
            ctx.bulk(a);
        }
        ctx.bulk(e.peer.as_bytes());
        ctx.bulk(&e.name);
    }
}

fn len(server: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(server.slowlog.entries.len() as i64);
}

fn reset(server: &mut Server, ctx: &mut Ctx<'_>) {
    server.slowlog.entries.clear();
    ctx.ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_cut_as_redis_cuts_them() {
        let mut log = SlowLog::default();
        let long = vec![b'x'; 200];
        let many: Vec<Vec<u8>> = (0..40).map(|i| i.to_string().into_bytes()).collect();
        let mut argv: Vec<&[u8]> = vec![b"SET", &long];
        argv.extend(many.iter().map(Vec::as_slice));
        log.push_if_needed(0, 128, argv.iter().copied(), 5, 1, "127.0.0.1:1", b"");
        let e = &log.entries[0];
        assert_eq!(e.argv.len(), 32);
        assert_eq!(e.argv[1].len(), 128 + "... (72 more bytes)".len());
        assert!(e.argv[1].ends_with(b"... (72 more bytes)"));
        assert_eq!(e.argv[31], b"... (11 more arguments)");
        // Below the threshold or off: not logged; the length is bounded.
        log.push_if_needed(10, 128, [&b"GET"[..]].into_iter(), 9, 1, "", b"");
        log.push_if_needed(-1, 128, [&b"GET"[..]].into_iter(), 99, 1, "", b"");
        assert_eq!(log.entries.len(), 1);
        for _ in 0..10 {
            log.push_if_needed(0, 3, [&b"GET"[..]].into_iter(), 1, 1, "", b"");
        }
        assert_eq!(log.entries.len(), 3);
        assert_eq!(log.entries[0].id, 10);
    }
}
