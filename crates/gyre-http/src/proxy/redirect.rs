//! nginx's `proxy_redirect` (`ngx_http_proxy_redirect`,
//! `ngx_http_proxy_rewrite_redirect` and the rewrite handlers of
//! `ngx_http_proxy_module.c`): the rules that rewrite the `Location` and
//! `Refresh` headers of a proxied response, and the rule machinery
//! (`ngx_http_proxy_rewrite_t`) that `proxy_cookie_domain` and
//! `proxy_cookie_path` share ([`super::cookie`]).
//!
//! A rule is a pattern and a replacement:
//! - a prefix (a complex value, compared case-sensitively at the start of
//!   the header value or, in `Refresh`, after `url=`): the matched prefix is
//!   replaced, the rest kept;
//! - `~REGEX` / `~*REGEX` (caseless): matched against the same text; on a
//!   match the *whole* text is replaced (users write `~^http://a/(.*)$
//!   /$1`), the replacement reading the regex's captures;
//! - `default`: the prefix made from the location and `proxy_pass` URL, as
//!   nginx makes it: `proxy_pass http://b/uri/` in `location /loc/` gives
//!   `http://b/uri/` → `/loc/`; `proxy_pass http://b` gives `http://b/` →
//!   `/`.
//!
//! The first rule that matches wins; none matching leaves the header as
//! the upstream sent it. This module is sans-I/O: the proxy handler gives
//! it a header value and the request (for variables) and gets the new
//! value back. It does not own the rest of the proxy configuration.

use std::sync::Arc;

use gyre_core::conf::Directive;
use gyre_core::event::Msec;

use crate::complex_value::ComplexValue;
use crate::conf::HttpConf;
use crate::regex::{Captures, MatchCache, Regex};
use crate::request::HttpRequest;
use crate::variables::{VarCache, VarEnv, Variables};

/// What a rewrite needs besides the request: the configuration (its
/// variable registry), the worker's regex buffers and the clock, as the
/// rewrite module's [`crate::rewrite::Env`] has them.
pub struct Eval<'a> {
    pub conf: &'a HttpConf,
    pub matches: &'a mut MatchCache,
    pub now: Msec,
    pub unix_ms: u64,
}

/// A pattern or replacement: compiled from a directive argument, or a
/// literal nginx builds itself (the `default` rule, whose text is used as
/// is even when it contains `$`).
#[derive(Debug, Clone)]
pub(crate) enum Text {
    Lit(Arc<str>),
    Cv(ComplexValue),
}

impl Text {
    /// Evaluates into `out` (cleared first).
    fn eval(&self, env: &VarEnv<'_>, e: &Eval<'_>, cache: &mut VarCache, out: &mut Vec<u8>) {
        out.clear();
        match self {
            Text::Lit(s) => out.extend_from_slice(s.as_bytes()),
            Text::Cv(cv) => cv.eval(&e.conf.vars, cache, env, out),
        }
    }
}

/// How a rule finds what it replaces (nginx's rewrite handlers).
#[derive(Debug, Clone)]
pub(crate) enum Match {
    /// `ngx_http_proxy_rewrite_complex_handler`: a case-sensitive prefix.
    Prefix(Text),
    /// `ngx_http_proxy_rewrite_regex_handler`: the whole text, on a match.
    Regex(Arc<Regex>),
    /// `ngx_http_proxy_rewrite_domain_handler` (`proxy_cookie_domain`): the
    /// whole value, caselessly, a leading `.` of the value kept.
    Domain(ComplexValue),
}

/// One rule (nginx's `ngx_http_proxy_rewrite_t`).
#[derive(Debug, Clone)]
pub struct Rule {
    pub(crate) pattern: Match,
    pub(crate) replacement: Text,
}

impl Rule {
    /// `PATTERN REPLACEMENT` of `proxy_redirect` / `proxy_cookie_path`:
    /// `~` and `~*` make a regex, anything else a prefix.
    pub(crate) fn compile(
        pattern: &str,
        replacement: &str,
        vars: &mut Variables,
        next_regex: &mut usize,
    ) -> Result<Rule, String> {
        let pattern = match pattern.strip_prefix('~') {
            Some(re) => {
                let (re, caseless) = match re.strip_prefix('*') {
                    Some(re) => (re, true),
                    None => (re, false),
                };
                Match::Regex(crate::rewrite::compile_regex(
                    re, caseless, vars, next_regex,
                )?)
            }
            None => Match::Prefix(Text::Cv(ComplexValue::compile(pattern, vars)?)),
        };
        Ok(Rule {
            pattern,
            replacement: Text::Cv(ComplexValue::compile(replacement, vars)?),
        })
    }

