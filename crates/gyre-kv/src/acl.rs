//! ACL basics (Redis's `acl.c`, the root selector only): users with
//! on/off, passwords (SHA-256, `>` `<` `#` `!` `nopass` `resetpass`),
//! command permissions (`+cmd` `-cmd` `+cmd|sub` `+@category`
//! `-@category` `allcommands` `nocommands`), key patterns (`~pat`
//! `%R~pat` `%W~pat` `allkeys` `resetkeys`), channel patterns (`&pat`
//! `allchannels` `resetchannels`), `reset`, `acl-pubsub-default`; and the
//! permission check every command passes (NOPERM errors). The ACL command is [`crate::acl_cmds`].
//!
//! Not here: selectors `(...)`, first-argument rules (`+select|0`);
//! ACL LOG is [`crate::acl_log`], `aclfile` and `user` lines
//! [`crate::acl_file`]. The describe form of command rules
//! (ACL LIST, GETUSER) follows Redis 7.0's algorithm — categories that
//! are mostly on (or off), then single commands — over this server's
//! command table; Redis prints the single commands in its hash table's
//! random order, this module in table order.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::cmd::{self, CommandSpec, Resolved};
use crate::glob::stringmatch;
use crate::sha256::{hex, sha256};

/// Redis's category list, in its order (ACL CAT).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Every command and subcommand with its categories; a command's index
/// is its permission bit.
pub(crate) struct CommandIndex {
    pub(crate) names: Vec<String>,
    pub(crate) cats: Vec<Vec<&'static str>>,
    /// For a container command, the range of its subcommands' indexes.
    subs: Vec<Option<(usize, usize)>>,
}

/// Categories Redis derives from flags for a command this table lacks.
fn derived_categories(spec: &CommandSpec) -> Vec<&'static str> {
    let mut v = Vec::new();
    let group = match spec.group {
        "string" => Some("string"),
        "hash" => Some("hash"),
        "list" => Some("list"),
        "set" => Some("set"),
        "sorted-set" | "sorted_set" => Some("sortedset"),
        "generic" => Some("keyspace"),
        "pubsub" => Some("pubsub"),
        "transactions" => Some("transaction"),
        "connection" => Some("connection"),
        "bitmap" => Some("bitmap"),
        _ => None,
    };
    v.extend(group);
    if spec.flags.contains(&"write") {
        v.push("write");
    }
    if spec.flags.contains(&"readonly") {
        v.push("read");
    }
    if spec.flags.contains(&"fast") {
        v.push("fast");
    } else {
        v.push("slow");
    }
    if spec.flags.contains(&"blocking") {
        v.push("blocking");
    }
    v
}

pub(crate) fn index() -> &'static CommandIndex {
    static INDEX: OnceLock<CommandIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        // Redis's table, plus any command of ours it does not have.
        let mut rows: Vec<(String, Vec<&'static str>)> = crate::acl_cats::CATEGORIES
            .iter()
            .map(|(n, c)| (n.to_string(), c.to_vec()))
            .collect();
        let known = |rows: &Vec<(String, Vec<&'static str>)>, n: &str| {
            rows.binary_search_by(|(x, _)| x.as_str().cmp(n)).is_ok()
        };
        let mut extra = Vec::new();
        for spec in cmd::all() {
            if !known(&rows, spec.name) {
                extra.push((spec.name.to_string(), derived_categories(spec)));
            }
            for sub in spec.subcommands {
                let full = format!("{}|{}", spec.name, sub.name);
                if !known(&rows, &full) {
                    extra.push((full, derived_categories(sub)));
                }
            }
        }
        rows.extend(extra);
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        let subs = names
            .iter()
            .map(|n| {
                let prefix = format!("{n}|");
                let start = names.partition_point(|x| x.as_str() < prefix.as_str());
                let end = start
                    + names[start..]
                        .iter()
                        .take_while(|x| x.starts_with(&prefix))
                        .count();
                (end > start).then_some((start, end))
            })
            .collect();
        CommandIndex {
            names,
            cats: rows.into_iter().map(|r| r.1).collect(),
            subs,
        }
    })
}

fn command_id(full: &str) -> Option<usize> {
    index()
        .names
        .binary_search_by(|n| n.as_str().cmp(full))
        .ok()
}

