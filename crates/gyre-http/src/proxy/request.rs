//! nginx's `ngx_http_proxy_create_request`: the request a proxied request
//! sends upstream, written once into [`Proxy::req`](super::handler::Proxy)
//! (the line, the `proxy_set_header` list, the client's other headers and
//! the collected body when it is in memory).

use super::conf::HeaderValue;
use super::handler::Proxy;
use super::uri::{upstream_uri, UriInput};
use crate::phases::Ctx;
use crate::request::HttpRequest;
use crate::upstream::http_request::ProxyVersion;

/// nginx's `ngx_http_proxy_create_request`: the request line, the
/// `proxy_set_header` list (configured headers, then the defaults), the
/// client's headers not named there, the body.
pub(super) fn build_request(cx: &mut Ctx<'_>, r: &mut HttpRequest, p: &mut Proxy) {
    let conf = p.conf.clone();
    let out = &mut p.req;
    out.clear();
    let method = if r.st.as_get {
        "GET"
    } else {
        r.st.req.method()
    };
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    let uri_start = out.len();
    let i = UriInput {
        unparsed: r.st.req.target(),
        uri: &r.st.uri,
        args: &r.st.args,
        changed: r.st.internal,
        valid_location: r.st.valid_location,
    };
    let loc = conf.location_prefix.then_some(&*conf.location);
    match conf.uri.as_deref().filter(|_| conf.dynamic.is_some()) {
        // proxy_pass with variables and a URI: that URI, as evaluated.
        Some(uri) => out.extend_from_slice(uri.as_bytes()),
        None => upstream_uri(conf.uri.as_deref(), loc, &i, out),
    }
    p.uri = (uri_start, out.len());
    out.extend_from_slice(match conf.http_version {
        ProxyVersion::Http10 => b" HTTP/1.0\r\n",
        ProxyVersion::Http11 => b" HTTP/1.1\r\n",
    });
    let body_len = if p.body_left > 0 {
        p.body_left as usize
    } else if conf.pass_request_body {
        r.st.body.as_ref().map_or(0, |b| b.len as usize)
    } else {
        0
    };
    let has_body = conf.pass_request_body && !matches!(r.st.req.body, crate::body::BodyKind::None);
    for (name, v) in &conf.headers {
        // What never writes anything is skipped before the name goes in.
        match v {
            HeaderValue::Chunked | HeaderValue::Empty => continue,
            HeaderValue::BodyLength
                if !has_body && !matches!(r.st.req.body, crate::body::BodyKind::Length(_)) =>
            {
                continue
            }
            _ => {}
        }
        let mark = out.len();
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        let vstart = out.len();
        match v {
            HeaderValue::Value(cv) => {
                if cv.is_literal() {
                    out.extend_from_slice(cv.text.as_bytes());
                } else {
                    let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
                    cv.eval(&cx.conf.vars, &mut r.vars, &env, out);
                }
            }
            HeaderValue::ProxyHost => out.extend_from_slice(conf.proxy_host.as_bytes()),
            HeaderValue::BodyLength => {
                if has_body {
                    push_decimal(out, body_len as u64);
                } else if let crate::body::BodyKind::Length(n) = r.st.req.body {
                    // nginx: without the body, the client's length is
                    // still announced (hence the usual
                    // `proxy_set_header Content-Length ""` with it).
                    push_decimal(out, n);
                }
            }
            HeaderValue::Chunked | HeaderValue::Empty => {}
        }
        if out.len() == vstart {
            out.truncate(mark);
        } else {
            out.extend_from_slice(b"\r\n");
        }
    }
    if conf.pass_request_headers {
        for (n, v) in r.st.req.headers() {
            if conf
                .headers
                .iter()
                .any(|(c, _)| c.as_bytes().eq_ignore_ascii_case(n))
            {
                continue;
            }
            out.extend_from_slice(n);
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    // A body in memory goes with the head; one in a file follows it
    // (peer.rs sends it from there, `file_sent`).
    if has_body {
        if let Some(rb) = r.st.body.as_ref().filter(|b| b.file.is_none()) {
            for b in &rb.bufs {
                out.extend_from_slice(b);
            }
        }
    }
}

pub(super) fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    let mut v = n;
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
}
