//! `map $source $result { ... }` (nginx's `ngx_http_map_module.c`): a
//! variable whose value is chosen by the source's value — exact keys
//! (caseless), with `hostnames` the wildcard forms `.example.com`,
//! `*.example.com` and `www.example.*`, then regexes (`~`, `~*`) in order,
//! then `default` (empty when absent). `volatile` makes the result
//! uncached. Values are complex values.
//!
//! Not yet: captures of a map regex in its value, and `include` inside the
//! block.

use std::sync::Arc;

use gyre_core::conf::Directive;

use crate::complex_value::ComplexValue;
use crate::regex::Regex;
use crate::variables::Variables;

/// One `map` block.
#[derive(Debug, Clone)]
pub struct Map {
    pub source: ComplexValue,
    /// Exact keys, lowercased.
    exact: Vec<(Vec<u8>, ComplexValue)>,
    /// `*.example.com` / `.example.com`: the suffix (with its dot), and
    /// whether the bare name matches too (`.example.com`).
    head: Vec<(Vec<u8>, bool, ComplexValue)>,
    /// `www.example.*`: the prefix (with its dot).
    tail: Vec<(Vec<u8>, ComplexValue)>,
    regexes: Vec<(Arc<Regex>, ComplexValue)>,
    default: Option<ComplexValue>,
    pub volatile: bool,
    hostnames: bool,
}

/// Maps compare by identity (each block is its own variable).
impl PartialEq for Map {
    fn eq(&self, other: &Map) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Map {}

impl Map {
    /// Parses the block of `map SOURCE $RESULT { ... }`.
    pub fn parse(
        d: &Directive,
        vars: &mut Variables,
        next_regex: &mut usize,
    ) -> Result<Map, String> {
        let source = ComplexValue::compile(d.arg(0), vars)?;
        let mut m = Map {
            source,
            exact: Vec::new(),
            head: Vec::new(),
            tail: Vec::new(),
            regexes: Vec::new(),
            default: None,
            volatile: false,
            hostnames: false,
        };
        for e in d.block.as_deref().unwrap_or(&[]) {
            let key = e.name.as_str();
            match (key, e.args.as_slice()) {
                ("hostnames", []) => m.hostnames = true,
                ("volatile", []) => m.volatile = true,
                ("include", _) => return Err("\"include\" in \"map\" is not supported".into()),
                (_, [value]) => {
                    let v = ComplexValue::compile(value, vars)?;
                    m.add(key, v, vars, next_regex)?;
                }
                _ => return Err(format!("invalid number of the map parameters in \"{key}\"")),
            }
        }
        Ok(m)
    }

    fn add(
        &mut self,
        key: &str,
        v: ComplexValue,
        vars: &mut Variables,
        next_regex: &mut usize,
    ) -> Result<(), String> {
        if key == "default" {
            if self.default.is_some() {
                return Err("duplicate default map parameter".into());
            }
            self.default = Some(v);
            return Ok(());
        }
        if let Some(pat) = key.strip_prefix('~') {
            let (caseless, pat) = match pat.strip_prefix('*') {
                Some(p) => (true, p),
                None => (false, pat),
            };
            let re = crate::rewrite::compile_regex(pat, caseless, vars, next_regex)?;
            self.regexes.push((re, v));
            return Ok(());
        }
        let key = key.strip_prefix('\\').unwrap_or(key).to_ascii_lowercase();
        if self.hostnames {
            if let Some(suffix) = key.strip_prefix('*') {
                self.head.push((suffix.as_bytes().to_vec(), false, v));
                return Ok(());
            }
            if key.starts_with('.') {
                self.head.push((key.into_bytes(), true, v));
                return Ok(());
            }
            if let Some(prefix) = key.strip_suffix('*') {
                self.tail.push((prefix.as_bytes().to_vec(), v));
                return Ok(());
            }
        }
        if self.exact.iter().any(|(k, _)| *k == key.as_bytes()) {
            return Err(format!("conflicting parameter \"{key}\""));
        }
        self.exact.push((key.into_bytes(), v));
        Ok(())
    }

