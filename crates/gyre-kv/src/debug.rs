//! DEBUG (Redis's `debug.c`), the part gyre has: DEBUG SLEEP, which
//! stalls the server as a slow command would (the latency monitor's
//! tests use it), and DEBUG HELP. `enable-debug-command no|yes|local`
//! (default `no`, as in Redis 7.0) guards it with Redis's message.

use crate::cmd::{spec, CommandSpec, Ctx};
use crate::server::Server;

/// Redis's `PROTECTED_ACTION_ALLOWED_*` settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protected {
    #[default]
    No,
    Yes,
    Local,
}

impl Protected {
    pub fn parse(s: &[u8]) -> Option<Protected> {
        match s.to_ascii_lowercase().as_slice() {
            b"no" => Some(Protected::No),
            b"yes" => Some(Protected::Yes),
            b"local" => Some(Protected::Local),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protected::No => "no",
            Protected::Yes => "yes",
            Protected::Local => "local",
        }
    }
}

const NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

pub static COMMANDS: &[CommandSpec] = &[spec!(
    "debug",
    -2,
    &["admin", "noscript", "loading", "stale"],
    0,
    0,
    0,
    "server",
    "1.0.0",
    "A container for debugging commands",
    debug
)];

/// Redis's `allowProtectedAction`.
fn allowed(server: &Server, ctx: &Ctx<'_>) -> bool {
    match server.config.enable_debug_command {
        Protected::Yes => true,
        Protected::No => false,
        Protected::Local => server
            .clients
            .get(&ctx.client_id)
            .is_some_and(|c| crate::auth::is_local(&c.addr)),
    }
}

/// C's `strtod` on the longest decimal prefix (`abc` is 0, `0.5s` is
/// 0.5), as DEBUG SLEEP reads its argument (hex and `inf` forms are not
/// read).
pub fn strtod_prefix(s: &[u8]) -> f64 {
    let digits = |i: usize| s[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut i = s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    let start = i;
    if matches!(s.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let int = digits(i);
    i += int;
    let mut frac = 0;
    if s.get(i) == Some(&b'.') {
        frac = digits(i + 1);
        i += 1 + frac;
    }
    if int + frac == 0 {
        return 0.0;
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        let j = i + 1 + usize::from(matches!(s.get(i + 1), Some(b'+' | b'-')));
        let e = digits(j);
        if e > 0 {
            i = j + e;
        }
    }
    std::str::from_utf8(&s[start..i])
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.0)
}

fn debug(server: &mut Server, ctx: &mut Ctx<'_>) {
    if !allowed(server, ctx) {
        return ctx.err(NOT_ALLOWED);
    }
    let sub = ctx.arg(1).to_ascii_lowercase();
    match (sub.as_slice(), ctx.argc()) {
        (b"sleep", 3) => {
            let secs = strtod_prefix(ctx.arg(2));
            // Redis: `(long long)(dtime*1000000)` µs; a negative time
            // fails nanosleep and returns at once.
            let us = (secs * 1e6) as i64;
            if us > 0 {
                std::thread::sleep(std::time::Duration::from_micros(us as u64));
            }
            ctx.ok();
        }
        (b"help", 2) => crate::cmd::help_lines(
            ctx,
            "DEBUG",
            &[
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
            ],
        ),
        _ => {
            let msg = format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                String::from_utf8_lossy(ctx.arg(1))
            );
            ctx.err(&msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_argument_reads_as_strtod() {
        assert_eq!(strtod_prefix(b"0.25"), 0.25);
        assert_eq!(strtod_prefix(b"abc"), 0.0);
        assert_eq!(strtod_prefix(b"2x"), 2.0);
        assert_eq!(strtod_prefix(b"-1"), -1.0);
        assert_eq!(strtod_prefix(b""), 0.0);
        assert_eq!(strtod_prefix(b" 1e-3"), 0.001);
    }

    #[test]
    fn protected_values() {
        assert_eq!(Protected::parse(b"LOCAL"), Some(Protected::Local));
        assert_eq!(Protected::parse(b"maybe"), None);
        assert_eq!(Protected::default().name(), "no");
    }
}
