//! ccp-udp's one-way delay against a real forward queue: one cubic flow (`ccp-udp` with the real
//! `ccp-agent`) fills the drop-tail buffer of an emulated 20 Mbit/s bottleneck with 10 ms each
//! way, for 6 s. The bottleneck is on the data path only (the ACKs' way back is not
//! rate-limited), so the queue the RTT sees is the forward queue, and the flow's mean one-way
//! delay excess (receive minus send time stamp, above the flow's smallest) must measure it: it
//! is compared with the same flow's median RTT above its minimum.
//!
//! Needs root and `/dev/net/tun` and the release binaries (`cargo build --release --bins`);
//! without them the test says why and skips. The testbed's drop removes every namespace,
//! device and process.

use ccp_emu::{Testbed, TestbedConfig, cleanup};
use ccp_tests::Agent;
use ccp_tests::emu_support::{self, wait_for};
use std::time::Duration;

const RATE_BPS: u64 = 20_000_000;
const ONE_WAY_MS: u64 = 10;
/// 100 packets of 1500 bytes: 60 ms of queue at 20 Mbit/s, three times the base RTT.
const BUFFER_PACKETS: u32 = 100;
const FLOW_SECS: f64 = 6.0;
const PREFIX: &str = "emuowd";

#[test]
fn the_one_way_delay_measures_the_forward_queue_on_the_emulator() {
    if let Some(why) = emu_support::skip_reason(&["ccp-agent", "ccp-udp"], &[]) {
        println!("skipping emu_owd: {why}");
        return;
    }
    let _ = cleanup::sweep(PREFIX);
    let dir = tempfile::tempdir().unwrap();
    let tb = Testbed::new(TestbedConfig {
        name_prefix: PREFIX.into(),
        command_line: "tests/emu_owd.rs".into(),
        ..TestbedConfig::dumbbell(
            1,
            RATE_BPS,
            BUFFER_PACKETS,
            Duration::from_millis(ONE_WAY_MS),
        )
    })
    .unwrap();
    let agent = Agent::start(dir.path(), &[]).unwrap();
    let mut f =
        emu_support::start_udp(&tb, &agent, dir.path(), 0, "cubic", 5600, FLOW_SECS).unwrap();
    wait_for(&mut f.send, "ccp-udp send", Duration::from_secs(30)).unwrap();
    wait_for(&mut f.recv, "ccp-udp recv", Duration::from_secs(10)).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&f.json).unwrap()).unwrap();
    let s = &v["flows"][0];
    let owd_ms = s["owd_excess_mean_us"].as_f64().expect("a one-way delay") / 1e3;
    let queue_ms = s["rtt_p50_ms"].as_f64().unwrap() - s["rtt_min_ms"].as_f64().unwrap();
    eprintln!(
        "cubic: one-way delay excess {owd_ms:.1} ms, median RTT above its minimum {queue_ms:.1} ms"
    );
    // Cubic keeps the buffer mostly full: tens of ms of queue.
    assert!(queue_ms > 10.0, "{s}");
    // The mean one-way excess against the median RTT excess: the same queue, as a mean rather
    // than a median (measured 46.6 against 48.4 and 48.3 ms in two runs).
    assert!(
        owd_ms > 0.5 * queue_ms && owd_ms < 1.5 * queue_ms,
        "one-way {owd_ms:.1} ms against the RTT's {queue_ms:.1} ms: {s}"
    );
    drop(agent);
    drop(tb);
}
