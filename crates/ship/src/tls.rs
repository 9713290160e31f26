//! TLS to the server, on rustls (with the `ring` provider): what each `sslmode` verifies, as
//! libpq does. `verify-full` checks the chain against the root certificates and the host name
//! against the certificate; `verify-ca` the chain only; `require` nothing unless a root
//! certificate file is given (then as `verify-ca`, as libpq); `prefer` tries TLS unverified and
//! falls back to plain text.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::conninfo::{Conn, SslMode};

/// How a connection is made: in plain text, or over TLS with this connector.
pub enum Tls {
    Plain,
    Rustls(Box<MakeRustlsConnect>),
}

/// The connector for `conn`'s `sslmode`, or why there is none (a root certificate file that
/// cannot be read).
pub fn connector(conn: &Conn) -> Result<Tls, String> {
    // ring, not aws-lc-rs: it builds with the C compiler alone (aws-lc-sys wants CMake and adds
    // minutes to every build here). rustls 0.23.48 marks it deprecated for lacking post-quantum
    // key exchange, which PostgreSQL 15's OpenSSL does not offer either.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let verify = match (conn.ssl, &conn.root_cert) {
        (SslMode::Disable, _) => return Ok(Tls::Plain),
        (SslMode::Prefer, _) | (SslMode::Require, None) => Verify::Nothing,
        (SslMode::Require, Some(_)) | (SslMode::VerifyCa, _) => Verify::Chain,
        (SslMode::VerifyFull, _) => Verify::ChainAndName,
    };
    let config = match verify {
        Verify::Nothing => {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(Unverified(provider))).with_no_client_auth()
        }
        Verify::Chain | Verify::ChainAndName => {
            let roots = Arc::new(root_store(conn)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| format!("TLS: the root certificates: {e}"))?;
            if verify == Verify::Chain {
                builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly(webpki))).with_no_client_auth()
            } else {
                builder.with_webpki_verifier(webpki).with_no_client_auth()
            }
        }
    };
    Ok(Tls::Rustls(Box::new(MakeRustlsConnect::new(config))))
}

/// What the shipper warns about at start: a connection over the network that does not verify
/// whom it talks to (`require` without root certificates), or may not even be encrypted
/// (`prefer`, the default, and `allow`: an attacker on the path can answer that the server has
/// no TLS). None over a Unix socket, or when the server is verified.
pub fn warning(conn: &Conn) -> Option<&'static str> {
    let tcp = conn.dsn.parse::<postgres::Config>().is_ok_and(|c| {
        c.get_hosts().iter().any(|h| matches!(h, postgres::config::Host::Tcp(_))) || !c.get_hostaddrs().is_empty()
    });
    match conn.ssl {
        SslMode::Require if conn.root_cert.is_none() => Some(
            "sslmode=require without a root certificate: the connection is encrypted, but the server's certificate is not verified, so an impostor on the path is not told apart; use sslmode=verify-full with sslrootcert",
        ),
        SslMode::Prefer if tcp => Some(
            "sslmode=prefer (the default): the server is not verified and an attacker on the path can make the connection plain text, source token and password included; use sslmode=verify-full with sslrootcert",
        ),
        SslMode::Disable if tcp => Some(
            "sslmode=disable over the network: transcripts, the source token and the password cross it in plain text; use sslmode=verify-full with sslrootcert",
        ),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verify {
    Nothing,
    Chain,
    ChainAndName,
}

fn root_store(conn: &Conn) -> Result<RootCertStore, String> {
    let path = conn.root_cert.as_ref().ok_or_else(|| {
        "sslmode verify-ca and verify-full need the root certificates: sslrootcert=<file> (or PGSSLROOTCERT, or ~/.postgresql/root.crt)".to_owned()
    })?;
    let shown = path.display();
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| format!("sslrootcert {shown}: {e}"))? {
        let cert = cert.map_err(|e| format!("sslrootcert {shown}: {e}"))?;
        store.add(cert).map_err(|e| format!("sslrootcert {shown}: {e}"))?;
    }
    if store.is_empty() {
        return Err(format!("sslrootcert {shown} holds no certificate"));
    }
    Ok(store)
}

/// `verify-ca`: the chain as webpki checks it, any host name. Webpki checks the name only after
/// the chain, so a name error means the chain held.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require` without root certificates and `prefer`: encrypted, the certificate not checked
/// (the handshake's signatures still are, with the certificate's key).
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn conn(ssl: SslMode, root: Option<&str>) -> Conn {
        Conn { dsn: String::new(), ssl, root_cert: root.map(PathBuf::from) }
    }

    #[test]
    fn each_mode_gets_its_connector_and_verifying_modes_need_readable_roots() {
        assert!(matches!(connector(&conn(SslMode::Disable, None)), Ok(Tls::Plain)));
        assert!(matches!(connector(&conn(SslMode::Prefer, None)), Ok(Tls::Rustls(_))));
        assert!(matches!(connector(&conn(SslMode::Require, None)), Ok(Tls::Rustls(_))));
        let e = connector(&conn(SslMode::VerifyFull, None)).err().unwrap();
        assert!(e.contains("sslrootcert"), "{e}");
        let e = connector(&conn(SslMode::VerifyCa, Some("/nonexistent/ca.pem"))).err().unwrap();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        let empty = std::env::temp_dir().join(format!("cb-ship-empty-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = connector(&conn(SslMode::VerifyFull, empty.to_str())).err().unwrap();
        assert!(e.contains("no certificate"), "{e}");
        let _ = std::fs::remove_file(&empty);
        assert!(warning(&conn(SslMode::Require, None)).is_some_and(|w| w.contains("require")));
        assert!(warning(&conn(SslMode::Require, Some("/r.pem"))).is_none());
        assert!(warning(&conn(SslMode::VerifyFull, Some("/r.pem"))).is_none());
        let over = |ssl, dsn: &str| Conn { dsn: dsn.to_owned(), ssl, root_cert: None };
        assert!(warning(&over(SslMode::Prefer, "host=db.example")).is_some_and(|w| w.contains("prefer")));
        assert!(warning(&over(SslMode::Disable, "host=10.0.0.1")).is_some());
        assert!(warning(&over(SslMode::Prefer, "host=/run/postgresql")).is_none(), "a Unix socket");
    }
}
