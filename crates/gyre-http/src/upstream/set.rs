//! The upstreams of an `http {}` block (nginx's `umcf->upstreams` and
//! `ngx_http_upstream_add`): the named `upstream {}` blocks and the implicit
//! upstreams `proxy_pass http://HOST[:PORT]` creates when no block has that
//! name, resolved once at configuration time with nginx's defaults (weight
//! 1, max_fails 1, fail_timeout 10s; several addresses are balanced round
//! robin).
//!
//! nginx matches names whichever comes first in the file; here the blocks
//! are added first ([`UpstreamSet::add_block`] for every block, typically in
//! the http module's `init_conf`), then each `proxy_pass` target is looked up
//! ([`UpstreamSet::target`]), with nginx's messages at nginx's places:
//! `duplicate upstream "u"` at the second block, `upstream "u" may not have
//! port 8080` and `host not found in upstream "h"` at the `proxy_pass`.

use gyre_core::conf::{ConfError, Directive};
use gyre_core::event::PeerAddr;

use super::conf::{parse, resolve};
use super::round_robin::{Peer, Peers};
use super::{Method, Upstream};

/// One upstream of the set.
#[derive(Debug)]
pub struct Entry {
    /// The block's name, or the implicit upstream's host.
    pub name: String,
    /// The implicit upstream's port (None for a block).
    pub port: Option<u16>,
    pub upstream: Upstream,
}

/// All upstreams of one http {} block, referred to by index.
#[derive(Debug, Default)]
pub struct UpstreamSet {
    pub entries: Vec<Entry>,
}

impl UpstreamSet {
    /// Reads an `upstream NAME {}` block; warnings (`load balancing method
    /// redefined`) are returned for the caller to log.
    pub fn add_block(&mut self, d: &Directive) -> Result<(usize, Vec<ConfError>), ConfError> {
        let p = parse(d)?;
        if self
            .entries
            .iter()
            .any(|e| e.port.is_none() && e.name.eq_ignore_ascii_case(&p.name))
        {
            return Err(d.conf_error(format!("duplicate upstream \"{}\"", p.name)));
        }
        self.entries.push(Entry {
            name: p.name,
            port: None,
            upstream: p.upstream,
        });
        Ok((self.entries.len() - 1, p.warnings))
    }

    /// The upstream a `proxy_pass` to `host[:port]` uses (`at` is the
    /// `proxy_pass` directive, for messages): the block named `host`, or an
    /// implicit upstream of `host`'s addresses on `port` (or
    /// `default_port`).
    pub fn target(
        &mut self,
        host: &str,
        port: Option<u16>,
        default_port: u16,
        at: &Directive,
    ) -> Result<usize, ConfError> {
        if let Some(i) = self
            .entries
            .iter()
            .position(|e| e.port.is_none() && e.name.eq_ignore_ascii_case(host))
        {
            if let Some(p) = port {
                return Err(at.conf_error(format!("upstream \"{host}\" may not have port {p}")));
            }
            return Ok(i);
        }
        let port = port.unwrap_or(default_port);
        if let Some(i) = self
            .entries
            .iter()
            .position(|e| e.port == Some(port) && e.name.eq_ignore_ascii_case(host))
        {
            return Ok(i);
        }
        if port == 0 {
            return Err(at.conf_error(format!("invalid port in upstream \"{host}:0\"")));
        }
        let addrs = if host.starts_with("unix:") {
            resolve(host)
        } else if host.contains(':') && !host.starts_with('[') {
            // A bare IPv6 address.
            resolve(&format!("[{host}]:{port}"))
        } else {
            resolve(&format!("{host}:{port}"))
        }
        .map_err(|e| at.conf_error(format!("{e} in upstream \"{host}\"")))?;
        let peers: Vec<Peer> = addrs
            .into_iter()
            .map(|a: PeerAddr| Peer::new(a, host))
            .collect();
        self.entries.push(Entry {
            name: host.to_string(),
            port: Some(port),
            upstream: Upstream::new(Peers::new(host, peers, Vec::new()), Method::RoundRobin),
        });
        Ok(self.entries.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_core::conf::Location;
    use std::path::Path;
    use std::sync::Arc;

    fn dir(name: &str, args: &[&str], line: usize, block: Option<Vec<Directive>>) -> Directive {
        Directive {
            name: name.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            block,
            location: Location::File {
                path: Arc::from(Path::new("/t.conf")),
                line,
            },
        }
    }

    fn block(name: &str, line: usize) -> Directive {
        dir(
            "upstream",
            &[name],
            line,
            Some(vec![dir("server", &["127.0.0.1:1"], line + 1, None)]),
        )
    }

    #[test]
    fn blocks_and_implicit_upstreams() {
        let mut s = UpstreamSet::default();
        let pp = dir("proxy_pass", &["http://x"], 9, None);
        s.add_block(&block("u3", 5)).unwrap();
        assert_eq!(
            s.add_block(&block("U3", 7)).unwrap_err().to_string(),
            "duplicate upstream \"U3\" in /t.conf:7"
        );
        assert_eq!(s.target("u3", None, 80, &pp).unwrap(), 0);
        assert_eq!(
            s.target("u3", Some(8080), 80, &pp).unwrap_err().to_string(),
            "upstream \"u3\" may not have port 8080 in /t.conf:9"
        );
        let i = s.target("127.0.0.1", Some(8080), 80, &pp).unwrap();
        assert_eq!(
            s.target("127.0.0.1", Some(8080), 80, &pp).unwrap(),
            i,
            "shared"
        );
        let up = &s.entries[i].upstream;
        let p = &up.peers.primary.peers[0];
        assert_eq!(p.name, "127.0.0.1:8080");
        assert_eq!((p.weight, p.max_fails, p.fail_timeout), (1, 1, 10));
        assert!(up.peers.primary.single);
        let j = s.target("127.0.0.1", None, 80, &pp).unwrap();
        assert_ne!(i, j, "another port, another upstream");
        assert_eq!(
            s.entries[j].upstream.peers.primary.peers[0].name,
            "127.0.0.1:80"
        );
        assert_eq!(
            s.target("nosuch.invalid", Some(81), 80, &pp)
                .unwrap_err()
                .to_string(),
            "host not found in upstream \"nosuch.invalid\" in /t.conf:9"
        );
        assert_eq!(
            s.target("127.0.0.1", Some(0), 80, &pp)
                .unwrap_err()
                .to_string(),
            "invalid port in upstream \"127.0.0.1:0\" in /t.conf:9"
        );
        let k = s.target("::1", Some(1), 80, &pp).unwrap();
        assert_eq!(s.entries[k].upstream.peers.primary.peers[0].name, "[::1]:1");
        let u = s.target("unix:/tmp/x.sock", None, 80, &pp).unwrap();
        assert_eq!(
            s.entries[u].upstream.peers.primary.peers[0].name,
            "unix:/tmp/x.sock"
        );
    }
}
