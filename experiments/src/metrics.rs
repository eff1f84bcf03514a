//! Metrics of one run, computed from a backend's [`RunData`]: per-flow rows and run-level
//! values, overall and per group (algorithm, class). Definitions (also in experiments/README.md):
//!
//! * `goodput_mbps`: bytes delivered after the warm-up, over the time from the end of the
//!   warm-up to the end of the run (sum over the flows; per flow: over its own life). Every
//!   byte counted arrives intact by the end; which side of the warm-up it falls on is decided
//!   by when it reached the receiver, in order or not (ccp-udp's and ccp-quic's receivers
//!   record it; other datapaths: the sender's count), so that a loss repaired across the
//!   warm-up does not put bytes that crossed the link before it into the window after it. A
//!   flow with no such record (a simulator workload flow) counts as delivering at an even
//!   pace over its life.
//! * `utilization`: bytes the bottleneck put on the wire after the warm-up (headers and
//!   retransmissions included) over what its capacity allows in that time (with a rate
//!   schedule, the time-weighted capacity of that window) (simulator; the emulator reads its
//!   link's counter when the warm-up ends and at the end; a backend that reports one count for
//!   the whole run has the warm-up's share taken in proportion to the capacity); where only
//!   goodput is known, goodput over capacity.
//! * `loss_rate`: packets the senders retransmitted (sim) or declared lost (udp) over packets
//!   sent.
//! * `rtt_pXX_ms`: RTT percentiles after the warm-up (per ACK where the backend measures them,
//!   the sender leaving out the samples before the warm-up; else over the time-series samples
//!   whose interval ends after it); `qdelay_pXX_ms`: queueing delay (per packet at the
//!   bottleneck in the simulator, of the packets that leave it after the warm-up; elsewhere RTT
//!   minus the base or minimum RTT); `owd_pXX_ms`: one-way delay, the propagation delay plus
//!   the queueing delay.
//! * `fwd_qdelay_pXX_ms`: the forward path's queueing delay measured from one-way delays
//!   (ccp-udp flows, on the udp and emu backends): each time-series sample carries the
//!   mean one-way delay in excess of the flow's smallest over the RTT samples since the
//!   previous one, so unlike `qdelay_pXX_ms` (from the RTT) it leaves out ACKs queued on the
//!   return path. Percentiles over the samples taken after the warm-up; absent where the
//!   datapath does not measure it (kernel flows, ccp-quic's on the quic backend, the
//!   simulator, whose `qdelay_pXX_ms` already is per packet at the bottleneck). The two hosts'
//!   clocks are not synchronised, so the reference is the flow's own smallest one-way delay:
//!   a flow that never sees the queue empty (it starts into a standing queue) reads low by the
//!   queue it never saw drain.
//! * `jain`: Jain's index over the flows' goodputs.
//! * `fct_mean_ms`, `fct_p99_ms`: flow completion time of sized flows that completed, overall
//!   and per size bucket (`:size=100KB-1MB`).
//! * `deadline_meet_rate`: flows with a deadline that completed within it, over flows with one.
//! * `satisfaction_mean`, `satisfaction_min`: goodput over the flow's `min_rate`.
//! * `convergence_s`: mean over flows of the time from the flow's start until its throughput
//!   (moving average over `metrics.convergence.window`) enters ±band of its fair share and stays
//!   there to the flow's end; the fair share at time t is the capacity at t (else the run's aggregate
//!   goodput) over the number of flows active at t. `converged_fraction`: flows that did.
//! * `ratio:alg=A/B` (or `class=`): the mean of group A's per-flow goodputs (each over the
//!   flow's own life after the warm-up) over group B's.
//! * `flows`: number of flows.
//!
//! Group variants carry `:alg=NAME` or `:class=NAME`. All of the above are over the forward
//! flows (senders to receiver); the flows with `reverse: true` (data on the downlink) get the
//! same figures with `:dir=reverse`, `utilization:dir=reverse` being their goodput over the
//! downlink's capacity. `utilization` stays the uplink's bytes on the wire, reverse flows'
//! ACKs included.

use crate::data::{FlowRow, RunData, Sample};
use crate::recipe::{GroupBy, MetricsSpec, Ratio};
use crate::stats::{hist_percentile, jain, percentiles, round_sig, sample_intervals};
use std::collections::BTreeMap;

/// `100KB`, `1MB`, `1.5MB`, `1448B`.
pub fn fmt_size(b: u64) -> String {
    for (unit, div) in [("GB", 1e9), ("MB", 1e6), ("KB", 1e3)] {
        let v = b as f64 / div;
        if v >= 1.0 {
            let r = round_sig(v, 3);
            return format!("{r}{unit}");
        }
    }
    format!("{b}B")
}

/// Labels of the FCT size buckets for `edges`.
pub fn bucket_labels(edges: &[u64]) -> Vec<String> {
    let mut out = vec![];
    let mut lo = 0u64;
    for &e in edges {
        out.push(format!(
            "{}-{}",
            if lo == 0 { "0".into() } else { fmt_size(lo) },
            fmt_size(e)
        ));
        lo = e;
    }
    out.push(format!("{}+", fmt_size(lo)));
    out
}

fn bucket_of(edges: &[u64], size: u64) -> usize {
    edges.iter().position(|&e| size <= e).unwrap_or(edges.len())
}

fn r6(v: f64) -> f64 {
    round_sig(v, 6)
}

struct PerFlow {
    goodput_bps: f64,
    delivered_in_window: f64,
    rtt: Vec<f64>,
    qdelay: Vec<f64>,
    owd: Vec<f64>,
    /// Forward queueing delay of the series samples after the warm-up, ms.
    fwd_qdelay: Vec<f64>,
    rtt_pct: Option<[f64; 3]>,
    convergence_s: Option<f64>,
    eligible_convergence: bool,
}

fn delivered_at(samples: &[&Sample], t: f64) -> u64 {
    samples
        .iter()
        .take_while(|s| s.t_s <= t)
        .last()
        .map(|s| s.delivered)
        .unwrap_or(0)
}

