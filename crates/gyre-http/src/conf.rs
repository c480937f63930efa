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

use crate::complex_value::ComplexValue;
use crate::location::LocTree;
use crate::mime;
use crate::regex::Regex;
use crate::rewrite::{self, Op};
use crate::ssl;
use crate::variables::Variables;

mod connection;
pub mod error_log;
pub mod extra_logs;
pub mod hints;
mod merge;
mod modules;
mod table;

use table::HTTP_DIRECTIVES;

pub use connection::ConnDirectives;
pub use hints::HINTS_MODULE;
pub(crate) use merge::pick;
use merge::{log_format_of, resolve, resolve_location, EMPTY_FALLBACK};
pub(crate) use modules::parse_expires;

/// How a `location` matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocKind {
    Exact,
    /// `^~`: a prefix that, when it is the longest, skips the regexes.
    PrefixNoRegex,
    Prefix,
    /// `~` or `~*`.
    Regex,
    /// `@name`: reached only by internal redirects.
    Named,
    /// The server's own settings (no location matched).
    Server,
}

/// `try_files FILE ... LAST`.
#[derive(Debug, Clone)]
pub struct TryFiles {
    /// Checked in order, each with whether it tests for a directory: as
    /// nginx does, a trailing `/` is taken off the parameter when it is
    /// read, so `$uri/` for `/sub` tests `/sub` and makes `$uri` `/sub`
    /// (which the static module then redirects to `/sub/`).
    pub tries: Vec<(ComplexValue, bool)>,
    pub last: TryLast,
}

/// `try_files`'s last parameter.
#[derive(Debug, Clone)]
pub enum TryLast {
    /// `=CODE`.
    Code(u16),
    /// `@name`.
    Named(String),
    /// An internal redirect to a URI.
    Uri(ComplexValue),
}

/// `expires`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expires {
    Off,
    /// `epoch`: 1 Jan 1970 00:00:01, no-cache.
    Epoch,
    /// `max`: 31 Dec 2037 23:55:55, ten years' max-age.
    Max,
    /// Seconds from the response time (negative: no-cache).
    Access(i64),
    /// `@T`: the next time of day T (seconds after midnight, UTC).
    Daily(u64),
}

/// `if_modified_since off|exact|before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfModifiedSince {
    Off,
    Exact,
    Before,
}

/// `error_page CODE ... [=[RESPONSE]] URI`.
#[derive(Debug, Clone)]
pub struct ErrorPage {
    pub codes: Vec<u16>,
    /// `None`: answer with the original code; `Some(0)`: with the status
    /// the page's request ends with (`=`); `Some(n)`: with `n`.
    pub overwrite: Option<u16>,
    /// A URI, `@name`, or a URL the client is redirected to.
    pub uri: String,
    /// `uri` compiled, when it has variables (`https://$host$request_uri`).
    pub uri_cv: Option<ComplexValue>,
}

/// `add_header NAME VALUE [always]`: (name, value, always).
pub type AddHeader = (Arc<str>, ComplexValue, bool);

