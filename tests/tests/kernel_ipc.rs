//! `ccp-agent --ipc netlink` and `--ipc char`, the two ways ccp-kernel reaches the agent, against a
//! stand-in for the kernel module, so portus's netlink and character-device code paths run in CI
//! on machines without ccp-kernel (which cannot be built or loaded here).
//!
//! The stand-in is the project's libccp-compatible engine (what ccp-kernel embeds as libccp),
//! creating flows the way ccp-kernel does (asking for "reno", addresses and ports in network byte
//! order) and feeding ACKs into the agent's datapath program. What differs from the kernel is only
//! the transport end the test owns:
//!
//! * netlink: ccp-kernel multicasts to group 22 of `NETLINK_USERSOCK` and the agent sends to port
//!   id 0, the kernel's own socket, which a userspace socket can never bind. The agent runs in a
//!   fresh network namespace (nothing else on the host sees its traffic); the stand-in's socket
//!   lives in that namespace and multicasts to group 22 exactly like the module, and the test takes
//!   a duplicate of the agent's socket (`pidfd_getfd`) to `connect` it to the stand-in's port id,
//!   which changes nothing but the destination of the agent's unaddressed sends. Everything else is
//!   portus's unmodified socket: creation, bind to the pid, group membership, the 16-byte netlink
//!   header on send and its removal on receive.
//! * char: portus opens `/dev/ccpkp`. The agent runs in a private mount namespace where a tmpfs
//!   covers `/dev` and a raw-mode pseudo-terminal is bind-mounted at `/dev/ccpkp`; the test holds
//!   the other end. The host's `/dev` is never touched. A pty does not keep message boundaries
//!   (neither does ccp-kernel's device, which hands out whatever its queue holds), so the
//!   stand-in splits the byte stream by the libccp header's length field.
//!
//! Both need root (namespaces, mounts, `pidfd_getfd`); without it the tests print why and pass.

use ccp_engine::wire::{self, FromAgent};
use ccp_engine::{DatapathOps, Engine, EngineConfig, FlowInfo, Primitives, WallClock};
use ccp_tests::workspace_bin;
use nix::libc;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MSS: u32 = 1448;
/// ccp-kernel's `CCP_MULTICAST_GROUP`.
const CCP_GROUP: u32 = 22;
const NLMSG_HDRLEN: usize = 16;

fn skip_unless_root(what: &str) -> bool {
    if unsafe { libc::geteuid() } == 0 {
        return false;
    }
    println!("skipping {what}: needs root (network/mount namespaces, pidfd_getfd)");
    true
}

/// One end of the kernel's IPC, as the stand-in sees it.
trait KernelEnd {
    fn send(&mut self, msg: &[u8]) -> std::io::Result<()>;
    /// Messages from the agent that arrived within `wait` (possibly none).
    fn recv(&mut self, wait: Duration) -> Vec<Vec<u8>>;
}

/// What the stand-in's engine did, and what it heard.
#[derive(Default)]
struct Seen {
    cwnd: Vec<u32>,
    from_agent: Vec<&'static str>,
    sent: u64,
    send_errors: u64,
}

struct Ops<'a, E: KernelEnd> {
    end: &'a mut E,
    seen: &'a mut Seen,
}

impl<E: KernelEnd> DatapathOps for Ops<'_, E> {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        self.seen.sent += 1;
        let r = self.end.send(msg);
        if r.is_err() {
            self.seen.send_errors += 1;
        }
        r
    }
    fn set_cwnd(&mut self, _sid: u32, cwnd: u32) {
        self.seen.cwnd.push(cwnd);
    }
    fn set_rate_abs(&mut self, _sid: u32, _rate: u32) {}
}

/// A stand-in for ccp-kernel: libccp semantics on the project's engine.
struct StandIn<E: KernelEnd> {
    end: E,
    engine: Engine<WallClock>,
    seen: Seen,
}

impl<E: KernelEnd> StandIn<E> {
    fn new(end: E) -> Self {
        StandIn {
            end,
            engine: Engine::new(WallClock::default(), EngineConfig::default()),
            seen: Seen::default(),
        }
    }

