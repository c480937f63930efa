//! nginx's variables (`ngx_http_variables.c`): a registry of named
//! variables indexed while the configuration is read, and a per-request
//! cache where each is computed on first use.
//!
//! A directive that mentions `$name` gets an index at configuration time
//! ([`Variables::index`]); once the whole file is read, every index is
//! resolved to what it reads ([`Variables::resolve`], nginx's
//! `ngx_http_variables_init_vars`, with its `unknown "name" variable`
//! error). Per request, [`VarCache::value`] computes a variable into the
//! request's reused byte buffer and remembers the span, so reading a
//! variable allocates nothing once the request object has served one
//! request. Variables that change during a request (`$uri` after a
//! rewrite, `$status`, the clock) are recomputed on each read, as nginx's
//! `NGX_HTTP_VAR_NOCACHEABLE` ones are.
//!
//! Connection facts (`$remote_addr`, `$scheme` and `$https` from the
//! connection's TLS flag) come from [`ConnInfo`]; the TLS layer adds its
//! `$ssl_*` variables there.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};

use gyre_core::event::Msec;

use crate::conf::{LocConf, ServerConf};
use crate::parse::Request;
use crate::regex::{Captures, UNSET};
use crate::response::Response;

/// A variable's index in the configuration's registry.
pub type VarIndex = u16;

/// What a variable reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VarKind {
    /// Not resolved yet (the configuration is still being read).
    Unresolved,
    Uri,
    RequestUri,
    Args,
    /// `$arg_NAME` (the name as bytes, compared caselessly).
    Arg(Box<[u8]>),
    IsArgs,
    Host,
    Hostname,
    /// `$http_NAME`, `_` read as `-`.
    Http(Box<[u8]>),
    /// `$sent_http_NAME`.
    SentHttp(Box<[u8]>),
    /// `$cookie_NAME`.
    Cookie(Box<[u8]>),
    RemoteAddr,
    RemotePort,
    BinaryRemoteAddr,
    /// `$realip_remote_addr` / `$realip_remote_port` (crate::realip).
    RealIpRemoteAddr,
    RealIpRemotePort,
    ServerAddr,
    ServerPort,
    ServerName,
    ServerProtocol,
    Scheme,
    Https,
    Request,
    RequestMethod,
    RequestLength,
    RequestBody,
    RequestBodyFile,
    RequestTime,
    RequestFilename,
    ContentType,
    ContentLength,
    DocumentRoot,
    RealpathRoot,
    Status,
    BodyBytesSent,
    BytesSent,
    Connection,
    ConnectionRequests,
    Msec,
    TimeLocal,
    TimeIso8601,
    Pid,
    NginxVersion,
    LimitRate,
    /// `$remote_user`: the user of an `Authorization: Basic` header,
    /// checked or not (nginx decodes the header for the variable).
    RemoteUser,
    /// The result of a `map` block.
    Map(std::sync::Arc<crate::map::Map>),
    /// The result of a `split_clients` block.
    Split(std::sync::Arc<crate::split_geo::SplitClients>),
    /// The result of a `geo` block.
    Geo(std::sync::Arc<crate::split_geo::Geo>),
    /// One of the TLS layer's `$ssl_*` (`crate::ssl::tls_var`).
    Ssl(&'static str),
    /// Made by `set` or a named regex capture: holds what was assigned.
    User,
    /// `$proxy_host`, `$proxy_port` (crate::proxy).
    ProxyHost,
    ProxyPort,
    /// `$proxy_add_x_forwarded_for`.
    ProxyAddXForwardedFor,
    /// `$upstream_addr` and the other lists of a proxied request.
    Upstream(crate::proxy::vars::Which),
    /// `$upstream_http_NAME`.
    UpstreamHttp(Box<[u8]>),
}

