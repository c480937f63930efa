//! OpenSSL's cipher configuration strings, for every TLS listener (nginx's
//! `ssl_ciphers`, Redis's `tls-ciphers` and `tls-ciphersuites`).
//!
//! TLS 1.2: OpenSSL cipher strings (`HIGH:!aNULL:!MD5`,
//! `ECDHE+AESGCM:!ECDSA`, explicit names) mapped onto the TLS 1.2 suites
//! rustls has, with OpenSSL's list operations (`!` delete for good, `-`
//! delete, `+` move to the end, `A+B` intersection, `@STRENGTH`).
//!
//! rustls has six TLS 1.2 suites (ECDHE with ECDSA or RSA, AES-GCM or
//! ChaCha20-Poly1305); a name or alias OpenSSL knows for other suites (RSA
//! key exchange, DHE, CBC, RC4, 3DES, ...) is accepted and selects nothing,
//! as it would on an OpenSSL build without them. A word OpenSSL does not
//! know is a configuration error naming it (OpenSSL would skip it silently).
//! TLS 1.3 suites are not governed by this directive, as in nginx.

use rustls::crypto::aws_lc_rs::cipher_suite as cs;
use rustls::SupportedCipherSuite;

/// One TLS 1.2 suite and the OpenSSL attributes aliases select on.
struct Suite {
    name: &'static str,
    suite: SupportedCipherSuite,
    ecdsa: bool,
    /// AES-256 (256-bit), ChaCha20 (256-bit) or AES-128.
    enc: Enc,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Enc {
    Aes256Gcm,
    Chacha20,
    Aes128Gcm,
}

impl Suite {
    fn bits(&self) -> u32 {
        match self.enc {
            Enc::Aes128Gcm => 128,
            _ => 256,
        }
    }
}

/// OpenSSL's default order for these six.
fn suites() -> [Suite; 6] {
    [
        Suite {
            name: "ECDHE-ECDSA-AES256-GCM-SHA384",
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            ecdsa: true,
            enc: Enc::Aes256Gcm,
        },
        Suite {
            name: "ECDHE-RSA-AES256-GCM-SHA384",
            suite: cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            ecdsa: false,
            enc: Enc::Aes256Gcm,
        },
        Suite {
            name: "ECDHE-ECDSA-CHACHA20-POLY1305",
            suite: cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            ecdsa: true,
            enc: Enc::Chacha20,
        },
        Suite {
            name: "ECDHE-RSA-CHACHA20-POLY1305",
            suite: cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ecdsa: false,
            enc: Enc::Chacha20,
        },
        Suite {
            name: "ECDHE-ECDSA-AES128-GCM-SHA256",
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ecdsa: true,
            enc: Enc::Aes128Gcm,
        },
        Suite {
            name: "ECDHE-RSA-AES128-GCM-SHA256",
            suite: cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            ecdsa: false,
            enc: Enc::Aes128Gcm,
        },
    ]
}

/// The OpenSSL name of a rustls suite (nginx's `$ssl_cipher`), TLS 1.3 ones
/// included.
pub fn openssl_name(s: rustls::CipherSuite) -> &'static str {
    use rustls::CipherSuite as C;
    match s {
        C::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        C::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        C::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        other => suites()
            .into_iter()
            .find(|x| x.suite.suite() == other)
            .map_or("", |x| x.name),
    }
}

/// The TLS 1.3 suites of an OpenSSL ciphersuites string
/// (`SSL_CTX_set_ciphersuites`: names joined by `:`, in preference order;
/// Redis's `tls-ciphersuites`). OpenSSL skips names it does not know and
/// fails only when nothing is left; a name rustls lacks (the two CCM
/// suites) is skipped the same way.
pub fn parse_tls13(spec: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    for name in spec.split(':').filter(|n| !n.is_empty()) {
        let s = match name {
            "TLS_AES_128_GCM_SHA256" => cs::TLS13_AES_128_GCM_SHA256,
            "TLS_AES_256_GCM_SHA384" => cs::TLS13_AES_256_GCM_SHA384,
            "TLS_CHACHA20_POLY1305_SHA256" => cs::TLS13_CHACHA20_POLY1305_SHA256,
            _ => continue,
        };
        if !out.iter().any(|o| o.suite() == s.suite()) {
            out.push(s);
        }
    }
    if out.is_empty() && !spec.is_empty() {
        return Err(format!(
            "SSL_CTX_set_ciphersuites(\"{spec}\") failed (no ciphersuite match)"
        ));
    }
    Ok(out)
}

