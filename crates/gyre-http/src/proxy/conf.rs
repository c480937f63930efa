//! The proxy module's directives (`ngx_http_proxy_module`'s table): what
//! each level sets ([`ProxySettings`], inherited as nginx's merge does) and
//! a location's complete [`ProxyConf`] once the file is read.
//!
//! `proxy_pass` is the location's content handler and does not inherit;
//! every other directive inherits from the enclosing levels unless set
//! (lists such as `proxy_set_header` and `proxy_hide_header` as a whole, as
//! nginx does). Errors are nginx's texts: `invalid URL prefix`,
//! `"proxy_pass" cannot have URI part in location given by regular
//! expression, …`, `"proxy_pass" directive is duplicate`, the
//! `proxy_busy_buffers_size` checks, `invalid value "…"` for the masks.

use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};

use crate::complex_value::ComplexValue;
use crate::conf::{pick, HttpConf, LocKind, LocSettings};
use crate::temp_file::TempPath;
use crate::upstream::http_request::ProxyVersion;

/// `proxy_next_upstream` conditions (nginx's `NGX_HTTP_UPSTREAM_FT_*`).
pub mod ft {
    pub const ERROR: u32 = 0x2;
    pub const TIMEOUT: u32 = 0x4;
    pub const INVALID_HEADER: u32 = 0x8;
    pub const HTTP_500: u32 = 0x10;
    pub const HTTP_502: u32 = 0x20;
    pub const HTTP_503: u32 = 0x40;
    pub const HTTP_504: u32 = 0x80;
    pub const HTTP_403: u32 = 0x100;
    pub const HTTP_404: u32 = 0x200;
    pub const HTTP_429: u32 = 0x400;
    pub const NON_IDEMPOTENT: u32 = 0x10000;
    pub const OFF: u32 = 0x8000_0000;
    /// The status condition of a response code, if it has one.
    pub fn of_status(status: u16) -> u32 {
        match status {
            500 => HTTP_500,
            502 => HTTP_502,
            503 => HTTP_503,
            504 => HTTP_504,
            403 => HTTP_403,
            404 => HTTP_404,
            429 => HTTP_429,
            _ => 0,
        }
    }
}

/// `proxy_ignore_headers` (nginx's `NGX_HTTP_UPSTREAM_IGN_*`).
pub mod ign {
    pub const X_ACCEL_REDIRECT: u32 = 0x2;
    pub const X_ACCEL_EXPIRES: u32 = 0x4;
    pub const EXPIRES: u32 = 0x8;
    pub const CACHE_CONTROL: u32 = 0x10;
    pub const SET_COOKIE: u32 = 0x20;
    pub const X_ACCEL_LIMIT_RATE: u32 = 0x40;
    pub const X_ACCEL_BUFFERING: u32 = 0x80;
    pub const X_ACCEL_CHARSET: u32 = 0x100;
    pub const VARY: u32 = 0x200;
}

/// The headers nginx's proxy module hides by default
/// (`ngx_http_proxy_hide_headers`).
pub const DEFAULT_HIDE: &[&str] = &[
    "date",
    "server",
    "x-pad",
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

/// `proxy_pass URL` as written, parsed.
#[derive(Debug, Clone)]
pub struct ProxyPass {
    pub https: bool,
    /// The host (or upstream name), or `unix:/path`.
    pub host: String,
    pub port: Option<u16>,
    /// The URI part (`/`, `/app/`), if any.
    pub uri: Option<String>,
    /// The directive, for the messages of the upstream lookup.
    pub at: Directive,
    /// Index in [`HttpConf::upstreams`], set once the blocks are known.
    pub upstream: usize,
    /// nginx's `plcf->location`: the location's name (prefix or exact
    /// URI), empty in regex and named locations (`proxy_redirect default`).
    pub location: String,
    /// The URL has variables: evaluated per request (`proxy/eval.rs`);
    /// `host`, `port`, `uri` and `upstream` are then unused.
    pub vars: Option<ComplexValue>,
}

impl ProxyPass {
    /// What `proxy_redirect` needs of it.
    pub fn redirect_pass(p: Option<&ProxyPass>) -> super::redirect::Pass<'_> {
        match p {
            None => super::redirect::Pass::None,
            Some(p) if p.vars.is_some() => super::redirect::Pass::Variables,
            Some(p) => super::redirect::Pass::Url {
                url: p.at.arg(0),
                uri: p.uri.is_some(),
                location: &p.location,
            },
        }
    }
}

