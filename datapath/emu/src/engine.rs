//! The forwarding engine: one thread per direction reads datagrams from its input TUN devices
//! the moment they arrive, runs them through the direction's [`Pipeline`] on a shared µs clock,
//! and writes each one to its output device at its scheduled departure time, sleeping in
//! `ppoll` with 1 ns timer slack between events. It records how late each write is against its
//! schedule, and counts every packet it could not forward itself (as opposed to those the
//! emulated link dropped).

use crate::error::{EmuError, Result};
use crate::packet::{Packet, Pool};
use crate::stage::{Pipeline, StageStats};
use crate::sys::{Tun, precise_timers};
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// The emulator's time origin: µs since it, and the Unix time it corresponds to (for logs).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: Instant,
    unix_us: u64,
}

impl Clock {
    /// A clock starting now.
    pub fn start() -> Clock {
        let origin = Instant::now();
        let unix_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Clock { origin, unix_us }
    }

    /// µs since the origin.
    pub fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    /// Unix time of the origin, ms.
    pub fn unix_ms(&self) -> u64 {
        self.unix_us / 1000
    }

    /// Unix time of the origin, µs (to compare with kernel timestamps such as SO_TIMESTAMPNS).
    pub fn unix_us(&self) -> u64 {
        self.unix_us
    }

    /// The instant of `t` µs.
    pub fn instant(&self, t: u64) -> Instant {
        self.origin + std::time::Duration::from_micros(t)
    }
}

/// A histogram of departure lateness (actual write time minus scheduled time), 1 µs bins up to
/// 100 ms.
#[derive(Clone, Debug)]
pub struct Lateness {
    bins: Vec<u64>,
    count: u64,
    max: usize,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            bins: vec![0; 100_001],
            count: 0,
            max: 0,
        }
    }
}

impl Lateness {
    /// Record one departure `late_us` after its schedule.
    pub fn record(&mut self, late_us: u64) {
        let i = (late_us as usize).min(self.bins.len() - 1);
        self.bins[i] += 1;
        self.count += 1;
        self.max = self.max.max(i);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The q-quantile in µs (0 ≤ q ≤ 1).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let target = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, b) in self.bins.iter().enumerate() {
            acc += b;
            if acc >= target {
                return i as u64;
            }
        }
        (self.bins.len() - 1) as u64
    }

    /// Forget everything.
    pub fn reset(&mut self) {
        self.bins[..=self.max].iter_mut().for_each(|b| *b = 0);
        self.count = 0;
        self.max = 0;
    }

    /// Add another histogram's samples.
    pub fn merge(&mut self, other: &Lateness) {
        for (a, b) in self.bins[..=other.max]
            .iter_mut()
            .zip(&other.bins[..=other.max])
        {
            *a += *b;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }

    /// The largest sample, µs (capped at 100 ms).
    pub fn max(&self) -> u64 {
        self.max as u64
    }
}

/// Live counters of one direction.
#[derive(Debug, Default)]
pub struct DirStats {
    /// The pipeline's counters (link drops, marks, ...), refreshed every loop.
    pub stages: Mutex<StageStats>,
    /// Departure lateness.
    pub lateness: Mutex<Lateness>,
    /// Datagrams read from the input devices.
    pub read: AtomicU64,
    /// Datagrams the output device refused (emulator losses, not the link's).
    pub write_errors: AtomicU64,
    /// Datagrams with no route (testbed) or too large.
    pub unroutable: AtomicU64,
    /// Whether the pipeline finished for good (`--once`).
    pub finished: AtomicBool,
}

/// Where a direction writes.
pub enum Output {
    /// One device.
    One(Arc<Tun>),
    /// By destination address (testbed downlink).
    Route(Vec<(Ipv4Addr, Arc<Tun>)>),
}

impl Output {
    fn pick(&self, p: &Packet) -> Option<&Tun> {
        match self {
            Output::One(t) => Some(t),
            Output::Route(r) => match p.dst()? {
                IpAddr::V4(a) => r.iter().find(|(x, _)| *x == a).map(|(_, t)| &**t),
                IpAddr::V6(_) => None,
            },
        }
    }
}

/// One running direction.
pub struct Direction {
    stop: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    /// Its counters.
    pub stats: Arc<DirStats>,
}

