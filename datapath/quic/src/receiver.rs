//! The receiving side: one s2n-quic server endpoint for any number of flows. Each connection
//! carries one flow on its first bidirectional stream; the receiver checks every content byte
//! against the flow's pattern and hashes the content, compares length and hash with the
//! trailer when the stream ends with one (sized flows) or counts the prefix it read when the
//! sender resets the stream (timed flows at their duration, stopped flows), answers with the
//! verdict of [`crate::wire`] and reports a [`ReceiverSummary`], whose `arrivals` say which
//! content bytes had reached it when, beyond a hole too (an [`ArrivalSubscriber`] on the
//! endpoint notes every STREAM frame as it arrives: [`crate::arrivals`]). Its own congestion
//! controller is s2n-quic's default (CUBIC): it only sends ACKs and the verdict.

use crate::arrivals::{ArrivalSubscriber, arrivals_of};
use crate::error::Error;
use crate::sender::wide_limits;
use crate::summary::ReceiverSummary;
use crate::tls::Identity;
use crate::wire;
use bytes::Bytes;
use ccp_udp::pattern::hash_hex;
use s2n_quic::Server;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// How a receiver runs.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Address to listen on.
    pub bind: SocketAddr,
    /// Return after this many flows finished (None: until stopped).
    pub expect_flows: Option<usize>,
    /// Return after this long without a new connection or stream data (default None: never).
    pub idle_timeout: Option<Duration>,
    /// Largest IP MTU the receiver accepts and probes up to, bytes (default 1500: Ethernet's,
    /// and the emulator's).
    pub max_mtu: u16,
    /// Longest time the receiver holds back the ACK of an ack-eliciting packet (RFC 9000
    /// §13.2.1 and the `max_ack_delay` transport parameter, §18.2), whole milliseconds; it is
    /// also what the receiver advertises, which the sender adds to its probe timeout
    /// (RFC 9002 §6.2.1). Default [`DEFAULT_MAX_ACK_DELAY`].
    pub max_ack_delay: Duration,
}

/// The receiver's default `max_ack_delay`: 1 ms, not RFC 9000's 25 ms (§18.2, s2n-quic's
/// default). s2n-quic 1.91 acknowledges at once only every 10th ack-eliciting packet (a fixed
/// packet tolerance), else when the ACK timer expires; at 25 ms a bulk flow therefore gets one
/// ACK per 10 packets, too sparse for the agent's delay-based algorithms (Vivace fills the
/// buffer). s2n-quic counts a deadline within its 1-ms timer granularity as passed, so 1 ms
/// acknowledges about every packet that arrives alone: more ACKs (CPU at both ends, reverse
/// traffic) for the per-packet feedback TCP-like algorithms expect. Measurements:
/// docs/results/datapaths.md.
pub const DEFAULT_MAX_ACK_DELAY: Duration = Duration::from_millis(1);

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            bind: SocketAddr::from(([0, 0, 0, 0], 4433)),
            expect_flows: None,
            idle_timeout: None,
            max_mtu: 1500,
            max_ack_delay: DEFAULT_MAX_ACK_DELAY,
        }
    }
}

/// Serve flows until `expect_flows` finished, the idle timeout passed or `stop` is set;
/// `on_listen` gets the bound address once the endpoint is up. Returns the summaries in order
/// of arrival.
pub fn run_receiver(
    cfg: &ReceiverConfig,
    id: &Identity,
    stop: &AtomicBool,
    on_listen: &mut dyn FnMut(SocketAddr),
) -> Result<Vec<ReceiverSummary>, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    rt.block_on(serve(cfg, id, stop, on_listen))
}

