//! PolyCC on the deterministic simulator: several algorithms of the pool on one flow, driven by
//! the real agent through the one shared measurement program, in virtual time.
//!
//! - Scenario 1 of the paper (§3.1): pilot bbr, copilot cubic, fusion max(cwnd), one flow on a
//!   20 Mbit/s bottleneck with a 100 ms base RTT and one BDP of buffer, with ACK-path jitter of
//!   ±20, ±50, ±70 and ±100 ms (the simulator's jitter keeps packets in order, so a late ACK holds
//!   back the ones behind it: ACKs arrive in bursts after gaps, the aggregation the paper
//!   describes). BBR alone collapses from ±70 ms on; PolyCC keeps the link busy.
//! - BBR's delayed-ACK weakness: ACKs released in bursts every 2 RTTs (link ACK aggregation).
//! - Scenario 2 (§3.2): pilot bbr, copilot copa, fusion min(rate), 20 → 10 Mbit/s at 5 s.
//! - A combination the papers did not try: vivace piloted with a copa copilot, min(rate), on the
//!   same bandwidth halving.
//!
//! Random streams (jitter) are seeded; every figure below is from these runs and quoted next to
//! its bound (docs/results/polycc.md has the tables).

use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, LinkOverride, LinkSpec, Rate, RateStep, Scenario,
    TopologySpec, example,
};
use ccp_sim::{SimResult, run};

const MBIT: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// The paper's first policy (also PolyCC's defaults).
const BBR_CUBIC_MAX_CWND: &str = "polycc:pilot=bbr,copilots=cubic,fuse=max,on=cwnd";
/// The paper's second policy.
const BBR_COPA_MIN_RATE: &str = "polycc:pilot=bbr,copilots=copa,fuse=min,on=rate";
/// Untried: PCC Vivace piloted, Copa as copilot, min(rate).
const VIVACE_COPA_MIN_RATE: &str = "polycc:pilot=vivace,copilots=copa,fuse=min,on=rate";

/// One flow running `alg` over a dumbbell: bottleneck `mbit` Mbit/s, 48 ms each way plus 1 ms
/// access links (100 ms base RTT), a buffer of `bdp` × the bottleneck's BDP, for `secs`.
fn one_flow(alg: &str, mbit: u64, bdp: f64, secs: u64) -> Scenario {
    let mut s = example("dumbbell").unwrap();
    s.duration = Dur::secs(secs);
    s.output.step = Dur::ms(10);
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: 1,
        receivers: None,
        bottleneck: LinkSpec::new(Rate::from_bits(mbit * MBIT), Dur::ms(48))
            .with_buffer(Amount::Bdp(bdp)),
        access: LinkSpec::new(Rate::from_bits(1000 * MBIT), Dur::ms(1)),
        sender_delays: vec![],
    });
    s.flows = vec![FlowSpec::bulk("s0", "r0", alg)];
    s
}

/// The bottleneck's ACK direction replaced by `o`.
fn with_ack_path(mut s: Scenario, o: LinkOverride) -> Scenario {
    if let TopologySpec::Dumbbell(d) = &mut s.topology {
        d.bottleneck.reverse = Some(Box::new(o));
    }
    s
}

/// Scenario 1: ACK-path jitter of ±`jitter_ms` on the 20 Mbit/s, 100 ms path, 30 s.
fn jittered(alg: &str, jitter_ms: u64) -> Scenario {
    with_ack_path(
        one_flow(alg, 20, 1.0, 30),
        LinkOverride {
            jitter: Some(Dur::ms(jitter_ms)),
            ..LinkOverride::default()
        },
    )
}

/// Scenario 2: 20 Mbit/s halved to 10 Mbit/s at 5 s, 100 ms, a buffer of one 20-Mbit/s BDP.
fn halving(alg: &str) -> Scenario {
    let mut s = one_flow(alg, 20, 1.0, 20);
    if let TopologySpec::Dumbbell(d) = &mut s.topology {
        d.bottleneck.schedule = vec![RateStep {
            at: Dur::secs(5),
            rate: Rate::from_bits(10 * MBIT),
        }];
    }
    s
}

