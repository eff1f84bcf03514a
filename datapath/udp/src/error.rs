//! Every error the transport reports to its caller: handshake failures (nobody answered, the
//! port was refused), a peer that went away mid-transfer, bad configuration and socket errors.
//!
//! Datagrams that fail to parse are never errors: they are ignored and counted where they arrive.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// An error from the sender, the receiver or the relay.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The HELLO handshake got no valid answer within the handshake timeout.
    #[error(
        "no ccp-udp receiver answered at {addr} within {}{}",
        HumanDuration(*timeout),
        ignored_note(*ignored)
    )]
    NoAnswer {
        /// Where the HELLOs went.
        addr: SocketAddr,
        /// The handshake timeout that expired.
        timeout: Duration,
        /// Datagrams from that address that were not a valid HELLO_ACK.
        ignored: u64,
    },
    /// The destination answered with ICMP port unreachable (ECONNREFUSED on the socket).
    #[error(
        "no ccp-udp receiver at {addr}: connection refused (ICMP port unreachable: nothing listens on that UDP port)"
    )]
    Refused {
        /// Where the HELLOs went.
        addr: SocketAddr,
    },
    /// The receiver stopped acknowledging an established flow.
    #[error(
        "the ccp-udp receiver at {addr} stopped answering flow {flow_id:08x}: {reason} after {:.1} s of transfer",
        elapsed.as_secs_f64()
    )]
    PeerLost {
        /// The receiver's address.
        addr: SocketAddr,
        /// The flow that lost its peer.
        flow_id: u32,
        /// What happened ("no ACK for 10 s", "connection refused").
        reason: String,
        /// How long the flow had been running.
        elapsed: Duration,
    },
    /// The configuration cannot work.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A worker thread died (a bug): its panic message.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

fn ignored_note(ignored: u64) -> String {
    if ignored == 0 {
        String::new()
    } else {
        format!(" ({ignored} invalid datagrams from it were ignored)")
    }
}

/// Formats a duration for people: "5 s", "1.5 s", "250 ms".
#[derive(Clone, Copy, Debug)]
pub struct HumanDuration(pub Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.subsec_nanos() == 0 {
            write!(f, "{} s", d.as_secs())
        } else if d < Duration::from_secs(1) {
            let ms = d.as_secs_f64() * 1e3;
            if ms.fract() == 0.0 {
                write!(f, "{ms:.0} ms")
            } else {
                write!(f, "{ms:.1} ms")
            }
        } else {
            write!(f, "{:.1} s", d.as_secs_f64())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_specific() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let e = Error::NoAnswer {
            addr,
            timeout: Duration::from_secs(5),
            ignored: 0,
        };
        assert_eq!(
            e.to_string(),
            "no ccp-udp receiver answered at 127.0.0.1:9 within 5 s"
        );
        let e = Error::NoAnswer {
            addr,
            timeout: Duration::from_millis(1500),
            ignored: 3,
        };
        assert_eq!(
            e.to_string(),
            "no ccp-udp receiver answered at 127.0.0.1:9 within 1.5 s (3 invalid datagrams from it were ignored)"
        );
        assert_eq!(
            HumanDuration(Duration::from_millis(250)).to_string(),
            "250 ms"
        );
        assert!(
            Error::Refused { addr }
                .to_string()
                .contains("connection refused")
        );
    }
}
