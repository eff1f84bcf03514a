//! The delay- and model-based baselines of `ccp-algorithms` — bbr, copa, vegas — on the
//! deterministic simulator, each flow asking the real agent for its algorithm by name, in virtual
//! time: the queue each keeps at the bottleneck, the utilisation it reaches, BBR's ProbeRTT
//! period, and how fast two flows of each share the link fairly.
//!
//! Every scenario is a dumbbell without random loss or jitter, so every run is exactly
//! reproducible and the bounds below are margins on deterministic figures (measured figures are
//! quoted next to each bound, from the runs of this file).

use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, LinkSpec, Rate, Scenario, TopologySpec, example,
};
use ccp_sim::{SimResult, run};

const MBIT: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const BOTTLENECK: &str = "left->right";
/// Payload bytes per packet (the simulator's default MSS).
const MSS: u64 = 1448;

/// A dumbbell with one sender per entry of `algs` (flow i runs `algs[i]` from `starts_ms[i]`),
/// bottleneck `mbit` Mbit/s with `buffer`, base RTT `rtt_ms` (1 ms access links on each side),
/// samples every 10 ms.
fn dumbbell(
    algs: &[&str],
    starts_ms: &[u64],
    mbit: u64,
    rtt_ms: u64,
    buffer: Amount,
    secs: u64,
) -> Scenario {
    let mut s = example("dumbbell").unwrap();
    s.duration = Dur::secs(secs);
    s.output.step = Dur::ms(10);
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: algs.len() as u32,
        receivers: None,
        bottleneck: LinkSpec::new(Rate::from_bits(mbit * MBIT), Dur::ms(rtt_ms / 2 - 2))
            .with_buffer(buffer),
        access: LinkSpec::new(Rate::from_bits(1000 * MBIT), Dur::ms(1)),
        sender_delays: vec![],
    });
    s.flows = algs
        .iter()
        .enumerate()
        .map(|(i, a)| FlowSpec {
            start: Dur::ms(starts_ms.get(i).copied().unwrap_or(0)),
            ..FlowSpec::bulk(&format!("s{i}"), &format!("r{i}"), a)
        })
        .collect();
    s
}

/// Run `s`, checking that the agent ran `alg` for every flow and every report decoded.
fn run_checked(s: &Scenario, alg: &str) -> SimResult {
    let r = run(s, None).unwrap();
    assert_eq!(
        r.agent.algorithms.get(alg),
        Some(&(s.flows.len() as u64)),
        "the agent ran {alg}: {:?}",
        r.agent.algorithms
    );
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    r
}

fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * sq)
}

/// Bottleneck utilisation over samples with time in (from, to]: wire bytes sent / capacity.
fn utilisation(r: &SimResult, mbit: u64, from: u64, to: u64) -> f64 {
    let tx: u64 = r
        .queue_samples(BOTTLENECK)
        .filter(|s| s.time_ns > from && s.time_ns <= to)
        .map(|s| s.tx_bytes)
        .sum();
    tx as f64 / ((mbit * MBIT / 8) as f64 * (to - from) as f64 / 1e9)
}

