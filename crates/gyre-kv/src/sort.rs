//! SORT and SORT_RO (Redis's `sort.c`): sorting a list, set or sorted
//! set numerically or lexicographically, by its elements or by other keys
//! named by a pattern (`BY w_*`, `BY h_*->field`, `BY nosort`), with
//! LIMIT, GET patterns (`#`, keys, hash fields) and STORE into a list.
//!
//! Redis 7.0's details kept here: options are parsed first (errors before
//! WRONGTYPE; SORT_RO has no STORE), a BY without `*` sorts nothing
//! (lists and sorted sets keep their order, DESC reversing it; a set is
//! sorted ALPHA anyway when stored, so the result is repeatable), numeric
//! mode parses with `strtod` (the empty string is 0, trailing bytes or
//! NaN are "One or more scores can't be converted into double"), equal
//! scores fall back to comparing the elements, a missing BY key scores 0
//! (ALPHA: sorts first), and a small sorted set is converted to its large
//! encoding as Redis's `zsetConvert` does (OBJECT ENCODING shows it).
//! BY and GET patterns other than `#` and constants need read access to
//! every key under ACL, as Redis 7 asks (see [`crate::acl`]). The sort is
//! stable, as glibc's `qsort` (a merge sort) is for Redis.

use std::cmp::Ordering;

use crate::cmd::{eq, parse_ll, spec, CommandSpec, Ctx, ERR_WRONGTYPE};
use crate::db::{Db, Ref};
use crate::object::Object;
use crate::quicklist::{Fill, Quicklist};
use crate::server::Server;
use crate::zset::ZSet;

const W_MOVABLE: &[&str] = &["write", "denyoom", "movablekeys"];
const RO_MOVABLE: &[&str] = &["readonly", "movablekeys"];

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "sort",
        -2,
        W_MOVABLE,
        1,
        1,
        1,
        "generic",
        "1.0.0",
        "Sort the elements in a list, set or sorted set",
        sort
    ),
    spec!(
        "sort_ro",
        -2,
        RO_MOVABLE,
        1,
        1,
        1,
        "generic",
        "7.0.0",
        "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
        sort_ro
    ),
];

fn sort(server: &mut Server, ctx: &mut Ctx<'_>) {
    sort_generic(server, ctx, false);
}

fn sort_ro(server: &mut Server, ctx: &mut Ctx<'_>) {
    sort_generic(server, ctx, true);
}

/// The bytes before the first NUL: what C's string functions see of a
/// pattern or an element (`strchr`, `strstr`, `strtod`, `strcoll`).
fn c_str(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

/// The parsed options.
struct Opts<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a [u8]>,
    by: Option<&'a [u8]>,
    /// A BY without `*` was given (Redis never resets it).
    dontsort: bool,
    gets: Vec<&'a [u8]>,
}

/// Redis's option loop: the first bad option answers and stops.
fn parse<'a>(server: &Server, ctx: &mut Ctx<'a>, readonly: bool) -> Option<Opts<'a>> {
    let mut o = Opts {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
    };
    let full_access = server
        .clients
        .get(&ctx.client_id)
        .and_then(|c| server.users.get(&c.user))
        .is_none_or(|u| u.may_read_all_keys());
    let mut j = 2;
    while j < ctx.argc() {
        let left = ctx.argc() - j - 1;
        let a = ctx.arg(j);
        if eq(a, "asc") {
            o.desc = false;
        } else if eq(a, "desc") {
            o.desc = true;
        } else if eq(a, "alpha") {
            o.alpha = true;
        } else if eq(a, "limit") && left >= 2 {
            o.limit_start = parse_ll(ctx, j + 1)?;
            o.limit_count = parse_ll(ctx, j + 2)?;
            j += 2;
        } else if !readonly && eq(a, "store") && left >= 1 {
            o.store = Some(ctx.arg(j + 1));
            j += 1;
        } else if eq(a, "by") && left >= 1 {
            let p = ctx.arg(j + 1);
            o.by = Some(p);
            if !c_str(p).contains(&b'*') {
                o.dontsort = true;
            } else if !full_access {
                ctx.err("ERR BY option of SORT denied due to insufficient ACL permissions.");
                return None;
            }
            j += 1;
        } else if eq(a, "get") && left >= 1 {
            if !full_access {
                ctx.err("ERR GET option of SORT denied due to insufficient ACL permissions.");
                return None;
            }
            o.gets.push(ctx.arg(j + 1));
            j += 1;
        } else {
            ctx.syntax();
            return None;
        }
        j += 1;
    }
    Some(o)
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the
/// first `*` is replaced by the element and the key read (a string), or
/// with `->field` after the `*` that field of the hash. A pattern without
/// `*`, a missing key or one of another type give `None`.
fn lookup_by_pattern(db: &mut Db, pattern: &[u8], subst: &[u8], now: i64) -> Option<Vec<u8>> {
    let cpat = c_str(pattern);
    if cpat == b"#" {
        return Some(subst.to_vec());
    }
    let star = cpat.iter().position(|&c| c == b'*')?;
    let after = &cpat[star + 1..];
    // `->` after the star with at least one byte after it names a field.
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&i| i + 2 < after.len())
        .map(|i| star + 1 + i);
    let postfix = match arrow {
        Some(f) => &pattern[star + 1..f],
        None => &pattern[star + 1..],
    };
    let mut key = Vec::with_capacity(star + subst.len() + postfix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(postfix);
    let e = db.lookup_read(&key, now)?;
    match (arrow, e.value) {
        (None, Ref::Str(s)) => Some(s.to_vec()),
        (Some(f), Ref::Obj(Object::Hash(h))) => h.get(&pattern[f + 2..]).map(<[u8]>::to_vec),
        _ => None,
    }
}

