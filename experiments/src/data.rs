//! What a backend hands back after one run, in one shape for every backend ([`RunData`]), and
//! the records the runner writes from it ([`RunRecord`], [`FlowRow`]) and the report reads
//! back. Units: seconds, bytes, bit/s and milliseconds, as the field names say.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One flow as a backend saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowData {
    /// Algorithm name (registry name, without parameters).
    pub algorithm: String,
    /// What the flow asked the agent for (`cubic:beta=0.8`).
    pub requested: String,
    pub class: String,
    /// `flows` for a listed flow, `w<i>` for a flow of generator i.
    pub group: String,
    pub size: Option<u64>,
    pub start_s: f64,
    pub end_s: f64,
    /// Completion time of a sized flow that completed.
    pub fct_s: Option<f64>,
    pub completed: bool,
    pub bytes_delivered: u64,
    pub packets_sent: u64,
    /// Packets retransmitted (sim) or declared lost (udp).
    pub lost_packets: u64,
    /// Propagation RTT, if the backend knows it.
    pub base_rtt_ms: Option<f64>,
    /// Minimum RTT seen (udp).
    pub rtt_min_ms: Option<f64>,
    /// RTT percentiles (p50, p95, p99) if the backend measured them on every ACK; otherwise
    /// they come from the time series.
    pub rtt_pct_ms: Option<[f64; 3]>,
    pub deadline_s: Option<f64>,
    /// Minimum rate requirement, bit/s.
    pub min_rate_bps: Option<f64>,
    /// The flow has a time series.
    pub has_series: bool,
    /// The flow runs in the reverse direction (`reverse: true`: receiver side to sender side,
    /// its data on the downlink).
    pub reverse: bool,
    /// Bytes the receiver had by each time (s since the run's start, bytes), in order or
    /// beyond a hole, where the datapath's receiver records it (ccp-udp, ccp-quic); empty
    /// elsewhere.
    pub arrivals: Vec<(f64, u64)>,
}

/// One time-series sample of one flow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub t_s: f64,
    /// Index into [`RunData::flows`].
    pub flow: usize,
    pub goodput_bps: f64,
    pub cwnd_bytes: f64,
    /// Latest RTT sample or smoothed RTT (0: none yet).
    pub rtt_ms: f64,
    /// Bytes delivered so far, as the sender knows them: acknowledged beyond a hole too where
    /// the datapath tracks it (ccp-udp's `received_bytes`), else in order (which lags during a
    /// loss repair and then jumps).
    pub delivered: u64,
    /// Forward path's queueing delay, ms: the mean one-way delay in excess of the flow's
    /// smallest over the RTT samples since the previous sample (ccp-udp's receive timestamps;
    /// None where the datapath does not measure it or no RTT sample came in the interval).
    pub fwd_qdelay_ms: Option<f64>,
}

/// Everything one run produced, backend-independent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunData {
    /// End of the run, s.
    pub end_s: f64,
    /// Bottleneck capacity (uplink), bit/s, if known; with a rate schedule, the rate before
    /// its first step.
    pub capacity_bps: Option<f64>,
    /// The uplink's rate schedule: `(from t_s, bit/s)` in time order (empty: the capacity is
    /// constant). Before the first entry the capacity is `capacity_bps`.
    pub capacity_steps: Vec<(f64, f64)>,
    /// The downlink's capacity (receiver to senders: reverse flows' data), bit/s, if known;
    /// with a rate schedule, its mean over the run.
    pub down_capacity_bps: Option<f64>,
    /// One-way propagation delay of the data path, ms, if known.
    pub owd_base_ms: Option<f64>,
    pub flows: Vec<FlowData>,
    pub series: Vec<Sample>,
    /// Per-packet queueing delay at the bottleneck, buckets `(lo_ms, hi_ms, count)` (sim).
    pub qdelay_hist: Vec<(f64, f64, u64)>,
    /// Bytes the bottleneck transmitted per step, `(t_s at the end of the step, bytes)` (sim).
    pub link_tx: Vec<(f64, u64)>,
    /// Anything a reader should know.
    pub notes: Vec<String>,
}

impl RunData {
    /// The capacity in force at `t` s, bit/s.
    pub fn capacity_at(&self, t: f64) -> Option<f64> {
        let step = self
            .capacity_steps
            .iter()
            .take_while(|(from, _)| *from <= t)
            .last();
        step.map(|s| s.1).or(self.capacity_bps)
    }

    /// The time-weighted mean capacity from `from` to `to` s, bit/s (the capacity at `from`
    /// when the span is empty).
    pub fn mean_capacity(&self, from: f64, to: f64) -> Option<f64> {
        let first = self.capacity_bps?;
        if to <= from || self.capacity_steps.is_empty() {
            return self.capacity_at(from);
        }
        let mut segs = vec![(f64::NEG_INFINITY, first)];
        segs.extend(self.capacity_steps.iter().copied());
        let mut sum = 0.0;
        for (i, &(start, rate)) in segs.iter().enumerate() {
            let end = segs.get(i + 1).map_or(f64::INFINITY, |n| n.0);
            let (lo, hi) = (start.max(from), end.min(to));
            if hi > lo {
                sum += rate * (hi - lo);
            }
        }
        Some(sum / (to - from))
    }
}

