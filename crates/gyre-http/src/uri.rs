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

/// Parses a raw request target (already checked for spaces and control
/// characters by the request-line parser).
pub fn parse_target(raw: &[u8], merge_slashes: bool) -> Result<Target, UriError> {
    let (host, rest) = if raw.first() == Some(&b'/') {
        (None, raw)
    } else {
        let (h, r) = split_absolute(raw)?;
        (Some(h.to_vec()), r)
    };
    // The fragment is never sent by browsers; nginx drops it.
    let rest = match rest.iter().position(|&b| b == b'#') {
        Some(i) => &rest[..i],
        None => rest,
    };
    let (raw_path, query) = match rest.iter().position(|&b| b == b'?') {
        Some(i) => (&rest[..i], Some(rest[i + 1..].to_vec())),
        None => (rest, None),
    };
    let raw_path: &[u8] = if raw_path.is_empty() { b"/" } else { raw_path };
    let decoded = percent_decode(raw_path)?;
    let path = normalize(&decoded, merge_slashes)?;
    Ok(Target { path, query, host })
}

/// Splits `scheme://host[:port]rest` into host (with port) and rest, with
/// nginx's character rules (no userinfo, host of `[a-z0-9.-]` or an IPv6
/// literal).
fn split_absolute(raw: &[u8]) -> Result<(&[u8], &[u8]), UriError> {
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
    match after.get(i) {
        None | Some(b'/') | Some(b'?') => Ok((&after[..i], &after[i..])),
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
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if b == b'%' {
            let hi = s.get(i + 1).copied().and_then(hex);
            let lo = s.get(i + 2).copied().and_then(hex);
            match (hi, lo) {
                (Some(h), Some(l)) => out.push(h << 4 | l),
                _ => return Err(UriError::BadEscape),
            }
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

/// Resolves `.`, `..` and (with `merge_slashes`) empty segments, keeping a
/// trailing slash when the last segment was a directory reference, as
/// nginx does (`/a/b/..` → `/a/`).
pub fn normalize(path: &[u8], merge_slashes: bool) -> Result<Vec<u8>, UriError> {
    if path.first() != Some(&b'/') {
        return Err(UriError::Form);
    }
    if path.contains(&0) {
        return Err(UriError::Nul);
    }
    let mut segs: Vec<&[u8]> = Vec::new();
    let mut trailing = false;
    for seg in path[1..].split(|&b| b == b'/') {
        trailing = false;
        match seg {
            b"" if merge_slashes => trailing = true,
            b"." => trailing = true,
            b".." => {
                if segs.pop().is_none() {
                    return Err(UriError::Escapes);
                }
                trailing = true;
            }
            s => segs.push(s),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for s in &segs {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    if trailing || out.is_empty() {
        out.push(b'/');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
