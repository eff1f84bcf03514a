//! The simulator backend: a recipe point becomes a `ccp_sim::Scenario` (a dumbbell whose
//! bottleneck `left->right` is the recipe's uplink and whose reverse is its downlink; every
//! flow copy gets its own sender `s<k>` and receiver `r<k>`; generators get senders after the
//! flows'), runs in this process with the real agent in virtual time, and its result becomes
//! [`RunData`]. A reverse flow (`reverse: true`) copy k sends from `r<k>` to `s<k>`: its data
//! crosses the downlink (`right->left`), its ACKs the uplink, where they queue behind the
//! forward flows' data. Same recipe and seed, same bytes out.

use super::{BackendError, RunContext, algorithm_of};
use crate::data::{FlowData, RunData, Sample};
use crate::recipe::{Limit, Queue, Recipe, expand_flows, requested};
use ccp_algorithms::params::MEMBER_KEYS;
use ccp_algorithms::registry::AlgorithmSpec;
use ccp_sim::Scenario;
use ccp_sim::scenario::{
    AgentCommand as SimCommand, AgentSpec, Amount, DumbbellSpec, Dur, FlowSpec as SimFlow,
    JcceSpec, LinkOverride, LinkSpec, OutputSpec, PoissonSpec, Rate, RateStep, RedSpec,
    SeriesFlows, Size, TopologySpec, TransportSpec, WorkloadSpec,
};
use std::collections::HashMap;

/// Name of the bottleneck queue in the simulator.
pub const BOTTLENECK: &str = "left->right";

fn amount(l: Limit) -> Amount {
    match l {
        Limit::Packets(p) => Amount::Packets(p),
        Limit::Bytes(b) => Amount::Bytes(b),
        Limit::Bdp(x) => Amount::Bdp(x),
    }
}

fn queue_fields(q: &Queue) -> (Option<Amount>, Option<RedSpec>) {
    match q {
        Queue::Infinite => (None, None),
        Queue::DropTail(l) | Queue::DropHead(l) => (Some(amount(*l)), None),
        Queue::Codel { limit, .. } | Queue::Pie { limit, .. } => (Some(amount(*limit)), None),
        Queue::Red {
            limit,
            min,
            max,
            max_p,
            ecn,
        } => (
            limit.map(amount),
            Some(RedSpec {
                min: amount(*min),
                max: amount(*max),
                max_p: *max_p,
                weight: 0.002,
                ecn: *ecn,
            }),
        ),
    }
}

/// The uplink's capacity, bytes/s: its rate (with a schedule, the mean over the run), or a
/// trace's mean rate.
pub fn uplink_capacity(r: &Recipe) -> Result<u64, BackendError> {
    if let Some(rate) = r.link.uplink.mean_rate(0, r.duration_us) {
        return Ok(rate.round() as u64);
    }
    match &r.link.uplink.trace {
        Some(t) => Ok(ccp_sim::trace::Trace::load(t)?.mean_rate()),
        None => Ok(0),
    }
}

/// The address (`SRC_IP:SRC_PORT`) the agent knows flow instance `k` of a recipe by in the
/// simulator: the scenario gives it its own sender `s<k>`, the dumbbell's host `k` (senders are
/// its first hosts), whose address is 10.0.0.0 + k + 1, and the simulator numbers a listed
/// flow's source port 10000 + its index in the list (ccp-sim's `World::build`, `start_flow`).
/// A reverse flow sends from its receiver `r<k>`, the dumbbell's host `senders + k` (receivers
/// follow the `senders` senders).
pub fn flow_addr(k: usize, reverse: bool, senders: usize) -> String {
    let host = if reverse { senders + k } else { k };
    let ip = std::net::Ipv4Addr::from(0x0A00_0000u32 | (host as u32 + 1));
    format!("{ip}:{}", 10_000 + k % 50_000)
}

/// The number of senders (and receivers) of a recipe's dumbbell: one per flow copy, then
/// every generator's.
fn senders(r: &Recipe) -> usize {
    let flows = expand_flows(&r.flows).len();
    let gens: usize = r.workloads.iter().map(|w| w.senders as usize).sum();
    (flows + gens).max(1)
}

