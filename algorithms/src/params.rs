//! Algorithm parameters: declared once per algorithm with unit, paper default and source, parsed
//! from agent flags, rule files and recipes with unit checking.
//!
//! A value is stored in the parameter's canonical unit (bytes, packets, µs, bytes/s, a plain
//! number or a boolean). Text may carry a unit suffix (`10ms`, `100mbit`, `64KB`); a suffix of the
//! wrong kind (`10ms` for a window) is an error that names the parameter and the expected unit.

use std::collections::BTreeMap;
use std::fmt;

/// The unit a parameter is expressed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes; accepts `B`, `KB`, `MB`, `GB` (powers of 1000) and `KiB`, `MiB`, `GiB`.
    Bytes,
    /// Packets (segments); accepts an optional `pkts` suffix.
    Packets,
    /// A duration stored in µs; accepts `us`, `ms`, `s`.
    Micros,
    /// A rate stored in bytes/s; accepts `bit`, `kbit`, `mbit`, `gbit` (and `bps` forms) or `Bps`.
    Rate,
    /// A dimensionless number.
    Number,
    /// A whole count.
    Count,
    /// `true` / `false`.
    Bool,
}

impl Unit {
    /// How a person should write a value of this unit.
    pub fn expected(self) -> &'static str {
        match self {
            Unit::Bytes => "a size in bytes, e.g. 15000, 64KB or 1MiB",
            Unit::Packets => "a number of packets, e.g. 10 or 10pkts",
            Unit::Micros => "a duration, e.g. 500us, 10ms or 1s (a bare number is µs)",
            Unit::Rate => {
                "a rate, e.g. 100mbit, 1gbit, 500kbit or 12500000Bps (a bare number is bytes/s)"
            }
            Unit::Number => "a number, e.g. 0.7",
            Unit::Count => "a whole number, e.g. 3",
            Unit::Bool => "true or false",
        }
    }

    /// Short unit label for listings.
    pub fn label(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Packets => "packets",
            Unit::Micros => "µs",
            Unit::Rate => "bytes/s",
            Unit::Number => "number",
            Unit::Count => "count",
            Unit::Bool => "bool",
        }
    }

    /// Parse `text` in this unit into the canonical value.
    pub fn parse(self, text: &str) -> Result<f64, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("empty value".into());
        }
        if self == Unit::Bool {
            return match t {
                "true" | "yes" | "on" | "1" => Ok(1.0),
                "false" | "no" | "off" | "0" => Ok(0.0),
                _ => Err(format!("{t:?} is not {}", self.expected())),
            };
        }
        let split = t
            .find(|c: char| {
                !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
            })
            .unwrap_or(t.len());
        // "1e3" is a number, but "1ms" must split at 'm'; an 'e' directly followed by a letter is a suffix.
        let (num, suffix) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("{t:?} is not {}", self.expected()))?;
        if !value.is_finite() || value < 0.0 {
            return Err(format!("{t:?} must be a finite, non-negative value"));
        }
        let suffix = suffix.trim();
        let scale = match (self, suffix) {
            (_, "") => 1.0,
            (Unit::Bytes, "B") => 1.0,
            (Unit::Bytes, "KB" | "kB") => 1e3,
            (Unit::Bytes, "MB") => 1e6,
            (Unit::Bytes, "GB") => 1e9,
            (Unit::Bytes, "KiB") => 1024.0,
            (Unit::Bytes, "MiB") => 1024.0 * 1024.0,
            (Unit::Bytes, "GiB") => 1024.0 * 1024.0 * 1024.0,
            (Unit::Packets, "pkt" | "pkts" | "packets") => 1.0,
            (Unit::Micros, "us" | "µs") => 1.0,
            (Unit::Micros, "ms") => 1e3,
            (Unit::Micros, "s") => 1e6,
            (Unit::Rate, "Bps") => 1.0,
            (Unit::Rate, "bit" | "bps") => 1.0 / 8.0,
            (Unit::Rate, "kbit" | "kbps" | "Kbit" | "Kbps") => 1e3 / 8.0,
            (Unit::Rate, "mbit" | "mbps" | "Mbit" | "Mbps") => 1e6 / 8.0,
            (Unit::Rate, "gbit" | "gbps" | "Gbit" | "Gbps") => 1e9 / 8.0,
            _ => {
                return Err(format!(
                    "unit {suffix:?} does not fit: expected {}",
                    self.expected()
                ));
            }
        };
        let v = value * scale;
        if matches!(self, Unit::Count | Unit::Packets) && v.fract() != 0.0 {
            return Err(format!("{t:?} is not {}", self.expected()));
        }
        Ok(v)
    }

    /// Render a canonical value for people.
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Bool => (v != 0.0).to_string(),
            Unit::Micros if v >= 1000.0 => format!("{}ms", v / 1000.0),
            Unit::Micros => format!("{v}us"),
            Unit::Rate => format!("{}mbit", v * 8.0 / 1e6),
            Unit::Bytes => format!("{v}B"),
            Unit::Packets => format!("{v}pkts"),
            _ => format!("{v}"),
        }
    }
}

/// One parameter of one algorithm.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    /// Key as written on the command line and in rule files, e.g. `init-cwnd`.
    pub key: &'static str,
    pub unit: Unit,
    /// Default in the canonical unit.
    pub default: f64,
    /// What it does.
    pub help: &'static str,
    /// Where the default comes from (paper, RFC, section).
    pub source: &'static str,
}

