//! Request-target handling: origin-form and absolute-form parsing,
//! percent-decoding and path normalization.
//!
//! The output path is what the glue maps onto the file system, so this
//! module is the one place that guarantees a path never climbs above the
//! root, never contains NUL, and never has empty or dot segments.

/// A parsed request target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Decoded, normalized path; always starts with `/`. Bytes, not a
    /// `String`: `%ff` is a legal file name byte on Unix.
    pub path: Vec<u8>,
    /// The raw query (after `?`, without it), not decoded: nginx's `$args`.
    pub query: Option<Vec<u8>>,
    /// Host from an absolute-form target (`http://host:port/...`), raw.
    pub host: Option<Vec<u8>>,
}

/// Why a target was refused; every case is a 400 in nginx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UriError {
    /// Not `/...` nor `scheme://host...`.
    Form,
    /// `%` not followed by two hex digits.
    BadEscape,
    /// A decoded NUL byte.
    Nul,
    /// `..` would leave the root.
    Escapes,
}

/// Where the parts of a target are, as offsets into the raw target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetParts {
    /// Host (with port) of an absolute-form target.
    pub host: Option<(usize, usize)>,
    /// The query, without `?`.
    pub query: Option<(usize, usize)>,
}

/// nginx's `r->quoted_uri || r->plus_in_uri`: the target's path (before
/// `?`) has a `%` escape or a `+`. The rewrite module then escapes the
/// regex captures it copies ([`escape_args`]), as they were decoded.
pub fn quoted_or_plus(raw: &[u8]) -> bool {
    raw.iter()
        .take_while(|&&b| b != b'?')
        .any(|&b| b == b'%' || b == b'+')
}

/// nginx's `ngx_escape_uri(…, NGX_ESCAPE_URI)`: space, `#`, `%`, `?`,
/// control bytes, DEL and bytes above 0x7f become `%XX`.
pub fn escape_uri(src: &[u8], out: &mut Vec<u8>) {
    escape(src, out, b"#%?");
}

/// nginx's `ngx_escape_uri(…, NGX_ESCAPE_ARGS)`: space, `#`, `%`, `&`,
/// `+`, `;`, `?`, control bytes, DEL and bytes above 0x7f become `%XX`.
pub fn escape_args(src: &[u8], out: &mut Vec<u8>) {
    escape(src, out, b"#%&+;?");
}

