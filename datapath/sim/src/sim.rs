//! The simulated world and its event loop: hosts with their transport, the one datapath engine
//! all flows are connections of, the ports of the topology, the flow generators, the IPC
//! queues to the agent, and the statistics.
//!
//! The loop does not own the thread: the agent's portus loop does. Every time portus asks the
//! IPC for a message, [`World::next_agent_message`] processes events in time order until the
//! next datapath-to-agent message is due and hands it over; messages the agent sends back are
//! scheduled for the engine one IPC delay later ([`World::agent_send`]). Virtual time therefore
//! only moves inside the agent's `recv`, and the agent sees the virtual clock.

use crate::error::SimError;
use crate::event::{Event, EventQueue};
use crate::link::{Limit, Offer, Port, PortCfg, QueueCfg, RedCfg};
use crate::packet::{AckHdr, Body, DataHdr, Ecn, Packet};
use crate::scenario::{Amount, JitterModel, LinkSpec, Scenario, SeriesFlows, WorkloadSpec};
use crate::stats::{FlowRecord, FlowSample, Histogram, QueueRecord, QueueSample};
use crate::time::{VirtualClock, tx_time_ns};
use crate::topology::{Topology, mix64};
use crate::trace::Trace;
use crate::transport::{Outgoing, Receiver, Sender, SenderCfg, SenderStats};
use crate::workload::{Cdf, exp_interval_ns};
use ccp_engine::{DatapathOps, Engine, EngineConfig, FlowInfo, Primitives};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const NONE: u32 = u32::MAX;

/// Random streams, one per component: `(kind << 32) | index`.
const STREAM_QUEUE: u64 = 1;
const STREAM_WIRE: u64 = 2;
const STREAM_WORKLOAD: u64 = 3;

fn rng_for(seed: u64, kind: u64, index: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream((kind << 32) | index);
    r
}

/// Where a flow is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not started.
    Waiting,
    /// Sending.
    Active,
    /// Done sending; its engine connection is released shortly.
    Finished,
    /// Engine connection freed.
    Closed,
}

struct Flow {
    src: u32,
    dst: u32,
    alg: String,
    class: String,
    group: String,
    size: Option<u64>,
    start: u64,
    stop: Option<u64>,
    rate_cap: Option<u64>,
    hash: u32,
    /// Incast generator and round.
    incast: Option<u32>,
    phase: Phase,
    tx: Option<Sender>,
    rx: Option<Receiver>,
    sid: Option<u32>,
    timer_at: u64,
    ack_timer_at: u64,
    stopped_at: Option<u64>,
    tracked: bool,
    sampled_delivered: u64,
    final_stats: SenderStats,
    /// In its host's list of senders waiting for NIC room.
    nic_waiting: bool,
}

enum Gen {
    Poisson {
        rng: Box<ChaCha8Rng>,
        cdf: Arc<Cdf>,
        per_sec: f64,
        sources: Vec<u32>,
        dests: Vec<u32>,
        alg: String,
        class: String,
        stop: u64,
        max: Option<u64>,
        made: u64,
    },
    Incast {
        receiver: u32,
        senders: Vec<u32>,
        size: u64,
        rounds: u32,
        gap: u64,
        alg: String,
        class: String,
        round: u32,
        outstanding: u32,
    },
}

/// An engine call's side effects that concern flows.
enum Upd {
    Cwnd(u32),
    Rate(u32),
}

struct Ops<'a> {
    at: u64,
    to_agent: &'a mut VecDeque<Vec<u8>>,
    ev: &'a mut EventQueue,
    upd: &'a mut Vec<(u32, Upd)>,
    sent: &'a mut u64,
}

impl DatapathOps for Ops<'_> {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        self.to_agent.push_back(msg.to_vec());
        self.ev.push(self.at, Event::ToAgent);
        *self.sent += 1;
        Ok(())
    }
    fn set_cwnd(&mut self, sid: u32, cwnd_bytes: u32) {
        self.upd.push((sid, Upd::Cwnd(cwnd_bytes)));
    }
    fn set_rate_abs(&mut self, sid: u32, rate: u32) {
        self.upd.push((sid, Upd::Rate(rate)));
    }
}

/// Counters of the run as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunCounters {
    /// Events processed.
    pub events: u64,
    /// Data packets sent by hosts.
    pub data_packets: u64,
    /// ACKs sent by hosts.
    pub ack_packets: u64,
    /// Packets that arrived at their destination host.
    pub delivered_packets: u64,
    /// Engine invocations.
    pub invokes: u64,
    /// Engine invocations refused for another reason than "no program yet".
    pub invoke_errors: u64,
    /// Messages datapath -> agent.
    pub messages_to_agent: u64,
    /// Messages agent -> datapath.
    pub messages_to_datapath: u64,
    /// Agent messages the engine refused.
    pub engine_errors: u64,
    /// Flows created.
    pub flows: u64,
    /// Most events pending at once.
    pub peak_pending_events: u64,
}

