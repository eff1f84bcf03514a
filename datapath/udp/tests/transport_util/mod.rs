//! Helpers shared by the `transport_*` tests: receivers and relays on background threads bound
//! to port 0, test controllers (fixed window and rate, a sample recorder), and a watchdog that
//! bounds every test in time.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ccp_udp::cc::{AckSample, FlowController, FlowMeta};
use ccp_udp::reno::BuiltinReno;
use ccp_udp::{
    Amount, Error, FlowSpec, ReceiverConfig, ReceiverReport, RelayConfig, RelayStats, SenderConfig,
    SenderSummary,
};

/// A service running on a background thread.
pub struct Running<T> {
    pub addr: SocketAddr,
    pub stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<T, Error>>,
}

impl<T> Running<T> {
    /// Waits for the service to return by itself.
    pub fn join(self) -> Result<T, Error> {
        self.handle.join().expect("service thread panicked")
    }

    /// Stops the service and returns its result.
    pub fn stop(self) -> Result<T, Error> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }
}

/// Starts a receiver on 127.0.0.1:0 (unless `cfg.bind` says otherwise).
pub fn start_receiver(cfg: ReceiverConfig) -> Running<ReceiverReport> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let handle = std::thread::spawn(move || {
        ccp_udp::run_receiver_report(&cfg, &s, &mut |a| {
            let _ = tx.send(a);
        })
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("receiver did not bind");
    Running { addr, stop, handle }
}

/// A receiver on loopback expecting `flows` flows, leaving after 20 s of silence.
pub fn receiver(flows: usize) -> Running<ReceiverReport> {
    start_receiver(ReceiverConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        expect_flows: Some(flows),
        idle_timeout: Some(Duration::from_secs(20)),
        gro: true,
    })
}

/// Starts a relay on 127.0.0.1:0 in front of `upstream`.
pub fn start_relay(cfg: RelayConfig) -> Running<RelayStats> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let handle = std::thread::spawn(move || {
        ccp_udp::run_relay(&cfg, &s, &mut |a| {
            let _ = tx.send(a);
        })
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("relay did not bind");
    Running { addr, stop, handle }
}

/// A relay in front of `upstream` with the given impairments.
pub fn relay(
    upstream: SocketAddr,
    loss: f64,
    reorder: f64,
    duplicate: f64,
    delay: Duration,
) -> Running<RelayStats> {
    start_relay(RelayConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream,
        loss,
        reorder,
        duplicate,
        delay,
        seed: 7,
    })
}

/// A sender configuration for one flow of `amount` to `dest`.
/// A scripted receiver on a fresh loopback socket: it answers HELLOs and acknowledges every
/// DATA packet at once (ranges, cumulative offset, echoed send timestamp; the completion flags
/// once the FIN and every byte before it are in), letting `shape` change each ACK before it goes
/// out. The thread ends after acknowledging the completed flow, or after 5 s of silence, and
/// returns how many DATA packets it saw.
pub fn scripted_receiver(
    mut shape: impl FnMut(&ccp_udp::packet::DataHeader, &mut ccp_udp::packet::Ack) + Send + 'static,
) -> (SocketAddr, JoinHandle<u64>) {
    use ccp_udp::packet::{self, Ack, Packet, flags};
    let fake = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    fake.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let dest = fake.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        let mut out = [0u8; packet::MAX_ACK_LEN];
        let mut cum = 0u64;
        // Data past a gap, by offset: a packet lost on loopback (a full socket buffer on a busy
        // machine) is retransmitted, and the cumulative offset must then pass what arrived
        // after it, or the transfer never completes.
        let mut ahead = std::collections::BTreeMap::<u64, u64>::new();
        let mut fin = None;
        let mut seen = 0u64;
        let mut pns = ccp_udp::ranges::PnRanges::new();
        while let Ok((n, from)) = fake.recv_from(&mut buf) {
            match packet::decode(&buf[..n]) {
                Ok(Packet::Hello(h)) => {
                    let n = packet::encode_hello(&mut out, &h, true);
                    fake.send_to(&out[..n], from).unwrap();
                }
                Ok(Packet::Data(h, payload)) => {
                    seen += 1;
                    pns.insert(h.pn);
                    if h.is_fin() {
                        fin = Some(h.offset);
                    } else {
                        let end = h.offset + payload.len() as u64;
                        if h.offset <= cum {
                            cum = cum.max(end);
                        } else {
                            let e = ahead.entry(h.offset).or_insert(end);
                            *e = (*e).max(end);
                        }
                        while let Some((&start, &end)) = ahead.first_key_value() {
                            if start > cum {
                                break;
                            }
                            cum = cum.max(end);
                            ahead.remove(&start);
                        }
                    }
                    let mut a = Ack::new(h.flow_id);
                    pns.fill_ack(&mut a);
                    a.cum_offset = cum;
                    a.echo_ts = h.ts;
                    if fin == Some(cum) {
                        a.flags = flags::FIN_SEEN | flags::COMPLETE | flags::INTACT;
                    }
                    shape(&h, &mut a);
                    let n = packet::encode_ack(&mut out, &a);
                    fake.send_to(&out[..n], from).unwrap();
                    if fin == Some(cum) {
                        break;
                    }
                }
                _ => {}
            }
        }
        seen
    });
    (dest, peer)
}

pub fn one_flow(dest: SocketAddr, amount: Amount) -> SenderConfig {
    SenderConfig {
        dest,
        flows: vec![FlowSpec {
            amount,
            ..FlowSpec::default()
        }],
        handshake_timeout: Duration::from_secs(3),
        ..SenderConfig::default()
    }
}