/// Settings of one level; `None`: not set here.
#[derive(Debug, Clone, Default)]
pub struct ProxySettings {
    pub pass: Option<ProxyPass>,
    pub set_header: Option<Vec<(Arc<str>, ComplexValue)>>,
    pub http_version: Option<ProxyVersion>,
    pub pass_request_headers: Option<bool>,
    pub pass_request_body: Option<bool>,
    pub hide_header: Option<Vec<String>>,
    pub pass_header: Option<Vec<String>>,
    pub ignore_headers: Option<u32>,
    pub connect_timeout: Option<u64>,
    pub send_timeout: Option<u64>,
    pub read_timeout: Option<u64>,
    pub next_upstream: Option<u32>,
    pub next_upstream_tries: Option<usize>,
    pub next_upstream_timeout: Option<u64>,
    pub intercept_errors: Option<bool>,
    pub ignore_client_abort: Option<bool>,
    pub buffering: Option<bool>,
    pub request_buffering: Option<bool>,
    pub buffer_size: Option<usize>,
    pub buffers: Option<(usize, usize)>,
    pub busy_buffers_size: Option<usize>,
    pub max_temp_file_size: Option<u64>,
    pub temp_file_write_size: Option<u64>,
    pub temp_path: Option<Arc<TempPath>>,
    /// `proxy_redirect` (its own "not set" inside).
    pub redirect: super::redirect::RedirectConf,
    /// `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags`.
    pub cookie: super::cookie::CookieConf,
    /// The `proxy_ssl_*` directives.
    pub ssl: super::ssl::SslSettings,
}

/// A request header the proxy sends, and where its value comes from.
#[derive(Debug, Clone)]
pub enum HeaderValue {
    /// `proxy_set_header NAME VALUE` (possibly with variables).
    Value(ComplexValue),
    /// The default `Host: $proxy_host`.
    ProxyHost,
    /// The default `Content-Length` of the body sent.
    BodyLength,
    /// The default `Transfer-Encoding: chunked` (never: bodies are
    /// buffered, so they go with a length).
    Chunked,
    /// Not sent, and the client's header of that name not passed.
    Empty,
}

