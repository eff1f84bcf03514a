//! Link capacity descriptions: mahimahi packet-delivery traces (one millisecond timestamp per
//! line, each a delivery opportunity of 1504 bytes) and piecewise-constant rate schedules
//! (`0s:20mbit,5s:10mbit`). Parsing is strict: every error names the file and line, or the
//! schedule entry.

use crate::error::{EmuError, Result};
use std::path::{Path, PathBuf};

/// Bytes one delivery opportunity carries. Mahimahi counts the 4-byte TUN packet-information
/// header in every packet, so a full-size 1500-byte IP packet uses a whole opportunity.
pub const OPPORTUNITY_BYTES: u32 = 1504;

/// Bytes of TUN framing counted on top of each IP packet's length, as mahimahi does.
pub const FRAMING_BYTES: u32 = 4;

/// A mahimahi trace: non-decreasing millisecond timestamps, the last one > 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Where it came from (for logs and messages).
    pub source: PathBuf,
    /// Delivery opportunities, ms from the start of the trace.
    pub ms: Vec<u64>,
}

impl Trace {
    /// Read and validate a trace file.
    pub fn load(path: impl AsRef<Path>) -> Result<Trace> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| EmuError::TraceIo {
            path: path.to_path_buf(),
            source,
        })?;
        Trace::parse(path, &text)
    }

    /// Parse the text of a trace file; `path` is used in messages.
    pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<Trace> {
        let path = path.as_ref();
        let err = |line: usize, message: String| EmuError::Trace {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut ms: Vec<u64> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim_end_matches('\r');
            let n = i + 1;
            if line.trim().is_empty() {
                return Err(err(
                    n,
                    "empty line (each line must be one timestamp in ms)".into(),
                ));
            }
            let t = line.trim();
            if !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err(
                    n,
                    format!("{t:?} is not a whole number of milliseconds"),
                ));
            }
            let v: u64 = t
                .parse()
                .map_err(|_| err(n, format!("{t:?} is too large")))?;
            if let Some(&prev) = ms.last()
                && v < prev
            {
                return Err(err(
                    n,
                    format!(
                        "timestamp {v} is smaller than the previous one ({prev}); timestamps must be non-decreasing"
                    ),
                ));
            }
            ms.push(v);
        }
        match ms.last() {
            None => Err(err(0, "no timestamps found".into())),
            Some(0) => Err(err(
                ms.len(),
                "the last timestamp must be > 0 (the trace must last a nonzero time)".into(),
            )),
            Some(_) => Ok(Trace {
                source: path.to_path_buf(),
                ms,
            }),
        }
    }

    /// Build a trace from timestamps (validated like a file).
    pub fn from_ms(name: &str, ms: Vec<u64>) -> Result<Trace> {
        let text: String = ms.iter().map(|m| format!("{m}\n")).collect();
        Trace::parse(name, &text)
    }

    /// The trace's period: its last timestamp, in ms.
    pub fn period_ms(&self) -> u64 {
        self.ms.last().copied().unwrap_or(0)
    }

    /// Average capacity over one period, bytes/s (counting 1504-byte opportunities).
    pub fn mean_rate(&self) -> f64 {
        self.ms.len() as f64 * OPPORTUNITY_BYTES as f64 / (self.period_ms() as f64 / 1000.0)
    }

    /// A trace with the given constant rate (bytes/s) over `period_ms`: opportunity k lands at
    /// ceil(k·1504/rate) ms, like the CBR traces people generate for mahimahi.
    pub fn constant(rate_bytes_per_s: u64, period_ms: u64) -> Result<Trace> {
        if rate_bytes_per_s == 0 || period_ms == 0 {
            return Err(EmuError::Config(
                "a constant-rate trace needs a rate and a period > 0".into(),
            ));
        }
        let per_ms = rate_bytes_per_s as f64 / 1000.0;
        let count = (per_ms * period_ms as f64 / OPPORTUNITY_BYTES as f64).round() as u64;
        let mut ms = Vec::with_capacity(count as usize);
        for k in 1..=count.max(1) {
            let t = ((k as f64 * OPPORTUNITY_BYTES as f64) / per_ms).ceil() as u64;
            ms.push(t.clamp(1, period_ms));
        }
        if let Some(last) = ms.last_mut() {
            *last = period_ms;
        }
        Trace::from_ms("constant", ms)
    }
}

/// A piecewise-constant rate: `(start µs, bytes/s)` segments, the first starting at 0; the last
/// rate holds forever. A rate of 0 is an outage.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Segments sorted by start time, the first at 0.
    pub segments: Vec<(u64, u64)>,
}

impl Schedule {
    /// One constant rate, bytes/s.
    pub fn constant(rate: u64) -> Schedule {
        Schedule {
            segments: vec![(0, rate)],
        }
    }

    /// Parse `0s:20mbit,5s:10mbit` (times with units from the start of the emulation, rates
    /// with units; entries separated by commas, times strictly increasing, the first at 0).
    pub fn parse(text: &str) -> Result<Schedule> {
        let err = |message: String| EmuError::Schedule {
            text: text.to_string(),
            message,
        };
        let mut segments: Vec<(u64, u64)> = Vec::new();
        for (i, entry) in text.split(',').enumerate() {
            let entry = entry.trim();
            let (t, r) = entry.split_once(':').ok_or_else(|| {
                err(format!(
                    "entry {} ({entry:?}) is not TIME:RATE, e.g. 5s:10mbit",
                    i + 1
                ))
            })?;
            let t = ccp_units::parse_duration_with_unit(t)
                .map_err(|e| err(format!("entry {} time: {e}", i + 1)))?;
            let r = ccp_units::parse_rate_with_unit(r)
                .map_err(|e| err(format!("entry {} rate: {e}", i + 1)))?;
            let t = t.as_micros() as u64;
            if let Some(&(prev, _)) = segments.last() {
                if t <= prev {
                    return Err(err(format!(
                        "entry {} starts at {t} µs, not after the previous entry",
                        i + 1
                    )));
                }
            } else if t != 0 {
                return Err(err("the first entry must start at 0s".into()));
            }
            segments.push((t, r));
        }
        Ok(Schedule { segments })
    }

