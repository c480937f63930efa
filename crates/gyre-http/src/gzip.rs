//! nginx's `ngx_http_gzip_filter_module` and the gzip checks of its core
//! module (`ngx_http_gzip_ok`): the `gzip*` directives, whether a response
//! is compressed, and the compression itself as an output filter.
//!
//! The filter runs when a response is sent ([`filter`], called by the
//! phases' `send` only for locations with gzip configured, so the hot
//! path without gzip pays one `Option` check). A response qualifies on
//! nginx's header-filter terms (status 200/403/404, a `gzip_types` type,
//! at least `gzip_min_length` bytes, not already encoded); it then gets
//! `Vary: Accept-Encoding` (with `gzip_vary`) whether or not this client
//! gets it compressed, and is compressed when [`gzip_ok`] agrees:
//! `Accept-Encoding` naming gzip with a non-zero q, `gzip_http_version`,
//! `gzip_proxied` for requests with `Via`, `gzip_disable`. A compressed
//! response has `Content-Encoding: gzip`, a weak ETag, no Content-Length
//! (chunked to HTTP/1.1, closed for 1.0) and no ranges.
//!
//! Bodies in memory up to one slice are compressed at once; larger ones
//! (files) are compressed a slice per loop turn: the content handler
//! suspends ([`Content::Gzip`]) until the output drained and the loop had
//! a turn, so a large file never holds up other connections and at most
//! `gzip_buffers` of output waits in memory.
//!
//! The compressor is zlib-rs through flate2, chosen by measurement on a
//! 64 KiB text file against the zlib nginx links (Debian's zlib 1.2):
//! level 6: 6.9 M instructions and 19,642 bytes vs 9.3 M and 19,474;
//! zlib-rs's level 1 is zlib-ng's `deflate_quick` (22% larger output), so
//! `gzip_comp_level 1` uses its level 2 (4.0 M instructions, 21,810 bytes
//! vs zlib's 4.2 M and 23,008). miniz_oxide was slower at level 6 (12.2 M).
//! zlib-rs is pure Rust: it builds with nothing but cargo. Measured again
//! on bench/http_conf.py's HTML-like text (callgrind, raw deflate without
//! the CRC; bytes against zlib's 19,670 at level 1 and 15,748 at 6):
//! zlib-rs level 1 2.2 M / 25,246 B (+28%), level 2 4.1 M / 18,775 B
//! (−4.5%), level 6 8.1 M / 15,816 B; miniz_oxide level 1 2.6 M /
//! 21,429 B (+9%), level 6 15.8 M / 15,741 B; zlib with its CRC 4.4 M at
//! level 1, 11.9 M at 6. No backend lands within 2% of zlib's level-1
//! size at its cost: level 2 is kept (a smaller body for about zlib's
//! instructions), and compressors are reused across responses ([`SPARE`]).

use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::Arc;

use flate2::{Compress, Compression, Crc, FlushCompress, Status as ZStatus};
use gyre_core::conf::{ConfCtx, Directive};

use crate::conf::{pick, HttpConf, LocSettings};
use crate::parse::Version;
use crate::phases::{Ctx, Step};
use crate::regex::Regex;
use crate::request::{Content, HttpRequest, Wake};
use crate::response::{Body, Response};
use crate::static_file::FileInfo;

/// Input compressed per loop turn.
const SLICE: usize = 64 * 1024;

/// `gzip_proxied` flags (nginx's `NGX_HTTP_GZIP_PROXIED_*`).
pub mod proxied {
    pub const OFF: u32 = 0x0002;
    pub const EXPIRED: u32 = 0x0004;
    pub const NO_CACHE: u32 = 0x0008;
    pub const NO_STORE: u32 = 0x0010;
    pub const PRIVATE: u32 = 0x0020;
    pub const NO_LM: u32 = 0x0040;
    pub const NO_ETAG: u32 = 0x0080;
    pub const AUTH: u32 = 0x0100;
    pub const ANY: u32 = 0x0200;
}

/// `gzip_static off|on|always`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Static {
    Off,
    On,
    Always,
}

/// `gzip_types`: `*`, or a list (text/html is always in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Types {
    Any,
    List(Vec<String>),
}

