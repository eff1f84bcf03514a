//! PACCP (`ccp-algorithms`, with the agent's pricing) in the simulator (`ccp-sim`), driven by the
//! real agent in virtual time.
//!
//! The paper's long-lived test (Figs. 4–5) runs on a 6×5 leaf-spine with 10 Gbit/s host links
//! (10 µs) and 40 Gbit/s fabric links (20 µs), 100/400-packet buffers, and 8 flows (4 BE, 2 DS,
//! 2 MRG) on every leaf-to-spine link. Here one such link is simulated at a tenth of the rates
//! and ten times the delays, so windows and buffers are the same in packets: 2 leaves, 1 spine,
//! 8 hosts per leaf, 1 Gbit/s host links (100 µs), 4 Gbit/s fabric links (200 µs), buffers 100
//! and 400 packets, hosts h0–h7 sending to h8–h15 (bottleneck `leaf0->spine0`), θ scaled by a
//! tenth too (2 → 0.2, 7 → 0.7 Gbit/s). The classes come from a VBP pricing policy by source
//! address (one flow per VM, so VBP and FBP coincide, as in the paper).
//!
//! Each test prints what it measured; the simulator is deterministic.

use ccp_algorithms::paccp::{normalized_utility, optimal_allocation};
use ccp_sim::scenario::Scenario;
use ccp_sim::{SimResult, run};
use std::path::Path;

const SEC: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn scenario(yaml: &str) -> Scenario {
    Scenario::parse(Path::new("paccp-test.yaml"), yaml).unwrap()
}

/// Payload bytes flow `flow` delivered by time `t` (ns), from its samples.
fn delivered_at(r: &SimResult, flow: u32, t: u64) -> u64 {
    r.flow_samples(flow)
        .filter(|s| s.time_ns <= t)
        .map(|s| s.delivered_bytes)
        .max()
        .unwrap_or(0)
}

/// Goodput of `flow` in (from, to], bit/s.
fn goodput(r: &SimResult, flow: u32, from: u64, to: u64) -> f64 {
    (delivered_at(r, flow, to) - delivered_at(r, flow, from)) as f64 * 8.0 * SEC as f64
        / (to - from) as f64
}