/// A user's key pattern with its access (`~` both, `%R~`, `%W~`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct KeyPattern {
    pat: Vec<u8>,
    read: bool,
    write: bool,
}

/// One ACL user (the root selector).
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    sanitize_payload: bool,
    pub(crate) passwords: Vec<[u8; 32]>,
    /// Permission bit per command index.
    allowed: Vec<bool>,
    /// `+@all` was the base: commands added later are allowed too.
    all_future: bool,
    allkeys: bool,
    keys: Vec<KeyPattern>,
    allchannels: bool,
    channels: Vec<Vec<u8>>,
    /// `acl-pubsub-default allchannels` (the server keeps every user's
    /// copy current): `reset` ends with `allchannels`, as in Redis.
    pub(crate) pubsub_default_all: bool,
}

impl User {
    /// A new user as `acl-pubsub-default` makes it (`all`: allchannels).
    pub(crate) fn with_default(name: &str, all: bool) -> User {
        let mut u = User::new(name);
        u.pubsub_default_all = all;
        u.allchannels = all;
        u
    }

    pub(crate) fn new(name: &str) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize_payload: false,
            passwords: Vec::new(),
            allowed: vec![false; index().names.len()],
            all_future: false,
            allkeys: false,
            keys: Vec::new(),
            allchannels: false,
            channels: Vec::new(),
            pubsub_default_all: false,
        }
    }

    /// `user default on nopass ~* &* +@all`.
    pub(crate) fn default_user() -> User {
        let mut u = User::new("default");
        u.enabled = true;
        u.nopass = true;
        u.allkeys = true;
        u.allchannels = true;
        u.set_all(true);
        u
    }

    fn set_all(&mut self, on: bool) {
        self.allowed.iter_mut().for_each(|b| *b = on);
        self.all_future = on;
    }

    fn set_command(&mut self, id: usize, on: bool) {
        self.allowed[id] = on;
        if let Some((a, b)) = index().subs[id] {
            for s in a..b {
                self.allowed[s] = on;
            }
        }
    }

    fn set_category(&mut self, cat: &str, on: bool) {
        let ix = index();
        for id in 0..ix.names.len() {
            if ix.cats[id].contains(&cat) {
                self.allowed[id] = on;
            }
        }
    }

    /// Whether a password is accepted (nopass: any).
    /// Redis's `ACLUserCheckKeyPerm(u, "*", CMD_KEY_ACCESS)`: some read
    /// pattern matches the literal key `*` (all keys readable), which
    /// SORT asks of BY and GET patterns.
    pub(crate) fn may_read_all_keys(&self) -> bool {
        self.allkeys
            || self
                .keys
                .iter()
                .any(|k| k.read && stringmatch(&k.pat, b"*", false))
    }

    fn password_ok(&self, pass: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let h = sha256(pass);
        // Every stored hash is compared, so the time does not tell which.
        let mut ok = false;
        for p in &self.passwords {
            ok |= crate::auth::constant_time_eq(p, &h);
        }
        ok
    }

    /// Redis's `ACLSetUser` for one operation; `Err` with Redis's reason.
    pub(crate) fn apply(&mut self, op: &[u8]) -> Result<(), &'static str> {
        let s = String::from_utf8_lossy(op).into_owned();
        let lower = s.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "skip-sanitize-payload" => self.sanitize_payload = false,
            "sanitize-payload" => self.sanitize_payload = true,
            "allkeys" | "~*" => {
                self.allkeys = true;
                self.keys.clear();
            }
            "resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
            }
            "allchannels" | "&*" => {
                self.allchannels = true;
                self.channels.clear();
            }
            "resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
            }
            "allcommands" | "+@all" => self.set_all(true),
            "nocommands" | "-@all" => self.set_all(false),
            "reset" => {
                for o in ["resetpass", "resetkeys", "resetchannels", "off", "-@all"] {
                    self.apply(o.as_bytes())?;
                }
                if self.pubsub_default_all {
                    self.apply(b"allchannels")?;
                }
                self.sanitize_payload = true;
            }
            _ => return self.apply_prefixed(op, &lower),
        }
        Ok(())
    }

    fn apply_prefixed(&mut self, op: &[u8], lower: &str) -> Result<(), &'static str> {
        match op.first() {
            Some(b'>') => {
                let h = sha256(&op[1..]);
                if !self.passwords.contains(&h) {
                    self.passwords.push(h);
                }
                self.nopass = false;
            }
            Some(b'<') => {
                let h = sha256(&op[1..]);
                let n = self.passwords.len();
                self.passwords.retain(|p| *p != h);
                if self.passwords.len() == n {
                    return Err(
                        "The password you are trying to remove from the user does not exist",
                    );
                }
            }
            Some(b'#') | Some(b'!') => {
                let h = parse_hash(&op[1..]).ok_or(
                    "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
                )?;
                if op[0] == b'#' {
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                } else {
                    let n = self.passwords.len();
                    self.passwords.retain(|p| *p != h);
                    if self.passwords.len() == n {
                        return Err(
                            "The password you are trying to remove from the user does not exist",
                        );
                    }
                }
            }
            Some(b'~') => self.add_key(&op[1..], true, true)?,
            Some(b'%') => {
                let tilde = op.iter().position(|&b| b == b'~').ok_or("Syntax error")?;
                let flags = &op[1..tilde];
                if flags.is_empty() {
                    return Err("Syntax error");
                }
                let (mut r, mut w) = (false, false);
                for f in flags {
                    match f.to_ascii_uppercase() {
                        b'R' => r = true,
                        b'W' => w = true,
                        _ => return Err("Syntax error"),
                    }
                }
                self.add_key(&op[tilde + 1..], r, w)?;
            }
            Some(b'&') => {
                if self.allchannels {
                    return Err("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels");
                }
                let pat = op[1..].to_vec();
                if !self.channels.contains(&pat) {
                    self.channels.push(pat);
                }
            }
            Some(b'+') | Some(b'-') => {
                let on = op[0] == b'+';
                let name = &lower[1..];
                if let Some(cat) = name.strip_prefix('@') {
                    if !CATEGORIES.contains(&cat) {
                        return Err("Unknown command or category name in ACL");
                    }
                    self.set_category(cat, on);
                } else {
                    let id = command_id(name).ok_or("Unknown command or category name in ACL")?;
                    self.set_command(id, on);
                }
            }
            _ => return Err("Syntax error"),
        }
        Ok(())
    }

    fn add_key(&mut self, pat: &[u8], read: bool, write: bool) -> Result<(), &'static str> {
        if self.allkeys {
            return Err("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns");
        }
        if pat == b"*" && read && write {
            self.allkeys = true;
            self.keys.clear();
            return Ok(());
        }
        let kp = KeyPattern {
            pat: pat.to_vec(),
            read,
            write,
        };
        if !self.keys.contains(&kp) {
            self.keys.push(kp);
        }
        Ok(())
    }

    /// Redis 7.0's `ACLDescribeSelectorCommandRules`: start from +@all or
    /// -@all, then repeatedly take the category with the fewest
    /// differences from the user's bits (more in common than not; ties:
    /// more in common), then fix single commands.
    pub(crate) fn describe_commands(&self) -> String {
        let ix = index();
        let additive = !self.all_future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = vec![!additive; ix.names.len()];
        // The user's bits with every applied category inverted.
        let mut temp = self.allowed.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0usize);
            for (j, cat) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (mut on, mut off) = (0, 0);
                for (cats, &bit) in ix.cats.iter().zip(&temp) {
                    if cats.contains(cat) {
                        if bit {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let cat = CATEGORIES[j];
            for id in 0..ix.names.len() {
                if ix.cats[id].contains(&cat) {
                    fake[id] = additive;
                    temp[id] = !additive;
                }
            }
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(cat);
            rules.push(' ');
            applied[j] = true;
        }
        // Single commands, a container before its subcommands; fixing a
        // container in the fake bitmap fixes its subcommands too, as
        // Redis's `ACLChangeSelectorPerm` does.
        for id in 0..ix.names.len() {
            if self.allowed[id] != fake[id] {
                rules.push(if self.allowed[id] { '+' } else { '-' });
                rules.push_str(&ix.names[id]);
                rules.push(' ');
                fake[id] = self.allowed[id];
                if let Some((a, b)) = ix.subs[id] {
                    for f in &mut fake[a..b] {
                        *f = self.allowed[id];
                    }
                }
            }
        }
        rules.pop();
        rules
    }

    pub(crate) fn describe_keys(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let v: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                let p = String::from_utf8_lossy(&k.pat);
                match (k.read, k.write) {
                    (true, true) => format!("~{p}"),
                    (true, false) => format!("%R~{p}"),
                    _ => format!("%W~{p}"),
                }
            })
            .collect();
        v.join(" ")
    }

    pub(crate) fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let v: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        v.join(" ")
    }

    pub(crate) fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        if self.sanitize_payload {
            f.push("sanitize-payload");
        }
        f
    }

    /// ACL LIST's line.
    pub(crate) fn describe(&self) -> String {
        let mut s = format!("user {}", self.name);
        for f in self.flags() {
            s.push(' ');
            s.push_str(f);
        }
        for p in &self.passwords {
            s.push_str(" #");
            s.push_str(&hex(p));
        }
        let keys = self.describe_keys();
        if !keys.is_empty() {
            s.push(' ');
            s.push_str(&keys);
        }
        if self.allchannels {
            s.push_str(" &*");
        } else {
            s.push_str(" resetchannels");
            let ch = self.describe_channels();
            if !ch.is_empty() {
                s.push(' ');
                s.push_str(&ch);
            }
        }
        s.push(' ');
        s.push_str(&self.describe_commands());
        s
    }
}