/// Aliases and names OpenSSL knows that select none of rustls's suites.
const UNAVAILABLE: &[&str] = &[
    "aNULL",
    "eNULL",
    "NULL",
    "COMPLEMENTOFALL",
    "MD5",
    "RC4",
    "RC2",
    "3DES",
    "DES",
    "EXPORT",
    "EXP",
    "LOW",
    "MEDIUM",
    "PSK",
    "kPSK",
    "aPSK",
    "ECDHEPSK",
    "DHEPSK",
    "RSAPSK",
    "SRP",
    "kSRP",
    "aSRP",
    "CAMELLIA",
    "CAMELLIA128",
    "CAMELLIA256",
    "SEED",
    "IDEA",
    "ARIA",
    "ARIA128",
    "ARIA256",
    "ARIAGCM",
    "DSS",
    "aDSS",
    "DH",
    "kDH",
    "kDHE",
    "kEDH",
    "EDH",
    "DHE",
    "ADH",
    "AECDH",
    "kRSA",
    "RSA+kRSA",
    "SHA1",
    "SHA",
    "AESCCM",
    "AESCCM8",
    "CCM",
    "CCM8",
    "aGOST",
    "aGOST01",
    "kGOST",
    "GOST89MAC",
    "GOST94",
    "SSLv3",
    "TLSv1",
    "TLSv1.0",
    "aECDH",
    "kECDH",
    "AES128-SHA",
    "AES256-SHA",
    "AES128-SHA256",
    "AES256-SHA256",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-CCM",
    "AES256-CCM",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-RSA-AES256-SHA",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-ECDSA-AES128-CCM",
    "ECDHE-ECDSA-AES256-CCM",
    "DHE-RSA-AES128-GCM-SHA256",
    "DHE-RSA-AES256-GCM-SHA384",
    "DHE-RSA-CHACHA20-POLY1305",
    "DHE-RSA-AES128-SHA",
    "DHE-RSA-AES256-SHA",
    "DHE-RSA-AES128-SHA256",
    "DHE-RSA-AES256-SHA256",
    "DHE-DSS-AES128-GCM-SHA256",
    "DHE-DSS-AES256-GCM-SHA384",
    "DES-CBC3-SHA",
    "ECDHE-RSA-DES-CBC3-SHA",
    "EDH-RSA-DES-CBC3-SHA",
    "RC4-SHA",
    "RC4-MD5",
    "ECDHE-RSA-RC4-SHA",
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_AES_128_CCM_SHA256",
    "TLS_AES_128_CCM_8_SHA256",
];

/// Whether `s` is selected by one alias or name; `None` for a word OpenSSL
/// does not know.
fn selects(word: &str, s: &Suite) -> Option<bool> {
    if suites().iter().any(|x| x.name == word) {
        return Some(word == s.name);
    }
    Some(match word {
        "ALL" | "HIGH" | "DEFAULT" | "TLSv1.2" | "ECDHE" | "EECDH" | "kECDHE" | "kEECDH"
        | "AEAD" | "FIPS" | "SUITEB128" => true,
        "ECDSA" | "aECDSA" => s.ecdsa,
        "RSA" | "aRSA" => !s.ecdsa,
        "AESGCM" => s.enc != Enc::Chacha20,
        "AES" => s.enc != Enc::Chacha20,
        "AES256" => s.enc == Enc::Aes256Gcm,
        "AES128" => s.enc == Enc::Aes128Gcm,
        "CHACHA20" => s.enc == Enc::Chacha20,
        "SHA384" => s.enc == Enc::Aes256Gcm,
        "SHA256" => s.enc != Enc::Aes256Gcm,
        "COMPLEMENTOFDEFAULT" => false,
        w if UNAVAILABLE.contains(&w) => false,
        _ => return None,
    })
}

