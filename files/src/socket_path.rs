//! Claiming the path of a unix socket the agent or a datapath binds.
//!
//! The agent's IPC socket, its control socket and a datapath's own socket are all bound at
//! paths a user chooses. A process that died leaves its socket file behind, and binding there
//! fails until it is removed; but a path may also hold a live socket of another process, or a
//! file that is not a socket at all. [`SocketPathClaim::claim`] tells these apart by probing:
//! only a socket nobody is bound to (a connect of the expected kind is refused) is removed.
//!
//! Probing alone leaves a race: two processes starting at once on the same stale path both
//! find it stale, and the second one to remove it unlinks the socket the first has just bound.
//! So the probe runs under an exclusive lock on a file beside the socket (`<path>.lock`), held
//! for as long as the claim lives. A second process asking for the path while the first holds
//! it is told the path is in use, without probing. When dropped, the claim removes the socket
//! it was told it bound ([`SocketPathClaim::bound`]) and the lock file.
//!
//! A process that does not take the lock (another CCP implementation binding the same path) is
//! still protected by the probe: its live socket is never removed.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};

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

/// Why a path was not claimed. Its message reads after the path: "`<path>` is a socket another
/// process is bound to".
#[derive(Debug, thiserror::Error)]
pub enum SocketPathError {
    /// Something other than a socket is there (kept as it is).
    #[error("exists and is not a socket")]
    NotASocket,
    /// A live socket: another process answers on it.
    #[error("is a socket another process is bound to")]
    InUse,
    /// Another process holds the path's lock: it is starting up on this path, or running.
    #[error("is claimed by another process (it holds {})", lock.display())]
    Claimed {
        /// The lock file.
        lock: PathBuf,
    },
    /// A socket that is neither live nor stale for the expected kind (for example a listening
    /// stream socket where a datagram socket was expected).
    #[error("is a socket of another kind (not a stale {} socket): {source}", kind.name())]
    OtherKind {
        /// The kind that was expected.
        kind: SocketKind,
        /// What the probe's connect returned.
        source: io::Error,
    },
    /// The lock or the probe could not be made, or the stale socket could not be removed.
    #[error("could not be locked, probed or cleared: {0}")]
    Io(#[from] io::Error),
}

impl SocketPathError {
    /// What a user can do about it, to follow the message.
    pub fn hint(&self) -> &'static str {
        match self {
            SocketPathError::NotASocket => "remove it or choose another path",
            SocketPathError::InUse | SocketPathError::Claimed { .. } => {
                "stop the process that holds it or choose another path"
            }
            SocketPathError::OtherKind { .. } | SocketPathError::Io(_) => "choose another path",
        }
    }

    /// The `io::ErrorKind` closest to this error, for callers that report an `io::Error`.
    pub fn io_kind(&self) -> io::ErrorKind {
        match self {
            SocketPathError::NotASocket => io::ErrorKind::AlreadyExists,
            SocketPathError::Io(e) => e.kind(),
            _ => io::ErrorKind::AddrInUse,
        }
    }
}

/// The right to bind a socket at a path, held until dropped. Dropping it removes the socket
/// bound under it (the very file [`SocketPathClaim::bound`] recorded, if it is still there) and
/// the lock file, then releases the lock.
#[derive(Debug)]
pub struct SocketPathClaim {
    path: PathBuf,
    lock_path: PathBuf,
    lock: Option<File>,
    /// Device and inode of the socket bound at the path under this claim.
    bound: Option<(u64, u64)>,
}

/// How many times a lock file unlinked under us (by a claim being dropped) is opened afresh.
const LOCK_TRIES: usize = 100;

impl SocketPathClaim {
    /// Claim `path` for a socket of `kind`: take the lock beside it, then make room. Succeeds
    /// when nothing is there, or when a socket is there that nobody is bound to (it is removed).
    /// Never removes a live socket, a live socket of another kind, or a file that is not a
    /// socket; and fails at once while another process holds the claim.
    pub fn claim(path: &Path, kind: SocketKind) -> Result<SocketPathClaim, SocketPathError> {
        let mut lock_name = path.as_os_str().to_owned();
        lock_name.push(".lock");
        let lock_path = PathBuf::from(lock_name);
        let lock = lock_beside(&lock_path)?;
        // From here on, dropping the claim releases the lock (and removes the lock file).
        let claim = SocketPathClaim {
            path: path.to_path_buf(),
            lock_path,
            lock: Some(lock),
            bound: None,
        };
        clear_stale(path, kind)?;
        Ok(claim)
    }

