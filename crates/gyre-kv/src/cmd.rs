//! Command table and command implementations (Redis 7.0 semantics and
//! error texts).

use crate::float::incr_by_float;
use crate::glob::stringmatch;
use crate::resp::{self, Argv, Proto};
use crate::server::{ClientId, Server};
use crate::util::{memtoull, parse_cursor, string2ll};

pub type Handler = fn(&mut Server, &mut Ctx<'_>);

/// One entry of the command table.
#[derive(Debug)]
pub struct CommandSpec {
    pub name: &'static str,
    /// Redis convention: N = exactly N arguments (name included), -N = at
    /// least N.
    pub arity: i32,
    pub flags: &'static [&'static str],
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
}

/// Per-call context handed to a command.
pub struct Ctx<'a> {
    pub argv: Argv<'a>,
    /// Unix time in ms (the command's time snapshot).
    pub now: i64,
    pub out: &'a mut Vec<u8>,
    pub client_id: ClientId,
    /// Selected database (write back after the call).
    pub db: usize,
    pub proto: Proto,
    pub close: bool,
    pub errors: u64,
}

impl<'a> Ctx<'a> {
    fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }
    fn simple(&mut self, s: &str) {
        resp::write_simple(self.out, s.as_bytes());
    }
    fn err(&mut self, msg: &str) {
        self.errors += 1;
        resp::write_error(self.out, msg.as_bytes());
    }
    fn int(&mut self, n: i64) {
        resp::write_int(self.out, n);
    }
    fn bulk(&mut self, b: &[u8]) {
        resp::write_bulk(self.out, b);
    }
    fn null(&mut self) {
        resp::write_null(self.out, self.proto);
    }
    fn array(&mut self, n: usize) {
        resp::write_array_len(self.out, n);
    }
    fn map(&mut self, n: usize) {
        resp::write_map_len(self.out, n, self.proto);
    }
    fn set_len(&mut self, n: usize) {
        resp::write_set_len(self.out, n, self.proto);
    }
    /// Argument `i` (empty if missing), borrowed from the input, not
    /// from `self`: replies can be written while it is held.
    fn arg(&self, i: usize) -> &'a [u8] {
        self.argv.get(i).unwrap_or_default()
    }
    fn argc(&self) -> usize {
        self.argv.len()
    }
    fn syntax(&mut self) {
        self.err(ERR_SYNTAX);
    }
}

pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_NO_SUCH_KEY: &str = "ERR no such key";
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const ERR_BULK_LEN: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

pub(crate) fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = i64::try_from(argc).unwrap_or(i64::MAX);
    let a = i64::from(arity);
    (a > 0 && argc == a) || (a < 0 && argc >= -a)
}

/// C's `%.Ns` of a byte string: stops at NUL, at most `n` bytes.
fn c_str(b: &[u8], n: usize) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(n);
    &b[..end]
}

/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' `.
pub(crate) fn unknown_command_error(argv: Argv<'_>) -> Vec<u8> {
    let mut args: Vec<u8> = Vec::new();
    for a in argv.iter().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push(b'\'');
        args.extend_from_slice(c_str(a, room));
        args.extend_from_slice(b"' ");
    }
    let mut m = b"ERR unknown command '".to_vec();
    m.extend_from_slice(c_str(argv.get(0).unwrap_or_default(), 128));
    m.extend_from_slice(b"', with args beginning with: ");
    m.extend_from_slice(&args);
    m
}

pub(crate) fn unknown_subcommand_error(spec: &CommandSpec, sub: &[u8]) -> Vec<u8> {
    let mut m = b"ERR unknown subcommand '".to_vec();
    m.extend_from_slice(c_str(sub, 128));
    m.extend_from_slice(format!("'. Try {} HELP.", spec.name.to_ascii_uppercase()).as_bytes());
    m
}

/// A resolved command: the spec that runs, and its container command for
/// a subcommand (`CLIENT LIST`: `client` and `list`).
#[derive(Clone, Copy, Debug)]
pub struct Resolved {
    pub parent: Option<&'static CommandSpec>,
    pub spec: &'static CommandSpec,
}

impl Resolved {
    /// Redis's `fullname` (CLIENT LIST's `cmd=`): `get`, `client|list`.
    pub fn full_name(&self) -> String {
        match self.parent {
            Some(p) => format!("{}|{}", p.name, self.spec.name),
            None => self.spec.name.to_string(),
        }
    }
}

/// The command table by name, case-insensitive, looked up without
/// allocating: open addressing (linear probing) in a power-of-two table
/// at most a quarter full, indexed by FNV-1a of the lowercased name. The
/// names are fixed and few, so a simple hash is enough: no input can make
/// the table longer, only a miss probe a few slots.
#[derive(Debug)]
pub(crate) struct CommandTable {
    slots: Vec<Option<&'static CommandSpec>>,
}

fn name_hash(name: &[u8]) -> usize {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h = (h ^ u32::from(b.to_ascii_lowercase())).wrapping_mul(0x0100_0193);
    }
    h as usize
}

impl CommandTable {
    pub(crate) fn new(specs: &'static [CommandSpec]) -> CommandTable {
        let size = (specs.len() * 4).next_power_of_two();
        let mut slots = vec![None; size];
        for spec in specs {
            let mut i = name_hash(spec.name.as_bytes()) & (size - 1);
            while slots[i].is_some() {
                i = (i + 1) & (size - 1);
            }
            slots[i] = Some(spec);
        }
        CommandTable { slots }
    }

    pub(crate) fn get(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        let mask = self.slots.len() - 1;
        let mut i = name_hash(name) & mask;
        loop {
            let spec = self.slots[i]?;
            if spec.name.as_bytes().eq_ignore_ascii_case(name) {
                return Some(spec);
            }
            i = (i + 1) & mask;
        }
    }
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

fn parse_ll(ctx: &mut Ctx<'_>, i: usize) -> Option<i64> {
    let v = string2ll(ctx.arg(i));
    if v.is_none() {
        ctx.err(ERR_NOT_INT);
    }
    v
}

fn expire_error(ctx: &mut Ctx<'_>, cmd: &str) {
    ctx.err(&format!("ERR invalid expire time in '{cmd}' command"));
}

macro_rules! spec {
    ($name:expr, $arity:expr, $flags:expr, $fk:expr, $lk:expr, $step:expr, $group:expr, $since:expr, $summary:expr, $h:expr) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $fk,
            last_key: $lk,
            step: $step,
            group: $group,
            since: $since,
            summary: $summary,
            handler: $h,
            subcommands: &[],
        }
    };
}

const RO: &[&str] = &["readonly", "fast"];
const RO_SLOW: &[&str] = &["readonly"];
const WR: &[&str] = &["write", "denyoom"];
const WR_FAST: &[&str] = &["write", "denyoom", "fast"];
const WR_NODENY: &[&str] = &["write", "fast"];
const ADMIN: &[&str] = &["loading", "stale"];
const FAST: &[&str] = &["fast", "loading", "stale"];

