//! ZPOPMIN ZPOPMAX ZMPOP (Redis's `genericZpopCommand`) and the blocking
//! BZPOPMIN BZPOPMAX BZMPOP (`blockingGenericZpopCommand`): served at once
//! when a key holds a sorted set, else parked in [`crate::blocked`], which
//! hands the client back here ([`serve_blocked`]) when a sorted set is
//! created under one of its keys.

use super::{modify, probe, reply_score};
use crate::blocked::{parse_timeout, BlockOp};
use crate::cmd::{eq, Ctx, Replied};
use crate::server::Server;
use crate::util::string2ll;

/// How the popped entries are framed.
#[derive(Clone, Copy, Debug)]
struct Shape {
    /// `[key, ...]` (ZMPOP, BZPOPMIN).
    emit_key: bool,
    /// Pairs as `[member, score]` arrays (RESP3 ZPOPMIN with a count;
    /// ZMPOP always).
    nested: bool,
    /// A null array when nothing is there (ZMPOP) instead of `[]`.
    nil_when_empty: bool,
}

/// Pop up to `count` (`None`: one, without a count argument) entries from
/// the first of `keys` holding a sorted set. Replies as `shape` says.
fn pop_generic(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    max: bool,
    count: Option<u64>,
    shape: Shape,
) {
    let mut found = None;
    for &k in keys {
        let Ok((p, exists)) = probe(server, ctx, k) else {
            return;
        };
        if exists {
            found = Some((k, p));
            break;
        }
    }
    let Some((key, p)) = found else {
        if shape.nil_when_empty {
            return crate::resp::write_null_array(ctx.out, ctx.proto);
        }
        return ctx.array(0);
    };
    let count = count.unwrap_or(1);
    if count == 0 {
        return ctx.array(0);
    }
    let n = usize::try_from(count).unwrap_or(usize::MAX);
    let had_count = count_given(ctx, shape);
    let popped = modify(server, ctx, &p, |z| z.pop(n, max));
    server.dirty += popped.len() as u64;
    if server.propagating() && !popped.is_empty() && !is_plain_zpop(ctx.arg(0)) {
        // BZPOPMIN / ZMPOP / BZMPOP go as ZPOPMIN|ZPOPMAX key [count].
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        let c = popped.len().to_string();
        if had_count {
            server.prop_rewrite([name, key, c.as_bytes()]);
        } else {
            server.prop_rewrite([name, key]);
        }
    }
    match (shape.emit_key, shape.nested) {
        (false, false) => ctx.array(popped.len() * 2),
        (false, true) => ctx.array(popped.len()),
        (true, false) => {
            ctx.array(popped.len() * 2 + 1);
            ctx.bulk(key);
        }
        (true, true) => {
            ctx.array(2);
            ctx.bulk(key);
            ctx.array(popped.len());
        }
    }
    for (m, s) in popped {
        if shape.nested {
            ctx.array(2);
        }
        ctx.bulk(&m);
        reply_score(ctx, s);
    }
}

/// ZPOPMIN / ZPOPMAX propagate as themselves.
fn is_plain_zpop(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"zpopmin") || name.eq_ignore_ascii_case(b"zpopmax")
}

/// The popping command has a count (ZMPOP / BZMPOP always do).
fn count_given(_ctx: &Ctx<'_>, shape: Shape) -> bool {
    shape.emit_key && shape.nested
}

fn zpop_min_max(server: &mut Server, ctx: &mut Ctx<'_>, max: bool) {
    if ctx.argc() > 3 {
        return ctx.syntax();
    }
    let count = if ctx.argc() == 3 {
        // `getPositiveLongFromObjectOrReply`: one message for both.
        match string2ll(ctx.arg(2)) {
            Some(c) if c >= 0 => Some(c as u64),
            _ => return ctx.err("ERR value is out of range, must be positive"),
        }
    } else {
        None
    };
    let shape = Shape {
        emit_key: false,
        nested: ctx.proto >= 3 && count.is_some(),
        nil_when_empty: false,
    };
    let key = ctx.arg(1);
    pop_generic(server, ctx, &[key], max, count, shape);
}

pub(super) fn zpopmin(server: &mut Server, ctx: &mut Ctx<'_>) {
    zpop_min_max(server, ctx, false);
}

pub(super) fn zpopmax(server: &mut Server, ctx: &mut Ctx<'_>) {
    zpop_min_max(server, ctx, true);
}

