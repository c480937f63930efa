//! Pub/Sub (Redis's `pubsub.c`): SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE
//! PUNSUBSCRIBE PUBLISH PUBSUB SSUBSCRIBE SUNSUBSCRIBE SPUBLISH.
//!
//! What it owns: the server-wide registries (channel → subscribers,
//! pattern → subscribers, shard channel → subscribers, each list in
//! subscription order), each client's own subscriptions ([`ClientSubs`]),
//! and message fan-out. A message is encoded once per protocol and kind
//! (RESP2 array or RESP3 push; `message` or `pmessage` per pattern) and the
//! same bytes are appended to every receiver's output buffer
//! ([`Server::append_output`], which enforces `client-output-buffer-limit`);
//! the publisher's own copy (RESP3 lets a subscriber publish) goes into its
//! reply stream so it stays ahead of PUBLISH's integer reply, as in Redis.
//!
//! What it does not own: the RESP2 subscribed-context gate (in
//! `Server::run`, with the other refusals) and the sockets (the glue
//! flushes [`Server::take_writers`]).

use std::collections::{HashMap, HashSet};

use crate::cmd::{help_lines, no_handler, spec, CommandSpec, Ctx};
use crate::glob::stringmatch;
use crate::resp::{self, Proto};
use crate::server::{ClientId, Server};

/// A client's subscriptions.
#[derive(Debug, Default)]
pub struct ClientSubs {
    pub(crate) channels: HashSet<Vec<u8>>,
    /// In subscription order (Redis 7.0 keeps a list).
    pub(crate) patterns: Vec<Vec<u8>>,
    pub(crate) shard: HashSet<Vec<u8>>,
}

impl ClientSubs {
    /// Redis's `clientTotalPubSubSubscriptionCount`.
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }
    /// Redis's `clientSubscriptionsCount` (what (P)SUBSCRIBE replies).
    fn normal(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }
}

/// The server-wide registries.
#[derive(Debug, Default)]
pub struct PubSub {
    channels: HashMap<Vec<u8>, Vec<ClientId>>,
    patterns: HashMap<Vec<u8>, Vec<ClientId>>,
    shard: HashMap<Vec<u8>, Vec<ClientId>>,
}

impl PubSub {
    /// Channels with subscribers (INFO `pubsub_channels`).
    pub fn channels_len(&self) -> usize {
        self.channels.len()
    }
    /// Distinct patterns (INFO `pubsub_patterns`, PUBSUB NUMPAT).
    pub fn patterns_len(&self) -> usize {
        self.patterns.len()
    }
    /// Shard channels with subscribers (INFO `pubsubshard_channels`).
    pub fn shard_len(&self) -> usize {
        self.shard.len()
    }
    /// Whether anyone listens at all (keyspace events skip encoding).
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn sub_name(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }
    fn unsub_name(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// Commands a RESP2 client in subscribed mode may run.
pub(crate) fn allowed_in_context(name: &str) -> bool {
    matches!(
        name,
        "ping"
            | "subscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "sunsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "quit"
            | "reset"
    )
}

const PS: &[&str] = &["pubsub", "noscript", "loading", "stale"];
const PS_FAST: &[&str] = &["pubsub", "loading", "stale", "fast"];

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "subscribe",
        -2,
        PS,
        0,
        0,
        0,
        "pubsub",
        "2.0.0",
        "Listen for messages published to the given channels",
        subscribe
    ),
    spec!(
        "unsubscribe",
        -1,
        PS,
        0,
        0,
        0,
        "pubsub",
        "2.0.0",
        "Stop listening for messages posted to the given channels",
        unsubscribe
    ),
    spec!(
        "psubscribe",
        -2,
        PS,
        0,
        0,
        0,
        "pubsub",
        "2.0.0",
        "Listen for messages published to channels matching the given patterns",
        psubscribe
    ),
    spec!(
        "punsubscribe",
        -1,
        PS,
        0,
        0,
        0,
        "pubsub",
        "2.0.0",
        "Stop listening for messages posted to channels matching the given patterns",
        punsubscribe
    ),
    spec!(
        "ssubscribe",
        -2,
        PS,
        1,
        -1,
        1,
        "pubsub",
        "7.0.0",
        "Listen for messages published to the given shard channels",
        ssubscribe
    ),
    spec!(
        "sunsubscribe",
        -1,
        PS,
        1,
        -1,
        1,
        "pubsub",
        "7.0.0",
        "Stop listening for messages posted to the given shard channels",
        sunsubscribe
    ),
    spec!(
        "publish",
        3,
        PS_FAST,
        0,
        0,
        0,
        "pubsub",
        "2.0.0",
        "Post a message to a channel",
        publish
    ),
    spec!(
        "spublish",
        3,
        PS_FAST,
        1,
        1,
        1,
        "pubsub",
        "7.0.0",
        "Post a message to a shard channel",
        spublish
    ),
    CommandSpec {
        subcommands: PUBSUB_SUBS,
        ..spec!(
            "pubsub",
            -2,
            &[],
            0,
            0,
            0,
            "pubsub",
            "2.8.0",
            "A container for Pub/Sub commands",
            no_handler
        )
    },
];