/// The `gzip*` settings of one level (`None`: not set there).
#[derive(Debug, Clone, Default)]
pub struct GzipSet {
    pub enable: Option<bool>,
    pub types: Option<Arc<Types>>,
    pub min_length: Option<u64>,
    pub level: Option<u32>,
    pub buffers: Option<(usize, usize)>,
    pub proxied: Option<u32>,
    pub vary: Option<bool>,
    pub disable: Option<Arc<Disable>>,
    pub http_version: Option<Version>,
    pub gzip_static: Option<Static>,
}

/// `gzip_disable`: `msie6` and regexes matched against the User-Agent.
#[derive(Debug, Default)]
pub struct Disable {
    pub msie6: bool,
    pub regexes: Vec<Regex>,
}

/// A location's gzip settings after inheritance.
#[derive(Debug)]
pub struct GzipConf {
    pub enable: bool,
    pub types: Arc<Types>,
    pub min_length: u64,
    pub level: u32,
    pub buffers: (usize, usize),
    pub proxied: u32,
    pub vary: bool,
    pub disable: Option<Arc<Disable>>,
    pub http_version: Version,
    pub gzip_static: Static,
}

/// The location's gzip settings, or `None` when neither `gzip` nor
/// `gzip_static` is on (nothing to do for its responses).
pub fn resolve(levels: &[&LocSettings]) -> Option<Arc<GzipConf>> {
    let enable = pick(levels, |s| s.gzip.enable).unwrap_or(false);
    let gzip_static = pick(levels, |s| s.gzip.gzip_static).unwrap_or(Static::Off);
    if !enable && gzip_static == Static::Off {
        return None;
    }
    Some(Arc::new(GzipConf {
        enable,
        types: pick(levels, |s| s.gzip.types.clone())
            .unwrap_or_else(|| Arc::new(Types::List(vec!["text/html".into()]))),
        min_length: pick(levels, |s| s.gzip.min_length).unwrap_or(20),
        level: pick(levels, |s| s.gzip.level).unwrap_or(1),
        // nginx's default: 32 4k (one memory page).
        buffers: pick(levels, |s| s.gzip.buffers).unwrap_or((32, 4096)),
        proxied: pick(levels, |s| s.gzip.proxied).unwrap_or(proxied::OFF),
        vary: pick(levels, |s| s.gzip.vary).unwrap_or(false),
        disable: pick(levels, |s| s.gzip.disable.clone()),
        http_version: pick(levels, |s| s.gzip.http_version).unwrap_or(Version::HTTP_11),
        gzip_static,
    }))
}

fn set<'a>(c: &'a mut HttpConf, cx: &ConfCtx) -> Result<&'a mut GzipSet, String> {
    Ok(&mut c.settings(cx)?.gzip)
}

/// `gzip`, `gzip_vary`.
pub fn set_flag(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    let g = set(c, cx)?;
    match d.name.as_str() {
        "gzip" => g.enable = Some(v),
        _ => g.vary = Some(v),
    }
    Ok(())
}

pub fn set_types(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let t = if d.args.iter().any(|a| a == "*") {
        Types::Any
    } else {
        let mut v: Vec<String> = vec!["text/html".into()];
        for a in &d.args {
            let a = a.to_ascii_lowercase();
            if !v.contains(&a) {
                v.push(a);
            }
        }
        Types::List(v)
    };
    set(c, cx)?.types = Some(Arc::new(t));
    Ok(())
}

pub fn set_min_length(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.size(0)? as u64;
    set(c, cx)?.min_length = Some(v);
    Ok(())
}

pub fn set_comp_level(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.number(0)?;
    if !(1..=9).contains(&v) {
        return Err("value must be between 1 and 9".into());
    }
    set(c, cx)?.level = Some(v as u32);
    Ok(())
}

pub fn set_buffers(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let bad = || "\"gzip_buffers\" directive invalid value".to_string();
    let n = d.number(0).map_err(|_| bad())? as usize;
    let size = d.size(1).map_err(|_| bad())?;
    if n == 0 || size == 0 {
        return Err(bad());
    }
    set(c, cx)?.buffers = Some((n, size));
    Ok(())
}

