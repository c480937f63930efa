//! `allow` / `deny` (nginx's `ngx_http_access_module`) and `satisfy`: the
//! rules of a level, their inheritance, and the check the access phase
//! runs for a client address.
//!
//! As nginx keeps them, the rules are three lists, one per address family
//! (IPv4, IPv6, `unix:`); `all` goes into each. A client is checked against
//! its family's list only, first match wins, and no match lets it through
//! (so `deny 10.0.0.0/8; allow ::1; deny all;` still denies an IPv4 client
//! that is not in 10/8 only through `deny all`). An IPv4-mapped IPv6 client
//! (`::ffff:a.b.c.d`) is checked as the IPv4 address. A level with any rule
//! of its own replaces the outer level's rules (nginx merges the arrays
//! only when all three are unset).

use std::net::IpAddr;
use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};

use crate::auth_basic::Verdict;
use crate::conf::{HttpConf, LocConf};
use crate::phases::{Ctx, Step};
use crate::request::HttpRequest;
use crate::response::Response;

/// One `allow`/`deny` rule of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The network, already masked.
    addr: u128,
    mask: u128,
    deny: bool,
}

impl Rule {
    fn matches(&self, a: u128) -> bool {
        a & self.mask == self.addr
    }
}

/// The rules of one level (after inheritance: the innermost level that has
/// any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub v4: Vec<Rule>,
    pub v6: Vec<Rule>,
    /// `unix:` rules: only whether each allows or denies.
    pub un: Vec<bool>,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty() && self.un.is_empty()
    }

    /// The first matching rule's verdict for a client (`None` for a
    /// connection over a unix socket): `Some(true)` denied, `Some(false)`
    /// allowed, `None` when no rule matches (nginx's `NGX_DECLINED`).
    pub fn check(&self, peer: Option<IpAddr>) -> Option<bool> {
        let first = |rules: &[Rule], a: u128| rules.iter().find(|r| r.matches(a)).map(|r| r.deny);
        match peer {
            Some(IpAddr::V4(a)) => first(&self.v4, u128::from(u32::from(a))),
            Some(IpAddr::V6(a)) => match a.to_ipv4_mapped() {
                Some(v4) => first(&self.v4, u128::from(u32::from(v4))),
                None => first(&self.v6, u128::from(a)),
            },
            None => self.un.first().copied(),
        }
    }
}

/// `satisfy all|any` (nginx's default `all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Satisfy {
    #[default]
    All,
    Any,
}

/// What a request's access checks conclude (nginx's `ngx_http_core_access_phase`
/// and post-access): each access handler's answer is `None` (declined),
/// `Some(Ok)` or `Some(Err(status))`.
pub fn combine(satisfy: Satisfy, answers: &[Option<Result<(), u16>>]) -> Result<(), u16> {
    match satisfy {
        Satisfy::All => {
            for a in answers.iter().flatten() {
                a.as_ref().map_err(|c| *c)?;
            }
            Ok(())
        }
        Satisfy::Any => {
            let mut code = 0;
            for a in answers.iter().flatten() {
                match a {
                    Ok(()) => return Ok(()),
                    // A 401 sticks: the client can still authenticate.
                    Err(c) if code != 401 => code = *c,
                    Err(_) => {}
                }
            }
            if code == 0 {
                Ok(())
            } else {
                Err(code)
            }
        }
    }
}

/// `low address bits of … are meaningless` is nginx's warning (the rule
/// is kept, masked); anything else is `invalid parameter`.
fn parse_cidr(s: &str) -> Result<(IpAddr, u8, bool), ()> {
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => {
            if l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()) {
                return Err(());
            }
            (a, Some(l.parse::<u8>().map_err(|_| ())?))
        }
        None => (s, None),
    };
    let ip: IpAddr = a.parse().map_err(|_| ())?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    if len > max {
        return Err(());
    }
    let (bits, mask) = bits_mask(ip, len);
    Ok((ip, len, bits & !mask != 0))
}

