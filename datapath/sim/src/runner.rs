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
use ccp_algorithms::agent::live;
use ccp_algorithms::agent::pricing::{Command as PricingCommand, Pricing, PricingPolicy};
use ccp_algorithms::agent::rules::Rules;
use ccp_algorithms::agent::{
    AgentCore, Pool, check_default_settings, parse_param_settings, split_requested,
};
use ccp_algorithms::aggregator::{AggregatorSource, SharedSim, SimSource, with_source};
use ccp_algorithms::params::ParamSet;
use ccp_algorithms::registry::{self, AlgorithmSpec};
use portus::ipc::{BackendBuilder, Ipc};
use portus::{CongAlg, Datapath, DatapathInfo, Flow, Report};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::{info, warn};

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

/// Check that every algorithm a flow asks for exists and its parameters parse and, laid over the
/// agent's settings `base`, hold together (the agent would only warn and fall back).
fn check_algorithms(s: &Scenario, base: &HashMap<&'static str, ParamSet>) -> Result<(), SimError> {
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
        let own = spec
            .params_from(overrides.iter().copied())
            .map_err(|e| SimError::Invalid(format!("{field}: {e}")))?;
        let mut whole = base
            .get(spec.name)
            .cloned()
            .unwrap_or_else(|| spec.defaults());
        for (k, v) in overrides {
            whole
                .set(spec.params, k, v)
                .map_err(|e| SimError::Invalid(format!("{field}: {e}")))?;
        }
        spec.check_set(&whole, &own)
            .map_err(|e| SimError::Invalid(format!("{field}: {e}")))?;
    }
    Ok(())
}

/// What `run` checks before it simulates, without simulating: the scenario's own consistency,
/// every algorithm a flow, a generator or the agent names (and its parameters), the agent's
/// parameter settings, and the world's construction (topology and host names, traces, workload
/// distributions, recorded queues). `ccp-sim check` runs this.
pub fn check(scenario: &Scenario) -> Result<(), SimError> {
    checked_agent(scenario)?;
    World::build(scenario, scenario.seed, VirtualClock::new())?;
    Ok(())
}

/// The scenario's consistency and algorithms ([`check`] but the world): the agent's default
/// algorithm and its parameter settings.
fn checked_agent(
    scenario: &Scenario,
) -> Result<(&'static AlgorithmSpec, HashMap<&'static str, ParamSet>), SimError> {
    scenario
        .validate()
        .map_err(|m| SimError::Invalid(m.replace('\n', "; ")))?;
    let base = parse_params(&scenario.agent.params)?;
    check_algorithms(scenario, &base)?;
    let default_alg = registry::lookup(&scenario.agent.default_alg)
        .map_err(|e| SimError::Invalid(format!("agent.default_alg: {e}")))?;
    check_default_settings(default_alg, &base)
        .map_err(|e| SimError::Invalid(format!("agent.params: {e}")))?;
    Ok((default_alg, base))
}