pub fn set_proxied(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let mut p = 0;
    for a in &d.args {
        p |= match a.as_str() {
            "off" => proxied::OFF,
            "expired" => proxied::EXPIRED,
            "no-cache" => proxied::NO_CACHE,
            "no-store" => proxied::NO_STORE,
            "private" => proxied::PRIVATE,
            "no_last_modified" => proxied::NO_LM,
            "no_etag" => proxied::NO_ETAG,
            "auth" => proxied::AUTH,
            "any" => proxied::ANY,
            other => return Err(format!("invalid value \"{other}\"")),
        };
    }
    set(c, cx)?.proxied = Some(p);
    Ok(())
}

pub fn set_disable(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let mut dis = Disable::default();
    for a in &d.args {
        if a == "msie6" {
            dis.msie6 = true;
            continue;
        }
        // nginx compiles these caseless.
        let id = c.regexes;
        dis.regexes.push(Regex::compile(a, true, id)?);
        c.regexes += 1;
    }
    set(c, cx)?.disable = Some(Arc::new(dis));
    Ok(())
}

pub fn set_http_version(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = match d.arg(0) {
        "1.0" => Version::HTTP_10,
        "1.1" => Version::HTTP_11,
        other => return Err(format!("invalid value \"{other}\"")),
    };
    set(c, cx)?.http_version = Some(v);
    Ok(())
}

pub fn set_static(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = match d.arg(0) {
        "off" => Static::Off,
        "on" => Static::On,
        "always" => Static::Always,
        other => return Err(format!("invalid value \"{other}\"")),
    };
    set(c, cx)?.gzip_static = Some(v);
    Ok(())
}

/// nginx's `ngx_http_gzip_accept_encoding`: `gzip` as a token of
/// Accept-Encoding, with no `q` or a q other than 0 (`q=0`, `q=0.000`
/// and anything malformed refuse).
pub fn accepts_gzip(ae: &[u8]) -> bool {
    if ae.len() < 4 {
        return false;
    }
    if ae.starts_with(b"gzip,") {
        return true;
    }
    let mut from = 0;
    let p = loop {
        let Some(i) = find_caseless(&ae[from..], b"gzip") else {
            return false;
        };
        let p = from + i;
        if p == 0 || matches!(ae[p - 1], b',' | b' ') {
            break p + 4;
        }
        from = p + 4;
    };
    let mut it = ae[p..].iter();
    loop {
        match it.next() {
            None | Some(b',') => return true,
            Some(b';') => break,
            Some(b' ') => continue,
            Some(_) => return false,
        }
    }
    loop {
        match it.next() {
            None => return true,
            Some(b'q' | b'Q') => break,
            Some(b' ') => continue,
            Some(_) => return false,
        }
    }
    let rest = it.as_slice();
    if rest.len() < 2 || rest[0] != b'=' {
        return false;
    }
    quantity(&rest[1..]) != 0
}

/// nginx's `ngx_http_gzip_quantity`: q in thousandths, 0 when invalid.
fn quantity(p: &[u8]) -> u32 {
    let mut it = p.iter();
    let q = match it.next() {
        Some(b'0') => 0,
        Some(b'1') => 100,
        _ => return 0,
    };
    let mut q = q;
    match it.next() {
        None | Some(b',' | b' ') => return q,
        Some(b'.') => {}
        Some(_) => return 0,
    }
    let mut n = 0;
    for &c in it {
        if c == b',' || c == b' ' {
            break;
        }
        if c.is_ascii_digit() {
            // nginx adds each digit as is (its "q > 100" check then
            // refuses 1.x with a non-zero fraction).
            q += u32::from(c - b'0');
            n += 1;
            continue;
        }
        return 0;
    }
    if q > 100 || n > 3 {
        return 0;
    }
    q
}

