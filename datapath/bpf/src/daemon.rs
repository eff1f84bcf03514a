//! The userspace half: samples from the ring buffer in, one libccp connection per socket (the
//! project's engine, through ccp-udp's control plane), windows and rates out through the `ctl`
//! map.
//!
//! Each sample becomes libccp primitives the way ccp-kernel's `load_primitives` computes them:
//! bytes acked from the growth of `tcp_sock.bytes_acked`, misordered packets from the growth of
//! `sacked_out`, in-order packets `acked_sacked - misordered`, losses, RTT, in-flight and pending
//! bytes, send/receive rates `delivered * mss / interval` (ccp-kernel uses a fixed 1500-byte MTU
//! there; the socket's MSS is used here), ECN from `delivered_ce`, and `was_timeout` on entering
//! the loss state. The control plane runs the agent's datapath program on them and, while the
//! agent is away, its own Reno. Every decision that changes is written at once; every entry is
//! rewritten every [`HEARTBEAT`] so the BPF program knows the daemon is alive.

use crate::{
    BpfError, Ctl, CtlMap, F_LOSS, KIND_ACK, KIND_RELEASE, Pins, Sample, bpf, monotonic_ns,
};
use ccp_udp::cc::{AckSample, FlowController, FlowMeta};
use ccp_udp::ccp::{BackendKind, CcpConfig, ControlPlane};
use libbpf_rs::{MapHandle, RingBufferBuilder};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How often every socket's entry is rewritten.
pub const HEARTBEAT: Duration = Duration::from_millis(20);

/// Daemon settings.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    pub pins: Pins,
    /// The agent's unix socket.
    pub agent_socket: PathBuf,
    /// The daemon's own socket (default: beside the agent's).
    pub local_socket: Option<PathBuf>,
    /// Algorithm name the sockets ask the agent for ("" = the agent's default / rules).
    pub algorithm: String,
    /// Write [`DaemonStats`] as JSON here every 200 ms and at exit.
    pub stats: Option<PathBuf>,
}

/// What the daemon did.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct DaemonStats {
    /// Samples read from the ring buffer.
    pub samples: u64,
    /// Sockets seen (connections created at the agent).
    pub flows_created: u64,
    /// Sockets released.
    pub flows_closed: u64,
    /// Entries written into the control map.
    pub ctl_writes: u64,
    /// Failed writes.
    pub ctl_errors: u64,
    /// Samples the BPF program took while in its Reno fallback.
    pub fallback_samples: u64,
    /// Per live socket: the window (bytes) last written and who decided it.
    pub flows: HashMap<u32, FlowStat>,
    /// Seconds since the daemon started.
    pub uptime_s: f64,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct FlowStat {
    pub cwnd_bytes: u32,
    pub rate: u64,
    pub controller: String,
    pub samples: u64,
    /// The kernel's window on the latest sample, bytes.
    pub kernel_cwnd_bytes: u64,
}

struct Flow {
    ctrl: Box<dyn FlowController>,
    last_bytes_acked: u64,
    last_sacked_out: u32,
    was_loss: bool,
    written: Option<(u32, u64)>,
    written_at: Instant,
    last_sample: Instant,
    gauges: AckSample,
}

struct State {
    cp: ControlPlane,
    ctl: CtlMap,
    algorithm: String,
    flows: HashMap<u32, Flow>,
    stats: DaemonStats,
}