/// A proxied location's complete settings.
#[derive(Debug, Clone)]
pub struct ProxyConf {
    pub upstream: usize,
    pub https: bool,
    /// `$proxy_host`: the host with a non-default port, `localhost` for a
    /// unix socket.
    pub proxy_host: String,
    /// `$proxy_port`.
    pub proxy_port: String,
    /// The host of the URL (an upstream's name), without the port: the
    /// default `proxy_ssl_name`.
    pub host: String,
    /// TLS to the upstream (`https://`, or a URL with variables that may
    /// say so), built when the configuration is read.
    pub tls: Option<Arc<super::ssl::UpstreamTls>>,
    pub uri: Option<String>,
    /// The location's name (what a URI part replaces).
    pub location: Arc<str>,
    /// The location is a regex or named one (no prefix to replace).
    pub location_prefix: bool,
    /// Sent first, in order; then the client's headers not named here.
    pub headers: Vec<(Arc<str>, HeaderValue)>,
    pub http_version: ProxyVersion,
    pub pass_request_headers: bool,
    pub pass_request_body: bool,
    /// Lower-case names not passed to the client.
    pub hide: Vec<String>,
    pub ignore_headers: u32,
    pub connect_timeout: u64,
    pub send_timeout: u64,
    pub read_timeout: u64,
    pub next_upstream: u32,
    pub next_upstream_tries: usize,
    pub next_upstream_timeout: u64,
    pub intercept_errors: bool,
    pub ignore_client_abort: bool,
    pub buffering: bool,
    /// `proxy_request_buffering` (on): off streams a body of known length
    /// to the upstream as it arrives.
    pub request_buffering: bool,
    pub buffer_size: usize,
    pub buffers: (usize, usize),
    pub busy_buffers_size: usize,
    /// `proxy_max_temp_file_size` (1024m; 0: a buffered response never
    /// spills, it is read at the client's pace).
    pub max_temp_file_size: u64,
    /// `proxy_temp_file_write_size`: the most written to the temp file at once.
    pub temp_file_write_size: usize,
    /// `proxy_temp_path` (the http level carries the default `proxy_temp`).
    pub temp_path: Arc<TempPath>,
    /// `proxy_pass` with variables: the URL, evaluated per request into a
    /// request's own settings (`proxy/eval.rs`); with a URI part it is
    /// sent as it is, replacing the whole URI.
    pub dynamic: Option<ComplexValue>,
    /// `proxy_redirect`, merged over the levels.
    pub redirect: super::redirect::RedirectConf,
    /// The cookie rewriting directives, merged.
    pub cookie: super::cookie::CookieConf,
}

impl ProxyConf {
    /// The most body bytes of a buffered response held in memory for the
    /// client: the buffers (`proxy_buffers`), at least `proxy_buffer_size`.
    /// Beyond it the body goes to the temp file, or reading stops.
    pub fn max_pending(&self) -> usize {
        (self.buffers.0 * self.buffers.1).max(self.buffer_size)
    }
}

/// nginx's `ngx_pagesize`-based defaults (4k pages).
const PAGE: usize = 4096;

/// `proxy_max_temp_file_size`'s default, 1024m.
const DEFAULT_MAX_TEMP: u64 = 1 << 30;

