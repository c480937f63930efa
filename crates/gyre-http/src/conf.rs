//! The `http {}` configuration (nginx's ngx_http_core_module directives and
//! the few other modules gyre has), as a directive table for gyre-core's
//! configuration walker.
//!
//! Values set at `http`, `server` or `location` level inherit downwards the
//! way nginx's merge_conf does: each level keeps `Option`s, and
//! [`HttpConf::finish`] resolves every location (and each server's fallback)
//! into a complete [`LocConf`] once the file is read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gyre_core::conf::{
    Args, Block, ConfCtx, ConfError, Context, Directive, DirectiveSpec, ListenConf, ModuleDef,
};

use crate::{mime, ssl};

/// How a `location` matches (`=`, `^~`, or a plain prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocKind {
    Exact,
    /// `^~`: a prefix that wins over regexes (gyre has none, so it behaves as
    /// a prefix).
    PrefixNoRegex,
    Prefix,
}

/// `return CODE [TEXT|URL]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Return {
    pub code: u16,
    /// Body text or redirect URL; shared so a response carries it without
    /// a copy.
    pub text: Option<Arc<str>>,
}

/// `add_header NAME VALUE [always]`: (name, value, always).
pub type AddHeader = (Arc<str>, Arc<str>, bool);

/// Settings that inherit http → server → location; `None` means "not set
/// here".
#[derive(Debug, Clone, Default)]
pub struct LocSettings {
    pub root: Option<PathBuf>,
    pub alias: Option<PathBuf>,
    pub index: Option<Vec<String>>,
    pub default_type: Option<Arc<str>>,
    pub ret: Option<Return>,
    pub stub_status: Option<bool>,
    pub add_header: Option<Vec<AddHeader>>,
    pub error_page: Option<Vec<(Vec<u16>, String)>>,
    pub keepalive_timeout: Option<u64>,
    pub keepalive_requests: Option<u64>,
    pub send_timeout: Option<u64>,
    pub client_body_timeout: Option<u64>,
    pub client_max_body_size: Option<u64>,
    pub sendfile: Option<bool>,
    pub tcp_nodelay: Option<bool>,
    pub open_file_cache: Option<Option<OpenFileCache>>,
    pub access_log: Option<Option<PathBuf>>,
}

/// `open_file_cache max=N [inactive=T]` / `open_file_cache_valid T`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileCache {
    pub max: usize,
    pub inactive_ms: u64,
    pub valid_ms: u64,
}

/// gyre's default: a small cache with a short validity, so a small file
/// costs no open/fstat/close per request (nginx has it off by default).
pub const DEFAULT_OPEN_FILE_CACHE: OpenFileCache = OpenFileCache {
    max: 1000,
    inactive_ms: 20_000,
    valid_ms: 1_000,
};

/// A location's complete settings after inheritance.
#[derive(Debug, Clone)]
pub struct LocConf {
    pub root: PathBuf,
    pub alias: Option<PathBuf>,
    pub index: Vec<String>,
    pub default_type: Arc<str>,
    pub ret: Option<Return>,
    pub stub_status: bool,
    pub add_header: Vec<AddHeader>,
    pub error_page: Vec<(Vec<u16>, String)>,
    pub keepalive_timeout: u64,
    pub keepalive_requests: u64,
    pub send_timeout: u64,
    pub client_body_timeout: u64,
    pub client_max_body_size: u64,
    pub sendfile: bool,
    pub tcp_nodelay: bool,
    pub open_file_cache: Option<OpenFileCache>,
    pub access_log: Option<PathBuf>,
}

/// One `location`.
#[derive(Debug, Clone)]
pub struct Location {
    pub kind: LocKind,
    pub uri: String,
    pub set: LocSettings,
    /// Filled by [`HttpConf::finish`].
    pub conf: Option<Arc<LocConf>>,
}

/// Server-level settings that do not inherit into locations.
#[derive(Debug, Clone, Default)]
pub struct ServerSettings {
    pub client_header_timeout: Option<u64>,
    pub client_header_buffer_size: Option<usize>,
    pub large_client_header_buffers: Option<(usize, usize)>,
}

