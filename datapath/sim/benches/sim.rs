//! Simulator benchmarks (prints figures; not a pass/fail test).
//!
//! 1. A 2-flow Reno dumbbell at 100 Mbit/s (20 ms base RTT, 1 BDP drop-tail buffer): events per
//!    second and wall time per simulated second.
//! 2. A leaf-spine fabric of 3 spines, 8 leaves and 12 hosts per leaf (96 hosts), 10 Gbit/s host
//!    links and 40 Gbit/s fabric links, under 50 % websearch load (Reno).
//! 3. The same dumbbell in ns-3 (`bench/ns3_dumbbell.py`, PyPI `ns3`), when `python3 -c 'from ns
//!    import ns'` works: ratio of wall times and of mean throughput.
//!
//! Knobs (environment): `SIM_BENCH_DUMBBELL_SECS` (60), `SIM_BENCH_LEAFSPINE_MS` (20),
//! `SIM_BENCH_NS3` (1; 0 skips ns-3), `SIM_BENCH_PYTHON` (python3).
//!
//!     cargo bench -p ccp-sim --bench sim

use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, LinkSpec, Rate, Scenario, SeriesFlows, TopologySpec,
    example, shared_data_dir,
};
use ccp_sim::{SimResult, run};
use std::process::Command;
use std::time::Instant;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn timed(s: &Scenario) -> (SimResult, f64) {
    let t0 = Instant::now();
    let r = run(s, None).expect("scenario runs");
    (r, t0.elapsed().as_secs_f64())
}

fn report(label: &str, r: &SimResult, wall: f64) {
    let sim = r.end_ns as f64 / 1e9;
    println!(
        "{label}: {sim:.3} s simulated in {wall:.3} s wall = {:.4} s wall per simulated s; {} events = {:.2} M events/s; {} data + {} ACK packets = {:.2} M packets/s; {} engine invokes, {} agent reports",
        wall / sim,
        r.counters.events,
        r.counters.events as f64 / wall / 1e6,
        r.counters.data_packets,
        r.counters.ack_packets,
        (r.counters.data_packets + r.counters.ack_packets) as f64 / wall / 1e6,
        r.counters.invokes,
        r.agent.reports,
    );
}

fn dumbbell(secs: u64) -> Scenario {
    let mut s = example("dumbbell").expect("built-in");
    s.name = "bench-dumbbell".into();
    s.duration = Dur::secs(secs);
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: 2,
        receivers: None,
        bottleneck: LinkSpec::new(Rate::from_bits(100_000_000), Dur::ms(8))
            .with_buffer(Amount::Bytes(250_000)),
        access: LinkSpec::new(Rate::from_bits(1_000_000_000), Dur::ms(1)),
        sender_delays: vec![],
    });
    s.flows = vec![
        FlowSpec::bulk("s0", "r0", "reno"),
        FlowSpec::bulk("s1", "r1", "reno"),
    ];
    s.output.flow_series = SeriesFlows::None;
    s
}

fn main() {
    // 1. Dumbbell.
    let secs = env_u64("SIM_BENCH_DUMBBELL_SECS", 60);
    let s = dumbbell(secs);
    let (r, wall) = timed(&s);
    report("dumbbell 2 x reno, 100 Mbit/s", &r, wall);
    let goodput: Vec<f64> = r
        .flows
        .iter()
        .map(|f| f.bytes_delivered as f64 * 8.0 / secs as f64)
        .collect();
    let total: f64 = goodput.iter().sum();
    println!(
        "  mean goodput per flow {:?} Mbit/s, total {:.2} Mbit/s",
        goodput
            .iter()
            .map(|g| (g / 1e4).round() / 100.0)
            .collect::<Vec<_>>(),
        total / 1e6
    );

    // 2. Leaf-spine under websearch load.
    let ms = env_u64("SIM_BENCH_LEAFSPINE_MS", 20);
    let mut ls = example("leaf-spine").expect("built-in");
    ls.duration = Dur::ms(ms);
    if !shared_data_dir().join("workloads/websearch.csv").exists() {
        println!("leaf-spine: skipped, websearch.csv is not in ../shared/data/workloads");
    } else {
        let (r2, wall2) = timed(&ls);
        report(
            "leaf-spine 3 spines x 8 leaves x 12 hosts/leaf (96 hosts), 10/40 Gbit/s, 50% websearch, reno",
            &r2,
            wall2,
        );
        let done = r2.flows.iter().filter(|f| f.completed).count();
        let bytes: u64 = r2.flows.iter().map(|f| f.bytes_delivered).sum();
        println!(
            "  {} flows started, {} completed; {:.2} Gbit/s delivered on average",
            r2.flows.len(),
            done,
            bytes as f64 * 8.0 / (r2.end_ns as f64 / 1e9) / 1e9
        );
    }

    // 3. ns-3.
    if env_u64("SIM_BENCH_NS3", 1) == 0 {
        println!("ns-3: skipped (SIM_BENCH_NS3=0)");
        return;
    }
    let python = std::env::var("SIM_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/ns3_dumbbell.py");
    let out = Command::new(&python)
        .args([script, "--duration", &secs.to_string(), "--flows", "2"])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            println!(
                "ns-3: the script failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .rfind(|l| !l.contains("Failed to materialize"))
                    .unwrap_or("")
            );
            return;
        }
        Err(e) => {
            println!("ns-3: cannot run {python}: {e}");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(v) = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    else {
        println!("ns-3: no result in the script's output: {text}");
        return;
    };
    let ns3_wall = v["wall_seconds"].as_f64().unwrap_or(f64::NAN);
    let ns3_total = v["total_goodput_bps"].as_f64().unwrap_or(f64::NAN);
    println!(
        "ns-3 dumbbell 2 x NewReno, {secs} s: {ns3_wall:.3} s wall in Simulator::Run (plus {:.1} s importing the bindings), per flow {:?} Mbit/s, total {:.2} Mbit/s",
        v["import_seconds"].as_f64().unwrap_or(f64::NAN),
        v["goodput_bps"]
            .as_array()
            .map(|a| a
                .iter()
                .map(|x| (x.as_f64().unwrap_or(0.0) / 1e4).round() / 100.0)
                .collect::<Vec<_>>())
            .unwrap_or_default(),
        ns3_total / 1e6
    );
    println!(
        "ccp-sim vs ns-3: {:.1}x faster (wall {wall:.3} s vs {ns3_wall:.3} s); mean throughput ratio {:.4} ({:+.2} %)",
        ns3_wall / wall,
        total / ns3_total,
        (total / ns3_total - 1.0) * 100.0
    );
}
