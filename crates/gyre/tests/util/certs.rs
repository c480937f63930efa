//! Test certificates made at test time: a CA and leaf certificates it
//! signed (ECDSA P-256 or RSA-2048), written as PEM files.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, KeyUsagePurpose};

pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    pub pem: PathBuf,
}

pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Clone, Copy)]
pub enum Alg {
    Ecdsa,
    Rsa,
}

fn keypair(alg: Alg) -> KeyPair {
    match alg {
        Alg::Ecdsa => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
        Alg::Rsa => KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap(),
    }
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = keypair(Alg::Ecdsa);
        let cert = p.self_signed(&key).unwrap();
        let pem = dir.join(format!("{name}.crt"));
        std::fs::write(&pem, cert.pem()).unwrap();
        Ca { cert, key, pem }
    }

    /// A leaf for `names` (DNS SANs), written as `<file>.crt` / `<file>.key`.
    pub fn leaf(&self, dir: &Path, file: &str, names: &[&str], alg: Alg) -> Leaf {
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name.push(
            rcgen::DnType::CommonName,
            names.first().copied().unwrap_or(file),
        );
        let key = keypair(alg);
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let leaf = Leaf {
            cert: dir.join(format!("{file}.crt")),
            key: dir.join(format!("{file}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }
}

impl Ca {
    /// An intermediate CA signed by this one, written as `<name>.crt`.
    pub fn intermediate(&self, dir: &Path, name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = keypair(Alg::Ecdsa);
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let pem = dir.join(format!("{name}.crt"));
        std::fs::write(&pem, cert.pem()).unwrap();
        Ca { cert, key, pem }
    }

    /// A leaf like [`Ca::leaf`] with a chosen serial number (for a CRL).
    pub fn leaf_with_serial(&self, dir: &Path, file: &str, names: &[&str], serial: u64) -> Leaf {
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name.push(
            rcgen::DnType::CommonName,
            names.first().copied().unwrap_or(file),
        );
        p.serial_number = Some(rcgen::SerialNumber::from(serial));
        let key = keypair(Alg::Ecdsa);
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let leaf = Leaf {
            cert: dir.join(format!("{file}.crt")),
            key: dir.join(format!("{file}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }

    /// A CRL of this CA revoking `serials`, valid until the end of
    /// `next_year` (a past year makes an expired list), written as
    /// `<file>.crl`.
    pub fn crl(&self, dir: &Path, file: &str, serials: &[u64], next_year: i32) -> PathBuf {
        let revoked = serials
            .iter()
            .map(|&n| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from(n),
                revocation_time: rcgen::date_time_ymd(2020, 1, 2),
                reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                invalidity_date: None,
            })
            .collect();
        let params = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(next_year, 12, 31),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: revoked,
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&self.cert, &self.key).unwrap();
        let path = dir.join(format!("{file}.crl"));
        std::fs::write(&path, crl.pem().unwrap()).unwrap();
        path
    }

    /// A client certificate (for mTLS) signed by this CA.
    pub fn client(&self, dir: &Path, file: &str, cn: &str) -> Leaf {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = keypair(Alg::Ecdsa);
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let leaf = Leaf {
            cert: dir.join(format!("{file}.crt")),
            key: dir.join(format!("{file}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }
}