/// One `server {}`.
#[derive(Debug, Clone, Default)]
pub struct ServerConf {
    pub listen: Vec<ListenConf>,
    pub server_names: Vec<String>,
    pub set: LocSettings,
    pub srv: ServerSettings,
    pub locations: Vec<Location>,
    /// What a URI matching no location gets (the server's own settings).
    pub fallback: Option<Arc<LocConf>>,
    pub client_header_timeout: u64,
    pub client_header_buffer_size: usize,
    pub large_client_header_buffers: (usize, usize),
    /// `ssl_*` (crate::ssl).
    pub ssl: crate::ssl::ServerSsl,
}

/// The whole `http {}` block.
#[derive(Debug, Clone, Default)]
pub struct HttpConf {
    /// Whether `http {}` appeared at all.
    pub present: bool,
    pub set: LocSettings,
    pub srv: ServerSettings,
    pub servers: Vec<ServerConf>,
    /// `ssl_*` at http level (crate::ssl).
    pub ssl: crate::ssl::SslSet,
    /// Extension → MIME type, from `types {}` or the built-in table.
    pub types: Arc<mime::MimeTypes>,
    types_set: bool,
}

/// Which level a directive is at, from the enclosing blocks.
enum Level {
    Http,
    Server,
    Location,
}

fn level(cx: &ConfCtx) -> Level {
    match cx.blocks().last().map(String::as_str) {
        Some("location") => Level::Location,
        Some("server") => Level::Server,
        _ => Level::Http,
    }
}

impl HttpConf {
    fn settings(&mut self, cx: &ConfCtx) -> Result<&mut LocSettings, String> {
        Ok(match level(cx) {
            Level::Http => &mut self.set,
            Level::Server => &mut self.servers.last_mut().ok_or("no server")?.set,
            Level::Location => {
                &mut self
                    .servers
                    .last_mut()
                    .ok_or("no server")?
                    .locations
                    .last_mut()
                    .ok_or("no location")?
                    .set
            }
        })
    }

    fn server_settings(&mut self, cx: &ConfCtx) -> Result<&mut ServerSettings, String> {
        Ok(match level(cx) {
            Level::Http => &mut self.srv,
            _ => &mut self.servers.last_mut().ok_or("no server")?.srv,
        })
    }

    /// Finds the location for a (normalised) path: an exact match, else the
    /// longest prefix (nginx's static location tree, without regexes). Gives
    /// the URI the location was declared with (what `alias` replaces) and its
    /// settings; the server's own settings under `/` when none matches.
    pub fn find_location<'a>(server: &'a ServerConf, path: &str) -> (&'a str, &'a Arc<LocConf>) {
        let mut best: Option<&Location> = None;
        for l in &server.locations {
            match l.kind {
                LocKind::Exact if l.uri == path => {
                    best = Some(l);
                    break;
                }
                LocKind::Exact => {}
                LocKind::Prefix | LocKind::PrefixNoRegex => {
                    if path.starts_with(&l.uri)
                        && best
                            .is_none_or(|b| b.kind != LocKind::Exact && b.uri.len() < l.uri.len())
                    {
                        best = Some(l);
                    }
                }
            }
        }
        match best.and_then(|l| l.conf.as_ref().map(|c| (l.uri.as_str(), c))) {
            Some(found) => found,
            None => ("/", server.fallback.as_ref().unwrap_or(&EMPTY_FALLBACK.0)),
        }
    }
}

struct Fallback(Arc<LocConf>);

static EMPTY_FALLBACK: std::sync::LazyLock<Fallback> = std::sync::LazyLock::new(|| {
    Fallback(Arc::new(resolve(
        &[],
        Path::new("html"),
        Path::new("logs/access.log"),
    )))
});

fn pick<T: Clone>(levels: &[&LocSettings], f: impl Fn(&LocSettings) -> Option<T>) -> Option<T> {
    levels.iter().rev().find_map(|s| f(s))
}