/// Run with `seed`, checking the agent ran the named algorithm and every report decoded.
fn run_checked(s: &Scenario, seed: Option<u64>) -> SimResult {
    let r = run(s, seed).unwrap();
    let name = s.flows[0].alg.split(':').next().unwrap();
    assert_eq!(
        r.agent.algorithms.get(name),
        Some(&1),
        "the agent ran {name}: {:?}",
        r.agent.algorithms
    );
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    r
}

/// Goodput of the flow over (from, to], Mbit/s.
fn goodput_mbit(r: &SimResult, from: u64, to: u64) -> f64 {
    let at = |t: u64| {
        r.flow_samples(0)
            .filter(|s| s.time_ns <= t)
            .last()
            .map_or(0, |s| s.delivered_bytes)
    };
    (at(to) - at(from)) as f64 * 8.0 / ((to - from) as f64 / 1e9) / 1e6
}

/// Mean of the flow's RTT samples over (from, to], ms.
fn mean_rtt_ms(r: &SimResult, from: u64, to: u64) -> f64 {
    let v: Vec<u64> = r
        .flow_samples(0)
        .filter(|s| s.time_ns > from && s.time_ns <= to && s.rtt_us > 0)
        .map(|s| s.rtt_us)
        .collect();
    v.iter().sum::<u64>() as f64 / v.len().max(1) as f64 / 1e3
}

/// Convergence time after `at`, seconds: from `at` until the flow's bytes in flight, averaged
/// over every 500-ms window, stay at most `limit` to the end of the run (the paper's Fig. 3b
/// plots inflight bytes converging after the halving).
fn convergence_s(r: &SimResult, at: u64, limit: f64) -> f64 {
    let samples: Vec<(u64, u64)> = r
        .flow_samples(0)
        .filter(|s| s.time_ns >= at)
        .map(|s| (s.time_ns, s.inflight_bytes))
        .collect();
    let end = samples.last().unwrap().0;
    let win = 500 * MS;
    let mut settled = at;
    for (i, (t, _)) in samples.iter().enumerate() {
        if t + win > end {
            break;
        }
        let w: Vec<u64> = samples[i..]
            .iter()
            .take_while(|(u, _)| *u < t + win)
            .map(|(_, b)| *b)
            .collect();
        if w.iter().sum::<u64>() as f64 / w.len() as f64 > limit {
            settled = t + win;
        }
    }
    (settled - at) as f64 / 1e9
}

/// The BDP after the halving: 10 Mbit/s × 100 ms, bytes.
const NEW_BDP: f64 = 10e6 / 8.0 * 0.1;

