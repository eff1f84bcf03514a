//! The operating-system side: network namespaces that die with the emulator, TUN devices,
//! interface addresses and routes (plain ioctls, as mahimahi does), commands spawned inside a
//! namespace, and thread tuning for the forwarding loops.
//!
//! A [`Netns`] is a new network *and* PID namespace whose PID 1 is a tiny init forked from this
//! process. The namespaces are never named (nothing under `/var/run/netns`); they live as long
//! as their init and the file descriptors this process holds. The init exits when the pipe to
//! this process closes, which happens however this process ends, SIGKILL included; when PID 1
//! of a PID namespace exits the kernel kills every process in it, and the network namespace,
//! its interfaces and routes go with the last reference. Commands are spawned into both
//! namespaces, so nothing a command starts can outlive the emulator.

use crate::error::{EmuError, Result};
use std::ffi::CString;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const SIOCGIFFLAGS: libc::c_ulong = 0x8913;
const SIOCSIFFLAGS: libc::c_ulong = 0x8914;
const SIOCSIFADDR: libc::c_ulong = 0x8916;
const SIOCSIFDSTADDR: libc::c_ulong = 0x8918;
const SIOCSIFNETMASK: libc::c_ulong = 0x891c;
const SIOCSIFMTU: libc::c_ulong = 0x8922;
const SIOCSIFTXQLEN: libc::c_ulong = 0x8943;
const SIOCADDRT: libc::c_ulong = 0x890b;
const IFF_UP: libc::c_short = 0x1;
const RTF_UP: libc::c_ushort = 0x1;
const RTF_GATEWAY: libc::c_ushort = 0x2;

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn check(ret: libc::c_int, what: impl FnOnce() -> String) -> Result<libc::c_int> {
    if ret < 0 {
        Err(EmuError::last_os(what()))
    } else {
        Ok(ret)
    }
}

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> Result<IfReq> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
            return Err(EmuError::Config(format!(
                "interface name {name:?} must have 1 to 15 characters"
            )));
        }
        let mut r = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        r.name[..name.len()].copy_from_slice(name.as_bytes());
        Ok(r)
    }

    fn set_addr(&mut self, a: Ipv4Addr) {
        let sa = sockaddr_in(a);
        // SAFETY: sockaddr_in is 16 bytes of plain data and data has 24.
        let bytes: [u8; 16] = unsafe { std::mem::transmute(sa) };
        self.data[..16].copy_from_slice(&bytes);
    }

    fn set_i32(&mut self, v: i32) {
        self.data[..4].copy_from_slice(&v.to_ne_bytes());
    }

    fn set_i16(&mut self, v: i16) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }

    fn i16(&self) -> i16 {
        i16::from_ne_bytes([self.data[0], self.data[1]])
    }
}

