//! Blocking list operations (Redis's `blocked.c` for lists): BLPOP BRPOP
//! BLMOVE BRPOPLPUSH BLMPOP park their client here when every key is
//! empty; a list created under a key a client waits on (a push, LMOVE,
//! RENAME ... — Redis's `signalKeyAsReady` on `dbAdd`) makes the key
//! ready, and after the command that did it [`Server::serve_ready`] hands
//! its elements to the waiting clients in the order they blocked (FIFO per
//! key), one operation per client, while the list lasts.
//!
//! Sans I/O: a served or timed-out client's reply is queued on the client
//! ([`Server::take_output`]) and its id listed ([`Server::take_woken`]);
//! the glue then cancels its timer and posts its connection, whose handler
//! writes the reply and resumes the input the client sent meanwhile. The
//! timeout is the connection's read timer in the core (one handler serves
//! the wake-up and `timedout`, as nginx does); `0` blocks forever.

use std::collections::{HashMap, VecDeque};

use crate::cmd::{Ctx, Replied};
use crate::db::Ref;
use crate::object::{Kind, Object};
use crate::resp::{self, Argv};
use crate::server::{ClientId, Server};
use crate::t_list::{lmove_generic, pop_n};

/// What a blocked client will do once a key has elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockOp {
    /// BLPOP / BRPOP: `[key, element]`.
    Pop { left: bool },
    /// BLMOVE / BRPOPLPUSH: the element, moved onto `dst`.
    Move {
        dst: Vec<u8>,
        from_left: bool,
        to_left: bool,
    },
    /// BLMPOP: `[key, [elements]]`.
    Mpop { left: bool, count: usize },
    /// BZPOPMIN / BZPOPMAX (`count` None) and BZMPOP (`count` Some):
    /// served by [`crate::t_zset`] from a sorted set.
    Zpop { max: bool, count: Option<u64> },
}

impl BlockOp {
    /// The type of value this operation is served from (Redis's
    /// `BLOCKED_LIST` / `BLOCKED_ZSET`): a ready key serves only the
    /// waiters of its type, the others stay blocked.
    fn serves(&self) -> Kind {
        match self {
            BlockOp::Zpop { .. } => Kind::Zset,
            _ => Kind::List,
        }
    }
}

#[derive(Debug)]
struct Waiter {
    db: usize,
    keys: Vec<Vec<u8>>,
    op: BlockOp,
    proto: u8,
    /// The blocking command's id and the time its call took (ns): its
    /// latency is recorded when it is served, as Redis's
    /// `updateStatsOnUnblock` does (a timeout records none).
    call: Option<(u32, u64)>,
    /// The command as sent, for the slow log when it is served (Redis
    /// keeps a blocked client's argv until then).
    argv: Vec<Vec<u8>>,
}

/// The blocked clients and the keys they wait on.
#[derive(Debug, Default)]
pub struct BlockState {
    clients: HashMap<ClientId, Waiter>,
    queues: HashMap<(usize, Vec<u8>), VecDeque<ClientId>>,
    ready: VecDeque<(usize, Vec<u8>)>,
    woken: Vec<ClientId>,
    /// Set by a command that blocked its client: the timeout in ms (0:
    /// forever), for [`Server::feed`] to stop and report.
    pub(crate) just_blocked: Option<u64>,
    /// Clients served by the running command, with their command and its
    /// time (ns), for the slow log after that command's own entry.
    served: Vec<(ClientId, Vec<Vec<u8>>, u64)>,
}

impl BlockState {
    /// Clients blocked (INFO `blocked_clients`).
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    pub fn is_blocked(&self, id: ClientId) -> bool {
        self.clients.contains_key(&id)
    }

    pub(crate) fn ready_is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    pub(crate) fn served_pending(&self) -> bool {
        !self.served.is_empty()
    }