#[test]
fn goodput_gain_over_bbr_grows_with_ack_jitter() {
    // Eight seeds per point: BBR's collapse under jitter depends on which RTT samples its
    // filters catch, so single runs scatter (per-seed gains at ±70 ms: 1.1× to 17×).
    const SEEDS: u64 = 8;
    let mut gains = vec![];
    let mut bbr_at = vec![];
    let mut poly_at = vec![];
    for j in [20, 50, 70, 100] {
        let (mut bbr, mut poly) = (0.0, 0.0);
        for seed in 1..=SEEDS {
            let b = run_checked(&jittered("bbr", j), Some(seed));
            let p = run_checked(&jittered(BBR_CUBIC_MAX_CWND, j), Some(seed));
            bbr += goodput_mbit(&b, 5 * SEC, 30 * SEC) / SEEDS as f64;
            poly += goodput_mbit(&p, 5 * SEC, 30 * SEC) / SEEDS as f64;
        }
        println!(
            "±{j} ms: bbr {bbr:.2} Mbit/s, polycc {poly:.2} Mbit/s, gain {:.2}",
            poly / bbr
        );
        gains.push(poly / bbr);
        bbr_at.push(bbr);
        poly_at.push(poly);
    }
    // Measured (mean of 8 seeds): bbr 18.74 / 12.63 / 5.45 / 4.88 Mbit/s, polycc 19.32 / 19.32
    // / 19.29 / 19.17 Mbit/s: gains 1.03, 1.53, 3.54, 3.93 (before BBR's loss recovery conserved
    // packets for a whole round: bbr 18.73 / 12.62 / 4.78 / 4.85, polycc 19.31 / 19.38 / 19.32 /
    // 18.99, gains 1.03, 1.54, 4.04, 3.92; with one sample per report and the ProbeRTT fix:
    // gains 1.03, 1.53, 3.29, 2.86; before that fix bbr 18.06 / 12.41 / 6.43 / 6.48, gains 1.03,
    // 1.54, 2.97, 2.95; 19.14 and 2.98 at ±70 ms before CUBIC grew only while its window limits
    // the flow). (Before BBR's ProbeRTT ended under a
    // fused window, BBR sat in ProbeRTT from 10 s on and the flow's pacing rate decayed: polycc
    // 14.64 / 16.12 / 16.54 / 16.98.)
    // Slight jitter: about the same.
    assert!(gains[0] > 0.8 && gains[0] < 1.2, "±20 ms: {gains:?}");
    // The gain grows with the jitter and reaches the paper's lower figure (1.82×) from ±70 ms.
    assert!(gains[1] > gains[0], "{gains:?}");
    assert!(gains[2] > gains[1] && gains[3] > gains[1], "{gains:?}");
    assert!(gains[2] >= 1.8 && gains[3] >= 1.8, "{gains:?}");
    // BBR alone collapses; PolyCC keeps 90 % of the link at every jitter.
    assert!(
        bbr_at[2] < 0.5 * bbr_at[0] && bbr_at[3] < 0.5 * bbr_at[0],
        "{bbr_at:?}"
    );
    assert!(poly_at.iter().all(|p| *p > 0.9 * 20.0), "{poly_at:?}");
}

#[test]
fn bbr_slows_when_acks_come_two_rtts_late_and_polycc_keeps_the_link() {
    // ACKs released in bursts every 200 ms (2 base RTTs): BBR sends its 2-BDP window and waits
    // for the next burst; it slows down (the paper says it stops past two RTTs, where every
    // algorithm here collapses, docs/results/polycc.md).
    let burst = |alg: &str, ms: u64| {
        let s = with_ack_path(
            one_flow(alg, 20, 1.0, 30),
            LinkOverride {
                ack_aggregation: Some(Dur::ms(ms)),
                ..LinkOverride::default()
            },
        );
        goodput_mbit(&run_checked(&s, None), 5 * SEC, 30 * SEC)
    };
    let (bbr_smooth, bbr_burst) = (burst("bbr", 0), burst("bbr", 200));
    let poly_burst = burst(BBR_CUBIC_MAX_CWND, 200);
    println!("bbr {bbr_smooth:.2} → {bbr_burst:.2} Mbit/s, polycc {poly_burst:.2} Mbit/s");
    // Measured: bbr 18.07 → 11.33 Mbit/s; polycc 19.00 Mbit/s (1.68×). Before BBR's loss
    // recovery conserved packets for a whole round and took later losses off its window, bbr
    // fell to 9.68 (2381 retransmissions in 30 s, now 874) and polycc had 1.95×; before BBR
    // took every ACK's delivery-rate sample, 8.33 and 2.2×.
    assert!(bbr_burst < 0.7 * bbr_smooth, "{bbr_burst} vs {bbr_smooth}");
    assert!(poly_burst > 1.5 * bbr_burst, "{poly_burst} vs {bbr_burst}");
    assert!(
        poly_burst > 0.9 * 20.0,
        "polycc keeps the link: {poly_burst}"
    );
}

