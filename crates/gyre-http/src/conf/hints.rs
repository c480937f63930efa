//! nginx's performance hints that have nothing to tune in gyre: accepted
//! with nginx's argument checks and error texts, and otherwise without
//! effect, so real `nginx.conf` files (Debian's own starts with
//! `types_hash_max_size 2048;`) run unchanged.
//!
//! Each entry says why it is a no-op here. None of them changes what a
//! client receives in nginx either; they size nginx's build-time hash tables,
//! choose how its file I/O is done, or shape TCP segments:
//!
//! - `*_hash_max_size` / `*_hash_bucket_size` (types, server names,
//!   variables, map): nginx's static hash tables; gyre's lookups are
//!   `HashMap`s and sorted tables that need no sizing.
//! - `tcp_nopush`: nginx sets `TCP_CORK` around `sendfile` so the header and
//!   the file's first bytes share a segment; gyre sends a head that a file
//!   follows with `MSG_MORE`, which does the same, except on a connection's
//!   first response, whose head goes alone so the client quick-ACKs the file
//!   (see `HttpConn::head_alone`); either way only how bytes are cut into
//!   segments changes.
//! - `aio`, `directio`, `directio_alignment`, `output_buffers`,
//!   `postpone_output`: how nginx reads files and batches output; gyre reads
//!   files with `sendfile`/`read` on its loop and writes what it has.
//! - `open_file_cache_min_uses`, `open_file_cache_errors`: when nginx's
//!   descriptor cache keeps an entry; gyre's cache revalidates within
//!   `open_file_cache_valid` either way, so answers are the same.
//! - `reset_timedout_connection`: nginx closes a timed-out connection with
//!   RST instead of FIN; the client sees a closed connection in both cases.
//! - `msie_padding`, `msie_refresh`: padding and refresh pages for Internet
//!   Explorer user agents, which gyre does not single out; for the same
//!   reason `keepalive_disable` is checked and gyre keeps every browser's
//!   connection alive (nginx's default closes MSIE 6's after POSTs).
//! - `sendfile_max_chunk`, `read_ahead`: how much one `sendfile` call sends
//!   and the kernel's read-ahead; the bytes sent are the same.
//! - `open_log_file_cache`: caches descriptors of log files whose names
//!   have variables; gyre's access log paths have none and stay open.
//! - `log_subrequest`: gyre makes no subrequests, so none is logged.
//! - `disable_symlinks off`, `chunked_transfer_encoding on`: what gyre does
//!   (the other values are refused: not implemented).
//!
//! This is a module of its own (not rows of `HTTP_MODULE`'s table) because
//! it keeps no configuration: the walker finds a directive in any
//! registered module.

use gyre_core::conf::{Args, ConfCtx, Context, Directive, DirectiveSpec, ModuleDef};

const H: Context = Context::HTTP;
const HSL: Context = Context::HTTP.or(Context::SERVER).or(Context::LOCATION);

/// Nothing is kept: the module only checks its directives.
#[derive(Debug, Default)]
pub struct HintsConf;

/// nginx's num slot (`invalid number`).
fn number(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    d.number(0).map(drop)
}

/// nginx's size slot (`invalid value`).
fn size(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    d.size(0).map(drop)
}

/// nginx's flag slot.
fn flag(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    d.flag().map(drop)
}

/// `aio on|off|threads[=pool]`. Debian's nginx is built with threads and
/// without file AIO, and says so for `on`.
fn aio(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    match d.arg(0) {
        "off" | "threads" => Ok(()),
        a if a.starts_with("threads=") => Ok(()),
        "on" => Err("\"aio on\" is unsupported on this platform".into()),
        _ => Err(d.error("invalid value")),
    }
}

/// `directio size|off`.
fn directio(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    if d.arg(0) == "off" {
        return Ok(());
    }
    d.offset(0).map(drop)
}

