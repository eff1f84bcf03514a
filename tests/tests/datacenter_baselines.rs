//! DCTCP, LEDBAT and TIMELY (`ccp-algorithms`) in the simulator (`ccp-sim`), driven by the real
//! agent in virtual time: DCTCP holds the marking queue near K at full utilisation and two flows
//! converge; LEDBAT yields to Reno, shares with another LEDBAT flow around its target delay, and
//! shows the latecomer advantage RFC 6817 warns of; TIMELY keeps the RTT under T_high at high
//! utilisation and two flows converge. Every scenario runs a contrasting algorithm where the
//! bound alone would not show that it can fail.
//!
//! Datacenter scenarios: a dumbbell with a 10 Gbit/s bottleneck (40 µs) and 40 Gbit/s host links
//! (5 µs), i.e. a 100 µs base RTT and the queue at the switch port `left->right`, 1000 packets
//! of buffer; the hosts' links are faster than the bottleneck so that the queue forms where the
//! switch can mark. Wide-area scenarios (LEDBAT): 100 Mbit/s, 10 ms base RTT, 250 KB of buffer
//! (20 ms of queueing, four times LEDBAT's 5 ms target).

use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, LinkSpec, Rate, Scenario, TopologySpec, example,
};
use ccp_sim::{SimResult, run};

const GBIT: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const BOTTLENECK: &str = "left->right";

/// Two or more flows on the datacenter dumbbell (10 Gbit/s, 100 µs base RTT), running `ms`
/// milliseconds; `ecn_k` packets of ECN marking threshold at the bottleneck, if any. Flow `i`
/// runs `algs[i]` and starts at `starts_us[i]`.
fn datacenter(algs: &[&str], starts_us: &[u64], ms: u64, ecn_k: Option<u64>) -> Scenario {
    let mut s = example("dumbbell").unwrap();
    s.duration = Dur::ms(ms);
    s.transport.min_rto = Dur::ms(1);
    s.transport.initial_rto = Dur::ms(1);
    s.transport.tick = Dur::ms(1);
    s.output.step = Dur::us(20);
    s.output.queues = vec![BOTTLENECK.into()];
    let mut bottleneck =
        LinkSpec::new(Rate::from_bits(10 * GBIT), Dur::us(40)).with_buffer(Amount::Packets(1000));
    bottleneck.ecn_k = ecn_k.map(Amount::Packets);
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: algs.len() as u32,
        receivers: None,
        bottleneck,
        access: LinkSpec::new(Rate::from_bits(40 * GBIT), Dur::us(5)),
        sender_delays: vec![],
    });
    s.flows = flows(algs, starts_us);
    s
}

/// Flows on the wide-area dumbbell (100 Mbit/s, 10 ms base RTT, 250 KB buffer).
fn wide_area(algs: &[&str], starts_us: &[u64], secs: u64) -> Scenario {
    let mut s = example("dumbbell").unwrap();
    s.duration = Dur::secs(secs);
    s.output.step = Dur::ms(10);
    s.output.queues = vec![BOTTLENECK.into()];
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: algs.len() as u32,
        receivers: None,
        bottleneck: LinkSpec::new(Rate::from_bits(100_000_000), Dur::ms(4))
            .with_buffer(Amount::Bytes(250_000)),
        access: LinkSpec::new(Rate::from_bits(GBIT), Dur::us(500)),
        sender_delays: vec![],
    });
    s.flows = flows(algs, starts_us);
    s
}

fn flows(algs: &[&str], starts_us: &[u64]) -> Vec<FlowSpec> {
    algs.iter()
        .zip(starts_us)
        .enumerate()
        .map(|(i, (alg, start))| FlowSpec {
            start: Dur::us(*start),
            ..FlowSpec::bulk(&format!("s{i}"), &format!("r{i}"), alg)
        })
        .collect()
}

fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * sq)
}

