//! The runtime of `ccp-agent`: one process per host that serves every flow of every datapath
//! and hosts every algorithm of the library at once.
//!
//! A flow's algorithm comes from, in order: the first matching agent rule (by addresses, ports
//! and the name the flow asked for), the name in its Create message, the agent's default.
//! Parameters come from the algorithm's defaults, overridden by agent flags, overridden by the
//! rule, or, for a flow chosen by name, by the parameters it asked for (`cubic:beta=0.8`).
//! Rules reload on SIGHUP; a bad file is refused and the old rules stay. With a pricing policy
//! ([`pricing`]) the (θ, ω) class of service of every priced flow comes from the operator's
//! policy and its run-time changes, and the agent keeps bills per VM and per flow.

pub mod ipc;
pub mod live;
pub mod pricing;
pub mod rules;

use crate::adapter::{ControlledFlow, FlowCounters, TimeSource};
use crate::controller::ReportPeriod;
use crate::params::ParamSet;
use crate::program;
use crate::registry::{self, AlgorithmSpec};
use ipc::ScreenShared;
use portus::ipc::Ipc;
use portus::{CongAlg, Datapath, DatapathInfo};
use rules::{FlowKey, Rules};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use tracing::{error, info, warn};

/// Why a flow got its algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Rule(String),
    Requested,
    Default,
}

/// Everything the agent decides flows with; shared by the IPC loop and the signal thread.
pub struct AgentCore {
    default_alg: &'static AlgorithmSpec,
    /// Per-algorithm parameters from the command line (defaults for the others).
    base_params: HashMap<&'static str, ParamSet>,
    rules: RwLock<Arc<Rules>>,
    rules_path: Option<PathBuf>,
    pub screen: Arc<ScreenShared>,
    pub counters: Arc<FlowCounters>,
    time: Arc<dyn TimeSource>,
    alg_counts: RwLock<HashMap<&'static str, u64>>,
    /// A report period imposed on every flow (`--report`), else each controller chooses.
    report: Option<ReportPeriod>,
    /// Classes of service and bills of priced flows (`--pricing`).
    pricing: Option<Arc<pricing::Pricing>>,
    /// Every live flow, for the `flows`, `set-params` and `set-algorithm` commands.
    pub live: Arc<live::LiveFlows>,
    /// Rules and requests already warned about for parameters that do not hold together.
    warned_sets: crate::once::OncePerKey,
}

impl AgentCore {
    /// A core with `default_alg`, flag parameters `base_params` and optional rules.
    pub fn new(
        default_alg: &'static AlgorithmSpec,
        base_params: HashMap<&'static str, ParamSet>,
        rules: Rules,
        rules_path: Option<PathBuf>,
        time: Arc<dyn TimeSource>,
    ) -> Self {
        AgentCore {
            default_alg,
            base_params,
            rules: RwLock::new(Arc::new(rules)),
            rules_path,
            screen: Arc::new(ScreenShared::default()),
            counters: Arc::new(FlowCounters::default()),
            time,
            alg_counts: RwLock::new(HashMap::new()),
            report: None,
            pricing: None,
            live: Arc::default(),
            warned_sets: crate::once::OncePerKey::new(),
        }
    }

    /// Price flows by `pricing` (classes of service per VM and flow, bills).
    pub fn with_pricing(mut self, pricing: Arc<pricing::Pricing>) -> Self {
        self.pricing = Some(pricing);
        self
    }

    /// The pricing, if the agent prices flows.
    pub fn pricing(&self) -> Option<&Arc<pricing::Pricing>> {
        self.pricing.as_ref()
    }

    /// Impose one report period on every flow (per ACK, per RTT or a fixed period).
    pub fn with_report_period(mut self, report: Option<ReportPeriod>) -> Self {
        self.report = report;
        self
    }

    /// The agent's own settings for `alg` (its `--param`s over the defaults), under every rule
    /// and request.
    pub fn base(&self, alg: &'static AlgorithmSpec) -> ParamSet {
        self.base_params
            .get(alg.name)
            .cloned()
            .unwrap_or_else(|| alg.defaults())
    }

    /// Re-read the rule file; on error keep the old rules and return the error text.
    pub fn reload_rules(&self) -> Result<usize, String> {
        let Some(path) = &self.rules_path else {
            return Err("no rule file was given (--rules)".into());
        };
        let new = Rules::load(path).map_err(|e| e.to_string())?;
        let n = new.rules.len();
        match self.rules.write() {
            Ok(mut r) => *r = Arc::new(new),
            Err(_) => return Err("rule table lock poisoned".into()),
        }
        Ok(n)
    }

