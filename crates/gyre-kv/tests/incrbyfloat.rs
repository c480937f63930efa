//! INCRBYFLOAT results recorded from redis-server 7.0.15 on x86-64 (80-bit
//! long double arithmetic, `%.17Lf` with trailing zeros removed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use gyre_kv::float::incr_by_float;

const TABLE: &[(&str, &str, Result<&str, &str>)] = &[
    ("10", "0.1", Ok("10.1")),
    ("0.1", "0.2", Ok("0.3")),
    ("5000", "0.1", Ok("5000.10000000000000009")),
    ("1", "1e20", Ok("100000000000000000000")),
    ("0", "1e-20", Ok("0")),
    ("3.0e3", "2.0e3", Ok("5000")),
    ("1.5", "-1.5", Ok("0")),
    ("0", "-0", Ok("0")),
    ("1", "0x10", Ok("17")),
    (
        "0",
        "inf",
        Err("ERR increment would produce NaN or Infinity"),
    ),
    ("0", "1e5000", Err("ERR value is not a valid float")),
    ("0", "1e-5000", Err("ERR value is not a valid float")),
    ("0", " 1", Err("ERR value is not a valid float")),
    ("0", "1 ", Err("ERR value is not a valid float")),
    ("0", "nan", Err("ERR value is not a valid float")),
    (
        "0",
        "123456789012345678901234567890",
        Ok("123456789012345678899921813504"),
    ),
    ("0", "0.0000000000000000001", Ok("0")),
    ("0", "3.14159265358979323846", Ok("3.14159265358979324")),
    ("-1", "0.9", Ok("-0.1")),
    ("17179869184", "0.1", Ok("17179869184.09999999962747097")),
    ("0", "+1", Ok("1")),
    ("0", ".5", Ok("0.5")),
    ("0", "5.", Ok("5")),
    ("0", "1E2", Ok("100")),
    ("0", "1e", Err("ERR value is not a valid float")),
    ("0", "0x1p-3", Ok("0.125")),
    ("0", "-1e-18", Ok("0")),
    ("1.23", "4.56", Ok("5.79")),
    ("abc", "1", Err("ERR value is not a valid float")),
    ("", "1", Err("ERR value is not a valid float")),
];

#[test]
fn incrbyfloat_formatting_table() {
    for (cur, inc, want) in TABLE {
        let got = incr_by_float(cur.as_bytes(), inc.as_bytes());
        assert_eq!(got.as_deref().map_err(|e| *e), *want, "{cur} + {inc}");
    }
}

#[test]
fn incrbyfloat_huge_values_print_all_digits() {
    let got = incr_by_float(b"1e308", b"1e308").unwrap();
    assert!(got
        .starts_with("1999999999999999999933717593116912913211201996948311344155940959898434697"));
    assert_eq!(got.len(), 309);
    let got = incr_by_float(b"0", b"1e4000").unwrap();
    assert!(got
        .starts_with("99999999999999999999654638730996237849324925835069576313015083330432619433"));
    assert_eq!(got.len(), 4000);
}

#[test]
fn incrbyfloat_command_keeps_ttl_and_replies_bulk() {
    let mut t = T::new();
    assert_eq!(t.cmd(&["SET", "f", "10", "EX", "100"]), ok());
    assert_eq!(t.cmd(&["INCRBYFLOAT", "f", "0.1"]), bulk("10.1"));
    assert_eq!(t.cmd(&["TTL", "f"]), int(100));
    assert_eq!(t.cmd(&["INCRBYFLOAT", "new", "2.5e0"]), bulk("2.5"));
    let long = "1".repeat(5200);
    assert_eq!(
        t.cmd(&["INCRBYFLOAT", "f", &long]),
        err("ERR value is not a valid float")
    );
}