/// Everything the world recorded.
pub struct WorldOutput {
    pub end_ns: u64,
    pub counters: RunCounters,
    pub flows: Vec<FlowRecord>,
    pub flow_series: Vec<FlowSample>,
    pub queues: Vec<QueueRecord>,
    pub queue_names: Vec<String>,
    pub queue_series: Vec<QueueSample>,
    pub finished: bool,
    /// Per-packet one-way delay by flow class (see `World::owd`).
    pub owd: BTreeMap<String, Histogram>,
}

/// The simulated network.
pub struct World {
    clock: VirtualClock,
    now: u64,
    end: u64,
    seed: u64,
    ev: EventQueue,
    topo: Topology,
    ports: Vec<Port>,
    flows: Vec<Flow>,
    sid_flow: Vec<u32>,
    engine: Engine<VirtualClock>,
    to_agent: VecDeque<Vec<u8>>,
    to_dp: VecDeque<Vec<u8>>,
    ipc_delay: u64,
    gens: Vec<Gen>,
    sender_cfg: SenderCfg,
    ack_every: u32,
    delayed_ack: u64,
    header: u32,
    step: u64,
    series_mode: SeriesFlows,
    tracked_active: Vec<u32>,
    sampled_ports: Vec<u32>,
    queue_series_on: bool,
    flow_series: Vec<FlowSample>,
    queue_series: Vec<QueueSample>,
    counters: RunCounters,
    out: Vec<Outgoing>,
    /// Senders to serve (see `try_send`).
    wake: VecDeque<u32>,
    sending: bool,
    /// Per host: senders blocked by a full NIC queue, in arrival order.
    nic_wait: Vec<VecDeque<u32>>,
    upd: Vec<(u32, Upd)>,
    departed: Vec<Packet>,
    stop_when_done: bool,
    sized_open: u64,
    gens_active: u32,
    done: bool,
    /// Per-packet one-way delay, ns, from the sender's NIC queue to the receiver, of every data
    /// packet that arrives (retransmissions and duplicates too), by flow class.
    owd: Vec<(String, Histogram)>,
    finished: bool,
}

/// Loads each trace and CDF file once.
#[derive(Default)]
struct Files {
    traces: BTreeMap<PathBuf, Arc<Trace>>,
    cdfs: BTreeMap<PathBuf, Arc<Cdf>>,
}

impl Files {
    fn trace(&mut self, p: &Path) -> Result<Arc<Trace>, SimError> {
        if let Some(t) = self.traces.get(p) {
            return Ok(t.clone());
        }
        let t = Arc::new(Trace::load(p)?);
        self.traces.insert(p.to_path_buf(), t.clone());
        Ok(t)
    }
    fn cdf(&mut self, p: &Path) -> Result<Arc<Cdf>, SimError> {
        if let Some(c) = self.cdfs.get(p) {
            return Ok(c.clone());
        }
        let c = Arc::new(Cdf::load(p)?);
        self.cdfs.insert(p.to_path_buf(), c.clone());
        Ok(c)
    }
}

fn limit(a: Amount) -> Limit {
    match a {
        Amount::Bytes(b) => Limit::Bytes(b),
        Amount::Packets(p) => Limit::Packets(p),
        // The topology resolves BDPs; none is left here.
        Amount::Bdp(_) => Limit::Bytes(u64::MAX),
    }
}

fn bytes_of(a: Amount, mtu: u64) -> f64 {
    match a {
        Amount::Bytes(b) => b as f64,
        Amount::Packets(p) => (p * mtu) as f64,
        Amount::Bdp(_) => f64::MAX,
    }
}

fn ip_of(host: u32) -> u32 {
    0x0A00_0000 | (host + 1)
}