/// Bytes the receiver had by `t` (the last arrival sample at or before it).
fn arrived_by(arrivals: &[(f64, u64)], t: f64) -> u64 {
    arrivals
        .iter()
        .take_while(|(at, _)| *at <= t)
        .last()
        .map_or(0, |&(_, b)| b)
}

/// Moving average of goodput over a trailing window.
fn smooth(samples: &[&Sample], window_s: f64) -> Vec<(f64, f64)> {
    // A sample's goodput is of the interval since the previous sample (a flow's first: as long
    // as the gap to its second); the average weighs each by its interval, so that a sampler
    // that wakes at uneven times (ccp-quic's, every 11-15 ms) does not bias it.
    let dt = sample_intervals(&samples.iter().map(|s| s.t_s).collect::<Vec<_>>());
    let mut out = Vec::with_capacity(samples.len());
    let mut lo = 0;
    let (mut bits, mut span) = (0.0, 0.0);
    for (i, s) in samples.iter().enumerate() {
        bits += s.goodput_bps * dt[i];
        span += dt[i];
        while samples[lo].t_s <= s.t_s - window_s && lo < i {
            bits -= samples[lo].goodput_bps * dt[lo];
            span -= dt[lo];
            lo += 1;
        }
        out.push((
            s.t_s,
            if span > 0.0 {
                bits / span
            } else {
                s.goodput_bps
            },
        ));
    }
    out
}

fn convergence(
    d: &RunData,
    i: usize,
    samples: &[&Sample],
    spec: &MetricsSpec,
    aggregate_bps: f64,
) -> Option<f64> {
    let f = &d.flows[i];
    let w = spec.window_us as f64 / 1e6;
    let sm = smooth(samples, w);
    // A flow shares its direction's link with the flows of that direction.
    let active = |t: f64| {
        d.flows
            .iter()
            .filter(|g| g.reverse == f.reverse && g.start_s <= t && t < g.end_s)
            .count()
            .max(1) as f64
    };
    let total = |t: f64| {
        if f.reverse {
            d.down_capacity_bps.unwrap_or(aggregate_bps)
        } else {
            d.capacity_at(t).unwrap_or(aggregate_bps)
        }
    };
    if total(f.start_s) <= 0.0 {
        return None;
    }
    let considered: Vec<(f64, f64)> = sm
        .into_iter()
        .filter(|(t, _)| *t >= f.start_s + w - 1e-9 && *t <= f.end_s + 1e-9)
        .collect();
    if considered.is_empty() {
        return None;
    }
    let in_band = |(t, g): &(f64, f64)| {
        let share = total(*t - 1e-9) / active(*t - 1e-9);
        (g - share).abs() <= spec.band * share
    };
    if !in_band(considered.last()?) {
        return None;
    }
    let first_ok = match considered.iter().rposition(|x| !in_band(x)) {
        Some(k) => k + 1,
        None => 0,
    };
    Some((considered[first_ok].0 - f.start_s).max(0.0))
}

/// Bytes of `link_tx` (per-step `(end of step s, bytes)`, steps back to back from 0) sent after
/// `warm`. A step that straddles `warm` counts its share after it, as if sent in proportion to
/// the capacity (evenly when it is constant; a backend may report one step for the whole run):
/// `capacity(a, b)` is what the link could carry from `a` to `b`, in any unit.
fn link_bytes_after(link_tx: &[(f64, u64)], warm: f64, capacity: impl Fn(f64, f64) -> f64) -> f64 {
    let mut start = 0.0;
    let mut total = 0.0;
    for &(end, bytes) in link_tx {
        if end > warm + 1e-9 {
            let whole = capacity(start, end);
            let share = if whole > 0.0 {
                (capacity(warm.max(start), end) / whole).clamp(0.0, 1.0)
            } else {
                1.0
            };
            total += bytes as f64 * share;
        }
        start = end;
    }
    total
}

/// The bytes of a flow with no arrival record that count as delivered by `warm`: all of them if
/// it ended by then, else the warm-up's share of its life.
fn prorated_before(bytes: u64, start_s: f64, end_s: f64, warm: f64) -> u64 {
    if end_s <= warm {
        bytes
    } else {
        let share = ((warm - start_s) / (end_s - start_s)).clamp(0.0, 1.0);
        (bytes as f64 * share).round() as u64
    }
}