/// Settings that inherit http → server → location; `None` means "not set
/// here".
#[derive(Debug, Clone, Default)]
pub struct LocSettings {
    /// `set_real_ip_from`, `real_ip_header`, `real_ip_recursive`.
    pub realip: crate::realip::RealIpLevel,
    pub root: Option<PathBuf>,
    pub alias: Option<PathBuf>,
    pub index: Option<Vec<String>>,
    pub default_type: Option<Arc<str>>,
    pub stub_status: Option<bool>,
    pub add_header: Option<Vec<AddHeader>>,
    pub error_page: Option<Vec<ErrorPage>>,
    pub try_files: Option<TryFiles>,
    pub limit_rate: Option<u64>,
    pub limit_rate_after: Option<u64>,
    pub expires: Option<Expires>,
    /// `expires $var`: evaluated per response (with `expires` set to
    /// `Off` at the same level, so the level is found).
    pub expires_cv: Option<ComplexValue>,
    pub etag: Option<bool>,
    pub autoindex: Option<bool>,
    pub autoindex_format: Option<crate::autoindex::Format>,
    pub autoindex_exact_size: Option<bool>,
    pub autoindex_localtime: Option<bool>,
    pub if_modified_since: Option<IfModifiedSince>,
    /// `charset NAME|off`.
    pub charset: Option<Option<Arc<str>>>,
    pub internal: bool,
    pub rewrite_log: Option<bool>,
    pub uninitialized_variable_warn: Option<bool>,
    /// `alias` with variables (captures of a regex location).
    pub alias_cv: Option<ComplexValue>,
    /// `access_log`'s format name.
    pub log_format: Option<String>,
    /// `access_log ... if=CONDITION`.
    pub log_if: Option<ComplexValue>,
    pub keepalive_timeout: Option<u64>,
    pub keepalive_requests: Option<u64>,
    pub send_timeout: Option<u64>,
    pub client_body_timeout: Option<u64>,
    pub client_max_body_size: Option<u64>,
    /// `client_body_buffer_size` & co (crate::request_body).
    pub body: crate::request_body::BodySet,
    /// `dav_methods`, `create_full_put_path` (crate::dav).
    pub dav: crate::dav::DavSet,
    pub sendfile: Option<bool>,
    pub tcp_nodelay: Option<bool>,
    pub absolute_redirect: Option<bool>,
    pub server_name_in_redirect: Option<bool>,
    pub port_in_redirect: Option<bool>,
    pub log_not_found: Option<bool>,
    pub open_file_cache: Option<Option<OpenFileCache>>,
    pub access_log: Option<Option<PathBuf>>,
    /// This level's `error_log` lines (conf::error_log).
    pub error_log: Option<Vec<gyre_core::conf::ErrorLog>>,
    pub recursive_error_pages: Option<bool>,
    /// The level's further `access_log`s (conf::extra_logs).
    pub extra_logs: Vec<extra_logs::ExtraLog>,
    /// `allow`/`deny` of this level (crate::access).
    pub access: Option<Arc<crate::access::Rules>>,
    pub satisfy: Option<crate::access::Satisfy>,
    /// `auth_basic` / `auth_basic_user_file` (crate::auth_basic).
    pub auth_basic: Option<ComplexValue>,
    pub auth_basic_user_file: Option<ComplexValue>,
    /// `limit_req*` (crate::limit_req).
    pub limit_req: crate::limit_req::LimitReqSet,
    /// `limit_conn*` (crate::limit_conn).
    pub limit_conn: crate::limit_conn::LimitConnSet,
    /// `proxy_*` (crate::proxy).
    pub proxy: crate::proxy::conf::ProxySettings,
    /// `gzip*` (crate::gzip).
    pub gzip: crate::gzip::GzipSet,
    /// `server_tokens on|off|build` (`build` is `on`: gyre has no build
    /// name, as nginx configured without `--build`).
    pub server_tokens: Option<bool>,
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
    /// The realip module's settings (crate::realip), if it is on here.
    pub realip: Option<Arc<crate::realip::RealIp>>,
    pub root: PathBuf,
    pub alias: Option<PathBuf>,
    pub index: Vec<String>,
    pub default_type: Arc<str>,
    pub stub_status: bool,
    pub add_header: Vec<AddHeader>,
    pub error_page: Vec<ErrorPage>,
    /// The location's name (`/prefix`, the regex, `@name`; `/` for the
    /// server's own settings): what `alias` replaces.
    pub name: Arc<str>,
    pub kind: LocKind,
    pub regex: Option<Arc<Regex>>,
    pub internal: bool,
    /// This level's rewrite-module script (not inherited, as nginx).
    pub script: Arc<[Op]>,
    pub try_files: Option<TryFiles>,
    pub limit_rate: u64,
    pub limit_rate_after: u64,
    pub expires: Expires,
    /// `expires` with variables, parsed per response (nginx 1.7.9+).
    pub expires_cv: Option<ComplexValue>,
    pub etag: bool,
    /// `autoindex on` and its settings.
    pub autoindex: Option<crate::autoindex::Autoindex>,
    pub if_modified_since: IfModifiedSince,
    pub charset: Option<Arc<str>>,
    pub rewrite_log: bool,
    pub uninitialized_variable_warn: bool,
    pub alias_cv: Option<ComplexValue>,
    pub children: LocTree,
    /// Index of the access log's format in [`HttpConf::log_formats`].
    pub log_format: usize,
    /// `access_log ... if=`: log only when the value is neither empty nor "0".
    pub log_if: Option<ComplexValue>,
    pub keepalive_timeout: u64,
    pub keepalive_requests: u64,
    pub send_timeout: u64,
    pub client_body_timeout: u64,
    pub client_max_body_size: u64,
    /// How a body read by a handler is kept (crate::request_body).
    pub body: crate::request_body::BodyConf,
    /// `dav_methods PUT` and its settings, when on (crate::dav).
    pub dav: Option<crate::dav::DavConf>,
    pub sendfile: bool,
    pub tcp_nodelay: bool,
    /// `absolute_redirect` (on): a `Location` starting with `/` gets
    /// `scheme://host[:port]` in front.
    pub absolute_redirect: bool,
    /// `server_name_in_redirect` (off): that host is the server's first
    /// name instead of the request's `Host`.
    pub server_name_in_redirect: bool,
    /// `port_in_redirect` (on): a port other than the scheme's is shown.
    pub port_in_redirect: bool,
    /// `log_not_found` (on): missing files are written to the error log.
    pub log_not_found: bool,
    pub open_file_cache: Option<OpenFileCache>,
    pub access_log: Option<PathBuf>,
    /// The `error_log`s its requests' lines go to (None: the main log).
    pub error_log: Option<gyre_core::errlog::LogChain>,
    /// `recursive_error_pages` (off): an error page's own error may use
    /// `error_page` again.
    pub recursive_error_pages: bool,
    /// Further `access_log`s of the level the first comes from.
    pub extra_logs: Arc<[extra_logs::ExtraLogConf]>,
    /// `allow`/`deny`: the innermost level's that has any (crate::access).
    pub access: Option<Arc<crate::access::Rules>>,
    pub satisfy: crate::access::Satisfy,
    pub auth_basic: Option<ComplexValue>,
    pub auth_basic_user_file: Option<ComplexValue>,
    pub limit_req: Option<Arc<crate::limit_req::LimitReqConf>>,
    pub limit_conn: Option<Arc<crate::limit_conn::LimitConnConf>>,
    /// `proxy_pass` and its settings: the location's content handler.
    pub proxy: Option<Arc<crate::proxy::conf::ProxyConf>>,
    /// `gzip` / `gzip_static` when either is on (crate::gzip).
    pub gzip: Option<Arc<crate::gzip::GzipConf>>,
    /// `server_tokens` (on): `Server: gyre/VERSION`, pages signed so.
    pub server_tokens: bool,
    /// `limit_except`: what the methods it does not name get.
    pub limit_except: Option<Arc<crate::limit_except::LimitExceptConf>>,
}

