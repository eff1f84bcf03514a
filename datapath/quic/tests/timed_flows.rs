//! How a flow's stream ends, end to end over loopback (sender and receiver in this process).
//!
//! The flows run under a fixed controller that paces at [`RATE`] with a window of [`CWND`]:
//! on loopback the path carries far more, so each flow is network-limited at a known rate and
//! its send buffer ([`SEND_BUFFER`], 2 MiB) is full — the case where a timed flow used to keep
//! sending after its duration, until the queue had drained (at 1 MB/s, two more seconds).
//!
//! * `a_timed_flow_stops_at_its_duration_and_every_delivered_byte_is_verified`: a 1-s timed
//!   flow and a sized flow at once. The timed flow delivers no more than the pacer let out
//!   until the sender reset the stream plus one window in flight, although about 2 MiB more
//!   was written and abandoned; sender and receiver agree on the bytes, and they and their
//!   hash are the flow's pattern. The sized flow still ends with its trailer, checked by
//!   length and hash. Before the reset, the same timed flow delivered 3,145,728 bytes (1 MB
//!   by its duration plus the 2 MiB queue, the last at 3.25 s) for a bound of about 1,072,000
//!   here; with it, 963,587–968,700 bytes in six runs.
//! * `a_stopped_flow_ends_at_once_with_a_verified_prefix`: a large sized flow stopped by the
//!   stop flag ends with a reset too; the prefix delivered is verified and agreed on.
//!
//! * `the_packet_trace_records_every_data_packet_and_every_rtt_sample`: with the sender's
//!   packet trace on, one row per data packet (all the packets sent but the handshake's few,
//!   their times ordered, their bytes at the pacing rate) and one per RTT sample of those
//!   packets (its packet among the rows, the sample equal to the time between the two); the
//!   CSV has a row per event, the JSON summary none.
//! * `the_precise_timer_sends_paced_packets_one_at_a_time`: the same paced flow (8 Mbit/s, a
//!   packet every 1.45 ms) on the sender's precise timer and on s2n-quic's own millisecond
//!   timer, one after the other: under the precise timer far fewer packets leave as a later
//!   packet of a batch (a packet with the send time of the one before it): 0.3–0.6 % against
//!   43.7–44.4 % (`cargo test --release -p ccp-quic --test timed_flows -- --nocapture` prints
//!   both).
//!
//! A corrupted byte is caught by the receiver's pattern check: see the unit tests of
//! `ccp_quic::wire`. The tests run side by side in about two seconds.

mod common;

use ccp_quic::controller::Factory;
use ccp_quic::sender::SEND_BUFFER;
use ccp_quic::{ReceiverSummary, SenderConfig, SenderSummary};
use ccp_quic::{run_receiver, run_sender};
use ccp_udp::cc::{AckSample, FlowController, FlowMeta};
use ccp_udp::pattern::{hash_hex, stream_hash};
use ccp_udp::{Amount, FlowSpec};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Pacing rate of every flow, bytes/s of UDP payload (8 Mbit/s).
const RATE: u64 = 1_000_000;
/// Window of every flow, bytes (about 45 packets: never the limit at loopback RTTs).
const CWND: u32 = 64 * 1024;
/// Bytes the pacer may let out at once beyond the rate: its 2-ms token bucket plus s2n-quic's
/// 1-ms timer granularity (`ccp_quic::controller`), doubled.
const BURST: u64 = RATE * 6 / 1000;

/// A controller with a fixed window and pacing rate.
struct Paced;

impl FlowController for Paced {
    fn on_ack(&mut self, _s: &AckSample) {}
    fn on_tick(&mut self, _s: &AckSample) {}
    fn cwnd(&self) -> u32 {
        CWND
    }
    fn pacing_rate(&self) -> Option<u64> {
        Some(RATE)
    }
    fn controller_name(&self) -> String {
        "test:paced".into()
    }
}

/// Runs `flows` from a sender to a receiver on loopback, setting the sender's stop flag after
/// `stop_after` if given, its RTT percentiles counting the samples from `rtt_from` on; the
/// sender's summaries in configuration order and the receiver's in the same order (matched by
/// flow id).
fn run(
    flows: Vec<FlowSpec>,
    stop_after: Option<Duration>,
    rtt_from: Duration,
    packet_trace: bool,
) -> Vec<(SenderSummary, ReceiverSummary)> {
    run_with(flows, stop_after, |c| {
        c.rtt_from = rtt_from;
        c.packet_trace = packet_trace;
    })
}

