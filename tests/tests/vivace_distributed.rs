//! Vivace-Distributed in the simulator, in the real agent, publishing to JCCE's aggregation core
//! in virtual time (`agent.jcce` of the scenario), on the paper's link: 100 Mbit/s, 30 ms RTT,
//! 75 KB drop-tail buffer (seeds/000 §7).
//!
//! - the flow holds its initial rate until JCCE's first reply, and runs deterministically;
//! - the paper's direction against PCC Vivace under random loss (higher throughput at >= 1 %
//!   loss) does NOT hold in this implementation yet: the test is ignored with the figures.
use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, JcceSpec, LinkSpec, Rate, Scenario, TopologySpec, example,
};
use ccp_sim::{SimResult, run};

const MBIT: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const CAPACITY: f64 = 12_500_000.0;
const BUFFER: Amount = Amount::Bytes(75_000);

fn dumbbell(algs: &[&str], loss: f64, secs: u64) -> Scenario {
    let mut s = example("dumbbell").unwrap();
    s.duration = Dur::secs(secs);
    let mut bottleneck =
        LinkSpec::new(Rate::from_bits(100 * MBIT), Dur::ms(13)).with_buffer(BUFFER);
    bottleneck.loss = loss;
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: algs.len() as u32,
        receivers: None,
        bottleneck,
        access: LinkSpec::new(Rate::from_bits(1000 * MBIT), Dur::ms(1)),
        sender_delays: vec![],
    });
    s.flows = algs
        .iter()
        .enumerate()
        .map(|(i, a)| FlowSpec::bulk(&format!("s{i}"), &format!("r{i}"), a))
        .collect();
    s.output.step = Dur::ms(100);
    s
}

fn utilisation(r: &SimResult, from: u64, to: u64) -> f64 {
    let tx: u64 = r
        .queue_samples("left->right")
        .filter(|s| s.time_ns > from * SEC && s.time_ns <= to * SEC)
        .map(|s| s.tx_bytes)
        .sum();
    tx as f64 / (CAPACITY * (to - from) as f64)
}

fn goodput(r: &SimResult, f: u32, sec: u64) -> f64 {
    let xs: Vec<f64> = r
        .flow_samples(f)
        .filter(|x| x.time_ns > sec * SEC && x.time_ns <= (sec + 1) * SEC)
        .map(|x| x.goodput_bps as f64 / 1e6)
        .collect();
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// Mean goodput of flow 0 over the run, Mbit/s.
fn mean_goodput(r: &SimResult, secs: u64) -> f64 {
    r.flows[0].bytes_delivered as f64 * 8.0 / secs as f64 / 1e6
}

#[test]
fn holds_the_initial_rate_until_the_first_jcce_reply_and_is_deterministic() {
    // JCCE 400 ms away each way: the first reply to the first publication (sent with the first
    // report, about one RTT after the start) arrives about 0.83 s after the start.
    let mut far = dumbbell(&["vivace-distributed"], 0.0, 2);
    far.agent.jcce = Some(JcceSpec {
        latency: Dur::ms(400),
        min_group: 1,
    });
    let r = run(&far, None).unwrap();
    assert_eq!(r.agent.algorithms.get("vivace-distributed"), Some(&1));
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    // Holding: the initial rate, 10 packets per 100 ms (1.16 Mbit/s), for the first 0.8 s.
    let held: Vec<f64> = r
        .flow_samples(0)
        .filter(|x| x.time_ns > 200_000_000 && x.time_ns <= 800_000_000)
        .map(|x| x.goodput_bps as f64 / 1e6)
        .collect();
    assert!(!held.is_empty());
    for g in &held {
        assert!(*g < 1.5, "goodput {g:.2} Mbit/s while holding");
    }
    // Then it learns: the next second carries far more than the initial rate.
    let after = goodput(&r, 0, 1);
    assert!(
        after > 10.0,
        "goodput {after:.1} Mbit/s after the first reply"
    );
    // JCCE 1 ms away: no visible hold.
    let near = run(&dumbbell(&["vivace-distributed"], 0.0, 2), None).unwrap();
    assert!(goodput(&near, 0, 0) > 5.0 * goodput(&r, 0, 0));
    // Deterministic: the same scenario gives the same run.
    let again = run(&far, None).unwrap();
    assert_eq!(r.flows[0].bytes_delivered, again.flows[0].bytes_delivered);
    assert_eq!(r.flows[0].retransmits, again.flows[0].retransmits);
}

#[test]
#[ignore = "does not hold yet: vivace-distributed overshoots the 75 KB buffer and its goodput collapses (see docs/results/vivace-distributed.md)"]
fn more_throughput_than_vivace_at_1_to_3_percent_random_loss() {
    // Vivace-Distributed §7.3 (Fig. 6): >= 20 % more throughput than Vivace at >= 1 % random
    // loss, and a smaller run-to-run deviation. Measured (30 s, seeds 1-3, mean goodput):
    // vivace 88-89 Mbit/s at 1 % and 3 %; vivace-distributed 0.5-44 Mbit/s, the wire 97-99 %
    // busy with retransmissions.
    let secs = 30;
    for loss in [0.01, 0.03] {
        let mut v = vec![];
        let mut vd = vec![];
        for seed in 1..=3u64 {
            let a = run(
                &dumbbell(&[&format!("vivace:seed={seed}")], loss, secs),
                Some(seed),
            )
            .unwrap();
            let b = run(
                &dumbbell(&[&format!("vivace-distributed:seed={seed}")], loss, secs),
                Some(seed),
            )
            .unwrap();
            v.push(mean_goodput(&a, secs));
            vd.push(mean_goodput(&b, secs));
            eprintln!(
                "loss {loss} seed {seed}: vivace {:.1} Mbit/s, vivace-distributed {:.1} Mbit/s (wire {:.3})",
                v.last().unwrap(),
                vd.last().unwrap(),
                utilisation(&b, 0, secs)
            );
        }
        let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
        assert!(
            mean(&vd) >= 1.2 * mean(&v),
            "loss {loss}: {vd:.1?} vs {v:.1?}"
        );
    }
}