    /// A list was created under `key`: serve its waiters after the command.
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if self.queues.is_empty() {
            return;
        }
        let k = (db, key.to_vec());
        if self.queues.contains_key(&k) && !self.ready.contains(&k) {
            self.ready.push_back(k);
        }
    }

    fn block(&mut self, id: ClientId, w: Waiter) {
        for k in &w.keys {
            let q = self.queues.entry((w.db, k.clone())).or_default();
            if !q.contains(&id) {
                q.push_back(id);
            }
        }
        self.clients.insert(id, w);
    }

    /// Forget `id` everywhere (served, timed out, unblocked, gone).
    fn unblock(&mut self, id: ClientId) -> Option<Waiter> {
        let w = self.clients.remove(&id)?;
        for k in &w.keys {
            let key = (w.db, k.clone());
            if let Some(q) = self.queues.get_mut(&key) {
                q.retain(|&c| c != id);
                if q.is_empty() {
                    self.queues.remove(&key);
                }
            }
        }
        Some(w)
    }

    /// The command that blocked client `id` and its call's time.
    pub(crate) fn set_call(&mut self, id: ClientId, cmd: u32, ns: u64) {
        if let Some(w) = self.clients.get_mut(&id) {
            w.call = Some((cmd, ns));
        }
    }

    /// Keys with waiters (tests: nothing left behind).
    pub fn waited_keys(&self) -> usize {
        self.queues.len()
    }
}

/// Redis's `getTimeoutFromObjectOrReply` (seconds, a float): the timeout
/// in ms, 0 for forever. Like Redis 7.0, a value whose milliseconds do not
/// fit a `long long` comes out negative.
pub fn parse_timeout(ctx: &mut Ctx<'_>, i: usize) -> Result<u64, Replied> {
    let a = ctx.arg(i);
    let v = crate::float::F80::parse_redis(a)
        .and_then(|_| std::str::from_utf8(a).ok())
        .and_then(|s| s.parse::<f64>().ok());
    let Some(secs) = v else {
        ctx.err("ERR timeout is not a float or out of range");
        return Err(Replied);
    };
    let ms = (secs * 1000.0).ceil();
    // C's conversion of an out-of-range value gives LLONG_MIN.
    let ms = if (-9.223_372_036_854_775e18..9.223_372_036_854_775e18).contains(&ms) {
        ms as i64
    } else {
        i64::MIN
    };
    if ms < 0 {
        ctx.err("ERR timeout is negative");
        return Err(Replied);
    }
    Ok(ms as u64)
}

impl Server {
    /// Park the calling client on `keys` (argument indexes of `ctx`).
    pub(crate) fn block_client(
        &mut self,
        ctx: &mut Ctx<'_>,
        keys: impl Iterator<Item = usize>,
        op: BlockOp,
        timeout_ms: u64,
    ) {
        // Inside EXEC a blocking command behaves as if it timed out at
        // once (Redis's CLIENT_DENY_BLOCKING).
        if ctx.deny_blocking {
            if matches!(op, BlockOp::Move { .. }) {
                ctx.null();
            } else {
                crate::resp::write_null_array(ctx.out, ctx.proto);
            }
            return;
        }
        let w = Waiter {
            db: ctx.db,
            keys: keys.map(|i| ctx.arg(i).to_vec()).collect(),
            op,
            proto: ctx.proto,
            call: None,
            argv: ctx.argv.to_vecs(),
        };
        self.blocked.block(ctx.client_id, w);
        self.blocked.just_blocked = Some(timeout_ms);
    }

