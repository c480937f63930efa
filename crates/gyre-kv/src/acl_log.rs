//! The ACL log (Redis 7.0's `ACLLog` in `acl.c`): what was refused —
//! failed AUTH / HELLO AUTH, commands, keys and channels a user may not
//! use — newest first, at most `acllog-max-len` entries, and ACL LOG
//! [count | RESET] to read it.
//!
//! Repeats are grouped as Redis groups them: a new event that matches one
//! of the 10 newest entries (same reason, context, object and user, and
//! within 60 s of it) bumps that entry's count, takes its place at the
//! head and replaces its time and client description.

use std::collections::VecDeque;

use crate::acl::Denied;
use crate::cmd::{Ctx, Resolved};
use crate::resp::Argv;
use crate::server::{ClientId, Server};

/// Redis's `ACL_LOG_GROUPING_MAX_TIME_DELTA`.
const GROUPING_MAX_DELTA_MS: i64 = 60_000;
/// Entries compared when grouping (Redis's `toscan`).
const GROUPING_SCAN: usize = 10;
/// `acllog-max-len`'s default.
pub const DEFAULT_MAX_LEN: u64 = 128;

/// Why the event was logged (Redis's `ACL_DENIED_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refused command ran (Redis's `ACL_LOG_CTX_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
}

/// One log entry.
#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    /// The command's full name, the key or channel, or `AUTH` / `HELLO`
    /// as the client spelled it.
    pub object: Vec<u8>,
    pub username: String,
    /// Time of the last event grouped here (Unix ms).
    pub ctime_ms: i64,
    /// The client's CLIENT LIST line at the last event.
    pub client_info: String,
}

impl Entry {
    fn matches(&self, o: &Entry) -> bool {
        self.reason == o.reason
            && self.context == o.context
            && (self.ctime_ms - o.ctime_ms).abs() <= GROUPING_MAX_DELTA_MS
            && self.object == o.object
            && self.username == o.username
    }
}

/// The log, newest first.
#[derive(Debug, Default)]
pub struct AclLog {
    entries: VecDeque<Entry>,
}

