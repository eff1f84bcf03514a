//! The agent's side of the IPC: a unix datagram socket at a configurable path, and a screen in
//! front of any portus IPC that checks every datagram against the libccp wire format before
//! portus sees it.
//!
//! The screen exists because portus trusts its peer: a short or unexpected message makes it panic
//! or end its loop, and a datapath of another protocol version would be misread silently. Here a
//! malformed datagram is dropped and counted, a datapath whose VERSION differs from ours is
//! refused with a message naming both versions (only its CLOSEs still pass, so that flows it
//! created before its VERSION arrived end), and the name each Create asked for is kept so
//! the agent can route the flow (portus itself only passes the name to its own matching).

use ccp_engine::wire::{self, ToAgent};
use ccp_files::socket_path::{SocketKind, SocketPathClaim};
use nix::sys::socket::{MsgFlags, UnixAddr, sendto};
use portus::ipc::Ipc;
use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

/// Counters of what the screen and the socket did.
#[derive(Debug, Default)]
pub struct IpcCounters {
    pub datagrams: AtomicU64,
    pub malformed: AtomicU64,
    pub refused: AtomicU64,
    pub version_mismatches: AtomicU64,
    pub send_failures: AtomicU64,
}

/// Most messages held back for datapaths whose receive queues are full, over all datapaths.
const BACKLOG_LIMIT: usize = 1 << 20;

/// A unix datagram socket bound at a path of the user's choice.
///
/// Linux queues at most `net.unix.max_dgram_qlen` datagrams (10 by default) per receiving
/// socket, so a burst to one datapath (program changes for hundreds of new flows) does not fit.
/// Sends never block the agent: what does not fit waits in a per-datapath backlog, in order, and
/// is retried before every receive; a datapath whose socket is gone loses its backlog.
pub struct UnixIpc {
    sock: UnixDatagram,
    /// The path, held until the agent stops (dropping it removes the socket file).
    claim: SocketPathClaim,
    counters: Arc<IpcCounters>,
    backlog: Mutex<Backlog>,
}

#[derive(Default)]
struct Backlog {
    queues: HashMap<PathBuf, std::collections::VecDeque<Vec<u8>>>,
    total: usize,
}

enum SendOutcome {
    Sent,
    Full,
    Gone,
}

impl UnixIpc {
    /// Bind at `path`, creating its directory and replacing a stale socket left by a previous
    /// agent (but never a socket another process is bound to, nor a file that is not a socket).
    pub fn bind(path: &Path, counters: Arc<IpcCounters>) -> std::io::Result<UnixIpc> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        let mut claim = SocketPathClaim::claim(path, SocketKind::Datagram).map_err(|why| {
            std::io::Error::new(
                why.io_kind(),
                format!("{} {why}; refusing to replace it", path.display()),
            )
        })?;
        let sock = UnixDatagram::bind(path)?;
        claim.bound()?;
        sock.set_read_timeout(Some(Duration::from_millis(200)))?;
        // Room for bursts from thousands of flows.
        let fd = std::os::fd::AsFd::as_fd(&sock);
        let _ = nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::RcvBuf, &(8 << 20));
        let _ = nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::SndBuf, &(8 << 20));
        Ok(UnixIpc {
            sock,
            claim,
            counters,
            backlog: Mutex::new(Backlog::default()),
        })
    }

    fn try_send(&self, msg: &[u8], to: &Path) -> SendOutcome {
        let Ok(addr) = UnixAddr::new(to) else {
            return SendOutcome::Gone;
        };
        match sendto(self.sock.as_raw_fd(), msg, &addr, MsgFlags::MSG_DONTWAIT) {
            Ok(_) => SendOutcome::Sent,
            Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::ENOBUFS) => SendOutcome::Full,
            Err(_) => SendOutcome::Gone,
        }
    }

    /// Retry held-back messages; returns whether some are still waiting.
    fn flush(&self) -> bool {
        let Ok(mut b) = self.backlog.lock() else {
            return false;
        };
        if b.total == 0 {
            return false;
        }
        let mut sent = 0;
        let mut gone = vec![];
        for (to, q) in b.queues.iter_mut() {
            while let Some(m) = q.front() {
                match self.try_send(m, to) {
                    SendOutcome::Sent => {
                        q.pop_front();
                        sent += 1;
                    }
                    SendOutcome::Full => break,
                    SendOutcome::Gone => {
                        gone.push(to.clone());
                        break;
                    }
                }
            }
        }
        b.total -= sent;
        for to in gone {
            if let Some(q) = b.queues.remove(&to) {
                b.total -= q.len();
                self.counters
                    .send_failures
                    .fetch_add(q.len() as u64, Ordering::Relaxed);
            }
        }
        b.queues.retain(|_, q| !q.is_empty());
        b.total > 0
    }

    /// Where the socket is bound.
    pub fn path(&self) -> &Path {
        self.claim.path()
    }
}