/// The arguments of ZMPOP / BZMPOP from `numkeys_idx`: keys, MIN|MAX,
/// COUNT (Redis's `zmpopGenericCommand` checks, in its order).
pub(super) fn parse_mpop<'a>(
    ctx: &mut Ctx<'a>,
    numkeys_idx: usize,
) -> Result<(Vec<&'a [u8]>, bool, u64), Replied> {
    let numkeys = match string2ll(ctx.arg(numkeys_idx)) {
        Some(n) if n >= 1 => n as u64,
        // Redis gives its own message for a non-integer too.
        _ => {
            ctx.err("ERR numkeys should be greater than 0");
            return Err(Replied);
        }
    };
    let where_idx = (numkeys_idx as u64)
        .saturating_add(numkeys)
        .saturating_add(1);
    if where_idx >= ctx.argc() as u64 {
        ctx.syntax();
        return Err(Replied);
    }
    let where_idx = where_idx as usize;
    let max = if eq(ctx.arg(where_idx), "min") {
        false
    } else if eq(ctx.arg(where_idx), "max") {
        true
    } else {
        ctx.syntax();
        return Err(Replied);
    };
    let mut count: Option<u64> = None;
    let mut j = where_idx + 1;
    while j < ctx.argc() {
        let more = ctx.argc() - 1 - j;
        if count.is_none() && eq(ctx.arg(j), "count") && more > 0 {
            j += 1;
            match string2ll(ctx.arg(j)) {
                Some(c) if c >= 1 => count = Some(c as u64),
                _ => {
                    ctx.err("ERR count should be greater than 0");
                    return Err(Replied);
                }
            }
        } else {
            ctx.syntax();
            return Err(Replied);
        }
        j += 1;
    }
    let keys = (numkeys_idx + 1..where_idx).map(|i| ctx.arg(i)).collect();
    Ok((keys, max, count.unwrap_or(1)))
}

pub(super) fn zmpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Ok((keys, max, count)) = parse_mpop(ctx, 1) else {
        return;
    };
    let shape = Shape {
        emit_key: true,
        nested: true,
        nil_when_empty: true,
    };
    pop_generic(server, ctx, &keys, max, Some(count), shape);
}

/// BZPOPMIN / BZPOPMAX key [key ...] timeout.
fn bzpop(server: &mut Server, ctx: &mut Ctx<'_>, max: bool) {
    let last = ctx.argc() - 1;
    let Ok(timeout) = parse_timeout(ctx, last) else {
        return;
    };
    let keys: Vec<&[u8]> = (1..last).map(|i| ctx.arg(i)).collect();
    block_or_pop(server, ctx, &keys, 1..last, max, None, timeout);
}

/// Pop from the first key holding a sorted set, or block on all of them.
fn block_or_pop(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    key_args: impl Iterator<Item = usize>,
    max: bool,
    count: Option<u64>,
    timeout: u64,
) {
    for &k in keys {
        match probe(server, ctx, k) {
            Err(Replied) => return,
            Ok((_, false)) => {}
            Ok((_, true)) => {
                return serve_blocked(server, ctx, k, max, count);
            }
        }
    }
    server.block_client(ctx, key_args, BlockOp::Zpop { max, count }, timeout);
}

/// Serve one blocking pop from `key` (a non-empty sorted set): BZPOPMIN's
/// `[key, member, score]` (`count` None) or BZMPOP's `[key, [[member,
/// score], ...]]`.
pub(crate) fn serve_blocked(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    key: &[u8],
    max: bool,
    count: Option<u64>,
) {
    let shape = Shape {
        emit_key: true,
        nested: count.is_some(),
        nil_when_empty: true,
    };
    pop_generic(server, ctx, &[key], max, count, shape);
}

pub(super) fn bzpopmin(server: &mut Server, ctx: &mut Ctx<'_>) {
    bzpop(server, ctx, false);
}

pub(super) fn bzpopmax(server: &mut Server, ctx: &mut Ctx<'_>) {
    bzpop(server, ctx, true);
}

/// BZMPOP timeout numkeys key ... MIN|MAX [COUNT n]: Redis 7.0 reads the
/// keys, side and count before the timeout.
pub(super) fn bzmpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Ok((keys, max, count)) = parse_mpop(ctx, 2) else {
        return;
    };
    let Ok(timeout) = parse_timeout(ctx, 1) else {
        return;
    };
    let n = keys.len();
    block_or_pop(server, ctx, &keys, 3..3 + n, max, Some(count), timeout);
}