    /// Applies the rule to `value[prefix..]`; `None` is nginx's
    /// NGX_DECLINED (no match), `Some` the rewritten whole value.
    pub(crate) fn apply(
        &self,
        value: &[u8],
        prefix: usize,
        e: &mut Eval<'_>,
        r: &mut HttpRequest,
    ) -> Option<Vec<u8>> {
        let rest = value.get(prefix..)?;
        let mut buf = Vec::new();
        match &self.pattern {
            Match::Prefix(p) => {
                let env = r.st.env(e.conf, None, e.now, e.unix_ms);
                p.eval(&env, e, &mut r.vars, &mut buf);
                if !rest.starts_with(&buf) {
                    return None;
                }
                let len = buf.len();
                self.replacement.eval(&env, e, &mut r.vars, &mut buf);
                Some(splice(value, prefix, len, &buf))
            }
            Match::Regex(re) => {
                let mut caps = Captures::new();
                if !e.matches.exec(re, rest, &mut caps) {
                    return None;
                }
                set_named(re, &caps, rest, r);
                let base = r.st.env(e.conf, None, e.now, e.unix_ms);
                // A regex without groups leaves the request's captures as
                // they were (ngx_http_regex_exec sets them only when the
                // regex has some), so `$1` still reads the location's.
                let env = if re.groups > 1 {
                    VarEnv {
                        caps: &caps,
                        cap_src: rest,
                        ..base
                    }
                } else {
                    base
                };
                self.replacement.eval(&env, e, &mut r.vars, &mut buf);
                Some(splice(value, prefix, rest.len(), &buf))
            }
            Match::Domain(p) => {
                let env = r.st.env(e.conf, None, e.now, e.unix_ms);
                buf.clear();
                p.eval(&e.conf.vars, &mut r.vars, &env, &mut buf);
                let (prefix, rest) = match rest.first() {
                    Some(b'.') => (prefix + 1, &rest[1..]),
                    _ => (prefix, rest),
                };
                if !rest.eq_ignore_ascii_case(&buf) {
                    return None;
                }
                self.replacement.eval(&env, e, &mut r.vars, &mut buf);
                Some(splice(value, prefix, rest.len(), &buf))
            }
        }
    }
}

/// Named captures become variables when their regex matches (as the
/// rewrite module's [`crate::rewrite::set_named`], on another subject).
pub(crate) fn set_named(re: &Regex, caps: &Captures, subject: &[u8], r: &mut HttpRequest) {
    for &(var, group) in &re.name_vars {
        let v = match caps.get(group) {
            Some(&(s, e)) => subject.get(s..e).unwrap_or(&[]),
            None => &[],
        };
        r.vars.set(var, v);
    }
}

/// `ngx_http_proxy_rewrite`: `value` with `len` bytes at `prefix` replaced.
fn splice(value: &[u8], prefix: usize, len: usize, replacement: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() - len + replacement.len());
    out.extend_from_slice(&value[..prefix]);
    out.extend_from_slice(replacement);
    out.extend_from_slice(&value[prefix + len..]);
    out
}

/// The location's `proxy_pass`, as `proxy_redirect default` needs it at the
/// time the directive is read (nginx requires `default` to come after
/// `proxy_pass`) and when the location is merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass<'a> {
    /// No `proxy_pass` (yet) in this location.
    None,
    /// `proxy_pass` with variables: no default rule.
    Variables,
    /// A static `proxy_pass`.
    Url {
        /// The argument as written (`http://127.0.0.1:8080/app/`).
        url: &'a str,
        /// It has a URI part (`/app/`, even just `/`): nginx's
        /// `plcf->vars.uri.len != 0`.
        uri: bool,
        /// nginx's `plcf->location`: the location's name (the prefix or the
        /// exact-match URI, without modifiers), empty in regex and named
        /// locations and inside `if` / `limit_except`.
        location: &'a str,
    },
}

