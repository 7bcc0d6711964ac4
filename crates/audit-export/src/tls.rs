//! The TLS side of an `https://` endpoint: which server certificates are
//! trusted (the configured CA file, else the platform's roots) and which
//! client certificate is presented (mTLS), read from their PEM files and
//! built into one rustls client configuration (ring provider) when the
//! exporter starts. It always verifies the collector's certificate and
//! name: nothing here can turn verification off. It opens no connection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use crate::config::{ConfigError, ExportConfig};

const CERTIFICATE: &str = "OTLP certificate";
const CLIENT_CERTIFICATE: &str = "OTLP client certificate";
const CLIENT_KEY: &str = "OTLP client key";

/// Refuses certificate and key files that cannot be read or used, without
/// reading the platform's roots (the exporter does, when it starts).
pub(crate) fn check(config: &ExportConfig) -> Result<(), ConfigError> {
    build(config, RootCertStore::empty).map(|_| ())
}

/// The client configuration of the exporter: built once, when it starts.
pub(crate) fn client_config(config: &ExportConfig) -> Result<Arc<ClientConfig>, ConfigError> {
    build(config, platform_roots).map(Arc::new)
}

/// The platform's trusted roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` when
/// set). A certificate the store holds but cannot use is skipped; a store
/// with none leaves every collector untrusted, which each send reports.
fn platform_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    roots
}

fn build(
    config: &ExportConfig,
    platform: impl FnOnce() -> RootCertStore,
) -> Result<ClientConfig, ConfigError> {
    let roots = match &config.certificate {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for certificate in certificates(CERTIFICATE, path)? {
                roots.add(certificate).map_err(|error| ConfigError::TlsFile {
                    file: CERTIFICATE,
                    path: path.clone(),
                    reason: format!("holds a certificate that cannot be trusted as a CA: {error}"),
                })?;
            }
            roots
        }
        None => platform(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        // The ring provider offers TLS 1.3 and 1.2; kept an error, not a panic.
        .map_err(|_| ConfigError::InvalidEndpoint {
            endpoint: config.endpoint.clone(),
            reason: "this build's TLS provider offers no safe protocol version",
        })?
        .with_root_certificates(roots);
    match (&config.client_certificate, &config.client_key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(_), None) => Err(ConfigError::IncompleteClientIdentity(
            "an OTLP client certificate needs its client key \
             (OTEL_EXPORTER_OTLP_CLIENT_KEY, --otel-client-key, otel.clientKey)",
        )),
        (None, Some(_)) => Err(ConfigError::IncompleteClientIdentity(
            "an OTLP client key needs its client certificate \
             (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, --otel-client-certificate, otel.clientCertificate)",
        )),
        (Some(certificate), Some(key_path)) => {
            let chain = certificates(CLIENT_CERTIFICATE, certificate)?;
            let key = PrivateKeyDer::from_pem_file(key_path).map_err(|error| ConfigError::TlsFile {
                file: CLIENT_KEY,
                path: key_path.clone(),
                reason: if matches!(error, pem::Error::NoItemsFound) {
                    "holds no PEM private key".to_owned()
                } else {
                    unreadable(&error)
                },
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|error| ConfigError::TlsFile {
                    file: CLIENT_KEY,
                    path: key_path.clone(),
                    reason: format!("is not a usable key for the client certificate: {error}"),
                })
        }
    }
}

/// Every certificate of a PEM file; a file with none is refused.
fn certificates(file: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let invalid = |reason: String| ConfigError::TlsFile {
        file,
        path: PathBuf::from(path),
        reason,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|error| invalid(unreadable(&error)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| invalid(unreadable(&error)))?;
    if certificates.is_empty() {
        return Err(invalid("holds no PEM certificate".to_owned()));
    }
    Ok(certificates)
}

fn unreadable(error: &pem::Error) -> String {
    if let pem::Error::Io(error) = error {
        format!("cannot be read: {error}")
    } else {
        format!("is not valid PEM: {error}")
    }
}