/// [`run`] with the sender's configuration set by `tweak`.
fn run_with(
    flows: Vec<FlowSpec>,
    stop_after: Option<Duration>,
    tweak: impl FnOnce(&mut SenderConfig),
) -> Vec<(SenderSummary, ReceiverSummary)> {
    let id = ccp_quic::tls::self_signed().unwrap();
    let rcfg = common::loopback_receiver(flows.len());
    let rstop = AtomicBool::new(false);
    let sstop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|sc| {
        let recv = sc.spawn(|| {
            run_receiver(&rcfg, &id, &rstop, &mut |a| {
                let _ = tx.send(a);
            })
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        if let Some(after) = stop_after {
            let sstop = &sstop;
            sc.spawn(move || {
                std::thread::sleep(after);
                sstop.store(true, Ordering::Relaxed);
            });
        }
        let mut cfg = SenderConfig {
            dest: addr,
            cert_pem: id.cert_pem.clone(),
            flows,
            ..SenderConfig::default()
        };
        tweak(&mut cfg);
        let factory: Factory =
            Arc::new(|_: &FlowMeta| -> Box<dyn FlowController> { Box::new(Paced) });
        let sent = run_sender(&cfg, factory, &sstop);
        // Let the receiver go even if the sender failed.
        rstop.store(sent.is_err(), Ordering::Relaxed);
        let sent = sent.unwrap();
        let mut got = recv.join().unwrap().unwrap();
        assert_eq!(got.len(), sent.len(), "{got:?}");
        sent.into_iter()
            .map(|s| {
                let i = got.iter().position(|g| g.flow_id == s.flow_id).unwrap();
                (s, got.swap_remove(i))
            })
            .collect()
    })
}

/// Sender and receiver agree on the bytes delivered, both found them intact, and bytes and
/// hash are those of the flow's pattern, computed here.
fn check_agreed_and_verified(s: &SenderSummary, g: &ReceiverSummary) {
    assert!(g.intact && g.completed, "{g:?}");
    assert_eq!(g.error, None);
    assert_eq!(s.receiver_intact, Some(true), "{s:?}");
    assert_eq!(s.bytes, g.bytes);
    let want = hash_hex(stream_hash(s.flow_id, g.bytes));
    assert_eq!(g.hash, want);
    assert_eq!(s.hash, want);
    assert!(s.written_bytes >= s.bytes);
}

#[test]
fn a_timed_flow_stops_at_its_duration_and_every_delivered_byte_is_verified() {
    let sized = 400_000u64;
    let flows = vec![
        FlowSpec {
            amount: Amount::Duration(Duration::from_secs(1)),
            ..FlowSpec::default()
        },
        FlowSpec {
            amount: Amount::Bytes(sized),
            ..FlowSpec::default()
        },
    ];
    let r = run(flows, None, Duration::ZERO, false);
    let (s, g) = &r[0];
    eprintln!(
        "timed flow of 1 s at {RATE} B/s: reset at {:.3} s, {} bytes written, {} delivered (sender) / {} (receiver), last verdict at {:.3} s, {} UDP bytes sent",
        s.data_end_s, s.written_bytes, s.bytes, g.bytes, s.duration_s, s.sent_bytes
    );
    check_agreed_and_verified(s, g);
    assert_eq!(
        (s.ended_by.as_str(), g.ended_by.as_str()),
        ("deadline", "deadline")
    );
    assert_eq!(g.expected_bytes, None);
    assert!(!s.stopped_early);
    // The buffer was full when the sender reset the stream: most of it was abandoned ...
    assert!(
        s.written_bytes >= s.bytes + u64::from(SEND_BUFFER) / 2,
        "written {} for {} delivered: the send buffer was not full",
        s.written_bytes,
        s.bytes
    );
    // ... and nothing of it went on the wire: what arrived is at most what the pacer let out
    // until the reset (the sender's own clock), plus one window in flight and a burst. Stream
    // content is a few percent less than the UDP payload the pacer counts.
    let bound = (RATE as f64 * s.data_end_s) as u64 + u64::from(CWND) + BURST;
    assert!(
        s.bytes <= bound,
        "{} bytes delivered, at most {bound} can have left before the reset at {:.3} s",
        s.bytes,
        s.data_end_s
    );
    // The flow did run at its rate for most of its duration (start-up aside).
    assert!(s.bytes * 2 >= (RATE as f64 * s.data_end_s) as u64, "{s:?}");

    let (s, g) = &r[1];
    check_agreed_and_verified(s, g);
    assert_eq!(
        (s.ended_by.as_str(), g.ended_by.as_str()),
        ("trailer", "trailer")
    );
    assert_eq!(g.expected_bytes, Some(sized));
    assert_eq!(g.sender_hash.as_deref(), Some(s.hash.as_str()));
    assert_eq!((s.bytes, s.written_bytes), (sized, sized));
}

#[test]
fn a_stopped_flow_ends_at_once_with_a_verified_prefix() {
    let size = 20_000_000u64;
    let flows = vec![FlowSpec {
        amount: Amount::Bytes(size),
        ..FlowSpec::default()
    }];
    let r = run(
        flows,
        Some(Duration::from_millis(500)),
        Duration::ZERO,
        false,
    );
    let (s, g) = &r[0];
    eprintln!(
        "sized flow of {size} stopped: reset at {:.3} s, {} written, {} delivered",
        s.data_end_s, s.written_bytes, s.bytes
    );
    check_agreed_and_verified(s, g);
    assert!(s.stopped_early);
    assert_eq!((s.ended_by.as_str(), g.ended_by.as_str()), ("stop", "stop"));
    assert!(s.bytes > 0 && s.bytes < s.written_bytes && s.written_bytes < size);
    let bound = (RATE as f64 * s.data_end_s) as u64 + u64::from(CWND) + BURST;
    assert!(s.bytes <= bound, "{} bytes for a bound of {bound}", s.bytes);
}

#[test]
fn rtt_percentiles_leave_out_the_samples_before_rtt_from() {
    // Two paced flows of 1 s, the second starting 0.5 s after the first; with `rtt_from` at
    // 0.5 s the first counts the RTT samples of its second half, the second all of its own.
    let flow = |start_ms| FlowSpec {
        amount: Amount::Duration(Duration::from_secs(1)),
        start_after: Duration::from_millis(start_ms),
        ..FlowSpec::default()
    };
    let r = run(
        vec![flow(0), flow(500)],
        None,
        Duration::from_millis(500),
        false,
    );
    for (s, g) in &r {
        check_agreed_and_verified(s, g);
        assert!(s.rtt_min_ms > 0.0);
    }
    let early = r[0].0.rtt_samples.unwrap();
    let late = r[1].0.rtt_samples.unwrap();
    println!("RTT samples counted: {early} (0–1 s), {late} (0.5–1.5 s)");
    assert!(late > 100, "the late flow counted {late} samples");
    let share = early as f64 / late as f64;
    assert!(
        (0.35..0.65).contains(&share),
        "the early flow counted {early} samples against the late one's {late}"
    );
    let s = &r[0].0;
    assert!(s.rtt_p50_ms > 0.0 && s.rtt_p50_ms <= s.rtt_p99_ms);
}

#[test]
fn the_packet_trace_records_every_data_packet_and_every_rtt_sample() {
    // One paced flow of 1 s with the packet trace on: a row per data packet the flow sent and
    // per RTT sample of those packets, on one clock, each sample of a packet the trace saw
    // leave; written as CSV, not put in the JSON summary.
    use ccp_quic::controller::PacketEventKind;
    let flow = FlowSpec {
        amount: Amount::Duration(Duration::from_secs(1)),
        ..FlowSpec::default()
    };
    let r = run(vec![flow], None, Duration::ZERO, true);
    let (s, g) = &r[0];
    check_agreed_and_verified(s, g);
    let sent: Vec<_> = s
        .packets
        .iter()
        .filter(|e| e.kind == PacketEventKind::Sent)
        .collect();
    let rtts: Vec<_> = s
        .packets
        .iter()
        .filter(|e| e.kind == PacketEventKind::Rtt)
        .collect();
    // Every data packet: all the packets sent but the handshake's few.
    let n = sent.len() as u64;
    assert!(
        n <= s.sent_packets && n + 10 >= s.sent_packets && n > 500,
        "{n} sent rows, {} packets sent",
        s.sent_packets
    );
    assert_eq!(sent[0].at_us, 0);
    assert!(sent.windows(2).all(|w| w[0].at_us <= w[1].at_us));
    assert!(sent.iter().all(|e| e.at_us == e.sent_us && e.bytes > 0));
    // The pacer's rate: 1 MB/s over the flow's second (its window never limits it).
    let bytes: u64 = sent.iter().map(|e| u64::from(e.bytes)).sum();
    let span_s = sent.last().unwrap().at_us as f64 / 1e6;
    let rate = bytes as f64 / span_s;
    assert!(
        (0.9..1.1).contains(&(rate / RATE as f64)),
        "{rate:.0} B/s against {RATE}"
    );
    // Every RTT sample of the flow's packets: all of the summary's samples but the handshake's.
    let samples = s.rtt_samples.unwrap();
    assert!(
        rtts.len() as u64 <= samples && rtts.len() as u64 + 3 >= samples && rtts.len() > 100,
        "{} rtt rows, {samples} samples",
        rtts.len()
    );
    let sent_at: std::collections::HashSet<u64> = sent.iter().map(|e| e.at_us).collect();
    for e in &rtts {
        assert!(sent_at.contains(&e.sent_us), "{e:?}: no packet left then");
        let span = e.at_us - e.sent_us;
        assert!(span.abs_diff(e.rtt_us) <= 2, "{e:?}");
    }
    let share = batched_share(s);
    println!(
        "{n} packets at {:.2} Mbit/s, {:.1} % sent as a later packet of a batch; {} RTT samples",
        rate * 8.0 / 1e6,
        100.0 * share,
        rtts.len()
    );
    // The CSV: a header and a row per event; the JSON summary leaves them out.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("packets.csv");
    ccp_quic::summary::write_packet_csv(&path, std::slice::from_ref(s)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(ccp_quic::summary::PACKET_CSV_HEADER));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), s.packets.len());
    assert!(rows[0].starts_with(&format!("{},sent,0,0,", s.flow_id)));
    let json = serde_json::to_value(s).unwrap();
    assert!(json.get("packets").is_none());
}

