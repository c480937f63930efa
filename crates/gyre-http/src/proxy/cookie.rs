//! nginx's `Set-Cookie` rewriting of proxied responses
//! (`ngx_http_proxy_rewrite_cookie` and its helpers in
//! `ngx_http_proxy_module.c`): `proxy_cookie_domain`, `proxy_cookie_path`
//! and `proxy_cookie_flags` (nginx 1.19.3+, flags with variables since
//! 1.19.8), with nginx's configuration errors.
//!
//! A `Set-Cookie` value is split at `;` into `name=value` attributes, spaces
//! around names and values trimmed (nginx's `ngx_http_proxy_parse_cookie`).
//! A cookie whose first part has no `=` is left alone. Each `Domain` and
//! `Path` attribute (names caseless) with a value is passed through the
//! rules of its directive, the first matching rule winning:
//! - `proxy_cookie_domain D R`: the whole value, caselessly, a leading `.`
//!   ignored on both sides and kept in the value; `~REGEX` (always
//!   caseless) replaces the whole value on a match;
//! - `proxy_cookie_path P R`: a case-sensitive prefix, or `~` / `~*` regex
//!   (the whole value replaced), as `proxy_redirect` ([`super::redirect`]);
//! - `proxy_cookie_flags NAME|~REGEX FLAG...`: the first rule whose name
//!   (caseless) or regex matches the cookie's name adds, changes or removes
//!   `Secure`, `HttpOnly` and `SameSite`.
//!
//! Only when something was rewritten is the header rebuilt, as nginx does:
//! attributes joined by `"; "`, removed ones left out; otherwise the
//! upstream's bytes pass unchanged.

use std::borrow::Cow;
use std::sync::Arc;

use gyre_core::conf::Directive;

use super::redirect::{set_named, Eval, Match, Rule, Text};
use crate::complex_value::ComplexValue;
use crate::regex::{Captures, Regex};
use crate::request::HttpRequest;
use crate::variables::{VarEnv, Variables};

/// One directive's rules at one level: nginx's `NGX_CONF_UNSET_PTR`, `NULL`
/// (`off`) and an array.
#[derive(Debug, Clone, Default)]
enum Slot<T> {
    #[default]
    Unset,
    Off,
    On(Arc<Vec<T>>),
}

impl<T: Clone> Slot<T> {
    /// `off`, with nginx's checks: a repeat or `off` after rules is
    /// `is duplicate`.
    fn off(&mut self, d: &Directive) -> Result<(), String> {
        match self {
            Slot::Unset => {
                *self = Slot::Off;
                Ok(())
            }
            _ => Err(d.error("is duplicate")),
        }
    }

    /// Adds a rule; rules after `off` are `is duplicate`.
    fn push(&mut self, d: &Directive, rule: T) -> Result<(), String> {
        match self {
            Slot::Off => Err(d.error("is duplicate")),
            Slot::Unset => {
                *self = Slot::On(Arc::new(vec![rule]));
                Ok(())
            }
            Slot::On(v) => {
                Arc::make_mut(v).push(rule);
                Ok(())
            }
        }
    }

    /// `ngx_conf_merge_ptr_value`: unset inherits.
    fn merge(&self, parent: &Slot<T>) -> Slot<T> {
        match self {
            Slot::Unset => parent.clone(),
            s => s.clone(),
        }
    }

    fn rules(&self) -> &[T] {
        match self {
            Slot::On(v) => v,
            _ => &[],
        }
    }
}

/// What `proxy_cookie_flags` can do to a cookie (nginx's
/// `NGX_HTTP_PROXY_COOKIE_*` bits).
mod flag {
    pub const SECURE_ON: u16 = 1;
    pub const SECURE_OFF: u16 = 2;
    pub const HTTPONLY_ON: u16 = 4;
    pub const HTTPONLY_OFF: u16 = 8;
    pub const SAMESITE_STRICT: u16 = 16;
    pub const SAMESITE_LAX: u16 = 32;
    pub const SAMESITE_NONE: u16 = 64;
    pub const SAMESITE_OFF: u16 = 128;

