//! TLS to PostgreSQL as a URL's `sslmode` asks, with rustls.
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | absent, `disable` | no | |
//! | `prefer` | if the server offers it | not checked (as libpq) |
//! | `require` | yes | not checked, unless `sslrootcert` is given: then as `verify-ca` (as libpq) |
//! | `verify-ca` | yes | signed by `sslrootcert` (else the system's roots) |
//! | `verify-full` | yes | that, and issued for the host connected to |
//!
//! Unlike libpq, no `sslmode` means no TLS rather than `prefer`: an unchecked certificate guards
//! against nothing active, so a URL says what it wants. tokio-postgres itself knows only
//! `disable`, `prefer` and `require`; the rest is done here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// What a URL's `sslmode` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// A URL split into what tokio-postgres parses and what TLS needs.
#[derive(Debug)]
pub(crate) struct Split {
    /// The URL without `sslmode` and `sslrootcert`.
    pub(crate) url: String,
    pub(crate) mode: Mode,
    pub(crate) root_cert: Option<PathBuf>,
}

/// Takes `sslmode` and `sslrootcert` out of `url`'s query; an error for a mode libpq does not
/// have.
pub(crate) fn split(url: &str) -> Result<Split, String> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut mode = Mode::Disable;
    let mut root_cert = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                mode = match value {
                    "disable" => Mode::Disable,
                    "prefer" => Mode::Prefer,
                    "require" => Mode::Require,
                    "verify-ca" => Mode::VerifyCa,
                    "verify-full" => Mode::VerifyFull,
                    other => {
                        return Err(format!(
                            "sslmode={other}: expected disable, prefer, require, verify-ca or verify-full"
                        ));
                    }
                }
            }
            "sslrootcert" => root_cert = Some(PathBuf::from(percent_decode(value)?)),
            _ => kept.push(pair),
        }
    }
    if mode == Mode::Require && root_cert.is_some() {
        mode = Mode::VerifyCa;
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok(Split {
        url,
        mode,
        root_cert,
    })
}

/// The mode tokio-postgres negotiates with.
pub(crate) fn ssl_mode(mode: Mode) -> SslMode {
    match mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
    }
}

/// The connector for `split`'s mode: its certificate checks, and its roots read now.
pub(crate) fn connector(split: &Split) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let config = match split.mode {
        Mode::Disable | Mode::Prefer | Mode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(
                provider.signature_verification_algorithms,
            )))
            .with_no_client_auth(),
        Mode::VerifyCa | Mode::VerifyFull => {
            let roots = Arc::new(roots(split.root_cert.as_deref())?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| format!("TLS: {e}"))?;
            let verifier: Arc<dyn ServerCertVerifier> = if split.mode == Mode::VerifyCa {
                Arc::new(AnyName(webpki))
            } else {
                webpki
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth()
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The certificates of `path` (PEM), or the system's roots.
fn roots(path: Option<&Path>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match path {
        Some(path) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect())
                .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!(
                    "sslrootcert {}: no certificate in it",
                    path.display()
                ));
            }
            for c in certs {
                store
                    .add(c)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(
                    "verify-ca/verify-full: no system root certificates; give sslrootcert=PATH"
                        .to_owned(),
                );
            }
        }
    }
    Ok(store)
}

/// `%XX` escapes of a URL value (a path may hold them).
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("sslrootcert: bad percent escape in {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("sslrootcert: not UTF-8: {s:?}"))
}

/// `prefer` and `require`: encrypted, the certificate not checked (libpq's meaning of both).
/// Signatures are still verified, so the session is with whoever holds the certificate's key.
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name in it is not compared with the
/// host.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_the_url() {
        let s = split(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(s.url, "postgres://u@h/db?application_name=x");
        assert_eq!(s.mode, Mode::VerifyFull);
        assert_eq!(s.root_cert.as_deref(), Some(Path::new("/etc/ca.pem")));
        let s = split("postgres://u@h/db").unwrap();
        assert_eq!(
            (s.url.as_str(), s.mode),
            ("postgres://u@h/db", Mode::Disable)
        );
        // libpq: `require` with a root certificate checks the chain.
        let s = split("postgres://h/db?sslmode=require&sslrootcert=ca.pem").unwrap();
        assert_eq!(
            (s.url.as_str(), s.mode),
            ("postgres://h/db", Mode::VerifyCa)
        );
        let e = split("postgres://h/db?sslmode=allow-anything").unwrap_err();
        assert!(
            e.contains("sslmode=allow-anything: expected disable"),
            "{e}"
        );
        assert!(split("postgres://h/db?sslrootcert=%zz").is_err());
    }

    #[test]
    fn a_root_file_without_certificates_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty.pem");
        std::fs::write(&p, "not a certificate").unwrap();
        let s = Split {
            url: String::new(),
            mode: Mode::VerifyFull,
            root_cert: Some(p),
        };
        let e = connector(&s).err().unwrap();
        assert!(e.contains("no certificate in it"), "{e}");
        let missing = Split {
            root_cert: Some(dir.path().join("missing.pem")),
            ..s
        };
        assert!(connector(&missing).err().unwrap().contains("missing.pem"));
    }
}