#[test]
fn a_copa_copilot_speeds_up_bbr_after_the_bandwidth_halves() {
    let bbr = run_checked(&halving("bbr"), None);
    let poly = run_checked(&halving(BBR_COPA_MIN_RATE), None);
    let (cb, cp) = (
        convergence_s(&bbr, 5 * SEC, 1.5 * NEW_BDP),
        convergence_s(&poly, 5 * SEC, 1.5 * NEW_BDP),
    );
    let (gb, gp) = (
        goodput_mbit(&bbr, 5 * SEC, 20 * SEC),
        goodput_mbit(&poly, 5 * SEC, 20 * SEC),
    );
    let (rb, rp) = (
        mean_rtt_ms(&bbr, 6 * SEC, 20 * SEC),
        mean_rtt_ms(&poly, 6 * SEC, 20 * SEC),
    );
    println!(
        "convergence bbr {cb:.2} s, polycc {cp:.2} s ({:+.0} %); goodput {gb:.2} / {gp:.2} \
         Mbit/s; RTT {rb:.0} / {rp:.0} ms",
        (cp / cb - 1.0) * 100.0
    );
    // Measured: bbr 5.44 s, polycc 0.92 s (−83 %; the paper: −54.1 %); goodput after the halving
    // 9.30 / 8.02 Mbit/s; mean RTT 167 / 107 ms (bbr 5.46 s, 9.28 Mbit/s, 164 ms before BBR's loss
    // recovery conserved packets for a whole round; 5.44 s, 2.00 s, −63 % before BBR took every
    // ACK's delivery-rate sample).
    assert!(cb > 2.0, "BBR needs its 10-round filter to forget: {cb}");
    assert!(cp < 0.5 * cb, "{cp} vs {cb}");
    // The price: some goodput (Copa's rate steers below the link while it drains).
    assert!(gp > 0.75 * 10.0, "{gp}");
    assert!(rp < 0.75 * rb, "{rp} vs {rb}");
}

#[test]
fn untried_vivace_piloted_with_a_copa_copilot_converges_faster_than_either() {
    let alone = |alg: &str| run_checked(&halving(alg), None);
    let (viv, copa, poly) = (alone("vivace"), alone("copa"), alone(VIVACE_COPA_MIN_RATE));
    let conv = |r: &SimResult| convergence_s(r, 5 * SEC, 1.5 * NEW_BDP);
    let rtt = |r: &SimResult| mean_rtt_ms(r, 6 * SEC, 20 * SEC);
    let good = |r: &SimResult| goodput_mbit(r, 5 * SEC, 20 * SEC);
    println!(
        "convergence vivace {:.2} s, copa {:.2} s, vivace+copa {:.2} s; RTT {:.0} / {:.0} / {:.0} \
         ms; goodput {:.2} / {:.2} / {:.2} Mbit/s",
        conv(&viv),
        conv(&copa),
        conv(&poly),
        rtt(&viv),
        rtt(&copa),
        rtt(&poly),
        good(&viv),
        good(&copa),
        good(&poly)
    );
    // Measured: 4.92 / 1.67 / 1.13 s; RTT 154 / 108 / 110 ms; goodput 9.40 / 9.51 / 8.11.
    assert!(
        conv(&poly) < 0.5 * conv(&viv),
        "{} vs {}",
        conv(&poly),
        conv(&viv)
    );
    assert!(
        conv(&poly) < conv(&copa),
        "{} vs {}",
        conv(&poly),
        conv(&copa)
    );
    assert!(
        rtt(&poly) < 0.85 * rtt(&viv),
        "{} vs {}",
        rtt(&poly),
        rtt(&viv)
    );
    assert!(good(&poly) > 0.75 * 10.0, "{}", good(&poly));
}

#[test]
fn a_single_member_flow_is_exactly_that_member_end_to_end() {
    // Same scenario, same seed: PolyCC with only a cubic pilot and cubic alone make the same
    // flow, sample by sample.
    let s = |alg: &str| jittered(alg, 20);
    let a = run_checked(&s("polycc:pilot=cubic,copilots=cubic"), Some(3));
    let b = run_checked(&s("cubic"), Some(3));
    let key = |r: &SimResult| -> Vec<(u64, u64, u64, u64)> {
        r.flow_samples(0)
            .map(|s| (s.time_ns, s.delivered_bytes, s.cwnd_bytes, s.inflight_bytes))
            .collect()
    };
    assert_eq!(key(&a), key(&b));
}

