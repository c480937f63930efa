//! nginx's merge of `http` → `server` → `location` settings
//! (`merge_loc_conf`): each level's `Option`s resolved, innermost first,
//! into the complete [`LocConf`] a request uses, for every location, its
//! `if` blocks and `limit_except` block, and each server's fallback.

use super::*;

/// The settings of an `if` block that sets none.
static EMPTY_SETTINGS: std::sync::LazyLock<LocSettings> =
    std::sync::LazyLock::new(LocSettings::default);

pub(super) struct Fallback(pub(super) Arc<LocConf>);

pub(super) static EMPTY_FALLBACK: std::sync::LazyLock<Fallback> = std::sync::LazyLock::new(|| {
    Fallback(Arc::new(resolve(
        &[],
        Path::new("html"),
        Path::new("logs/access.log"),
    )))
});

pub(crate) fn pick<T: Clone>(
    levels: &[&LocSettings],
    f: impl Fn(&LocSettings) -> Option<T>,
) -> Option<T> {
    levels.iter().rev().find_map(|s| f(s))
}

/// Resolves settings from the outermost level (`http`) to the innermost.
pub(super) fn resolve(levels: &[&LocSettings], default_root: &Path, default_log: &Path) -> LocConf {
    LocConf {
        root: pick(levels, |s| s.root.clone()).unwrap_or_else(|| default_root.to_path_buf()),
        alias: levels.last().and_then(|s| s.alias.clone()),
        index: pick(levels, |s| s.index.clone()).unwrap_or_else(|| vec!["index.html".into()]),
        default_type: pick(levels, |s| s.default_type.clone())
            .unwrap_or_else(|| "text/plain".into()),
        stub_status: levels.last().and_then(|s| s.stub_status).unwrap_or(false),
        add_header: pick(levels, |s| s.add_header.clone()).unwrap_or_default(),
        error_page: pick(levels, |s| s.error_page.clone()).unwrap_or_default(),
        keepalive_timeout: pick(levels, |s| s.keepalive_timeout).unwrap_or(75_000),
        keepalive_requests: pick(levels, |s| s.keepalive_requests).unwrap_or(1000),
        send_timeout: pick(levels, |s| s.send_timeout).unwrap_or(60_000),
        client_body_timeout: pick(levels, |s| s.client_body_timeout).unwrap_or(60_000),
        client_max_body_size: pick(levels, |s| s.client_max_body_size).unwrap_or(1 << 20),
        body: crate::request_body::resolve(levels),
        dav: crate::dav::resolve(levels),
        sendfile: pick(levels, |s| s.sendfile).unwrap_or(true),
        tcp_nodelay: pick(levels, |s| s.tcp_nodelay).unwrap_or(true),
        absolute_redirect: pick(levels, |s| s.absolute_redirect).unwrap_or(true),
        server_name_in_redirect: pick(levels, |s| s.server_name_in_redirect).unwrap_or(false),
        port_in_redirect: pick(levels, |s| s.port_in_redirect).unwrap_or(true),
        log_not_found: pick(levels, |s| s.log_not_found).unwrap_or(true),
        open_file_cache: pick(levels, |s| s.open_file_cache)
            .unwrap_or(Some(DEFAULT_OPEN_FILE_CACHE)),
        extra_logs: Arc::from([]),
        error_log: None,
        recursive_error_pages: pick(levels, |s| s.recursive_error_pages).unwrap_or(false),
        // nginx's default: `access_log logs/access.log combined`.
        access_log: pick(levels, |s| s.access_log.clone())
            .unwrap_or_else(|| Some(default_log.to_path_buf())),
        name: "/".into(),
        kind: LocKind::Server,
        regex: None,
        internal: levels.last().is_some_and(|s| s.internal),
        script: Arc::from(Vec::new()),
        try_files: levels.last().and_then(|s| s.try_files.clone()),
        limit_rate: pick(levels, |s| s.limit_rate).unwrap_or(0),
        limit_rate_after: pick(levels, |s| s.limit_rate_after).unwrap_or(0),
        expires: pick(levels, |s| s.expires).unwrap_or(Expires::Off),
        expires_cv: levels
            .iter()
            .rev()
            .find(|s| s.expires.is_some())
            .and_then(|s| s.expires_cv.clone()),
        etag: pick(levels, |s| s.etag).unwrap_or(true),
        autoindex: pick(levels, |s| s.autoindex).unwrap_or(false).then(|| {
            crate::autoindex::Autoindex {
                format: pick(levels, |s| s.autoindex_format)
                    .unwrap_or(crate::autoindex::Format::Html),
                exact_size: pick(levels, |s| s.autoindex_exact_size).unwrap_or(true),
            }
        }),
        if_modified_since: pick(levels, |s| s.if_modified_since).unwrap_or(IfModifiedSince::Exact),
        charset: pick(levels, |s| s.charset.clone()).flatten(),
        rewrite_log: pick(levels, |s| s.rewrite_log).unwrap_or(false),
        uninitialized_variable_warn: pick(levels, |s| s.uninitialized_variable_warn)
            .unwrap_or(true),
        alias_cv: levels.last().and_then(|s| s.alias_cv.clone()),
        children: LocTree::default(),
        access: pick(levels, |s| s.access.clone()),
        realip: crate::realip::resolve(levels),
        satisfy: pick(levels, |s| s.satisfy).unwrap_or_default(),
        auth_basic: pick(levels, |s| s.auth_basic.clone()),
        auth_basic_user_file: pick(levels, |s| s.auth_basic_user_file.clone()),
        limit_req: crate::limit_req::resolve(levels),
        limit_conn: crate::limit_conn::resolve(levels),
        proxy: None,
        gzip: crate::gzip::resolve(levels),
        server_tokens: pick(levels, |s| s.server_tokens).unwrap_or(true),
        limit_except: None,
        log_format: 0,
        log_if: levels
            .iter()
            .rev()
            .find(|s| s.access_log.is_some())
            .and_then(|s| s.log_if.clone()),
    }
}