/// A parameter error, naming the algorithm, the key and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("algorithm {alg:?} has no parameter {key:?}{hint}; its parameters are: {known}")]
    Unknown {
        alg: String,
        key: String,
        hint: String,
        known: String,
    },
    #[error("{alg}.{key}: {message}")]
    BadValue {
        alg: String,
        key: String,
        message: String,
    },
}

impl ParamError {
    /// The message without the `alg.key:` prefix, for callers that name the field themselves.
    pub fn detail(&self) -> String {
        match self {
            ParamError::BadValue { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// The resolved parameters of one algorithm instance: every declared key has a value.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSet {
    alg: &'static str,
    values: BTreeMap<&'static str, f64>,
}

impl ParamSet {
    /// All defaults of `specs`.
    pub fn defaults(alg: &'static str, specs: &'static [ParamSpec]) -> Self {
        ParamSet {
            alg,
            values: specs.iter().map(|s| (s.key, s.default)).collect(),
        }
    }

    /// Set `key` from text, checking the key and the unit against `specs`.
    pub fn set(
        &mut self,
        specs: &'static [ParamSpec],
        key: &str,
        text: &str,
    ) -> Result<(), ParamError> {
        let spec = find_spec(self.alg, specs, key)?;
        let v = spec
            .unit
            .parse(text)
            .map_err(|message| ParamError::BadValue {
                alg: self.alg.to_string(),
                key: key.to_string(),
                message,
            })?;
        self.values.insert(spec.key, v);
        Ok(())
    }

    /// Set an already checked canonical value; keys the algorithm does not declare are ignored.
    pub fn set_value(&mut self, key: &str, v: f64) {
        if let Some(slot) = self.values.get_mut(key) {
            *slot = v;
        }
    }

    /// The value of a declared key. Panics only on a key the algorithm never declared (a bug in
    /// the algorithm's own code, caught by its unit tests).
    pub fn get(&self, key: &str) -> f64 {
        match self.values.get(key) {
            Some(v) => *v,
            None => panic!("algorithm {} reads undeclared parameter {key}", self.alg),
        }
    }

    /// A boolean parameter.
    pub fn flag(&self, key: &str) -> bool {
        self.get(key) != 0.0
    }

    /// The algorithm these parameters belong to.
    pub fn algorithm(&self) -> &'static str {
        self.alg
    }

    /// Iterate `(key, value)` in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.values.iter().map(|(k, v)| (*k, *v))
    }
}

fn find_spec(
    alg: &str,
    specs: &'static [ParamSpec],
    key: &str,
) -> Result<&'static ParamSpec, ParamError> {
    specs.iter().find(|s| s.key == key).ok_or_else(|| {
        let known: Vec<&str> = specs.iter().map(|s| s.key).collect();
        let hint = did_you_mean(key, known.iter().copied())
            .map(|k| format!(" (did you mean {k:?}?)"))
            .unwrap_or_default();
        ParamError::Unknown {
            alg: alg.to_string(),
            key: key.to_string(),
            hint,
            known: if known.is_empty() {
                "(none)".into()
            } else {
                known.join(", ")
            },
        }
    })
}

/// The closest candidate to `word` by edit distance, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

impl fmt::Display for ParamSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.iter().map(|(k, v)| format!("{k}={v}")).collect();
        write!(f, "{}({})", self.alg, parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            key: "init-cwnd",
            unit: Unit::Packets,
            default: 10.0,
            help: "initial window",
            source: "RFC 6928",
        },
        ParamSpec {
            key: "min-rtt-window",
            unit: Unit::Micros,
            default: 10e6,
            help: "",
            source: "",
        },
        ParamSpec {
            key: "max-rate",
            unit: Unit::Rate,
            default: 0.0,
            help: "",
            source: "",
        },
    ];

    #[test]
    fn units_parse_and_scale() {
        assert_eq!(Unit::Micros.parse("10ms").unwrap(), 10_000.0);
        assert_eq!(Unit::Micros.parse("1s").unwrap(), 1e6);
        assert_eq!(Unit::Micros.parse("250").unwrap(), 250.0);
        assert_eq!(Unit::Rate.parse("100mbit").unwrap(), 12_500_000.0);
        assert_eq!(Unit::Bytes.parse("64KiB").unwrap(), 65536.0);
        assert_eq!(Unit::Packets.parse("10pkts").unwrap(), 10.0);
        assert_eq!(Unit::Number.parse("0.7").unwrap(), 0.7);
        assert_eq!(Unit::Bool.parse("true").unwrap(), 1.0);
    }

    #[test]
    fn wrong_unit_is_an_error_naming_the_expected_form() {
        let e = Unit::Packets.parse("10ms").unwrap_err();
        assert!(e.contains("number of packets"), "{e}");
        let e = Unit::Rate.parse("5KB").unwrap_err();
        assert!(e.contains("rate"), "{e}");
        assert!(Unit::Count.parse("2.5").is_err());
        assert!(Unit::Number.parse("-1").is_err());
        assert!(Unit::Number.parse("abc").is_err());
    }

    #[test]
    fn unknown_key_suggests_the_closest() {
        let mut p = ParamSet::defaults("reno", SPECS);
        let e = p.set(SPECS, "init-cwdn", "10").unwrap_err().to_string();
        assert!(e.contains("did you mean \"init-cwnd\""), "{e}");
        p.set(SPECS, "init-cwnd", "20").unwrap();
        assert_eq!(p.get("init-cwnd"), 20.0);
        let e = p.set(SPECS, "init-cwnd", "20ms").unwrap_err().to_string();
        assert!(e.starts_with("reno.init-cwnd:"), "{e}");
    }
}