/// Flow instance `k`'s address in the simulator ([`flow_addr`]).
fn instance_addr(r: &Recipe, k: usize) -> String {
    let instances = expand_flows(&r.flows);
    let reverse = instances
        .get(k)
        .is_some_and(|(i, _, _)| r.flows[*i].reverse);
    flow_addr(k, reverse, senders(r))
}

/// The run's seed as the agent-wide default of every algorithm's `seed` parameter
/// (`ALG.seed=SEED`, as `ccp-agent --param` sets it): the algorithms' own random choices (a
/// learner's probing order, BBR's first gain-cycle phase) then differ between the runs of a
/// point as the path's random elements do, where before a path with none (no loss, jitter or
/// workload) gave every run the same bytes. The members of a meta-algorithm (a PolyCC pool,
/// `jcce-member:alg=...`) are built from its `MEMBER.KEY` settings, not the agent's, so they get
/// it as `META.ALG.seed=SEED`. A flow that sets a seed in its params keeps it; the first run
/// with the default `seed: 1` asks for the parameter's default, 1.
fn learner_seeds(seed: u64) -> Vec<String> {
    let all = ccp_algorithms::registry::all();
    let has = |a: &AlgorithmSpec, key: &str| a.params.iter().any(|p| p.key == key);
    let seeded: Vec<&str> = all
        .iter()
        .filter(|a| has(a, "seed"))
        .map(|a| a.name)
        .collect();
    let mut out: Vec<String> = seeded.iter().map(|a| format!("{a}.seed={seed}")).collect();
    for meta in all.iter().filter(|a| has(a, MEMBER_KEYS)) {
        out.extend(
            seeded
                .iter()
                .map(|a| format!("{}.{a}.seed={seed}", meta.name)),
        );
    }
    out
}

/// The scenario of one run.
pub fn scenario(r: &Recipe, seed: u64, name: &str) -> Result<Scenario, BackendError> {
    let up = &r.link.uplink;
    let down = &r.link.downlink;
    let (buffer, red) = queue_fields(&up.queue);
    let (rbuffer, rred) = queue_fields(&down.queue);
    let bottleneck = LinkSpec {
        rate: up.rate.map(Rate),
        // The simulator's jitter spans ±jitter around the delay: centre it so that the extra
        // delay spans [0, link.jitter].
        delay: Dur((r.link.delay_us * 1000) + r.link.jitter_us * 500),
        jitter: Dur(r.link.jitter_us * 500),
        jitter_model: (r.link.jitter_us > 0).then_some(r.link.jitter_model),
        buffer,
        red,
        ecn_k: up.ecn_threshold.map(amount),
        loss: up.loss,
        trace: up.trace.clone(),
        schedule: up
            .schedule
            .iter()
            .map(|s| RateStep {
                at: Dur(s.at_us * 1000),
                rate: Rate(s.rate),
            })
            .collect(),
        reverse: Some(Box::new(LinkOverride {
            rate: down.rate.map(Rate),
            trace: down.trace.clone(),
            // The downlink follows `link.schedule` only if it runs at `link.rate`.
            schedule: Some(
                down.schedule
                    .iter()
                    .map(|s| RateStep {
                        at: Dur(s.at_us * 1000),
                        rate: Rate(s.rate),
                    })
                    .collect(),
            ),
            buffer: rbuffer,
            red: rred,
            ecn_k: down.ecn_threshold.map(amount),
            loss: Some(down.loss),
            ..LinkOverride::default()
        })),
        ..LinkSpec::default()
    };
    let capacity = uplink_capacity(r)?;
    let peak = up.segments().iter().map(|s| s.1).fold(capacity, u64::max);
    let access_rate = r
        .sim
        .access_rate
        .unwrap_or_else(|| (peak.saturating_mul(4)).max(125_000_000));
    let instances = expand_flows(&r.flows);
    let mut flows = vec![];
    for (k, (i, _, start)) in instances.iter().enumerate() {
        let f = &r.flows[*i];
        let (src, dst) = (format!("s{k}"), format!("r{k}"));
        let (src, dst) = if f.reverse { (dst, src) } else { (src, dst) };
        flows.push(SimFlow {
            src,
            dst,
            alg: f.requested(),
            size: f.size.map(Size),
            start: Dur(start * 1000),
            stop: f.duration_us.map(|d| Dur((start + d) * 1000)),
            class: f.class.clone(),
            rate_cap: f.rate_cap.map(Rate),
            count: 1,
            spacing: Dur(0),
        });
    }
    let mut next = instances.len();
    let mut workloads = vec![];
    for w in &r.workloads {
        let hosts: Vec<usize> = (next..next + w.senders as usize).collect();
        next += w.senders as usize;
        workloads.push(WorkloadSpec::Poisson(PoissonSpec {
            load: w.load,
            cdf: Some(w.cdf.clone()),
            cdf_points: vec![],
            sources: hosts.iter().map(|h| format!("s{h}")).collect(),
            destinations: hosts.iter().map(|h| format!("r{h}")).collect(),
            capacity: Some(Rate(capacity.max(1))),
            alg: requested(&w.algorithm, &w.params),
            class: w.class.clone(),
            start: Dur(w.start_us * 1000),
            stop: w.stop_us.map(|s| Dur(s * 1000)),
            max_flows: w.max_flows,
        }));
    }
    let transport = match &r.sim.transport {
        Some(v) => serde_yaml::from_value::<TransportSpec>(v.clone())
            .map_err(|e| BackendError::Process(format!("sim.transport: {e}")))?,
        None => TransportSpec::default(),
    };
    let all_sized = !r.flows.is_empty() && r.flows.iter().all(|f| f.size.is_some());
    Ok(Scenario {
        name: name.to_string(),
        seed,
        duration: Dur(r.duration_us * 1000),
        stop_when_done: all_sized && r.workloads.is_empty(),
        agent: AgentSpec {
            ipc_delay: Dur(r.sim.ipc_delay_us * 1000),
            // `jcce.delay`: the simulated service's latency, as the emulator's service host.
            jcce: Some(JcceSpec {
                latency: Dur(r.jcce.delay_us * 1000),
                ..JcceSpec::default()
            }),
            // `commands`: the flow named by its address.
            commands: r
                .commands
                .iter()
                .map(|c| SimCommand {
                    at: Dur(c.at_us * 1000),
                    command: c.line(&instance_addr(r, c.flow)),
                })
                .collect(),
            params: learner_seeds(seed),
            ..AgentSpec::default()
        },
        transport,
        topology: TopologySpec::Dumbbell(DumbbellSpec {
            senders: next.max(1) as u32,
            receivers: None,
            bottleneck,
            access: LinkSpec::new(Rate(access_rate), Dur(0)),
            sender_delays: vec![],
        }),
        flows,
        workloads,
        output: OutputSpec {
            step: Dur(r.sim.step_us * 1000),
            flow_series: SeriesFlows::Listed,
            queue_series: true,
            queues: vec![BOTTLENECK.to_string()],
            // The bottleneck's delay percentiles, like the goodput, after the warm-up.
            histograms_from: Dur(r.metrics.warmup_us * 1000),
        },
    })
}