    /// Serve the clients blocked on keys made ready by the last command.
    pub(crate) fn serve_ready(&mut self, now: i64) {
        // Bounded: each round serves a client or drops a key, and serving
        // (BLMOVE) can make at most one more key ready.
        let mut budget = 4 * (self.blocked.clients.len() + self.blocked.ready.len()) + 16;
        while let Some((db, key)) = self.blocked.ready.pop_front() {
            loop {
                if budget == 0 {
                    return;
                }
                budget -= 1;
                let Some(kind) = self.holds_elements(db, &key, now) else {
                    break;
                };
                // The first waiter (FIFO) of the type the key now holds.
                let Some(id) = self.blocked.queues.get(&(db, key.clone())).and_then(|q| {
                    q.iter().copied().find(|c| {
                        self.blocked
                            .clients
                            .get(c)
                            .is_some_and(|w| w.op.serves() == kind)
                    })
                }) else {
                    break;
                };
                let Some(w) = self.blocked.unblock(id) else {
                    break;
                };
                let mut out = Vec::new();
                let dirty_before = self.dirty;
                let t0 = crate::cmdstats::clock_ns();
                self.serve(id, &w, &key, now, &mut out);
                let served = crate::cmdstats::clock_ns().saturating_sub(t0);
                if let (Some((cmd, ns)), true) = (w.call, self.cmdstats.tracking) {
                    self.cmdstats.record_latency(cmd, ns + served);
                }
                // Redis's updateStatsOnUnblock: the reply's time.
                self.latmon.sample_if_needed("command-unblocking", served);
                if self.prop.on {
                    self.propagate_served(&w, &key, dirty_before);
                }
                let call_ns = w.call.map_or(0, |(_, ns)| ns);
                self.blocked.served.push((id, w.argv, call_ns + served));
                if let Some(c) = self.clients.get_mut(&id) {
                    c.pending.extend_from_slice(&out);
                }
                self.blocked.woken.push(id);
            }
        }
    }

    /// The slow log entries of the clients the last command served.
    pub(crate) fn log_served(&mut self, now_ms: i64) {
        for (id, argv, ns) in std::mem::take(&mut self.blocked.served) {
            self.slowlog_push(id, argv.iter().map(Vec::as_slice), ns, now_ms);
        }
    }

    /// A served client's pop, propagated as its non-blocking form (the
    /// pop wrote it with [`Server::prop_rewrite`]), one unit per client.
    fn propagate_served(&mut self, w: &Waiter, key: &[u8], dirty_before: u64) {
        self.prop_expired();
        let form = self.prop.rewritten.take();
        self.prop.prevent = false;
        if self.dirty > dirty_before {
            let argv = form.unwrap_or_else(|| match &w.op {
                BlockOp::Move {
                    dst,
                    from_left,
                    to_left,
                } => {
                    let side = |l: bool| {
                        if l {
                            b"LEFT".to_vec()
                        } else {
                            b"RIGHT".to_vec()
                        }
                    };
                    vec![
                        b"LMOVE".to_vec(),
                        key.to_vec(),
                        dst.clone(),
                        side(*from_left),
                        side(*to_left),
                    ]
                }
                _ => Vec::new(),
            });
            if !argv.is_empty() {
                self.prop
                    .ops
                    .push(crate::aof::propagate::Op { db: w.db, argv });
            }
        }
        self.propagate_pending();
    }

    /// The kind of a non-empty list or sorted set at `key`, if any.
    fn holds_elements(&mut self, db: usize, key: &[u8], now: i64) -> Option<Kind> {
        match self.dbs[db].lookup_write(key, now)?.value {
            Ref::Obj(Object::List(l)) if !l.is_empty() => Some(Kind::List),
            Ref::Obj(Object::Zset(z)) if !z.is_empty() => Some(Kind::Zset),
            _ => None,
        }
    }

