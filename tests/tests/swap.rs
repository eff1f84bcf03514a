//! `set-algorithm` on the simulator: a live flow handed from one algorithm to another through the
//! agent's command path (what `ccp-agent ctl set-algorithm` sends), in virtual time.
//!
//! One long Cubic flow fills a deep-buffered dumbbell; at 10 s it is handed to Vegas, at 20 s back
//! to Cubic. The scenario has no random loss or jitter, so the figures quoted next to each bound
//! are exact for this scenario (from the runs of this file) and the bounds are margins on them.

use ccp_sim::scenario::{AgentCommand, Amount, Dur, Scenario};
use ccp_sim::{SimResult, run};
use ccp_tests::vivace_link::single_bottleneck;

const MBIT: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const MSS: u64 = 1448;
/// Bottleneck 50 Mbit/s, base RTT 40 ms: a BDP of 250 kB (173 packets).
const CAPACITY_MBIT: u64 = 50;
const BDP: f64 = (CAPACITY_MBIT * MBIT / 8) as f64 * 0.040;

/// One `alg` flow on 50 Mbit/s, 40 ms, a buffer of 4 BDP, for `secs`, with `commands`
/// (`(at s, command)`), sampled every 10 ms.
fn scenario(alg: &str, secs: u64, commands: &[(u64, &str)]) -> Scenario {
    let mut s = single_bottleneck(&[alg], CAPACITY_MBIT, 18, Amount::Bdp(4.0), secs);
    s.output.step = Dur::ms(10);
    s.agent.commands = commands
        .iter()
        .map(|(at, c)| AgentCommand {
            at: Dur::secs(*at),
            command: c.to_string(),
        })
        .collect();
    s
}

/// Median RTT sample (ms) of flow 0 over (from, to] s.
fn median_rtt_ms(r: &SimResult, from: u64, to: u64) -> f64 {
    let mut v: Vec<u64> = r
        .flow_samples(0)
        .filter(|s| s.time_ns > from * SEC && s.time_ns <= to * SEC && s.rtt_us > 0)
        .map(|s| s.rtt_us)
        .collect();
    v.sort_unstable();
    v[v.len() / 2] as f64 / 1e3
}

/// Goodput of flow 0 over (from, to] s, Mbit/s.
fn goodput(r: &SimResult, from: u64, to: u64) -> f64 {
    let at = |t: u64| {
        r.flow_samples(0)
            .filter(|s| s.time_ns <= t * SEC)
            .last()
            .map_or(0, |s| s.delivered_bytes)
    };
    (at(to) - at(from)) as f64 * 8.0 / (to - from) as f64 / 1e6
}

/// Smallest window of flow 0 over (from, to] ns, bytes.
fn min_cwnd(r: &SimResult, from: u64, to: u64) -> u64 {
    r.flow_samples(0)
        .filter(|s| s.time_ns > from && s.time_ns <= to)
        .map(|s| s.cwnd_bytes)
        .min()
        .unwrap()
}

