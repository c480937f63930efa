//! The command table and what every command shares: [`CommandSpec`],
//! the per-call [`Ctx`] and its reply helpers, the error texts, and the
//! lookup table. The commands live in one module per Redis source file
//! (`t_string`, `keyspace`, `server_cmds`, `config`, `client`,
//! `command_docs`, ...); each exports its `COMMANDS` slice and [`TABLES`]
//! assembles them.

use crate::resp::{self, Argv, Proto};
use crate::server::{ClientId, Server};
use crate::util::string2ll;

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
    /// The command changed the client's MULTI / pub/sub / AUTH state: the
    /// server re-reads the client's gate flags after it.
    pub resync: bool,
    /// Run by EXEC: a blocking command must not block (it answers as if
    /// timed out).
    pub deny_blocking: bool,
}

impl<'a> Ctx<'a> {
    pub(crate) fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }
    pub(crate) fn simple(&mut self, s: &str) {
        resp::write_simple(self.out, s.as_bytes());
    }
    pub(crate) fn err(&mut self, msg: &str) {
        self.errors += 1;
        resp::write_error(self.out, msg.as_bytes());
    }
    pub(crate) fn int(&mut self, n: i64) {
        resp::write_int(self.out, n);
    }
    pub(crate) fn bulk(&mut self, b: &[u8]) {
        resp::write_bulk(self.out, b);
    }
    pub(crate) fn null(&mut self) {
        resp::write_null(self.out, self.proto);
    }
    pub(crate) fn array(&mut self, n: usize) {
        resp::write_array_len(self.out, n);
    }
    pub(crate) fn map(&mut self, n: usize) {
        resp::write_map_len(self.out, n, self.proto);
    }
    pub(crate) fn set_len(&mut self, n: usize) {
        resp::write_set_len(self.out, n, self.proto);
    }
    /// Argument `i` (empty if missing), borrowed from the input, not
    /// from `self`: replies can be written while it is held.
    pub(crate) fn arg(&self, i: usize) -> &'a [u8] {
        self.argv.get(i).unwrap_or_default()
    }
    pub(crate) fn argc(&self) -> usize {
        self.argv.len()
    }
    pub(crate) fn syntax(&mut self) {
        self.err(ERR_SYNTAX);
    }
}

