//! CLIENT PAUSE / UNPAUSE (Redis's `pauseClients`, `blockPostponeClient`):
//! while a pause lasts, a client's command is postponed — not run, its
//! input held back in order — if the pause is ALL, or WRITE and the
//! command may change data (write commands, PUBLISH, an EXEC with writes
//! queued). Active expiry and eviction wait too. When the pause ends
//! (its deadline, checked before each command and by the cron, or CLIENT
//! UNPAUSE) the postponed clients are listed for the driver to resume.
//!
//! The postponed command stays where it was: in the connection's input
//! (the server reports it unconsumed) or, for one the parser assembled
//! itself, in the client's parser (`Client::postponed_in_parser`).

use std::collections::BTreeSet;

use crate::cmd::{eq, Ctx, Resolved};
use crate::server::{ClientId, Server};

/// The pause in force.
#[derive(Debug, Default)]
pub struct PauseState {
    /// Unix ms when it ends (0: no pause).
    end_ms: i64,
    /// ALL (else WRITE).
    all: bool,
    /// Clients with a postponed command.
    postponed: BTreeSet<ClientId>,
    /// Clients to resume (the pause ended).
    resumed: Vec<ClientId>,
}

impl Server {
    /// A pause was set (cheap check before [`Server::paused`]).
    #[inline]
    pub(crate) fn pause_pending(&self) -> bool {
        self.pause.end_ms != 0
    }

    /// Whether a pause is in force at `now` (ending it if its time is up).
    pub(crate) fn paused(&mut self, now: i64) -> bool {
        if self.pause.end_ms == 0 {
            return false;
        }
        if now < self.pause.end_ms {
            return true;
        }
        self.unpause();
        false
    }

    /// Whether `cmd` must wait for the pause to end.
    pub(crate) fn pause_postpones(&mut self, id: ClientId, cmd: &Resolved, now: i64) -> bool {
        if !self.paused(now) {
            return false;
        }
        if self.pause.all {
            return true;
        }
        let name = cmd.parent.unwrap_or(cmd.spec).name;
        let may_replicate =
            cmd.spec.flags.contains(&"write") || matches!(name, "publish" | "spublish" | "pfcount");
        may_replicate
            || (name == "exec"
                && self
                    .clients
                    .get(&id)
                    .and_then(|c| c.mstate.as_ref())
                    .is_some_and(|m| m.writes))
    }

    pub(crate) fn postpone(&mut self, id: ClientId) {
        self.pause.postponed.insert(id);
    }

    /// Whether client `id` waits for a pause to end.
    pub fn is_postponed(&self, id: ClientId) -> bool {
        self.pause.postponed.contains(&id)
    }

    /// End the pause: every postponed client resumes.
    pub(crate) fn unpause(&mut self) {
        self.pause.end_ms = 0;
        self.pause.all = false;
        let ids = std::mem::take(&mut self.pause.postponed);
        self.pause.resumed.extend(ids);
    }

    /// Clients whose postponed command can run now: the driver posts
    /// their connections (as for woken blocked clients).
    pub fn take_resumed(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.pause.resumed)
    }

    /// A disconnected client waits for nothing.
    pub(crate) fn forget_postponed(&mut self, id: ClientId) {
        self.pause.postponed.remove(&id);
        self.pause.resumed.retain(|&c| c != id);
    }

    /// Whether background writes (active expiry, eviction) must wait.
    pub(crate) fn writes_paused(&mut self, now: i64) -> bool {
        self.paused(now)
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL].
pub fn client_pause(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(ms) = crate::util::string2ll(ctx.arg(2)) else {
        return ctx.err("ERR timeout is not an integer or out of range");
    };
    if ms < 0 {
        return ctx.err("ERR timeout is negative");
    }
    let all = match ctx.argc() {
        3 => true,
        4 if eq(ctx.arg(3), "all") => true,
        4 if eq(ctx.arg(3), "write") => false,
        4 => return ctx.err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
        _ => return ctx.syntax(),
    };
    let end = ctx.now.saturating_add(ms);
    let p = &mut server.pause;
    // A stronger or longer pause wins, as in Redis.
    p.all = if p.end_ms == 0 { all } else { p.all || all };
    p.end_ms = p.end_ms.max(end).max(1);
    ctx.ok();
}

/// CLIENT UNPAUSE.
pub fn client_unpause(server: &mut Server, ctx: &mut Ctx<'_>) {
    server.unpause();
    ctx.ok();
}
