//! Writing a [`SimResult`] into an output directory (the formats are documented in the crate
//! documentation), and the per-class summary statistics of `summary.json`.

use crate::error::SimError;
use crate::runner::SimResult;
use crate::stats::FlowRecord;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Files [`write_outputs`] creates.
pub const FILES: &[&str] = &[
    "scenario.yaml",
    "summary.json",
    "flows.csv",
    "flow_series.csv",
    "queues.csv",
    "queue_series.csv",
    "qdelay_hist.csv",
];

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// CSV-quote a field if it needs it.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Per-class flow statistics (class "" is written as "-").
pub fn class_summary(flows: &[FlowRecord]) -> serde_json::Value {
    let mut by_class: BTreeMap<&str, Vec<&FlowRecord>> = BTreeMap::new();
    for f in flows {
        by_class.entry(f.class.as_str()).or_default().push(f);
    }
    let mut out = serde_json::Map::new();
    for (class, fs) in by_class {
        let mut fct: Vec<f64> = fs
            .iter()
            .filter_map(|f| f.fct_ns)
            .map(|x| x as f64)
            .collect();
        fct.sort_by(f64::total_cmp);
        let mut slow: Vec<f64> = fs
            .iter()
            .filter_map(|f| match (f.fct_ns, f.ideal_fct_ns) {
                (Some(a), Some(b)) if b > 0 => Some((a as f64 / b as f64).max(1.0)),
                _ => None,
            })
            .collect();
        slow.sort_by(f64::total_cmp);
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let name = if class.is_empty() { "-" } else { class };
        out.insert(
            name.to_string(),
            json!({
                "flows": fs.len(),
                "completed": fct.len(),
                "bytes_delivered": fs.iter().map(|f| f.bytes_delivered).sum::<u64>(),
                "fct_mean_ns": mean(&fct).round() as u64,
                "fct_p50_ns": percentile(&fct, 0.5) as u64,
                "fct_p99_ns": percentile(&fct, 0.99) as u64,
                "slowdown_mean": (mean(&slow) * 1000.0).round() / 1000.0,
                "slowdown_p50": (percentile(&slow, 0.5) * 1000.0).round() / 1000.0,
                "slowdown_p99": (percentile(&slow, 0.99) * 1000.0).round() / 1000.0,
            }),
        );
    }
    serde_json::Value::Object(out)
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), SimError> {
    let p = dir.join(name);
    std::fs::write(&p, text).map_err(|e| SimError::io(&p, e))
}

/// Write every output file of `r` into `dir` (created if needed).
pub fn write_outputs(r: &SimResult, dir: &Path) -> Result<(), SimError> {
    std::fs::create_dir_all(dir).map_err(|e| SimError::io(dir, e))?;
    write(dir, "scenario.yaml", &r.scenario.to_yaml())?;

    let completed = r.flows.iter().filter(|f| f.completed).count();
    let summary = json!({
        "name": r.scenario.name,
        "seed": r.seed,
        "duration_ns": r.scenario.duration.0,
        "end_ns": r.end_ns,
        "counters": r.counters,
        "agent": r.agent,
        "flows": {"total": r.flows.len(), "completed": completed},
        "classes": class_summary(&r.flows),
    });
    let mut s = serde_json::to_string_pretty(&summary).unwrap_or_default();
    s.push('\n');
    write(dir, "summary.json", &s)?;
    if let Some(bill) = &r.bill {
        let mut b = serde_json::to_string_pretty(bill).unwrap_or_default();
        b.push('\n');
        write(dir, "bill.json", &b)?;
    }

    let mut s = String::from(
        "flow,src,dst,alg,class,group,size_bytes,start_ns,end_ns,fct_ns,ideal_fct_ns,base_rtt_ns,bytes_delivered,bytes_sent,packets_sent,retransmits,timeouts,completed\n",
    );
    for f in &r.flows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            f.flow,
            field(&f.src),
            field(&f.dst),
            field(&f.alg),
            field(&f.class),
            field(&f.group),
            opt(f.size),
            f.start_ns,
            f.end_ns,
            opt(f.fct_ns),
            opt(f.ideal_fct_ns),
            f.base_rtt_ns,
            f.bytes_delivered,
            f.bytes_sent,
            f.packets_sent,
            f.retransmits,
            f.timeouts,
            f.completed
        );
    }
    write(dir, "flows.csv", &s)?;

    let mut s = String::from(
        "time_ns,flow,delivered_bytes,goodput_bps,cwnd_bytes,rate_Bps,srtt_us,rtt_us,inflight_bytes,retransmits\n",
    );
    for x in &r.flow_series {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{}",
            x.time_ns,
            x.flow,
            x.delivered_bytes,
            x.goodput_bps,
            x.cwnd_bytes,
            x.rate_bytes_per_sec,
            x.srtt_us,
            x.rtt_us,
            x.inflight_bytes,
            x.retransmits
        );
    }
    write(dir, "flow_series.csv", &s)?;

    let mut s = String::from(
        "queue,rate_Bps,buffer,enqueued_packets,enqueued_bytes,tx_packets,tx_bytes,drops,aqm_drops,wire_losses,ecn_marks,max_bytes,max_packets,qdelay_count,qdelay_mean_ns,qdelay_p50_ns,qdelay_p99_ns,qdelay_max_ns\n",
    );
    let mut h = String::from("queue,lo_ns,hi_ns,count\n");
    for q in &r.queues {
        let c = &q.counters;
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            field(&q.name),
            q.rate,
            field(&q.buffer),
            c.enqueued_packets,
            c.enqueued_bytes,
            c.tx_packets,
            c.tx_bytes,
            c.drops,
            c.aqm_drops,
            c.wire_losses,
            c.ecn_marks,
            c.max_bytes,
            c.max_packets,
            q.qdelay.count(),
            q.qdelay.mean(),
            q.qdelay.quantile(0.5),
            q.qdelay.quantile(0.99),
            q.qdelay.max()
        );
        for (lo, hi, n) in q.qdelay.buckets() {
            let _ = writeln!(h, "{},{lo},{hi},{n}", field(&q.name));
        }
    }
    write(dir, "queues.csv", &s)?;
    write(dir, "qdelay_hist.csv", &h)?;

    let mut s = String::from("time_ns,queue,bytes,packets,tx_bytes,drops,marks\n");
    for x in &r.queue_series {
        let name = r
            .port_names
            .get(x.queue as usize)
            .map(String::as_str)
            .unwrap_or("");
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{}",
            x.time_ns,
            field(name),
            x.bytes,
            x.packets,
            x.tx_bytes,
            x.drops,
            x.marks
        );
    }
    write(dir, "queue_series.csv", &s)?;
    Ok(())
}
