//! Running recipes with the `ccp-exp` binary: a small simulator sweep and its files, resuming
//! after the process is killed mid-sweep, shards merged into the same bytes as one run, and a
//! short run of the real transport on loopback.

mod common;

use common::ccp_exp;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_ccp-exp")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every file under `dir` (relative path -> bytes), without `environment.json`.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if rel != "environment.json" {
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn assert_same(a: &Path, b: &Path) {
    let fa = files(a);
    let fb = files(b);
    let ka: Vec<&String> = fa.keys().collect();
    let kb: Vec<&String> = fb.keys().collect();
    assert_eq!(
        ka,
        kb,
        "different files in {} and {}",
        a.display(),
        b.display()
    );
    for (k, v) in &fa {
        assert!(
            v == &fb[k],
            "{k} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

const SWEEP: &str = r#"
name: small
description: a small sweep for the tests
duration: 5s
runs: 2
link: {rate: 20mbit, delay: 5ms, queue: droptail, queue_args: packets=50}
parts:
  - name: long
    flows:
      - {algorithm: reno}
      - {algorithm: cubic, start: 1s}
    sweep:
      link.loss: [0, 0.01]
      flows[0].algorithm: [reno, cubic]
  - name: short
    runs: 1
    flows:
      - {algorithm: reno, size: 200KB, count: 5, spacing: 300ms, deadline: 400ms, class: mice, min_rate: 1mbit}
      - {algorithm: cubic, size: 2MB, class: elephant}
"#;

#[test]
fn a_small_sweep_on_the_simulator_writes_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("small.yaml");
    std::fs::write(&recipe, SWEEP).unwrap();
    let out = dir.path().join("results");
    let o = ccp_exp(&["run", s(&recipe), "--out", s(&out), "--jobs", "2"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("small: 9 run(s): 9 run now, 0 kept from before, 0 failed"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("report.html"), "{stdout}");
    for f in [
        "recipe.yaml",
        "recipe.resolved.yaml",
        "plan.json",
        "environment.json",
        "summary.json",
        "summary.csv",
        "report.html",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("recipe.yaml")).unwrap(),
        SWEEP
    );
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("plan.json")).unwrap()).unwrap();
    let runs = plan["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 9);
    for r in runs {
        let d = out.join("runs").join(r["id"].as_str().unwrap());
        for f in [
            "run.json",
            "flows.csv",
            "series.csv",
            "delay_hist.csv",
            "raw/summary.json",
            "raw/flows.csv",
        ] {
            assert!(d.join(f).is_file(), "{} lacks {f}", d.display());
        }
    }
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("runs/long/p03-loss=0.01-algorithm=cubic/r1/run.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(run["seed"], 2);
    assert_eq!(run["axes"]["loss"], "0.01");
    assert_eq!(run["flows"].as_array().unwrap().len(), 2);
    for m in [
        "goodput_mbps",
        "utilization",
        "loss_rate",
        "rtt_p95_ms",
        "owd_p95_ms",
        "qdelay_p99_ms",
        "jain",
    ] {
        assert!(
            run["metrics"][m].is_number(),
            "{m} missing: {}",
            run["metrics"]
        );
    }
    let g = run["metrics"]["goodput_mbps"].as_f64().unwrap();
    assert!(g > 1.0 && g < 20.0, "{g}");
    let short: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("runs/short/p00/r0/run.json")).unwrap(),
    )
    .unwrap();
    for m in [
        "fct_mean_ms",
        "fct_p99_ms",
        "fct_mean_ms:size=100KB-1MB",
        "deadline_meet_rate",
        "satisfaction_mean",
        "fct_mean_ms:class=mice",
    ] {
        assert!(
            short["metrics"][m].is_number(),
            "{m} missing: {}",
            short["metrics"]
        );
    }
    assert_eq!(short["flows"].as_array().unwrap().len(), 6);
    // Summary: mean, std and a Student-t interval over the two runs of each long point.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let p = &summary["parts"][0]["points"][1];
    assert_eq!(p["finished"], 2);
    let gm = &p["metrics"]["goodput_mbps"];
    assert_eq!(gm["n"], 2);
    assert!(gm["mean"].is_number() && gm["ci95"].is_number(), "{gm}");
    // Reno and Cubic on the lossless path draw nothing at random: their two runs are one run
    // repeated, and both the summary and the command say so; the lossy points' runs differ.
    let same: Vec<bool> = (0..4)
        .map(|i| {
            summary["parts"][0]["points"][i]["identical_runs"]
                .as_bool()
                .unwrap()
        })
        .collect();
    assert_eq!(same, [true, true, false, false]);
    let note = stdout
        .split("note: ")
        .nth(1)
        .expect("a note on identical runs");
    assert!(
        note.contains("  long/p00-loss=0-algorithm=reno\n")
            && note.contains("  long/p01-loss=0-algorithm=cubic\n")
            && !note.contains("loss=0.01")
            && !note.contains("short/"),
        "{stdout}"
    );
    // Plots: every SVG file is inlined in the report.
    let plots = std::fs::read_dir(out.join("plots")).unwrap().count();
    assert!(plots >= 15, "{plots} plots");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), plots);
    assert!(
        html.contains("<table") && html.contains("flows[0].algorithm") && html.contains("mice")
    );
    assert!(
        !html.contains("http://")
            || html.matches("http://").count()
                == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "external references"
    );
    assert!(plots_exist(
        &out,
        &[
            "long-00-throughput-p00-loss=0-algorithm=reno.svg",
            "long-04-scatter.svg"
        ]
    ));
    assert!(
        std::fs::read_dir(out.join("plots")).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("fct"))
    );
    // The report command rewrites the same bytes.
    let before = files(&out);
    ccp_exp(&["report", s(&out)]);
    assert_eq!(before, files(&out));
}