fn eventfd() -> Result<OwnedFd> {
    // SAFETY: plain eventfd creation.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(EmuError::last_os("eventfd"));
    }
    // SAFETY: fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Direction {
    /// Start forwarding from `inputs` through `pipeline` to `output`.
    pub fn start(
        name: &str,
        inputs: Vec<Arc<Tun>>,
        output: Output,
        pipeline: Pipeline,
        clock: Clock,
        realtime: bool,
    ) -> Result<Direction> {
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(eventfd()?);
        let stats = Arc::new(DirStats::default());
        let (s2, w2, st2) = (stop.clone(), wake.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name(format!("emu-{name}"))
            .spawn(move || {
                if realtime && !crate::sys::realtime() {
                    tracing::warn!("SCHED_FIFO refused; forwarding at normal priority");
                }
                run(inputs, output, pipeline, clock, s2, w2, st2)
            })
            .map_err(|e| EmuError::sys("starting a forwarding thread", e))?;
        Ok(Direction {
            stop,
            wake,
            thread: Some(thread),
            stats,
        })
    }

    /// Stop the thread and wait for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to our eventfd.
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Direction {
    fn drop(&mut self) {
        self.stop();
    }
}

const BATCH: usize = 64;

struct Sink {
    output: Output,
    clock: Clock,
    pool: Pool,
    late: Lateness,
    read: u64,
    write_errors: u64,
    unroutable: u64,
}

impl Sink {
    fn emit(&mut self, t: u64, p: Packet) {
        let now = self.clock.now_us();
        self.late.record(now.saturating_sub(t));
        match self.output.pick(&p) {
            Some(tun) => {
                if tun.send(&p.data).is_err() {
                    self.write_errors += 1;
                }
            }
            None => self.unroutable += 1,
        }
        self.pool.put(p.data);
    }
}

fn run(
    inputs: Vec<Arc<Tun>>,
    output: Output,
    mut pipeline: Pipeline,
    clock: Clock,
    stop: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    stats: Arc<DirStats>,
) {
    precise_timers();
    let mut k = Sink {
        output,
        clock,
        pool: Pool::default(),
        late: Lateness::default(),
        read: 0,
        write_errors: 0,
        unroutable: 0,
    };
    let mut last_publish = 0u64;
    // Which inputs may have datagrams waiting (a woken-up-for-a-departure loop skips the read).
    let mut ready = vec![true; inputs.len()];
    let mut pfds: Vec<libc::pollfd> = inputs
        .iter()
        .map(|t| libc::pollfd {
            fd: t.raw(),
            events: libc::POLLIN,
            revents: 0,
        })
        .chain(std::iter::once(libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }))
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let now = clock.now_us();
        pipeline.advance(now, &mut |t, p| k.emit(t, p));
        // Read what is waiting, stamping each datagram when it is read.
        let mut got_any = true;
        let mut rounds = 0;
        while got_any && rounds < BATCH {
            got_any = false;
            rounds += 1;
            for (i, tun) in inputs.iter().enumerate() {
                if !ready[i] {
                    continue;
                }
                let mut buf = k.pool.get();
                match tun.recv(&mut buf) {
                    Ok(Some(n)) if n > 0 => {
                        buf.truncate(n);
                        k.read += 1;
                        got_any = true;
                        let t = clock.now_us();
                        pipeline.advance(t, &mut |t, p| k.emit(t, p));
                        pipeline.arrive(t, Packet::new(buf), &mut |t, p| k.emit(t, p));
                    }
                    _ => {
                        // Drained: skip this device until ppoll says it is readable again.
                        ready[i] = false;
                        k.pool.put(buf);
                    }
                }
            }
        }
        let now = clock.now_us();
        pipeline.advance(now, &mut |t, p| k.emit(t, p));
        if got_any {
            // Publish counters every PUBLISH_EVERY_US while busy (cheap, uncontended).
            if now >= last_publish + PUBLISH_EVERY_US {
                last_publish = now;
                publish(&stats, &pipeline, &mut k);
            }
            continue;
        }
        let timeout = pipeline
            .next_event()
            .map(|t| t.saturating_sub(clock.now_us()));
        if timeout == Some(0) {
            continue;
        }
        // About to sleep: publish if the counters are stale and the sleep is long, or if they
        // are PUBLISH_EVERY_US old (a saturated link departs a packet every few hundred µs, so
        // its sleeps are all short and the live counters would otherwise stay at the run's
        // start).
        if last_publish < now
            && (timeout.is_none_or(|t| t > 2_000) || now >= last_publish + PUBLISH_EVERY_US)
        {
            last_publish = now;
            publish(&stats, &pipeline, &mut k);
        }
        let ts = timeout.map(|us| libc::timespec {
            tv_sec: (us / 1_000_000) as libc::time_t,
            tv_nsec: ((us % 1_000_000) * 1000) as libc::c_long,
        });
        for p in pfds.iter_mut() {
            p.revents = 0;
        }
        // SAFETY: pfds is a valid array; ts lives across the call.
        unsafe {
            libc::ppoll(
                pfds.as_mut_ptr(),
                pfds.len() as libc::nfds_t,
                ts.as_ref().map_or(std::ptr::null(), |t| t as *const _),
                std::ptr::null(),
            );
        }
        for (r, p) in ready.iter_mut().zip(&pfds) {
            *r = p.revents != 0;
        }
        if pfds.last().is_some_and(|p| p.revents != 0) {
            let mut v = 0u64;
            // SAFETY: draining our eventfd.
            unsafe {
                libc::read(
                    wake.as_raw_fd(),
                    (&mut v as *mut u64).cast(),
                    std::mem::size_of::<u64>(),
                );
            }
        }
    }
    pipeline.flush();
    publish(&stats, &pipeline, &mut k);
}

/// Longest age, µs, of the live counters (`DirStats`) while the link is busy. Readers take
/// them as the link's state at the time they read them (the experiment layer reads the uplink's
/// bytes at the warm-up's and the flows' end), so their age is the error of such a reading:
/// 2 ms is 0.07 % of a 3-s window at a saturated link. A publication is a lock and a copy.
const PUBLISH_EVERY_US: u64 = 2_000;

fn publish(stats: &DirStats, pipeline: &Pipeline, k: &mut Sink) {
    stats.read.store(k.read, Ordering::Relaxed);
    stats.write_errors.store(k.write_errors, Ordering::Relaxed);
    stats.unroutable.store(k.unroutable, Ordering::Relaxed);
    if let Ok(mut s) = stats.stages.lock() {
        *s = pipeline.stats();
    }
    if k.late.count() > 0
        && let Ok(mut l) = stats.lateness.lock()
    {
        l.merge(&k.late);
        k.late.reset();
    }
    if pipeline.finished() {
        stats.finished.store(true, Ordering::SeqCst);
    }
}