impl World {
    /// Build the world of `s` with `seed`, reading time from `clock`. Sends the engine's READY.
    pub fn build(s: &Scenario, seed: u64, clock: VirtualClock) -> Result<World, SimError> {
        let mut files = Files::default();
        let topo = Topology::build(&s.topology, &mut |l: &LinkSpec| match &l.trace {
            Some(p) => Ok(files.trace(p)?.mean_rate()),
            None => Ok(l.rate.map_or(0, |r| r.0)),
        })?;
        let mtu = u64::from(s.transport.mss + s.transport.header);
        let mut ev = EventQueue::new();
        // Queues to record.
        let mut selected = vec![s.output.queues.is_empty(); topo.links.len()];
        for q in &s.output.queues {
            let i = topo
                .links
                .iter()
                .position(|l| {
                    format!(
                        "{}->{}",
                        topo.names[l.from as usize], topo.names[l.to as usize]
                    ) == *q
                })
                .ok_or_else(|| SimError::Invalid(format!("output.queues: no queue named {q}")))?;
            selected[i] = true;
        }
        let mut ports = Vec::with_capacity(topo.links.len());
        for (i, l) in topo.links.iter().enumerate() {
            let sp = &l.spec;
            let trace = match &sp.trace {
                Some(p) => Some(files.trace(p)?),
                None => None,
            };
            let red = sp.red.as_ref().map(|r| RedCfg {
                min_bytes: bytes_of(r.min, mtu),
                max_bytes: bytes_of(r.max, mtu),
                max_p: r.max_p,
                weight: r.weight,
                ecn: r.ecn,
            });
            let cfg = PortCfg {
                name: format!(
                    "{}->{}",
                    topo.names[l.from as usize], topo.names[l.to as usize]
                ),
                from: l.from,
                to: l.to,
                rate: sp.rate.map_or(0, |r| r.0),
                schedule: sp.schedule.iter().map(|st| (st.at.0, st.rate.0)).collect(),
                trace,
                delay: sp.delay.0,
                jitter: sp.jitter.0,
                jitter_model: sp.jitter_model.unwrap_or(JitterModel::Uniform),
                ack_aggregation: sp.ack_aggregation.0,
                loss: sp.loss,
                queue: QueueCfg {
                    capacity: sp.buffer.map(limit),
                    ecn_k: sp.ecn_k.map(limit),
                    red,
                },
                buffer_text: sp.buffer.map(|a| a.to_string()).unwrap_or_default(),
            };
            let id = i as u32;
            let mut port = Port::new(
                id,
                cfg,
                rng_for(seed, STREAM_QUEUE, i as u64),
                rng_for(seed, STREAM_WIRE, i as u64),
                selected[i],
                &mut ev,
            );
            port.queue.qdelay_from = s.output.histograms_from.0;
            ports.push(port);
        }
        let t = &s.transport;
        let sender_cfg = SenderCfg {
            mss: t.mss,
            header: t.header,
            init_cwnd: u64::from(t.init_cwnd) * u64::from(t.mss),
            min_rto: t.min_rto.0,
            initial_rto: t.initial_rto.0,
            max_rto: t.max_rto.0,
            tick: t.tick.0,
            ecn: t.ecn,
            // A time here; each flow turns it into bytes at its host link's rate when it starts.
            tsq_limit: t.tsq.0,
            reorder_threshold: u64::from(t.reorder_threshold),
            time_threshold: t.time_threshold,
        };
        let engine = Engine::new(clock.clone(), EngineConfig::default());
        let n_hosts = topo.hosts as usize;
        let mut w = World {
            clock,
            now: 0,
            end: s.duration.0,
            seed,
            ev,
            topo,
            ports,
            flows: Vec::new(),
            sid_flow: Vec::new(),
            engine,
            to_agent: VecDeque::new(),
            to_dp: VecDeque::new(),
            ipc_delay: s.agent.ipc_delay.0,
            gens: Vec::new(),
            sender_cfg,
            ack_every: t.ack_every,
            delayed_ack: t.delayed_ack.0,
            header: t.header,
            step: s.output.step.0,
            series_mode: s.output.flow_series,
            tracked_active: Vec::new(),
            sampled_ports: (0..selected.len() as u32)
                .filter(|&i| selected[i as usize])
                .collect(),
            queue_series_on: s.output.queue_series,
            flow_series: Vec::new(),
            queue_series: Vec::new(),
            counters: RunCounters::default(),
            out: Vec::new(),
            wake: VecDeque::new(),
            sending: false,
            nic_wait: vec![VecDeque::new(); n_hosts],
            upd: Vec::new(),
            departed: Vec::new(),
            stop_when_done: s.stop_when_done,
            sized_open: 0,
            gens_active: 0,
            done: false,
            finished: false,
            owd: Vec::new(),
        };
        // Flows of the list.
        for (i, f) in s.flows.iter().enumerate() {
            let src = w.topo.host(&f.src, &format!("flows[{i}].src"))?;
            let dst = w.topo.host(&f.dst, &format!("flows[{i}].dst"))?;
            for k in 0..f.count {
                let start = f.start.0 + u64::from(k) * f.spacing.0;
                let id = w.new_flow(
                    src,
                    dst,
                    f.alg.clone(),
                    f.class.clone(),
                    "flows".into(),
                    f.size.map(|s| s.0),
                    start,
                    f.stop.map(|d| d.0),
                    f.rate_cap.map(|r| r.0),
                    None,
                );
                w.flows[id as usize].tracked = w.series_mode != SeriesFlows::None;
            }
        }
        // Generators.
        for (i, g) in s.workloads.iter().enumerate() {
            let gi = w.gens.len() as u32;
            match g {
                WorkloadSpec::Poisson(p) => {
                    let cdf = match &p.cdf {
                        Some(path) => files.cdf(path)?,
                        None => Arc::new(Cdf::from_points(
                            Path::new(&format!("workloads[{i}].cdf_points")),
                            p.cdf_points.clone(),
                        )?),
                    };
                    let pick = |names: &[String], what: &str| -> Result<Vec<u32>, SimError> {
                        if names.is_empty() {
                            Ok((0..w.topo.hosts).collect())
                        } else {
                            names
                                .iter()
                                .map(|n| w.topo.host(n, &format!("workloads[{i}].{what}")))
                                .collect()
                        }
                    };
                    let sources = pick(&p.sources, "sources")?;
                    let dests = pick(&p.destinations, "destinations")?;
                    if dests.iter().all(|d| sources.len() == 1 && sources[0] == *d) {
                        return Err(SimError::Invalid(format!(
                            "workloads[{i}]: no destination other than the source"
                        )));
                    }
                    let capacity = match p.capacity {
                        Some(c) => c.0 as f64,
                        None => sources
                            .iter()
                            .map(|&h| w.ports[w.topo.uplink(h) as usize].rate as f64)
                            .sum(),
                    };
                    let per_sec = p.load * capacity / cdf.mean();
                    let mut rng = rng_for(seed, STREAM_WORKLOAD, i as u64);
                    let first = p.start.0 + exp_interval_ns(&mut rng, per_sec);
                    let stop = p.stop.map_or(w.end, |d| d.0);
                    if first <= stop && p.max_flows != Some(0) {
                        w.ev.push(first, Event::Arrival(gi));
                        w.gens_active += 1;
                    }
                    w.gens.push(Gen::Poisson {
                        rng: Box::new(rng),
                        cdf,
                        per_sec,
                        sources,
                        dests,
                        alg: p.alg.clone(),
                        class: p.class.clone(),
                        stop,
                        max: p.max_flows,
                        made: 0,
                    });
                }
                WorkloadSpec::Incast(c) => {
                    let receiver = w
                        .topo
                        .host(&c.receiver, &format!("workloads[{i}].receiver"))?;
                    let senders: Vec<u32> = if c.senders.is_empty() {
                        (0..w.topo.hosts).filter(|&h| h != receiver).collect()
                    } else {
                        c.senders
                            .iter()
                            .map(|n| w.topo.host(n, &format!("workloads[{i}].senders")))
                            .collect::<Result<_, _>>()?
                    };
                    if senders.contains(&receiver) || senders.is_empty() {
                        return Err(SimError::Invalid(format!(
                            "workloads[{i}]: the senders must be other hosts than the receiver"
                        )));
                    }
                    if c.rounds > 0 {
                        w.ev.push(c.start.0, Event::Arrival(gi));
                        w.gens_active += 1;
                    }
                    w.gens.push(Gen::Incast {
                        receiver,
                        senders,
                        size: c.size.0,
                        rounds: c.rounds,
                        gap: c.gap.0,
                        alg: c.alg.clone(),
                        class: c.class.clone(),
                        round: 0,
                        outstanding: 0,
                    });
                }
            }
        }
        w.ev.push(w.end, Event::End);
        if w.step <= w.end {
            w.ev.push(w.step, Event::Sample);
        }
        // READY to the agent.
        let mut ops = Ops {
            at: w.ipc_delay,
            to_agent: &mut w.to_agent,
            ev: &mut w.ev,
            upd: &mut w.upd,
            sent: &mut w.counters.messages_to_agent,
        };
        w.engine
            .init(&mut ops)
            .map_err(|e| SimError::Agent(format!("engine init: {e}")))?;
        Ok(w)
    }

