//! The load generator behind `jcce bench`: many members in many groups publishing as fast as a
//! bounded number of datagrams in flight allows (or at a fixed offered rate), against an
//! in-process service on loopback or a running one.
//!
//! Each sender thread plays many hosts at once: it owns a share of the members, packs `batch`
//! updates per datagram (members round-robin, each member's MI incremented per publication),
//! keeps at most `inflight` datagrams unanswered, authenticates every reply as the real client
//! does, and records each datagram's round trip (request sent to reply verified).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

use crate::Error;
use crate::server::{Metrics, Server, ServiceConfig};
use crate::wire::{self, Key, Kind, Op, UpdateEntry, Writer};

/// Load parameters.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Members in total (count). Default 10,000 (the benchmark).
    pub members: usize,
    /// Groups (count); member j is in group j mod groups. Default 100.
    pub groups: usize,
    /// Updates per datagram (1..=1024). Default 32 (fits an Ethernet MTU).
    pub batch: usize,
    /// Unanswered datagrams per sender thread (count). Default 1.
    pub inflight: usize,
    /// Sender threads. Default 1.
    pub senders: usize,
    /// Measured duration. Default 5 s.
    pub duration: Duration,
    /// Unmeasured warm-up before it (all members join). Default 1 s.
    pub warmup: Duration,
    /// Offered load in updates/s over all senders; `None` = as fast as `inflight` allows.
    pub rate: Option<f64>,
    /// A running service to load; `None` starts one in this process on 127.0.0.1.
    pub target: Option<SocketAddr>,
    /// The key (for a running service: its key).
    pub key: Key,
}

/// Results.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    pub members: usize,
    pub groups: usize,
    pub batch: usize,
    pub inflight: usize,
    pub senders: usize,
    pub offered_rate: Option<f64>,
    /// Updates answered during the measured period.
    pub updates: u64,
    pub seconds: f64,
    pub updates_per_s: f64,
    pub datagrams_per_s: f64,
    /// Round-trip latency of a datagram (µs).
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Datagrams without a reply within 200 ms.
    pub lost: u64,
    /// Members live in the in-process service at the end (None for an external service).
    pub service_members: Option<u64>,
    pub service_groups: Option<u64>,
}

struct SenderResult {
    updates: u64,
    datagrams: u64,
    lost: u64,
    latencies_ns: Vec<u32>,
}