fn sockaddr_in(a: Ipv4Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(a).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn as_sockaddr(a: Ipv4Addr) -> libc::sockaddr {
    let sa = sockaddr_in(a);
    // SAFETY: both are 16 bytes of plain data.
    unsafe { std::mem::transmute(sa) }
}

#[repr(C)]
struct RtEntry {
    rt_pad1: libc::c_ulong,
    rt_dst: libc::sockaddr,
    rt_gateway: libc::sockaddr,
    rt_genmask: libc::sockaddr,
    rt_flags: libc::c_ushort,
    rt_pad2: libc::c_short,
    rt_pad3: libc::c_ulong,
    rt_pad4: *mut libc::c_void,
    rt_metric: libc::c_short,
    rt_dev: *mut libc::c_char,
    rt_mtu: libc::c_ulong,
    rt_window: libc::c_ulong,
    rt_irtt: libc::c_ushort,
}

/// An AF_INET datagram socket in the calling thread's network namespace, for ioctls.
fn ctl_socket() -> Result<OwnedFd> {
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(fd, || "socket(AF_INET)".into())?;
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ifioctl(req: libc::c_ulong, r: &mut IfReq, what: &str) -> Result<()> {
    let s = ctl_socket()?;
    // SAFETY: r is a valid ifreq-sized buffer for these requests.
    let ret = unsafe { libc::ioctl(s.as_raw_fd(), req as _, r as *mut IfReq) };
    check(ret, || {
        format!(
            "{what} on {}",
            String::from_utf8_lossy(&r.name).trim_end_matches('\0')
        )
    })?;
    Ok(())
}

/// Turn IPv6 off on an interface (the emulator is IPv4-only, like mahimahi; this also keeps
/// router solicitations and MLD reports out of the emulated queues).
pub fn disable_ipv6(name: &str) -> Result<()> {
    let p = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
    if std::path::Path::new(&p).exists() {
        std::fs::write(&p, "1").map_err(|e| EmuError::sys(format!("writing {p}"), e))?;
    }
    Ok(())
}

/// Bring an interface up (in the calling thread's namespace).
pub fn link_up(name: &str) -> Result<()> {
    let mut r = IfReq::new(name)?;
    ifioctl(SIOCGIFFLAGS, &mut r, "SIOCGIFFLAGS")?;
    let flags = r.i16() | IFF_UP;
    r.set_i16(flags);
    ifioctl(SIOCSIFFLAGS, &mut r, "SIOCSIFFLAGS")
}

/// Give a point-to-point interface its address, peer address and netmask.
pub fn set_addresses(name: &str, local: Ipv4Addr, peer: Ipv4Addr, prefix: u8) -> Result<()> {
    let mut r = IfReq::new(name)?;
    r.set_addr(local);
    ifioctl(SIOCSIFADDR, &mut r, "SIOCSIFADDR")?;
    let mut r = IfReq::new(name)?;
    r.set_addr(peer);
    ifioctl(SIOCSIFDSTADDR, &mut r, "SIOCSIFDSTADDR")?;
    let mut r = IfReq::new(name)?;
    r.set_addr(prefix_mask(prefix));
    ifioctl(SIOCSIFNETMASK, &mut r, "SIOCSIFNETMASK")
}

/// Give an interface an address and netmask (no peer).
pub fn set_address(name: &str, local: Ipv4Addr, prefix: u8) -> Result<()> {
    let mut r = IfReq::new(name)?;
    r.set_addr(local);
    ifioctl(SIOCSIFADDR, &mut r, "SIOCSIFADDR")?;
    let mut r = IfReq::new(name)?;
    r.set_addr(prefix_mask(prefix));
    ifioctl(SIOCSIFNETMASK, &mut r, "SIOCSIFNETMASK")
}

/// Set an interface's MTU and transmit queue length.
pub fn set_mtu_txqlen(name: &str, mtu: i32, txqlen: i32) -> Result<()> {
    let mut r = IfReq::new(name)?;
    r.set_i32(mtu);
    ifioctl(SIOCSIFMTU, &mut r, "SIOCSIFMTU")?;
    let mut r = IfReq::new(name)?;
    r.set_i32(txqlen);
    ifioctl(SIOCSIFTXQLEN, &mut r, "SIOCSIFTXQLEN")
}

/// The netmask of a prefix length.
pub fn prefix_mask(prefix: u8) -> Ipv4Addr {
    if prefix == 0 {
        Ipv4Addr::UNSPECIFIED
    } else {
        Ipv4Addr::from(u32::MAX << (32 - prefix as u32))
    }
}

/// Add an IPv4 route `dst/prefix` out of `dev`, through `gateway` if given (in the calling
/// thread's namespace).
pub fn add_route(dst: Ipv4Addr, prefix: u8, gateway: Option<Ipv4Addr>, dev: &str) -> Result<()> {
    let cdev = CString::new(dev).map_err(|_| EmuError::Config("bad device name".into()))?;
    let mut rt = RtEntry {
        rt_pad1: 0,
        rt_dst: as_sockaddr(dst),
        rt_gateway: as_sockaddr(gateway.unwrap_or(Ipv4Addr::UNSPECIFIED)),
        rt_genmask: as_sockaddr(prefix_mask(prefix)),
        rt_flags: RTF_UP | if gateway.is_some() { RTF_GATEWAY } else { 0 },
        rt_pad2: 0,
        rt_pad3: 0,
        rt_pad4: std::ptr::null_mut(),
        rt_metric: 0,
        rt_dev: cdev.as_ptr() as *mut libc::c_char,
        rt_mtu: 0,
        rt_window: 0,
        rt_irtt: 0,
    };
    let s = ctl_socket()?;
    // SAFETY: rt is a valid rtentry; cdev outlives the call.
    let ret = unsafe { libc::ioctl(s.as_raw_fd(), SIOCADDRT as _, &mut rt as *mut RtEntry) };
    check(ret, || format!("adding route {dst}/{prefix} dev {dev}"))?;
    Ok(())
}

/// Write a sysctl under /proc/sys (in the calling thread's network namespace for net.*).
pub fn sysctl(key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).map_err(|e| EmuError::sys(format!("writing {path}"), e))
}

/// `setsockopt(TCP_CONGESTION)`: run a kernel TCP socket under congestion control `cc` (as root
/// this loads the module if needed). What tests and benchmarks of kernel flows across the
/// emulator use.
pub fn set_congestion(fd: &impl AsRawFd, cc: &str) -> std::io::Result<()> {
    // SAFETY: a valid socket and a buffer of the length given.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `getsockopt(TCP_CONGESTION)`: the congestion control a kernel TCP socket runs.
pub fn congestion(fd: &impl AsRawFd) -> Option<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: a valid socket, a buffer and its length.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (r == 0).then(|| {
        let b = &buf[..len as usize];
        String::from_utf8_lossy(b.split(|c| *c == 0).next().unwrap_or(b)).into_owned()
    })
}

/// `getsockopt(TCP_INFO)`: what `ss -ti` shows of a kernel TCP socket.
pub fn tcp_info(fd: &impl AsRawFd) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; zero is a valid value of every field.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid socket, a buffer and its length.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(info)
}

