//! The online learners in the simulator (PCC Vivace on the shared monitor-interval engine),
//! running in the real agent in virtual time on the papers' link: 100 Mbit/s, 30 ms RTT and a
//! 75 KB drop-tail buffer (PCC Vivace NSDI 2018 / Vivace-Distributed §7, Emulab setup).
//!
//! - random loss: vivace keeps over 90 % of the link at 3 % loss where reno and cubic collapse,
//!   and at 1 % loss, while loss above the 5 % its utility tolerates still holds it back;
//! - two vivace flows converge to a fair share within the time the papers report;
//! - without random loss vivace keeps the bottleneck queue short.
//!
//! Each test prints what it measured. The simulator is deterministic, so the seeds below give the
//! same figures on every run; the bounds are set from the spread across those seeds, and say why.

use ccp_sim::scenario::Dur;
use ccp_sim::{SimResult, run};
use ccp_tests::vivace_link::{dumbbell, goodput};

const SEC: u64 = 1_000_000_000;
/// The bottleneck, bytes/s.
const CAPACITY: f64 = 12_500_000.0;
/// Seeds of the random-loss runs: the simulator's (wire losses) and vivace's (probing order).
const SEEDS: std::ops::RangeInclusive<u64> = 1..=8;

/// Utilisation of the bottleneck in (from, to] s: bytes it put on the wire (headers included) /
/// what it could have.
fn utilisation(r: &SimResult, from: u64, to: u64) -> f64 {
    let tx: u64 = r
        .queue_samples("left->right")
        .filter(|s| s.time_ns > from * SEC && s.time_ns <= to * SEC)
        .map(|s| s.tx_bytes)
        .sum();
    tx as f64 / (CAPACITY * (to - from) as f64)
}

fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * sq)
}

fn vivace_run(loss: f64, seed: u64, secs: u64) -> SimResult {
    let alg = format!("vivace:seed={seed}");
    let r = run(&dumbbell(&[&alg], loss, secs), Some(seed)).unwrap();
    assert_eq!(r.agent.algorithms.get("vivace"), Some(&1), "vivace ran");
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    r
}

#[test]
fn vivace_keeps_90_percent_at_3_percent_loss_where_reno_and_cubic_collapse() {
    let secs = 30;
    let mut baseline: f64 = 0.0;
    for alg in ["reno", "cubic"] {
        let r = run(&dumbbell(&[alg], 0.03, secs), None).unwrap();
        let u = utilisation(&r, 0, secs);
        eprintln!("{alg}: utilisation {u:.3}");
        // Every loss halves (reno) or cuts by 30 % (cubic) a window that 3 % loss never lets
        // grow: a few packets per RTT. Vivace-Distributed §7.3 measures < 1 Mbit/s for both.
        assert!(u < 0.1, "{alg} did not collapse: {u:.3}");
        baseline = baseline.max(u);
    }
    let mut us = vec![];
    for seed in SEEDS {
        let r = vivace_run(0.03, seed, secs);
        us.push(utilisation(&r, 0, secs));
    }
    let mean = us.iter().sum::<f64>() / us.len() as f64;
    eprintln!("vivace, 3 % loss, 30 s, seeds {SEEDS:?}: utilisation {us:.3?}, mean {mean:.3}");
    // Vivace-Distributed §7.3 (Fig. 6): PCC Vivace uses over 90 % of the link below 3 % random
    // loss; its utility (c = 11.35) keeps rising with the rate up to about 5 %. That takes the
    // loss noise filter: an MI's loss fraction at 3 % is 3 +- 1.1 % on 250 packets, worth
    // +-12 utility units against the probes' difference of 2, and pooled when the compared MIs'
    // fractions are within the noise. Measured: 0.922 to 0.927 of the link over the whole 30 s,
    // slow start included (without the filter 0.21 to 0.81, mean 0.45). The ceiling is the
    // +5 % probe: the learner settles where r(1 + e) meets the capacity, about 0.95 of it, and
    // spends half a second climbing.
    for u in &us {
        assert!(*u > 0.9, "utilisation {u:.3}");
        assert!(
            *u >= 10.0 * baseline,
            "vivace {u:.3} vs reno/cubic {baseline:.3}"
        );
    }
    assert!(mean > 0.9, "mean utilisation {mean:.3}");
}

#[test]
fn vivace_fills_the_link_at_1_percent_random_loss() {
    let secs = 30;
    let mut us = vec![];
    for seed in SEEDS {
        let r = vivace_run(0.01, seed, secs);
        us.push((utilisation(&r, 0, secs), utilisation(&r, 15, secs)));
    }
    eprintln!("vivace, 1 % loss, seeds {SEEDS:?}: (0-30 s, 15-30 s) utilisation {us:.3?}");
    // Vivace-Distributed §7.3 (Fig. 6): over 90 % below 3 % random loss. Measured 0.929 to
    // 0.933 over the whole run, 0.944 to 0.947 over its second half.
    for (all, late) in &us {
        assert!(*all > 0.9, "utilisation over 30 s: {all:.3}");
        assert!(*late > 0.92, "utilisation after 15 s: {late:.3}");
    }
}

