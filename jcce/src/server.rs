//! The JCCE network service: one UDP socket, the [`Core`] behind it, metrics on request.
//!
//! [`Service`] is the synchronous heart (datagram in, reply datagram out, times injected), so it
//! can be tested and fuzzed without sockets; [`Server`] runs it on a tokio UDP socket.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::net::UdpSocket;

use crate::core::{Core, CoreConfig, CoreStats, Micros};
use crate::wire::{self, DropReason, Key, Kind, ReplayGuard, ReplyEntry, Writer};

/// Service configuration.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// The aggregation core's parameters.
    pub core: CoreConfig,
    /// Largest accepted |sender clock − service clock| (µs). Default 10 s: hosts of a JointCloud
    /// are assumed NTP-synchronised far better than that. Also bounds how long a sender's replay
    /// state must be kept (2 × skew). Not from the paper.
    pub max_clock_skew_us: u64,
    /// Senders (client instances) tracked for replay protection at once (count). Default 100,000.
    pub max_senders: usize,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            core: CoreConfig::default(),
            max_clock_skew_us: 10_000_000,
            max_senders: 100_000,
        }
    }
}

/// Dropped datagrams by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounts {
    pub truncated: u64,
    pub not_jcce: u64,
    pub bad_mac: u64,
    pub malformed: u64,
    pub unexpected_kind: u64,
    pub replayed: u64,
    pub clock_skew: u64,
    pub too_many_senders: u64,
}

impl DropCounts {
    fn count(&mut self, d: DropReason) {
        let c = match d {
            DropReason::Truncated => &mut self.truncated,
            DropReason::NotJcce => &mut self.not_jcce,
            DropReason::BadMac => &mut self.bad_mac,
            DropReason::Malformed => &mut self.malformed,
            DropReason::UnexpectedKind => &mut self.unexpected_kind,
            DropReason::Replayed => &mut self.replayed,
            DropReason::ClockSkew => &mut self.clock_skew,
            DropReason::TooManySenders => &mut self.too_many_senders,
        };
        *c += 1;
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.truncated
            + self.not_jcce
            + self.bad_mac
            + self.malformed
            + self.unexpected_kind
            + self.replayed
            + self.clock_skew
            + self.too_many_senders
    }

    /// Drops of datagrams that were not authenticated (wrong key, forged, garbage).
    pub fn unauthenticated(&self) -> u64 {
        self.truncated + self.not_jcce + self.bad_mac
    }
}

/// What `jcce metrics` returns: counters and gauges only, never a member's value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Seconds since the service started.
    pub uptime_s: f64,
    /// Datagrams received (all, including dropped ones).
    pub datagrams: u64,
    /// Datagrams dropped, by reason.
    pub dropped: DropCounts,
    /// Update entries processed (publishes and leaves).
    pub entries: u64,
    /// Reply datagrams sent.
    pub replies: u64,
    /// Reply entries whose mean was withheld because n < k.
    pub withheld: u64,
    /// Replies that could not be sent (socket error).
    pub send_errors: u64,
    /// The core's counters.
    pub core: CoreStats,
    /// Live members (gauge).
    pub members: u64,
    /// Groups with a live member (gauge).
    pub groups: u64,
    /// Senders remembered by the replay guard (gauge).
    pub senders: u64,
    /// The configured minimum group size k.
    pub min_group: u32,
}