static PUBSUB_SUBS: &[CommandSpec] = &[
    spec!(
        "channels",
        -2,
        &["pubsub", "loading", "stale"],
        0,
        0,
        0,
        "pubsub",
        "2.8.0",
        "List active channels",
        pubsub_channels
    ),
    spec!(
        "numsub",
        -2,
        &["pubsub", "loading", "stale"],
        0,
        0,
        0,
        "pubsub",
        "2.8.0",
        "Get the count of subscribers for channels",
        pubsub_numsub
    ),
    spec!(
        "numpat",
        2,
        &["pubsub", "loading", "stale"],
        0,
        0,
        0,
        "pubsub",
        "2.8.0",
        "Get the count of unique patterns pattern subscriptions",
        pubsub_numpat
    ),
    spec!(
        "shardchannels",
        -2,
        &["pubsub", "loading", "stale"],
        0,
        0,
        0,
        "pubsub",
        "7.0.0",
        "List active shard channels",
        pubsub_shardchannels
    ),
    spec!(
        "shardnumsub",
        -2,
        &["pubsub", "loading", "stale"],
        0,
        0,
        0,
        "pubsub",
        "7.0.0",
        "Get the count of subscribers for shard channels",
        pubsub_shardnumsub
    ),
    spec!(
        "help",
        2,
        &["loading", "stale"],
        0,
        0,
        0,
        "pubsub",
        "6.2.0",
        "Show helpful text about the different subcommands",
        pubsub_help
    ),
];

