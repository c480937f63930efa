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
            let Some(log) = self.dbs[i].deleted_log.as_mut() else {
                continue;
            };
            if log.is_empty() {
                continue;
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
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// An integer argument.
pub fn ll(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}