fn find_caseless(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// nginx's `headers_in.msie6`: MSIE 4 or 5, or 6 without "SV1".
pub fn is_msie6(ua: &[u8]) -> bool {
    let Some(i) = memchr::memmem::find(ua, b"MSIE ") else {
        return false;
    };
    if i + 7 >= ua.len() || ua[i + 6] != b'.' {
        return false;
    }
    match ua[i + 5] {
        b'4' | b'5' => true,
        b'6' => memchr::memmem::find(&ua[i + 8..], b"SV1").is_none(),
        _ => false,
    }
}

/// nginx's `ngx_http_gzip_ok`: whether this request may get a gzipped
/// response (`resp` is the response so far, for `gzip_proxied`).
pub fn gzip_ok(g: &GzipConf, r: &HttpRequest, resp: &Response, unix_secs: u64) -> bool {
    let req = &r.st.req;
    let Some(ae) = req.header("Accept-Encoding") else {
        return false;
    };
    if !accepts_gzip(ae) {
        return false;
    }
    let ua = req.header("User-Agent");
    if let (Some(d), Some(ua)) = (&g.disable, ua) {
        if d.msie6 && is_msie6(ua) {
            return false;
        }
    }
    if req.version < g.http_version {
        return false;
    }
    if req.header("Via").is_some() && !proxied_ok(g.proxied, r, resp, unix_secs) {
        return false;
    }
    if let (Some(d), Some(ua)) = (&g.disable, ua) {
        if d.regexes.iter().any(|re| re.is_match(ua)) {
            return false;
        }
    }
    true
}

/// `gzip_proxied` for a request that came through a proxy.
fn proxied_ok(p: u32, r: &HttpRequest, resp: &Response, unix_secs: u64) -> bool {
    if p & proxied::OFF != 0 {
        return false;
    }
    if p & proxied::ANY != 0 {
        return true;
    }
    if p & proxied::AUTH != 0 && r.st.req.header("Authorization").is_some() {
        return true;
    }
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    if let Some(e) = header("Expires") {
        if p & proxied::EXPIRED == 0 {
            return false;
        }
        return match crate::date::parse_http_date(&e) {
            Some(t) => t < unix_secs,
            None => false,
        };
    }
    let cc: Vec<_> = resp
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("Cache-Control"))
        .collect();
    if !cc.is_empty() {
        let has = |tok: &str| {
            cc.iter().any(|(_, v)| {
                v.split(|&b| b == b',').any(|t| {
                    t.trim_ascii()
                        .split(|&b| b == b'=')
                        .next()
                        .is_some_and(|n| n.eq_ignore_ascii_case(tok.as_bytes()))
                })
            })
        };
        return (p & proxied::NO_CACHE != 0 && has("no-cache"))
            || (p & proxied::NO_STORE != 0 && has("no-store"))
            || (p & proxied::PRIVATE != 0 && has("private"));
    }
    if p & proxied::NO_LM != 0 && resp.last_modified.is_some() {
        return false;
    }
    if p & proxied::NO_ETAG != 0 && header("ETag").is_some() {
        return false;
    }
    true
}

/// nginx's `ngx_http_test_content_type` for `gzip_types`: the type
/// without its parameters, caseless.
fn type_matches(types: &Types, ct: Option<&[u8]>) -> bool {
    let Some(ct) = ct else {
        return false;
    };
    let base = ct.split(|&b| b == b';').next().unwrap_or(b"").trim_ascii();
    match types {
        Types::Any => true,
        Types::List(v) => v.iter().any(|t| t.as_bytes().eq_ignore_ascii_case(base)),
    }
}

/// The header filter's terms: whether the response is one gzip applies
/// to at all (and so gets `Vary`).
pub fn qualifies(g: &GzipConf, resp: &Response) -> bool {
    if !g.enable || !matches!(resp.status, 200 | 403 | 404) {
        return false;
    }
    if resp
        .headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("Content-Encoding") && !v.is_empty())
    {
        return false;
    }
    let len = resp.content_length.unwrap_or_else(|| resp.body.len());
    if !resp.chunked && len < g.min_length {
        return false;
    }
    type_matches(&g.types, resp.content_type.as_deref())
}

/// nginx's `ngx_http_weak_etag`: `"x"` becomes `W/"x"`; an unquoted one
/// is dropped.
fn weaken_etag(resp: &mut Response) {
    let Some(i) = resp
        .headers
        .iter()
        .position(|(k, _)| k.eq_ignore_ascii_case("ETag"))
    else {
        return;
    };
    let v = &resp.headers[i].1;
    if v.starts_with(b"W/") {
        return;
    }
    if v.starts_with(b"\"") {
        resp.headers[i].1 = [&b"W/"[..], v].concat().into();
    } else {
        resp.headers.remove(i);
    }
}

/// Puts `Vary: Accept-Encoding` where nginx's header filter writes it
/// (after Connection, before the other headers).
pub fn add_vary(resp: &mut Response) {
    resp.headers
        .insert(0, ("Vary".into(), "Accept-Encoding".into()));
}

