//! Random bitmap and LCS commands (valid and invalid arguments).

use super::{b, Cmp, Rng};

pub(crate) const BIT_KEYS: &[&str] = &["b0", "b1", "b2", "nokey"];

pub(crate) fn offset_arg(r: &mut Rng) -> String {
    match r.below(20) {
        0 => "-1".into(),
        1 => "abc".into(),
        2 => "4294967296".into(),
        3 => "1.5".into(),
        4 => format!("{}", r.int(100, 300)),
        _ => format!("{}", r.int(0, 70)),
    }
}

pub(crate) fn range_arg(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "x".into(),
        1 => "-100".into(),
        2 => "100".into(),
        3 => "9223372036854775807".into(),
        4 => "-9223372036854775808".into(),
        _ => format!("{}", r.int(-20, 20)),
    }
}

pub(crate) fn bit_unit(r: &mut Rng) -> Option<&'static str> {
    match r.below(6) {
        0 => Some("BYTE"),
        1 | 2 => Some("BIT"),
        3 => Some("bIt"),
        4 if r.chance(30) => Some("bits"),
        _ => None,
    }
}

pub(crate) fn field_type(r: &mut Rng) -> String {
    match r.below(14) {
        0 => "u64".into(),
        1 => "i65".into(),
        2 => "I8".into(),
        3 => "u0".into(),
        4 => "i64".into(),
        5 => "u63".into(),
        6 => "x8".into(),
        _ => {
            let signed = r.chance(50);
            let bits = r.int(1, if signed { 64 } else { 63 });
            format!("{}{}", if signed { 'i' } else { 'u' }, bits)
        }
    }
}

pub(crate) fn field_value(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "9223372036854775807".into(),
        1 => "-9223372036854775808".into(),
        2 => "x".into(),
        3 => format!("{}", r.int(-300, 300)),
        4 => format!("{}", r.next() as i64),
        _ => format!("{}", r.int(-5, 260)),
    }
}

pub(crate) fn gen_bit(r: &mut Rng) -> (Vec<Vec<u8>>, Cmp) {
    let k = r.pick(BIT_KEYS).to_string();
    let mut c: Vec<String> = match r.below(13) {
        0 | 1 => {
            let v = match r.below(8) {
                0 => "2".into(),
                1 => "x".into(),
                _ => format!("{}", r.below(2)),
            };
            vec!["SETBIT".into(), k, offset_arg(r), v]
        }
        2 => vec!["GETBIT".into(), k, offset_arg(r)],
        3 => {
            let mut c = vec!["BITCOUNT".into(), k];
            match r.below(5) {
                0 => {}
                1 => c.push(range_arg(r)),
                _ => {
                    c.push(range_arg(r));
                    c.push(range_arg(r));
                    if let Some(u) = bit_unit(r) {
                        c.push(u.into());
                    }
                }
            }
            c
        }
        4 => {
            let bit = match r.below(10) {
                0 => "2".into(),
                1 => "x".into(),
                _ => format!("{}", r.below(2)),
            };
            let mut c = vec!["BITPOS".into(), k, bit];
            let n = r.below(4);
            for i in 0..n {
                if i == 2 {
                    if let Some(u) = bit_unit(r) {
                        c.push(u.into());
                    }
                } else {
                    c.push(range_arg(r));
                }
            }
            c
        }
        5 => {
            let op = r
                .pick(&["AND", "OR", "XOR", "NOT", "and", "nand"])
                .to_string();
            let n = if op == "NOT" && r.chance(80) {
                1
            } else {
                r.int(1, 3) as usize
            };
            let mut c = vec!["BITOP".into(), op, r.pick(BIT_KEYS).to_string()];
            for _ in 0..n {
                c.push(r.pick(BIT_KEYS).to_string());
            }
            c
        }
        6 | 7 => {
            let name = if r.chance(20) {
                "BITFIELD_RO"
            } else {
                "BITFIELD"
            };
            let mut c = vec![name.into(), k];
            for _ in 0..r.int(0, 4) {
                match r.below(10) {
                    0 | 1 => {
                        c.push("OVERFLOW".into());
                        c.push(
                            r.pick(&["WRAP", "SAT", "FAIL", "sat", "fail", "bad"])
                                .to_string(),
                        );
                    }
                    2..=4 => {
                        c.push(r.pick(&["GET", "get"]).to_string());
                        c.push(field_type(r));
                        c.push(field_off(r));
                    }
                    5..=6 if name == "BITFIELD_RO" && r.chance(70) => {
                        c.push("GET".into());
                        c.push(field_type(r));
                        c.push(field_off(r));
                    }
                    5..=7 => {
                        c.push(r.pick(&["SET", "INCRBY"]).to_string());
                        c.push(field_type(r));
                        c.push(field_off(r));
                        c.push(field_value(r));
                    }
                    8 => {
                        c.push("INCRBY".into());
                        c.push(field_type(r));
                        c.push(field_off(r));
                        if r.chance(50) {
                            c.push(field_value(r));
                        }
                    }
                    _ => c.push(r.pick(&["FOO", "GET", "SET"]).to_string()),
                }
            }
            c
        }
        8 => {
            let v: String = (0..r.below(12))
                .map(|_| *r.pick(&['a', 'b', 'c', '\u{0}', '\u{7f}', 'z']))
                .collect();
            vec![r.pick(&["SET", "APPEND"]).to_string(), k, v]
        }
        9 => vec!["GET".into(), k],
        10 | 11 => {
            let mut c = vec!["LCS".into(), k, r.pick(BIT_KEYS).to_string()];
            for _ in 0..r.below(4) {
                match r.below(6) {
                    0 => c.push("IDX".into()),
                    1 => c.push("LEN".into()),
                    2 => c.push("WITHMATCHLEN".into()),
                    3 => {
                        c.push("MINMATCHLEN".into());
                        if r.chance(90) {
                            c.push(format!("{}", r.int(-2, 4)));
                        }
                    }
                    4 => c.push("idx".into()),
                    _ => c.push("bogus".into()),
                }
            }
            c
        }
        _ => vec!["DEL".into(), k],
    };
    if r.chance(1) {
        c.truncate(1); // wrong arity
    }
    (c.iter().map(|s| b(s)).collect(), Cmp::Exact)
}

pub(crate) fn field_off(r: &mut Rng) -> String {
    match r.below(10) {
        0 => format!("#{}", r.int(0, 12)),
        1 => "#-1".into(),
        2 => "-1".into(),
        _ => format!("{}", r.int(0, 90)),
    }
}
