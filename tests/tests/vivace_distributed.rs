//! Vivace-Distributed in the simulator, in the real agent, publishing to JCCE's aggregation core
//! in virtual time (`agent.jcce` of the scenario), on the paper's link: 100 Mbit/s, 30 ms RTT,
//! 75 KB drop-tail buffer (seeds/000 §7).
//!
//! - the flow holds its initial rate until JCCE's first reply, and runs deterministically;
//! - more throughput than PCC Vivace under random loss, 20 % more and a smaller run-to-run
//!   deviation where Vivace's loss penalty takes over (5 %); the paper's full table is an
//!   ignored test (under a minute in release).
use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, JcceSpec, LinkSpec, Rate, Scenario, TopologySpec, example,
};
use ccp_sim::{SimResult, run};

const MBIT: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
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
    let mut far = dumbbell(&["vivace-distributed"], 0.0, 3);
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
    // Then it learns: a second later it carries far more than the initial rate.
    let after = goodput(&r, 0, 2);
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
fn more_throughput_than_vivace_under_random_loss_and_a_steadier_one_where_vivace_gives_way() {
    // Vivace-Distributed §7.3 (Figs. 6-7): over 90 % of the link below 3 % loss, 88 Mbit/s at
    // 4 %, >= 20 % more than Vivace at >= 1 % loss, smaller run-to-run deviation. Our Vivace
    // (with the loss noise filter) already keeps 86-89 Mbit/s up to 3 %, so the gain there is
    // 4-6 %; it reaches the paper's 20 % where Vivace's utility gives way (5 %: Vivace 71 +- 3,
    // vivace-distributed 89 +- 0.6 Mbit/s over 10 runs of 30 s). Seeds 1-4, 20 s here.
    let secs = 20;
    let stats = |x: &[f64]| {
        let m = x.iter().sum::<f64>() / x.len() as f64;
        let v = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64;
        (m, v.sqrt())
    };
    for loss in [0.01, 0.03, 0.05] {
        let goodputs = |alg: &str| -> Vec<f64> {
            (1..=4u64)
                .map(|seed| {
                    let r = run(
                        &dumbbell(&[&format!("{alg}:seed={seed}")], loss, secs),
                        Some(seed),
                    )
                    .unwrap();
                    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
                    mean_goodput(&r, secs)
                })
                .collect()
        };
        let (v, vd) = (goodputs("vivace"), goodputs("vivace-distributed"));
        let ((mv, sv), (mvd, svd)) = (stats(&v), stats(&vd));
        eprintln!(
            "loss {loss}: vivace {mv:.1} +- {sv:.1}, vivace-distributed {mvd:.1} +- {svd:.1} Mbit/s"
        );
        // Every run of vivace-distributed beats the best run of vivace.
        let best_v = v.iter().copied().fold(0.0, f64::max);
        for g in &vd {
            assert!(*g > best_v, "loss {loss}: {vd:.1?} vs vivace {v:.1?}");
        }
        if loss <= 0.03 {
            // Over 90 % of the link in goodput (the paper: over 90 % utilisation below 3 %).
            assert!(mvd > 88.0, "loss {loss}: {mvd:.1} Mbit/s");
        } else {
            // The paper's 20 % where Vivace's loss penalty takes over, with a smaller deviation.
            assert!(mvd >= 1.2 * mv, "loss {loss}: {mvd:.1} vs {mv:.1} Mbit/s");
            assert!(
                svd < sv,
                "loss {loss}: deviation {svd:.2} vs {sv:.2} Mbit/s"
            );
        }
    }
}

/// The paper's loss-resilience experiment (§7.3, Figs. 6-7): one flow, 0-6 % random loss, 10
/// runs of 30 s; mean and standard deviation of the goodput of vivace and vivace-distributed.
/// Under a minute in release; run with `--ignored --nocapture`, figures in
/// docs/results/vivace-distributed.md.
#[test]
#[ignore = "the paper's full table: 140 runs of 30 s, under a minute in release; figures in docs/results/vivace-distributed.md"]
fn loss_resilience_table() {
    let secs = 30;
    let stats = |x: &[f64]| {
        let m = x.iter().sum::<f64>() / x.len() as f64;
        let v = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64;
        (m, v.sqrt())
    };
    for loss in [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06] {
        let mut line = format!("loss {:.0} %:", loss * 100.0);
        for alg in ["vivace", "vivace-distributed"] {
            let g: Vec<f64> = (1..=10u64)
                .map(|seed| {
                    let r = run(
                        &dumbbell(&[&format!("{alg}:seed={seed}")], loss, secs),
                        Some(seed),
                    )
                    .unwrap();
                    mean_goodput(&r, secs)
                })
                .collect();
            let (m, sd) = stats(&g);
            line += &format!(
                "  {alg} {m:.1} +- {sd:.1} Mbit/s (min {:.1})",
                g.iter().copied().fold(f64::INFINITY, f64::min)
            );
        }
        eprintln!("{line}");
    }
}
