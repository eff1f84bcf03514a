//! A seeded, lossy UDP relay for tests and `ccp-udp relay`: it forwards datagrams from clients
//! to one upstream address and the answers back (one upstream socket per client address, so
//! several flows keep their own return paths), applying loss, reordering, duplication and a
//! fixed delay independently in each direction, each direction with its own seeded random
//! stream so runs are repeatable.
//!
//! Reordering holds a packet back until [`REORDER_DEPTH`] later packets of the same direction
//! have passed (or [`REORDER_MAX_HOLD`] plus the delay elapsed, when traffic stops).

use std::collections::{HashMap, VecDeque};
use std::io as stdio;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::io as sio;

/// A held-back packet is released after this many later packets.
pub const REORDER_DEPTH: u32 = 3;
/// ...or after this long (plus the delay) if fewer come.
pub const REORDER_MAX_HOLD: Duration = Duration::from_millis(5);
/// Most client addresses tracked.
const MAX_CLIENTS: usize = 1024;

/// How the relay behaves.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayConfig {
    /// Address clients send to (port 0: any free port, reported through `on_bound`).
    pub listen: SocketAddr,
    /// Where their datagrams go.
    pub upstream: SocketAddr,
    /// Probability a datagram is dropped.
    pub loss: f64,
    /// Probability a datagram is held back and delivered after the next few.
    pub reorder: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Delay added to every datagram, in each direction (the round trip grows by twice this).
    pub delay: Duration,
    /// Seed of the random decisions.
    pub seed: u64,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            upstream: SocketAddr::from(([127, 0, 0, 1], crate::sender::DEFAULT_PORT)),
            loss: 0.0,
            reorder: 0.0,
            duplicate: 0.0,
            delay: Duration::ZERO,
            seed: 1,
        }
    }
}

impl RelayConfig {
    /// Checks probabilities; the error names the field.
    pub fn validate(&self) -> Result<(), Error> {
        for (name, p) in [
            ("loss", self.loss),
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(Error::Config(format!(
                    "relay {name} probability {p} is outside 0..=1"
                )));
            }
        }
        Ok(())
    }
}

/// Counters of one direction.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Datagrams that arrived.
    pub received: u64,
    /// Datagrams sent on (duplicates included).
    pub forwarded: u64,
    /// Datagrams dropped by the loss model.
    pub dropped: u64,
    /// Datagrams sent twice.
    pub duplicated: u64,
    /// Datagrams held back.
    pub reordered: u64,
    /// Datagrams the kernel refused to send on (buffer full, port closed).
    pub send_errors: u64,
}

/// What a relay run did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayStats {
    /// Client → upstream.
    pub to_upstream: DirectionStats,
    /// Upstream → client.
    pub to_client: DirectionStats,
    /// Client addresses seen.
    pub clients: u64,
    /// Datagrams dropped because they came from a new client beyond the relay's 1024 (every
    /// sender flow is a client of its own: restart the relay for more flows).
    #[serde(default)]
    pub refused_client_datagrams: u64,
}

struct Queued {
    release_us: u64,
    client: usize,
    data: Vec<u8>,
}

struct Held {
    remaining: u32,
    deadline_us: u64,
    pkt: Queued,
}

/// One direction's impairments and queue.
struct Shaper {
    rng: StdRng,
    loss: f64,
    reorder: f64,
    duplicate: f64,
    delay_us: u64,
    queue: VecDeque<Queued>,
    held: Vec<Held>,
    pool: Vec<Vec<u8>>,
    stats: DirectionStats,
}

impl Shaper {
    fn new(cfg: &RelayConfig, seed: u64) -> Self {
        Shaper {
            rng: StdRng::seed_from_u64(seed),
            loss: cfg.loss,
            reorder: cfg.reorder,
            duplicate: cfg.duplicate,
            delay_us: cfg.delay.as_micros() as u64,
            queue: VecDeque::new(),
            held: Vec::new(),
            pool: Vec::new(),
            stats: DirectionStats::default(),
        }
    }