/// Per-flow rows and run-level metrics of `d`.
pub fn compute(d: &RunData, spec: &MetricsSpec) -> (BTreeMap<String, f64>, Vec<FlowRow>) {
    let warm = spec.warmup_us as f64 / 1e6;
    let mut by_flow: Vec<Vec<&Sample>> = vec![vec![]; d.flows.len()];
    for s in &d.series {
        if let Some(v) = by_flow.get_mut(s.flow) {
            v.push(s);
        }
    }
    let window_len = (d.end_s - warm).max(1e-9);
    let mut per: Vec<PerFlow> = vec![];
    for (i, f) in d.flows.iter().enumerate() {
        let samples = &by_flow[i];
        let from = f.start_s.max(warm);
        let before = if warm <= 0.0 || f.start_s >= warm {
            0
        } else if !f.arrivals.is_empty() {
            arrived_by(&f.arrivals, warm)
        } else if f.has_series {
            delivered_at(samples, warm)
        } else {
            // No record of when its bytes arrived (a simulator workload flow): delivered at an
            // even pace over its life, so the warm-up keeps its share.
            prorated_before(f.bytes_delivered, f.start_s, f.end_s, warm)
        };
        let delivered = f.bytes_delivered.saturating_sub(before) as f64;
        let life = f.end_s - from;
        let goodput_bps = if life > 0.0 {
            delivered * 8.0 / life
        } else {
            0.0
        };
        // Like the goodput, the delays are of the time after the warm-up: samples whose
        // interval ends after it.
        let rtt: Vec<f64> = samples
            .iter()
            .filter(|s| s.t_s > warm)
            .map(|s| s.rtt_ms)
            .filter(|r| *r > 0.0)
            .collect();
        let (qdelay, owd): (Vec<f64>, Vec<f64>) = match (f.base_rtt_ms, f.rtt_min_ms) {
            (Some(base), _) => rtt
                .iter()
                .map(|r| {
                    let q = (r - base).max(0.0);
                    (q, base / 2.0 + q)
                })
                .unzip(),
            (None, Some(min)) => (rtt.iter().map(|r| (r - min).max(0.0)).collect(), vec![]),
            _ => (vec![], vec![]),
        };
        // A sample covers the interval up to its time: those ending after the warm-up.
        let fwd_qdelay: Vec<f64> = samples
            .iter()
            .filter(|s| s.t_s > warm)
            .filter_map(|s| s.fwd_qdelay_ms)
            .collect();
        per.push(PerFlow {
            goodput_bps,
            delivered_in_window: delivered,
            rtt,
            qdelay,
            owd,
            fwd_qdelay,
            rtt_pct: f.rtt_pct_ms,
            convergence_s: None,
            eligible_convergence: f.has_series && f.group == "flows" && samples.len() >= 2,
        });
    }
    // Forward flows (senders to receiver, on the uplink) and reverse ones (on the downlink):
    // run-level and group metrics are the forward flows'; `:dir=reverse` the reverse flows'.
    let fwd: Vec<usize> = (0..d.flows.len())
        .filter(|&i| !d.flows[i].reverse)
        .collect();
    let rev: Vec<usize> = (0..d.flows.len()).filter(|&i| d.flows[i].reverse).collect();
    let aggregate = |idx: &[usize]| {
        idx.iter().map(|&i| per[i].delivered_in_window).sum::<f64>() * 8.0 / window_len
    };
    let aggregate_bps = aggregate(&fwd);
    let aggregate_rev_bps = aggregate(&rev);
    for i in 0..d.flows.len() {
        if per[i].eligible_convergence {
            let agg = if d.flows[i].reverse {
                aggregate_rev_bps
            } else {
                aggregate_bps
            };
            per[i].convergence_s = convergence(d, i, &by_flow[i], spec, agg);
        }
    }

    // Per-flow rows.
    let mut rows = vec![];
    for (i, (f, p)) in d.flows.iter().zip(&per).enumerate() {
        let rp = p
            .rtt_pct
            .map(|a| a.to_vec())
            .or_else(|| (!p.rtt.is_empty()).then(|| percentiles(&p.rtt, &[0.5, 0.95, 0.99])));
        let qp = if let (None, Some(min), Some(a)) = (f.base_rtt_ms, f.rtt_min_ms, f.rtt_pct_ms) {
            Some(vec![(a[0] - min).max(0.0), (a[1] - min).max(0.0)])
        } else {
            (!p.qdelay.is_empty()).then(|| percentiles(&p.qdelay, &[0.5, 0.95]))
        };
        let op = (!p.owd.is_empty()).then(|| percentiles(&p.owd, &[0.5, 0.95]));
        let goodput_mbps = p.goodput_bps / 1e6;
        rows.push(FlowRow {
            flow: i,
            algorithm: f.algorithm.clone(),
            requested: f.requested.clone(),
            class: f.class.clone(),
            group: f.group.clone(),
            size_bytes: f.size,
            start_s: r6(f.start_s),
            end_s: r6(f.end_s),
            completed: f.completed,
            fct_ms: f.fct_s.map(|x| r6(x * 1e3)),
            bytes_delivered: f.bytes_delivered,
            goodput_mbps: r6(goodput_mbps),
            rtt_p50_ms: rp.as_ref().map(|v| r6(v[0])),
            rtt_p95_ms: rp.as_ref().map(|v| r6(v[1])),
            rtt_p99_ms: rp.as_ref().map(|v| r6(v[2])),
            qdelay_p50_ms: qp.as_ref().map(|v| r6(v[0])),
            qdelay_p95_ms: qp.as_ref().map(|v| r6(v[1])),
            owd_p50_ms: op.as_ref().map(|v| r6(v[0])),
            owd_p95_ms: op.as_ref().map(|v| r6(v[1])),
            loss_rate: (f.packets_sent > 0)
                .then(|| r6(f.lost_packets as f64 / f.packets_sent as f64)),
            deadline_ms: f.deadline_s.map(|x| r6(x * 1e3)),
            deadline_met: f
                .deadline_s
                .map(|dl| f.completed && f.fct_s.is_some_and(|fct| fct <= dl + 1e-12)),
            min_rate_mbps: f.min_rate_bps.map(|x| r6(x / 1e6)),
            satisfaction: f
                .min_rate_bps
                .filter(|m| *m > 0.0)
                .map(|m| r6(p.goodput_bps / m)),
            convergence_s: p.convergence_s.map(r6),
            reverse: f.reverse,
        });
    }

    let mut m: BTreeMap<String, f64> = BTreeMap::new();
    group_metrics(&mut m, "", d, &per, &rows, &fwd, spec);
    m.insert("goodput_mbps".into(), aggregate_bps / 1e6);
    if !rev.is_empty() {
        group_metrics(&mut m, ":dir=reverse", d, &per, &rows, &rev, spec);
        if let Some(cap) = d.down_capacity_bps.filter(|c| *c > 0.0) {
            m.insert("utilization:dir=reverse".into(), aggregate_rev_bps / cap);
        }
    }
    if let Some(cap) = d.mean_capacity(warm, d.end_s).filter(|c| *c > 0.0) {
        let util = if d.link_tx.is_empty() {
            aggregate_bps / cap
        } else {
            let over = |a: f64, b: f64| match d.mean_capacity(a, b) {
                Some(c) if b > a => c * (b - a),
                _ => (b - a).max(0.0),
            };
            link_bytes_after(&d.link_tx, warm, over) * 8.0 / (cap * window_len)
        };
        m.insert("utilization".into(), util);
    }
    if !d.qdelay_hist.is_empty() {
        for (q, name) in [(0.5, "p50"), (0.95, "p95"), (0.99, "p99")] {
            if let Some(v) = hist_percentile(&d.qdelay_hist, q) {
                m.insert(format!("qdelay_{name}_ms"), v);
                if let Some(base) = d.owd_base_ms {
                    m.insert(format!("owd_{name}_ms"), base + v);
                }
            }
        }
    }

    // Per group. `per_flow_mean[(by, group)]`: the mean of the group's per-flow goodputs, bit/s
    // (what a ratio compares: a flow that starts late or ends early is not charged for the time
    // it did not exist, as it would be by the group's bytes over the whole window).
    let mut per_flow_mean: BTreeMap<(&str, String), f64> = BTreeMap::new();
    let mut ratio_specs: Vec<Ratio> = spec.ratios.clone();
    for by in [GroupBy::Algorithm, GroupBy::Class] {
        let key = |f: &crate::data::FlowData| match by {
            GroupBy::Algorithm => f.algorithm.clone(),
            GroupBy::Class => f.class.clone(),
        };
        let forward = || d.flows.iter().filter(|f| !f.reverse);
        if by == GroupBy::Class && forward().all(|f| f.class == f.algorithm) {
            continue;
        }
        let mut order: Vec<String> = vec![];
        for f in forward() {
            let k = key(f);
            if !order.contains(&k) {
                order.push(k);
            }
        }
        for g in &order {
            let idx: Vec<usize> = fwd
                .iter()
                .copied()
                .filter(|&i| key(&d.flows[i]) == *g)
                .collect();
            group_metrics(
                &mut m,
                &format!(":{}={g}", by.key()),
                d,
                &per,
                &rows,
                &idx,
                spec,
            );
            if !idx.is_empty() {
                let mean = idx.iter().map(|&i| per[i].goodput_bps).sum::<f64>() / idx.len() as f64;
                per_flow_mean.insert((by.key(), g.clone()), mean);
            }
        }
        let listed: Vec<String> = {
            let mut o: Vec<String> = vec![];
            for f in forward().filter(|f| f.group == "flows") {
                let k = key(f);
                if !o.contains(&k) {
                    o.push(k);
                }
            }
            o
        };
        if by == GroupBy::Algorithm && listed.len() == 2 && !spec.ratios.iter().any(|r| r.by == by)
        {
            ratio_specs.push(Ratio {
                by,
                numerator: listed[1].clone(),
                denominator: listed[0].clone(),
            });
        }
    }
    for r in &ratio_specs {
        let k = r.by.key();
        let get = |g: &str| per_flow_mean.get(&(k, g.to_string())).copied();
        if let (Some(a), Some(b)) = (get(&r.numerator), get(&r.denominator))
            && b > 0.0
        {
            m.insert(
                format!("ratio:{k}={}/{}", r.numerator, r.denominator),
                a / b,
            );
        }
    }
    for v in m.values_mut() {
        *v = r6(*v);
    }
    (m, rows)
}