fn parse_hash(h: &[u8]) -> Option<[u8; 32]> {
    if h.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        let hexv = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        *o = (hexv(h[2 * i])? << 4) | hexv(h[2 * i + 1])?;
    }
    Some(out)
}

pub(crate) const ERR_PUBSUB_DEFAULT: &str =
    "argument(s) must be one of the following: allchannels, resetchannels";

/// `acl-pubsub-default`'s value: `Some(true)` for allchannels.
pub(crate) fn parse_pubsub_default(v: &[u8]) -> Option<bool> {
    match v.to_ascii_lowercase().as_slice() {
        b"allchannels" => Some(true),
        b"resetchannels" => Some(false),
        _ => None,
    }
}

/// The users, by name (ordered, as Redis's rax).
#[derive(Debug)]
pub struct Users {
    pub(crate) users: BTreeMap<String, User>,
    /// `acl-pubsub-default allchannels`.
    pub(crate) pubsub_default_all: bool,
}

impl Default for Users {
    fn default() -> Users {
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), User::default_user());
        Users {
            users,
            pubsub_default_all: false,
        }
    }
}

impl Users {
    /// A new user under the current `acl-pubsub-default`.
    pub(crate) fn new_user(&self, name: &str) -> User {
        User::with_default(name, self.pubsub_default_all)
    }

