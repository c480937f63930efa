//! The refusals and hand-offs of Redis's `processCommand` that sit
//! between looking a command up and calling it (`Server::run_command`
//! calls them in Redis's order): the ACL check, the maxmemory step, the
//! rejection that flags a transaction (or aborts an EXEC), MULTI
//! queueing, running EXEC's queued commands, and settling what a
//! command's in-place updates mean for WATCH and keyspace events.

use crate::cmd::{Ctx, Resolved};
use crate::resp::{self, Argv};
use crate::server::{Client, ClientId, Flow, Server, Session, GATE_MULTI};

impl Server {
    /// The ACL check of the client's user.
    pub(crate) fn acl_check(
        &self,
        id: ClientId,
        cmd: &Resolved,
        argv: Argv<'_>,
    ) -> Result<(), crate::acl::Denied> {
        let Some(c) = self.clients.get(&id) else {
            return Ok(());
        };
        match self.users.get(&c.user) {
            Some(u) => crate::acl::check(u, cmd, argv),
            // A deleted user's clients are closing; refuse meanwhile.
            None => Err(crate::acl::Denied::Command),
        }
    }

    /// Redis's maxmemory step of `processCommand`: evict, and refuse a
    /// `denyoom` command (or an EXEC with one queued) when memory stays
    /// over the limit; inside MULTI anything but EXEC / DISCARD / QUIT /
    /// RESET is refused (queueing costs memory too).
    pub(crate) fn oom_refuses(
        &mut self,
        id: ClientId,
        cmd: Resolved,
        in_multi: bool,
        now_ms: i64,
    ) -> bool {
        let oom = crate::evict::perform_evictions(self, now_ms) == crate::evict::Outcome::Fail;
        if !oom {
            return false;
        }
        if cmd.spec.flags.contains(&"denyoom") {
            return true;
        }
        let name = cmd.parent.unwrap_or(cmd.spec).name;
        if in_multi && !matches!(name, "exec" | "discard" | "quit" | "reset") {
            return true;
        }
        cmd.parent.is_none()
            && cmd.spec.name == "exec"
            && self
                .clients
                .get(&id)
                .and_then(|c| c.mstate.as_ref())
                .is_some_and(|m| m.denyoom)
    }

    /// [`Db::settle`] the databases a command used (the selected one
    /// before and after it).
    pub(crate) fn settle_dbs(&mut self, before: usize, after: usize, changed: bool) {
        if let Some(db) = self.dbs.get_mut(before) {
            db.settle(changed);
        }
        if after != before {
            if let Some(db) = self.dbs.get_mut(after) {
                db.settle(changed);
            }
        }
    }

    /// Redis's `rejectCommand`: the error, and a transaction being queued
    /// is flagged to abort; a refused EXEC aborts it at once.
    pub(crate) fn reject(
        &mut self,
        id: ClientId,
        stat: Option<u32>,
        st: &mut Session,
        is_exec: bool,
        out: &mut Vec<u8>,
        msg: &[u8],
    ) {
        self.stats.total_error_replies += 1;
        if let Some(s) = stat {
            self.cmdstats.rejected(s);
        }
        let mark = out.len();
        self.reject_reply(id, st, is_exec, out, msg);
        self.cmdstats.errors_in(&out[mark..]);
    }

    fn reject_reply(
        &mut self,
        id: ClientId,
        st: &mut Session,
        is_exec: bool,
        out: &mut Vec<u8>,
        msg: &[u8],
    ) {
        if is_exec {
            crate::multi::discard_transaction(self, id);
            st.gate = self.clients.get(&id).map_or(0, Client::gate);
            let m = msg.strip_prefix(b"ERR ").unwrap_or(msg);
            let mut e = b"EXECABORT Transaction discarded because of: ".to_vec();
            e.extend_from_slice(m);
            resp::write_error(out, &e);
            return;
        }
        if let Some(ms) = self.clients.get_mut(&id).and_then(|c| c.mstate.as_mut()) {
            ms.dirty_exec = true;
        }
        resp::write_error(out, msg);
    }