impl State {
    fn on_sample(&mut self, s: &Sample) {
        self.stats.samples += 1;
        if s.kind == KIND_RELEASE {
            // The BPF program deleted the socket's entry when it released it, but a heartbeat
            // written between that and this sample put it back; ids are never reused, so
            // nothing else would remove it.
            self.ctl.remove(s.id);
            if let Some(mut f) = self.flows.remove(&s.id) {
                f.ctrl.close();
                self.stats.flows_closed += 1;
                self.stats.flows.remove(&s.id);
            }
            return;
        }
        if s.kind != KIND_ACK || s.mss == 0 {
            return;
        }
        if s.flags & crate::F_FALLBACK != 0 {
            self.stats.fallback_samples += 1;
        }
        let mss = s.mss;
        let flow = self.flows.entry(s.id).or_insert_with(|| {
            let meta = FlowMeta {
                mss,
                init_cwnd: s.snd_cwnd.saturating_mul(mss),
                src_ip: s.saddr,
                src_port: s.sport,
                dst_ip: s.daddr,
                dst_port: s.dport,
                algorithm: self.algorithm.clone(),
            };
            info!(id = s.id, src = %format!("{}:{}", std::net::Ipv4Addr::from(s.saddr), s.sport),
                dst = %format!("{}:{}", std::net::Ipv4Addr::from(s.daddr), s.dport),
                cwnd_pkts = s.snd_cwnd, "new socket");
            self.stats.flows_created += 1;
            Flow {
                ctrl: self.cp.controller(&meta),
                last_bytes_acked: s.bytes_acked,
                last_sacked_out: s.sacked_out,
                was_loss: false,
                written: None,
                written_at: Instant::now(),
                last_sample: Instant::now(),
                gauges: AckSample::default(),
            }
        });
        let a = primitives(flow, s);
        flow.ctrl.on_ack(&a);
        flow.gauges = AckSample {
            bytes_in_flight: a.bytes_in_flight,
            packets_in_flight: a.packets_in_flight,
            bytes_pending: a.bytes_pending,
            rate_incoming: a.rate_incoming,
            rate_outgoing: a.rate_outgoing,
            ..AckSample::default()
        };
        flow.last_sample = Instant::now();
        let st = self.stats.flows.entry(s.id).or_default();
        st.samples += 1;
        st.kernel_cwnd_bytes = u64::from(s.snd_cwnd) * u64::from(mss);
        write(
            &self.ctl,
            &mut self.stats.ctl_writes,
            &mut self.stats.ctl_errors,
            s.id,
            flow,
            st,
            false,
        );
    }

    /// Ticks for flows without ACKs, and heartbeats.
    fn housekeeping(&mut self) {
        let now = Instant::now();
        for (&id, flow) in self.flows.iter_mut() {
            let idle = now.duration_since(flow.last_sample);
            if idle >= Duration::from_micros(flow.ctrl.tick_us()) && idle < Duration::from_secs(1) {
                let g = flow.gauges;
                flow.ctrl.on_tick(&g);
            }
            let st = self.stats.flows.entry(id).or_default();
            write(
                &self.ctl,
                &mut self.stats.ctl_writes,
                &mut self.stats.ctl_errors,
                id,
                flow,
                st,
                true,
            );
        }
    }
}

fn write(
    ctl: &CtlMap,
    writes: &mut u64,
    errors: &mut u64,
    id: u32,
    flow: &mut Flow,
    st: &mut FlowStat,
    heartbeat_only: bool,
) {
    let want = (flow.ctrl.cwnd(), flow.ctrl.pacing_rate().unwrap_or(0));
    let stale = flow.written_at.elapsed() >= HEARTBEAT;
    let changed = flow.written != Some(want);
    if !(stale || (changed && !heartbeat_only)) {
        return;
    }
    let c = Ctl {
        cwnd_bytes: want.0,
        pad: 0,
        rate: want.1,
        updated_ns: monotonic_ns(),
    };
    match ctl.write(id, c) {
        Ok(()) => {
            *writes += 1;
            flow.written = Some(want);
            flow.written_at = Instant::now();
            st.cwnd_bytes = want.0;
            st.rate = want.1;
            st.controller = flow.ctrl.controller_name();
        }
        Err(e) => {
            *errors += 1;
            if *errors == 1 {
                warn!(error = %e, "cannot write the control map");
            }
        }
    }
}