impl AclLog {
    /// Redis's `addACLLogEntry` (the list is trimmed to `max_len` only
    /// when an entry is added, as Redis does).
    pub fn add(&mut self, e: Entry, max_len: u64) {
        let hit = self
            .entries
            .iter()
            .take(GROUPING_SCAN)
            .position(|old| old.matches(&e));
        if let Some(i) = hit {
            if let Some(mut old) = self.entries.remove(i) {
                old.count += 1;
                old.ctime_ms = e.ctime_ms;
                old.client_info = e.client_info;
                self.entries.push_front(old);
            }
            return;
        }
        self.entries.push_front(e);
        let max = usize::try_from(max_len).unwrap_or(usize::MAX);
        self.entries.truncate(max);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// Log an event for the client running `ctx`'s command (AUTH failures:
/// its argv[0] is the object).
pub(crate) fn log_auth_failure(server: &mut Server, ctx: &Ctx<'_>, username: &[u8]) {
    // Inside EXEC (`deny_blocking`) or MULTI.
    let in_multi = ctx.deny_blocking
        || server
            .clients
            .get(&ctx.client_id)
            .is_some_and(|c| c.mstate.is_some());
    // Inside EXEC the client's current command is EXEC.
    let cmd_name = if ctx.deny_blocking {
        "exec".to_string()
    } else {
        String::from_utf8_lossy(ctx.arg(0)).to_ascii_lowercase()
    };
    let info = crate::client::client_line(server, ctx.client_id, ctx.now, Some((ctx, &cmd_name)));
    let e = Entry {
        count: 1,
        reason: Reason::Auth,
        context: if in_multi {
            Context::Multi
        } else {
            Context::Toplevel
        },
        object: ctx.arg(0).to_vec(),
        username: String::from_utf8_lossy(username).into_owned(),
        ctime_ms: ctx.now,
        client_info: info,
    };
    let max = server.config.acllog_max_len;
    server.acl_log.add(e, max);
}

/// Who was refused, where, and when: the client, its db and protocol of
/// the moment (written back to the client only after its command).
#[derive(Clone, Copy, Debug)]
pub(crate) struct At {
    pub id: ClientId,
    pub db: usize,
    pub proto: u8,
    pub context: Context,
    pub now: i64,
}

/// Log a refused command (Redis's `addACLLogEntry` from
/// `processCommand` and EXEC): the command's full name, or the key or
/// channel refused.
pub(crate) fn log_denial(
    server: &mut Server,
    at: At,
    cmd: &Resolved,
    argv: Argv<'_>,
    denied: Denied,
) {
    let At {
        id,
        db,
        proto,
        context,
        now,
    } = at;
    let Some(user) = server.clients.get(&id).map(|c| c.user.clone()) else {
        return;
    };
    let (reason, object) = match denied {
        Denied::Command => (Reason::Command, cmd.full_name().into_bytes()),
        Denied::Key(i) => (Reason::Key, argv.get(i).unwrap_or_default().to_vec()),
        Denied::Channel(i) => (Reason::Channel, argv.get(i).unwrap_or_default().to_vec()),
    };
    // In EXEC the client's current command is EXEC itself.
    let shown = match context {
        Context::Multi if !in_multi_queue(server, id) => "exec".to_string(),
        _ => cmd.full_name(),
    };
    let info = crate::client::client_line_as(server, id, now, Some((db, proto, &shown)));
    let e = Entry {
        count: 1,
        reason,
        context,
        object,
        username: user,
        ctime_ms: now,
        client_info: info,
    };
    let max = server.config.acllog_max_len;
    server.acl_log.add(e, max);
}

/// The client is queueing a transaction (not running EXEC).
fn in_multi_queue(server: &Server, id: ClientId) -> bool {
    server.clients.get(&id).is_some_and(|c| c.mstate.is_some())
}

/// ACL LOG [count | RESET].
pub(crate) fn acl_log_command(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut count: i64 = 10;
    if ctx.argc() == 3 {
        if ctx.arg(2).eq_ignore_ascii_case(b"reset") {
            server.acl_log.clear();
            return ctx.ok();
        }
        match crate::util::string2ll(ctx.arg(2)) {
            Some(n) => count = n.max(0),
            None => return ctx.err(crate::cmd::ERR_NOT_INT),
        }
    }
    let n = usize::try_from(count)
        .unwrap_or(usize::MAX)
        .min(server.acl_log.len());
    ctx.array(n);
    let now = ctx.now;
    for e in server.acl_log.entries().take(n) {
        ctx.map(7);
        ctx.bulk(b"count");
        ctx.int(e.count as i64);
        ctx.bulk(b"reason");
        ctx.bulk(e.reason.name().as_bytes());
        ctx.bulk(b"context");
        ctx.bulk(match e.context {
            Context::Toplevel => b"toplevel",
            Context::Multi => b"multi",
        });
        ctx.bulk(b"object");
        ctx.bulk(&e.object);
        ctx.bulk(b"username");
        ctx.bulk(e.username.as_bytes());
        ctx.bulk(b"age-seconds");
        crate::t_zset::reply_score(ctx, (now - e.ctime_ms) as f64 / 1000.0);
        ctx.bulk(b"client-info");
        ctx.bulk(e.client_info.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str, t: i64) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Key,
            context: Context::Toplevel,
            object: object.as_bytes().to_vec(),
            username: "u".into(),
            ctime_ms: t,
            client_info: format!("at {t}"),
        }
    }

    #[test]
    fn repeats_are_grouped_and_moved_to_the_head() {
        let mut log = AclLog::default();
        log.add(entry("a", 0), 128);
        log.add(entry("b", 1), 128);
        log.add(entry("a", 2), 128);
        let v: Vec<_> = log.entries().collect();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].object.as_slice(), v[0].count), (&b"a"[..], 2));
        assert_eq!(v[0].client_info, "at 2");
        assert_eq!(v[1].object, b"b");
    }

    #[test]
    fn old_or_far_entries_are_not_grouped() {
        let mut log = AclLog::default();
        log.add(entry("a", 0), 128);
        log.add(entry("a", GROUPING_MAX_DELTA_MS + 1), 128);
        assert_eq!(log.len(), 2);
        let mut log = AclLog::default();
        log.add(entry("x", 0), 128);
        for i in 0..GROUPING_SCAN {
            log.add(entry(&format!("y{i}"), 1), 128);
        }
        log.add(entry("x", 2), 128);
        assert_eq!(log.len(), GROUPING_SCAN + 2);
    }

    #[test]
    fn trimmed_to_the_max_length_on_add() {
        let mut log = AclLog::default();
        for i in 0..5 {
            log.add(entry(&format!("k{i}"), i), 3);
        }
        let v: Vec<_> = log.entries().map(|e| e.object.clone()).collect();
        assert_eq!(v, vec![b"k4".to_vec(), b"k3".to_vec(), b"k2".to_vec()]);
    }
}