    /// Queue a command inside MULTI (`+QUEUED`). A queue larger than
    /// `client-query-buffer-limit` closes the client, as an oversized
    /// query buffer does.
    pub(crate) fn queue_multi(
        &mut self,
        id: ClientId,
        argv: Argv<'_>,
        out: &mut Vec<u8>,
        st: &mut Session,
    ) -> Flow {
        let limit = self.config.client_query_buffer_limit;
        let spec = self.table.get(argv.get(0).unwrap_or_default());
        let denyoom = spec.is_some_and(|s| s.flags.contains(&"denyoom"));
        let writes = spec.is_some_and(|s| {
            s.flags.contains(&"write") || matches!(s.name, "publish" | "spublish")
        });
        let Some(c) = self.clients.get_mut(&id) else {
            return Flow::Continue;
        };
        let Some(ms) = c.mstate.as_mut() else {
            st.gate &= !GATE_MULTI;
            return Flow::Continue;
        };
        ms.denyoom |= denyoom;
        ms.writes |= writes;
        if ms.queue(argv) > limit {
            log::warn!(
                "Closing client that reached max query buffer length (MULTI queue of {} bytes)",
                ms.bytes
            );
            c.mstate = None;
            return Flow::CloseAfterReply;
        }
        out.extend_from_slice(b"+QUEUED\r\n");
        Flow::Continue
    }

    /// Run one command of an EXEC (Redis's `call` from `execCommand`): no
    /// gate, and the reply goes into EXEC's array. Lookup errors cannot
    /// happen (they aborted the transaction) but are answered in place.
    pub(crate) fn call_queued(&mut self, ctx: &mut Ctx<'_>, argv: Argv<'_>) {
        let cmd = match self.lookup_command(argv) {
            Ok(cmd) => cmd,
            Err(msg) => {
                ctx.errors += 1;
                resp::write_error(ctx.out, &msg);
                return;
            }
        };
        // The user's rules may have changed since the command was queued.
        if self.acl_restricted {
            if let Err(d) = self.acl_check(ctx.client_id, &cmd, argv) {
                let at = crate::acl_log::At {
                    id: ctx.client_id,
                    db: ctx.db,
                    proto: ctx.proto,
                    context: crate::acl_log::Context::Multi,
                    now: ctx.now,
                };
                crate::acl_log::log_denial(self, at, &cmd, argv, d);
                ctx.errors += 1;
                let m = format!(
                    "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {}",
                    d.reason()
                );
                resp::write_error(ctx.out, m.as_bytes());
                return;
            }
        }
        let mut sub = Ctx {
            argv,
            now: ctx.now,
            out: &mut *ctx.out,
            client_id: ctx.client_id,
            db: ctx.db,
            proto: ctx.proto,
            close: false,
            errors: 0,
            resync: false,
            deny_blocking: true,
        };
        let dirty_before = self.dirty;
        let mark = sub.out.len();
        let started = crate::cmdstats::clock_ns();
        (cmd.spec.handler)(self, &mut sub);
        self.settle_dbs(ctx.db, sub.db, self.dirty != dirty_before);
        // Timed on its own (EXEC's time includes it too, as in Redis).
        let clock = self.cmdstats.clock;
        self.cmdstats.clock = started;
        let ns = self.cmdstats.ran(cmd.id, sub.errors > 0);
        self.cmdstats.clock = clock;
        if ns >= self.latmon.threshold_ns {
            self.latmon.command_spike(cmd.spec, ns);
        }
        self.slowlog_push(ctx.client_id, argv.iter(), ns, ctx.now);
        if sub.errors > 0 {
            self.cmdstats.errors_in(&sub.out[mark..]);
            self.cmdstats.nested_errors += sub.errors;
        }
        if self.prop.on {
            self.propagate_call(&cmd, argv, sub.db, dirty_before);
        }
        if self.config.notify_keyspace_events != 0 {
            let name = cmd.parent.unwrap_or(cmd.spec).name;
            let own = Some((sub.client_id, sub.proto, &mut *sub.out));
            crate::notify::command_events(self, name, argv, own, sub.now);
        }
        self.stats.total_commands_processed += 1;
        ctx.errors += sub.errors;
        ctx.db = sub.db;
        ctx.proto = sub.proto;
        ctx.close |= sub.close;
    }
}