    /// Choose the algorithm and parameters of a flow.
    pub fn choose(&self, key: &FlowKey) -> (&'static AlgorithmSpec, ParamSet, Choice) {
        let rules = self.rules.read().map(|r| r.clone()).unwrap_or_default();
        // Rules see the requested algorithm's name without its parameters.
        let base_key = FlowKey {
            requested: split_requested(&key.requested).0.to_string(),
            ..key.clone()
        };
        if let Some(rule) = rules.pick(&base_key) {
            let mut p = self.base(rule.algorithm);
            for (k, v) in rule.params.iter() {
                // Rule values were checked at load; apply those the rule file set explicitly.
                if rule.explicit.iter().any(|e| e == k) {
                    p.set_value(k, v);
                }
            }
            for (k, v) in rule.params.texts() {
                if rule.explicit.iter().any(|e| e == k) {
                    p.set_text(k, v);
                }
            }
            // The rule's values were checked one by one at load; only here, laid over the
            // agent's own settings, is the whole set known.
            self.check_chosen(
                rule.algorithm,
                &p,
                &rule.params,
                format!("rule {:?} ({})", rule.name, rule.params),
            );
            return (rule.algorithm, p, Choice::Rule(rule.name.clone()));
        }
        if !key.requested.is_empty() {
            let (name, overrides) = split_requested(&key.requested);
            match registry::find(name) {
                Some(spec) => {
                    let mut p = self.base(spec);
                    let mut own = spec.defaults();
                    for (k, v) in overrides {
                        match p.set(spec.params, k, v) {
                            Ok(()) => {
                                let _ = own.set(spec.params, k, v);
                            }
                            Err(e) => {
                                warn!(requested = %key.requested, error = %e, "ignoring a parameter the flow asked for")
                            }
                        }
                    }
                    self.check_chosen(spec, &p, &own, format!("request {:?}", key.requested));
                    return (spec, p, Choice::Requested);
                }
                None => warn!(
                    requested = %key.requested,
                    default = self.default_alg.name,
                    "flow asked for an unknown algorithm; using the default"
                ),
            }
        }
        (
            self.default_alg,
            self.base(self.default_alg),
            Choice::Default,
        )
    }

    /// Warn, once per `source` (a rule, a request), when the parameters a flow gets from it,
    /// laid over the agent's own settings, do not hold together ([`AlgorithmSpec::check_set`]).
    fn check_chosen(
        &self,
        spec: &'static AlgorithmSpec,
        whole: &ParamSet,
        own: &ParamSet,
        source: String,
    ) {
        if let Err(e) = spec.check_set(whole, own)
            && self.warned_sets.first(&source)
        {
            warn!(
                source = %source,
                algorithm = spec.name,
                error = %e,
                "the parameters flows get from this source, over the agent's own settings, do \
                 not hold together (said once per source)"
            );
        }
    }

    /// Run a control command (`ccp-agent ctl`): `flows`, `set-params FLOW KEY=VALUE ...`,
    /// `set-algorithm FLOW NAME[:KEY=VALUE,...]` ([`live`]), or a pricing command (`set-class ...`, `bill`). Returns the answer (JSON for `flows`, `bill`).
    pub fn command(&self, text: &str) -> Result<String, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["flows"] => Ok(self.live.list().to_string()),
            ["set-params", args @ ..] => self.live.set_params(args),
            ["set-algorithm", args @ ..] => self.live.set_algorithm(args, |s| self.base(s)),
            _ => match &self.pricing {
                Some(p) => p.command(text).map_err(|e| {
                    if e.starts_with("unknown command") {
                        format!(
                            "{e}, `flows`, `set-params FLOW KEY=VALUE ...` or \
                             `set-algorithm FLOW NAME[:KEY=VALUE,...]`"
                        )
                    } else {
                        e
                    }
                }),
                None if matches!(words.first(), Some(&("set-class" | "bill"))) => Err(format!(
                    "{text:?} needs a pricing policy (--pricing); without one the commands are \
                     `flows`, `set-params FLOW KEY=VALUE [KEY=VALUE ...]` and \
                     `set-algorithm FLOW NAME[:KEY=VALUE,...]`"
                )),
                None => Err(format!(
                    "unknown command {text:?}; expected `flows`, \
                     `set-params FLOW KEY=VALUE [KEY=VALUE ...]` or \
                     `set-algorithm FLOW NAME[:KEY=VALUE,...]` (set-class and bill need --pricing)"
                )),
            },
        }
    }

    /// Flows created so far, per algorithm.
    pub fn algorithm_counts(&self) -> HashMap<&'static str, u64> {
        self.alg_counts
            .read()
            .map(|m| m.clone())
            .unwrap_or_default()
    }
}

