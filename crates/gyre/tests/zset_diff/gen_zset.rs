//! Random sorted-set commands: every option, wrong types, edge values;
//! and a generator of large sets.

use super::{b, Cmp, Rng};

/// Keys any command may read; `lx` holds only score 0 (lex ranges over
/// mixed scores are undefined in Redis: its skiplist walk depends on the
/// node levels), so only [`WKEYS`] are written with other scores and only
/// [`LKEYS`] take lex ranges.
pub(crate) const ZKEYS: &[&str] = &["z0", "z1", "z2", "lx", "str", "nokey", "dst", "st"];
pub(crate) const WKEYS: &[&str] = &["z0", "z1", "z2", "str", "nokey", "dst"];
pub(crate) const LKEYS: &[&str] = &["lx", "nolex"];

pub(crate) fn member(r: &mut Rng) -> String {
    match r.below(30) {
        0 => String::new(),
        1 => "x".repeat(70), // over zset-max-listpack-value
        2 => format!("{}", r.int(-3, 3)),
        3 => "*".into(),
        _ => ((b'a' + r.below(16) as u8) as char).to_string(),
    }
}

pub(crate) fn score_arg(r: &mut Rng) -> String {
    match r.below(40) {
        0 => "inf".into(),
        1 => "-inf".into(),
        2 => "+inf".into(),
        3 => "nan".into(),
        4 => "abc".into(),
        5 => "1e400".into(),
        6 => "0x10".into(),
        7 => "-0".into(),
        8 => "1.1".into(),
        9 => "1e-5".into(),
        10 => "3.0000000000000004".into(),
        11 => "".into(),
        12 => " 1".into(),
        13 => "1e300".into(),
        14 | 15 => {
            // Any finite double, in Rust's shortest form or as `{:e}`:
            // exercises `%.17g` on every magnitude, subnormals included.
            let v = loop {
                let v = f64::from_bits(r.next());
                if v.is_finite() {
                    break v;
                }
            };
            if r.chance(50) {
                format!("{v:e}")
            } else {
                format!("{v}")
            }
        }
        16 => match r.below(4) {
            0 => r
                .pick(&[
                    "1e17",
                    "4e18",
                    "5e18",
                    "4611686018427387904",
                    "-4611686018427387904",
                    "9.5e18",
                ])
                .to_string(),
            _ => format!("{}", (r.next() % 2_000_000) as f64 / 1000.0 - 1000.0),
        },
        17 | 18 => format!("{}.5", r.int(-3, 3)),
        _ => format!("{}", r.int(-5, 5)),
    }
}

pub(crate) fn bound(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "-inf".into(),
        1 => "+inf".into(),
        2 => format!("({}", r.int(-5, 5)),
        3 => "(".into(),
        4 => "x".into(),
        5 => "(inf".into(),
        6 => "nan".into(),
        7 => format!("({}.5", r.int(-3, 3)),
        _ => format!("{}", r.int(-5, 5)),
    }
}

pub(crate) fn lex_bound(r: &mut Rng) -> String {
    match r.below(10) {
        0 => "-".into(),
        1 => "+".into(),
        2 => "x".into(),
        3 => "[".into(),
        4 => "(".into(),
        5 | 6 => format!("({}", member(r)),
        _ => format!("[{}", member(r)),
    }
}

pub(crate) fn rank(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "x".into(),
        1 => "9223372036854775807".into(),
        2 => "-9223372036854775808".into(),
        3 => "100".into(),
        4 => "-100".into(),
        _ => format!("{}", r.int(-6, 6)),
    }
}

pub(crate) fn zkey(r: &mut Rng) -> String {
    r.pick(ZKEYS).to_string()
}

pub(crate) fn wkey(r: &mut Rng) -> String {
    r.pick(WKEYS).to_string()
}

pub(crate) fn lkey(r: &mut Rng) -> String {
    r.pick(LKEYS).to_string()
}

/// LIMIT offset count.
pub(crate) fn limit(r: &mut Rng, c: &mut Vec<String>) {
    c.push("LIMIT".into());
    c.push(r.pick(&["0", "1", "2", "-1", "5", "x"]).to_string());
    if r.chance(95) {
        c.push(r.pick(&["1", "2", "-1", "0", "3", "-5"]).to_string());
    }
}