impl Pass<'_> {
    /// nginx's default rule for this `proxy_pass`.
    fn default_rule(&self) -> Option<Rule> {
        let Pass::Url { url, uri, location } = *self else {
            return None;
        };
        let (pattern, replacement) = if uri {
            (url.to_string(), location.to_string())
        } else {
            (format!("{url}/"), "/".to_string())
        };
        Some(Rule {
            pattern: Match::Prefix(Text::Lit(pattern.into())),
            replacement: Text::Lit(replacement.into()),
        })
    }
}

/// One level's `proxy_redirect` settings (nginx's `plcf->redirect` and
/// `plcf->redirects`); after [`RedirectConf::merge`], what a location uses.
#[derive(Debug, Clone, Default)]
pub struct RedirectConf {
    /// `None`: not set here; `Some(false)`: `proxy_redirect off`.
    on: Option<bool>,
    rules: Option<Arc<Vec<Rule>>>,
}

impl RedirectConf {
    /// The setter of `proxy_redirect` (one or two arguments; the directive
    /// repeats). `pass` is what `proxy_pass` said so far in this block.
    pub fn directive(
        &mut self,
        d: &Directive,
        pass: &Pass<'_>,
        vars: &mut Variables,
        next_regex: &mut usize,
    ) -> Result<(), String> {
        if self.on == Some(false) {
            return Err(d.error("is duplicate"));
        }
        self.on = Some(true);
        let rule = match d.args.as_slice() {
            [a] if a == "off" => {
                if self.rules.is_some() {
                    return Err(d.error("is duplicate"));
                }
                self.on = Some(false);
                return Ok(());
            }
            [a] if a == "default" => match pass {
                Pass::Variables => {
                    return Err("\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with variables".into())
                }
                Pass::None => {
                    return Err("\"proxy_redirect default\" should be placed after the \"proxy_pass\" directive".into())
                }
                Pass::Url { .. } => pass.default_rule().ok_or("no proxy_pass")?,
            },
            [a] => return Err(format!("invalid parameter \"{a}\"")),
            [p, r] => Rule::compile(p, r, vars, next_regex)?,
            _ => return Err(format!("invalid number of arguments in \"{}\" directive", d.name)),
        };
        let rules = self.rules.get_or_insert_with(Default::default);
        Arc::make_mut(rules).push(rule);
        Ok(())
    }

    /// nginx's merge of a location's settings over its parent's (`parent`
    /// already merged): `off` and rules inherit when not set here; with
    /// neither, a location with a static `proxy_pass` gets the default
    /// rule. (A nested location inherits its parent's rules, default
    /// included, before its own `proxy_pass` is considered — as nginx.)
    pub fn merge(&self, parent: &RedirectConf, pass: &Pass<'_>) -> RedirectConf {
        let on = self.on.or(parent.on).unwrap_or(true);
        if !on {
            return RedirectConf {
                on: Some(false),
                rules: None,
            };
        }
        let rules = self
            .rules
            .clone()
            .or_else(|| parent.rules.clone())
            .or_else(|| pass.default_rule().map(|r| Arc::new(vec![r])));
        RedirectConf {
            on: Some(true),
            rules,
        }
    }

    /// Whether the proxy should rewrite at all (nginx sets
    /// `u->rewrite_redirect` only then). When not, the upstream's
    /// `Location` passes unchanged and is not made absolute.
    pub fn active(&self) -> bool {
        self.on != Some(false) && self.rules.as_ref().is_some_and(|r| !r.is_empty())
    }

    fn rules(&self) -> &[Rule] {
        match (&self.on, &self.rules) {
            (Some(false), _) | (_, None) => &[],
            (_, Some(r)) => r,
        }
    }

    /// `ngx_http_upstream_rewrite_location`: the rewritten `Location`, or
    /// `None` to pass the upstream's value as it is. A rewritten value
    /// becomes the response's location proper, so one starting with `/`
    /// gets scheme and host under `absolute_redirect on`, as nginx's header
    /// filter adds them; an unchanged one does not.
    pub fn rewrite_location(
        &self,
        value: &[u8],
        e: &mut Eval<'_>,
        r: &mut HttpRequest,
    ) -> Option<Vec<u8>> {
        self.rewrite(value, 0, e, r)
    }