/// Check the agent's own settings for its default algorithm: flows that match no rule and request
/// nothing run with them as they are, so they must hold together ([`AlgorithmSpec::check_set`]).
/// The settings of other algorithms are completed by rules and requests and checked there.
pub fn check_default_settings(
    default_alg: &'static AlgorithmSpec,
    base: &HashMap<&'static str, ParamSet>,
) -> Result<(), String> {
    let whole = base
        .get(default_alg.name)
        .cloned()
        .unwrap_or_else(|| default_alg.defaults());
    default_alg
        .check_set(&whole, &default_alg.defaults())
        .map_err(|e| format!("the default algorithm {}'s settings: {e}", default_alg.name))
}

/// Parse agent-wide parameter settings `ALG.KEY=VALUE` (the agent's `--param` flags, a
/// simulator scenario's `agent.params`) into per-algorithm parameter sets. Errors name the item
/// and what was expected.
pub fn parse_param_settings(list: &[String]) -> Result<HashMap<&'static str, ParamSet>, String> {
    let mut map: HashMap<&'static str, ParamSet> = HashMap::new();
    for item in list {
        let bad = |m: String| format!("{item:?}: {m}");
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| bad("expected ALG.KEY=VALUE".into()))?;
        let (alg, key) = name
            .split_once('.')
            .ok_or_else(|| bad("expected ALG.KEY=VALUE".into()))?;
        let spec = registry::lookup(alg).map_err(bad)?;
        let set = map.entry(spec.name).or_insert_with(|| spec.defaults());
        set.set(spec.params, key, value)
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(map)
}

/// Split a requested algorithm `name[:key=value,key=value]` (what fits libccp's 63-byte congAlg
/// field) into the name and its parameter overrides. A comma inside parentheses belongs to the
/// value (a PolyCC fusion expression `fuse=max(bbr,cubic)`). An item without `=` (a request cut
/// short, a typo) comes back with an empty value, so that applying it fails and is reported.
pub fn split_requested(requested: &str) -> (&str, Vec<(&str, &str)>) {
    match requested.split_once(':') {
        None => (requested.trim(), vec![]),
        Some((name, rest)) => (
            name.trim(),
            split_top_level(rest)
                .into_iter()
                .filter(|kv| !kv.trim().is_empty())
                // An item without `=` stays, as a key with no value, so that setting it fails
                // with the parameter's own message instead of the item vanishing.
                .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
                .map(|(k, v)| (k.trim(), v.trim()))
                .collect(),
        ),
    }
}

/// `text` split at the commas outside parentheses.
pub(crate) fn split_top_level(text: &str) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (vec![], 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(&text[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[from..]);
    out
}

/// The one portus algorithm the agent registers: it routes every flow to a controller.
#[derive(Clone)]
pub struct Pool(pub Arc<AgentCore>);

impl<I: Ipc> CongAlg<I> for Pool {
    type Flow = ControlledFlow<I>;

    fn name() -> &'static str {
        "ccp-agent"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        HashMap::from([(program::PROGRAM_NAME, program::SOURCE.to_string())])
    }

    fn new_flow(&self, control: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let core = &self.0;
        let key = FlowKey {
            src_ip: info.src_ip,
            src_port: info.src_port,
            dst_ip: info.dst_ip,
            dst_port: info.dst_port,
            requested: core.screen.take_requested(info.sock_id),
        };
        let (spec, params, why) = core.choose(&key);
        info!(
            sid = info.sock_id,
            src = %format!("{}:{}", Ipv4Addr::from(info.src_ip), info.src_port),
            dst = %format!("{}:{}", Ipv4Addr::from(info.dst_ip), info.dst_port),
            requested = %key.requested,
            algorithm = spec.name,
            params = %params,
            chosen_by = ?why,
            "flow created"
        );
        if let Ok(mut c) = core.alg_counts.write() {
            *c.entry(spec.name).or_default() += 1;
        }
        let (params, priced) = match &core.pricing {
            Some(p) => p.flow_created(&key, spec, params),
            None => (params, None),
        };
        let mut ctl = (spec.build)(&params);
        let is_priced = priced.is_some();
        if let Some(ticket) = priced {
            ctl = ticket.wrap(ctl);
        }
        let ctl = core.live.wrap(ctl, &key, spec, params, is_priced);
        ControlledFlow::start(
            ctl,
            control,
            &info,
            core.time.clone(),
            core.counters.clone(),
            core.report,
        )
    }
}

