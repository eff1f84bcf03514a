//! The bottleneck link: a queue drained either by mahimahi delivery opportunities from a trace
//! or by a byte-serialising server at a constant or scheduled rate, with optional ECN marking
//! above a queue threshold and an mm-link log. Pure logic in µs of a caller's clock, so unit
//! tests drive it with a virtual clock.
//!
//! Trace semantics (mahimahi's `LinkQueue`): each trace line is one opportunity to deliver 1504
//! bytes at that ms; packet sizes count 4 bytes of TUN header; a packet may span opportunities
//! and leaves at the one that carries its last byte; several small packets share one; bytes of
//! an opportunity that find the queue empty are lost; a packet can use only opportunities
//! strictly after its arrival; the trace repeats by adding its last timestamp, or stops with
//! `once`. Rate semantics: a packet starts transmission when the link is free and leaves after
//! `size / rate` (integrating the schedule across rate changes).

use crate::error::Result;
use crate::log::{LinkLog, LogHeader};
use crate::packet::Packet;
use crate::queue::{PacketQueue, QueueConfig, Queued};
use crate::stage::{Stage, StageStats};
use crate::trace::{OPPORTUNITY_BYTES, Schedule, Trace};
use std::collections::VecDeque;
use std::path::PathBuf;

/// What drains the queue.
#[derive(Clone, Debug, PartialEq)]
pub enum Service {
    /// Mahimahi delivery opportunities; `repeat: false` is mm-link's `--once`.
    Trace {
        /// The trace.
        trace: Trace,
        /// Loop the trace (mahimahi's default) or stop at its end.
        repeat: bool,
    },
    /// A constant or piecewise-constant rate, bytes/s.
    Rate(Schedule),
}