/// The built-in Reno for every flow.
pub fn reno(m: &FlowMeta) -> Box<dyn FlowController> {
    Box::new(BuiltinReno::new(m.mss, m.init_cwnd))
}

/// Runs `cfg` with `make` and returns the summaries.
pub fn send(
    cfg: &SenderConfig,
    make: &(dyn Fn(&FlowMeta) -> Box<dyn FlowController> + Sync),
) -> Result<Vec<SenderSummary>, Error> {
    let stop = AtomicBool::new(false);
    ccp_udp::run_sender(cfg, make, &stop)
}

/// Runs `f` on a thread and fails the test if it takes longer than `limit`.
pub fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = h.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: re-raise its panic.
            match h.join() {
                Err(p) => std::panic::resume_unwind(p),
                Ok(()) => unreachable!("sender dropped without a value"),
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test exceeded its {limit:?} bound"),
    }
}

/// Serialises timing-sensitive tests inside one test binary.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A controller with a fixed window and an optional fixed pacing rate.
pub struct Fixed {
    pub cwnd: u32,
    pub rate: Option<u64>,
}

impl FlowController for Fixed {
    fn on_ack(&mut self, _s: &AckSample) {}
    fn on_tick(&mut self, _s: &AckSample) {}
    fn cwnd(&self) -> u32 {
        self.cwnd
    }
    fn pacing_rate(&self) -> Option<u64> {
        self.rate
    }
    fn controller_name(&self) -> String {
        "test:fixed".into()
    }
}

/// Everything a recorded controller saw.
#[derive(Default, Debug)]
pub struct Log {
    pub acks: Vec<AckSample>,
    /// The relative one-way delay handed with each entry of `acks`, if any.
    pub owds: Vec<Option<u64>>,
    pub ticks: Vec<(Instant, AckSample)>,
    pub ack_times: Vec<Instant>,
    pub closed: bool,
    pub meta: Option<FlowMeta>,
}

impl Log {
    pub fn sum(&self, f: impl Fn(&AckSample) -> u64) -> u64 {
        self.acks.iter().map(f).sum()
    }
}

/// Wraps a controller and records every sample it gets.
pub struct Recording {
    pub inner: Box<dyn FlowController>,
    pub log: Arc<Mutex<Log>>,
}

impl FlowController for Recording {
    fn on_ack(&mut self, s: &AckSample) {
        {
            let mut l = self.log.lock().unwrap();
            l.acks.push(*s);
            l.owds.push(None);
            l.ack_times.push(Instant::now());
        }
        self.inner.on_ack(s);
    }
    fn on_ack_with_owd(&mut self, s: &AckSample, owd_us: u64) {
        {
            let mut l = self.log.lock().unwrap();
            l.acks.push(*s);
            l.owds.push(Some(owd_us));
            l.ack_times.push(Instant::now());
        }
        self.inner.on_ack_with_owd(s, owd_us);
    }
    fn on_tick(&mut self, s: &AckSample) {
        self.log.lock().unwrap().ticks.push((Instant::now(), *s));
        self.inner.on_tick(s);
    }
    fn tick_us(&self) -> u64 {
        self.inner.tick_us()
    }
    fn cwnd(&self) -> u32 {
        self.inner.cwnd()
    }
    fn pacing_rate(&self) -> Option<u64> {
        self.inner.pacing_rate()
    }
    fn controller_name(&self) -> String {
        self.inner.controller_name()
    }
    fn close(&mut self) {
        self.log.lock().unwrap().closed = true;
        self.inner.close();
    }
}

/// A factory that wraps what `inner` makes in a [`Recording`] sharing `log`.
pub fn recording(
    log: Arc<Mutex<Log>>,
    inner: impl Fn(&FlowMeta) -> Box<dyn FlowController> + Sync,
) -> impl Fn(&FlowMeta) -> Box<dyn FlowController> + Sync {
    move |m: &FlowMeta| -> Box<dyn FlowController> {
        log.lock().unwrap().meta = Some(m.clone());
        Box::new(Recording {
            inner: inner(m),
            log: log.clone(),
        })
    }
}

/// Checks that the sender and receiver agree the stream of one flow arrived intact.
pub fn assert_intact(s: &SenderSummary, r: &ccp_udp::ReceiverSummary) {
    assert!(s.completed, "sender did not complete: {s:?}");
    assert_eq!(s.receiver_intact, Some(true), "receiver verdict");
    assert!(r.intact, "receiver: {r:?}");
    assert!(r.completed);
    assert_eq!(s.flow_id, r.flow_id);
    assert_eq!(s.hash, r.hash, "stream hashes differ");
    assert_eq!(r.sender_hash.as_deref(), Some(s.hash.as_str()));
    assert_eq!(s.bytes, r.bytes);
}

/// Mbit/s for printing.
pub fn describe(s: &SenderSummary) -> String {
    format!(
        "{:.1} MB in {:.3} s = {:.0} Mbit/s; srtt {:.3} ms, p50/p99 {:.3}/{:.3} ms; {} sent, {} retx, {} lost, {} timeouts, {} probes, {} acks, gso {}",
        s.bytes as f64 / 1e6,
        s.duration_s,
        s.goodput_mbps,
        s.srtt_ms,
        s.rtt_p50_ms,
        s.rtt_p99_ms,
        s.sent_packets,
        s.retransmitted_packets,
        s.lost_packets,
        s.timeouts,
        s.probes,
        s.acks,
        s.gso
    )
}