/// `keepalive_disable none|msie6|safari ...`.
fn keepalive_disable(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    match d
        .args
        .iter()
        .find(|a| !matches!(a.as_str(), "none" | "msie6" | "safari"))
    {
        Some(a) => Err(format!("invalid value \"{a}\"")),
        None => Ok(()),
    }
}

/// `open_log_file_cache max=N [inactive=time] [min_uses=N] [valid=time]|off`.
fn open_log_file_cache(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    if d.args.len() == 1 && d.arg(0) == "off" {
        return Ok(());
    }
    let mut max = false;
    for a in &d.args {
        let ok = if let Some(v) = a.strip_prefix("max=") {
            max = true;
            gyre_core::conf::parse_number(v).is_some()
        } else if let Some(v) = a.strip_prefix("min_uses=") {
            gyre_core::conf::parse_number(v).is_some()
        } else if let Some(v) = a
            .strip_prefix("inactive=")
            .or_else(|| a.strip_prefix("valid="))
        {
            gyre_core::conf::parse_time_sec(v).is_some()
        } else {
            false
        };
        if !ok {
            return Err(format!("invalid \"open_log_file_cache\" parameter \"{a}\""));
        }
    }
    if !max {
        return Err("\"open_log_file_cache\" must have \"max\" parameter".into());
    }
    Ok(())
}

/// `disable_symlinks off` (gyre follows symlinks, nginx's default).
fn disable_symlinks(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    match d.arg(0) {
        "off" if d.args.len() == 1 => Ok(()),
        "on" | "if_not_owner" => Err(format!(
            "\"disable_symlinks {}\" is not supported",
            d.arg(0)
        )),
        a => Err(format!("invalid parameter \"{a}\"")),
    }
}

/// `chunked_transfer_encoding on` (gyre chunks where nginx would).
fn chunked(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    if d.flag()? {
        Ok(())
    } else {
        Err("\"chunked_transfer_encoding off\" is not supported".into())
    }
}

/// `output_buffers number size` (nginx's bufs slot).
fn bufs(_: &mut HintsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    match (gyre_core::conf::parse_number(d.arg(0)), d.size(1)) {
        (Some(n), Ok(s)) if n > 0 && s > 0 => Ok(()),
        _ => Err(d.error("invalid value")),
    }
}

static HINTS_DIRECTIVES: &[DirectiveSpec<HintsConf>] = &[
    DirectiveSpec::new("types_hash_max_size", HSL, Args::TAKE1, number),
    DirectiveSpec::new("types_hash_bucket_size", HSL, Args::TAKE1, number),
    DirectiveSpec::new("server_names_hash_max_size", H, Args::TAKE1, number),
    DirectiveSpec::new("server_names_hash_bucket_size", H, Args::TAKE1, number),
    DirectiveSpec::new("variables_hash_max_size", H, Args::TAKE1, number),
    DirectiveSpec::new("variables_hash_bucket_size", H, Args::TAKE1, number),
    DirectiveSpec::new("map_hash_max_size", H, Args::TAKE1, number),
    DirectiveSpec::new("map_hash_bucket_size", H, Args::TAKE1, number),
    DirectiveSpec::new("tcp_nopush", HSL, Args::FLAG, flag),
    DirectiveSpec::new("aio", HSL, Args::TAKE1, aio),
    DirectiveSpec::new("directio", HSL, Args::TAKE1, directio),
    DirectiveSpec::new("directio_alignment", HSL, Args::TAKE1, size),
    DirectiveSpec::new("output_buffers", HSL, Args::TAKE2, bufs),
    DirectiveSpec::new("postpone_output", HSL, Args::TAKE1, size),
    DirectiveSpec::new("open_file_cache_min_uses", HSL, Args::TAKE1, number),
    DirectiveSpec::new("open_file_cache_errors", HSL, Args::FLAG, flag),
    DirectiveSpec::new("reset_timedout_connection", HSL, Args::FLAG, flag),
    DirectiveSpec::new("msie_padding", HSL, Args::FLAG, flag),
    DirectiveSpec::new("msie_refresh", HSL, Args::FLAG, flag),
    DirectiveSpec::new("keepalive_disable", HSL, Args::ONE_MORE, keepalive_disable),
    DirectiveSpec::new("sendfile_max_chunk", HSL, Args::TAKE1, size),
    DirectiveSpec::new("read_ahead", HSL, Args::TAKE1, size),
    DirectiveSpec::new("log_subrequest", HSL, Args::FLAG, flag),
    DirectiveSpec::new(
        "open_log_file_cache",
        HSL,
        Args::TAKE1234,
        open_log_file_cache,
    ),
    DirectiveSpec::new("disable_symlinks", HSL, Args::TAKE12, disable_symlinks),
    DirectiveSpec::new("chunked_transfer_encoding", HSL, Args::FLAG, chunked),
];

