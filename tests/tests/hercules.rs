//! Hercules in the simulator, running in the real agent in virtual time on the paper's setting
//! (§V-A): five flows with requirements 10 kbit/s, 100 kbit/s, 1, 10 and 100 Mbit/s (maxima 1.5×
//! the minima) on one bottleneck with a 20 ms base RTT, against the same five flows run by cubic,
//! bbr and vivace. Satisfaction ratio = mean delivery rate / minimum requirement; a protocol's
//! worst case is its smallest satisfaction ratio over flows and capacities.
//!
//! Runs are scaled to what a test can afford: 20 s per run (the paper: 30-s trials, 70 of them),
//! rates averaged from 8 s on, one seed; the full sweeps are the recipes in
//! experiments/recipes/hercules/. Each test prints what it measured (docs/results/hercules.md
//! records the figures).

use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, LinkSpec, Rate, Scenario, TopologySpec, example,
};
use ccp_sim::{SimResult, run};

const SEC: u64 = 1_000_000_000;
/// Minimum requirements, bit/s (§V-A).
const MINIMA: [u64; 5] = [10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];
const SECS: u64 = 20;
const FROM: u64 = 8;

/// A dumbbell of one sender per flow: `capacity` bit/s bottleneck, 20 ms base RTT
/// (1 + 8 + 1 ms each way), a 1-BDP drop-tail buffer, 1 Gbit/s access links.
fn dumbbell(flows: Vec<FlowSpec>, capacity: u64, secs: u64) -> Scenario {
    dumbbell_buffer(flows, capacity, secs, 1)
}

/// [`dumbbell`] with a buffer of `bdps` BDPs.
fn dumbbell_buffer(flows: Vec<FlowSpec>, capacity: u64, secs: u64, bdps: u64) -> Scenario {
    let mut s = example("dumbbell").unwrap();
    s.duration = Dur::secs(secs);
    let bdp = bdps * capacity / 8 * 20 / 1000;
    let bottleneck =
        LinkSpec::new(Rate::from_bits(capacity), Dur::ms(8)).with_buffer(Amount::Bytes(bdp));
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: flows.len() as u32,
        receivers: None,
        bottleneck,
        access: LinkSpec::new(Rate::from_bits(1_000_000_000), Dur::ms(1)),
        sender_delays: vec![],
    });
    s.flows = flows
        .into_iter()
        .enumerate()
        .map(|(i, mut f)| {
            f.src = format!("s{i}");
            f.dst = format!("r{i}");
            f
        })
        .collect();
    s.output.step = Dur::ms(100);
    s
}

/// The five §V-A flows run by `alg`; all but the 100 Mbit/s flow bounded at 1.5× their minimum
/// unless `all_unbounded` (an application limit for every algorithm; Hercules also caps itself).
fn five_flows(alg: &str, all_unbounded: bool) -> Vec<FlowSpec> {
    five_flows_with(alg, all_unbounded, "")
}

/// [`five_flows`] with `extra` appended to the Hercules flows' parameters (e.g. `,d=100`).
fn five_flows_with(alg: &str, all_unbounded: bool, extra: &str) -> Vec<FlowSpec> {
    MINIMA
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let bounded = !all_unbounded && i < 4;
            // Short enough for libccp's 63-byte name with a variant's parameters after it.
            let min = match a {
                a if a >= 1_000_000 => format!("{}mbit", a / 1_000_000),
                a => format!("{}kbit", a / 1_000),
            };
            let name = if alg == "hercules" {
                let bounded = if bounded { ",bounded=true" } else { "" };
                format!("hercules:min={min}{bounded}{extra}")
            } else {
                alg.to_string()
            };
            let mut f = FlowSpec::bulk("", "", &name);
            if bounded {
                f.rate_cap = Some(Rate::from_bits(a * 3 / 2));
            }
            f
        })
        .collect()
}

/// Mean delivery rate of flow `f` in (from, to] s, bit/s.
fn rate(r: &SimResult, f: u32, from: u64, to: u64) -> f64 {
    let at = |t: u64| {
        r.flow_samples(f)
            .filter(|s| s.time_ns <= t * SEC)
            .map(|s| s.delivered_bytes)
            .last()
            .unwrap_or(0)
    };
    (at(to) - at(from)) as f64 * 8.0 / (to - from) as f64
}