impl VarKind {
    /// Variables whose value can change while the request runs.
    fn cacheable(&self) -> bool {
        !matches!(
            self,
            VarKind::Uri
                | VarKind::Args
                | VarKind::Arg(_)
                | VarKind::IsArgs
                | VarKind::RequestFilename
                | VarKind::DocumentRoot
                | VarKind::RealpathRoot
                | VarKind::RequestTime
                | VarKind::Status
                | VarKind::BodyBytesSent
                | VarKind::BytesSent
                | VarKind::SentHttp(_)
                | VarKind::Msec
                | VarKind::TimeLocal
                | VarKind::TimeIso8601
                | VarKind::LimitRate
                | VarKind::User
                | VarKind::Upstream(_)
                | VarKind::UpstreamHttp(_)
        )
    }
}

/// The registry: every variable the configuration mentions.
#[derive(Debug, Clone, Default)]
pub struct Variables {
    names: Vec<String>,
    kinds: Vec<VarKind>,
}

impl Variables {
    /// The index of `name` (without `$`), added if new.
    pub fn index(&mut self, name: &str) -> Result<VarIndex, String> {
        let lower = name.to_ascii_lowercase();
        if let Some(i) = self.names.iter().position(|n| *n == lower) {
            return Ok(i as VarIndex);
        }
        if self.names.len() >= usize::from(VarIndex::MAX) {
            return Err("too many variables".into());
        }
        self.names.push(lower);
        self.kinds.push(VarKind::Unresolved);
        Ok((self.names.len() - 1) as VarIndex)
    }

    /// Declares a variable that holds assigned values (`set`, named
    /// captures).
    pub fn define_user(&mut self, name: &str) -> Result<VarIndex, String> {
        let i = self.index(name)?;
        if let Some(k) = self.kinds.get_mut(usize::from(i)) {
            if *k == VarKind::Unresolved && builtin(&self.names[usize::from(i)]).is_none() {
                *k = VarKind::User;
            }
        }
        Ok(i)
    }

    /// Declares the result variable of a `map`.
    pub fn define_map(&mut self, name: &str, m: crate::map::Map) -> Result<VarIndex, String> {
        self.define(name, VarKind::Map(std::sync::Arc::new(m)))
    }

    /// Declares a variable made by a block (`map`, `split_clients`, `geo`).
    pub fn define(&mut self, name: &str, kind: VarKind) -> Result<VarIndex, String> {
        let i = self.index(name)?;
        match self.kinds.get_mut(usize::from(i)) {
            Some(k) if *k == VarKind::Unresolved => {
                *k = kind;
                Ok(i)
            }
            _ => Err(format!("the duplicate \"{name}\" variable")),
        }
    }

    /// Resolves every index once the configuration is read.
    pub fn resolve(&mut self) -> Result<(), String> {
        for (n, k) in self.names.iter().zip(self.kinds.iter_mut()) {
            if *k != VarKind::Unresolved {
                continue;
            }
            *k = builtin(n).ok_or_else(|| format!("unknown \"{n}\" variable"))?;
        }
        Ok(())
    }

    /// How many variables are indexed.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// True when no variable is indexed.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// The name of an index.
    pub fn name(&self, i: VarIndex) -> &str {
        self.names.get(usize::from(i)).map_or("", String::as_str)
    }

    /// The index of a known name (tests).
    #[cfg(test)]
    fn define_user_index(&self, name: &str) -> VarIndex {
        self.names.iter().position(|n| n == name).unwrap_or(0) as VarIndex
    }

    /// True for a variable made by `set` or a named capture.
    pub fn is_user(&self, i: VarIndex) -> bool {
        *self.kind(i) == VarKind::User
    }

    fn kind(&self, i: VarIndex) -> &VarKind {
        self.kinds
            .get(usize::from(i))
            .unwrap_or(&VarKind::Unresolved)
    }
}

