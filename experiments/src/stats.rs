//! Statistics over runs and samples: nearest-rank percentiles, mean, sample standard deviation,
//! and the 95 % confidence interval of the mean from Student's t distribution.

use serde::{Deserialize, Serialize};

/// Summary of one metric over the runs of a sweep point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Runs that have the metric.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); none for a single run.
    pub std: Option<f64>,
    /// Half-width of the 95 % confidence interval of the mean, `t(0.975, n−1) · std / √n`; none
    /// for a single run.
    pub ci95: Option<f64>,
    pub min: f64,
    pub max: f64,
}

/// Two-sided 95 % quantiles of Student's t, `t(0.975, df)` for df = 1..=30.
const T975: [f64; 30] = [
    12.706_204_736,
    4.302_652_730,
    3.182_446_305,
    2.776_445_105,
    2.570_581_836,
    2.446_911_851,
    2.364_624_252,
    2.306_004_135,
    2.262_157_163,
    2.228_138_852,
    2.200_985_160,
    2.178_812_830,
    2.160_368_656,
    2.144_786_688,
    2.131_449_546,
    2.119_905_299,
    2.109_815_578,
    2.100_922_040,
    2.093_024_054,
    2.085_963_447,
    2.079_613_845,
    2.073_873_068,
    2.068_657_610,
    2.063_898_562,
    2.059_538_553,
    2.055_529_439,
    2.051_830_516,
    2.048_407_142,
    2.045_229_642,
    2.042_272_456,
];

/// `t(0.975, df)`: exact table up to 30 degrees of freedom, then the Cornish–Fisher expansion
/// around the normal quantile (error below 1e-4).
pub fn t975(df: usize) -> f64 {
    if df == 0 {
        return f64::INFINITY;
    }
    if df <= 30 {
        return T975[df - 1];
    }
    let z: f64 = 1.959_963_985;
    let n = df as f64;
    let z3 = z.powi(3);
    let z5 = z.powi(5);
    let z7 = z.powi(7);
    z + (z3 + z) / (4.0 * n)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * n * n)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * n * n * n)
}

/// Mean, standard deviation and 95 % CI of `values` (none if empty).
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = if values.iter().all(|v| *v == values[0]) {
        values[0]
    } else {
        values.iter().sum::<f64>() / n as f64
    };
    let all_equal = values.iter().all(|v| *v == values[0]);
    let (std, ci95) = if n >= 2 && all_equal {
        (Some(0.0), Some(0.0))
    } else if n >= 2 {
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let std = var.sqrt();
        (Some(std), Some(t975(n - 1) * std / (n as f64).sqrt()))
    } else {
        (None, None)
    };
    Some(Summary {
        n,
        mean,
        std,
        ci95,
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// The `q`-quantile (0..=1) of sorted values, nearest rank; 0 if empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Sort a copy and take quantiles `qs`.
pub fn percentiles(values: &[f64], qs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    qs.iter().map(|q| percentile(&v, *q)).collect()
}

/// The interval each sample of a time series covers, from its times `t` (increasing): the time
/// since the previous sample; the first sample's, as long as the gap to the second (0 for a lone
/// sample). Rates measured over those intervals average over time when weighted by them.
pub fn sample_intervals(t: &[f64]) -> Vec<f64> {
    (0..t.len())
        .map(|i| match i {
            0 => t.get(1).map_or(0.0, |t1| t1 - t[0]),
            _ => t[i] - t[i - 1],
        })
        .collect()
}

/// Quantile of a histogram given as `(lo, hi, count)` buckets in increasing order: the upper
/// edge of the bucket holding the nearest rank.
pub fn hist_percentile(buckets: &[(f64, f64, u64)], q: f64) -> Option<f64> {
    let total: u64 = buckets.iter().map(|b| b.2).sum();
    if total == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for &(_, hi, c) in buckets {
        seen += c;
        if seen >= rank {
            return Some(hi);
        }
    }
    buckets.last().map(|b| b.1)
}

/// Jain's fairness index of `x`: (Σx)² / (n · Σx²); 1 is perfectly fair.
pub fn jain(x: &[f64]) -> Option<f64> {
    if x.is_empty() {
        return None;
    }
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 {
        return None;
    }
    Some(s * s / (x.len() as f64 * s2))
}

/// Round to `digits` significant digits (keeps result files short and stable).
pub fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let mag = v.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits - 1 - mag);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_tables() {
        assert!((t975(1) - 12.706).abs() < 1e-3);
        assert!((t975(9) - 2.262).abs() < 1e-3);
        assert!((t975(30) - 2.042).abs() < 1e-3);
        // Published values: t(0.975, 40) = 2.0211, t(0.975, 60) = 2.0003, t(0.975, 120) = 1.9799.
        assert!((t975(40) - 2.0211).abs() < 2e-4, "{}", t975(40));
        assert!((t975(60) - 2.0003).abs() < 2e-4, "{}", t975(60));
        assert!((t975(120) - 1.9799).abs() < 2e-4, "{}", t975(120));
    }

    #[test]
    fn each_sample_covers_the_time_since_the_one_before() {
        assert_eq!(sample_intervals(&[1.0, 1.5, 3.0]), [0.5, 0.5, 1.5]);
        assert_eq!(sample_intervals(&[2.0]), [0.0]);
        assert!(sample_intervals(&[]).is_empty());
    }

    #[test]
    fn summary_of_known_values() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!((s.mean - 5.0).abs() < 1e-12);
        // sample std = sqrt(32 / 7)
        assert!((s.std.unwrap() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        let ci = 2.364_624_252 * (32.0f64 / 7.0).sqrt() / 8f64.sqrt();
        assert!((s.ci95.unwrap() - ci).abs() < 1e-9);
        let one = summarize(&[3.0]).unwrap();
        assert_eq!((one.std, one.ci95), (None, None));
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn percentiles_fairness_rounding() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentiles(&v, &[0.5, 0.95, 0.99]), vec![50.0, 95.0, 99.0]);
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(round_sig(123.456, 4), 123.5);
        assert_eq!(round_sig(0.00123456, 3), 0.00123);
        let h = [(0.0, 1.0, 5), (1.0, 2.0, 5)];
        assert_eq!(hist_percentile(&h, 0.5), Some(1.0));
        assert_eq!(hist_percentile(&h, 0.51), Some(2.0));
    }
}
