//! Mahimahi link traces: one delivery opportunity of [`OPPORTUNITY_BYTES`] per line, the line
//! being a timestamp in ms; the trace loops with a period of its last timestamp.

use crate::error::SimError;
use crate::time::{NS_PER_MS, NS_PER_SEC};
use std::path::Path;

/// Bytes one delivery opportunity carries (mahimahi's `PACKET_SIZE`).
pub const OPPORTUNITY_BYTES: u32 = 1504;

/// A parsed trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Opportunity times within one period, ns, non-decreasing.
    times: Vec<u64>,
    /// Loop period, ns.
    period: u64,
}

impl Trace {
    /// Parse trace text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Trace, SimError> {
        let mut times = Vec::new();
        let mut last = 0u64;
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() {
                continue;
            }
            let err = |message: String| SimError::Data {
                path: path.to_path_buf(),
                line: i + 1,
                message,
            };
            let ms: u64 = l
                .parse()
                .map_err(|_| err(format!("{l:?} is not a timestamp in ms")))?;
            if ms < last {
                return Err(err(format!("timestamp {ms} is before the previous {last}")));
            }
            last = ms;
            times.push(ms * NS_PER_MS);
        }
        if times.is_empty() {
            return Err(SimError::Data {
                path: path.to_path_buf(),
                line: 0,
                message: "the trace has no delivery opportunity".into(),
            });
        }
        if last == 0 {
            return Err(SimError::Data {
                path: path.to_path_buf(),
                line: times.len(),
                message: "the last timestamp must be positive (it is the loop period)".into(),
            });
        }
        Ok(Trace {
            times,
            period: last * NS_PER_MS,
        })
    }

    /// Load a trace file.
    pub fn load(path: &Path) -> Result<Trace, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
        Trace::parse(path, &text)
    }

    /// Opportunities per period.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether the trace is empty (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The loop period, ns.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Time of opportunity `k` (counting across loops), ns.
    pub fn time_of(&self, k: u64) -> u64 {
        let n = self.times.len() as u64;
        (k / n) * self.period + self.times[(k % n) as usize]
    }

    /// Index of the first opportunity at or after `t`.
    pub fn first_at_or_after(&self, t: u64) -> u64 {
        let n = self.times.len() as u64;
        let cycle = t / self.period;
        let within = t - cycle * self.period;
        let i = self.times.partition_point(|&x| x < within) as u64;
        cycle * n + i
    }

    /// Opportunities in `[from, to)`.
    pub fn opportunities_between(&self, from: u64, to: u64) -> u64 {
        if to <= from {
            return 0;
        }
        self.first_at_or_after(to) - self.first_at_or_after(from)
    }

    /// Mean rate, bytes/s.
    pub fn mean_rate(&self) -> u64 {
        (self.times.len() as u128 * u128::from(OPPORTUNITY_BYTES) * u128::from(NS_PER_SEC)
            / u128::from(self.period)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_at_the_last_timestamp() {
        let t = Trace::parse(Path::new("t"), "0\n0\n3\n5\n").unwrap();
        assert_eq!(t.period(), 5 * NS_PER_MS);
        let times: Vec<u64> = (0..6).map(|k| t.time_of(k) / NS_PER_MS).collect();
        assert_eq!(times, vec![0, 0, 3, 5, 5, 5]);
        assert_eq!(t.first_at_or_after(4 * NS_PER_MS), 3);
        assert_eq!(t.first_at_or_after(5 * NS_PER_MS), 4);
        assert_eq!(t.opportunities_between(0, 10 * NS_PER_MS), 8);
        assert_eq!(t.mean_rate(), 4 * 1504 * 200);
    }

    #[test]
    fn bad_traces_name_the_line() {
        let e = Trace::parse(Path::new("t"), "1\n3\n2\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t:3:"), "{e}");
        assert!(Trace::parse(Path::new("t"), "0\n").is_err());
        assert!(Trace::parse(Path::new("t"), "x\n").is_err());
    }
}
