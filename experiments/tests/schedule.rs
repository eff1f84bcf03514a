//! `link.schedule`: the uplink's rate changing during a run, on the simulator (virtual time) and
//! on the emulator (real time, root only). A flow's throughput follows each step, and the
//! run's capacity and utilisation are taken against the time-weighted capacity of the measured
//! window, not the initial rate. (Parsing errors are in the broken-recipe corpus,
//! tests/broken/46-50.)

mod common;

use common::{mean_goodput, run_json, run_recipe};

#[test]
fn a_flow_follows_rate_steps_and_utilisation_uses_the_schedule_on_the_simulator() {
    // 20 -> 40 -> 20 Mbit/s at 8 and 16 s, 20 ms RTT, a 100-KB drop-tail buffer (one BDP at
    // 40 Mbit/s), one reno or cubic flow. Measured (goodput, from 1 s after each step to the
    // next): reno 19.0 / 35.6 / 19.1, cubic 19.3 / 38.6 / 19.3 Mbit/s; utilisation 0.96 and
    // 1.00 (with the downlink stepping too).
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("step.yaml");
    std::fs::write(
        &recipe,
        "name: step\nduration: 24s\n\
         link:\n  rate: 20mbit\n  delay: 10ms\n  queue: droptail\n  queue_args: bytes=100000\n  \
         schedule:\n    - {at: 8s, rate: 40mbit}\n    - {at: 16s, rate: 20mbit}\n\
         metrics: {warmup: 2s}\nflows: [{algorithm: reno}]\n\
         sweep:\n  flows[0].algorithm: [reno, cubic]\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    run_recipe(&recipe, &out);
    for point in ["p00-algorithm=reno", "p01-algorithm=cubic"] {
        let run_dir = out.join("runs/step").join(point).join("r0");
        // Each period's goodput is 85-100 % of that period's rate (goodput leaves out headers
        // and the sawtooth's troughs; the time a flow needs to fill the doubled rate falls in
        // the first second, which is left out).
        for (from, to, rate) in [(3.0, 8.0, 20.0), (9.0, 16.0, 40.0), (17.0, 24.0, 20.0)] {
            let g = mean_goodput(&run_dir, 0, from, to);
            eprintln!("{point}: {g:.2} Mbit/s over {from}-{to} s at {rate} Mbit/s");
            assert!(
                (0.85 * rate..=rate).contains(&g),
                "{point}: {g:.2} Mbit/s over {from}-{to} s at {rate} Mbit/s"
            );
        }
        let run = run_json(&run_dir);
        // The capacity of the measured window (2-24 s): (6·20 + 8·40 + 8·20) / 22 Mbit/s.
        let cap = run["capacity_mbps"].as_f64().unwrap();
        let want = (6.0 * 20.0 + 8.0 * 40.0 + 8.0 * 20.0) / 22.0;
        assert!(
            (cap - want).abs() < 1e-6,
            "{point}: capacity {cap}, want {want}"
        );
        // Against the initial 20 Mbit/s the utilisation would read about 1.3, against the
        // mean over the whole run (26.7) it would be 2 % higher than against the window's.
        let u = run["metrics"]["utilization"].as_f64().unwrap();
        eprintln!("{point}: capacity {cap:.4} Mbit/s, utilisation {u:.4}");
        assert!((0.9..=1.0).contains(&u), "{point}: utilisation {u}");
        let g = run["metrics"]["goodput_mbps"].as_f64().unwrap();
        assert!(
            g <= u * cap,
            "{point}: goodput {g} above the link's {}",
            u * cap
        );
    }
}

#[test]
fn a_rate_step_on_the_emulator_when_root() {
    if let Some(why) = ccp_exp::backend::emu::unavailable_here() {
        eprintln!("skipped: {why}");
        return;
    }
    // 20 -> 40 Mbit/s at 3 s on the emulator, one cubic flow, 6 s in real time. The step counts
    // from the emulated link's start, shortly before the flows' time zero. Measured: 19.5 Mbit/s
    // over 1-3 s, 38.5 over 4-6 s, utilisation 1.00.
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("estep.yaml");
    std::fs::write(
        &recipe,
        "name: estep\nbackend: emu\nduration: 6s\n\
         link:\n  rate: 20mbit\n  delay: 10ms\n  queue: droptail\n  queue_args: bytes=100000\n  \
         schedule: [{at: 3s, rate: 40mbit}]\n\
         metrics: {warmup: 1s}\nflows: [{algorithm: cubic}]\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    run_recipe(&recipe, &out);
    let run_dir = out.join("runs/estep/p00/r0");
    let before = mean_goodput(&run_dir, 0, 1.0, 3.0);
    let after = mean_goodput(&run_dir, 0, 4.0, 6.0);
    assert!((16.0..=20.5).contains(&before), "{before:.2} Mbit/s at 20");
    assert!((32.0..=41.0).contains(&after), "{after:.2} Mbit/s at 40");
    let run = run_json(&run_dir);
    let cap = run["capacity_mbps"].as_f64().unwrap();
    let end = run["end_s"].as_f64().unwrap();
    eprintln!(
        "{before:.2} Mbit/s over 1-3 s, {after:.2} over 4-6 s; capacity {cap:.2}, utilisation {}",
        run["metrics"]["utilization"]
    );
    let want = (2.0 * 20.0 + (end - 3.0) * 40.0) / (end - 1.0);
    assert!((cap - want).abs() < 1e-3, "capacity {cap}, want {want}");
    let u = run["metrics"]["utilization"].as_f64().unwrap();
    // The emulator's link counter is read every 20 ms and cut at the warm-up's and the flows'
    // end (measured: 0.998). A counter that is not refreshed while the link is saturated reads
    // only the run's first packets at the warm-up, and the whole run's bytes land after it:
    // 1.11; the bytes after the flows' end (final acknowledgements) read 1.003 on four flows.
    assert!((0.95..=1.01).contains(&u), "utilisation {u}");
}
