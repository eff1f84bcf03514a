//! Flows in the reverse direction (`reverse: true`: receiver side to sender side, data on the
//! downlink, ACKs on the uplink): the recipe form and a sweep over it, a simulator run in which
//! a reverse bulk flow queues a forward flow's ACKs (its RTT rises, the bottleneck's forward
//! queue does not) while delivering data itself, and (as root) a short emulator run with a
//! reverse ccp-udp flow and a reverse kernel TCP flow.

mod common;

use common::{ccp_exp, emu_kernel_skip_reason, run_json, run_recipe, s};
use serde_json::Value;
use std::path::Path;

fn load(dir: &Path, text: &str) -> Result<ccp_exp::experiment::Experiment, String> {
    let p = dir.join("r.yaml");
    std::fs::write(&p, text).unwrap();
    ccp_exp::load(&p).map_err(|e| e.to_string())
}

fn metric(run: &Value, key: &str) -> f64 {
    run["metrics"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no metric {key}: {}", run["metrics"]))
}

#[test]
fn reverse_is_a_flow_field_that_sweeps_and_that_loopback_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let e = load(
        dir.path(),
        "backend: sim\nlink: {rate: 20mbit, delay: 5ms}\nflows:\n  - {algorithm: reno}\n  - {algorithm: cubic, reverse: true}\nsweep:\n  flows[1].reverse: [false, true]\n",
    )
    .unwrap();
    let points = &e.parts[0].points;
    assert_eq!(points.len(), 2);
    let rev: Vec<(bool, bool)> = points
        .iter()
        .map(|p| (p.recipe.flows[0].reverse, p.recipe.flows[1].reverse))
        .collect();
    assert_eq!(rev, [(false, false), (false, true)]);
    for backend in ["emu", "quic"] {
        let text = format!(
            "backend: {backend}\nlink: {{rate: 20mbit, delay: 5ms}}\nflows:\n  - {{algorithm: reno, reverse: true}}\n  - {{algorithm: kernel:cubic, reverse: true}}\n"
        );
        let e = load(dir.path(), &text).unwrap();
        assert!(e.parts[0].points[0].recipe.flows.iter().all(|f| f.reverse));
    }
    let err = load(
        dir.path(),
        "backend: udp\nflows:\n  - {algorithm: reno, reverse: yes}\n",
    )
    .unwrap_err();
    assert!(
        err.contains(
            "flows[0].reverse: a reverse flow (receiver to sender) cannot run on backend udp"
        ),
        "{err}"
    );
    // Metric names: the reverse flows' are `:dir=reverse`.
    assert!(ccp_exp::recipe::check_metric_name("goodput_mbps:dir=reverse").is_ok());
    assert!(ccp_exp::recipe::check_metric_name("goodput_mbps:dir=forward").is_err());
}