/// Run the benchmark.
pub fn run(cfg: &BenchConfig) -> Result<BenchReport, Error> {
    if cfg.members == 0 || cfg.groups == 0 || cfg.senders == 0 {
        return Err(Error::Bench("members, groups and senders must be positive"));
    }
    if cfg.senders > cfg.members {
        return Err(Error::Bench("more senders than members"));
    }
    if !(1..=wire::MAX_ENTRIES).contains(&cfg.batch) {
        return Err(Error::Bench("batch must be 1..=1024"));
    }
    let mut server_thread = None;
    let target = match cfg.target {
        Some(t) => t,
        None => {
            let key = cfg.key.clone();
            let (addr_tx, addr_rx) = std::sync::mpsc::channel();
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let t = std::thread::Builder::new()
                .name("jcce-serve".into())
                .spawn(move || -> Result<Metrics, Error> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    rt.block_on(async move {
                        let listen = SocketAddr::from(([127, 0, 0, 1], 0));
                        let server = Server::bind(listen, key, ServiceConfig::default()).await?;
                        let _ = addr_tx.send(server.local_addr()?);
                        Ok(server
                            .run(async {
                                let _ = stop_rx.await;
                            })
                            .await)
                    })
                })?;
            let addr = match addr_rx.recv_timeout(Duration::from_secs(10)) {
                Ok(a) => a,
                Err(_) => {
                    return Err(match t.join() {
                        Ok(Err(e)) => e,
                        _ => Error::Bench("the in-process service did not start"),
                    });
                }
            };
            server_thread = Some((t, stop_tx));
            addr
        }
    };
    let start = Instant::now() + Duration::from_millis(50);
    let measure_from = start + cfg.warmup;
    let end = measure_from + cfg.duration;
    let threads: Vec<_> = (0..cfg.senders)
        .map(|t| {
            let cfg = cfg.clone();
            std::thread::Builder::new()
                .name(format!("jcce-load-{t}"))
                .spawn(move || -> Result<SenderResult, Error> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    rt.block_on(sender(&cfg, t, target, start, measure_from, end))
                })
        })
        .collect::<Result<_, _>>()?;
    let mut results = Vec::new();
    for t in threads {
        results.push(t.join().map_err(|_| Error::Panicked("load"))??);
    }
    let (mut service_members, mut service_groups) = (None, None);
    if let Some((t, stop)) = server_thread {
        let _ = stop.send(());
        let m = t.join().map_err(|_| Error::Panicked("service"))??;
        service_members = Some(m.members);
        service_groups = Some(m.groups);
    }
    let updates: u64 = results.iter().map(|r| r.updates).sum();
    let datagrams: u64 = results.iter().map(|r| r.datagrams).sum();
    let lost: u64 = results.iter().map(|r| r.lost).sum();
    let mut lat: Vec<u32> = results.into_iter().flat_map(|r| r.latencies_ns).collect();
    lat.sort_unstable();
    let pct = |p: f64| -> f64 {
        if lat.is_empty() {
            return f64::NAN;
        }
        let i = ((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1;
        lat[i] as f64 / 1000.0
    };
    let secs = cfg.duration.as_secs_f64();
    Ok(BenchReport {
        members: cfg.members,
        groups: cfg.groups,
        batch: cfg.batch,
        inflight: cfg.inflight,
        senders: cfg.senders,
        offered_rate: cfg.rate,
        updates,
        seconds: secs,
        updates_per_s: updates as f64 / secs,
        datagrams_per_s: datagrams as f64 / secs,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        p999_us: pct(0.999),
        max_us: lat.last().map_or(f64::NAN, |&v| v as f64 / 1000.0),
        lost,
        service_members,
        service_groups,
    })
}

async fn sender(
    cfg: &BenchConfig,
    t: usize,
    target: SocketAddr,
    start: Instant,
    measure_from: Instant,
    end: Instant,
) -> Result<SenderResult, Error> {
    let sock = UdpSocket::bind("127.0.0.1:0").await?;
    sock.connect(target).await?;
    // This sender's members: global indices t, t + senders, t + 2·senders, …
    let mine: Vec<usize> = (t..cfg.members).step_by(cfg.senders).collect();
    let mut mi = vec![0u64; mine.len()];
    let mut next_member = 0usize;
    let sender_id: u64 = rand::random::<u64>() | 1;
    let mut seq = 0u64;
    let mut out = Vec::with_capacity(wire::MAX_DATAGRAM);
    let mut rbuf = vec![0u8; wire::MAX_DATAGRAM + 1];
    let mut outstanding: BTreeMap<u64, (Instant, usize)> = BTreeMap::new();
    let mut res = SenderResult {
        updates: 0,
        datagrams: 0,
        lost: 0,
        latencies_ns: Vec::new(),
    };
    // Paced mode: this sender's share of the offered rate, one datagram every `gap`.
    let gap = cfg
        .rate
        .map(|r| Duration::from_secs_f64(cfg.batch as f64 * cfg.senders as f64 / r.max(1.0)));
    tokio::time::sleep_until(start.into()).await;
    let mut next_send = start;
    let lost_after = Duration::from_millis(200);
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        // Replies already there.
        loop {
            match sock.try_recv(&mut rbuf) {
                Ok(n) => {
                    let got = Instant::now();
                    let Ok(m) = wire::open(&cfg.key, &rbuf[..n]) else {
                        continue;
                    };
                    if m.header.kind != Kind::UpdateReply || m.header.sender != sender_id {
                        continue;
                    }
                    if let Some((sent, count)) = outstanding.remove(&m.header.seq)
                        && sent >= measure_from
                        && got < end
                    {
                        res.updates += count as u64;
                        res.datagrams += 1;
                        let ns = got.duration_since(sent).as_nanos().min(u32::MAX as u128);
                        res.latencies_ns.push(ns as u32);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        while let Some((&s, &(sent, _))) = outstanding.first_key_value() {
            if now.duration_since(sent) < lost_after {
                break;
            }
            outstanding.remove(&s);
            if sent >= measure_from {
                res.lost += 1;
            }
        }
        let paced_ok = gap.is_none() || now >= next_send;
        if outstanding.len() < cfg.inflight && paced_ok {
            seq += 1;
            let mut w = Writer::new(&mut out, Kind::Update, sender_id, seq, wire::unix_micros());
            for _ in 0..cfg.batch {
                let i = next_member;
                next_member = (next_member + 1) % mine.len();
                mi[i] += 1;
                let global = mine[i];
                w.update(&UpdateEntry {
                    op: Op::Publish,
                    group: (global % cfg.groups) as u64,
                    member: global as u64,
                    mi: mi[i],
                    value: 1_000_000 + (global as u64 * 7919 + mi[i] * 104_729) % 12_500_000,
                });
            }
            let d = w.finish(&cfg.key);
            let sent = Instant::now();
            sock.send(d).await?;
            outstanding.insert(seq, (sent, cfg.batch));
            if let Some(g) = gap {
                next_send += g;
                // Do not try to catch up a backlog larger than one in-flight window.
                let behind = cfg.inflight as u32 * g;
                if next_send + behind < sent {
                    next_send = sent - behind;
                }
            }
            continue;
        }
        // Nothing to send now: wait for a reply, the pacing clock or the end. Tokio's timers
        // tick in milliseconds, so a pacing gap shorter than that is slept with the OS timer
        // (this runtime runs nothing else); replies that arrive meanwhile wait in the socket.
        let wake = if outstanding.len() < cfg.inflight {
            if next_send < now + Duration::from_millis(2) {
                std::thread::sleep(next_send.saturating_duration_since(now));
                continue;
            }
            next_send.min(end)
        } else {
            end.min(now + lost_after)
        };
        tokio::select! {
            r = sock.readable() => r?,
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
    }
    Ok(res)
}

impl BenchReport {
    /// Human-readable summary.
    pub fn summary(&self) -> String {
        format!(
            "{} members in {} groups, {} updates/datagram, {} in flight × {} sender(s){}: \
             {:.0} updates/s ({:.0} datagrams/s); reply latency p50 {:.1} µs, p99 {:.1} µs, \
             p99.9 {:.1} µs, max {:.1} µs; {} datagrams lost",
            self.members,
            self.groups,
            self.batch,
            self.inflight,
            self.senders,
            self.offered_rate
                .map_or(String::new(), |r| format!(", offered {r:.0} updates/s")),
            self.updates_per_s,
            self.datagrams_per_s,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
            self.lost
        )
    }
}