    /// Run a served client's operation on `key`, its reply into `out`.
    fn serve(&mut self, id: ClientId, w: &Waiter, key: &[u8], now: i64, out: &mut Vec<u8>) {
        let spans: [(usize, usize); 0] = [];
        let mut ctx = Ctx {
            argv: Argv::new(&[], &spans),
            now,
            out,
            client_id: id,
            db: w.db,
            proto: w.proto,
            close: false,
            errors: 0,
            resync: false,
            deny_blocking: false,
        };
        match &w.op {
            BlockOp::Pop { left } | BlockOp::Mpop { left, .. } => {
                let n = match w.op {
                    BlockOp::Mpop { count, .. } => count,
                    _ => 1,
                };
                let r = crate::t_list::write(self, w.db, now, &mut ctx, key, false, |l, _, _| {
                    pop_n(l, *left, n)
                });
                if let Ok(Some(v)) = r {
                    self.dirty += v.len() as u64;
                    let name: &[u8] = if *left { b"LPOP" } else { b"RPOP" };
                    if matches!(w.op, BlockOp::Pop { .. }) {
                        self.prop_rewrite([name, key]);
                    } else {
                        let c = v.len().to_string();
                        self.prop_rewrite([name, key, c.as_bytes()]);
                    }
                    if matches!(w.op, BlockOp::Pop { .. }) {
                        ctx.array(2);
                        ctx.bulk(key);
                        if let Some(x) = v.first() {
                            ctx.bulk(x);
                        }
                    } else {
                        crate::t_list::reply_key_elements(&mut ctx, key, &v);
                    }
                }
            }
            BlockOp::Move {
                dst,
                from_left,
                to_left,
            } => {
                let r = lmove_generic(self, &mut ctx, key, dst, *from_left, *to_left);
                if let Ok(Some(v)) = r {
                    ctx.bulk(&v);
                }
            }
            BlockOp::Zpop { max, count } => {
                crate::t_zset::serve_blocked(self, &mut ctx, key, *max, *count);
            }
        }
        self.stats.total_error_replies += ctx.errors;
    }

    /// The timeout of client `id` fired: answer nil (a null array) and
    /// unblock it. False if it was not blocked.
    pub fn block_timeout(&mut self, id: ClientId) -> bool {
        let Some(w) = self.blocked.unblock(id) else {
            return false;
        };
        if let Some(c) = self.clients.get_mut(&id) {
            resp::write_null_array(&mut c.pending, w.proto);
        }
        self.blocked.woken.push(id);
        true
    }

    /// CLIENT UNBLOCK: as a timeout, or with `-UNBLOCKED`.
    ///
    /// Redis 7.0 counts the unblocked command as failed and logs it in the
    /// slow log with no arguments (its argv is already freed by then),
    /// before CLIENT UNBLOCK's own entry; a timeout is not logged. The
    /// `-UNBLOCKED` error is counted in the error stats and as CLIENT
    /// UNBLOCK's (the caller's) error reply, as in Redis.
    pub(crate) fn unblock_client(&mut self, id: ClientId, error: bool, now_ms: i64) -> bool {
        let call = match self.blocked.clients.get(&id) {
            Some(w) => w.call,
            None => return false,
        };
        if let Some((cmd, _)) = call {
            self.cmdstats.failed(cmd);
        }
        let call_ns = call.map_or(0, |(_, ns)| ns);
        self.slowlog_push(id, std::iter::empty(), call_ns, now_ms);
        if !error {
            return self.block_timeout(id);
        }
        if self.blocked.unblock(id).is_none() {
            return false;
        }
        const UNBLOCKED: &[u8] = b"UNBLOCKED client unblocked via CLIENT UNBLOCK";
        if let Some(c) = self.clients.get_mut(&id) {
            resp::write_error(&mut c.pending, UNBLOCKED);
        }
        self.cmdstats.error(UNBLOCKED);
        self.blocked.woken.push(id);
        true
    }

