//! What a flow's controller sees first, end to end over loopback: the flow's own data, never
//! the QUIC handshake's packets.
//!
//! s2n-quic hands the path's congestion controller the handshake's packets too (the client's
//! Initial and Handshake packets). `ccp_quic::controller` keeps them apart: their ACK is no
//! sample for the flow's controller and they take no room in its window. Before it did, the
//! first sample a controller got was the ACK of the client's Initial packet (1448 bytes
//! acknowledged, nothing in flight: a one-packet first round), and the client's last Handshake
//! packet (its Finished, which the server never acknowledges; it leaves flight about one RTT
//! later) took a packet's room in the initial window, so nine data packets went out at once and
//! the tenth an RTT later. Vegas' slow start, which counts rounds on acknowledged bytes, then
//! overshot the 20 Mbit/s link of docs/results/datapaths.md by a doubling in most runs.
//!
//! * `the_first_sample_acknowledges_the_whole_initial_window_of_data`: under a controller with
//!   a fixed ten-packet window, the first sample that acknowledges anything finds the rest of
//!   a full initial window of data in flight (acknowledged + in flight > nine packets), and no
//!   sample ever counts more in flight than the window. Before the fix the first such sample
//!   was the handshake's: 1448 bytes acknowledged, 0 in flight.

use ccp_quic::controller::Factory;
use ccp_quic::{ReceiverConfig, SenderConfig};
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
fn the_first_sample_acknowledges_the_whole_initial_window_of_data() {
    let id = ccp_quic::tls::self_signed().unwrap();
    let rcfg = ReceiverConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        expect_flows: Some(1),
        idle_timeout: Some(Duration::from_secs(30)),
        ..ReceiverConfig::default()
    };
    let rstop = AtomicBool::new(false);
    let sstop = AtomicBool::new(false);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|sc| {
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
    });
    let seen = seen.lock().unwrap();
    let first = seen
        .iter()
        .find(|s| s.bytes_acked > 0)
        .expect("an acknowledging sample");
    // The first acknowledged packets are the first flight's, and the rest of that flight is
    // still in flight: together a whole initial window of data, less than one packet short
    // (a shorter packet may carry the stream's header).
    let flight = first.bytes_acked + first.bytes_in_flight;
    assert!(
        flight > CWND - MSS && flight <= CWND,
        "first acknowledging sample: {} B acknowledged + {} B in flight = {flight} B, want the \
         initial window ({CWND} B) less than a packet",
        first.bytes_acked,
        first.bytes_in_flight
    );
    assert!(first.rtt_us > 0, "{first:?}");
    // Only the flow's data counts in flight, and never more than its window.
    let most = seen.iter().map(|s| s.bytes_in_flight).max().unwrap_or(0);
    assert!(most <= CWND, "{most} B in flight under a {CWND}-B window");
}