/// The index of the format an `access_log` names (its own level's, as the
/// path and format come together).
pub(super) fn log_format_of(
    levels: &[&LocSettings],
    formats: &[Arc<crate::log_format::LogFormat>],
) -> Result<usize, ConfError> {
    let name = levels
        .iter()
        .rev()
        .find(|s| s.access_log.is_some())
        .and_then(|s| s.log_format.clone());
    match name {
        None => Ok(0),
        Some(n) => formats
            .iter()
            .position(|f| f.name == n)
            .ok_or_else(|| ConfError::new(format!("unknown log format \"{n}\""))),
    }
}

/// What a nested configuration of a location (`if`, `limit_except`) keeps
/// of the location's own, non-inherited settings, as nginx's merge and
/// content handler do: the `alias` unless the block sets `root`, and the
/// content handler (`stub_status`).
fn keep_location_own(inner: &mut LocConf, loc: &LocConf, alias: bool) {
    if alias {
        inner.alias = loc.alias.clone();
        inner.alias_cv = loc.alias_cv.clone();
    }
    inner.stub_status = loc.stub_status;
}

/// Resolves a location and its nested ones, inheriting from `levels`.
pub(super) fn resolve_location(
    l: &mut Location,
    levels: &mut Vec<LocSettings>,
    defaults: (&Path, &Path),
    formats: &[Arc<crate::log_format::LogFormat>],
    named: &mut Vec<Arc<LocConf>>,
) -> Result<Arc<LocConf>, ConfError> {
    levels.push(l.set.clone());
    let refs: Vec<&LocSettings> = levels.iter().collect();
    let mut lc = resolve(&refs, defaults.0, defaults.1);
    lc.log_format = log_format_of(&refs, formats)?;
    lc.extra_logs = extra_logs::resolve(&refs, formats)?;
    lc.error_log = error_log::resolve(&refs)?;
    lc.name = l.uri.as_str().into();
    lc.kind = l.kind;
    if l.set.proxy.pass.is_some() {
        crate::proxy::conf::check_buffers(&refs).map_err(ConfError::new)?;
        lc.proxy = crate::proxy::conf::resolve(&refs, &lc.name, lc.kind).map_err(ConfError::new)?;
    }
    drop(refs);
    lc.regex = l.regex.clone();
    for op in &mut l.script {
        if let Op::If { set, conf, .. } = op {
            // Every `if` of a location is a configuration (one that sets
            // nothing too: the last `if` that matched wins): its settings
            // over the location's, with no try_files or rewrite script of
            // its own (nginx's `if` is a location that inherits neither).
            let set: &LocSettings = set.as_deref().unwrap_or(&EMPTY_SETTINGS);
            levels.push(set.clone());
            let refs: Vec<&LocSettings> = levels.iter().collect();
            let mut ic = resolve(&refs, defaults.0, defaults.1);
            ic.log_format = log_format_of(&refs, formats)?;
            ic.extra_logs = extra_logs::resolve(&refs, formats)?;
            ic.error_log = error_log::resolve(&refs)?;
            ic.proxy = if set.proxy.pass.is_some() {
                crate::proxy::conf::resolve(&refs, &lc.name, lc.kind).map_err(ConfError::new)?
            } else {
                lc.proxy.clone()
            };
            drop(refs);
            levels.pop();
            ic.name = lc.name.clone();
            ic.kind = lc.kind;
            ic.regex = lc.regex.clone();
            keep_location_own(&mut ic, &lc, set.root.is_none());
            *conf = Some(Arc::new(ic));
        }
    }
    lc.script = Arc::from(l.script.clone());
    if let Some(le) = &l.limit_except {
        // The block's settings over the location's (nginx merges the
        // block's configuration with its location's).
        levels.push(le.set.clone());
        let refs: Vec<&LocSettings> = levels.iter().collect();
        let mut lmt = resolve(&refs, defaults.0, defaults.1);
        lmt.log_format = log_format_of(&refs, formats)?;
        lmt.extra_logs = extra_logs::resolve(&refs, formats)?;
        lmt.error_log = error_log::resolve(&refs)?;
        drop(refs);
        levels.pop();
        lmt.name = lc.name.clone();
        lmt.kind = lc.kind;
        lmt.proxy = lc.proxy.clone();
        lmt.regex = lc.regex.clone();
        keep_location_own(&mut lmt, &lc, true);
        // No rewrite script: nginx's rewrite module does not inherit a
        // location's into the block, so a limited method skips the
        // location's `return` and `rewrite` (and meets the block's access
        // rules).
        lc.limit_except = Some(Arc::new(crate::limit_except::LimitExceptConf {
            allowed: le.allowed,
            conf: Arc::new(lmt),
        }));
    }
    let mut tree = LocTree::default();
    for child in &mut l.children {
        let c = resolve_location(child, levels, defaults, formats, named)?;
        match c.kind {
            LocKind::Regex => tree.regexes.push(c),
            LocKind::Named => named.push(c),
            _ => tree.statics.push(c),
        }
    }
    levels.pop();
    lc.children = tree;
    let lc = Arc::new(lc);
    l.conf = Some(lc.clone());
    Ok(lc)
}