fn no_handler(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.err("ERR internal: container command without subcommand");
}

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "ping",
        -1,
        FAST,
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Ping the server",
        ping
    ),
    spec!(
        "echo",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Echo the given string",
        echo
    ),
    spec!(
        "quit",
        -1,
        FAST,
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Close the connection",
        quit
    ),
    spec!(
        "hello",
        -1,
        FAST,
        0,
        0,
        0,
        "connection",
        "6.0.0",
        "Handshake with Redis",
        hello
    ),
    spec!(
        "select",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Change the selected database for the current connection",
        select
    ),
    spec!(
        "dbsize",
        1,
        RO,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Return the number of keys in the selected database",
        dbsize
    ),
    spec!(
        "flushdb",
        -1,
        WR_NODENY,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Remove all keys from the current database",
        flushdb
    ),
    spec!(
        "flushall",
        -1,
        WR_NODENY,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Remove all keys from all databases",
        flushall
    ),
    spec!(
        "info",
        -1,
        ADMIN,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Get information and statistics about the server",
        info
    ),
    spec!(
        "time",
        1,
        FAST,
        0,
        0,
        0,
        "server",
        "2.6.0",
        "Return the current server time",
        time
    ),
    spec!(
        "lastsave",
        1,
        FAST,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Get the UNIX time stamp of the last successful save to disk",
        lastsave
    ),
    CommandSpec {
        subcommands: CONFIG_SUBS,
        ..spec!(
            "config",
            -2,
            ADMIN,
            0,
            0,
            0,
            "server",
            "2.0.0",
            "A container for server configuration commands",
            no_handler
        )
    },
    CommandSpec {
        subcommands: COMMAND_SUBS,
        ..spec!(
            "command",
            -1,
            ADMIN,
            0,
            0,
            0,
            "server",
            "2.8.13",
            "Get array of Redis command details",
            command
        )
    },
    CommandSpec {
        subcommands: CLIENT_SUBS,
        ..spec!(
            "client",
            -2,
            ADMIN,
            0,
            0,
            0,
            "connection",
            "2.4.0",
            "A container for client connection commands",
            no_handler
        )
    },
    CommandSpec {
        subcommands: FUNCTION_SUBS,
        ..spec!(
            "function",
            -2,
            ADMIN,
            0,
            0,
            0,
            "scripting",
            "7.0.0",
            "A container for function commands",
            no_handler
        )
    },
    spec!(
        "get",
        2,
        RO,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Get the value of a key",
        get
    ),
    spec!(
        "set",
        -3,
        WR,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Set the string value of a key",
        set
    ),
    spec!(
        "setnx",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Set the value of a key, only if the key does not exist",
        setnx
    ),
    spec!(
        "setex",
        4,
        WR,
        1,
        1,
        1,
        "string",
        "2.0.0",
        "Set the value and expiration of a key",
        setex
    ),
    spec!(
        "psetex",
        4,
        WR,
        1,
        1,
        1,
        "string",
        "2.6.0",
        "Set the value and expiration in milliseconds of a key",
        psetex
    ),
    spec!(
        "getset",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Set the string value of a key and return its old value",
        getset
    ),
    spec!(
        "getdel",
        2,
        WR_NODENY,
        1,
        1,
        1,
        "string",
        "6.2.0",
        "Get the value of a key and delete the key",
        getdel
    ),
    spec!(
        "getex",
        -2,
        WR_NODENY,
        1,
        1,
        1,
        "string",
        "6.2.0",
        "Get the value of a key and optionally set its expiration",
        getex
    ),
    spec!(
        "mget",
        -2,
        RO,
        1,
        -1,
        1,
        "string",
        "1.0.0",
        "Get the values of all the given keys",
        mget
    ),
    spec!(
        "mset",
        -3,
        WR,
        1,
        -1,
        2,
        "string",
        "1.0.1",
        "Set multiple keys to multiple values",
        mset
    ),
    spec!(
        "msetnx",
        -3,
        WR,
        1,
        -1,
        2,
        "string",
        "1.0.1",
        "Set multiple keys to multiple values, only if none of the keys exist",
        msetnx
    ),
    spec!(
        "append",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "2.0.0",
        "Append a value to a key",
        append
    ),
    spec!(
        "strlen",
        2,
        RO,
        1,
        1,
        1,
        "string",
        "2.2.0",
        "Get the length of the value stored in a key",
        strlen
    ),
    spec!(
        "incr",
        2,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Increment the integer value of a key by one",
        incr
    ),
    spec!(
        "decr",
        2,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Decrement the integer value of a key by one",
        decr
    ),
    spec!(
        "incrby",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Increment the integer value of a key by the given amount",
        incrby
    ),
    spec!(
        "decrby",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Decrement the integer value of a key by the given number",
        decrby
    ),
    spec!(
        "incrbyfloat",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "2.6.0",
        "Increment the float value of a key by the given amount",
        incrbyfloat
    ),
    spec!(
        "getrange",
        4,
        RO_SLOW,
        1,
        1,
        1,
        "string",
        "2.4.0",
        "Get a substring of the string stored at a key",
        getrange
    ),
    spec!(
        "substr",
        4,
        RO_SLOW,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Get a substring of the string stored at a key",
        getrange
    ),
    spec!(
        "setrange",
        4,
        WR,
        1,
        1,
        1,
        "string",
        "2.2.0",
        "Overwrite part of a string at key starting at the specified offset",
        setrange
    ),
    spec!(
        "del",
        -2,
        &["write"],
        1,
        -1,
        1,
        "generic",
        "1.0.0",
        "Delete a key",
        del
    ),
    spec!(
        "unlink",
        -2,
        WR_NODENY,
        1,
        -1,
        1,
        "generic",
        "4.0.0",
        "Delete a key asynchronously in another thread",
        del
    ),
    spec!(
        "exists",
        -2,
        RO,
        1,
        -1,
        1,
        "generic",
        "1.0.0",
        "Determine if a key exists",
        exists
    ),
    spec!(
        "type",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "1.0.0",
        "Determine the type stored at key",
        type_cmd
    ),
    spec!(
        "rename",
        3,
        &["write"],
        1,
        2,
        1,
        "generic",
        "1.0.0",
        "Rename a key",
        rename
    ),
    spec!(
        "renamenx",
        3,
        WR_NODENY,
        1,
        2,
        1,
        "generic",
        "1.0.0",
        "Rename a key, only if the new key does not exist",
        renamenx
    ),
    spec!(
        "keys",
        2,
        RO_SLOW,
        0,
        0,
        0,
        "generic",
        "1.0.0",
        "Find all keys matching the given pattern",
        keys
    ),
    spec!(
        "scan",
        -2,
        RO_SLOW,
        0,
        0,
        0,
        "generic",
        "2.8.0",
        "Incrementally iterate the keys space",
        scan
    ),
    spec!(
        "randomkey",
        1,
        RO_SLOW,
        0,
        0,
        0,
        "generic",
        "1.0.0",
        "Return a random key from the keyspace",
        randomkey
    ),
    spec!(
        "expire",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "1.0.0",
        "Set a key's time to live in seconds",
        expire
    ),
    spec!(
        "pexpire",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "2.6.0",
        "Set a key's time to live in milliseconds",
        pexpire
    ),
    spec!(
        "expireat",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "1.2.0",
        "Set the expiration for a key as a UNIX timestamp",
        expireat
    ),
    spec!(
        "pexpireat",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "2.6.0",
        "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
        pexpireat
    ),
    spec!(
        "ttl",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "1.0.0",
        "Get the time to live for a key in seconds",
        ttl
    ),
    spec!(
        "pttl",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "2.6.0",
        "Get the time to live for a key in milliseconds",
        pttl
    ),
    spec!(
        "expiretime",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "7.0.0",
        "Get the expiration Unix timestamp for a key",
        expiretime
    ),
    spec!(
        "pexpiretime",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "7.0.0",
        "Get the expiration Unix timestamp for a key in milliseconds",
        pexpiretime
    ),
    spec!(
        "persist",
        2,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "2.2.0",
        "Remove the expiration from a key",
        persist
    ),
];