    #[allow(clippy::too_many_arguments)]
    fn new_flow(
        &mut self,
        src: u32,
        dst: u32,
        alg: String,
        class: String,
        group: String,
        size: Option<u64>,
        start: u64,
        stop: Option<u64>,
        rate_cap: Option<u64>,
        incast: Option<u32>,
    ) -> u32 {
        let id = self.flows.len() as u32;
        let hash = mix64(self.seed ^ (u64::from(id) << 20) ^ 0x5EED) as u32;
        if size.is_some() {
            self.sized_open += 1;
        }
        self.flows.push(Flow {
            src,
            dst,
            alg,
            class,
            group,
            size,
            start,
            stop,
            rate_cap,
            hash,
            incast,
            phase: Phase::Waiting,
            tx: None,
            rx: None,
            sid: None,
            timer_at: u64::MAX,
            ack_timer_at: u64::MAX,
            stopped_at: None,
            tracked: self.series_mode == SeriesFlows::All,
            sampled_delivered: 0,
            final_stats: SenderStats::default(),
            nic_waiting: false,
        });
        self.counters.flows += 1;
        if start <= self.end {
            self.ev.push(start.max(self.now), Event::FlowStart(id));
        }
        id
    }

    /// Whether the run is over.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Current simulated time, ns.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Process events until the next message for the agent is due, and return it; `None` once
    /// the scenario has ended.
    pub fn next_agent_message(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        while let Some((t, e)) = self.ev.pop() {
            self.now = t;
            self.clock.set(t);
            self.counters.events += 1;
            self.counters.peak_pending_events = self
                .counters
                .peak_pending_events
                .max(self.ev.len() as u64 + 1);
            match e {
                Event::ToAgent => {
                    if let Some(m) = self.to_agent.pop_front() {
                        return Some(m);
                    }
                }
                Event::End => {
                    self.finish();
                    return None;
                }
                other => self.handle(other),
            }
            if self.done {
                return None;
            }
        }
        self.finish();
        None
    }

    fn finish(&mut self) {
        self.done = true;
        self.finished = true;
    }

    /// A message from the agent; the engine gets it one IPC delay later.
    pub fn agent_send(&mut self, msg: &[u8]) {
        self.to_dp.push_back(msg.to_vec());
        self.ev.push(self.now + self.ipc_delay, Event::ToDatapath);
        self.counters.messages_to_datapath += 1;
    }

