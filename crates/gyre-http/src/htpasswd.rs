//! htpasswd files as nginx's auth_basic module reads them, and the password
//! formats of `ngx_crypt`: `{PLAIN}`, `{SHA}` (base64 SHA-1), `{SSHA}`
//! (salted SHA-1), `$apr1$` (Apache's MD5 crypt), and what nginx leaves to
//! glibc's crypt(3): `$1$` (MD5 crypt), `$5$` and `$6$` (SHA-crypt).
//! DES crypt, bcrypt and yescrypt are not computed: such an entry never
//! matches (a `password mismatch`, as glibc's `*0` failure token would).
//!
//! Every comparison of a computed hash with the stored one takes the same
//! time whatever bytes differ ([`ct_eq`]).

use aws_lc_rs::digest;
use md5::{Digest, Md5};

/// The longest password field read (a longer one cannot be a hash nginx
/// computes, and reading it whole would let a file grow a worker).
const MAX_FIELD: usize = 4096;

/// The password field of `user` in an htpasswd file, read in small chunks
/// the way nginx's state machine does: a line starting with `#` or CR is
/// skipped, a line matches when it starts with `user:`, and the field ends
/// at LF, CR, `:` (a comment follows) or the end of the file. The first
/// match wins. Memory stays bounded whatever the file holds.
pub fn lookup(mut file: impl std::io::Read, user: &[u8]) -> std::io::Result<Option<Vec<u8>>> {
    enum St {
        Login(usize),
        Passwd,
        Skip,
    }
    let mut st = St::Login(0);
    let mut field = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        for &b in &buf[..n] {
            match st {
                St::Login(0) if b == b'#' || b == b'\r' => st = St::Skip,
                St::Login(0) if b == b'\n' => {}
                St::Login(i) => {
                    let want = user.get(i).copied().unwrap_or(b':');
                    // As nginx: even a mismatching LF starts a skip, so a
                    // line that is a prefix of `user:` hides the next one.
                    st = if b != want {
                        St::Skip
                    } else if i == user.len() {
                        St::Passwd
                    } else {
                        St::Login(i + 1)
                    };
                }
                St::Passwd => {
                    if b == b'\n' || b == b'\r' || b == b':' {
                        return Ok(Some(field));
                    }
                    if field.len() == MAX_FIELD {
                        return Ok(Some(Vec::new()));
                    }
                    field.push(b);
                }
                St::Skip => {
                    if b == b'\n' {
                        st = St::Login(0);
                    }
                }
            }
        }
    }
    Ok(matches!(st, St::Passwd).then_some(field))
}

/// Equality of two byte strings in time independent of where they differ.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut d = 0u8;
    for (x, y) in a.iter().zip(b) {
        d |= x ^ y;
    }
    // Keep the optimiser from short-cutting the loop.
    std::hint::black_box(d) == 0
}

/// Whether `password` matches the stored `hash` (nginx's `ngx_crypt`
/// followed by its comparison).
pub fn verify(password: &[u8], hash: &[u8]) -> bool {
    // nginx hands C strings to crypt: a password stops at a NUL byte.
    let password = match password.iter().position(|&b| b == 0) {
        Some(n) => &password[..n],
        None => password,
    };
    let computed = if let Some(rest) = hash.strip_prefix(b"$apr1$") {
        md5_crypt(password, b"$apr1$", rest)
    } else if hash.starts_with(b"{PLAIN}") {
        let mut v = b"{PLAIN}".to_vec();
        v.extend_from_slice(password);
        v
    } else if hash.starts_with(b"{SSHA}") {
        match ssha(password, &hash[6..]) {
            Some(v) => v,
            None => return false,
        }
    } else if hash.starts_with(b"{SHA}") {
        let mut v = b"{SHA}".to_vec();
        base64_encode(
            digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, password).as_ref(),
            &mut v,
        );
        v
    } else if let Some(rest) = hash.strip_prefix(b"$1$") {
        md5_crypt(password, b"$1$", rest)
    } else if let Some(rest) = hash.strip_prefix(b"$5$") {
        match sha_crypt(password, rest, false) {
            Some(v) => v,
            None => return false,
        }
    } else if let Some(rest) = hash.strip_prefix(b"$6$") {
        match sha_crypt(password, rest, true) {
            Some(v) => v,
            None => return false,
        }
    } else {
        return false;
    };
    ct_eq(&computed, hash)
}

const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn to64(out: &mut Vec<u8>, mut v: u32, n: usize) {
    for _ in 0..n {
        out.push(ITOA64[(v & 0x3f) as usize]);
        v >>= 6;
    }
}