    fn with<R>(&mut self, f: impl FnOnce(&mut Engine<WallClock>, &mut Ops<'_, E>) -> R) -> R {
        let mut ops = Ops {
            end: &mut self.end,
            seen: &mut self.seen,
        };
        f(&mut self.engine, &mut ops)
    }

    /// Hand what the agent sent within `wait` to the engine.
    fn poll(&mut self, wait: Duration) {
        for m in self.end.recv(wait) {
            if let Ok(parsed) = wire::parse_from_agent(&m) {
                for (msg, _) in parsed {
                    self.seen.from_agent.push(match msg {
                        FromAgent::Install { .. } => "install",
                        FromAgent::UpdateFields { .. } => "update",
                        FromAgent::ChangeProg { .. } => "change-prog",
                        FromAgent::Version { .. } => "version",
                    });
                }
            }
            let _ = self.with(|e, ops| e.read_msg(ops, &m));
        }
    }

    fn count(&self, what: &str) -> usize {
        self.seen.from_agent.iter().filter(|m| **m == what).count()
    }
}

/// The Create ccp-kernel sends for a new socket (`tcp_ccp_init`): always "reno", and the
/// addresses and ports straight from `inet_sock`, i.e. in network byte order.
fn kernel_flow(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> FlowInfo {
    FlowInfo {
        init_cwnd: 10 * MSS,
        mss: MSS,
        src_ip: u32::from_ne_bytes(src),
        src_port: u32::from(u16::from_ne_bytes(sport.to_be_bytes())),
        dst_ip: u32::from_ne_bytes(dst),
        dst_port: u32::from(u16::from_ne_bytes(dport.to_be_bytes())),
        cong_alg: "reno".into(),
    }
}

/// The whole exchange: READY, a flow, then one MSS acked per millisecond at a 5 ms RTT with the
/// window the agent set. Returns the socket id.
fn run_flow<E: KernelEnd>(k: &mut StandIn<E>, agent: &mut Child, log: &Path) -> u32 {
    k.with(|e, ops| e.init(ops)).expect("READY send failed");
    let t0 = Instant::now();
    while k.count("install") == 0 && t0.elapsed() < Duration::from_secs(10) {
        k.poll(Duration::from_millis(50));
        assert!(
            agent.try_wait().unwrap().is_none(),
            "agent exited: {}",
            read(log)
        );
    }
    assert!(
        k.count("install") > 0,
        "the agent installed no datapath program after READY: {}",
        read(log)
    );
    let sid = k
        .with(|e, ops| {
            e.connection_start(ops, kernel_flow([10, 0, 0, 1], 40000, [10, 0, 0, 2], 5201))
        })
        .expect("connection_start");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        k.poll(Duration::from_millis(1));
        let cwnd = k.seen.cwnd.last().copied().unwrap_or(10 * MSS);
        let p = Primitives {
            bytes_acked: MSS,
            packets_acked: 1,
            rtt_sample_us: 5_000,
            bytes_in_flight: cwnd,
            packets_in_flight: cwnd / MSS,
            snd_cwnd: cwnd,
            ..Primitives::default()
        };
        let _ = k.with(|e, ops| e.invoke(ops, sid, &p));
    }
    k.with(|e, ops| e.connection_free(ops, sid)).unwrap();
    sid
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn events(log: &Path, msg: &str) -> Vec<serde_json::Value> {
    read(log)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("message").and_then(|m| m.as_str()) == Some(msg))
        .collect()
}

/// What must hold after a flow ran: the agent installed its program, set the window through the
/// kernel's IPC, the window grew as acks arrived (both rules here choose window-growing
/// algorithms), and no datagram was refused or unreadable.
fn check_control<E: KernelEnd>(k: &StandIn<E>, log: &Path, want_alg: &str, want_rule: bool) {
    let logs = read(log);
    let created = events(log, "flow created");
    assert_eq!(created.len(), 1, "{logs}");
    let c = &created[0];
    assert_eq!(c["requested"], "reno", "{logs}");
    assert_eq!(c["algorithm"], want_alg, "{logs}");
    let by = c["chosen_by"].as_str().unwrap_or("");
    assert_eq!(by.starts_with("Rule"), want_rule, "chosen_by {by}: {logs}");
    assert!(k.count("version") >= 1, "no VERSION answer: {logs}");
    assert_eq!(k.seen.send_errors, 0, "the stand-in's sends failed");
    let n = k.seen.cwnd.len();
    assert!(
        n >= 5,
        "the agent set the window only {n} times in 1.5 s of acks ({} messages from the agent: {:?}): {logs}",
        k.seen.from_agent.len(),
        k.seen.from_agent
    );
    let first = k.seen.cwnd[0];
    let max = k.seen.cwnd.iter().copied().max().unwrap();
    println!(
        "{want_alg}: {n} window updates, first {first} B, largest {max} B; from the agent: {} installs, {} program changes, {} updates",
        k.count("install"),
        k.count("change-prog"),
        k.count("update")
    );
    assert!(
        max > first + 2 * MSS,
        "the window did not grow under {want_alg}: first {first} B, largest {max} B over {n} updates"
    );
    assert!(
        !logs.contains("dropping a datagram"),
        "the agent's screen dropped stand-in datagrams: {logs}"
    );
}

fn rules_file(dir: &Path) -> std::path::PathBuf {
    // ccp-kernel always asks for "reno": a rule on the requested name picks the algorithm.
    let p = dir.join("rules.yaml");
    std::fs::write(
        &p,
        "rules:\n  - name: kernel-flows\n    match: {requested: reno}\n    algorithm: cubic\n",
    )
    .unwrap();
    p
}

fn agent_command(dir: &Path, ipc: &str, rules: Option<&Path>) -> (Command, std::path::PathBuf) {
    let log = dir.join(format!("agent-{ipc}.log"));
    let mut cmd = Command::new(workspace_bin("ccp-agent").unwrap());
    cmd.args(["--ipc", ipc, "--log-format", "json", "--log-level", "info"])
        .arg("--socket")
        .arg(dir.join("unused.sock"))
        .arg("--stats")
        .arg(dir.join(format!("stats-{ipc}.json")))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    if let Some(r) = rules {
        cmd.arg("--rules").arg(r);
    }
    (cmd, log)
}

/// Kills the agent on every exit path.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn check(ret: libc::c_int, what: &str) -> std::io::Result<libc::c_int> {
    if ret < 0 {
        let e = std::io::Error::last_os_error();
        Err(std::io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(ret)
    }
}

// ---------------------------------------------------------------- netlink

struct NetlinkEnd {
    fd: OwnedFd,
}

fn sockaddr_nl(pid: u32, groups: u32) -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
    let mut a: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    a.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    a.nl_pid = pid;
    a.nl_groups = groups;
    a
}