/// Resolves settings from the outermost level (`http`) to the innermost.
fn resolve(levels: &[&LocSettings], default_root: &Path, default_log: &Path) -> LocConf {
    LocConf {
        root: pick(levels, |s| s.root.clone()).unwrap_or_else(|| default_root.to_path_buf()),
        alias: levels.last().and_then(|s| s.alias.clone()),
        index: pick(levels, |s| s.index.clone()).unwrap_or_else(|| vec!["index.html".into()]),
        default_type: pick(levels, |s| s.default_type.clone())
            .unwrap_or_else(|| "text/plain".into()),
        ret: levels.last().and_then(|s| s.ret.clone()),
        stub_status: levels.last().and_then(|s| s.stub_status).unwrap_or(false),
        add_header: pick(levels, |s| s.add_header.clone()).unwrap_or_default(),
        error_page: pick(levels, |s| s.error_page.clone()).unwrap_or_default(),
        keepalive_timeout: pick(levels, |s| s.keepalive_timeout).unwrap_or(75_000),
        keepalive_requests: pick(levels, |s| s.keepalive_requests).unwrap_or(1000),
        send_timeout: pick(levels, |s| s.send_timeout).unwrap_or(60_000),
        client_body_timeout: pick(levels, |s| s.client_body_timeout).unwrap_or(60_000),
        client_max_body_size: pick(levels, |s| s.client_max_body_size).unwrap_or(1 << 20),
        sendfile: pick(levels, |s| s.sendfile).unwrap_or(true),
        tcp_nodelay: pick(levels, |s| s.tcp_nodelay).unwrap_or(true),
        open_file_cache: pick(levels, |s| s.open_file_cache)
            .unwrap_or(Some(DEFAULT_OPEN_FILE_CACHE)),
        // nginx's default: `access_log logs/access.log combined`.
        access_log: pick(levels, |s| s.access_log.clone())
            .unwrap_or_else(|| Some(default_log.to_path_buf())),
    }
}

fn http_create() -> HttpConf {
    HttpConf::default()
}

fn http_init(c: &mut HttpConf, cx: &ConfCtx) -> Result<(), ConfError> {
    if !c.types_set {
        c.types = Arc::new(mime::builtin());
    }
    let default_root = cx.full_path("html");
    let default_log = cx.full_path("logs/access.log");
    let http_set = c.set.clone();
    let http_srv = c.srv.clone();
    for s in &mut c.servers {
        if s.listen.is_empty() {
            s.listen.push(
                gyre_core::conf::parse_listen(&["*:80".to_string()], 80).map_err(ConfError::new)?,
            );
        }
        s.client_header_timeout = s
            .srv
            .client_header_timeout
            .or(http_srv.client_header_timeout)
            .unwrap_or(60_000);
        s.client_header_buffer_size = s
            .srv
            .client_header_buffer_size
            .or(http_srv.client_header_buffer_size)
            .unwrap_or(1024);
        s.large_client_header_buffers = s
            .srv
            .large_client_header_buffers
            .or(http_srv.large_client_header_buffers)
            .unwrap_or((4, 8192));
        let srv_set = s.set.clone();
        s.fallback = Some(Arc::new(resolve(
            &[&http_set, &srv_set],
            &default_root,
            &default_log,
        )));
        for l in &mut s.locations {
            l.conf = Some(Arc::new(resolve(
                &[&http_set, &srv_set, &l.set],
                &default_root,
                &default_log,
            )));
        }
    }
    crate::ssl::init(c)
}

fn set_http(c: &mut HttpConf, _: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.present = true;
    Ok(())
}

fn set_server(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.servers.push(ServerConf {
        ssl: crate::ssl::ServerSsl::at(d),
        ..ServerConf::default()
    });
    Ok(())
}

fn set_listen(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let l = d.listen(80)?;
    c.servers.last_mut().ok_or("no server")?.listen.push(l);
    Ok(())
}

fn set_server_name(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let s = c.servers.last_mut().ok_or("no server")?;
    s.server_names
        .extend(d.args.iter().map(|a| a.to_ascii_lowercase()));
    Ok(())
}