    fn handle(&mut self, e: Event) {
        let now = self.now;
        match e {
            Event::TxDone(p) => {
                if let Some(pkt) = self.ports[p as usize].tx_done(p, now, &mut self.ev) {
                    self.left_port(p, &pkt);
                }
            }
            Event::WireArrive(p) => {
                let to = self.ports[p as usize].to;
                if let Some(pkt) = self.ports[p as usize].wire_arrive(p, &mut self.ev) {
                    self.arrive(to, pkt);
                }
            }
            Event::TraceOpportunity(p) => {
                let mut departed = std::mem::take(&mut self.departed);
                self.ports[p as usize].trace_opportunity(p, now, &mut self.ev, &mut departed);
                for pkt in departed.drain(..) {
                    self.left_port(p, &pkt);
                }
                self.departed = departed;
            }
            Event::RateChange(p) => {
                if let Some((t, e)) = self.ports[p as usize].rate_change(p) {
                    self.ev.push(t, e);
                }
            }
            Event::FlowTimer(f) => self.flow_timer(f),
            Event::AckTimer(f) => self.ack_timer(f),
            Event::FlowStart(f) => self.start_flow(f),
            Event::FlowStop(f) => {
                if self.flows[f as usize].phase == Phase::Active {
                    self.finish_flow(f);
                }
            }
            Event::Release(f) => self.release(f),
            Event::Arrival(g) => self.arrival(g),
            Event::Sample => self.sample(),
            Event::ToDatapath => {
                if let Some(m) = self.to_dp.pop_front() {
                    let mut ops = Ops {
                        at: now + self.ipc_delay,
                        to_agent: &mut self.to_agent,
                        ev: &mut self.ev,
                        upd: &mut self.upd,
                        sent: &mut self.counters.messages_to_agent,
                    };
                    if self.engine.read_msg(&mut ops, &m).is_err() {
                        self.counters.engine_errors += 1;
                    }
                    self.apply_updates();
                }
            }
            Event::ToAgent | Event::End => {}
        }
    }

    /// Port `p` started transmitting `pkt`: a sender's packet left its host's NIC queue.
    fn left_port(&mut self, p: u32, pkt: &Packet) {
        let host = self.ports[p as usize].from;
        if host >= self.topo.hosts {
            return;
        }
        if let Body::Data(_) = pkt.body {
            let f = pkt.flow;
            let wake = self.flows[f as usize]
                .tx
                .as_mut()
                .is_some_and(|tx| tx.nic_release(pkt.size));
            if wake {
                self.try_send(f);
            }
        }
        // Room for another packet: the longest-waiting blocked sender of this host tries.
        if let Some(f) = self.nic_wait[host as usize].pop_front() {
            self.flows[f as usize].nic_waiting = false;
            self.try_send(f);
        }
    }

    fn host_send(&mut self, pkt: Packet) {
        let l = self.topo.uplink(pkt.src);
        let is_data = !pkt.is_ack();
        if is_data {
            self.counters.data_packets += 1;
        } else {
            self.counters.ack_packets += 1;
        }
        match self.ports[l as usize].enqueue(l, self.now, pkt, &mut self.ev) {
            Offer::Started(p) => self.left_port(l, &p),
            Offer::Queued => {}
            Offer::Dropped => {
                if is_data && let Some(tx) = self.flows[pkt.flow as usize].tx.as_mut() {
                    tx.nic_release(pkt.size);
                }
            }
        }
    }

    /// Free bytes of host `h`'s NIC queue.
    fn nic_room(&self, h: u32) -> u64 {
        let q = &self.ports[self.topo.uplink(h) as usize].queue;
        match q.capacity() {
            None => u64::MAX,
            Some(Limit::Bytes(b)) => b.saturating_sub(q.bytes()),
            Some(Limit::Packets(n)) => {
                n.saturating_sub(q.len() as u64) * u64::from(self.sender_cfg.mss + self.header)
            }
        }
    }

    fn arrive(&mut self, node: u32, pkt: Packet) {
        if node == pkt.dst {
            self.counters.delivered_packets += 1;
            match pkt.body {
                Body::Data(h) => self.data_arrived(pkt, h),
                Body::Ack(a) => self.ack_arrived(pkt.flow, &a),
            }
            return;
        }
        if node < self.topo.hosts {
            return; // hosts do not forward
        }
        if let Some(l) = self.topo.next_link(node, pkt.dst, pkt.hash) {
            self.ports[l as usize].enqueue(l, self.now, pkt, &mut self.ev);
        }
    }

    fn data_arrived(&mut self, pkt: Packet, h: DataHdr) {
        let now = self.now;
        let f = pkt.flow;
        let flow = &mut self.flows[f as usize];
        let Some(rx) = flow.rx.as_mut() else {
            return;
        };
        let delay = now.saturating_sub(h.sent_ns);
        match self.owd.iter_mut().find(|(c, _)| *c == flow.class) {
            Some((_, hist)) => hist.record(delay),
            None => {
                let mut hist = Histogram::new();
                hist.record(delay);
                self.owd.push((flow.class.clone(), hist));
            }
        }
        let out = rx.on_data(now, &h, pkt.ecn == Ecn::Ce);
        if let Some(t) = out.timer {
            flow.ack_timer_at = t;
            self.ev.push(t, Event::AckTimer(f));
        }
        if let Some(a) = out.ack {
            self.send_ack(f, a);
        }
        if out.completed {
            self.flow_completed(f);
        }
    }