/// A TUN device (layer 3, no packet-information header), non-persistent: it disappears when
/// this handle is dropped or the process ends.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Create `name` in the calling thread's network namespace, non-blocking.
    pub fn create(name: &str) -> Result<Tun> {
        let mut r = IfReq::new(name)?;
        // SAFETY: opening a device node.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        check(fd, || "opening /dev/net/tun".into())?;
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        r.set_i16(IFF_TUN | IFF_NO_PI);
        // SAFETY: r is a valid ifreq.
        let ret = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut r as *mut IfReq) };
        check(ret, || format!("creating TUN device {name} (TUNSETIFF)"))?;
        Ok(Tun {
            fd,
            name: name.to_string(),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw descriptor.
    pub fn raw(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    /// Read one datagram; `Ok(None)` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        // SAFETY: buf is valid for writes of its length.
        let n = unsafe { libc::read(self.raw(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    /// Write one datagram.
    pub fn send(&self, buf: &[u8]) -> std::io::Result<()> {
        // SAFETY: buf is valid for reads of its length.
        let n = unsafe { libc::write(self.raw(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// A new network + PID namespace with a minimal init as its PID 1.
#[derive(Debug)]
pub struct Netns {
    init: libc::pid_t,
    pidfd: OwnedFd,
    life: Option<OwnedFd>,
}

/// A pidfd for `pid` (numeric pids under /proc would be wrong inside a PID namespace whose
/// /proc belongs to an ancestor, as when shells nest).
fn pidfd_open(pid: libc::pid_t) -> Result<OwnedFd> {
    // SAFETY: plain system call.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(EmuError::last_os(format!("pidfd_open({pid})")));
    }
    // SAFETY: fresh descriptor we own (pidfds are close-on-exec).
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

impl Netns {
    /// Create the namespaces. `comm` names the init process (visible in `ps`; at most 15
    /// bytes are kept), which lets `ccp-emu cleanup` find it.
    pub fn new(comm: &str) -> Result<Netns> {
        if !is_root() {
            return Err(EmuError::NotRoot("creating a network namespace".into()));
        }
        let comm = CString::new(comm.replace('\0', "")).expect("no NUL");
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds has room for two descriptors.
        check(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
            || "pipe2".into(),
        )?;
        // SAFETY: both are fresh descriptors we own.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let flags = (libc::CLONE_NEWNET | libc::CLONE_NEWPID | libc::SIGCHLD) as libc::c_ulong;
        // SAFETY: a fork-like clone (no new stack); the child only makes async-signal-safe
        // system calls and never returns from `init_main`.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                flags,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
                0 as libc::c_ulong,
            )
        };
        if pid == 0 {
            init_main(r.as_raw_fd(), &comm);
        }
        if pid < 0 {
            return Err(EmuError::last_os(
                "clone(CLONE_NEWNET|CLONE_NEWPID) to create a namespace",
            ));
        }
        drop(r);
        let pid = pid as libc::pid_t;
        let mut ns = Netns {
            init: pid,
            pidfd: pidfd_open(pid).inspect_err(|_| kill_reap(pid))?,
            life: Some(w),
        };
        // Loopback up, and forwarding on so nested shells inside can route through.
        ns.run(|| {
            link_up("lo")?;
            sysctl("net.ipv4.ip_forward", "1")?;
            sysctl("net.ipv4.conf.all.rp_filter", "0")?;
            sysctl("net.ipv4.conf.default.rp_filter", "0")?;
            disable_ipv6("default")
        })
        .inspect_err(|_| ns.kill())?;
        Ok(ns)
    }

    /// PID (in this process's PID namespace) of the namespace's init.
    pub fn init_pid(&self) -> libc::pid_t {
        self.init
    }

    /// Run `f` on a thread that has entered the network namespace (ioctls, sockets, devices
    /// it creates belong to the namespace).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
        let fd = self.pidfd.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: fd is a pidfd owned by self, alive for the scope.
                let ret = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
                check(ret, || "setns(CLONE_NEWNET)".into())?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(EmuError::Config("namespace thread panicked".into())))
        })
    }

    /// Spawn `cmd` inside the network and PID namespaces. The child is this process's child
    /// (wait for it with the returned handle) and is killed when the namespace goes away.
    pub fn spawn(&self, cmd: &mut Command) -> Result<Child> {
        let fd = self.pidfd.as_raw_fd();
        let what = format!("spawning {:?} in a namespace", cmd.get_program());
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: a pidfd owned by self, alive for the scope. This thread creates no
                // threads after entering the PID namespace.
                check(
                    unsafe { libc::setns(fd, libc::CLONE_NEWNET | libc::CLONE_NEWPID) },
                    || "setns(CLONE_NEWNET|CLONE_NEWPID)".into(),
                )?;
                cmd.spawn().map_err(|e| EmuError::sys(what, e))
            })
            .join()
            .unwrap_or_else(|_| Err(EmuError::Config("spawn thread panicked".into())))
        })
    }

    /// Kill everything in the namespace now.
    pub fn kill(&mut self) {
        self.life = None;
        if self.init > 0 {
            kill_reap(self.init);
            self.init = 0;
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.kill();
    }
}

fn kill_reap(pid: libc::pid_t) {
    // SAFETY: pid is our child; SIGKILL then reap it.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut st = 0;
        while libc::waitpid(pid, &mut st, 0) < 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
    }
}