    /// `ngx_http_upstream_rewrite_refresh`: the rules apply to what follows
    /// the first `url=` (any case); without one the header passes as is.
    pub fn rewrite_refresh(
        &self,
        value: &[u8],
        e: &mut Eval<'_>,
        r: &mut HttpRequest,
    ) -> Option<Vec<u8>> {
        let at = value
            .windows(4)
            .position(|w| w.eq_ignore_ascii_case(b"url="))?;
        self.rewrite(value, at + 4, e, r)
    }

    fn rewrite(
        &self,
        value: &[u8],
        prefix: usize,
        e: &mut Eval<'_>,
        r: &mut HttpRequest,
    ) -> Option<Vec<u8>> {
        self.rules()
            .iter()
            .find_map(|rule| rule.apply(value, prefix, e, r))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Expectations recorded from nginx 1.22.1 proxying to a backend that
    //! answers with the Location / Refresh it is asked for.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::conn::{Connection, Event};
    use crate::settings::HttpSettings;
    use crate::variables::ConnInfo;

    /// A configuration with one server and its variables, and a request
    /// for `target` on it.
    pub(crate) struct Fix {
        pub conf: HttpConf,
        pub r: HttpRequest,
        pub mc: MatchCache,
    }

    pub(crate) fn conf() -> HttpConf {
        let text = "events {}\nhttp { access_log off; server { listen 127.0.0.1:1; server_name example.org; } }\n";
        let cf = gyre_core::conf::load_str(
            text,
            "conf/gyre.conf".as_ref(),
            &std::env::temp_dir(),
            None,
            &[&crate::conf::HTTP_MODULE],
        )
        .unwrap();
        cf.module::<HttpConf>().unwrap().clone()
    }

    impl Fix {
        pub(crate) fn new(mut conf: HttpConf, raw: &str) -> Fix {
            conf.vars.resolve().unwrap();
            let mut m = Connection::new(HttpSettings::default(), 0);
            m.on_read(raw.as_bytes(), 0);
            let Some(Event::Request(req)) = m.poll(0, "D") else {
                panic!("no request")
            };
            let loc = HttpConf::server_loc(&conf.servers[0]).clone();
            let mut r = HttpRequest::new(req, 0, loc, ConnInfo::default(), 0);
            r.reset_vars(&conf);
            Fix {
                conf,
                r,
                mc: MatchCache::default(),
            }
        }

        pub(crate) fn eval(&mut self) -> (Eval<'_>, &mut HttpRequest) {
            (
                Eval {
                    conf: &self.conf,
                    matches: &mut self.mc,
                    now: 0,
                    unix_ms: 0,
                },
                &mut self.r,
            )
        }
    }

    pub(crate) fn dir(name: &str, args: &[&str]) -> Directive {
        Directive {
            name: name.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            block: None,
            location: gyre_core::conf::Location::CommandLine,
        }
    }

    const GET: &str = "GET /one/x HTTP/1.1\r\nHost: example.org\r\n\r\n";

    /// Reads `lines` of `proxy_redirect` arguments into a location with
    /// `pass`, merges it over an unset parent, and rewrites `location`.
    fn run(pass: Pass<'_>, lines: &[&[&str]], location: &str) -> Option<String> {
        let mut conf = conf();
        let mut rc = RedirectConf::default();
        for args in lines {
            rc.directive(
                &dir("proxy_redirect", args),
                &pass,
                &mut conf.vars,
                &mut conf.regexes,
            )
            .unwrap();
        }
        let merged = rc.merge(&RedirectConf::default(), &pass);
        let mut f = Fix::new(conf, GET);
        let (mut e, r) = f.eval();
        merged
            .rewrite_location(location.as_bytes(), &mut e, r)
            .map(|v| String::from_utf8(v).unwrap())
    }

    const URI: Pass<'static> = Pass::Url {
        url: "http://127.0.0.1:18571/two/",
        uri: true,
        location: "/one/",
    };
    const NO_URI: Pass<'static> = Pass::Url {
        url: "http://127.0.0.1:18571",
        uri: false,
        location: "/one/",
    };

    #[test]
    fn default_from_location_and_uri_part() {
        // nginx: location /one/ { proxy_pass http://127.0.0.1:18571/two/; }
        // Location http://127.0.0.1:18571/two/y → /one/y (then made absolute).
        assert_eq!(
            run(URI, &[], "http://127.0.0.1:18571/two/y").as_deref(),
            Some("/one/y")
        );
        assert_eq!(run(URI, &[], "http://127.0.0.1:18571/three"), None);
        // A relative one no rule matches passes as sent: nginx answers
        // `Location: /rel`, not made absolute (the handler must not put an
        // unrewritten value where absolute_redirect applies).
        assert_eq!(run(URI, &[], "/rel"), None);
        // Explicit `default` is the same rule.
        assert_eq!(
            run(URI, &[&["default"]], "http://127.0.0.1:18571/two/").as_deref(),
            Some("/one/")
        );
        // Without a URI part: URL + "/" → "/".
        assert_eq!(
            run(NO_URI, &[], "http://127.0.0.1:18571/a/b?c").as_deref(),
            Some("/a/b?c")
        );
        // The prefix is case-sensitive (ngx_rstrncmp).
        assert_eq!(run(NO_URI, &[], "HTTP://127.0.0.1:18571/a"), None);
        // A location given by regex has an empty name: the URI part maps
        // to "" (nginx allows no URI part there, so this is the `if` case).
        let re = Pass::Url {
            url: "http://b:1/x/",
            uri: true,
            location: "",
        };
        assert_eq!(run(re, &[], "http://b:1/x/y").as_deref(), Some("y"));
    }

    #[test]
    fn no_default_with_variables_or_without_proxy_pass_or_when_off() {
        assert_eq!(run(Pass::Variables, &[], "http://b/x"), None);
        assert_eq!(run(Pass::None, &[], "http://b/x"), None);
        assert_eq!(run(URI, &[&["off"]], "http://127.0.0.1:18571/two/"), None);
        let on = RedirectConf::default()
            .merge(&RedirectConf::default(), &URI)
            .active();
        assert!(on);
    }

    #[test]
    fn explicit_prefix_rules_in_order_with_variables() {
        let rules: &[&[&str]] = &[
            &["http://other/", "/o/"],
            &["http://$host/", "/h/"],
            &["http://127.0.0.1:18571/", "http://$host/$host/"],
        ];
        assert_eq!(
            run(URI, rules, "http://example.org/p").as_deref(),
            Some("/h/p")
        );
        assert_eq!(
            run(URI, rules, "http://127.0.0.1:18571/p").as_deref(),
            Some("http://example.org/example.org/p")
        );
        // Explicit rules replace the default.
        assert_eq!(run(URI, rules, "http://127.0.0.1:18571").as_deref(), None);
        // `default` among others keeps its place in the order.
        let mixed: &[&[&str]] = &[&["default"], &["http://127.0.0.1:18571/", "/z/"]];
        assert_eq!(
            run(URI, mixed, "http://127.0.0.1:18571/two/a").as_deref(),
            Some("/one/a")
        );
        assert_eq!(
            run(URI, mixed, "http://127.0.0.1:18571/q").as_deref(),
            Some("/z/q")
        );
    }

    #[test]
    fn regex_rules_replace_the_whole_value_with_captures() {
        // nginx: proxy_redirect ~^http://[^/]+(/.*)$ /re$1;
        let rules: &[&[&str]] = &[&["~^http://[^/]+(/.*)$", "/re$1"]];
        assert_eq!(
            run(URI, rules, "http://b:9/x/y?z").as_deref(),
            Some("/re/x/y?z")
        );
        // A partial match still replaces everything.
        let partial: &[&[&str]] = &[&["~two", "/X"]];
        assert_eq!(
            run(URI, partial, "http://127.0.0.1:18571/two/y").as_deref(),
            Some("/X")
        );
        // ~ is case-sensitive, ~* is not.
        let cs: &[&[&str]] = &[&["~^HTTP://(.*)", "/cs/$1"]];
        assert_eq!(run(URI, cs, "http://a/b"), None);
        let ci: &[&[&str]] = &[&["~*^HTTP://(.*)", "/ci/$1"]];
        assert_eq!(run(URI, ci, "http://a/b").as_deref(), Some("/ci/a/b"));
        // Named captures are variables.
        let named: &[&[&str]] = &[&["~^http://(?<h>[^/]+)/", "/n/$h"]];
        assert_eq!(run(URI, named, "http://hh/rest").as_deref(), Some("/n/hh"));
    }

    #[test]
    fn refresh_rewrites_after_url() {
        let mut conf = conf();
        let mut rc = RedirectConf::default();
        rc.directive(
            &dir("proxy_redirect", &["default"]),
            &URI,
            &mut conf.vars,
            &mut conf.regexes,
        )
        .unwrap();
        let rc = rc.merge(&RedirectConf::default(), &URI);
        let mut f = Fix::new(conf, GET);
        let (mut e, r) = f.eval();
        // nginx: "Refresh: 5; URL=http://127.0.0.1:18571/two/z" → "5; URL=/one/z".
        let v = rc.rewrite_refresh(b"5; URL=http://127.0.0.1:18571/two/z", &mut e, r);
        assert_eq!(v.as_deref(), Some(&b"5; URL=/one/z"[..]));
        assert_eq!(
            rc.rewrite_refresh(b"5; http://127.0.0.1:18571/two/z", &mut e, r),
            None
        );
        // The rules look only after `url=`.
        assert_eq!(
            rc.rewrite_refresh(b"http://127.0.0.1:18571/two/; url=/x", &mut e, r),
            None
        );
    }

    #[test]
    fn directive_errors_are_nginx_texts() {
        let mut conf = conf();
        let mut err = |pass: Pass<'_>, lines: &[&[&str]]| {
            let mut rc = RedirectConf::default();
            let mut last = Ok(());
            for a in lines {
                last = rc.directive(
                    &dir("proxy_redirect", a),
                    &pass,
                    &mut conf.vars,
                    &mut conf.regexes,
                );
                if last.is_err() {
                    break;
                }
            }
            last.unwrap_err()
        };
        // Each text as `nginx -t` 1.22.1 prints it.
        assert_eq!(
            err(Pass::None, &[&["default"]]),
            "\"proxy_redirect default\" should be placed after the \"proxy_pass\" directive"
        );
        assert_eq!(
            err(Pass::Variables, &[&["default"]]),
            "\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with variables"
        );
        let dup = "\"proxy_redirect\" directive is duplicate";
        assert_eq!(err(URI, &[&["off"], &["off"]]), dup);
        assert_eq!(err(URI, &[&["a", "b"], &["off"]]), dup);
        assert_eq!(err(URI, &[&["off"], &["a", "b"]]), dup);
        assert_eq!(err(URI, &[&["foo"]]), "invalid parameter \"foo\"");
        assert_eq!(
            err(URI, &[&["~(a", "b"]]),
            "pcre2_compile() failed: missing closing parenthesis in \"(a\""
        );
    }

    #[test]
    fn merge_inherits_rules_and_off() {
        let mut conf = conf();
        let mut outer = RedirectConf::default();
        outer
            .directive(
                &dir("proxy_redirect", &["http://x/", "/y/"]),
                &Pass::None,
                &mut conf.vars,
                &mut conf.regexes,
            )
            .unwrap();
        let outer = outer.merge(&RedirectConf::default(), &Pass::None);
        // A location below with its own proxy_pass inherits the rules, not
        // a default.
        let inner = RedirectConf::default().merge(&outer, &URI);
        let mut f = Fix::new(conf.clone(), GET);
        let (mut e, r) = f.eval();
        assert_eq!(
            inner.rewrite_location(b"http://x/1", &mut e, r).as_deref(),
            Some(&b"/y/1"[..])
        );
        assert_eq!(
            inner.rewrite_location(b"http://127.0.0.1:18571/two/", &mut e, r),
            None
        );
        // `off` above turns the default off below.
        let mut off = RedirectConf::default();
        off.directive(
            &dir("proxy_redirect", &["off"]),
            &Pass::None,
            &mut conf.vars,
            &mut conf.regexes,
        )
        .unwrap();
        let off = off.merge(&RedirectConf::default(), &Pass::None);
        let below = RedirectConf::default().merge(&off, &URI);
        assert!(!below.active());
    }
}
