//! `ccp-bpf`: kernel TCP under CCP without a kernel module.
//!
//! A BPF `tcp_congestion_ops` (registered through `struct_ops` under the name `ccp_bpf` by
//! default, source in `src/bpf/ccp_bpf.bpf.c`) streams one sample per ACK into a ring buffer and
//! applies the window and pacing rate that a userspace daemon writes into a hash map, per socket.
//! The daemon ([`daemon::run`]) feeds the samples to the project's libccp-compatible engine
//! through ccp-udp's [`ccp_udp::ccp::ControlPlane`] (one libccp connection per socket), which talks
//! to `ccp-agent` over its unix socket; the datapath programs the agent installs run in userspace
//! on the streamed samples. Without fresh values from the daemon (it is gone, stuck, or the socket
//! is new) the BPF program runs Reno itself.
//!
//! Loading pins the struct_ops link and the maps in bpffs ([`Pins`]), so the registration
//! outlives the loader and a restarted daemon finds the running sockets' samples and controls
//! them again. [`unload`] removes the pins, which unregisters the algorithm; both are safe to
//! repeat.

pub mod daemon;
pub mod harness;

#[allow(clippy::all, clippy::pedantic, unsafe_op_in_unsafe_fn, missing_docs)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/ccp_bpf.skel.rs"));
}

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::path::{Path, PathBuf};

/// Default name of the congestion control (what `TCP_CONGESTION` / `iperf3 -C` select).
pub const DEFAULT_NAME: &str = "ccp_bpf";
/// Default bpffs directory of the pins.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/ccp_bpf";

/// One sample, as the BPF program writes it into the ring buffer (`struct ccp_sample`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC), ns.
    pub ts_ns: u64,
    /// Socket id, assigned by the BPF program at `init` (1, 2, ... per registration).
    pub id: u32,
    /// [`KIND_ACK`] or [`KIND_RELEASE`].
    pub kind: u32,
    /// Local and remote IPv4 addresses and ports, host order.
    pub saddr: u32,
    pub daddr: u32,
    pub sport: u16,
    pub dport: u16,
    /// `tcp_sock.mss_cache`, bytes.
    pub mss: u32,
    /// Congestion window after this ACK, packets.
    pub snd_cwnd: u32,
    /// Packets newly acked or SACKed by this ACK (`rate_sample.acked_sacked`).
    pub acked_sacked: u32,
    /// Packets currently SACKed (`tcp_sock.sacked_out`).
    pub sacked_out: u32,
    /// Packets delivered over the rate sample's interval (`rate_sample.delivered`).
    pub delivered: i32,
    /// Of them, ECN-CE marked (`rate_sample.delivered_ce`).
    pub delivered_ce: i32,
    /// Send and receive intervals of the rate sample, µs.
    pub snd_interval_us: u32,
    pub rcv_interval_us: u32,
    pub pad0: u32,
    /// Rate sample interval, µs.
    pub interval_us: i64,
    /// RTT of this ACK, µs; negative: none.
    pub rtt_us: i64,
    /// Packets newly marked lost.
    pub losses: i32,
    /// Packets in flight after this ACK.
    pub in_flight: u32,
    /// Bytes written but not yet acknowledged (`write_seq - snd_una`).
    pub bytes_pending: u32,
    /// [`F_APP_LIMITED`], [`F_FALLBACK`], [`F_RECOVERY`], [`F_LOSS`].
    pub flags: u32,
    /// Cumulative bytes acked (`tcp_sock.bytes_acked`).
    pub bytes_acked: u64,
    /// `sk_pacing_rate` after this ACK, bytes/s.
    pub pacing_rate: u64,
}

pub const KIND_ACK: u32 = 0;
pub const KIND_RELEASE: u32 = 2;
pub const F_APP_LIMITED: u32 = 1;
/// The BPF program ran Reno on this ACK (no fresh daemon entry).
pub const F_FALLBACK: u32 = 2;
pub const F_RECOVERY: u32 = 4;
pub const F_LOSS: u32 = 8;

const _: () = assert!(std::mem::size_of::<Sample>() == 112);

impl Sample {
    /// Parse one ring-buffer record.
    pub fn from_bytes(b: &[u8]) -> Option<Sample> {
        if b.len() < std::mem::size_of::<Sample>() {
            return None;
        }
        // SAFETY: Sample is plain old data of this size; unaligned read.
        Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<Sample>()) })
    }
}