/// The built-in variable of a name, if any.
fn builtin(n: &str) -> Option<VarKind> {
    let prefixed = |p: &str| n.strip_prefix(p).map(|s| s.as_bytes().into());
    if let Some(h) = n.strip_prefix("http_") {
        return Some(VarKind::Http(h.replace('_', "-").into_bytes().into()));
    }
    if let Some(h) = n.strip_prefix("upstream_http_") {
        return Some(VarKind::UpstreamHttp(
            h.replace('_', "-").into_bytes().into(),
        ));
    }
    if let Some(h) = n.strip_prefix("sent_http_") {
        return Some(VarKind::SentHttp(h.replace('_', "-").into_bytes().into()));
    }
    if let Some(a) = prefixed("arg_") {
        return Some(VarKind::Arg(a));
    }
    if let Some(c) = prefixed("cookie_") {
        return Some(VarKind::Cookie(c));
    }
    Some(match n {
        "uri" | "document_uri" => VarKind::Uri,
        "request_uri" => VarKind::RequestUri,
        "args" | "query_string" => VarKind::Args,
        "is_args" => VarKind::IsArgs,
        "host" => VarKind::Host,
        "hostname" => VarKind::Hostname,
        "remote_addr" => VarKind::RemoteAddr,
        "remote_port" => VarKind::RemotePort,
        "binary_remote_addr" => VarKind::BinaryRemoteAddr,
        "realip_remote_addr" => VarKind::RealIpRemoteAddr,
        "realip_remote_port" => VarKind::RealIpRemotePort,
        "server_addr" => VarKind::ServerAddr,
        "server_port" => VarKind::ServerPort,
        "server_name" => VarKind::ServerName,
        "server_protocol" => VarKind::ServerProtocol,
        "scheme" => VarKind::Scheme,
        "https" => VarKind::Https,
        "request" => VarKind::Request,
        "request_method" => VarKind::RequestMethod,
        "request_length" => VarKind::RequestLength,
        "request_body" => VarKind::RequestBody,
        "request_body_file" => VarKind::RequestBodyFile,
        "request_time" => VarKind::RequestTime,
        "request_filename" => VarKind::RequestFilename,
        "content_type" => VarKind::ContentType,
        "content_length" => VarKind::ContentLength,
        "document_root" => VarKind::DocumentRoot,
        "realpath_root" => VarKind::RealpathRoot,
        "status" => VarKind::Status,
        "body_bytes_sent" => VarKind::BodyBytesSent,
        "bytes_sent" => VarKind::BytesSent,
        "connection" => VarKind::Connection,
        "connection_requests" => VarKind::ConnectionRequests,
        "msec" => VarKind::Msec,
        "time_local" => VarKind::TimeLocal,
        "time_iso8601" => VarKind::TimeIso8601,
        "pid" => VarKind::Pid,
        "nginx_version" => VarKind::NginxVersion,
        "limit_rate" => VarKind::LimitRate,
        "remote_user" => VarKind::RemoteUser,
        "proxy_host" => VarKind::ProxyHost,
        "proxy_port" => VarKind::ProxyPort,
        "proxy_add_x_forwarded_for" => VarKind::ProxyAddXForwardedFor,
        "upstream_addr" => VarKind::Upstream(crate::proxy::vars::Which::Addr),
        "upstream_status" => VarKind::Upstream(crate::proxy::vars::Which::Status),
        "upstream_response_time" => VarKind::Upstream(crate::proxy::vars::Which::ResponseTime),
        "upstream_connect_time" => VarKind::Upstream(crate::proxy::vars::Which::ConnectTime),
        "upstream_header_time" => VarKind::Upstream(crate::proxy::vars::Which::HeaderTime),
        "upstream_bytes_received" => VarKind::Upstream(crate::proxy::vars::Which::BytesReceived),
        n if n.starts_with("ssl_") => VarKind::Ssl(crate::ssl::var_name(n)?),
        _ => return None,
    })
}

