//! Running a scenario: building the world, starting the real agent (the project's `AgentCore`
//! and `Pool` on the portus runtime, with the virtual clock as its time source and
//! [`crate::ipc::SimIpc`] behind the agent's `Screened` IPC wrapper), running portus's
//! loop until the scenario ends, and collecting the [`SimResult`].

use crate::error::SimError;
use crate::ipc::SimIpc;
use crate::scenario::{Scenario, WorkloadSpec};
use crate::sim::{RunCounters, World};
use crate::stats::{FlowRecord, FlowSample, Histogram, QueueRecord, QueueSample};
use crate::time::VirtualClock;
use ccp_algorithms::adapter::TimeSource;
use ccp_algorithms::agent::ipc::Screened;
use ccp_algorithms::agent::pricing::{Pricing, PricingPolicy};
use ccp_algorithms::agent::rules::Rules;
use ccp_algorithms::agent::{AgentCore, Pool, parse_param_settings, split_requested};
use ccp_algorithms::aggregator::{AggregatorSource, SharedSim, SimSource, with_source};
use ccp_algorithms::params::ParamSet;
use ccp_algorithms::registry;
use portus::ipc::BackendBuilder;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What the agent counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AgentStats {
    pub flows_created: u64,
    pub flows_closed: u64,
    pub reports: u64,
    pub bad_reports: u64,
    pub updates: u64,
    pub update_errors: u64,
    pub malformed_messages: u64,
    /// Flows per algorithm.
    pub algorithms: BTreeMap<String, u64>,
}

/// Everything a run produced.
pub struct SimResult {
    /// The scenario as run (seed replaced by the one used).
    pub scenario: Scenario,
    pub seed: u64,
    /// Simulated time at the end, ns.
    pub end_ns: u64,
    pub counters: RunCounters,
    pub agent: AgentStats,
    pub flows: Vec<FlowRecord>,
    pub flow_series: Vec<FlowSample>,
    /// Recorded queues (all, or those of `output.queues`).
    pub queues: Vec<QueueRecord>,
    /// Names of every port, indexed as `QueueSample::queue`.
    pub port_names: Vec<String>,
    pub queue_series: Vec<QueueSample>,
    /// Per-packet one-way delay, ns, by flow class ("" for flows without one): from the moment
    /// the sender puts a data packet into its host's NIC queue to its arrival at the receiver
    /// (queueing, serialization and propagation on every hop), every data packet that arrives.
    pub owd: BTreeMap<String, Histogram>,
    /// The agent's bills at the end (with `agent.pricing`).
    pub bill: Option<serde_json::Value>,
}

impl SimResult {
    /// The one-way delays of every class together.
    pub fn owd_all(&self) -> Histogram {
        let mut all = Histogram::new();
        for h in self.owd.values() {
            all.merge(h);
        }
        all
    }

    /// The record of queue `name`.
    pub fn queue(&self, name: &str) -> Option<&QueueRecord> {
        self.queues.iter().find(|q| q.name == name)
    }

    /// Samples of queue `name`.
    pub fn queue_samples<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a QueueSample> + 'a {
        let id = self.port_names.iter().position(|n| n == name);
        self.queue_series
            .iter()
            .filter(move |s| Some(s.queue as usize) == id)
    }

    /// Samples of flow `flow`.
    pub fn flow_samples(&self, flow: u32) -> impl Iterator<Item = &FlowSample> + '_ {
        self.flow_series.iter().filter(move |s| s.flow == flow)
    }
}

fn parse_params(list: &[String]) -> Result<HashMap<&'static str, ParamSet>, SimError> {
    parse_param_settings(list).map_err(|e| SimError::Invalid(format!("agent.params: {e}")))
}

/// Check that every algorithm a flow asks for exists and its parameters parse (the agent would
/// only warn and fall back to its default).
fn check_algorithms(s: &Scenario) -> Result<(), SimError> {
    let mut named: Vec<(String, &str)> = s
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("flows[{i}].alg"), f.alg.as_str()))
        .collect();
    for (i, w) in s.workloads.iter().enumerate() {
        let alg = match w {
            WorkloadSpec::Poisson(p) => p.alg.as_str(),
            WorkloadSpec::Incast(c) => c.alg.as_str(),
        };
        named.push((format!("workloads[{i}].alg"), alg));
    }
    for (field, alg) in named {
        if alg.is_empty() {
            continue;
        }
        let (name, overrides) = split_requested(alg);
        let spec =
            registry::lookup(name).map_err(|e| SimError::Invalid(format!("{field}: {e}")))?;
        spec.params_from(overrides)
            .map_err(|e| SimError::Invalid(format!("{field}: {e}")))?;
    }
    Ok(())
}