impl Metrics {
    /// Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let mut line = |name: &str, kind: &str, help: &str, v: String| {
            s.push_str(&format!(
                "# HELP jcce_{name} {help}\n# TYPE jcce_{name} {kind}\n"
            ));
            s.push_str(&format!("jcce_{name} {v}\n"));
        };
        line(
            "uptime_seconds",
            "gauge",
            "Seconds since start.",
            format!("{}", self.uptime_s),
        );
        line(
            "datagrams_total",
            "counter",
            "Datagrams received.",
            self.datagrams.to_string(),
        );
        line(
            "entries_total",
            "counter",
            "Update entries processed.",
            self.entries.to_string(),
        );
        line(
            "replies_total",
            "counter",
            "Reply datagrams sent.",
            self.replies.to_string(),
        );
        line(
            "withheld_total",
            "counter",
            "Reply entries withheld (n < k).",
            self.withheld.to_string(),
        );
        line(
            "send_errors_total",
            "counter",
            "Replies not sent.",
            self.send_errors.to_string(),
        );
        line(
            "accepted_total",
            "counter",
            "Updates accepted.",
            self.core.accepted.to_string(),
        );
        line(
            "stale_total",
            "counter",
            "Updates with an old MI.",
            self.core.stale.to_string(),
        );
        line(
            "refused_full_total",
            "counter",
            "New members refused (full).",
            self.core.refused_full.to_string(),
        );
        line(
            "expired_total",
            "counter",
            "Members expired.",
            self.core.expired.to_string(),
        );
        line(
            "left_total",
            "counter",
            "Members that left.",
            self.core.left.to_string(),
        );
        line(
            "members",
            "gauge",
            "Live members.",
            self.members.to_string(),
        );
        line(
            "groups",
            "gauge",
            "Groups with a live member.",
            self.groups.to_string(),
        );
        line(
            "senders",
            "gauge",
            "Senders tracked for replay protection.",
            self.senders.to_string(),
        );
        line(
            "min_group",
            "gauge",
            "Minimum group size k.",
            self.min_group.to_string(),
        );
        s.push_str("# HELP jcce_dropped_total Datagrams dropped, by reason.\n");
        s.push_str("# TYPE jcce_dropped_total counter\n");
        let d = &self.dropped;
        for (reason, v) in [
            ("truncated", d.truncated),
            ("not_jcce", d.not_jcce),
            ("bad_mac", d.bad_mac),
            ("malformed", d.malformed),
            ("unexpected_kind", d.unexpected_kind),
            ("replayed", d.replayed),
            ("clock_skew", d.clock_skew),
            ("too_many_senders", d.too_many_senders),
        ] {
            s.push_str(&format!("jcce_dropped_total{{reason=\"{reason}\"}} {v}\n"));
        }
        s
    }
}

/// The service without its socket: authenticated datagrams in, authenticated replies out.
pub struct Service {
    key: Key,
    core: Core,
    replay: ReplayGuard,
    metrics: Metrics,
    out: Vec<u8>,
}

impl Service {
    pub fn new(key: Key, cfg: &ServiceConfig) -> Result<Service, crate::core::ConfigError> {
        Ok(Service {
            key,
            core: Core::new(cfg.core)?,
            replay: ReplayGuard::new(cfg.max_clock_skew_us, cfg.max_senders),
            metrics: Metrics {
                min_group: cfg.core.min_group,
                ..Metrics::default()
            },
            out: Vec::with_capacity(wire::MAX_DATAGRAM),
        })
    }

    /// Handle one datagram. `mono_us` is the core's clock (monotonic), `wall_us` the wall clock
    /// for the replay timestamps. Returns the reply datagram, if any; a dropped datagram gets
    /// none (and is counted).
    pub fn handle(&mut self, datagram: &[u8], mono_us: Micros, wall_us: u64) -> Option<&[u8]> {
        self.metrics.datagrams += 1;
        match self.respond(datagram, mono_us, wall_us) {
            Ok(()) => {
                self.metrics.replies += 1;
                Some(&self.out)
            }
            Err(d) => {
                self.metrics.dropped.count(d);
                None
            }
        }
    }

    fn respond(
        &mut self,
        datagram: &[u8],
        mono_us: Micros,
        wall_us: u64,
    ) -> Result<(), DropReason> {
        let msg = wire::open(&self.key, datagram)?;
        let h = msg.header;
        if !matches!(h.kind, Kind::Update | Kind::MetricsRequest) {
            return Err(DropReason::UnexpectedKind);
        }
        self.replay.check(&h, wall_us)?;
        match h.kind {
            Kind::Update => {
                let mut w = Writer::new(&mut self.out, Kind::UpdateReply, h.sender, h.seq, wall_us);
                for e in msg.updates() {
                    let o = match e.op {
                        wire::Op::Publish => {
                            self.core.publish(mono_us, e.group, e.member, e.mi, e.value)
                        }
                        wire::Op::Leave => self.core.leave(mono_us, e.group, e.member),
                    };
                    if o.aggregate.mean.is_none() {
                        self.metrics.withheld += 1;
                    }
                    w.reply(&ReplyEntry {
                        group: e.group,
                        member: e.member,
                        mi: e.mi,
                        n: o.aggregate.n,
                        applied: o.applied,
                        mean: o.aggregate.mean,
                    });
                }
                self.metrics.entries += w.count() as u64;
                w.finish(&self.key);
            }
            _ => {
                let body = serde_json::to_vec(&self.metrics(mono_us)).expect("metrics serialise");
                let mut w =
                    Writer::new(&mut self.out, Kind::MetricsReply, h.sender, h.seq, wall_us);
                w.body(&body);
                w.finish(&self.key);
            }
        }
        Ok(())
    }