impl KernelEnd for NetlinkEnd {
    /// As ccp-kernel's `nl_sendmsg`: one netlink message (header, payload padded to 4 bytes)
    /// multicast to group 22.
    fn send(&mut self, msg: &[u8]) -> std::io::Result<()> {
        let len = NLMSG_HDRLEN + msg.len();
        let mut buf = vec![0u8; len.next_multiple_of(4)];
        buf[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        buf[4..6].copy_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        buf[NLMSG_HDRLEN..len].copy_from_slice(msg);
        let to = sockaddr_nl(0, 1 << (CCP_GROUP - 1));
        // SAFETY: buf and to outlive the call; sizes are theirs.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                0,
                (&to as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        match check(r as libc::c_int, "netlink sendto") {
            // A userspace multicast is also unicast to the destination port id (0, the kernel's
            // socket, absent here) after the group got it: that second part alone is refused.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(()),
            r => r.map(|_| ()),
        }
    }

    fn recv(&mut self, wait: Duration) -> Vec<Vec<u8>> {
        let mut out = vec![];
        let mut buf = vec![0u8; 1 << 16];
        let mut timeout = wait;
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) };
            if n <= 0 {
                return out;
            }
            // SAFETY: buf is writable for its length.
            let got = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if got < NLMSG_HDRLEN as isize {
                return out;
            }
            let got = got as usize;
            let nl_len = u32::from_ne_bytes(buf[0..4].try_into().unwrap()) as usize;
            let end = nl_len.clamp(NLMSG_HDRLEN, got);
            out.push(buf[NLMSG_HDRLEN..end].to_vec());
            timeout = Duration::ZERO;
        }
    }
}