/// One element to sort and what it sorts by.
struct Item {
    elem: Vec<u8>,
    score: f64,
    /// ALPHA BY: the BY value (`None`: the key was missing).
    by: Option<Vec<u8>>,
}

/// How two items compare (Redis's `sortCompare`, before DESC).
#[derive(Clone, Copy)]
struct Order {
    alpha: bool,
    by: bool,
    /// With STORE strings compare as bytes, otherwise with `strcoll`
    /// (the C locale's: bytes up to the first NUL).
    store: bool,
}

impl Order {
    fn strings(self, a: &[u8], b: &[u8]) -> Ordering {
        if self.store {
            a.cmp(b)
        } else {
            c_str(a).cmp(c_str(b))
        }
    }

    fn cmp(self, a: &Item, b: &Item) -> Ordering {
        if !self.alpha {
            if a.score > b.score {
                Ordering::Greater
            } else if a.score < b.score {
                Ordering::Less
            } else {
                a.elem.cmp(&b.elem)
            }
        } else if self.by {
            match (&a.by, &b.by) {
                (Some(x), Some(y)) => self.strings(x, y),
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
            }
        } else {
            self.strings(&a.elem, &b.elem)
        }
    }
}

/// SORT's numeric parse: C's `strtod` over the whole (C) string, no
/// ERANGE, no NaN. `None` is the conversion error.
fn sort_score(v: &[u8]) -> Option<f64> {
    let s = c_str(v);
    let (d, used, erange) = crate::zset::score::strtod(s);
    (used == s.len() && !erange && !d.is_nan()).then_some(d)
}

/// The elements to sort, in the order Redis loads them: a list's order, a
/// set's iteration order, a sorted set's rank order (DESC-reversed for
/// `dontsort`, where that order is the result).
fn load(o: Option<&Object>, dontsort_desc: bool) -> Vec<Vec<u8>> {
    match o {
        None => Vec::new(),
        Some(Object::List(l)) => {
            let mut v: Vec<Vec<u8>> = l.iter().map(<[u8]>::to_vec).collect();
            if dontsort_desc {
                v.reverse();
            }
            v
        }
        Some(Object::Set(s)) => s.members(),
        Some(Object::Zset(z)) => {
            let mut v = Vec::with_capacity(z.len());
            z.visit(0, z.len(), dontsort_desc, |m, _| v.push(m.to_vec()));
            v
        }
        Some(Object::Hash(_)) => Vec::new(),
    }
}