    /// The flag words, matched caselessly (`ngx_http_proxy_cookie_flags_masks`).
    pub const NAMES: [(&[u8], u16); 8] = [
        (b"secure", SECURE_ON),
        (b"nosecure", SECURE_OFF),
        (b"httponly", HTTPONLY_ON),
        (b"nohttponly", HTTPONLY_OFF),
        (b"samesite=strict", SAMESITE_STRICT),
        (b"samesite=lax", SAMESITE_LAX),
        (b"samesite=none", SAMESITE_NONE),
        (b"nosamesite", SAMESITE_OFF),
    ];
}

/// Which cookies a `proxy_cookie_flags` rule is for.
#[derive(Debug, Clone)]
enum CookieName {
    /// Compared caselessly with the cookie's name.
    Name(ComplexValue),
    /// `~REGEX`, caseless, matched against the name.
    Regex(Arc<Regex>),
}

/// One `proxy_cookie_flags` rule (nginx's `ngx_http_proxy_cookie_flags_t`).
/// The flags are complex values, checked when used: an unknown word is
/// skipped (nginx logs it at debug level only).
#[derive(Debug, Clone)]
struct FlagRule {
    cookie: CookieName,
    flags: Vec<ComplexValue>,
}

/// A level's `proxy_cookie_domain`, `proxy_cookie_path` and
/// `proxy_cookie_flags`; after [`CookieConf::merge`], what a location uses.
#[derive(Debug, Clone, Default)]
pub struct CookieConf {
    domains: Slot<Rule>,
    paths: Slot<Rule>,
    flags: Slot<FlagRule>,
}

impl CookieConf {
    /// The setter of the three directives (by `d.name`): `off`, or a rule.
    /// The table should give `proxy_cookie_domain` and `proxy_cookie_path`
    /// one or two arguments, `proxy_cookie_flags` one to four, all
    /// repeatable.
    pub fn directive(
        &mut self,
        d: &Directive,
        vars: &mut Variables,
        next_regex: &mut usize,
    ) -> Result<(), String> {
        let args = d.args.as_slice();
        if let [a] = args {
            if a != "off" {
                return Err(format!("invalid parameter \"{a}\""));
            }
            return match d.name.as_str() {
                "proxy_cookie_domain" => self.domains.off(d),
                "proxy_cookie_path" => self.paths.off(d),
                _ => self.flags.off(d),
            };
        }
        // nginx's "is duplicate" check comes before the rule is compiled.
        let off = match d.name.as_str() {
            "proxy_cookie_domain" => matches!(self.domains, Slot::Off),
            "proxy_cookie_path" => matches!(self.paths, Slot::Off),
            _ => matches!(self.flags, Slot::Off),
        };
        if off {
            return Err(d.error("is duplicate"));
        }
        match (d.name.as_str(), args) {
            ("proxy_cookie_domain", [p, r]) => {
                let rule = domain_rule(p, r, vars, next_regex)?;
                self.domains.push(d, rule)
            }
            ("proxy_cookie_path", [p, r]) => {
                let rule = Rule::compile(p, r, vars, next_regex)?;
                self.paths.push(d, rule)
            }
            ("proxy_cookie_flags", [name, flags @ ..]) if flags.len() <= 3 => {
                let cookie = match name.strip_prefix('~') {
                    Some(re) => CookieName::Regex(crate::rewrite::compile_regex(
                        re, true, vars, next_regex,
                    )?),
                    None => CookieName::Name(ComplexValue::compile(name, vars)?),
                };
                let flags = flags
                    .iter()
                    .map(|f| ComplexValue::compile(f, vars))
                    .collect::<Result<_, _>>()?;
                self.flags.push(d, FlagRule { cookie, flags })
            }
            _ => Err(format!(
                "invalid number of arguments in \"{}\" directive",
                d.name
            )),
        }
    }