/// The netlink socket of `pid` in its network namespace: (fd number in that process, port id).
fn agent_netlink_fd(pid: u32) -> Option<(RawFd, u32)> {
    // /proc/PID/net/netlink: sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/netlink")).ok()?;
    let inode = table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 10 && f[1] == libc::NETLINK_USERSOCK.to_string() && f[2] == pid.to_string())
            .then(|| f[9].to_string())
    })?;
    let want = format!("socket:[{inode}]");
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        if std::fs::read_link(e.path()).ok()?.to_str() == Some(want.as_str()) {
            return Some((e.file_name().to_str()?.parse().ok()?, pid));
        }
    }
    None
}

/// A duplicate of file descriptor `fd` of process `pid`.
fn steal_fd(pid: u32, fd: RawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscalls; the returned descriptors are owned here.
    unsafe {
        let pidfd = check(
            libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) as libc::c_int,
            "pidfd_open",
        )?;
        let pidfd = OwnedFd::from_raw_fd(pidfd);
        let dup = check(
            libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) as libc::c_int,
            "pidfd_getfd",
        )?;
        Ok(OwnedFd::from_raw_fd(dup))
    }
}

/// A netlink socket (`NETLINK_USERSOCK`, port id chosen by the kernel) in the network namespace
/// of `pid`; created on a thread that enters the namespace, so the test's own stays untouched.
fn netlink_socket_in_netns_of(pid: u32) -> std::io::Result<(OwnedFd, u32)> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::spawn(move || -> std::io::Result<(OwnedFd, u32)> {
        // SAFETY: setns affects this short-lived thread only; descriptors are owned.
        unsafe {
            check(libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET), "setns")?;
            let fd = check(
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    libc::NETLINK_USERSOCK,
                ),
                "socket",
            )?;
            let fd = OwnedFd::from_raw_fd(fd);
            let addr = sockaddr_nl(0, 0);
            check(
                libc::bind(
                    fd.as_raw_fd(),
                    (&addr as *const libc::sockaddr_nl).cast(),
                    std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
                ),
                "bind",
            )?;
            let mut bound = sockaddr_nl(0, 0);
            let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            check(
                libc::getsockname(
                    fd.as_raw_fd(),
                    (&mut bound as *mut libc::sockaddr_nl).cast(),
                    &mut len,
                ),
                "getsockname",
            )?;
            Ok((fd, bound.nl_pid))
        }
    })
    .join()
    .map_err(|_| std::io::Error::other("netns thread panicked"))?
}