static CONFIG_SUBS: &[CommandSpec] = &[
    spec!(
        "get",
        -3,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.0.0",
        "Get the values of configuration parameters",
        config_get
    ),
    spec!(
        "set",
        -4,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.0.0",
        "Set configuration parameters to the given values",
        config_set
    ),
    spec!(
        "resetstat",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.0.0",
        "Reset the stats returned by INFO",
        config_resetstat
    ),
    spec!(
        "rewrite",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.0",
        "Rewrite the configuration file with the in memory configuration",
        config_rewrite
    ),
    spec!(
        "help",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "5.0.0",
        "Show helpful text about the different subcommands",
        config_help
    ),
];

static COMMAND_SUBS: &[CommandSpec] = &[
    spec!(
        "count",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Get total number of Redis commands",
        command_count
    ),
    spec!(
        "info",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Get array of specific Redis command details, or all when no argument is given",
        command_info
    ),
    spec!(
        "docs",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "7.0.0",
        "Get array of specific Redis command documentation",
        command_docs
    ),
    spec!(
        "list",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "7.0.0",
        "Get an array of Redis command names",
        command_list
    ),
    spec!(
        "help",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "5.0.0",
        "Show helpful text about the different subcommands",
        command_help
    ),
];

static CLIENT_SUBS: &[CommandSpec] = &[
    spec!(
        "id",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "5.0.0",
        "Returns the client ID for the current connection",
        client_id
    ),
    spec!(
        "setname",
        3,
        FAST,
        0,
        0,
        0,
        "connection",
        "2.6.9",
        "Set the current connection name",
        client_setname
    ),
    spec!(
        "getname",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "2.6.9",
        "Get the current connection name",
        client_getname
    ),
    spec!(
        "list",
        -2,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "2.4.0",
        "Get the list of client connections",
        client_list
    ),
    spec!(
        "info",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "6.2.0",
        "Returns information about the current client connection.",
        client_info
    ),
    spec!(
        "kill",
        -3,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "2.4.0",
        "Kill the connection of a client",
        client_kill
    ),
    spec!(
        "help",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "5.0.0",
        "Show helpful text about the different subcommands",
        client_help
    ),
];

static FUNCTION_SUBS: &[CommandSpec] = &[spec!(
    "flush",
    -2,
    WR_NODENY,
    0,
    0,
    0,
    "scripting",
    "7.0.0",
    "Deleting all functions",
    function_flush
)];

// ------------------------------------------------------------ connection

fn ping(_: &mut Server, ctx: &mut Ctx<'_>) {
    match ctx.argc() {
        1 => ctx.simple("PONG"),
        2 => {
            let m = ctx.arg(1);
            ctx.bulk(m)
        }
        _ => ctx.err("ERR wrong number of arguments for 'ping' command"),
    }
}

fn echo(_: &mut Server, ctx: &mut Ctx<'_>) {
    let m = ctx.arg(1);
    ctx.bulk(m);
}

fn quit(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.ok();
    ctx.close = true;
}

/// Client names: printable ASCII without spaces (`'!'..='~'`).
fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn set_client_name(server: &mut Server, ctx: &mut Ctx<'_>, name: &[u8]) -> bool {
    if !valid_client_name(name) {
        ctx.err("ERR Client names cannot contain spaces, newlines or special characters.");
        return false;
    }
    if let Some(c) = server.clients.get_mut(&ctx.client_id) {
        c.name = if name.is_empty() {
            None
        } else {
            Some(name.to_vec())
        };
    }
    true
}

fn hello(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut ver = i64::from(ctx.proto);
    let mut next = 1;
    if ctx.argc() >= 2 {
        match string2ll(ctx.arg(1)) {
            Some(v) => ver = v,
            None => return ctx.err("ERR Protocol version is not an integer or out of range"),
        }
        next = 2;
        if !(2..=3).contains(&ver) {
            return ctx.err("NOPROTO unsupported protocol version");
        }
    }
    let mut name: Option<Vec<u8>> = None;
    let mut j = next;
    while j < ctx.argc() {
        let more = ctx.argc() - 1 - j;
        let opt = ctx.arg(j);
        if eq(opt, "auth") && more >= 2 {
            // No users or passwords in this module: like the default
            // `nopass` user, any credentials are accepted.
            j += 2;
        } else if eq(opt, "setname") && more >= 1 {
            name = Some(ctx.arg(j + 1).to_vec());
            j += 1;
        } else {
            let m = format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(c_str(opt, 128))
            );
            return ctx.err(&m);
        }
        j += 1;
    }
    if let Some(n) = name {
        if !set_client_name(server, ctx, &n) {
            return;
        }
    }
    ctx.proto = ver as Proto;
    ctx.map(7);
    ctx.bulk(b"server");
    ctx.bulk(b"redis");
    ctx.bulk(b"version");
    ctx.bulk(crate::REDIS_VERSION.as_bytes());
    ctx.bulk(b"proto");
    ctx.int(ver);
    ctx.bulk(b"id");
    ctx.int(ctx.client_id as i64);
    ctx.bulk(b"mode");
    ctx.bulk(b"standalone");
    ctx.bulk(b"role");
    ctx.bulk(b"master");
    ctx.bulk(b"modules");
    ctx.array(0);
}

fn select(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(id) = parse_ll(ctx, 1) else { return };
    if i32::try_from(id).is_err() {
        return ctx.err("ERR value is out of range, value must between -2147483648 and 2147483647");
    }
    match usize::try_from(id) {
        Ok(i) if i < server.dbs.len() => {
            ctx.db = i;
            ctx.ok();
        }
        _ => ctx.err("ERR DB index is out of range"),
    }
}

// ------------------------------------------------------------ server

fn dbsize(server: &mut Server, ctx: &mut Ctx<'_>) {
    let n = server.dbs.get(ctx.db).map_or(0, |d| d.len());
    ctx.int(n as i64);
}

fn flush_flags_ok(ctx: &mut Ctx<'_>) -> bool {
    match ctx.argc() {
        1 => true,
        2 if eq(ctx.arg(1), "sync") || eq(ctx.arg(1), "async") => true,
        _ => {
            ctx.syntax();
            false
        }
    }
}

fn flushdb(server: &mut Server, ctx: &mut Ctx<'_>) {
    if !flush_flags_ok(ctx) {
        return;
    }
    if let Some(db) = server.dbs.get_mut(ctx.db) {
        server.dirty += db.flush() as u64;
    }
    ctx.ok();
}

fn flushall(server: &mut Server, ctx: &mut Ctx<'_>) {
    if !flush_flags_ok(ctx) {
        return;
    }
    for db in &mut server.dbs {
        server.dirty += db.flush() as u64;
    }
    server.dirty += 1;
    ctx.ok();
}

fn info(server: &mut Server, ctx: &mut Ctx<'_>) {
    let sections: Vec<Vec<u8>> = ctx
        .argv
        .iter()
        .skip(1)
        .map(|a| a.to_ascii_lowercase())
        .collect();
    let text = crate::info::render(server, ctx.now, &sections);
    resp::write_verbatim(ctx.out, text.as_bytes(), ctx.proto);
}

fn time(_: &mut Server, ctx: &mut Ctx<'_>) {
    let secs = ctx.now.div_euclid(1000);
    let us = ctx.now.rem_euclid(1000) * 1000;
    ctx.array(2);
    ctx.bulk(secs.to_string().as_bytes());
    ctx.bulk(us.to_string().as_bytes());
}

fn lastsave(server: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(server.last_save_ms.div_euclid(1000));
}

