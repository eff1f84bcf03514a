//! TLS material: the receiver makes a fresh self-signed certificate for the name
//! [`SERVER_NAME`] at every start (nothing secret is stored in the repository) and can write it
//! to a file; the sender trusts exactly that certificate.

use crate::error::Error;
use std::path::Path;

/// The name the certificate is issued for and the sender connects to.
pub const SERVER_NAME: &str = "localhost";

/// A certificate and its private key, PEM.
pub struct Identity {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PEM (kept in memory only).
    pub key_pem: String,
}

/// A new self-signed certificate for [`SERVER_NAME`].
pub fn self_signed() -> Result<Identity, Error> {
    let c = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
        .map_err(|e| Error::Certificate(e.to_string()))?;
    Ok(Identity {
        cert_pem: c.cert.pem(),
        key_pem: c.key_pair.serialize_pem(),
    })
}

/// Write `pem` to `path` atomically (write a temporary file, then rename), so a sender that
/// polls for the file never reads half of it.
pub fn write_cert(path: &Path, pem: &str) -> Result<(), Error> {
    ccp_files::write_bytes(path, pem).map_err(|source| Error::CertificateFile {
        path: path.to_path_buf(),
        source,
    })
}

/// Read a PEM certificate.
pub fn read_cert(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::CertificateFile {
        path: path.to_path_buf(),
        source,
    })
}
