//! Per-command latency tracking (Redis 7.0's part of `latency.c` and
//! `server.c`): `latency-tracking`, `latency-tracking-info-percentiles`,
//! the INFO `latencystats` section and LATENCY HISTOGRAM.
//!
//! The histograms themselves are [`crate::histogram`], one per command
//! id in [`crate::cmdstats`] (filled where a call is counted; CONFIG
//! RESETSTAT drops them). What this module owns: the settings' parsing
//! and display, and the two ways the histograms are read out.
//!
//! The latency *monitor* (`latency-monitor-threshold`, LATENCY LATEST /
//! HISTORY / GRAPH / DOCTOR / RESET), which samples stalls of named code
//! paths rather than every command, is [`crate::latency_monitor`]; its
//! subcommands are in the table here.

use std::fmt::Write;

use crate::cmd::{help_lines, no_handler, spec, CommandSpec, Ctx, Resolved, ADMIN};
use crate::latency_monitor as lm;
use crate::server::Server;

/// `latency-tracking-info-percentiles`' default.
pub const DEFAULT_PERCENTILES: &[f64] = &[50.0, 99.0, 99.9];

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: LATENCY_SUBS,
    ..spec!(
        "latency",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "A container for latency diagnostics commands",
        no_handler
    )
}];

static LATENCY_SUBS: &[CommandSpec] = &[
    spec!(
        "latest",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Return the latest latency samples for all events.",
        lm::latency_latest
    ),
    spec!(
        "reset",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Reset latency data for one or more events.",
        lm::latency_reset
    ),
    spec!(
        "doctor",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Return a human readable latency analysis report.",
        lm::latency_doctor
    ),
    spec!(
        "graph",
        3,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Return a latency graph for the event.",
        lm::latency_graph
    ),
    spec!(
        "histogram",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "7.0.0",
        "Return the cumulative distribution of latencies of a subset of commands or all.",
        latency_histogram
    ),
    spec!(
        "help",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Show helpful text about the different subcommands.",
        latency_help
    ),
    spec!(
        "history",
        3,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Return timestamp-latency samples for the event.",
        lm::latency_history
    ),
];

/// `latency-tracking-info-percentiles`: numbers in [0, 100], never NaN
/// (the parser refuses it), so equality is total.
#[derive(Clone, Debug, PartialEq)]
pub struct Percentiles(pub Vec<f64>);

impl Eq for Percentiles {}

impl Default for Percentiles {
    fn default() -> Self {
        Percentiles(DEFAULT_PERCENTILES.to_vec())
    }
}

/// Redis's `"%f"` then `trimDoubleString`: `50`, `99.9`, `25.5`.
pub fn format_percentile(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

/// CONFIG GET's value: the percentiles separated by spaces.
pub fn format_percentiles(ps: &[f64]) -> String {
    ps.iter()
        .map(|&p| format_percentile(p))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Redis's `setConfigLatencyTrackingInfoPercentilesOutputOption`: each
/// argument a number in [0, 100]; one empty argument is the empty list.
pub fn parse_percentiles(args: &[&[u8]]) -> Result<Percentiles, &'static str> {
    if args.len() == 1 && args[0].is_empty() {
        return Ok(Percentiles(Vec::new()));
    }
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        let p = string2d(a).ok_or("Invalid latency-tracking-info-percentiles parameters")?;
        if !(0.0..=100.0).contains(&p) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
            );
        }
        out.push(p);
    }
    Ok(Percentiles(out))
}

