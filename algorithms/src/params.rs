//! Algorithm parameters: declared once per algorithm with unit, paper default and source, parsed
//! from agent flags, rule files and recipes with unit checking.
//!
//! A value is stored in the parameter's canonical unit (bytes, packets, µs, bytes/s, a plain
//! number or a boolean). Text may carry a unit suffix (`10ms`, `100mbit`, `64KB`); a suffix of the
//! wrong kind (`10ms` for a window) is an error that names the parameter and the expected unit.

use std::collections::BTreeMap;
use std::fmt;

pub use ccp_units::Unit;

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

/// The key of a parameter declaration that lets an algorithm take other algorithms' parameters
/// as `MEMBER.KEY` (a meta-algorithm such as PolyCC: `cubic.beta=0.8`). Each such setting is
/// checked against the member's own declarations and kept as text.
pub const MEMBER_KEYS: &str = "<member>.<key>";

/// The resolved parameters of one algorithm instance: every declared key has a value.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSet {
    alg: &'static str,
    values: BTreeMap<&'static str, f64>,
    /// Text parameters ([`Unit::Text`]) and members' parameters (`MEMBER.KEY`), as written; only
    /// those that were set.
    text: BTreeMap<String, String>,
}

impl ParamSet {
    /// All defaults of `specs`.
    pub fn defaults(alg: &'static str, specs: &'static [ParamSpec]) -> Self {
        ParamSet {
            alg,
            values: specs.iter().map(|s| (s.key, s.default)).collect(),
            text: BTreeMap::new(),
        }
    }

    /// Set `key` from text, checking the key and the unit against `specs`.
    pub fn set(
        &mut self,
        specs: &'static [ParamSpec],
        key: &str,
        text: &str,
    ) -> Result<(), ParamError> {
        let bad = |message: String| ParamError::BadValue {
            alg: self.alg.to_string(),
            key: key.to_string(),
            message,
        };
        if let Some((member, member_key)) = key.split_once('.')
            && !specs.iter().any(|s| s.key == key)
            && specs.iter().any(|s| s.key == MEMBER_KEYS)
        {
            let spec = crate::registry::lookup(member).map_err(bad)?;
            spec.params_from([(member_key, text)])
                .map_err(|e| bad(e.to_string()))?;
            self.text.insert(key.to_string(), text.trim().to_string());
            return Ok(());
        }
        let spec = find_spec(self.alg, specs, key)?;
        if spec.unit == Unit::Text {
            let t = text.trim();
            if t.is_empty() {
                return Err(bad("empty value".into()));
            }
            crate::registry::check_text(self.alg, spec.key, t).map_err(bad)?;
            self.text.insert(spec.key.to_string(), t.to_string());
            return Ok(());
        }
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

    /// A text parameter or a member's parameter (`MEMBER.KEY`), if it was set.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.text.get(key).map(String::as_str)
    }

    /// Iterate the text settings `(key, text)` in key order.
    pub fn texts(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.text.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Set an already checked text value (from another set of the same algorithm).
    pub fn set_text(&mut self, key: &str, text: &str) {
        self.text.insert(key.to_string(), text.to_string());
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
        let mut parts: Vec<String> = self
            .iter()
            .filter(|(k, _)| *k != MEMBER_KEYS && !self.text.contains_key(*k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.extend(self.texts().map(|(k, v)| format!("{k}={v}")));
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