pub(crate) fn gen_zset(r: &mut Rng) -> (Vec<Vec<u8>>, Cmp) {
    let mut how = Cmp::Exact;
    let k = zkey(r);
    let c: Vec<String> = match r.below(36) {
        0..=5 => {
            let mut c = vec!["ZADD".to_string(), k.clone()];
            for _ in 0..r.below(3) {
                c.push(
                    r.pick(&["NX", "XX", "GT", "LT", "CH", "INCR", "ch", "nx"])
                        .to_string(),
                );
            }
            let n = if r.chance(90) {
                r.int(1, 4) as usize
            } else {
                0
            };
            let lex = k == "lx";
            for _ in 0..n {
                c.push(if lex { "0".into() } else { score_arg(r) });
                c.push(member(r));
            }
            if r.chance(3) {
                c.push(score_arg(r));
            }
            c
        }
        6 => vec!["ZINCRBY".into(), wkey(r), score_arg(r), member(r)],
        7 => {
            let mut c = vec!["ZREM".to_string(), k];
            for _ in 0..r.int(1, 3) {
                c.push(member(r));
            }
            c
        }
        8 => vec!["ZCARD".into(), k],
        9 => vec!["ZSCORE".into(), k, member(r)],
        10 => {
            let mut c = vec!["ZMSCORE".to_string(), k];
            for _ in 0..r.int(1, 3) {
                c.push(member(r));
            }
            c
        }
        11 => vec![r.pick(&["ZRANK", "ZREVRANK"]).to_string(), k, member(r)],
        12 => vec!["ZCOUNT".into(), k, bound(r), bound(r)],
        13 => vec!["ZLEXCOUNT".into(), lkey(r), lex_bound(r), lex_bound(r)],
        14..=17 => {
            // ZRANGE and ZRANGESTORE with every option.
            let store = r.chance(20);
            let by = r.below(3);
            let k = if by == 2 { lkey(r) } else { k };
            let mut c = if store {
                vec!["ZRANGESTORE".to_string(), wkey(r), k]
            } else {
                vec!["ZRANGE".to_string(), k]
            };
            match by {
                0 => {
                    c.push(rank(r));
                    c.push(rank(r));
                }
                1 => {
                    c.push(bound(r));
                    c.push(bound(r));
                    c.push("BYSCORE".into());
                }
                _ => {
                    c.push(lex_bound(r));
                    c.push(lex_bound(r));
                    c.push("BYLEX".into());
                }
            }
            if r.chance(40) {
                c.push("REV".into());
            }
            if r.chance(35) {
                limit(r, &mut c);
            }
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            if r.chance(3) {
                c.push(r.pick(&["BYSCORE", "REV", "foo"]).to_string());
            }
            c
        }
        18 => {
            let mut c = vec![
                r.pick(&["ZREVRANGE", "ZRANGE"]).to_string(),
                k,
                rank(r),
                rank(r),
            ];
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            c
        }
        19 | 20 => {
            let rev = r.chance(50);
            let mut c = vec![
                if rev {
                    "ZREVRANGEBYSCORE"
                } else {
                    "ZRANGEBYSCORE"
                }
                .to_string(),
                k,
                bound(r),
                bound(r),
            ];
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            if r.chance(40) {
                limit(r, &mut c);
            }
            c
        }
        21 => {
            let rev = r.chance(50);
            let mut c = vec![
                if rev { "ZREVRANGEBYLEX" } else { "ZRANGEBYLEX" }.to_string(),
                lkey(r),
                lex_bound(r),
                lex_bound(r),
            ];
            if r.chance(40) {
                limit(r, &mut c);
            }
            if r.chance(5) {
                c.push("WITHSCORES".into());
            }
            c
        }
        22 => vec!["ZREMRANGEBYRANK".into(), k, rank(r), rank(r)],
        23 => vec!["ZREMRANGEBYSCORE".into(), k, bound(r), bound(r)],
        24 => vec!["ZREMRANGEBYLEX".into(), lkey(r), lex_bound(r), lex_bound(r)],
        25 | 26 => {
            let mut c = vec![r.pick(&["ZPOPMIN", "ZPOPMAX"]).to_string(), k];
            if r.chance(60) {
                c.push(r.pick(&["0", "1", "2", "5", "-1", "x", "100"]).to_string());
            }
            if r.chance(3) {
                c.push("1".into());
            }
            c
        }
        27 => {
            let n = r.int(1, 3);
            let mut c = vec![
                "ZMPOP".to_string(),
                if r.chance(5) {
                    "0".into()
                } else {
                    n.to_string()
                },
            ];
            for _ in 0..n {
                c.push(zkey(r));
            }
            c.push(r.pick(&["MIN", "MAX", "max", "foo"]).to_string());
            if r.chance(50) {
                c.push("COUNT".into());
                c.push(r.pick(&["1", "2", "10", "0", "-1", "x"]).to_string());
            }
            c
        }
        28..=30 => {
            let op = r.pick(&[
                "ZUNION",
                "ZINTER",
                "ZDIFF",
                "ZUNIONSTORE",
                "ZINTERSTORE",
                "ZDIFFSTORE",
                "ZINTERCARD",
            ]);
            let mut c = vec![op.to_string()];
            if op.ends_with("STORE") {
                c.push(wkey(r));
            }
            let n = r.int(1, 3);
            c.push(if r.chance(4) {
                r.pick(&["0", "-1", "x", "9"]).to_string()
            } else {
                n.to_string()
            });
            for _ in 0..n {
                c.push(zkey(r));
            }
            if r.chance(40) {
                c.push("WEIGHTS".into());
                for _ in 0..n {
                    c.push(
                        r.pick(&["1", "2", "-1", "0", "0.5", "inf", "x"])
                            .to_string(),
                    );
                }
            }
            if r.chance(40) {
                c.push("AGGREGATE".into());
                c.push(r.pick(&["SUM", "MIN", "MAX", "min", "avg"]).to_string());
            }
            if r.chance(40) {
                c.push("WITHSCORES".into());
            }
            if r.chance(20) {
                c.push("LIMIT".into());
                c.push(r.pick(&["0", "1", "-1", "2"]).to_string());
            }
            c
        }
        31 => {
            how = Cmp::SameCount;
            let mut c = vec!["ZRANDMEMBER".to_string(), k];
            if r.chance(80) {
                c.push(
                    r.pick(&[
                        "0",
                        "1",
                        "-1",
                        "3",
                        "-5",
                        "100",
                        "x",
                        "-9223372036854775808",
                        "9223372036854775807",
                        "-4611686018427387905",
                    ])
                    .to_string(),
                );
                // Without WITHSCORES Redis would really try to send
                // 4.6e18 picks: only with it (an error) for that count.
                if c[2] == "-4611686018427387905" || r.chance(50) {
                    c.push(r.pick(&["WITHSCORES", "withscores"]).to_string());
                } else if r.chance(3) {
                    c.push("foo".into());
                }
            }
            c
        }
        32 => {
            how = Cmp::FullScan;
            let mut c = vec!["ZSCAN".to_string(), k, "0".into()];
            if r.chance(30) {
                c.push("MATCH".into());
                c.push(r.pick(&["a*", "*", "[a-c]", "x*"]).to_string());
            }
            if r.chance(30) {
                c.push("COUNT".into());
                c.push(r.pick(&["1", "5", "0", "x", "100"]).to_string());
            }
            c
        }
        33 => {
            if r.chance(50) {
                // A plain set: a ZUNION/ZINTER/ZDIFF input, WRONGTYPE elsewhere.
                let mut c = vec!["SADD".to_string(), "st".into()];
                for _ in 0..r.int(1, 3) {
                    c.push(member(r));
                }
                c
            } else {
                vec!["OBJECT".into(), "ENCODING".into(), k]
            }
        }
        34 => {
            if r.chance(40) {
                // Blocking pops: served at once, or a null array after
                // 10 ms on both servers.
                if r.chance(50) {
                    vec![
                        r.pick(&["BZPOPMIN", "BZPOPMAX"]).to_string(),
                        k,
                        zkey(r),
                        "0.01".into(),
                    ]
                } else {
                    let mut c = vec!["BZMPOP".to_string(), "0.01".into(), "2".into(), k, zkey(r)];
                    c.push(r.pick(&["MIN", "MAX"]).to_string());
                    if r.chance(50) {
                        c.extend(["COUNT".to_string(), r.int(1, 4).to_string()]);
                    }
                    c
                }
            } else {
                vec![r.pick(&["DEL", "TYPE", "EXISTS"]).to_string(), k]
            }
        }
        _ => {
            // Wrong types: string and bit commands on sorted sets (only
            // `str` is ever a string: OBJECT ENCODING of strings that bit
            // commands made is the string module's business).
            let op = r.pick(&[
                "GET",
                "GETBIT",
                "BITCOUNT",
                "LCS",
                "STRLEN",
                "SET",
                "BITFIELD_RO",
            ]);
            match *op {
                "GETBIT" => vec![op.to_string(), k, "1".into()],
                "BITFIELD_RO" => vec![op.to_string(), k, "GET".into(), "u8".into(), "0".into()],
                "SET" => vec![op.to_string(), "str".into(), "v".into()],
                "LCS" => vec![op.to_string(), k, "str".into()],
                _ => vec![op.to_string(), k],
            }
        }
    };
    (c.iter().map(|s| b(s)).collect(), how)
}

