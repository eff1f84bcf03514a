//! The bottleneck's packet queues, with mahimahi's semantics: `infinite`, `droptail`,
//! `drophead` (limits in packets and/or bytes, sizes counting the 4-byte TUN header), `codel`
//! (RFC 8289, drops at dequeue) and `pie` (RFC 8033 as in mahimahi: drop probability updated
//! every 30 ms, early drop at enqueue). Queue arguments are parsed strictly: an argument the
//! queue does not take is an error, where mahimahi ignores it.

use crate::error::{EmuError, Result};
use crate::packet::Packet;
use crate::trace::OPPORTUNITY_BYTES;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

/// A packet waiting in a queue.
#[derive(Debug)]
pub struct Queued {
    /// The packet.
    pub pkt: Packet,
    /// When it arrived at the link, µs.
    pub arrival: u64,
    /// Whether the link marked it CE on arrival.
    pub marked: bool,
}

impl Queued {
    /// Size as accounted (IP length + 4).
    pub fn size(&self) -> u32 {
        self.pkt.wire_size()
    }
}

/// Queue disciplines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// Unbounded FIFO.
    Infinite,
    /// FIFO that drops arriving packets over the limit.
    DropTail,
    /// FIFO that drops from the head to make room.
    DropHead,
    /// CoDel AQM.
    Codel,
    /// PIE AQM.
    Pie,
}

impl QueueKind {
    /// Parse a queue name as mahimahi spells it.
    pub fn parse(name: &str) -> Result<QueueKind> {
        Ok(match name {
            "infinite" => QueueKind::Infinite,
            "droptail" => QueueKind::DropTail,
            "drophead" => QueueKind::DropHead,
            "codel" => QueueKind::Codel,
            "pie" => QueueKind::Pie,
            other => {
                return Err(EmuError::Queue {
                    queue: other.into(),
                    args: String::new(),
                    message:
                        "unknown queue type; expected infinite, droptail, drophead, codel or pie"
                            .into(),
                });
            }
        })
    }

    /// The name as mahimahi spells it.
    pub fn name(self) -> &'static str {
        match self {
            QueueKind::Infinite => "infinite",
            QueueKind::DropTail => "droptail",
            QueueKind::DropHead => "drophead",
            QueueKind::Codel => "codel",
            QueueKind::Pie => "pie",
        }
    }

    fn allowed(self) -> &'static [&'static str] {
        match self {
            QueueKind::Infinite => &[],
            QueueKind::DropTail | QueueKind::DropHead => &["packets", "bytes"],
            QueueKind::Codel => &["packets", "bytes", "target", "interval"],
            QueueKind::Pie => &["packets", "bytes", "qdelay_ref", "max_burst"],
        }
    }
}

/// A queue type and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// The discipline.
    pub kind: QueueKind,
    /// Packet limit (0 = none).
    pub packets: u32,
    /// Byte limit (0 = none), counting 4 bytes of TUN header per packet.
    pub bytes: u32,
    /// CoDel target, ms.
    pub target_ms: u32,
    /// CoDel interval, ms.
    pub interval_ms: u32,
    /// PIE reference queueing delay, ms.
    pub qdelay_ref_ms: u32,
    /// PIE maximum burst allowance, ms.
    pub max_burst_ms: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            kind: QueueKind::Infinite,
            packets: 0,
            bytes: 0,
            target_ms: 0,
            interval_ms: 0,
            qdelay_ref_ms: 0,
            max_burst_ms: 0,
        }
    }
}

impl QueueConfig {
    /// A drop-tail queue of `packets` packets.
    pub fn droptail_packets(packets: u32) -> QueueConfig {
        QueueConfig {
            kind: QueueKind::DropTail,
            packets,
            ..Default::default()
        }
    }