#[test]
fn link_jitter_lengthens_the_simulated_round_trip_in_both_models() {
    // One cubic flow on 20 Mbit/s with 10 ms each way, with and without 20 ms of jitter: each
    // direction gains 0-20 ms (10 ms on average), so the median RTT should rise by about 20 ms
    // (measured 60.6 -> 79.2 ms with per-packet draws, 79.3 ms with the smooth default) while the
    // flow keeps the link busy.
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("jitter.yaml");
    std::fs::write(
        &recipe,
        "name: jitter\nduration: 3s\n\
         link: {rate: 20mbit, delay: 10ms, queue: droptail, queue_args: packets=100}\n\
         flows: [{algorithm: cubic}]\nsweep:\n  link.jitter: [0ms, 20ms]\n\
         \x20 link.jitter_model: [uniform, smooth]\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    let o = ccp_exp(&["run", s(&recipe), "--out", s(&out), "--no-progress"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let metric = |point: &str, m: &str| -> f64 {
        let run: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(format!("runs/jitter/{point}/r0/run.json"))).unwrap(),
        )
        .unwrap();
        run["metrics"][m].as_f64().unwrap()
    };
    for (still, jittery) in [
        (
            "p00-jitter=0ms-jitter_model=uniform",
            "p02-jitter=20ms-jitter_model=uniform",
        ),
        (
            "p01-jitter=0ms-jitter_model=smooth",
            "p03-jitter=20ms-jitter_model=smooth",
        ),
    ] {
        let (a, b) = (metric(still, "rtt_p50_ms"), metric(jittery, "rtt_p50_ms"));
        assert!(
            b - a > 10.0 && b - a < 30.0,
            "{jittery}: median RTT {a} ms without jitter, {b} ms with 20 ms"
        );
        assert!(metric(jittery, "utilization") > 0.8, "{jittery}");
    }
}

fn plots_exist(out: &Path, names: &[&str]) -> bool {
    names.iter().all(|n| out.join("plots").join(n).is_file())
}

const LONGER: &str = r#"
name: resume
duration: 40s
seeds: [1, 2, 3, 4, 5, 6, 7, 8]
link: {rate: 100mbit, delay: 10ms, loss: 0.0001, queue: droptail, queue_args: packets=170}
flows: [{algorithm: reno}, {algorithm: cubic}]
"#;