/// Satisfaction ratios of the five flows, and the utilisation. `alg` may carry extra Hercules
/// parameters after a comma (`hercules,d=100`).
fn satisfaction(alg: &str, all_unbounded: bool, capacity: u64) -> (Vec<f64>, f64) {
    satisfaction_at(alg, all_unbounded, capacity, 0.0)
}

/// [`satisfaction`] with random loss `loss` on the bottleneck's data direction.
fn satisfaction_at(alg: &str, all_unbounded: bool, capacity: u64, loss: f64) -> (Vec<f64>, f64) {
    let (name, extra) = match alg.find(',') {
        Some(i) => alg.split_at(i),
        None => (alg, ""),
    };
    let mut s = dumbbell(five_flows_with(name, all_unbounded, extra), capacity, SECS);
    if let TopologySpec::Dumbbell(d) = &mut s.topology {
        d.bottleneck.loss = loss;
    }
    let r = run(&s, None).unwrap();
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    let rates: Vec<f64> = (0..5).map(|f| rate(&r, f, FROM, SECS)).collect();
    let util = rates.iter().sum::<f64>() / capacity as f64;
    let sat = rates
        .iter()
        .zip(MINIMA)
        .map(|(x, a)| x / a as f64)
        .collect();
    (sat, util)
}