/// A location's proxy settings from its levels (outermost first), when its
/// own level has `proxy_pass`; the error is one of nginx's merge errors
/// (the TLS configuration's).
pub fn resolve(
    levels: &[&LocSettings],
    name: &Arc<str>,
    kind: LocKind,
) -> Result<Option<Arc<ProxyConf>>, String> {
    let Some(pass) = levels.last().and_then(|l| l.proxy.pass.clone()) else {
        return Ok(None);
    };
    // nginx's `plcf->ssl`: set by an https URL and by one with variables.
    let tls = if pass.https || pass.vars.is_some() {
        Some(super::ssl::resolve(levels)?)
    } else {
        None
    };
    let p = |f: &dyn Fn(&ProxySettings) -> Option<u64>| pick(levels, |s| f(&s.proxy));
    let set_header = pick(levels, |s| s.proxy.set_header.clone()).unwrap_or_default();
    let mut headers: Vec<(Arc<str>, HeaderValue)> = set_header
        .into_iter()
        .map(|(n, v)| {
            let hv = if v.is_literal() && v.text.is_empty() {
                HeaderValue::Empty
            } else {
                HeaderValue::Value(v)
            };
            (n, hv)
        })
        .collect();
    for (name, hv) in [
        ("Host", HeaderValue::ProxyHost),
        (
            "Connection",
            HeaderValue::Value(ComplexValue::literal("close")),
        ),
        ("Content-Length", HeaderValue::BodyLength),
        ("Transfer-Encoding", HeaderValue::Chunked),
        ("TE", HeaderValue::Empty),
        ("Keep-Alive", HeaderValue::Empty),
        ("Expect", HeaderValue::Empty),
        ("Upgrade", HeaderValue::Empty),
    ] {
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            headers.push((name.into(), hv));
        }
    }
    let pass_header = pick(levels, |s| s.proxy.pass_header.clone()).unwrap_or_default();
    let mut hide: Vec<String> = DEFAULT_HIDE
        .iter()
        .map(|s| s.to_string())
        .filter(|h| !pass_header.iter().any(|p| p.eq_ignore_ascii_case(h)))
        .collect();
    for h in pick(levels, |s| s.proxy.hide_header.clone()).unwrap_or_default() {
        let h = h.to_ascii_lowercase();
        if !hide.contains(&h) {
            hide.push(h);
        }
    }
    let unix = pass.host.starts_with("unix:");
    let default_port = if pass.https { 443 } else { 80 };
    let proxy_port = if unix {
        String::new()
    } else {
        pass.port.unwrap_or(default_port).to_string()
    };
    let proxy_host =
        crate::upstream::http_request::proxy_host(&pass.host, pass.port, pass.https, unix);
    let buffer_size = pick(levels, |s| s.proxy.buffer_size).unwrap_or(PAGE);
    let largest = buffer_size.max(pick(levels, |s| s.proxy.buffers).unwrap_or((8, PAGE)).1);
    // Folded outermost to innermost, each level with its own proxy_pass
    // (nginx's merge of plcf->redirects).
    let mut redirect = super::redirect::RedirectConf::default();
    let mut cookie = super::cookie::CookieConf::default();
    for l in levels {
        redirect = l
            .proxy
            .redirect
            .merge(&redirect, &ProxyPass::redirect_pass(l.proxy.pass.as_ref()));
        cookie = l.proxy.cookie.merge(&cookie);
    }
    Ok(Some(Arc::new(ProxyConf {
        upstream: pass.upstream,
        host: pass.host.clone(),
        tls,
        dynamic: pass.vars.clone(),
        https: pass.https,
        proxy_host,
        proxy_port,
        uri: pass.uri.clone(),
        location: name.clone(),
        location_prefix: !matches!(kind, LocKind::Regex | LocKind::Named),
        headers,
        http_version: pick(levels, |s| s.proxy.http_version).unwrap_or(ProxyVersion::Http10),
        pass_request_headers: pick(levels, |s| s.proxy.pass_request_headers).unwrap_or(true),
        pass_request_body: pick(levels, |s| s.proxy.pass_request_body).unwrap_or(true),
        hide,
        ignore_headers: pick(levels, |s| s.proxy.ignore_headers).unwrap_or(0),
        connect_timeout: p(&|s| s.connect_timeout).unwrap_or(60_000),
        send_timeout: p(&|s| s.send_timeout).unwrap_or(60_000),
        read_timeout: p(&|s| s.read_timeout).unwrap_or(60_000),
        next_upstream: pick(levels, |s| s.proxy.next_upstream).unwrap_or(ft::ERROR | ft::TIMEOUT),
        next_upstream_tries: pick(levels, |s| s.proxy.next_upstream_tries).unwrap_or(0),
        next_upstream_timeout: p(&|s| s.next_upstream_timeout).unwrap_or(0),
        intercept_errors: pick(levels, |s| s.proxy.intercept_errors).unwrap_or(false),
        ignore_client_abort: pick(levels, |s| s.proxy.ignore_client_abort).unwrap_or(false),
        buffering: pick(levels, |s| s.proxy.buffering).unwrap_or(true),
        request_buffering: pick(levels, |s| s.proxy.request_buffering).unwrap_or(true),
        buffer_size,
        buffers: pick(levels, |s| s.proxy.buffers).unwrap_or((8, PAGE)),
        busy_buffers_size: pick(levels, |s| s.proxy.busy_buffers_size).unwrap_or(2 * largest),
        max_temp_file_size: p(&|s| s.max_temp_file_size).unwrap_or(DEFAULT_MAX_TEMP),
        temp_file_write_size: p(&|s| s.temp_file_write_size).map_or(2 * largest, |v| v as usize),
        temp_path: pick(levels, |s| s.proxy.temp_path.clone())
            .unwrap_or_else(|| Arc::new(TempPath::new("proxy_temp".into()))),
        redirect,
        cookie,
    })))
}