/// What the daemon wants for one socket (`struct ccp_ctl`, value of the `ctl` map).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ctl {
    /// Congestion window, bytes (0: keep).
    pub cwnd_bytes: u32,
    pub pad: u32,
    /// Pacing rate, bytes/s (0: the kernel's window-based pacing rate).
    pub rate: u64,
    /// CLOCK_MONOTONIC of the write, ns; the BPF program ignores entries older than its
    /// fallback timeout.
    pub updated_ns: u64,
}

impl Ctl {
    fn to_bytes(self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..4].copy_from_slice(&self.cwnd_bytes.to_ne_bytes());
        b[8..16].copy_from_slice(&self.rate.to_ne_bytes());
        b[16..24].copy_from_slice(&self.updated_ns.to_ne_bytes());
        b
    }
}

/// CLOCK_MONOTONIC, ns (the clock of `bpf_ktime_get_ns`).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Errors of loading and unloading.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    #[error(
        "{0} is not a BPF filesystem (mount one: mount -t bpf bpf /sys/fs/bpf), or it is missing"
    )]
    NoBpffs(PathBuf),
    #[error("this kernel has no BTF (/sys/kernel/btf/vmlinux): BPF struct_ops needs it")]
    NoBtf,
    #[error("name {0:?} is too long for a congestion control (at most 15 bytes)")]
    BadName(String),
    #[error("{what}: {source}")]
    Bpf {
        what: String,
        source: libbpf_rs::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

fn bpf(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> BpfError {
    let what = what.into();
    move |source| BpfError::Bpf { what, source }
}

/// Where the pins live.
#[derive(Clone, Debug)]
pub struct Pins {
    pub dir: PathBuf,
}

impl Pins {
    pub fn new(dir: impl Into<PathBuf>) -> Pins {
        Pins { dir: dir.into() }
    }
    pub fn link(&self) -> PathBuf {
        self.dir.join("link")
    }
    pub fn samples(&self) -> PathBuf {
        self.dir.join("samples")
    }
    pub fn ctl(&self) -> PathBuf {
        self.dir.join("ctl")
    }
    pub fn counters(&self) -> PathBuf {
        self.dir.join("counters")
    }
    fn all(&self) -> [PathBuf; 4] {
        [self.link(), self.samples(), self.ctl(), self.counters()]
    }
    /// Whether a registration is pinned here.
    pub fn loaded(&self) -> bool {
        self.link().exists()
    }
}

/// How to load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub pins: Pins,
    /// Congestion control name, at most 15 bytes; default [`DEFAULT_NAME`].
    pub name: String,
    /// How long a daemon entry stays valid before the socket falls back to Reno in BPF, ns;
    /// default 100 ms (a few heartbeats of the daemon, which rewrites every entry every 20 ms).
    pub fallback_ns: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            pins: Pins::new(DEFAULT_PIN_DIR),
            name: DEFAULT_NAME.into(),
            fallback_ns: 100_000_000,
        }
    }
}

/// The outcome of [`load`].
#[derive(Debug, PartialEq, Eq)]
pub enum Loaded {
    Now,
    Already,
}

/// Whether the running kernel can take a BPF congestion control (BTF present).
pub fn kernel_supported() -> Result<(), BpfError> {
    if Path::new("/sys/kernel/btf/vmlinux").exists() {
        Ok(())
    } else {
        Err(BpfError::NoBtf)
    }
}

fn is_bpffs(dir: &Path) -> bool {
    const BPF_FS_MAGIC: i64 = 0xcafe4a11;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: valid path and out pointer.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    r == 0 && st.f_type as i64 == BPF_FS_MAGIC
}

/// Mount a BPF filesystem at `dir` (which must exist).
pub fn mount_bpffs(dir: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: valid C strings.
    unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            c.as_ptr(),
            c"bpf".as_ptr(),
            0,
            c"mode=0700".as_ptr().cast(),
        ) == 0
    }
}

/// Load the program, register it under `opts.name` and pin everything in `opts.pins.dir`.
/// Does nothing if a registration is already pinned there. On failure nothing stays behind.
pub fn load(opts: &LoadOptions) -> Result<Loaded, BpfError> {
    kernel_supported()?;
    if opts.name.is_empty() || opts.name.len() > 15 {
        return Err(BpfError::BadName(opts.name.clone()));
    }
    if opts.pins.loaded() {
        return Ok(Loaded::Already);
    }
    let parent = opts.pins.dir.parent().unwrap_or(Path::new("/"));
    if !is_bpffs(parent) {
        // As bpftool does: the standard place gets a BPF filesystem if it has none.
        if parent == Path::new("/sys/fs/bpf") {
            mount_bpffs(parent);
        }
        if !is_bpffs(parent) {
            return Err(BpfError::NoBpffs(parent.to_path_buf()));
        }
    }
    std::fs::create_dir_all(&opts.pins.dir).map_err(|source| BpfError::Io {
        what: format!("create {}", opts.pins.dir.display()),
        source,
    })?;
    let r = load_inner(opts);
    if r.is_err() {
        let _ = unload(&opts.pins);
    }
    r.map(|()| Loaded::Now)
}