/// libccp primitives of one sample (ccp-kernel's `load_primitives`).
fn primitives(f: &mut Flow, s: &Sample) -> AckSample {
    let mss = u64::from(s.mss);
    let bytes_acked = s.bytes_acked.saturating_sub(f.last_bytes_acked);
    f.last_bytes_acked = s.bytes_acked;
    let misordered = s.sacked_out.saturating_sub(f.last_sacked_out);
    f.last_sacked_out = s.sacked_out;
    let loss = s.flags & F_LOSS != 0;
    let was_timeout = loss && !f.was_loss;
    f.was_loss = loss;
    let delivered = u64::try_from(s.delivered).unwrap_or(0);
    let rate = |interval_us: u32| {
        if interval_us == 0 || delivered == 0 {
            0
        } else {
            delivered * mss * 1_000_000 / u64::from(interval_us)
        }
    };
    let ce = u32::try_from(s.delivered_ce).unwrap_or(0);
    AckSample {
        bytes_acked: u32::try_from(bytes_acked).unwrap_or(u32::MAX),
        packets_acked: s.acked_sacked.saturating_sub(misordered),
        bytes_misordered: misordered.saturating_mul(s.mss),
        packets_misordered: misordered,
        ecn_bytes: ce.saturating_mul(s.mss),
        ecn_packets: ce,
        lost_pkts: u32::try_from(s.losses).unwrap_or(0),
        was_timeout,
        rtt_us: u64::try_from(s.rtt_us).unwrap_or(0),
        rate_outgoing: rate(s.snd_interval_us),
        rate_incoming: rate(s.rcv_interval_us),
        bytes_in_flight: s.in_flight.saturating_mul(s.mss),
        packets_in_flight: s.in_flight,
        bytes_pending: s.bytes_pending,
    }
}

fn write_stats(path: &Path, stats: &DaemonStats) {
    if let Ok(b) = serde_json::to_vec_pretty(stats) {
        let _ = ccp_files::write_bytes(path, b);
    }
}