    fn send_ack(&mut self, f: u32, a: AckHdr) {
        let flow = &self.flows[f as usize];
        let pkt = Packet {
            flow: f,
            src: flow.dst,
            dst: flow.src,
            size: self.header,
            hash: flow.hash,
            ecn: Ecn::NotEct,
            body: Body::Ack(a),
        };
        self.host_send(pkt);
    }

    fn ack_timer(&mut self, f: u32) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        if flow.ack_timer_at != now {
            return;
        }
        flow.ack_timer_at = u64::MAX;
        if let Some(a) = flow.rx.as_mut().and_then(|rx| rx.on_timer(now)) {
            self.send_ack(f, a);
        }
    }

    fn flow_completed(&mut self, f: u32) {
        self.sized_open = self.sized_open.saturating_sub(1);
        if let Some(g) = self.flows[f as usize].incast
            && let Some(Gen::Incast {
                outstanding,
                round,
                rounds,
                gap,
                ..
            }) = self.gens.get_mut(g as usize)
        {
            *outstanding -= 1;
            if *outstanding == 0 {
                if *round < *rounds {
                    let t = self.now + *gap;
                    self.ev.push(t, Event::Arrival(g));
                } else {
                    self.gens_active -= 1;
                }
            }
        }
        self.check_done();
    }

    fn check_done(&mut self) {
        if self.stop_when_done && self.sized_open == 0 && self.gens_active == 0 {
            self.end = self.now;
            self.finish();
        }
    }

    fn ack_arrived(&mut self, f: u32, a: &AckHdr) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        if flow.phase != Phase::Active {
            return;
        }
        let Some(tx) = flow.tx.as_mut() else {
            return;
        };
        let prims = tx.on_ack(now, a);
        let complete = tx.complete();
        self.invoke(f, &prims);
        if complete {
            self.finish_flow(f);
        } else {
            self.try_send(f);
        }
    }

    fn invoke(&mut self, f: u32, prims: &Primitives) {
        let flow = &mut self.flows[f as usize];
        let Some(sid) = flow.sid else {
            return;
        };
        if let Some(tx) = flow.tx.as_mut() {
            tx.last_invoke = self.now;
        }
        let ext = flow
            .tx
            .as_ref()
            .map(Sender::ext_primitives)
            .unwrap_or_default();
        let mut ops = Ops {
            at: self.now + self.ipc_delay,
            to_agent: &mut self.to_agent,
            ev: &mut self.ev,
            upd: &mut self.upd,
            sent: &mut self.counters.messages_to_agent,
        };
        self.counters.invokes += 1;
        match self.engine.invoke_ext(&mut ops, sid, prims, &ext) {
            Ok(()) | Err(ccp_engine::Error::ProgIsNull) => {}
            Err(_) => self.counters.invoke_errors += 1,
        }
        self.apply_updates();
    }

    fn apply_updates(&mut self) {
        for (sid, u) in self.upd.drain(..) {
            let Some(&f) = self.sid_flow.get(sid as usize) else {
                continue;
            };
            if f == NONE {
                continue;
            }
            if let Some(tx) = self.flows[f as usize].tx.as_mut() {
                match u {
                    Upd::Cwnd(c) => tx.set_cwnd(u64::from(c)),
                    Upd::Rate(r) => tx.set_rate(u64::from(r)),
                }
            }
        }
    }

    /// Let flow `f` send. Senders woken while another one sends (a packet that starts at once
    /// frees NIC room) are queued and served in turn, never recursively.
    fn try_send(&mut self, f: u32) {
        self.wake.push_back(f);
        if self.sending {
            return;
        }
        self.sending = true;
        while let Some(f) = self.wake.pop_front() {
            self.send_now(f);
        }
        self.sending = false;
    }

    fn send_now(&mut self, f: u32) {
        let now = self.now;
        let src = self.flows[f as usize].src;
        let room = self.nic_room(src);
        let mut out = std::mem::take(&mut self.out);
        let flow = &mut self.flows[f as usize];
        let Some(tx) = flow.tx.as_mut() else {
            self.out = out;
            return;
        };
        tx.try_send(now, &mut out, room);
        if tx.take_nic_blocked() && !flow.nic_waiting {
            flow.nic_waiting = true;
            self.nic_wait[src as usize].push_back(f);
        }
        let ecn = if tx.ecn() { Ecn::Ect } else { Ecn::NotEct };
        let (dst, hash) = (flow.dst, flow.hash);
        for o in out.drain(..) {
            self.host_send(Packet {
                flow: f,
                src,
                dst,
                size: o.wire,
                hash,
                ecn,
                body: Body::Data(o.hdr),
            });
        }
        self.out = out;
        self.schedule_timer(f);
    }

    fn schedule_timer(&mut self, f: u32) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        let Some(tx) = flow.tx.as_ref() else {
            return;
        };
        let d = tx.deadline();
        if d == u64::MAX {
            return;
        }
        let d = d.max(now + 1);
        if flow.timer_at <= now || d < flow.timer_at {
            flow.timer_at = d;
            self.ev.push(d, Event::FlowTimer(f));
        }
    }

    fn flow_timer(&mut self, f: u32) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        if flow.timer_at != now || flow.phase != Phase::Active {
            return;
        }
        flow.timer_at = u64::MAX;
        let Some(tx) = flow.tx.as_mut() else {
            return;
        };
        if let Some(p) = tx.on_timer(now) {
            self.invoke(f, &p);
        }
        self.try_send(f);
    }

    fn start_flow(&mut self, f: u32) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        if flow.phase != Phase::Waiting {
            return;
        }
        let mut cfg = self.sender_cfg.clone();
        if cfg.tsq_limit > 0 {
            let rate = self.ports[self.topo.uplink(flow.src) as usize].rate;
            let mtu = u64::from(cfg.mss + cfg.header);
            cfg.tsq_limit = crate::time::bytes_in(rate, cfg.tsq_limit).max(2 * mtu);
        }
        let mss = cfg.mss;
        let init_cwnd = cfg.init_cwnd;
        let tx = Sender::new(cfg, flow.size, now, flow.rate_cap);
        let total_segs = flow.size.map(|s| s.div_ceil(u64::from(mss)).max(1));
        flow.rx = Some(Receiver::new(self.ack_every, self.delayed_ack, total_segs));
        flow.tx = Some(tx);
        flow.phase = Phase::Active;
        let info = FlowInfo {
            init_cwnd: u32::try_from(init_cwnd).unwrap_or(u32::MAX),
            mss,
            src_ip: ip_of(flow.src),
            src_port: 10_000 + f % 50_000,
            dst_ip: ip_of(flow.dst),
            dst_port: 5001,
            cong_alg: flow.alg.clone(),
        };
        let stop = flow.stop;
        let tracked = flow.tracked;
        let mut ops = Ops {
            at: now + self.ipc_delay,
            to_agent: &mut self.to_agent,
            ev: &mut self.ev,
            upd: &mut self.upd,
            sent: &mut self.counters.messages_to_agent,
        };
        match self.engine.connection_start(&mut ops, info) {
            Ok(sid) => {
                let slot = sid as usize;
                if self.sid_flow.len() <= slot {
                    self.sid_flow.resize(slot + 1, NONE);
                }
                self.sid_flow[slot] = f;
                self.flows[f as usize].sid = Some(sid);
            }
            Err(_) => self.counters.invoke_errors += 1,
        }
        if let Some(t) = stop {
            self.ev.push(t.max(now), Event::FlowStop(f));
        }
        if tracked {
            self.tracked_active.push(f);
        }
        self.try_send(f);
    }

    /// The flow stops sending (all acknowledged, or its stop time).
    fn finish_flow(&mut self, f: u32) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        flow.phase = Phase::Finished;
        flow.stopped_at = Some(now);
        flow.timer_at = u64::MAX;
        if let Some(tx) = flow.tx.as_mut() {
            tx.stop();
            flow.final_stats = tx.stats.clone();
        }
        // Free the engine connection once every answer the agent sent to its reports is in:
        // socket ids are reused at once, and a late answer must not reach the next flow.
        self.ev
            .push(now + 2 * self.ipc_delay + 1, Event::Release(f));
    }

    fn release(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        flow.phase = Phase::Closed;
        flow.tx = None;
        let Some(sid) = flow.sid.take() else {
            return;
        };
        if let Some(s) = self.sid_flow.get_mut(sid as usize) {
            *s = NONE;
        }
        let mut ops = Ops {
            at: self.now + self.ipc_delay,
            to_agent: &mut self.to_agent,
            ev: &mut self.ev,
            upd: &mut self.upd,
            sent: &mut self.counters.messages_to_agent,
        };
        let _ = self.engine.connection_free(&mut ops, sid);
        self.upd.clear();
    }

    fn arrival(&mut self, g: u32) {
        let now = self.now;
        let end = self.end;
        let Some(gen_) = self.gens.get_mut(g as usize) else {
            return;
        };
        match gen_ {
            Gen::Poisson {
                rng,
                cdf,
                per_sec,
                sources,
                dests,
                alg,
                class,
                stop,
                max,
                made,
            } => {
                let src = sources[rng.gen_range(0..sources.len())];
                let others = dests.iter().filter(|&&d| d != src).count();
                let pick = (others > 0).then(|| {
                    let k = rng.gen_range(0..others);
                    *dests.iter().filter(|&&d| d != src).nth(k).unwrap_or(&src)
                });
                let size = cdf.sample(rng);
                *made += 1;
                let next = now + exp_interval_ns(rng, *per_sec);
                let more = next <= (*stop).min(end) && max.is_none_or(|m| *made < m);
                let (alg, class) = (alg.clone(), class.clone());
                if more {
                    self.ev.push(next, Event::Arrival(g));
                } else {
                    self.gens_active -= 1;
                }
                if let Some(dst) = pick {
                    self.new_flow(
                        src,
                        dst,
                        alg,
                        class,
                        format!("w{g}"),
                        Some(size),
                        now,
                        None,
                        None,
                        None,
                    );
                }
                self.check_done();
            }
            Gen::Incast {
                receiver,
                senders,
                size,
                alg,
                class,
                round,
                outstanding,
                ..
            } => {
                *round += 1;
                *outstanding = senders.len() as u32;
                let (receiver, size, r) = (*receiver, *size, *round);
                let senders = senders.clone();
                let (alg, class) = (alg.clone(), class.clone());
                for s in senders {
                    self.new_flow(
                        s,
                        receiver,
                        alg.clone(),
                        class.clone(),
                        format!("w{g}.r{r}"),
                        Some(size),
                        now,
                        None,
                        None,
                        Some(g),
                    );
                }
            }
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        let step = self.step;
        let flows = &mut self.flows;
        let series = &mut self.flow_series;
        self.tracked_active.retain(|&f| {
            let flow = &mut flows[f as usize];
            if flow.phase != Phase::Active {
                return false;
            }
            let (Some(tx), Some(rx)) = (flow.tx.as_ref(), flow.rx.as_ref()) else {
                return false;
            };
            let delta = rx.delivered - flow.sampled_delivered;
            flow.sampled_delivered = rx.delivered;
            series.push(FlowSample {
                time_ns: now,
                flow: f,
                delivered_bytes: rx.delivered,
                goodput_bps: (u128::from(delta) * 8 * 1_000_000_000 / u128::from(step)) as u64,
                cwnd_bytes: tx.cwnd(),
                rate_bytes_per_sec: tx.rate(),
                srtt_us: tx.srtt() / 1000,
                rtt_us: tx.latest_rtt() / 1000,
                inflight_bytes: tx.inflight(),
                retransmits: tx.stats.retransmits,
            });
            true
        });
        if self.queue_series_on {
            for &p in &self.sampled_ports {
                let q = &mut self.ports[p as usize].queue;
                let (tx, drops, marks) = std::mem::take(&mut q.interval);
                self.queue_series.push(QueueSample {
                    time_ns: now,
                    queue: p,
                    bytes: q.bytes(),
                    packets: q.len() as u64,
                    tx_bytes: tx,
                    drops,
                    marks,
                });
            }
        }
        if now + step <= self.end {
            self.ev.push(now + step, Event::Sample);
        }
    }

    /// Everything recorded; call once the run is over.
    pub fn output(&mut self) -> WorldOutput {
        let end = self.now;
        let mut flows = Vec::with_capacity(self.flows.len());
        for (i, f) in self.flows.iter().enumerate() {
            let stats = match &f.tx {
                Some(tx) => tx.stats.clone(),
                None => f.final_stats.clone(),
            };
            let path = self.topo.path(f.src, f.dst, f.hash);
            let back = self.topo.path(f.dst, f.src, f.hash);
            let base_rtt: u64 = path
                .iter()
                .chain(back.iter())
                .map(|&l| self.ports[l as usize].delay)
                .sum();
            let one_way: u64 = path.iter().map(|&l| self.ports[l as usize].delay).sum();
            let bottleneck = path
                .iter()
                .copied()
                .min_by_key(|&l| self.ports[l as usize].rate);
            let mss = u64::from(self.sender_cfg.mss);
            let header = u64::from(self.header);
            let ideal = f.size.zip(bottleneck).map(|(s, b)| {
                let segs = s.div_ceil(mss).max(1);
                let wire = s + segs * header;
                let last = s - (segs - 1) * mss + header;
                let others: u64 = path
                    .iter()
                    .filter(|&&l| l != b)
                    .map(|&l| tx_time_ns(last, self.ports[l as usize].rate))
                    .sum();
                one_way + tx_time_ns(wire, self.ports[b as usize].rate) + others
            });
            let (delivered, complete_at) =
                f.rx.as_ref()
                    .map_or((0, None), |rx| (rx.delivered, rx.complete_at));
            let end_ns = complete_at.or(f.stopped_at).unwrap_or(end);
            flows.push(FlowRecord {
                flow: i as u32,
                src: self.topo.names[f.src as usize].clone(),
                dst: self.topo.names[f.dst as usize].clone(),
                alg: f.alg.clone(),
                class: f.class.clone(),
                group: f.group.clone(),
                size: f.size,
                start_ns: f.start,
                end_ns,
                fct_ns: complete_at.map(|t| t - f.start),
                ideal_fct_ns: ideal,
                base_rtt_ns: base_rtt,
                bytes_delivered: delivered,
                bytes_sent: stats.bytes_sent,
                packets_sent: stats.packets_sent,
                retransmits: stats.retransmits,
                timeouts: stats.timeouts,
                completed: complete_at.is_some(),
            });
        }
        let queues = self
            .sampled_ports
            .iter()
            .map(|&p| {
                let port = &self.ports[p as usize];
                QueueRecord {
                    name: port.name.clone(),
                    rate: port.rate,
                    buffer: port.buffer_text.clone(),
                    counters: port.queue.counters.clone(),
                    qdelay: port.queue.qdelay.clone().unwrap_or_default(),
                }
            })
            .collect();
        WorldOutput {
            end_ns: end,
            counters: self.counters.clone(),
            flows,
            flow_series: std::mem::take(&mut self.flow_series),
            queues,
            queue_names: self.ports.iter().map(|p| p.name.clone()).collect(),
            queue_series: std::mem::take(&mut self.queue_series),
            finished: self.finished,
            owd: std::mem::take(&mut self.owd).into_iter().collect(),
        }
    }
}
