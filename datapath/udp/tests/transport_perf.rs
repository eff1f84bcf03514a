//! Loopback goodput of one flow with the built-in Reno (ignored by default: it measures, it does
//! not check). Run it alone on a quiet machine:
//!
//! ```sh
//! cargo test -p ccp-udp --release --test transport_perf -- --ignored --nocapture --test-threads 1
//! ```
//!
//! `CCP_UDP_PERF_BYTES` sets the transfer size (default 1 GB); `CCP_UDP_PERF_RUNS` the number of
//! runs per configuration (default 3).

mod transport_util;

use std::time::Duration;

use ccp_udp::{Amount, ReceiverConfig};
use transport_util::*;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn measure(label: &str, bytes: u64, mss: u32, gso: bool, gro: bool) {
    let runs = env_u64("CCP_UDP_PERF_RUNS", 3);
    let mut rates = Vec::new();
    for _ in 0..runs {
        let rx = start_receiver(ReceiverConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            expect_flows: Some(1),
            idle_timeout: Some(Duration::from_secs(20)),
            gro,
        });
        let mut cfg = one_flow(rx.addr, Amount::Bytes(bytes));
        cfg.gso = gso;
        cfg.mss = mss;
        let s = send(&cfg, &reno).expect("transfer");
        let r = rx.join().expect("receiver");
        assert_intact(&s[0], &r.flows[0]);
        println!(
            "{label}: sender {:.0} Mbit/s, receiver {:.0} Mbit/s, {:.1} datagrams per receive; {}",
            s[0].goodput_mbps,
            r.flows[0].goodput_mbps,
            r.datagrams as f64 / r.messages.max(1) as f64,
            describe(&s[0])
        );
        rates.push(s[0].goodput_mbps);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "== {label}: {} MB, median {:.0} Mbit/s (min {:.0}, max {:.0})",
        bytes / 1_000_000,
        rates[rates.len() / 2],
        rates[0],
        rates[rates.len() - 1]
    );
}

#[test]
#[ignore = "measurement; run explicitly with --ignored"]
fn loopback_goodput_1gb_reno() {
    let bytes = env_u64("CCP_UDP_PERF_BYTES", 1_000_000_000);
    measure("GSO+GRO, mss 1448", bytes, 1448, true, true);
}

#[test]
#[ignore = "measurement; run explicitly with --ignored"]
fn loopback_goodput_variants() {
    let bytes = env_u64("CCP_UDP_PERF_BYTES", 1_000_000_000);
    measure("GSO, no GRO, mss 1448", bytes, 1448, true, false);
    measure("no GSO, no GRO, mss 1448", bytes, 1448, false, false);
    measure("GSO+GRO, mss 8948 (jumbo)", bytes, 8948, true, true);
}
