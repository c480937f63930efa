//! ZUNION ZINTER ZDIFF, their STORE forms, and ZINTERCARD (Redis's
//! `zunionInterDiffGenericCommand`). Inputs may be sorted sets or plain
//! sets (members score 1). As in Redis, union and intersection take the
//! inputs from the smallest to the largest (a stable sort), which fixes
//! the order in which scores are summed; a weighted score that is NaN
//! (`0 * inf`) counts as 0, and a SUM that gives NaN is 0.

use std::collections::HashMap;

use super::{limits, reply_len, reply_member, store};
use crate::cmd::{eq, Ctx, ERR_WRONGTYPE};
use crate::db::{Probe, Ref};
use crate::object::Object;
use crate::server::Server;
use crate::t_set::SetObj;
use crate::util::string2ll;
use crate::zset::{order, score, weighted, Aggregate, ZSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// One input: a sorted set, a set, or nothing (a missing key).
#[derive(Clone, Copy)]
enum Src<'a> {
    None,
    Zset(&'a ZSet),
    Set(&'a SetObj),
}

impl Src<'_> {
    fn len(&self) -> usize {
        match self {
            Src::None => 0,
            Src::Zset(z) => z.len(),
            Src::Set(s) => s.len(),
        }
    }

    fn pairs(&self) -> Vec<(Vec<u8>, f64)> {
        match self {
            Src::None => Vec::new(),
            Src::Zset(z) => z.to_vec(),
            Src::Set(s) => s.members().into_iter().map(|m| (m, 1.0)).collect(),
        }
    }

    fn find(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::None => None,
            Src::Zset(z) => z.score(m),
            Src::Set(s) => s.contains(m).then_some(1.0),
        }
    }
}