    /// Inheritance: each directive not set here takes the parent's (which
    /// is already merged); `off` stops it.
    pub fn merge(&self, parent: &CookieConf) -> CookieConf {
        CookieConf {
            domains: self.domains.merge(&parent.domains),
            paths: self.paths.merge(&parent.paths),
            flags: self.flags.merge(&parent.flags),
        }
    }

    /// Whether `Set-Cookie` headers need [`CookieConf::rewrite`] at all
    /// (nginx sets `u->rewrite_cookie` only then).
    pub fn active(&self) -> bool {
        !self.domains.rules().is_empty()
            || !self.paths.rules().is_empty()
            || !self.flags.rules().is_empty()
    }

    /// `ngx_http_proxy_rewrite_cookie`: the new `Set-Cookie` value, or
    /// `None` to pass the upstream's as it is.
    pub fn rewrite(&self, value: &[u8], e: &mut Eval<'_>, r: &mut HttpRequest) -> Option<Vec<u8>> {
        let mut attrs = parse(value);
        // A first part without `=` is not a cookie nginx rewrites.
        attrs.first()?.value.as_ref()?;
        let mut changed = false;
        for a in attrs.iter_mut().skip(1) {
            let (Some(key), Some(v)) = (&a.key, &a.value) else {
                continue;
            };
            let rules = if key.eq_ignore_ascii_case(b"domain") {
                self.domains.rules()
            } else if key.eq_ignore_ascii_case(b"path") {
                self.paths.rules()
            } else {
                continue;
            };
            if let Some(new) = rules.iter().find_map(|rule| rule.apply(v, 0, e, r)) {
                a.value = Some(Cow::Owned(new));
                changed = true;
            }
        }
        if !self.flags.rules().is_empty() {
            let f = self.flags_for(&attrs, e, r);
            if f != 0 {
                edit_flags(&mut attrs, f);
                changed = true;
            }
        }
        changed.then(|| build(&attrs))
    }

    /// `ngx_http_proxy_rewrite_cookie_flags`: the flags of the first rule
    /// for this cookie's name (0: none, or none of its words known).
    fn flags_for(&self, attrs: &[Attr<'_>], e: &mut Eval<'_>, r: &mut HttpRequest) -> u16 {
        let name: &[u8] = attrs.first().and_then(|a| a.key.as_deref()).unwrap_or(b"");
        let mut buf = Vec::new();
        let mut caps = Captures::new();
        let mut regex_caps = false;
        let rule = self.flags.rules().iter().find(|rule| match &rule.cookie {
            CookieName::Regex(re) => {
                if !e.matches.exec(re, name, &mut caps) {
                    return false;
                }
                set_named(re, &caps, name, r);
                regex_caps = re.groups > 1;
                true
            }
            CookieName::Name(cv) => {
                buf.clear();
                let env = r.st.env(e.conf, None, e.now, e.unix_ms);
                cv.eval(&e.conf.vars, &mut r.vars, &env, &mut buf);
                buf.eq_ignore_ascii_case(name)
            }
        });
        let Some(rule) = rule else {
            return 0;
        };
        let base = r.st.env(e.conf, None, e.now, e.unix_ms);
        let env = if regex_caps {
            VarEnv {
                caps: &caps,
                cap_src: name,
                ..base
            }
        } else {
            base
        };
        let mut f = 0;
        for cv in &rule.flags {
            buf.clear();
            cv.eval(&e.conf.vars, &mut r.vars, &env, &mut buf);
            if buf.is_empty() {
                continue;
            }
            match flag::NAMES
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(&buf))
            {
                Some((_, bit)) => f |= bit,
                None => log::debug!(
                    "invalid proxy_cookie_flags flag \"{}\"",
                    String::from_utf8_lossy(&buf)
                ),
            }
        }
        f
    }
}

