//! Errors of the QUIC datapath.

use std::path::PathBuf;

/// What can go wrong setting up or running QUIC flows.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket could not be created or bound.
    #[error("socket {addr}: {source}")]
    Socket {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The self-signed certificate could not be generated.
    #[error("generating the receiver's certificate: {0}")]
    Certificate(String),
    /// A certificate file could not be read or written.
    #[error("certificate file {}: {source}", path.display())]
    CertificateFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The TLS provider rejected its configuration.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// The s2n-quic endpoint could not start.
    #[error("starting the QUIC endpoint: {0}")]
    Start(String),
    /// The connection to the receiver failed (handshake, timeout, certificate).
    #[error("connecting to {to}: {why}")]
    Connect { to: String, why: String },
    /// A stream or connection failed while transferring.
    #[error("flow {flow}: {why}")]
    Transfer { flow: usize, why: String },
    /// The async runtime could not start.
    #[error("runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A configuration value is out of range.
    #[error("{0}")]
    Config(String),
}