    /// CONFIG SET acl-pubsub-default: new users and later `reset`s follow.
    pub(crate) fn set_pubsub_default(&mut self, all: bool) {
        self.pubsub_default_all = all;
        for u in self.users.values_mut() {
            u.pubsub_default_all = all;
        }
    }

    pub fn get(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// `requirepass`: the default user's only password (or nopass).
    pub fn set_default_password(&mut self, pass: Option<&[u8]>) {
        if let Some(u) = self.users.get_mut("default") {
            u.passwords.clear();
            match pass {
                Some(p) => {
                    u.nopass = false;
                    u.passwords.push(sha256(p));
                }
                None => u.nopass = true,
            }
        }
    }

    /// A new connection is authenticated when the default user is on and
    /// nopass.
    pub fn default_is_open(&self) -> bool {
        self.users
            .get("default")
            .is_some_and(|u| u.enabled && u.nopass)
    }

    /// AUTH / HELLO AUTH: the user if the credentials are good.
    pub fn check(&self, user: &[u8], pass: &[u8]) -> Option<&str> {
        let u = self.users.get(std::str::from_utf8(user).ok()?)?;
        (u.enabled && u.password_ok(pass)).then_some(u.name.as_str())
    }
}

/// Which kind of permission a command lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    /// The argument index of the key refused.
    Key(usize),
    /// The argument index of the channel refused.
    Channel(usize),
}

impl Denied {
    /// Redis's `getAclErrorMessage` (the reason EXEC gives).
    pub fn reason(self) -> &'static str {
        match self {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        }
    }

    pub fn message(self, cmd: &Resolved) -> String {
        match self {
            Denied::Command => format!(
                "NOPERM this user has no permissions to run the '{}' command",
                cmd.full_name()
            ),
            Denied::Key(_) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            }
            Denied::Channel(_) => "NOPERM this user has no permissions to access one of the channels used as arguments".into(),
        }
    }
}