    fn copy(&mut self, data: &[u8]) -> Vec<u8> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(data);
        v
    }

    fn recycle(&mut self, v: Vec<u8>) {
        if self.pool.len() < 4096 {
            self.pool.push(v);
        }
    }

    fn on_packet(&mut self, now: u64, client: usize, data: &[u8]) {
        self.stats.received += 1;
        // Draw every decision for every packet, so one impairment's setting does not shift
        // the random stream of the others.
        let lose = self.rng.r#gen::<f64>() < self.loss;
        let dup = self.rng.r#gen::<f64>() < self.duplicate;
        let hold = self.rng.r#gen::<f64>() < self.reorder;
        if lose {
            self.stats.dropped += 1;
            return;
        }
        let pkt = Queued {
            release_us: now + self.delay_us,
            client,
            data: self.copy(data),
        };
        if dup {
            self.stats.duplicated += 1;
            let again = Queued {
                release_us: now + self.delay_us,
                client,
                data: self.copy(data),
            };
            self.enqueue(now, again);
        }
        if hold {
            self.stats.reordered += 1;
            self.held.push(Held {
                remaining: REORDER_DEPTH,
                deadline_us: now + self.delay_us + REORDER_MAX_HOLD.as_micros() as u64,
                pkt,
            });
        } else {
            self.enqueue(now, pkt);
        }
    }

    fn enqueue(&mut self, now: u64, pkt: Queued) {
        self.queue.push_back(pkt);
        let mut i = 0;
        while i < self.held.len() {
            self.held[i].remaining -= 1;
            if self.held[i].remaining == 0 {
                let mut h = self.held.swap_remove(i);
                h.pkt.release_us = now + self.delay_us;
                self.queue.push_back(h.pkt);
            } else {
                i += 1;
            }
        }
    }

    /// Releases held packets whose hold expired.
    fn expire_held(&mut self, now: u64) {
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].deadline_us <= now {
                let mut h = self.held.swap_remove(i);
                h.pkt.release_us = now;
                self.queue.push_back(h.pkt);
            } else {
                i += 1;
            }
        }
    }

    fn next_event(&self) -> Option<u64> {
        let q = self.queue.front().map(|p| p.release_us);
        let h = self.held.iter().map(|h| h.deadline_us).min();
        match (q, h) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

struct Client {
    addr: SocketAddr,
    sock: UdpSocket,
}

/// Runs the relay until `stop`; `on_bound` gets the listening address first.
pub fn run_relay(
    cfg: &RelayConfig,
    stop: &AtomicBool,
    on_bound: &mut dyn FnMut(SocketAddr),
) -> Result<RelayStats, Error> {
    cfg.validate()?;
    let listen = UdpSocket::bind(cfg.listen)
        .map_err(|e| Error::io(format!("binding the relay to {}", cfg.listen), e))?;
    listen
        .set_nonblocking(true)
        .map_err(|e| Error::io("setting the relay socket non-blocking", e))?;
    sio::set_buffers(&listen, 8 << 20, 8 << 20);
    sio::set_timer_slack_ns(1_000);
    let local = listen
        .local_addr()
        .map_err(|e| Error::io("reading the relay's address", e))?;
    tracing::info!(%local, upstream = %cfg.upstream, "relay listening");
    on_bound(local);

    let epoch = Instant::now();
    let now_us = || epoch.elapsed().as_micros() as u64;
    let mut up = Shaper::new(cfg, cfg.seed);
    let mut down = Shaper::new(cfg, cfg.seed ^ 0x5DEE_CE66_D1CE_4E5B);
    let mut clients: Vec<Client> = Vec::new();
    let mut refused = 0u64;
    let mut by_addr: HashMap<SocketAddr, usize> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    let mut fds = Vec::new();
    let mut ready = Vec::new();
    let up_bind = if cfg.upstream.is_ipv4() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    };

    while !stop.load(Ordering::Relaxed) {
        // Transmit what is due.
        let now = now_us();
        up.expire_held(now);
        down.expire_held(now);
        while up.queue.front().is_some_and(|p| p.release_us <= now) {
            let Some(p) = up.queue.pop_front() else { break };
            match clients[p.client].sock.send(&p.data) {
                Ok(_) => up.stats.forwarded += 1,
                Err(_) => up.stats.send_errors += 1,
            }
            up.recycle(p.data);
        }
        while down.queue.front().is_some_and(|p| p.release_us <= now) {
            let Some(p) = down.queue.pop_front() else {
                break;
            };
            match listen.send_to(&p.data, clients[p.client].addr) {
                Ok(_) => down.stats.forwarded += 1,
                Err(_) => down.stats.send_errors += 1,
            }
            down.recycle(p.data);
        }
        // Wait for datagrams or the next release.
        let mut wake = now + 50_000;
        for t in [up.next_event(), down.next_event()].into_iter().flatten() {
            wake = wake.min(t);
        }
        fds.clear();
        fds.push(listen.as_raw_fd());
        fds.extend(clients.iter().map(|c| c.sock.as_raw_fd()));
        if wake > now {
            sio::wait_many(&fds, &mut ready, Some(Duration::from_micros(wake - now)))
                .map_err(|e| Error::io("relay wait", e))?;
        } else {
            ready.clear();
            ready.resize(fds.len(), true);
        }
        // Read.
        if ready.first().copied().unwrap_or(false) {
            for _ in 0..256 {
                match listen.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        let idx = match by_addr.get(&from) {
                            Some(&i) => i,
                            None => {
                                if clients.len() >= MAX_CLIENTS {
                                    if refused == 0 {
                                        tracing::warn!(%from, "relay full: {MAX_CLIENTS} clients already; dropping datagrams of new clients (restart the relay for more flows)");
                                    }
                                    refused += 1;
                                    continue;
                                }
                                let sock = UdpSocket::bind(SocketAddr::new(up_bind, 0))
                                    .and_then(|s| s.connect(cfg.upstream).map(|_| s))
                                    .and_then(|s| s.set_nonblocking(true).map(|_| s))
                                    .map_err(|e| {
                                        Error::io(
                                            format!("opening a relay socket to {}", cfg.upstream),
                                            e,
                                        )
                                    })?;
                                sio::set_buffers(&sock, 8 << 20, 8 << 20);
                                clients.push(Client { addr: from, sock });
                                by_addr.insert(from, clients.len() - 1);
                                tracing::debug!(%from, "relay client");
                                clients.len() - 1
                            }
                        };
                        up.on_packet(now_us(), idx, &buf[..n]);
                    }
                    Err(e) if e.kind() == stdio::ErrorKind::WouldBlock => break,
                    Err(_) => {}
                }
            }
        }
        for (i, c) in clients.iter().enumerate() {
            if !ready.get(i + 1).copied().unwrap_or(false) {
                continue;
            }
            for _ in 0..256 {
                match c.sock.recv(&mut buf) {
                    Ok(n) => down.on_packet(now_us(), i, &buf[..n]),
                    Err(e) if e.kind() == stdio::ErrorKind::WouldBlock => break,
                    // ICMP errors from a closed upstream port: nothing to forward.
                    Err(_) => {}
                }
            }
        }
    }
    Ok(RelayStats {
        to_upstream: up.stats,
        to_client: down.stats,
        clients: clients.len() as u64,
        refused_client_datagrams: refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shaper_is_seeded_and_counts() {
        let cfg = RelayConfig {
            loss: 0.1,
            reorder: 0.05,
            duplicate: 0.02,
            ..RelayConfig::default()
        };
        let run = || {
            let mut s = Shaper::new(&cfg, 42);
            let mut order = Vec::new();
            for i in 0..10_000u32 {
                s.on_packet(u64::from(i), 0, &i.to_be_bytes());
                while let Some(p) = s.queue.pop_front() {
                    order.push(u32::from_be_bytes(p.data[..4].try_into().unwrap()));
                }
            }
            s.expire_held(u64::MAX);
            while let Some(p) = s.queue.pop_front() {
                order.push(u32::from_be_bytes(p.data[..4].try_into().unwrap()));
            }
            (order, s.stats)
        };
        let (a, sa) = run();
        let (b, _) = run();
        assert_eq!(a, b, "same seed, same decisions");
        assert!((800..1200).contains(&sa.dropped), "{sa:?}");
        assert!((350..650).contains(&sa.reordered), "{sa:?}");
        assert!((120..280).contains(&sa.duplicated), "{sa:?}");
        assert_eq!(a.len() as u64, 10_000 - sa.dropped + sa.duplicated);
        assert!(a.windows(2).any(|w| w[0] > w[1]), "some reordering");
        assert!(Shaper::new(&cfg, 1).next_event().is_none());
        assert!(
            RelayConfig {
                loss: 1.5,
                ..RelayConfig::default()
            }
            .validate()
            .is_err()
        );
    }
}