/// Poul-Henning Kamp's MD5 crypt with `magic` (`$1$`, or Apache's `$apr1$`):
/// the salt is at most 8 characters, up to the first `$`.
fn md5_crypt(key: &[u8], magic: &[u8], rest: &[u8]) -> Vec<u8> {
    let salt_len = rest
        .iter()
        .take(8)
        .position(|&b| b == b'$')
        .unwrap_or(rest.len().min(8));
    let salt = &rest[..salt_len];
    let mut md = Md5::new();
    md.update(key);
    md.update(magic);
    md.update(salt);
    let alt = {
        let mut c = Md5::new();
        c.update(key);
        c.update(salt);
        c.update(key);
        c.finalize()
    };
    let mut n = key.len();
    while n > 0 {
        md.update(&alt[..n.min(16)]);
        n = n.saturating_sub(16);
    }
    let mut i = key.len();
    while i != 0 {
        if i & 1 == 1 {
            md.update([0u8]);
        } else {
            md.update(&key[..1]);
        }
        i >>= 1;
    }
    let mut fin: [u8; 16] = md.finalize().into();
    for i in 0..1000 {
        let mut c = Md5::new();
        if i & 1 == 1 {
            c.update(key);
        } else {
            c.update(fin);
        }
        if i % 3 != 0 {
            c.update(salt);
        }
        if i % 7 != 0 {
            c.update(key);
        }
        if i & 1 == 1 {
            c.update(fin);
        } else {
            c.update(key);
        }
        fin = c.finalize().into();
    }
    let mut out = Vec::with_capacity(magic.len() + salt.len() + 23);
    out.extend_from_slice(magic);
    out.extend_from_slice(salt);
    out.push(b'$');
    let f = |a: usize, b: usize, c: usize| {
        (u32::from(fin[a]) << 16) | (u32::from(fin[b]) << 8) | u32::from(fin[c])
    };
    to64(&mut out, f(0, 6, 12), 4);
    to64(&mut out, f(1, 7, 13), 4);
    to64(&mut out, f(2, 8, 14), 4);
    to64(&mut out, f(3, 9, 15), 4);
    to64(&mut out, f(4, 10, 5), 4);
    to64(&mut out, u32::from(fin[11]), 2);
    out
}

/// `{SSHA}base64(SHA1(password salt) salt)`.
fn ssha(key: &[u8], encoded: &[u8]) -> Option<Vec<u8>> {
    let decoded = base64_decode(encoded)?;
    if decoded.len() < 20 {
        return None;
    }
    let salt = &decoded[20..];
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key);
    ctx.update(salt);
    let mut raw = ctx.finish().as_ref().to_vec();
    raw.extend_from_slice(salt);
    let mut out = b"{SSHA}".to_vec();
    base64_encode(&raw, &mut out);
    Some(out)
}