async fn serve(
    cfg: &ReceiverConfig,
    id: &Identity,
    stop: &AtomicBool,
    on_listen: &mut dyn FnMut(SocketAddr),
) -> Result<Vec<ReceiverSummary>, Error> {
    let serr = |e: &dyn std::fmt::Display| Error::Start(e.to_string());
    if !cfg.max_ack_delay.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(Error::Config(format!(
            "max_ack_delay {:?}: QUIC carries it in whole milliseconds",
            cfg.max_ack_delay
        )));
    }
    let limits = wide_limits()?
        .with_max_ack_delay(cfg.max_ack_delay)
        .map_err(|e| Error::Config(format!("max_ack_delay {:?}: {e}", cfg.max_ack_delay)))?;
    let tls = s2n_quic::provider::tls::rustls::Server::builder()
        .with_certificate(id.cert_pem.as_str(), id.key_pem.as_str())
        .and_then(|b| b.build())
        .map_err(|e| Error::Tls(e.to_string()))?;
    // The precise timer (see `crate::io`) also times the receiver's delayed ACKs.
    let io = crate::io::PreciseIo::bind(cfg.bind, cfg.max_mtu).map_err(|e| Error::Socket {
        addr: cfg.bind.to_string(),
        source: e,
    })?;
    let mut server = Server::builder()
        .with_tls(tls)
        .map_err(|e| serr(&e))?
        .with_io(io)
        .map_err(|e| serr(&e))?
        .with_limits(limits)
        .map_err(|e| serr(&e))?
        .with_event(ArrivalSubscriber)
        .map_err(|e| serr(&e))?
        .start()
        .map_err(|e| serr(&e))?;
    let addr = server.local_addr().map_err(|source| Error::Socket {
        addr: cfg.bind.to_string(),
        source,
    })?;
    on_listen(addr);
    info!(%addr, "listening");

    let (tx, mut rx) = mpsc::unbounded_channel::<ReceiverSummary>();
    let (activity_tx, mut activity_rx) = mpsc::unbounded_channel::<()>();
    let mut arrivals = 0usize;
    let mut done: Vec<ReceiverSummary> = Vec::new();
    let mut last_activity = Instant::now();
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    loop {
        if cfg.expect_flows.is_some_and(|n| done.len() >= n) || stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(idle) = cfg.idle_timeout
            && last_activity.elapsed() >= idle
        {
            info!(?idle, "idle timeout");
            break;
        }
        tokio::select! {
            conn = server.accept() => {
                let Some(conn) = conn else { break };
                last_activity = Instant::now();
                let index = arrivals;
                arrivals += 1;
                let tx = tx.clone();
                let activity = activity_tx.clone();
                tokio::spawn(async move {
                    let s = serve_flow(index, conn, activity).await;
                    let _ = tx.send(s);
                });
            }
            Some(s) = rx.recv() => {
                last_activity = Instant::now();
                if s.intact {
                    info!(flow = s.flow, bytes = s.bytes, "flow intact");
                } else {
                    warn!(flow = s.flow, bytes = s.bytes, error = ?s.error, "flow not intact");
                }
                done.push(s);
            }
            Some(()) = activity_rx.recv() => last_activity = Instant::now(),
            _ = poll.tick() => {}
        }
    }
    // Flows that finished while the loop was leaving.
    while let Ok(s) = rx.try_recv() {
        done.push(s);
    }
    done.sort_by_key(|s| s.flow);
    Ok(done)
}

/// How the receive loop ended.
enum Ended {
    /// FIN.
    Fin,
    /// The sender reset the stream with one of its codes.
    Reset(wire::End),
    /// Anything else (connection lost, unknown reset code, bad header).
    Failed(String),
}