/// `dst`: the STORE destination; `numkeys_idx`: where numkeys is.
fn generic(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    dst: Option<&[u8]>,
    numkeys_idx: usize,
    op: Op,
    card_only: bool,
) {
    let Some(setnum) = string2ll(ctx.arg(numkeys_idx)) else {
        return ctx.err(crate::cmd::ERR_NOT_INT);
    };
    if setnum < 1 {
        let name = String::from_utf8_lossy(ctx.arg(0)).to_ascii_lowercase();
        return ctx.err(&format!(
            "ERR at least 1 input key is needed for '{name}' command"
        ));
    }
    if setnum as u64 > (ctx.argc() - numkeys_idx - 1) as u64 {
        return ctx.syntax();
    }
    let setnum = setnum as usize;
    let keys: Vec<&[u8]> = (0..setnum).map(|i| ctx.arg(numkeys_idx + 1 + i)).collect();
    // Type checks first (with hit/miss counting), then probes to hold
    // every input at once.
    let (dbi, now) = (ctx.db, ctx.now);
    for &k in &keys {
        match server.dbs[dbi].lookup_read(k, now).map(|e| e.value) {
            None | Some(Ref::Obj(Object::Zset(_) | Object::Set(_))) => {}
            Some(_) => return ctx.err(ERR_WRONGTYPE),
        }
    }
    let probes: Vec<Probe> = keys.iter().map(|k| server.dbs[dbi].probe(k, now)).collect();
    let mut weights = vec![1.0f64; setnum];
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut limit: i64 = 0;
    let mut j = numkeys_idx + 1 + setnum;
    while j < ctx.argc() {
        let remaining = ctx.argc() - j;
        let a = ctx.arg(j);
        if op != Op::Diff && !card_only && remaining > setnum && eq(a, "weights") {
            for (i, w) in weights.iter_mut().enumerate() {
                match score::parse(ctx.arg(j + 1 + i)) {
                    Some(v) => *w = v,
                    None => return ctx.err("ERR weight value is not a float"),
                }
            }
            j += 1 + setnum;
        } else if op != Op::Diff && !card_only && remaining >= 2 && eq(a, "aggregate") {
            let t = ctx.arg(j + 1);
            agg = if eq(t, "sum") {
                Aggregate::Sum
            } else if eq(t, "min") {
                Aggregate::Min
            } else if eq(t, "max") {
                Aggregate::Max
            } else {
                return ctx.syntax();
            };
            j += 2;
        } else if dst.is_none() && !card_only && eq(a, "withscores") {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && eq(a, "limit") {
            match string2ll(ctx.arg(j + 1)) {
                Some(l) if l >= 0 => limit = l,
                _ => return ctx.err("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return ctx.syntax();
        }
    }
    let db = &server.dbs[dbi];
    let mut src: Vec<(Src<'_>, f64)> = probes
        .iter()
        .zip(&weights)
        .map(|(p, &w)| {
            let s = match db.probed_ref(p) {
                Some(Ref::Obj(Object::Zset(z))) => Src::Zset(z),
                Some(Ref::Obj(Object::Set(s))) => Src::Set(s),
                _ => Src::None,
            };
            (s, w)
        })
        .collect();
    if op != Op::Diff {
        src.sort_by_key(|(s, _)| s.len());
    }
    let mut result: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut card: i64 = 0;
    match op {
        Op::Inter => {
            if src[0].0.len() > 0 {
                for (m, s) in src[0].0.pairs() {
                    let mut score = weighted(s, src[0].1);
                    let all = src[1..].iter().all(|(o, w)| match o.find(&m) {
                        Some(v) => {
                            // Later inputs are not NaN-checked before
                            // aggregating (a SUM turns NaN into 0).
                            agg.apply(&mut score, v * w);
                            true
                        }
                        None => false,
                    });
                    if !all {
                        continue;
                    }
                    if card_only {
                        card += 1;
                        if limit > 0 && card >= limit {
                            break;
                        }
                    } else {
                        result.push((m, score));
                    }
                }
            }
        }
        Op::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (s, w) in &src {
                for (m, v) in s.pairs() {
                    let v = weighted(v, *w);
                    match acc.get_mut(&m) {
                        Some(t) => agg.apply(t, v),
                        None => {
                            acc.insert(m, v);
                        }
                    }
                }
            }
            result = acc.into_iter().collect();
        }
        Op::Diff => {
            if src[0].0.len() > 0 {
                for (m, s) in src[0].0.pairs() {
                    if !src[1..].iter().any(|(o, _)| o.find(&m).is_some()) {
                        result.push((m, s));
                    }
                }
            }
        }
    }
    if card_only {
        return ctx.int(card);
    }
    result.sort_by(|a, b| order(a.1, &a.0, b.1, &b.0));
    if let Some(dst) = dst {
        let n = result.len();
        let lim = limits(server);
        if store(server, ctx, dst, ZSet::from_pairs(result, &lim)) {
            server.dirty += 1;
        }
        return ctx.int(n as i64);
    }
    reply_len(ctx, result.len(), withscores);
    for (m, s) in &result {
        reply_member(ctx, m, *s, withscores);
    }
}

pub(super) fn zunion(server: &mut Server, ctx: &mut Ctx<'_>) {
    generic(server, ctx, None, 1, Op::Union, false);
}

pub(super) fn zinter(server: &mut Server, ctx: &mut Ctx<'_>) {
    generic(server, ctx, None, 1, Op::Inter, false);
}

pub(super) fn zdiff(server: &mut Server, ctx: &mut Ctx<'_>) {
    generic(server, ctx, None, 1, Op::Diff, false);
}

pub(super) fn zintercard(server: &mut Server, ctx: &mut Ctx<'_>) {
    generic(server, ctx, None, 1, Op::Inter, true);
}

pub(super) fn zunionstore(server: &mut Server, ctx: &mut Ctx<'_>) {
    let dst = ctx.arg(1);
    generic(server, ctx, Some(dst), 2, Op::Union, false);
}

pub(super) fn zinterstore(server: &mut Server, ctx: &mut Ctx<'_>) {
    let dst = ctx.arg(1);
    generic(server, ctx, Some(dst), 2, Op::Inter, false);
}

pub(super) fn zdiffstore(server: &mut Server, ctx: &mut Ctx<'_>) {
    let dst = ctx.arg(1);
    generic(server, ctx, Some(dst), 2, Op::Diff, false);
}