#[test]
fn loss_beyond_what_the_utility_tolerates_still_holds_vivace_back() {
    // The loss filter pools only differences within the noise; the loss level itself stays in
    // the utility. Above c = 11.35's tolerance (0.9 x^-0.1 < c L beyond about 5 % at
    // 100 Mbit/s) the utility falls with the rate and vivace backs off: measured 0.38 to 0.41
    // of the link at 6 % loss (over seeds 1-8: 0.30 to 0.41; 0.75 to 0.81 at 5 %, 0.91 to
    // 0.92 at 4 %).
    let secs = 30;
    let us: Vec<f64> = (1..=4)
        .map(|seed| utilisation(&vivace_run(0.06, seed, secs), 0, secs))
        .collect();
    eprintln!("vivace, 6 % loss, seeds 1..=4: utilisation {us:.3?}");
    for u in &us {
        assert!(*u < 0.6, "utilisation at 6 % loss: {u:.3}");
    }
}

#[test]
fn two_vivace_flows_converge_to_a_fair_share() {
    // The second flow joins at 5 s. Convergence time: from its start to the first second after
    // which every 1-s window has Jain's index >= 0.9.
    let (join, secs) = (5, 25);
    let mut times = vec![];
    for (a, b) in [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12)] {
        let (fa, fb) = (format!("vivace:seed={a}"), format!("vivace:seed={b}"));
        let mut s = dumbbell(&[&fa, &fb], 0.0, secs);
        s.flows[1].start = Dur::secs(join);
        let r = run(&s, None).unwrap();
        let js: Vec<f64> = (join..secs)
            .map(|sec| jain(&[goodput(&r, 0, sec), goodput(&r, 1, sec)]))
            .collect();
        let t = (0..js.len())
            .find(|&k| js[k..].iter().all(|j| *j >= 0.9))
            .expect("the flows never converged");
        let util = utilisation(&r, join + t as u64, secs);
        let (g0, g1) = (goodput(&r, 0, secs - 1), goodput(&r, 1, secs - 1));
        eprintln!(
            "seeds {a},{b}: Jain >= 0.9 from {t} s after the join; last second {g0:.0}/{g1:.0} Mbit/s; utilisation after {util:.3}"
        );
        // Sharing does not cost the link: measured 0.97.
        assert!(util >= 0.9, "utilisation {util:.3}");
        times.push(t);
    }
    times.sort();
    let median = (times[2] + times[3]) as f64 / 2.0;
    eprintln!("convergence times {times:?} s, median {median}");
    // Vivace-Distributed §7.4.1 (Fig. 10): PCC Vivace takes about 4 s to its stable point on
    // this link. Measured: 3 or 4 s for five seed pairs, 7 s for one whose newcomer left slow
    // start at 3 Mbit/s. The median must meet the paper's 4 s; every pair must converge within
    // twice that.
    assert!(median <= 4.0, "median convergence {median} s");
    assert!(times.iter().all(|t| *t <= 8), "{times:?}");
}

#[test]
fn vivace_keeps_the_queue_low_without_loss() {
    let secs = 20;
    let mut p95 = vec![];
    for alg in ["vivace", "cubic"] {
        let r = run(&dumbbell(&[alg], 0.0, secs), None).unwrap();
        let q = r.queue("left->right").unwrap();
        let (d95, d50) = (
            q.qdelay.quantile(0.95) as f64 / 1e6,
            q.qdelay.quantile(0.5) as f64 / 1e6,
        );
        let u = utilisation(&r, 2, secs);
        eprintln!(
            "{alg}: queueing delay p50 {d50:.2} ms, p95 {d95:.2} ms; utilisation after 2 s {u:.3}"
        );
        p95.push((d95, u));
    }
    let ((vivace, util), (cubic, _)) = (p95[0], p95[1]);
    // Vivace's RTT-gradient penalty (b = 900) pushes the rate down as soon as a queue grows by
    // more than 1 % of the time an MI lasts, so a queue builds only during a +5 % probe above
    // capacity: at most 5 % of an MI (1.5 ms) per probe. Measured p95: 0.46 ms (whole run,
    // slow start included), with 94 % of the link used; cubic fills the 75 KB buffer (6 ms):
    // p95 5.2 ms.
    assert!(vivace <= 1.5, "vivace p95 queueing delay {vivace:.2} ms");
    assert!(util >= 0.9, "vivace utilisation {util:.3}");
    assert!(
        cubic >= 4.0 * vivace,
        "cubic {cubic:.2} ms vs vivace {vivace:.2} ms"
    );
}