/// Run one run in the simulator.
pub fn run(ctx: &RunContext) -> Result<RunData, BackendError> {
    let r = ctx.recipe;
    let sc = scenario(r, ctx.seed, &ctx.name)?;
    let res = ccp_sim::run(&sc, Some(ctx.seed))?;
    if r.sim.keep_raw {
        ccp_sim::write_outputs(&res, &ctx.dir.join("raw"))?;
    }
    let instances = expand_flows(&r.flows);
    // A command the simulator's agent could not apply only logs a warning there: one that came
    // after its (sized) flow had finished fails the run instead.
    for (i, c) in r.commands.iter().enumerate() {
        let at_ns = c.at_us * 1000;
        if let Some(f) = res
            .flows
            .iter()
            .find(|f| f.flow as usize == c.flow && f.group == "flows")
            && f.completed
            && f.end_ns <= at_ns
        {
            return Err(BackendError::Process(format!(
                "commands[{i}] ({} at {:.3} s): flow={} had finished at {:.3} s, so the agent had no such flow to change",
                c.written(),
                c.at_us as f64 / 1e6,
                c.flow,
                f.end_ns as f64 / 1e9
            )));
        }
    }
    let mut data = RunData {
        end_s: res.end_ns as f64 / 1e9,
        owd_base_ms: Some(r.link.delay_us as f64 / 1e3),
        ..RunData::default()
    };
    let mut index_of: HashMap<u32, usize> = HashMap::new();
    for (i, f) in res.flows.iter().enumerate() {
        index_of.insert(f.flow, i);
        let listed = f.group == "flows";
        // A listed flow's copy index: its sender `s<k>`, or for a reverse flow its receiver
        // `r<k>` (where it sends from).
        let host: Option<usize> = f
            .src
            .strip_prefix('s')
            .or_else(|| f.src.strip_prefix('r').filter(|_| listed))
            .and_then(|s| s.parse().ok());
        let reverse = listed && f.src.starts_with('r');
        let (deadline_us, min_rate) = match (listed, host) {
            (true, Some(k)) if k < instances.len() => {
                let spec = &r.flows[instances[k].0];
                (spec.deadline_us, spec.min_rate)
            }
            _ => {
                let w = f
                    .group
                    .strip_prefix('w')
                    .and_then(|s| s.split('.').next())
                    .and_then(|s| s.parse::<usize>().ok())
                    .and_then(|i| r.workloads.get(i));
                (w.and_then(|w| w.deadline_us), None)
            }
        };
        let alg = algorithm_of(&f.alg);
        data.flows.push(FlowData {
            algorithm: if alg.is_empty() {
                sc.agent.default_alg.clone()
            } else {
                alg
            },
            requested: f.alg.clone(),
            class: f.class.clone(),
            group: f.group.clone(),
            size: f.size,
            start_s: f.start_ns as f64 / 1e9,
            end_s: f.end_ns as f64 / 1e9,
            fct_s: f.fct_ns.map(|x| x as f64 / 1e9),
            completed: f.completed,
            bytes_delivered: f.bytes_delivered,
            packets_sent: f.packets_sent,
            lost_packets: f.retransmits,
            base_rtt_ms: Some(f.base_rtt_ns as f64 / 1e6),
            rtt_min_ms: None,
            rtt_pct_ms: None,
            deadline_s: deadline_us.map(|d| d as f64 / 1e6),
            min_rate_bps: min_rate.map(|m| m as f64 * 8.0),
            has_series: false,
            reverse,
            arrivals: vec![],
        });
    }
    for s in &res.flow_series {
        let Some(&i) = index_of.get(&s.flow) else {
            continue;
        };
        data.flows[i].has_series = true;
        data.series.push(Sample {
            t_s: s.time_ns as f64 / 1e9,
            flow: i,
            goodput_bps: s.goodput_bps as f64,
            cwnd_bytes: s.cwnd_bytes as f64,
            rtt_ms: s.rtt_us as f64 / 1e3,
            delivered: s.delivered_bytes,
            fwd_qdelay_ms: None,
        });
    }
    if let Some(q) = res.queue(BOTTLENECK) {
        data.capacity_bps = Some(match r.link.uplink.rate {
            // The rate before any step of a schedule (`capacity_steps` has the rest); the
            // queue's own rate is the one in force at the end.
            Some(rate) => rate as f64 * 8.0,
            None => q.rate as f64 * 8.0,
        });
        // A trace link's capacity is what its delivery opportunities carried during the run.
        if let Some(t) = &r.link.uplink.trace
            && res.end_ns > 0
        {
            let trace = ccp_sim::trace::Trace::load(t)?;
            let bytes = trace.opportunities_between(0, res.end_ns) as f64
                * f64::from(ccp_sim::trace::OPPORTUNITY_BYTES);
            data.capacity_bps = Some(bytes * 8.0 / (res.end_ns as f64 / 1e9));
        }
        data.qdelay_hist = q
            .qdelay
            .buckets()
            .map(|(lo, hi, c)| (lo as f64 / 1e6, hi as f64 / 1e6, c))
            .collect();
        let c = &q.counters;
        if c.drops + c.aqm_drops + c.wire_losses > 0 {
            data.notes.push(format!(
                "bottleneck: {} drop-tail drops, {} AQM drops, {} random losses, {} ECN marks",
                c.drops, c.aqm_drops, c.wire_losses, c.ecn_marks
            ));
        }
    }
    if !r.commands.is_empty() {
        data.notes.push(format!(
            "agent commands: {}",
            r.commands
                .iter()
                .map(|c| format!(
                    "at {} s {} (as {} {})",
                    c.at_us as f64 / 1e6,
                    c.written(),
                    c.verb(),
                    instance_addr(r, c.flow)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    data.link_tx = res
        .queue_samples(BOTTLENECK)
        .map(|s| (s.time_ns as f64 / 1e9, s.tx_bytes))
        .collect();
    Ok(data)
}