#[test]
fn a_cubic_flow_handed_to_vegas_drains_its_queue_and_keeps_the_link_full() {
    let r = run(
        &scenario(
            "cubic",
            30,
            &[
                (10, "set-algorithm 10.0.0.1:10000 vegas"),
                (20, "set-algorithm 1 cubic"),
            ],
        ),
        None,
    )
    .unwrap();
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    let rtt = [
        median_rtt_ms(&r, 5, 10),
        median_rtt_ms(&r, 12, 20),
        median_rtt_ms(&r, 25, 30),
    ];
    let rate = [goodput(&r, 5, 10), goodput(&r, 12, 20), goodput(&r, 25, 30)];
    // The window over the first second after each switch, against the 10-packet initial window.
    let floor = [
        min_cwnd(&r, 10 * SEC, 11 * SEC),
        min_cwnd(&r, 20 * SEC, 21 * SEC),
    ];
    eprintln!(
        "median RTT ms cubic 5-10 s / vegas 12-20 s / cubic 25-30 s: {rtt:.1?}; goodput Mbit/s \
         {rate:.2?}; smallest window in the second after each switch {floor:?} bytes \
         (BDP {BDP:.0}, initial window {})",
        10 * MSS
    );
    // Cubic keeps a standing queue of ~3 BDP (RTT 157.9 ms); Vegas, measuring against the
    // 40-ms base RTT the flow saw before the queue built (the hand-over's RTT history), drains it
    // to its α..β packets: 41.0 ms, i.e. 26 % of before. Back on Cubic, the flow keeps the
    // threshold Vegas set at its γ exit, so Cubic continues in congestion avoidance from
    // Vegas's window and refills the buffer along its curve, not in a second slow start: 81.4 ms
    // over 25-30 s, rising (134 ms at 30 s). The link stays full all along (48.27 Mbit/s in
    // each period, of 50).
    assert!(rtt[1] < 0.35 * rtt[0] && rtt[1] < 1.2 * 40.0, "{rtt:.1?}");
    assert!(rtt[2] > 1.5 * rtt[1], "{rtt:.1?}");
    assert!(
        rate.iter().all(|x| *x >= 0.9 * CAPACITY_MBIT as f64),
        "{rate:.2?}"
    );
    // No restart: the successor starts from the flow's window (958 kB at 10 s, 247 kB at
    // 20 s). Vegas measures the window it took over for a round and leaves it by its γ exit
    // for the window that queues one packet (244 kB); Cubic goes on from Vegas's 247 kB. Both
    // above a BDP, 17 times the 10-packet initial window.
    assert!(floor.iter().all(|w| *w as f64 >= 0.9 * BDP), "{floor:?}");
    // Neither switch overshoots: the swapped flow loses no more than the flow left on Cubic
    // (0.81 % against 0.82 % of packets sent). When each successor began a slow start of its
    // own from the flow's window, Vegas doubled Cubic's 958 kB before its γ exit and the
    // swapped flow lost 2.79 %.
    let alone = run(&scenario("cubic", 30, &[]), None).unwrap();
    eprintln!(
        "retransmitted share: swapped {:.4}, left on cubic {:.4}",
        retransmitted_share(&r),
        retransmitted_share(&alone)
    );
    assert!(
        retransmitted_share(&r) <= 1.1 * retransmitted_share(&alone),
        "{} {}",
        retransmitted_share(&r),
        retransmitted_share(&alone)
    );
}

#[test]
fn a_bbr_flow_handed_to_reno_is_no_longer_paced_at_bbrs_rate() {
    let r = run(&scenario("bbr", 8, &[(4, "set-algorithm 1 reno")]), None).unwrap();
    assert_eq!(r.agent.bad_reports + r.agent.update_errors, 0);
    let paced: Vec<u64> = r
        .flow_samples(0)
        .filter(|s| s.time_ns > 3 * SEC && s.time_ns <= 4 * SEC)
        .map(|s| s.rate_bytes_per_sec)
        .collect();
    let after: Vec<u64> = r
        .flow_samples(0)
        .filter(|s| s.time_ns > 4 * SEC + SEC / 2)
        .map(|s| s.rate_bytes_per_sec)
        .collect();
    let bbr_max = *paced.iter().max().unwrap();
    eprintln!(
        "bbr paced at up to {bbr_max} B/s over 3-4 s; after the switch {:?} B/s; goodput {:.2} \
         Mbit/s over 5-8 s",
        after.iter().max(),
        goodput(&r, 5, 8)
    );
    assert!(
        bbr_max > 0 && bbr_max < 2 * CAPACITY_MBIT * MBIT / 8,
        "{bbr_max}"
    );
    // BBR paced at up to 7.47 MB/s; the datapath's pacing rate is the hand-over's unpaced one
    // (u32::MAX) from then on, not BBR's, and Reno keeps the link full (48.27 Mbit/s).
    assert!(
        after.iter().all(|r| *r == u64::from(u32::MAX)),
        "{:?}",
        after.iter().min()
    );
    assert!(goodput(&r, 5, 8) >= 0.9 * CAPACITY_MBIT as f64);
    // BBR had found the pipe full, so Reno takes over in congestion avoidance with BBR's
    // measured pipe as its threshold: no slow start from BBR's window, no loss. (Without the
    // threshold Reno doubled the window it took over into the 4-BDP buffer, lost and delivered
    // nothing for 0.5 s.)
    eprintln!(
        "retransmitted {} of {} packets",
        r.flows[0].retransmits, r.flows[0].packets_sent
    );
    assert_eq!(r.flows[0].retransmits, 0);
}

/// Share of flow 0's packets that were retransmitted.
fn retransmitted_share(r: &SimResult) -> f64 {
    r.flows[0].retransmits as f64 / r.flows[0].packets_sent as f64
}