    /// Record the socket just bound at the path as this claim's: dropping the claim removes
    /// that file, and only that file (not a socket another process put there instead).
    pub fn bound(&mut self) -> io::Result<()> {
        let meta = std::fs::symlink_metadata(&self.path)?;
        self.bound = Some((meta.dev(), meta.ino()));
        Ok(())
    }

    /// The claimed socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketPathClaim {
    fn drop(&mut self) {
        // Only the socket bound under this claim: a file another process put there (a bind that
        // failed because it did, a socket that replaced ours) is not ours to remove.
        if let Some(bound) = self.bound
            && std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == bound)
        {
            let _ = std::fs::remove_file(&self.path);
        }
        // Unlink before unlocking: a process that opened this lock file before the unlink and
        // locks it after the release finds that the path names another file (or none), and
        // opens it again (see `lock_beside`).
        let _ = std::fs::remove_file(&self.lock_path);
        drop(self.lock.take());
    }
}

/// Open (creating it if needed) and exclusively lock the file at `lock_path`, making sure the
/// file locked is the one the path still names.
fn lock_beside(lock_path: &Path) -> Result<File, SocketPathError> {
    for _ in 0..LOCK_TRIES {
        // Never through a symlink: one planted in a shared directory would have this process
        // create a file wherever it points.
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(lock_path)
        {
            Ok(f) => f,
            // A lock file left by another user: Linux's flock takes an exclusive lock on a file
            // opened read-only too. If it cannot be opened either, the first error says why.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(lock_path)
                .map_err(|_| e)?,
            Err(e) => return Err(e.into()),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(SocketPathError::Claimed {
                    lock: lock_path.to_path_buf(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
        // A holder that released the lock between our open and our lock had unlinked the file
        // first: a lock on it guards nothing, and the path must be opened again.
        let held = file.metadata()?;
        match std::fs::metadata(lock_path) {
            Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => return Ok(file),
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other(format!(
        "{} was replaced {LOCK_TRIES} times while it was being locked",
        lock_path.display()
    ))
    .into())
}

/// Remove a socket of `kind` at `path` that nobody is bound to; leave anything else and say
/// what it is.
fn clear_stale(path: &Path, kind: SocketKind) -> Result<(), SocketPathError> {
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
                // Removed meanwhile by a process that does not take the lock: free all the same.
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        // A live socket of the other type. Anything else (EACCES on another user's socket, ...)
        // is not a finding about the socket's kind.
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
    use std::sync::{Arc, Barrier};

    #[test]
    fn only_a_stale_socket_of_the_expected_kind_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        let claim = |name: &str, kind| SocketPathClaim::claim(&at(name), kind);

        // Nothing there.
        assert!(claim("none.sock", SocketKind::Datagram).is_ok());

        // A regular file stays, whatever kind is asked for.
        std::fs::write(at("notes.txt"), "keep me").unwrap();
        for kind in [SocketKind::Datagram, SocketKind::Stream] {
            let e = claim("notes.txt", kind).unwrap_err();
            assert!(matches!(e, SocketPathError::NotASocket), "{e}");
        }
        assert_eq!(std::fs::read_to_string(at("notes.txt")).unwrap(), "keep me");

        // Live sockets stay: a bound datagram socket and a listening stream socket.
        let _dgram = UnixDatagram::bind(at("live.sock")).unwrap();
        let e = claim("live.sock", SocketKind::Datagram).unwrap_err();
        assert!(matches!(e, SocketPathError::InUse), "{e}");
        let _listener = UnixListener::bind(at("live.ctl")).unwrap();
        let e = claim("live.ctl", SocketKind::Stream).unwrap_err();
        assert!(matches!(e, SocketPathError::InUse), "{e}");

        // A socket of the other kind is not taken for a stale one, in either direction.
        let e = claim("live.ctl", SocketKind::Datagram).unwrap_err();
        assert!(matches!(e, SocketPathError::OtherKind { .. }), "{e}");
        assert!(e.to_string().contains("not a stale datagram socket"), "{e}");
        let e = claim("live.sock", SocketKind::Stream).unwrap_err();
        assert!(matches!(e, SocketPathError::OtherKind { .. }), "{e}");
        assert!(at("live.sock").exists() && at("live.ctl").exists());

        // Sockets left by a process that died are removed, and the path can be bound again.
        drop(UnixDatagram::bind(at("stale.sock")).unwrap());
        let held = claim("stale.sock", SocketKind::Datagram).unwrap();
        assert!(!at("stale.sock").exists());
        UnixDatagram::bind(held.path()).unwrap();
        drop(UnixListener::bind(at("stale.ctl")).unwrap());
        let held_ctl = claim("stale.ctl", SocketKind::Stream).unwrap();
        UnixListener::bind(held_ctl.path()).unwrap();

        // No dropped claim, failed or not, left a lock file behind.
        for name in ["none.sock", "notes.txt", "live.sock", "live.ctl"] {
            assert!(!at(&format!("{name}.lock")).exists(), "{name}.lock");
        }
    }

    #[test]
    fn a_held_claim_refuses_others_and_dropping_it_frees_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sock");
        let lock = dir.path().join("agent.sock.lock");

        let mut first = SocketPathClaim::claim(&path, SocketKind::Datagram).unwrap();
        assert!(lock.exists());
        // Refused before it is bound (while the first process is starting up) ...
        let e = SocketPathClaim::claim(&path, SocketKind::Datagram).unwrap_err();
        assert!(matches!(e, SocketPathError::Claimed { .. }), "{e}");
        assert!(e.to_string().contains("agent.sock.lock"), "{e}");
        // ... and after; the live socket is not touched.
        let _sock = UnixDatagram::bind(first.path()).unwrap();
        first.bound().unwrap();
        let e = SocketPathClaim::claim(&path, SocketKind::Datagram).unwrap_err();
        assert!(matches!(e, SocketPathError::Claimed { .. }), "{e}");
        assert!(path.exists());

        // Dropping the claim removes its socket and the lock file; the path is free again.
        drop(first);
        assert!(!path.exists() && !lock.exists());

        // What another process put at the path is not the claim's to remove: a socket bound
        // between the probe and our bind (which then fails), a socket that replaced ours, a
        // file.
        let claim = SocketPathClaim::claim(&path, SocketKind::Datagram).unwrap();
        let _theirs = UnixDatagram::bind(&path).unwrap();
        assert!(UnixDatagram::bind(claim.path()).is_err());
        drop(claim);
        assert!(UnixDatagram::unbound().unwrap().connect(&path).is_ok());
        std::fs::remove_file(&path).unwrap();

        let mut claim = SocketPathClaim::claim(&path, SocketKind::Datagram).unwrap();
        let _ours = UnixDatagram::bind(claim.path()).unwrap();
        claim.bound().unwrap();
        std::fs::remove_file(&path).unwrap();
        let _replacement = UnixDatagram::bind(&path).unwrap();
        drop(claim);
        assert!(UnixDatagram::unbound().unwrap().connect(&path).is_ok());
        std::fs::remove_file(&path).unwrap();

        let claim = SocketPathClaim::claim(&path, SocketKind::Datagram).unwrap();
        std::fs::write(&path, "not a socket").unwrap();
        drop(claim);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
    }

    #[test]
    fn a_lock_file_is_never_opened_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sock");
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("agent.sock.lock")).unwrap();
        let e = SocketPathClaim::claim(&path, SocketKind::Datagram).unwrap_err();
        assert!(matches!(e, SocketPathError::Io(_)), "{e}");
        assert!(!elsewhere.exists());
    }

    /// Processes starting at once on one stale path: with probing alone, a late prober could
    /// remove the socket an early one had just bound. Under the lock exactly one claims it, and
    /// its socket survives the others.
    #[test]
    fn racing_claims_on_a_stale_path_leave_one_live_socket() {
        const RACERS: usize = 8;
        for round in 0..100 {
            let dir = tempfile::tempdir().unwrap();
            let path = Arc::new(dir.path().join(format!("race{round}.sock")));
            drop(UnixDatagram::bind(&*path).unwrap());
            let start = Arc::new(Barrier::new(RACERS));
            let done = Arc::new(Barrier::new(RACERS));
            let racers: Vec<_> = (0..RACERS)
                .map(|_| {
                    let (path, start, done) = (path.clone(), start.clone(), done.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        let won = SocketPathClaim::claim(&path, SocketKind::Datagram)
                            .ok()
                            .map(|claim| (UnixDatagram::bind(&*path), claim));
                        let bound = matches!(won, Some((Ok(_), _)));
                        // Every racer has tried before any winner lets go.
                        done.wait();
                        bound
                    })
                })
                .collect();
            let winners = racers
                .into_iter()
                .map(|r| r.join().unwrap())
                .filter(|&won| won)
                .count();
            assert_eq!(winners, 1, "round {round}: {winners} racers bound the path");
        }
    }
}