/// What a connection knows about itself, for the variables.
#[derive(Debug, Clone, Default)]
pub struct ConnInfo {
    pub peer: Option<SocketAddr>,
    /// The connection's own peer once the realip module replaced `peer`
    /// for this request (`$realip_remote_addr`).
    pub realip_original: Option<SocketAddr>,
    /// The address the connection was accepted on.
    pub local: Option<SocketAddr>,
    /// nginx's connection serial number (`$connection`).
    pub number: u64,
    /// Requests served on the connection so far, this one included.
    pub requests: u64,
    /// The connection speaks TLS (`$scheme` https, `$https` on).
    pub tls: bool,
    /// What its handshake negotiated, for the `$ssl_*` variables.
    pub ssl: Option<std::rc::Rc<gyre_core::event::tls::TlsInfo>>,
}

/// Everything a variable can read, borrowed from the request for the
/// time of one evaluation.
pub struct VarEnv<'a> {
    pub req: &'a Request,
    /// The current URI (`$uri`, changed by rewrites).
    pub uri: &'a [u8],
    /// The current arguments, without `?`.
    pub args: &'a [u8],
    pub caps: &'a Captures,
    /// The subject of the last regex match.
    pub cap_src: &'a [u8],
    pub loc: &'a LocConf,
    pub server: Option<&'a ServerConf>,
    pub conn: &'a ConnInfo,
    /// The response so far (`$status`, `$sent_http_*`), if there is one.
    pub resp: Option<&'a Response>,
    pub status: u16,
    pub body_bytes_sent: u64,
    pub bytes_sent: u64,
    pub start: Msec,
    pub now: Msec,
    pub unix_ms: u64,
    /// Served as GET after an error-page redirect (`$request_method`).
    pub as_get: bool,
    /// `$args` was set by a redirect: empty is found, not "not found".
    pub args_set: bool,
    /// `$request` of a head refused before it became a request.
    pub request_line: Option<&'a [u8]>,
    /// A proxied request's upstream records.
    pub upstream: Option<&'a crate::proxy::vars::UpstreamVars>,
    /// The request body a handler read (`$request_body`,
    /// `$request_body_file`).
    pub body: Option<&'a crate::request_body::RequestBody>,
}

const UNCOMPUTED: u32 = u32::MAX;
const NOT_FOUND: u32 = u32::MAX - 1;

/// A request's computed variables: spans into one reused buffer.
#[derive(Debug, Default, Clone)]
pub struct VarCache {
    slots: Vec<(u32, u32)>,
    buf: Vec<u8>,
    /// Scratch for a map's source value and result.
    tmp: (Vec<u8>, Vec<u8>),
}

impl VarCache {
    /// Forgets every value (a new request), keeping the capacity.
    pub fn reset(&mut self, n: usize) {
        self.slots.clear();
        self.slots.resize(n, (UNCOMPUTED, 0));
        self.buf.clear();
    }

    /// Assigns a value (`set`, a named capture).
    pub fn set(&mut self, i: VarIndex, v: &[u8]) {
        let start = self.buf.len() as u32;
        self.buf.extend_from_slice(v);
        if let Some(s) = self.slots.get_mut(usize::from(i)) {
            *s = (start, self.buf.len() as u32);
        }
    }

