//! The URI a proxied request is sent with (nginx's rules in
//! `ngx_http_proxy_create_request`):
//!
//! - `proxy_pass` without a URI part, URI unchanged: the client's request
//!   target exactly as it came (not normalised, arguments included);
//! - with a URI part: that part replaces the location's prefix of the
//!   current (decoded) URI, then `?args`;
//! - after a rewrite or internal redirect the current URI is sent (after
//!   the URI part, if any), escaped as nginx's `NGX_ESCAPE_URI`, then
//!   `?args`; after `rewrite … break` the URI part is ignored and the
//!   whole changed URI is sent;
//! - a client URI with `%` escapes is re-escaped the same way when a part
//!   of it is replaced.

/// What the rules look at in the request.
#[derive(Clone, Copy, Debug)]
pub struct UriInput<'a> {
    /// The request target as the client sent it.
    pub unparsed: &'a [u8],
    /// The current decoded URI (`$uri`).
    pub uri: &'a [u8],
    /// The current arguments (`$args`).
    pub args: &'a [u8],
    /// A rewrite or internal redirect changed the URI (nginx's
    /// `r->internal`, `!r->valid_unparsed_uri`).
    pub changed: bool,
    /// nginx's `r->valid_location` (false after `rewrite … break`).
    pub valid_location: bool,
}

/// Appends the URI to send to `out`. `part` is the `proxy_pass` URI part,
/// `location` the location's name (its prefix) when it is a prefix one.
pub fn upstream_uri(
    part: Option<&str>,
    location: Option<&str>,
    i: &UriInput<'_>,
    out: &mut Vec<u8>,
) {
    // After `rewrite … break` the URI part is ignored: the changed URI
    // goes as it is.
    let part = if i.valid_location {
        part.unwrap_or("")
    } else {
        ""
    };
    if part.is_empty() && !i.changed {
        out.extend_from_slice(i.unparsed);
        return;
    }
    let loc_len = match location {
        Some(l) if i.valid_location && !part.is_empty() => l.len(),
        _ => 0,
    };
    out.extend_from_slice(part.as_bytes());
    let rest = i.uri.get(loc_len..).unwrap_or(&[]);
    let quoted = i.unparsed.contains(&b'%');
    if i.changed || quoted {
        crate::uri::escape_uri(rest, out);
    } else {
        out.extend_from_slice(rest);
    }
    if !i.args.is_empty() {
        out.push(b'?');
        out.extend_from_slice(i.args);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(part: Option<&str>, loc: Option<&str>, i: UriInput<'_>) -> String {
        let mut out = Vec::new();
        upstream_uri(part, loc, &i, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn req<'a>(unparsed: &'a str, u: &'a str, args: &'a str) -> UriInput<'a> {
        UriInput {
            unparsed: unparsed.as_bytes(),
            uri: u.as_bytes(),
            args: args.as_bytes(),
            changed: false,
            valid_location: true,
        }
    }

    #[test]
    fn without_a_uri_part_the_request_target_goes_as_sent() {
        let i = req("/a/../b//c?x=1", "/b/c", "x=1");
        assert_eq!(uri(None, Some("/"), i), "/a/../b//c?x=1");
    }

    #[test]
    fn a_uri_part_replaces_the_location_prefix() {
        let i = req("/app/x/y?q", "/app/x/y", "q");
        assert_eq!(uri(Some("/"), Some("/app/"), i), "/x/y?q");
        assert_eq!(uri(Some("/v2"), Some("/app"), i), "/v2/x/y?q");
        let q = req("/app/a%20b", "/app/a b", "");
        assert_eq!(uri(Some("/"), Some("/app/"), q), "/a%20b");
    }

    #[test]
    fn a_changed_uri_is_escaped_and_after_break_follows_the_part() {
        let mut i = req("/old", "/new path", "a=1");
        i.changed = true;
        assert_eq!(uri(None, Some("/"), i), "/new%20path?a=1");
        i.uri = b"/app/n";
        assert_eq!(uri(Some("/x/"), Some("/app/"), i), "/x/n?a=1");
        i.valid_location = false;
        assert_eq!(uri(Some("/x/"), Some("/app/"), i), "/app/n?a=1");
    }
}
