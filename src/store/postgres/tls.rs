//! TLS to PostgreSQL with rustls, as libpq's `sslmode` means it: `disable` (and `allow`,
//! `prefer`: no TLS), `require` (encrypted; the certificate checked against `sslrootcert` when
//! one is given, else not checked), `verify-ca` (the chain checked against `sslrootcert`), and
//! `verify-full` (the chain and the host name).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme,
};

/// How a connection is secured (`sslmode` and `sslrootcert` of the connection string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsMode {
    Disable,
    Require { roots: Option<PathBuf> },
    VerifyCa { roots: PathBuf },
    VerifyFull { roots: PathBuf },
}

impl TlsMode {
    /// From `sslmode` (default `disable`) and `sslrootcert`.
    pub fn parse(sslmode: Option<&str>, rootcert: Option<&str>) -> Result<TlsMode, String> {
        let roots = rootcert.map(PathBuf::from);
        let needs = |mode: &str| {
            roots.clone().ok_or_else(|| {
                format!("sslmode={mode} needs sslrootcert=FILE (the CA certificates, PEM)")
            })
        };
        match sslmode.unwrap_or("disable") {
            "disable" | "allow" | "prefer" => Ok(TlsMode::Disable),
            "require" => Ok(TlsMode::Require { roots }),
            "verify-ca" => Ok(TlsMode::VerifyCa {
                roots: needs("verify-ca")?,
            }),
            "verify-full" => Ok(TlsMode::VerifyFull {
                roots: needs("verify-full")?,
            }),
            other => Err(format!(
                "sslmode={other}: expected disable, prefer, require, verify-ca or verify-full"
            )),
        }
    }

    /// The rustls configuration for this mode (`None`: no TLS).
    pub fn client_config(&self) -> Result<Option<ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let (roots, check_name) = match self {
            TlsMode::Disable => return Ok(None),
            TlsMode::VerifyFull { roots } => {
                let roots = read_roots(roots)?;
                return Ok(Some(
                    builder.with_root_certificates(roots).with_no_client_auth(),
                ));
            }
            TlsMode::VerifyCa { roots } => (Some(read_roots(roots)?), false),
            TlsMode::Require { roots } => (roots.as_deref().map(read_roots).transpose()?, false),
        };
        let chain = roots
            .map(|r| {
                WebPkiServerVerifier::builder_with_provider(Arc::new(r), provider.clone())
                    .build()
                    .map_err(|e| e.to_string())
            })
            .transpose()?;
        let verifier = Verifier {
            chain,
            check_name,
            provider,
        };
        Ok(Some(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth(),
        ))
    }
}

/// The CA certificates of a PEM file.
fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!(
            "sslrootcert {}: no certificate in it",
            path.display()
        ));
    }
    Ok(roots)
}

/// `require` and `verify-ca`: the chain checked when there are roots to check it against, the
/// host name never; the handshake's signatures always.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_libpq_reads_them() {
        assert_eq!(TlsMode::parse(None, None), Ok(TlsMode::Disable));
        assert_eq!(TlsMode::parse(Some("prefer"), None), Ok(TlsMode::Disable));
        assert_eq!(
            TlsMode::parse(Some("require"), None),
            Ok(TlsMode::Require { roots: None })
        );
        assert_eq!(
            TlsMode::parse(Some("verify-full"), Some("/ca.pem")),
            Ok(TlsMode::VerifyFull {
                roots: "/ca.pem".into()
            })
        );
        assert!(TlsMode::parse(Some("verify-full"), None)
            .unwrap_err()
            .contains("sslrootcert"));
        assert!(TlsMode::parse(Some("strict"), None).is_err());
        // A missing CA file is an error at once, not at the first connection.
        let e = TlsMode::VerifyCa {
            roots: "/nonexistent/ca.pem".into(),
        }
        .client_config()
        .unwrap_err();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        assert!(TlsMode::Require { roots: None }
            .client_config()
            .unwrap()
            .is_some());
    }
}