fn load_inner(opts: &LoadOptions) -> Result<(), BpfError> {
    let mut obj = std::mem::MaybeUninit::uninit();
    let mut open = skel::CcpBpfSkelBuilder::default()
        .open(&mut obj)
        .map_err(bpf("open the BPF object"))?;
    if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
        ro.fallback_ns = opts.fallback_ns;
    }
    let name = &mut open.struct_ops.ccp_bpf_mut().name;
    *name = [0; 16];
    for (d, s) in name.iter_mut().zip(opts.name.bytes()) {
        *d = s as i8;
    }
    let mut skel = open.load().map_err(bpf(
        "load the BPF programs (is BPF struct_ops TCP congestion control, bpf_tcp_ca, available?)",
    ))?;
    let pins = &opts.pins;
    skel.maps
        .samples
        .pin(pins.samples())
        .map_err(bpf("pin the ring buffer"))?;
    skel.maps
        .ctl
        .pin(pins.ctl())
        .map_err(bpf("pin the control map"))?;
    skel.maps
        .counters
        .pin(pins.counters())
        .map_err(bpf("pin the counters"))?;
    let mut link = skel.maps.ccp_bpf.attach_struct_ops().map_err(bpf(format!(
        "register the congestion control {:?} (is the name taken?)",
        opts.name
    )))?;
    link.pin(pins.link())
        .map_err(bpf("pin the struct_ops link"))?;
    Ok(())
}

/// Remove every pin in `pins.dir` (the link first, which unregisters the congestion control once
/// no process holds it) and the directory. Returns whether anything was there. Sockets already
/// using the algorithm keep it until they close.
pub fn unload(pins: &Pins) -> Result<bool, BpfError> {
    let mut any = false;
    for p in pins.all() {
        match std::fs::remove_file(&p) {
            Ok(()) => any = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(BpfError::Io {
                    what: format!("remove {}", p.display()),
                    source,
                });
            }
        }
    }
    match std::fs::remove_dir(&pins.dir) {
        Ok(()) => any = true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(BpfError::Io {
                what: format!("remove {}", pins.dir.display()),
                source,
            });
        }
    }
    Ok(any)
}

/// Counters of the BPF program, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BpfCounters {
    /// Samples written into the ring buffer.
    pub samples: u64,
    /// Samples lost because the ring buffer was full (the daemon is gone or too slow).
    pub dropped: u64,
    /// ACKs on which the daemon's window/rate was applied.
    pub applied: u64,
    /// ACKs on which the BPF Reno fallback ran.
    pub fallback: u64,
    /// Sockets that selected the algorithm.
    pub sockets: u64,
    /// Sockets that released it.
    pub released: u64,
}

/// Read the pinned counters.
pub fn read_counters(pins: &Pins) -> Result<BpfCounters, BpfError> {
    let m = MapHandle::from_pinned_path(pins.counters()).map_err(bpf("open the counters"))?;
    let mut v = [0u64; 8];
    for (i, slot) in v.iter_mut().enumerate() {
        let key = (i as u32).to_ne_bytes();
        if let Some(per_cpu) = m
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(bpf("read the counters"))?
        {
            *slot = per_cpu
                .iter()
                .map(|b| u64::from_ne_bytes(b[..8].try_into().unwrap_or([0; 8])))
                .sum();
        }
    }
    Ok(BpfCounters {
        samples: v[0],
        dropped: v[1],
        applied: v[2],
        fallback: v[3],
        sockets: v[4],
        released: v[5],
    })
}

/// The pinned control map, for writing decisions.
pub struct CtlMap(MapHandle);

impl CtlMap {
    pub fn open(pins: &Pins) -> Result<CtlMap, BpfError> {
        MapHandle::from_pinned_path(pins.ctl())
            .map(CtlMap)
            .map_err(bpf("open the control map"))
    }
    pub fn write(&self, id: u32, c: Ctl) -> Result<(), BpfError> {
        self.0
            .update(&id.to_ne_bytes(), &c.to_bytes(), MapFlags::ANY)
            .map_err(bpf("write the control map"))
    }
    pub fn remove(&self, id: u32) {
        let _ = self.0.delete(&id.to_ne_bytes());
    }
}

/// Whether `name` is registered as a TCP congestion control right now.
pub fn registered(name: &str) -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().any(|n| n == name))
        .unwrap_or(false)
}