fn bits_mask(ip: IpAddr, len: u8) -> (u128, u128) {
    match ip {
        IpAddr::V4(a) => {
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            (u128::from(u32::from(a)), u128::from(m))
        }
        IpAddr::V6(a) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len))
            };
            (u128::from(a), m)
        }
    }
}

/// Adds one `allow`/`deny` argument to `rules`.
pub fn add_rule(rules: &mut Rules, arg: &str, deny: bool, d: &Directive) -> Result<(), String> {
    let all = arg == "all";
    if all || arg == "unix:" {
        rules.un.push(deny);
    }
    if all {
        rules.v4.push(Rule {
            addr: 0,
            mask: 0,
            deny,
        });
        rules.v6.push(Rule {
            addr: 0,
            mask: 0,
            deny,
        });
        return Ok(());
    }
    if arg == "unix:" {
        return Ok(());
    }
    let (ip, len, low_bits) =
        parse_cidr(arg).map_err(|_| format!("invalid parameter \"{arg}\""))?;
    if low_bits {
        log::warn!("low address bits of {arg} are meaningless {}", d.location);
    }
    let (bits, mask) = bits_mask(ip, len);
    let rule = Rule {
        addr: bits & mask,
        mask,
        deny,
    };
    match ip {
        IpAddr::V4(_) => rules.v4.push(rule),
        IpAddr::V6(_) => rules.v6.push(rule),
    }
    Ok(())
}

/// `allow ADDRESS|CIDR|unix:|all` and `deny …`.
pub fn set_rule(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let deny = d.name == "deny";
    let s = c.settings(cx)?;
    let mut rules = s
        .access
        .take()
        .map(Arc::unwrap_or_clone)
        .unwrap_or_default();
    let r = add_rule(&mut rules, d.arg(0), deny, d);
    s.access = Some(Arc::new(rules));
    r
}

/// `satisfy all|any`.
pub fn set_satisfy(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = match d.arg(0) {
        "all" => Satisfy::All,
        "any" => Satisfy::Any,
        // nginx's enum slot says no more than this.
        a => return Err(format!("invalid value \"{a}\"")),
    };
    c.settings(cx)?.satisfy = Some(v);
    Ok(())
}

/// The access module's answer for a request (`None`: no rule matched, or
/// no rules). A denial under `satisfy all` is logged here, as nginx's
/// `ngx_http_access_found` does; under `any` only if nothing else allows
/// (the phase logs it then).
pub fn answer(rules: &Rules, peer: Option<IpAddr>) -> Option<Result<(), u16>> {
    match rules.check(peer)? {
        true => Some(Err(403)),
        false => Some(Ok(())),
    }
}

/// Whether a location has anything for the access phase to check.
pub fn has_checks(l: &LocConf) -> bool {
    l.access.as_ref().is_some_and(|r| !r.is_empty())
        || (l.auth_basic.is_some() && l.auth_basic_user_file.is_some())
}