/// Payload bytes flow `flow` delivered in order in (from, to] (sample times, ns).
fn delivered(r: &SimResult, flow: u32, from: u64, to: u64) -> f64 {
    let at = |t: u64| {
        r.flow_samples(flow)
            .filter(|s| s.time_ns <= t)
            .map(|s| s.delivered_bytes)
            .max()
            .unwrap_or(0)
    };
    (at(to) - at(from)) as f64
}

/// Jain's index of the flows' deliveries in (from, to].
fn jain_between(r: &SimResult, flows: u32, from: u64, to: u64) -> f64 {
    let x: Vec<f64> = (0..flows).map(|f| delivered(r, f, from, to)).collect();
    jain(&x)
}

/// Utilisation of the bottleneck in (from, to]: wire bytes sent over what the line carries.
fn utilisation(r: &SimResult, from: u64, to: u64) -> f64 {
    let tx: u64 = r
        .queue_samples(BOTTLENECK)
        .filter(|s| s.time_ns > from && s.time_ns <= to)
        .map(|s| s.tx_bytes)
        .sum();
    let rate = r.queue(BOTTLENECK).unwrap().rate as f64;
    tx as f64 / (rate * (to - from) as f64 / 1e9)
}

/// The `q`-quantile of `v` (sorted in place).
fn quantile(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

/// Bottleneck occupancy samples (packets) in (from, to].
fn queue_packets(r: &SimResult, from: u64, to: u64) -> Vec<u64> {
    r.queue_samples(BOTTLENECK)
        .filter(|s| s.time_ns > from && s.time_ns <= to)
        .map(|s| s.packets)
        .collect()
}

/// Latest-RTT samples (µs) of every flow in (from, to].
fn rtt_samples(r: &SimResult, flows: u32, from: u64, to: u64) -> Vec<u64> {
    (0..flows)
        .flat_map(|f| {
            r.flow_samples(f)
                .filter(move |s| s.time_ns > from && s.time_ns <= to && s.rtt_us > 0)
                .map(|s| s.rtt_us)
        })
        .collect()
}

// -------------------------------------------------------------------------------------------
// DCTCP
// -------------------------------------------------------------------------------------------

const K: u64 = 65;

#[test]
fn dctcp_holds_the_queue_near_k_at_full_utilisation() {
    // Two flows (the second 20 ms later), measured from 40 ms to 120 ms, after both have left
    // slow start.
    let (from, to) = (40 * MS, 120 * MS);
    let s = datacenter(&["dctcp", "dctcp"], &[0, 20_000], 120, Some(K));
    let r = run(&s, None).unwrap();
    assert_eq!(r.agent.algorithms.get("dctcp"), Some(&2));
    let mut q = queue_packets(&r, from, to);
    let (p10, p50, p90) = (
        quantile(&mut q, 0.1),
        quantile(&mut q, 0.5),
        quantile(&mut q, 0.9),
    );
    let util = utilisation(&r, from, to);
    let counters = &r.queue(BOTTLENECK).unwrap().counters;
    println!(
        "dctcp: queue p10/p50/p90 {p10}/{p50}/{p90} packets (K = {K}), utilisation {util:.3}, \
         marks {}, drops {}",
        counters.ecn_marks, counters.drops
    );
    // DCTCP's steady-state analysis (SIGCOMM 2010) puts the queue in a sawtooth just below K + N
    // (N = 2 flows) with amplitude ½·sqrt(2N(C·RTT + K)) ≈ 12 packets here (C·RTT ≈ 83
    // packets); the agent sees marks up to one report (≈ one RTT) plus 40 µs of IPC late, which
    // widens it. [0.5 K, 1.5 K] leaves room for that and fails for any controller that ignores
    // the marks (Reno below) or over-reacts and drains the queue.
    assert!(
        (K / 2..=3 * K / 2).contains(&p50),
        "median queue {p50} packets, K = {K}"
    );
    // The queue never drains (p10 well above 0), so the link stays busy: ≥ 99 %.
    assert!(p10 > 0, "queue p10 {p10}");
    assert!(util >= 0.99, "utilisation {util:.3}");
    assert!(
        counters.ecn_marks > 0 && counters.drops == 0,
        "{counters:?}"
    );

    // The same link with Reno, which does not react to marks: the queue fills the buffer.
    let s = datacenter(&["reno", "reno"], &[0, 20_000], 120, Some(K));
    let r = run(&s, None).unwrap();
    let mut q = queue_packets(&r, from, to);
    let reno_p50 = quantile(&mut q, 0.5);
    println!("reno on the same link: queue p50 {reno_p50} packets");
    assert!(reno_p50 > 3 * K / 2, "reno median queue {reno_p50}");
}

#[test]
fn two_dctcp_flows_converge_within_the_papers_time() {
    // The DCTCP paper (SIGCOMM 2010), discussing convergence, gives DCTCP's convergence time
    // as 80–150 ms at 10 Gbit/s (20–30 ms at 1 Gbit/s). The second flow starts at 20 ms, into a link the
    // first fills; over the 100 ms after 150 ms the two must share with Jain ≥ 0.9 (a 34/66
    // split at worst). Measured here: the first 10-ms window with Jain ≥ 0.9 comes 20–40 ms
    // after the start; deterministic phase effects of the marking keep the long-run split near
    // 40/60 in some start phases (Jain ≈ 0.94), hence 0.9 rather than more.
    let start = 20 * MS;
    let s = datacenter(&["dctcp", "dctcp"], &[0, start / 1000], 270, Some(K));
    let r = run(&s, None).unwrap();
    let (from, to) = (start + 150 * MS, start + 250 * MS);
    let j = jain_between(&r, 2, from, to);
    let first = (0..25u64)
        .map(|w| start + w * 10 * MS)
        .find(|t| jain_between(&r, 2, *t, t + 10 * MS) >= 0.9)
        .map(|t| (t - start) / MS);
    println!(
        "dctcp: Jain {j:.3} over {}–{} ms after the start; first 10-ms window with Jain ≥ 0.9 at \
         +{first:?} ms",
        (from - start) / MS,
        (to - start) / MS
    );
    assert!(j >= 0.9, "Jain {j:.3}");
    // A newcomer that never got its share would fail here: before it starts Jain is 0.5.
    assert!(jain_between(&r, 2, 0, start) < 0.6);
    assert!(first.is_some_and(|ms| ms <= 150), "{first:?}");
}

// -------------------------------------------------------------------------------------------
// LEDBAT
// -------------------------------------------------------------------------------------------

#[test]
fn ledbat_yields_to_reno() {
    // LEDBAT (5 ms target) alone for 2 s, then Reno joins. The buffer allows 20 ms of queueing,
    // so Reno's sawtooth keeps the queue above LEDBAT's target and LEDBAT backs off to its
    // minimum window.
    let s = wide_area(&["ledbat:target=5ms", "reno"], &[0, 2_000_000], 8);
    let r = run(&s, None).unwrap();
    assert_eq!(r.agent.algorithms.get("ledbat"), Some(&1));
    // Alone (1–2 s), LEDBAT fills the link: it is not simply slow.
    let alone = delivered(&r, 0, SEC, 2 * SEC) * 8.0 / 1e6;
    // Once Reno has left slow start (from 3 s on).
    let (l, t) = (
        delivered(&r, 0, 3 * SEC, 8 * SEC),
        delivered(&r, 1, 3 * SEC, 8 * SEC),
    );
    let share = l / (l + t);
    println!("ledbat alone {alone:.1} Mbit/s; share against reno {share:.3}");
    // ≥ 80 Mbit/s of the 100 (96.5 measured: 5 ms of queue is more than the BDP needs).
    assert!(alone >= 80.0, "ledbat alone: {alone:.1} Mbit/s");
    // A less-than-best-effort flow takes well under a fair half; 25 % is the brief's bound
    // (measured ≈ 10 %). A Reno-like controller would take ≈ 50 %.
    assert!(share < 0.25, "ledbat share {share:.3}");
    assert!(utilisation(&r, 3 * SEC, 8 * SEC) > 0.9);
}

#[test]
fn two_ledbat_flows_share_at_the_target_delay() {
    // RFC 6817 claims no convergence time, and LEDBAT has no mechanism that equalises windows:
    // both flows see the same queueing delay and change by the same GAIN·off_target MSS per RTT,
    // so any difference formed before the queue reaches the target persists. The second flow
    // starts 300 ms after the first, while the first is still ramping (≈ 30 of the ≈ 130
    // packets it will have); from 3 s on the two must share with Jain ≥ 0.9 (0.96 measured),
    // and the queueing delay they hold must sit at the 5 ms target.
    let s = wide_area(
        &["ledbat:target=5ms", "ledbat:target=5ms"],
        &[0, 300_000],
        8,
    );
    let r = run(&s, None).unwrap();
    let j = jain_between(&r, 2, 3 * SEC, 8 * SEC);
    let q = r.queue(BOTTLENECK).unwrap();
    let p50_ms = q.qdelay.quantile(0.5) as f64 / 1e6;
    println!("two ledbat flows: Jain {j:.3}, queueing delay p50 {p50_ms:.2} ms");
    assert!(j >= 0.9, "Jain {j:.3}");
    // Within 20 % of the target: the queueing delay is RTT − base RTT exactly here (no reverse
    // queue), so only the report granularity (one RTT) separates it from the target.
    assert!((4.0..=6.0).contains(&p50_ms), "p50 {p50_ms:.2} ms");
    assert!(utilisation(&r, 3 * SEC, 8 * SEC) > 0.95);
}

#[test]
fn a_ledbat_latecomer_takes_over() {
    // The latecomer advantage RFC 6817 discusses under fairness among LEDBAT flows: a flow that starts while the queue already holds
    // the target delay takes that queue for part of its base delay, pushes the delay to twice the
    // target, and the first flow, which still knows the true base, backs off to its minimum
    // window. This module reproduces it (with the RTT-based delays it must use), and this test
    // pins that behaviour: the first flow ends below 10 % of the link.
    let s = wide_area(
        &["ledbat:target=5ms", "ledbat:target=5ms"],
        &[0, 3_000_000],
        10,
    );
    let r = run(&s, None).unwrap();
    let (a, b) = (
        delivered(&r, 0, 8 * SEC, 10 * SEC),
        delivered(&r, 1, 8 * SEC, 10 * SEC),
    );
    let first_share = a / (a + b);
    println!("ledbat latecomer: the first flow's share at 8–10 s {first_share:.3}");
    assert!(first_share < 0.1, "first flow's share {first_share:.3}");
    assert!(delivered(&r, 0, 2 * SEC, 3 * SEC) * 8.0 / 1e6 > 80.0);
}

// -------------------------------------------------------------------------------------------
// TIMELY
// -------------------------------------------------------------------------------------------

/// TIMELY's T_high, µs (paper default).
const T_HIGH: u64 = 500;

#[test]
fn timely_keeps_the_rtt_below_t_high_at_high_utilisation() {
    // Two flows (the second 20 ms later), measured from 60 ms to 160 ms; no ECN. With a 1000-
    // packet buffer the RTT could reach 1.3 ms; TIMELY must hold it below T_high while keeping
    // the link busy.
    let (from, to) = (60 * MS, 160 * MS);
    let s = datacenter(&["timely", "timely"], &[0, 20_000], 160, None);
    let r = run(&s, None).unwrap();
    assert_eq!(r.agent.algorithms.get("timely"), Some(&2));
    let mut rtt = rtt_samples(&r, 2, from, to);
    let (p1, p50, p99) = (
        quantile(&mut rtt, 0.01),
        quantile(&mut rtt, 0.5),
        quantile(&mut rtt, 0.99),
    );
    let util = utilisation(&r, from, to);
    println!(
        "timely: RTT p1/p50/p99 {p1}/{p50}/{p99} us (base 100, T_low 50, T_high {T_HIGH}), \
         utilisation {util:.3}"
    );
    // Upper end: the T_high branch and the gradient branch keep every RTT sample but the last
    // percent below T_high (measured: the p99 sits within 10 µs of the base RTT: TIMELY's
    // gradient, normalised by the paper's 20 µs minRTT, cuts hard at any queue growth).
    assert!(p99 <= T_HIGH, "RTT p99 {p99} us");
    // TIMELY gives up some throughput for that (its decreases are deep): at least 85 % of the
    // link (≈ 93 % measured).
    assert!(util >= 0.85, "utilisation {util:.3}");

    // The same link with Reno: the queue fills the buffer and the RTT passes T_high.
    let s = datacenter(&["reno", "reno"], &[0, 20_000], 160, None);
    let r = run(&s, None).unwrap();
    let mut rtt = rtt_samples(&r, 2, from, to);
    let reno_p50 = quantile(&mut rtt, 0.5);
    println!("reno on the same link: RTT p50 {reno_p50} us");
    assert!(reno_p50 > T_HIGH, "reno RTT p50 {reno_p50}");
}

#[test]
fn timely_increases_below_t_low() {
    // A 40 µs base RTT (below T_low = 50 µs): below T_low TIMELY adds δ = 10 Mbit/s per
    // completion event whatever the gradient (no HAI there: Algorithm 1 applies N·δ only in the
    // gradient region). Events are reports, one per max(smoothed RTT, 100 µs) (the adapter's
    // shortest per-RTT period), so a flow alone started at 1 Gbit/s gains ≈ 0.1 Gbit/s per ms
    // and reaches the 10 Gbit/s line rate after ≈ 90 ms. Measured: 10.6 % of the link in the
    // first 2 ms, then the ramp, ≥ 90 % at 110–130 ms.
    let mut s = datacenter(&["timely:init-rate=1gbit"], &[0], 130, None);
    if let TopologySpec::Dumbbell(d) = &mut s.topology {
        d.bottleneck.delay = Dur::us(14);
        d.access.delay = Dur::us(3);
    }
    let r = run(&s, None).unwrap();
    let early = utilisation(&r, 0, 2 * MS);
    let middle = utilisation(&r, 40 * MS, 50 * MS);
    let late = utilisation(&r, 110 * MS, 130 * MS);
    let mut rtt = rtt_samples(&r, 1, 110 * MS, 130 * MS);
    let p50 = quantile(&mut rtt, 0.5);
    println!(
        "timely from 1 Gbit/s: utilisation {early:.3} at 0-2 ms, {middle:.3} at 40-50 ms, \
         {late:.3} at 110-130 ms; RTT p50 {p50} us there"
    );
    assert!(early < 0.2, "starts near 1 Gbit/s: {early:.3}");
    // Halfway up the ramp at 40–50 ms (1 + 0.1·45 ≈ 5.5 Gbit/s): a controller that held its
    // rate below T_low, or jumped, fails one of these.
    assert!((0.35..0.75).contains(&middle), "ramp: {middle:.3}");
    assert!(late >= 0.9, "reaches the line rate: {late:.3}");
}

#[test]
fn two_timely_flows_converge() {
    // The TIMELY paper gives no convergence time for two flows that this test could quote, and
    // TIMELY's gradient law has no unique fair fixed point (Zhu et al., CoNEXT 2016); what it
    // does guarantee here is that a newcomer starting at line rate drives the RTT up, both flows
    // cut, and equal additive increases from equal low rates share the link. The second flow
    // starts at 20 ms; over 40–140 ms after its start the two must share with Jain ≥ 0.9
    // (≈ 1.0 measured).
    let start = 20 * MS;
    let s = datacenter(&["timely", "timely"], &[0, start / 1000], 160, None);
    let r = run(&s, None).unwrap();
    let j = jain_between(&r, 2, start + 40 * MS, start + 140 * MS);
    println!("timely: Jain {j:.3} over 40–140 ms after the second flow's start");
    assert!(j >= 0.9, "Jain {j:.3}");
    assert!(jain_between(&r, 2, 0, start) < 0.6);
}
