//! `processCommand`'s gate for the kv process: the refusals Redis makes
//! before a command runs, in its order (NOAUTH, NOPERM, OOM, MISCONF, the
//! RESP2 subscribed context, LOADING, CLIENT PAUSE) and MULTI queueing, and
//! the slow path of the command lookup (renames, subcommands, unknown
//! commands).

use super::*;

impl Server {
    /// Redis's refusals of `processCommand`, in its order (NOAUTH, OOM,
    /// MISCONF, the RESP2 subscribed context, LOADING), then MULTI
    /// queueing: `Some` when the command was refused or queued (the reply
    /// is written), `None` when it runs. Out of line: [`Server::run_command`]
    /// calls it only while one of the conditions can hold.
    #[inline(never)]
    pub(super) fn refuse_or_queue(
        &mut self,
        id: ClientId,
        cmd: Resolved,
        argv: Argv<'_>,
        now_ms: i64,
        out: &mut Vec<u8>,
        st: &mut Session,
    ) -> Option<Flow> {
        let is_exec = || cmd.parent.is_none() && cmd.spec.name == "exec";
        let name = cmd.parent.unwrap_or(cmd.spec).name;
        // Redis's processCommand order: NOAUTH, NOPERM, OOM, MISCONF, the
        // RESP2 subscribed context, LOADING, CLIENT PAUSE, then MULTI
        // queueing; a refusal inside MULTI flags the transaction
        // (EXECABORT at EXEC).
        if st.gate & GATE_NOAUTH != 0 && !crate::auth::runs_without_auth(name) {
            self.reject(
                id,
                Some(cmd.id),
                st,
                is_exec(),
                out,
                crate::auth::ERR_NOAUTH.as_bytes(),
            );
            return Some(Flow::Continue);
        }
        if self.acl_restricted {
            if let Err(d) = self.acl_check(id, &cmd, argv) {
                let context = if st.gate & GATE_MULTI != 0 {
                    crate::acl_log::Context::Multi
                } else {
                    crate::acl_log::Context::Toplevel
                };
                let at = crate::acl_log::At {
                    id,
                    db: st.db,
                    proto: st.proto,
                    context,
                    now: now_ms,
                };
                crate::acl_log::log_denial(self, at, &cmd, argv, d);
                self.reject(
                    id,
                    Some(cmd.id),
                    st,
                    is_exec(),
                    out,
                    d.message(&cmd).as_bytes(),
                );
                return Some(Flow::Continue);
            }
        }
        let oom = self.config.maxmemory > 0
            && self.oom_refuses(id, cmd, st.gate & GATE_MULTI != 0, now_ms);
        if self.prop.on && self.config.maxmemory > 0 {
            // Evicted keys go as DELs of their own, before the command.
            self.propagate_expired_keys();
        }
        if oom {
            self.reject(
                id,
                Some(cmd.id),
                st,
                is_exec(),
                out,
                crate::evict::ERR_OOM.as_bytes(),
            );
            return Some(Flow::Continue);
        }
        if self.writes_denied() && (cmd.spec.flags.contains(&"write") || cmd.spec.name == "ping") {
            let msg = self
                .aof_write_denied()
                .unwrap_or_else(|| crate::persist::ERR_MISCONF.to_string());
            self.reject(id, Some(cmd.id), st, is_exec(), out, msg.as_bytes());
            return Some(Flow::Continue);
        }
        if st.gate & GATE_PUBSUB != 0 && st.proto == 2 && !crate::pubsub::allowed_in_context(name) {
            let m = format!(
                    "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                    cmd.full_name()
                );
            self.reject(id, Some(cmd.id), st, is_exec(), out, m.as_bytes());
            return Some(Flow::Continue);
        }
        if self.is_loading() && !cmd.spec.flags.contains(&"loading") {
            self.reject(
                id,
                Some(cmd.id),
                st,
                is_exec(),
                out,
                crate::persist::ERR_LOADING.as_bytes(),
            );
            return Some(Flow::Continue);
        }
        if self.pause_pending() && self.pause_postpones(id, &cmd, now_ms) {
            self.postpone(id);
            return Some(Flow::Postponed);
        }
        if st.gate & GATE_MULTI != 0 && !crate::multi::runs_inside_multi(name) {
            return Some(self.queue_multi(id, argv, out, st));
        }
        None
    }

    /// Resolve `argv` to a command spec (with subcommands), checking arity.
    /// `Err` carries Redis's error text. Inline: the common case (a known
    /// command without subcommands, right arity) is a table probe and one
    /// compare; the rest is [`Server::lookup_command_slow`].
    #[inline(always)]
    pub(crate) fn lookup_command(&self, argv: Argv<'_>) -> Result<Resolved, Vec<u8>> {
        if let Some((spec, id)) = self.table.get_id(argv.get(0).unwrap_or_default()) {
            if spec.subcommands.is_empty() && cmd::arity_ok(spec.arity, argv.len()) {
                return Ok(Resolved {
                    parent: None,
                    spec,
                    id,
                });
            }
        }
        self.lookup_command_slow(argv)
    }

    /// [`Server::lookup_command`] in full: subcommands and the errors.
    #[cold]
    #[inline(never)]
    pub(super) fn lookup_command_slow(&self, argv: Argv<'_>) -> Result<Resolved, Vec<u8>> {
        let name = argv.get(0).unwrap_or_default();
        let Some((spec, id)) = self.table.get_id(name) else {
            return Err(cmd::unknown_command_error(argv));
        };
        if let (false, Some(sub)) = (spec.subcommands.is_empty(), argv.get(1)) {
            let Some((pos, subspec)) = spec
                .subcommands
                .iter()
                .enumerate()
                .find(|(_, s)| s.name.as_bytes().eq_ignore_ascii_case(sub))
            else {
                return Err(cmd::unknown_subcommand_error(name, sub));
            };
            if !cmd::arity_ok(subspec.arity, argv.len()) {
                return Err(format!(
                    "ERR wrong number of arguments for '{}|{}' command",
                    spec.name, subspec.name
                )
                .into_bytes());
            }
            return Ok(Resolved {
                parent: Some(spec),
                spec: subspec,
                id: self.table.sub_id(id, pos),
            });
        }
        if !cmd::arity_ok(spec.arity, argv.len()) {
            return Err(
                format!("ERR wrong number of arguments for '{}' command", spec.name).into_bytes(),
            );
        }
        Ok(Resolved {
            parent: None,
            spec,
            id,
        })
    }

    /// The command a lookup error is about, when Redis counts it as
    /// rejected (a known command or subcommand with the wrong arity).
    #[cold]
    pub(super) fn rejected_id(&self, argv: Argv<'_>) -> Option<u32> {
        let (spec, id) = self.table.get_id(argv.get(0).unwrap_or_default())?;
        match (spec.subcommands.is_empty(), argv.get(1)) {
            (false, Some(sub)) => spec
                .subcommands
                .iter()
                .position(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))
                .map(|pos| self.table.sub_id(id, pos)),
            _ => Some(id),
        }
    }

    // ---------------------------------------------------------------- keyspace
}