fn set_location(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    if matches!(level(cx), Level::Location) {
        return Err(d.error("nested locations are not supported"));
    }
    let (kind, uri) = match d.args.as_slice() {
        [m, uri] if m == "=" => (LocKind::Exact, uri.clone()),
        [m, uri] if m == "^~" => (LocKind::PrefixNoRegex, uri.clone()),
        [m, _] if m == "~" || m == "~*" => {
            return Err(format!("regex locations are not supported: \"{m}\""))
        }
        [uri] if uri.starts_with('=') && uri.len() > 1 => (LocKind::Exact, uri[1..].to_string()),
        [uri] => (LocKind::Prefix, uri.clone()),
        _ => return Err(format!("invalid location modifier \"{}\"", d.arg(0))),
    };
    let s = c.servers.last_mut().ok_or("no server")?;
    s.locations.push(Location {
        kind,
        uri,
        set: LocSettings::default(),
        conf: None,
    });
    Ok(())
}

fn set_root(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let p = cx.full_path(d.arg(0));
    let s = c.settings(cx)?;
    if s.alias.is_some() {
        return Err(
            "\"root\" directive is duplicate, \"alias\" directive was specified earlier".into(),
        );
    }
    s.root = Some(p);
    Ok(())
}

fn set_alias(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let p = cx.full_path(d.arg(0));
    let s = c.settings(cx)?;
    if s.root.is_some() {
        return Err(
            "\"alias\" directive is duplicate, \"root\" directive was specified earlier".into(),
        );
    }
    s.alias = Some(p);
    Ok(())
}

fn set_index(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.index = Some(d.args.clone());
    Ok(())
}

fn set_default_type(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.default_type = Some(d.arg(0).into());
    Ok(())
}

fn set_types(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let mut map = mime::MimeTypes::default();
    for t in d.block.as_deref().unwrap_or(&[]) {
        for ext in &t.args {
            map.insert(ext.to_ascii_lowercase(), Arc::from(t.name.as_str()));
        }
    }
    c.types = Arc::new(map);
    c.types_set = true;
    Ok(())
}

fn set_return(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let (code, text) = match d.args.as_slice() {
        [code] if code.starts_with("http://") || code.starts_with("https://") => {
            (302, Some(code.as_str().into()))
        }
        [code] => (parse_code(d, code)?, None),
        [code, text] => (parse_code(d, code)?, Some(text.as_str().into())),
        _ => return Err(d.error("invalid number of arguments")),
    };
    c.settings(cx)?.ret = Some(Return { code, text });
    Ok(())
}

fn parse_code(_d: &Directive, s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(n) if n <= 999 => Ok(n),
        _ => Err(format!("invalid return code \"{s}\"")),
    }
}

fn set_stub_status(c: &mut HttpConf, _: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.stub_status = Some(true);
    Ok(())
}

fn set_add_header(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let s = c.settings(cx)?;
    let always = match d.args.get(2).map(String::as_str) {
        None => false,
        Some("always") => true,
        Some(other) => return Err(format!("invalid parameter \"{other}\"")),
    };
    s.add_header
        .get_or_insert_with(Vec::new)
        .push((d.arg(0).into(), d.arg(1).into(), always));
    Ok(())
}

fn set_error_page(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let (uri, codes) = d.args.split_last().ok_or("invalid number of arguments")?;
    let mut list = Vec::new();
    for code in codes {
        match code.parse::<u16>() {
            Ok(n) if (300..=599).contains(&n) => list.push(n),
            _ => return Err(format!("value \"{code}\" must be between 300 and 599")),
        }
    }
    c.settings(cx)?
        .error_page
        .get_or_insert_with(Vec::new)
        .push((list, uri.clone()));
    Ok(())
}

fn set_access_log(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = if d.arg(0) == "off" {
        None
    } else {
        if d.args.len() > 1 && d.arg(1) != "combined" {
            return Err(format!("unknown log format \"{}\"", d.arg(1)));
        }
        Some(cx.full_path(d.arg(0)))
    };
    c.settings(cx)?.access_log = Some(v);
    Ok(())
}

