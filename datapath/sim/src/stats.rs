//! What a run measures: the log-linear histogram used for per-packet queueing delays, and the
//! records and samples the simulator collects (per flow, per queue, over time). `crate::output`
//! writes them to files.

use serde::Serialize;

/// Sub-buckets per power of two (relative bucket width 1/16).
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;

/// A histogram of non-negative integers (ns) with buckets 1/16 of a power of two wide: exact
/// below 16, within 6.25 % above. Also keeps the exact count, sum, minimum and maximum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

fn index(v: u64) -> usize {
    if v < SUB {
        v as usize
    } else {
        let k = 63 - v.leading_zeros();
        let sub = (v >> (k - SUB_BITS)) & (SUB - 1);
        ((u64::from(k - SUB_BITS + 1)) * SUB + sub) as usize
    }
}

fn lower(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        i
    } else {
        let k = i / SUB + u64::from(SUB_BITS) - 1;
        let sub = i % SUB;
        (SUB + sub) << (k - u64::from(SUB_BITS))
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one value.
    pub fn record(&mut self, v: u64) {
        let i = index(v);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
        self.sum += u128::from(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Exact mean (0 if empty).
    pub fn mean(&self) -> u64 {
        if self.n == 0 {
            0
        } else {
            (self.sum / u128::from(self.n)) as u64
        }
    }

    /// Exact maximum (0 if empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Exact minimum (0 if empty).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The `q`-quantile (0 ≤ q ≤ 1): the upper edge of the bucket holding it, capped at the
    /// maximum (0 if empty).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return (lower(i + 1) - 1).min(self.max).max(self.min);
            }
        }
        self.max
    }

    /// Add every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        if other.n == 0 {
            return;
        }
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        if self.n == 0 || other.min < self.min {
            self.min = other.min;
        }
        self.max = self.max.max(other.max);
        self.n += other.n;
        self.sum += other.sum;
    }

    /// Non-empty buckets as `(low, high, count)`, low inclusive, high exclusive.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, &c)| (lower(i), lower(i + 1), c))
    }
}

/// One flow, at the end of the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowRecord {
    pub flow: u32,
    pub src: String,
    pub dst: String,
    /// The name its Create message asked for ("" : the agent's default).
    pub alg: String,
    pub class: String,
    /// Generator and round it came from (`flows`, `w0`, `w1.r3`, ...).
    pub group: String,
    /// Bytes to send (none: long-lived).
    pub size: Option<u64>,
    pub start_ns: u64,
    /// When the last byte arrived, or when the flow stopped, or the end of the run.
    pub end_ns: u64,
    /// Flow completion time (sized flows that completed).
    pub fct_ns: Option<u64>,
    /// One-way propagation delay, plus the flow's bytes on the wire at the slowest link of its
    /// path, plus the last packet's serialization at every other link.
    pub ideal_fct_ns: Option<u64>,
    /// Propagation delay there and back along the flow's path.
    pub base_rtt_ns: u64,
    /// Payload bytes delivered in order.
    pub bytes_delivered: u64,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    pub packets_sent: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    pub completed: bool,
}

/// One flow at one sampling instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowSample {
    pub time_ns: u64,
    pub flow: u32,
    /// Payload bytes delivered in order so far.
    pub delivered_bytes: u64,
    /// In-order goodput over the step ending now, bit/s.
    pub goodput_bps: u64,
    pub cwnd_bytes: u64,
    /// Pacing rate, bytes/s (0: unpaced).
    pub rate_bytes_per_sec: u64,
    pub srtt_us: u64,
    /// Latest RTT sample.
    pub rtt_us: u64,
    pub inflight_bytes: u64,
    /// Retransmissions so far.
    pub retransmits: u64,
}

/// Counters of one output queue (and its link) over the whole run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueCounters {
    pub enqueued_packets: u64,
    pub enqueued_bytes: u64,
    /// Bytes put on the wire (for trace links: bytes of delivery opportunities used).
    pub tx_bytes: u64,
    pub tx_packets: u64,
    /// Drop-tail drops (queue full).
    pub drops: u64,
    /// RED drops.
    pub aqm_drops: u64,
    /// Random losses on the wire.
    pub wire_losses: u64,
    pub ecn_marks: u64,
    pub max_bytes: u64,
    pub max_packets: u64,
}

/// One queue at the end of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueRecord {
    /// `from->to`.
    pub name: String,
    /// Line rate, bytes/s (trace links: the trace's mean rate).
    pub rate: u64,
    /// Capacity as configured ("" : unlimited).
    pub buffer: String,
    pub counters: QueueCounters,
    /// Per-packet queueing delay, ns (enqueue to start of transmission; for trace links, to
    /// departure).
    pub qdelay: Histogram,
}

/// One queue at one sampling instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueSample {
    pub time_ns: u64,
    pub queue: u32,
    pub bytes: u64,
    pub packets: u64,
    /// Bytes put on the wire during the step ending now.
    pub tx_bytes: u64,
    /// Drops (all kinds) during the step.
    pub drops: u64,
    /// CE marks during the step.
    pub marks: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_once() {
        let mut last_hi = 0;
        for i in 0..300 {
            let (lo, hi) = (lower(i), lower(i + 1));
            assert_eq!(
                lo,
                last_hi,
                "bucket {i} starts where {} ended",
                i.max(1) - 1
            );
            assert!(hi > lo);
            assert_eq!(index(lo), i);
            assert_eq!(index(hi - 1), i);
            last_hi = hi;
        }
        assert_eq!(index(u64::MAX), index(u64::MAX - 1));
    }

    #[test]
    fn quantiles_are_within_a_bucket() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        assert_eq!(
            (h.count(), h.max(), h.min(), h.mean()),
            (1000, 1_000_000, 1000, 500_500)
        );
        let p50 = h.quantile(0.5);
        assert!((500_000..=540_000).contains(&p50), "{p50}");
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert_eq!(h.buckets().map(|b| b.2).sum::<u64>(), 1000);
    }

    #[test]
    fn merged_histograms_hold_both() {
        let (mut a, mut b, mut both) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in 1..=500u64 {
            a.record(v * 7);
            both.record(v * 7);
        }
        for v in 1..=300u64 {
            b.record(v * 1000 + 3);
            both.record(v * 1000 + 3);
        }
        let mut m = Histogram::new();
        m.merge(&a);
        m.merge(&Histogram::new());
        m.merge(&b);
        assert_eq!(m, both);
    }
}
