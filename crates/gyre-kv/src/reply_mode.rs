//! CLIENT REPLY ON|OFF|SKIP (Redis's `CLIENT_REPLY_OFF` / `_SKIP` /
//! `_SKIP_NEXT` flags): a client that asked for no replies gets none — not
//! from its commands, their errors, or (while OFF) messages published to
//! it. The server applies the mode around each command (`Server::run`
//! drops what the command wrote); this module owns the mode and the
//! command.

use crate::cmd::{eq, Ctx};
use crate::server::Server;

/// A client's reply mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    #[default]
    On,
    /// No replies until CLIENT REPLY ON.
    Off,
    /// The reply of the command being run is dropped.
    Skip,
    /// CLIENT REPLY SKIP just ran: the next command's reply is dropped.
    SkipNext,
}

/// CLIENT REPLY.
pub fn client_reply(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(c) = server.clients.get_mut(&ctx.client_id) else {
        return;
    };
    let arg = ctx.arg(2);
    if eq(arg, "on") {
        c.reply_mode = ReplyMode::On;
        ctx.ok();
    } else if eq(arg, "off") {
        c.reply_mode = ReplyMode::Off;
    } else if eq(arg, "skip") {
        if c.reply_mode != ReplyMode::Off {
            c.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return ctx.syntax();
    }
    ctx.resync = true;
}

/// After a command (Redis's `resetClient`): whether its output must be
/// dropped, and the mode for the next command.
pub(crate) fn after_command(mode: ReplyMode) -> (bool, ReplyMode) {
    match mode {
        ReplyMode::On => (false, ReplyMode::On),
        ReplyMode::Off => (true, ReplyMode::Off),
        ReplyMode::Skip => (true, ReplyMode::On),
        ReplyMode::SkipNext => (false, ReplyMode::Skip),
    }
}