/// Register after [`HTTP_MODULE`](super::HTTP_MODULE).
pub static HINTS_MODULE: ModuleDef<HintsConf> = ModuleDef {
    name: "http_hints",
    directives: HINTS_DIRECTIVES,
    create_conf: HintsConf::default,
    init_conf: gyre_core::conf::no_init,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::HTTP_MODULE;

    fn load(http: &str) -> Result<(), String> {
        let text = format!("events {{}}\nhttp {{\n{http}\n}}\n");
        gyre_core::conf::load_str(
            &text,
            "conf/gyre.conf".as_ref(),
            "/tmp".as_ref(),
            None,
            &[&HTTP_MODULE, &HINTS_MODULE],
        )
        .map(drop)
        .map_err(|e| e.to_string())
    }

    #[test]
    fn hints_are_accepted_where_nginx_has_them() {
        load(
            "types_hash_max_size 2048; server_names_hash_bucket_size 64; tcp_nopush on;\n\
             aio threads; directio 4m; output_buffers 2 32k; variables_hash_max_size 1024;\n\
             server { listen 127.0.0.1:1; location / { aio off; directio off; msie_padding off;\n\
             open_file_cache_errors on; open_file_cache_min_uses 2; reset_timedout_connection on; } }",
        )
        .unwrap();
    }

    /// The texts nginx 1.22.1 (Debian's) gives for the same lines.
    #[test]
    fn bad_arguments_get_nginx_messages() {
        let cases = [
            ("aio on;", "\"aio on\" is unsupported on this platform in /tmp/conf/gyre.conf:4"),
            ("aio bogus;", "\"aio\" directive invalid value"),
            ("directio 4x;", "\"directio\" directive invalid value"),
            ("output_buffers x 32k;", "\"output_buffers\" directive invalid value"),
            ("output_buffers 2 32x;", "\"output_buffers\" directive invalid value"),
            ("types_hash_max_size x;", "\"types_hash_max_size\" directive invalid number"),
            ("postpone_output x;", "\"postpone_output\" directive invalid value"),
            (
                "msie_padding maybe;",
                "invalid value \"maybe\" in \"msie_padding\" directive, it must be \"on\" or \"off\"",
            ),
            ("open_log_file_cache inactive=20s;", "\"open_log_file_cache\" must have \"max\" parameter"),
            ("open_log_file_cache max=x;", "invalid \"open_log_file_cache\" parameter \"max=x\""),
            ("keepalive_disable none foo;", "invalid value \"foo\""),
            ("disable_symlinks maybe;", "invalid parameter \"maybe\""),
            ("sendfile_max_chunk x;", "\"sendfile_max_chunk\" directive invalid value"),
            (
                "server { server_names_hash_bucket_size 64; }",
                "\"server_names_hash_bucket_size\" directive is not allowed here",
            ),
        ];
        for (line, want) in cases {
            let e = load(&format!("\n{line}")).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
    }
}