/// The output filter. Returns `None` when it did not take the response
/// (the caller queues it as it is, after [`add_vary`] when
/// `r.st.gzip_vary` says so), or the step after queueing it compressed:
/// `Done`, or `Again` with the rest of the body suspended.
pub fn filter(cx: &mut Ctx<'_>, r: &mut HttpRequest, resp: &mut Response) -> Option<Step> {
    let g = r.st.loc.gzip.clone()?;
    if !qualifies(&g, resp) {
        return None;
    }
    r.st.gzip_vary = true;
    if !gzip_ok(&g, r, resp, cx.unix_ms / 1000) {
        return None;
    }
    if g.vary {
        add_vary(resp);
    }
    resp.headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case("Accept-Ranges"));
    weaken_etag(resp);
    resp.headers
        .push(("Content-Encoding".into(), "gzip".into()));
    resp.chunked = true;
    resp.content_length = None;
    let mut body = std::mem::replace(&mut resp.body, Body::Empty);
    if cx.m.settings().server_tokens {
        if let Some(p) = crate::response::versioned_page(resp.status, &body) {
            body = Body::Static(p);
        }
    }
    let src = match body {
        Body::File { token, offset, len } => {
            let Some(info) = cx
                .open
                .iter()
                .find(|(t, _)| *t == token)
                .map(|(_, f)| f.clone())
            else {
                return Some(Step::Error(500));
            };
            Src::File { info, offset, len }
        }
        b if r.st.is_head() || b.is_empty() => Src::Mem(Body::Empty),
        b => Src::Mem(b),
    };
    let mut z = Deflate::new(&g, src.len());
    let paced = r.st.loc.limit_rate > 0 && !r.st.error_page;
    if (src.len() as usize <= SLICE && !paced) || r.st.is_head() {
        // Small: compressed now, sent as one chunk and the last.
        let mut out = Vec::new();
        if !r.st.is_head() {
            if let Src::Mem(b) = &src {
                z.write(b.bytes().unwrap_or(&[]), &mut out);
            } else if let Src::File { info, offset, len } = &src {
                let mut buf = vec![0; *len as usize];
                if info.file.read_exact_at(&mut buf, *offset).is_err() {
                    return Some(Step::Error(500));
                }
                z.write(&buf, &mut out);
            }
            z.finish(&mut out);
        }
        resp.body = Body::Bytes(out);
        let _ = cx.m.respond_ref(resp, cx.now, cx.date);
        (r.st.body_bytes_sent, r.st.bytes_sent) = cx.m.last_sent();
        return Some(Step::Done);
    }
    match cx.m.respond_head(resp, cx.now, cx.date) {
        Ok(true) => {}
        _ => return Some(Step::Done),
    }
    let st = Box::new(Stream {
        z,
        src,
        pos: 0,
        finished: false,
        buf: Vec::new(),
        out: Vec::new(),
        bound: g.buffers.0.saturating_mul(g.buffers.1).max(4096),
    });
    Some(step(cx, r, st))
}

/// What a suspended compression reads from.
#[derive(Debug)]
enum Src {
    Mem(Body),
    File {
        info: Rc<FileInfo>,
        offset: u64,
        len: u64,
    },
}

impl Src {
    fn len(&self) -> u64 {
        match self {
            Src::Mem(b) => b.len(),
            Src::File { len, .. } => *len,
        }
    }
}

/// A compression in progress across loop turns.
#[derive(Debug)]
pub struct Stream {
    z: Deflate,
    src: Src,
    /// Input bytes compressed so far.
    pos: u64,
    /// The gzip trailer is written.
    finished: bool,
    /// File bytes read for the current slice (reused).
    buf: Vec<u8>,
    /// Compressed bytes not sent yet (reused): all of a turn's, or with
    /// `limit_rate` what the allowance holds back, as nginx's write
    /// filter holds the gzip filter's buffers.
    out: Vec<u8>,
    /// `gzip_buffers` (number × size): output made per turn at most.
    bound: usize,
}

