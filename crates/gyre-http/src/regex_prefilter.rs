//! A check made before PCRE2 is called: what any match of a pattern must
//! look like, read off the pattern's text when that is certain — a
//! literal start after `^` (`^/api/v1/`), or the possible last bytes
//! before a final `$` (`\.php$`, `\.(?:css|js)$`). nginx has no such
//! thing; it is here because a site's regex locations are tried in order
//! for every request and most of them fail, and a failing call into
//! PCRE2 costs ~350 instructions of setup and JIT entry (callgrind, 30
//! locations: a quarter of a request) where this costs a comparison.
//!
//! The check may only answer "cannot match" when PCRE2 would not match:
//! whatever the reader is not sure of (top-level `|`, inline options,
//! `\Q`, verbs, escapes that span several characters, POSIX classes,
//! quantified last atoms) turns that part of the check off. The tests
//! compare it with PCRE2 itself.

/// What a subject must look like for the pattern to match; empty parts
/// check nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prefilter {
    /// `^LITERAL…`: the subject's first bytes.
    prefix: Vec<u8>,
    /// `…X$`: the byte before the end (or before a final newline, where
    /// `$` also matches) is one of these.
    last: Vec<u8>,
    caseless: bool,
}

/// Escapes of a letter that stand for one thing and take no further
/// characters (`\x41`, `\101`, `\p{L}`, `\k<n>` do).
const SIMPLE_ESCAPES: &[u8] = b"dDwWsSbBhHvVRAzZGK";

/// Bytes that are not literal outside a class.
fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b'\\'
            | b'^'
            | b'$'
            | b'.'
            | b'['
            | b']'
            | b'|'
            | b'('
            | b')'
            | b'?'
            | b'*'
            | b'+'
            | b'{'
            | b'}'
    )
}

/// One piece of a pattern, as far as the check needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// A byte matched as itself.
    Lit(u8),
    /// A class of plain bytes (`[ci]`).
    Set(Vec<u8>),
    Open,
    Close,
    Alt,
    /// Anything else: a quantifier, `.`, an escape class, an assertion.
    Other,
}

/// The pattern as tokens, or `None` when it uses syntax the reader does
/// not follow (then nothing is checked).
fn tokens(p: &[u8]) -> Option<Vec<Tok>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        match c {
            b'\\' => {
                let n = *p.get(i + 1)?;
                if n.is_ascii_alphanumeric() {
                    if !SIMPLE_ESCAPES.contains(&n) {
                        return None;
                    }
                    out.push(Tok::Other);
                } else {
                    out.push(Tok::Lit(n));
                }
                i += 2;
            }
            b'[' => {
                let (tok, end) = class(p, i)?;
                out.push(tok);
                i = end;
            }
            b'(' => {
                match p.get(i + 1) {
                    // `(?:` and named groups (`(?<n>`, `(?P<n>`, `(?'n'`)
                    // only: other `(?` forms change options or what a
                    // match is (look-around, comments); `(*` is a verb.
                    Some(b'?') if p.get(i + 2) == Some(&b':') => i += 3,
                    Some(b'?') => i = named_group(p, i)?,
                    Some(b'*') => return None,
                    _ => i += 1,
                }
                out.push(Tok::Open);
            }
            b')' => {
                out.push(Tok::Close);
                i += 1;
            }
            b'|' => {
                out.push(Tok::Alt);
                i += 1;
            }
            c if is_meta(c) => {
                out.push(Tok::Other);
                i += 1;
            }
            c => {
                out.push(Tok::Lit(c));
                i += 1;
            }
        }
    }
    Some(out)
}