impl Service {
    /// Describe for logs and messages.
    pub fn describe(&self) -> String {
        match self {
            Service::Trace { trace, .. } => trace.source.display().to_string(),
            Service::Rate(s) if s.segments.len() == 1 => {
                format!(
                    "rate {}",
                    ccp_units::Unit::Rate.show(s.segments[0].1 as f64)
                )
            }
            Service::Rate(s) => format!(
                "schedule {}",
                s.segments
                    .iter()
                    .map(|&(t, r)| format!(
                        "{}:{}",
                        ccp_units::Unit::Micros.show(t as f64),
                        ccp_units::Unit::Rate.show(r as f64)
                    ))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

/// ECN marking threshold on the queue occupancy an arriving packet sees (itself included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnThreshold {
    /// Mark when the queue holds more than this many bytes (4 bytes of header per packet).
    Bytes(u64),
    /// Mark when the queue holds more than this many packets.
    Packets(u64),
}

impl EcnThreshold {
    /// Parse `30KB`, `30000` (bytes) or `20pkts` / `20packets`.
    pub fn parse(text: &str) -> std::result::Result<EcnThreshold, String> {
        let t = text.trim();
        if t.ends_with("pkts") || t.ends_with("packets") || t.ends_with("pkt") {
            ccp_units::Unit::Packets
                .parse(t)
                .map(|v| EcnThreshold::Packets(v as u64))
        } else {
            ccp_units::parse_bytes(t).map(EcnThreshold::Bytes)
        }
    }
}

/// One direction's bottleneck.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// What drains the queue.
    pub service: Service,
    /// The queue.
    pub queue: QueueConfig,
    /// Mark CE on ECN-capable packets when the queue is above this.
    pub ecn: Option<EcnThreshold>,
    /// Write an mm-link log here.
    pub log: Option<PathBuf>,
}

impl LinkConfig {
    /// A link of a constant rate (bytes/s) with an infinite queue.
    pub fn rate(bytes_per_s: u64) -> LinkConfig {
        LinkConfig {
            service: Service::Rate(Schedule::constant(bytes_per_s)),
            queue: QueueConfig::default(),
            ecn: None,
            log: None,
        }
    }

    /// A link replaying a trace (looping) with an infinite queue.
    pub fn trace(trace: Trace) -> LinkConfig {
        LinkConfig {
            service: Service::Trace {
                trace,
                repeat: true,
            },
            queue: QueueConfig::default(),
            ecn: None,
            log: None,
        }
    }

    /// The same link with another queue.
    pub fn with_queue(mut self, queue: QueueConfig) -> LinkConfig {
        self.queue = queue;
        self
    }
}

enum Server {
    Trace {
        ms: Vec<u64>,
        repeat: bool,
        idx: usize,
        base: u64,
        finished: bool,
        transit: Option<(Queued, u32)>,
    },
    Rate {
        schedule: Schedule,
        origin: u64,
        // the packet on the wire and when its last bit leaves, ns since `origin`
        transit: Option<(Queued, u64)>,
        // capacity lines for the log: how many 1504-byte units have been logged
        logged_units: u64,
        next_unit_at: Option<u64>,
    },
}

/// A running link direction.
pub struct Link {
    server: Server,
    queue: PacketQueue,
    ecn: Option<EcnThreshold>,
    log: Option<LinkLog>,
    out: VecDeque<(u64, Packet)>,
    dropped: Vec<Queued>,
    stats: StageStats,
}

impl Link {
    /// Start a link at `start` µs of the caller's clock. `header` is used when the config asks
    /// for a log.
    pub fn new(cfg: &LinkConfig, start: u64, seed: u64, header: Option<LogHeader>) -> Result<Link> {
        cfg.queue.validate()?;
        let log = match (&cfg.log, header) {
            (Some(p), Some(h)) => Some(LinkLog::create(p, &h)?),
            (Some(p), None) => Some(LinkLog::create(
                p,
                &LogHeader {
                    direction: "Link".into(),
                    source: cfg.service.describe(),
                    command_line: String::new(),
                    queue: cfg.queue.describe(),
                    init_unix_ms: 0,
                    base_ms: start / 1000,
                },
            )?),
            _ => None,
        };
        let server = match &cfg.service {
            Service::Trace { trace, repeat } => Server::Trace {
                ms: trace.ms.clone(),
                repeat: *repeat,
                idx: 0,
                base: start,
                finished: false,
                transit: None,
            },
            Service::Rate(s) => Server::Rate {
                schedule: s.clone(),
                origin: start,
                transit: None,
                logged_units: 0,
                next_unit_at: s.finish(0, OPPORTUNITY_BYTES as u64).map(|t| t + start),
            },
        };
        Ok(Link {
            server,
            queue: PacketQueue::new(cfg.queue.clone(), seed, start),
            ecn: cfg.ecn,
            log,
            out: VecDeque::new(),
            dropped: Vec::new(),
            stats: StageStats::default(),
        })
    }

    /// Packets and bytes queued now (not counting one in transmission).
    pub fn queued(&self) -> (usize, u64) {
        (self.queue.len_packets(), self.queue.len_bytes())
    }

    fn log_drops(&mut self, t: u64) {
        if self.dropped.is_empty() {
            return;
        }
        let n = self.dropped.len();
        let bytes: u64 = self.dropped.iter().map(|q| q.size() as u64).sum();
        self.stats.dropped_pkts += n as u64;
        self.stats.dropped_bytes += bytes;
        if let Some(l) = &mut self.log {
            l.drop(t / 1000, n, bytes);
        }
        self.dropped.clear();
    }

    fn depart(&mut self, t: u64, q: Queued) {
        let size = q.size();
        self.stats.out_pkts += 1;
        self.stats.out_bytes += size as u64;
        if q.marked {
            self.stats.ce_marked += 1;
        }
        if let Some(l) = &mut self.log {
            l.departure(t / 1000, size, t / 1000 - q.arrival / 1000);
        }
        self.out.push_back((t, q.pkt));
    }

    fn trace_next(&self) -> Option<u64> {
        match &self.server {
            Server::Trace {
                ms,
                idx,
                base,
                finished,
                ..
            } => (!finished).then(|| base + ms[*idx] * 1000),
            Server::Rate { .. } => None,
        }
    }

    fn trace_use(&mut self) {
        if let Server::Trace {
            ms,
            repeat,
            idx,
            base,
            finished,
            ..
        } = &mut self.server
        {
            *idx += 1;
            if *idx == ms.len() {
                *idx = 0;
                if *repeat {
                    *base += ms[ms.len() - 1] * 1000;
                } else {
                    *finished = true;
                }
            }
        }
    }

    /// Skip every opportunity at or before `now` without looking at them (nothing to send and
    /// nothing to log).
    fn trace_skip(&mut self, now: u64) {
        if let Server::Trace {
            ms,
            repeat,
            idx,
            base,
            finished,
            ..
        } = &mut self.server
        {
            if *finished {
                return;
            }
            let period = ms[ms.len() - 1] * 1000;
            if *repeat && now >= *base + period {
                *base += (now - *base) / period * period;
                *idx = 0;
            }
            let b = *base;
            let pp = ms.partition_point(|&m| b + m * 1000 <= now);
            *idx = (*idx).max(pp);
            if *idx >= ms.len() {
                *idx = 0;
                if *repeat {
                    *base += period;
                } else {
                    *finished = true;
                }
            }
        }
    }

    fn advance_trace(&mut self, now: u64) {
        while let Some(o) = self.trace_next() {
            if o > now {
                break;
            }
            let idle = matches!(&self.server, Server::Trace { transit: None, .. })
                && self.queue.is_empty();
            if idle && self.log.is_none() {
                self.trace_skip(now);
                continue;
            }
            if let Some(l) = &mut self.log {
                l.opportunity(o / 1000, OPPORTUNITY_BYTES);
            }
            self.trace_use();
            let mut left = OPPORTUNITY_BYTES;
            while left > 0 {
                let need_new = matches!(&self.server, Server::Trace { transit: None, .. });
                if need_new {
                    let next = self.queue.dequeue(o, &mut self.dropped);
                    self.log_drops(o);
                    let Some(q) = next else { break };
                    let size = q.size();
                    if let Server::Trace { transit, .. } = &mut self.server {
                        *transit = Some((q, size));
                    }
                }
                let Server::Trace { transit, .. } = &mut self.server else {
                    unreachable!()
                };
                let Some((_, rem)) = transit.as_mut() else {
                    break;
                };
                let amount = left.min(*rem);
                *rem -= amount;
                left -= amount;
                if *rem == 0 {
                    let (q, _) = transit.take().expect("in transit");
                    self.depart(o, q);
                }
            }
        }
    }

    /// Start the next transmission at `t_ns` (ns since the link's origin).
    fn rate_start(&mut self, t_ns: u64) {
        let Server::Rate { origin, .. } = &self.server else {
            return;
        };
        let now_us = *origin + t_ns.div_ceil(1000);
        let next = self.queue.dequeue(now_us, &mut self.dropped);
        self.log_drops(now_us);
        let Some(q) = next else { return };
        if let Server::Rate {
            schedule, transit, ..
        } = &mut self.server
        {
            let fin = schedule
                .finish_ns(t_ns, q.size() as u64)
                .unwrap_or(u64::MAX);
            *transit = Some((q, fin));
        }
    }

    /// Departure time in µs of the caller's clock for a finish time in ns since the origin
    /// (rounded up: never early).
    fn rate_time(&self, fin_ns: u64) -> u64 {
        match &self.server {
            Server::Rate { origin, .. } if fin_ns != u64::MAX => origin + fin_ns.div_ceil(1000),
            _ => u64::MAX,
        }
    }

    fn advance_rate(&mut self, now: u64) {
        if self.log.is_some() {
            loop {
                let Server::Rate {
                    schedule,
                    origin,
                    logged_units,
                    next_unit_at,
                    ..
                } = &mut self.server
                else {
                    return;
                };
                match *next_unit_at {
                    Some(t) if t <= now => {
                        *logged_units += 1;
                        *next_unit_at = schedule
                            .finish(0, (*logged_units + 1) * OPPORTUNITY_BYTES as u64)
                            .map(|f| f + *origin);
                        if let Some(l) = &mut self.log {
                            l.opportunity(t / 1000, OPPORTUNITY_BYTES);
                        }
                    }
                    _ => break,
                }
            }
        }
        while let Server::Rate {
            transit: Some((_, fin)),
            ..
        } = &self.server
        {
            let fin = *fin;
            let t = self.rate_time(fin);
            if t > now {
                break;
            }
            let Server::Rate { transit, .. } = &mut self.server else {
                return;
            };
            let (q, _) = transit.take().expect("in transit");
            self.depart(t, q);
            self.rate_start(fin);
        }
    }
}

impl Stage for Link {
    fn arrive(&mut self, now: u64, mut pkt: Packet) {
        self.advance(now);
        let size = pkt.wire_size();
        self.stats.in_pkts += 1;
        self.stats.in_bytes += size as u64;
        if let Some(l) = &mut self.log {
            l.arrival(now / 1000, size);
        }
        let mut marked = false;
        if let Some(th) = self.ecn {
            let over = match th {
                EcnThreshold::Bytes(b) => self.queue.len_bytes() + size as u64 > b,
                EcnThreshold::Packets(p) => self.queue.len_packets() as u64 + 1 > p,
            };
            marked = over && pkt.mark_ce();
        }
        self.queue.enqueue(
            Queued {
                pkt,
                arrival: now,
                marked,
            },
            now,
            &mut self.dropped,
        );
        self.log_drops(now);
        if let Server::Rate {
            transit: None,
            origin,
            ..
        } = self.server
        {
            self.rate_start(now.saturating_sub(origin) * 1000);
        }
    }

    fn advance(&mut self, now: u64) {
        match self.server {
            Server::Trace { .. } => self.advance_trace(now),
            Server::Rate { .. } => self.advance_rate(now),
        }
    }

    fn next_event(&self) -> Option<u64> {
        match &self.server {
            Server::Trace {
                transit,
                repeat,
                ms,
                base,
                finished,
                ..
            } => {
                if transit.is_some() || !self.queue.is_empty() || self.log.is_some() {
                    self.trace_next()
                } else if !repeat && !finished {
                    // Wake up at the end of a `--once` trace to notice that it ended.
                    Some(base + ms[ms.len() - 1] * 1000)
                } else {
                    None
                }
            }
            Server::Rate {
                transit,
                next_unit_at,
                ..
            } => {
                let t = transit.as_ref().map(|(_, f)| self.rate_time(*f));
                match (t, self.log.is_some().then_some(*next_unit_at).flatten()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
        }
    }

    fn pop(&mut self, now: u64) -> Option<(u64, Packet)> {
        if self.out.front()?.0 > now {
            return None;
        }
        self.out.pop_front()
    }

    fn finished(&self) -> bool {
        matches!(self.server, Server::Trace { finished: true, .. })
    }

    fn stats(&self) -> StageStats {
        self.stats
    }

    fn flush(&mut self) {
        if let Some(l) = &mut self.log {
            l.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(link: &mut Link, now: u64) -> Vec<(u64, usize)> {
        link.advance(now);
        let mut v = Vec::new();
        while let Some((t, p)) = link.pop(now) {
            v.push((t, p.len()));
        }
        v
    }

    /// A hand-computed example. Trace: opportunities at 1, 2, 2, 5, 10 ms (period 10).
    /// Arrivals (IP sizes; +4 bytes each): at 0 ms a 1500 (1504) and a 996 (1000); at 0.5 ms a
    /// 496 (500); at 1.0 ms a 96 (100).
    /// - opp 1 ms: its 1504 bytes carry packet A (1504), which leaves at 1. D arrives at exactly
    ///   1 ms, so it cannot use that opportunity.
    /// - first opp at 2 ms: B (1000) and C (500) leave at 2; the remaining 4 bytes go to D.
    /// - second opp at 2 ms: D's last 96 bytes: D leaves at 2 too.
    ///
    /// Then a 1500 at 3 ms leaves at 5; two 1500s at 6 ms leave at 10 and 11 (the trace loops:
    /// 10 + 1).
    #[test]
    fn hand_computed_trace_departures() {
        let trace = Trace::from_ms("t", vec![1, 2, 2, 5, 10]).unwrap();
        let mut link = Link::new(&LinkConfig::trace(trace), 0, 1, None).unwrap();
        link.arrive(0, Packet::zeroed(1500));
        link.arrive(0, Packet::zeroed(996));
        link.arrive(500, Packet::zeroed(496));
        assert_eq!(drain(&mut link, 999), vec![]);
        link.arrive(1000, Packet::zeroed(96));
        assert_eq!(drain(&mut link, 1000), vec![(1000, 1500)]);
        assert_eq!(
            drain(&mut link, 2500),
            vec![(2000, 996), (2000, 496), (2000, 96)]
        );
        link.arrive(3000, Packet::zeroed(1500));
        link.arrive(6000, Packet::zeroed(1500));
        link.arrive(6000, Packet::zeroed(1500));
        assert_eq!(
            drain(&mut link, 20_000),
            vec![(5000, 1500), (10_000, 1500), (11_000, 1500)]
        );
        // Idle past several periods (opportunities at 12, 12, 15, 20, 21, 22, 22, 25, 30, 31, 32,
        // 32, 35, 40, ...), then a packet at 35.2 ms: its first opportunity is 40.
        link.arrive(35_200, Packet::zeroed(100));
        assert_eq!(link.next_event(), Some(40_000));
        assert_eq!(drain(&mut link, 50_000), vec![(40_000, 100)]);
    }

    #[test]
    fn a_packet_spans_opportunities_and_unused_bytes_are_lost() {
        // Opportunities every ms. 1000-byte wire packets: the first leaves at 1 with 504 bytes
        // of the opportunity then going to the second, which leaves at 2 (needs 496 more).
        let trace = Trace::from_ms("t", (1..=10).collect()).unwrap();
        let mut link = Link::new(&LinkConfig::trace(trace), 0, 1, None).unwrap();
        link.arrive(0, Packet::zeroed(996));
        link.arrive(0, Packet::zeroed(996));
        link.arrive(0, Packet::zeroed(996));
        assert_eq!(
            drain(&mut link, 5000),
            vec![(1000, 996), (2000, 996), (2000, 996)]
        );
        // Now the queue is empty: opportunities at 3, 4, 5 were wasted; a packet at 5.5 leaves at 6.
        link.arrive(5500, Packet::zeroed(1496));
        assert_eq!(drain(&mut link, 9000), vec![(6000, 1496)]);
    }

    #[test]
    fn once_stops_at_the_end() {
        let trace = Trace::from_ms("t", vec![1, 2]).unwrap();
        let cfg = LinkConfig {
            service: Service::Trace {
                trace,
                repeat: false,
            },
            ..LinkConfig::rate(1)
        };
        let mut link = Link::new(&cfg, 0, 1, None).unwrap();
        for _ in 0..3 {
            link.arrive(0, Packet::zeroed(1500));
        }
        assert_eq!(drain(&mut link, 10_000), vec![(1000, 1500), (2000, 1500)]);
        assert!(link.finished());
        assert_eq!(link.next_event(), None);
        // An idle `once` link still wakes up at the end of its trace.
        let trace = Trace::from_ms("t", vec![1, 2]).unwrap();
        let cfg = LinkConfig {
            service: Service::Trace {
                trace,
                repeat: false,
            },
            ..LinkConfig::rate(1)
        };
        let mut link = Link::new(&cfg, 5000, 1, None).unwrap();
        assert_eq!(link.next_event(), Some(7000));
        link.advance(7000);
        assert!(link.finished());
    }

    #[test]
    fn rate_link_serialises_bytes() {
        // 1.504 MB/s: a 1504-byte wire packet takes 1 ms.
        let mut link = Link::new(&LinkConfig::rate(1_504_000), 0, 1, None).unwrap();
        link.arrive(0, Packet::zeroed(1500));
        link.arrive(0, Packet::zeroed(1500));
        link.arrive(5000, Packet::zeroed(748)); // 752 bytes: 0.5 ms
        assert_eq!(
            drain(&mut link, 10_000),
            vec![(1000, 1500), (2000, 1500), (5500, 748)]
        );
    }

    #[test]
    fn rate_schedule_changes_mid_packet() {
        let s = Schedule::parse("0s:1504000Bps,1ms:752000Bps").unwrap();
        let cfg = LinkConfig {
            service: Service::Rate(s),
            ..LinkConfig::rate(1)
        };
        let mut link = Link::new(&cfg, 0, 1, None).unwrap();
        link.arrive(500, Packet::zeroed(1500));
        // 752 bytes in the first 0.5 ms, the other 752 at half rate: 1 ms more.
        assert_eq!(drain(&mut link, 10_000), vec![(2000, 1500)]);
    }

    #[test]
    fn ecn_marks_above_threshold_and_droptail_drops() {
        let mut cfg = LinkConfig::rate(1_504_000).with_queue(QueueConfig::droptail_packets(3));
        cfg.ecn = Some(EcnThreshold::Packets(1));
        let mut link = Link::new(&cfg, 0, 1, None).unwrap();
        let ect = || {
            let mut d = vec![0u8; 100];
            d[0] = 0x45;
            d[1] = 0x02;
            Packet::new(d)
        };
        for _ in 0..6 {
            link.arrive(0, ect());
        }
        // First starts transmission at once (queue empty again), next three queue (the 2nd and 3rd
        // of those see > 1 packet and are marked), the last two are dropped.
        let out: Vec<_> = std::iter::from_fn(|| {
            link.advance(1_000_000);
            link.pop(1_000_000)
        })
        .map(|(_, p)| p.ecn().unwrap())
        .collect();
        assert_eq!(out, vec![2, 2, 3, 3]);
        let s = link.stats();
        assert_eq!(s.dropped_pkts, 2);
        assert_eq!(s.ce_marked, 2);
    }

    #[test]
    fn log_has_mahimahi_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("up.log");
        let trace = Trace::from_ms("t.trace", vec![1, 2]).unwrap();
        let mut cfg = LinkConfig::trace(trace).with_queue(QueueConfig::droptail_packets(1));
        cfg.log = Some(path.clone());
        let hdr = LogHeader {
            direction: "Uplink".into(),
            source: "t.trace".into(),
            command_line: "ccp-emu link t.trace t.trace".into(),
            queue: cfg.queue.describe(),
            init_unix_ms: 1_700_000_000_000,
            base_ms: 0,
        };
        let mut link = Link::new(&cfg, 0, 1, Some(hdr)).unwrap();
        link.arrive(0, Packet::zeroed(1500));
        link.arrive(0, Packet::zeroed(1500));
        drain(&mut link, 2500);
        drop(link);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!("# mahimahi mm-link (Uplink) [t.trace] > {}", path.display())
        );
        assert_eq!(lines[2], "# queue: droptail [packets=1]");
        assert_eq!(lines[3], "# init timestamp: 1700000000000");
        assert_eq!(lines[4], "# base timestamp: 0");
        assert_eq!(
            &lines[5..],
            &[
                "0 + 1504",
                "0 + 1504",
                "0 d 1 1504",
                "1 # 1504",
                "1 - 1504 1",
                "2 # 1504"
            ]
        );
    }
}