/// Run until `stop` is set. Needs a registration pinned at `cfg.pins` ([`crate::load`]).
pub fn run(cfg: &DaemonConfig, stop: Arc<AtomicBool>) -> Result<DaemonStats, BpfError> {
    let samples = MapHandle::from_pinned_path(cfg.pins.samples()).map_err(bpf(
        "open the ring buffer (is the program loaded? ccp-bpf load)",
    ))?;
    let ctl = CtlMap::open(&cfg.pins)?;
    let cp = ControlPlane::start(CcpConfig {
        agent_socket: cfg.agent_socket.clone(),
        local_socket: cfg.local_socket.clone(),
        backend: BackendKind::Engine,
        ..CcpConfig::default()
    })
    .map_err(|e| BpfError::Io {
        what: "start the control plane".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let state = RefCell::new(State {
        cp,
        ctl,
        algorithm: cfg.algorithm.clone(),
        flows: HashMap::new(),
        stats: DaemonStats::default(),
    });
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&samples, |b: &[u8]| {
            if let Some(s) = Sample::from_bytes(b) {
                state.borrow_mut().on_sample(&s);
            }
            0
        })
        .map_err(bpf("attach to the ring buffer"))?;
    let rb = builder.build().map_err(bpf("attach to the ring buffer"))?;
    info!(pins = %cfg.pins.dir.display(), agent = %cfg.agent_socket.display(), "ccp-bpf daemon running");
    let t0 = Instant::now();
    let mut last_house = Instant::now();
    let mut last_stats = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        match rb.poll(Duration::from_millis(5)) {
            Ok(()) => {}
            Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
            Err(e) => return Err(bpf("poll the ring buffer")(e)),
        }
        if last_house.elapsed() >= Duration::from_millis(5) {
            state.borrow_mut().housekeeping();
            last_house = Instant::now();
        }
        if let Some(p) = &cfg.stats
            && last_stats.elapsed() >= Duration::from_millis(200)
        {
            let mut st = state.borrow_mut();
            st.stats.uptime_s = t0.elapsed().as_secs_f64();
            write_stats(p, &st.stats);
            last_stats = Instant::now();
        }
    }
    drop(rb);
    let mut st = state.into_inner();
    for (id, mut f) in st.flows.drain() {
        // Leave the sockets to the BPF fallback at once rather than after the timeout.
        st.ctl.remove(id);
        f.ctrl.close();
    }
    st.stats.uptime_s = t0.elapsed().as_secs_f64();
    if let Some(p) = &cfg.stats {
        write_stats(p, &st.stats);
    }
    info!(samples = st.stats.samples, "ccp-bpf daemon stopped");
    Ok(st.stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{F_FALLBACK, F_RECOVERY};
    use ccp_udp::reno::BuiltinReno;

    fn flow() -> Flow {
        Flow {
            ctrl: Box::new(BuiltinReno::new(1448, 10 * 1448)),
            last_bytes_acked: 1_000_000,
            last_sacked_out: 0,
            was_loss: false,
            written: None,
            written_at: Instant::now(),
            last_sample: Instant::now(),
            gauges: AckSample::default(),
        }
    }

    fn sample() -> Sample {
        Sample {
            mss: 1448,
            snd_cwnd: 20,
            acked_sacked: 2,
            delivered: 10,
            snd_interval_us: 1000,
            rcv_interval_us: 2000,
            rtt_us: 5000,
            in_flight: 18,
            bytes_pending: 50_000,
            bytes_acked: 1_000_000 + 2 * 1448,
            ..Sample::default()
        }
    }

    #[test]
    fn primitives_follow_ccp_kernel() {
        let mut f = flow();
        let a = primitives(&mut f, &sample());
        assert_eq!(a.bytes_acked, 2 * 1448);
        assert_eq!(a.packets_acked, 2);
        assert_eq!(a.packets_misordered, 0);
        assert_eq!(a.rtt_us, 5000);
        assert_eq!(a.bytes_in_flight, 18 * 1448);
        assert_eq!(a.packets_in_flight, 18);
        assert_eq!(a.bytes_pending, 50_000);
        // 10 packets of 1448 bytes over 1 ms sent, 2 ms received.
        assert_eq!(a.rate_outgoing, 14_480_000);
        assert_eq!(a.rate_incoming, 7_240_000);
        assert!(!a.was_timeout);

        // Three new SACKed packets: misordered, not in order; the cumulative ack did not move.
        let s = Sample {
            acked_sacked: 3,
            sacked_out: 3,
            losses: 1,
            rtt_us: -1,
            delivered_ce: 2,
            flags: F_RECOVERY,
            bytes_acked: 1_000_000 + 2 * 1448,
            ..sample()
        };
        let a = primitives(&mut f, &s);
        assert_eq!(a.bytes_acked, 0);
        assert_eq!(a.packets_misordered, 3);
        assert_eq!(a.bytes_misordered, 3 * 1448);
        assert_eq!(a.packets_acked, 0);
        assert_eq!(a.lost_pkts, 1);
        assert_eq!(a.rtt_us, 0, "no RTT sample reads as 0");
        assert_eq!((a.ecn_packets, a.ecn_bytes), (2, 2 * 1448));
        assert!(!a.was_timeout, "recovery is not a timeout");
    }

    #[test]
    fn timeout_is_reported_once_on_entering_loss() {
        let mut f = flow();
        let loss = Sample {
            flags: F_LOSS | F_FALLBACK,
            ..sample()
        };
        assert!(primitives(&mut f, &loss).was_timeout);
        assert!(!primitives(&mut f, &loss).was_timeout);
        assert!(!primitives(&mut f, &sample()).was_timeout);
        assert!(primitives(&mut f, &loss).was_timeout);
    }

    #[test]
    fn sample_and_ctl_layouts_match_the_bpf_structs() {
        // struct ccp_sample: offsets of a few fields as clang lays them out.
        let s = Sample {
            id: 7,
            interval_us: -3,
            pacing_rate: 99,
            ..Sample::default()
        };
        // SAFETY: reading the bytes of a plain-data struct.
        let b: [u8; 112] = unsafe { std::mem::transmute(s) };
        assert_eq!(&b[8..12], &7u32.to_ne_bytes());
        assert_eq!(&b[64..72], &(-3i64).to_ne_bytes());
        assert_eq!(&b[104..112], &99u64.to_ne_bytes());
        assert_eq!(Sample::from_bytes(&b), Some(s));
        assert_eq!(Sample::from_bytes(&b[..100]), None);
        let c = Ctl {
            cwnd_bytes: 5,
            pad: 0,
            rate: 6,
            updated_ns: 7,
        }
        .to_bytes();
        assert_eq!(&c[0..4], &5u32.to_ne_bytes());
        assert_eq!(&c[8..16], &6u64.to_ne_bytes());
        assert_eq!(&c[16..24], &7u64.to_ne_bytes());
    }

    #[test]
    fn unload_of_nothing_is_fine_and_bad_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path().join("none"));
        assert!(!crate::unload(&pins).unwrap());
        assert!(!crate::unload(&pins).unwrap());
        for name in ["", "a_name_longer_than_15"] {
            let e = crate::load(&crate::LoadOptions {
                pins: pins.clone(),
                name: name.into(),
                ..Default::default()
            });
            assert!(
                matches!(
                    e,
                    Err(crate::BpfError::BadName(_)) | Err(crate::BpfError::NoBtf)
                ),
                "{e:?}"
            );
        }
    }
}
