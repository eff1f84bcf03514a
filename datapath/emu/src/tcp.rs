//! Kernel TCP flows between testbed hosts: a listener on one host, a connection from another
//! with the kernel congestion control of one's choice (`TCP_CONGESTION`), a reader that counts
//! what the receiving application read, and a writer that sends for a time or a number of
//! bytes. What the integration tests and the experiment runner use to put Linux's own
//! congestion control (cubic, bbr, reno, ...) on an emulated link beside the project's flows.
//! The sockets are created on threads inside the hosts' namespaces ([`Host::run_inside`]) and
//! then used from any thread of this process.

use crate::error::{EmuError, Result};
use crate::sys::set_congestion;
use crate::testbed::Host;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a blocked read, write or accept waits before the deadline is looked at again.
const POLL: Duration = Duration::from_millis(50);

/// A TCP listener on `host` at `port` (on the host's address).
pub fn listen(host: &Host, port: u16) -> Result<TcpListener> {
    let addr = SocketAddrV4::new(host.addr, port);
    host.run_inside(move || {
        TcpListener::bind(addr).map_err(|e| EmuError::sys(format!("bind {addr}"), e))
    })
}

/// A TCP connection from `host` to `to`, running the kernel's congestion control `cc`
/// (`setsockopt(TCP_CONGESTION)`, made before the first byte is sent). Fails when the kernel
/// has no `cc` (e.g. `bbr` without its module): the error names it.
pub fn connect(host: &Host, to: SocketAddrV4, cc: &str) -> Result<TcpStream> {
    let cc = cc.to_string();
    host.run_inside(move || {
        let s = TcpStream::connect(to).map_err(|e| EmuError::sys(format!("connect {to}"), e))?;
        set_congestion(&s, &cc).map_err(|e| {
            EmuError::sys(
                format!("setsockopt(TCP_CONGESTION, {cc:?}): the kernel has no congestion control {cc:?} (see /proc/sys/net/ipv4/tcp_available_congestion_control)"),
                e,
            )
        })?;
        Ok(s)
    })
}

/// What a [`sink`] thread saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkEnd {
    /// Bytes read.
    pub bytes: u64,
    /// When the sender closed its side (end of stream), if it did before the deadline.
    pub eof: Option<Instant>,
}

/// A thread that accepts one connection on `listener` and reads it, adding what it reads to
/// `received`, until the end of the stream or `deadline` (if any), whichever comes first.
/// Without a deadline it waits for the connection and the end of the stream for ever.
pub fn sink(
    listener: TcpListener,
    received: Arc<AtomicU64>,
    deadline: Option<Instant>,
) -> JoinHandle<std::io::Result<SinkEnd>> {
    std::thread::spawn(move || -> std::io::Result<SinkEnd> {
        let past = || deadline.is_some_and(|d| Instant::now() >= d);
        let mut total = 0u64;
        let mut s = if deadline.is_some() {
            listener.set_nonblocking(true)?;
            loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if past() {
                            return Ok(SinkEnd {
                                bytes: 0,
                                eof: None,
                            });
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(e) => return Err(e),
                }
            }
        } else {
            listener.accept()?.0
        };
        s.set_nonblocking(false)?;
        if deadline.is_some() {
            s.set_read_timeout(Some(POLL))?;
        }
        let mut buf = vec![0u8; 1 << 16];
        loop {
            if past() {
                return Ok(SinkEnd {
                    bytes: total,
                    eof: None,
                });
            }
            match s.read(&mut buf) {
                Ok(0) => {
                    return Ok(SinkEnd {
                        bytes: total,
                        eof: Some(Instant::now()),
                    });
                }
                Ok(n) => {
                    total += n as u64;
                    received.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    })
}

/// A thread that writes to `stream` as fast as the connection takes it until `end`, or until
/// it has written `size` bytes if given, then shuts its write side; it returns the bytes
/// written. A write blocked at `end` is abandoned (the connection is not closed). A reader with
/// the same deadline ([`sink`]) closes its socket at `end` with data unread, which resets the
/// connection; a write that fails that way once `end` has passed is the flow's normal end, not
/// an error.
pub fn send(
    stream: &TcpStream,
    end: Instant,
    size: Option<u64>,
) -> std::io::Result<JoinHandle<std::io::Result<u64>>> {
    let mut w = stream.try_clone()?;
    w.set_write_timeout(Some(POLL))?;
    Ok(std::thread::spawn(move || -> std::io::Result<u64> {
        let chunk = vec![0x5au8; 1 << 16];
        let mut total = 0u64;
        loop {
            let left = size.map_or(chunk.len() as u64, |s| s - total);
            if left == 0 || Instant::now() >= end {
                break;
            }
            let n = left.min(chunk.len() as u64) as usize;
            match w.write(&chunk[..n]) {
                Ok(k) => total += k as u64,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) if closed_at_the_end(&e, Instant::now(), end) => return Ok(total),
                Err(e) => return Err(e),
            }
        }
        // Closing the write side tells the reader the stream ended (sized flows); a flow cut at
        // its end time may have its socket torn down by the caller instead.
        let _ = w.shutdown(Shutdown::Write);
        Ok(total)
    }))
}

/// Whether a write error at `now` is the reader closing the connection at the flow's `end`:
/// a reset or a broken pipe once `end` has passed. The reader's deadline check and this
/// writer's both read the clock, so the reader can close between the writer's last check and
/// its write.
fn closed_at_the_end(e: &std::io::Error, now: Instant, end: Instant) -> bool {
    now >= end
        && matches!(
            e.kind(),
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that accepts on loopback, reads nothing, and drops the connection (a reset: its
    /// receive buffer holds unread data) at `close`.
    fn resetting_peer(close: Instant) -> (SocketAddrV4, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = match l.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            a => panic!("{a}"),
        };
        let peer = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            std::thread::sleep(close.saturating_duration_since(Instant::now()));
            drop(s);
        });
        (addr, peer)
    }

    #[test]
    fn a_reset_or_broken_pipe_after_the_end_is_the_flows_end() {
        let end = Instant::now();
        let after = end + Duration::from_millis(1);
        let err = |k: ErrorKind| std::io::Error::from(k);
        for k in [
            ErrorKind::BrokenPipe,
            ErrorKind::ConnectionReset,
            ErrorKind::ConnectionAborted,
        ] {
            assert!(closed_at_the_end(&err(k), after, end), "{k:?}");
            assert!(closed_at_the_end(&err(k), end, end), "{k:?} at the end");
            assert!(
                !closed_at_the_end(&err(k), end - Duration::from_millis(1), end),
                "{k:?} before the end"
            );
        }
        assert!(!closed_at_the_end(
            &err(ErrorKind::PermissionDenied),
            after,
            end
        ));
    }

    #[test]
    fn a_reset_before_the_end_is_still_an_error() {
        let end = Instant::now() + Duration::from_secs(5);
        let (addr, peer) = resetting_peer(Instant::now() + Duration::from_millis(100));
        let stream = TcpStream::connect(addr).unwrap();
        let sent = send(&stream, end, None).unwrap().join().unwrap();
        peer.join().unwrap();
        let e = sent.unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            ),
            "{e}"
        );
    }
}