/// The namespace's PID 1, in the child of a fork-like clone: only async-signal-safe calls.
fn init_main(life: libc::c_int, comm: &CString) -> ! {
    // SAFETY: raw system calls on values prepared before the clone.
    unsafe {
        // Keep only the life pipe; stdio to /dev/null so no pipe of the caller is held open.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::dup2(null, 2);
        }
        let keep = life as libc::c_uint;
        if keep > 3 {
            libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, keep - 1, 0);
        }
        libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0);
        libc::prctl(libc::PR_SET_NAME, comm.as_ptr() as libc::c_ulong, 0, 0, 0);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        loop {
            let mut p = libc::pollfd {
                fd: life,
                events: libc::POLLIN,
                revents: 0,
            };
            let n = libc::poll(&mut p, 1, 200);
            if n > 0 && p.revents != 0 {
                libc::_exit(0);
            }
            let mut st = 0;
            while libc::waitpid(-1, &mut st, libc::WNOHANG) > 0 {}
        }
    }
}

/// Make this thread's timers precise (the default slack is 50 µs).
pub fn precise_timers() {
    // SAFETY: prctl on the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Run the calling thread under SCHED_FIFO (priority 10) so that timers fire on time on a
/// loaded machine; false if the system refuses.
pub fn realtime() -> bool {
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: setting the calling thread's own scheduling policy.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) == 0 }
}

/// Interface names in the calling thread's network namespace.
pub fn interface_names() -> Vec<String> {
    std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// IPv4 routes `(destination, prefix)` of the main table of the calling thread's namespace.
pub fn ipv4_routes() -> Vec<(Ipv4Addr, u8)> {
    let text = std::fs::read_to_string("/proc/thread-self/net/route").unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dst = u32::from_str_radix(f.get(1)?, 16).ok()?;
            let mask = u32::from_str_radix(f.get(7)?, 16).ok()?;
            Some((
                Ipv4Addr::from(u32::from_be(dst)),
                u32::from_be(mask).count_ones() as u8,
            ))
        })
        .collect()
}

/// IPv4 addresses of the calling thread's namespace's interfaces.
pub fn ipv4_addresses() -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut ifa: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below; we only read AF_INET entries.
    unsafe {
        if libc::getifaddrs(&mut ifa) != 0 {
            return out;
        }
        let mut p = ifa;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() && (*a).sa_family as libc::c_int == libc::AF_INET {
                let sin = a as *const libc::sockaddr_in;
                out.push(Ipv4Addr::from(u32::from_be((*sin).sin_addr.s_addr)));
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(ifa);
    }
    out
}
