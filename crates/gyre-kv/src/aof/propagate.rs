//! Command propagation (Redis's `alsoPropagate` / `propagateNow` /
//! `propagatePendingCommands` of `server.c`): what a write command leaves
//! in the append-only file is its *effect*, not its text.
//!
//! After a command ran, [`Server::propagate_call`] queues it when it
//! counted a change (`server.dirty` grew) and did not forbid it; a command
//! whose text would replay differently replaces its form first
//! ([`Server::prop_rewrite`]: relative TTLs as PEXPIREAT / SET … PXAT,
//! INCRBYFLOAT as SET … KEEPTTL, SPOP as SREM, a blocking pop as the
//! non-blocking one) or queues several ([`Server::prop_also`]) and
//! forbids its own ([`Server::prop_prevent`]). Keys the databases removed
//! by expiry or eviction are queued as DEL (UNLINK with lazyfree) before
//! the command that met them. When the outermost command returns,
//! [`Server::propagate_pending`] hands the queue to the AOF: more than one
//! operation is wrapped in MULTI … EXEC (an EXEC's commands, SPOP with a
//! count, a lazy expiry and the write that met it), as Redis 7.0 does.
//!
//! All of it costs one `bool` test per command while nothing consumes the
//! stream (`appendonly no`, no rewrite running).

use crate::cmd::Resolved;
use crate::resp::Argv;
use crate::server::Server;

/// One queued operation: database and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub db: usize,
    pub argv: Vec<Vec<u8>>,
}

/// The propagation state of a server.
#[derive(Debug, Default)]
pub struct Propagate {
    /// Something consumes the stream (the AOF is on or being turned on).
    pub on: bool,
    /// Operations queued by the running command (`server.also_propagate`).
    pub(crate) ops: Vec<Op>,
    /// The running command's replacement form.
    pub(crate) rewritten: Option<Vec<Vec<u8>>>,
    /// The running command must not be propagated as itself.
    pub(crate) prevent: bool,
}

/// Arguments as owned byte strings.
pub fn owned<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Vec<Vec<u8>> {
    args.into_iter().map(<[u8]>::to_vec).collect()
}

impl Server {
    /// Whether commands must record their effect form.
    #[inline]
    pub(crate) fn propagating(&self) -> bool {
        self.prop.on
    }