/// An error reply was written (the command stops there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replied;

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
pub(crate) fn c_str(b: &[u8], n: usize) -> &[u8] {
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

/// `ERR unknown subcommand 'x'. Try CONFIG HELP.`: the command as the
/// client named it (a `rename-command` name), upper-cased.
pub(crate) fn unknown_subcommand_error(name: &[u8], sub: &[u8]) -> Vec<u8> {
    let mut m = b"ERR unknown subcommand '".to_vec();
    m.extend_from_slice(c_str(sub, 128));
    m.extend_from_slice(b"'. Try ");
    m.extend_from_slice(&name.to_ascii_uppercase());
    m.extend_from_slice(b" HELP.");
    m
}

/// A resolved command: the spec that runs, and its container command for
/// a subcommand (`CLIENT LIST`: `client` and `list`).
#[derive(Clone, Copy, Debug)]
pub struct Resolved {
    pub parent: Option<&'static CommandSpec>,
    pub spec: &'static CommandSpec,
    /// Its slot in the command table's statistics ([`CommandTable::ids`]).
    pub id: u32,
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
/// at most a quarter full, indexed by a multiplicative hash of the
/// case-folded name read a word at a time (see [`name_hash`]). The
/// names are fixed and few, so a simple hash is enough: no input can make
/// the table longer, only a miss probe a few slots. Each slot keeps its
/// name's full hash, so a probe past another command costs one integer
/// compare, not a case-insensitive name compare (with 240 commands, GET
/// and SET each passed several); a name of at most 8 bytes (most of them)
/// is then compared as one word (see [`Slot`]).
///
/// `rename-command` gives a command another name (or none): the table is
/// built from the renamed list, so the lookup costs the same.
#[derive(Debug)]
pub(crate) struct CommandTable {
    slots: Vec<Option<Slot>>,
    /// The names, lowercased, by [`Slot::name_ix`] (compared for names
    /// longer than 8 bytes).
    names: Vec<Box<[u8]>>,
    /// Every command and subcommand by id: a command's id is its
    /// `name_ix`; its subcommands' follow all commands, from `sub_base`.
    ids: Vec<Resolved>,
    sub_base: Vec<u32>,
}

/// A command in the table: its name's hash and length, and for a name of
/// at most 8 bytes the lowercased name as a word ([`name_word`]) with bit
/// 5 set in `fold` at its letters: `name_word(input) | fold == word` is
/// then exactly `eq_ignore_ascii_case` (a letter matches either case,
/// anything else only itself).
#[derive(Clone, Copy, Debug)]
struct Slot {
    hash: u32,
    len: u32,
    word: u64,
    fold: u64,
    name_ix: u32,
    spec: &'static CommandSpec,
}

/// Bit 5 of every byte: ORed in, it folds ASCII upper case to lower case
/// (and a few punctuation pairs together, which the name compare after the
/// hash tells apart), so the hash is case-insensitive without a per-byte
/// `to_ascii_lowercase`.
const FOLD: u64 = 0x2020_2020_2020_2020;
const NAME_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// Eight bytes of `b` from `i` (little-endian; zero if out of range).
#[inline(always)]
fn word8(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
        .map_or(0, u64::from_le_bytes)
}

/// Four bytes of `b` from `i` (little-endian; zero if out of range).
#[inline(always)]
fn word4(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 4)
        .and_then(|w| <[u8; 4]>::try_from(w).ok())
        .map_or(0, |w| u64::from(u32::from_le_bytes(w)))
}

/// A name of 1 to 8 bytes as one word, each byte at fixed positions for
/// its length (so, lengths being equal, words are equal exactly when the
/// bytes are): 4 to 8 bytes zero-padded little-endian from two
/// overlapping loads, 1 to 3 bytes as `b[0]`, `b[n/2]`, `b[n-1]` (as
/// wyhash reads them), no byte loop either way.
#[inline(always)]
fn name_word(b: &[u8]) -> u64 {
    let n = b.len();
    if n >= 8 {
        word8(b, 0)
    } else if n >= 4 {
        word4(b, 0) | (word4(b, n - 4) << (8 * (n - 4)))
    } else if n > 0 {
        u64::from(b[0]) | (u64::from(b[n / 2]) << 8) | (u64::from(b[n - 1]) << 16)
    } else {
        0
    }
}

/// Case-insensitive hash of a command name: the folded bytes a word at a
/// time, each word mixed by one multiply, seeded with the length. A GET or
/// SET name costs about a dozen instructions, against a per-byte loop.
#[inline(always)]
fn name_hash(name: &[u8]) -> u32 {
    let n = name.len();
    if n <= 8 {
        return short_hash(n, name_word(name));
    }
    let mut h = (n as u64).wrapping_mul(NAME_MUL);
    let mut i = 0;
    while i + 8 < n {
        h = mix(h, word8(name, i));
        i += 8;
    }
    h = mix(h, word8(name, n - 8));
    (h >> 32) as u32
}

/// [`name_hash`] of a name of `n` <= 8 bytes whose [`name_word`] is `w`.
#[inline(always)]
fn short_hash(n: usize, w: u64) -> u32 {
    (mix((n as u64).wrapping_mul(NAME_MUL), w) >> 32) as u32
}

/// One word of [`name_hash`]: folded, then mixed in by a multiply.
#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ (w | FOLD)).wrapping_mul(NAME_MUL)
}

impl CommandTable {
    pub(crate) fn new(specs: impl Iterator<Item = &'static CommandSpec> + Clone) -> CommandTable {
        Self::build(specs.map(|s| (s.name.as_bytes().to_vec(), s)).collect())
    }

    /// The table after redis.conf's `rename-command` lines (`(old, new)`;
    /// an empty new name removes the command). `Err` is Redis's message.
    pub(crate) fn with_renames(
        specs: impl Iterator<Item = &'static CommandSpec>,
        renames: &[(String, String)],
    ) -> Result<CommandTable, &'static str> {
        let mut list: Vec<(Vec<u8>, &'static CommandSpec)> =
            specs.map(|s| (s.name.as_bytes().to_vec(), s)).collect();
        for (old, new) in renames {
            let old = old.as_bytes().to_ascii_lowercase();
            let i = list
                .iter()
                .position(|(n, _)| *n == old)
                .ok_or("No such command in rename-command")?;
            let (_, spec) = list.remove(i);
            if !new.is_empty() {
                let new = new.as_bytes().to_ascii_lowercase();
                if list.iter().any(|(n, _)| *n == new) {
                    return Err("Target command name already exists");
                }
                list.push((new, spec));
            }
        }
        Ok(Self::build(list))
    }