/// One turn of a suspended compression: up to `gzip_buffers` of output,
/// queued as a chunk (with `limit_rate`, no more than its allowance);
/// then "again" (resume once the output drained and the loop had a turn,
/// or when the allowance grew) or, at the end, the last chunk.
pub fn step(cx: &mut Ctx<'_>, r: &mut HttpRequest, mut st: Box<Stream>) -> Step {
    let total = st.src.len();
    // `limit_rate` paces the compressed bytes with the static handler's
    // allowance (crate::static_handler::pace).
    let mut allowed = usize::MAX;
    let loc = &r.st.loc;
    if loc.limit_rate > 0 && !r.st.error_page {
        let rate = loc.limit_rate;
        let elapsed = cx.now.wrapping_sub(r.st.start) / 1000;
        let budget = rate
            .saturating_mul(elapsed + 1)
            .saturating_add(loc.limit_rate_after)
            .min(i64::MAX as u64);
        let left = budget as i64 - r.st.body_bytes_sent as i64;
        if left <= 0 {
            let delay = ((-left) as u64).saturating_mul(1000) / rate + 1;
            r.wake = Some(Wake::At(cx.now.wrapping_add(delay)));
            r.content = Content::Gzip(st);
            return Step::Again;
        }
        allowed = left as usize;
    }
    let bound = st.bound.min(allowed);
    while st.pos < total && st.out.len() < bound {
        let n = (total - st.pos).min(SLICE as u64) as usize;
        let slice: &[u8] = match &st.src {
            Src::Mem(b) => {
                let bytes = b.bytes().unwrap_or(&[]);
                let at = st.pos as usize;
                bytes.get(at..at + n).unwrap_or(&[])
            }
            Src::File { info, offset, .. } => {
                st.buf.resize(n, 0);
                if info
                    .file
                    .read_exact_at(&mut st.buf, offset + st.pos)
                    .is_err()
                {
                    // A file cut short under us: end the response (the
                    // chunked body stays unfinished, so the client sees
                    // the error and the connection closes).
                    return Step::Done;
                }
                &st.buf
            }
        };
        st.z.write(slice, &mut st.out);
        st.pos += n as u64;
    }
    if st.pos >= total && !st.finished {
        st.finished = true;
        st.z.finish(&mut st.out);
    }
    let n = st.out.len().min(allowed);
    if n > 0 {
        let rest = st.out.split_off(n);
        let piece = Body::Bytes(std::mem::replace(&mut st.out, rest));
        let _ = cx.m.send_body(&piece);
    }
    (r.st.body_bytes_sent, r.st.bytes_sent) = cx.m.last_sent();
    if st.finished && st.out.is_empty() {
        let _ = cx.m.finish_body(cx.now);
        return Step::Done;
    }
    // Paced: the time those bytes take at the rate (nginx's write filter
    // delay), else the loop's next turn.
    let rate = r.st.loc.limit_rate;
    let delay = if allowed != usize::MAX && rate > 0 {
        (n as u64).saturating_mul(1000) / rate
    } else {
        0
    };
    r.wake = Some(if delay > 0 {
        Wake::At(cx.now.wrapping_add(delay))
    } else {
        Wake::Yield
    });
    r.content = Content::Gzip(st);
    Step::Again
}