impl LocConf {
    /// This configuration and its `limit_except` one, if any.
    pub fn with_limit_except(&self) -> impl Iterator<Item = &LocConf> {
        std::iter::once(self).chain(self.limit_except.as_deref().map(|le| &*le.conf))
    }

    /// This configuration, its `limit_except` one and those of its `if`
    /// blocks.
    pub fn with_nested(&self) -> impl Iterator<Item = &LocConf> {
        let ifs = self.script.iter().filter_map(|op| match op {
            Op::If { conf: Some(c), .. } => Some(&**c),
            _ => None,
        });
        self.with_limit_except().chain(ifs)
    }
}

/// One `location`.
#[derive(Debug, Clone)]
pub struct Location {
    pub kind: LocKind,
    pub uri: String,
    pub regex: Option<Arc<Regex>>,
    pub set: LocSettings,
    pub script: Vec<Op>,
    pub children: Vec<Location>,
    /// Filled by `http_init`.
    pub conf: Option<Arc<LocConf>>,
    /// `limit_except` (crate::limit_except).
    pub limit_except: Option<crate::limit_except::LimitExcept>,
}

/// Server-level settings that do not inherit into locations.
#[derive(Debug, Clone, Default)]
pub struct ServerSettings {
    pub client_header_timeout: Option<u64>,
    pub client_header_buffer_size: Option<usize>,
    pub large_client_header_buffers: Option<(usize, usize)>,
    /// `lingering_*`, `merge_slashes`, `*_headers` (conf::connection);
    /// merged with the http level's in `http_init`.
    pub conn: ConnDirectives,
}

