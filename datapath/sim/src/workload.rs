//! Flow-size distributions: empirical CDFs (`size_bytes,cumulative_probability` lines,
//! piecewise linear between points, as the datacenter workload files), their sampling and
//! mean, and the exponential inter-arrival times of Poisson flow generators.

use crate::error::SimError;
use rand::Rng;
use std::path::Path;

/// A piecewise-linear flow-size CDF.
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    /// `(size, cumulative probability)`, both non-decreasing, the last probability 1.
    points: Vec<(f64, f64)>,
}

impl Cdf {
    /// A CDF from points; `path` names the source in errors.
    pub fn from_points(path: &Path, points: Vec<(f64, f64)>) -> Result<Cdf, SimError> {
        let err = |line: usize, message: String| SimError::Data {
            path: path.to_path_buf(),
            line,
            message,
        };
        if points.is_empty() {
            return Err(err(0, "the CDF has no points".into()));
        }
        for (i, w) in points.windows(2).enumerate() {
            if w[1].0 < w[0].0 || w[1].1 < w[0].1 {
                return Err(err(
                    i + 2,
                    "sizes and probabilities must not decrease".into(),
                ));
            }
        }
        for (i, &(s, p)) in points.iter().enumerate() {
            if !(s.is_finite() && s >= 0.0 && (0.0..=1.0).contains(&p)) {
                return Err(err(i + 1, format!("bad point ({s}, {p})")));
            }
        }
        let last = points[points.len() - 1].1;
        if (last - 1.0).abs() > 1e-6 {
            return Err(err(
                points.len(),
                format!("the last probability is {last}, not 1"),
            ));
        }
        Ok(Cdf { points })
    }

    /// Parse CSV text: `size_bytes,cumulative_probability` per line (a header line, blank lines
    /// and `#` comments are skipped).
    pub fn parse(path: &Path, text: &str) -> Result<Cdf, SimError> {
        let mut pts = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let mut it = l.split([',', ' ', '\t']).filter(|s| !s.is_empty());
            let (Some(a), Some(b)) = (it.next(), it.next()) else {
                return Err(SimError::Data {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: format!("{l:?}: expected size_bytes,cumulative_probability"),
                });
            };
            match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(s), Ok(p)) => pts.push((s, p)),
                _ if pts.is_empty() => continue, // a header
                _ => {
                    return Err(SimError::Data {
                        path: path.to_path_buf(),
                        line: i + 1,
                        message: format!("{l:?} is not two numbers"),
                    });
                }
            }
        }
        Cdf::from_points(path, pts)
    }

    /// Load a CDF file.
    pub fn load(path: &Path) -> Result<Cdf, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
        Cdf::parse(path, &text)
    }

    /// The size at cumulative probability `u` in [0, 1), linearly interpolated.
    pub fn quantile(&self, u: f64) -> f64 {
        let i = self.points.partition_point(|&(_, p)| p <= u);
        if i == 0 {
            return self.points[0].0;
        }
        if i >= self.points.len() {
            return self.points[self.points.len() - 1].0;
        }
        let (s0, p0) = self.points[i - 1];
        let (s1, p1) = self.points[i];
        if p1 <= p0 {
            return s1;
        }
        s0 + (s1 - s0) * (u - p0) / (p1 - p0)
    }

    /// Draw a size in bytes (at least 1).
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.r#gen();
        (self.quantile(u).round() as u64).max(1)
    }

    /// Mean size in bytes.
    pub fn mean(&self) -> f64 {
        let (s0, p0) = self.points[0];
        let mut m = s0 * p0;
        for w in self.points.windows(2) {
            m += (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0;
        }
        m.max(1.0)
    }
}

/// An exponential inter-arrival time with rate `per_sec` arrivals per second, ns (at least 1).
pub fn exp_interval_ns(rng: &mut impl Rng, per_sec: f64) -> u64 {
    let u: f64 = rng.r#gen();
    let secs = -(1.0 - u).ln() / per_sec;
    ((secs * 1e9) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn quantiles_interpolate_and_mean_matches_samples() {
        let c = Cdf::parse(Path::new("c"), "size,p\n100,0\n200,0.5\n1000,1\n").unwrap();
        assert_eq!(c.quantile(0.25), 150.0);
        assert_eq!(c.quantile(0.75), 600.0);
        assert_eq!(c.mean(), 0.5 * 150.0 + 0.5 * 600.0);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 200_000;
        let avg = (0..n).map(|_| c.sample(&mut rng) as f64).sum::<f64>() / n as f64;
        assert!((avg / c.mean() - 1.0).abs() < 0.01, "{avg}");
        let iv = (0..n)
            .map(|_| exp_interval_ns(&mut rng, 1000.0) as f64)
            .sum::<f64>()
            / n as f64;
        assert!((iv / 1e6 - 1.0).abs() < 0.01, "{iv}");
    }

    #[test]
    fn shared_workloads_load() {
        let dir = crate::scenario::shared_data_dir().join("workloads");
        for f in ["websearch.csv", "datamining.csv"] {
            let p = dir.join(f);
            if !p.exists() {
                eprintln!("skipping {}: not present", p.display());
                continue;
            }
            let c = Cdf::load(&p).unwrap();
            assert!(c.mean() > 10_000.0, "{f}: {}", c.mean());
        }
    }

    #[test]
    fn bad_cdfs_are_refused() {
        assert!(Cdf::parse(Path::new("c"), "1,0.5\n2,0.4\n3,1\n").is_err());
        assert!(Cdf::parse(Path::new("c"), "1,0.5\n2,0.9\n").is_err());
    }
}