impl Ipc for UnixIpc {
    type Addr = PathBuf;

    fn name() -> String {
        "unix".into()
    }

    /// Never blocks and never fails: a message that does not fit waits in the datapath's backlog;
    /// a datapath that went away loses it (counted); the agent keeps serving every other flow.
    fn send(&self, msg: &[u8], to: &PathBuf) -> portus::Result<()> {
        let Ok(mut b) = self.backlog.lock() else {
            return Ok(());
        };
        let queued = b.queues.get(to).is_some_and(|q| !q.is_empty());
        if !queued {
            match self.try_send(msg, to) {
                SendOutcome::Sent => return Ok(()),
                SendOutcome::Gone => {
                    self.counters.send_failures.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                SendOutcome::Full => {}
            }
        }
        if b.total >= BACKLOG_LIMIT {
            self.counters.send_failures.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        b.total += 1;
        b.queues
            .entry(to.clone())
            .or_default()
            .push_back(msg.to_vec());
        Ok(())
    }

    fn recv(&self, msg: &mut [u8]) -> portus::Result<(usize, PathBuf)> {
        if self.flush() {
            // Datapaths are waiting for held-back messages: do not sleep in recv for long.
            let fd = std::os::fd::AsFd::as_fd(&self.sock);
            let mut fds = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(1u8)) {
                Ok(n) if n > 0 => {}
                _ => return Ok((0, PathBuf::new())),
            }
        }
        let (n, addr) = self.sock.recv_from(msg).map_err(portus::Error::from)?;
        match addr.as_pathname() {
            Some(p) => Ok((n, p.to_path_buf())),
            None => {
                warn!(
                    "ignoring a datagram from an unbound unix socket: a datapath must bind its socket to receive replies"
                );
                Ok((0, PathBuf::new()))
            }
        }
    }

    fn close(&mut self) -> portus::Result<()> {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        Ok(())
    }
}

/// What the screen shares with the agent.
#[derive(Debug, Default)]
pub struct ScreenShared {
    /// The algorithm name of the latest Create per socket id.
    requested: Mutex<HashMap<u32, String>>,
    pub counters: Arc<IpcCounters>,
}

impl ScreenShared {
    /// The name the Create of `sid` asked for ("" if none), consumed.
    pub fn take_requested(&self, sid: u32) -> String {
        self.requested
            .lock()
            .map(|mut m| m.remove(&sid).unwrap_or_default())
            .unwrap_or_default()
    }
}

/// A screen in front of any portus IPC.
pub struct Screened<I: Ipc> {
    inner: I,
    shared: Arc<ScreenShared>,
    refused: Mutex<HashSet<I::Addr>>,
    last_warning: Mutex<Option<Instant>>,
}

impl<I: Ipc> Screened<I> {
    pub fn new(inner: I, shared: Arc<ScreenShared>) -> Self {
        Screened {
            inner,
            shared,
            refused: Mutex::new(HashSet::new()),
            last_warning: Mutex::new(None),
        }
    }

    fn warn_limited(&self, f: impl FnOnce()) {
        if let Ok(mut last) = self.last_warning.lock()
            && last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            *last = Some(Instant::now());
            f();
        }
    }