fn function_flush(_: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 3 {
        return ctx.err(
            "ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.",
        );
    }
    if ctx.argc() == 3 && !eq(ctx.arg(2), "sync") && !eq(ctx.arg(2), "async") {
        return ctx.err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    }
    ctx.ok();
}

fn help_lines(ctx: &mut Ctx<'_>, cmd: &str, lines: &[&str]) {
    ctx.array(lines.len() + 2);
    ctx.simple(&format!(
        "{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        ctx.simple(l);
    }
    ctx.simple("HELP");
    // Redis ends with an indented "Print this help." line.
}

// ------------------------------------------------------------ CONFIG

#[derive(Clone, Copy)]
enum Kind {
    Int {
        min: i64,
        max: i64,
    },
    Mem {
        min: u64,
        max: u64,
    },
    Bool,
    Immutable,
    /// Accepted and ignored (reported value fixed).
    Fixed,
}

struct Param {
    name: &'static str,
    kind: Kind,
}

const PARAMS: &[Param] = &[
    Param {
        name: "hz",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "dynamic-hz",
        kind: Kind::Bool,
    },
    Param {
        name: "timeout",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "maxclients",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as i64,
        },
    },
    Param {
        name: "databases",
        kind: Kind::Immutable,
    },
    Param {
        name: "proto-max-bulk-len",
        kind: Kind::Mem {
            min: 1024 * 1024,
            max: i64::MAX as u64,
        },
    },
    Param {
        name: "client-query-buffer-limit",
        kind: Kind::Mem {
            min: 1024 * 1024,
            max: i64::MAX as u64,
        },
    },
    Param {
        name: "maxmemory",
        kind: Kind::Mem {
            min: 0,
            max: u64::MAX,
        },
    },
    Param {
        name: "port",
        kind: Kind::Immutable,
    },
    Param {
        name: "bind",
        kind: Kind::Immutable,
    },
    Param {
        name: "save",
        kind: Kind::Fixed,
    },
    Param {
        name: "appendonly",
        kind: Kind::Fixed,
    },
    Param {
        name: "maxmemory-policy",
        kind: Kind::Fixed,
    },
];

fn param_value(server: &Server, name: &str) -> String {
    let c = &server.config;
    let yn = |b: bool| if b { "yes" } else { "no" }.to_string();
    match name {
        "hz" => c.hz.to_string(),
        "dynamic-hz" => yn(c.dynamic_hz),
        "timeout" => c.timeout.to_string(),
        "maxclients" => c.maxclients.to_string(),
        "databases" => c.databases.to_string(),
        "proto-max-bulk-len" => c.proto_max_bulk_len.to_string(),
        "client-query-buffer-limit" => c.client_query_buffer_limit.to_string(),
        "maxmemory" => c.maxmemory.to_string(),
        "port" => c.port.to_string(),
        "bind" => c.bind.clone(),
        "save" => String::new(),
        "appendonly" => "no".into(),
        "maxmemory-policy" => "noeviction".into(),
        _ => String::new(),
    }
}

fn config_get(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut names: Vec<&'static str> = Vec::new();
    for i in 2..ctx.argc() {
        let pat = ctx.arg(i).to_vec();
        for p in PARAMS {
            if stringmatch(&pat, p.name.as_bytes(), true) && !names.contains(&p.name) {
                names.push(p.name);
            }
        }
    }
    ctx.map(names.len());
    for n in names {
        ctx.bulk(n.as_bytes());
        let v = param_value(server, n);
        ctx.bulk(v.as_bytes());
    }
}

enum NewValue {
    Int(i64),
    Mem(u64),
    Bool(bool),
    Ignored,
}

fn config_set(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() % 2 != 0 {
        return ctx.err("ERR wrong number of arguments for 'config|set' command");
    }
    let mut updates: Vec<(&'static str, NewValue)> = Vec::new();
    let mut j = 2;
    while j + 1 < ctx.argc() {
        let name_arg = ctx.arg(j).to_ascii_lowercase();
        let val = ctx.arg(j + 1).to_vec();
        let shown = String::from_utf8_lossy(c_str(ctx.arg(j), 128)).into_owned();
        j += 2;
        let Some(p) = PARAMS
            .iter()
            .find(|p| p.name.as_bytes() == name_arg.as_slice())
        else {
            return ctx.err(&format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{shown}'"
            ));
        };
        let fail = |why: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{shown}') - {why}")
        };
        if updates.iter().any(|(n, _)| *n == p.name) {
            return ctx.err(&fail("duplicate parameter"));
        }
        let nv = match p.kind {
            Kind::Immutable => return ctx.err(&fail("can't set immutable config")),
            Kind::Fixed => NewValue::Ignored,
            Kind::Bool => {
                if eq(&val, "yes") {
                    NewValue::Bool(true)
                } else if eq(&val, "no") {
                    NewValue::Bool(false)
                } else {
                    return ctx.err(&fail("argument must be 'yes' or 'no'"));
                }
            }
            Kind::Int { min, max } => match string2ll(&val) {
                None => return ctx.err(&fail("argument couldn't be parsed into an integer")),
                Some(v) if v < min || v > max => {
                    return ctx.err(&fail(&format!(
                        "argument must be between {min} and {max} inclusive"
                    )))
                }
                Some(v) => NewValue::Int(v),
            },
            Kind::Mem { min, max } => match memtoull(&val) {
                None => return ctx.err(&fail("argument must be a memory value")),
                Some(v) if v < min || v > max => {
                    return ctx.err(&fail(&format!(
                        "argument must be between {min} and {max} inclusive"
                    )))
                }
                Some(v) => NewValue::Mem(v),
            },
        };
        updates.push((p.name, nv));
    }
    let c = &mut server.config;
    for (name, v) in updates {
        match (name, v) {
            ("hz", NewValue::Int(v)) => {
                c.hz = (v as u32).clamp(crate::server::MIN_HZ, crate::server::MAX_HZ)
            }
            ("dynamic-hz", NewValue::Bool(b)) => c.dynamic_hz = b,
            ("timeout", NewValue::Int(v)) => c.timeout = v as u64,
            ("maxclients", NewValue::Int(v)) => c.maxclients = v as u64,
            ("proto-max-bulk-len", NewValue::Mem(v)) => c.proto_max_bulk_len = v,
            ("client-query-buffer-limit", NewValue::Mem(v)) => c.client_query_buffer_limit = v,
            ("maxmemory", NewValue::Mem(v)) => c.maxmemory = v,
            _ => {}
        }
    }
    ctx.ok();
}

fn config_resetstat(server: &mut Server, ctx: &mut Ctx<'_>) {
    server.reset_stats();
    ctx.ok();
}

fn config_rewrite(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.err("ERR The server is running without a config file");
}

fn config_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "SET <directive> <value>",
            "RESETSTAT",
            "REWRITE",
        ],
    );
}

// ------------------------------------------------------------ COMMAND

fn command_info_one(ctx: &mut Ctx<'_>, c: &CommandSpec, parent: Option<&str>) {
    ctx.array(10);
    let name = match parent {
        Some(p) => format!("{p}|{}", c.name),
        None => c.name.to_string(),
    };
    ctx.bulk(name.as_bytes());
    ctx.int(i64::from(c.arity));
    ctx.set_len(c.flags.len());
    for f in c.flags {
        ctx.simple(f);
    }
    ctx.int(i64::from(c.first_key));
    ctx.int(i64::from(c.last_key));
    ctx.int(i64::from(c.step));
    ctx.set_len(1);
    ctx.simple(&format!("@{}", c.group));
    ctx.set_len(0); // tips
    ctx.set_len(0); // key specs
    ctx.set_len(c.subcommands.len());
    for s in c.subcommands {
        command_info_one(ctx, s, Some(c.name));
    }
}