fn count_finished(out: &Path) -> usize {
    std::fs::read_dir(out.join("runs/resume/p00"))
        .map(|rd| {
            rd.filter(|e| {
                let e = e.as_ref().unwrap();
                !e.file_name().to_string_lossy().starts_with('.')
                    && e.path().join("run.json").is_file()
            })
            .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_killed_run_resumes_without_redoing_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("resume.yaml");
    std::fs::write(&recipe, LONGER).unwrap();
    let out = dir.path().join("killed");
    let mut child = Command::new(exe())
        .args(["run", s(&recipe), "--out", s(&out), "--jobs", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while count_finished(&out) < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no run finished in 60 s"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "ccp-exp finished before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let finished: BTreeMap<PathBuf, std::time::SystemTime> =
        std::fs::read_dir(out.join("runs/resume/p00"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("run.json").is_file())
            .map(|p| {
                let m = std::fs::metadata(p.join("run.json"))
                    .unwrap()
                    .modified()
                    .unwrap();
                (p, m)
            })
            .collect();
    assert!(
        finished.len() >= 2 && finished.len() < 8,
        "{} finished",
        finished.len()
    );

    let o = ccp_exp(&["run", s(&recipe), "--out", s(&out), "--jobs", "2"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let n = finished.len();
    assert!(
        stdout.contains(&format!(
            "8 run(s): {} run now, {n} kept from before, 0 failed",
            8 - n
        )),
        "{stdout}"
    );
    // Finished runs were not run again.
    for (p, m) in &finished {
        assert_eq!(
            &std::fs::metadata(p.join("run.json"))
                .unwrap()
                .modified()
                .unwrap(),
            m,
            "{} was redone",
            p.display()
        );
    }
    // No half-written run is left, and the results equal an uninterrupted run's.
    let leftovers: Vec<String> = std::fs::read_dir(out.join("runs/resume/p00"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(count_finished(&out), 8);
    let clean = dir.path().join("clean");
    ccp_exp(&["run", s(&recipe), "--out", s(&clean), "--jobs", "2"]);
    assert_same(&out, &clean);
    // A changed recipe is refused in the same directory.
    std::fs::write(&recipe, LONGER.replace("40s", "41s")).unwrap();
    let refused = Command::new(exe())
        .args(["run", s(&recipe), "--out", s(&out)])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--fresh"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

#[test]
fn a_part_run_alone_then_the_rest_equals_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("small.yaml");
    std::fs::write(&recipe, SWEEP).unwrap();
    let whole = dir.path().join("whole");
    ccp_exp(&["run", s(&recipe), "--out", s(&whole), "--jobs", "2"]);
    // A part that is not there is refused, naming the parts, and nothing is written.
    let bad = dir.path().join("bad");
    let o = Command::new(exe())
        .args(["run", s(&recipe), "--out", s(&bad), "--part", "shrot"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "small has no part \"shrot\" (did you mean \"short\"?); its parts: long, short"
        ),
        "{err}"
    );
    assert!(!bad.exists());
    // One part alone: only its runs are made.
    let parted = dir.path().join("parted");
    let o = ccp_exp(&["run", s(&recipe), "--out", s(&parted), "--part", "short"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("1 run(s) of part short: 1 run now"), "{out}");
    assert!(parted.join("runs/short/p00/r0/run.json").is_file());
    assert!(!parted.join("runs/long").exists());
    // The same command without --part runs the rest, and the directory is the whole run's.
    let o = ccp_exp(&["run", s(&recipe), "--out", s(&parted), "--jobs", "2"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("9 run(s): 8 run now, 1 kept from before"),
        "{out}"
    );
    assert_same(&parted, &whole);
    // --fresh with --part measures that part again and keeps the others' runs.
    let long_runs = parted.join("runs/long");
    let first_long = std::fs::read_dir(&long_runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("r0/run.json");
    let before = std::fs::metadata(&first_long).unwrap().modified().unwrap();
    let o = ccp_exp(&[
        "run",
        s(&recipe),
        "--out",
        s(&parted),
        "--part",
        "short",
        "--fresh",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("1 run(s) of part short: 1 run now, 0 kept"),
        "{out}"
    );
    let after = std::fs::metadata(&first_long).unwrap().modified().unwrap();
    assert_eq!(after, before, "a long run was measured again");
    assert_same(&parted, &whole);
}

#[test]
fn merged_shards_equal_the_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("small.yaml");
    std::fs::write(&recipe, SWEEP).unwrap();
    let whole = dir.path().join("whole");
    ccp_exp(&["run", s(&recipe), "--out", s(&whole), "--jobs", "2"]);
    let mut shards = vec![];
    for i in 0..3 {
        let d = dir.path().join(format!("shard{i}"));
        let o = ccp_exp(&[
            "run",
            s(&recipe),
            "--out",
            s(&d),
            "--shard",
            &format!("{i}/3"),
            "--jobs",
            "1",
        ]);
        assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("3 run(s) of shard {i}/3")));
        shards.push(d);
    }
    let merged = dir.path().join("merged");
    let mut args = vec!["merge", "--out", s(&merged)];
    args.extend(shards.iter().map(|p| s(p)));
    let o = ccp_exp(&args);
    assert!(String::from_utf8_lossy(&o.stdout).contains("merged 3 shard(s): 9 run(s)"));
    assert_same(&merged, &whole);
    // The environment of the merge keeps every shard's invocation.
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("environment.json")).unwrap())
            .unwrap();
    let shards_seen: Vec<&str> = env["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["shard"].as_str())
        .collect();
    assert_eq!(shards_seen, vec!["0/3", "1/3", "2/3"]);
}

#[test]
fn a_short_run_over_udp_on_loopback_with_the_real_agent() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("udp.yaml");
    std::fs::write(
        &recipe,
        "name: loop\nbackend: udp\nduration: 2s\nlink: {delay: 2ms}\nmetrics: {warmup: 300ms}\nflows:\n  - {algorithm: reno}\n  - {algorithm: cubic, params: {beta: 0.8}}\n  - {algorithm: reno, size: 5MB, deadline: 2s, start: 400ms}\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    ccp_exp(&["run", s(&recipe), "--out", s(&out)]);
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("runs/loop/p00/r0/run.json")).unwrap(),
    )
    .unwrap();
    let flows = run["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3);
    assert_eq!(flows[1]["requested"], "cubic:beta=0.8");
    for f in flows {
        assert!(f["goodput_mbps"].as_f64().unwrap() > 1.0, "{f}");
        assert!(f["rtt_p50_ms"].as_f64().unwrap() >= 4.0, "{f}");
    }
    assert_eq!(flows[2]["completed"], true);
    assert!(flows[2]["fct_ms"].is_number());
    // The senders' per-ACK RTT percentiles leave the warm-up out, as the goodput does: the
    // flows that started at 0 count fewer samples than they had ACKs, the one that started
    // after the warm-up about all of them (an ACK that acknowledges no newer packet gives none).
    let r0 = out.join("runs/loop/p00/r0");
    let args = std::fs::read_to_string(r0.join("raw/send.args")).unwrap();
    assert!(args.contains("--rtt-from 300000us"), "{args}");
    let sent: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r0.join("raw/send.json")).unwrap()).unwrap();
    for f in sent["flows"].as_array().unwrap() {
        let (n, acks) = (
            f["rtt_samples"].as_u64().unwrap(),
            f["acks"].as_u64().unwrap(),
        );
        if f["flow"] == 2 {
            assert!(n * 10 >= acks * 9 && n > 0, "{n} samples, {acks} acks");
        } else {
            assert!(n > 0 && n < acks, "{n} samples, {acks} acks");
        }
    }
    assert!(
        run["metrics"]["ratio:alg=cubic/reno"].is_number(),
        "{}",
        run["metrics"]
    );
    // ccp-udp measures one-way delays: the forward queueing delay is there, overall and per
    // algorithm.
    for k in [
        "fwd_qdelay_p50_ms",
        "fwd_qdelay_p99_ms",
        "fwd_qdelay_p50_ms:alg=reno",
        "fwd_qdelay_p50_ms:alg=cubic",
    ] {
        let v = run["metrics"][k].as_f64();
        assert!(v.is_some_and(|v| v >= 0.0), "{k}: {}", run["metrics"]);
    }
    for f in [
        "raw/send.json",
        "raw/recv.json",
        "raw/agent.log",
        "series.csv",
    ] {
        assert!(out.join("runs/loop/p00/r0").join(f).is_file(), "{f}");
    }
    let env = std::fs::read_to_string(out.join("environment.json")).unwrap();
    assert!(
        env.contains("ccp-udp") && env.contains("ccp-agent"),
        "{env}"
    );
    assert!(
        std::fs::read_to_string(out.join("report.html"))
            .unwrap()
            .contains("<svg")
    );
}

#[test]
fn a_short_run_through_the_emulator_when_root() {
    if let Some(why) = ccp_exp::backend::emu::unavailable_here() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("emu.yaml");
    std::fs::write(
        &recipe,
        "name: emu\nbackend: emu\nduration: 3s\nlink: {rate: 20mbit, delay: 10ms, queue: droptail, queue_args: packets=60}\nflows:\n  - {algorithm: reno}\n  - {algorithm: cubic}\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    ccp_exp(&["run", s(&recipe), "--out", s(&out)]);
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("runs/emu/p00/r0/run.json")).unwrap(),
    )
    .unwrap();
    let m = &run["metrics"];
    // Two flows fill most of the 20 Mbit/s link, and the RTT is at least the 20 ms propagation.
    let g = m["goodput_mbps"].as_f64().unwrap();
    assert!(g > 12.0 && g < 20.5, "{m}");
    assert!(m["rtt_p50_ms"].as_f64().unwrap() >= 20.0, "{m}");
    assert!(m["utilization"].as_f64().unwrap() > 0.6, "{m}");
    assert_eq!(run["flows"].as_array().unwrap().len(), 2);
}

#[test]
fn a_kernel_tcp_flow_beside_an_agent_flow_on_the_emulator_when_root() {
    if let Some(why) = ccp_exp::backend::emu::unavailable_here() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("kernel.yaml");
    std::fs::write(
        &recipe,
        "name: ktcp\nbackend: emu\nduration: 4s\nlink: {rate: 20mbit, delay: 10ms, queue: droptail, queue_args: packets=60}\nflows:\n  - {algorithm: reno}\n  - {algorithm: kernel:cubic}\nmetrics:\n  ratios: [{by: algorithm, numerator: kernel:cubic, denominator: reno}]\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    ccp_exp(&["run", s(&recipe), "--out", s(&out)]);
    let run_dir = out.join("runs/ktcp/p00/r0");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    let flows = run["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[0]["algorithm"], "reno");
    assert_eq!(flows[1]["algorithm"], "kernel:cubic");
    for f in flows {
        assert!(f["bytes_delivered"].as_u64().unwrap() > 0, "{f}");
    }
    // The kernel flow gets a real share of the link; the RTT the sender's TCP_INFO reports is
    // at least the 20 ms propagation RTT.
    assert!(
        flows[1]["goodput_mbps"].as_f64().unwrap() > 1.0,
        "{}",
        flows[1]
    );
    assert!(
        flows[1]["rtt_p50_ms"].as_f64().unwrap() >= 20.0,
        "{}",
        flows[1]
    );
    // Together they fill most of the 20 Mbit/s link.
    let m = &run["metrics"];
    let total: f64 = flows
        .iter()
        .map(|f| f["goodput_mbps"].as_f64().unwrap())
        .sum();
    assert!(total > 0.7 * 20.0, "{total} Mbit/s: {m}");
    assert!(m["ratio:alg=kernel:cubic/reno"].is_number(), "{m}");
    assert!(m["jain"].as_f64().unwrap() > 0.0, "{m}");
    // The kernel flow has its own time series, sampled every 10 ms.
    let series = std::fs::read_to_string(run_dir.join("series.csv")).unwrap();
    let samples = series
        .lines()
        .skip(1)
        .filter(|l| l.split(',').nth(1) == Some("1"))
        .count();
    assert!(samples > 100, "{samples} samples of the kernel flow");
}

#[test]
fn validate_counts_a_recipes_errors_and_names_a_simulator_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "link: {rate: 10mbit, delay: 5ms}\nflows: [{algorithm: renoo}]\nfoo: 1\n",
    )
    .unwrap();
    let last_line = |file: &str| {
        let out = Command::new(exe())
            .args(["validate", file])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{file} passed validation");
        let err = String::from_utf8(out.stderr).unwrap();
        err.lines().last().unwrap().to_string()
    };
    assert_eq!(last_line(s(&bad)), format!("{}: 2 error(s)", bad.display()));
    // A simulator scenario: its first error as a recipe and the hint, which is no error of its
    // own.
    assert_eq!(
        last_line("recipes/polycc/jitter.yaml"),
        "recipes/polycc/jitter.yaml: a ccp-sim scenario, not a ccp-exp recipe"
    );
}