    fn build(list: Vec<(Vec<u8>, &'static CommandSpec)>) -> CommandTable {
        let size = (list.len() * 4).max(1).next_power_of_two();
        let mut slots = vec![None; size];
        let mut names = Vec::with_capacity(list.len());
        let mut ids: Vec<Resolved> = Vec::new();
        for (i, (_, spec)) in list.iter().enumerate() {
            ids.push(Resolved {
                parent: None,
                spec,
                id: i as u32,
            });
        }
        let mut sub_base = Vec::with_capacity(list.len());
        for (_, spec) in &list {
            sub_base.push(ids.len() as u32);
            for sub in spec.subcommands {
                let id = ids.len() as u32;
                ids.push(Resolved {
                    parent: Some(spec),
                    spec: sub,
                    id,
                });
            }
        }
        for (name, spec) in list {
            let h = name_hash(&name);
            let lower = name.to_ascii_lowercase();
            let letters: Vec<u8> = lower
                .iter()
                .map(|b| if b.is_ascii_lowercase() { 0x20 } else { 0 })
                .collect();
            let mut i = h as usize & (size - 1);
            while slots[i].is_some() {
                i = (i + 1) & (size - 1);
            }
            slots[i] = Some(Slot {
                hash: h,
                len: name.len() as u32,
                word: name_word(&lower),
                fold: name_word(&letters),
                name_ix: names.len() as u32,
                spec,
            });
            names.push(lower.into_boxed_slice());
        }
        CommandTable {
            slots,
            names,
            ids,
            sub_base,
        }
    }

    /// Every command and subcommand in the table, by id.
    pub(crate) fn ids(&self) -> &[Resolved] {
        &self.ids
    }

    /// The id of subcommand `pos` of the command with id `top`.
    pub(crate) fn sub_id(&self, top: u32, pos: usize) -> u32 {
        self.sub_base.get(top as usize).copied().unwrap_or(0) + pos as u32
    }

    #[inline(always)]
    pub(crate) fn get(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        self.get_id(name).map(|(s, _)| s)
    }

    /// [`CommandTable::get`] with the command's id.
    #[inline(always)]
    pub(crate) fn get_id(&self, name: &[u8]) -> Option<(&'static CommandSpec, u32)> {
        let mask = self.slots.len() - 1;
        // A short name's word serves both the hash and the compare.
        let n = name.len();
        let w = if n <= 8 { name_word(name) } else { 0 };
        let h = if n <= 8 {
            short_hash(n, w)
        } else {
            name_hash(name)
        };
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i]?;
            if s.hash == h && s.len as usize == n {
                let same = if n <= 8 {
                    w | s.fold == s.word
                } else {
                    self.names
                        .get(s.name_ix as usize)
                        .is_some_and(|x| x.eq_ignore_ascii_case(name))
                };
                if same {
                    return Some((s.spec, s.name_ix));
                }
            }
            i = (i + 1) & mask;
        }
    }
}

pub(crate) fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

pub(crate) fn parse_ll(ctx: &mut Ctx<'_>, i: usize) -> Option<i64> {
    let v = string2ll(ctx.arg(i));
    if v.is_none() {
        ctx.err(ERR_NOT_INT);
    }
    v
}

pub(crate) fn expire_error(ctx: &mut Ctx<'_>, cmd: &str) {
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
pub(crate) use spec;

pub(crate) const RO: &[&str] = &["readonly", "fast"];
pub(crate) const RO_SLOW: &[&str] = &["readonly"];
pub(crate) const WR: &[&str] = &["write", "denyoom"];
pub(crate) const WR_FAST: &[&str] = &["write", "denyoom", "fast"];
pub(crate) const WR_NODENY: &[&str] = &["write", "fast"];
pub(crate) const ADMIN: &[&str] = &["loading", "stale"];
pub(crate) const FAST: &[&str] = &["fast", "loading", "stale"];

pub(crate) fn no_handler(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.err("ERR internal: container command without subcommand");
}

/// Every command, as the modules' slices (Redis's per-file tables); the
/// order is COMMAND's and COMMAND LIST's.
pub static TABLES: &[&[CommandSpec]] = &[
    crate::server_cmds::COMMANDS,
    crate::debug::COMMANDS,
    crate::config::COMMANDS,
    crate::command_docs::COMMANDS,
    crate::client::COMMANDS,
    crate::t_string::COMMANDS,
    crate::t_bitops::COMMANDS,
    crate::t_zset::COMMANDS,
    crate::keyspace::COMMANDS,
    crate::sort::COMMANDS,
    crate::t_hash::COMMANDS,
    crate::t_set::COMMANDS,
    crate::t_list::COMMANDS,
    crate::rdb_cmds::COMMANDS,
    crate::multi::COMMANDS,
    crate::auth::COMMANDS,
    crate::acl_cmds::COMMANDS,
    crate::pubsub::COMMANDS,
    crate::latency::COMMANDS,
    crate::memory::COMMANDS,
    crate::slowlog::COMMANDS,
];

/// All top-level commands.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> + Clone {
    TABLES.iter().flat_map(|t| t.iter())
}

/// Number of top-level commands (COMMAND COUNT).
pub fn count() -> usize {
    TABLES.iter().map(|t| t.len()).sum()
}