fn command(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.array(COMMANDS.len());
    for c in COMMANDS {
        command_info_one(ctx, c, None);
    }
}

fn command_count(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(COMMANDS.len() as i64);
}

fn find_spec(name: &[u8]) -> Option<&'static CommandSpec> {
    let lower = name.to_ascii_lowercase();
    let mut parts = lower.splitn(2, |&b| b == b'|');
    let top = parts.next()?;
    let spec = COMMANDS.iter().find(|c| c.name.as_bytes() == top)?;
    match parts.next() {
        None => Some(spec),
        Some(sub) => spec.subcommands.iter().find(|s| s.name.as_bytes() == sub),
    }
}

fn command_info(_: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() == 2 {
        ctx.array(COMMANDS.len());
        for c in COMMANDS {
            command_info_one(ctx, c, None);
        }
        return;
    }
    ctx.array(ctx.argc() - 2);
    for i in 2..ctx.argc() {
        match find_spec(ctx.arg(i)) {
            Some(c) => command_info_one(ctx, c, None),
            // Redis answers an unknown name with a null (`$-1` in RESP2).
            None => ctx.null(),
        }
    }
}

fn command_doc_one(ctx: &mut Ctx<'_>, c: &CommandSpec) {
    ctx.bulk(c.name.as_bytes());
    ctx.map(3);
    ctx.bulk(b"summary");
    ctx.bulk(c.summary.as_bytes());
    ctx.bulk(b"since");
    ctx.bulk(c.since.as_bytes());
    ctx.bulk(b"group");
    ctx.bulk(c.group.as_bytes());
}

fn command_docs(_: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() == 2 {
        ctx.map(COMMANDS.len());
        for c in COMMANDS {
            command_doc_one(ctx, c);
        }
        return;
    }
    let found: Vec<&CommandSpec> = (2..ctx.argc())
        .filter_map(|i| find_spec(ctx.arg(i)))
        .collect();
    ctx.map(found.len());
    for c in found {
        command_doc_one(ctx, c);
    }
}

fn command_list(_: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() != 2 {
        // FILTERBY is not supported: answer like an unknown filter.
        return ctx.syntax();
    }
    ctx.array(COMMANDS.len());
    for c in COMMANDS {
        ctx.bulk(c.name.as_bytes());
    }
}

fn command_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "COMMAND",
        &[
            "COUNT",
            "DOCS [<command-name> ...]",
            "INFO [<command-name> ...]",
            "LIST",
        ],
    );
}

// ------------------------------------------------------------ CLIENT

fn client_id(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(ctx.client_id as i64);
}

fn client_setname(server: &mut Server, ctx: &mut Ctx<'_>) {
    let name = ctx.arg(2).to_vec();
    if set_client_name(server, ctx, &name) {
        ctx.ok();
    }
}

fn client_getname(server: &mut Server, ctx: &mut Ctx<'_>) {
    match server
        .clients
        .get(&ctx.client_id)
        .and_then(|c| c.name.clone())
    {
        Some(n) => ctx.bulk(&n),
        None => ctx.null(),
    }
}

/// One CLIENT LIST line (without the trailing newline).
fn client_line(server: &Server, id: ClientId, now: i64, cur: Option<(&Ctx<'_>, &str)>) -> String {
    let Some(c) = server.clients.get(&id) else {
        return String::new();
    };
    // The calling client's db/resp/cmd are only written back after the call.
    let (db, resp, cmd) = match cur {
        Some((ctx, name)) if ctx.client_id == id => (ctx.db, ctx.proto, name.to_string()),
        _ => (
            c.db,
            c.resp,
            c.last_cmd
                .map_or_else(|| "NULL".to_string(), |r| r.full_name()),
        ),
    };
    let name = c
        .name
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let age = (now - c.created_ms).max(0) / 1000;
    let idle = (now - c.last_interaction_ms).max(0) / 1000;
    let qbuf = c.parser.pending_bytes();
    format!(
        "id={id} addr={} laddr={} fd={} name={name} age={age} idle={idle} flags=N db={db} sub=0 psub=0 ssub=0 multi=-1 qbuf={qbuf} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem={} events=r cmd={cmd} user=default redir=-1 resp={resp}",
        c.addr,
        c.laddr,
        c.fd,
        2048 + c.parser.buffered_capacity()
    )
}

fn client_list(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut ids: Vec<ClientId> = server.clients.keys().copied().collect();
    let mut j = 2;
    while j < ctx.argc() {
        if eq(ctx.arg(j), "type") && j + 1 < ctx.argc() {
            let t = ctx.arg(j + 1).to_ascii_lowercase();
            match t.as_slice() {
                b"normal" => {}
                b"master" | b"replica" | b"slave" | b"pubsub" => ids.clear(),
                _ => {
                    let m = format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(c_str(ctx.arg(j + 1), 128))
                    );
                    return ctx.err(&m);
                }
            }
            j += 2;
        } else if eq(ctx.arg(j), "id") && j + 1 < ctx.argc() {
            let mut wanted = Vec::new();
            for k in j + 1..ctx.argc() {
                match string2ll(ctx.arg(k)) {
                    Some(v) if v > 0 => wanted.push(v as u64),
                    _ => return ctx.err("ERR Invalid client ID"),
                }
            }
            ids.retain(|i| wanted.contains(i));
            j = ctx.argc();
        } else {
            return ctx.syntax();
        }
    }
    let mut text = String::new();
    for id in ids {
        text.push_str(&client_line(
            server,
            id,
            ctx.now,
            Some((ctx, "client|list")),
        ));
        text.push('\n');
    }
    resp::write_verbatim(ctx.out, text.as_bytes(), ctx.proto);
}

fn client_info(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut text = client_line(server, ctx.client_id, ctx.now, Some((ctx, "client|info")));
    text.push('\n');
    resp::write_verbatim(ctx.out, text.as_bytes(), ctx.proto);
}