fn worst(s: &[f64]) -> f64 {
    s.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Figs. 5–6 over the three capacities: (worst-case satisfaction over capacities, the 100 Mbit/s
/// flow's satisfaction per capacity, utilisation per capacity) for `alg`.
fn sweep(alg: &str, all_unbounded: bool) -> (f64, Vec<f64>, Vec<f64>) {
    let mut w = f64::INFINITY;
    let (mut big, mut util) = (vec![], vec![]);
    for capacity in CAPACITIES {
        let (s, u) = satisfaction(alg, all_unbounded, capacity);
        let scenario = if all_unbounded {
            "all unbounded"
        } else {
            "single unbounded"
        };
        eprintln!(
            "{alg}, {scenario}, {} Mbit/s: satisfaction {s:.3?}, utilisation {u:.3}",
            capacity / 1_000_000
        );
        w = w.min(worst(&s));
        big.push(s[4]);
        util.push(u);
    }
    (w, big, util)
}

/// The paper's three congestion levels, bit/s.
const CAPACITIES: [u64; 3] = [95_000_000, 120_000_000, 135_000_000];

/// Mean delivery rates, Mbit/s, of `flows` (run for `secs`) in (from, secs].
fn rates(flows: Vec<FlowSpec>, capacity: u64, secs: u64, from: u64) -> Vec<f64> {
    rates_buffer(flows, capacity, secs, from, 1)
}

/// [`rates`] with a buffer of `bdps` BDPs.
fn rates_buffer(flows: Vec<FlowSpec>, capacity: u64, secs: u64, from: u64, bdps: u64) -> Vec<f64> {
    let n = flows.len() as u32;
    let r = run(&dumbbell_buffer(flows, capacity, secs, bdps), None).unwrap();
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    (0..n).map(|f| rate(&r, f, from, secs) / 1e6).collect()
}

#[test]
fn all_unbounded_hercules_gives_the_100_mbit_flow_more_than_fair_share_protocols_give() {
    let (h, h_big, h_util) = sweep("hercules", true);
    let mut best: f64 = 0.0;
    for alg in ["cubic", "bbr", "vivace"] {
        let (w, big, _) = sweep(alg, true);
        best = best.max(w);
        // The fair-share baselines give the 100 Mbit/s flow about a fifth of the link (bbr a
        // sixth; up to a quarter before BBR's loss-recovery fix). Hercules gives it at least 2x
        // as much at every capacity: measured 2.16x at the least (cubic at 120 Mbit/s: 0.273
        // against 0.591), 2.2-2.6x against cubic and vivace, 2.6-3.2x against bbr. (Before
        // BBR's loss-recovery fix bbr's flow got 0.342 at 135 Mbit/s, 1.73x, and this bound was
        // 1.5x.)
        for (hb, b) in h_big.iter().zip(&big) {
            assert!(
                hb >= &(2.0 * b),
                "100 Mbit/s flow: hercules {hb:.3} vs {alg} {b:.3}"
            );
        }
    }
    eprintln!(
        "worst case: hercules {h:.3}, best baseline {best:.3} ({:.2}x)",
        h / best
    );
    // Paper (Fig. 5a): 3.5x the best baseline. Measured here: 0.455 against cubic's 0.199, 2.3x
    // (the small unbounded flows climb far above their maxima instead of yielding; see
    // docs/results/hercules.md). The test holds the direction with the margin measured.
    assert!(h >= 2.0 * best, "hercules {h:.3} vs {best:.3}");
    // Paper: median utilisation 94.2 %. Measured 0.96.
    for u in h_util {
        assert!(u >= 0.9, "utilisation {u:.3}");
    }
}

#[test]
fn single_unbounded_hercules_satisfies_the_100_mbit_flow_when_the_capacity_allows() {
    let (_, big, util) = sweep("hercules", false);
    // 120 and 135 Mbit/s hold every minimum (111.11 Mbit/s in all): the unbounded 100 Mbit/s
    // flow gets at least 90 % of its minimum (paper, Fig. 6: 92 % and 97 %; measured 0.97 and
    // 1.11 here, where the four others are bounded at their maxima).
    assert!(big[1] >= 0.9 && big[2] >= 0.9, "100 Mbit/s flow: {big:.3?}");
    for u in util {
        assert!(u >= 0.9, "utilisation {u:.3}");
    }
}

#[test]
fn single_unbounded_the_papers_ratio_is_beyond_the_hrf_optimum_of_this_setting() {
    // The paper's Fig. 5b: Hercules's worst-case satisfaction 1.5x the best baseline's with one
    // unbounded flow. Here (as in the authors' test script, where the QUIC session caps every
    // protocol's connection at its maximum) the baselines' bounded flows get their b, so their
    // worst case is the 100 Mbit/s flow at 95 Mbit/s, which takes what the others leave
    // (95 - 16.67 Mbit/s at most). No allocation of the link gives every flow 1.5x that: the HRF
    // optimum, the lexicographic max-min of satisfaction here, has a worst case of 0.855.
    let mut hrf_worst = f64::INFINITY;
    for capacity in CAPACITIES {
        let reqs: Vec<(f64, bool)> = MINIMA
            .iter()
            .enumerate()
            .map(|(i, &a)| (a as f64 / 1e6, i < 4))
            .collect();
        let x = hrf(capacity, &reqs);
        for (x, (a, _)) in x.iter().zip(&reqs) {
            hrf_worst = hrf_worst.min(x / a);
        }
    }
    let mut best: f64 = 0.0;
    for alg in ["cubic", "bbr", "vivace"] {
        best = best.max(sweep(alg, false).0);
    }
    let (h, _, _) = sweep("hercules", false);
    eprintln!(
        "single unbounded: HRF optimum's worst case {hrf_worst:.3}, best baseline {best:.3}: \
         at most {:.2}x; hercules {h:.3} ({:.2}x)",
        hrf_worst / best,
        h / best
    );
    // Measured: cubic 0.750, HRF 0.855, 1.14x at most.
    assert!((hrf_worst - 0.855).abs() < 0.001, "{hrf_worst}");
    assert!(1.5 * best > hrf_worst, "best baseline {best:.3}");
    // What Hercules reaches of it: its worst flow is the 100 Mbit/s one at 95 Mbit/s, 0.739
    // (0.985x cubic's 0.750; the bounded flows sit at their maxima where HRF would give them
    // 0.855 of their minima). Every bounded flow is satisfied, the 10 kbit/s one included (it
    // stayed at the 5-kbit/s minimum rate, 0.483, while a timeout before any result halved the
    // starting rate).
    assert!(
        h >= 0.95 * best && h <= hrf_worst,
        "hercules {h:.3}, best {best:.3}"
    );
}

#[test]
fn with_a_steeper_penalty_d_100_the_papers_all_unbounded_figures_reproduce() {
    // The same sweep with D = 100 (Fig. 11's range; the paper suggests D = 2). Measured: the
    // 100 Mbit/s flow at 0.755 / 0.954 / 1.093 of its minimum at 95 / 120 / 135 Mbit/s (paper,
    // Fig. 6: 70 % / 92 % / 97 %), worst case 3.7x the best baseline (paper: 3.5x). At D = 2
    // the small unbounded flows climb far above their maxima instead of yielding (see
    // docs/results/hercules.md).
    let (h, big, util) = sweep("hercules,d=100", true);
    let mut best: f64 = 0.0;
    for alg in ["cubic", "bbr", "vivace"] {
        best = best.max(sweep(alg, true).0);
    }
    eprintln!(
        "D = 100 worst case {h:.3}, best baseline {best:.3} ({:.2}x)",
        h / best
    );
    assert!(h >= 3.5 * best, "hercules {h:.3} vs {best:.3}");
    assert!(big[1] >= 0.9 && big[2] >= 0.9, "100 Mbit/s flow: {big:.3?}");
    for u in util {
        assert!(u >= 0.9, "utilisation {u:.3}");
    }
}

/// What the bottleneck saw in a five-flow run (all unbounded) after `FROM`: satisfaction of the
/// five flows, loss fraction, mean queueing delay (ms) and the median and 90th percentile of the
/// queueing delay's standard deviation within 45-ms windows (µs; the queue sampled every ms, a
/// per-packet σ(RTT) over one MI of these flows).
fn bottleneck(alg: &str, capacity: u64) -> (Vec<f64>, f64, f64, f64, f64) {
    let (name, extra) = match alg.find(',') {
        Some(i) => alg.split_at(i),
        None => (alg, ""),
    };
    let mut s = dumbbell(five_flows_with(name, true, extra), capacity, SECS);
    s.output.step = Dur::ms(1);
    let r = run(&s, None).unwrap();
    let x: Vec<f64> = (0..5).map(|f| rate(&r, f, FROM, SECS)).collect();
    let sat = x.iter().zip(MINIMA).map(|(x, a)| x / a as f64).collect();
    let q: Vec<_> = r
        .queue_samples("left->right")
        .filter(|q| q.time_ns > FROM * SEC)
        .collect();
    let sent = x.iter().sum::<f64>() * (SECS - FROM) as f64 / 8.0 / 1448.0;
    let loss = q.iter().map(|q| q.drops).sum::<u64>() as f64 / sent;
    let delay: Vec<f64> = q
        .iter()
        .map(|q| q.bytes as f64 / (capacity as f64 / 8.0) * 1e6)
        .collect();
    let mean_ms = delay.iter().sum::<f64>() / delay.len() as f64 / 1000.0;
    let mut sd: Vec<f64> = delay
        .chunks(45)
        .map(|w| {
            let m = w.iter().sum::<f64>() / w.len() as f64;
            (w.iter().map(|x| (x - m).powi(2)).sum::<f64>() / w.len() as f64).sqrt()
        })
        .collect();
    sd.sort_by(f64::total_cmp);
    (sat, loss, mean_ms, sd[sd.len() / 2], sd[sd.len() * 9 / 10])
}

#[test]
fn at_d_2_the_bottleneck_is_latency_limited_and_per_packet_sigma_is_mostly_under_its_floor() {
    // The mechanism behind the D = 2 figures (docs/results/hercules.md): after the start the link
    // hardly drops (measured 0.35 % at 95 Mbit/s, 0 at 120) and holds a standing queue (7.6 and
    // 4.9 ms), so the RTT-gradient term decides the shares; the queueing delay's σ within an MI
    // is 263 us at the median, under the 500-us floor below which σ(RTT) counts as 0, so a
    // per-packet σ would change little. With D = 100 the link is loss-limited (2.6 %); with the
    // paper's grouping (loss weighted by H) the 100 Mbit/s flow reaches the HRF optimum (0.855
    // at 95 Mbit/s) but drives the link to heavy loss (43 %) and leaves the four small flows
    // below their minima.
    for capacity in [95_000_000, 120_000_000] {
        let (sat, loss, q, p50, p90) = bottleneck("hercules", capacity);
        eprintln!(
            "D = 2, {} Mbit/s: satisfaction {sat:.3?}, loss {:.2} %, queue {q:.1} ms, \
             sigma p50 {p50:.0} us, p90 {p90:.0} us",
            capacity / 1_000_000,
            loss * 100.0
        );
        assert!(loss < 0.01 && q > 2.0, "loss {loss:.4}, queue {q:.2} ms");
        assert!(p50 < 500.0, "sigma p50 {p50:.0} us");
    }
    let (sat, loss, q, ..) = bottleneck("hercules,d=100", 95_000_000);
    eprintln!(
        "D = 100: satisfaction {sat:.3?}, loss {:.2} %, queue {q:.1} ms",
        loss * 100.0
    );
    assert!(loss > 0.01, "loss {loss:.4}");
    let (sat, loss, ..) = bottleneck("hercules,paper-form=true", 95_000_000);
    eprintln!(
        "paper's grouping: satisfaction {sat:.3?}, loss {:.1} %",
        loss * 100.0
    );
    // Measured: the 100 Mbit/s flow at 0.878, 42.5 % loss, the four small flows at 0.46-0.66
    // of their minima.
    assert!(
        sat[4] >= 0.8 && loss > 0.1 && sat[..4].iter().all(|&s| s < 0.8),
        "{sat:.3?}, loss {loss:.3}"
    );
}

#[test]
fn under_random_loss_the_100_mbit_flow_keeps_half_again_what_the_baselines_give_it() {
    // Fig. 7 at 120 Mbit/s, all unbounded: 3 % random loss on the data direction. The paper has
    // Hercules above every baseline; measured 0.656 against vivace's 0.235, bbr's 0.174 (0.195
    // before BBR's loss-recovery fix) and cubic's 0.047 (bbr had 0.289 before it counted SACKed
    // bytes as delivered, which keeps its rounds, and so its bandwidth filter, going through the
    // holes random loss makes).
    let capacity = 120_000_000;
    let (h, _) = satisfaction_at("hercules", true, capacity, 0.03);
    eprintln!("hercules, 3 % loss: satisfaction {h:.3?}");
    for alg in ["cubic", "bbr", "vivace"] {
        let (s, u) = satisfaction_at(alg, true, capacity, 0.03);
        eprintln!("{alg}, 3 % loss: satisfaction {s:.3?}, utilisation {u:.3}");
        assert!(
            h[4] >= 1.5 * s[4],
            "100 Mbit/s flow: hercules {:.3} vs {alg} {:.3}",
            h[4],
            s[4]
        );
    }
}

#[test]
#[ignore = "does not reproduce: all unbounded at D = 2 the paper's 3.5x is 2.3x here; single unbounded the 1.5x is beyond the HRF optimum of this setting (1.14x at most; measured 0.98x); docs/results/hercules.md"]
fn worst_case_satisfaction_ratios_of_the_paper() {
    let (h1, _, _) = sweep("hercules", false);
    let (ha, _, _) = sweep("hercules", true);
    let (mut b1, mut ba): (f64, f64) = (0.0, 0.0);
    for alg in ["cubic", "bbr", "vivace"] {
        b1 = b1.max(sweep(alg, false).0);
        ba = ba.max(sweep(alg, true).0);
    }
    eprintln!(
        "single unbounded {:.2}x, all unbounded {:.2}x",
        h1 / b1,
        ha / ba
    );
    assert!(h1 >= 1.5 * b1 && ha >= 3.5 * ba);
}

#[test]
fn two_flows_of_the_same_requirement_converge_after_a_late_arrival() {
    // Fig. 9c: two flows requiring 50 Mbit/s on 95 Mbit/s, the second from 10 s.
    let mk = |start: u64| {
        let mut f = FlowSpec::bulk("", "", "hercules:min=50mbit");
        f.start = Dur::secs(start);
        f
    };
    let x = rates(vec![mk(0), mk(10)], 95_000_000, 40, 25);
    eprintln!("two 50 Mbit/s flows, 25-40 s: {x:.2?} Mbit/s");
    let ratio = x[0].min(x[1]) / x[0].max(x[1]);
    assert!(ratio >= 0.8, "rates {x:.2?}");
    assert!(x[0] + x[1] >= 0.9 * 95.0, "rates {x:.2?}");
}

#[test]
fn a_hercules_flow_shares_with_a_cubic_or_reno_flow_of_the_same_requirement() {
    // Fig. 12: Hercules flows requiring 100 and 5 Mbit/s and one cubic or reno flow
    // (requirement 100 Mbit/s) on 95 Mbit/s.
    // Same requirement, same rate: measured 37.70 against 37.65 Mbit/s (cubic) and 36.2
    // against 41.1 (reno; 0.76-0.88 over four seeds of the probing order).
    for other in ["cubic", "reno"] {
        fig12_shares_equally(other);
    }
}

/// Fig. 12's run: Hercules flows requiring 100 and 5 Mbit/s and one flow of `other` (requirement
/// 100 Mbit/s) on 95 Mbit/s; the Hercules 100 Mbit/s flow and `other` within 20 % of each other
/// over 20-40 s.
fn fig12_shares_equally(other: &str) {
    let flows = vec![
        FlowSpec::bulk("", "", "hercules:min=100mbit"),
        FlowSpec::bulk("", "", "hercules:min=5mbit"),
        FlowSpec::bulk("", "", other),
    ];
    let x = rates(flows, 95_000_000, 40, 20);
    eprintln!("hercules 100, hercules 5, {other}, 20-40 s: {x:.2?} Mbit/s");
    let ratio = x[0].min(x[2]) / x[0].max(x[2]);
    assert!(ratio >= 0.8, "{other}: rates {x:.2?}");
}

#[test]
#[ignore = "does not reproduce: the Hercules 100 Mbit/s flow takes 0.64-0.92x a bbr flow's rate over four seeds of the probing order (within 20 % in one) and 2.15-2.43x a vivace flow's (below its minimum it discounts latency by H = 0.1); docs/results/hercules.md"]
fn a_hercules_flow_shares_with_bbr_and_vivace_flows_of_the_same_requirement() {
    // Fig. 12 against bbr and vivace, as the cubic test above. Against bbr only seed 2 holds
    // (0.92); seed 1, the one run here, does not (0.66; 1.04 before BBR's loss-recovery fix),
    // nor do seeds 3 and 4 (0.67, 0.64).
    for other in ["bbr", "vivace"] {
        fig12_shares_equally(other);
    }
}

/// One row of the Fig. 12 table: the Hercules flows with parameters `extra` against bbr, cubic,
/// reno and vivace, four seeds of the probing order each; prints the ratios Hercules 100 / other,
/// their geometric mean and the Hercules 5 Mbit/s flow's rates.
fn fairness_row(extra: &str) {
    fairness_row_buffer(extra, 1);
}

/// [`fairness_row`] with a buffer of `bdps` BDPs.
fn fairness_row_buffer(extra: &str, bdps: u64) {
    for other in ["bbr", "cubic", "reno", "vivace"] {
        let mut ratios = vec![];
        let mut small = vec![];
        for seed in 1..=4 {
            let h = |min: &str| {
                let name = format!("hercules:min={min},{extra},seed={seed}");
                FlowSpec::bulk("", "", &name)
            };
            let flows = vec![h("100mbit"), h("5mbit"), FlowSpec::bulk("", "", other)];
            let x = rates_buffer(flows, 95_000_000, 40, 20, bdps);
            // Whatever the split, the three flows fill the link (measured 0.91-0.97).
            assert!(x.iter().sum::<f64>() >= 0.85 * 95.0, "{x:.2?}");
            ratios.push(x[0] / x[2]);
            small.push(x[1]);
        }
        let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / 4.0).exp();
        eprintln!(
            "{extra}, {bdps} BDP, vs {other}: ratios {ratios:.2?} (geometric mean {geo:.2}), \
             Hercules 5 Mbit/s flow {small:.1?} Mbit/s"
        );
    }
}

#[test]
#[ignore = "measurement for docs/results/hercules.md (the round loss test against the default: Fig. 12 over four seeds, 32 runs of 40 s, and the five-flow D = 2 figures, 12 runs of 20 s; about 20 s)"]
fn round_loss_test_table() {
    // The loss noise filter over a whole probing round (all + probes against all - probes)
    // instead of per pair, side by side with the default: the Fig. 12 row and what it costs the
    // five-flow figures.
    for round in [false, true] {
        let extra = format!("round-loss-test={round}");
        fairness_row(&extra);
        for all_unbounded in [false, true] {
            let (w, big, util) = sweep(&format!("hercules,{extra}"), all_unbounded);
            eprintln!(
                "{extra}, all unbounded {all_unbounded}: worst {w:.3}, 100 Mbit/s flow {big:.3?}, \
                 utilisation {util:.3?}"
            );
        }
    }
}

#[test]
#[ignore = "measurement for docs/results/hercules.md (Fig. 12 over four seeds and the loss filter's settings; 66 runs of 40 s, about 25 s)"]
fn fairness_against_other_protocols_table() {
    // Hercules flows requiring 100 and 5 Mbit/s and one flow of `other` on 95 Mbit/s, rates over
    // 20-40 s; the ratio Hercules 100 / other per seed of the probing order and its geometric
    // mean, for the loss noise filter at 2 (default), 1, 0.5 and 0 standard errors.
    for z in ["2", "1", "0.5", "0"] {
        fairness_row(&format!("loss-confidence={z}"));
    }
    // For scale, cubic in the Hercules flows' places.
    for other in ["bbr", "vivace"] {
        let flows = ["cubic", "cubic", other]
            .iter()
            .map(|n| FlowSpec::bulk("", "", n))
            .collect();
        let x = rates(flows, 95_000_000, 40, 20);
        eprintln!(
            "cubic, cubic, {other}: {x:.2?} Mbit/s, ratio {:.2}",
            x[0] / x[2]
        );
    }
}

#[test]
#[ignore = "measurement for docs/results/hercules.md (the variant table: nine Hercules settings, each the five-flow all-unbounded sweep and Fig. 12 over four seeds, beside the three baselines' sweeps; 181 runs, about 1.5 minutes)"]
fn variant_table() {
    // The best baseline's worst case, measured here beside the variants.
    let best = ["cubic", "bbr", "vivace"]
        .iter()
        .map(|alg| sweep(alg, true).0)
        .fold(0.0, f64::max);
    for extra in [
        "loss-confidence=2",
        "increase-only=true",
        "increase-only=true,latency-filter=0",
        "latency-filter=0.02",
        "latency-filter=0",
        "loss-confidence=1",
        "loss-confidence=0.5",
        "loss-confidence=0",
        "paper-form=true",
    ] {
        let (w, big, util) = sweep(&format!("hercules,{extra}"), true);
        eprintln!(
            "{extra}: 100 Mbit/s flow {big:.3?}, worst {w:.3} ({:.2}x the best baseline's \
             {best:.3}), utilisation {util:.3?}",
            w / best
        );
        if extra.starts_with("paper-form") {
            let (sat, loss, ..) = bottleneck(&format!("hercules,{extra}"), CAPACITIES[0]);
            eprintln!("{extra}, 95 Mbit/s: satisfaction {sat:.3?}, loss {loss:.3}");
        }
        fairness_row(extra);
    }
}

#[test]
#[ignore = "measurement for docs/results/hercules.md (Fig. 12 with the buffer of the authors' test script, 2 and 5 BDP; 34 runs of 40 s, about 15 s)"]
fn fairness_with_deeper_buffers_table() {
    // The authors' script gives its simulated bottleneck 5 x 20 ms of buffer; the paper gives
    // none, and the tests use 1 BDP. BBR's window (2 BDP) never fills a buffer of 2 BDP or more.
    for bdps in [2, 5] {
        fairness_row_buffer("loss-confidence=2", bdps);
        let flows = ["cubic", "cubic", "bbr"]
            .iter()
            .map(|n| FlowSpec::bulk("", "", n))
            .collect();
        let x = rates_buffer(flows, 95_000_000, 40, 20, bdps);
        eprintln!(
            "{bdps} BDP, cubic, cubic, bbr: {x:.2?} Mbit/s, ratio {:.2}",
            x[0] / x[2]
        );
    }
}

#[test]
fn rates_follow_a_capacity_that_changes_every_60_s() {
    // Fig. 10: the five requirement levels (all unbounded), the capacity changing every 60 s
    // among 45, 95, 120 and 135 Mbit/s.
    use ccp_sim::scenario::RateStep;
    let caps = [45_000_000u64, 95_000_000, 120_000_000, 135_000_000];
    let mut s = dumbbell(five_flows("hercules", true), caps[0], 240);
    if let TopologySpec::Dumbbell(d) = &mut s.topology {
        d.bottleneck.schedule = caps
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, &c)| RateStep {
                at: Dur::secs(60 * i as u64),
                rate: Rate::from_bits(c),
            })
            .collect();
    }
    let r = run(&s, None).unwrap();
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    for (i, &c) in caps.iter().enumerate() {
        // The last 50 s of each period.
        let (from, to) = (60 * i as u64 + 10, 60 * (i as u64 + 1));
        let x: Vec<f64> = (0..5).map(|f| rate(&r, f, from, to) / 1e6).collect();
        let util = x.iter().sum::<f64>() / (c as f64 / 1e6);
        eprintln!(
            "{} Mbit/s, {from}-{to} s: {x:.3?} Mbit/s, utilisation {util:.3}",
            c / 1_000_000
        );
        // Measured 0.96 after every change (within 10 s of it the rates have moved).
        assert!(util >= 0.9, "utilisation {util:.3} at {c}");
    }
}

