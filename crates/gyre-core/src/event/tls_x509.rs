//! What nginx's `ngx_ssl_get_*` read from a peer certificate for
//! variables: subject and issuer as RFC 2253 strings (`$ssl_client_s_dn`,
//! `$ssl_client_i_dn`) and the serial number (`$ssl_client_serial`), from
//! the certificate's DER with a small reader of the few fields needed. The
//! certificate has already been parsed by rustls/webpki during the
//! handshake; anything unexpected here yields `None`, never a panic.

/// One DER element: (tag, contents, rest).
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *b.first()?;
    let first = *b.get(1)? as usize;
    let (len, hdr) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *b.get(2 + i)? as usize;
        }
        (len, 2 + n)
    };
    let end = hdr.checked_add(len)?;
    let body = b.get(hdr..end)?;
    Some((tag, body, &b[end..]))
}

/// The fields of TBSCertificate up to the subject.
struct Tbs<'a> {
    serial: &'a [u8],
    issuer: &'a [u8],
    subject: &'a [u8],
}

fn tbs(der: &[u8]) -> Option<Tbs<'_>> {
    let (_, cert, _) = tlv(der)?;
    let (_, tbs, _) = tlv(cert)?;
    let (mut tag, mut body, mut rest) = tlv(tbs)?;
    if tag == 0xa0 {
        // [0] version
        (tag, body, rest) = tlv(rest)?;
    }
    if tag != 0x02 {
        return None;
    }
    let serial = body;
    let (_, _sigalg, rest) = tlv(rest)?;
    let (_, issuer, rest) = tlv(rest)?;
    let (_, _validity, rest) = tlv(rest)?;
    let (_, subject, _) = tlv(rest)?;
    Some(Tbs {
        serial,
        issuer,
        subject,
    })
}

/// `$ssl_client_serial`: the serial in upper-case hex, as OpenSSL prints it.
pub fn serial_hex(der: &[u8]) -> Option<String> {
    let t = tbs(der)?;
    let mut s = t.serial;
    // DER's sign byte is not part of the number.
    while s.len() > 1 && s[0] == 0 {
        s = &s[1..];
    }
    let mut out = String::with_capacity(s.len() * 2);
    for b in s {
        out.push_str(&format!("{b:02X}"));
    }
    Some(out)
}

/// `$ssl_client_s_dn` (RFC 2253: the last RDN first, `CN=client,O=Org`).
pub fn subject_dn(der: &[u8]) -> Option<String> {
    name_rfc2253(tbs(der)?.subject)
}

/// `$ssl_client_i_dn`.
pub fn issuer_dn(der: &[u8]) -> Option<String> {
    name_rfc2253(tbs(der)?.issuer)
}

/// The certificate names itself as its issuer (a self-signed leaf).
pub fn self_issued(der: &[u8]) -> bool {
    tbs(der).is_some_and(|t| t.issuer == t.subject)
}

fn name_rfc2253(mut name: &[u8]) -> Option<String> {
    let mut rdns = Vec::new();
    // Bounded by the name's length: every pass consumes an element.
    while !name.is_empty() {
        let (_, set, rest) = tlv(name)?;
        name = rest;
        let mut set = set;
        let mut parts = Vec::new();
        while !set.is_empty() {
            let (_, atv, rest) = tlv(set)?;
            set = rest;
            let (_, oid, rest) = tlv(atv)?;
            let (_, value, _) = tlv(rest)?;
            parts.push(format!("{}={}", oid_name(oid), escape(value)));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// OpenSSL's short names for the usual attributes; others as dotted OIDs.
fn oid_name(oid: &[u8]) -> String {
    match oid {
        [0x55, 0x04, 0x03] => "CN".into(),
        [0x55, 0x04, 0x06] => "C".into(),
        [0x55, 0x04, 0x07] => "L".into(),
        [0x55, 0x04, 0x08] => "ST".into(),
        [0x55, 0x04, 0x0a] => "O".into(),
        [0x55, 0x04, 0x0b] => "OU".into(),
        [0x55, 0x04, 0x05] => "serialNumber".into(),
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "emailAddress".into(),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC".into(),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID".into(),
        _ => dotted(oid),
    }
}

fn dotted(oid: &[u8]) -> String {
    let mut out = String::new();
    let mut v: u64 = 0;
    for (i, b) in oid.iter().enumerate() {
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if out.is_empty() && i < 8 {
                let (a, b) = if v < 80 {
                    (v / 40, v % 40)
                } else {
                    (2, v - 80)
                };
                out = format!("{a}.{b}");
            } else {
                out.push_str(&format!(".{v}"));
            }
            v = 0;
        }
    }
    out
}

/// RFC 2253 escaping of a string value (`,+"\<>;` and leading `#`/space).
fn escape(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    let mut out = String::with_capacity(s.len());
    for (i, ch) in s.chars().enumerate() {
        let special = matches!(ch, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (ch == '#' || ch == ' '));
        if special {
            out.push('\\');
        }
        out.push(ch);
    }
    if out.ends_with(' ') {
        out.pop();
        out.push_str("\\ ");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_an_rcgen_certificate() {
        let mut p = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CountryName, "DE");
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "A, B");
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "client");
        p.serial_number = Some(rcgen::SerialNumber::from_slice(&[0x00, 0x9a, 0x01]));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        let der = cert.der();
        assert_eq!(subject_dn(der).unwrap(), "CN=client,O=A\\, B,C=DE");
        assert_eq!(issuer_dn(der).unwrap(), "CN=client,O=A\\, B,C=DE");
        assert_eq!(serial_hex(der).unwrap(), "9A01");
        assert!(self_issued(der));
        // Truncations never panic.
        for n in 0..der.len() {
            let _ = subject_dn(&der[..n]);
            let _ = serial_hex(&der[..n]);
        }
    }
}