fn client_kill(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() == 3 {
        // Old form: CLIENT KILL ip:port
        let addr = ctx.arg(2).to_vec();
        let found = server
            .clients
            .values()
            .find(|c| c.addr.as_bytes() == addr.as_slice())
            .map(|c| c.id);
        return match found {
            None => ctx.err("ERR No such client"),
            Some(id) => {
                ctx.ok();
                if id == ctx.client_id {
                    ctx.close = true;
                } else {
                    server.schedule_close(id);
                }
            }
        };
    }
    let mut id_f: Option<u64> = None;
    let mut addr_f: Option<Vec<u8>> = None;
    let mut laddr_f: Option<Vec<u8>> = None;
    let mut skipme = true;
    let mut type_none = false;
    let mut j = 2;
    while j < ctx.argc() {
        if j + 1 >= ctx.argc() {
            return ctx.syntax();
        }
        let (opt, val) = (ctx.arg(j).to_vec(), ctx.arg(j + 1).to_vec());
        if eq(&opt, "id") {
            match string2ll(&val) {
                Some(v) if v > 0 => id_f = Some(v as u64),
                _ => return ctx.err("ERR client-id should be greater than 0"),
            }
        } else if eq(&opt, "addr") {
            addr_f = Some(val);
        } else if eq(&opt, "laddr") {
            laddr_f = Some(val);
        } else if eq(&opt, "type") {
            let t = val.to_ascii_lowercase();
            match t.as_slice() {
                b"normal" => {}
                b"master" | b"replica" | b"slave" | b"pubsub" => type_none = true,
                _ => {
                    let m = format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(c_str(&val, 128))
                    );
                    return ctx.err(&m);
                }
            }
        } else if eq(&opt, "user") {
            if val != b"default" {
                let m = format!(
                    "ERR No such user '{}'",
                    String::from_utf8_lossy(c_str(&val, 128))
                );
                return ctx.err(&m);
            }
        } else if eq(&opt, "skipme") {
            if eq(&val, "yes") {
                skipme = true;
            } else if eq(&val, "no") {
                skipme = false;
            } else {
                return ctx.syntax();
            }
        } else {
            return ctx.syntax();
        }
        j += 2;
    }
    let victims: Vec<ClientId> = if type_none {
        Vec::new()
    } else {
        server
            .clients
            .values()
            .filter(|c| id_f.is_none_or(|i| c.id == i))
            .filter(|c| addr_f.as_deref().is_none_or(|a| c.addr.as_bytes() == a))
            .filter(|c| laddr_f.as_deref().is_none_or(|a| c.laddr.as_bytes() == a))
            .filter(|c| !(skipme && c.id == ctx.client_id))
            .map(|c| c.id)
            .collect()
    };
    for &v in &victims {
        if v == ctx.client_id {
            ctx.close = true;
        } else {
            server.schedule_close(v);
        }
    }
    ctx.int(victims.len() as i64);
}

fn client_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "CLIENT",
        &[
            "GETNAME",
            "ID",
            "INFO",
            "KILL <ip:port>",
            "KILL <option> <value> [<option> <value> [...]]",
            "LIST [TYPE <type>] [ID <id> [<id> ...]]",
            "SETNAME <name>",
        ],
    );
}

// ------------------------------------------------------------ strings

fn get(server: &mut Server, ctx: &mut Ctx<'_>) {
    match server.dbs[ctx.db].lookup_read(ctx.arg(1), ctx.now) {
        Some(e) => resp::write_bulk(ctx.out, e.value),
        None => ctx.null(),
    }
}

const F_NX: u32 = 1;
const F_XX: u32 = 2;
const F_GET: u32 = 4;
const F_KEEPTTL: u32 = 8;
const F_PERSIST: u32 = 16;
const F_EX: u32 = 32;
const F_PX: u32 = 64;
const F_EXAT: u32 = 128;
const F_PXAT: u32 = 256;
const F_ANY_EXPIRE: u32 = F_EX | F_PX | F_EXAT | F_PXAT;

/// The flag of an expire option of SET / GETEX (`EX PX EXAT PXAT`).
fn expire_option(opt: &[u8]) -> Option<u32> {
    [
        ("ex", F_EX),
        ("px", F_PX),
        ("exat", F_EXAT),
        ("pxat", F_PXAT),
    ]
    .into_iter()
    .find(|(name, _)| eq(opt, name))
    .map(|(_, f)| f)
}

/// Redis's `parseExtendedStringArgumentsOrReply` (SET: `is_set`, GETEX
/// otherwise). Returns flags and the index of the expire argument.
fn parse_string_args(
    ctx: &mut Ctx<'_>,
    start: usize,
    is_set: bool,
) -> Option<(u32, Option<usize>)> {
    let mut flags = 0u32;
    let mut expire = None;
    let mut j = start;
    while j < ctx.argc() {
        let opt = ctx.arg(j);
        let has_next = j + 1 < ctx.argc();
        if eq(opt, "nx") && flags & F_XX == 0 && is_set {
            flags |= F_NX;
        } else if eq(opt, "xx") && flags & F_NX == 0 && is_set {
            flags |= F_XX;
        } else if eq(opt, "get") && is_set {
            flags |= F_GET;
        } else if eq(opt, "keepttl") && flags & (F_PERSIST | F_ANY_EXPIRE) == 0 && is_set {
            flags |= F_KEEPTTL;
        } else if eq(opt, "persist") && !is_set && flags & (F_ANY_EXPIRE | F_KEEPTTL) == 0 {
            flags |= F_PERSIST;
        } else if let Some(f) = has_next
            .then(|| expire_option(opt))
            .flatten()
            // One expire option; repeating the same one is accepted, as Redis does.
            .filter(|&f| flags & (F_KEEPTTL | F_PERSIST | (F_ANY_EXPIRE & !f)) == 0)
        {
            flags |= f;
            expire = Some(j + 1);
            j += 1;
        } else {
            ctx.syntax();
            return None;
        }
        j += 1;
    }
    Some((flags, expire))
}

/// Redis's `getExpireMillisecondsOrReply`: absolute ms, or an error reply.
fn expire_ms(ctx: &mut Ctx<'_>, arg: usize, flags: u32, cmd: &str) -> Option<i64> {
    let v = parse_ll(ctx, arg)?;
    let seconds = flags & (F_EX | F_EXAT) != 0;
    if v <= 0 || (seconds && v > i64::MAX / 1000) {
        expire_error(ctx, cmd);
        return None;
    }
    let mut ms = if seconds { v * 1000 } else { v };
    if flags & (F_EX | F_PX) != 0 {
        match ms.checked_add(ctx.now) {
            Some(m) => ms = m,
            None => {
                expire_error(ctx, cmd);
                return None;
            }
        }
    }
    if ms <= 0 {
        expire_error(ctx, cmd);
        return None;
    }
    Some(ms)
}

/// Redis's `setGenericCommand`.
#[allow(clippy::too_many_arguments)]
fn set_generic(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    flags: u32,
    key: usize,
    val: usize,
    expire: Option<usize>,
    cmd: &str,
    replies: Option<(i64, i64)>,
) {
    let when = match expire {
        Some(i) => match expire_ms(ctx, i, flags, cmd) {
            Some(w) => Some(w),
            None => return,
        },
        None => None,
    };
    let (key, value) = (ctx.arg(key), ctx.arg(val));
    // One hash and lookup (with lazy expiry) for the whole command.
    let d = &mut server.dbs[ctx.db];
    let p = d.probe(key, ctx.now);
    let found = p.found();
    if flags & F_GET != 0 {
        d.count_read(found);
        match d.probed_value(&p) {
            Some(v) => resp::write_bulk(ctx.out, v),
            None => ctx.null(),
        }
    }
    if (flags & F_NX != 0 && found) || (flags & F_XX != 0 && !found) {
        if flags & F_GET == 0 {
            match replies {
                Some((_, abort)) => ctx.int(abort),
                None => ctx.null(),
            }
        }
        return;
    }
    let p = d.set_probed(p, key, value, flags & F_KEEPTTL != 0);
    if let Some(w) = when {
        d.set_expire_probed(&p, w);
    }
    server.dirty += 1;
    if flags & F_GET == 0 {
        match replies {
            Some((ok, _)) => ctx.int(ok),
            None => ctx.ok(),
        }
    }
}

fn set(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some((flags, expire)) = parse_string_args(ctx, 3, true) else {
        return;
    };
    set_generic(server, ctx, flags, 1, 2, expire, "set", None);
}

fn setnx(server: &mut Server, ctx: &mut Ctx<'_>) {
    set_generic(server, ctx, F_NX, 1, 2, None, "setnx", Some((1, 0)));
}

fn setex(server: &mut Server, ctx: &mut Ctx<'_>) {
    set_generic(server, ctx, F_EX, 1, 3, Some(2), "setex", None);
}