/// The end of a named group's opening (`(?<name>`, `(?P<name>`,
/// `(?'name'`) at `p[at]`, or `None` for other `(?` forms.
fn named_group(p: &[u8], at: usize) -> Option<usize> {
    let (start, close) = match p.get(at + 2..at + 4)? {
        [b'P', b'<'] => (at + 4, b'>'),
        [b'<', _] => (at + 3, b'>'),
        [b'\'', _] => (at + 3, b'\''),
        _ => return None,
    };
    let len = p[start..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count();
    // `(?<=` and `(?<!` (look-behind) have no name.
    if len == 0 || p.get(start + len) != Some(&close) {
        return None;
    }
    Some(start + len + 1)
}

/// The class starting at `p[at]` (`[`): a set of plain bytes, or
/// `Other`; `None` for forms not followed (`[:alpha:]`).
fn class(p: &[u8], at: usize) -> Option<(Tok, usize)> {
    let mut i = at + 1;
    let negated = p.get(i) == Some(&b'^');
    if negated {
        i += 1;
    }
    let mut set = Vec::new();
    let mut plain = !negated;
    let mut first = true;
    loop {
        let c = *p.get(i)?;
        match c {
            b']' if !first => return Some((if plain { Tok::Set(set) } else { Tok::Other }, i + 1)),
            b'[' if p.get(i + 1) == Some(&b':') => return None,
            b'\\' => {
                // An escape inside a class may be several characters
                // (`\x{..}`): only a punctuation escape is followed.
                let n = *p.get(i + 1)?;
                if n.is_ascii_alphanumeric() {
                    return None;
                }
                set.push(n);
                i += 2;
            }
            b'-' => {
                plain = false;
                i += 1;
            }
            c => {
                set.push(c);
                i += 1;
            }
        }
        first = false;
    }
}

/// The token list split at `Alt`s of its own level (not inside groups).
fn alternatives(t: &[Tok]) -> Vec<&[Tok]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, tok) in t.iter().enumerate() {
        match tok {
            Tok::Open => depth += 1,
            Tok::Close => depth = depth.saturating_sub(1),
            Tok::Alt if depth == 0 => {
                out.push(&t[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&t[start..]);
    out
}

/// The bytes an alternative can end with, if certain.
fn last_bytes(t: &[Tok], out: &mut Vec<u8>) -> Option<()> {
    match t.last()? {
        Tok::Lit(c) => out.push(*c),
        Tok::Set(s) if !s.is_empty() => out.extend_from_slice(s),
        Tok::Close => {
            // The last group's alternatives, each ending certainly.
            let mut depth = 0usize;
            let open = t.iter().enumerate().rev().find_map(|(i, tok)| {
                match tok {
                    Tok::Close => depth += 1,
                    Tok::Open => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                    _ => {}
                }
                None
            })?;
            for alt in alternatives(&t[open + 1..t.len() - 1]) {
                last_bytes(alt, out)?;
            }
        }
        _ => return None,
    }
    Some(())
}

impl Prefilter {
    /// The check for `pattern` (compiled with `caseless` for `~*`).
    pub fn new(pattern: &str, caseless: bool) -> Prefilter {
        let mut f = Prefilter {
            caseless,
            ..Prefilter::default()
        };
        let Some(t) = tokens(pattern.as_bytes()) else {
            return f;
        };
        // Unbalanced groups are PCRE2's compile error, not ours to read.
        let mut depth = 0i32;
        for tok in &t {
            match tok {
                Tok::Open => depth += 1,
                Tok::Close => depth -= 1,
                _ => {}
            }
            if depth < 0 {
                return f;
            }
        }
        if depth != 0 || alternatives(&t).len() > 1 {
            return f;
        }
        if pattern.starts_with('^') {
            // Literals up to the first other token; one followed by a
            // quantifier may be absent (or repeated) and is not taken.
            let body = &t[1..];
            let n = body.iter().take_while(|x| matches!(x, Tok::Lit(_))).count();
            let keep = match body.get(n) {
                Some(Tok::Other) => n.saturating_sub(1),
                _ => n,
            };
            f.prefix = body[..keep]
                .iter()
                .filter_map(|x| match x {
                    Tok::Lit(c) => Some(*c),
                    _ => None,
                })
                .collect();
        }
        if let [rest @ .., Tok::Other] = t.as_slice() {
            if pattern.ends_with('$') && !ends_escaped(pattern.as_bytes()) {
                let mut last = Vec::new();
                if last_bytes(rest, &mut last).is_some() {
                    if caseless {
                        let folded: Vec<u8> = last
                            .iter()
                            .flat_map(|c| [c.to_ascii_lowercase(), c.to_ascii_uppercase()])
                            .collect();
                        last = folded;
                    }
                    last.sort_unstable();
                    last.dedup();
                    f.last = last;
                }
            }
        }
        f
    }

    /// False only when the pattern cannot match `s`.
    #[inline]
    pub fn may_match(&self, s: &[u8]) -> bool {
        if !self.prefix.is_empty() {
            let Some(head) = s.get(..self.prefix.len()) else {
                return false;
            };
            let same = if self.caseless {
                head.eq_ignore_ascii_case(&self.prefix)
            } else {
                head == self.prefix.as_slice()
            };
            if !same {
                return false;
            }
        }
        if !self.last.is_empty() {
            return match s {
                [.., b] if self.last.contains(b) => true,
                [.., b, b'\n'] => self.last.contains(b),
                _ => false,
            };
        }
        true
    }

    /// True when the check can refuse anything (tests).
    #[cfg(test)]
    fn checks(&self) -> bool {
        !self.prefix.is_empty() || !self.last.is_empty()
    }
}

/// The final `$` is escaped (`\$`): an odd run of backslashes before it.
fn ends_escaped(p: &[u8]) -> bool {
    let n = p[..p.len() - 1]
        .iter()
        .rev()
        .take_while(|&&c| c == b'\\')
        .count();
    n % 2 == 1
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::regex::{Captures, MatchCache, Regex};

    /// Patterns as sites write them, and ones meant to trip the reader.
    const PATTERNS: &[(&str, bool)] = &[
        (r"^/api/v1/users/(\d+)$", false),
        (r"^/api/v2/", false),
        (r"^/wp-(?:admin|login)/", true),
        (r"/\.(?!well-known/)", false),
        (r"\.(?:bak|conf|in[ci]|sw[op])$", true),
        (r"\.php$", true),
        (r"\.PHP$", true),
        (r"\.(?:png|jpe?g|gif)$", true),
        (r"\.svgz?$", true),
        (r"^/blog/(\d{4})/(\d{2})/([\w-]+)/?$", false),
        (r"^/u/(?<user>[a-z0-9_]{1,32})$", false),
        (r"^/o/(?<id>\d+)/items$", false),
        (r"^/o/(?P<id>x|y)$", false),
        (r"(?<=/)a$", false),
        (r"(?<!b)a$", false),
        (r"^/healthz$", false),
        (r"\.(?:txt|html?)$", true),
        (r"^/ab?c", false),
        (r"^/ab*", false),
        (r"^/ab{2}", false),
        (r"^/a|/b$", false),
        (r"(?:a|b)|c$", false),
        (r"(?i)^/api", false),
        (r"^/api(?i)X$", false),
        (r"\x41$", false),
        (r"\101$", false),
        (r"a\$", false),
        (r"a\\$", false),
        (r"\Q.php$\E", false),
        (r"[[:alpha:]]$", false),
        (r"[^a]$", false),
        (r"[a-c]$", false),
        (r"[]x]$", false),
        (r"(a|)$", false),
        (r"(?:x|(?:y|z))$", false),
        (r"a{2$", false),
        (r"\.$", false),
        (r"^\.well-known/", false),
        (r"^/static/.+\.(?:woff2?|ttf)$", true),
        (r"^/(?:robots\.txt|favicon\.ico)$", true),
        (r"(*UTF)^/x", false),
        (r"^/x(?#c)y", false),
        (r"^/é", true),
    ];

    const SUBJECTS: &[&str] = &[
        "",
        "/",
        "/api/v1/users/42",
        "/API/V1/users/42",
        "/api/v2/x",
        "/wp-Admin/x",
        "/.git",
        "/x.php",
        "/x.PHP",
        "/x.php\n",
        "/x.phpx",
        "/a.jpeg",
        "/a.jpg",
        "/a.svg",
        "/a.svgz",
        "/blog/2024/01/hello/",
        "/u/bob",
        "/healthz",
        "/healthz\n",
        "/s.txt",
        "/s.htm",
        "/s.html",
        "/ac",
        "/abc",
        "/abbb",
        "/abb",
        "/b",
        "/xb",
        "c",
        "/apiX",
        "/APIx",
        "A",
        "a$",
        "a\\",
        ".php$",
        "b",
        "x]",
        "y",
        "z",
        "a{2",
        "/x.",
        ".well-known/",
        "/static/f/a.woff2",
        "/static/f/a.ttf",
        "/robots.txt",
        "/FAVICON.ICO",
        "/x",
        "/xy",
        "/é",
        "/É",
        "a",
        "xa",
        "/o/12/items",
        "/o/x",
        "/o/y",
        "/a",
        "ba",
    ];

    #[test]
    fn refuses_only_what_pcre2_refuses() {
        let mut mc = MatchCache::default();
        let mut caps = Captures::new();
        for (id, (p, caseless)) in PATTERNS.iter().enumerate() {
            let re = Regex::compile(p, *caseless, id).unwrap();
            let f = Prefilter::new(p, *caseless);
            for s in SUBJECTS {
                let pcre = mc.exec(&re, s.as_bytes(), &mut caps);
                assert!(
                    f.may_match(s.as_bytes()) || !pcre,
                    "{p:?} refused {s:?}, which PCRE2 matches ({f:?})"
                );
            }
        }
    }

    #[test]
    fn reads_what_sites_write() {
        let f = Prefilter::new(r"^/api/v1/users/(\d+)$", false);
        assert_eq!(f.prefix, b"/api/v1/users/");
        assert!(!f.may_match(b"/s.txt"));
        let f = Prefilter::new(r"\.(?:png|jpe?g|gif)$", true);
        assert_eq!(f.last, b"FGfg");
        assert!(!f.may_match(b"/s.txt"));
        assert!(f.may_match(b"/A.GIF"));
        assert_eq!(Prefilter::new(r"\.(?:bak|in[ci])$", false).last, b"cik");
        assert_eq!(Prefilter::new(r"^/ab?c", false).prefix, b"/a");
        let f = Prefilter::new(r"^/o/(?<id>\d+)/items$", false);
        assert_eq!(
            (f.prefix.as_slice(), f.last.as_slice()),
            (&b"/o/"[..], &b"s"[..])
        );
        assert_eq!(Prefilter::new(r"^/o/(?P<id>x|y)$", false).last, b"xy");
        // Turned off where not certain.
        for p in [
            r"\.svgz?$",
            r"^/a|/b$",
            r"(?i)^/api",
            r"\x41$",
            r"\Q.php$\E",
            r"(a|)$",
            r"(?<=/)a$",
        ] {
            assert!(!Prefilter::new(p, false).checks(), "{p}");
        }
    }
}