/// Key argument indexes of a command (from its first/last/step).
fn key_positions(spec: &CommandSpec, argc: usize) -> impl Iterator<Item = usize> {
    let first = spec.first_key.max(0) as usize;
    let last = if spec.last_key < 0 {
        argc as i64 + i64::from(spec.last_key)
    } else {
        i64::from(spec.last_key)
    };
    let step = spec.step.max(1) as usize;
    let end = if first == 0 {
        0
    } else {
        (last.max(0) as usize).min(argc.saturating_sub(1)) + 1
    };
    (first..end.max(first)).step_by(step)
}

/// SORT's keys as Redis's `sortGetKeys` finds them: `(index, write)` for
/// the sorted key and the last `STORE` key (LIMIT, GET and BY skip their
/// arguments; SORT_RO, Redis's `sortROGetKeys`, has only the first).
fn sort_keys(argv: crate::resp::Argv<'_>, store_key: bool) -> Vec<(usize, bool)> {
    let mut keys = vec![(1, false)];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let a = argv.get(i).unwrap_or_default();
        let is = |n: &str| a.eq_ignore_ascii_case(n.as_bytes());
        if is("limit") {
            i += 2;
        } else if is("get") || is("by") {
            i += 1;
        } else if store_key && is("store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store.map(|s| (s, true)));
    keys
}

/// Redis's `ACLCheckAllUserCommandPerm` for the root selector.
pub fn check(user: &User, cmd: &Resolved, argv: crate::resp::Argv<'_>) -> Result<(), Denied> {
    let full = cmd.full_name();
    // Commands that run before authentication (`CMD_NO_AUTH`) are not
    // subject to the command bits.
    let no_auth = cmd.parent.is_none() && crate::auth::runs_without_auth(cmd.spec.name);
    let allowed = no_auth
        || match command_id(&full) {
            Some(id) => user.allowed[id],
            None => user.all_future,
        };
    if !allowed {
        return Err(Denied::Command);
    }
    let spec = cmd.spec;
    if !user.allkeys && spec.first_key > 0 {
        let write = spec.flags.contains(&"write");
        let may = |key: &[u8], write: bool| {
            user.keys
                .iter()
                .any(|k| (if write { k.write } else { k.read }) && stringmatch(&k.pat, key, false))
        };
        if cmd.parent.is_none() && matches!(spec.name, "sort" | "sort_ro") {
            // Redis's `sortGetKeys`: the sorted key is read, the last
            // STORE's key written.
            for (i, write) in sort_keys(argv, spec.name == "sort") {
                if !may(argv.get(i).unwrap_or_default(), write) {
                    return Err(Denied::Key(i));
                }
            }
        } else {
            for i in key_positions(spec, argv.len()) {
                if !may(argv.get(i).unwrap_or_default(), write) {
                    return Err(Denied::Key(i));
                }
            }
        }
    }
    let name = cmd.parent.unwrap_or(spec).name;
    if !user.allchannels {
        let literal = match name {
            "publish" | "spublish" => 1..2.min(argv.len()),
            "subscribe" | "ssubscribe" => 1..argv.len(),
            "psubscribe" => {
                // A pattern subscription must be one of the user's
                // patterns, literally.
                for i in 1..argv.len() {
                    let p = argv.get(i).unwrap_or_default();
                    if !user.channels.iter().any(|c| c == p) {
                        return Err(Denied::Channel(i));
                    }
                }
                0..0
            }
            _ => 0..0,
        };
        for i in literal {
            let ch = argv.get(i).unwrap_or_default();
            if !user.channels.iter().any(|c| stringmatch(c, ch, false)) {
                return Err(Denied::Channel(i));
            }
        }
    }
    Ok(())
}

/// Whether `u` may do anything (the per-command check can be skipped).
fn unrestricted(u: &User) -> bool {
    u.all_future && u.allowed.iter().all(|&b| b) && u.allkeys && u.allchannels
}

impl Users {
    /// Whether some user has restrictions (then every command is checked).
    pub fn any_restricted(&self) -> bool {
        self.users.values().any(|u| !unrestricted(u))
    }
}
