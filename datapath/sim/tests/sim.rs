//! End-to-end properties of the simulator, each running the real agent (reno and cubic from
//! `ccp-algorithms` on portus) in virtual time: determinism, Reno's utilisation and sawtooth,
//! fairness, the queueing-delay bound of a drop-tail queue, trace-driven links, datacenter
//! workloads, and per-flow algorithm choice with parameters.

use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, IncastSpec, LeafSpineSpec, LinkSpec, PoissonSpec, Rate,
    Scenario, SeriesFlows, Size, TopologySpec, WorkloadSpec, example, shared_data_dir,
};
use ccp_sim::trace::Trace;
use ccp_sim::{SimResult, run, write_outputs};
use std::path::Path;

const MBIT: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

/// A dumbbell of `n` senders: bottleneck `mbit` Mbit/s, 20 ms base RTT, access 1 Gbit/s.
fn dumbbell(n: u32, mbit: u64, buffer: Amount, secs: u64) -> Scenario {
    let mut s = example("dumbbell").unwrap();
    s.duration = Dur::secs(secs);
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: n,
        receivers: None,
        bottleneck: LinkSpec::new(Rate::from_bits(mbit * MBIT), Dur::ms(8)).with_buffer(buffer),
        access: LinkSpec::new(Rate::from_bits(1000 * MBIT), Dur::ms(1)),
        sender_delays: vec![],
    });
    s.flows = (0..n)
        .map(|i| FlowSpec::bulk(&format!("s{i}"), &format!("r{i}"), "reno"))
        .collect();
    s
}

fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * sq)
}

/// Bytes the queue `name` transmitted in samples with time in (from, to].
fn tx_between(r: &SimResult, name: &str, from: u64, to: u64) -> u64 {
    r.queue_samples(name)
        .filter(|s| s.time_ns > from && s.time_ns <= to)
        .map(|s| s.tx_bytes)
        .sum()
}