fn psetex(server: &mut Server, ctx: &mut Ctx<'_>) {
    set_generic(server, ctx, F_PX, 1, 3, Some(2), "psetex", None);
}

fn getset(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let old = server.dbs[db]
        .lookup_read(&key, now)
        .map(|e| e.value.to_vec());
    match old {
        Some(v) => ctx.bulk(&v),
        None => ctx.null(),
    }
    server.dbs[db].set(&key, ctx.arg(2).to_vec(), false);
    server.dirty += 1;
}

fn getdel(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let old = server.dbs[db]
        .lookup_read(&key, now)
        .map(|e| e.value.to_vec());
    match old {
        Some(v) => {
            ctx.bulk(&v);
            server.dbs[db].remove(&key);
            server.dirty += 1;
        }
        None => ctx.null(),
    }
}

fn getex(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some((flags, expire)) = parse_string_args(ctx, 2, false) else {
        return;
    };
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let Some(v) = server.dbs[db]
        .lookup_read(&key, now)
        .map(|e| e.value.to_vec())
    else {
        return ctx.null();
    };
    let when = match expire {
        Some(i) => match expire_ms(ctx, i, flags, "getex") {
            Some(w) => Some(w),
            None => return,
        },
        None => None,
    };
    ctx.bulk(&v);
    let d = &mut server.dbs[db];
    if let Some(w) = when {
        if flags & (F_EXAT | F_PXAT) != 0 && w <= now {
            d.remove(&key);
        } else {
            d.set_expire(&key, w);
        }
        server.dirty += 1;
    } else if flags & F_PERSIST != 0 && d.remove_expire(&key) {
        server.dirty += 1;
    }
}

fn mget(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    ctx.array(ctx.argc() - 1);
    for i in 1..ctx.argc() {
        match server.dbs[db].lookup_read(ctx.arg(i), now) {
            Some(e) => resp::write_bulk(ctx.out, e.value),
            None => ctx.null(),
        }
    }
}

fn mset_generic(server: &mut Server, ctx: &mut Ctx<'_>, nx: bool, name: &str) {
    if ctx.argc() % 2 == 0 {
        return ctx.err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let (db, now) = (ctx.db, ctx.now);
    if nx
        && (1..ctx.argc())
            .step_by(2)
            .any(|i| server.dbs[db].exists(&ctx.argv[i], now))
    {
        return ctx.int(0);
    }
    for i in (1..ctx.argc()).step_by(2) {
        server.dbs[db].set(ctx.arg(i), ctx.arg(i + 1).to_vec(), false);
        server.dirty += 1;
    }
    if nx {
        ctx.int(1)
    } else {
        ctx.ok()
    }
}

fn mset(server: &mut Server, ctx: &mut Ctx<'_>) {
    mset_generic(server, ctx, false, "mset");
}

fn msetnx(server: &mut Server, ctx: &mut Ctx<'_>) {
    mset_generic(server, ctx, true, "msetnx");
}

fn check_len(server: &Server, ctx: &mut Ctx<'_>, a: u64, b: u64) -> bool {
    if a.saturating_add(b) > server.config.proto_max_bulk_len {
        ctx.err(ERR_BULK_LEN);
        return false;
    }
    true
}

fn append(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let add = ctx.arg(2).to_vec();
    let cur = server.dbs[db]
        .lookup_write(&key, now)
        .map(|e| e.value.len());
    let len = match cur {
        None => {
            let n = add.len();
            server.dbs[db].set(&key, add, false);
            n
        }
        Some(l) => {
            if !check_len(server, ctx, l as u64, add.len() as u64) {
                return;
            }
            server.dbs[db]
                .update_value(&key, now, |v| {
                    v.extend_from_slice(&add);
                    v.len()
                })
                .unwrap_or(0)
        }
    };
    server.dirty += 1;
    ctx.int(len as i64);
}

fn strlen(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let n = server.dbs[db]
        .lookup_read(ctx.arg(1), now)
        .map_or(0, |e| e.value.len());
    ctx.int(n as i64);
}

fn incr_decr(server: &mut Server, ctx: &mut Ctx<'_>, by: i64) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let cur = match server.dbs[db].lookup_write(&key, now) {
        None => None,
        Some(e) => match string2ll(e.value) {
            Some(v) => Some(v),
            None => return ctx.err(ERR_NOT_INT),
        },
    };
    let old = cur.unwrap_or(0);
    let Some(new) = old.checked_add(by) else {
        return ctx.err(ERR_OVERFLOW);
    };
    let bytes = new.to_string().into_bytes();
    if cur.is_some() {
        server.dbs[db].update_value(&key, now, |v| *v = bytes);
    } else {
        server.dbs[db].set(&key, bytes, false);
    }
    server.dirty += 1;
    ctx.int(new);
}

fn incr(server: &mut Server, ctx: &mut Ctx<'_>) {
    incr_decr(server, ctx, 1);
}

fn decr(server: &mut Server, ctx: &mut Ctx<'_>) {
    incr_decr(server, ctx, -1);
}

fn incrby(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(by) = parse_ll(ctx, 2) else { return };
    incr_decr(server, ctx, by);
}

fn decrby(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(by) = parse_ll(ctx, 2) else { return };
    if by == i64::MIN {
        return ctx.err("ERR decrement would overflow");
    }
    incr_decr(server, ctx, -by);
}

fn incrbyfloat(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let cur = server.dbs[db]
        .lookup_write(&key, now)
        .map(|e| e.value.to_vec());
    let exists = cur.is_some();
    let new = match incr_by_float(cur.as_deref().unwrap_or(b"0"), ctx.arg(2)) {
        Ok(s) => s.into_bytes(),
        Err(e) => return ctx.err(e),
    };
    if exists {
        let n = new.clone();
        server.dbs[db].update_value(&key, now, |v| *v = n);
    } else {
        server.dbs[db].set(&key, new.clone(), false);
    }
    server.dirty += 1;
    ctx.bulk(&new);
}

fn getrange(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(mut start) = parse_ll(ctx, 2) else {
        return;
    };
    let Some(mut end) = parse_ll(ctx, 3) else {
        return;
    };
    let (db, now) = (ctx.db, ctx.now);
    let Some(v) = server.dbs[db]
        .lookup_read(ctx.arg(1), now)
        .map(|e| e.value.to_vec())
    else {
        return ctx.bulk(b"");
    };
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return ctx.bulk(b"");
    }
    if start < 0 {
        start = len.saturating_add(start);
    }
    if end < 0 {
        end = len.saturating_add(end);
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return ctx.bulk(b"");
    }
    ctx.bulk(&v[start as usize..=end as usize]);
}

fn setrange(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(offset) = parse_ll(ctx, 2) else {
        return;
    };
    if offset < 0 {
        return ctx.err("ERR offset is out of range");
    }
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let val = ctx.arg(3).to_vec();
    let cur = server.dbs[db]
        .lookup_write(&key, now)
        .map(|e| e.value.len());
    let olen = cur.unwrap_or(0);
    if val.is_empty() {
        return ctx.int(olen as i64);
    }
    if !check_len(server, ctx, offset as u64, val.len() as u64) {
        return;
    }
    let off = offset as usize;
    let write = |v: &mut Vec<u8>| {
        let need = off + val.len();
        if v.len() < need {
            v.resize(need, 0);
        }
        v[off..need].copy_from_slice(&val);
        v.len()
    };
    let n = if cur.is_some() {
        server.dbs[db].update_value(&key, now, write).unwrap_or(0)
    } else {
        let mut v = Vec::new();
        let n = write(&mut v);
        server.dbs[db].set(&key, v, false);
        n
    };
    server.dirty += 1;
    ctx.int(n as i64);
}

