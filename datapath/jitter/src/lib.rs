//! How the extra one-way delay of a path varies ("jitter"): the processes shared by the
//! simulator and the emulator, so that a recipe's `link.jitter` is the same process on both.
//!
//! Every process here keeps packets in order: a packet never leaves before the one sent ahead of
//! it. They differ in what a flow sees:
//!
//! * [`JitterModel::Uniform`]: each packet draws its extra delay independently. Because a packet
//!   waits for the one ahead of it, a flow whose packets are closer together than the span sees
//!   most of them near the top of it: at 100 Mbit/s (one 1500-byte packet every 120 µs) a 2-ms
//!   span leaves a standard deviation of 0.28 ms where `Smooth` gives 0.47, and the delay's slope
//!   fitted over a 30-ms interval varies about six times less (ccp-sim's `jitter_models_table`
//!   test prints both). What the flow sees depends on how fast it sends.
//! * [`JitterModel::Smooth`]: the extra delay is a function of time, piecewise linear between
//!   random points, the same for every packet on the path at a given moment, whatever the
//!   flow's rate. Its slope stays within ±½, so order is kept without holding packets back.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which delay-variation process a path uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JitterModel {
    /// Independent per packet, uniform over the span; a packet waits for the one ahead of it.
    Uniform,
    /// Piecewise linear in time between random points `max(2·span, 1 ms)` apart (the default).
    #[default]
    Smooth,
}

impl JitterModel {
    /// Every model, for help texts and errors.
    pub const ALL: [JitterModel; 2] = [JitterModel::Uniform, JitterModel::Smooth];

    /// The name recipes and command lines use.
    pub fn name(self) -> &'static str {
        match self {
            JitterModel::Uniform => "uniform",
            JitterModel::Smooth => "smooth",
        }
    }
}

impl fmt::Display for JitterModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for JitterModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        JitterModel::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown jitter model `{s}`: expected `uniform` or `smooth`"))
    }
}

/// A 64-bit mixing function (splitmix64's finaliser): a counter-based random stream.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The `n`-th draw of a seeded stream, uniform in `[0, span]`.
pub fn uniform(seed: u64, span: u64, n: u64) -> u64 {
    splitmix(seed ^ splitmix(n)) % (span + 1)
}

/// [`JitterModel::Smooth`]: an extra delay in `[0, span]` at each time, in any one time unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Smooth {
    span: u64,
    period: u64,
    seed: u64,
}

impl Smooth {
    /// Over `[0, span]`, with random points `max(2·span, min_period)` apart (`min_period` keeps a
    /// small span from varying faster than a path plausibly does: 1 ms in the caller's unit).
    pub fn new(span: u64, min_period: u64, seed: u64) -> Smooth {
        Smooth {
            span,
            period: (2 * span).max(min_period).max(1),
            seed,
        }
    }

    /// The extra delay at time `t`.
    pub fn at(&self, t: u64) -> u64 {
        if self.span == 0 {
            return 0;
        }
        let k = t / self.period;
        let (a, b) = (
            uniform(self.seed, self.span, k) as i128,
            uniform(self.seed, self.span, k + 1) as i128,
        );
        let frac = (t % self.period) as i128;
        (a + (b - a) * frac / self.period as i128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_say_what_is_expected() {
        for m in JitterModel::ALL {
            assert_eq!(m.name().parse::<JitterModel>(), Ok(m));
        }
        let e = "gauss".parse::<JitterModel>().unwrap_err();
        assert!(
            e.contains("`gauss`") && e.contains("uniform") && e.contains("smooth"),
            "{e}"
        );
    }

    #[test]
    fn smooth_spans_its_range_and_keeps_order() {
        let s = Smooth::new(2_000, 1_000, 7);
        let (mut lo, mut hi, mut last) = (u64::MAX, 0, 0);
        for t in 0..10_000_000u64 {
            let d = t + s.at(t);
            assert!(d >= last, "reordered at {t}");
            last = d;
            let j = s.at(t);
            assert!(j <= 2_000);
            lo = lo.min(j);
            hi = hi.max(j);
        }
        assert!(lo < 100 && hi > 1_900, "{lo} {hi}");
        // The mean over a long time is the middle of the span.
        let mean = (0..1_000_000u64).map(|t| s.at(t * 37) as f64).sum::<f64>() / 1e6;
        assert!((mean - 1_000.0).abs() < 60.0, "{mean}");
    }

    #[test]
    fn a_seed_fixes_the_process_and_the_unit_only_scales_its_period() {
        let a: Vec<u64> = (0..100)
            .map(|t| Smooth::new(2_000, 1_000, 3).at(t * 997))
            .collect();
        let b: Vec<u64> = (0..100)
            .map(|t| Smooth::new(2_000, 1_000, 3).at(t * 997))
            .collect();
        let c: Vec<u64> = (0..100)
            .map(|t| Smooth::new(2_000, 1_000, 4).at(t * 997))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // µs and ns: knots 4 ms apart in both; the 1-ms floor applies to small spans.
        assert_eq!(
            Smooth::new(2_000, 1_000, 3).period * 1000,
            Smooth::new(2_000_000, 1_000_000, 3).period
        );
        assert_eq!(Smooth::new(100, 1_000, 3).period, 1_000);
    }

    #[test]
    fn uniform_draws_cover_the_span() {
        let mut seen = [false; 11];
        for n in 0..1000 {
            let v = uniform(9, 10, n);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
