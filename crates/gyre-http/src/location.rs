//! The find-config phase's lookup (nginx's `ngx_http_core_find_location`):
//! exact (`=`) locations, the longest prefix, then the prefix's nested
//! locations, then regex locations in the order written unless the prefix
//! was `^~`; a regex location's own nested locations are searched after it
//! matched. Named locations (`@name`) are found only by name.

use std::sync::Arc;

use crate::conf::{LocConf, LocKind};
use crate::regex::{Captures, MatchCache};

/// One level of locations (a server's, or a location's nested ones).
#[derive(Debug, Clone, Default)]
pub struct LocTree {
    /// Exact and prefix locations.
    pub statics: Vec<Arc<LocConf>>,
    /// Regex locations, in configuration order.
    pub regexes: Vec<Arc<LocConf>>,
}

impl LocTree {
    pub fn is_empty(&self) -> bool {
        self.statics.is_empty() && self.regexes.is_empty()
    }
}

/// How a level's search ended (nginx's `NGX_OK` / `NGX_DONE` /
/// `NGX_AGAIN` / `NGX_DECLINED`).
enum Found {
    /// Exact match or a regex: final.
    Final(Arc<LocConf>),
    /// A `^~` prefix: no regexes after it.
    NoRegex(Arc<LocConf>),
    /// A plain prefix: regexes may still win.
    Prefix(Arc<LocConf>),
    None,
}

/// The location for `uri`, or `None` (the server's own settings). `caps`
/// is cleared first; after a regex location matched it holds the
/// captures over `uri`.
pub fn find(
    tree: &LocTree,
    uri: &[u8],
    mc: &mut MatchCache,
    caps: &mut Captures,
) -> Option<Arc<LocConf>> {
    caps.clear();
    match find_level(tree, uri, mc, caps) {
        Found::Final(l) | Found::NoRegex(l) | Found::Prefix(l) => Some(l),
        Found::None => None,
    }
}

fn find_level(tree: &LocTree, uri: &[u8], mc: &mut MatchCache, caps: &mut Captures) -> Found {
    let mut best: Option<&Arc<LocConf>> = None;
    for l in &tree.statics {
        match l.kind {
            LocKind::Exact if l.name.as_bytes() == uri => return Found::Final(l.clone()),
            LocKind::Prefix | LocKind::PrefixNoRegex
                if uri.starts_with(l.name.as_bytes())
                    && best.is_none_or(|b| b.name.len() < l.name.len()) =>
            {
                best = Some(l);
            }
            _ => {}
        }
    }
    let mut rc = Found::None;
    let mut noregex = false;
    if let Some(b) = best {
        noregex = b.kind == LocKind::PrefixNoRegex;
        rc = match find_level(&b.children, uri, mc, caps) {
            Found::None => {
                if noregex {
                    Found::NoRegex(b.clone())
                } else {
                    Found::Prefix(b.clone())
                }
            }
            inner => inner,
        };
    }
    if matches!(rc, Found::Final(_) | Found::NoRegex(_)) || noregex {
        return rc;
    }
    for l in &tree.regexes {
        let Some(re) = &l.regex else {
            continue;
        };
        if mc.exec(re, uri, caps) {
            return match find_level(&l.children, uri, mc, caps) {
                Found::None => Found::Final(l.clone()),
                Found::Final(inner) | Found::NoRegex(inner) | Found::Prefix(inner) => {
                    Found::Final(inner)
                }
            };
        }
    }
    rc
}
