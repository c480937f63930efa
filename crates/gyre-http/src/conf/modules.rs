//! Directive setters of the smaller nginx modules the http block has:
//! the core's `try_files`, `internal`, `limit_rate`; the headers filter's
//! `expires`; the not-modified filter's `etag` and `if_modified_since`;
//! `charset`; `autoindex`; and the variable-making blocks `map`,
//! `split_clients` and `geo`; and `location`, `error_page`, `add_header`,
//! `open_file_cache`.

use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};

use super::{
    level, ErrorPage, Expires, HttpConf, IfModifiedSince, Level, LocKind, LocSettings, Location,
    TryFiles, TryLast, DEFAULT_OPEN_FILE_CACHE,
};
use crate::complex_value::ComplexValue;
use crate::rewrite;

pub(super) fn set_expires(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    if let [a] = d.args.as_slice() {
        if a.contains('$') {
            let cv = ComplexValue::compile(a, &mut c.vars)?;
            let s = c.settings(cx)?;
            s.expires = Some(Expires::Off);
            s.expires_cv = Some(cv);
            return Ok(());
        }
    }
    let e = parse_expires(&d.args)
        .map_err(|e| e.unwrap_or_else(|| format!("invalid value \"{}\"", d.args.join(" "))))?;
    let s = c.settings(cx)?;
    s.expires = Some(e);
    s.expires_cv = None;
    Ok(())
}

/// `expires`'s value (nginx's `ngx_http_parse_expires`), also for a value
/// made from variables at response time. `Err(None)`: nginx's `invalid
/// value`; `Err(Some(text))`: another message.
pub(crate) fn parse_expires(args: &[String]) -> Result<Expires, Option<String>> {
    let invalid = || None;
    let e = match args {
        [a] if a == "off" => Expires::Off,
        [a] if a == "epoch" => Expires::Epoch,
        [a] if a == "max" => Expires::Max,
        [a] if a.starts_with('@') => {
            let ms = gyre_core::conf::parse_time_ms(&a[1..]).ok_or_else(invalid)?;
            if ms >= 86_400_000 {
                return Err(Some("daily time value must be less than 24 hours".into()));
            }
            Expires::Daily(ms / 1000)
        }
        [a] => {
            let (neg, t) = match a.strip_prefix('-') {
                Some(t) => (true, t),
                None => (false, a.strip_prefix('+').unwrap_or(a)),
            };
            let secs = (gyre_core::conf::parse_time_ms(t).ok_or_else(invalid)? / 1000) as i64;
            Expires::Access(if neg { -secs } else { secs })
        }
        // `modified T` needs the file's time at the header filter; not yet.
        [m, _] if m == "modified" => {
            return Err(Some("\"expires modified\" is not supported yet".into()))
        }
        _ => return Err(invalid()),
    };
    Ok(e)
}

pub(super) fn set_etag(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.etag = Some(v);
    Ok(())
}

pub(super) fn set_autoindex(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    let s = c.settings(cx)?;
    match d.name.as_str() {
        "autoindex" => s.autoindex = Some(v),
        "autoindex_exact_size" => s.autoindex_exact_size = Some(v),
        // gyre's clock is UTC: local time is UTC.
        _ => s.autoindex_localtime = Some(v),
    }
    Ok(())
}

pub(super) fn set_autoindex_format(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    use crate::autoindex::Format;
    let f = match d.arg(0) {
        "html" => Format::Html,
        "json" => Format::Json,
        "xml" => Format::Xml,
        "jsonp" => return Err("\"autoindex_format jsonp\" is not supported yet".into()),
        other => {
            return Err(format!(
                "invalid value \"{other}\" in \"autoindex_format\" directive, it must be \"html\", \"json\", \"xml\" or \"jsonp\""
            ))
        }
    };
    c.settings(cx)?.autoindex_format = Some(f);
    Ok(())
}

pub(super) fn set_if_modified_since(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = match d.arg(0) {
        "off" => IfModifiedSince::Off,
        "exact" => IfModifiedSince::Exact,
        "before" => IfModifiedSince::Before,
        other => {
            return Err(format!(
                "invalid value \"{other}\", it must be \"off\", \"exact\" or \"before\""
            ))
        }
    };
    c.settings(cx)?.if_modified_since = Some(v);
    Ok(())
}

pub(super) fn set_charset(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = match d.arg(0) {
        "off" => None,
        cs => Some(Arc::from(cs)),
    };
    c.settings(cx)?.charset = Some(v);
    Ok(())
}