/// The share of a flow's data packets that left with the same send time as the packet before
/// them (a later packet of a batch), from its packet trace.
fn batched_share(s: &SenderSummary) -> f64 {
    use ccp_quic::controller::PacketEventKind;
    let sent: Vec<u64> = s
        .packets
        .iter()
        .filter(|e| e.kind == PacketEventKind::Sent)
        .map(|e| e.at_us)
        .collect();
    let batched = sent.windows(2).filter(|w| w[0] == w[1]).count();
    batched as f64 / sent.len().max(1) as f64
}

#[test]
fn the_precise_timer_sends_paced_packets_one_at_a_time() {
    // The same paced flow (8 Mbit/s: a packet every 1.45 ms) on the precise timer and on
    // s2n-quic's own millisecond timer, one after the other: on the millisecond timer packets
    // due within a millisecond of each other leave together (43.7-44.4 % of them as a later
    // packet of a batch, measured before the precise timer existed); on the precise one each
    // leaves at its own time.
    let flow = || FlowSpec {
        amount: Amount::Duration(Duration::from_secs(1)),
        ..FlowSpec::default()
    };
    let share = |coarse: bool| {
        let r = run_with(vec![flow()], None, |c| {
            c.packet_trace = true;
            c.coarse_timer = coarse;
        });
        check_agreed_and_verified(&r[0].0, &r[0].1);
        assert!(
            r[0].0.packets.len() > 1000,
            "{} events",
            r[0].0.packets.len()
        );
        batched_share(&r[0].0)
    };
    let precise = share(false);
    let coarse = share(true);
    println!(
        "later packets of a batch: precise timer {:.1} %, millisecond timer {:.1} %",
        100.0 * precise,
        100.0 * coarse
    );
    assert!(
        precise * 4.0 < coarse,
        "precise {precise:.3} against the millisecond timer's {coarse:.3}"
    );
}