#[test]
fn same_scenario_and_seed_give_identical_files() {
    let mut s = dumbbell(4, 50, Amount::Packets(100), 5);
    if let TopologySpec::Dumbbell(d) = &mut s.topology {
        d.bottleneck.loss = 0.002;
        d.bottleneck.ecn_k = Some(Amount::Packets(30));
        d.bottleneck.jitter = Dur::us(200);
    }
    s.flows[1].alg = "cubic".into();
    s.flows[2].alg = "cubic:beta=0.8".into();
    s.flows[3].size = Some(Size(20_000_000));
    s.flows[3].start = Dur::ms(300);
    s.workloads = vec![WorkloadSpec::Poisson(PoissonSpec {
        load: 0.2,
        cdf: None,
        cdf_points: vec![(1000.0, 0.0), (10_000.0, 0.5), (200_000.0, 1.0)],
        sources: vec!["s0".into(), "s1".into()],
        destinations: vec!["r2".into(), "r3".into()],
        capacity: Some(Rate::from_bits(50 * MBIT)),
        alg: "reno".into(),
        class: "mice".into(),
        start: Dur(0),
        stop: None,
        max_flows: None,
    })];
    s.output.step = Dur::ms(5);
    s.output.flow_series = SeriesFlows::All;
    let dir = tempfile::tempdir().unwrap();
    // Two runs at once, in two threads: simulations share nothing.
    let runs: Vec<SimResult> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..2)
            .map(|_| sc.spawn(|| run(&s, Some(7)).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let other = run(&s, Some(8)).unwrap();
    for (i, r) in runs.iter().enumerate() {
        write_outputs(r, &dir.path().join(format!("run{i}"))).unwrap();
    }
    write_outputs(&other, &dir.path().join("seed8")).unwrap();
    let r = &runs[0];
    assert!(r.flows.len() > 20, "the generator made flows");
    assert!(r.queue("left->right").unwrap().counters.wire_losses > 0);
    assert!(r.queue("left->right").unwrap().counters.ecn_marks > 0);
    let mut differs = false;
    for f in ccp_sim::output::FILES {
        let a = std::fs::read(dir.path().join("run0").join(f)).unwrap();
        let b = std::fs::read(dir.path().join("run1").join(f)).unwrap();
        assert!(!a.is_empty(), "{f} is empty");
        assert!(a == b, "{f} differs between two runs with the same seed");
        let c = std::fs::read(dir.path().join("seed8").join(f)).unwrap();
        differs |= a != c;
    }
    assert!(differs, "another seed changes something");
}

#[test]
fn one_reno_flow_fills_the_link_and_saws_with_period_w_over_2_rtts() {
    let s = dumbbell(1, 100, Amount::Bdp(1.0), 40);
    let r = run(&s, None).unwrap();
    assert_eq!(
        r.agent.algorithms.get("reno"),
        Some(&1),
        "reno ran in the agent"
    );
    assert!(r.agent.reports > 1000);
    // Utilisation of the bottleneck after slow start (from 3 s on).
    let (from, to) = (3 * SEC, 40 * SEC);
    let tx = tx_between(&r, "left->right", from, to);
    let util = tx as f64 / (12_500_000.0 * (to - from) as f64 / 1e9);
    assert!(util >= 0.9, "utilisation {util:.3}");
    // Peaks of the window: a sample followed by a drop of more than 30 %.
    let series: Vec<_> = r.flow_samples(0).filter(|x| x.time_ns >= from).collect();
    let mut peaks = vec![];
    for w in series.windows(2) {
        if (w[1].cwnd_bytes as f64) < 0.7 * w[0].cwnd_bytes as f64 {
            peaks.push((w[0].time_ns, w[0].cwnd_bytes));
        }
    }
    assert!(peaks.len() >= 4, "peaks: {peaks:?}");
    for p in peaks.windows(2) {
        let period = (p[1].0 - p[0].0) as f64 / 1e9;
        // W/2 round trips of the mean RTT of that cycle.
        let cycle: Vec<_> = series
            .iter()
            .filter(|x| x.time_ns > p[0].0 && x.time_ns <= p[1].0)
            .collect();
        let rtt = cycle.iter().map(|x| x.srtt_us as f64).sum::<f64>() / cycle.len() as f64 / 1e6;
        let w_pkts = p[1].1 as f64 / 1448.0;
        let expect = w_pkts / 2.0 * rtt;
        assert!(
            (period / expect - 1.0).abs() <= 0.25,
            "period {period:.2} s, W = {w_pkts:.0} pkts, RTT {rtt:.4} s, W/2 RTTs = {expect:.2} s"
        );
    }
    // Reno halves: the window after a peak is about half of it.
    let after = series
        .iter()
        .find(|x| x.time_ns > peaks[0].0)
        .unwrap()
        .cwnd_bytes as f64;
    let ratio = after / peaks[0].1 as f64;
    assert!((0.45..0.56).contains(&ratio), "decrease ratio {ratio}");
}

#[test]
fn reno_flows_share_fairly() {
    for n in [2u32, 4, 8] {
        let s = dumbbell(n, 100, Amount::Bdp(1.0), 60);
        let r = run(&s, None).unwrap();
        let bytes: Vec<f64> = r.flows.iter().map(|f| f.bytes_delivered as f64).collect();
        let j = jain(&bytes);
        assert!(j >= 0.95, "{n} flows: Jain {j:.3}, bytes {bytes:?}");
        let total: f64 = bytes.iter().sum();
        assert!(
            total * 8.0 / 60.0 > 85e6,
            "{n} flows: {} Mbit/s",
            total * 8.0 / 60e6
        );
    }
}

#[test]
fn a_queue_of_b_bytes_caps_queueing_delay_at_b_over_c() {
    for (mbit, buffer) in [
        (100, Amount::Bytes(100_000)),
        (10, Amount::Bytes(30_000)),
        (20, Amount::Packets(40)),
    ] {
        let mut s = dumbbell(3, mbit, buffer, 10);
        s.flows[1].alg = "cubic".into();
        let r = run(&s, None).unwrap();
        let q = r.queue("left->right").unwrap();
        let rate = mbit * MBIT / 8;
        let b = match buffer {
            Amount::Bytes(b) => b,
            Amount::Packets(p) => p * 1500,
            Amount::Bdp(_) => unreachable!(),
        };
        let bound = (b + 1500) as f64 / rate as f64 * 1e9;
        assert!(q.counters.drops > 0, "the buffer overflowed");
        assert!(
            q.qdelay.max() as f64 <= bound,
            "{mbit} Mbit/s, {buffer}: max queueing delay {} ns > {bound} ns",
            q.qdelay.max()
        );
        // ... and the queue did fill: the largest delay is near the bound.
        assert!(q.qdelay.max() as f64 >= 0.9 * b as f64 / rate as f64 * 1e9);
    }
}

#[test]
fn a_saturated_trace_link_delivers_exactly_the_trace() {
    let path = shared_data_dir().join("mahimahi/TMobile-LTE-short.down");
    if !path.exists() {
        eprintln!("skipping: {} is not present", path.display());
        return;
    }
    let trace = Trace::load(&path).unwrap();
    let mut s = example("cellular").unwrap();
    s.duration = Dur::secs(5);
    s.transport.mss = 1452; // 1504-byte packets: one per opportunity
    s.output.step = Dur::ms(1);
    if let TopologySpec::Dumbbell(d) = &mut s.topology {
        d.bottleneck.buffer = None; // never drop: the queue stays full after slow start
        d.bottleneck.trace = Some(path.clone());
    }
    s.flows = vec![FlowSpec::bulk("s0", "r0", "reno")];
    let r = run(&s, None).unwrap();
    let (from, to) = (SEC, 5 * SEC);
    assert!(
        r.queue_samples("left->right")
            .filter(|x| x.time_ns > from && x.time_ns <= to)
            .all(|x| x.bytes > 0),
        "the queue stayed busy"
    );
    let served = tx_between(&r, "left->right", from, to);
    let opportunities = trace.opportunities_between(from, to);
    assert!(opportunities > 1000);
    assert_eq!(served, opportunities * 1504);
    let q = r.queue("left->right").unwrap();
    assert_eq!(q.counters.tx_bytes, q.counters.tx_packets * 1504);
}

#[test]
fn flows_choose_their_algorithm_and_parameters_through_the_agent() {
    // Two single-flow runs that differ only in the name the Create message carries.
    let trough = |alg: &str| {
        let mut s = dumbbell(1, 100, Amount::Bdp(1.0), 20);
        s.flows[0].alg = alg.into();
        let r = run(&s, None).unwrap();
        let name = alg.split(':').next().unwrap();
        assert_eq!(r.agent.algorithms.get(name), Some(&1), "{alg}");
        let xs: Vec<_> = r.flow_samples(0).filter(|x| x.time_ns > 3 * SEC).collect();
        let mut ratios = vec![];
        for w in xs.windows(2) {
            if (w[1].cwnd_bytes as f64) < 0.9 * w[0].cwnd_bytes as f64 {
                ratios.push(w[1].cwnd_bytes as f64 / w[0].cwnd_bytes as f64);
            }
        }
        assert!(!ratios.is_empty(), "{alg}: no decrease");
        ratios.iter().sum::<f64>() / ratios.len() as f64
    };
    let half = trough("reno");
    let seven = trough("reno:beta=0.7");
    assert!((0.45..0.56).contains(&half), "reno: {half}");
    assert!((0.65..0.76).contains(&seven), "reno:beta=0.7: {seven}");
    // Unknown algorithms are refused before anything runs.
    let mut s = dumbbell(1, 10, Amount::Packets(10), 1);
    s.flows[0].alg = "renoo".into();
    let e = run(&s, None).err().unwrap().to_string();
    assert!(e.contains("did you mean \"reno\""), "{e}");
}

#[test]
fn leaf_spine_websearch_flows_complete_and_spread_over_spines() {
    let cdf = shared_data_dir().join("workloads/websearch.csv");
    let mut s = example("leaf-spine").unwrap();
    s.duration = Dur::ms(30);
    if let TopologySpec::LeafSpine(l) = &mut s.topology {
        *l = LeafSpineSpec {
            spines: 2,
            leaves: 4,
            hosts_per_leaf: 4,
            ..l.clone()
        };
    }
    if let WorkloadSpec::Poisson(p) = &mut s.workloads[0] {
        p.load = 0.3;
        p.stop = Some(Dur::ms(10));
        if !cdf.exists() {
            p.cdf = None;
            p.cdf_points = vec![(1000.0, 0.0), (100_000.0, 0.8), (1_000_000.0, 1.0)];
        }
    }
    let r = run(&s, None).unwrap();
    let done = r.flows.iter().filter(|f| f.completed).count();
    assert!(r.flows.len() > 20, "{} flows", r.flows.len());
    assert!(
        done as f64 >= 0.8 * r.flows.len() as f64,
        "{done} of {} completed",
        r.flows.len()
    );
    for f in r.flows.iter().filter(|f| f.completed) {
        assert!(f.fct_ns.unwrap() >= f.ideal_fct_ns.unwrap(), "{f:?}");
        assert_eq!(f.bytes_delivered, f.size.unwrap());
    }
    for leaf in 0..4 {
        for spine in 0..2 {
            let q = r.queue(&format!("leaf{leaf}->spine{spine}")).unwrap();
            assert!(q.counters.tx_packets > 0, "leaf{leaf}->spine{spine} idle");
        }
    }
}

#[test]
fn incast_rounds_run_to_completion() {
    let mut s = example("incast").unwrap();
    if let TopologySpec::LeafSpine(l) = &mut s.topology {
        l.hosts_per_leaf = 9;
    }
    if let WorkloadSpec::Incast(c) = &mut s.workloads[0] {
        *c = IncastSpec {
            rounds: 5,
            ..c.clone()
        };
    }
    let r = run(&s, None).unwrap();
    assert_eq!(r.flows.len(), 8 * 5);
    assert!(
        r.flows.iter().all(|f| f.completed),
        "every response arrived"
    );
    assert!(r.end_ns < s.duration.0, "stopped when done");
    let last_round: Vec<_> = r.flows.iter().filter(|f| f.group == "w0.r5").collect();
    assert_eq!(last_round.len(), 8);
    let q = r.queue("leaf0->h0").unwrap();
    assert!(
        q.counters.max_packets > 8,
        "the responses met at the aggregator's port"
    );
}

#[test]
fn scenario_files_load_relative_to_their_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.csv"), "100,0\n5000,1\n").unwrap();
    let yaml = "
duration: 50ms
stop_when_done: true
topology:
  kind: custom
  hosts: [a, b]
  switches: [x]
  links:
    - {a: a, b: x, spec: {rate: 1gbit, delay: 10us}}
    - {a: x, b: b, spec: {rate: 100mbit, delay: 10us, buffer: 50pkts}}
workloads:
  - {kind: poisson, load: 0.5, cdf: c.csv, sources: [a], destinations: [b], alg: cubic, max_flows: 20}
";
    let p = dir.path().join("s.yaml");
    std::fs::write(&p, yaml).unwrap();
    let s = Scenario::load(&p).unwrap();
    let r = run(&s, None).unwrap();
    assert_eq!(r.flows.len(), 20);
    assert!(r.flows.iter().all(|f| f.completed));
    assert_eq!(r.agent.algorithms.get("cubic"), Some(&20));
    assert!(r.agent.flows_closed >= 19, "closed flows reach the agent");
    let out = dir.path().join("out");
    write_outputs(&r, &out).unwrap();
    let flows = std::fs::read_to_string(out.join("flows.csv")).unwrap();
    assert_eq!(flows.lines().count(), 21);
    assert!(Path::new(&out.join("summary.json")).exists());
}