/// HRF rates, Mbit/s, of flows with minima `min` Mbit/s (maxima 1.5x) on `capacity` bit/s.
fn hrf(capacity: u64, reqs: &[(f64, bool)]) -> Vec<f64> {
    use ccp_algorithms::hercules::{Requirements, hrf_allocation};
    let reqs: Vec<Requirements> = reqs
        .iter()
        .map(|&(a, bounded)| Requirements::new(a * 1e6 / 8.0, 0.0, 1.5, bounded))
        .collect();
    hrf_allocation(capacity as f64 / 8.0, &reqs)
        .iter()
        .map(|x| x * 8.0 / 1e6)
        .collect()
}

#[test]
fn a_requirement_changed_at_run_time_is_followed() {
    // Two flows on 60 Mbit/s: flow 0 a bounded application requiring 5 Mbit/s (b = 7.5), flow 1
    // unbounded requiring 10. At 20 s the application raises flow 0's requirement to 20 Mbit/s
    // (b = 30), at 40 s it lowers it back to 5, both through the agent's `set-params` command
    // (what `ccp-agent ctl set-params` sends). HRF: 7.5 / 52.5, then 30 / 30, then 7.5 / 52.5.
    use ccp_sim::scenario::AgentCommand;
    let cap = 60_000_000;
    let flows = vec![
        FlowSpec::bulk("", "", "hercules:min=5mbit,bounded=true"),
        FlowSpec::bulk("", "", "hercules:min=10mbit"),
    ];
    let mut s = dumbbell(flows, cap, 60);
    let set = |at: u64, min: &str| AgentCommand {
        at: Dur::secs(at),
        command: format!("set-params 10.0.0.1:10000 min={min}"),
    };
    s.agent.commands = vec![set(20, "20mbit"), set(40, "5mbit")];
    let r = run(&s, None).unwrap();
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    let x = |from: u64, to: u64| [rate(&r, 0, from, to) / 1e6, rate(&r, 1, from, to) / 1e6];
    let (low, high) = (
        hrf(cap, &[(5.0, true), (10.0, false)]),
        hrf(cap, &[(20.0, true), (10.0, false)]),
    );
    let (before, raised, lowered) = (x(10, 20), x(25, 40), x(45, 60));
    eprintln!(
        "flow 0 (5 -> 20 -> 5 Mbit/s) and flow 1, Mbit/s: {before:.2?} over 10-20 s, {raised:.2?} \
         over 25-40 s, {lowered:.2?} over 45-60 s (HRF {low:.1?}, {high:.1?}, {low:.1?})"
    );
    let per_second: Vec<[f64; 2]> = (18..44).map(|t| x(t, t + 1)).collect();
    eprintln!("per second from 18 s: {per_second:.1?}");
    // Before the change the bounded flow sits at its maximum and the other takes the rest.
    assert!(
        before[0] >= 0.9 * low[0] && before[0] <= 1.01 * low[0],
        "{before:.2?}"
    );
    // Raised: within 3 s (about 65 MIs of 45 ms) the flow is at 90 % of its new minimum or
    // more (measured 22.8 Mbit/s over 22-23 s), and over 25-40 s it holds at least 80 % of its
    // new HRF rate (measured 26.3 of 30).
    assert!(x(22, 23)[0] >= 0.9 * 20.0, "{per_second:.1?}");
    assert!(
        raised[0] >= 0.8 * high[0] && raised[0] <= 1.01 * high[0],
        "{raised:.2?}"
    );
    assert!(raised[0] + raised[1] >= 0.9 * 60.0, "{raised:.2?}");
    // Lowered: a bounded flow above its new maximum is brought down at its next report; within
    // the second of the change it is at its bound, and the other flow takes the link back.
    assert!(x(41, 42)[0] <= 1.01 * low[0], "{per_second:.1?}");
    assert!(
        lowered[0] <= 1.01 * low[0] && lowered[1] >= 0.8 * low[1],
        "{lowered:.2?}"
    );
}