    /// Parse mahimahi's `--uplink-queue=TYPE --uplink-queue-args="packets=N, bytes=N, ..."`.
    pub fn parse(kind: &str, args: &str) -> Result<QueueConfig> {
        let k = QueueKind::parse(kind)?;
        let err = |message: String| EmuError::Queue {
            queue: kind.into(),
            args: args.into(),
            message,
        };
        let mut c = QueueConfig {
            kind: k,
            ..Default::default()
        };
        let mut seen: Vec<&str> = Vec::new();
        for item in args.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| err(format!("{item:?} is not NAME=NUMBER")))?;
            let (name, value) = (name.trim(), value.trim());
            if !k.allowed().contains(&name) {
                let takes = if k.allowed().is_empty() {
                    "takes no arguments".to_string()
                } else {
                    format!("takes {}", k.allowed().join(", "))
                };
                return Err(err(format!(
                    "unknown argument {name:?}: a {} queue {takes}",
                    k.name()
                )));
            }
            if seen.contains(&name) {
                return Err(err(format!("{name} is given twice")));
            }
            seen.push(name);
            let v: u32 = value.parse().map_err(|_| {
                err(format!(
                    "{name}={value:?}: expected a whole number{}",
                    if name == "packets" || name == "bytes" {
                        ""
                    } else {
                        " of milliseconds"
                    }
                ))
            })?;
            match name {
                "packets" => c.packets = v,
                "bytes" => c.bytes = v,
                "target" => c.target_ms = v,
                "interval" => c.interval_ms = v,
                "qdelay_ref" => c.qdelay_ref_ms = v,
                "max_burst" => c.max_burst_ms = v,
                _ => unreachable!("checked against the allowed list"),
            }
        }
        c.validate().map_err(|e| match e {
            EmuError::Config(m) => err(m),
            other => other,
        })?;
        Ok(c)
    }

    /// Check the arguments the discipline needs.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(EmuError::Config(m.into()));
        if self.kind != QueueKind::Infinite && self.packets == 0 && self.bytes == 0 {
            return bad("a dropping queue needs a limit: packets=N and/or bytes=N");
        }
        if self.kind == QueueKind::Codel && (self.target_ms == 0 || self.interval_ms == 0) {
            return bad("codel needs target=MS and interval=MS");
        }
        if self.kind == QueueKind::Pie && (self.qdelay_ref_ms == 0 || self.max_burst_ms == 0) {
            return bad("pie needs qdelay_ref=MS and max_burst=MS");
        }
        Ok(())
    }

    /// How mahimahi describes the queue in its logs, e.g. `droptail [bytes=30000, packets=20]`.
    pub fn describe(&self) -> String {
        if self.kind == QueueKind::Infinite {
            return "infinite".into();
        }
        let mut parts = Vec::new();
        if self.bytes > 0 {
            parts.push(format!("bytes={}", self.bytes));
        }
        if self.packets > 0 {
            parts.push(format!("packets={}", self.packets));
        }
        match self.kind {
            QueueKind::Codel => {
                parts.push(format!("target={}", self.target_ms));
                parts.push(format!("interval={}", self.interval_ms));
            }
            QueueKind::Pie => {
                parts.push(format!("qdelay_ref={}", self.qdelay_ref_ms));
                parts.push(format!("max_burst={}", self.max_burst_ms));
            }
            _ => {}
        }
        format!("{} [{}]", self.kind.name(), parts.join(", "))
    }
}

#[derive(Debug, Default)]
struct Codel {
    first_above: u64,
    drop_next: u64,
    count: u32,
    lastcount: u32,
    dropping: bool,
}

const DQ_INVALID: u32 = u32::MAX;

#[derive(Debug)]
struct Pie {
    drop_prob: f64,
    burst_allowance: u32,
    qdelay_old: u32,
    current_qdelay: u32,
    dq_count: u32,
    dq_tstamp: u32,
    avg_dq_rate: u32,
    last_update: u64,
}

/// A running queue.
#[derive(Debug)]
pub struct PacketQueue {
    cfg: QueueConfig,
    fifo: VecDeque<Queued>,
    bytes: u64,
    codel: Codel,
    pie: Pie,
    rng: StdRng,
}

