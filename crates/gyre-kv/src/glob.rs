//! Redis's `stringmatchlen` glob matching (KEYS, SCAN MATCH, CONFIG GET).
//!
//! `*` any run, `?` one byte, `[abc]` `[a-z]` `[^x]` classes (a reversed
//! range is swapped; an unterminated class ends at the pattern's end), `\`
//! escapes the next byte. Like Redis 7 it stops trying longer matches for a
//! `*` once a nested `*` has failed on the whole rest, which keeps patterns
//! such as `a*a*a*a*b` linear-ish, and gives up beyond 1000 nested stars.

pub fn stringmatch(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    matchlen(pattern, s, nocase, &mut skip_longer, 0)
}

fn lower(b: u8, nocase: bool) -> u8 {
    if nocase {
        b.to_ascii_lowercase()
    } else {
        b
    }
}

fn matchlen(pat: &[u8], s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: u32) -> bool {
    if nesting > 1000 {
        return false;
    }
    let (mut p, mut i) = (0usize, 0usize);
    while p < pat.len() && i < s.len() {
        match pat[p] {
            b'*' => {
                while p + 1 < pat.len() && pat[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pat.len() {
                    return true;
                }
                while i < s.len() {
                    if matchlen(&pat[p + 1..], &s[i..], nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    i += 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => i += 1,
            b'[' => {
                p += 1;
                let not = pat.get(p) == Some(&b'^');
                if not {
                    p += 1;
                }
                let c = s[i];
                let mut matched = false;
                loop {
                    let rest = pat.len() - p.min(pat.len());
                    if rest >= 2 && pat[p] == b'\\' {
                        p += 1;
                        if lower(pat[p], nocase) == lower(c, nocase) {
                            matched = true;
                        }
                    } else if rest == 0 {
                        // unterminated class: step back so the common
                        // advance below lands on the end
                        p -= 1;
                        break;
                    } else if pat[p] == b']' {
                        break;
                    } else if rest >= 3 && pat[p + 1] == b'-' {
                        let (mut a, mut b) = (pat[p], pat[p + 2]);
                        if a > b {
                            std::mem::swap(&mut a, &mut b);
                        }
                        let (a, b, cc) = (lower(a, nocase), lower(b, nocase), lower(c, nocase));
                        p += 2;
                        if cc >= a && cc <= b {
                            matched = true;
                        }
                    } else if lower(pat[p], nocase) == lower(c, nocase) {
                        matched = true;
                    }
                    p += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                i += 1;
            }
            b => {
                let mut b = b;
                if b == b'\\' && pat.len() - p >= 2 {
                    p += 1;
                    b = pat[p];
                }
                if lower(b, nocase) != lower(s[i], nocase) {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
        if i == s.len() {
            while p < pat.len() && pat[p] == b'*' {
                p += 1;
            }
            break;
        }
    }
    p == pat.len() && i == s.len()
}

#[cfg(test)]
mod tests {
    use super::stringmatch;

    #[test]
    fn glob_table() {
        let t = [
            // Like Redis, a pattern never matches the empty string (KEYS * has a
            // separate all-keys shortcut).
            ("*", "", false),
            ("ab[c", "abc", true),
            ("*", "anything", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "hllo", true),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hello", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[b-a]llo", "hallo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("a*", "a", true),
            ("a**", "a", true),
            ("a*b", "ab", true),
            ("a*b", "acb", true),
            ("a*b", "acbd", false),
            ("[", "a", false),
            ("[a", "a", true),
            ("[\\]]", "]", true),
            ("foo", "foo", true),
            ("foo", "foobar", false),
            ("foo*", "foobar", true),
            ("*bar", "foobar", true),
            ("", "", true),
            ("", "a", false),
            ("?", "", false),
            (
                "a*a*a*a*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
        ];
        for (p, s, want) in t {
            assert_eq!(
                stringmatch(p.as_bytes(), s.as_bytes(), false),
                want,
                "{p:?} vs {s:?}"
            );
        }
        assert!(stringmatch(b"HE*", b"hello", true));
    }
}