/// The paper's normalized utility (eqs. 5–6) of per-flow `(ω, Mbit/s)` against the optimum,
/// with the MSS and a 1 ms RTT (the ratio hardly depends on the RTT).
fn utility_of(measured: &[(f64, f64)], optimal: &[(f64, f64)], _end: u64) -> f64 {
    let bytes = |v: &[(f64, f64)]| -> Vec<(f64, f64)> {
        v.iter().map(|(w, x)| (*w, x * 125_000.0)).collect()
    };
    normalized_utility(&bytes(measured), &bytes(optimal), 1448.0, 0.001)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The scaled leaf-spine uplink of Figs. 4–5: `extra` lists hosts (0–7) with a second flow.
/// Timing noise of every host's packets (uniform in ±3 µs, order kept: the `jitter` of the host
/// links), one packet time of the 4 Gbit/s uplink. Without it every host link has the same rate
/// and delay and the deterministic simulator phase-locks the hosts' packets to the uplink's
/// departures (Floyd and Jacobson's traffic phase effects): some flows then lose far more
/// often than others and DS/BE falls to 1.31 (θ = 0.2 Gbit/s) with the same laws.
const HOST_JITTER: &str = "3us";

fn leaf_spine(theta_mbit: u64, omega_mrg: f64, extra: &[u32], secs: u64) -> Scenario {
    leaf_spine_n([4, 2, 2], theta_mbit, omega_mrg, extra, secs)
}

/// One uplink shared by `n` = (BE, DS, MRG) flows, one per host (a VBP VM each): hosts
/// 0..n_BE are BE, then DS (0, 2), then MRG (θ, ω), every host h sending to h + hosts per leaf;
/// `extra` lists hosts with a second flow.
fn leaf_spine_n(
    n: [u32; 3],
    theta_mbit: u64,
    omega_mrg: f64,
    extra: &[u32],
    secs: u64,
) -> Scenario {
    let hosts = n.iter().sum::<u32>();
    let mut vms = String::new();
    for h in 0..hosts {
        let class = if h < n[0] {
            "class: be".to_string()
        } else if h < n[0] + n[1] {
            "class: ds, omega: 2".to_string()
        } else {
            format!("class: mrg, theta: {theta_mbit}mbit, omega: {omega_mrg}")
        };
        vms += &format!("      - {{name: h{h}, src: 10.0.0.{}, {class}}}\n", h + 1);
    }
    let mut flows = String::new();
    for h in (0..hosts).chain(extra.iter().copied()) {
        flows += &format!("  - {{src: h{h}, dst: h{}, alg: paccp}}\n", h + hosts);
    }
    scenario(&format!(
        "\
duration: {secs}s
transport: {{min_rto: 5ms, initial_rto: 20ms, tick: 1ms}}
agent:
  default_alg: paccp
  pricing:
    vms:
{vms}topology:
  kind: leaf_spine
  spines: 1
  leaves: 2
  hosts_per_leaf: {hosts}
  host_link: {{rate: 1gbit, delay: 100us, buffer: 100pkts, jitter: {HOST_JITTER}}}
  fabric_link: {{rate: 4gbit, delay: 200us, buffer: 400pkts}}
flows:
{flows}output: {{step: 1ms, flow_series: all, queues: [leaf0->spine0]}}
"
    ))
}

/// The flows of each class when `n` = (BE, DS, MRG) flows are numbered class by class.
fn class_flows(n: [u32; 3]) -> [std::ops::Range<u32>; 3] {
    [0..n[0], n[0]..n[0] + n[1], n[0] + n[1]..n[0] + n[1] + n[2]]
}

/// Per-class mean goodput (Mbit/s) in (from, to] of the flows of `n` (numbered class by class),
/// and the fraction of 10 ms samples in which the MRG class's mean rate was at least θ.
fn class_rates(r: &SimResult, n: [u32; 3], from: u64, to: u64, theta_bps: f64) -> ([f64; 3], f64) {
    let classes = class_flows(n).map(|c| {
        let v: Vec<f64> = c.map(|f| goodput(r, f, from, to) / 1e6).collect();
        mean(&v)
    });
    let mrg = class_flows(n)[2].clone();
    let step = 10 * MS;
    let (mut above, mut samples) = (0, 0);
    let mut t = from;
    while t + step <= to {
        let v: Vec<f64> = mrg.clone().map(|f| goodput(r, f, t, t + step)).collect();
        samples += 1;
        if mean(&v) >= theta_bps {
            above += 1;
        }
        t += step;
    }
    (classes, above as f64 / samples as f64)
}

/// Per-class loss events in (from, to] of the flows of `n`: (events per second, events per
/// 1000 packets delivered) of BE, DS and MRG. A loss event is a window cut (to below 0.8 of the
/// previous sample) between two consecutive 1 ms samples of the flow.
fn loss_events(r: &SimResult, n: [u32; 3], from: u64, to: u64) -> [(f64, f64); 3] {
    let secs = (to - from) as f64 / SEC as f64;
    class_flows(n).map(|flows| {
        let n = flows.len() as f64;
        let (mut events, mut packets) = (0.0, 0.0);
        for f in flows {
            let s: Vec<_> = r
                .flow_samples(f)
                .filter(|s| s.time_ns > from && s.time_ns <= to)
                .collect();
            events += s
                .windows(2)
                .filter(|w| w[1].cwnd_bytes * 10 < w[0].cwnd_bytes * 8)
                .count() as f64;
            packets += (delivered_at(r, f, to) - delivered_at(r, f, from)) as f64 / 1448.0;
        }
        (events / n / secs, 1000.0 * events / packets)
    })
}

fn print_loss_events(e: &[(f64, f64); 3]) {
    println!(
        "  loss events per second BE/DS/MRG {:.1}/{:.1}/{:.1}, per 1000 packets {:.3}/{:.3}/{:.3}",
        e[0].0, e[1].0, e[2].0, e[0].1, e[1].1, e[2].1
    );
}

/// The MRG flows' windows in (from, to] against `W_min` = θ·srtt of the same 1 ms sample:
/// (mean window / mean W_min, fraction of samples within 5 % of W_min).
fn mrg_windows(r: &SimResult, n: [u32; 3], from: u64, to: u64, theta_bps: f64) -> (f64, f64) {
    let (mut w, mut w_min, mut near, mut samples) = (0.0, 0.0, 0.0, 0.0);
    for f in class_flows(n)[2].clone() {
        for s in r
            .flow_samples(f)
            .filter(|s| s.time_ns > from && s.time_ns <= to)
        {
            let floor = theta_bps / 8.0 * s.srtt_us as f64 / 1e6;
            w += s.cwnd_bytes as f64;
            w_min += floor;
            samples += 1.0;
            if (s.cwnd_bytes as f64) < 1.05 * floor {
                near += 1.0;
            }
        }
    }
    (w / w_min, near / samples)
}

/// What one long-lived run on the uplink measured.
struct LongLived {
    /// Per-class mean rates (Mbit/s) and the optimum's.
    rates: [f64; 3],
    opt: [f64; 3],
    /// Fraction of 10 ms samples with the MRG class's mean at or above θ.
    above: f64,
    /// The normalized utility (eqs. 5–6).
    utility: f64,
}

/// Run `n` = (BE, DS, MRG) long-lived flows on the scaled uplink for 7 s and measure from 1 s.
fn check_long_lived(n: [u32; 3], theta_mbit: u64, omega_mrg: f64) -> LongLived {
    let r = run(&leaf_spine_n(n, theta_mbit, omega_mrg, &[], 7), None).unwrap();
    assert_eq!(
        r.agent.algorithms.get("paccp"),
        Some(&u64::from(n.iter().sum::<u32>()))
    );
    let (from, to) = (SEC, 7 * SEC);
    let theta = theta_mbit as f64 * 1e6;
    let (rates, above) = class_rates(&r, n, from, to, theta);
    let opt = optimal_allocation(4000.0, n, 2.0, theta_mbit as f64, omega_mrg);
    let weights = [1.0, 2.0, omega_mrg];
    let pairs = |x: &[f64; 3]| -> Vec<(f64, f64)> {
        n.iter()
            .enumerate()
            .flat_map(|(c, k)| std::iter::repeat_n((weights[c], x[c]), *k as usize))
            .collect()
    };
    let utility = utility_of(&pairs(&rates), &pairs(&opt), r.end_ns);
    let total: f64 = (0..3).map(|c| rates[c] * f64::from(n[c])).sum();
    println!(
        "{n:?} flows, theta {theta_mbit} Mbit/s, omega_mrg {omega_mrg}: BE/DS/MRG \
         {:.0}/{:.0}/{:.0} Mbit/s (optimum {:.0}/{:.0}/{:.0}), DS/BE {:.2}, MRG/optimum {:.2}, \
         MRG class mean >= theta in {:.1} % of 10 ms samples, total {total:.0} Mbit/s of 4000, \
         normalized utility {utility:.4}",
        rates[0],
        rates[1],
        rates[2],
        opt[0],
        opt[1],
        opt[2],
        rates[1] / rates[0],
        rates[2] / opt[2],
        100.0 * above
    );
    print_loss_events(&loss_events(&r, n, from, to));
    let (excess, near) = mrg_windows(&r, n, from, to, theta);
    println!(
        "  MRG windows: mean {excess:.2} x W_min, within 5 % of W_min in {:.0} % of 1 ms samples",
        100.0 * near
    );
    LongLived {
        rates,
        opt,
        above,
        utility,
    }
}

/// What every long-lived run must show: MRG at or above θ (its class mean, and in 90 % of
/// 10 ms samples) and not far above its optimal rate, the normalized utility at 0.95 or more,
/// DS/BE within `ds_be`.
fn assert_long_lived(m: &LongLived, theta_mbit: u64, ds_be: std::ops::RangeInclusive<f64>) {
    let LongLived {
        rates,
        opt,
        above,
        utility,
    } = m;
    assert!(
        rates[2] >= theta_mbit as f64,
        "MRG mean {:.0} < θ {theta_mbit}",
        rates[2]
    );
    assert!(
        *above >= 0.9,
        "MRG class at or above θ only {above:.3} of the time"
    );
    // The optimum gives MRG max(θ, its weighted share); eq. 18 lets it above that between
    // losses (CD1 restores W_min within an RTT of every halving, CD2 adds ω per RTT), so its
    // mean sits above the optimum by what it gains between its loss events (measured 0.95–1.18
    // of the optimum; the paper's 4.09 and 7.14 Gbit/s are 1.02 of it).
    assert!(
        rates[2] <= 1.25 * opt[2],
        "MRG mean {:.0} > 1.25 x its optimum {:.0}",
        rates[2],
        opt[2]
    );
    assert!(*utility >= 0.95, "normalized utility {utility:.4}");
    let ratio = rates[1] / rates[0];
    assert!(ds_be.contains(&ratio), "DS/BE {ratio:.2} not in {ds_be:?}");
}

#[test]
fn long_lived_classes_match_the_optimum_as_in_fig_4() {
    // The paper: MRG flows always above θ (Figs. 4b/4d, 4.09 and 7.14 Gbit/s for θ = 2 and 7);
    // DS/BE 1.67 and 1.71 where the optimum is 2; utility slightly below the optimum.
    //
    // Measured over 1–7 s: DS/BE 1.50 with θ = 0.2 Gbit/s (ω_MRG = 1) and 1.60 with θ = 0.7
    // Gbit/s (ω_MRG = 2) (1.54 and 1.55 over 1–13 s, before CD1's per-ACK fix); MRG at 1.02
    // and 1.14 of its optimum. DS
    // gets less than twice BE because it sees more loss events per second (14.2 against 11.0
    // in the first case), as the paper explains its own 1.67. Without the hosts' timing noise
    // (HOST_JITTER) the same uplink gives 1.31 and 1.52, at the paper's own rates and delays
    // (10/40 Gbit/s, 10/20 µs) 1.29: the scale plays no part, the phase locking does.
    let n = [4, 2, 2];
    let first = check_long_lived(n, 200, 1.0);
    let second = check_long_lived(n, 700, 2.0);
    assert_long_lived(&first, 200, 1.45..=2.0);
    assert_long_lived(&second, 700, 1.5..=2.0);
}

/// The testbed of Fig. 7: a 3×1 leaf-spine, every link 1 Gbit/s, VMs 1–9 on three leaves (three
/// per leaf), VM i sending to VM (i+3) mod 9; VMs 1, 4, 7 BE, 2, 5, 8 DS (0, 2), 3, 6, 9 MRG
/// (400 Mbit/s, 2). Every leaf uplink carries one flow of each class: optimum 200/400/400.
/// The hosts' packets get ±12 µs of timing noise, one packet time at 1 Gbit/s: with host links
/// and uplinks of the same rate, the MRG flow's backlogged host otherwise sends in lockstep with
/// the uplink's departures, takes every slot the uplink frees, and the BE and DS flows lose 15
/// times as often per packet (BE/DS/MRG 115/198/612 Mbit/s).
fn testbed(secs: u64) -> Scenario {
    let mut vms = String::new();
    let mut flows = String::new();
    for i in 1..=9u32 {
        let class = match i % 3 {
            1 => "class: be",
            2 => "class: ds, omega: 2",
            _ => "class: mrg, theta: 400mbit, omega: 2",
        };
        vms += &format!("      - {{name: vm{i}, src: 10.0.0.{i}, {class}}}\n");
        let dst = (i + 3 - 1) % 9; // VM i is host h(i-1); its peer is VM (i+3) mod 9
        flows += &format!("  - {{src: h{}, dst: h{dst}, alg: paccp}}\n", i - 1);
    }
    scenario(&format!(
        "\
duration: {secs}s
transport: {{min_rto: 5ms, initial_rto: 20ms, tick: 1ms}}
agent:
  default_alg: paccp
  pricing:
    vms:
{vms}topology:
  kind: leaf_spine
  spines: 1
  leaves: 3
  hosts_per_leaf: 3
  host_link: {{rate: 1gbit, delay: 50us, buffer: 100pkts, jitter: 12us}}
  fabric_link: {{rate: 1gbit, delay: 50us, buffer: 100pkts}}
flows:
{flows}output: {{step: 10ms, flow_series: all}}
"
    ))
}

#[test]
fn testbed_of_fig_7_gives_the_classes_their_order_and_mrg_its_guarantee() {
    let r = run(&testbed(6), None).unwrap();
    let (from, to) = (SEC, 6 * SEC);
    let rate = |i: u32| goodput(&r, i - 1, from, to) / 1e6;
    let class = |c: [u32; 3]| mean(&c.map(rate));
    let (be, ds, mrg) = (class([1, 4, 7]), class([2, 5, 8]), class([3, 6, 9]));
    let opt = optimal_allocation(1000.0, [1, 1, 1], 2.0, 400.0, 2.0);
    let pairs = |x: [f64; 3]| vec![(1.0, x[0]), (2.0, x[1]), (2.0, x[2])];
    let utility = utility_of(&pairs([be, ds, mrg]), &pairs(opt), r.end_ns);
    println!(
        "testbed: BE/DS/MRG {be:.0}/{ds:.0}/{mrg:.0} Mbit/s (optimum {:.0}/{:.0}/{:.0}; paper \
         180/310/410), DS/BE {:.2}, normalized utility {utility:.4}",
        opt[0],
        opt[1],
        opt[2],
        ds / be
    );
    // Measured: 177/302/427 Mbit/s, DS/BE 1.70, MRG at 1.07 of its optimum (the paper's
    // testbed 180/310/410, 1.7).
    assert!(mrg >= 400.0, "MRG {mrg:.0} below θ");
    assert!(
        mrg <= 1.25 * opt[2],
        "MRG {mrg:.0} above 1.25 x its optimum"
    );
    assert!((1.5..=2.0).contains(&(ds / be)), "DS/BE {:.2}", ds / be);
    assert!(utility >= 0.95, "normalized utility {utility:.4}");
}

/// A 1 Gbit/s dumbbell shared by two long-lived flows of one FBP VM (10.0.0.1 and 10.0.0.2),
/// both BE until `commands` change them.
fn fbp_pair(commands: &str, secs: u64) -> Scenario {
    scenario(&format!(
        "\
duration: {secs}s
transport: {{min_rto: 5ms, initial_rto: 20ms, tick: 1ms}}
agent:
  default_alg: paccp
  pricing:
    vms:
      - {{name: tenant, src: [10.0.0.1, 10.0.0.2], model: fbp}}
  commands:
{commands}topology:
  kind: dumbbell
  senders: 2
  bottleneck: {{rate: 1gbit, delay: 100us, buffer: 100pkts}}
  access: {{rate: 10gbit, delay: 10us}}
flows:
  - {{src: s0, dst: r0, alg: paccp}}
  - {{src: s1, dst: r1, alg: paccp}}
output: {{step: 1ms, flow_series: all}}
"
    ))
}

#[test]
fn a_runtime_fbp_upgrade_changes_the_share_within_a_few_rtts() {
    // At 2 s the operator upgrades flow 0 (10.0.0.1:10000) to MRG with θ = 700 Mbit/s; at 4 s
    // it downgrades it to BE again.
    let cmds = "    - {at: 2s, command: \"set-class 10.0.0.1:10000 mrg --theta 700mbit --weight 2\"}\n    - {at: 4s, command: \"set-class 10.0.0.1:10000 be\"}\n";
    let r = run(&fbp_pair(cmds, 6), None).unwrap();
    let share = |from: u64, to: u64| {
        let a = goodput(&r, 0, from, to);
        a / (a + goodput(&r, 1, from, to))
    };
    let before = share(SEC, 2 * SEC);
    // The base RTT is 240 µs; with the 100-packet queue full it is about 1.4 ms. The command
    // runs at the first report after 2 s and the flow takes it at its next report: its window
    // must leave the BE sawtooth (at most +1 packet per RTT) within 2 ms, i.e. a few RTTs.
    let cwnd = |from: u64, to: u64| {
        r.flow_samples(0)
            .filter(|s| s.time_ns > from && s.time_ns <= to)
            .map(|s| s.cwnd_bytes)
            .max()
            .unwrap_or(0)
    };
    let (w_before, w_after) = (cwnd(2 * SEC - MS, 2 * SEC), cwnd(2 * SEC, 2 * SEC + 2 * MS));
    let first = share(2 * SEC, 2 * SEC + 100 * MS);
    let during = share(2 * SEC + 100 * MS, 4 * SEC);
    let after = share(5 * SEC, 6 * SEC);
    let bill = r.bill.as_ref().unwrap();
    let flow0 = bill["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["flow"] == "10.0.0.1:10000")
        .unwrap();
    println!(
        "flow 0: share {before:.3} before; window {} -> {} packets within 2 ms of the \
         upgrade; share {first:.3} over the next 100 ms, {during:.3} until the downgrade \
         (MRG with θ = 700 Mbit/s: optimum 0.725 of the goodput), {after:.3} after it; bill {}",
        w_before / 1448,
        w_after / 1448,
        flow0
    );
    assert!((0.4..=0.6).contains(&before), "share before {before:.3}");
    assert!(
        w_after >= 2 * w_before,
        "window {w_before} -> {w_after} bytes"
    );
    // Measured 0.663: below the optimum 0.725 because every loss halves the MRG flow and holds
    // it for the recovery RTT before CD1 brings it back to W_min (about 2 RTTs under θ per
    // loss epoch).
    assert!(
        first >= 0.6 && during >= 0.62,
        "share as MRG {first:.3}, {during:.3}"
    );
    assert!(
        (0.4..=0.6).contains(&after),
        "share after the downgrade {after:.3}"
    );
    assert_eq!(flow0["class_changes"], 2);
    assert_eq!(flow0["class"], "be");
    // The flow paid the MRG surcharge for the 2 s it was MRG only: P0^s + P1^s + P2^s·0.7, with
    // the default prices (P1^s = 0.6·P0^s).
    let surcharge = 0.1 + 0.06 + 0.5 * 0.7;
    let paid = flow0["bill"].as_f64().unwrap();
    assert!(
        (paid - 2.0 * surcharge).abs() < 0.01 * surcharge,
        "flow 0 paid {paid}"
    );
}

#[test]
fn vbp_splits_a_vms_class_among_its_flows_and_the_bills_add_up() {
    // The Fig. 5 setup (θ = 0.7 Gbit/s, ω_MRG = 2), with a second flow on half the hosts of every
    // class (h0, h1, h4, h6) that carries 80 MB (the fastest end after 2 s, so the split changes while the others run).
    let mut s = leaf_spine(700, 2.0, &[0, 1, 4, 6], 3);
    for f in s.flows.iter_mut().skip(8) {
        f.size = Some(ccp_sim::scenario::Size(80_000_000));
        f.start = ccp_sim::scenario::Dur(500 * MS);
    }
    let r = run(&s, None).unwrap();
    let bill = r.bill.as_ref().unwrap();
    let flows = bill["flows"].as_array().unwrap();
    let vms = bill["vms"].as_array().unwrap();
    for vm in vms {
        let name = vm["vm"].as_str().unwrap();
        let sum: f64 = flows
            .iter()
            .filter(|f| f["vm"] == name)
            .map(|f| f["bill"].as_f64().unwrap())
            .sum();
        let total = vm["bill"].as_f64().unwrap();
        assert!(
            (sum - total).abs() <= 1e-9 * total.max(1.0),
            "{name}: flows {sum} vs VM {total}"
        );
    }
    // Every VM paid its class's price for the 3 s it had a live flow, whatever the split.
    let vm = |n: &str| vms.iter().find(|v| v["vm"] == n).unwrap();
    let price = |omega: f64, theta_gbps: f64| 1.0 + 0.6 * (omega - 1.0) + 0.5 * theta_gbps;
    for (name, p) in [
        ("h0", price(1.0, 0.0)),
        ("h4", price(2.0, 0.0)),
        ("h6", price(2.0, 0.7)),
    ] {
        let b = vm(name)["bill"].as_f64().unwrap();
        assert!((b - 3.0 * p).abs() < 1e-3, "{name}: {b} vs {}", 3.0 * p);
    }
    // While both flows of a two-flow VM ran, each had (θ/2, ω/2); the VM's two flows together
    // got about what a one-flow VM of the same class got (the paper's Fig. 5c).
    let (from, to) = (SEC, 2 * SEC);
    let done: Vec<_> = r.flows.iter().skip(8).filter(|f| f.completed).collect();
    println!(
        "second flows completed: {} of 4 (FCTs {:?} ms)",
        done.len(),
        done.iter()
            .map(|f| f.fct_ns.unwrap() / MS)
            .collect::<Vec<_>>()
    );
    let rate = |f: u32| goodput(&r, f, from, to) / 1e6;
    let ends: Vec<u64> = r.flows.iter().skip(8).map(|f| f.end_ns).collect();
    assert!(
        ends.iter().all(|e| *e > to),
        "a second flow ended before {to} ns: {ends:?}"
    );
    for (one, two, extra, class) in [(2, 0, 8, "BE"), (5, 4, 10, "DS"), (7, 6, 11, "MRG")] {
        let (single, pair) = (rate(one), rate(two) + rate(extra));
        println!("{class}: one-flow VM {single:.0} Mbit/s, two-flow VM {pair:.0} Mbit/s");
        assert!(
            (0.6..=1.6).contains(&(pair / single)),
            "{class}: two-flow VM {pair:.0} vs one-flow VM {single:.0}"
        );
    }
}

// -------------------------------------------------------------------------------------------
// The real agent: pricing policy, control socket, bill at exit
// -------------------------------------------------------------------------------------------

/// `ccp-agent ctl --ctl SOCKET ARGS...`: (success, answer).
fn ctl(socket: &Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(ccp_tests::workspace_bin("ccp-agent").unwrap())
        .arg("ctl")
        .arg("--ctl")
        .arg(socket)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn the_agent_takes_class_changes_on_its_control_socket_and_writes_the_bill() {
    use ccp_engine::FlowInfo;
    use ccp_tests::{Agent, TestDatapath, ack};
    use std::time::Duration;
    const MSS: u32 = 1448;
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("pricing.yaml");
    std::fs::write(
        &policy,
        "vms:\n  - {name: tenant, src: 10.0.0.1, model: fbp}\n",
    )
    .unwrap();
    let (ctl_sock, bill) = (dir.path().join("agent.ctl"), dir.path().join("bill.json"));
    let agent = Agent::start(
        dir.path(),
        &[
            "--default-alg",
            "paccp",
            "--pricing",
            policy.to_str().unwrap(),
            "--ctl",
            ctl_sock.to_str().unwrap(),
            "--bill",
            bill.to_str().unwrap(),
        ],
    )
    .unwrap();
    let mut dp = TestDatapath::connect(dir.path(), "dp", &agent.socket).unwrap();
    assert!(
        dp.poll_until(Duration::from_secs(5), |d| d
            .engine
            .agent_version()
            .is_some()),
        "agent never answered READY"
    );
    let sid = dp
        .start_flow(FlowInfo {
            init_cwnd: 10 * MSS,
            mss: MSS,
            src_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 1)),
            src_port: 40000,
            dst_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 2)),
            dst_port: 5201,
            cong_alg: "paccp".into(),
        })
        .unwrap();
    // Slow start, one MSS acknowledged per 1 ms step (5 ms RTT): the window's growth per step.
    let growth = |dp: &mut TestDatapath, steps: usize| {
        let cwnd = |dp: &TestDatapath| {
            dp.seen
                .cwnd
                .get(&sid)
                .and_then(|v| v.last())
                .copied()
                .unwrap_or(10 * MSS)
        };
        let start = cwnd(dp);
        for _ in 0..steps {
            dp.poll();
            let w = cwnd(dp);
            let _ = dp.invoke(sid, &ack(MSS, 5_000, w, w / 2));
            std::thread::sleep(Duration::from_millis(1));
        }
        f64::from(cwnd(dp) - start)
    };
    growth(&mut dp, 20);
    let be = growth(&mut dp, 60);
    let (ok, answer) = ctl(
        &ctl_sock,
        &["set-class", "10.0.0.1:40000", "ds", "--weight", "3"],
    );
    assert!(ok && answer.starts_with("ok"), "{answer}");
    growth(&mut dp, 20);
    let ds = growth(&mut dp, 60);
    println!("slow-start growth per 60 ms: BE {be} bytes, then DS (ω = 3) {ds} bytes");
    // Eq. 17: (3 − 3^(1−ω))/2 per acknowledged byte, 1 for BE, 1.44 for ω = 3.
    assert!(ds / be > 1.3, "BE {be}, DS {ds}");
    let (ok, answer) = ctl(&ctl_sock, &["set-class", "10.9.9.9:1", "ds"]);
    assert!(!ok && answer.starts_with("error:"), "{answer}");
    let (ok, answer) = ctl(&ctl_sock, &["bill"]);
    let live: serde_json::Value = serde_json::from_str(answer.trim()).unwrap();
    assert!(ok && live["flows"][0]["class"] == "ds", "{live}");
    dp.end_flow(sid).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(agent.stop().unwrap().success());
    let b: serde_json::Value = serde_json::from_slice(&std::fs::read(&bill).unwrap()).unwrap();
    let (vm, flow) = (&b["vms"][0], &b["flows"][0]);
    assert_eq!(
        (vm["vm"].as_str(), flow["flow"].as_str()),
        (Some("tenant"), Some("10.0.0.1:40000"))
    );
    assert_eq!(flow["class_changes"], 1);
    let sum = vm["base"].as_f64().unwrap() + flow["bill"].as_f64().unwrap();
    assert!((vm["bill"].as_f64().unwrap() - sum).abs() < 1e-9, "{b}");
    assert!(
        flow["bill"].as_f64().unwrap() > 0.0 && flow["bytes"].as_u64().unwrap() > 0,
        "{b}"
    );
}
