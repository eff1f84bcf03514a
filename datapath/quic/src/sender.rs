//! The sending side: one s2n-quic client endpoint (own UDP socket, own congestion-controller
//! provider) per flow, one bidirectional stream per connection.
//!
//! Each flow waits its start delay, binds a socket, builds a client whose congestion controller
//! is a [`CcpEndpoint`] (so the flow's controller — the agent's algorithm for the flow — comes
//! from the [`Factory`] when the stack creates the path), connects (TLS 1.3 through rustls,
//! trusting only the receiver's certificate), and writes the header and the pattern content
//! of [`crate::wire`]. A sized flow then writes the trailer and finishes the stream; a timed
//! flow, at its duration, resets the stream's send direction and so abandons what the stream
//! still buffers (a write blocked on a full buffer is given up at the deadline too), as does a
//! flow the stop flag ends. A timer per flow ticks the controller (see [`crate::controller`])
//! and samples the trace. The flow ends with the receiver's verdict, whose length is the
//! flow's delivered bytes.

use crate::arrivals::AckSubscriber;
use crate::controller::{CcpEndpoint, Factory, FlowProbe};
use crate::error::Error;
use crate::io::PreciseIo;
use crate::summary::SenderSummary;
use crate::wire;
use bytes::Bytes;
use ccp_udp::pattern;
use ccp_udp::summary::{TraceSample, percentile};
use ccp_udp::{Amount, FlowSpec};
use s2n_quic::Client;
use s2n_quic::client::Connect;
use s2n_quic::provider::limits::Limits;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// Stream bytes handed to s2n-quic per write.
const CHUNK: usize = 64 * 1024;

/// Stream bytes a rate-capped application hands over per write: about 4 ms of its rate, at
/// least 16 KiB (a dozen full packets: a smaller write goes out as a packet of its own, and
/// one of 1448 bytes took two) and at most [`CHUNK`]. Its stream is then produced about as
/// evenly as ccp-udp's capped flows produce theirs (a packet as it becomes due), not in 64 KiB
/// pieces that the window sends back to back: at 5 Mbit/s a piece came every 105 ms, and two
/// such flows lost 3 % of their packets at the 50 kB buffer of a 20 Mbit/s link they used
/// half of.
fn capped_chunk(cap: u64) -> usize {
    (cap / 250).clamp(16 * 1024, CHUNK as u64) as usize
}

/// How a sender runs its flows.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// Receiver address.
    pub dest: SocketAddr,
    /// The receiver's certificate, PEM (the only one trusted).
    pub cert_pem: String,
    /// Maximum UDP payload per datagram, bytes (QUIC's max_datagram_size; IP MTU minus 28
    /// for IPv4). Default 1448: the udp datapath's MSS. s2n-quic needs at least 1200.
    pub mss: u32,
    /// Initial window, datagrams (default 10: RFC 9002 §7.2's 10 × max_datagram_size, the
    /// udp datapath's default).
    pub init_cwnd_pkts: u32,
    /// The flows.
    pub flows: Vec<FlowSpec>,
    /// Give up on a handshake after this long (default 5 s, as `ccp-udp`).
    pub handshake_timeout: Duration,
    /// Trace sampling interval (default 10 ms, as `ccp-udp`).
    pub trace_interval: Duration,
    /// Give up waiting for the receiver's verdict after this long past the last write
    /// (default 60 s: a sized flow's trailer waits behind up to a full send buffer, which
    /// takes 17 s to drain at 1 Mbit/s).
    pub verdict_timeout: Duration,
    /// RTT samples taken before this time, from the sender's start (the clock of
    /// [`FlowSpec::start_after`]), are left out of the summary's RTT percentiles: a warm-up
    /// (zero: every sample counts). The smallest RTT still counts every sample.
    pub rtt_from: Duration,
    /// Record every data packet sent and every RTT sample in the summaries'
    /// [`SenderSummary::packets`] (default off).
    pub packet_trace: bool,
    /// Run each flow's endpoint on s2n-quic's own tokio I/O and timer (millisecond wake-ups:
    /// packets due within a millisecond of each other leave together) instead of
    /// [`crate::io::PreciseIo`] (default off; for comparisons).
    pub coarse_timer: bool,
    /// With the precise timer, a packet may leave up to this long before its departure time,
    /// with the packet whose time woke the sender: one wake-up per this much of the pacing
    /// rate's packets at high rates, one per packet below (default [`PACING_SLACK`]; at most
    /// 1 ms).
    pub pacing_slack: Duration,
}

