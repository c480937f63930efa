//! Range commands: ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES) and the
//! older forms it subsumes, ZRANGESTORE, ZCOUNT, ZLEXCOUNT and
//! ZREMRANGEBYRANK / BYSCORE / BYLEX (Redis's `zrangeGenericCommand` and
//! `zremrangeGenericCommand`).
//!
//! Every range resolves to ranks `start..end` of the ascending order (a
//! score or lex range with [`ZSet::score_range`] / [`ZSet::lex_range`]),
//! walked forwards or backwards.

use super::{limits, modify, probe, read, reply_len, reply_member, store};
use crate::cmd::{eq, Ctx, Replied};
use crate::server::Server;
use crate::util::string2ll;
use crate::zset::{rank_span, LexBound, ScoreBound, ZSet};

const ERR_SCORE_RANGE: &str = "ERR min or max is not a float";
const ERR_LEX_RANGE: &str = "ERR min or max not valid string range item";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

/// A parsed range.
enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

fn parse_score_range(min: &[u8], max: &[u8]) -> Option<(ScoreBound, ScoreBound)> {
    Some((ScoreBound::parse(min)?, ScoreBound::parse(max)?))
}

fn parse_lex_range(min: &[u8], max: &[u8]) -> Option<(LexBound, LexBound)> {
    Some((LexBound::parse(min)?, LexBound::parse(max)?))
}

/// The ascending ranks `start..end` a range covers in `z`, and whether
/// they are walked backwards; `offset`/`limit` as LIMIT gives them (only
/// for score and lex ranges).
fn resolve(z: &ZSet, r: &Range, rev: bool, offset: i64, limit: i64) -> (usize, usize) {
    let len = z.len();
    let (start, end) = match r {
        Range::Rank(s, e) => {
            let (a, b) = rank_span(*s, *e, len);
            return if rev { (len - b, len - a) } else { (a, b) };
        }
        Range::Score(min, max) => z.score_range(min, max),
        Range::Lex(min, max) => z.lex_range(min, max),
    };
    // Redis walks `offset` entries from the first in range (a negative
    // offset walks off the end: nothing), then takes `limit` (negative:
    // all).
    if offset < 0 || offset as u64 >= (end - start) as u64 {
        return (0, 0);
    }
    let off = offset as usize;
    let avail = end - start - off;
    let take = if limit < 0 {
        avail
    } else {
        avail.min(limit as usize)
    };
    if rev {
        (end - off - take, end - off)
    } else {
        (start + off, start + off + take)
    }
}