/// The access phase handler (nginx's `ngx_http_core_access_phase` with
/// post-access): the access module's and auth_basic's answers, in nginx's
/// order, combined under `satisfy`.
pub fn phase(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response) -> Step {
    let loc = r.st.loc.clone();
    let peer = r.st.conn.peer.map(|p| p.ip());
    let by_rule = loc.access.as_ref().and_then(|rules| answer(rules, peer));
    // Under `satisfy all` a denial ends the phase before auth_basic runs;
    // under `any` an allowing rule does.
    let mut realm = None;
    let decided = match loc.satisfy {
        Satisfy::All => matches!(by_rule, Some(Err(_))),
        Satisfy::Any => by_rule == Some(Ok(())),
    };
    let by_auth = if decided {
        None
    } else {
        match (&loc.auth_basic, &loc.auth_basic_user_file) {
            (Some(realm_cv), Some(file_cv)) => {
                let mut rv = Vec::new();
                let mut file = Vec::new();
                {
                    let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
                    realm_cv.eval(&cx.conf.vars, &mut r.vars, &env, &mut rv);
                    if rv != b"off" {
                        file_cv.eval(&cx.conf.vars, &mut r.vars, &env, &mut file);
                    }
                }
                match crate::auth_basic::check(
                    &crate::log_error::req(cx.conf, r),
                    &r.st.req,
                    rv,
                    &file,
                ) {
                    Verdict::Declined => None,
                    Verdict::Ok => Some(Ok(())),
                    Verdict::Challenge(rv) => {
                        realm = Some(rv);
                        Some(Err(401))
                    }
                    Verdict::Status(c) => Some(Err(c)),
                }
            }
            _ => None,
        }
    };
    match combine(loc.satisfy, &[by_rule, by_auth]) {
        Ok(()) => Step::Next,
        Err(403) if by_rule == Some(Err(403)) => {
            gyre_core::log_ctx!(
                gyre_core::errlog::ERROR,
                &crate::log_error::req(cx.conf, r),
                "access forbidden by rule"
            );
            Step::Error(403)
        }
        Err(401) => {
            out.set_error(401);
            let v = crate::auth_basic::challenge_value(realm.as_deref().unwrap_or_default());
            out.headers.push(("WWW-Authenticate".into(), v.into()));
            Step::Respond
        }
        Err(code) => Step::Error(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[(&str, bool)]) -> Rules {
        let d = Directive {
            name: "allow".into(),
            args: vec![],
            block: None,
            location: gyre_core::conf::Location::CommandLine,
        };
        let mut r = Rules::default();
        for (a, deny) in list {
            add_rule(&mut r, a, *deny, &d).unwrap();
        }
        r
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn first_match_wins_per_family() {
        let r = rules(&[
            ("127.0.0.2", true),
            ("127.0.0.0/8", false),
            ("::1", true),
            ("all", true),
        ]);
        assert_eq!(r.check(ip("127.0.0.2")), Some(true));
        assert_eq!(r.check(ip("127.0.0.1")), Some(false));
        assert_eq!(r.check(ip("10.1.2.3")), Some(true));
        assert_eq!(r.check(ip("::1")), Some(true));
        assert_eq!(r.check(ip("::ffff:127.0.0.1")), Some(false));
        assert_eq!(r.check(None), Some(true));
        // No rule of the family: declined.
        let r = rules(&[("10.0.0.0/8", true)]);
        assert_eq!(r.check(ip("::1")), None);
        assert_eq!(r.check(ip("11.0.0.1")), None);
        assert_eq!(r.check(None), None);
    }

    #[test]
    fn cidrs() {
        assert!(parse_cidr("10.0.0.0/8").is_ok_and(|x| !x.2));
        assert!(parse_cidr("10.0.0.1/8").is_ok_and(|x| x.2));
        assert!(parse_cidr("0.0.0.0/0").is_ok());
        assert!(parse_cidr("10.0.0.0/33").is_err());
        assert!(parse_cidr("10.0.0.0/").is_err());
        assert!(parse_cidr("10.0.0/8").is_err());
        assert!(parse_cidr("2001:db8::/32").is_ok_and(|x| !x.2));
        assert!(parse_cidr("2001:db8::1/129").is_err());
        // Low bits are masked off, as nginx keeps such a rule.
        let r = rules(&[("10.0.0.1/8", true)]);
        assert_eq!(r.check(ip("10.200.0.1")), Some(true));
        let r = rules(&[("2001:db8::/32", true)]);
        assert_eq!(r.check(ip("2001:db8:1::5")), Some(true));
        assert_eq!(r.check(ip("2001:db9::5")), None);
    }

    #[test]
    fn satisfy() {
        use Satisfy::*;
        assert_eq!(combine(All, &[None, None]), Ok(()));
        assert_eq!(combine(All, &[Some(Ok(())), Some(Err(401))]), Err(401));
        assert_eq!(combine(All, &[Some(Err(403)), Some(Ok(()))]), Err(403));
        assert_eq!(combine(Any, &[Some(Err(403)), Some(Ok(()))]), Ok(()));
        assert_eq!(combine(Any, &[Some(Err(403)), Some(Err(401))]), Err(401));
        assert_eq!(combine(Any, &[Some(Err(401)), Some(Err(403))]), Err(401));
        assert_eq!(combine(Any, &[Some(Err(403)), None]), Err(403));
        assert_eq!(combine(Any, &[None, None]), Ok(()));
    }
}