    /// Clients served, timed out or unblocked since the last call: the glue
    /// cancels their timers and posts their connections.
    pub fn take_woken(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.blocked.woken)
    }

    /// Replies queued for client `id` while it was blocked.
    pub fn take_output(&mut self, id: ClientId) -> Vec<u8> {
        self.clients
            .get_mut(&id)
            .map(|c| std::mem::take(&mut c.pending))
            .unwrap_or_default()
    }

    pub fn is_blocked(&self, id: ClientId) -> bool {
        self.blocked.is_blocked(id)
    }

    /// Forget a disconnected client's block at once.
    pub(crate) fn forget_blocked(&mut self, id: ClientId) {
        self.blocked.unblock(id);
        self.blocked.woken.retain(|&c| c != id);
    }

    /// Blocked clients and keys waited on (tests).
    pub fn blocked_counts(&self) -> (usize, usize) {
        (self.blocked.len(), self.blocked.waited_keys())
    }
}

/// BLPOP / BRPOP.
pub fn bpop(server: &mut Server, ctx: &mut Ctx<'_>, left: bool) {
    let last = ctx.argc() - 1;
    let Ok(timeout) = parse_timeout(ctx, last) else {
        return;
    };
    let (db, now) = (ctx.db, ctx.now);
    for i in 1..last {
        let key = ctx.arg(i);
        let r = crate::t_list::write(server, db, now, ctx, key, false, |l, _, _| {
            pop_n(l, left, 1)
        });
        match r {
            Err(Replied) => return,
            Ok(None) => {}
            Ok(Some(v)) => {
                server.dirty += 1;
                let name: &[u8] = if left { b"LPOP" } else { b"RPOP" };
                server.prop_rewrite([name, key]);
                ctx.array(2);
                ctx.bulk(key);
                if let Some(x) = v.first() {
                    ctx.bulk(x);
                }
                return;
            }
        }
    }
    server.block_client(ctx, 1..last, BlockOp::Pop { left }, timeout);
}

/// BLMOVE / BRPOPLPUSH (`src` argument 1, `dst` 2, timeout at `t`).
pub fn bmove(server: &mut Server, ctx: &mut Ctx<'_>, from_left: bool, to_left: bool, t: usize) {
    let Ok(timeout) = parse_timeout(ctx, t) else {
        return;
    };
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    let (db, now) = (ctx.db, ctx.now);
    let d = &mut server.dbs[db];
    let p = d.probe(src, now);
    match crate::object::check_kind(d, &p, Kind::List, ctx) {
        Err(Replied) => {}
        Ok(true) => match lmove_generic(server, ctx, src, dst, from_left, to_left) {
            Err(Replied) => {}
            Ok(None) => ctx.null(),
            Ok(Some(v)) => {
                if server.propagating() {
                    // BLMOVE as LMOVE with its own side words, BRPOPLPUSH
                    // as RPOPLPUSH (Redis rewrites argv[0] only).
                    if t == 3 {
                        server.prop_rewrite([&b"RPOPLPUSH"[..], src, dst]);
                    } else {
                        let (a, b) = (ctx.arg(3), ctx.arg(4));
                        server.prop_rewrite([&b"LMOVE"[..], src, dst, a, b]);
                    }
                }
                ctx.bulk(&v)
            }
        },
        Ok(false) => {
            let op = BlockOp::Move {
                dst: dst.to_vec(),
                from_left,
                to_left,
            };
            server.block_client(ctx, 1..2, op, timeout);
        }
    }
}

/// BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT n].
pub fn bmpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    // Redis 7.0 reads the keys, side and count before the timeout.
    let Ok(a) = crate::t_list::parse_mpop(ctx, 2) else {
        return;
    };
    let Ok(timeout) = parse_timeout(ctx, 1) else {
        return;
    };
    let (db, now) = (ctx.db, ctx.now);
    match crate::t_list::mpop_generic(server, db, now, ctx, &a) {
        Err(Replied) => {}
        Ok(Some((k, v))) => {
            crate::t_list::prop_mpop(server, a.left, &k, v.len());
            crate::t_list::reply_key_elements(ctx, &k, &v)
        }
        Ok(None) => {
            let op = BlockOp::Mpop {
                left: a.left,
                count: a.count,
            };
            server.block_client(ctx, a.keys.clone(), op, timeout);
        }
    }
}