fn sort_generic(server: &mut Server, ctx: &mut Ctx<'_>, readonly: bool) {
    let Some(mut o) = parse(server, ctx, readonly) else {
        return;
    };
    let (dbi, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1);
    let fill = Fill::from_conf(server.config.encodings.list_max_listpack_size);
    let db = &mut server.dbs[dbi];
    let (is_set, is_small_zset) = match db.lookup_read(key, now) {
        None => (false, false),
        Some(e) => match e.value {
            Ref::Obj(Object::List(_)) => (false, false),
            Ref::Obj(Object::Set(_)) => (true, false),
            Ref::Obj(Object::Zset(z)) => (false, matches!(z, ZSet::Listpack(_))),
            _ => {
                ctx.err(ERR_WRONGTYPE);
                return;
            }
        },
    };
    // A set's iteration order is not repeatable: stored, it is sorted.
    if o.dontsort && is_set && o.store.is_some() {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    // Redis converts a small sorted set for SORT, destructively.
    if is_small_zset {
        let p = db.probe(key, now);
        db.update_obj(&p, |obj| {
            if let Object::Zset(z) = obj {
                z.convert_to_large();
            }
        });
    }
    let elems = {
        let p = db.probe(key, now);
        load(db.probed_obj(&p), o.dontsort && o.desc)
    };
    let len = elems.len() as i64;
    // LIMIT sanity (Redis's, with its wrapping arithmetic).
    let mut start = o.limit_start.max(0);
    let mut end = if o.limit_count < 0 {
        len - 1
    } else {
        start.wrapping_add(o.limit_count).wrapping_sub(1)
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    if end < start {
        end = start - 1;
    }
    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            by: None,
        })
        .collect();
    let mut conversion_error = false;
    if !o.dontsort {
        for it in &mut items {
            let byval = match o.by {
                Some(p) => match lookup_by_pattern(db, p, &it.elem, now) {
                    Some(v) => v,
                    None => continue,
                },
                None => it.elem.clone(),
            };
            if o.alpha {
                if o.by.is_some() {
                    it.by = Some(byval);
                }
            } else {
                match sort_score(&byval) {
                    Some(s) => it.score = s,
                    None => conversion_error = true,
                }
            }
        }
        if !conversion_error {
            let ord = Order {
                alpha: o.alpha,
                by: o.by.is_some(),
                store: o.store.is_some(),
            };
            if o.desc {
                items.sort_by(|a, b| ord.cmp(b, a));
            } else {
                items.sort_by(|a, b| ord.cmp(a, b));
            }
        }
    }
    if conversion_error {
        ctx.err("ERR One or more scores can't be converted into double");
        return;
    }
    let range = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &[][..]
    };
    let per = o.gets.len().max(1);
    let outputlen = range.len() * per;
    match o.store {
        None => {
            ctx.array(outputlen);
            for it in range {
                if o.gets.is_empty() {
                    ctx.bulk(&it.elem);
                }
                for g in &o.gets {
                    match lookup_by_pattern(db, g, &it.elem, now) {
                        Some(v) => ctx.bulk(&v),
                        None => ctx.null(),
                    }
                }
            }
        }
        Some(dst) => {
            let mut list = Quicklist::new();
            for it in range {
                if o.gets.is_empty() {
                    list.push_back(&it.elem, fill);
                }
                for g in &o.gets {
                    let v = lookup_by_pattern(db, g, &it.elem, now).unwrap_or_default();
                    list.push_back(&v, fill);
                }
            }
            if outputlen > 0 {
                db.delete(dst, now);
                let p = db.probe(dst, now);
                db.insert_obj(p, dst, Object::List(list));
                server.blocked.signal(dbi, dst);
                server.dirty += outputlen as u64;
            } else if db.delete(dst, now) {
                server.dirty += 1;
            }
            ctx.int(outputlen as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_strtod_whole_string() {
        assert_eq!(sort_score(b""), Some(0.0));
        assert_eq!(sort_score(b" 5"), Some(5.0));
        assert_eq!(sort_score(b"5 "), None);
        assert_eq!(sort_score(b"0x10"), Some(16.0));
        assert_eq!(sort_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_score(b"nan"), None);
        assert_eq!(sort_score(b"1e400"), None);
        assert_eq!(sort_score(b"3\0x"), Some(3.0));
        assert_eq!(sort_score(b"a"), None);
    }

    fn item(e: &str, by: Option<&str>) -> Item {
        Item {
            elem: e.as_bytes().to_vec(),
            score: 0.0,
            by: by.map(|b| b.as_bytes().to_vec()),
        }
    }

    #[test]
    fn alpha_by_puts_missing_first_and_collates_to_nul() {
        let ord = Order {
            alpha: true,
            by: true,
            store: false,
        };
        assert_eq!(
            ord.cmp(&item("a", None), &item("b", Some(""))),
            Ordering::Less
        );
        assert_eq!(ord.cmp(&item("a", None), &item("b", None)), Ordering::Equal);
        assert_eq!(
            ord.cmp(&item("a", Some("x\0b")), &item("b", Some("x\0a"))),
            Ordering::Equal
        );
        let stored = Order { store: true, ..ord };
        assert_eq!(
            stored.cmp(&item("a", Some("x\0b")), &item("b", Some("x\0a"))),
            Ordering::Greater
        );
    }

    #[test]
    fn numeric_ties_compare_elements() {
        let ord = Order {
            alpha: false,
            by: true,
            store: false,
        };
        assert_eq!(
            ord.cmp(&item("b", None), &item("a", None)),
            Ordering::Greater
        );
        let mut x = item("a", None);
        x.score = 2.0;
        assert_eq!(ord.cmp(&x, &item("b", None)), Ordering::Greater);
    }
}
