//! Transfers through the seeded lossy relay: loss of 1 %, 5 % and 20 % (each direction),
//! reordering, duplication, all at once, and several flows through one relay. Every stream must
//! arrive intact; where packets are lost, the sender must have retransmitted.

mod transport_util;

use std::time::Duration;

use ccp_udp::{Amount, FlowSpec, SenderConfig};
use transport_util::*;

struct Case {
    bytes: u64,
    loss: f64,
    reorder: f64,
    duplicate: f64,
}

fn run_case(name: &str, c: Case) {
    let rx = receiver(1);
    let relay = relay(rx.addr, c.loss, c.reorder, c.duplicate, Duration::ZERO);
    let mut cfg = one_flow(relay.addr, Amount::Bytes(c.bytes));
    cfg.handshake_timeout = Duration::from_secs(5);
    let s = send(&cfg, &reno).unwrap_or_else(|e| panic!("{name}: {e}"));
    let r = rx.join().expect("receiver");
    let stats = relay.stop().expect("relay");
    println!("{name}: {}", describe(&s[0]));
    println!(
        "{name}: relay up {:?} down {:?}; receiver dups {} ooo {} stall {:.1} ms",
        stats.to_upstream,
        stats.to_client,
        r.flows[0].duplicates,
        r.flows[0].out_of_order,
        r.flows[0].longest_stall_ms
    );
    assert_intact(&s[0], &r.flows[0]);
    assert_eq!(s[0].bytes, c.bytes);
    if c.loss > 0.0 {
        assert!(
            stats.to_upstream.dropped > 0,
            "{name}: relay dropped nothing"
        );
        assert!(s[0].retransmitted_packets > 0, "{name}: no retransmissions");
        assert!(s[0].lost_packets > 0, "{name}: no losses detected");
    }
    if c.duplicate > 0.0 {
        assert!(stats.to_upstream.duplicated > 0);
        assert!(
            r.flows[0].duplicates > 0,
            "{name}: receiver saw no duplicate"
        );
    }
    if c.reorder > 0.0 {
        assert!(stats.to_upstream.reordered > 0);
    }
}

#[test]
fn loss_1_percent() {
    bounded(Duration::from_secs(60), || {
        run_case(
            "loss 1%",
            Case {
                bytes: 20_000_000,
                loss: 0.01,
                reorder: 0.0,
                duplicate: 0.0,
            },
        )
    });
}

#[test]
fn loss_5_percent() {
    bounded(Duration::from_secs(60), || {
        run_case(
            "loss 5%",
            Case {
                bytes: 10_000_000,
                loss: 0.05,
                reorder: 0.0,
                duplicate: 0.0,
            },
        )
    });
}

#[test]
fn loss_20_percent() {
    bounded(Duration::from_secs(90), || {
        run_case(
            "loss 20%",
            Case {
                bytes: 2_000_000,
                loss: 0.20,
                reorder: 0.0,
                duplicate: 0.0,
            },
        )
    });
}

#[test]
fn reorder_5_percent() {
    bounded(Duration::from_secs(60), || {
        run_case(
            "reorder 5%",
            Case {
                bytes: 20_000_000,
                loss: 0.0,
                reorder: 0.05,
                duplicate: 0.0,
            },
        )
    });
}

#[test]
fn duplicate_2_percent() {
    bounded(Duration::from_secs(60), || {
        run_case(
            "duplicate 2%",
            Case {
                bytes: 20_000_000,
                loss: 0.0,
                reorder: 0.0,
                duplicate: 0.02,
            },
        )
    });
}

#[test]
fn loss_reorder_and_duplication_together() {
    bounded(Duration::from_secs(60), || {
        run_case(
            "all at once",
            Case {
                bytes: 10_000_000,
                loss: 0.03,
                reorder: 0.05,
                duplicate: 0.02,
            },
        )
    });
}

#[test]
fn several_flows_through_one_relay() {
    bounded(Duration::from_secs(60), || {
        let rx = receiver(3);
        let relay = relay(rx.addr, 0.02, 0.01, 0.01, Duration::from_millis(2));
        let cfg = SenderConfig {
            dest: relay.addr,
            flows: (0..3)
                .map(|i| FlowSpec {
                    amount: Amount::Bytes(3_000_000 + i * 7),
                    ..FlowSpec::default()
                })
                .collect(),
            ..SenderConfig::default()
        };
        let s = send(&cfg, &reno).expect("transfer");
        let r = rx.join().expect("receiver");
        let stats = relay.stop().expect("relay");
        assert_eq!(stats.clients, 3, "one upstream socket per flow");
        for f in &s {
            println!("{}", describe(f));
            let rf = r.flows.iter().find(|x| x.flow_id == f.flow_id).unwrap();
            assert_intact(f, rf);
        }
    });
}