/// Redis's `string2d`: the whole string a number, no leading space, not
/// NaN.
fn string2d(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    if t.is_empty() || t.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let v: f64 = t.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Redis's `getSafeInfoString`: `#`, `:`, CR and LF become `_`.
fn safe_name(name: &str) -> String {
    name.replace(['#', ':', '\n', '\r'], "_")
}

/// The INFO `latencystats` lines: each command with a histogram, in the
/// table's order, `latency_percentiles_usec_<cmd>:p50=1.003,...`.
pub fn info_section(server: &Server, out: &mut String) {
    out.push_str("# Latencystats\r\n");
    let ps = &server.config.latency_percentiles.0;
    for r in server.table.ids() {
        let Some(h) = server.cmdstats.histogram(r.id) else {
            continue;
        };
        let _ = write!(
            out,
            "latency_percentiles_usec_{}:",
            safe_name(&r.full_name())
        );
        for (j, &p) in ps.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            let us = h.value_at_percentile(p) as f64 / 1000.0;
            let _ = write!(out, "p{}={us:.3}", format_percentile(p));
        }
        out.push_str("\r\n");
    }
}

/// One command's entry: its name, then `{calls, histogram_usec}`.
fn fill_cdf(server: &Server, ctx: &mut Ctx<'_>, r: &Resolved) -> bool {
    let Some(h) = server.cmdstats.histogram(r.id) else {
        return false;
    };
    ctx.bulk(r.full_name().as_bytes());
    ctx.map(2);
    ctx.bulk(b"calls");
    ctx.int(h.total() as i64);
    ctx.bulk(b"histogram_usec");
    let cdf = h.cdf();
    ctx.map(cdf.len());
    for (us, n) in cdf {
        ctx.int(us as i64);
        ctx.int(n as i64);
    }
    true
}

/// The ids LATENCY HISTOGRAM names: a command, its subcommands (a
/// container named), or `container|sub`; unknown names are skipped.
fn named_ids(server: &Server, name: &[u8]) -> Vec<Resolved> {
    let ids = server.table.ids();
    let mut parts = name.splitn(2, |&b| b == b'|');
    let top = parts.next().unwrap_or_default();
    let Some((spec, top_id)) = server.table.get_id(top) else {
        return Vec::new();
    };
    let subs = |pos: usize| ids.get(server.table.sub_id(top_id, pos) as usize).copied();
    match parts.next() {
        Some(sub) => spec
            .subcommands
            .iter()
            .position(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))
            .and_then(subs)
            .into_iter()
            .collect(),
        None => {
            let mut v: Vec<Resolved> = ids.get(top_id as usize).copied().into_iter().collect();
            v.extend((0..spec.subcommands.len()).filter_map(subs));
            v
        }
    }
}

/// LATENCY HISTOGRAM [command ...] (Redis's `latencyAllCommandsFillCDF`
/// / `latencySpecificCommandsFillCDF`): a map of command name to its
/// calls and cumulative distribution, only commands that have one.
fn latency_histogram(server: &mut Server, ctx: &mut Ctx<'_>) {
    let picked: Vec<Resolved> = if ctx.argc() == 2 {
        server.table.ids().to_vec()
    } else {
        (2..ctx.argc())
            .flat_map(|i| named_ids(server, ctx.arg(i)))
            .collect()
    };
    let n = picked
        .iter()
        .filter(|r| server.cmdstats.histogram(r.id).is_some())
        .count();
    ctx.map(n);
    for r in &picked {
        fill_cdf(server, ctx, r);
    }
}

fn latency_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_parse_and_print_as_redis() {
        assert_eq!(format_percentiles(DEFAULT_PERCENTILES), "50 99 99.9");
        let v = parse_percentiles(&[b"0", b"25.50", b"100", b"99.999"]).unwrap();
        assert_eq!(format_percentiles(&v.0), "0 25.5 100 99.999");
        assert_eq!(parse_percentiles(&[b""]).unwrap(), Percentiles(Vec::new()));
        assert_eq!(
            parse_percentiles(&[b"abc"]),
            Err("Invalid latency-tracking-info-percentiles parameters")
        );
        assert!(parse_percentiles(&[b"101"])
            .unwrap_err()
            .contains("[0.0,100.0]"));
        assert!(parse_percentiles(&[b" 5"]).is_err());
        assert!(parse_percentiles(&[b"nan"]).is_err());
    }

    #[test]
    fn info_names_are_made_safe() {
        assert_eq!(safe_name("config|get"), "config|get");
        assert_eq!(safe_name("a:b#c"), "a_b_c");
    }
}
