//! Kernel TCP flows on the emulator's testbed: a flow whose algorithm is `kernel:NAME` runs as
//! a Linux TCP connection from the sender host to the receiver host with `TCP_CONGESTION` =
//! NAME (ccp-exp runs as root and creates the sockets inside the hosts' namespaces with
//! [`ccp_emu::tcp`]). It starts at the flow's start, sends for its duration (or to the end of
//! the run) or its size, and lands in [`RunData`] like the agent's flows: bytes the receiving
//! application read, sampled every `udp.trace_interval` into the time series, with the
//! sender's smoothed RTT and window from `TCP_INFO`. A flow written `kernel:NAME:group=G` is
//! also a member of JCCE group G: its receiver publishes what the application read every 10 ms,
//! as the rate over the last 40 ms (`jcce::publisher`), through a JCCE client in the receiver
//! host, so vivace-distributed flows of that group count it in their `T_avg`. A reverse flow
//! (`reverse: true`) runs the other way, from the receiver host to the (first) sender host, its
//! data on the downlink.

use super::BackendError;
use crate::data::{FlowData, RunData, Sample};
use crate::recipe::{Recipe, kernel_cc, kernel_group};
use ccp_algorithms::aggregator::jcce::Client;
use ccp_algorithms::aggregator::jcce::publisher::{PublisherReport, ReceiverPublisher};
use ccp_emu::Testbed;
use ccp_emu::sys::{set_congestion, tcp_info};
use ccp_emu::tcp::{connect, listen, send, sink};
use std::net::{SocketAddrV4, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The receiver's TCP port of kernel flow k is `BASE_PORT + k`.
const BASE_PORT: u16 = 5001;

/// Fails unless this kernel has every congestion control the recipe's kernel flows ask for
/// (checked on a loopback socket before the testbed is built; modules are system-wide).
pub(crate) fn check_available(r: &Recipe) -> Result<(), BackendError> {
    for f in &r.flows {
        if let Some(cc) = kernel_cc(&f.algorithm) {
            let l = TcpListener::bind("127.0.0.1:0")
                .map_err(|e| BackendError::Process(format!("kernel flow {cc}: {e}")))?;
            set_congestion(&l, cc).map_err(|e| {
                BackendError::Process(format!(
                    "flow {}: the kernel has no TCP congestion control {cc:?} ({e}); see /proc/sys/net/ipv4/tcp_available_congestion_control, or load its module (modprobe tcp_{cc})",
                    f.algorithm
                ))
            })?;
        }
    }
    Ok(())
}

/// One kernel flow as measured: its [`FlowData`] and its samples (flow index 0).
pub(crate) type Measured = (FlowData, Vec<Sample>);

/// Run kernel flow `k` of the run (recipe flow entry `i`, starting `start_us` after `t0`) on
/// `tb`, from the first sender host to the receiver (the other way for a reverse flow).
/// Returns when the flow is over, with what
/// its receiver published to its JCCE group through `jcce` (when it has a group).
pub(crate) fn run_flow(
    tb: &Testbed,
    r: &Recipe,
    k: usize,
    i: usize,
    start_us: u64,
    t0: Instant,
    jcce: Option<&Client>,
) -> Result<(Measured, Option<PublisherReport>), BackendError> {
    let spec = &r.flows[i];
    let cc = kernel_cc(&spec.algorithm).unwrap_or("");
    let fail = |what: String| BackendError::Process(format!("kernel flow {k} ({cc}): {what}"));
    let port = BASE_PORT + u16::try_from(k).map_err(|_| fail("too many kernel flows".into()))?;
    let start = t0 + Duration::from_micros(start_us);
    // A sized flow runs until its last byte is read (within the limit the agent's sender
    // gets: three times the run plus a minute); others until their duration or the run's end.
    let end = match (spec.size, spec.duration_us) {
        (Some(_), _) => t0 + Duration::from_micros(r.duration_us) * 3 + Duration::from_secs(60),
        (None, Some(d)) => start + Duration::from_micros(d),
        (None, None) => t0 + Duration::from_micros(r.duration_us.max(start_us + 1)),
    };
    let (from, to_host) = if spec.reverse {
        (tb.receiver(), &tb.senders()[0])
    } else {
        (&tb.senders()[0], tb.receiver())
    };
    let listener = listen(to_host, port).map_err(|e| fail(e.to_string()))?;
    let received = Arc::new(AtomicU64::new(0));
    let reader = sink(listener, received.clone(), Some(end));
    let publisher = match (kernel_group(spec), jcce) {
        (Some(g), Some(c)) => Some(
            ReceiverPublisher::start(c, g, vec![received.clone()])
                .map_err(|e| fail(format!("JCCE publisher: {e}")))?,
        ),
        (Some(_), None) => return Err(fail("in a JCCE group, but the run has no JCCE".into())),
        (None, _) => None,
    };
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    let to = SocketAddrV4::new(to_host.addr, port);
    let stream = connect(from, to, cc).map_err(|e| fail(e.to_string()))?;
    let writer = send(&stream, end, spec.size).map_err(|e| fail(e.to_string()))?;

    let interval = Duration::from_micros(r.udp.trace_interval_us.max(1_000));
    let mut series = vec![];
    let (mut last_t, mut last_d) = (start_us as f64 / 1e6, 0u64);
    let mut sample = |series: &mut Vec<Sample>| {
        let t_s = t0.elapsed().as_secs_f64();
        let delivered = received.load(Ordering::Relaxed);
        let info = tcp_info(&stream);
        let dt = t_s - last_t;
        series.push(Sample {
            t_s,
            flow: 0,
            goodput_bps: if dt > 0.0 {
                delivered.saturating_sub(last_d) as f64 * 8.0 / dt
            } else {
                0.0
            },
            cwnd_bytes: info.map_or(0.0, |i| {
                f64::from(i.tcpi_snd_cwnd) * f64::from(i.tcpi_snd_mss)
            }),
            rtt_ms: info.map_or(0.0, |i| f64::from(i.tcpi_rtt) / 1e3),
            delivered,
            fwd_qdelay_ms: None,
        });
        (last_t, last_d) = (t_s, delivered);
    };
    let mut next = Instant::now() + interval;
    while !reader.is_finished() {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += interval;
        if !reader.is_finished() {
            sample(&mut series);
        }
    }
    let got = reader
        .join()
        .map_err(|_| fail("the receiving thread panicked".into()))?
        .map_err(|e| fail(format!("receiver: {e}")))?;
    let report = publisher.map(ReceiverPublisher::stop);
    sample(&mut series);
    let sent = writer
        .join()
        .map_err(|_| fail("the sending thread panicked".into()))?
        .map_err(|e| fail(format!("sender: {e}")))?;
    let info = tcp_info(&stream);
    drop(stream);

    let completed = spec.size.is_none_or(|s| got.bytes >= s && sent >= s);
    let fend = match (spec.size, got.eof) {
        (Some(_), Some(eof)) => eof.duration_since(t0),
        _ => end.saturating_duration_since(t0),
    }
    .as_secs_f64();
    let start_s = start_us as f64 / 1e6;
    Ok((
        (
            FlowData {
                algorithm: spec.algorithm.clone(),
                requested: spec.requested(),
                class: spec.class.clone(),
                group: "flows".into(),
                size: spec.size,
                start_s,
                end_s: fend,
                fct_s: (spec.size.is_some() && completed).then_some(fend - start_s),
                completed,
                bytes_delivered: got.bytes,
                packets_sent: info.map_or(0, |i| u64::from(i.tcpi_data_segs_out)),
                lost_packets: info.map_or(0, |i| u64::from(i.tcpi_total_retrans)),
                base_rtt_ms: None,
                rtt_min_ms: info
                    .map(|i| f64::from(i.tcpi_min_rtt) / 1e3)
                    .filter(|r| *r > 0.0),
                rtt_pct_ms: None,
                deadline_s: spec.deadline_us.map(|d| d as f64 / 1e6),
                min_rate_bps: spec.min_rate.map(|m| m as f64 * 8.0),
                has_series: !series.is_empty(),
                reverse: spec.reverse,
                arrivals: vec![],
            },
            series,
        ),
        report,
    ))
}

/// The run's flows in recipe order: `is_kernel[n]` says whether flow instance n is a kernel
/// flow (taken in turn from `kernel`) or the agent's (taken in turn from `agent`).
pub(crate) fn merge(agent: RunData, kernel: Vec<Measured>, is_kernel: &[bool]) -> RunData {
    let mut out = RunData {
        end_s: agent.end_s,
        ..agent.clone()
    };
    out.flows.clear();
    out.series.clear();
    let mut agent_flows = agent.flows.into_iter();
    let mut kernel = kernel.into_iter();
    let mut agent_index = vec![];
    for &k in is_kernel {
        if k {
            if let Some((f, s)) = kernel.next() {
                let idx = out.flows.len();
                out.end_s = out.end_s.max(f.end_s);
                out.flows.push(f);
                out.series
                    .extend(s.into_iter().map(|x| Sample { flow: idx, ..x }));
            }
        } else if let Some(f) = agent_flows.next() {
            agent_index.push(out.flows.len());
            out.flows.push(f);
        }
    }
    out.series.extend(agent.series.into_iter().filter_map(|x| {
        Some(Sample {
            flow: *agent_index.get(x.flow)?,
            ..x
        })
    }));
    out.series.sort_by_key(|x| x.flow);
    out
}

/// Flows of several runs' data in one: flow instance n is taken in turn from
/// `parts[which[n]]` (e.g. the emulator's forward and reverse senders), its samples with it;
/// the end is the latest, the notes all of them, the rest the first part's.
pub(crate) fn interleave(parts: Vec<RunData>, which: &[usize]) -> RunData {
    let mut out = parts.first().cloned().unwrap_or_default();
    out.flows.clear();
    out.series.clear();
    out.notes.clear();
    let mut next = vec![0usize; parts.len()];
    // (part, flow in part) -> flow in out
    let mut index = std::collections::HashMap::new();
    for &p in which {
        let Some(part) = parts.get(p) else { continue };
        if let Some(f) = part.flows.get(next[p]) {
            index.insert((p, next[p]), out.flows.len());
            out.flows.push(f.clone());
        }
        next[p] += 1;
    }
    for (p, part) in parts.into_iter().enumerate() {
        out.end_s = out.end_s.max(part.end_s);
        out.notes.extend(part.notes);
        out.series.extend(part.series.into_iter().filter_map(|x| {
            Some(Sample {
                flow: *index.get(&(p, x.flow))?,
                ..x
            })
        }));
    }
    out.series.sort_by_key(|x| x.flow);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(alg: &str, end_s: f64) -> FlowData {
        FlowData {
            algorithm: alg.into(),
            end_s,
            ..FlowData::default()
        }
    }

    fn sample(flow: usize, t_s: f64) -> Sample {
        Sample {
            flow,
            t_s,
            ..Sample::default()
        }
    }

    #[test]
    fn merged_flows_keep_recipe_order_and_their_samples() {
        let agent = RunData {
            end_s: 3.0,
            flows: vec![flow("reno", 3.0), flow("vivace", 2.0)],
            series: vec![sample(0, 1.0), sample(1, 1.0), sample(1, 2.0)],
            ..RunData::default()
        };
        let kernel = vec![(flow("kernel:cubic", 3.5), vec![sample(0, 0.5)])];
        let d = merge(agent, kernel, &[false, true, false]);
        let algs: Vec<&str> = d.flows.iter().map(|f| f.algorithm.as_str()).collect();
        assert_eq!(algs, ["reno", "kernel:cubic", "vivace"]);
        let idx: Vec<(usize, f64)> = d.series.iter().map(|s| (s.flow, s.t_s)).collect();
        assert_eq!(idx, [(0, 1.0), (1, 0.5), (2, 1.0), (2, 2.0)]);
        assert_eq!(d.end_s, 3.5);
    }

    #[test]
    fn interleaved_senders_keep_recipe_order_and_their_samples() {
        let fwd = RunData {
            end_s: 3.0,
            flows: vec![flow("reno", 3.0), flow("cubic", 3.0)],
            series: vec![sample(0, 1.0), sample(1, 1.0)],
            notes: vec!["fwd".into()],
            ..RunData::default()
        };
        let rev = RunData {
            end_s: 4.0,
            flows: vec![flow("rtcp", 4.0)],
            series: vec![sample(0, 2.0), sample(0, 3.0)],
            notes: vec!["rev".into()],
            ..RunData::default()
        };
        let d = interleave(vec![fwd, rev], &[0, 1, 0]);
        let algs: Vec<&str> = d.flows.iter().map(|f| f.algorithm.as_str()).collect();
        assert_eq!(algs, ["reno", "rtcp", "cubic"]);
        let idx: Vec<(usize, f64)> = d.series.iter().map(|s| (s.flow, s.t_s)).collect();
        assert_eq!(idx, [(0, 1.0), (1, 2.0), (1, 3.0), (2, 1.0)]);
        assert_eq!(d.end_s, 4.0);
        assert_eq!(d.notes, ["fwd", "rev"]);
    }
}