/// Run `scenario` with `seed` (default: the scenario's).
pub fn run(scenario: &Scenario, seed: Option<u64>) -> Result<SimResult, SimError> {
    let seed = seed.unwrap_or(scenario.seed);
    scenario
        .validate()
        .map_err(|m| SimError::Invalid(m.replace('\n', "; ")))?;
    check_algorithms(scenario)?;
    let default_alg = registry::lookup(&scenario.agent.default_alg)
        .map_err(|e| SimError::Invalid(format!("agent.default_alg: {e}")))?;
    let base = parse_params(&scenario.agent.params)?;
    let clock = VirtualClock::new();
    let world = Arc::new(Mutex::new(World::build(scenario, seed, clock.clone())?));
    let time: Arc<dyn TimeSource> = Arc::new(clock);
    let mut core = AgentCore::new(default_alg, base, Rules::default(), None, time.clone());
    let jcce = scenario.agent.jcce.clone().unwrap_or_default();
    let jcce_us = jcce.latency.0 / 1000;
    let jcce = SimSource::new(time.clone(), jcce_us, jcce_us, jcce.min_group)
        .map_err(|e| SimError::Invalid(format!("agent.jcce: {e}")))?;
    let jcce: Arc<dyn AggregatorSource> = Arc::new(SharedSim(Arc::new(jcce)));
    if let Some(p) = pricing(scenario, time)? {
        core = core.with_pricing(p);
    }
    let core = Arc::new(core);
    let stop = Arc::new(AtomicBool::new(true));
    let ipc = Screened::new(
        SimIpc::new(world.clone(), stop.clone()),
        core.screen.clone(),
    );
    // Flows are built on this thread by the portus loop: they find the simulated JCCE here.
    let ended = with_source(Some(jcce), || {
        portus::RunBuilder::new(BackendBuilder { sock: ipc })
            .default_alg(Pool(core.clone()))
            .with_stop_handle(stop.clone())
            .run()
    });
    let mut w = world
        .lock()
        .map_err(|_| SimError::Agent("the simulation panicked".into()))?;
    if !w.done() {
        return Err(SimError::Agent(format!(
            "the agent loop ended at {} ns, before the scenario did: {ended:?}",
            w.now()
        )));
    }
    stop.store(false, Ordering::SeqCst);
    let out = w.output();
    let c = &core.counters;
    let agent = AgentStats {
        flows_created: c.flows_created.load(Ordering::Relaxed),
        flows_closed: c.flows_closed.load(Ordering::Relaxed),
        reports: c.reports.load(Ordering::Relaxed),
        bad_reports: c.bad_reports.load(Ordering::Relaxed),
        updates: c.updates.load(Ordering::Relaxed),
        update_errors: c.update_errors.load(Ordering::Relaxed),
        malformed_messages: core.screen.counters.malformed.load(Ordering::Relaxed),
        algorithms: core
            .algorithm_counts()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    };
    let mut scenario = scenario.clone();
    scenario.seed = seed;
    Ok(SimResult {
        scenario,
        seed,
        end_ns: out.end_ns,
        counters: out.counters,
        agent,
        flows: out.flows,
        flow_series: out.flow_series,
        queues: out.queues,
        port_names: out.queue_names,
        queue_series: out.queue_series,
        owd: out.owd,
        bill: core.pricing().map(|p| p.bill()),
    })
}

/// The agent's pricing from `agent.pricing` (a policy file or inline) and `agent.commands`.
fn pricing(s: &Scenario, time: Arc<dyn TimeSource>) -> Result<Option<Arc<Pricing>>, SimError> {
    let bad = |m: String| SimError::Invalid(format!("agent.pricing: {m}"));
    let policy = match &s.agent.pricing {
        None if s.agent.commands.is_empty() => return Ok(None),
        None => {
            return Err(SimError::Invalid(
                "agent.commands: needs agent.pricing".into(),
            ));
        }
        Some(serde_yaml::Value::String(path)) => {
            PricingPolicy::load(std::path::Path::new(path)).map_err(|e| bad(e.to_string()))?
        }
        Some(v) => {
            let text = serde_yaml::to_string(v).map_err(|e| bad(e.to_string()))?;
            PricingPolicy::parse("agent.pricing", &text).map_err(|e| bad(e.to_string()))?
        }
    };
    let schedule = s
        .agent
        .commands
        .iter()
        .map(|c| (c.at.0 / 1000, c.command.clone()))
        .collect();
    let p = Pricing::new(policy, time)
        .with_schedule(schedule)
        .map_err(|e| SimError::Invalid(format!("agent.commands: {e}")))?;
    Ok(Some(Arc::new(p)))
}