/// `*N` in RESP2, `>N` (push) in RESP3.
fn push_len(out: &mut Vec<u8>, n: usize, proto: Proto) {
    out.push(if proto >= 3 { b'>' } else { b'*' });
    out.extend_from_slice(n.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `[kind, name|nil, count]`.
fn confirm(ctx: &mut Ctx<'_>, kind: &[u8], name: Option<&[u8]>, count: usize) {
    push_len(ctx.out, 3, ctx.proto);
    resp::write_bulk(ctx.out, kind);
    match name {
        Some(n) => resp::write_bulk(ctx.out, n),
        None => resp::write_null(ctx.out, ctx.proto),
    }
    resp::write_int(ctx.out, count as i64);
}

fn registry(ps: &mut PubSub, kind: Kind) -> &mut HashMap<Vec<u8>, Vec<ClientId>> {
    match kind {
        Kind::Channel => &mut ps.channels,
        Kind::Pattern => &mut ps.patterns,
        Kind::Shard => &mut ps.shard,
    }
}

/// Subscribe `id` to `name`; false if it already was.
fn add(server: &mut Server, id: ClientId, kind: Kind, name: &[u8]) -> bool {
    let Some(c) = server.clients.get_mut(&id) else {
        return false;
    };
    let added = match kind {
        Kind::Channel => c.subs.channels.insert(name.to_vec()),
        Kind::Shard => c.subs.shard.insert(name.to_vec()),
        Kind::Pattern => {
            if c.subs.patterns.iter().any(|p| p == name) {
                false
            } else {
                c.subs.patterns.push(name.to_vec());
                true
            }
        }
    };
    if added {
        registry(&mut server.pubsub, kind)
            .entry(name.to_vec())
            .or_default()
            .push(id);
    }
    added
}

/// Unsubscribe `id` from `name`; false if it was not subscribed.
fn remove(server: &mut Server, id: ClientId, kind: Kind, name: &[u8]) -> bool {
    let Some(c) = server.clients.get_mut(&id) else {
        return false;
    };
    let removed = match kind {
        Kind::Channel => c.subs.channels.remove(name),
        Kind::Shard => c.subs.shard.remove(name),
        Kind::Pattern => match c.subs.patterns.iter().position(|p| p == name) {
            Some(i) => {
                c.subs.patterns.remove(i);
                true
            }
            None => false,
        },
    };
    if removed {
        let reg = registry(&mut server.pubsub, kind);
        if let Some(list) = reg.get_mut(name) {
            list.retain(|&x| x != id);
            if list.is_empty() {
                reg.remove(name);
            }
        }
    }
    removed
}

fn count_for(server: &Server, id: ClientId, kind: Kind) -> usize {
    server.clients.get(&id).map_or(0, |c| match kind {
        Kind::Shard => c.subs.shard.len(),
        _ => c.subs.normal(),
    })
}

fn subscribe_generic(server: &mut Server, ctx: &mut Ctx<'_>, kind: Kind) {
    for i in 1..ctx.argc() {
        let name = ctx.arg(i);
        add(server, ctx.client_id, kind, name);
        let n = count_for(server, ctx.client_id, kind);
        confirm(ctx, kind.sub_name(), Some(name), n);
    }
    ctx.resync = true;
}

fn subscribed_names(server: &Server, id: ClientId, kind: Kind) -> Vec<Vec<u8>> {
    server
        .clients
        .get(&id)
        .map_or_else(Vec::new, |c| match kind {
            Kind::Channel => c.subs.channels.iter().cloned().collect(),
            Kind::Shard => c.subs.shard.iter().cloned().collect(),
            Kind::Pattern => c.subs.patterns.clone(),
        })
}

/// Unsubscribe from everything of `kind`, confirming each when `ctx` is
/// given (Redis's `pubsubUnsubscribeAll*(c, notify)`); the `nil` reply
/// when there was nothing.
fn unsubscribe_kind(server: &mut Server, id: ClientId, kind: Kind, mut ctx: Option<&mut Ctx<'_>>) {
    let names = subscribed_names(server, id, kind);
    for name in &names {
        remove(server, id, kind, name);
        if let Some(ctx) = ctx.as_deref_mut() {
            let n = count_for(server, id, kind);
            confirm(ctx, kind.unsub_name(), Some(name), n);
        }
    }
    if names.is_empty() {
        if let Some(ctx) = ctx {
            let n = count_for(server, id, kind);
            confirm(ctx, kind.unsub_name(), None, n);
        }
    }
}

/// Drop every subscription of `id` (disconnect, RESET), confirming them
/// to `ctx` when given.
pub(crate) fn unsubscribe_all(server: &mut Server, id: ClientId, ctx: Option<&mut Ctx<'_>>) {
    match ctx {
        Some(ctx) => {
            unsubscribe_kind(server, id, Kind::Shard, Some(&mut *ctx));
            unsubscribe_kind(server, id, Kind::Channel, Some(&mut *ctx));
            unsubscribe_kind(server, id, Kind::Pattern, Some(ctx));
        }
        None => {
            for k in [Kind::Channel, Kind::Pattern, Kind::Shard] {
                unsubscribe_kind(server, id, k, None);
            }
        }
    }
}

fn unsubscribe_generic(server: &mut Server, ctx: &mut Ctx<'_>, kind: Kind) {
    let id = ctx.client_id;
    if ctx.argc() == 1 {
        unsubscribe_kind(server, id, kind, Some(ctx));
    } else {
        for i in 1..ctx.argc() {
            let name = ctx.arg(i);
            remove(server, id, kind, name);
            let n = count_for(server, id, kind);
            confirm(ctx, kind.unsub_name(), Some(name), n);
        }
    }
    ctx.resync = true;
}

fn subscribe(server: &mut Server, ctx: &mut Ctx<'_>) {
    subscribe_generic(server, ctx, Kind::Channel);
}
fn psubscribe(server: &mut Server, ctx: &mut Ctx<'_>) {
    subscribe_generic(server, ctx, Kind::Pattern);
}
fn ssubscribe(server: &mut Server, ctx: &mut Ctx<'_>) {
    subscribe_generic(server, ctx, Kind::Shard);
}
fn unsubscribe(server: &mut Server, ctx: &mut Ctx<'_>) {
    unsubscribe_generic(server, ctx, Kind::Channel);
}
fn punsubscribe(server: &mut Server, ctx: &mut Ctx<'_>) {
    unsubscribe_generic(server, ctx, Kind::Pattern);
}
fn sunsubscribe(server: &mut Server, ctx: &mut Ctx<'_>) {
    unsubscribe_generic(server, ctx, Kind::Shard);
}

/// A message encoded once for each protocol, built on first use.
struct Encoded<'m> {
    parts: [&'m [u8]; 4],
    n: usize,
    bytes: [Option<Vec<u8>>; 2],
}

impl<'m> Encoded<'m> {
    fn new(parts: &[&'m [u8]]) -> Encoded<'m> {
        let mut p: [&[u8]; 4] = [&[]; 4];
        p[..parts.len()].copy_from_slice(parts);
        Encoded {
            parts: p,
            n: parts.len(),
            bytes: [None, None],
        }
    }
    fn get(&mut self, proto: Proto) -> &[u8] {
        let i = usize::from(proto >= 3);
        let (parts, n) = (self.parts, self.n);
        self.bytes[i].get_or_insert_with(|| {
            let len: usize = parts[..n].iter().map(|p| p.len() + 16).sum();
            let mut b = Vec::with_capacity(len + 8);
            push_len(&mut b, n, proto);
            for p in &parts[..n] {
                resp::write_bulk(&mut b, p);
            }
            b
        })
    }
}

/// The client running the command: its id, protocol (the registry's copy
/// is written back after the read) and reply buffer.
pub type Own<'a> = Option<(ClientId, Proto, &'a mut Vec<u8>)>;

/// Reborrow an [`Own`] for one call.
pub fn reown<'b>(own: &'b mut Own<'_>) -> Own<'b> {
    own.as_mut().map(|(i, p, o)| (*i, *p, &mut **o))
}

/// Deliver one encoded message to `ids`; the current client's copy goes
/// into `own` (its reply stream). Returns the receivers.
fn deliver(
    server: &mut Server,
    ids: &[ClientId],
    msg: &mut Encoded<'_>,
    own: Own<'_>,
    now: i64,
) -> usize {
    let mut own = own;
    for &id in ids {
        match own.as_mut() {
            Some((me, proto, out)) if *me == id => out.extend_from_slice(msg.get(*proto)),
            _ => server.append_output(id, now, |proto| msg.get(proto)),
        }
    }
    ids.len()
}

/// Redis's `pubsubPublishMessage`: channel subscribers, then every
/// matching pattern's subscribers; the number of receivers. `own` is the
/// publishing client and its reply buffer, if any.
pub(crate) fn publish_message(
    server: &mut Server,
    channel: &[u8],
    message: &[u8],
    mut own: Own<'_>,
    now: i64,
) -> usize {
    let mut receivers = 0;
    if let Some(ids) = server.pubsub.channels.get(channel) {
        let ids = ids.clone();
        let mut enc = Encoded::new(&[b"message", channel, message]);
        receivers += deliver(server, &ids, &mut enc, reown(&mut own), now);
    }
    if !server.pubsub.patterns.is_empty() {
        let matching: Vec<(Vec<u8>, Vec<ClientId>)> = server
            .pubsub
            .patterns
            .iter()
            .filter(|(p, _)| stringmatch(p, channel, false))
            .map(|(p, ids)| (p.clone(), ids.clone()))
            .collect();
        for (pat, ids) in matching {
            let mut enc = Encoded::new(&[b"pmessage", &pat, channel, message]);
            receivers += deliver(server, &ids, &mut enc, reown(&mut own), now);
        }
    }
    receivers
}

fn publish(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (ch, msg) = (ctx.arg(1), ctx.arg(2));
    let n = publish_message(
        server,
        ch,
        msg,
        Some((ctx.client_id, ctx.proto, &mut *ctx.out)),
        ctx.now,
    );
    ctx.int(n as i64);
}

fn spublish(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (ch, msg) = (ctx.arg(1), ctx.arg(2));
    let n = match server.pubsub.shard.get(ch) {
        Some(ids) => {
            let ids = ids.clone();
            let mut enc = Encoded::new(&[b"smessage", ch, msg]);
            deliver(
                server,
                &ids,
                &mut enc,
                Some((ctx.client_id, ctx.proto, &mut *ctx.out)),
                ctx.now,
            )
        }
        None => 0,
    };
    ctx.int(n as i64);
}

fn channels_generic(ctx: &mut Ctx<'_>, reg: &HashMap<Vec<u8>, Vec<ClientId>>) {
    let pat = (ctx.argc() > 2).then(|| ctx.arg(2));
    let names: Vec<&Vec<u8>> = reg
        .keys()
        .filter(|c| pat.is_none_or(|p| stringmatch(p, c, false)))
        .collect();
    ctx.array(names.len());
    for n in names {
        ctx.bulk(n);
    }
}

fn numsub_generic(ctx: &mut Ctx<'_>, reg: &HashMap<Vec<u8>, Vec<ClientId>>) {
    let n = ctx.argc() - 2;
    ctx.array(n * 2);
    for i in 2..ctx.argc() {
        let ch = ctx.arg(i);
        ctx.bulk(ch);
        ctx.int(reg.get(ch).map_or(0, Vec::len) as i64);
    }
}

fn pubsub_channels(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 3 {
        return wrong_pubsub_args(ctx);
    }
    channels_generic(ctx, &server.pubsub.channels);
}

fn pubsub_shardchannels(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 3 {
        return wrong_pubsub_args(ctx);
    }
    channels_generic(ctx, &server.pubsub.shard);
}

fn wrong_pubsub_args(ctx: &mut Ctx<'_>) {
    let sub = String::from_utf8_lossy(ctx.arg(1)).to_ascii_lowercase();
    ctx.err(&format!(
        "ERR wrong number of arguments for 'pubsub|{sub}' command"
    ));
}

fn pubsub_numsub(server: &mut Server, ctx: &mut Ctx<'_>) {
    numsub_generic(ctx, &server.pubsub.channels);
}

fn pubsub_shardnumsub(server: &mut Server, ctx: &mut Ctx<'_>) {
    numsub_generic(ctx, &server.pubsub.shard);
}

fn pubsub_numpat(server: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(server.pubsub.patterns.len() as i64);
}

fn pubsub_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
}