    /// The value of variable `i`, or `None` when it is not found (nginx's
    /// `not_found`: written as empty, or `-` in logs).
    pub fn value(&mut self, vars: &Variables, i: VarIndex, env: &VarEnv<'_>) -> Option<&[u8]> {
        let slot = self.slots.get(usize::from(i)).copied()?;
        let kind = vars.kind(i);
        if *kind == VarKind::User {
            return match slot.0 {
                UNCOMPUTED | NOT_FOUND => None,
                s => self.buf.get(s as usize..slot.1 as usize),
            };
        }
        let derived = match kind {
            VarKind::Map(m) => Some((&m.source, m.volatile)),
            VarKind::Split(s) => Some((&s.source, false)),
            VarKind::Geo(g) => Some((&g.source, false)),
            _ => None,
        };
        if let Some((source, volatile)) = derived {
            if slot.0 != UNCOMPUTED && !volatile {
                return self.buf.get(slot.0 as usize..slot.1 as usize);
            }
            let (mut src, mut val) = std::mem::take(&mut self.tmp);
            src.clear();
            val.clear();
            source.eval(vars, self, env, &mut src);
            let chosen = match kind {
                VarKind::Map(m) => m.find(&src),
                VarKind::Split(s) => s.find(&src),
                VarKind::Geo(g) => g.find(&src),
                _ => None,
            };
            if let Some(v) = chosen {
                v.eval(vars, self, env, &mut val);
            }
            let start = self.buf.len();
            self.buf.extend_from_slice(&val);
            let end = self.buf.len();
            if let Some(s) = self.slots.get_mut(usize::from(i)) {
                *s = (start as u32, end as u32);
            }
            self.tmp = (src, val);
            return self.buf.get(start..end);
        }
        if slot.0 != UNCOMPUTED && kind.cacheable() {
            return match slot.0 {
                NOT_FOUND => None,
                s => self.buf.get(s as usize..slot.1 as usize),
            };
        }
        let start = self.buf.len();
        let found = compute(kind, env, &mut self.buf);
        let span = if found {
            (start as u32, self.buf.len() as u32)
        } else {
            self.buf.truncate(start);
            (NOT_FOUND, 0)
        };
        if let Some(s) = self.slots.get_mut(usize::from(i)) {
            *s = span;
        }
        if found {
            self.buf.get(start..)
        } else {
            None
        }
    }
}

/// Capture `$n` of the last match, if the group took part.
pub fn capture<'a>(env: &VarEnv<'a>, n: usize) -> Option<&'a [u8]> {
    let (s, e) = *env.caps.get(n)?;
    if (s, e) == UNSET {
        return None;
    }
    env.cap_src.get(s..e)
}

/// The proxy settings `$proxy_host` and `$proxy_port` read: the
/// request's evaluated `proxy_pass` with variables, else the location's.
fn proxy_target<'a>(env: &'a VarEnv<'_>) -> Option<&'a crate::proxy::conf::ProxyConf> {
    env.upstream
        .and_then(|u| u.evaluated())
        .or(env.loc.proxy.as_deref())
}

/// Decimal digits without `fmt` (log formats print several numbers per
/// request).
fn push_u64(out: &mut Vec<u8>, n: u64) {
    crate::response::push_decimal(out, n);
}

/// `SECS.MMM` (`$request_time`, `$msec`).
fn push_millis(out: &mut Vec<u8>, ms: u64) {
    push_u64(out, ms / 1000);
    let f = ms % 1000;
    out.extend_from_slice(&[
        b'.',
        b'0' + (f / 100) as u8,
        b'0' + (f / 10 % 10) as u8,
        b'0' + (f % 10) as u8,
    ]);
}

/// `name=value` pairs of `args`, the value of the first `name` (caseless).
pub fn arg<'a>(args: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    args.split(|&b| b == b'&').find_map(|kv| {
        let (k, v) = match kv.iter().position(|&b| b == b'=') {
            Some(p) => (&kv[..p], &kv[p + 1..]),
            None => (kv, &[][..]),
        };
        k.eq_ignore_ascii_case(name).then_some(v)
    })
}

fn cookie<'a>(req: &'a Request, name: &[u8]) -> Option<&'a [u8]> {
    req.headers_named("Cookie").find_map(|h| {
        h.split(|&b| b == b';').find_map(|kv| {
            let kv = kv.trim_ascii_start();
            let p = kv.iter().position(|&b| b == b'=')?;
            kv[..p].eq_ignore_ascii_case(name).then(|| &kv[p + 1..])
        })
    })
}