/// glibc's SHA-crypt: `[rounds=N$]SALT$HASH` after `$5$`/`$6$`; the
/// rounds clamped to 1000..=999999999 and the salt cut at 16 characters,
/// as glibc does (so an entry it would never produce does not match).
fn sha_crypt(key: &[u8], rest: &[u8], sha512: bool) -> Option<Vec<u8>> {
    let rest = std::str::from_utf8(rest).ok()?;
    let (rounds, rest, custom) = match rest.strip_prefix("rounds=") {
        Some(r) => {
            let (n, rest) = r.split_once('$')?;
            let n: u64 = n.parse().ok()?;
            (n.clamp(1000, 999_999_999) as usize, rest, true)
        }
        None => (5000, rest, false),
    };
    let salt_end = rest.find('$').unwrap_or(rest.len());
    let salt = &rest[..salt_end.min(16)];
    let hash = if sha512 {
        let p = sha_crypt::Sha512Params::new(rounds).ok()?;
        sha_crypt::sha512_crypt_b64(key, salt.as_bytes(), &p).ok()?
    } else {
        let p = sha_crypt::Sha256Params::new(rounds).ok()?;
        sha_crypt::sha256_crypt_b64(key, salt.as_bytes(), &p).ok()?
    };
    let mut out = String::from(if sha512 { "$6$" } else { "$5$" });
    if custom {
        out.push_str(&format!("rounds={rounds}$"));
    }
    out.push_str(salt);
    out.push('$');
    out.push_str(&hash);
    Some(out.into_bytes())
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(data: &[u8], out: &mut Vec<u8>) {
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((v >> (18 - 6 * i)) & 0x3f) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

fn b64_value(c: u8) -> Option<u32> {
    B64.iter().position(|&x| x == c).map(|v| v as u32)
}

/// nginx's `ngx_decode_base64`: decodes up to the first `=` (what follows
/// it is ignored); any other character outside the alphabet, or a run of
/// 4n+1 characters, is an error.
pub fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let n = s.iter().position(|&c| c == b'=').unwrap_or(s.len());
    if s[..n].iter().any(|&c| b64_value(c).is_none()) {
        return None;
    }
    if n % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(n / 4 * 3 + 2);
    for chunk in s[..n].chunks(4) {
        let mut v = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            v |= b64_value(c).unwrap_or(0) << (18 - 6 * i);
        }
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_lookup_as_nginx() {
        let f: &[u8] = b"# comment\nalice:{PLAIN}one:comment\r\nbob:{PLAIN}two\r\n\nal:{PLAIN}x\nbob:{PLAIN}second\ncarol:{PLAIN}end";
        let find = |text: &[u8], u: &[u8]| lookup(text, u).unwrap();
        assert_eq!(find(f, b"alice").as_deref(), Some(&b"{PLAIN}one"[..]));
        assert_eq!(find(f, b"bob").as_deref(), Some(&b"{PLAIN}two"[..]));
        assert_eq!(find(f, b"al").as_deref(), Some(&b"{PLAIN}x"[..]));
        assert_eq!(find(f, b"carol").as_deref(), Some(&b"{PLAIN}end"[..]));
        assert_eq!(find(f, b"# comment"), None);
        assert_eq!(find(f, b"dave"), None);
        assert_eq!(find(b"\ralice:{PLAIN}x", b"alice"), None);
        assert_eq!(
            find(b"ali\nalice:{PLAIN}x\nalice:{PLAIN}y", b"alice").as_deref(),
            Some(&b"{PLAIN}y"[..])
        );
        // A field across the 2 KiB reads, and one too long to be a hash.
        let mut long = vec![b'#'; 3000];
        long.extend_from_slice(b"\nu:{PLAIN}");
        long.extend(std::iter::repeat_n(b'p', 2000));
        assert_eq!(find(&long, b"u").map(|v| v.len()), Some(2007));
        let mut huge = b"u:".to_vec();
        huge.extend(std::iter::repeat_n(b'p', 10_000));
        assert_eq!(find(&huge, b"u"), Some(Vec::new()));
    }

    // Known answers made with `openssl passwd` (`-apr1`, `-1`, `-5`, `-6`
    // with `-salt`) and `slappasswd`-style {SHA}/{SSHA}.
    #[test]
    fn formats() {
        assert!(verify(b"secret", b"{PLAIN}secret"));
        assert!(!verify(b"secreT", b"{PLAIN}secret"));
        // printf secret | openssl sha1 -binary | base64
        assert!(verify(b"secret", b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="));
        assert!(!verify(b"Secret", b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="));
        let mut ssha_raw = digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, b"secretSALT")
            .as_ref()
            .to_vec();
        ssha_raw.extend_from_slice(b"SALT");
        let mut ssha_line = b"{SSHA}".to_vec();
        base64_encode(&ssha_raw, &mut ssha_line);
        assert!(verify(b"secret", &ssha_line));
        assert!(!verify(b"secrex", &ssha_line));
        assert!(!verify(b"secret", b"{SSHA}c2hvcnQ="));
        assert!(verify(b"secret", b"$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0"));
        assert!(verify(b"secret", b"$1$saltsalt$9xy1btjgzLYfb7hivXtC//"));
        assert!(verify(
            b"secret",
            b"$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA"
        ));
        assert!(!verify(
            b"secreu",
            b"$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA"
        ));
        assert!(verify(b"secret", b"$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq.H91p5hVO1"));
        // A 19-character salt: glibc and openssl use the first 16.
        assert!(verify(b"secret", b"$6$abcdefghijklmnop$J/AWykHqo2Tx5UtavGnFc3ytI33la50JpzLTarSWVhkIXK6wOjNwwZjsrIw2UgmrER2EKrSHCeQyAINEEXAk1/"));
        assert!(!verify(b"secret", b"abJnggxhB/yWI"));
        assert!(!verify(b"secret", b""));
    }

    #[test]
    fn base64_as_nginx() {
        assert_eq!(base64_decode(b"dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(base64_decode(b"dXNlcjpw").unwrap(), b"user:p");
        assert_eq!(base64_decode(b"dXNlcjo=").unwrap(), b"user:");
        assert_eq!(base64_decode(b"dXNlcjo").unwrap(), b"user:");
        assert_eq!(base64_decode(b"dXNlcjo= junk").unwrap(), b"user:");
        assert!(base64_decode(b"dXNlcjpwYXNz junk").is_none());
        assert!(base64_decode(b"dXNlc").is_none());
        let mut v = Vec::new();
        base64_encode(b"user:", &mut v);
        assert_eq!(v, b"dXNlcjo=");
    }
}
