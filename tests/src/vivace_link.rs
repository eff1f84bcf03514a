//! The simulated link of the PCC Vivace papers (Vivace NSDI 2018 and Vivace-Distributed §7,
//! Emulab setup) that the online-learner tests share, and the goodput they read from a run.

use ccp_sim::SimResult;
use ccp_sim::scenario::{
    Amount, DumbbellSpec, Dur, FlowSpec, LinkSpec, Rate, Scenario, TopologySpec, example,
};

const MBIT: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

/// The papers' drop-tail bottleneck buffer.
const BUFFER: Amount = Amount::Bytes(75_000);

/// A dumbbell of one bulk sender per algorithm in `algs` (`s{i}` to `r{i}`), running `secs` s:
/// 100 Mbit/s bottleneck with random `loss` and a 75 KB drop-tail buffer, 30 ms base RTT (1 + 13 + 1 ms each
/// way), 1 Gbit/s access links, samples every 100 ms.
pub fn dumbbell(algs: &[&str], loss: f64, secs: u64) -> Scenario {
    let mut s = single_bottleneck(algs, 100, 13, BUFFER, secs);
    if let TopologySpec::Dumbbell(d) = &mut s.topology {
        d.bottleneck.loss = loss;
    }
    s.output.step = Dur::ms(100);
    s
}

/// A dumbbell of one bulk sender per algorithm in `algs` (`s{i}` to `r{i}`), running `secs` s:
/// a bottleneck of `mbit` Mbit/s with `delay_ms` of propagation each way and a drop-tail
/// `buffer`, 1 Gbit/s access links of 1 ms each way (base RTT `2 · delay_ms + 4` ms); the rest
/// is the built-in `dumbbell` example's.
pub fn single_bottleneck(
    algs: &[&str],
    mbit: u64,
    delay_ms: u64,
    buffer: Amount,
    secs: u64,
) -> Scenario {
    let mut s = example("dumbbell").unwrap();
    s.duration = Dur::secs(secs);
    s.topology = TopologySpec::Dumbbell(DumbbellSpec {
        senders: algs.len() as u32,
        receivers: None,
        bottleneck: LinkSpec::new(Rate::from_bits(mbit * MBIT), Dur::ms(delay_ms))
            .with_buffer(buffer),
        access: LinkSpec::new(Rate::from_bits(1000 * MBIT), Dur::ms(1)),
        sender_delays: vec![],
    });
    s.flows = algs
        .iter()
        .enumerate()
        .map(|(i, a)| FlowSpec::bulk(&format!("s{i}"), &format!("r{i}"), a))
        .collect();
    s
}

/// Mean goodput of flow `f` in second `sec` (the samples in `(sec, sec + 1]` s), Mbit/s.
pub fn goodput(r: &SimResult, f: u32, sec: u64) -> f64 {
    let xs: Vec<f64> = r
        .flow_samples(f)
        .filter(|x| x.time_ns > sec * SEC && x.time_ns <= (sec + 1) * SEC)
        .map(|x| x.goodput_bps as f64 / 1e6)
        .collect();
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}