    /// The value to use for a source value `src`, or `None` (empty).
    /// Keys are stored lowercased and compared caselessly in place: no
    /// lowercased copy of the source (a User-Agent is longer than a stack
    /// buffer would be, and copying it was an allocation per request).
    pub fn find(&self, src: &[u8]) -> Option<&ComplexValue> {
        let key: &[u8] = if self.hostnames && src.ends_with(b".") {
            &src[..src.len() - 1]
        } else {
            src
        };
        if let Some((_, v)) = self.exact.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)) {
            return Some(v);
        }
        if self.hostnames {
            let ends = |s: &[u8]| {
                key.len() >= s.len() && key[key.len() - s.len()..].eq_ignore_ascii_case(s)
            };
            let head = self
                .head
                .iter()
                .filter(|(suffix, bare, _)| {
                    ends(suffix) || (*bare && key.eq_ignore_ascii_case(&suffix[1..]))
                })
                .max_by_key(|(s, _, _)| s.len());
            if let Some((_, _, v)) = head {
                return Some(v);
            }
            let starts = |p: &[u8]| key.len() >= p.len() && key[..p.len()].eq_ignore_ascii_case(p);
            let tail = self
                .tail
                .iter()
                .filter(|(prefix, _)| starts(prefix))
                .max_by_key(|(p, _)| p.len());
            if let Some((_, v)) = tail {
                return Some(v);
            }
        }
        for (re, v) in &self.regexes {
            if re.is_match(src) {
                return Some(v);
            }
        }
        self.default.as_ref()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn map(body: &str) -> Map {
        // Entries as the block's directives would give them.
        let mut vars = Variables::default();
        let mut n = 0;
        let mut m = Map {
            source: ComplexValue::compile("$http_host", &mut vars).unwrap(),
            exact: Vec::new(),
            head: Vec::new(),
            tail: Vec::new(),
            regexes: Vec::new(),
            default: None,
            volatile: false,
            hostnames: false,
        };
        for entry in body.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let parts: Vec<&str> = entry.split_whitespace().collect();
            match parts.as_slice() {
                ["hostnames"] => m.hostnames = true,
                [k, v] => m
                    .add(
                        k,
                        ComplexValue::compile(v, &mut vars).unwrap(),
                        &mut vars,
                        &mut n,
                    )
                    .unwrap(),
                _ => panic!("{entry}"),
            }
        }
        m
    }

    fn found(m: &Map, src: &str) -> Option<String> {
        m.find(src.as_bytes()).map(|v| v.text.to_string())
    }

    #[test]
    fn exact_caseless_then_regex_then_default() {
        let m = map("default d; Example.com e; ~^www\\. w; ~*\\.ORG$ o;");
        assert_eq!(found(&m, "EXAMPLE.com").as_deref(), Some("e"));
        assert_eq!(found(&m, "www.x.net").as_deref(), Some("w"));
        assert_eq!(found(&m, "a.org").as_deref(), Some("o"));
        assert_eq!(found(&m, "zzz").as_deref(), Some("d"));
        assert_eq!(found(&map("a b;"), "zzz"), None);
        // A key longer than any stack buffer, in another case.
        let long = "Mozilla/5.0-".repeat(20);
        let m = map(&format!("default d; {long} l;"));
        assert_eq!(found(&m, &long.to_ascii_uppercase()).as_deref(), Some("l"));
        assert_eq!(found(&m, &long[1..]).as_deref(), Some("d"));
    }

    #[test]
    fn hostnames_wildcards() {
        let m = map("hostnames; .example.com dot; *.a.example.com star; www.example.* tail;");
        assert_eq!(found(&m, "example.com").as_deref(), Some("dot"));
        assert_eq!(found(&m, "x.example.com.").as_deref(), Some("dot"));
        assert_eq!(found(&m, "b.a.example.com").as_deref(), Some("star"));
        assert_eq!(found(&m, "www.example.org").as_deref(), Some("tail"));
        assert_eq!(found(&m, "WWW.Example.ORG").as_deref(), Some("tail"));
        assert_eq!(found(&m, "X.A.EXAMPLE.COM").as_deref(), Some("star"));
        assert_eq!(found(&m, "Example.Com").as_deref(), Some("dot"));
        assert_eq!(found(&m, "other.org"), None);
    }
}