#[test]
fn a_reverse_flow_queues_the_forward_flows_acks_in_the_simulator() {
    // One RTCP flow (D from the one-way delay) on a 20 Mbit/s dumbbell, 10 ms each way and 100
    // packets of buffer each way: alone, then with a cubic flow from 0.5 s that runs forward
    // (reverse: false) or backward (true), filling the downlink's queue with its data.
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("rev.yaml");
    std::fs::write(
        &recipe,
        "name: rev\nbackend: sim\nduration: 4s\nlink: {rate: 20mbit, delay: 10ms, queue: droptail, queue_args: packets=100}\nmetrics: {warmup: 1s}\nsim: {step: 10ms}\nparts:\n  - name: alone\n    flows:\n      - {algorithm: rtcp, params: {delta: 20mbit, max-rate: 20mbit}}\n  - name: loaded\n    flows:\n      - {algorithm: rtcp, params: {delta: 20mbit, max-rate: 20mbit}}\n      - {algorithm: cubic, start: 500ms}\n    sweep:\n      flows[1].reverse: [false, true]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    run_recipe(&recipe, &out);
    let runs = out.join("runs");
    let alone = run_json(&runs.join("alone/p00/r0"));
    let fwd = run_json(&runs.join("loaded/p00-reverse=false/r0"));
    let rev_dir = runs.join("loaded/p01-reverse=true/r0");
    let rev = run_json(&rev_dir);

    // The reverse flow is a flow of the run, marked so, and delivers data on the downlink.
    let flows = rev["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    assert!(flows[0].get("reverse").is_none(), "{}", flows[0]);
    assert_eq!(flows[1]["reverse"], true, "{}", flows[1]);
    let rev_goodput = metric(&rev, "goodput_mbps:dir=reverse");
    assert!(
        rev_goodput > 0.7 * 20.0,
        "the reverse cubic flow should take most of the 20 Mbit/s downlink: {rev_goodput}"
    );
    let util = metric(&rev, "utilization:dir=reverse");
    assert!((util - rev_goodput / 20.0).abs() < 1e-3, "{util}");
    // Run-level figures are the forward flow's alone.
    assert_eq!(metric(&rev, "flows"), 1.0);
    let fwd_row = flows[0]["goodput_mbps"].as_f64().unwrap();
    assert!(
        (metric(&rev, "goodput_mbps") - fwd_row).abs() < 0.01 * fwd_row.max(0.1),
        "{} against the forward flow's {fwd_row}",
        metric(&rev, "goodput_mbps")
    );
    let csv = std::fs::read_to_string(rev_dir.join("flows.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",direction"), "{csv}");
    assert!(csv.lines().nth(2).unwrap().ends_with(",reverse"), "{csv}");
    // The same cubic flow forward is an ordinary second forward flow.
    assert_eq!(metric(&fwd, "flows"), 2.0);
    assert!(
        !fwd["metrics"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.contains("dir=")),
        "{}",
        fwd["metrics"]
    );
    let fwd_csv =
        std::fs::read_to_string(runs.join("loaded/p00-reverse=false/r0/flows.csv")).unwrap();
    assert!(!fwd_csv.contains("direction"), "{fwd_csv}");

    // The reverse flow's data queues the forward flow's ACKs: its RTT rises well above its
    // RTT alone, while the bottleneck's own (forward) queue stays short of that rise.
    let rtt_alone = metric(&alone, "rtt_p50_ms");
    let rtt_loaded = metric(&rev, "rtt_p50_ms");
    let fwd_queue = metric(&rev, "qdelay_p50_ms");
    eprintln!(
        "rtcp RTT p50 alone {rtt_alone:.1} ms, with a reverse cubic flow {rtt_loaded:.1} ms (forward queue p50 {fwd_queue:.2} ms); reverse goodput {rev_goodput:.2} Mbit/s, rtcp {fwd_row:.2}"
    );
    assert!(
        rtt_loaded > rtt_alone + 10.0,
        "a reverse bulk flow should lengthen the forward flow's RTT: {rtt_loaded} against {rtt_alone} ms alone"
    );
    assert!(
        fwd_queue < (rtt_loaded - rtt_alone) / 2.0,
        "the RTT's rise should be on the return path, not the forward queue ({fwd_queue} ms)"
    );
    assert!(
        fwd_row > 0.5,
        "the forward flow still delivers: {fwd_row} Mbit/s"
    );
}

#[test]
fn emu_reverse_flows_run_from_the_receiver_host_when_root() {
    if let Some(why) = emu_kernel_skip_reason(&["ccp-agent", "ccp-udp"]) {
        eprintln!("skipped: {why}");
        return;
    }
    // 20 Mbit/s, 10 ms each way, 100 packets each way; a forward RTCP flow, alone and then
    // with a reverse ccp-udp cubic flow and (from 1 s) a reverse kernel Cubic flow.
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("emu-rev.yaml");
    std::fs::write(
        &recipe,
        "name: emu-rev\nbackend: emu\nduration: 4s\nlink: {rate: 20mbit, delay: 10ms, queue: droptail, queue_args: packets=100}\nudp: {datapath: engine, trace_interval: 100ms}\nmetrics: {warmup: 1500ms}\nparts:\n  - name: alone\n    flows:\n      - {algorithm: rtcp, params: {delta: 20mbit, max-rate: 20mbit}}\n  - name: loaded\n    flows:\n      - {algorithm: rtcp, params: {delta: 20mbit, max-rate: 20mbit}}\n      - {algorithm: cubic, reverse: true}\n      - {algorithm: \"kernel:cubic\", reverse: true, start: 1s}\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    ccp_exp(&["run", s(&recipe), "--out", s(&out), "--no-progress"]);
    let alone = run_json(&out.join("runs/alone/p00/r0"));
    let dir = out.join("runs/loaded/p00/r0");
    let run = run_json(&dir);
    for f in ["send-rev.json", "recv-rev.json", "send.json", "recv.json"] {
        assert!(dir.join("raw").join(f).is_file(), "no raw/{f}");
    }
    let flows = run["flows"].as_array().unwrap();
    let algs: Vec<(&str, bool)> = flows
        .iter()
        .map(|f| {
            (
                f["algorithm"].as_str().unwrap(),
                f["reverse"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        algs,
        [("rtcp", false), ("cubic", true), ("kernel:cubic", true)]
    );
    for f in flows {
        assert!(f["bytes_delivered"].as_u64().unwrap() > 100_000, "{f}");
    }
    let rev_goodput = metric(&run, "goodput_mbps:dir=reverse");
    let rtt_alone = metric(&alone, "rtt_p50_ms");
    let rtt_loaded = metric(&run, "rtt_p50_ms");
    eprintln!(
        "emulator: rtcp RTT p50 alone {rtt_alone:.1} ms, loaded {rtt_loaded:.1} ms; reverse goodput {rev_goodput:.2} Mbit/s, rtcp {:.2}",
        metric(&run, "goodput_mbps")
    );
    assert!(
        rev_goodput > 0.5 * 20.0,
        "the reverse flows should fill much of the 20 Mbit/s downlink: {rev_goodput}"
    );
    assert!(
        rtt_loaded > rtt_alone + 10.0,
        "the reverse flows' data should queue the forward flow's ACKs: RTT p50 {rtt_loaded} against {rtt_alone} ms alone"
    );
    assert_eq!(metric(&run, "flows"), 1.0);
}