fn start_netlink_agent(dir: &Path, rules: Option<&Path>) -> (Reap, std::path::PathBuf, NetlinkEnd) {
    let (mut cmd, log) = agent_command(dir, "netlink", rules);
    // SAFETY: unshare is async-signal-safe; the child is single-threaded here.
    unsafe {
        cmd.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let agent = Reap(cmd.spawn().expect("spawn ccp-agent"));
    let pid = agent.0.id();
    let t0 = Instant::now();
    let (fd, portid) = loop {
        if let Some(found) = agent_netlink_fd(pid) {
            break found;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the agent opened no NETLINK_USERSOCK socket bound to its pid: {}",
            read(&log)
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(portid, pid, "portus binds its netlink socket to the pid");
    let (ours, our_portid) = netlink_socket_in_netns_of(pid).expect("stand-in socket");
    // Point the agent's unaddressed sends (to the kernel, port id 0) at the stand-in.
    let dup = steal_fd(pid, fd).expect("duplicate the agent's netlink socket");
    let to = sockaddr_nl(our_portid, 0);
    // SAFETY: valid socket and address.
    check(
        unsafe {
            libc::connect(
                dup.as_raw_fd(),
                (&to as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        },
        "connect",
    )
    .unwrap();
    drop(dup);
    (agent, log, NetlinkEnd { fd: ours })
}

fn stop_and_stats(mut agent: Reap, dir: &Path, ipc: &str) -> serde_json::Value {
    let pid = nix::unistd::Pid::from_raw(agent.0.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let t0 = Instant::now();
    while agent.0.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let p = dir.join(format!("stats-{ipc}.json"));
    serde_json::from_str(&read(&p)).unwrap_or(serde_json::Value::Null)
}

#[test]
fn netlink_agent_installs_and_controls_a_kernel_flow() {
    if skip_unless_root("the netlink stand-in test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut agent, log, end) = start_netlink_agent(dir.path(), None);
    let mut k = StandIn::new(end);
    let sid = run_flow(&mut k, &mut agent.0, &log);
    // Without rules, the kernel's "reno" is what the flow gets.
    check_control(&k, &log, "reno", false);
    std::thread::sleep(Duration::from_millis(100));
    let stats = stop_and_stats(agent, dir.path(), "netlink");
    assert_eq!(stats["flows_created"], 1, "{stats}");
    assert_eq!(
        stats["flows_closed"], 1,
        "sid {sid} close not seen: {stats}"
    );
    assert!(stats["reports"].as_u64().unwrap_or(0) >= 5, "{stats}");
    assert_eq!(stats["malformed_datagrams"], 0, "{stats}");
    assert_eq!(stats["send_failures"], 0, "{stats}");
}

#[test]
fn netlink_rule_on_the_requested_name_picks_the_algorithm() {
    if skip_unless_root("the netlink rules test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_file(dir.path());
    let (mut agent, log, end) = start_netlink_agent(dir.path(), Some(&rules));
    let mut k = StandIn::new(end);
    run_flow(&mut k, &mut agent.0, &log);
    check_control(&k, &log, "cubic", true);
    // The kernel's addresses arrive in network byte order: the log shows them byte-swapped on a
    // little-endian host, which is why address and port rules must be written that way for
    // ccp-kernel (docs/kernel.md).
    let created = &events(&log, "flow created")[0];
    let dst = created["dst"].as_str().unwrap_or("");
    let want = format!(
        "{}:{}",
        std::net::Ipv4Addr::from(u32::from_ne_bytes([10, 0, 0, 2])),
        u16::from_ne_bytes(5201u16.to_be_bytes())
    );
    assert_eq!(dst, want, "{}", read(&log));
}

// ---------------------------------------------------------------- char device

struct PtyEnd {
    master: OwnedFd,
    pending: Vec<u8>,
}

impl KernelEnd for PtyEnd {
    fn send(&mut self, msg: &[u8]) -> std::io::Result<()> {
        // One write per message, as ccp-kernel queues one message per send.
        let n = nix::unistd::write(&self.master, msg)?;
        if n != msg.len() {
            return Err(std::io::Error::other(format!(
                "short write {n} of {}",
                msg.len()
            )));
        }
        Ok(())
    }

    fn recv(&mut self, wait: Duration) -> Vec<Vec<u8>> {
        let mut buf = [0u8; 4096];
        let mut timeout = wait;
        loop {
            let mut pfd = libc::pollfd {
                fd: self.master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) };
            if n <= 0 || pfd.revents & libc::POLLIN == 0 {
                break;
            }
            match nix::unistd::read(&self.master, &mut buf) {
                Ok(n) if n > 0 => self.pending.extend_from_slice(&buf[..n]),
                _ => break,
            }
            timeout = Duration::ZERO;
        }
        // Split the stream at libccp message boundaries.
        let mut out = vec![];
        while let Ok(h) = wire::parse_header(&self.pending) {
            let len = usize::from(h.len);
            if len < 8 || self.pending.len() < len {
                break;
            }
            out.push(self.pending.drain(..len).collect());
        }
        out
    }
}

/// A pseudo-terminal in raw mode (no echo, no line editing, no output processing): bytes pass
/// unchanged both ways. Returns (master, slave, the slave's path).
fn raw_pty() -> std::io::Result<(OwnedFd, OwnedFd, CString)> {
    // SAFETY: plain libc calls on descriptors owned here.
    unsafe {
        let m = check(
            libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC),
            "posix_openpt",
        )?;
        let master = OwnedFd::from_raw_fd(m);
        check(libc::grantpt(m), "grantpt")?;
        check(libc::unlockpt(m), "unlockpt")?;
        let mut name = [0 as libc::c_char; 128];
        check(
            libc::ptsname_r(m, name.as_mut_ptr(), name.len()),
            "ptsname_r",
        )?;
        let s = check(
            libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            ),
            "open pts",
        )?;
        let slave = OwnedFd::from_raw_fd(s);
        let mut t: libc::termios = std::mem::zeroed();
        check(libc::tcgetattr(s, &mut t), "tcgetattr")?;
        libc::cfmakeraw(&mut t);
        check(libc::tcsetattr(s, libc::TCSANOW, &t), "tcsetattr")?;
        Ok((
            master,
            slave,
            std::ffi::CStr::from_ptr(name.as_ptr()).to_owned(),
        ))
    }
}

fn start_char_agent(
    dir: &Path,
    rules: Option<&Path>,
) -> (Reap, std::path::PathBuf, PtyEnd, OwnedFd) {
    let (master, slave, pts) = raw_pty().expect("pty");
    let (mut cmd, log) = agent_command(dir, "char", rules);
    // Everything the child needs is allocated before the fork.
    // The slave is opened again inside the new mount namespace: a bind mount's source must be
    // reachable there (a descriptor opened before the unshare is not).
    let mut src = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0\0";
    let dev = CString::new("/dev").unwrap();
    let node = CString::new("/dev/ccpkp").unwrap();
    let root = CString::new("/").unwrap();
    let tmpfs = CString::new("tmpfs").unwrap();
    let opts = CString::new("mode=0755,size=64k").unwrap();
    // SAFETY: only async-signal-safe syscalls on pre-built strings run in the child.
    unsafe {
        cmd.pre_exec(move || {
            let fail = || Err(std::io::Error::last_os_error());
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            // Nothing mounted below propagates back to the host.
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            let pty = libc::open(
                pts.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            if pty < 0 {
                return fail();
            }
            // "/proc/self/fd/<pty>" without allocating.
            let mut digits = [0u8; 12];
            let (mut v, mut n) = (pty as u32, 0);
            loop {
                digits[n] = b'0' + (v % 10) as u8;
                n += 1;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            for i in 0..n {
                src[14 + i] = digits[n - 1 - i];
            }
            if libc::mount(
                tmpfs.as_ptr(),
                dev.as_ptr(),
                tmpfs.as_ptr(),
                libc::MS_NOSUID,
                opts.as_ptr().cast(),
            ) != 0
            {
                return fail();
            }
            let f = libc::open(
                node.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o600,
            );
            if f < 0 {
                return fail();
            }
            libc::close(f);
            if libc::mount(
                src.as_ptr().cast(),
                node.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            Ok(())
        });
    }
    let agent = Reap(cmd.spawn().expect("spawn ccp-agent"));
    // The agent has opened the device once it logs that portus started.
    let t0 = Instant::now();
    while !read(&log).contains("starting CCP") {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "agent did not start on the char device: {}",
            read(&log)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    (
        agent,
        log,
        PtyEnd {
            master,
            pending: vec![],
        },
        slave,
    )
}

#[test]
fn char_device_agent_installs_and_controls_a_kernel_flow() {
    if skip_unless_root("the char-device stand-in test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_file(dir.path());
    let (mut agent, log, end, _slave) = start_char_agent(dir.path(), Some(&rules));
    let mut k = StandIn::new(end);
    run_flow(&mut k, &mut agent.0, &log);
    check_control(&k, &log, "cubic", true);
    let started = events(&log, "starting CCP");
    assert!(
        started
            .iter()
            .any(|e| e["ipc"].as_str().unwrap_or("").contains("char")),
        "{}",
        read(&log)
    );
}
