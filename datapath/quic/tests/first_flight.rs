//! What a flow's controller sees first, end to end over loopback: the flow's own data, never
//! the QUIC handshake's packets.
//!
//! s2n-quic hands the path's congestion controller the handshake's packets too (the client's
//! Initial and Handshake packets). `ccp_quic::controller` keeps them apart: their ACK is no
//! sample for the flow's controller and they take no room in its window. Before it did, the
//! first sample a controller got was the ACK of the client's Initial packet (1448 bytes
//! acknowledged, nothing in flight: a one-packet first round), and the client's last Handshake
//! packet (its Finished, left unacknowledged until the handshake is confirmed, about one RTT
//! later) took a packet's room in the initial window, so nine data packets went out at once and
//! the tenth an RTT later. Vegas' slow start, which counts rounds on acknowledged bytes, then
//! overshot the 20 Mbit/s link of docs/results/datapaths.md by a doubling in most runs.
//!
//! * `the_handshakes_acks_are_no_samples_of_the_flow`: under a controller with a fixed
//!   ten-packet window, the controller gets one sample per ACK frame of the flow's data: the
//!   stack's ACK frames (the summary's `acks`) less the handshake's, one to three (the
//!   client's Initial and Handshake flights); before the fix it got every frame (no frame
//!   left out). No sample counts more in flight than the window, and none of the first
//!   round's is the handshake's lone datagram (1448 B acknowledged with nothing in flight,
//!   the first sample before the fix).

mod common;

use ccp_quic::SenderConfig;
use ccp_quic::controller::Factory;
use ccp_quic::{run_receiver, run_sender};
use ccp_udp::cc::{AckSample, FlowController, FlowMeta};
use ccp_udp::{Amount, FlowSpec};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The sender's maximum datagram size (ccp-quic's default), bytes.
const MSS: u32 = 1448;
/// The fixed window: RFC 9002's initial ten datagrams, bytes.
const CWND: u32 = 10 * MSS;

/// A controller with a fixed window and no pacing that records every sample it is handed.
struct Recorder(Arc<Mutex<Vec<AckSample>>>);

impl FlowController for Recorder {
    fn on_ack(&mut self, s: &AckSample) {
        self.0.lock().unwrap().push(*s);
    }
    fn on_tick(&mut self, _s: &AckSample) {}
    fn cwnd(&self) -> u32 {
        CWND
    }
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
    fn controller_name(&self) -> String {
        "test:recorder".into()
    }
}

#[test]
fn the_handshakes_acks_are_no_samples_of_the_flow() {
    let id = ccp_quic::tls::self_signed().unwrap();
    let rcfg = common::loopback_receiver(1);
    let rstop = AtomicBool::new(false);
    let sstop = AtomicBool::new(false);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let sent = std::thread::scope(|sc| {
        let recv = sc.spawn(|| {
            run_receiver(&rcfg, &id, &rstop, &mut |a| {
                let _ = tx.send(a);
            })
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let cfg = SenderConfig {
            dest: addr,
            cert_pem: id.cert_pem.clone(),
            mss: MSS,
            flows: vec![FlowSpec {
                amount: Amount::Bytes(300_000),
                ..FlowSpec::default()
            }],
            ..SenderConfig::default()
        };
        let samples = seen.clone();
        let factory: Factory = Arc::new(move |_: &FlowMeta| -> Box<dyn FlowController> {
            Box::new(Recorder(samples.clone()))
        });
        let sent = run_sender(&cfg, factory, &sstop);
        rstop.store(sent.is_err(), std::sync::atomic::Ordering::Relaxed);
        let sent = sent.unwrap();
        let got = recv.join().unwrap().unwrap();
        assert!(sent[0].completed && got[0].intact, "{sent:?} {got:?}");
        sent
    });
    let seen = seen.lock().unwrap();
    let acking: Vec<&AckSample> = seen.iter().filter(|s| s.bytes_acked > 0).collect();
    // Every ACK frame of the path reaches the controller as one sample, except the
    // handshake's (the client's Initial and Handshake flights).
    let left_out = sent[0].acks - acking.len() as u64;
    assert!(
        (1..=3).contains(&left_out),
        "{} ACK frames, {} acknowledging samples: {left_out} frames left out, want the \
         handshake's 1-3",
        sent[0].acks,
        acking.len()
    );
    // Only the flow's data counts in flight, and never more than its window.
    let most = seen.iter().map(|s| s.bytes_in_flight).max().unwrap_or(0);
    assert!(most <= CWND, "{most} B in flight under a {CWND}-B window");
    // The first round's samples acknowledge data: never the handshake's lone full datagram
    // with nothing else in flight.
    for s in acking.iter().take(10) {
        assert!(
            !(s.bytes_acked == MSS && s.bytes_in_flight == 0),
            "a lone {MSS}-B datagram acknowledged with nothing in flight: {s:?}"
        );
        assert!(s.rtt_us > 0, "{s:?}");
    }
}