/// `proxy_cookie_domain D R`: `~REGEX` (caseless), or a domain whose
/// leading `.` is dropped from the pattern and the replacement.
fn domain_rule(
    p: &str,
    r: &str,
    vars: &mut Variables,
    next_regex: &mut usize,
) -> Result<Rule, String> {
    if let Some(re) = p.strip_prefix('~') {
        return Ok(Rule {
            pattern: Match::Regex(crate::rewrite::compile_regex(re, true, vars, next_regex)?),
            replacement: Text::Cv(ComplexValue::compile(r, vars)?),
        });
    }
    let p = p.strip_prefix('.').unwrap_or(p);
    let r = r.strip_prefix('.').unwrap_or(r);
    Ok(Rule {
        pattern: Match::Domain(ComplexValue::compile(p, vars)?),
        replacement: Text::Cv(ComplexValue::compile(r, vars)?),
    })
}

/// One `name[=value]` part of a cookie; a `None` key is a removed one.
#[derive(Debug)]
struct Attr<'v> {
    key: Option<Cow<'v, [u8]>>,
    value: Option<Cow<'v, [u8]>>,
}

/// `ngx_http_proxy_parse_cookie`: parts split at `;`, spaces (only) trimmed
/// around names and values.
fn parse(value: &[u8]) -> Vec<Attr<'_>> {
    value
        .split(|&b| b == b';')
        .map(|part| match part.iter().position(|&b| b == b'=') {
            Some(eq) => Attr {
                key: Some(Cow::Borrowed(trim(&part[..eq]))),
                value: Some(Cow::Borrowed(trim(&part[eq + 1..]))),
            },
            None => Attr {
                key: Some(Cow::Borrowed(trim(part))),
                value: None,
            },
        })
        .collect()
}

/// `ngx_http_proxy_edit_cookie_flags`: applies `f` to the attributes after
/// the first; flags still wanted are appended in nginx's order (Secure,
/// HttpOnly, SameSite).
fn edit_flags(attrs: &mut Vec<Attr<'_>>, mut f: u16) {
    use flag::*;
    for a in attrs.iter_mut().skip(1) {
        let Some(key) = &a.key else { continue };
        if key.eq_ignore_ascii_case(b"secure") {
            if f & SECURE_ON != 0 {
                f &= !SECURE_ON;
            } else if f & SECURE_OFF != 0 {
                a.key = None;
            }
        } else if key.eq_ignore_ascii_case(b"httponly") {
            if f & HTTPONLY_ON != 0 {
                f &= !HTTPONLY_ON;
            } else if f & HTTPONLY_OFF != 0 {
                a.key = None;
            }
        } else if key.eq_ignore_ascii_case(b"samesite") {
            let want = [
                (SAMESITE_STRICT, "Strict"),
                (SAMESITE_LAX, "Lax"),
                (SAMESITE_NONE, "None"),
            ]
            .into_iter()
            .find(|(bit, _)| f & bit != 0);
            if let Some((bit, word)) = want {
                f &= !bit;
                let same = a
                    .value
                    .as_deref()
                    .is_some_and(|v| v.eq_ignore_ascii_case(word.as_bytes()));
                if !same {
                    a.key = Some(Cow::Borrowed(b"SameSite"));
                    a.value = Some(Cow::Owned(word.as_bytes().to_vec()));
                }
            } else if f & SAMESITE_OFF != 0 {
                a.key = None;
            }
        }
    }
    let mut add = |key: &'static [u8], value: Option<&'static [u8]>| {
        attrs.push(Attr {
            key: Some(Cow::Borrowed(key)),
            value: value.map(Cow::Borrowed),
        })
    };
    if f & SECURE_ON != 0 {
        add(b"Secure", None);
    }
    if f & HTTPONLY_ON != 0 {
        add(b"HttpOnly", None);
    }
    if f & SAMESITE_STRICT != 0 {
        add(b"SameSite", Some(b"Strict"));
    } else if f & SAMESITE_LAX != 0 {
        add(b"SameSite", Some(b"Lax"));
    } else if f & SAMESITE_NONE != 0 {
        add(b"SameSite", Some(b"None"));
    }
}

