//! Socket plumbing: the only module with `unsafe` system calls. It owns socket options (buffer
//! sizes with the root-only `*BUFFORCE` variants, UDP GSO and GRO, ECN marking and TOS
//! reception), batched sending (`sendmmsg`, one `UDP_SEGMENT` control message per GSO
//! batch), batched receiving (`recvmmsg` reading the `UDP_GRO` segment size, the TOS byte, the
//! kernel's receive timestamp and the source address), waiting with a sub-millisecond `ppoll`
//! and the thread's timer slack.
//!
//! Everything degrades: a kernel without GSO, GRO, TOS reception or receive timestamps makes the
//! probes return false and the callers fall back to one datagram per packet, no ECN accounting,
//! and datagrams timed when they are read.

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Most messages handed to one `sendmmsg`.
pub const MAX_SEND_MSGS: usize = 16;
/// Most messages read by one `recvmmsg`.
pub const MAX_RECV_MSGS: usize = 64;
/// Most segments in one GSO message (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_GSO_SEGMENTS: usize = 64;
/// Most bytes in one GSO message (UDP payload limit with some room for headers).
pub const MAX_GSO_BYTES: usize = 65_000;

/// ECN codepoints in the low two bits of the TOS / traffic class byte.
pub const ECN_ECT0: u8 = 0x02;
/// Congestion Experienced.
pub const ECN_CE: u8 = 0x03;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` lives across the call and its exact size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const v).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    cvt(r).map(|_| ())
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes of the sizes given.
    let r = unsafe { libc::getsockopt(fd, level, name, (&raw mut v).cast(), &mut len) };
    cvt(r).map(|_| v)
}

/// Sets the socket's send and receive buffers to at least the given sizes where allowed:
/// `SO_*BUFFORCE` first (root), then the plain options (capped by `net.core.*mem_max`).
/// Returns the sizes the kernel reports afterwards.
pub fn set_buffers(sock: &UdpSocket, snd: usize, rcv: usize) -> (usize, usize) {
    let fd = sock.as_raw_fd();
    let clamp = |v: usize| v.min(i32::MAX as usize / 2) as libc::c_int;
    if snd > 0 && setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, clamp(snd)).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, clamp(snd));
    }
    if rcv > 0 && setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, clamp(rcv)).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, clamp(rcv));
    }
    let get = |name| {
        getsockopt_int(fd, libc::SOL_SOCKET, name)
            .map(|v| v.max(0) as usize)
            .unwrap_or(0)
    };
    (get(libc::SO_SNDBUF), get(libc::SO_RCVBUF))
}

/// Whether the kernel accepts UDP_SEGMENT (GSO) on this socket.
pub fn gso_supported(sock: &UdpSocket) -> bool {
    setsockopt_int(sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok()
}

/// Turns UDP GRO on; false where the kernel refuses.
pub fn enable_gro(sock: &UdpSocket) -> bool {
    setsockopt_int(sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
}

/// Asks the kernel to stamp every received datagram with the time it arrived (a software
/// receive timestamp, taken as the packet enters the network stack; wall clock in ns:
/// [`RecvMeta::rx_wall_ns`]); false where it refuses. While any socket asks, the kernel stamps
/// every packet the host receives.
pub fn enable_rx_timestamps(sock: &UdpSocket) -> bool {
    setsockopt_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).is_ok()
}

/// The wall clock (`CLOCK_REALTIME`, the clock of receive timestamps), ns since the epoch.
// `time_t` and `c_long` are i64 on some targets, narrower on others.
#[allow(clippy::useless_conversion)]
pub fn wall_clock_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec. CLOCK_REALTIME cannot fail; were it to, the
    // zero left in `ts` makes every stamp look implausible and datagrams are timed when read.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    wall_ns(i64::from(ts.tv_sec), i64::from(ts.tv_nsec))
}

fn wall_ns(sec: i64, nsec: i64) -> u64 {
    (sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(nsec.max(0) as u64)
}

/// Marks outgoing packets with the given TOS / traffic class (ECT(0) for ECN).
pub fn set_tos(sock: &UdpSocket, v6: bool, tos: u8) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    if v6 {
        setsockopt_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            libc::c_int::from(tos),
        )?;
        // A dual-stack socket may also carry IPv4; best effort.
        let _ = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, libc::c_int::from(tos));
        Ok(())
    } else {
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, libc::c_int::from(tos))
    }
}

/// Asks for the TOS / traffic class byte of every received datagram; false where refused.
pub fn enable_recv_tos(sock: &UdpSocket, v6: bool) -> bool {
    let fd = sock.as_raw_fd();
    if v6 {
        let a = setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1).is_ok();
        let b = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1).is_ok();
        a || b
    } else {
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1).is_ok()
    }
}

/// Sets this thread's timer slack so short `ppoll` timeouts are honoured closely.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and touches only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

/// What a wait found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// Data to read.
    pub readable: bool,
    /// Room to write.
    pub writable: bool,
    /// An error is pending on the socket (read it with a receive call).
    pub error: bool,
}

/// Waits until `fd` is readable (or writable, if `want_write`), or `timeout` passes
/// (`None`: forever). Interruption by a signal counts as a timeout.
pub fn wait(fd: RawFd, want_write: bool, timeout: Option<Duration>) -> io::Result<Ready> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN | if want_write { libc::POLLOUT } else { 0 },
        revents: 0,
    };
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: one valid pollfd; `tsp` is null or points to a live timespec; no signal mask.
    let r = unsafe { libc::ppoll(&mut pfd, 1, tsp, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(Ready::default());
        }
        return Err(e);
    }
    Ok(Ready {
        readable: pfd.revents & libc::POLLIN != 0,
        writable: pfd.revents & libc::POLLOUT != 0,
        error: pfd.revents & (libc::POLLERR | libc::POLLHUP) != 0,
    })
}

/// Waits on several sockets at once (the relay); fills `ready[i]` for `fds[i]`.
pub fn wait_many(
    fds: &[RawFd],
    ready: &mut Vec<bool>,
    timeout: Option<Duration>,
) -> io::Result<()> {
    const STACK: usize = 64;
    let empty = libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    };
    // No allocation for the usual handful of sockets.
    let mut stack = [empty; STACK];
    let mut heap = Vec::new();
    let pfds: &mut [libc::pollfd] = if fds.len() <= STACK {
        &mut stack[..fds.len()]
    } else {
        heap.resize(fds.len(), empty);
        &mut heap
    };
    for (p, &fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd;
        p.events = libc::POLLIN;
    }
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    ready.clear();
    // SAFETY: `pfds` holds `pfds.len()` valid entries; `tsp` is null or a live timespec.
    let r = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        ready.resize(fds.len(), false);
        return Ok(());
    }
    ready.extend(pfds.iter().map(|p| p.revents != 0));
    Ok(())
}

/// One message of a send batch: `len` bytes at `start` of the batch buffer; `seg > 0` asks the
/// kernel to cut it into datagrams of `seg` bytes (the last may be shorter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendMsg {
    /// Offset in the buffer.
    pub start: usize,
    /// Length in bytes.
    pub len: usize,
    /// GSO segment size, 0 for a single datagram.
    pub seg: u16,
}

/// Sends up to [`MAX_SEND_MSGS`] messages from `buf` on a connected socket with one
/// `sendmmsg`. Returns how many messages the kernel took (a prefix of `msgs`).
pub fn send_msgs(fd: RawFd, buf: &[u8], msgs: &[SendMsg]) -> io::Result<usize> {
    let n = msgs.len().min(MAX_SEND_MSGS);
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: zeroed iovec/mmsghdr/cmsg storage is a valid "empty" value of these C types.
    let mut iov: [libc::iovec; MAX_SEND_MSGS] = unsafe { mem::zeroed() };
    let mut hdrs: [libc::mmsghdr; MAX_SEND_MSGS] = unsafe { mem::zeroed() };
    let mut ctrl = [[0u64; 4]; MAX_SEND_MSGS];
    for (i, m) in msgs[..n].iter().enumerate() {
        let Some(chunk) = buf.get(m.start..m.start + m.len) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "message outside buffer",
            ));
        };
        iov[i] = libc::iovec {
            iov_base: chunk.as_ptr() as *mut libc::c_void,
            iov_len: chunk.len(),
        };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_iov = &mut iov[i];
        h.msg_iovlen = 1;
        if m.seg > 0 && m.len > usize::from(m.seg) {
            // SAFETY: `ctrl[i]` is 32 bytes, 8-aligned, enough for CMSG_SPACE(2) (= 24); the
            // header pointer comes from CMSG_FIRSTHDR over exactly that buffer.
            unsafe {
                let space = libc::CMSG_SPACE(mem::size_of::<u16>() as u32) as usize;
                h.msg_control = ctrl[i].as_mut_ptr().cast();
                h.msg_controllen = space;
                let c = libc::CMSG_FIRSTHDR(h);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), m.seg);
            }
        }
    }
    // SAFETY: `hdrs[..n]` point into `iov`, `ctrl` and `buf`, all alive for the call.
    let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT) };
    cvt(r).map(|v| v as usize)
}

/// Metadata of one received message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes received.
    pub len: usize,
    /// GRO segment size (the message holds several datagrams of this size, the last possibly
    /// shorter), 0 for a single datagram.
    pub seg: usize,
    /// TOS / traffic class byte, where the kernel reported it.
    pub tos: Option<u8>,
    /// The datagram did not fit the buffer.
    pub truncated: bool,
    /// When the kernel received it (wall clock, ns since the epoch), if receive timestamps are
    /// on ([`enable_rx_timestamps`]).
    pub rx_wall_ns: Option<u64>,
    /// Source address.
    pub from: Option<SocketAddr>,
}

/// Preallocated buffers for [`recv_batch`].
pub struct RecvBatch {
    buf: Vec<u8>,
    slot: usize,
    meta: Vec<RecvMeta>,
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; 16]>,
}

impl RecvBatch {
    /// `slots` messages (≤ [`MAX_RECV_MSGS`]) of up to `slot_size` bytes each.
    pub fn new(slots: usize, slot_size: usize) -> Self {
        let slots = slots.clamp(1, MAX_RECV_MSGS);
        RecvBatch {
            buf: vec![0; slots * slot_size],
            slot: slot_size,
            meta: vec![RecvMeta::default(); slots],
            // SAFETY: an all-zero sockaddr_storage is valid (family AF_UNSPEC).
            addrs: vec![unsafe { mem::zeroed() }; slots],
            ctrl: vec![[0; 16]; slots],
        }
    }

    /// Number of message slots.
    pub fn slots(&self) -> usize {
        self.meta.len()
    }

    /// Message `i` of the last batch.
    pub fn data(&self, i: usize) -> &[u8] {
        let m = &self.meta[i];
        &self.buf[i * self.slot..i * self.slot + m.len.min(self.slot)]
    }

    /// Metadata of message `i` of the last batch.
    pub fn meta(&self, i: usize) -> &RecvMeta {
        &self.meta[i]
    }

    /// The datagrams of message `i` (several when GRO coalesced them).
    pub fn datagrams(&self, i: usize) -> impl Iterator<Item = &[u8]> {
        let seg = self.meta[i].seg;
        let data = self.data(i);
        let step = if seg == 0 { data.len().max(1) } else { seg };
        data.chunks(step)
    }
}

/// Converts a kernel socket address to a std one.
fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large enough for.
            let sin: &libc::sockaddr_in = unsafe { &*(ss as *const libc::sockaddr_storage).cast() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above for sockaddr_in6.
            let sin6: &libc::sockaddr_in6 =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Reads up to `batch.slots()` messages without blocking. Returns how many arrived (0 when
/// none was waiting). Errors are the socket's pending errors (e.g. ECONNREFUSED).
pub fn recv_batch(fd: RawFd, batch: &mut RecvBatch) -> io::Result<usize> {
    let n = batch.slots();
    // SAFETY: zeroed iovec/mmsghdr are valid empty values.
    let mut iov: [libc::iovec; MAX_RECV_MSGS] = unsafe { mem::zeroed() };
    let mut hdrs: [libc::mmsghdr; MAX_RECV_MSGS] = unsafe { mem::zeroed() };
    let slot = batch.slot;
    let base = batch.buf.as_mut_ptr();
    for i in 0..n {
        // SAFETY: slot `i` lies inside `batch.buf` (n * slot bytes).
        iov[i] = libc::iovec {
            iov_base: unsafe { base.add(i * slot) }.cast(),
            iov_len: slot,
        };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_iov = &mut iov[i];
        h.msg_iovlen = 1;
        h.msg_name = (&raw mut batch.addrs[i]).cast();
        h.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_control = batch.ctrl[i].as_mut_ptr().cast();
        h.msg_controllen = mem::size_of::<[u64; 16]>();
    }
    let r = loop {
        // SAFETY: every header points at live buffers owned by `batch` or this frame.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r >= 0 {
            break r;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            // A signal: read again, so 0 keeps meaning "nothing was waiting" (callers take it
            // as the socket drained).
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(0),
            _ => return Err(e),
        }
    };
    let got = r as usize;
    for (i, hdr) in hdrs.iter().enumerate().take(got) {
        let h = &hdr.msg_hdr;
        let mut m = RecvMeta {
            len: hdr.msg_len as usize,
            truncated: h.msg_flags & libc::MSG_TRUNC != 0,
            from: if h.msg_namelen > 0 {
                from_sockaddr(&batch.addrs[i])
            } else {
                None
            },
            ..RecvMeta::default()
        };
        // SAFETY: the kernel filled `msg_controllen` bytes of our control buffer; the CMSG
        // macros walk only within it, and every data read is bounds-checked by cmsg_len.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let level = (*c).cmsg_level;
                let typ = (*c).cmsg_type;
                let dlen = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(c);
                if level == libc::SOL_UDP && typ == libc::UDP_GRO && dlen >= 4 {
                    let v = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                    m.seg = v.max(0) as usize;
                } else if level == libc::IPPROTO_IP && typ == libc::IP_TOS && dlen >= 1 {
                    m.tos = Some(*data);
                } else if level == libc::IPPROTO_IPV6 && typ == libc::IPV6_TCLASS && dlen >= 4 {
                    let v = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                    m.tos = Some(v as u8);
                } else if level == libc::SOL_SOCKET && typ == libc::SCM_TIMESTAMPNS {
                    // Two longs (`SO_TIMESTAMPNS_OLD`: the kernel's own timespec, whatever
                    // `time_t` libc uses) or two 64-bit values (`_NEW`, where libc asks for it).
                    m.rx_wall_ns = match dlen {
                        16 => {
                            let v = std::ptr::read_unaligned(data.cast::<[i64; 2]>());
                            Some(wall_ns(v[0], v[1]))
                        }
                        8 => {
                            let v = std::ptr::read_unaligned(data.cast::<[i32; 2]>());
                            Some(wall_ns(i64::from(v[0]), i64::from(v[1])))
                        }
                        _ => None,
                    };
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        if m.seg >= m.len {
            m.seg = 0;
        }
        batch.meta[i] = m;
    }
    Ok(got)
}

/// Whether an error means "try again later" for a non-blocking send.
pub fn is_transient_send_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Whether an error is an ICMP report about the path (host or network unreachable) that may
/// pass; the flow's own timers decide whether the peer is gone.
pub fn is_transient_path_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EHOSTUNREACH)
            | Some(libc::ENETUNREACH)
            | Some(libc::EHOSTDOWN)
            | Some(libc::ENETDOWN)
            | Some(libc::EPROTO)
    )
}

/// Whether an error means the peer's port is closed (ICMP port unreachable).
pub fn is_refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionRefused || e.raw_os_error() == Some(libc::ECONNREFUSED)
}

/// Whether a send error means GSO cannot be used for this destination (device without
/// checksum offload, segment larger than the path MTU).
pub fn is_gso_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::EMSGSIZE) | Some(libc::EOPNOTSUPP)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_batch_arrives_as_segments() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let gso = gso_supported(&tx);
        let _ = enable_recv_tos(&rx, false);
        let _ = set_tos(&tx, false, ECN_CE);
        let mut buf = vec![0u8; 1000 * 5 + 300];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i / 1000) as u8;
        }
        let msgs = [SendMsg {
            start: 0,
            len: buf.len(),
            seg: if gso { 1000 } else { 0 },
        }];
        if gso {
            assert_eq!(send_msgs(tx.as_raw_fd(), &buf, &msgs).unwrap(), 1);
        } else {
            for i in 0..6 {
                let end = ((i + 1) * 1000).min(buf.len());
                let m = [SendMsg {
                    start: i * 1000,
                    len: end - i * 1000,
                    seg: 0,
                }];
                send_msgs(tx.as_raw_fd(), &buf, &m).unwrap();
            }
        }
        let mut batch = RecvBatch::new(16, 65536);
        let mut sizes = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while sizes.len() < 6 && std::time::Instant::now() < deadline {
            let _ = wait(rx.as_raw_fd(), false, Some(Duration::from_millis(50)));
            let n = recv_batch(rx.as_raw_fd(), &mut batch).unwrap();
            for i in 0..n {
                assert_eq!(batch.meta(i).from, Some(tx.local_addr().unwrap()));
                for d in batch.datagrams(i) {
                    assert!(d.iter().all(|&b| b == d[0]));
                    sizes.push(d.len());
                }
            }
        }
        assert_eq!(sizes, vec![1000, 1000, 1000, 1000, 1000, 300]);
    }

    /// A datagram that waited in the socket is stamped with when it arrived, not when it is
    /// read: its stamp lies between the wall clock before the send and before the read. The
    /// kernel turns its receive stamping on asynchronously (a work item) the first time a socket
    /// asks, and stamps a datagram received before that when it is read: so a few tries.
    #[test]
    fn receive_timestamp_is_the_arrival() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        if !enable_rx_timestamps(&rx) {
            eprintln!("the kernel refused SO_TIMESTAMPNS (a sandbox?); nothing to check");
            return;
        }
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut batch = RecvBatch::new(4, 2048);
        let mut seen = Vec::new();
        for _ in 0..10 {
            let before_send = wall_clock_ns();
            tx.send(b"stamp me").unwrap();
            std::thread::sleep(Duration::from_millis(30));
            wait(rx.as_raw_fd(), false, Some(Duration::from_secs(5))).unwrap();
            let before_read = wall_clock_ns();
            assert_eq!(recv_batch(rx.as_raw_fd(), &mut batch).unwrap(), 1);
            assert_eq!(batch.data(0), b"stamp me");
            let at = batch.meta(0).rx_wall_ns.expect("a receive timestamp");
            assert!(at >= before_send, "stamped before it was sent");
            if at + 20_000_000 <= before_read {
                return;
            }
            seen.push(at.saturating_sub(before_send) / 1000);
        }
        panic!(
            "every datagram stamped when read, not when it arrived (µs after the send: {seen:?})"
        );
    }
}