/// nginx's checks of the buffer sizes (`ngx_http_proxy_merge_loc_conf`),
/// for a location's resolved levels.
pub fn check_buffers(levels: &[&LocSettings]) -> Result<(), String> {
    let buffer_size = pick(levels, |s| s.proxy.buffer_size).unwrap_or(PAGE);
    let (n, size) = pick(levels, |s| s.proxy.buffers).unwrap_or((8, PAGE));
    // nginx's default: twice the larger of the two buffer sizes.
    let busy = pick(levels, |s| s.proxy.busy_buffers_size).unwrap_or(2 * buffer_size.max(size));
    if n < 2 {
        return Err("there must be at least 2 \"proxy_buffers\"".into());
    }
    if busy < buffer_size.max(size) {
        return Err("\"proxy_busy_buffers_size\" must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\"".into());
    }
    if busy > (n - 1) * size {
        return Err("\"proxy_busy_buffers_size\" must be less than the size of all \"proxy_buffers\" minus one buffer".into());
    }
    let largest = buffer_size.max(size) as u64;
    let write = pick(levels, |s| s.proxy.temp_file_write_size).unwrap_or(2 * largest);
    if write < largest {
        return Err("\"proxy_temp_file_write_size\" must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\"".into());
    }
    let max = pick(levels, |s| s.proxy.max_temp_file_size).unwrap_or(DEFAULT_MAX_TEMP);
    if max != 0 && max < largest {
        return Err("\"proxy_max_temp_file_size\" must be equal to zero to disable temporary files usage or must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\"".into());
    }
    Ok(())
}

fn settings<'a>(c: &'a mut HttpConf, cx: &ConfCtx) -> Result<&'a mut ProxySettings, String> {
    Ok(&mut c.settings(cx)?.proxy)
}

/// `proxy_pass URL`.
pub fn set_pass(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let url = d.arg(0);
    if url.contains('$') {
        return set_pass_vars(c, d, cx);
    }
    let (https, rest) = if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if url.len() >= 7 && url[..7].eq_ignore_ascii_case("http://") {
        (false, &url[7..])
    } else if url.len() >= 8 && url[..8].eq_ignore_ascii_case("https://") {
        (true, &url[8..])
    } else {
        return Err("invalid URL prefix".into());
    };
    let (host, port, uri) = split_url(rest).map_err(|e| format!("{e} in upstream \"{rest}\""))?;
    let kind = c.current_location_kind(cx);
    let location = match kind {
        Some(LocKind::Regex) | Some(LocKind::Named) | None => String::new(),
        Some(_) => c.current_location_uri(cx).unwrap_or_default(),
    };
    if uri.is_some() && matches!(kind, Some(LocKind::Regex) | Some(LocKind::Named)) {
        return Err("\"proxy_pass\" cannot have URI part in location given by regular expression, or inside named location, or inside \"if\" statement, or inside \"limit_except\" block".into());
    }
    let s = settings(c, cx)?;
    if s.pass.is_some() {
        return Err("\"proxy_pass\" directive is duplicate".into());
    }
    s.pass = Some(ProxyPass {
        https,
        host,
        port,
        uri,
        at: d.clone(),
        upstream: 0,
        location,
        vars: None,
    });
    Ok(())
}

/// `proxy_pass` with variables (nginx compiles the URL and checks nothing
/// more until a request evaluates it).
fn set_pass_vars(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let cv = ComplexValue::compile(d.arg(0), &mut c.vars)?;
    let location = match c.current_location_kind(cx) {
        Some(LocKind::Regex) | Some(LocKind::Named) | None => String::new(),
        Some(_) => c.current_location_uri(cx).unwrap_or_default(),
    };
    let s = settings(c, cx)?;
    if s.pass.is_some() {
        return Err("\"proxy_pass\" directive is duplicate".into());
    }
    s.pass = Some(ProxyPass {
        https: false,
        host: String::new(),
        port: None,
        uri: None,
        at: d.clone(),
        upstream: usize::MAX,
        location,
        vars: Some(cv),
    });
    Ok(())
}