/// Bottleneck queue samples with time in (from, to], sorted: `(packets, bytes)`.
fn queue_sorted(r: &SimResult, from: u64, to: u64) -> (Vec<u64>, Vec<u64>) {
    let samples: Vec<_> = r
        .queue_samples(BOTTLENECK)
        .filter(|s| s.time_ns > from && s.time_ns <= to)
        .collect();
    let mut pkts: Vec<u64> = samples.iter().map(|s| s.packets).collect();
    let mut bytes: Vec<u64> = samples.iter().map(|s| s.bytes).collect();
    pkts.sort_unstable();
    bytes.sort_unstable();
    (pkts, bytes)
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Payload bytes `flow` delivered in (from, to].
fn delivered_between(r: &SimResult, flow: u32, from: u64, to: u64) -> f64 {
    let at = |t: u64| {
        r.flow_samples(flow)
            .filter(|s| s.time_ns <= t)
            .last()
            .map_or(0, |s| s.delivered_bytes)
    };
    (at(to) - at(from)) as f64
}

/// Jain's index of the two flows' throughput over (from, to].
fn jain_between(r: &SimResult, from: u64, to: u64) -> f64 {
    jain(&[
        delivered_between(r, 0, from, to),
        delivered_between(r, 1, from, to),
    ])
}

// ---------------------------------------------------------------------------------------------
// BBR
// ---------------------------------------------------------------------------------------------

/// 100 Mbit/s, 40 ms, a buffer of 10 BDP (5 MB, 3 333 packets): deep enough that a loss-based
/// algorithm would queue 400 ms.
fn bbr_alone(alg: &str, secs: u64) -> SimResult {
    let s = dumbbell(&[alg], &[], 100, 40, Amount::Bdp(10.0), secs);
    run_checked(&s, "bbr")
}

#[test]
fn bbr_fills_a_deep_buffered_link_and_keeps_its_queue_near_empty() {
    let r = bbr_alone("bbr", 25);
    // Startup and Drain end within the first second (12 rounds of up to 85 ms, then about two);
    // from 2 s on BBR is in ProbeBW or ProbeRTT.
    let (from, to) = (2 * SEC, 25 * SEC);
    let (_, bytes) = queue_sorted(&r, from, to);
    let rate = (100 * MBIT / 8) as f64;
    let median_ms = quantile(&bytes, 0.5) as f64 / rate * 1e3;
    let p90_ms = quantile(&bytes, 0.9) as f64 / rate * 1e3;
    // Bound: half the 40 ms RTT. In ProbeBW the pacing rate is BtlBw except in the 1.25 phase
    // (one RTT in eight), which queues at most a quarter BDP (10 ms) that the 0.75 phase drains
    // at once: the queue is empty most of the time and the median is ~0. A BBR that lost its
    // pacing and ran against its 2-BDP window cap would sit at one BDP of queue (40 ms), and a
    // loss-based one at the buffer (400 ms); 20 ms separates them with room for the gain cycle.
    // Measured: median 0 ms, 90th percentile 7.7 ms, maximum 11.2 ms. (A variant pacing above
    // BtlBw, `bbr:probe-up-gain=2,probe-down-gain=2`, runs against its window: median 40.6 ms.)
    assert!(
        median_ms < 20.0,
        "median queueing delay {median_ms:.1} ms (p90 {p90_ms:.1} ms)"
    );
    // ... while filling the link. Bound 90 %: two ProbeRTTs (≈ 0.27 s each at 4 packets) cost
    // 2.3 % of these 23 s, and BBR paces payload at BtlBw while the wire also carries 52-byte
    // headers (−3.5 % in the gain-1 phases, partly made up by the 1.25 phase). Measured: 95.1 %.
    let util = utilisation(&r, 100, from, to);
    assert!(util >= 0.90, "utilisation {util:.3}");
    // Nothing was lost: BBR never filled the buffer.
    assert_eq!(r.queue(BOTTLENECK).unwrap().counters.drops, 0);
}

#[test]
fn bbr_probes_rtt_every_ten_seconds() {
    let r = bbr_alone("bbr", 25);
    // ProbeRTT holds the window at 4 packets; outside it the window is 2 BDP (690 packets) or,
    // in the first RTTs, at least the initial 10. A dip is a run of samples at ≤ 4 packets.
    let mut dips: Vec<(u64, u64)> = vec![]; // (first, last) sample time
    for x in r.flow_samples(0) {
        if x.cwnd_bytes <= 4 * MSS {
            match dips.last_mut() {
                Some(d) if x.time_ns - d.1 <= 10 * MS => d.1 = x.time_ns,
                _ => dips.push((x.time_ns, x.time_ns)),
            }
        }
    }
    assert_eq!(dips.len(), 2, "dips: {dips:?}");
    // The min-RTT estimate is taken in the first RTT and expires 10 s later; the next one 10 s
    // after the first ProbeRTT refreshed it. Bounds: ± one 10 ms sample plus a report period
    // (10 ms) and the ProbeRTT length (≤ 200 ms + 2 RTTs) for the second. Measured: dips
    // from 10.05 to 10.31 s and from 20.32 to 20.57 s.
    let (first, second) = (dips[0], dips[1]);
    assert!(
        (10_000 * MS..=10_100 * MS).contains(&first.0),
        "first ProbeRTT at {} ms",
        first.0 / MS
    );
    let period = second.0 - first.0;
    assert!(
        (10_200 * MS..=10_400 * MS).contains(&period),
        "ProbeRTTs {} ms apart",
        period / MS
    );
    for d in dips {
        // 200 ms plus the round in progress: between 200 and 300 ms (10 ms sampling).
        let len = d.1 - d.0;
        assert!(
            (190 * MS..=300 * MS).contains(&len),
            "ProbeRTT {} ms",
            len / MS
        );
    }
}

#[test]
fn bbr_leaves_startup_on_a_one_bdp_buffer_that_its_startup_overflows() {
    // 100 Mbit/s, 30 ms, a buffer of one BDP: Startup's 2.89 gain overflows it and every
    // round of Startup loses packets. Loss recovery must not keep BBR from seeing the pipe
    // full: a version whose recovery restarted the round on every loss epoch never counted
    // three rounds without growth and stayed in Startup with the buffer full (in the loss-free
    // point of `baselines/bbr-random-loss.yaml`, the same path: p95 RTT 60 ms, goodput 56
    // Mbit/s against 92).
    let s = dumbbell(&["bbr"], &[], 100, 30, Amount::Bdp(1.0), 20);
    let r = run_checked(&s, "bbr");
    // Measured: utilisation 0.95, median queue 0 packets, retransmits 0.5 % of packets.
    let util = utilisation(&r, 100, 5 * SEC, 20 * SEC);
    assert!(util >= 0.9, "utilisation {util:.3}");
    let (pkts, _) = queue_sorted(&r, 5 * SEC, 20 * SEC);
    let bdp_pkts = 100 * MBIT / 8 * 30 / 1000 / MSS;
    let median = quantile(&pkts, 0.5);
    assert!(
        median <= bdp_pkts / 4,
        "median queue {median} of {bdp_pkts} packets"
    );
    let f = &r.flows[0];
    let retx = f.retransmits as f64 / f.packets_sent as f64;
    eprintln!(
        "bbr, one-BDP buffer: utilisation {util:.3}, median queue {median} packets, \
         retransmits {:.2} % of packets",
        retx * 100.0
    );
    assert!(retx < 0.02, "retransmits {:.2} % of packets", retx * 100.0);
}

#[test]
fn two_bbr_flows_converge_within_one_min_rtt_window() {
    // The BBR paper (Cardwell et al., ACM Queue 2016 / CACM 2017, "Behavior of multiple BBR
    // flows sharing a bottleneck") explains convergence by the 1.25× probing, which lets a
    // flow below its share gain, and by ProbeRTT: a flow that joins later sees an RTT inflated
    // by the incumbent's queue, its min-RTT estimate expires and ProbeRTTs synchronise, after
    // which the flows share fairly. We hold it to that mechanism's time scale: fair within one
    // 10 s min-RTT window of the second flow's arrival.
    let s = dumbbell(&["bbr", "bbr"], &[0, 1000], 100, 40, Amount::Bdp(10.0), 21);
    let r = run_checked(&s, "bbr");
    // Measured: Jain 0.70 in the second after the arrival, 0.90 at 9–10 s, ≥ 0.94 in every
    // second from 11 s on, ≥ 0.98 from 17 s. Without the 1.25 probing phase
    // (`bbr:probe-up-gain=1`) the split stays at 0.80.
    for from in 11..20 {
        let j = jain_between(&r, from * SEC, (from + 1) * SEC);
        assert!(j >= 0.9, "Jain {j:.3} in second {from}");
    }
    // Not already fair at the start (the check can fail): the incumbent holds most of the link.
    assert!(jain_between(&r, SEC, 2 * SEC) < 0.8);
    // Together they still fill the link.
    let util = utilisation(&r, 100, 11 * SEC, 21 * SEC);
    assert!(util >= 0.9, "utilisation {util:.3}");
}

// ---------------------------------------------------------------------------------------------
// Vegas
// ---------------------------------------------------------------------------------------------

/// Fraction of queue samples of one Vegas flow (parameters `alg`) within `lo..=hi` packets after
/// 3 s at 100 Mbit/s, 40 ms; and the utilisation.
fn vegas_queue(alg: &str, lo: u64, hi: u64) -> (f64, f64, Vec<u64>) {
    let s = dumbbell(&[alg], &[], 100, 40, Amount::Bdp(10.0), 10);
    let r = run_checked(&s, "vegas");
    let (pkts, _) = queue_sorted(&r, 3 * SEC, 10 * SEC);
    let inside = pkts.iter().filter(|p| (lo..=hi).contains(*p)).count();
    (
        inside as f64 / pkts.len() as f64,
        utilisation(&r, 100, 3 * SEC, 10 * SEC),
        pkts,
    )
}

#[test]
fn vegas_holds_alpha_to_beta_packets_queued() {
    // diff = cwnd·(RTT − baseRTT)/RTT is exactly this flow's packets in the queue when it is
    // alone, and Vegas moves the window one packet per RTT until α ≤ diff ≤ β. Vegas takes
    // the smallest RTT of a round, and the queue is sampled at arbitrary instants between
    // ACK-clocked arrivals, so a sample may read one packet off; "most of the time" is 90 %.
    // Measured: 100 % of samples in 2..=4 (they alternate 2, 2, 3), utilisation 100 %.
    let (inside, util, pkts) = vegas_queue("vegas", 2, 4);
    assert!(inside >= 0.9, "{:.0} % in 2..=4: {pkts:?}", inside * 100.0);
    // A standing queue of two packets keeps the link busy.
    assert!(util >= 0.98, "utilisation {util:.3}");
    // The band moves with the parameters: α = 6, β = 8 holds 6..=8 packets (measured: 7..=8).
    let (inside, _, pkts) = vegas_queue("vegas:alpha=6,beta=8", 6, 8);
    assert!(inside >= 0.9, "{:.0} % in 6..=8: {pkts:?}", inside * 100.0);
}

#[test]
fn two_vegas_flows_converge_at_one_packet_per_rtt() {
    // The Vegas papers (SIGCOMM 1994, JSAC 1995) claim fairness at least as good as Reno's but
    // give no convergence time; its mechanism gives one. The second flow starts 1 s after the
    // first has filled the 345-packet pipe, leaves slow start at γ, and from then on each
    // window moves one packet per RTT: the incumbent has to give up about half the pipe, some
    // 170 packets, i.e. about 170 RTTs of 40 ms ≈ 7 s. At equilibrium each flow keeps α..β
    // packets queued and their rates are in the ratio of those counts, at worst 2:1, which is
    // Jain 0.9 exactly. So: Jain ≥ 0.9 from 8 s after the second flow's arrival.
    let s = dumbbell(
        &["vegas", "vegas"],
        &[0, 1000],
        100,
        40,
        Amount::Bdp(10.0),
        15,
    );
    let r = run_checked(&s, "vegas");
    // Measured: 0.60 in the first second, 0.93 at 6–7 s, 1.00 from 9 s on. (With one report per
    // RTT, `vegas:reports-per-rtt=1`, rounds are miscounted and it is still 0.86 at 14 s.)
    for from in 9..15 {
        let j = jain_between(&r, from * SEC, (from + 1) * SEC);
        assert!(j >= 0.9, "Jain {j:.3} in second {from}");
    }
    assert!(jain_between(&r, SEC, 2 * SEC) < 0.8, "unfair at first");
    // Both flows' queues together: 2·α..2·β packets (measured median 7).
    let (pkts, _) = queue_sorted(&r, 9 * SEC, 15 * SEC);
    let median = quantile(&pkts, 0.5);
    assert!((4..=9).contains(&median), "median queue {median} packets");
}

// ---------------------------------------------------------------------------------------------
// Copa
// ---------------------------------------------------------------------------------------------

/// Copa's scenario: 100 Mbit/s at `rtt_ms` (BDPs of 172, 259 and 345 packets at 20, 30 and
/// 40 ms), a 10-BDP buffer, 10 s.
fn copa_alone(alg: &str, rtt_ms: u64) -> SimResult {
    let s = dumbbell(&[alg], &[], 100, rtt_ms, Amount::Bdp(10.0), 10);
    run_checked(&s, "copa")
}

/// Cycles of the bottleneck queue in (from, to]: a trough (at most one packet) followed by a
/// peak (at least `peak` packets), counted on the 10 ms samples.
fn queue_cycles(r: &SimResult, from: u64, to: u64, peak: u64) -> u32 {
    let (mut cycles, mut low) = (0, false);
    for s in r
        .queue_samples(BOTTLENECK)
        .filter(|s| s.time_ns > from && s.time_ns <= to)
    {
        if s.packets <= 1 {
            low = true;
        } else if s.packets >= peak && low {
            cycles += 1;
            low = false;
        }
    }
    cycles
}

#[test]
fn copa_keeps_about_one_over_delta_packets_queued() {
    // Target: λ = 1/(δ·d_q) with λ the link rate means d_q = 1/(δ·λ), a queue of 1/δ = 2
    // packets. Copa §2.2: at v = 1 the window moves by 1/δ packets per RTT and the queue cycles
    // between empty and about 2.5/δ = 5 packets, one cycle every ~5 RTTs (the direction flips
    // every ~2.5 RTTs, so the velocity stays 1). That holds from 3 s on (slow start and its
    // drain take under 2 s) at 20, 30 and 40 ms; before the rollback on sudden turns the 30 and
    // 40 ms flows kept swinging between 0.6 and 1.3 BDP (queue 0 to 90-115 packets, median 3
    // and 35, utilisation 0.96 and 0.89).
    for rtt in [20, 30, 40] {
        let r = copa_alone("copa", rtt);
        let (pkts, _) = queue_sorted(&r, 3 * SEC, 10 * SEC);
        let (median, p95, max) = (
            quantile(&pkts, 0.5),
            quantile(&pkts, 0.95),
            pkts[pkts.len() - 1],
        );
        let cycles = queue_cycles(&r, 3 * SEC, 10 * SEC, 4);
        let period = 7_000.0 / rtt as f64 / f64::from(cycles.max(1));
        let util = utilisation(&r, 100, 3 * SEC, 10 * SEC);
        eprintln!(
            "copa {rtt} ms: queue median {median}, p95 {p95}, max {max} packets; {cycles} cycles (one per {period:.1} RTTs); utilisation {util:.3}"
        );
        // Measured: median 2, 3, 2; p95 4, 5, 5; max 6 at every RTT; a cycle every 5.1, 4.9
        // and 5.5 RTTs; utilisation 0.999-1.000.
        assert!(
            (1..=3).contains(&median) && p95 <= 6 && max <= 8,
            "{rtt} ms: median {median}, p95 {p95}, max {max}"
        );
        assert!((4.0..=7.0).contains(&period), "{rtt} ms: {cycles} cycles");
        assert!(util >= 0.98, "{rtt} ms: utilisation {util:.3}");
    }
    // The queue follows 1/δ: δ = 0.125 aims at 8 packets, and its cycle swings by v/δ = 8
    // packets per RTT up to about 2.5/δ = 20 (measured at 20 ms: median 10, 95th percentile 19,
    // maximum 21).
    let r = copa_alone("copa:delta=0.125", 20);
    let (pkts, _) = queue_sorted(&r, 3 * SEC, 10 * SEC);
    let (median, p95) = (quantile(&pkts, 0.5), quantile(&pkts, 0.95));
    assert!(
        (6..=12).contains(&median) && (15..=22).contains(&p95),
        "delta 0.125: median {median}, p95 {p95}"
    );
}

#[test]
fn two_copa_flows_converge_quickly() {
    // Copa's abstract: it "adjusts its congestion window in the direction of this target rate,
    // converging quickly to the correct fair rates even in the face of significant flow churn";
    // with the velocity a flow covers a distance of D packets in O(log D) RTTs. The second flow
    // joins at 1 s: slow start (~6 RTTs) and log2(86) ≈ 7 velocity RTTs take well under a
    // second at 20 ms.
    for rtt in [20, 40] {
        let s = dumbbell(
            &["copa", "copa"],
            &[0, 1000],
            100,
            rtt,
            Amount::Bdp(10.0),
            8,
        );
        let r = run_checked(&s, "copa");
        let js: Vec<f64> = (1..8)
            .map(|from| jain_between(&r, from * SEC, (from + 1) * SEC))
            .collect();
        let (pkts, _) = queue_sorted(&r, 3 * SEC, 8 * SEC);
        let (median, p95) = (quantile(&pkts, 0.5), quantile(&pkts, 0.95));
        let util = utilisation(&r, 100, 3 * SEC, 8 * SEC);
        eprintln!(
            "two copa flows, {rtt} ms: Jain per second from 1 s {js:.2?}; queue median {median}, p95 {p95}; utilisation {util:.3}"
        );
        // Measured at 20 ms: 0.87 in the second of the arrival, 0.99 in the next, 1.00 from
        // 3 s on (without the velocity, `copa:velocity-rounds=1000`, still 0.82 at 3–4 s). At
        // 40 ms the newcomer's slow start takes the larger share (57 against 33 Mbit/s at
        // 1.5–2 s) and the shares close by about 1/δ packets per RTT while the queue sits
        // between the two flows' targets: 0.88, 0.91, 0.95, 0.97, 0.99, 0.99 from 2 s on (the
        // first second, 1.00, is the crossing). Bounds: ≥ 0.9 from 2 s after the arrival, and
        // ≥ 0.95 from 4 s after it.
        for (k, j) in js.iter().enumerate().skip(2) {
            assert!(*j >= 0.9, "{rtt} ms: Jain {j:.3} in second {}", k + 1);
        }
        for (k, j) in js.iter().enumerate().skip(4) {
            assert!(*j >= 0.95, "{rtt} ms: Jain {j:.3} in second {}", k + 1);
        }
        if rtt == 20 {
            assert!(js[0] < 0.9, "unfair at first");
        }
        // Two flows each aim at 1/δ packets: about 4 queued (measured: median 5 and 6, p95 10).
        assert!(
            (2..=8).contains(&median) && p95 <= 12,
            "{rtt} ms: queue median {median}, p95 {p95} packets"
        );
        assert!(util >= 0.95, "{rtt} ms: utilisation {util:.3}");
    }
}
