//! The algorithm registry: every algorithm of the library, its parameters and its factory.
//!
//! The agent, the simulator and the experiment runner find algorithms here by name; nothing else
//! in the stack knows which algorithm runs.

use crate::controller::Controller;
use crate::params::{ParamError, ParamSet, ParamSpec, did_you_mean};

/// One algorithm of the library.
#[derive(Clone, Copy)]
pub struct AlgorithmSpec {
    /// Registry name, as a flow's Create message or a rule names it.
    pub name: &'static str,
    /// One line saying what it is.
    pub summary: &'static str,
    /// Every tunable parameter, with unit and paper default.
    pub params: &'static [ParamSpec],
    /// Build a controller for one flow.
    pub build: fn(&ParamSet) -> Box<dyn Controller>,
}

impl std::fmt::Debug for AlgorithmSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlgorithmSpec")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AlgorithmSpec {
    /// The defaults of this algorithm.
    pub fn defaults(&self) -> ParamSet {
        ParamSet::defaults(self.name, self.params)
    }

    /// Its parameters as a member of a meta-algorithm (PolyCC, `jcce-member`) whose own
    /// parameters are `outer`: the defaults with `outer`'s `NAME.KEY` settings. A setting the
    /// member refuses (checked when `outer` was set, so only a changed registry) is logged and
    /// skipped.
    pub fn member_params(&self, outer: &ParamSet) -> ParamSet {
        let mut set = self.defaults();
        for (k, v) in outer.texts() {
            if let Some((m, key)) = k.split_once('.')
                && m == self.name
                && let Err(e) = set.set(self.params, key, v)
            {
                tracing::error!(member = m, error = %e, "ignoring a member parameter");
            }
        }
        set
    }

    /// Defaults overridden by `(key, text)` pairs.
    pub fn params_from<'a>(
        &self,
        overrides: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<ParamSet, ParamError> {
        let mut p = self.defaults();
        for (k, v) in overrides {
            p.set(self.params, k, v)?;
        }
        Ok(p)
    }
}

/// Every algorithm of the library, in listing order.
pub fn all() -> &'static [AlgorithmSpec] {
    ALL
}

/// One line per algorithm; the listing order of `ccp-agent algorithms`.
static ALL: &[AlgorithmSpec] = &[
    crate::reno::SPEC,
    crate::cubic::SPEC,
    crate::vegas::SPEC,
    crate::dctcp::SPEC,
    crate::ledbat::SPEC,
    crate::timely::SPEC,
    crate::vivace::SPEC,
    crate::vivace_distributed::SPEC,
    crate::vivace_distributed::MEMBER_SPEC,
    crate::bbr::SPEC,
    crate::copa::SPEC,
    crate::rtcp::SPEC,
    crate::paccp::SPEC,
    crate::polycc::SPEC,
    crate::hercules::SPEC,
];

/// A check of one text parameter: `check(key, text)`.
type TextCheck = fn(&str, &str) -> Result<(), String>;

/// Checks of text parameters ([`crate::params::Unit::Text`]), per algorithm.
static TEXT_CHECKS: &[(&str, TextCheck)] = &[
    ("polycc", crate::polycc::check_text),
    ("jcce-member", crate::vivace_distributed::check_member_text),
];

/// Check the text `value` of `alg`'s text parameter `key` (a name, list or expression) when it is
/// set, so rule files, agent flags and recipes refuse a bad value at load.
pub fn check_text(alg: &str, key: &str, value: &str) -> Result<(), String> {
    match TEXT_CHECKS.iter().find(|(a, _)| *a == alg) {
        Some((_, check)) => check(key, value),
        None => Ok(()),
    }
}

/// A check of a whole parameter set, for keys that only make sense together:
/// `check(whole, own)`, see [`AlgorithmSpec::check_set`].
type SetCheck = fn(&ParamSet, &ParamSet) -> Result<(), String>;

/// Checks of whole parameter sets, per algorithm.
static SET_CHECKS: &[(&str, SetCheck)] = &[("polycc", crate::polycc::check_set)];

impl AlgorithmSpec {
    /// Check the parameters a flow will run with, where they are known whole (a recipe's flow, a
    /// scenario's flow or generator, a live change, the agent's default algorithm), so that keys
    /// that contradict or ignore each other are refused there, not found out when a flow starts.
    /// `whole` is the set the flow runs with (defaults, then the agent's settings, then the
    /// layer's own keys); `own` the defaults with only the keys this layer gives. Contradictions
    /// are judged on `whole`; a key the policy would ignore only among `own`'s keys, since a
    /// layer cannot unset a key it inherits. Single values were checked when they were set.
    pub fn check_set(&self, whole: &ParamSet, own: &ParamSet) -> Result<(), String> {
        match SET_CHECKS.iter().find(|(a, _)| *a == self.name) {
            Some((_, check)) => check(whole, own),
            None => Ok(()),
        }
    }
}

/// The algorithm called `name`.
pub fn find(name: &str) -> Option<&'static AlgorithmSpec> {
    ALL.iter().find(|a| a.name == name)
}

/// Like [`find`], with an error that lists the known names and suggests the closest.
pub fn lookup(name: &str) -> Result<&'static AlgorithmSpec, String> {
    find(name).ok_or_else(|| {
        let hint = did_you_mean(name, ALL.iter().map(|a| a.name))
            .map(|n| format!(" (did you mean {n:?}?)"))
            .unwrap_or_default();
        let known: Vec<&str> = ALL.iter().map(|a| a.name).collect();
        format!(
            "unknown algorithm {name:?}{hint}; known algorithms: {}",
            known.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::FlowStart;

    #[test]
    fn names_are_unique_and_fit_libccp() {
        let mut names: Vec<&str> = all().iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all().len());
        assert!(names.iter().all(|n| n.len() <= 63));
    }

    #[test]
    fn every_algorithm_builds_with_defaults_and_reports_its_name() {
        for spec in all() {
            let mut c = (spec.build)(&spec.defaults());
            assert_eq!(c.name(), spec.name);
            let d = c.on_start(&FlowStart {
                mss: 1448,
                init_cwnd: 14480,
                now_us: 0,
            });
            assert!(d.cwnd.is_some() || d.rate.is_some(), "{}", spec.name);
            for p in spec.params {
                assert!(!p.help.is_empty(), "{}.{} has no help", spec.name, p.key);
                assert!(
                    !p.source.is_empty(),
                    "{}.{} has no source",
                    spec.name,
                    p.key
                );
            }
        }
    }

    #[test]
    fn unknown_name_suggests() {
        let e = lookup("cubci").unwrap_err();
        assert!(e.contains("did you mean \"cubic\""), "{e}");
    }
}