/// Metrics of the flows `idx`, named with `suffix` (`""` for the whole run).
fn group_metrics(
    m: &mut BTreeMap<String, f64>,
    suffix: &str,
    d: &RunData,
    per: &[PerFlow],
    rows: &[FlowRow],
    idx: &[usize],
    spec: &MetricsSpec,
) {
    let name = |base: &str| format!("{base}{suffix}");
    m.insert(name("flows"), idx.len() as f64);
    if !suffix.is_empty() {
        let window_len = (d.end_s - spec.warmup_us as f64 / 1e6).max(1e-9);
        let bytes: f64 = idx.iter().map(|&i| per[i].delivered_in_window).sum();
        m.insert(name("goodput_mbps"), bytes * 8.0 / window_len / 1e6);
    }
    let pool = |f: &dyn Fn(&PerFlow) -> &Vec<f64>| -> Vec<f64> {
        idx.iter()
            .flat_map(|&i| f(&per[i]).iter().copied())
            .collect()
    };
    let rtt = pool(&|p| &p.rtt);
    if !rtt.is_empty() {
        let v = percentiles(&rtt, &[0.5, 0.95, 0.99]);
        m.insert(name("rtt_p50_ms"), v[0]);
        m.insert(name("rtt_p95_ms"), v[1]);
        m.insert(name("rtt_p99_ms"), v[2]);
    } else {
        // Only per-flow percentiles (udp without series): the mean of the flows'.
        let have: Vec<&FlowRow> = idx
            .iter()
            .map(|&i| &rows[i])
            .filter(|r| r.rtt_p50_ms.is_some())
            .collect();
        if !have.is_empty() {
            let n = have.len() as f64;
            m.insert(
                name("rtt_p50_ms"),
                have.iter().filter_map(|r| r.rtt_p50_ms).sum::<f64>() / n,
            );
            m.insert(
                name("rtt_p95_ms"),
                have.iter().filter_map(|r| r.rtt_p95_ms).sum::<f64>() / n,
            );
            m.insert(
                name("rtt_p99_ms"),
                have.iter().filter_map(|r| r.rtt_p99_ms).sum::<f64>() / n,
            );
        }
    }
    // Aggregate delay percentiles come from the bottleneck's histogram when there is one.
    if suffix.is_empty() && !d.qdelay_hist.is_empty() {
    } else {
        let q = pool(&|p| &p.qdelay);
        if !q.is_empty() {
            let v = percentiles(&q, &[0.5, 0.95, 0.99]);
            m.insert(name("qdelay_p50_ms"), v[0]);
            m.insert(name("qdelay_p95_ms"), v[1]);
            m.insert(name("qdelay_p99_ms"), v[2]);
        }
        let o = pool(&|p| &p.owd);
        if !o.is_empty() {
            let v = percentiles(&o, &[0.5, 0.95, 0.99]);
            m.insert(name("owd_p50_ms"), v[0]);
            m.insert(name("owd_p95_ms"), v[1]);
            m.insert(name("owd_p99_ms"), v[2]);
        }
    }
    let fwd = pool(&|p| &p.fwd_qdelay);
    if !fwd.is_empty() {
        let v = percentiles(&fwd, &[0.5, 0.95, 0.99]);
        m.insert(name("fwd_qdelay_p50_ms"), v[0]);
        m.insert(name("fwd_qdelay_p95_ms"), v[1]);
        m.insert(name("fwd_qdelay_p99_ms"), v[2]);
    }
    let sent: u64 = idx.iter().map(|&i| d.flows[i].packets_sent).sum();
    if sent > 0 {
        let lost: u64 = idx.iter().map(|&i| d.flows[i].lost_packets).sum();
        m.insert(name("loss_rate"), lost as f64 / sent as f64);
    }
    let listed: Vec<f64> = idx
        .iter()
        .filter(|&&i| d.flows[i].group == "flows")
        .map(|&i| per[i].goodput_bps)
        .collect();
    if listed.len() >= 2
        && let Some(j) = jain(&listed)
    {
        m.insert(name("jain"), j);
    }
    // FCT, overall and by size bucket.
    let fct: Vec<(u64, f64)> = idx
        .iter()
        .filter_map(|&i| {
            let f = &d.flows[i];
            Some((f.size?, f.fct_s? * 1e3))
        })
        .collect();
    if !fct.is_empty() {
        let all: Vec<f64> = fct.iter().map(|x| x.1).collect();
        m.insert(
            name("fct_mean_ms"),
            all.iter().sum::<f64>() / all.len() as f64,
        );
        m.insert(name("fct_p99_ms"), percentiles(&all, &[0.99])[0]);
        if suffix.is_empty() || !suffix.contains("size=") {
            let labels = bucket_labels(&spec.fct_buckets);
            for (b, label) in labels.iter().enumerate() {
                let v: Vec<f64> = fct
                    .iter()
                    .filter(|(s, _)| bucket_of(&spec.fct_buckets, *s) == b)
                    .map(|x| x.1)
                    .collect();
                if v.is_empty() {
                    continue;
                }
                let q = if suffix.is_empty() {
                    format!(":size={label}")
                } else {
                    format!("{suffix},size={label}")
                };
                m.insert(
                    format!("fct_mean_ms{q}"),
                    v.iter().sum::<f64>() / v.len() as f64,
                );
                m.insert(format!("fct_p99_ms{q}"), percentiles(&v, &[0.99])[0]);
            }
        }
    }
    let with_deadline: Vec<&FlowRow> = idx
        .iter()
        .map(|&i| &rows[i])
        .filter(|r| r.deadline_met.is_some())
        .collect();
    if !with_deadline.is_empty() {
        let met = with_deadline
            .iter()
            .filter(|r| r.deadline_met == Some(true))
            .count();
        m.insert(
            name("deadline_meet_rate"),
            met as f64 / with_deadline.len() as f64,
        );
    }
    let sat: Vec<f64> = idx.iter().filter_map(|&i| rows[i].satisfaction).collect();
    if !sat.is_empty() {
        m.insert(
            name("satisfaction_mean"),
            sat.iter().sum::<f64>() / sat.len() as f64,
        );
        m.insert(
            name("satisfaction_min"),
            sat.iter().copied().fold(f64::INFINITY, f64::min),
        );
    }
    let eligible: Vec<usize> = idx
        .iter()
        .copied()
        .filter(|&i| per[i].eligible_convergence)
        .collect();
    if !eligible.is_empty() {
        let conv: Vec<f64> = eligible
            .iter()
            .filter_map(|&i| per[i].convergence_s)
            .collect();
        m.insert(
            name("converged_fraction"),
            conv.len() as f64 / eligible.len() as f64,
        );
        if !conv.is_empty() {
            m.insert(
                name("convergence_s"),
                conv.iter().sum::<f64>() / conv.len() as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::FlowData;

    #[test]
    fn link_bytes_after_the_warm_up_prorate_a_straddling_step() {
        // Simulator-style steps of 0.1 s, 1,000 bytes each: only the steps after 0.5 s count.
        let steps: Vec<(f64, u64)> = (1..=10).map(|k| (k as f64 * 0.1, 1000)).collect();
        let even = |a: f64, b: f64| (b - a).max(0.0);
        assert!((link_bytes_after(&steps, 0.5, even) - 5000.0).abs() < 1e-6);
        // One step for a whole 30-s run, warm-up 10 s: two thirds of it.
        let whole = [(30.0, 3_000_000)];
        assert!((link_bytes_after(&whole, 10.0, even) - 2_000_000.0).abs() < 1e-3);
        assert_eq!(link_bytes_after(&whole, 0.0, even), 3_000_000.0);
        assert_eq!(link_bytes_after(&whole, 30.0, even), 0.0);
    }

    #[test]
    fn a_rate_schedule_gives_the_windows_time_weighted_capacity() {
        // 20 Mbit/s, 40 from 10 s, 10 from 15 s; a link that sent at capacity throughout, in
        // 1-s steps.
        let cap = |t: f64| match t {
            t if t < 10.0 => 20e6,
            t if t < 15.0 => 40e6,
            _ => 10e6,
        };
        let d = RunData {
            end_s: 20.0,
            capacity_bps: Some(20e6),
            capacity_steps: vec![(10.0, 40e6), (15.0, 10e6)],
            link_tx: (1..=20)
                .map(|k| (k as f64, (cap(k as f64 - 0.5) / 8.0) as u64))
                .collect(),
            ..RunData::default()
        };
        assert_eq!(d.capacity_at(9.99), Some(20e6));
        assert_eq!(d.capacity_at(10.0), Some(40e6));
        assert_eq!(d.capacity_at(19.0), Some(10e6));
        // From 5 s: (5·20 + 5·40 + 5·10) / 15.
        let mean = d.mean_capacity(5.0, 20.0).unwrap();
        assert!((mean - 350e6 / 15.0).abs() < 1.0, "{mean}");
        assert_eq!(d.mean_capacity(12.0, 12.0), Some(40e6));
        let spec = MetricsSpec {
            warmup_us: 5_000_000,
            ..MetricsSpec::default()
        };
        let (m, _) = compute(&d, &spec);
        assert!((m["utilization"] - 1.0).abs() < 1e-9, "{m:?}");
        // One step for the whole run: the share after the warm-up is taken in
        // proportion to the capacity, so a link at capacity still reads 1 (evenly: 0.96).
        let total: u64 = d.link_tx.iter().map(|x| x.1).sum();
        let one = RunData {
            link_tx: vec![(20.0, total)],
            ..d.clone()
        };
        let (m, _) = compute(&one, &spec);
        assert!((m["utilization"] - 1.0).abs() < 1e-6, "{m:?}");
    }

    fn flow(alg: &str, start: f64, end: f64, bytes: u64) -> FlowData {
        FlowData {
            algorithm: alg.into(),
            requested: alg.into(),
            class: alg.into(),
            group: "flows".into(),
            start_s: start,
            end_s: end,
            bytes_delivered: bytes,
            packets_sent: 100,
            lost_packets: 1,
            base_rtt_ms: Some(20.0),
            has_series: true,
            ..FlowData::default()
        }
    }

    /// Two flows on a 100 Mbit/s link; the second joins at 5 s and both settle at 50 Mbit/s.
    fn two_flows() -> RunData {
        let mut d = RunData {
            end_s: 10.0,
            capacity_bps: Some(100e6),
            owd_base_ms: Some(10.0),
            ..RunData::default()
        };
        d.flows.push(flow("reno", 0.0, 10.0, 0));
        d.flows.push(flow("cubic", 5.0, 10.0, 0));
        let mut delivered = [0u64; 2];
        for k in 1..=100 {
            let t = k as f64 * 0.1;
            for (f, done) in delivered.iter_mut().enumerate() {
                let g = match (f, t) {
                    (0, t) if t <= 5.0 => 100e6,
                    (1, t) if t <= 5.0 => continue,
                    // flow 1 ramps up over 2 s after it starts, then shares evenly
                    (1, t) if t < 7.0 => 50e6 * (t - 5.0) / 2.0,
                    (0, t) if t < 7.0 => 100e6 - 50e6 * (t - 5.0) / 2.0,
                    _ => 50e6,
                };
                *done += (g * 0.1 / 8.0) as u64;
                d.series.push(Sample {
                    t_s: t,
                    flow: f,
                    goodput_bps: g,
                    cwnd_bytes: 1e5,
                    rtt_ms: 20.0 + f as f64,
                    delivered: *done,
                    fwd_qdelay_ms: None,
                });
            }
        }
        d.flows[0].bytes_delivered = delivered[0];
        d.flows[1].bytes_delivered = delivered[1];
        d
    }

    #[test]
    fn the_warm_up_splits_bytes_by_when_they_reached_the_receiver() {
        // One flow on a 10 Mbit/s link for 10 s, warm-up 5 s: 1.25 MB/s cross the link. A
        // loss at 4.5 s holds the in-order count at 5.625 MB until its repair at 5.5 s, when
        // it jumps to what arrived behind the hole; the receiver had 6.25 MB at 5 s.
        let mut d = RunData {
            end_s: 10.0,
            capacity_bps: Some(10e6),
            ..RunData::default()
        };
        let total = 12_500_000u64;
        d.flows.push(flow("reno", 0.0, 10.0, total));
        for k in 1..=100 {
            let t = k as f64 * 0.1;
            let arrived = (1_250_000.0 * t) as u64;
            let in_order = if (4.5..5.5).contains(&t) {
                5_625_000
            } else {
                arrived
            };
            d.series.push(Sample {
                t_s: t,
                flow: 0,
                delivered: in_order,
                ..Sample::default()
            });
        }
        let spec = MetricsSpec {
            warmup_us: 5_000_000,
            ..MetricsSpec::default()
        };
        // By the in-order count the 5 s after the warm-up carried 11 Mbit/s on a 10 Mbit/s link.
        let (m, _) = compute(&d, &spec);
        assert!((m["goodput_mbps"] - 11.0).abs() < 1e-6, "{m:?}");
        // By the receiver's arrivals, what the link carried.
        d.flows[0].arrivals = (0..=100)
            .map(|k| (k as f64 * 0.1, (1_250_000.0 * k as f64 * 0.1) as u64))
            .collect();
        let (m, rows) = compute(&d, &spec);
        assert!((m["goodput_mbps"] - 10.0).abs() < 1e-6, "{m:?}");
        assert!((rows[0].goodput_mbps - 10.0).abs() < 1e-6, "{rows:?}");
    }

    #[test]
    fn the_moving_average_weighs_each_sample_by_the_time_it_covers() {
        // A flow delivering 6250 bytes per sample, sampled alternately 5 and 15 ms apart: 5 Mbit/s
        // over time, though its per-sample rates (10 and 3.33 Mbit/s) average 6.67.
        let mut t = 0.0;
        let v: Vec<Sample> = (0..100)
            .map(|k| {
                let dt = if k % 2 == 0 { 0.005 } else { 0.015 };
                t += dt;
                Sample {
                    t_s: t,
                    goodput_bps: 6250.0 * 8.0 / dt,
                    ..Sample::default()
                }
            })
            .collect();
        let refs: Vec<&Sample> = v.iter().collect();
        let sm = smooth(&refs, 0.2);
        for (t, g) in &sm[20..] {
            assert!((g - 5e6).abs() < 0.6e6, "{g} at {t}");
        }
        let (_, last) = sm[99];
        assert!((last - 5e6).abs() < 1.0, "{last}");
    }

    #[test]
    fn goodput_fairness_ratio_and_convergence() {
        let d = two_flows();
        let spec = MetricsSpec {
            window_us: 200_000,
            ..MetricsSpec::default()
        };
        let (m, rows) = compute(&d, &spec);
        assert!((m["goodput_mbps"] - 100.0).abs() < 0.5, "{m:?}");
        // flow 0: 79.75 Mbit/s on average over 10 s, flow 1: 40.5 over its 5 s.
        assert!((rows[0].goodput_mbps - 79.75).abs() < 0.1, "{rows:?}");
        assert!((rows[1].goodput_mbps - 40.5).abs() < 0.1, "{rows:?}");
        assert!(m["jain"] > 0.85 && m["jain"] < 0.95, "{m:?}");
        assert_eq!(m["flows"], 2.0);
        // The ratio compares the flows' own goodputs: the cubic flow is not charged for the 5 s
        // before it started (the group's bytes over the whole window would give 0.25).
        assert!(
            (m["ratio:alg=cubic/reno"] - 40.5 / 79.75).abs() < 1e-3,
            "{m:?}"
        );
        // Flow 1 reaches 37.5 Mbit/s (within 25 % of 50) at 6.5 s; smoothed over 0.2 s a
        // little later.
        let c1 = rows[1].convergence_s.unwrap();
        assert!((1.4..=1.8).contains(&c1), "{c1}");
        // Flow 0 is at its share (100) until 5 s, then must converge to 50 again.
        let c0 = rows[0].convergence_s.unwrap();
        assert!((6.0..=7.0).contains(&c0), "{c0}");
        assert_eq!(m["converged_fraction"], 1.0);
        assert_eq!(m["loss_rate"], 0.01);
        assert_eq!(m["rtt_p50_ms:alg=reno"], 20.0);
        assert_eq!(m["rtt_p50_ms:alg=cubic"], 21.0);
        assert!(m.contains_key("owd_p95_ms:alg=cubic"));
        // Neither flow measured one-way delays: no forward queueing figure at all.
        assert!(!m.keys().any(|k| k.starts_with("fwd_qdelay")), "{m:?}");
    }

    #[test]
    fn a_flow_with_no_arrival_record_keeps_the_warm_ups_share_of_its_bytes_out() {
        // Simulator workload flows: no series, no arrivals. Warm-up 1 s, run 2 s.
        let d = RunData {
            end_s: 2.0,
            flows: vec![
                // Ends in the warm-up: none of its bytes count.
                FlowData {
                    has_series: false,
                    group: "workload".into(),
                    ..flow("reno", 0.1, 0.5, 400_000)
                },
                // Straddles it: half its life, half its bytes.
                FlowData {
                    has_series: false,
                    group: "workload".into(),
                    ..flow("reno", 0.5, 1.5, 1_000_000)
                },
            ],
            ..RunData::default()
        };
        let spec = MetricsSpec {
            warmup_us: 1_000_000,
            ..MetricsSpec::default()
        };
        let (m, rows) = compute(&d, &spec);
        assert!((m["goodput_mbps"] - 4.0).abs() < 1e-9, "{m:?}");
        assert_eq!(rows[0].goodput_mbps, 0.0, "{rows:?}");
        assert!((rows[1].goodput_mbps - 8.0).abs() < 1e-9, "{rows:?}");
    }

    #[test]
    fn reverse_flows_stay_out_of_the_forward_metrics_and_have_their_own() {
        let spec = MetricsSpec {
            window_us: 200_000,
            ..MetricsSpec::default()
        };
        let d = two_flows();
        let (m0, rows0) = compute(&d, &spec);
        // A reverse cubic flow at 20 Mbit/s on a 50 Mbit/s downlink, RTT 30 ms.
        let mut r = d.clone();
        r.down_capacity_bps = Some(50e6);
        r.flows.push(FlowData {
            reverse: true,
            ..flow("cubic", 0.0, 10.0, 25_000_000)
        });
        for k in 1..=100u64 {
            r.series.push(Sample {
                t_s: k as f64 * 0.1,
                flow: 2,
                goodput_bps: 20e6,
                cwnd_bytes: 1e5,
                rtt_ms: 30.0,
                delivered: k * 250_000,
                fwd_qdelay_ms: None,
            });
        }
        let (m, rows) = compute(&r, &spec);
        // Every forward figure as without it (goodput, utilisation, Jain, the cubic group,
        // convergence against the uplink's flows), and nothing else but `:dir=reverse` ones.
        for (k, v) in &m0 {
            assert_eq!(m.get(k), Some(v), "{k}");
        }
        for k in m.keys().filter(|k| !m0.contains_key(*k)) {
            assert!(k.ends_with(":dir=reverse"), "{k}");
        }
        assert_eq!(rows[..2], rows0[..]);
        assert!(rows[2].reverse);
        assert_eq!(m["flows:dir=reverse"], 1.0);
        assert_eq!(m["goodput_mbps:dir=reverse"], 20.0);
        assert_eq!(m["utilization:dir=reverse"], 0.4);
        assert_eq!(m["rtt_p50_ms:dir=reverse"], 30.0);
        assert_eq!(m["flows:alg=cubic"], 1.0);
    }

    #[test]
    fn forward_queueing_comes_from_the_one_way_samples_after_the_warm_up() {
        // Two ccp-udp flows (minimum RTT known, no base RTT) and a kernel flow without
        // one-way figures. The RTT says 30 ms of queueing throughout (most of it ACKs queued
        // on the return path); the one-way samples say 40 ms of forward queueing during
        // the 2-s warm-up and 1-5 ms after it.
        let mut d = RunData {
            end_s: 10.0,
            ..RunData::default()
        };
        for (alg, class) in [("cubic", "fg"), ("vegas", "bg"), ("kernel:cubic", "fg")] {
            d.flows.push(FlowData {
                class: class.into(),
                base_rtt_ms: None,
                rtt_min_ms: Some(10.0),
                ..flow(alg, 0.0, 10.0, 1_000_000)
            });
        }
        for k in 1..=100 {
            let t = k as f64 * 0.1;
            for f in 0..3 {
                let fwd = match (f, t) {
                    (2, _) => None,
                    // One interval of the cubic flow without an RTT sample.
                    (0, t) if (t - 5.0).abs() < 1e-9 => None,
                    (_, t) if t <= 2.0 => Some(40.0),
                    (0, _) => Some(1.0 + (k % 2) as f64),
                    _ => Some(5.0),
                };
                d.series.push(Sample {
                    t_s: t,
                    flow: f,
                    goodput_bps: 1e6,
                    cwnd_bytes: 1e5,
                    rtt_ms: 40.0,
                    delivered: k * 10_000,
                    fwd_qdelay_ms: fwd,
                });
            }
        }
        let spec = MetricsSpec {
            warmup_us: 2_000_000,
            ..MetricsSpec::default()
        };
        let (m, _) = compute(&d, &spec);
        // The RTT-derived figure sees the return path too.
        assert_eq!(m["qdelay_p50_ms"], 30.0, "{m:?}");
        // Forward: cubic 1 or 2 ms, vegas 5 ms; nothing of the warm-up's 40 ms.
        assert_eq!(m["fwd_qdelay_p50_ms:alg=cubic"], 2.0, "{m:?}");
        assert_eq!(m["fwd_qdelay_p99_ms:alg=cubic"], 2.0, "{m:?}");
        assert_eq!(m["fwd_qdelay_p50_ms:alg=vegas"], 5.0, "{m:?}");
        assert_eq!(m["fwd_qdelay_p50_ms:class=bg"], 5.0, "{m:?}");
        // The class of cubic and the kernel flow: cubic's samples alone.
        assert_eq!(m["fwd_qdelay_p50_ms:class=fg"], 2.0, "{m:?}");
        // Pooled over the flows: 79 cubic samples (1 or 2) and 80 vegas ones (5).
        assert_eq!(m["fwd_qdelay_p50_ms"], 5.0, "{m:?}");
        assert_eq!(m["fwd_qdelay_p95_ms"], 5.0, "{m:?}");
        assert!(m["fwd_qdelay_p50_ms"] < m["qdelay_p50_ms"]);
        // The kernel flow has no one-way samples: no group figure for it.
        assert!(
            !m.contains_key("fwd_qdelay_p50_ms:alg=kernel:cubic"),
            "{m:?}"
        );
        assert!(m.contains_key("qdelay_p50_ms:alg=kernel:cubic"), "{m:?}");
        // Without the warm-up, the 40-ms samples count.
        let (m0, _) = compute(&d, &MetricsSpec::default());
        assert_eq!(m0["fwd_qdelay_p99_ms"], 40.0, "{m0:?}");
    }

    #[test]
    fn rtt_and_queueing_percentiles_are_of_the_time_after_the_warm_up() {
        // A flow whose sampled RTT is 80 ms during the 2-s warm-up (slow start's queue) and
        // 25 ms after it, over a 20-ms base RTT; and a ccp-udp flow whose sender already left
        // the warm-up out of its per-ACK percentiles, one whose sender counted no sample after
        // it.
        let mut d = RunData {
            end_s: 10.0,
            ..RunData::default()
        };
        d.flows.push(flow("cubic", 0.0, 10.0, 1_000_000));
        d.flows.push(FlowData {
            base_rtt_ms: None,
            rtt_min_ms: Some(20.0),
            rtt_pct_ms: Some([22.0, 24.0, 26.0]),
            ..flow("vegas", 0.0, 10.0, 1_000_000)
        });
        d.flows.push(FlowData {
            base_rtt_ms: None,
            rtt_min_ms: Some(20.0),
            has_series: false,
            ..flow("ledbat", 0.0, 1.0, 1_000)
        });
        for k in 1..=100 {
            let t = k as f64 * 0.1;
            d.series.push(Sample {
                t_s: t,
                flow: 0,
                rtt_ms: if t <= 2.0 { 80.0 } else { 25.0 },
                delivered: k * 10_000,
                ..Sample::default()
            });
        }
        let spec = MetricsSpec {
            warmup_us: 2_000_000,
            ..MetricsSpec::default()
        };
        let (m, rows) = compute(&d, &spec);
        assert_eq!(rows[0].rtt_p99_ms, Some(25.0), "{rows:?}");
        assert_eq!(rows[0].qdelay_p95_ms, Some(5.0), "{rows:?}");
        assert_eq!(m["rtt_p99_ms:alg=cubic"], 25.0, "{m:?}");
        assert_eq!(rows[1].rtt_p95_ms, Some(24.0), "{rows:?}");
        assert_eq!(rows[1].qdelay_p50_ms, Some(2.0), "{rows:?}");
        assert_eq!(rows[2].rtt_p50_ms, None, "{rows:?}");
        // Without the warm-up the slow start's 80 ms count.
        let (_, rows0) = compute(&d, &MetricsSpec::default());
        assert_eq!(rows0[0].rtt_p99_ms, Some(80.0), "{rows0:?}");
    }

    #[test]
    fn fct_buckets_deadlines_and_satisfaction() {
        let mut d = RunData {
            end_s: 10.0,
            ..RunData::default()
        };
        for (i, (size, fct)) in [
            (50_000u64, 0.01),
            (500_000, 0.05),
            (5_000_000, 0.5),
            (50_000_000, 2.0),
        ]
        .into_iter()
        .enumerate()
        {
            d.flows.push(FlowData {
                algorithm: "reno".into(),
                class: "reno".into(),
                group: "w0".into(),
                size: Some(size),
                start_s: i as f64,
                end_s: i as f64 + fct,
                fct_s: Some(fct),
                completed: true,
                bytes_delivered: size,
                deadline_s: Some(0.1),
                min_rate_bps: Some(10e6),
                ..FlowData::default()
            });
        }
        let (m, rows) = compute(&d, &MetricsSpec::default());
        assert_eq!(m["fct_mean_ms:size=0-100KB"], 10.0);
        assert_eq!(m["fct_mean_ms:size=100KB-1MB"], 50.0);
        assert_eq!(m["fct_mean_ms:size=10MB+"], 2000.0);
        assert_eq!(m["deadline_meet_rate"], 0.5);
        assert_eq!(rows[0].deadline_met, Some(true));
        assert_eq!(rows[3].deadline_met, Some(false));
        // 50 KB in 10 ms = 40 Mbit/s = 4 × the 10 Mbit/s requirement.
        assert_eq!(rows[0].satisfaction, Some(4.0));
        assert_eq!(m["satisfaction_min"], 4.0);
        assert_eq!(m["satisfaction_mean"], (4.0 + 8.0 + 8.0 + 20.0) / 4.0);
        assert_eq!(
            bucket_labels(&[100_000, 1_000_000]),
            vec!["0-100KB", "100KB-1MB", "1MB+"]
        );
    }
}