fn set_open_file_cache(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    if d.arg(0) == "off" {
        c.settings(cx)?.open_file_cache = Some(None);
        return Ok(());
    }
    let mut ofc = DEFAULT_OPEN_FILE_CACHE;
    for a in &d.args {
        if let Some(v) = a.strip_prefix("max=") {
            ofc.max = v
                .parse()
                .map_err(|_| format!("invalid \"open_file_cache\" parameter \"{a}\""))?;
        } else if let Some(v) = a.strip_prefix("inactive=") {
            ofc.inactive_ms = gyre_core::conf::parse_time_ms(v)
                .ok_or_else(|| format!("invalid \"open_file_cache\" parameter \"{a}\""))?;
        } else {
            return Err(format!("invalid \"open_file_cache\" parameter \"{a}\""));
        }
    }
    let s = c.settings(cx)?;
    let valid = s.open_file_cache.flatten().map(|o| o.valid_ms);
    ofc.valid_ms = valid.unwrap_or(DEFAULT_OPEN_FILE_CACHE.valid_ms);
    s.open_file_cache = Some(Some(ofc));
    Ok(())
}

fn set_open_file_cache_valid(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let ms = d.msec(0)?;
    let s = c.settings(cx)?;
    let mut o = s
        .open_file_cache
        .flatten()
        .unwrap_or(DEFAULT_OPEN_FILE_CACHE);
    o.valid_ms = ms;
    s.open_file_cache = Some(Some(o));
    Ok(())
}

macro_rules! msec_setter {
    ($name:ident, $field:ident) => {
        fn $name(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
            let v = d.msec(0)?;
            c.settings(cx)?.$field = Some(v);
            Ok(())
        }
    };
}

msec_setter!(set_keepalive_timeout, keepalive_timeout);
msec_setter!(set_send_timeout, send_timeout);
msec_setter!(set_client_body_timeout, client_body_timeout);

fn set_keepalive_requests(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.number(0)?;
    c.settings(cx)?.keepalive_requests = Some(v);
    Ok(())
}

fn set_client_max_body_size(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.offset(0)?;
    c.settings(cx)?.client_max_body_size = Some(v);
    Ok(())
}

fn set_sendfile(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.sendfile = Some(v);
    Ok(())
}

fn set_tcp_nodelay(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.tcp_nodelay = Some(v);
    Ok(())
}

fn set_client_header_timeout(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.msec(0)?;
    c.server_settings(cx)?.client_header_timeout = Some(v);
    Ok(())
}

fn set_client_header_buffer_size(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.size(0)?;
    c.server_settings(cx)?.client_header_buffer_size = Some(v);
    Ok(())
}

fn set_large_client_header_buffers(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let n = d.number(0)? as usize;
    let size = d.size(1)?;
    if n == 0 || size == 0 {
        return Err("invalid value".into());
    }
    c.server_settings(cx)?.large_client_header_buffers = Some((n, size));
    Ok(())
}

const H: Context = Context::HTTP;
const S: Context = Context::SERVER;
const L: Context = Context::LOCATION;
const HSL: Context = Context::HTTP.or(Context::SERVER).or(Context::LOCATION);
const HS: Context = Context::HTTP.or(Context::SERVER);