/// Run `scenario` with `seed` (default: the scenario's).
pub fn run(scenario: &Scenario, seed: Option<u64>) -> Result<SimResult, SimError> {
    let seed = seed.unwrap_or(scenario.seed);
    let (default_alg, base) = checked_agent(scenario)?;
    let clock = VirtualClock::new();
    let world = Arc::new(Mutex::new(World::build(scenario, seed, clock.clone())?));
    let time: Arc<dyn TimeSource> = Arc::new(clock);
    let mut core = AgentCore::new(default_alg, base, Rules::default(), None, time.clone());
    let jcce = scenario.agent.jcce.clone().unwrap_or_default();
    let jcce_us = jcce.latency.0 / 1000;
    let jcce = SimSource::new(time.clone(), jcce_us, jcce_us, jcce.min_group)
        .map_err(|e| SimError::Invalid(format!("agent.jcce: {e}")))?;
    let jcce: Arc<dyn AggregatorSource> = Arc::new(SharedSim(Arc::new(jcce)));
    if let Some(p) = pricing(scenario, time.clone())? {
        core = core.with_pricing(p);
    }
    let core = Arc::new(core);
    let schedule = Arc::new(Schedule::new(scenario, core.clone(), time)?);
    let stop = Arc::new(AtomicBool::new(true));
    let ipc = Screened::new(
        SimIpc::new(world.clone(), stop.clone()),
        core.screen.clone(),
    );
    // Flows are built on this thread by the portus loop: they find the simulated JCCE here.
    let ended = with_source(Some(jcce), || {
        portus::RunBuilder::new(BackendBuilder { sock: ipc })
            .default_alg(Scheduled {
                pool: Pool(core.clone()),
                schedule: schedule.clone(),
            })
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

/// The agent's pricing from `agent.pricing` (a policy file or inline).
fn pricing(s: &Scenario, time: Arc<dyn TimeSource>) -> Result<Option<Arc<Pricing>>, SimError> {
    let bad = |m: String| SimError::Invalid(format!("agent.pricing: {m}"));
    let policy = match &s.agent.pricing {
        None => return Ok(None),
        Some(serde_yaml::Value::String(path)) => {
            PricingPolicy::load(std::path::Path::new(path)).map_err(|e| bad(e.to_string()))?
        }
        Some(v) => {
            let text = serde_yaml::to_string(v).map_err(|e| bad(e.to_string()))?;
            PricingPolicy::parse("agent.pricing", &text).map_err(|e| bad(e.to_string()))?
        }
    };
    Ok(Some(Arc::new(Pricing::new(policy, time))))
}

/// `agent.commands`: control commands run through the agent's own command path
/// ([`AgentCore::command`], what `ccp-agent ctl` reaches) when the agent's clock reaches them.
/// A command runs at the first report of any flow at or after its time, before that report is
/// handled; a flow it changes takes the change at its next report (as with `ccp-agent ctl`).
struct Schedule {
    core: Arc<AgentCore>,
    time: Arc<dyn TimeSource>,
    /// (agent time µs, command), latest first.
    pending: Mutex<Vec<(u64, String)>>,
    /// Agent time of the next command, µs (`u64::MAX`: none).
    next_us: AtomicU64,
}

impl Schedule {
    /// The schedule of `s.agent.commands`, each checked now: `set-params FLOW KEY=VALUE ...`
    /// (checked again against the live flow when it runs), `set-algorithm FLOW
    /// NAME[:KEY=VALUE,...]` (the algorithm and its parameters checked now), `flows`, and the pricing commands
    /// (`set-class ...`, `bill`, which need `agent.pricing`).
    fn new(
        s: &Scenario,
        core: Arc<AgentCore>,
        time: Arc<dyn TimeSource>,
    ) -> Result<Self, SimError> {
        let bad = |i: usize, m: String| SimError::Invalid(format!("agent.commands[{i}]: {m}"));
        let mut pending = Vec::with_capacity(s.agent.commands.len());
        for (i, c) in s.agent.commands.iter().enumerate() {
            let words: Vec<&str> = c.command.split_whitespace().collect();
            match words.as_slice() {
                ["flows"] => {}
                ["set-params", _, settings @ ..] if !settings.is_empty() => {
                    if let Some(kv) = settings.iter().find(|kv| !kv.contains('=')) {
                        return Err(bad(i, format!("{kv:?}: expected KEY=VALUE")));
                    }
                }
                ["set-params", ..] => {
                    return Err(bad(
                        i,
                        "usage: set-params FLOW KEY=VALUE [KEY=VALUE ...]".into(),
                    ));
                }
                ["set-algorithm", _, requested] => {
                    live::parse_algorithm(requested, |spec| core.base(spec))
                        .map_err(|e| bad(i, format!("{:?}: {e}", c.command)))?;
                }
                ["set-algorithm", ..] => {
                    return Err(bad(
                        i,
                        "usage: set-algorithm FLOW NAME[:KEY=VALUE,...]".into(),
                    ));
                }
                _ if core.pricing().is_some() => {
                    PricingCommand::parse(&c.command).map_err(|e| bad(i, e))?;
                }
                _ => {
                    return Err(bad(
                        i,
                        format!(
                            "{:?}: expected `set-params FLOW KEY=VALUE ...`, \
                             `set-algorithm FLOW NAME[:KEY=VALUE,...]` or `flows` \
                             (set-class and bill need agent.pricing)",
                            c.command
                        ),
                    ));
                }
            }
            pending.push((c.at.0 / 1000, c.command.clone()));
        }
        pending.sort_by_key(|c| std::cmp::Reverse(c.0));
        let next = pending.last().map_or(u64::MAX, |c| c.0);
        Ok(Schedule {
            core,
            time,
            pending: Mutex::new(pending),
            next_us: AtomicU64::new(next),
        })
    }

    /// Run the commands that are due.
    fn poll(&self) {
        let now = self.time.now_us();
        if now < self.next_us.load(Ordering::Acquire) {
            return;
        }
        let due: Vec<String> = {
            let Ok(mut p) = self.pending.lock() else {
                return;
            };
            let mut due = vec![];
            while p.last().is_some_and(|c| c.0 <= now) {
                if let Some((_, c)) = p.pop() {
                    due.push(c);
                }
            }
            let next = p.last().map_or(u64::MAX, |c| c.0);
            self.next_us.store(next, Ordering::Release);
            due
        };
        for c in due {
            match self.core.command(&c) {
                Ok(r) => info!(command = %c, result = %r, now_us = now, "scheduled command"),
                Err(e) => warn!(command = %c, error = %e, now_us = now, "scheduled command failed"),
            }
        }
    }
}

/// The agent's [`Pool`] with the scenario's scheduled commands run ahead of every report.
#[derive(Clone)]
struct Scheduled {
    pool: Pool,
    schedule: Arc<Schedule>,
}

impl<I: Ipc> CongAlg<I> for Scheduled {
    type Flow = ScheduledFlow<<Pool as CongAlg<I>>::Flow>;

    fn name() -> &'static str {
        <Pool as CongAlg<I>>::name()
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        <Pool as CongAlg<I>>::datapath_programs(&self.pool)
    }

    fn new_flow(&self, control: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        ScheduledFlow {
            inner: self.pool.new_flow(control, info),
            schedule: self.schedule.clone(),
        }
    }
}

struct ScheduledFlow<F> {
    inner: F,
    schedule: Arc<Schedule>,
}

impl<F: Flow> Flow for ScheduledFlow<F> {
    fn on_report(&mut self, sock_id: u32, m: Report) {
        self.schedule.poll();
        self.inner.on_report(sock_id, m)
    }

    fn close(&mut self) {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{AgentCommand, Dur, example};

    fn with_commands(commands: &[&str]) -> Scenario {
        let mut s = example("dumbbell").unwrap();
        s.duration = Dur::ms(200);
        s.agent.commands = commands
            .iter()
            .map(|c| AgentCommand {
                at: Dur::ms(100),
                command: c.to_string(),
            })
            .collect();
        s
    }

    fn refusal(commands: &[&str]) -> String {
        match run(&with_commands(commands), None) {
            Err(SimError::Invalid(m)) => m,
            Err(e) => panic!("{commands:?}: {e}"),
            Ok(_) => panic!("{commands:?} accepted"),
        }
    }

    #[test]
    fn scheduled_commands_are_checked_before_the_run() {
        let e = refusal(&["flows", "set-params 10.0.0.1:10000"]);
        assert!(
            e.contains("agent.commands[1]") && e.contains("usage"),
            "{e}"
        );
        let e = refusal(&["set-params 10.0.0.1:10000 min"]);
        assert!(e.contains("expected KEY=VALUE"), "{e}");
        let e = refusal(&["set-class 10.0.0.1:10000 ds"]);
        assert!(e.contains("need agent.pricing"), "{e}");
        let e = refusal(&["flows", "set-algorithm 10.0.0.1:10000 vegsa"]);
        assert!(
            e.contains("agent.commands[1]") && e.contains("did you mean \"vegas\""),
            "{e}"
        );
        let e = refusal(&["set-algorithm 10.0.0.1:10000 vegas:alpah=3"]);
        assert!(e.contains("did you mean \"alpha\""), "{e}");
        let e = refusal(&["set-algorithm 10.0.0.1:10000"]);
        assert!(e.contains("usage: set-algorithm FLOW NAME"), "{e}");
        let e = refusal(&["frobnicate"]);
        assert!(e.contains("set-params FLOW KEY=VALUE"), "{e}");
        // Well-formed commands run; one naming no live flow fails when it runs, not the run.
        let r = run(
            &with_commands(&["flows", "set-params 10.0.0.9:1 beta=0.7"]),
            None,
        );
        assert!(r.is_ok(), "{:?}", r.err());
    }
}