/// One flow's row in `flows.csv` and `run.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowRow {
    pub flow: usize,
    pub algorithm: String,
    pub requested: String,
    pub class: String,
    pub group: String,
    pub size_bytes: Option<u64>,
    pub start_s: f64,
    pub end_s: f64,
    pub completed: bool,
    pub fct_ms: Option<f64>,
    pub bytes_delivered: u64,
    pub goodput_mbps: f64,
    pub rtt_p50_ms: Option<f64>,
    pub rtt_p95_ms: Option<f64>,
    pub rtt_p99_ms: Option<f64>,
    pub qdelay_p50_ms: Option<f64>,
    pub qdelay_p95_ms: Option<f64>,
    pub owd_p50_ms: Option<f64>,
    pub owd_p95_ms: Option<f64>,
    pub loss_rate: Option<f64>,
    pub deadline_ms: Option<f64>,
    pub deadline_met: Option<bool>,
    pub min_rate_mbps: Option<f64>,
    pub satisfaction: Option<f64>,
    pub convergence_s: Option<f64>,
    /// A reverse flow (`reverse: true`); absent from `run.json` for forward flows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
}

/// Column order of `flows.csv`.
pub const FLOW_COLUMNS: &[&str] = &[
    "flow",
    "algorithm",
    "requested",
    "class",
    "group",
    "size_bytes",
    "start_s",
    "end_s",
    "completed",
    "fct_ms",
    "bytes_delivered",
    "goodput_mbps",
    "rtt_p50_ms",
    "rtt_p95_ms",
    "rtt_p99_ms",
    "qdelay_p50_ms",
    "qdelay_p95_ms",
    "owd_p50_ms",
    "owd_p95_ms",
    "loss_rate",
    "deadline_ms",
    "deadline_met",
    "min_rate_mbps",
    "satisfaction",
    "convergence_s",
];

/// `run.json`: one finished run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// `part/point/r<k>`.
    pub id: String,
    pub part: String,
    pub point: String,
    pub point_label: String,
    /// Sweep axis values of the point.
    pub axes: BTreeMap<String, String>,
    pub run: u32,
    pub seed: u64,
    pub backend: String,
    pub end_s: f64,
    pub capacity_mbps: Option<f64>,
    /// Run-level metrics (see the crate documentation for their definitions).
    pub metrics: BTreeMap<String, f64>,
    pub flows: Vec<FlowRow>,
    pub notes: Vec<String>,
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map(|x| x.to_string()).unwrap_or_default()
}

/// CSV-quote a field if needed.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl FlowRow {
    /// The row as CSV (in [`FLOW_COLUMNS`] order).
    pub fn csv(&self) -> String {
        [
            self.flow.to_string(),
            csv_field(&self.algorithm),
            csv_field(&self.requested),
            csv_field(&self.class),
            csv_field(&self.group),
            opt(&self.size_bytes),
            self.start_s.to_string(),
            self.end_s.to_string(),
            self.completed.to_string(),
            opt(&self.fct_ms),
            self.bytes_delivered.to_string(),
            self.goodput_mbps.to_string(),
            opt(&self.rtt_p50_ms),
            opt(&self.rtt_p95_ms),
            opt(&self.rtt_p99_ms),
            opt(&self.qdelay_p50_ms),
            opt(&self.qdelay_p95_ms),
            opt(&self.owd_p50_ms),
            opt(&self.owd_p95_ms),
            opt(&self.loss_rate),
            opt(&self.deadline_ms),
            opt(&self.deadline_met),
            opt(&self.min_rate_mbps),
            opt(&self.satisfaction),
            opt(&self.convergence_s),
        ]
        .join(",")
    }
}

/// Header of `series.csv`.
pub const SERIES_HEADER: &str = "t_s,flow,goodput_mbps,cwnd_kb,rtt_ms";

/// `series.csv` text.
pub fn series_csv(samples: &[Sample]) -> String {
    let mut s = String::with_capacity(samples.len() * 32 + 64);
    s.push_str(SERIES_HEADER);
    s.push('\n');
    for x in samples {
        s.push_str(&format!(
            "{:.4},{},{:.3},{:.2},{:.3}\n",
            x.t_s,
            x.flow,
            x.goodput_bps / 1e6,
            x.cwnd_bytes / 1e3,
            x.rtt_ms
        ));
    }
    s
}

/// A row of `series.csv` read back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeriesRow {
    pub t_s: f64,
    pub flow: usize,
    pub goodput_mbps: f64,
    pub cwnd_kb: f64,
    pub rtt_ms: f64,
}

/// Parse `series.csv` text (rows that do not parse are skipped).
pub fn parse_series(text: &str) -> Vec<SeriesRow> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut it = l.split(',');
            Some(SeriesRow {
                t_s: it.next()?.parse().ok()?,
                flow: it.next()?.parse().ok()?,
                goodput_mbps: it.next()?.parse().ok()?,
                cwnd_kb: it.next()?.parse().ok()?,
                rtt_ms: it.next()?.parse().ok()?,
            })
        })
        .collect()
}

/// `delay_hist.csv` text: per-packet one-way delay at the bottleneck (`owd`) and queueing delay
/// (`qdelay`), `kind,lo_ms,hi_ms,count`.
pub fn delay_hist_csv(d: &RunData) -> Option<String> {
    if d.qdelay_hist.is_empty() {
        return None;
    }
    let base = d.owd_base_ms.unwrap_or(0.0);
    let mut s = String::from("kind,lo_ms,hi_ms,count\n");
    for (lo, hi, c) in &d.qdelay_hist {
        s.push_str(&format!("qdelay,{lo:.6},{hi:.6},{c}\n"));
    }
    for (lo, hi, c) in &d.qdelay_hist {
        s.push_str(&format!("owd,{:.6},{:.6},{c}\n", lo + base, hi + base));
    }
    Some(s)
}

/// Parse `delay_hist.csv` into the buckets of `kind`.
pub fn parse_delay_hist(text: &str, kind: &str) -> Vec<(f64, f64, u64)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut it = l.split(',');
            if it.next()? != kind {
                return None;
            }
            Some((
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
            ))
        })
        .collect()
}