/// Redis's `zrangeGenericCommand`: `first` is the key's index, `store`
/// the destination for ZRANGESTORE.
fn zrange_generic(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    first: usize,
    store_to: Option<&[u8]>,
    mut by: By,
    mut rev: Option<bool>,
) {
    let key = ctx.arg(first);
    let (mut minidx, mut maxidx) = (first + 1, first + 2);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = first + 3;
    while j < ctx.argc() {
        let left = ctx.argc() - j - 1;
        let a = ctx.arg(j);
        if store_to.is_none() && eq(a, "withscores") {
            withscores = true;
        } else if eq(a, "limit") && left >= 2 {
            let (Some(o), Some(l)) = (string2ll(ctx.arg(j + 1)), string2ll(ctx.arg(j + 2))) else {
                return ctx.err(crate::cmd::ERR_NOT_INT);
            };
            offset = o;
            limit = l;
            j += 2;
        } else if rev.is_none() && eq(a, "rev") {
            rev = Some(true);
        } else if by == By::Auto && eq(a, "bylex") {
            by = By::Lex;
        } else if by == By::Auto && eq(a, "byscore") {
            by = By::Score;
        } else {
            return ctx.syntax();
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return ctx.err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && by == By::Lex {
        return ctx.err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    if rev && by != By::Rank {
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    let range = match by {
        By::Score => match parse_score_range(ctx.arg(minidx), ctx.arg(maxidx)) {
            Some((a, b)) => Range::Score(a, b),
            None => return ctx.err(ERR_SCORE_RANGE),
        },
        By::Lex => match parse_lex_range(ctx.arg(minidx), ctx.arg(maxidx)) {
            Some((a, b)) => Range::Lex(a, b),
            None => return ctx.err(ERR_LEX_RANGE),
        },
        _ => {
            let (Some(s), Some(e)) = (string2ll(ctx.arg(minidx)), string2ll(ctx.arg(maxidx)))
            else {
                return ctx.err(crate::cmd::ERR_NOT_INT);
            };
            Range::Rank(s, e)
        }
    };
    let z = match read(server, ctx, key) {
        Err(Replied) => return,
        Ok(z) => z,
    };
    let Some(dst) = store_to else {
        let Some(z) = z else {
            return ctx.array(0);
        };
        let (a, b) = resolve(z, &range, rev, offset, limit);
        reply_len(ctx, b - a, withscores);
        z.visit(a, b, rev, |m, s| reply_member(ctx, m, s, withscores));
        return;
    };
    let mut pairs = Vec::new();
    if let Some(z) = z {
        let (a, b) = resolve(z, &range, rev, offset, limit);
        z.visit(a, b, rev, |m, s| pairs.push((m.to_vec(), s)));
    }
    let n = pairs.len();
    let lim = limits(server);
    // As Redis's zrangeResultBeginStore: a listpack unless a rank range
    // is already known to be longer, then member by member through
    // zsetAdd (so a listpack's -0 is 0, also after it converted).
    let mut z = if matches!(range, Range::Rank(..)) && n > lim.max_listpack_entries {
        ZSet::Large(Box::default())
    } else {
        ZSet::Listpack(crate::zset::listpack::Listpack::new())
    };
    for (m, sc) in &pairs {
        z.set(m, *sc, &lim);
    }
    if store(server, ctx, dst, z) {
        server.dirty += 1;
    }
    ctx.int(n as i64);
}

pub(super) fn zrange(server: &mut Server, ctx: &mut Ctx<'_>) {
    zrange_generic(server, ctx, 1, None, By::Auto, None);
}

pub(super) fn zrangestore(server: &mut Server, ctx: &mut Ctx<'_>) {
    let dst = ctx.arg(1);
    zrange_generic(server, ctx, 2, Some(dst), By::Auto, None);
}

pub(super) fn zrevrange(server: &mut Server, ctx: &mut Ctx<'_>) {
    zrange_generic(server, ctx, 1, None, By::Rank, Some(true));
}

pub(super) fn zrangebyscore(server: &mut Server, ctx: &mut Ctx<'_>) {
    zrange_generic(server, ctx, 1, None, By::Score, Some(false));
}

pub(super) fn zrevrangebyscore(server: &mut Server, ctx: &mut Ctx<'_>) {
    zrange_generic(server, ctx, 1, None, By::Score, Some(true));
}

pub(super) fn zrangebylex(server: &mut Server, ctx: &mut Ctx<'_>) {
    zrange_generic(server, ctx, 1, None, By::Lex, Some(false));
}

pub(super) fn zrevrangebylex(server: &mut Server, ctx: &mut Ctx<'_>) {
    zrange_generic(server, ctx, 1, None, By::Lex, Some(true));
}

pub(super) fn zcount(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some((min, max)) = parse_score_range(ctx.arg(2), ctx.arg(3)) else {
        return ctx.err(ERR_SCORE_RANGE);
    };
    let key = ctx.arg(1);
    if let Ok(z) = read(server, ctx, key) {
        let n = z.map_or(0, |z| {
            let (a, b) = z.score_range(&min, &max);
            b - a
        });
        ctx.int(n as i64);
    }
}

pub(super) fn zlexcount(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some((min, max)) = parse_lex_range(ctx.arg(2), ctx.arg(3)) else {
        return ctx.err(ERR_LEX_RANGE);
    };
    let key = ctx.arg(1);
    if let Ok(z) = read(server, ctx, key) {
        let n = z.map_or(0, |z| {
            let (a, b) = z.lex_range(&min, &max);
            b - a
        });
        ctx.int(n as i64);
    }
}

fn zremrange_generic(server: &mut Server, ctx: &mut Ctx<'_>, by: By) {
    let range = match by {
        By::Score => match parse_score_range(ctx.arg(2), ctx.arg(3)) {
            Some((a, b)) => Range::Score(a, b),
            None => return ctx.err(ERR_SCORE_RANGE),
        },
        By::Lex => match parse_lex_range(ctx.arg(2), ctx.arg(3)) {
            Some((a, b)) => Range::Lex(a, b),
            None => return ctx.err(ERR_LEX_RANGE),
        },
        _ => {
            let (Some(s), Some(e)) = (string2ll(ctx.arg(2)), string2ll(ctx.arg(3))) else {
                return ctx.err(crate::cmd::ERR_NOT_INT);
            };
            Range::Rank(s, e)
        }
    };
    let key = ctx.arg(1);
    let Ok((p, found)) = probe(server, ctx, key) else {
        return;
    };
    if !found {
        return ctx.int(0);
    }
    let deleted = modify(server, ctx, &p, |z| {
        let (a, b) = resolve(z, &range, false, 0, -1);
        z.remove_ranks(a, b)
    });
    server.dirty += deleted as u64;
    ctx.int(deleted as i64);
}

pub(super) fn zremrangebyrank(server: &mut Server, ctx: &mut Ctx<'_>) {
    zremrange_generic(server, ctx, By::Rank);
}

pub(super) fn zremrangebyscore(server: &mut Server, ctx: &mut Ctx<'_>) {
    zremrange_generic(server, ctx, By::Score);
}

pub(super) fn zremrangebylex(server: &mut Server, ctx: &mut Ctx<'_>) {
    zremrange_generic(server, ctx, By::Lex);
}