thread_local! {
    /// Compressors of finished responses, reset, for the next response
    /// with the same level and window (a worker is one thread). A new
    /// zlib-rs stream zeroes its window, chains and hash (~390 KB, a
    /// tenth of a 64 KiB text's compression at level 1 under callgrind);
    /// a reset one clears only the hash. nginx allocates one per response
    /// from the request's pool; this keeps at most [`SPARES`] (~400 KB
    /// each) per worker once gzip has been used.
    static SPARE: std::cell::RefCell<Vec<(u32, u8, Compress)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Reset compressors kept per worker.
const SPARES: usize = 2;

/// A gzip member: nginx's 10-byte header, raw deflate, CRC-32 and size.
#[derive(Debug)]
struct Deflate {
    /// Always set; taken back to [`SPARE`] on drop.
    c: Option<Compress>,
    level: u32,
    wbits: u8,
    crc: Crc,
    header: bool,
    xfl: u8,
}

impl Drop for Deflate {
    fn drop(&mut self) {
        if let Some(mut c) = self.c.take() {
            c.reset();
            let (level, wbits) = (self.level, self.wbits);
            SPARE.with_borrow_mut(|s| {
                if s.len() < SPARES {
                    s.push((level, wbits, c));
                }
            });
        }
    }
}

impl Deflate {
    fn new(g: &GzipConf, len: u64) -> Deflate {
        // nginx shrinks the window for a short body of known length.
        let mut wbits = 15u8;
        while wbits > 9 && len > 0 && len < (1u64 << (wbits - 1)).saturating_sub(262) {
            wbits -= 1;
        }
        let level = if g.level == 1 { 2 } else { g.level };
        let spare = SPARE.with_borrow_mut(|s| {
            let i = s.iter().position(|(l, w, _)| *l == level && *w == wbits)?;
            Some(s.swap_remove(i).2)
        });
        let c = spare.unwrap_or_else(|| {
            Compress::new_with_window_bits(Compression::new(level), false, wbits)
        });
        Deflate {
            c: Some(c),
            level,
            wbits,
            crc: Crc::new(),
            header: false,
            // zlib's XFL: 4 fastest, 2 best.
            xfl: match g.level {
                1 => 4,
                9 => 2,
                _ => 0,
            },
        }
    }

    fn put_header(&mut self, out: &mut Vec<u8>) {
        if !self.header {
            self.header = true;
            out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, self.xfl, 3]);
        }
    }

    fn write(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        self.put_header(out);
        self.crc.update(input);
        let Some(c) = self.c.as_mut() else {
            return;
        };
        while !input.is_empty() {
            out.reserve((input.len() / 2).max(4096));
            let before = c.total_in();
            if c.compress_vec(input, out, FlushCompress::None).is_err() {
                return;
            }
            let used = (c.total_in() - before) as usize;
            input = input.get(used..).unwrap_or(&[]);
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        self.put_header(out);
        while let Some(c) = self.c.as_mut() {
            out.reserve(4096);
            match c.compress_vec(&[], out, FlushCompress::Finish) {
                Ok(ZStatus::StreamEnd) | Err(_) => break,
                Ok(_) => {}
            }
        }
        out.extend_from_slice(&self.crc.sum().to_le_bytes());
        out.extend_from_slice(&self.crc.amount().to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn accept_encoding_as_nginx_reads_it() {
        for (ae, ok) in [
            ("gzip", true),
            ("gzip, deflate, br", true),
            ("deflate, gzip", true),
            ("deflate,gzip;q=0.5", true),
            ("GZIP", true),
            ("gzip;q=0", false),
            ("gzip; q=0.000", false),
            ("gzip;q=0.001", true),
            ("gzip;q=1", true),
            ("gzip;q=1.0", true),
            ("gzip;q=1.5", false),
            ("gzip;q=0.0001", false),
            ("gzip;q=", false),
            ("x-gzip", false),
            ("gzipx", false),
            ("identity", false),
            ("", false),
            ("br;q=1, gzip ;q=0.8", true),
        ] {
            assert_eq!(accepts_gzip(ae.as_bytes()), ok, "{ae}");
        }
    }

    #[test]
    fn msie6_as_nginx_reads_it() {
        assert!(is_msie6(
            b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"
        ));
        assert!(!is_msie6(
            b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"
        ));
        assert!(is_msie6(b"Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)"));
        assert!(!is_msie6(
            b"Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)"
        ));
        assert!(!is_msie6(b"curl/8"));
    }

    #[test]
    fn a_member_decompresses_to_its_input() {
        use std::io::Read;
        let g = GzipConf {
            enable: true,
            types: Arc::new(Types::Any),
            min_length: 20,
            level: 1,
            buffers: (32, 4096),
            proxied: proxied::OFF,
            vary: false,
            disable: None,
            http_version: Version::HTTP_11,
            gzip_static: Static::Off,
        };
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i % 251) as u8 ^ (i / 7) as u8)
            .collect();
        let member = || {
            let mut z = Deflate::new(&g, data.len() as u64);
            let mut out = Vec::new();
            for part in data.chunks(10_000) {
                z.write(part, &mut out);
            }
            z.finish(&mut out);
            out
        };
        let out = member();
        assert_eq!(&out[..4], &[0x1f, 0x8b, 8, 0]);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&out[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
        // The next member comes from a reset spare: the same bytes.
        assert_eq!(SPARE.with_borrow(|s| s.len()), 1);
        assert_eq!(member(), out);
        // Abandoned half-way (a client gone), its compressor still comes
        // back clean.
        let mut z = Deflate::new(&g, data.len() as u64);
        z.write(&data[..5000], &mut Vec::new());
        drop(z);
        assert_eq!(member(), out);
    }
}
