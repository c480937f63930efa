//! Differential tests of per-command latency tracking against a real
//! redis-server 7.0: `latency-tracking`, `latency-tracking-info-percentiles`
//! (CONFIG GET / SET and their errors), INFO latencystats and LATENCY
//! HISTOGRAM in RESP2 and RESP3. The figures are timings and differ; the
//! reply shapes, field names, which commands have a histogram and their
//! call counts are compared exactly, and every distribution is checked
//! (see `mask_histogram` in [`kv_script`]). Skips with a message when
//! redis-server is missing.
#![allow(clippy::unwrap_used)]

mod kv_script;
mod util;

use kv_script::{differential, start_gyre, Conn};

#[test]
fn latency_tracking_matches_redis() {
    differential(
        "kvdiff-latency",
        &[],
        "",
        "
        0> CONFIG GET latency-tracking
        0> CONFIG GET latency-tracking-info-percentiles
        0> CONFIG RESETSTAT
        0>h LATENCY HISTOGRAM
        0> SET a 1
        0> GET a
        0> GET a
        0> GET
        0> CONFIG GET maxmemory
        0> INCR a x
        0>h LATENCY HISTOGRAM
        0>h LATENCY HISTOGRAM get nosuch config set
        0>h LATENCY HISTOGRAM config|get CONFIG|GET Get
        0>h LATENCY HISTOGRAM nosuch config|nosuch
        0>i INFO latencystats
        0> LATENCY
        0> LATENCY NOSUCH
        0> CONFIG SET latency-tracking-info-percentiles abc
        0> CONFIG SET latency-tracking-info-percentiles 101
        0> CONFIG SET latency-tracking-info-percentiles -1
        0> CONFIG SET latency-tracking-info-percentiles 0\\s25.50\\s100\\s99.999
        0> CONFIG GET latency-tracking-info-percentiles
        0>i INFO latencystats
        0> CONFIG SET latency-tracking-info-percentiles ''
        0> CONFIG GET latency-tracking-info-percentiles
        0>i INFO latencystats
        0> CONFIG SET latency-tracking-info-percentiles 50
        0> CONFIG SET latency-tracking maybe
        0> CONFIG SET latency-tracking no
        0> CONFIG GET latency-tracking
        0> GET a
        0> INCR n
        0>h LATENCY HISTOGRAM get incr
        0> CONFIG SET latency-tracking yes
        0> MULTI
        0> INCR n
        0> LPUSH n x
        0> EXEC
        0>h LATENCY HISTOGRAM incr lpush exec multi
        1>? HELLO 3
        1>h LATENCY HISTOGRAM set incr
        0> CONFIG RESETSTAT
        0>h LATENCY HISTOGRAM
        0>i INFO latencystats
        ",
    );
}

/// A blocking command is counted in commandstats whether it is served or
/// times out, but has its latency recorded only when served (redis-server
/// 7.0.15 records none for a timeout); refused commands (unknown, wrong
/// arity) get none.
#[test]
fn blocked_and_refused_commands_match_redis() {
    differential(
        "kvdiff-latency-blocked",
        &[],
        "",
        "
        0> CONFIG RESETSTAT
        1>0 BLPOP q 0
        sleep 50
        0> LPUSH q a
        sync 1
        2> BLPOP none 0.05
        0> NOSUCH
        0> GET
        0>h LATENCY HISTOGRAM blpop lpush get nosuch ping
        0>i INFO commandstats
        ",
    );
}

/// INFO's default sections leave latencystats out, `all` and
/// `everything` have it between errorstats and cluster, as Redis; LATENCY
/// HELP names the subcommands this server has.
#[test]
fn latencystats_section_and_help() {
    let g = start_gyre(
        "kv-latency-info",
        "    latency-tracking-info-percentiles 50 99.99;",
    );
    let mut c = Conn::open(g.port);
    let text = |c: &mut Conn, args: &[&str]| {
        c.send(args);
        String::from_utf8_lossy(&c.frame()).into_owned()
    };
    text(&mut c, &["SET", "k", "v"]);
    let def = text(&mut c, &["INFO"]);
    assert!(!def.contains("# Latencystats"), "{def}");
    for all in ["all", "everything"] {
        let t = text(&mut c, &["INFO", all]);
        let e = t.find("# Errorstats").unwrap();
        let l = t.find("# Latencystats").unwrap();
        let k = t.find("# Cluster").unwrap();
        assert!(e < l && l < k, "{t}");
    }
    let t = text(&mut c, &["INFO", "latencystats"]);
    let line = t
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(
        line.contains(":p50=") && line.contains(",p99.99="),
        "{line}"
    );
    assert_eq!(
        text(
            &mut c,
            &["CONFIG", "GET", "latency-tracking-info-percentiles"]
        ),
        "*2\r\n$33\r\nlatency-tracking-info-percentiles\r\n$8\r\n50 99.99\r\n"
    );
    let help = text(&mut c, &["LATENCY", "HELP"]);
    assert!(help.starts_with("*17\r\n+LATENCY <subcommand>"), "{help}");
    assert!(help.contains("+HISTOGRAM [COMMAND ...]"), "{help}");
}