/// The default [`SenderConfig::pacing_slack`]: below 116 Mbit/s of 1448-byte packets (a packet
/// more than 100 µs apart) every packet leaves at its departure time; above, the sender wakes
/// about once per 100 µs. Measured on loopback, a flow paced at 377 Mbit/s cost the sender
/// 3.2 CPU-seconds in 5 s with it, 4.9 without (docs/benchmarks.md).
pub const PACING_SLACK: Duration = Duration::from_micros(100);

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            dest: SocketAddr::from(([127, 0, 0, 1], 4433)),
            cert_pem: String::new(),
            mss: 1448,
            init_cwnd_pkts: 10,
            flows: vec![FlowSpec::default()],
            handshake_timeout: Duration::from_secs(5),
            trace_interval: Duration::from_millis(10),
            verdict_timeout: Duration::from_secs(60),
            rtt_from: Duration::ZERO,
            packet_trace: false,
            coarse_timer: false,
            pacing_slack: PACING_SLACK,
        }
    }
}

/// Stream bytes s2n-quic buffers per stream, unacknowledged ones included (2 MiB): the
/// largest window a flow can use. Up to this much is still queued when a flow stops writing:
/// a sized flow's trailer waits behind it (it drains in 0.8 s at 20 Mbit/s, 17 s at
/// 1 Mbit/s), while a timed flow resets the stream at its duration and abandons the queue, so
/// it puts nothing new on the wire after its duration (see [`crate::wire`]).
pub const SEND_BUFFER: u32 = 2 << 20;

/// Flow-control windows large enough that the congestion controller, not QUIC's flow control,
/// limits the sender (64 MiB per connection, 32 MiB per stream), and a [`SEND_BUFFER`] send
/// buffer.
pub fn wide_limits() -> Result<Limits, Error> {
    fn e(x: impl std::fmt::Display) -> Error {
        Error::Config(format!("QUIC limits: {x}"))
    }
    Limits::new()
        .with_data_window(64 << 20)
        .map_err(e)?
        .with_bidirectional_local_data_window(32 << 20)
        .map_err(e)?
        .with_bidirectional_remote_data_window(32 << 20)
        .map_err(e)?
        .with_max_send_buffer_size(SEND_BUFFER)
        .map_err(e)?
        .with_max_idle_timeout(Duration::from_secs(30))
        .map_err(e)
}

/// The smallest datagram QUIC allows (RFC 9000 §14), bytes.
pub const MIN_MSS: u32 = 1200;

/// The IP MTU that makes s2n-quic's maximum datagram size `mss` towards `dest`.
pub fn mtu_for(mss: u32, dest: &SocketAddr) -> Result<u16, Error> {
    let overhead = if dest.is_ipv4() { 28 } else { 48 };
    if mss < MIN_MSS {
        return Err(Error::Config(format!(
            "an MSS of {mss} bytes: QUIC needs datagrams of at least 1200 bytes"
        )));
    }
    u16::try_from(mss + overhead).map_err(|_| {
        Error::Config(format!(
            "an MSS of {mss} bytes is above the largest UDP datagram"
        ))
    })
}