/// Sorted sets of thousands of members (a B+tree several levels deep),
/// many score ties (order by member), ranges and removals in bulk.
pub(crate) fn gen_zset_large(r: &mut Rng) -> (Vec<Vec<u8>>, Cmp) {
    let k = r.pick(&["big", "big", "big2"]).to_string();
    let m = |r: &mut Rng| format!("m{}", r.below(4000));
    let sc = |r: &mut Rng| match r.below(10) {
        0 => format!("{}.25", r.int(-50, 50)),
        1 => "inf".to_string(),
        _ => format!("{}", r.int(-100, 100)),
    };
    let mut how = Cmp::Exact;
    let c: Vec<String> = match r.below(20) {
        0..=6 => {
            let mut c = vec!["ZADD".to_string(), k];
            if r.chance(20) {
                c.push(r.pick(&["NX", "XX", "GT", "LT", "CH"]).to_string());
            }
            for _ in 0..r.int(1, 40) {
                c.push(sc(r));
                c.push(m(r));
            }
            c
        }
        7 => {
            let mut c = vec!["ZREM".to_string(), k];
            for _ in 0..r.int(1, 10) {
                c.push(m(r));
            }
            c
        }
        8 => vec![
            r.pick(&["ZRANK", "ZREVRANK", "ZSCORE"]).to_string(),
            k,
            m(r),
        ],
        9 => {
            let a = r.int(-3000, 3000);
            let mut c = vec![
                r.pick(&["ZRANGE", "ZREVRANGE"]).to_string(),
                k,
                a.to_string(),
                (a + r.int(-5, 30)).to_string(),
            ];
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            c
        }
        10 | 11 => {
            let a = r.int(-100, 100);
            let (lo, hi) = (format!("({a}"), format!("{}", a + r.int(0, 10)));
            let mut c = vec!["ZRANGE".to_string(), k, lo, hi, "BYSCORE".into()];
            if r.chance(50) {
                c.swap(2, 3);
                c.push("REV".into());
            }
            if r.chance(50) {
                c.extend([
                    "LIMIT".to_string(),
                    r.int(0, 20).to_string(),
                    r.int(-1, 20).to_string(),
                ]);
            }
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            c
        }
        12 => {
            let a = r.int(-100, 100);
            vec![
                "ZCOUNT".to_string(),
                k,
                a.to_string(),
                format!("({}", a + r.int(0, 50)),
            ]
        }
        13 => {
            let a = r.int(-2000, 2000);
            vec![
                "ZREMRANGEBYRANK".to_string(),
                k,
                a.to_string(),
                (a + r.int(0, 20)).to_string(),
            ]
        }
        14 => {
            let a = r.int(-100, 100);
            vec![
                "ZREMRANGEBYSCORE".to_string(),
                k,
                a.to_string(),
                (a + r.int(0, 3)).to_string(),
            ]
        }
        15 => vec![
            r.pick(&["ZPOPMIN", "ZPOPMAX"]).to_string(),
            k,
            r.int(1, 5).to_string(),
        ],
        16 => vec![
            r.pick(&["ZINTERSTORE", "ZUNIONSTORE", "ZDIFFSTORE"])
                .to_string(),
            "out".into(),
            "2".into(),
            "big".into(),
            "big2".into(),
        ],
        17 => vec![r.pick(&["ZCARD", "ZCARD", "OBJECT"]).to_string(), k],
        18 => {
            how = Cmp::FullScan;
            vec![
                "ZSCAN".to_string(),
                k,
                "0".into(),
                "COUNT".into(),
                r.int(1, 200).to_string(),
            ]
        }
        _ => {
            let a = r.int(0, 3000);
            vec![
                "ZRANGESTORE".to_string(),
                "out".into(),
                k,
                a.to_string(),
                (a + r.int(0, 200)).to_string(),
            ]
        }
    };
    let c = if c[0] == "OBJECT" {
        vec!["OBJECT".into(), "ENCODING".into(), c[1].clone()]
    } else {
        c
    };
    (c.iter().map(|s| b(s)).collect(), how)
}