    fn is_refused(&self, addr: &I::Addr) -> bool {
        self.refused
            .lock()
            .map(|r| r.contains(addr))
            .unwrap_or(false)
    }
}

impl<I: Ipc> Ipc for Screened<I>
where
    I::Addr: Send,
{
    type Addr = I::Addr;

    fn name() -> String {
        I::name()
    }

    fn send(&self, msg: &[u8], to: &Self::Addr) -> portus::Result<()> {
        self.inner.send(msg, to)
    }

    fn recv(&self, buf: &mut [u8]) -> portus::Result<(usize, Self::Addr)> {
        let (n, addr) = self.inner.recv(buf)?;
        if n == 0 {
            return Ok((0, addr));
        }
        let c = &self.shared.counters;
        c.datagrams.fetch_add(1, Ordering::Relaxed);
        let msgs = match wire::parse_to_agent(&buf[..n]) {
            Ok(m) => m,
            Err(e) => {
                c.malformed.fetch_add(1, Ordering::Relaxed);
                self.warn_limited(|| {
                    warn!(from = ?addr, error = %e, "dropping a datagram that is not libccp {} wire", wire::PROTOCOL_VERSION)
                });
                return Ok((0, addr));
            }
        };
        let mut keep: Vec<std::ops::Range<usize>> = Vec::with_capacity(msgs.len());
        for (m, range) in msgs {
            match m {
                ToAgent::Ready { id } => {
                    if let Ok(mut r) = self.refused.lock() {
                        r.remove(&addr);
                    }
                    info!(from = ?addr, id, "datapath ready; offering protocol version {}", wire::PROTOCOL_VERSION);
                    let _ = self
                        .inner
                        .send(&wire::serialize_version(wire::PROTOCOL_VERSION), &addr);
                    keep.push(range);
                }
                ToAgent::Version { version } => {
                    if version != wire::PROTOCOL_VERSION {
                        c.version_mismatches.fetch_add(1, Ordering::Relaxed);
                        error!(
                            from = ?addr,
                            "protocol version mismatch: datapath speaks libccp wire v{version}, this agent speaks v{}; refusing the datapath",
                            wire::PROTOCOL_VERSION
                        );
                        if let Ok(mut r) = self.refused.lock() {
                            r.insert(addr.clone());
                        }
                    }
                }
                // A refused datapath's flows still close: one it created before its VERSION
                // arrived would otherwise stay in the agent for good (closing a flow the agent
                // does not have is a no-op).
                ToAgent::Close { .. } => keep.push(range),
                _ if self.is_refused(&addr) => {
                    c.refused.fetch_add(1, Ordering::Relaxed);
                }
                ToAgent::Create { sid, info } => {
                    if let Ok(mut r) = self.shared.requested.lock() {
                        r.insert(sid, info.cong_alg.clone());
                    }
                    keep.push(range);
                }
                ToAgent::Measure { .. } => keep.push(range),
            }
        }
        // Move the kept messages to the front of the buffer, in order.
        let mut end = 0;
        for r in keep {
            let len = r.len();
            buf.copy_within(r, end);
            end += len;
        }
        Ok((end, addr))
    }

    fn close(&mut self) -> portus::Result<()> {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_agent_is_refused_and_a_dead_agents_socket_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run").join("ccp.sock");
        let counters = Arc::new(IpcCounters::default());
        // The directory is created; a second agent at the same path is refused, by name.
        let first = UnixIpc::bind(&path, counters.clone()).unwrap();
        let e = UnixIpc::bind(&path, counters.clone()).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
        assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}");
        drop(first);
        // A socket left by an agent that died (its file outlives it) is replaced.
        drop(UnixDatagram::bind(&path).unwrap());
        assert!(path.exists());
        let again = UnixIpc::bind(&path, counters.clone()).unwrap();
        drop(again);
        // A file that is not a socket is never replaced.
        std::fs::write(&path, "keep me").unwrap();
        let e = UnixIpc::bind(&path, counters).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    }
}