#[test]
fn policies_with_expressions_and_member_parameters_run_as_flow_requests() {
    let samples = |alg: &str| -> Vec<(u64, u64, u64)> {
        run_checked(&jittered(alg, 70), Some(2))
            .flow_samples(0)
            .map(|s| (s.time_ns, s.delivered_bytes, s.cwnd_bytes))
            .collect()
    };
    // An expression (with commas inside the requested name) equal to the keyword fuses alike.
    let keyword = samples("polycc:fuse=max");
    assert_eq!(samples("polycc:fuse=max(bbr,cubic)"), keyword);
    assert_eq!(samples("polycc:fuse=max(pilot;cubic)"), keyword);
    // A member parameter reaches the member: CUBIC's β = 0.5 makes another flow.
    assert_ne!(
        samples("polycc:fuse=max(bbr,cubic),cubic.beta=0.5"),
        keyword
    );
    // A bad policy is refused before the run, naming what is wrong.
    let Err(e) = run(&jittered("polycc:fuse=max(bbr,cubc)", 20), None) else {
        panic!("a policy naming an unknown algorithm ran");
    };
    assert!(e.to_string().contains("did you mean \"cubic\""), "{e}");
}

#[test]
fn untried_hercules_piloted_with_a_copa_copilot_needs_its_requirement_in_the_fusion() {
    // Hercules asks for 8-12 Mbit/s (min 8 Mbit/s, max 1.5 × min) through agent flags, which
    // reach Hercules alone and Hercules as a PolyCC member alike.
    let run_with = |alg: &str| {
        let mut s = halving(alg);
        s.agent.params = vec![
            "hercules.min=8mbit".into(),
            "polycc.hercules.min=8mbit".into(),
        ];
        run_checked(&s, None)
    };
    let alone = run_with("hercules");
    let plain = run_with("polycc:pilot=hercules,copilots=copa,fuse=min,on=rate");
    // The same with the requirement as a floor: 1e6 bytes/s = 8 Mbit/s.
    let floor = run_with("polycc:pilot=hercules,fuse=max(min(hercules,copa),1e6),on=rate");
    let conv = |r: &SimResult| convergence_s(r, 5 * SEC, 1.5 * NEW_BDP);
    let good = |r: &SimResult| goodput_mbit(r, 5 * SEC, 20 * SEC);
    let rtt = |r: &SimResult| mean_rtt_ms(r, 6 * SEC, 20 * SEC);
    for (name, r) in [
        ("hercules", &alone),
        ("min(rate)", &plain),
        ("floored", &floor),
    ] {
        println!(
            "{name}: convergence {:.2} s, goodput after the halving {:.2} Mbit/s, RTT {:.0} ms",
            conv(r),
            good(r),
            rtt(r)
        );
    }
    // Measured: hercules 3.95 s, 9.44 Mbit/s, 148 ms; min(rate) 0.61 s, 4.85 Mbit/s, 101 ms;
    // floored 0.00 s, 7.98 Mbit/s, 101 ms.
    // Copa's minimum drains the queue fast but drags the flow below Hercules' requirement ...
    assert!(
        conv(&plain) < 0.5 * conv(&alone),
        "{} vs {}",
        conv(&plain),
        conv(&alone)
    );
    assert!(good(&plain) < 0.8 * 8.0, "{}", good(&plain));
    // ... which the requirement written into the fusion keeps, with the fast convergence.
    assert!(good(&floor) > 0.9 * 8.0, "{}", good(&floor));
    assert!(
        conv(&floor) < 0.5 * conv(&alone),
        "{} vs {}",
        conv(&floor),
        conv(&alone)
    );
    assert!(
        rtt(&floor) < 0.85 * rtt(&alone),
        "{} vs {}",
        rtt(&floor),
        rtt(&alone)
    );
}
