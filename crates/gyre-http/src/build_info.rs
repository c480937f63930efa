//! What `gyre -V` says about nginx's HTTP modules, in the form of nginx's
//! `configure arguments:` line, so tools that read that line (to know
//! whether `gzip_static` or `stub_status` exist, say) read gyre alike:
//! `--with-X` for each of nginx's optional modules gyre has, `--without-X`
//! for each of its default ones gyre does not have.
//!
//! Whether gyre has a module is not written down by hand: a module counts
//! as present when the directive that names it is in gyre's directive
//! table ([`crate::conf::HTTP_MODULE`]) or among the directives of an
//! `upstream { }` block ([`crate::upstream::conf::DIRECTIVES`]), so the
//! line follows the code.

/// nginx's HTTP modules: (name, built by default in nginx, a directive
/// only that module has).
const MODULES: &[(&str, bool, &str)] = &[
    ("http_ssl_module", false, "ssl_certificate"),
    ("http_v2_module", false, "http2_chunk_size"),
    ("http_realip_module", false, "set_real_ip_from"),
    ("http_addition_module", false, "add_before_body"),
    ("http_sub_module", false, "sub_filter"),
    ("http_dav_module", false, "dav_methods"),
    ("http_flv_module", false, "flv"),
    ("http_mp4_module", false, "mp4"),
    ("http_gunzip_module", false, "gunzip"),
    ("http_gzip_static_module", false, "gzip_static"),
    ("http_auth_request_module", false, "auth_request"),
    ("http_random_index_module", false, "random_index"),
    ("http_secure_link_module", false, "secure_link"),
    ("http_slice_module", false, "slice"),
    ("http_stub_status_module", false, "stub_status"),
    ("http_charset_module", true, "charset"),
    ("http_gzip_module", true, "gzip"),
    ("http_ssi_module", true, "ssi"),
    ("http_userid_module", true, "userid"),
    ("http_access_module", true, "allow"),
    ("http_auth_basic_module", true, "auth_basic"),
    ("http_mirror_module", true, "mirror"),
    ("http_autoindex_module", true, "autoindex"),
    ("http_geo_module", true, "geo"),
    ("http_map_module", true, "map"),
    ("http_split_clients_module", true, "split_clients"),
    ("http_referer_module", true, "valid_referers"),
    ("http_rewrite_module", true, "rewrite"),
    ("http_proxy_module", true, "proxy_pass"),
    ("http_fastcgi_module", true, "fastcgi_pass"),
    ("http_uwsgi_module", true, "uwsgi_pass"),
    ("http_scgi_module", true, "scgi_pass"),
    ("http_grpc_module", true, "grpc_pass"),
    ("http_memcached_module", true, "memcached_pass"),
    ("http_limit_conn_module", true, "limit_conn"),
    ("http_limit_req_module", true, "limit_req"),
    ("http_empty_gif_module", true, "empty_gif"),
    ("http_browser_module", true, "modern_browser"),
    ("http_upstream_hash_module", true, "hash"),
    ("http_upstream_ip_hash_module", true, "ip_hash"),
    ("http_upstream_least_conn_module", true, "least_conn"),
    ("http_upstream_random_module", true, "random"),
    ("http_upstream_keepalive_module", true, "keepalive"),
    ("http_upstream_zone_module", true, "zone"),
];

/// Whether gyre's `http {}` (or an `upstream {}` in it) knows `directive`.
pub fn has_directive(directive: &str) -> bool {
    crate::conf::HTTP_MODULE
        .directives
        .iter()
        .any(|d| d.name == directive)
        || crate::upstream::conf::DIRECTIVES.contains(&directive)
}

/// The `--with-…` / `--without-…` arguments, in nginx's order (optional
/// modules first, then the default ones left out).
pub fn configure_arguments() -> String {
    let mut out: Vec<String> = Vec::new();
    for &(name, default, directive) in MODULES {
        match (default, has_directive(directive)) {
            (false, true) => out.push(format!("--with-{name}")),
            (true, false) => out.push(format!("--without-{name}")),
            _ => {}
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_follows_the_directive_table() {
        let line = configure_arguments();
        // gyre has these optional modules...
        for m in [
            "http_ssl_module",
            "http_stub_status_module",
            "http_gzip_static_module",
        ] {
            assert!(line.contains(&format!("--with-{m}")), "{line}");
        }
        // ...and these default ones, so they are not listed at all.
        for m in ["http_gzip_module", "http_rewrite_module", "http_map_module"] {
            assert!(!line.contains(m), "{line}");
        }
        // No proxy_pass in the table: nginx's default proxy is "without".
        assert_eq!(
            line.contains("--without-http_proxy_module"),
            !has_directive("proxy_pass")
        );
        // The upstream block's balancers and keep-alive cache are there.
        for m in [
            "hash",
            "ip_hash",
            "least_conn",
            "random",
            "keepalive",
            "zone",
        ] {
            assert!(
                !line.contains(&format!("http_upstream_{m}_module")),
                "{line}"
            );
        }
        // Every module is said once at most.
        for &(name, _, _) in MODULES {
            assert!(line.matches(&format!("-{name}")).count() <= 1, "{name}");
        }
    }
}