/// The TLS 1.2 suites `spec` selects, in order. Errors name the word that
/// OpenSSL does not know, or say that nothing matched (OpenSSL's `no cipher
/// match`).
pub fn parse(spec: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let all = suites();
    // Indices into `all`, in list order; `banned` can never come back.
    let mut list: Vec<usize> = Vec::new();
    let mut banned = [false; 6];
    for elem in spec.split([':', ' ', ',', ';']).filter(|e| !e.is_empty()) {
        if elem == "@STRENGTH" {
            list.sort_by_key(|&i| std::cmp::Reverse(all[i].bits()));
            continue;
        }
        if elem.starts_with("@SECLEVEL=") {
            continue;
        }
        let (op, body) = match elem.as_bytes()[0] {
            b'!' | b'-' | b'+' => (elem.as_bytes()[0], &elem[1..]),
            _ => (b' ', elem),
        };
        let mut matched = [true; 6];
        for word in body.split('+') {
            for (i, s) in all.iter().enumerate() {
                match selects(word, s) {
                    Some(yes) => matched[i] &= yes,
                    None => {
                        return Err(format!(
                            "SSL_CTX_set_cipher_list(\"{spec}\") failed (unknown cipher \"{word}\")"
                        ))
                    }
                }
            }
        }
        for (i, &m) in matched.iter().enumerate() {
            if !m {
                continue;
            }
            match op {
                b'!' => {
                    banned[i] = true;
                    list.retain(|&x| x != i);
                }
                b'-' => list.retain(|&x| x != i),
                b'+' => {
                    if let Some(p) = list.iter().position(|&x| x == i) {
                        list.remove(p);
                        list.push(i);
                    }
                }
                _ => {
                    if !banned[i] && !list.contains(&i) {
                        list.push(i);
                    }
                }
            }
        }
    }
    if list.is_empty() {
        return Err(format!(
            "SSL_CTX_set_cipher_list(\"{spec}\") failed (SSL: no cipher match)"
        ));
    }
    Ok(list.into_iter().map(|i| all[i].suite).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(spec: &str) -> Vec<&'static str> {
        let all = suites();
        parse(spec)
            .unwrap()
            .into_iter()
            .map(|s| {
                all.iter()
                    .find(|x| x.suite.suite() == s.suite())
                    .unwrap()
                    .name
            })
            .collect()
    }

    #[test]
    fn nginx_default_selects_all_six_in_openssl_order() {
        assert_eq!(
            names("HIGH:!aNULL:!MD5"),
            [
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES256-GCM-SHA384",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
            ]
        );
    }

    #[test]
    fn intersection_exclusion_and_move() {
        // As `openssl ciphers -s -tls1_2 'ECDHE+AESGCM:!ECDSA'` prints.
        assert_eq!(
            names("ECDHE+AESGCM:!ECDSA"),
            ["ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES128-GCM-SHA256"]
        );
        assert_eq!(
            names("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:+AES128"),
            [
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES128-GCM-SHA256"
            ]
        );
        // `!` is for good, `-` is not.
        assert_eq!(names("!CHACHA20:ALL"), names("ALL:!CHACHA20"));
        assert_eq!(names("-CHACHA20:CHACHA20").len(), 2);
        assert_eq!(
            names("AES128:@STRENGTH:AES256")[0],
            "ECDHE-ECDSA-AES128-GCM-SHA256"
        );
        assert_eq!(
            names("AES128:AES256:@STRENGTH")[0],
            "ECDHE-ECDSA-AES256-GCM-SHA384"
        );
        // Real names rustls lacks select nothing, the rest stays.
        assert_eq!(
            names("AES128-SHA:DHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305"),
            ["ECDHE-RSA-CHACHA20-POLY1305"]
        );
    }

    #[test]
    fn unknown_word_and_empty_result_are_errors() {
        let e = parse("HIGH:FOO").unwrap_err();
        assert!(e.contains("unknown cipher \"FOO\""), "{e}");
        let e = parse("RC4:3DES").unwrap_err();
        assert!(e.contains("no cipher match"), "{e}");
        let e = parse("ECDHE+BAR").unwrap_err();
        assert!(e.contains("\"BAR\""), "{e}");
    }
}

#[cfg(test)]
mod tls13_tests {
    use super::*;

    #[test]
    fn ciphersuites_keep_order_and_skip_unknown_names() {
        let got: Vec<_> = parse_tls13(
            "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_CCM_SHA256:TLS_AES_256_GCM_SHA384",
        )
        .unwrap()
        .into_iter()
        .map(|s| openssl_name(s.suite()))
        .collect();
        assert_eq!(
            got,
            ["TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_256_GCM_SHA384"]
        );
        assert!(parse_tls13("").unwrap().is_empty());
        let e = parse_tls13("TLS_NOPE").unwrap_err();
        assert!(e.contains("no ciphersuite match"), "{e}");
    }
}