/// One `server {}`.
#[derive(Debug, Clone, Default)]
pub struct ServerConf {
    pub listen: Vec<ListenConf>,
    pub server_names: Vec<String>,
    /// `server_name ~REGEX` names, in order (checked after the wildcard
    /// names, caselessly, as nginx does).
    pub name_regexes: Vec<Arc<Regex>>,
    pub set: LocSettings,
    pub srv: ServerSettings,
    pub locations: Vec<Location>,
    /// The server-level rewrite script (the server-rewrite phase).
    pub script: Vec<Op>,
    /// The server-level script, resolved.
    pub srv_script: Arc<[Op]>,
    /// Exact, prefix and regex locations.
    pub tree: LocTree,
    /// `@name` locations.
    pub named: Vec<Arc<LocConf>>,
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
    /// Every variable the configuration mentions.
    pub vars: Variables,
    /// Regexes compiled so far (their ids).
    pub regexes: usize,
    /// The phase handlers, built once the configuration is read.
    pub phases: Arc<[crate::phases::Phase]>,
    /// `log_format`s; 0 is `combined`.
    pub log_formats: Vec<Arc<crate::log_format::LogFormat>>,
    /// `limit_req_zone`s (and zones `limit_req` names).
    pub limit_req_zones: Vec<Arc<crate::limit_req::ReqZone>>,
    pub limit_conn_zones: Vec<Arc<crate::limit_conn::ConnZone>>,
    /// `upstream {}` blocks as read (made into [`HttpConf::upstreams`]
    /// once the file is read).
    pub upstream_blocks: Vec<Directive>,
    /// The upstream blocks and `proxy_pass`'s implicit upstreams.
    pub upstreams: Arc<crate::upstream::set::UpstreamSet>,
    /// Per upstream, its `hash` key compiled.
    pub upstream_keys: Vec<Option<ComplexValue>>,
    /// nginx's default `client_body_temp_path`: `PREFIX/client_body_temp`.
    pub body_temp: Arc<crate::temp_file::TempPath>,
}

/// Which level a directive is at, from the enclosing blocks.
#[derive(PartialEq, Eq)]
enum Level {
    Http,
    Server,
    /// Nested `depth` locations deep (1: a server's location).
    Location(usize),
}

fn level(cx: &ConfCtx) -> Level {
    let b = cx.blocks();
    let depth = b.iter().filter(|n| *n == "location").count();
    if depth > 0 {
        Level::Location(depth)
    } else if b.iter().any(|n| n == "server") {
        Level::Server
    } else {
        Level::Http
    }
}

/// Whether the directive is inside an `if` block.
fn in_if(cx: &ConfCtx) -> bool {
    cx.blocks().last().is_some_and(|n| n == "if")
}

impl HttpConf {
    fn location(&mut self, depth: usize) -> Result<&mut Location, String> {
        let mut l = self
            .servers
            .last_mut()
            .ok_or("no server")?
            .locations
            .last_mut()
            .ok_or("no location")?;
        for _ in 1..depth {
            l = l.children.last_mut().ok_or("no location")?;
        }
        Ok(l)
    }

