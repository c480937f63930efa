//! Authentication (the `requirepass` part of Redis's `acl.c`) and the
//! connection reset (`resetCommand`): AUTH, RESET, HELLO's AUTH option,
//! the NOAUTH gate's list, and protected mode's decision at accept time.
//!
//! There is one user, `default`: without `requirepass` it is `nopass`
//! (every client is authenticated, AUTH with a password is an error);
//! with it, clients start unauthenticated and only AUTH / HELLO / QUIT /
//! RESET run until they present the password. Passwords are compared in
//! time independent of where they differ and are never logged.

use crate::cmd::{spec, CommandSpec, Ctx};
use crate::server::Server;

pub const ERR_NOAUTH: &str = "NOAUTH Authentication required.";
pub const ERR_WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const ERR_HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";

/// Redis's protected-mode refusal, written before closing the connection.
pub const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "auth",
        -2,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy"
        ],
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Authenticate to the server",
        auth
    ),
    spec!(
        "reset",
        1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy"
        ],
        0,
        0,
        0,
        "connection",
        "6.2.0",
        "Reset the connection",
        reset
    ),
];

/// Commands an unauthenticated client may run (`CMD_NO_AUTH`).
pub(crate) fn runs_without_auth(name: &str) -> bool {
    matches!(name, "auth" | "hello" | "quit" | "reset")
}

/// Redis's `connIsLocal` for protected mode: IPv4 `127.*`, `::1`.
pub fn is_local(addr: &str) -> bool {
    let ip = match addr.parse::<std::net::SocketAddr>() {
        Ok(a) => a.ip(),
        Err(_) => return addr.is_empty(), // no address: a local socket
    };
    match ip {
        std::net::IpAddr::V4(v4) => v4.octets()[0] == 127,
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.octets()[0] == 127)
        }
    }
}

/// Whether protected mode refuses a client from `addr` (the default
/// user has no password).
pub fn protected_refuses(server: &Server, addr: &str) -> bool {
    server.config.protected_mode
        && server.users.get("default").is_some_and(|u| u.nopass)
        && !is_local(addr)
}

/// Compare in time that depends on the lengths only, not on where the
/// bytes differ (Redis compares SHA-256 digests for the same reason).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// Authenticate client `id` (AUTH, HELLO AUTH); writes WRONGPASS on
/// failure, nothing on success.
pub(crate) fn authenticate(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    user: &[u8],
    pass: &[u8],
) -> bool {
    if let Some(name) = server.users.check(user, pass).map(str::to_string) {
        if let Some(c) = server.clients.get_mut(&ctx.client_id) {
            c.authenticated = true;
            c.user = name;
        }
        ctx.resync = true;
        true
    } else {
        crate::acl_log::log_auth_failure(server, ctx, user);
        ctx.err(ERR_WRONGPASS);
        false
    }
}

fn auth(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 3 {
        return ctx.syntax();
    }
    let (user, pass) = if ctx.argc() == 2 {
        if server.users.get("default").is_some_and(|u| u.nopass) {
            return ctx.err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        }
        (&b"default"[..], ctx.arg(1))
    } else {
        (ctx.arg(1), ctx.arg(2))
    };
    if authenticate(server, ctx, user, pass) {
        ctx.ok();
    }
}

/// RESET (Redis's `clearClientConnectionState`): leave MULTI and drop
/// watches, leave every subscription, replies on, back to db 0, RESP2, no
/// name, and
/// the default user's authentication as a new connection has it.
fn reset(server: &mut Server, ctx: &mut Ctx<'_>) {
    let id = ctx.client_id;
    crate::multi::discard_transaction(server, id);
    crate::pubsub::unsubscribe_all(server, id, None);
    let authed = server.users.default_is_open();
    if let Some(c) = server.clients.get_mut(&id) {
        c.name = None;
        c.authenticated = authed;
        c.user = "default".to_string();
        c.reply_mode = crate::reply_mode::ReplyMode::On;
    }
    ctx.db = 0;
    ctx.proto = 2;
    ctx.resync = true;
    ctx.simple("RESET");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_is_what_redis_calls_local() {
        assert!(is_local("127.0.0.1:5000"));
        assert!(is_local("127.0.0.2:5000"));
        assert!(is_local("[::1]:5000"));
        assert!(is_local(""));
        assert!(!is_local("10.0.0.1:5000"));
        assert!(!is_local("[2001:db8::1]:5000"));
    }

    #[test]
    fn constant_time_compare() {
        assert!(constant_time_eq(b"sekret", b"sekret"));
        assert!(!constant_time_eq(b"sekret", b"sekreT"));
        assert!(!constant_time_eq(b"sekret", b"sekret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }
}