/// `proxy_redirect default | off | REDIRECT REPLACEMENT` (repeatable).
pub fn set_redirect(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let mut rc = std::mem::take(&mut settings(c, cx)?.redirect);
    let pass = settings(c, cx)?.pass.clone();
    let r = rc.directive(
        d,
        &ProxyPass::redirect_pass(pass.as_ref()),
        &mut c.vars,
        &mut c.regexes,
    );
    settings(c, cx)?.redirect = rc;
    r
}

/// `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags`.
pub fn set_cookie(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let mut cc = std::mem::take(&mut settings(c, cx)?.cookie);
    let r = cc.directive(d, &mut c.vars, &mut c.regexes);
    settings(c, cx)?.cookie = cc;
    r
}

/// `host[:port][/uri]` or `unix:/path[:/uri]`.
pub(super) fn split_url(rest: &str) -> Result<(String, Option<u16>, Option<String>), String> {
    if let Some(path) = rest.strip_prefix("unix:") {
        return Ok(match path.find(':') {
            Some(i) => (
                format!("unix:{}", &path[..i]),
                None,
                Some(path[i + 1..].to_string()).filter(|u| !u.is_empty()),
            ),
            None => (format!("unix:{path}"), None, None),
        });
    }
    let (authority, uri) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], Some(rest[i..].to_string())),
        None => (rest, None),
    };
    if authority.is_empty() {
        return Err("no host".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6.find(']').ok_or("invalid IPv6 address")?;
        let after = &v6[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err("invalid host".into()),
        };
        (v6[..end].to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|&n| n != 0)
                .ok_or("invalid port")?,
        ),
        None => None,
    };
    Ok((host, port, uri))
}

/// `proxy_set_header NAME VALUE`.
pub fn set_header(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = ComplexValue::compile(d.arg(1), &mut c.vars)?;
    let s = settings(c, cx)?;
    s.set_header
        .get_or_insert_with(Vec::new)
        .push((d.arg(0).into(), v));
    Ok(())
}