static HTTP_DIRECTIVES: &[DirectiveSpec<HttpConf>] = &[
    DirectiveSpec::block(
        "http",
        Context::MAIN,
        Args::NOARGS,
        Block::Context(H),
        false,
        set_http,
    ),
    DirectiveSpec::block(
        "server",
        H,
        Args::NOARGS,
        Block::Context(S),
        true,
        set_server,
    ),
    DirectiveSpec::multi("listen", S, Args::ONE_MORE, set_listen),
    DirectiveSpec::multi("server_name", S, Args::ONE_MORE, set_server_name),
    DirectiveSpec::block(
        "location",
        S.or(L),
        Args::TAKE12,
        Block::Context(L),
        true,
        set_location,
    ),
    DirectiveSpec::new("root", HSL, Args::TAKE1, set_root),
    DirectiveSpec::new("alias", L, Args::TAKE1, set_alias),
    DirectiveSpec::new("index", HSL, Args::ONE_MORE, set_index),
    DirectiveSpec::new("default_type", HSL, Args::TAKE1, set_default_type),
    DirectiveSpec::block("types", HSL, Args::NOARGS, Block::Raw, false, set_types),
    DirectiveSpec::new("return", S.or(L), Args::TAKE12, set_return),
    DirectiveSpec::new(
        "stub_status",
        S.or(L),
        Args::NOARGS.or(Args::TAKE1),
        set_stub_status,
    ),
    DirectiveSpec::multi("add_header", HSL, Args::TAKE23, set_add_header),
    DirectiveSpec::multi("error_page", HSL, Args::TWO_MORE, set_error_page),
    DirectiveSpec::new("access_log", HSL, Args::TAKE12, set_access_log),
    DirectiveSpec::new("open_file_cache", HSL, Args::TAKE12, set_open_file_cache),
    DirectiveSpec::new(
        "open_file_cache_valid",
        HSL,
        Args::TAKE1,
        set_open_file_cache_valid,
    ),
    DirectiveSpec::new(
        "keepalive_timeout",
        HSL,
        Args::TAKE12,
        set_keepalive_timeout,
    ),
    DirectiveSpec::new(
        "keepalive_requests",
        HSL,
        Args::TAKE1,
        set_keepalive_requests,
    ),
    DirectiveSpec::new("send_timeout", HSL, Args::TAKE1, set_send_timeout),
    DirectiveSpec::new(
        "client_body_timeout",
        HSL,
        Args::TAKE1,
        set_client_body_timeout,
    ),
    DirectiveSpec::new(
        "client_max_body_size",
        HSL,
        Args::TAKE1,
        set_client_max_body_size,
    ),
    DirectiveSpec::new("sendfile", HSL, Args::FLAG, set_sendfile),
    DirectiveSpec::new("tcp_nodelay", HSL, Args::FLAG, set_tcp_nodelay),
    DirectiveSpec::new(
        "client_header_timeout",
        HS,
        Args::TAKE1,
        set_client_header_timeout,
    ),
    DirectiveSpec::new(
        "client_header_buffer_size",
        HS,
        Args::TAKE1,
        set_client_header_buffer_size,
    ),
    DirectiveSpec::new(
        "large_client_header_buffers",
        HS,
        Args::TAKE2,
        set_large_client_header_buffers,
    ),
    // ngx_http_ssl_module (crate::ssl).
    DirectiveSpec::multi("ssl_certificate", HS, Args::TAKE1, ssl::set_certificate),
    DirectiveSpec::multi(
        "ssl_certificate_key",
        HS,
        Args::TAKE1,
        ssl::set_certificate_key,
    ),
    DirectiveSpec::new("ssl_protocols", HS, Args::ONE_MORE, ssl::set_protocols),
    DirectiveSpec::new("ssl_ciphers", HS, Args::TAKE1, ssl::set_ciphers),
    DirectiveSpec::new(
        "ssl_prefer_server_ciphers",
        HS,
        Args::FLAG,
        ssl::set_prefer_server_ciphers,
    ),
    DirectiveSpec::new(
        "ssl_session_cache",
        HS,
        Args::TAKE12,
        ssl::set_session_cache,
    ),
    DirectiveSpec::new(
        "ssl_session_timeout",
        HS,
        Args::TAKE1,
        ssl::set_session_timeout,
    ),
    DirectiveSpec::new(
        "ssl_session_tickets",
        HS,
        Args::FLAG,
        ssl::set_session_tickets,
    ),
    DirectiveSpec::multi(
        "ssl_session_ticket_key",
        HS,
        Args::TAKE1,
        ssl::set_session_ticket_key,
    ),
    DirectiveSpec::new("ssl_verify_client", HS, Args::TAKE1, ssl::set_verify_client),
    DirectiveSpec::new(
        "ssl_client_certificate",
        HS,
        Args::TAKE1,
        ssl::set_client_certificate,
    ),
    DirectiveSpec::new("ssl_verify_depth", HS, Args::TAKE1, ssl::set_verify_depth),
    DirectiveSpec::new("ssl_dhparam", HS, Args::TAKE1, ssl::set_dhparam),
    DirectiveSpec::new("ssl_ecdh_curve", HS, Args::TAKE1, ssl::set_ecdh_curve),
];

/// The module gyre registers for `http {}`.
pub static HTTP_MODULE: ModuleDef<HttpConf> = ModuleDef {
    name: "http",
    directives: HTTP_DIRECTIVES,
    create_conf: http_create,
    init_conf: http_init,
};
