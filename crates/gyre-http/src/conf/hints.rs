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
//!   the file's first bytes share a segment; gyre always sends a head that a
//!   file follows with `MSG_MORE`, which does the same, so `on` is what gyre
//!   does and `off` changes only how bytes are cut into segments.
//! - `aio`, `directio`, `directio_alignment`, `output_buffers`,
//!   `postpone_output`: how nginx reads files and batches output; gyre reads
//!   files with `sendfile`/`read` on its loop and writes what it has.
//! - `open_file_cache_min_uses`, `open_file_cache_errors`: when nginx's
//!   descriptor cache keeps an entry; gyre's cache revalidates within
//!   `open_file_cache_valid` either way, so answers are the same.
//! - `reset_timedout_connection`: nginx closes a timed-out connection with
//!   RST instead of FIN; the client sees a closed connection in both cases.
//! - `msie_padding`, `msie_refresh`: padding and refresh pages for Internet
//!   Explorer user agents, which gyre does not single out.
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
