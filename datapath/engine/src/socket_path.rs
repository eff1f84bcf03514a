//! Where the agent and its datapaths meet: making room for a unix socket at a path.
//!
//! The agent's IPC socket, its control socket and a datapath's own socket are all bound at
//! paths a user chooses. A process that died leaves its socket file behind, and binding there
//! fails until it is removed; but a path may also hold a live socket of another process, or a
//! file that is not a socket at all. [`clear_stale_socket`] tells these apart by probing: only
//! a socket nobody is bound to (a connect of the expected kind is refused) is removed.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::Path;

/// The kind of unix socket a path is expected to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    /// A datagram socket (the agent's IPC socket, a datapath's socket).
    Datagram,
    /// A listening stream socket (the agent's control socket).
    Stream,
}

impl SocketKind {
    fn name(self) -> &'static str {
        match self {
            SocketKind::Datagram => "datagram",
            SocketKind::Stream => "stream",
        }
    }
}

/// Why a path was not made free. Its message reads after the path: "`<path>` is a socket
/// another process is bound to".
#[derive(Debug, thiserror::Error)]
pub enum SocketPathError {
    /// Something other than a socket is there (kept as it is).
    #[error("exists and is not a socket")]
    NotASocket,
    /// A live socket: another process answers on it.
    #[error("is a socket another process is bound to")]
    InUse,
    /// A socket that is neither live nor stale for the expected kind (for example a listening
    /// stream socket where a datagram socket was expected).
    #[error("is a socket of another kind (not a stale {} socket): {source}", kind.name())]
    OtherKind {
        /// The kind that was expected.
        kind: SocketKind,
        /// What the probe's connect returned.
        source: io::Error,
    },
    /// The probe could not be made, or the stale socket could not be removed.
    #[error("could not be probed or cleared: {0}")]
    Io(#[from] io::Error),
}

/// Make room for a socket of `kind` at `path`: succeed when nothing is there, or when a socket
/// is there that nobody is bound to (a connect of `kind` is refused; it is removed). Never
/// removes a live socket, a live socket of another kind, or a file that is not a socket.
pub fn clear_stale_socket(path: &Path, kind: SocketKind) -> Result<(), SocketPathError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketPathError::NotASocket);
    }
    let probe = match kind {
        SocketKind::Datagram => UnixDatagram::unbound()?.connect(path),
        SocketKind::Stream => UnixStream::connect(path).map(drop),
    };
    match probe {
        Ok(()) => Err(SocketPathError::InUse),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            match std::fs::remove_file(path) {
                Ok(()) => Ok(()),
                // Removed meanwhile by someone else: the path is free all the same.
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        // EPROTOTYPE: a live socket of the other type. Anything else (EACCES on another
        // user's socket, ...) is not a finding about the socket's kind.
        Err(source) if source.raw_os_error() == Some(libc::EPROTOTYPE) => {
            Err(SocketPathError::OtherKind { kind, source })
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn only_a_stale_socket_of_the_expected_kind_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);

        // Nothing there.
        assert!(clear_stale_socket(&at("none.sock"), SocketKind::Datagram).is_ok());

        // A regular file stays, whatever kind is asked for.
        std::fs::write(at("notes.txt"), "keep me").unwrap();
        for kind in [SocketKind::Datagram, SocketKind::Stream] {
            let e = clear_stale_socket(&at("notes.txt"), kind).unwrap_err();
            assert!(matches!(e, SocketPathError::NotASocket), "{e}");
        }
        assert_eq!(std::fs::read_to_string(at("notes.txt")).unwrap(), "keep me");

        // Live sockets stay: a bound datagram socket and a listening stream socket.
        let _dgram = UnixDatagram::bind(at("live.sock")).unwrap();
        let e = clear_stale_socket(&at("live.sock"), SocketKind::Datagram).unwrap_err();
        assert!(matches!(e, SocketPathError::InUse), "{e}");
        let _listener = UnixListener::bind(at("live.ctl")).unwrap();
        let e = clear_stale_socket(&at("live.ctl"), SocketKind::Stream).unwrap_err();
        assert!(matches!(e, SocketPathError::InUse), "{e}");

        // A socket of the other kind is not taken for a stale one, in either direction.
        let e = clear_stale_socket(&at("live.ctl"), SocketKind::Datagram).unwrap_err();
        assert!(matches!(e, SocketPathError::OtherKind { .. }), "{e}");
        assert!(e.to_string().contains("not a stale datagram socket"), "{e}");
        let e = clear_stale_socket(&at("live.sock"), SocketKind::Stream).unwrap_err();
        assert!(matches!(e, SocketPathError::OtherKind { .. }), "{e}");
        assert!(at("live.sock").exists() && at("live.ctl").exists());

        // Sockets left by a process that died are removed, and the path can be bound again.
        drop(UnixDatagram::bind(at("stale.sock")).unwrap());
        clear_stale_socket(&at("stale.sock"), SocketKind::Datagram).unwrap();
        assert!(!at("stale.sock").exists());
        UnixDatagram::bind(at("stale.sock")).unwrap();
        drop(UnixListener::bind(at("stale.ctl")).unwrap());
        clear_stale_socket(&at("stale.ctl"), SocketKind::Stream).unwrap();
        UnixListener::bind(at("stale.ctl")).unwrap();
    }
}