#[test]
fn every_built_in_example_runs() {
    for name in ccp_sim::scenario::EXAMPLES {
        let mut s = example(name).unwrap();
        if *name == "cellular"
            && !shared_data_dir()
                .join("mahimahi/TMobile-LTE-short.down")
                .exists()
        {
            eprintln!("skipping {name}: traces not present");
            continue;
        }
        if *name == "leaf-spine" && !shared_data_dir().join("workloads/websearch.csv").exists() {
            eprintln!("skipping {name}: workload not present");
            continue;
        }
        s.duration = Dur(s
            .duration
            .0
            .min(if *name == "leaf-spine" { 3 * MBIT } else { SEC }));
        let r = run(&s, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            r.counters.delivered_packets > 100,
            "{name}: {:?}",
            r.counters
        );
        assert_eq!(
            r.counters.invoke_errors + r.counters.engine_errors,
            0,
            "{name}"
        );
        assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0, "{name}");
    }
}

#[test]
fn check_refuses_what_run_would_refuse_without_simulating() {
    let good = dumbbell(2, 10, Amount::Bdp(1.0), 1);
    assert!(ccp_sim::check(&good).is_ok());
    let mut bad_alg = good.clone();
    bad_alg.flows[1].alg = "cubc".into();
    let e = ccp_sim::check(&bad_alg).unwrap_err().to_string();
    assert!(e.contains("flows[1].alg") && e.contains("cubic"), "{e}");
    let mut bad_param = good.clone();
    bad_param.flows[0].alg = "cubic:beta=high".into();
    let e = ccp_sim::check(&bad_param).unwrap_err().to_string();
    assert!(e.contains("flows[0].alg") && e.contains("beta"), "{e}");
    let mut bad_host = good.clone();
    bad_host.flows[0].dst = "r7".into();
    let e = ccp_sim::check(&bad_host).unwrap_err().to_string();
    assert!(e.contains("r7"), "{e}");
    // A PolyCC policy is judged over the agent's settings, as the agent lays them: a target
    // the agent gives completes a flow's fuse=closest; without it the flow is refused.
    let mut closest = good.clone();
    closest.flows[0].alg = "polycc:fuse=closest".into();
    let e = ccp_sim::check(&closest).unwrap_err().to_string();
    assert!(
        e.contains("flows[0].alg") && e.contains("needs a target"),
        "{e}"
    );
    closest.agent.params = vec!["polycc.target=2e5".into()];
    assert!(ccp_sim::check(&closest).is_ok());
    // The agent's settings for its default algorithm are what unmatched flows run with.
    let mut bad_default = good.clone();
    bad_default.agent.default_alg = "polycc".into();
    bad_default.agent.params = vec!["polycc.fuse=closest".into()];
    let e = ccp_sim::check(&bad_default).unwrap_err().to_string();
    assert!(
        e.contains("agent.params") && e.contains("needs a target"),
        "{e}"
    );
    for s in [&bad_alg, &bad_param, &bad_host, &bad_default] {
        assert!(run(s, None).is_err(), "run accepts what check refuses");
    }
}