/// The flags, times, sizes and lists (one setter, by name).
pub fn set_value(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let invalid = |a: &str| format!("invalid value \"{a}\"");
    let s = settings(c, cx)?;
    match d.name.as_str() {
        "proxy_http_version" => {
            s.http_version = Some(match d.arg(0) {
                "1.0" => ProxyVersion::Http10,
                "1.1" => ProxyVersion::Http11,
                a => return Err(invalid(a)),
            })
        }
        "proxy_pass_request_headers" => s.pass_request_headers = Some(d.flag()?),
        "proxy_pass_request_body" => s.pass_request_body = Some(d.flag()?),
        "proxy_intercept_errors" => s.intercept_errors = Some(d.flag()?),
        "proxy_ignore_client_abort" => s.ignore_client_abort = Some(d.flag()?),
        "proxy_buffering" => s.buffering = Some(d.flag()?),
        "proxy_request_buffering" => s.request_buffering = Some(d.flag()?),
        "proxy_connect_timeout" => s.connect_timeout = Some(d.msec(0)?),
        "proxy_send_timeout" => s.send_timeout = Some(d.msec(0)?),
        "proxy_read_timeout" => s.read_timeout = Some(d.msec(0)?),
        "proxy_next_upstream_timeout" => s.next_upstream_timeout = Some(d.msec(0)?),
        "proxy_next_upstream_tries" => s.next_upstream_tries = Some(d.number(0)? as usize),
        "proxy_buffer_size" => s.buffer_size = Some(d.size(0)?),
        "proxy_busy_buffers_size" => s.busy_buffers_size = Some(d.size(0)?),
        "proxy_max_temp_file_size" => s.max_temp_file_size = Some(d.offset(0)?),
        "proxy_temp_file_write_size" => s.temp_file_write_size = Some(d.offset(0)?),
        "proxy_temp_path" => {
            let levels: Vec<&str> = d.args[1..].iter().map(String::as_str).collect();
            let path = TempPath::parse(cx.full_path(d.arg(0)), &levels).map_err(|e| d.error(e))?;
            s.temp_path = Some(Arc::new(path));
        }
        "proxy_buffers" => {
            let n = d.number(0)? as usize;
            let size = d.size(1)?;
            if n == 0 || size == 0 {
                return Err(invalid(d.arg(0)));
            }
            s.buffers = Some((n, size));
        }
        "proxy_hide_header" => s
            .hide_header
            .get_or_insert_with(Vec::new)
            .push(d.arg(0).to_string()),
        "proxy_pass_header" => s
            .pass_header
            .get_or_insert_with(Vec::new)
            .push(d.arg(0).to_string()),
        "proxy_ignore_headers" => {
            let mut m = 0;
            for a in &d.args {
                m |= match a.to_ascii_lowercase().as_str() {
                    "x-accel-redirect" => ign::X_ACCEL_REDIRECT,
                    "x-accel-expires" => ign::X_ACCEL_EXPIRES,
                    "x-accel-limit-rate" => ign::X_ACCEL_LIMIT_RATE,
                    "x-accel-buffering" => ign::X_ACCEL_BUFFERING,
                    "x-accel-charset" => ign::X_ACCEL_CHARSET,
                    "expires" => ign::EXPIRES,
                    "cache-control" => ign::CACHE_CONTROL,
                    "set-cookie" => ign::SET_COOKIE,
                    "vary" => ign::VARY,
                    _ => return Err(invalid(a)),
                };
            }
            s.ignore_headers = Some(m);
        }
        "proxy_next_upstream" => {
            let mut m = 0;
            for a in &d.args {
                m |= match a.as_str() {
                    "error" => ft::ERROR,
                    "timeout" => ft::TIMEOUT,
                    "invalid_header" => ft::INVALID_HEADER,
                    "http_500" => ft::HTTP_500,
                    "http_502" => ft::HTTP_502,
                    "http_503" => ft::HTTP_503,
                    "http_504" => ft::HTTP_504,
                    "http_403" => ft::HTTP_403,
                    "http_404" => ft::HTTP_404,
                    "http_429" => ft::HTTP_429,
                    "non_idempotent" => ft::NON_IDEMPOTENT,
                    "off" => ft::OFF,
                    _ => return Err(invalid(a)),
                };
            }
            if m & ft::OFF != 0 && m != ft::OFF {
                return Err(format!(
                    "invalid value \"{}\"",
                    d.args
                        .iter()
                        .find(|a| *a != "off")
                        .map_or("", String::as_str)
                ));
            }
            s.next_upstream = Some(m);
        }
        other => return Err(format!("unknown directive \"{other}\"")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_nginx_splits_them() {
        assert_eq!(
            split_url("127.0.0.1:8080").unwrap(),
            ("127.0.0.1".into(), Some(8080), None)
        );
        assert_eq!(
            split_url("app/x/").unwrap(),
            ("app".into(), None, Some("/x/".into()))
        );
        assert_eq!(
            split_url("[::1]:81/").unwrap(),
            ("::1".into(), Some(81), Some("/".into()))
        );
        assert_eq!(
            split_url("unix:/tmp/s.sock:/u/").unwrap(),
            ("unix:/tmp/s.sock".into(), None, Some("/u/".into()))
        );
        assert_eq!(
            split_url("unix:/tmp/s.sock").unwrap(),
            ("unix:/tmp/s.sock".into(), None, None)
        );
        assert_eq!(split_url("h:0").unwrap_err(), "invalid port");
        assert_eq!(split_url("h:x").unwrap_err(), "invalid port");
    }
}
