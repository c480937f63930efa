//! Differential tests of the latency monitor against a real redis-server
//! 7.0: `latency-monitor-threshold` (CONFIG GET / SET and errors), the
//! `command` event DEBUG SLEEP makes, LATENCY LATEST / HISTORY / GRAPH /
//! DOCTOR / RESET / HELP in RESP2 and RESP3, their arity and unknown-event
//! errors, and `enable-debug-command`. Times and milliseconds are masked
//! (`N>t`); shapes, event names, texts and counts are compared exactly.
//! The threshold is well above what an ordinary command takes so a slow
//! machine adds no events of its own. Skips when redis-server is missing.
#![allow(clippy::unwrap_used)]

mod kv_script;
mod util;

use kv_script::{differential, start_gyre, Conn};

#[test]
fn latency_monitor_matches_redis() {
    differential(
        "kvdiff-latmon",
        &["--enable-debug-command", "yes"],
        "    enable-debug-command yes;",
        "
        0> CONFIG GET latency-monitor-threshold
        0> LATENCY LATEST
        0> LATENCY HISTORY command
        0> LATENCY GRAPH command
        0> LATENCY DOCTOR
        0> LATENCY RESET
        0> LATENCY HELP
        0> LATENCY HISTORY
        0> LATENCY HISTORY a b
        0> LATENCY LATEST x
        0> LATENCY DOCTOR x
        0> LATENCY GRAPH
        0> LATENCY RESET a b c
        0> CONFIG SET latency-monitor-threshold -1
        0> CONFIG SET latency-monitor-threshold abc
        0> DEBUG SLEEP 0
        0> DEBUG SLEEP abc
        0> DEBUG SLEEP
        0> DEBUG NOSUCH
        0> CONFIG SET latency-monitor-threshold 40
        0> CONFIG GET latency-monitor-threshold
        0> LATENCY DOCTOR
        0> DEBUG SLEEP 0.1
        0>t LATENCY LATEST
        0>t LATENCY HISTORY command
        0> LATENCY HISTORY COMMAND
        0> LATENCY HISTORY fast-command
        0>t LATENCY GRAPH command
        0> LATENCY GRAPH COMMAND
        0>t LATENCY DOCTOR
        1>? HELLO 3
        1>t LATENCY GRAPH command
        1>t LATENCY DOCTOR
        1>t LATENCY LATEST
        1>t LATENCY HISTORY command
        0> LATENCY RESET command nope COMMAND
        0> LATENCY LATEST
        0> LATENCY DOCTOR
        0> MULTI
        0> DEBUG SLEEP 0.1
        0> PING
        0> EXEC
        0>t LATENCY LATEST
        0> LATENCY RESET COMMAND
        0> CONFIG SET latency-monitor-threshold 0
        0> LATENCY DOCTOR
        0> DEBUG SLEEP 0.1
        0> LATENCY LATEST
        ",
    );
}

/// DEBUG is refused unless `enable-debug-command` allows it, with
/// Redis's message; the setting is immutable at run time.
#[test]
fn debug_command_is_protected_as_in_redis() {
    differential(
        "kvdiff-latmon-debug",
        &[],
        "",
        "
        0> CONFIG GET enable-debug-command
        0> CONFIG SET enable-debug-command yes
        0> DEBUG SLEEP 0
        0> DEBUG
        0> DEBUG HELP
        ",
    );
}

/// `latency-monitor-threshold` in `kv {}`; `enable-debug-command local`
/// lets a loopback client run DEBUG.
#[test]
fn threshold_from_kv_block_and_local_debug() {
    let g = start_gyre(
        "kv-latmon-conf",
        "    latency-monitor-threshold 30;\n    enable-debug-command local;",
    );
    let mut c = Conn::open(g.port);
    let mut text = |args: &[&str]| {
        c.send(args);
        String::from_utf8_lossy(&c.frame()).into_owned()
    };
    assert_eq!(
        text(&["CONFIG", "GET", "latency-monitor-threshold"]),
        "*2\r\n$25\r\nlatency-monitor-threshold\r\n$2\r\n30\r\n"
    );
    assert_eq!(
        text(&["CONFIG", "GET", "enable-debug-command"]),
        "*2\r\n$20\r\nenable-debug-command\r\n$5\r\nlocal\r\n"
    );
    assert_eq!(text(&["DEBUG", "SLEEP", "0.05"]), "+OK\r\n");
    let latest = text(&["LATENCY", "LATEST"]);
    assert!(
        latest.starts_with("*1\r\n*4\r\n$7\r\ncommand\r\n:"),
        "{latest}"
    );
    // Below the threshold: no new event, the old one stays.
    assert_eq!(text(&["DEBUG", "SLEEP", "0"]), "+OK\r\n");
    assert!(text(&["LATENCY", "LATEST"]).starts_with("*1\r\n"));
    assert_eq!(text(&["LATENCY", "RESET"]), ":1\r\n");
    assert_eq!(text(&["LATENCY", "LATEST"]), "*0\r\n");
}
