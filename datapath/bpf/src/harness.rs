//! What the tests and the benchmark share: a private BPF filesystem to pin into (so a test never
//! touches `/sys/fs/bpf`), and one bulk TCP transfer with its goodput and window samples.

use crate::{Pins, mount_bpffs, unload};
pub use ccp_emu::sys::{set_congestion, tcp_info};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A BPF filesystem mounted on a fresh directory under the temporary directory. Dropping it
/// unloads whatever is pinned there (unregistering the congestion control), unmounts it and
/// removes the directory.
pub struct PrivateBpffs {
    pub dir: PathBuf,
    pub pins: Pins,
}

impl PrivateBpffs {
    /// Mount one for this process, after removing those of processes that died without
    /// cleaning up (killed by a signal).
    pub fn new(tag: &str) -> std::io::Result<PrivateBpffs> {
        sweep_stale();
        let dir = std::env::temp_dir().join(format!("ccp-bpf-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        if !mount_bpffs(&dir) {
            let e = std::io::Error::last_os_error();
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        Ok(PrivateBpffs {
            pins: Pins::new(dir.join("ccp")),
            dir,
        })
    }
}

fn release(dir: &std::path::Path) {
    let _ = unload(&Pins::new(dir.join("ccp")));
    if let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) {
        // SAFETY: a valid path.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
    let _ = std::fs::remove_dir(dir);
}

/// Unload, unmount and remove the private BPF filesystems of dead processes.
pub fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("ccp-bpf-") else {
            continue;
        };
        let Some(pid) = rest.rsplit('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            release(&e.path());
        }
    }
}

impl Drop for PrivateBpffs {
    fn drop(&mut self) {
        release(&self.dir);
    }
}

/// A receiver that counts bytes: accept one connection on `listener` and read until EOF.
pub fn count_bytes(listener: TcpListener) -> (Arc<AtomicU64>, std::thread::JoinHandle<()>) {
    let received = Arc::new(AtomicU64::new(0));
    let c = received.clone();
    let h = std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let mut buf = vec![0u8; 1 << 18];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
    });
    (received, h)
}

/// One window sample of the sender's socket.
#[derive(Clone, Copy, Debug)]
pub struct WindowSample {
    /// Seconds since the start.
    pub t: f64,
    /// `tcpi_snd_cwnd`, packets.
    pub cwnd: u32,
    /// `tcpi_snd_mss`, bytes.
    pub mss: u32,
}

/// The outcome of [`transfer`].
#[derive(Clone, Debug, Default)]
pub struct Transfer {
    /// Bytes received after the warm-up.
    pub bytes: u64,
    /// Goodput after the warm-up, bit/s.
    pub goodput_bps: f64,
    /// Goodput per [`PERIOD`], bit/s, with the period's start time.
    pub periods: Vec<(f64, f64)>,
    pub windows: Vec<WindowSample>,
    /// Retransmitted segments (`tcpi_total_retrans`).
    pub retransmits: u32,
}

/// The sampling period of [`transfer`].
pub const PERIOD: Duration = Duration::from_millis(50);

/// Send as fast as the socket takes for `secs` seconds from `sender` (already connected, its
/// congestion control set) to a receiver counting into `received`; samples the window every
/// [`PERIOD`] and calls `each(t)` then. Goodput counts from `warmup` seconds on.
pub fn transfer(
    sender: TcpStream,
    received: &AtomicU64,
    secs: f64,
    warmup: f64,
    mut each: impl FnMut(f64),
) -> std::io::Result<Transfer> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut w = sender.try_clone()?;
    let st = stop.clone();
    let writer = std::thread::spawn(move || {
        let buf = vec![0x5au8; 1 << 18];
        while !st.load(Ordering::Relaxed) {
            if w.write_all(&buf).is_err() {
                break;
            }
        }
    });
    let t0 = Instant::now();
    let mut out = Transfer::default();
    let mut at_warmup = None;
    let mut last = (0.0, received.load(Ordering::Relaxed));
    loop {
        std::thread::sleep(PERIOD);
        let t = t0.elapsed().as_secs_f64();
        let r = received.load(Ordering::Relaxed);
        out.periods
            .push((last.0, (r - last.1) as f64 * 8.0 / (t - last.0)));
        last = (t, r);
        if at_warmup.is_none() && t >= warmup {
            at_warmup = Some((t, r));
        }
        if let Some(i) = tcp_info(&sender) {
            out.windows.push(WindowSample {
                t,
                cwnd: i.tcpi_snd_cwnd,
                mss: i.tcpi_snd_mss,
            });
            out.retransmits = i.tcpi_total_retrans;
        }
        each(t);
        if t >= secs {
            break;
        }
    }
    let (tw, rw) = at_warmup.unwrap_or((0.0, 0));
    let t = t0.elapsed().as_secs_f64();
    out.bytes = received.load(Ordering::Relaxed) - rw;
    out.goodput_bps = out.bytes as f64 * 8.0 / (t - tw);
    stop.store(true, Ordering::Relaxed);
    let _ = sender.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
    Ok(out)
}