pub(super) fn set_map(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let name = d
        .arg(1)
        .strip_prefix('$')
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("invalid variable name \"{}\"", d.arg(1)))?;
    let m = crate::map::Map::parse(d, &mut c.vars, &mut c.regexes)?;
    c.vars.define_map(name, m)?;
    Ok(())
}

fn block_var(d: &Directive, i: usize) -> Result<&str, String> {
    d.arg(i)
        .strip_prefix('$')
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("invalid variable name \"{}\"", d.arg(i)))
}

pub(super) fn set_split_clients(
    c: &mut HttpConf,
    d: &Directive,
    _: &ConfCtx,
) -> Result<(), String> {
    let name = block_var(d, 1)?;
    let s = crate::split_geo::SplitClients::parse(d, &mut c.vars)?;
    c.vars
        .define(name, crate::variables::VarKind::Split(Arc::new(s)))?;
    Ok(())
}

pub(super) fn set_geo(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let name = block_var(d, d.args.len() - 1)?;
    let g = crate::split_geo::Geo::parse(d, &mut c.vars)?;
    c.vars
        .define(name, crate::variables::VarKind::Geo(Arc::new(g)))?;
    Ok(())
}

pub(super) fn set_try_files(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let (last, tries) = d.args.split_last().ok_or("invalid number of arguments")?;
    let tries = tries
        .iter()
        .map(|t| match t.strip_suffix('/') {
            Some(name) => ComplexValue::compile(name, &mut c.vars).map(|cv| (cv, true)),
            None => ComplexValue::compile(t, &mut c.vars).map(|cv| (cv, false)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let last = if let Some(code) = last.strip_prefix('=') {
        match code.parse::<u16>() {
            Ok(n) if n <= 999 => TryLast::Code(n),
            _ => return Err(format!("invalid code \"{last}\"")),
        }
    } else if last.starts_with('@') {
        TryLast::Named(last.clone())
    } else {
        TryLast::Uri(ComplexValue::compile(last, &mut c.vars)?)
    };
    let s = c.settings(cx)?;
    if s.try_files.is_some() {
        return Err("is duplicate".into());
    }
    s.try_files = Some(TryFiles { tries, last });
    Ok(())
}

pub(super) fn set_limit_rate(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.size(0)? as u64;
    c.settings(cx)?.limit_rate = Some(v);
    Ok(())
}

pub(super) fn set_limit_rate_after(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.size(0)? as u64;
    c.settings(cx)?.limit_rate_after = Some(v);
    Ok(())
}

pub(super) fn set_internal(c: &mut HttpConf, _: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.settings(cx)?.internal = true;
    Ok(())
}

pub(super) fn set_location(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let (kind, uri, caseless) = match d.args.as_slice() {
        [m, uri] if m == "=" => (LocKind::Exact, uri.clone(), false),
        [m, uri] if m == "^~" => (LocKind::PrefixNoRegex, uri.clone(), false),
        [m, uri] if m == "~" => (LocKind::Regex, uri.clone(), false),
        [m, uri] if m == "~*" => (LocKind::Regex, uri.clone(), true),
        [uri] if uri.starts_with('=') && uri.len() > 1 => {
            (LocKind::Exact, uri[1..].to_string(), false)
        }
        [uri] if uri.starts_with('~') && uri.len() > 1 => {
            let caseless = uri.starts_with("~*");
            let pat = if caseless { &uri[2..] } else { &uri[1..] };
            (LocKind::Regex, pat.to_string(), caseless)
        }
        [uri] if uri.starts_with('@') => (LocKind::Named, uri.clone(), false),
        [uri] => (LocKind::Prefix, uri.clone(), false),
        _ => return Err(format!("invalid location modifier \"{}\"", d.arg(0))),
    };
    let regex = if kind == LocKind::Regex {
        Some(rewrite::compile_regex(
            &uri,
            caseless,
            &mut c.vars,
            &mut c.regexes,
        )?)
    } else {
        None
    };
    let loc = Location {
        kind,
        uri,
        regex,
        set: LocSettings::default(),
        script: Vec::new(),
        children: Vec::new(),
        conf: None,
        limit_except: None,
    };
    match level(cx) {
        Level::Location(depth) => {
            let parent = c.location(depth)?;
            if parent.kind == LocKind::Exact {
                return Err(format!(
                    "location \"{}\" cannot be inside the exact location \"{}\"",
                    loc.uri, parent.uri
                ));
            }
            if parent.kind == LocKind::Named {
                return Err(format!(
                    "location \"{}\" cannot be inside the named location \"{}\"",
                    loc.uri, parent.uri
                ));
            }
            if loc.kind == LocKind::Named {
                return Err(format!(
                    "named location \"{}\" can be on the server level only",
                    loc.uri
                ));
            }
            if parent.kind != LocKind::Regex
                && loc.kind != LocKind::Regex
                && !loc.uri.starts_with(&parent.uri)
            {
                return Err(format!(
                    "location \"{}\" is outside location \"{}\"",
                    loc.uri, parent.uri
                ));
            }
            parent.children.push(loc);
        }
        _ => c.servers.last_mut().ok_or("no server")?.locations.push(loc),
    }
    Ok(())
}

pub(super) fn set_error_page(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let (uri, rest) = d.args.split_last().ok_or("invalid number of arguments")?;
    let mut codes = Vec::new();
    let mut overwrite = None;
    for code in rest {
        if let Some(o) = code.strip_prefix('=') {
            overwrite = Some(if o.is_empty() {
                0
            } else {
                o.parse::<u16>()
                    .map_err(|_| format!("invalid value \"{code}\""))?
            });
            continue;
        }
        match code.parse::<u16>() {
            Ok(n) if (300..=599).contains(&n) => codes.push(n),
            _ => return Err(format!("value \"{code}\" must be between 300 and 599")),
        }
    }
    if codes.is_empty() {
        return Err(d.error("invalid number of arguments"));
    }
    let uri_cv = if uri.contains('$') {
        Some(ComplexValue::compile(uri, &mut c.vars)?)
    } else {
        None
    };
    c.settings(cx)?
        .error_page
        .get_or_insert_with(Vec::new)
        .push(ErrorPage {
            codes,
            overwrite,
            uri: uri.clone(),
            uri_cv,
        });
    Ok(())
}

pub(super) fn set_absolute_redirect(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.absolute_redirect = Some(v);
    Ok(())
}

pub(super) fn set_server_name_in_redirect(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.server_name_in_redirect = Some(v);
    Ok(())
}

pub(super) fn set_log_not_found(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.log_not_found = Some(v);
    Ok(())
}

pub(super) fn set_port_in_redirect(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.port_in_redirect = Some(v);
    Ok(())
}

pub(super) fn set_recursive_error_pages(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.recursive_error_pages = Some(v);
    Ok(())
}

pub(super) fn set_add_header(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let always = match d.args.get(2).map(String::as_str) {
        None => false,
        Some("always") => true,
        Some(other) => return Err(format!("invalid parameter \"{other}\"")),
    };
    let value = ComplexValue::compile(d.arg(1), &mut c.vars)?;
    c.settings(cx)
        .map_err(|_| d.error("is not allowed here"))?
        .add_header
        .get_or_insert_with(Vec::new)
        .push((d.arg(0).into(), value, always));
    Ok(())
}

pub(super) fn set_open_file_cache(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    if d.arg(0) == "off" {
        c.settings(cx)?.open_file_cache = Some(None);
        return Ok(());
    }
    let mut ofc = DEFAULT_OPEN_FILE_CACHE;
    for a in &d.args {
        if let Some(v) = a.strip_prefix("max=") {
            ofc.max = v
                .parse()
                .map_err(|_| format!("invalid \"open_file_cache\" parameter \"{a}\""))?;
        } else if let Some(v) = a.strip_prefix("inactive=") {
            ofc.inactive_ms = gyre_core::conf::parse_time_ms(v)
                .ok_or_else(|| format!("invalid \"open_file_cache\" parameter \"{a}\""))?;
        } else {
            return Err(format!("invalid \"open_file_cache\" parameter \"{a}\""));
        }
    }
    let s = c.settings(cx)?;
    let valid = s.open_file_cache.flatten().map(|o| o.valid_ms);
    ofc.valid_ms = valid.unwrap_or(DEFAULT_OPEN_FILE_CACHE.valid_ms);
    s.open_file_cache = Some(Some(ofc));
    Ok(())
}

pub(super) fn set_open_file_cache_valid(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let ms = d.msec(0)?;
    let s = c.settings(cx)?;
    let mut o = s
        .open_file_cache
        .flatten()
        .unwrap_or(DEFAULT_OPEN_FILE_CACHE);
    o.valid_ms = ms;
    s.open_file_cache = Some(Some(o));
    Ok(())
}