// ------------------------------------------------------------ keyspace

fn del(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let mut n = 0;
    for k in ctx.argv.iter().skip(1) {
        if server.dbs[db].delete(k, now) {
            n += 1;
        }
    }
    server.dirty += n as u64;
    ctx.int(n);
}

fn exists(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let n = ctx
        .argv
        .iter()
        .skip(1)
        .filter(|k| server.dbs[db].lookup_read(k, now).is_some())
        .count();
    ctx.int(n as i64);
}

fn type_cmd(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let found = server.dbs[db].lookup_read(ctx.arg(1), now).is_some();
    ctx.simple(if found { "string" } else { "none" });
}

fn rename_generic(server: &mut Server, ctx: &mut Ctx<'_>, nx: bool) {
    let (db, now) = (ctx.db, ctx.now);
    let (src, dst) = (ctx.arg(1).to_vec(), ctx.arg(2).to_vec());
    if !server.dbs[db].exists(&src, now) {
        return ctx.err(ERR_NO_SUCH_KEY);
    }
    if src == dst {
        return if nx { ctx.int(0) } else { ctx.ok() };
    }
    if server.dbs[db].exists(&dst, now) && nx {
        return ctx.int(0);
    }
    server.dbs[db].rename(&src, &dst);
    server.dirty += 1;
    if nx {
        ctx.int(1)
    } else {
        ctx.ok()
    }
}

fn rename(server: &mut Server, ctx: &mut Ctx<'_>) {
    rename_generic(server, ctx, false);
}

fn renamenx(server: &mut Server, ctx: &mut Ctx<'_>) {
    rename_generic(server, ctx, true);
}

fn keys(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let ks = server.dbs[db].keys_matching(ctx.arg(1), now);
    ctx.array(ks.len());
    for k in ks {
        ctx.bulk(&k);
    }
}

fn scan(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(cursor) = parse_cursor(ctx.arg(1)) else {
        return ctx.err("ERR invalid cursor");
    };
    let mut count: i64 = 10;
    let mut pattern: Option<Vec<u8>> = None;
    let mut type_ok = true;
    let mut j = 2;
    while j < ctx.argc() {
        let more = ctx.argc() - j - 1;
        if eq(ctx.arg(j), "count") && more >= 1 {
            let Some(c) = parse_ll(ctx, j + 1) else {
                return;
            };
            if c < 1 {
                return ctx.syntax();
            }
            count = c;
        } else if eq(ctx.arg(j), "match") && more >= 1 {
            let p = ctx.arg(j + 1).to_vec();
            pattern = if p == b"*" { None } else { Some(p) };
        } else if eq(ctx.arg(j), "type") && more >= 1 {
            type_ok = eq(ctx.arg(j + 1), "string");
        } else {
            return ctx.syntax();
        }
        j += 2;
    }
    let (db, now) = (ctx.db, ctx.now);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let (next, ks) = server.dbs[db].scan(cursor, count, pattern.as_deref(), type_ok, now);
    ctx.array(2);
    ctx.bulk(next.to_string().as_bytes());
    ctx.array(ks.len());
    for k in ks {
        ctx.bulk(&k);
    }
}

fn randomkey(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    match server.dbs[db].random_key(now) {
        Some(k) => ctx.bulk(&k),
        None => ctx.null(),
    }
}

const E_NX: u32 = 1;
const E_XX: u32 = 2;
const E_GT: u32 = 4;
const E_LT: u32 = 8;

/// Redis's `expireGenericCommand`. `base` is added to the given time
/// (now for relative forms, 0 for absolute), `seconds` selects the unit.
fn expire_generic(server: &mut Server, ctx: &mut Ctx<'_>, base: i64, seconds: bool, cmd: &str) {
    let mut flags = 0;
    for j in 3..ctx.argc() {
        let o = ctx.arg(j);
        if eq(o, "nx") {
            flags |= E_NX;
        } else if eq(o, "xx") {
            flags |= E_XX;
        } else if eq(o, "gt") {
            flags |= E_GT;
        } else if eq(o, "lt") {
            flags |= E_LT;
        } else {
            let m = format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(c_str(o, 128))
            );
            return ctx.err(&m);
        }
    }
    if flags & E_NX != 0 && flags & (E_XX | E_GT | E_LT) != 0 {
        return ctx.err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if flags & E_GT != 0 && flags & E_LT != 0 {
        return ctx.err("ERR GT and LT options at the same time are not compatible");
    }
    let Some(mut when) = parse_ll(ctx, 2) else {
        return;
    };
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return expire_error(ctx, cmd);
        }
        when *= 1000;
    }
    let Some(w) = when.checked_add(base) else {
        return expire_error(ctx, cmd);
    };
    when = w;
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let d = &mut server.dbs[db];
    if !d.exists(&key, now) {
        return ctx.int(0);
    }
    if flags != 0 {
        let cur = d.get_expire(&key);
        if flags & E_NX != 0 && cur.is_some() {
            return ctx.int(0);
        }
        if flags & E_XX != 0 && cur.is_none() {
            return ctx.int(0);
        }
        if flags & E_GT != 0 && cur.is_none_or(|c| when <= c) {
            return ctx.int(0);
        }
        if flags & E_LT != 0 && cur.is_some_and(|c| when >= c) {
            return ctx.int(0);
        }
    }
    if when <= now {
        d.remove(&key);
    } else {
        d.set_expire(&key, when);
    }
    server.dirty += 1;
    ctx.int(1);
}

fn expire(server: &mut Server, ctx: &mut Ctx<'_>) {
    let now = ctx.now;
    expire_generic(server, ctx, now, true, "expire");
}

fn pexpire(server: &mut Server, ctx: &mut Ctx<'_>) {
    let now = ctx.now;
    expire_generic(server, ctx, now, false, "pexpire");
}

fn expireat(server: &mut Server, ctx: &mut Ctx<'_>) {
    expire_generic(server, ctx, 0, true, "expireat");
}

fn pexpireat(server: &mut Server, ctx: &mut Ctx<'_>) {
    expire_generic(server, ctx, 0, false, "pexpireat");
}

/// Redis's `ttlGenericCommand`.
fn ttl_generic(server: &mut Server, ctx: &mut Ctx<'_>, ms: bool, abs: bool) {
    let (db, now) = (ctx.db, ctx.now);
    let Some(exp) = server.dbs[db]
        .lookup_read(ctx.arg(1), now)
        .map(|e| e.expire())
    else {
        return ctx.int(-2);
    };
    let Some(exp) = exp else { return ctx.int(-1) };
    let t = if abs { exp } else { (exp - now).max(0) };
    ctx.int(if ms { t } else { (t + 500) / 1000 });
}

fn ttl(server: &mut Server, ctx: &mut Ctx<'_>) {
    ttl_generic(server, ctx, false, false);
}

fn pttl(server: &mut Server, ctx: &mut Ctx<'_>) {
    ttl_generic(server, ctx, true, false);
}

fn expiretime(server: &mut Server, ctx: &mut Ctx<'_>) {
    ttl_generic(server, ctx, false, true);
}

fn pexpiretime(server: &mut Server, ctx: &mut Ctx<'_>) {
    ttl_generic(server, ctx, true, true);
}

fn persist(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let d = &mut server.dbs[db];
    if d.exists(&key, now) && d.remove_expire(&key) {
        server.dirty += 1;
        ctx.int(1)
    } else {
        ctx.int(0)
    }
}