/// `%XX` for control bytes, space, DEL, bytes above 0x7f and `special`.
fn escape(src: &[u8], out: &mut Vec<u8>, special: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in src {
        if b <= 0x20 || b >= 0x7f || special.contains(&b) {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
}

/// nginx's `ngx_unescape_uri(…, NGX_UNESCAPE_REDIRECT)` on a redirecting
/// rewrite's result, in place: up to the first `?`, an escape of a
/// printable byte after `%` is decoded, any other escape kept as it was.
/// nginx's quirks with broken escapes are kept too: `%` before a non-hex
/// byte is dropped, and `%X` before one drops all three.
pub fn unescape_redirect(b: &mut Vec<u8>) {
    let (mut r, mut w) = (0, 0);
    while r < b.len() {
        let c = b[r];
        if c == b'?' {
            break;
        }
        if c != b'%' {
            b[w] = c;
            (r, w) = (r + 1, w + 1);
            continue;
        }
        let Some(hi) = b.get(r + 1).copied() else {
            r += 1;
            break;
        };
        let Some(h) = hex(hi) else {
            // "the invalid quoted character": the `%` goes.
            b[w] = hi;
            (r, w) = (r + 2, w + 1);
            continue;
        };
        let Some(lo) = b.get(r + 2).copied() else {
            r += 2;
            break;
        };
        let Some(l) = hex(lo) else {
            r += 3;
            continue;
        };
        let ch = (h << 4) | l;
        if ch == b'?' {
            b[w] = ch;
            (r, w) = (r + 3, w + 1);
            break;
        }
        if ch > b'%' && ch < 0x7f {
            b[w] = ch;
            w += 1;
        } else {
            b.copy_within(r..r + 3, w);
            w += 3;
        }
        r += 3;
    }
    // The rest (from a `?` on) as it was.
    b.copy_within(r.., w);
    b.truncate(w + (b.len() - r));
}

/// Parses a raw request target (already checked for spaces and control
/// characters by the request-line parser).
pub fn parse_target(raw: &[u8], merge_slashes: bool) -> Result<Target, UriError> {
    let mut path = Vec::new();
    let parts = parse_target_into(raw, merge_slashes, &mut path)?;
    let slice = |(s, e): (usize, usize)| raw[s..e].to_vec();
    Ok(Target {
        path,
        query: parts.query.map(slice),
        host: parts.host.map(slice),
    })
}

/// [`parse_target`] without allocating: the decoded, normalized path
/// replaces the contents of `path` (whose capacity is reused), the other
/// parts are returned as offsets.
pub fn parse_target_into(
    raw: &[u8],
    merge_slashes: bool,
    path: &mut Vec<u8>,
) -> Result<TargetParts, UriError> {
    let (host, rest_start) = if raw.first() == Some(&b'/') {
        (None, 0)
    } else {
        let (h, r) = split_absolute(raw)?;
        (Some(h), r)
    };
    let rest = &raw[rest_start..];
    // The fragment is never sent by browsers; nginx drops it.
    let rest = match rest.iter().position(|&b| b == b'#') {
        Some(i) => &rest[..i],
        None => rest,
    };
    let (raw_path, query) = match rest.iter().position(|&b| b == b'?') {
        Some(i) => (
            &rest[..i],
            Some((rest_start + i + 1, rest_start + rest.len())),
        ),
        None => (rest, None),
    };
    let raw_path: &[u8] = if raw_path.is_empty() { b"/" } else { raw_path };
    path.clear();
    if is_plain(raw_path) {
        path.extend_from_slice(raw_path);
    } else {
        decode_into(raw_path, path)?;
        normalize_in_place(path, merge_slashes)?;
    }
    Ok(TargetParts { host, query })
}

/// True when a path is already what decoding and normalising would make
/// of it — it starts with `/` and has no `%`, no NUL and no segment that is
/// empty or begins with a dot — so it can be copied as it is. Most request
/// paths are; one pass over them costs less than the two general steps.
fn is_plain(p: &[u8]) -> bool {
    if p.first() != Some(&b'/') {
        return false;
    }
    let mut prev = 0u8;
    for &c in p {
        if c == b'%' || c == 0 || (prev == b'/' && matches!(c, b'/' | b'.')) {
            return false;
        }
        prev = c;
    }
    true
}

/// Splits `scheme://host[:port]rest` into the host's offsets (with port)
/// and where the rest starts, with nginx's character rules (no userinfo,
/// host of `[a-z0-9.-]` or an IPv6 literal).
fn split_absolute(raw: &[u8]) -> Result<((usize, usize), usize), UriError> {
    let colon = raw.iter().position(|&b| b == b':').ok_or(UriError::Form)?;
    let scheme = &raw[..colon];
    let first_ok = scheme.first().is_some_and(|b| b.is_ascii_alphabetic());
    if !first_ok
        || !scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
    {
        return Err(UriError::Form);
    }
    let after = raw[colon + 1..].strip_prefix(b"//").ok_or(UriError::Form)?;
    let mut i = 0;
    if after.first() == Some(&b'[') {
        let close = after
            .iter()
            .position(|&b| b == b']')
            .ok_or(UriError::Form)?;
        if !after[1..close]
            .iter()
            .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return Err(UriError::Form);
        }
        i = close + 1;
    } else {
        while i < after.len()
            && (after[i].is_ascii_alphanumeric() || after[i] == b'.' || after[i] == b'-')
        {
            i += 1;
        }
        if i == 0 {
            return Err(UriError::Form);
        }
    }
    if after.get(i) == Some(&b':') {
        i += 1;
        while i < after.len() && after[i].is_ascii_digit() {
            i += 1;
        }
    }
    let base = raw.len() - after.len();
    match after.get(i) {
        None | Some(b'/') | Some(b'?') => Ok(((base, base + i), base + i)),
        _ => Err(UriError::Form),
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XX` escapes; `+` stays literal (it only means space in forms).
pub fn percent_decode(s: &[u8]) -> Result<Vec<u8>, UriError> {
    let mut out = Vec::with_capacity(s.len());
    decode_into(s, &mut out)?;
    Ok(out)
}

fn decode_into(s: &[u8], out: &mut Vec<u8>) -> Result<(), UriError> {
    out.reserve(s.len());
    let mut i = 0;
    while i < s.len() {
        // Copy the run up to the next escape at once.
        let run = s[i..]
            .iter()
            .position(|&b| b == b'%')
            .unwrap_or(s.len() - i);
        out.extend_from_slice(&s[i..i + run]);
        i += run;
        if i == s.len() {
            break;
        }
        let hi = s.get(i + 1).copied().and_then(hex);
        let lo = s.get(i + 2).copied().and_then(hex);
        match (hi, lo) {
            (Some(h), Some(l)) => out.push(h << 4 | l),
            _ => return Err(UriError::BadEscape),
        }
        i += 3;
    }
    Ok(())
}

/// Resolves `.`, `..` and (with `merge_slashes`) empty segments, keeping a
/// trailing slash when the last segment was a directory reference, as
/// nginx does (`/a/b/..` → `/a/`).
pub fn normalize(path: &[u8], merge_slashes: bool) -> Result<Vec<u8>, UriError> {
    let mut out = path.to_vec();
    normalize_in_place(&mut out, merge_slashes)?;
    Ok(out)
}

/// [`normalize`] within the buffer: the output is never longer than the
/// input, so each kept segment is moved down over what was read.
fn normalize_in_place(p: &mut Vec<u8>, merge_slashes: bool) -> Result<(), UriError> {
    if p.first() != Some(&b'/') {
        return Err(UriError::Form);
    }
    if p.contains(&0) {
        return Err(UriError::Nul);
    }
    let n = p.len();
    // Output length so far: a sequence of "/segment".
    let mut w = 0;
    let mut trailing;
    let mut r = 1;
    loop {
        let end = p[r..].iter().position(|&b| b == b'/').map_or(n, |i| r + i);
        trailing = false;
        match &p[r..end] {
            b"" if merge_slashes => trailing = true,
            b"." => trailing = true,
            b".." => {
                if w == 0 {
                    return Err(UriError::Escapes);
                }
                w = p[..w].iter().rposition(|&b| b == b'/').unwrap_or(0);
                trailing = true;
            }
            _ => {
                p[w] = b'/';
                p.copy_within(r..end, w + 1);
                w += 1 + (end - r);
            }
        }
        if end == n {
            break;
        }
        r = end + 1;
    }
    p.truncate(w);
    if trailing || w == 0 {
        p.push(b'/');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_unescaping_decodes_printable_escapes_up_to_the_query() {
        let un = |s: &[u8]| {
            let mut v = s.to_vec();
            unescape_redirect(&mut v);
            v
        };
        assert_eq!(un(b"/a%41%e9%20%25%26"), b"/aA%e9%20%25&");
        assert_eq!(un(b"/x%3fy%41"), b"/x?y%41");
        assert_eq!(un(b"/x?q=%41"), b"/x?q=%41");
        assert_eq!(un(b"/a%zz"), b"/azz");
        assert_eq!(un(b"/a%4zb"), b"/ab");
        assert_eq!(un(b"/a%"), b"/a");
        assert_eq!(un(b"/a%4"), b"/a");
        let mut out = Vec::new();
        escape_args(b"a b&c;d+e?\xe9~", &mut out);
        assert_eq!(out, b"a%20b%26c%3Bd%2Be%3F%E9~");
        assert!(quoted_or_plus(b"/a%41?x") && quoted_or_plus(b"/a+b"));
        assert!(!quoted_or_plus(b"/ab?x=%41+"));
    }

    /// The copy-as-is path gives what the general one gives.
    #[test]
    fn plain_paths_match_the_general_decoder() {
        for raw in [
            "/", "/r", "/a/b", "/a/", "/a/b/", "/a.b/c.d", "/a_b-c~d", "/a//b", "/a/./b",
            "/a/../b", "/.x", "/a/.x", "/%41", "/a%2fb", "/a/b/..", "//", "/a/b.", "/a./b",
        ] {
            for merge in [true, false] {
                let mut general = Vec::new();
                let r = decode_into(raw.as_bytes(), &mut general)
                    .and_then(|()| normalize_in_place(&mut general, merge));
                if is_plain(raw.as_bytes()) {
                    assert_eq!(r, Ok(()), "{raw}");
                    assert_eq!(general, raw.as_bytes(), "{raw} merge={merge}");
                }
                let mut fast = Vec::new();
                let got = parse_target_into(raw.as_bytes(), merge, &mut fast).map(|_| fast);
                assert_eq!(got, r.map(|()| general), "{raw} merge={merge}");
            }
        }
        assert!(is_plain(b"/a/b.c"));
        assert!(!is_plain(b"/a/.c"));
    }

    fn p(s: &str) -> Result<String, UriError> {
        parse_target(s.as_bytes(), true).map(|t| String::from_utf8_lossy(&t.path).into_owned())
    }

    #[test]
    fn normalization_table() {
        let ok = [
            ("/", "/"),
            ("/a/../b", "/b"),
            ("//x", "/x"),
            ("/a//b", "/a/b"),
            ("/a/./b/", "/a/b/"),
            ("/a/.", "/a/"),
            ("/a/b/..", "/a/"),
            ("/a/..", "/"),
            ("/...", "/..."),
            ("/.hidden", "/.hidden"),
            ("/a+b", "/a+b"),
            ("/%41", "/A"),
            ("/a%2fb", "/a/b"),
            ("/%2e/x", "/x"),
            ("/x?%00", "/x"),
            ("/x#frag", "/x"),
            ("/a%20b", "/a b"),
        ];
        for (i, o) in ok {
            assert_eq!(p(i).as_deref(), Ok(o), "{i}");
        }
        let bad = [
            ("/..", UriError::Escapes),
            ("/../x", UriError::Escapes),
            ("/%2e%2e/etc/passwd", UriError::Escapes),
            ("/%2E%2E", UriError::Escapes),
            ("/a/b/../../..", UriError::Escapes),
            ("/%2F..%2Fetc", UriError::Escapes),
            ("/a%00b", UriError::Nul),
            ("/%zz", UriError::BadEscape),
            ("/a%2", UriError::BadEscape),
            ("/a%", UriError::BadEscape),
            ("*", UriError::Form),
            ("index.html", UriError::Form),
            ("http://u@x/", UriError::Form),
            ("http:/x", UriError::Form),
        ];
        for (i, e) in bad {
            assert_eq!(p(i), Err(e), "{i}");
        }
    }

    #[test]
    fn absolute_form() {
        let t = parse_target(b"http://Example.com:8080/a/../b?q=1", true).unwrap();
        assert_eq!(t.host.as_deref(), Some(&b"Example.com:8080"[..]));
        assert_eq!(t.path, b"/b");
        assert_eq!(t.query.as_deref(), Some(&b"q=1"[..]));
        let t = parse_target(b"https://x", true).unwrap();
        assert_eq!(t.path, b"/");
        let t = parse_target(b"http://x?a", true).unwrap();
        assert_eq!(
            (t.path.as_slice(), t.query.as_deref()),
            (&b"/"[..], Some(&b"a"[..]))
        );
        let t = parse_target(b"http://[::1]:80/z", true).unwrap();
        assert_eq!(t.host.as_deref(), Some(&b"[::1]:80"[..]));
    }

    #[test]
    fn no_merge_keeps_empty_segments() {
        assert_eq!(parse_target(b"/a//b", false).unwrap().path, b"/a//b");
    }

    /// The segment-list definition of normalization, to check the in-place
    /// version against.
    fn reference(path: &[u8], merge: bool) -> Result<Vec<u8>, UriError> {
        let mut segs: Vec<&[u8]> = Vec::new();
        let mut trailing = false;
        for seg in path[1..].split(|&b| b == b'/') {
            trailing = false;
            match seg {
                b"" if merge => trailing = true,
                b"." => trailing = true,
                b".." => {
                    segs.pop().ok_or(UriError::Escapes)?;
                    trailing = true;
                }
                s => segs.push(s),
            }
        }
        let mut out = Vec::new();
        for s in &segs {
            out.push(b'/');
            out.extend_from_slice(s);
        }
        if trailing || out.is_empty() {
            out.push(b'/');
        }
        Ok(out)
    }

    #[test]
    fn in_place_matches_segment_list() {
        // Every path of up to 7 symbols over a small alphabet.
        let alphabet: [&[u8]; 5] = [b"/", b".", b"..", b"a", b"bc"];
        let mut stack = vec![b"/".to_vec()];
        let mut checked = 0;
        while let Some(p) = stack.pop() {
            for merge in [true, false] {
                assert_eq!(normalize(&p, merge), reference(&p, merge), "{p:?} {merge}");
            }
            checked += 1;
            if p.len() < 8 {
                for a in alphabet {
                    let mut q = p.clone();
                    q.extend_from_slice(a);
                    stack.push(q);
                }
            }
        }
        assert!(checked > 10_000);
    }
}
