//! A test cluster CA (rcgen, as `redt certs init` issues them): node certificates that carry
//! `redt://node/<dc>/<node>`, client certificates that carry `redt://client/<name>`, and
//! certificates without an identity. Shared by the TLS tests of the TCP verbs (integration
//! tests) and of the RDMA bootstrap and `VerbsTls` (unit tests, through `#[path]`).

#![allow(dead_code)] // each test file uses part of it

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};
use redt_proto::CertIdentity;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA that issues test certificates.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    cert: CertificateDer<'static>,
}

/// What one holder presents and trusts: its chain, its key, the CA certificate.
pub struct Material {
    /// The holder's certificate.
    pub chain: Vec<CertificateDer<'static>>,
    /// Its private key.
    pub key: PrivateKeyDer<'static>,
    /// The CA certificate of the CA that issued it.
    pub ca: CertificateDer<'static>,
}

impl TestCa {
    /// A new self-signed CA called `name`.
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, format!("{name} test CA"));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).expect("a self-signed CA certificate").der().clone();
        TestCa { issuer: Issuer::new(params, key), cert }
    }

    /// A certificate valid for DNS name `name`, usable as server and client certificate,
    /// carrying `identity` as its URI SAN when given.
    pub fn issue(&self, name: &str, identity: Option<CertIdentity>) -> Material {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.subject_alt_names.push(SanType::DnsName(name.try_into().expect("a DNS name")));
        if let Some(id) = identity {
            params.subject_alt_names.push(SanType::URI(id.to_uri().try_into().expect("an ASCII URI")));
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).expect("a signed certificate");
        Material {
            chain: vec![cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
            ca: self.cert.clone(),
        }
    }

    /// A node certificate of node `name` in DC `dc`.
    pub fn node(&self, dc: &str, name: &str) -> Material {
        self.issue(name, Some(CertIdentity::Node { dc: dc.into(), name: name.into() }))
    }

    /// A client certificate called `name`.
    pub fn client(&self, name: &str) -> Material {
        self.issue(name, Some(CertIdentity::Client { name: name.into() }))
    }
}
