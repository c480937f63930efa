//! Session resumption: `ssl_session_tickets` / `ssl_session_ticket_key`
//! (stateless tickets whose keys every worker shares) and the
//! `ssl_session_cache` choices.
//!
//! Ticket keys are made when the configuration is read — in the master,
//! before the workers are forked — so every worker holds the same keys and a
//! ticket issued by one resumes on another. As in nginx, the first key
//! encrypts and decrypts, the others (older keys, for rotation by the
//! operator) only decrypt; with no `ssl_session_ticket_key` the key is
//! random and lives until the next reload. The ticket format is gyre's own
//! (AES-256-GCM, 16-byte key name, 12-byte random nonce): tickets are only
//! ever read by the server that wrote them, so OpenSSL's format does not
//! matter, and a key file is used as key material (80- or 48-byte files, as
//! nginx requires).

use std::path::Path;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};

use gyre_core::event::tls::rustls::server::ProducesTickets;

/// One ticket key: its name (the first 16 bytes of every ticket) and AEAD key.
struct TicketKey {
    name: [u8; 16],
    key: LessSafeKey,
}

/// The ticketer every worker of one configuration shares.
pub struct Tickets {
    keys: Vec<TicketKey>,
    lifetime_secs: u32,
    rng: SystemRandom,
}

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tickets")
            .field("keys", &self.keys.len())
            .field("lifetime_secs", &self.lifetime_secs)
            .finish()
    }
}

fn key_from(name: [u8; 16], material: &[u8]) -> Result<TicketKey, String> {
    // SHA-256 of the secret part, so 48- and 80-byte files both give a
    // 256-bit key.
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, material);
    let unbound = UnboundKey::new(&AES_256_GCM, d.as_ref()).map_err(|_| "bad ticket key")?;
    Ok(TicketKey {
        name,
        key: LessSafeKey::new(unbound),
    })
}

impl Tickets {
    /// Keys read from `ssl_session_ticket_key` files (first one encrypts),
    /// or one random key when there are none.
    pub fn new(files: &[impl AsRef<Path>], lifetime_secs: u32) -> Result<Tickets, String> {
        let rng = SystemRandom::new();
        let mut keys = Vec::new();
        for f in files {
            let f = f.as_ref();
            let data = std::fs::read(f).map_err(|e| {
                format!(
                    "open() \"{}\" failed ({})",
                    f.display(),
                    gyre_core::sys_error_text(&e)
                )
            })?;
            if data.len() != 48 && data.len() != 80 {
                return Err(format!("\"{}\" must be 48 or 80 bytes", f.display()));
            }
            let mut name = [0u8; 16];
            name.copy_from_slice(&data[..16]);
            keys.push(key_from(name, &data[16..])?);
        }
        if keys.is_empty() {
            let mut name = [0u8; 16];
            let mut secret = [0u8; 64];
            rng.fill(&mut name).map_err(|_| "RAND_bytes() failed")?;
            rng.fill(&mut secret).map_err(|_| "RAND_bytes() failed")?;
            keys.push(key_from(name, &secret)?);
        }
        Ok(Tickets {
            keys,
            lifetime_secs,
            rng,
        })
    }
}

impl ProducesTickets for Tickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.lifetime_secs
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let k = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(16 + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&k.name);
        out.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        k.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&k.name),
                &mut body,
            )
            .ok()?;
        out.extend_from_slice(&body);
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        if cipher.len() < 16 + NONCE_LEN + 16 {
            return None;
        }
        let (name, rest) = cipher.split_at(16);
        let k = self.keys.iter().find(|k| k.name == name)?;
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = sealed.to_vec();
        let plain = k
            .key
            .open_in_place(nonce, Aad::from(&k.name), &mut body)
            .ok()?;
        let n = plain.len();
        body.truncate(n);
        Some(body)
    }
}

/// `ssl_session_cache`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCache {
    /// `off`: no session ids at all.
    Off,
    /// `none` (nginx's default): nothing is stored.
    None,
    /// `builtin[:N]`: per worker, N sessions (nginx's default 20480).
    Builtin(usize),
    /// `shared:NAME:SIZE`: one zone every worker uses.
    Shared { name: String, size: usize },
}