/// Spaces (only spaces, as nginx) off both ends.
fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' '] = s {
        s = rest;
    }
    s
}

/// The rebuilt header: parts joined by `"; "`, removed ones skipped.
fn build(attrs: &[Attr<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, a) in attrs.iter().enumerate() {
        let Some(key) = &a.key else { continue };
        if i > 0 {
            out.extend_from_slice(b"; ");
        }
        out.extend_from_slice(key);
        if let Some(v) = &a.value {
            out.push(b'=');
            out.extend_from_slice(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! Expectations recorded from nginx 1.22.1 (Debian) proxying to a
    //! python backend that sent these `Set-Cookie` headers, with the
    //! configuration of [`site`].
    #![allow(clippy::unwrap_used)]

    use super::super::redirect::tests::{conf, dir, Fix};
    use super::*;

    /// The location nginx ran with:
    /// ```text
    /// proxy_cookie_domain localhost example.org;
    /// proxy_cookie_domain ~^(.+)\.internal$ $1.pub;
    /// proxy_cookie_domain .dot.test .other.test;
    /// proxy_cookie_path /two/ /one/;
    /// proxy_cookie_path ~*^/RE/(.*)$ /r/$1;
    /// proxy_cookie_flags a secure httponly samesite=strict;
    /// proxy_cookie_flags ~^n nosecure nohttponly nosamesite;
    /// proxy_cookie_flags l samesite=lax;
    /// proxy_cookie_flags $arg_c secure;
    /// ```
    const SITE: &[(&str, &[&str])] = &[
        ("proxy_cookie_domain", &["localhost", "example.org"]),
        ("proxy_cookie_domain", &[r"~^(.+)\.internal$", "$1.pub"]),
        ("proxy_cookie_domain", &[".dot.test", ".other.test"]),
        ("proxy_cookie_path", &["/two/", "/one/"]),
        ("proxy_cookie_path", &["~*^/RE/(.*)$", "/r/$1"]),
        (
            "proxy_cookie_flags",
            &["a", "secure", "httponly", "samesite=strict"],
        ),
        (
            "proxy_cookie_flags",
            &["~^n", "nosecure", "nohttponly", "nosamesite"],
        ),
        ("proxy_cookie_flags", &["l", "samesite=lax"]),
        ("proxy_cookie_flags", &["$arg_c", "secure"]),
    ];

    fn site(target: &str) -> (CookieConf, Fix) {
        let mut conf = conf();
        let mut cc = CookieConf::default();
        for (name, args) in SITE {
            cc.directive(&dir(name, args), &mut conf.vars, &mut conf.regexes)
                .unwrap();
        }
        let cc = cc.merge(&CookieConf::default());
        let raw = format!("GET {target} HTTP/1.1\r\nHost: example.org\r\n\r\n");
        (cc, Fix::new(conf, &raw))
    }

    fn check(target: &str, cases: &[(&str, &str)]) {
        let (cc, mut f) = site(target);
        assert!(cc.active());
        let (mut e, r) = f.eval();
        for (sent, seen) in cases {
            let got = cc
                .rewrite(sent.as_bytes(), &mut e, r)
                .map_or_else(|| sent.to_string(), |v| String::from_utf8(v).unwrap());
            assert_eq!(&got, seen, "Set-Cookie: {sent}");
        }
    }

    #[test]
    fn domain_and_path_rewrites_as_nginx() {
        check(
            "/one/x",
            &[
                (
                    "x=1; Domain=localhost; Path=/",
                    "x=1; Domain=example.org; Path=/",
                ),
                (
                    "x=2; domain=.LocalHost;path=/two/p",
                    "x=2; domain=.example.org; path=/one/p",
                ),
                (
                    "x=3;Domain=svc.internal ;  Path = /re/A ",
                    "x=3; Domain=svc.pub; Path=/r/A",
                ),
                ("x=4; Domain=dot.test", "x=4; Domain=other.test"),
                // Nothing to rewrite: the bytes pass unchanged.
                ("x=5;path=/zzz;   foo", "x=5;path=/zzz;   foo"),
                // No `=` in the first part: left alone.
                ("noeq; Domain=localhost", "noeq; Domain=localhost"),
                (";Domain=localhost", ";Domain=localhost"),
                (
                    "x=6; Domain=localhost; Domain=localhost",
                    "x=6; Domain=example.org; Domain=example.org",
                ),
                (" sp = v ; Path=/two/", "sp=v; Path=/one/"),
                ("x=7; Path", "x=7; Path"),
                (
                    "q=; Domain=localhost; ;x=y",
                    "q=; Domain=example.org; ; x=y",
                ),
            ],
        );
    }

    #[test]
    fn flags_as_nginx() {
        check(
            "/one/x",
            &[
                (
                    "a=1; Secure; SameSite=Lax",
                    "a=1; Secure; SameSite=Strict; HttpOnly",
                ),
                (
                    "A=2; secure; httponly; samesite=strict",
                    "A=2; secure; httponly; samesite=strict",
                ),
                (
                    "nn=3; Secure; HttpOnly; SameSite=None; Path=/q",
                    "nn=3; Path=/q",
                ),
                ("l=4", "l=4; SameSite=Lax"),
                ("l=5; samesite=LAX", "l=5; samesite=LAX"),
            ],
        );
        // The cookie's name from a variable: `proxy_cookie_flags $arg_c secure`.
        check(
            "/one/x?c=cc",
            &[("cc=1; Path=/", "cc=1; Path=/; Secure"), ("dd=1", "dd=1")],
        );
    }

    #[test]
    fn variables_in_patterns_and_conflicting_flags_as_nginx() {
        // nginx 1.22.1 with these rules, GET /one/x?d=ex.com&p=/pp/.
        let rules: &[(&str, &[&str])] = &[
            ("proxy_cookie_domain", &["$arg_d", "rep.$arg_d"]),
            ("proxy_cookie_path", &["~^/RE/(.*)$", "/r/$1"]),
            ("proxy_cookie_path", &["$arg_p", "/v/"]),
            ("proxy_cookie_flags", &["b", "secure", "nosecure"]),
            (
                "proxy_cookie_flags",
                &["c", "nosecure", "samesite=lax", "samesite=none"],
            ),
            ("proxy_cookie_flags", &["~^d", "httponly"]),
            ("proxy_cookie_flags", &["dd", "secure"]),
        ];
        let mut conf = conf();
        let mut cc = CookieConf::default();
        for (name, args) in rules {
            cc.directive(&dir(name, args), &mut conf.vars, &mut conf.regexes)
                .unwrap();
        }
        let mut f = Fix::new(
            conf,
            "GET /one/x?d=ex.com&p=/pp/ HTTP/1.1\r\nHost: example.org\r\n\r\n",
        );
        let (mut e, r) = f.eval();
        for (sent, seen) in [
            (
                "x=1; Domain=ex.com; Path=/re/A",
                "x=1; Domain=rep.ex.com; Path=/re/A",
            ),
            ("x=2; Path=/RE/A", "x=2; Path=/r/A"),
            ("x=3; Path=/pp/z", "x=3; Path=/v/z"),
            // `secure` wins over `nosecure`.
            ("b=1; Secure", "b=1; Secure"),
            ("b=2", "b=2; Secure"),
            // The first SameSite word rewrites the attribute, the next is added.
            (
                "c=1; secure; SameSite=Strict",
                "c=1; SameSite=Lax; SameSite=None",
            ),
            // The first rule whose name matches wins (`~^d` before `dd`).
            ("dd=1", "dd=1; HttpOnly"),
            ("e=1; Domain=EX.COM", "e=1; Domain=rep.ex.com"),
        ] {
            let got = cc
                .rewrite(sent.as_bytes(), &mut e, r)
                .map_or_else(|| sent.to_string(), |v| String::from_utf8(v).unwrap());
            assert_eq!(got, seen, "Set-Cookie: {sent}");
        }
    }

    #[test]
    fn flag_words_from_variables_and_unknown_words() {
        let mut conf = conf();
        let mut cc = CookieConf::default();
        for args in [&["s", "$arg_f", "bogus"][..], &["t", "NOSECURE"]] {
            cc.directive(
                &dir("proxy_cookie_flags", args),
                &mut conf.vars,
                &mut conf.regexes,
            )
            .unwrap();
        }
        let mut f = Fix::new(
            conf,
            "GET /?f=HttpOnly HTTP/1.1\r\nHost: example.org\r\n\r\n",
        );
        let (mut e, r) = f.eval();
        assert_eq!(
            cc.rewrite(b"s=1", &mut e, r).as_deref(),
            Some(&b"s=1; HttpOnly"[..])
        );
        assert_eq!(
            cc.rewrite(b"t=1;Secure", &mut e, r).as_deref(),
            Some(&b"t=1"[..])
        );
    }

    #[test]
    fn off_merge_and_errors() {
        let mut conf = conf();
        let mut err = |lines: &[(&str, &[&str])]| {
            let mut cc = CookieConf::default();
            let mut last = Ok(());
            for (n, a) in lines {
                last = cc.directive(&dir(n, a), &mut conf.vars, &mut conf.regexes);
                if last.is_err() {
                    break;
                }
            }
            last.unwrap_err()
        };
        // Texts as `nginx -t` 1.22.1 prints them.
        assert_eq!(
            err(&[
                ("proxy_cookie_flags", &["off"]),
                ("proxy_cookie_flags", &["off"])
            ]),
            "\"proxy_cookie_flags\" directive is duplicate"
        );
        assert_eq!(
            err(&[
                ("proxy_cookie_path", &["off"]),
                ("proxy_cookie_path", &["a", "b"])
            ]),
            "\"proxy_cookie_path\" directive is duplicate"
        );
        assert_eq!(
            err(&[
                ("proxy_cookie_domain", &["a", "b"]),
                ("proxy_cookie_domain", &["off"])
            ]),
            "\"proxy_cookie_domain\" directive is duplicate"
        );
        assert_eq!(
            err(&[("proxy_cookie_flags", &["one"])]),
            "invalid parameter \"one\""
        );
        assert_eq!(
            err(&[("proxy_cookie_domain", &["x"])]),
            "invalid parameter \"x\""
        );
        // The domain's regex is `~` only (always caseless): `~*` leaves a `*`.
        assert_eq!(
            err(&[("proxy_cookie_domain", &["~*x", "y"])]),
            "pcre2_compile() failed: quantifier does not follow a repeatable item in \"*x\" at \"*x\""
        );
        assert_eq!(
            err(&[("proxy_cookie_flags", &["~(x", "secure"])]),
            "pcre2_compile() failed: missing closing parenthesis in \"(x\""
        );

        // Merge: unset inherits, off stops.
        let mut parent = CookieConf::default();
        parent
            .directive(
                &dir("proxy_cookie_path", &["/a/", "/b/"]),
                &mut conf.vars,
                &mut conf.regexes,
            )
            .unwrap();
        let parent = parent.merge(&CookieConf::default());
        let child = CookieConf::default().merge(&parent);
        assert!(child.active());
        let mut off = CookieConf::default();
        off.directive(
            &dir("proxy_cookie_path", &["off"]),
            &mut conf.vars,
            &mut conf.regexes,
        )
        .unwrap();
        assert!(!off.merge(&parent).active());
        let mut f = Fix::new(conf, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let (mut e, r) = f.eval();
        assert_eq!(
            child.rewrite(b"k=v; path=/a/x", &mut e, r).as_deref(),
            Some(&b"k=v; path=/b/x"[..])
        );
    }
}