/// Log a failed reload without dropping anything.
pub fn log_reload(core: &AgentCore) {
    match core.reload_rules() {
        Ok(n) => info!(rules = n, "rules reloaded; new flows use them"),
        Err(e) => error!(error = %e, "rule reload refused; keeping the previous rules"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::WallTime;

    #[test]
    fn a_requested_parameter_without_a_value_is_kept_and_refused() {
        // A request cut at libccp's 63 bytes ends in a key without its value: it must not
        // vanish (the flow would run on the default silently).
        let (name, kv) = split_requested("timely:alpha=0.02,init-ra");
        assert_eq!(
            (name, kv.clone()),
            ("timely", vec![("alpha", "0.02"), ("init-ra", "")])
        );
        let e = registry::find(name)
            .unwrap()
            .params_from(kv)
            .unwrap_err()
            .to_string();
        assert!(e.contains("init-ra"), "{e}");
        // Empty items (a trailing comma, a bare colon) are not parameters.
        assert_eq!(split_requested("cubic:").1, vec![]);
        assert_eq!(split_requested("cubic:beta=0.8,").1, vec![("beta", "0.8")]);
    }

    fn core(rules: &str) -> AgentCore {
        AgentCore::new(
            registry::find("cubic").unwrap(),
            HashMap::new(),
            Rules::parse("r.yaml", rules).unwrap(),
            None,
            Arc::new(WallTime::default()),
        )
    }

    fn key(port: u32, requested: &str) -> FlowKey {
        FlowKey {
            dst_port: port,
            requested: requested.into(),
            ..FlowKey::default()
        }
    }

    #[test]
    fn requested_parameters_apply_to_flows_chosen_by_name() {
        let c = core("rules: []\n");
        let (spec, p, why) = c.choose(&key(1, "reno:init-cwnd=4,beta=0.7"));
        assert_eq!((spec.name, why), ("reno", Choice::Requested));
        assert_eq!((p.get("init-cwnd"), p.get("beta")), (4.0, 0.7));
        // A bad parameter is ignored, the rest applies.
        let (_, p, _) = c.choose(&key(1, "reno:init-cwnd=4ms,beta=0.6"));
        assert_eq!((p.get("init-cwnd"), p.get("beta")), (10.0, 0.6));
        let (spec, _, why) = c.choose(&key(1, "nosuch"));
        assert_eq!((spec.name, why), ("cubic", Choice::Default));
    }

    #[test]
    fn control_commands_without_pricing_are_flows_and_set_params() {
        let c = core("rules: []\n");
        assert_eq!(c.command("flows").unwrap(), r#"{"flows":[]}"#);
        let e = c.command("set-params").unwrap_err();
        assert!(e.contains("usage: set-params FLOW KEY=VALUE"), "{e}");
        let e = c.command("set-params 10.0.0.1:5 min=1mbit").unwrap_err();
        assert!(e.contains("no live flow"), "{e}");
        let e = c.command("set-algorithm 10.0.0.1:5 vegas").unwrap_err();
        assert!(e.contains("no live flow"), "{e}");
        let e = c.command("set-algorithm 1 vegsa").unwrap_err();
        assert!(e.contains("did you mean \"vegas\""), "{e}");
        let e = c.command("bill").unwrap_err();
        assert!(
            e.contains("--pricing") && e.contains("set-params") && e.contains("set-algorithm"),
            "{e}"
        );
    }

    #[test]
    fn rules_match_the_requested_name_without_its_parameters() {
        let c = core("rules:\n  - match: {requested: reno}\n    algorithm: cubic\n");
        let (spec, _, why) = c.choose(&key(1, "reno:beta=0.9"));
        assert_eq!(spec.name, "cubic");
        assert_eq!(why, Choice::Rule("rule 1".into()));
    }
}