/// `from` handed to `to` on [`small`]'s path and `from` alone: the swapped run and the share
/// of its packets retransmitted, and the share alone.
fn swapped_and_alone(from: &str, to: &str) -> (SimResult, f64, f64) {
    let alone = retransmitted_share(&small(from, None));
    let swapped = small(from, Some(to));
    assert_eq!(swapped.agent.bad_reports + swapped.agent.update_errors, 0);
    let share = retransmitted_share(&swapped);
    (swapped, share, alone)
}

/// One `alg` flow on 20 Mbit/s, 20 ms, a buffer of 2 BDP (100 kB), for 12 s, handed to `to`
/// at 5 s (`None`: left alone).
fn small(alg: &str, to: Option<&str>) -> SimResult {
    let mut s = single_bottleneck(&[alg], 20, 8, Amount::Bytes(100_000), 12);
    s.output.step = Dur::ms(50);
    s.agent.commands = to
        .map(|to| AgentCommand {
            at: Dur::secs(5),
            command: format!("set-algorithm 1 {to}"),
        })
        .into_iter()
        .collect();
    run(&s, None).unwrap()
}

#[test]
fn a_successor_with_a_start_up_skips_it_for_a_flow_past_its_own() {
    // A flow past its start-up hands on a threshold (a learner's, LEDBAT's once at its target,
    // RTCP's after its first halving stand for one); a successor with a start-up of its own
    // (Copa's slow start, a learner's, PolyCC's members') skips it, and a window-based one
    // stays out of slow start. Before, each successor started up again from the flow's rate
    // or window and doubled it into the buffer: of the packets sent, reno -> copa lost 4.71 %,
    // reno -> polycc 12.65 %, hercules -> cubic 1.23 %, vivace -> reno 1.72 %,
    // ledbat (5 ms target) -> polycc 12.50 % and rtcp -> cubic 1.02 %, against 0.70 %, 0.70 %, 0 %,
    // 1.29 %, 0 % and 0 % for the flow left alone (vivace's from its own slow start). Now
    // 0.67, 0.68, 0.03, 1.30, 0.00 and 0.03 %.
    for (from, to) in [
        ("reno", "copa"),
        ("reno", "polycc"),
        ("hercules", "cubic"),
        ("vivace", "reno"),
        ("ledbat:target=5ms", "polycc"),
        ("rtcp", "cubic"),
    ] {
        let (_, share, alone) = swapped_and_alone(from, to);
        eprintln!("{from} -> {to}: {share:.4} of packets retransmitted, {from} alone {alone:.4}");
        assert!(
            share <= alone + 0.002,
            "{from} -> {to}: {share} against {alone}"
        );
    }
}

#[test]
fn a_learner_that_takes_over_a_flow_measures_its_rtt_gradient_and_keeps_its_own_operating_point() {
    // A learner scores an MI by the RTT slope over several reports in it (8 per MI); the
    // hand-over must install the learner's report period, not keep its predecessor's once per
    // RTT. With one report per MI no slope could be fitted, every gradient read 0, and a
    // learner handed a flow near the capacity climbed into the 100 kB buffer and stayed there
    // (RTT 60 ms, of the packets sent reno -> vivace lost 4.6 %, cubic -> hercules 4.3 %
    // against 0.70 % and 0.89 % alone). Vivace-Distributed, holding its rate until JCCE's first
    // aggregate, held the initial rate of a new flow and slow-started again (dctcp -> it lost
    // 1.3 points more than dctcp alone); now it holds the rate it took over and probes around
    // it. Median RTT over 7-12 s now 20.6-20.7 ms (20 ms base), losses 0.68 %, 0.89 %, 0.68 %.
    for (from, to) in [
        ("reno", "vivace"),
        ("cubic", "hercules"),
        ("dctcp", "vivace-distributed"),
    ] {
        let (swapped, share, alone) = swapped_and_alone(from, to);
        let rtt = median_rtt_ms(&swapped, 7, 12);
        eprintln!(
            "{from} -> {to}: {share:.4} of packets retransmitted, {from} alone {alone:.4}; median \
             RTT 7-12 s {rtt:.1} ms, goodput {:.2} Mbit/s",
            goodput(&swapped, 7, 12)
        );
        assert!(
            share <= alone + 0.002,
            "{from} -> {to}: {share} against {alone}"
        );
        assert!(rtt < 1.25 * 20.0, "{from} -> {to}: median RTT {rtt} ms");
        assert!(goodput(&swapped, 7, 12) >= 0.9 * 20.0);
    }
}
