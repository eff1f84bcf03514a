//! What reached the receiver when, end to end: one sized flow over loopback through ccp-udp's
//! relay, which delays every datagram by [`DELAY`] each way and drops [`LOSS`] of them, so
//! the stream has holes that QUIC repairs a round trip or more later.
//!
//! `arrival_records_count_bytes_beyond_holes_every_interval_and_end_at_the_delivered_bytes`:
//! * the receiver's `arrivals` grow monotonically, at least 10 ms apart and at about that
//!   spacing while data comes, and the last equals the bytes the receiver verified (and the
//!   sender's verdict);
//! * they count from when the connection's first packet reached the receiver: the first data
//!   can reach it no earlier than two one-way delays later (the receiver's answer to that
//!   packet going back, the sender's data coming);
//! * they count what arrived beyond a hole: while the application's in-order count stalls
//!   for a repair (its longest stall, `longest_stall_ms`, is a round trip at least), the
//!   records keep growing. Counting in order, as the stream API hands bytes over, they would
//!   stand still as long as the stall;
//! * the sender's trace counts acknowledged stream bytes, in order (`delivered_bytes`) and
//!   beyond a hole (`received_bytes`): the latter is ahead of the former during a repair, and
//!   neither exceeds the content and its trailer.
//!
//! The flow is paced at [`RATE`] by a fixed controller; it takes about 1.5 s.

mod common;

use ccp_quic::SenderConfig;
use ccp_quic::controller::Factory;
use ccp_quic::wire::TRAILER_LEN;
use ccp_quic::{run_receiver, run_sender};
use ccp_udp::cc::{AckSample, FlowController, FlowMeta};
use ccp_udp::relay::{RelayConfig, run_relay};
use ccp_udp::{Amount, FlowSpec};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Pacing rate, bytes/s of UDP payload (8 Mbit/s).
const RATE: u64 = 1_000_000;
/// Window, bytes: well above the path's BDP (RATE × 2 × DELAY = 100 kB), so the pacer is the
/// limit, also while a repair holds bytes in flight.
const CWND: u32 = 256 * 1024;
/// The relay's delay, each way: a repair stalls the in-order count for 100 ms at least.
const DELAY: Duration = Duration::from_millis(50);
/// The relay's loss probability, each direction.
const LOSS: f64 = 0.03;
/// The flow's content, bytes.
const SIZE: u64 = 1_000_000;

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