impl PacketQueue {
    /// A queue of the given configuration; `seed` drives PIE's random drops; `now` (µs) starts
    /// PIE's update clock.
    pub fn new(cfg: QueueConfig, seed: u64, now: u64) -> PacketQueue {
        PacketQueue {
            cfg,
            fifo: VecDeque::new(),
            bytes: 0,
            codel: Codel::default(),
            pie: Pie {
                drop_prob: 0.0,
                burst_allowance: 0,
                qdelay_old: 0,
                current_qdelay: 0,
                dq_count: DQ_INVALID,
                dq_tstamp: 0,
                avg_dq_rate: 0,
                last_update: now / 1000,
            },
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &QueueConfig {
        &self.cfg
    }

    /// Packets queued.
    pub fn len_packets(&self) -> usize {
        self.fifo.len()
    }

    /// Bytes queued (with 4 bytes of header per packet).
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    fn fits(&self, bytes: u64, packets: usize) -> bool {
        (self.cfg.bytes == 0 || bytes <= self.cfg.bytes as u64)
            && (self.cfg.packets == 0 || packets <= self.cfg.packets as usize)
    }

    fn accept(&mut self, q: Queued) {
        self.bytes += q.size() as u64;
        self.fifo.push_back(q);
    }

    fn pop(&mut self) -> Option<Queued> {
        let q = self.fifo.pop_front()?;
        self.bytes -= q.size() as u64;
        Some(q)
    }

    /// Offer a packet at `now` µs; packets the queue drops go to `dropped`.
    pub fn enqueue(&mut self, q: Queued, now: u64, dropped: &mut Vec<Queued>) {
        match self.cfg.kind {
            QueueKind::Infinite => self.accept(q),
            QueueKind::DropTail | QueueKind::Codel => {
                if self.fits(self.bytes + q.size() as u64, self.fifo.len() + 1) {
                    self.accept(q);
                } else {
                    dropped.push(q);
                }
            }
            QueueKind::DropHead => {
                self.accept(q);
                while !self.fits(self.bytes, self.fifo.len()) {
                    if let Some(h) = self.pop() {
                        dropped.push(h);
                    }
                }
            }
            QueueKind::Pie => {
                self.pie_update(now);
                if !self.fits(self.bytes + q.size() as u64, self.fifo.len() + 1)
                    || self.pie_drop_early()
                {
                    dropped.push(q);
                } else {
                    self.accept(q);
                }
            }
        }
    }

    /// Take the next packet to transmit at `now` µs; AQM drops go to `dropped`.
    pub fn dequeue(&mut self, now: u64, dropped: &mut Vec<Queued>) -> Option<Queued> {
        match self.cfg.kind {
            QueueKind::Codel => self.codel_dequeue(now, dropped),
            QueueKind::Pie => {
                let q = self.pop()?;
                self.pie_dequeued(&q, now);
                Some(q)
            }
            _ => self.pop(),
        }
    }

    // --- CoDel (RFC 8289), times in µs.

    fn codel_do(&mut self, now: u64) -> (Option<Queued>, bool) {
        let Some(q) = self.pop() else {
            self.codel.first_above = 0;
            return (None, false);
        };
        let target = self.cfg.target_ms as u64 * 1000;
        let interval = self.cfg.interval_ms as u64 * 1000;
        let sojourn = now.saturating_sub(q.arrival);
        let mut ok = false;
        if sojourn < target || self.bytes <= OPPORTUNITY_BYTES as u64 {
            self.codel.first_above = 0;
        } else if self.codel.first_above == 0 {
            self.codel.first_above = now + interval;
        } else if now >= self.codel.first_above {
            ok = true;
        }
        (Some(q), ok)
    }

    fn control_law(&self, t: u64, count: u32) -> u64 {
        let interval = self.cfg.interval_ms as f64 * 1000.0;
        t + (interval / (count.max(1) as f64).sqrt()) as u64
    }

    fn codel_dequeue(&mut self, now: u64, dropped: &mut Vec<Queued>) -> Option<Queued> {
        let interval = self.cfg.interval_ms as u64 * 1000;
        let (mut p, ok) = self.codel_do(now);
        p.as_ref()?;
        if self.codel.dropping {
            if !ok {
                self.codel.dropping = false;
            }
            while self.codel.dropping && now >= self.codel.drop_next {
                if let Some(d) = p.take() {
                    dropped.push(d);
                }
                self.codel.count += 1;
                let (np, ok) = self.codel_do(now);
                p = np;
                if p.is_none() || !ok {
                    self.codel.dropping = false;
                } else {
                    self.codel.drop_next = self.control_law(self.codel.drop_next, self.codel.count);
                }
            }
        } else if ok {
            if let Some(d) = p.take() {
                dropped.push(d);
            }
            let (np, _) = self.codel_do(now);
            p = np;
            self.codel.dropping = true;
            let delta = self.codel.count.wrapping_sub(self.codel.lastcount);
            self.codel.count =
                if delta > 1 && now.saturating_sub(self.codel.drop_next) < 16 * interval {
                    delta
                } else {
                    1
                };
            self.codel.drop_next = self.control_law(now, self.codel.count);
            self.codel.lastcount = self.codel.count;
        }
        p
    }

    // --- PIE, as mahimahi implements it: ms arithmetic, 30 ms updates, 16 KB dq threshold.

    const PIE_T_UPDATE: u64 = 30;
    const PIE_DQ_THRESHOLD: u32 = 16384;

    fn pie_drop_early(&mut self) -> bool {
        let p = &self.pie;
        if p.burst_allowance > 0 {
            return false;
        }
        if p.qdelay_old < self.cfg.qdelay_ref_ms / 2 && p.drop_prob < 0.2 {
            return false;
        }
        if self.bytes < 2 * OPPORTUNITY_BYTES as u64 {
            return false;
        }
        let prob = self.pie.drop_prob;
        self.rng.r#gen::<f64>() < prob
    }

    fn pie_dequeued(&mut self, q: &Queued, now_us: u64) {
        let now = (now_us / 1000) as u32;
        let bytes = self.bytes.min(u32::MAX as u64) as u32;
        let p = &mut self.pie;
        if bytes >= Self::PIE_DQ_THRESHOLD && p.dq_count == DQ_INVALID {
            p.dq_tstamp = now;
            p.dq_count = 0;
        }
        if p.dq_count != DQ_INVALID {
            p.dq_count += q.size();
            if p.dq_count > Self::PIE_DQ_THRESHOLD {
                let dtime = now.wrapping_sub(p.dq_tstamp);
                if let Some(sample) = p.dq_count.checked_div(dtime) {
                    p.avg_dq_rate = if p.avg_dq_rate == 0 {
                        sample
                    } else {
                        (p.avg_dq_rate - (p.avg_dq_rate >> 3)) + (sample >> 3)
                    };
                    if bytes < Self::PIE_DQ_THRESHOLD {
                        p.dq_count = DQ_INVALID;
                    } else {
                        p.dq_count = 0;
                        p.dq_tstamp = now;
                    }
                    p.burst_allowance = p.burst_allowance.saturating_sub(dtime);
                }
            }
        }
        self.pie_update(now_us);
    }

    fn pie_update(&mut self, now_us: u64) {
        let now = now_us / 1000;
        let bytes = self.bytes.min(u32::MAX as u64) as u32;
        let qref = self.cfg.qdelay_ref_ms;
        let max_burst = self.cfg.max_burst_ms;
        let p = &mut self.pie;
        while now.saturating_sub(p.last_update) > Self::PIE_T_UPDATE {
            let mut update_prob = true;
            p.qdelay_old = p.current_qdelay;
            p.current_qdelay = bytes.checked_div(p.avg_dq_rate).unwrap_or(0);
            if p.current_qdelay == 0 && bytes != 0 {
                update_prob = false;
            }
            let mut delta = 0.125 * (p.current_qdelay as f64 - qref as f64)
                + 1.25 * (p.current_qdelay as f64 - p.qdelay_old as f64);
            if p.drop_prob < 0.01 {
                delta /= 128.0;
            } else if p.drop_prob < 0.1 {
                delta /= 32.0;
            } else {
                delta /= 16.0;
            }
            p.drop_prob += delta;
            if p.drop_prob < 0.0 {
                p.drop_prob = 0.0;
            } else if p.drop_prob > 1.0 {
                p.drop_prob = 1.0;
                update_prob = false;
            }
            if p.current_qdelay == 0 && p.qdelay_old == 0 && update_prob {
                p.drop_prob *= 0.98;
            }
            p.burst_allowance = p.burst_allowance.saturating_sub(Self::PIE_T_UPDATE as u32);
            p.last_update += Self::PIE_T_UPDATE;
            if p.drop_prob == 0.0
                && p.current_qdelay < qref / 2
                && p.qdelay_old < qref / 2
                && p.avg_dq_rate > 0
            {
                p.dq_count = DQ_INVALID;
                p.avg_dq_rate = 0;
                p.burst_allowance = max_burst;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(len: usize, arrival: u64) -> Queued {
        Queued {
            pkt: Packet::zeroed(len),
            arrival,
            marked: false,
        }
    }

    #[test]
    fn parses_mahimahi_arguments() {
        let c = QueueConfig::parse("droptail", "packets=100, bytes=150000").unwrap();
        assert_eq!((c.packets, c.bytes), (100, 150000));
        assert_eq!(c.describe(), "droptail [bytes=150000, packets=100]");
        let c = QueueConfig::parse("codel", "packets=500,target=5,interval=100").unwrap();
        assert_eq!((c.target_ms, c.interval_ms), (5, 100));
        let c = QueueConfig::parse("pie", "bytes=100000, qdelay_ref=20, max_burst=100").unwrap();
        assert_eq!(c.qdelay_ref_ms, 20);
        assert_eq!(
            QueueConfig::parse("infinite", "").unwrap().describe(),
            "infinite"
        );
    }

    #[test]
    fn unknown_or_missing_arguments_are_errors() {
        let e = QueueConfig::parse("droptail", "packets=10, target=5")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown argument \"target\"") && e.contains("packets, bytes"),
            "{e}"
        );
        let e = QueueConfig::parse("droptail", "pakets=10")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown argument \"pakets\""), "{e}");
        assert!(QueueConfig::parse("droptail", "").is_err());
        assert!(QueueConfig::parse("droptail", "packets=x").is_err());
        assert!(QueueConfig::parse("droptail", "packets=1,packets=2").is_err());
        assert!(QueueConfig::parse("codel", "packets=10").is_err());
        assert!(QueueConfig::parse("pie", "packets=10, qdelay_ref=5").is_err());
        assert!(QueueConfig::parse("infinite", "packets=10").is_err());
        let e = QueueConfig::parse("fifo", "").unwrap_err().to_string();
        assert!(e.contains("unknown queue type"), "{e}");
    }

    #[test]
    fn droptail_of_n_packets_drops_the_rest() {
        let mut queue = PacketQueue::new(QueueConfig::droptail_packets(3), 1, 0);
        let mut dropped = Vec::new();
        for i in 0..5 {
            queue.enqueue(q(100 + i, 0), 0, &mut dropped);
        }
        assert_eq!(queue.len_packets(), 3);
        assert_eq!(dropped.len(), 2);
        // The arrivals that found the queue full are the ones dropped.
        assert_eq!(dropped[0].pkt.len(), 103);
        assert_eq!(dropped[1].pkt.len(), 104);
        assert_eq!(queue.dequeue(0, &mut dropped).unwrap().pkt.len(), 100);
    }

    #[test]
    fn byte_limits_count_the_tun_header() {
        let c = QueueConfig::parse("droptail", "bytes=3008").unwrap();
        let mut queue = PacketQueue::new(c, 1, 0);
        let mut dropped = Vec::new();
        queue.enqueue(q(1500, 0), 0, &mut dropped);
        queue.enqueue(q(1500, 0), 0, &mut dropped);
        queue.enqueue(q(1, 0), 0, &mut dropped);
        assert_eq!((queue.len_packets(), dropped.len()), (2, 1));
    }

    #[test]
    fn drophead_drops_the_oldest() {
        let c = QueueConfig::parse("drophead", "packets=2").unwrap();
        let mut queue = PacketQueue::new(c, 1, 0);
        let mut dropped = Vec::new();
        for i in 0..4 {
            queue.enqueue(q(100 + i, 0), 0, &mut dropped);
        }
        assert_eq!(
            dropped.iter().map(|d| d.pkt.len()).collect::<Vec<_>>(),
            vec![100, 101]
        );
        assert_eq!(queue.dequeue(0, &mut dropped).unwrap().pkt.len(), 102);
    }

    #[test]
    fn codel_drops_under_persistent_delay() {
        let c = QueueConfig::parse("codel", "packets=1000, target=5, interval=100").unwrap();
        let mut queue = PacketQueue::new(c, 1, 0);
        let mut dropped = Vec::new();
        // 1000 packets queued at t=0, drained one per ms: sojourn grows far beyond 5 ms.
        for _ in 0..1000 {
            queue.enqueue(q(1500, 0), 0, &mut dropped);
        }
        let mut delivered = 0;
        for ms in 1..=2000u64 {
            if queue.dequeue(ms * 1000, &mut dropped).is_some() {
                delivered += 1;
            }
        }
        assert!(!dropped.is_empty(), "codel never dropped");
        assert_eq!(delivered + dropped.len(), 1000);
    }

    #[test]
    fn pie_drops_early_under_load() {
        let c = QueueConfig::parse("pie", "packets=10000, qdelay_ref=5, max_burst=10").unwrap();
        let mut queue = PacketQueue::new(c, 7, 0);
        let mut dropped = Vec::new();
        // Arrivals at twice the drain rate for 5 s.
        for ms in 0..5000u64 {
            let now = ms * 1000;
            queue.enqueue(q(1500, now), now, &mut dropped);
            queue.enqueue(q(1500, now), now, &mut dropped);
            queue.dequeue(now + 500, &mut dropped);
        }
        assert!(dropped.len() > 100, "pie dropped only {}", dropped.len());
    }
}