impl SessionCache {
    /// Parses the directive's arguments (`builtin:1000 shared:SSL:10m`
    /// combine; the shared zone wins, as sessions then live there).
    pub fn parse(args: &[String]) -> Result<SessionCache, String> {
        let mut out = None;
        for a in args {
            let v = match a.as_str() {
                "off" => SessionCache::Off,
                "none" => SessionCache::None,
                "builtin" => SessionCache::Builtin(20480),
                _ => {
                    if let Some(n) = a.strip_prefix("builtin:") {
                        let n = n
                            .parse::<usize>()
                            .ok()
                            .filter(|&n| n > 0)
                            .ok_or_else(|| format!("invalid session cache \"{a}\""))?;
                        SessionCache::Builtin(n)
                    } else if let Some(rest) = a.strip_prefix("shared:") {
                        let (name, size) = rest
                            .rsplit_once(':')
                            .ok_or_else(|| format!("invalid session cache \"{a}\""))?;
                        let size = gyre_core::conf::parse_size(size)
                            .filter(|_| !name.is_empty())
                            .ok_or_else(|| format!("invalid session cache \"{a}\""))?;
                        if size < 8 * 4096 {
                            return Err(format!("session cache \"{a}\" is too small"));
                        }
                        SessionCache::Shared {
                            name: name.to_string(),
                            size,
                        }
                    } else {
                        return Err(format!("invalid session cache \"{a}\""));
                    }
                }
            };
            if matches!(v, SessionCache::Off | SessionCache::None) && args.len() > 1 {
                return Err(format!("invalid session cache \"{a}\""));
            }
            out = match (out, v) {
                (Some(s @ SessionCache::Shared { .. }), _) => Some(s),
                (_, v) => Some(v),
            };
        }
        out.ok_or_else(|| "invalid number of arguments".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_round_trip_and_refuse_others() {
        let a = Tickets::new(&[] as &[&str], 300).unwrap();
        let b = Tickets::new(&[] as &[&str], 300).unwrap();
        let t = a.encrypt(b"session state").unwrap();
        assert_eq!(a.decrypt(&t).unwrap(), b"session state");
        assert!(b.decrypt(&t).is_none(), "another key");
        let mut bad = t.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(a.decrypt(&bad).is_none(), "tampered");
        assert!(a.decrypt(&t[..20]).is_none(), "short");
    }

    #[test]
    fn key_files_share_tickets_and_old_keys_decrypt() {
        let dir = std::env::temp_dir().join(format!("gyre-ticket-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let k1 = dir.join("k1");
        let k2 = dir.join("k2");
        std::fs::write(&k1, [1u8; 80]).unwrap();
        std::fs::write(&k2, [2u8; 48]).unwrap();
        let old = Tickets::new(&[&k2], 300).unwrap();
        let t_old = old.encrypt(b"x").unwrap();
        let w1 = Tickets::new(&[&k1, &k2], 300).unwrap();
        let w2 = Tickets::new(&[&k1, &k2], 300).unwrap();
        let t = w1.encrypt(b"y").unwrap();
        assert_eq!(w2.decrypt(&t).unwrap(), b"y", "same file, same keys");
        assert_eq!(w2.decrypt(&t_old).unwrap(), b"x", "second key decrypts");
        std::fs::write(&k1, [1u8; 10]).unwrap();
        assert!(Tickets::new(&[&k1], 300)
            .unwrap_err()
            .contains("48 or 80 bytes"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn session_cache_values() {
        let p = |s: &str| SessionCache::parse(&s.split(' ').map(String::from).collect::<Vec<_>>());
        assert_eq!(p("off").unwrap(), SessionCache::Off);
        assert_eq!(p("none").unwrap(), SessionCache::None);
        assert_eq!(p("builtin").unwrap(), SessionCache::Builtin(20480));
        assert_eq!(p("builtin:1000").unwrap(), SessionCache::Builtin(1000));
        assert_eq!(
            p("builtin:1000 shared:SSL:10m").unwrap(),
            SessionCache::Shared {
                name: "SSL".into(),
                size: 10 << 20
            }
        );
        assert!(p("shared:SSL").is_err());
        assert!(p("shared:SSL:1k").unwrap_err().contains("too small"));
        assert!(p("bogus")
            .unwrap_err()
            .contains("invalid session cache \"bogus\""));
    }
}