/// An address as nginx prints it; IPv4 (nearly every `$remote_addr`)
/// without `fmt`.
fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            for (i, o) in a.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_u64(out, u64::from(o));
            }
        }
        IpAddr::V6(_) => {
            let _ = write!(out, "{ip}");
        }
    }
}

/// The machine's host name, read once.
pub fn hostname() -> &'static str {
    static H: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    H.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "localhost".into())
    })
}

/// The version nginx's `$nginx_version` reports: the nginx release whose
/// behaviour gyre implements.
pub const NGINX_VERSION: &str = "1.22.1";

/// Computes a built-in variable into `out`; false when not found.
fn compute(kind: &VarKind, env: &VarEnv<'_>, out: &mut Vec<u8>) -> bool {
    let req = env.req;
    // A refused head: what its request line says, nothing without one.
    if let Some(line) = env.request_line {
        let mut words = line.split(|&b| b == b' ');
        let (mut method, mut target, mut proto) = (words.next(), words.next(), words.next());
        if proto.is_none() {
            // A line cut short (a 414 keeps the line up to its buffer's
            // end): nginx never parsed it, so none of its parts is found.
            (method, target, proto) = (None, None, None);
        }
        let word = match kind {
            VarKind::RequestMethod => Some(method),
            VarKind::Uri => Some(target.map(|t| t.split(|&b| b == b'?').next().unwrap_or(t))),
            VarKind::ServerProtocol => Some(proto),
            _ => None,
        };
        if let Some(w) = word {
            return match w.filter(|w| !w.is_empty()) {
                Some(w) => {
                    out.extend_from_slice(w);
                    true
                }
                None => false,
            };
        }
    }
    match kind {
        VarKind::Unresolved
        | VarKind::User
        | VarKind::Map(_)
        | VarKind::Split(_)
        | VarKind::Geo(_) => return false,
        VarKind::RemoteUser => match crate::auth_basic::basic_user(req) {
            Some((cred, n)) => out.extend_from_slice(&cred[..n]),
            None => return false,
        },
        VarKind::Uri => out.extend_from_slice(env.uri),
        VarKind::RequestUri => out.extend_from_slice(req.target()),
        // No arguments at all is "not found" (`-` in logs), as nginx.
        VarKind::Args if env.args.is_empty() && !env.args_set => return false,
        VarKind::Args => out.extend_from_slice(env.args),
        VarKind::Arg(name) => match arg(env.args, name) {
            Some(v) => out.extend_from_slice(v),
            None => return false,
        },
        VarKind::IsArgs => {
            if !env.args.is_empty() {
                out.push(b'?');
            }
        }
        VarKind::Host => match (req.host(), env.server) {
            (Some(h), _) => out.extend_from_slice(h.as_bytes()),
            (None, Some(s)) => {
                out.extend_from_slice(s.server_names.first().map_or("", |n| n).as_bytes())
            }
            (None, None) => {}
        },
        VarKind::Hostname => out.extend_from_slice(hostname().as_bytes()),
        VarKind::Http(name) => {
            let cookie = &**name == b"cookie";
            let mut any = false;
            for (n, v) in req.headers() {
                if header_is_var(n, name) {
                    if any {
                        out.extend_from_slice(if cookie { b"; " } else { b", " });
                    }
                    out.extend_from_slice(v);
                    any = true;
                }
            }
            return any;
        }
        VarKind::SentHttp(name) => return sent_header(env.resp, name, out),
        VarKind::Cookie(name) => match cookie(req, name) {
            Some(v) => out.extend_from_slice(v),
            None => return false,
        },
        VarKind::RemoteAddr => match env.conn.peer {
            Some(p) => push_ip(out, p.ip()),
            None => return false,
        },
        // Port 0 (an address from a header without one) prints nothing.
        VarKind::RemotePort => match env.conn.peer {
            Some(p) if p.port() == 0 => {}
            Some(p) => push_u64(out, u64::from(p.port())),
            None => return false,
        },
        VarKind::RealIpRemoteAddr => match env.conn.realip_original.or(env.conn.peer) {
            Some(p) => push_ip(out, p.ip()),
            None => return false,
        },
        VarKind::RealIpRemotePort => match env.conn.realip_original.or(env.conn.peer) {
            Some(p) if p.port() == 0 => {}
            Some(p) => push_u64(out, u64::from(p.port())),
            None => return false,
        },
        VarKind::BinaryRemoteAddr => match env.conn.peer.map(|p| p.ip()) {
            Some(IpAddr::V4(a)) => out.extend_from_slice(&a.octets()),
            Some(IpAddr::V6(a)) => out.extend_from_slice(&a.octets()),
            None => return false,
        },
        VarKind::ServerAddr => match env.conn.local {
            Some(l) => push_ip(out, l.ip()),
            None => return false,
        },
        VarKind::ServerPort => match env.conn.local {
            Some(l) => push_u64(out, u64::from(l.port())),
            None => return false,
        },
        VarKind::ServerName => {
            if let Some(s) = env.server {
                out.extend_from_slice(s.server_names.first().map_or("", |n| n).as_bytes());
            }
        }
        VarKind::ServerProtocol => {
            out.extend_from_slice(b"HTTP/");
            push_u64(out, u64::from(req.version.major));
            out.push(b'.');
            push_u64(out, u64::from(req.version.minor));
        }
        VarKind::Ssl(name) => {
            if let Some(v) = crate::ssl::tls_var(env.conn.ssl.as_deref(), name) {
                out.extend_from_slice(v.as_bytes());
            }
        }
        VarKind::Scheme => out.extend_from_slice(if env.conn.tls { b"https" } else { b"http" }),
        VarKind::Https => {
            if env.conn.tls {
                out.extend_from_slice(b"on");
            }
        }
        VarKind::Request => match env.request_line {
            Some(l) => out.extend_from_slice(l),
            None => out.extend_from_slice(req.request_line()),
        },
        VarKind::RequestMethod if env.as_get => out.extend_from_slice(b"GET"),
        VarKind::RequestMethod => out.extend_from_slice(req.method().as_bytes()),
        VarKind::RequestLength => push_u64(out, req.head_len() as u64),
        // nginx: found only once the body is read and in memory.
        VarKind::RequestBody => match env.body.and_then(|b| b.in_memory()) {
            Some(bufs) => {
                for b in bufs {
                    out.extend_from_slice(b);
                }
            }
            None => return false,
        },
        VarKind::RequestBodyFile => match env.body.and_then(|b| b.file_name()) {
            Some(p) => out.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str())),
            None => return false,
        },
        VarKind::RequestTime => {
            push_millis(out, env.now.wrapping_sub(env.start));
        }
        VarKind::RequestFilename => {
            let mut p = std::path::PathBuf::new();
            crate::static_file::map_uri_into(env.loc, &env.loc.name, env.uri, &mut p);
            out.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()));
        }
        VarKind::ContentType => match req.header("Content-Type") {
            Some(v) => out.extend_from_slice(v),
            None => return false,
        },
        VarKind::ContentLength => match req.header("Content-Length") {
            Some(v) => out.extend_from_slice(v),
            None => return false,
        },
        VarKind::DocumentRoot => {
            let root = env.loc.alias.as_ref().unwrap_or(&env.loc.root);
            out.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(root.as_os_str()));
        }
        VarKind::RealpathRoot => {
            let root = env.loc.alias.as_ref().unwrap_or(&env.loc.root);
            match std::fs::canonicalize(root) {
                Ok(p) => {
                    out.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
                }
                Err(e) => {
                    log::error!("realpath() \"{}\" failed ({e})", root.display());
                    return false;
                }
            }
        }
        VarKind::Status => {
            // Three digits, as nginx's `%03ui`.
            let s = crate::response::wire_status(env.status);
            if s < 100 {
                out.push(b'0');
            }
            if s < 10 {
                out.push(b'0');
            }
            push_u64(out, u64::from(s));
        }
        VarKind::BodyBytesSent => push_u64(out, env.body_bytes_sent),
        VarKind::BytesSent => push_u64(out, env.bytes_sent),
        VarKind::Connection => push_u64(out, env.conn.number),
        VarKind::ConnectionRequests => push_u64(out, env.conn.requests),
        VarKind::Msec => {
            push_millis(out, env.unix_ms);
        }
        VarKind::TimeLocal => crate::access_log::time_local(env.unix_ms / 1000, out),
        VarKind::TimeIso8601 => {
            let t = gyre_core::event::clock::CivilTime::from_unix(env.unix_ms / 1000);
            let _ = write!(
                out,
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}+00:00",
                t.year, t.month, t.day, t.hour, t.min, t.sec
            );
        }
        VarKind::Pid => push_u64(out, u64::from(std::process::id())),
        VarKind::NginxVersion => out.extend_from_slice(NGINX_VERSION.as_bytes()),
        VarKind::LimitRate => push_u64(out, env.loc.limit_rate),
        VarKind::ProxyHost => match proxy_target(env) {
            Some(p) => out.extend_from_slice(p.proxy_host.as_bytes()),
            None => return false,
        },
        VarKind::ProxyPort => match proxy_target(env) {
            Some(p) => out.extend_from_slice(p.proxy_port.as_bytes()),
            None => return false,
        },
        VarKind::ProxyAddXForwardedFor => {
            let mut any = false;
            for (n, v) in req.headers() {
                if n.eq_ignore_ascii_case(b"x-forwarded-for") {
                    if any {
                        out.extend_from_slice(b", ");
                    }
                    out.extend_from_slice(v);
                    any = true;
                }
            }
            if let Some(p) = env.conn.peer {
                if any {
                    out.extend_from_slice(b", ");
                }
                push_ip(out, p.ip());
            }
        }
        VarKind::Upstream(w) => match env.upstream {
            Some(u) => return u.write(*w, out),
            None => return false,
        },
        VarKind::UpstreamHttp(name) => match env.upstream.and_then(|u| u.header_value(name)) {
            Some(v) => out.extend_from_slice(v),
            None => return false,
        },
    }
    true
}