#[test]
fn arrival_records_count_bytes_beyond_holes_every_interval_and_end_at_the_delivered_bytes() {
    let id = ccp_quic::tls::self_signed().unwrap();
    let rcfg = common::loopback_receiver(1);
    let rstop = AtomicBool::new(false);
    let relay_stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    let (rtx, rrx) = std::sync::mpsc::channel();
    let (sent, got, relayed) = std::thread::scope(|sc| {
        let recv = sc.spawn(|| {
            run_receiver(&rcfg, &id, &rstop, &mut |a| {
                let _ = tx.send(a);
            })
        });
        let recv_addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let relay_cfg = RelayConfig {
            upstream: recv_addr,
            loss: LOSS,
            delay: DELAY,
            seed: 7,
            ..RelayConfig::default()
        };
        let relay_stop = &relay_stop;
        let relay = sc.spawn(move || {
            run_relay(&relay_cfg, relay_stop, &mut |a| {
                let _ = rtx.send(a);
            })
        });
        let relay_addr = rrx.recv_timeout(Duration::from_secs(10)).unwrap();
        let cfg = SenderConfig {
            dest: relay_addr,
            cert_pem: id.cert_pem.clone(),
            flows: vec![FlowSpec {
                amount: Amount::Bytes(SIZE),
                ..FlowSpec::default()
            }],
            ..SenderConfig::default()
        };
        let factory: Factory =
            Arc::new(|_: &FlowMeta| -> Box<dyn FlowController> { Box::new(Paced) });
        let sent = run_sender(&cfg, factory, &AtomicBool::new(false));
        rstop.store(sent.is_err(), Ordering::Relaxed);
        let got = recv.join().unwrap().unwrap();
        relay_stop.store(true, Ordering::Relaxed);
        let relayed = relay.join().unwrap().unwrap();
        (sent.unwrap(), got, relayed)
    });
    let (s, g) = (&sent[0], &got[0]);
    assert!(g.intact && g.completed, "{g:?}");
    assert_eq!(s.receiver_intact, Some(true));
    assert_eq!((s.bytes, g.bytes), (SIZE, SIZE));
    assert!(
        relayed.to_upstream.dropped > 0 && s.lost_packets > 0,
        "no loss to repair: relay {relayed:?}, sender lost {}",
        s.lost_packets
    );

    // Monotonic, at least an interval apart (the final record may follow the last sample
    // sooner), ending at the verified bytes.
    let a = &g.arrivals;
    assert!(a.len() >= 3, "{a:?}");
    for w in a.windows(2) {
        assert!(w[1].t_s >= w[0].t_s && w[1].bytes >= w[0].bytes, "{w:?}");
    }
    for w in a[..a.len() - 1].windows(2) {
        assert!(w[1].t_s - w[0].t_s >= 0.0099, "{w:?}");
    }
    assert_eq!(a.last().unwrap().bytes, g.bytes);
    // About every 10 ms while the data comes (it comes every 1.5 ms or so): at least half as
    // many records as 10-ms intervals in the transfer.
    let (first, last) = (a[0].t_s, a[a.len() - 1].t_s);
    let intervals = (last - first) / 0.01;
    assert!(
        a.len() as f64 >= intervals / 2.0,
        "{} records over {:.3} s",
        a.len(),
        last - first
    );
    // Time zero is the connection's first packet at the receiver: the first data comes two
    // one-way delays after it at the earliest.
    assert!(
        first >= 2.0 * DELAY.as_secs_f64(),
        "first record at {first:.4} s"
    );

    // Beyond the holes: the longest time the records stand still (from a record to the next
    // one that is larger) against the longest in-order stall of the same stream. Only while
    // new data still follows: a loss in the last round trip's data (a tail loss, repaired
    // by a probe) has nothing behind it to arrive, so the records wait for the repair too.
    let tail = SIZE - 2 * RATE * 2 * DELAY.as_millis() as u64 / 1000;
    let mut still = 0.0f64;
    let mut since = a[0];
    for r in a[1..].iter().take_while(|r| r.bytes <= tail) {
        if r.bytes > since.bytes {
            still = still.max(r.t_s - since.t_s);
            since = *r;
        }
    }
    let stall = g.longest_stall_ms / 1e3;
    eprintln!(
        "records {} over {:.3} s, the first at {:.1} ms (handshake {:.1} ms, RTT min {:.1} ms); \
         they stood still {:.1} ms at most, the in-order count {:.1} ms; {} packets lost",
        a.len(),
        last - first,
        first * 1e3,
        s.handshake_rtt_ms,
        s.rtt_min_ms,
        still * 1e3,
        stall * 1e3,
        s.lost_packets
    );
    assert!(
        stall >= 2.0 * DELAY.as_secs_f64(),
        "the in-order count stalled only {stall:.4} s: no repair seen"
    );
    assert!(
        still < stall / 2.0,
        "the records stood still {still:.4} s, the in-order count {stall:.4} s"
    );

    // The sender's trace: acknowledged stream bytes, beyond a hole ahead of in order during a
    // repair, never above the content and its trailer.
    let cap = SIZE + TRAILER_LEN as u64;
    assert!(!s.trace.is_empty());
    for t in &s.trace {
        let r = t.received_bytes.expect("received_bytes");
        assert!(t.delivered_bytes <= r && r <= cap, "{t:?}");
    }
    assert!(
        s.trace
            .iter()
            .any(|t| t.received_bytes.unwrap() > t.delivered_bytes),
        "the sender never saw bytes acknowledged beyond a hole"
    );
    for w in s.trace.windows(2) {
        assert!(w[1].delivered_bytes >= w[0].delivered_bytes);
        assert!(w[1].received_bytes >= w[0].received_bytes);
    }
}