    /// The kind of the location a directive is in, if any.
    /// The URI of the location being read (its name without modifiers).
    pub(crate) fn current_location_uri(&mut self, cx: &ConfCtx) -> Option<String> {
        match level(cx) {
            Level::Location(d) => self.location(d).ok().map(|l| l.uri.clone()),
            _ => None,
        }
    }

    pub(crate) fn current_location_kind(&mut self, cx: &ConfCtx) -> Option<LocKind> {
        match level(cx) {
            Level::Location(d) => self.location(d).ok().map(|l| l.kind),
            _ => None,
        }
    }

    pub(crate) fn settings(&mut self, cx: &ConfCtx) -> Result<&mut LocSettings, String> {
        Ok(match level(cx) {
            Level::Http => &mut self.set,
            Level::Location(d) if in_if(cx) => match self.location(d)?.script.last_mut() {
                Some(Op::If { set, .. }) => set.get_or_insert_with(Default::default),
                _ => return Err("no if".into()),
            },
            // nginx's "if in server" takes only the rewrite module's
            // directives (the table says so); its flags go to the server.
            Level::Server => &mut self.servers.last_mut().ok_or("no server")?.set,
            Level::Location(d) if crate::limit_except::in_limit_except(cx) => {
                &mut self
                    .location(d)?
                    .limit_except
                    .as_mut()
                    .ok_or("no limit_except")?
                    .set
            }
            Level::Location(d) => &mut self.location(d)?.set,
        })
    }

    /// The location a directive is in.
    pub(crate) fn current_location(&mut self, cx: &ConfCtx) -> Result<&mut Location, String> {
        match level(cx) {
            Level::Location(d) => self.location(d),
            _ => Err("not allowed here".into()),
        }
    }

    fn server_settings(&mut self, cx: &ConfCtx) -> Result<&mut ServerSettings, String> {
        Ok(match level(cx) {
            Level::Http => &mut self.srv,
            _ => &mut self.servers.last_mut().ok_or("no server")?.srv,
        })
    }

    /// The rewrite script a directive adds to: the server's or the
    /// location's, or the body of the `if` being read.
    pub(crate) fn script(&mut self, cx: &ConfCtx) -> Result<&mut Vec<Op>, String> {
        let ops = match level(cx) {
            Level::Http => return Err("no server".into()),
            Level::Server => &mut self.servers.last_mut().ok_or("no server")?.script,
            Level::Location(d) => &mut self.location(d)?.script,
        };
        if in_if(cx) {
            return match ops.last_mut() {
                Some(Op::If { ops, .. }) => Ok(ops),
                _ => Err("no if".into()),
            };
        }
        Ok(ops)
    }

    /// The location a URI gets on `server`, by exact and prefix matching
    /// only (for records the machine made before routing, which need just
    /// their access log).
    pub fn find_static<'a>(server: &'a ServerConf, path: &str) -> &'a Arc<LocConf> {
        let mut best: Option<&Arc<LocConf>> = None;
        for l in &server.tree.statics {
            let hit = match l.kind {
                LocKind::Exact => *l.name == *path,
                _ => path.starts_with(&*l.name),
            };
            if hit && best.is_none_or(|b| b.kind != LocKind::Exact && b.name.len() < l.name.len()) {
                best = Some(l);
            }
        }
        best.or(server.fallback.as_ref())
            .unwrap_or(&EMPTY_FALLBACK.0)
    }

    /// A named location of `server`.
    pub fn named<'a>(server: &'a ServerConf, name: &[u8]) -> Option<&'a Arc<LocConf>> {
        server.named.iter().find(|l| l.name.as_bytes() == name)
    }

    /// The server's own settings (a URI no location matches).
    pub fn server_loc(server: &ServerConf) -> &Arc<LocConf> {
        server.fallback.as_ref().unwrap_or(&EMPTY_FALLBACK.0)
    }
}

fn http_create() -> HttpConf {
    HttpConf::default()
}