    /// Expire members of groups nobody touched (see [`Core::sweep`]).
    pub fn sweep(&mut self, mono_us: Micros) -> usize {
        self.core.sweep(mono_us)
    }

    /// Current metrics (`mono_us` gives the uptime).
    pub fn metrics(&self, mono_us: Micros) -> Metrics {
        Metrics {
            uptime_s: mono_us as f64 / 1e6,
            core: self.core.stats(),
            members: self.core.members() as u64,
            groups: self.core.groups() as u64,
            senders: self.replay.senders() as u64,
            ..self.metrics.clone()
        }
    }

    /// The core (read-only), e.g. for tests.
    pub fn core(&self) -> &Core {
        &self.core
    }

    fn count_send_error(&mut self) {
        self.metrics.send_errors += 1;
        self.metrics.replies -= 1;
    }
}

/// The service on a tokio UDP socket.
pub struct Server {
    socket: UdpSocket,
    service: Service,
    sweep_every: Duration,
}

impl Server {
    /// Bind `listen` and prepare the service.
    pub async fn bind(
        listen: SocketAddr,
        key: Key,
        cfg: ServiceConfig,
    ) -> Result<Server, crate::Error> {
        let service = Service::new(key, &cfg)?;
        let socket = UdpSocket::bind(listen).await?;
        let sweep_every = Duration::from_micros((cfg.core.member_timeout_us / 2).max(1000));
        Ok(Server {
            socket,
            service,
            sweep_every,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Serve until `shutdown` completes; returns the final metrics.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Metrics {
        let Server {
            socket,
            mut service,
            sweep_every,
        } = self;
        let start = Instant::now();
        let mono = move || start.elapsed().as_micros() as u64;
        let mut sweep = tokio::time::interval(sweep_every);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut buf = vec![0u8; wire::MAX_DATAGRAM + 1];
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                _ = sweep.tick() => {
                    service.sweep(mono());
                }
                r = socket.recv_from(&mut buf) => {
                    let (len, from) = match r {
                        Ok(x) => x,
                        // e.g. ICMP errors surfacing on the socket: nothing to do
                        Err(e) => {
                            tracing::debug!("recv: {e}");
                            continue;
                        }
                    };
                    Self::serve(&socket, &mut service, &buf[..len], from, mono()).await;
                    // Drain what is already queued before going back to the select.
                    for _ in 0..256 {
                        match socket.try_recv_from(&mut buf) {
                            Ok((len, from)) => {
                                Self::serve(&socket, &mut service, &buf[..len], from, mono()).await;
                            }
                            Err(_) => break,
                        }
                    }
                }
            }
        }
        service.metrics(mono())
    }

    async fn serve(
        socket: &UdpSocket,
        service: &mut Service,
        datagram: &[u8],
        from: SocketAddr,
        mono_us: Micros,
    ) {
        let Some(reply) = service.handle(datagram, mono_us, wire::unix_micros()) else {
            return;
        };
        let sent = match socket.try_send_to(reply, from) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                socket.send_to(reply, from).await.map(|_| ())
            }
            r => r.map(|_| ()),
        };
        if let Err(e) = sent {
            tracing::debug!("send to {from}: {e}");
            service.count_send_error();
        }
    }
}

/// Ask a running service for its metrics (one authenticated request, `timeout` for the reply).
pub fn fetch_metrics(
    addr: SocketAddr,
    key: &Key,
    timeout: Duration,
) -> Result<Metrics, crate::Error> {
    let bind = if addr.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let sock = std::net::UdpSocket::bind(bind)?;
    sock.connect(addr)?;
    sock.set_read_timeout(Some(timeout))?;
    let sender: u64 = rand::random();
    let mut buf = Vec::new();
    let req = Writer::new(
        &mut buf,
        Kind::MetricsRequest,
        sender,
        1,
        wire::unix_micros(),
    )
    .finish(key);
    sock.send(req)?;
    let mut rbuf = vec![0u8; wire::MAX_DATAGRAM + 1];
    loop {
        let n = sock
            .recv(&mut rbuf)
            .map_err(|source| crate::Error::NoReply { addr, source })?;
        let Ok(msg) = wire::open(key, &rbuf[..n]) else {
            continue;
        };
        if msg.header.kind == Kind::MetricsReply
            && msg.header.sender == sender
            && msg.header.seq == 1
        {
            return Ok(serde_json::from_str(msg.text())?);
        }
    }
}