async fn serve_flow(
    index: usize,
    mut conn: s2n_quic::Connection,
    activity: mpsc::UnboundedSender<()>,
) -> ReceiverSummary {
    let peer = conn
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut s = ReceiverSummary {
        flow: index,
        flow_id: 0,
        peer,
        bytes: 0,
        expected_bytes: None,
        hash: String::new(),
        sender_hash: None,
        intact: false,
        completed: false,
        ended_by: String::new(),
        chunks: 0,
        duration_s: 0.0,
        goodput_mbps: 0.0,
        longest_stall_ms: 0.0,
        arrivals: Vec::new(),
        error: None,
    };
    // What reached the receiver when, noted by the connection's events from its first packet.
    let record = arrivals_of(&conn);
    let mut stream = match conn.accept_bidirectional_stream().await {
        Ok(Some(st)) => st,
        Ok(None) => {
            s.error = Some("the connection closed before a stream opened".into());
            return s;
        }
        Err(e) => {
            s.error = Some(format!("accepting the stream: {e}"));
            return s;
        }
    };
    let mut header = Vec::with_capacity(wire::HEADER_LEN);
    // Made when the header (and so the flow id, the pattern's seed) is complete.
    let mut split: Option<wire::TrailerSplitter> = None;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut longest = Duration::ZERO;
    let mut last_ping = Instant::now();
    let ended = loop {
        match stream.receive().await {
            Ok(Some(mut b)) => {
                let now = Instant::now();
                s.chunks += 1;
                if header.len() < wire::HEADER_LEN {
                    let take = (wire::HEADER_LEN - header.len()).min(b.len());
                    header.extend_from_slice(&b[..take]);
                    b = b.slice(take..);
                    if header.len() == wire::HEADER_LEN {
                        match wire::parse_header(&header) {
                            Some(id) => {
                                s.flow_id = id;
                                split = Some(wire::TrailerSplitter::new(id));
                            }
                            None => {
                                break Ended::Failed(
                                    "not a ccp-quic stream of this version (bad header)".into(),
                                );
                            }
                        }
                    }
                }
                if let Some(split) = split.as_mut().filter(|_| !b.is_empty()) {
                    if first.is_some() {
                        longest = longest.max(now - last);
                    } else {
                        first = Some(now);
                    }
                    last = now;
                    split.push(&b);
                }
                if now - last_ping > Duration::from_millis(200) {
                    last_ping = now;
                    let _ = activity.send(());
                }
            }
            Ok(None) => break Ended::Fin,
            Err(s2n_quic::stream::Error::StreamReset { error, .. }) => {
                match wire::End::from_reset_code(u64::from(error)) {
                    Some(end) => break Ended::Reset(end),
                    None => {
                        break Ended::Failed(format!(
                            "the sender reset the stream with code {} after {} bytes",
                            u64::from(error),
                            split.as_ref().map_or(0, |s| s.content_len())
                        ));
                    }
                }
            }
            Err(e) => {
                break Ended::Failed(format!(
                    "stream failed after {} bytes: {e}",
                    split.as_ref().map_or(0, |s| s.content_len())
                ));
            }
        }
    };
    let end = Instant::now();
    // The content's check (every byte against the pattern, and its hash) and the trailer.
    let (check, trailer) = match (split, &ended) {
        (Some(sp), Ended::Fin) => {
            let (c, t) = sp.finish();
            (Some(c), t)
        }
        (Some(sp), _) => (Some(sp.abandon()), None),
        (None, _) => (None, None),
    };
    let (len, hash) = check.as_ref().map_or(
        (0, xxhash_rust::xxh3::Xxh3Default::new().digest128()),
        |c| (c.len(), c.hash()),
    );
    let mismatch = check.as_ref().and_then(wire::ContentCheck::mismatch);
    s.bytes = len;
    s.hash = hash_hex(hash);
    s.duration_s = first.map_or(0.0, |f| (end - f).as_secs_f64());
    s.goodput_mbps = ccp_udp::summary::mbps(len, s.duration_s);
    s.longest_stall_ms = longest.as_secs_f64() * 1e3;
    if let Some(r) = record {
        let r = r.lock().unwrap_or_else(|p| p.into_inner());
        s.arrivals = r.finish(r.since_zero_us(end), len);
    }
    match ended {
        Ended::Failed(e) => s.error = Some(e),
        Ended::Fin => match trailer {
            None => s.error = Some("the stream ended without a trailer".into()),
            Some(t) => {
                let (want_len, want_hash) = wire::parse_trailer(&t);
                s.completed = true;
                s.ended_by = wire::End::Trailer.name().into();
                s.expected_bytes = Some(want_len);
                s.sender_hash = Some(hash_hex(want_hash));
                s.intact = want_len == len && want_hash == hash && mismatch.is_none();
                if want_len != len || want_hash != hash {
                    s.error = Some("length or hash differs from the sender's".into());
                }
            }
        },
        Ended::Reset(how) => {
            // Nothing follows a reset: what was read is what was delivered, and the pattern
            // vouches for every byte of it. A reset before the header was complete delivered
            // nothing (a flow ended at once).
            s.completed = true;
            s.ended_by = how.name().into();
            s.intact = mismatch.is_none();
        }
    }
    if let Some(at) = mismatch {
        s.error = Some(format!(
            "the content differs from the flow's pattern at offset {at}"
        ));
    }
    let v = wire::verdict(s.intact, len, hash);
    if stream.send(Bytes::copy_from_slice(&v)).await.is_ok() {
        let _ = stream.finish();
        // Let the verdict reach the sender; it closes the connection when it has it.
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while let Ok(Some(_)) = stream.receive().await {}
        })
        .await;
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.accept()).await;
    }
    s
}