fn http_init(c: &mut HttpConf, cx: &ConfCtx) -> Result<(), ConfError> {
    if c.log_formats.first().is_none_or(|f| f.name != "combined") {
        c.log_formats
            .insert(0, Arc::new(crate::log_format::LogFormat::combined()));
    }
    if !c.types_set {
        c.types = Arc::new(mime::builtin());
    }
    let default_root = cx.full_path("html");
    let default_log = cx.full_path("logs/access.log");
    c.body_temp = Arc::new(crate::temp_file::TempPath::new(
        cx.full_path("client_body_temp"),
    ));
    crate::proxy::init_upstreams(c)?;
    if c.set.proxy.temp_path.is_none() {
        // nginx's compiled-in `proxy_temp` under the prefix.
        let d = crate::temp_file::TempPath::new(cx.full_path("proxy_temp"));
        c.set.proxy.temp_path = Some(Arc::new(d));
    }
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
        s.srv.conn = s.srv.conn.merged(&http_srv.conn);
        let srv_set = s.set.clone();
        let mut fallback = resolve(&[&http_set, &srv_set], &default_root, &default_log);
        fallback.log_format = log_format_of(&[&http_set, &srv_set], &c.log_formats)?;
        fallback.extra_logs = extra_logs::resolve(&[&http_set, &srv_set], &c.log_formats)?;
        fallback.error_log = error_log::resolve(&[&http_set, &srv_set])?;
        s.fallback = Some(Arc::new(fallback));
        s.srv_script = Arc::from(s.script.clone());
        let mut levels = vec![http_set.clone(), srv_set];
        let mut tree = LocTree::default();
        let mut named = Vec::new();
        for l in &mut s.locations {
            let lc = resolve_location(
                l,
                &mut levels,
                (&default_root, &default_log),
                &c.log_formats,
                &mut named,
            )?;
            match lc.kind {
                LocKind::Regex => tree.regexes.push(lc),
                LocKind::Named => named.push(lc),
                _ => tree.statics.push(lc),
            }
        }
        s.tree = tree;
        s.named = named;
    }
    c.vars.resolve().map_err(ConfError::new)?;
    crate::limit_req::check_zones(c).map_err(ConfError::new)?;
    crate::limit_conn::check_zones(c).map_err(ConfError::new)?;
    c.phases = crate::phases::build(c);
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
    for a in &d.args {
        if let Some(pattern) = a.strip_prefix('~') {
            // Named groups become variables, as a location's do.
            let re = rewrite::compile_regex(pattern, true, &mut c.vars, &mut c.regexes)?;
            let s = c.servers.last_mut().ok_or("no server")?;
            s.name_regexes.push(re);
            // Kept as written too: the first name is `$server_name`, and
            // a name starting with `~` never equals a host.
            s.server_names.push(a.clone());
        } else {
            c.servers
                .last_mut()
                .ok_or("no server")?
                .server_names
                .push(a.to_ascii_lowercase());
        }
    }
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
    for v in ["$document_root", "$realpath_root"] {
        if d.arg(0).contains(v) {
            return Err(format!(
                "the {v} variable cannot be used in the \"alias\" directive"
            ));
        }
    }
    let cv = if d.arg(0).contains('$') {
        Some(ComplexValue::compile(&p.to_string_lossy(), &mut c.vars)?)
    } else {
        None
    };
    let s = c.settings(cx)?;
    s.alias_cv = cv;
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

fn set_stub_status(c: &mut HttpConf, _: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.stub_status = Some(true);
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

fn set_server_tokens(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = match d.arg(0) {
        "on" | "build" => true,
        "off" => false,
        other => return Err(format!("invalid value \"{other}\"")),
    };
    c.settings(cx)?.server_tokens = Some(v);
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

/// The module gyre registers for `http {}`.
pub static HTTP_MODULE: ModuleDef<HttpConf> = ModuleDef {
    name: "http",
    directives: HTTP_DIRECTIVES,
    create_conf: http_create,
    init_conf: http_init,
};