/// Run every flow of `cfg` (concurrently, each after its start delay) with controllers from
/// `factory`; returns one summary per flow, in configuration order. `stop` ends the flows
/// early.
pub fn run_sender(
    cfg: &SenderConfig,
    factory: Factory,
    stop: &AtomicBool,
) -> Result<Vec<SenderSummary>, Error> {
    if cfg.flows.is_empty() {
        return Err(Error::Config("no flows to send".into()));
    }
    mtu_for(cfg.mss, &cfg.dest)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    // The runtime's tasks need 'static data: share the stop flag through an Arc mirror.
    let stop_mirror = Arc::new(AtomicBool::new(false));
    let rtt_from = Instant::now() + cfg.rtt_from;
    rt.block_on(async {
        let mut tasks = Vec::new();
        for (i, spec) in cfg.flows.iter().enumerate() {
            let cfg = cfg.clone();
            let spec = spec.clone();
            let factory = factory.clone();
            let stop = stop_mirror.clone();
            tasks.push(tokio::spawn(async move {
                run_flow(i, &cfg, &spec, factory, &stop, rtt_from).await
            }));
        }
        let watcher = {
            let mirror = stop_mirror.clone();
            let stop_ptr: &AtomicBool = stop;
            // The outer flag lives as long as this call; poll it from here.
            async move {
                while !mirror.load(Ordering::Relaxed) {
                    if stop_ptr.load(Ordering::Relaxed) {
                        mirror.store(true, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        let all = async {
            let mut out = Vec::new();
            for t in tasks {
                out.push(match t.await {
                    Ok(r) => r,
                    Err(e) => Err(Error::Transfer {
                        flow: out.len(),
                        why: format!("task failed: {e}"),
                    }),
                });
            }
            out
        };
        tokio::pin!(all);
        let results = tokio::select! {
            r = &mut all => r,
            // Stop requested: the flows see the mirror flag and wind down.
            _ = watcher => all.await,
        };
        stop_mirror.store(true, Ordering::Relaxed);
        results.into_iter().collect()
    })
}

fn local_addr_towards(dest: &SocketAddr) -> Result<SocketAddr, Error> {
    let any: SocketAddr = if dest.is_ipv4() {
        "0.0.0.0:0".parse().unwrap_or(*dest)
    } else {
        "[::]:0".parse().unwrap_or(*dest)
    };
    let err = |source| Error::Socket {
        addr: dest.to_string(),
        source,
    };
    // A connected socket tells which local address the kernel routes `dest` from.
    let probe = UdpSocket::bind(any).map_err(err)?;
    probe.connect(dest).map_err(err)?;
    let mut local = probe.local_addr().map_err(err)?;
    local.set_port(0);
    Ok(local)
}

/// Bytes `[offset, offset + len)` of flow `flow_id`'s content.
fn content(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let step = ccp_udp::packet::MAX_MSS as usize;
    while v.len() < len {
        let n = step.min(len - v.len());
        v.extend_from_slice(pattern::slice(seed, offset + v.len() as u64, n));
    }
    v
}

async fn run_flow(
    idx: usize,
    cfg: &SenderConfig,
    spec: &FlowSpec,
    factory: Factory,
    stop: &AtomicBool,
    rtt_from: Instant,
) -> Result<SenderSummary, Error> {
    let terr = |why: String| Error::Transfer { flow: idx, why };
    if !spec.start_after.is_zero() {
        tokio::time::sleep(spec.start_after).await;
    }
    let flow_id: u32 = rand::random();
    let bind = local_addr_towards(&cfg.dest)?;
    let socket = UdpSocket::bind(bind).map_err(|source| Error::Socket {
        addr: bind.to_string(),
        source,
    })?;
    let local = socket.local_addr().map_err(|source| Error::Socket {
        addr: bind.to_string(),
        source,
    })?;
    let (endpoint, probe) = CcpEndpoint::new(
        factory,
        &spec.algorithm,
        cfg.init_cwnd_pkts,
        local,
        cfg.dest,
    );
    // What the application has to send and has not handed to the stream yet, for the
    // controller's `bytes_pending`: a timed flow's supply is unlimited, a sized flow's is what
    // remains of its size; a rate-capped flow hands each chunk over as it becomes due, so it
    // has nothing in hand between writes (what the stream still buffers counts through
    // s2n-quic's app-limited flag, see `crate::controller`).
    let capped = spec.rate_cap.is_some_and(|c| c > 0);
    let unwritten = |offset: u64| match spec.amount {
        _ if capped => 0,
        Amount::Duration(_) => u64::MAX,
        Amount::Bytes(total) => total.saturating_sub(offset),
    };
    probe.set_unwritten(unwritten(0));
    if !cfg.rtt_from.is_zero() {
        probe.set_rtt_from(rtt_from);
    }
    if cfg.packet_trace {
        probe.record_packets();
    }
    let mtu = mtu_for(cfg.mss, &cfg.dest)?;
    // Which stream bytes the receiver acknowledged, for the trace.
    let acked = AckSubscriber::default();
    let serr = |e: &dyn std::fmt::Display| Error::Start(e.to_string());
    let tls = s2n_quic::provider::tls::rustls::Client::builder()
        .with_certificate(cfg.cert_pem.as_str())
        .and_then(|b| b.build())
        .map_err(|e| Error::Tls(e.to_string()))?;
    let client = Client::builder()
        .with_tls(tls)
        .map_err(|e| serr(&e))?
        .with_limits(wide_limits()?)
        .map_err(|e| serr(&e))?
        .with_event(acked.clone())
        .map_err(|e| serr(&e))?;
    // The MTU is the one `mss` makes from the first packet on (no path MTU probing).
    let client = if cfg.coarse_timer {
        let io = s2n_quic::provider::io::tokio::Builder::default()
            .with_rx_socket(socket)
            .and_then(|b| b.with_max_mtu(mtu))
            .and_then(|b| b.with_initial_mtu(mtu))
            .and_then(|b| b.with_base_mtu(mtu))
            .and_then(|b| b.build())
            .map_err(|e| serr(&e))?;
        client
            .with_io(io)
            .map_err(|e| serr(&e))?
            .with_congestion_controller(endpoint)
            .map_err(|e| serr(&e))?
            .start()
    } else {
        let io = PreciseIo::new(socket, mtu, Some(mtu), Some(mtu))
            .map_err(|e| serr(&e))?
            .with_slack(cfg.pacing_slack);
        client
            .with_io(io)
            .map_err(|e| serr(&e))?
            .with_congestion_controller(endpoint.with_precise_departures(cfg.pacing_slack))
            .map_err(|e| serr(&e))?
            .start()
    }
    .map_err(|e| serr(&e))?;

    // Ticks and trace samples until the flow ends.
    let done = Arc::new(AtomicBool::new(false));
    let t_start = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let sampler = {
        let probe = probe.clone();
        let acked = acked.clone();
        let done = done.clone();
        let t_start = t_start.clone();
        let trace_every = cfg.trace_interval.max(Duration::from_millis(1));
        tokio::spawn(async move { sample(probe, acked, done, t_start, trace_every).await })
    };

    let t_hs = Instant::now();
    let connect = Connect::new(cfg.dest).with_server_name(crate::tls::SERVER_NAME);
    let mut conn = match tokio::time::timeout(cfg.handshake_timeout, client.connect(connect)).await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            done.store(true, Ordering::Relaxed);
            probe.close();
            return Err(Error::Connect {
                to: cfg.dest.to_string(),
                why: e.to_string(),
            });
        }
        Err(_) => {
            done.store(true, Ordering::Relaxed);
            probe.close();
            return Err(Error::Connect {
                to: cfg.dest.to_string(),
                why: format!(
                    "no handshake within {:?} (is `ccp-quic recv` running there?)",
                    cfg.handshake_timeout
                ),
            });
        }
    };
    let handshake = t_hs.elapsed();
    let _ = conn.keep_alive(true);
    let t0 = Instant::now();
    *t_start.lock().unwrap_or_else(|p| p.into_inner()) = Some(t0);
    info!(flow = idx, flow_id = format_args!("{flow_id:08x}"), algorithm = %spec.algorithm, handshake_ms = handshake.as_secs_f64() * 1e3, "connected");

    let mut stream = conn
        .open_bidirectional_stream()
        .await
        .map_err(|e| terr(format!("opening the stream: {e}")))?;
    // From here on the packets carry the flow's data: the controller measures them (the
    // handshake's were not its flow's; see `crate::controller`).
    probe.start_data();
    stream
        .send(Bytes::copy_from_slice(&wire::header(flow_id)))
        .await
        .map_err(|e| terr(format!("writing: {e}")))?;
    let seed = pattern::seed(flow_id);
    let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
    let mut offset = 0u64;
    let deadline = match spec.amount {
        Amount::Duration(d) => Some(t0 + d),
        Amount::Bytes(_) => None,
    };
    let how = loop {
        let n = match spec.amount {
            Amount::Bytes(total) => {
                if offset >= total {
                    break wire::End::Trailer;
                }
                (total - offset).min(CHUNK as u64) as usize
            }
            Amount::Duration(_) => CHUNK,
        };
        let n = match spec.rate_cap.filter(|&c| c > 0) {
            Some(cap) => n.min(capped_chunk(cap)),
            None => n,
        };
        if let Some(end) = ended(deadline, stop) {
            break end;
        }
        if let Some(cap) = spec.rate_cap.filter(|&c| c > 0) {
            let due = t0 + Duration::from_secs_f64(offset as f64 / cap as f64);
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                end = wait_end(deadline, stop) => break end,
            }
        }
        let chunk = Bytes::from(content(seed, offset, n));
        // A full send buffer holds the write back; the deadline or a stop does not wait for it.
        let mut rest = chunk.clone();
        let cut_short = tokio::select! {
            r = std::future::poll_fn(|cx| stream.poll_send(&mut rest, cx)) => {
                r.map_err(|e| terr(format!("writing at offset {offset}: {e}")))?;
                None
            }
            end = wait_end(deadline, stop) => Some(end),
        };
        let taken = n - rest.len();
        hasher.update(&chunk[..taken]);
        offset += taken as u64;
        probe.set_unwritten(unwritten(offset));
        if let Some(end) = cut_short {
            break end;
        }
    };
    probe.set_unwritten(0);
    let stopped_early = how == wire::End::Stop;
    let data_end = t0.elapsed();
    match how.reset_code() {
        None => {
            let hash = hasher.digest128();
            stream
                .send(Bytes::copy_from_slice(&wire::trailer(offset, hash)))
                .await
                .map_err(|e| terr(format!("writing the trailer: {e}")))?;
            stream
                .finish()
                .map_err(|e| terr(format!("finishing the stream: {e}")))?;
        }
        Some(code) => {
            // Abandon what the stream still queues: nothing new goes on the wire from here;
            // the receiver counts (and has verified) what it read.
            stream
                .reset(code.into())
                .map_err(|e| terr(format!("resetting the stream: {e}")))?;
            info!(
                flow = idx,
                written = offset,
                ended_by = how.name(),
                "stream reset"
            );
        }
    }

    // The verdict.
    let mut got = Vec::with_capacity(wire::VERDICT_LEN);
    let verdict = tokio::time::timeout(cfg.verdict_timeout, async {
        while got.len() < wire::VERDICT_LEN {
            match stream.receive().await {
                Ok(Some(b)) => got.extend_from_slice(&b),
                Ok(None) => break,
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    })
    .await;
    let end = t0.elapsed();
    let verdict = match verdict {
        Ok(Ok(())) if got.len() >= wire::VERDICT_LEN => {
            let v: [u8; wire::VERDICT_LEN] = got[..wire::VERDICT_LEN]
                .try_into()
                .unwrap_or([0; wire::VERDICT_LEN]);
            Some(wire::parse_verdict(&v))
        }
        Ok(Ok(())) => {
            warn!(
                flow = idx,
                "the receiver closed the stream without a verdict"
            );
            None
        }
        Ok(Err(e)) => {
            warn!(flow = idx, error = %e, "no verdict from the receiver");
            None
        }
        Err(_) => {
            warn!(flow = idx, timeout = ?cfg.verdict_timeout, "no verdict from the receiver in time");
            None
        }
    };
    conn.close(0u32.into());
    done.store(true, Ordering::Relaxed);
    let trace = sampler.await.unwrap_or_default();
    let stats = probe.stats();
    probe.close();
    drop(client);

    let mut rtts = stats.rtt_samples_us.clone();
    rtts.sort_unstable();
    let ms = |us: u32| f64::from(us) / 1e3;
    let bytes = match verdict {
        Some((_, n, _)) => n,
        None => 0,
    };
    // What the verdict must say: the whole content for a trailer; for a reset stream a prefix
    // of what was written, which the receiver found to be the pattern, with the pattern's hash.
    let hash = match (how, verdict) {
        (wire::End::Trailer, _) | (_, None) => hasher.digest128(),
        (_, Some((_, n, _))) => pattern::stream_hash(flow_id, n),
    };
    let receiver_intact = verdict.map(|(ok, n, h)| {
        let len_ok = match how {
            wire::End::Trailer => n == offset,
            _ => n <= offset,
        };
        ok && len_ok && h == hash
    });
    let duration_s = end.as_secs_f64();
    Ok(SenderSummary {
        flow: idx,
        flow_id,
        algorithm: spec.algorithm.clone(),
        controllers: stats.controllers.clone(),
        local: local.to_string(),
        remote: cfg.dest.to_string(),
        mss: cfg.mss,
        bytes,
        written_bytes: offset,
        ended_by: how.name().into(),
        data_end_s: data_end.as_secs_f64(),
        duration_s,
        goodput_mbps: ccp_udp::summary::mbps(bytes, duration_s),
        handshake_rtt_ms: handshake.as_secs_f64() * 1e3,
        rtt_min_ms: stats.rtt_min_us as f64 / 1e3,
        rtt_p50_ms: ms(percentile(&rtts, 0.5)),
        rtt_p95_ms: ms(percentile(&rtts, 0.95)),
        rtt_p99_ms: ms(percentile(&rtts, 0.99)),
        rtt_samples: Some(rtts.len() as u64),
        srtt_ms: stats.srtt_us as f64 / 1e3,
        sent_packets: stats.sent_packets,
        sent_bytes: stats.sent_bytes,
        lost_packets: stats.lost_packets,
        lost_bytes: stats.lost_bytes,
        timeouts: stats.timeouts,
        acks: stats.acks,
        ecn_ce_packets: stats.ecn_ce_packets,
        ack_invocations: stats.ack_invocations,
        ticks: stats.ticks,
        control_changes: stats.control_changes,
        hash: pattern::hash_hex(hash),
        completed: verdict.is_some(),
        receiver_intact,
        stopped_early,
        trace,
        packets: stats.packets,
    })
}

/// How the flow must end now, if it must: the stop flag, or the timed flow's deadline.
fn ended(deadline: Option<Instant>, stop: &AtomicBool) -> Option<wire::End> {
    if stop.load(Ordering::Relaxed) {
        Some(wire::End::Stop)
    } else if deadline.is_some_and(|d| Instant::now() >= d) {
        Some(wire::End::Deadline)
    } else {
        None
    }
}

/// Waits until [`ended`] says the flow must end (the stop flag is polled every 20 ms).
async fn wait_end(deadline: Option<Instant>, stop: &AtomicBool) -> wire::End {
    loop {
        if let Some(end) = ended(deadline, stop) {
            return end;
        }
        let mut nap = Duration::from_millis(20);
        if let Some(d) = deadline {
            nap = nap.min(d.saturating_duration_since(Instant::now()));
        }
        tokio::time::sleep(nap).await;
    }
}

/// Tick the controller every half tick period and sample the trace every `every`, until
/// `done`. The samples' byte counts are stream content bytes the receiver acknowledged
/// (`acked`): in order (`delivered_bytes`) and beyond a hole too (`received_bytes`).
async fn sample(
    probe: FlowProbe,
    acked: AckSubscriber,
    done: Arc<AtomicBool>,
    t_start: Arc<std::sync::Mutex<Option<Instant>>>,
    every: Duration,
) -> Vec<TraceSample> {
    let mut trace = Vec::new();
    let mut next_sample = Instant::now() + every;
    while !done.load(Ordering::Relaxed) {
        let half_tick = Duration::from_micros((probe.tick_us() / 2).max(500));
        tokio::time::sleep(half_tick.min(every)).await;
        probe.tick();
        let now = Instant::now();
        if now >= next_sample {
            next_sample = now + every;
            // Samples start with the handshake's end, like the udp datapath's.
            let t0 = *t_start.lock().unwrap_or_else(|p| p.into_inner());
            if let (Some(t0), Some(s)) = (t0, probe.snapshot()) {
                let (in_order, distinct) = acked.counts();
                trace.push(TraceSample {
                    t_s: now.saturating_duration_since(t0).as_secs_f64(),
                    cwnd_bytes: s.cwnd,
                    pacing_rate_bytes_per_s: s.rate,
                    srtt_us: s.srtt_us,
                    bytes_in_flight: u64::from(s.bytes_in_flight),
                    delivered_bytes: in_order,
                    received_bytes: Some(distinct),
                    controller: s.controller,
                    owd_excess_us: None,
                });
            }
        }
    }
    trace
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_application_writes_about_four_milliseconds_of_its_rate() {
        assert_eq!(capped_chunk(625_000), 16 * 1024); // 5 Mbit/s: the 16 KiB floor
        assert_eq!(capped_chunk(12_500_000), 50_000); // 100 Mbit/s
        assert_eq!(capped_chunk(1_250_000_000), CHUNK); // 10 Gbit/s
    }
}