pub(crate) fn help_lines(ctx: &mut Ctx<'_>, cmd: &str, lines: &[&str]) {
    ctx.array(lines.len() + 3);
    ctx.simple(&format!(
        "{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        ctx.simple(l);
    }
    ctx.simple("HELP");
    ctx.simple("    Prints this help.");
}

/// SCAN-family options after the cursor (Redis's `scanGenericCommand`):
/// `COUNT n` (n >= 1) and `MATCH pattern`, in any order, repeatable.
#[derive(Debug)]
pub(crate) struct ScanOpts {
    pub count: usize,
    /// `None` for no pattern or `*`.
    pub pattern: Option<Vec<u8>>,
}

impl ScanOpts {
    pub(crate) fn matches(&self, item: &[u8]) -> bool {
        self.pattern
            .as_deref()
            .is_none_or(|p| crate::glob::stringmatch(p, item, false))
    }
}

pub(crate) fn scan_opts(ctx: &mut Ctx<'_>, from: usize) -> Result<ScanOpts, Replied> {
    let mut o = ScanOpts {
        count: 10,
        pattern: None,
    };
    let mut j = from;
    while j < ctx.argc() {
        let more = ctx.argc() - j - 1;
        if eq(ctx.arg(j), "count") && more >= 1 {
            let c = parse_ll(ctx, j + 1).ok_or(Replied)?;
            if c < 1 {
                ctx.syntax();
                return Err(Replied);
            }
            o.count = usize::try_from(c).unwrap_or(usize::MAX);
        } else if eq(ctx.arg(j), "match") && more >= 1 {
            let p = ctx.arg(j + 1);
            o.pattern = (p != b"*").then(|| p.to_vec());
        } else {
            ctx.syntax();
            return Err(Replied);
        }
        j += 2;
    }
    Ok(o)
}

/// One SCAN step over a dense order of `len` items walked from the top
/// down (the keyspace's scheme, see [`crate::db::Db::scan`]): the indexes
/// to visit and the next cursor (0: done).
pub(crate) fn dense_step(len: usize, cursor: u64, count: usize) -> (u64, std::ops::Range<usize>) {
    let len = len as u64;
    let upper = if cursor == 0 || cursor > len {
        len
    } else {
        cursor
    };
    let lower = upper.saturating_sub(count.max(1) as u64);
    (lower, lower as usize..upper as usize)
}

/// Write a SCAN reply: the cursor, then the items.
pub(crate) fn scan_reply(ctx: &mut Ctx<'_>, next: u64, items: &[&[u8]]) {
    ctx.array(2);
    ctx.bulk(next.to_string().as_bytes());
    ctx.array(items.len());
    for i in items {
        ctx.bulk(i);
    }
}

/// Redis's `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)` for the
/// random-member counts (HRANDFIELD SRANDMEMBER ZRANDMEMBER).
pub(crate) fn parse_count(ctx: &mut Ctx<'_>, i: usize) -> Result<i64, Replied> {
    let v = parse_ll(ctx, i).ok_or(Replied)?;
    if v == i64::MIN {
        ctx.err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
        return Err(Replied);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the table must answer: the spec whose name equals `name` in
    /// ASCII case-insensitive comparison (a linear search).
    fn by_search(name: &[u8]) -> Option<&'static CommandSpec> {
        all().find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }

    fn same(a: Option<&'static CommandSpec>, b: Option<&'static CommandSpec>) -> bool {
        match (a, b) {
            (Some(x), Some(y)) => std::ptr::eq(x, y),
            (None, None) => true,
            _ => false,
        }
    }

    /// Every name in upper or lower case is found; every one-byte variation of a name
    /// (bit 5 flipped, which folds punctuation pairs such as `@` and `` ` ``
    /// together in the hash, or another byte) and every prefix answers as
    /// a linear case-insensitive search does.
    #[test]
    fn table_lookup_matches_case_insensitive_search() {
        let table = CommandTable::new(all());
        for spec in all() {
            let name = spec.name.as_bytes();
            // A name defined twice (LASTSAVE is) resolves to its first
            // definition, as the search does.
            for v in [name.to_vec(), name.to_ascii_uppercase()] {
                assert!(table.get(&v).is_some(), "{}", spec.name);
                assert!(same(table.get(&v), by_search(&v)), "{}", spec.name);
            }
            for i in 0..name.len() {
                for delta in [0x20u8, 0x01, 0x40, 0x80] {
                    let mut v = name.to_vec();
                    v[i] ^= delta;
                    assert!(same(table.get(&v), by_search(&v)), "{:?}", v);
                }
                assert!(same(table.get(&name[..i]), by_search(&name[..i])));
                let mut longer = name.to_vec();
                longer.push(name[i]);
                assert!(same(table.get(&longer), by_search(&longer)));
            }
        }
        for v in [&b""[..], b"@et", b"GET\x07", b"g", b"zzzzzzzzzzzzzzzzzz"] {
            assert!(same(table.get(v), by_search(v)), "{:?}", v);
        }
    }
}