/// `$sent_http_NAME` from the response's head.
fn sent_header(resp: Option<&Response>, name: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(r) = resp else {
        return false;
    };
    let std = match name {
        b"content-type" => r.content_type.as_deref(),
        b"last-modified" => r.last_modified.as_deref(),
        b"location" => r.location.as_deref(),
        b"content-length" => {
            let n = r.content_length.unwrap_or_else(|| r.body.len());
            push_u64(out, n);
            return true;
        }
        _ => None,
    };
    if let Some(v) = std {
        out.extend_from_slice(v);
        return true;
    }
    match r
        .headers
        .iter()
        .find(|(k, _)| k.as_bytes().eq_ignore_ascii_case(name))
    {
        Some((_, v)) => {
            out.extend_from_slice(v.as_bytes());
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests;

/// Whether header `name` is the one `$http_VAR` names (`var` as stored,
/// `-` for `_`): nginx compares it lowercased with `-` read as `_`, so
/// `A_B` (kept under `underscores_in_headers on`) and `A-B` both are
/// `$http_a_b`.
fn header_is_var(name: &[u8], var: &[u8]) -> bool {
    let norm = |c: u8| match c.to_ascii_lowercase() {
        b'-' => b'_',
        c => c,
    };
    name.len() == var.len() && name.iter().zip(var).all(|(&a, &b)| norm(a) == norm(b))
}

#[cfg(test)]
mod eval_tests;