    /// The rate (bytes/s) in force at `t` µs.
    pub fn rate_at(&self, t: u64) -> u64 {
        let i = self.segments.partition_point(|&(s, _)| s <= t);
        self.segments[i.saturating_sub(1)].1
    }

    /// When a transmission of `bytes` that starts at `start` µs ends (µs, rounded up),
    /// integrating the schedule; `None` if it never ends (the schedule ends in an outage).
    pub fn finish(&self, start: u64, bytes: u64) -> Option<u64> {
        self.finish_ns(start * 1000, bytes)
            .map(|ns| ns.div_ceil(1000))
    }

    /// Like [`Schedule::finish`] in ns, so back-to-back packets do not accumulate rounding
    /// (a 1504-byte packet at 1 Gbit/s takes 12.032 µs, not 13).
    pub fn finish_ns(&self, start_ns: u64, bytes: u64) -> Option<u64> {
        // Work in byte·ns units: bytes·1e9 = Σ rate·Δt.
        let mut need = bytes as u128 * 1_000_000_000;
        let mut t = start_ns;
        let mut i = self
            .segments
            .partition_point(|&(s, _)| s * 1000 <= t)
            .saturating_sub(1);
        loop {
            let rate = self.segments[i].1 as u128;
            let end = self.segments.get(i + 1).map(|&(s, _)| s * 1000);
            if rate > 0 {
                let dt = need.div_ceil(rate);
                match end {
                    Some(e) if (t as u128 + dt) > e as u128 => {
                        need -= rate * (e - t) as u128;
                    }
                    _ => return Some(t + dt as u64),
                }
            } else if end.is_none() {
                return None;
            }
            // Move to the next segment.
            t = end?;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_good_trace() {
        let t = Trace::parse("x", "1\n1\n3\n10\n").unwrap();
        assert_eq!(t.ms, vec![1, 1, 3, 10]);
        assert_eq!(t.period_ms(), 10);
    }

    #[test]
    fn malformed_traces_name_file_and_line() {
        let e = Trace::parse("a.trace", "1\n2\nx3\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("a.trace:3:"), "{e}");
        let e = Trace::parse("a.trace", "5\n4\n").unwrap_err().to_string();
        assert!(
            e.starts_with("a.trace:2:") && e.contains("non-decreasing"),
            "{e}"
        );
        let e = Trace::parse("a.trace", "1\n\n2\n").unwrap_err().to_string();
        assert!(e.starts_with("a.trace:2:") && e.contains("empty"), "{e}");
        let e = Trace::parse("a.trace", "0\n0\n").unwrap_err().to_string();
        assert!(e.starts_with("a.trace:2:") && e.contains("> 0"), "{e}");
        let e = Trace::parse("a.trace", "").unwrap_err().to_string();
        assert!(e.contains("no timestamps"), "{e}");
        let e = Trace::parse("a.trace", "-1\n").unwrap_err().to_string();
        assert!(e.starts_with("a.trace:1:"), "{e}");
    }

    #[test]
    fn missing_file_is_named() {
        let e = Trace::load("/nonexistent/x.trace").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/x.trace"), "{e}");
    }

    #[test]
    fn constant_trace_has_the_rate() {
        let t = Trace::constant(12_500_000, 1000).unwrap(); // 100 Mbit/s
        let err = (t.mean_rate() - 12_500_000.0).abs() / 12_500_000.0;
        assert!(err < 0.002, "{}", t.mean_rate());
    }

    #[test]
    fn schedule_parses_and_integrates() {
        let s = Schedule::parse("0s:8mbit, 1s:0, 2s:16mbit").unwrap();
        assert_eq!(s.rate_at(0), 1_000_000);
        assert_eq!(s.rate_at(1_500_000), 0);
        assert_eq!(s.rate_at(5_000_000), 2_000_000);
        // 1000 bytes at 1 MB/s = 1000 µs.
        assert_eq!(s.finish(0, 1000), Some(1000));
        // Starts 500 µs before the outage: 500 bytes go, then 500 more at 2 MB/s after 2 s.
        assert_eq!(s.finish(999_500, 1000), Some(2_000_250));
        let s = Schedule::parse("0s:1mbit,1s:0").unwrap();
        assert_eq!(s.finish(2_000_000, 10), None);
        // No rounding to whole µs per packet: 1504 bytes at 1 Gbit/s is 12.032 µs.
        let s = Schedule::constant(125_000_000);
        assert_eq!(s.finish_ns(0, 1504), Some(12_032));
        assert_eq!(s.finish_ns(12_032, 1504), Some(24_064));
    }

    #[test]
    fn bad_schedules_are_errors() {
        assert!(Schedule::parse("1s:10mbit").is_err());
        assert!(Schedule::parse("0s:10mbit,0s:5mbit").is_err());
        assert!(Schedule::parse("0s-10mbit").is_err());
        assert!(Schedule::parse("0s:10ms").is_err());
    }
}