    /// Redis's `rewriteClientCommandVector`: the running command is
    /// propagated as `args` instead of its own text.
    pub(crate) fn prop_rewrite<'a>(&mut self, args: impl IntoIterator<Item = &'a [u8]>) {
        if self.prop.on {
            self.prop.rewritten = Some(owned(args));
        }
    }

    /// Redis's `alsoPropagate`: queue one more operation.
    pub(crate) fn prop_also<'a>(&mut self, db: usize, args: impl IntoIterator<Item = &'a [u8]>) {
        if self.prop.on {
            self.prop_expired();
            self.prop.ops.push(Op {
                db,
                argv: owned(args),
            });
        }
    }

    /// Redis's `preventCommandPropagation`.
    pub(crate) fn prop_prevent(&mut self) {
        if self.prop.on {
            self.prop.prevent = true;
        }
    }

    /// DEL (UNLINK with `lazyfree-lazy-expire` / `-eviction`) for the keys
    /// the databases reclaimed since the last call
    /// (`propagateDeletion`).
    pub(crate) fn prop_expired(&mut self) {
        for i in 0..self.dbs.len() {
            self.prop_expired_in(i);
        }
    }

    /// [`Server::prop_expired`] for database `i` only.
    #[inline]
    pub(crate) fn prop_expired_in(&mut self, i: usize) {
        {
            let Some(log) = self.dbs.get_mut(i).and_then(|d| d.deleted_log.as_mut()) else {
                return;
            };
            if log.is_empty() {
                return;
            }
            for (key, evicted) in std::mem::take(log) {
                let lazy = if evicted {
                    self.config.lazyfree_lazy_eviction
                } else {
                    self.config.lazyfree_lazy_expire
                };
                let name: &[u8] = if lazy { b"UNLINK" } else { b"DEL" };
                self.prop.ops.push(Op {
                    db: i,
                    argv: vec![name.to_vec(), key],
                });
            }
        }
    }

    /// Keys removed by the expire cycle or eviction outside a command:
    /// each one DEL of its own (Redis propagates them one by one).
    pub(crate) fn propagate_expired_keys(&mut self) {
        self.prop_expired();
        let ops = std::mem::take(&mut self.prop.ops);
        for op in &ops {
            let args: Vec<&[u8]> = op.argv.iter().map(Vec::as_slice).collect();
            self.aof_feed(op.db, &args);
        }
    }

    /// After the outermost command's handler: [`Server::propagate_call`]
    /// then [`Server::propagate_pending`], with the common case — one
    /// write propagated as written, nothing else queued — straight into
    /// the AOF buffer. Lazy expiry can only have hit the databases the
    /// command used (`before`, `db`); MOVE and COPY name another one, so
    /// they look at all.
    pub(crate) fn propagate_command(
        &mut self,
        cmd: &Resolved,
        argv: Argv<'_>,
        before: usize,
        db: usize,
        dirty_before: u64,
    ) {
        self.prop_expired_in(before);
        if db != before {
            self.prop_expired_in(db);
        }
        let name = cmd.parent.unwrap_or(cmd.spec).name;
        if matches!(name, "move" | "copy") {
            self.prop_expired();
        }
        if self.prop.ops.is_empty() && self.prop.rewritten.is_none() && !self.prop.prevent {
            if self.dirty > dirty_before && name != "exec" {
                self.aof_feed_argv(db, argv);
            }
            return;
        }
        self.propagate_call(cmd, argv, db, dirty_before);
        self.propagate_pending();
    }

    /// After a command's handler (Redis's `call`): queue its form when it
    /// counted a change. EXEC is never propagated as itself: its commands
    /// were queued one by one.
    pub(crate) fn propagate_call(
        &mut self,
        cmd: &Resolved,
        argv: Argv<'_>,
        db: usize,
        dirty_before: u64,
    ) {
        self.prop_expired();
        let rewritten = self.prop.rewritten.take();
        let prevent = std::mem::take(&mut self.prop.prevent);
        if self.dirty <= dirty_before || prevent {
            return;
        }
        if cmd.parent.is_none() && cmd.spec.name == "exec" {
            return;
        }
        let argv = rewritten.unwrap_or_else(|| argv.iter().map(<[u8]>::to_vec).collect());
        self.prop.ops.push(Op { db, argv });
    }

    /// Hand what the outermost command queued to the AOF
    /// (`propagatePendingCommands`): several operations go as one
    /// MULTI … EXEC.
    pub(crate) fn propagate_pending(&mut self) {
        self.prop_expired();
        if self.prop.ops.is_empty() {
            return;
        }
        let ops = std::mem::take(&mut self.prop.ops);
        let wrap = ops.len() > 1;
        if wrap {
            self.aof_feed(ops[0].db, &[b"MULTI"]);
        }
        for op in &ops {
            let args: Vec<&[u8]> = op.argv.iter().map(Vec::as_slice).collect();
            self.aof_feed(op.db, &args);
        }
        if wrap {
            self.aof_feed(ops[0].db, &[b"EXEC"]);
        }
        // Keep the vector's capacity for the next command.
        self.prop.ops = ops;
        self.prop.ops.clear();
    }
}

/// Redis's `catAppendOnlyGenericCommand`: one command in RESP.
pub fn cat_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    cat_iter(out, args.len(), args.iter().copied());
}

/// [`cat_command`] over `n` arguments from an iterator.
pub fn cat_iter<'a>(out: &mut Vec<u8>, n: usize, args: impl Iterator<Item = &'a [u8]>) {
    out.push(b'*');
    put_uint(out, n);
    for a in args {
        out.reserve(a.len() + 8);
        out.push(b'$');
        put_uint(out, a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Decimal digits of `n` then CRLF (no `fmt`: this runs for every
/// argument; lengths under 100 are nearly all of them).
#[inline]
fn put_uint(out: &mut Vec<u8>, n: usize) {
    if n < 10 {
        out.extend_from_slice(&[b'0' + n as u8, b'\r', b'\n']);
    } else if n < 100 {
        out.extend_from_slice(&[b'0' + (n / 10) as u8, b'0' + (n % 10) as u8, b'\r', b'\n']);
    } else {
        put_uint_long(out, n);
    }
}

#[inline(never)]
fn put_uint_long(out: &mut Vec<u8>, mut n: usize) {
    let mut d = [0u8; 22];
    let mut i = d.len() - 2;
    d[i] = b'\r';
    d[i + 1] = b'\n';
    loop {
        i -= 1;
        d[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&d[i..]);
}

/// An integer argument.
pub fn ll(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_in_resp() {
        let mut out = Vec::new();
        let long = vec![b'x'; 1234];
        cat_command(&mut out, &[b"SET", b"key", &long, b"", b"0123456789"]);
        let mut want = b"*5\r\n$3\r\nSET\r\n$3\r\nkey\r\n$1234\r\n".to_vec();
        want.extend_from_slice(&long);
        want.extend_from_slice(b"\r\n$0\r\n\r\n$10\r\n0123456789\r\n");
        assert_eq!(out, want);
    }
}
