//! Scenarios: the serde description of one simulation (topology, links and queues, transport
//! settings, flows, workload generators, agent settings and outputs), its loading from YAML or
//! JSON, its validation, and the built-in examples.
//!
//! Quantities are written with units, as everywhere in the project: rates `100mbit`, `10gbit`
//! (a bare number is bytes/s), durations `20ms`, `5us`, `500ns` (a bare number is µs), sizes
//! `64KB`, `1MiB` (a bare number is bytes), buffers and thresholds `250KB`, `100pkts` or, on a
//! dumbbell's bottleneck, `1bdp` (one bandwidth-delay product of the base RTT).
//!
//! A minimal scenario:
//!
//! ```yaml
//! duration: 10s
//! topology:
//!   kind: dumbbell
//!   senders: 2
//!   bottleneck: {rate: 100mbit, delay: 8ms, buffer: 1bdp}
//!   access: {rate: 1gbit, delay: 1ms}
//! flows:
//!   - {src: s0, dst: r0, alg: reno}
//!   - {src: s1, dst: r1, alg: cubic, start: 2s}
//! ```

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::path::{Path, PathBuf};

pub use ccp_jitter::JitterModel;

use crate::error::SimError;
use crate::time::{NS_PER_MS, NS_PER_SEC, NS_PER_US};

// ---------------------------------------------------------------------------------------------
// Quantities
// ---------------------------------------------------------------------------------------------

/// A rate in bytes/s. Written `100mbit`, `10gbit`, `12500000Bps`; a bare number is bytes/s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rate(pub u64);

/// A duration in ns. Written `10ms`, `20us`, `500ns`, `2s`; a bare number is µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub u64);

/// A size in bytes. Written `64KB`, `1MiB`, `1448`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

/// A buffer size or a threshold, in bytes, packets or bandwidth-delay products.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    /// Bytes.
    Bytes(u64),
    /// Packets of any size (a buffer or ECN threshold counts packets; RED's thresholds, which
    /// average bytes, take a packet as MSS plus header bytes).
    Packets(u64),
    /// Bandwidth-delay products of the dumbbell's base RTT (dumbbell bottleneck only).
    Bdp(f64),
}

impl Rate {
    /// From bits per second.
    pub fn from_bits(bits_per_sec: u64) -> Rate {
        Rate(bits_per_sec / 8)
    }
    /// Bits per second.
    pub fn bits(self) -> u64 {
        self.0 * 8
    }
}

impl Dur {
    /// From milliseconds.
    pub fn ms(ms: u64) -> Dur {
        Dur(ms * NS_PER_MS)
    }
    /// From microseconds.
    pub fn us(us: u64) -> Dur {
        Dur(us * NS_PER_US)
    }
    /// From seconds.
    pub fn secs(s: u64) -> Dur {
        Dur(s * NS_PER_SEC)
    }
}

fn parse_rate(t: &str) -> Result<Rate, String> {
    ccp_units::parse_rate(t).map(Rate)
}

fn parse_dur(t: &str) -> Result<Dur, String> {
    let t = t.trim();
    if let Some(num) = t.strip_suffix("ns") {
        let v: f64 = num
            .trim()
            .parse()
            .map_err(|_| format!("{t:?} is not a duration"))?;
        if !v.is_finite() || v < 0.0 {
            return Err(format!("{t:?} must be a finite, non-negative duration"));
        }
        return Ok(Dur(v.round() as u64));
    }
    ccp_units::Unit::Micros
        .parse(t)
        .map(|us| Dur((us * NS_PER_US as f64).round() as u64))
}

fn parse_size(t: &str) -> Result<Size, String> {
    ccp_units::parse_bytes(t).map(Size)
}

fn parse_amount(t: &str) -> Result<Amount, String> {
    let t = t.trim();
    if let Some(num) = t.strip_suffix("bdp").or_else(|| t.strip_suffix("BDP")) {
        let v: f64 = num
            .trim()
            .parse()
            .map_err(|_| format!("{t:?} is not a number of BDPs"))?;
        if !v.is_finite() || v <= 0.0 {
            return Err(format!("{t:?} must be a positive number of BDPs"));
        }
        return Ok(Amount::Bdp(v));
    }
    for suffix in ["pkts", "packets", "pkt", "p"] {
        if let Some(num) = t.strip_suffix(suffix) {
            let v: u64 = num
                .trim()
                .parse()
                .map_err(|_| format!("{t:?} is not a whole number of packets"))?;
            return Ok(Amount::Packets(v));
        }
    }
    ccp_units::parse_bytes(t)
        .map(Amount::Bytes)
        .map_err(|e| format!("{e}; or a packet count such as 100pkts, or 1bdp"))
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = self.0 as f64 * 8.0;
        if self.0 == 0 {
            write!(f, "0bit")
        } else if bits >= 1e9 && (bits / 1e9).fract() == 0.0 {
            write!(f, "{}gbit", bits / 1e9)
        } else if bits >= 1e6 && (bits / 1e6 * 1000.0).fract() == 0.0 {
            write!(f, "{}mbit", bits / 1e6)
        } else if (bits / 1e3).fract() == 0.0 {
            write!(f, "{}kbit", bits / 1e3)
        } else {
            write!(f, "{}Bps", self.0)
        }
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns == 0 {
            write!(f, "0us")
        } else if ns.is_multiple_of(NS_PER_SEC) {
            write!(f, "{}s", ns / NS_PER_SEC)
        } else if ns.is_multiple_of(NS_PER_MS) {
            write!(f, "{}ms", ns / NS_PER_MS)
        } else if ns.is_multiple_of(NS_PER_US) {
            write!(f, "{}us", ns / NS_PER_US)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1_000_000 && b.is_multiple_of(1_000_000) {
            write!(f, "{}MB", b / 1_000_000)
        } else if b >= 1000 && b.is_multiple_of(1000) {
            write!(f, "{}KB", b / 1000)
        } else {
            write!(f, "{b}B")
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amount::Bytes(b) => write!(f, "{}", Size(*b)),
            Amount::Packets(p) => write!(f, "{p}pkts"),
            Amount::Bdp(x) => write!(f, "{x}bdp"),
        }
    }
}

macro_rules! quantity_serde {
    ($ty:ty, $parse:ident, $what:expr, $from_num:expr) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        $parse(v).map_err(E::custom)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        let f: fn(f64) -> Result<$ty, String> = $from_num;
                        f(v as f64).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        let f: fn(f64) -> Result<$ty, String> = $from_num;
                        f(v as f64).map_err(E::custom)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        let f: fn(f64) -> Result<$ty, String> = $from_num;
                        f(v).map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

fn non_negative(v: f64) -> Result<f64, String> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} must be a finite, non-negative number"))
    }
}

quantity_serde!(
    Rate,
    parse_rate,
    "a rate such as 100mbit or 10gbit (a bare number is bytes/s)",
    |v| non_negative(v).map(|v| Rate(v as u64))
);
quantity_serde!(
    Dur,
    parse_dur,
    "a duration such as 10ms, 20us or 500ns (a bare number is µs)",
    |v| non_negative(v).map(|v| Dur((v * NS_PER_US as f64).round() as u64))
);
quantity_serde!(
    Size,
    parse_size,
    "a size such as 64KB or 1MiB (a bare number is bytes)",
    |v| non_negative(v).map(|v| Size(v as u64))
);
quantity_serde!(
    Amount,
    parse_amount,
    "a size such as 250KB, a packet count such as 100pkts, or 1bdp",
    |v| non_negative(v).map(|v| Amount::Bytes(v as u64))
);

// ---------------------------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------------------------

/// One simulation.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A name for people and output files.
    #[serde(default)]
    pub name: String,
    /// Seed of every random stream (loss, jitter, RED, workloads); the CLI's `--seed` overrides.
    #[serde(default = "one")]
    pub seed: u64,
    /// Simulated time to run.
    pub duration: Dur,
    /// End early once every flow with a size has completed and no generator has arrivals left.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stop_when_done: bool,
    /// The agent hosting the algorithms.
    #[serde(default)]
    pub agent: AgentSpec,
    /// The simulated transport of every host.
    #[serde(default)]
    pub transport: TransportSpec,
    /// Hosts, switches and links.
    pub topology: TopologySpec,
    /// Flows given one by one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowSpec>,
    /// Flow generators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadSpec>,
    /// What to record.
    #[serde(default)]
    pub output: OutputSpec,
}

fn one() -> u64 {
    1
}
fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero_dur(d: &Dur) -> bool {
    d.0 == 0
}
fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}
fn is_empty_str(s: &str) -> bool {
    s.is_empty()
}

/// The agent: default algorithm, parameters, IPC delay.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Algorithm of flows that name none (a name the registry lacks is refused before the run).
    #[serde(default = "default_alg")]
    pub default_alg: String,
    /// Agent-wide algorithm parameters, `ALG.KEY=VALUE` (as `ccp-agent --param`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<String>,
    /// One-way delay of every IPC message between the datapath and the agent.
    #[serde(default = "default_ipc_delay")]
    pub ipc_delay: Dur,
    /// The agent's pricing policy (classes of service of priced flows, bills): a policy file
    /// (relative to the scenario) or the policy inline, as `ccp-agent --pricing` reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<serde_yaml::Value>,
    /// Control commands the agent runs at given times, through the same command path as
    /// `ccp-agent ctl`: `set-params FLOW KEY=VALUE ...` (change a live flow's parameters, e.g.
    /// `{at: 10s, command: "set-params 10.0.0.1:10000 min=20mbit"}`; FLOW is `SRC_IP:SRC_PORT`
    /// or the flow's id in creation order), `set-algorithm FLOW NAME[:KEY=VALUE,...]` (hand a
    /// live flow to another algorithm, e.g. `{at: 20s, command: "set-algorithm 1 vegas"}`; it
    /// continues from the flow's window or rate and smallest RTT), `flows`, and with `pricing`
    /// the pricing commands
    /// (`{at: 2s, command: "set-class 10.0.0.1:10000 ds --weight 2"}`, `bill`). Each runs at the
    /// first report of any flow at or after `at`; the flow it changes takes the change at its
    /// next report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<AgentCommand>,
    /// JCCE, the aggregation service `vivace-distributed` flows publish to: its core in virtual
    /// time. Absent: the defaults of [`JcceSpec`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jcce: Option<JcceSpec>,
}

/// The simulated JCCE service (one per simulation, shared by every host's agent).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JcceSpec {
    /// One-way latency between an agent and JCCE, each way. Default 1 ms (the paper does not
    /// give one; a service inside the JointCloud's region).
    #[serde(default = "default_jcce_latency")]
    pub latency: Dur,
    /// Minimum group size k below which JCCE withholds the mean (count). Default 1, the paper's.
    #[serde(default = "one_u32")]
    pub min_group: u32,
}

fn default_jcce_latency() -> Dur {
    Dur::us(1000)
}

impl Default for JcceSpec {
    fn default() -> Self {
        JcceSpec {
            latency: default_jcce_latency(),
            min_group: 1,
        }
    }
}

/// A control command the agent runs at a given time.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentCommand {
    /// When (simulated time).
    pub at: Dur,
    /// The command line.
    pub command: String,
}

fn default_alg() -> String {
    "cubic".into()
}
fn default_ipc_delay() -> Dur {
    Dur::us(20)
}

impl Default for AgentSpec {
    fn default() -> Self {
        AgentSpec {
            default_alg: default_alg(),
            params: vec![],
            ipc_delay: default_ipc_delay(),
            pricing: None,
            commands: vec![],
            jcce: None,
        }
    }
}

/// The simulated transport (shared by every host).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransportSpec {
    /// Maximum segment size (payload bytes per packet).
    #[serde(default = "default_mss")]
    pub mss: u32,
    /// Header bytes added to every packet on the wire (an ACK is just a header).
    #[serde(default = "default_header")]
    pub header: u32,
    /// Initial congestion window, packets (the datapath's own until the agent decides).
    #[serde(default = "default_init_cwnd")]
    pub init_cwnd: u32,
    /// The receiver acknowledges every n-th packet (1 to 64; 2 is delayed ACKs as TCP's;
    /// out-of-order, CE-state changes and the last packet are acknowledged at once).
    #[serde(default = "one_u32")]
    pub ack_every: u32,
    /// Longest a receiver holds back an ACK when `ack_every` > 1.
    #[serde(default = "default_delayed_ack")]
    pub delayed_ack: Dur,
    /// Lower bound of the retransmission timeout.
    #[serde(default = "default_min_rto")]
    pub min_rto: Dur,
    /// Retransmission timeout before the first RTT sample.
    #[serde(default = "default_initial_rto")]
    pub initial_rto: Dur,
    /// Upper bound of the backed-off retransmission timeout.
    #[serde(default = "default_max_rto")]
    pub max_rto: Dur,
    /// The datapath invokes the engine at least this often while a flow gets no ACKs.
    #[serde(default = "default_tick")]
    pub tick: Dur,
    /// Packets are ECN-capable (ECT) and may be CE-marked instead of dropped by RED.
    #[serde(default = "yes")]
    pub ecn: bool,
    /// Limit of a flow's bytes in its host's NIC queue, as time at the host link's rate
    /// (Linux's TCP small queues); at least two packets. `0us` turns it off.
    #[serde(default = "default_tsq")]
    pub tsq: Dur,
    /// RACK packet threshold.
    #[serde(default = "default_reorder")]
    pub reorder_threshold: u32,
    /// RACK time threshold, in units of max(smoothed RTT, latest RTT).
    #[serde(default = "default_time_threshold")]
    pub time_threshold: f64,
}

fn default_mss() -> u32 {
    1448
}
fn default_header() -> u32 {
    52
}
fn default_init_cwnd() -> u32 {
    10
}
fn one_u32() -> u32 {
    1
}
fn default_delayed_ack() -> Dur {
    Dur::ms(1)
}
fn default_min_rto() -> Dur {
    Dur::ms(200)
}
fn default_initial_rto() -> Dur {
    Dur::secs(1)
}
fn default_max_rto() -> Dur {
    Dur::secs(60)
}
fn default_tick() -> Dur {
    Dur::ms(10)
}
fn yes() -> bool {
    true
}
fn default_tsq() -> Dur {
    Dur::ms(1)
}
fn default_reorder() -> u32 {
    3
}
fn default_time_threshold() -> f64 {
    9.0 / 8.0
}

impl Default for TransportSpec {
    fn default() -> Self {
        TransportSpec {
            mss: default_mss(),
            header: default_header(),
            init_cwnd: default_init_cwnd(),
            ack_every: 1,
            delayed_ack: default_delayed_ack(),
            min_rto: default_min_rto(),
            initial_rto: default_initial_rto(),
            max_rto: default_max_rto(),
            tick: default_tick(),
            ecn: true,
            tsq: default_tsq(),
            reorder_threshold: default_reorder(),
            time_threshold: default_time_threshold(),
        }
    }
}

/// One direction of a link: its transmitter, output queue and wire.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Line rate (required unless `trace` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Propagation delay.
    #[serde(default)]
    pub delay: Dur,
    /// Output queue capacity (drop-tail); none means unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<Amount>,
    /// ECN: CE-mark ECT packets that arrive while the queue, with the arriving packet, holds
    /// more than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_k: Option<Amount>,
    /// Random early detection (instead of plain drop-tail below the capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red: Option<RedSpec>,
    /// Probability that a packet is lost on the wire.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub loss: f64,
    /// Extra propagation delay within ±jitter, order preserved.
    #[serde(default, skip_serializing_if = "is_zero_dur")]
    pub jitter: Dur,
    /// How the jitter varies: `uniform` (drawn per packet; the default when absent) or `smooth`
    /// (in time, the same for every packet at a given moment; the emulator's and recipes'
    /// default). `ccp_jitter` explains the difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_model: Option<JitterModel>,
    /// ACK aggregation: ACKs (and anything behind them) are released in bursts at multiples of
    /// this period.
    #[serde(default, skip_serializing_if = "is_zero_dur")]
    pub ack_aggregation: Dur,
    /// A mahimahi trace: one 1504-byte delivery opportunity per line (timestamp in ms), looping
    /// at the last timestamp. Relative paths are relative to the scenario file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
    /// Rate changes over time (the first entry may be at 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<RateStep>,
    /// The reverse direction: the fields given here replace those of the forward direction.
    /// Without it the reverse direction is the forward one without random loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<Box<LinkOverride>>,
}

/// Fields of the reverse direction that differ from the forward direction.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_k: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red: Option<RedSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_model: Option<JitterModel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_aggregation: Option<Dur>,
    /// A trace of its own (`none` is not accepted; give `rate` to replace a forward trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Vec<RateStep>>,
}

impl LinkSpec {
    /// A plain link of `rate` and `delay`.
    pub fn new(rate: Rate, delay: Dur) -> LinkSpec {
        LinkSpec {
            rate: Some(rate),
            delay,
            ..LinkSpec::default()
        }
    }

    /// With a buffer.
    pub fn with_buffer(mut self, buffer: Amount) -> LinkSpec {
        self.buffer = Some(buffer);
        self
    }

    /// The spec of the reverse direction.
    pub fn reversed(&self) -> LinkSpec {
        let mut r = LinkSpec {
            loss: 0.0,
            reverse: None,
            ..self.clone()
        };
        if let Some(o) = &self.reverse {
            if let Some(v) = o.rate {
                r.rate = Some(v);
                // A rate given for the reverse replaces a forward trace.
                if o.trace.is_none() {
                    r.trace = None;
                }
            }
            if let Some(v) = o.delay {
                r.delay = v;
            }
            if let Some(v) = o.buffer {
                r.buffer = Some(v);
            }
            if let Some(v) = o.ecn_k {
                r.ecn_k = Some(v);
            }
            if let Some(v) = &o.red {
                r.red = Some(v.clone());
            }
            if let Some(v) = o.loss {
                r.loss = v;
            }
            if let Some(v) = o.jitter {
                r.jitter = v;
            }
            if let Some(v) = o.jitter_model {
                r.jitter_model = Some(v);
            }
            if let Some(v) = o.ack_aggregation {
                r.ack_aggregation = v;
            }
            if let Some(v) = &o.trace {
                r.trace = Some(v.clone());
            }
            if let Some(v) = &o.schedule {
                r.schedule = v.clone();
            }
        }
        r
    }
}

/// One step of a rate schedule.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateStep {
    /// When the rate changes.
    pub at: Dur,
    /// The new rate.
    pub rate: Rate,
}

/// Random early detection.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedSpec {
    /// Average queue below which nothing is dropped or marked.
    pub min: Amount,
    /// Average queue at or above which everything is dropped (ECT packets too).
    pub max: Amount,
    /// Drop/mark probability at `max`.
    #[serde(default = "default_max_p")]
    pub max_p: f64,
    /// Weight of the average queue's moving average.
    #[serde(default = "default_red_weight")]
    pub weight: f64,
    /// Mark ECT packets with CE instead of dropping them (below `max`).
    #[serde(default = "yes")]
    pub ecn: bool,
}

fn default_max_p() -> f64 {
    0.1
}
fn default_red_weight() -> f64 {
    0.002
}

/// Hosts, switches and links.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TopologySpec {
    /// Senders `s0..` behind switch `left`, receivers `r0..` behind switch `right`, one
    /// bottleneck `left->right` (and its reverse).
    Dumbbell(DumbbellSpec),
    /// Switches `sw0..sw<hops>` in a row joined by `hops` links; hosts `h<switch>.<k>` on each.
    ParkingLot(ParkingLotSpec),
    /// Spines `spine0..`, leaves `leaf0..`, hosts `h0..` (host k on leaf k / hosts_per_leaf);
    /// every leaf joined to every spine; ECMP over spines by flow hash.
    LeafSpine(LeafSpineSpec),
    /// Named hosts and switches joined by the links given.
    Custom(CustomSpec),
}

/// A dumbbell.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumbbellSpec {
    /// Number of senders (`s0..`).
    pub senders: u32,
    /// Number of receivers (`r0..`); defaults to the number of senders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receivers: Option<u32>,
    /// The bottleneck `left->right`.
    pub bottleneck: LinkSpec,
    /// Every host's access link (host->switch; the reverse is switch->host).
    pub access: LinkSpec,
    /// Per-sender access delays overriding `access.delay` (for RTT-unfairness experiments).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sender_delays: Vec<Dur>,
}

/// A parking lot.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParkingLotSpec {
    /// Links in the row (switches: hops + 1).
    pub hops: u32,
    /// Hosts on every switch.
    #[serde(default = "two")]
    pub hosts_per_switch: u32,
    /// Every link of the row.
    pub link: LinkSpec,
    /// Every host's access link.
    pub access: LinkSpec,
}

fn two() -> u32 {
    2
}

/// A two-tier leaf-spine (Clos) fabric.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafSpineSpec {
    pub spines: u32,
    pub leaves: u32,
    pub hosts_per_leaf: u32,
    /// Host <-> leaf links.
    pub host_link: LinkSpec,
    /// Leaf <-> spine links.
    pub fabric_link: LinkSpec,
}

/// Explicit nodes and links.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomSpec {
    pub hosts: Vec<String>,
    #[serde(default)]
    pub switches: Vec<String>,
    pub links: Vec<CustomLink>,
}

/// A link between two named nodes (both directions; `spec` is the direction a->b).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomLink {
    pub a: String,
    pub b: String,
    pub spec: LinkSpec,
}

/// One flow, or `count` identical ones.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// Algorithm asked for in the Create message (`reno`, `cubic:beta=0.8`); empty: the agent's
    /// default.
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub alg: String,
    /// Bytes to send; none means a long-lived flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// When the flow starts.
    #[serde(default)]
    pub start: Dur,
    /// When a flow still sending stops (default: the end of the scenario).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Dur>,
    /// A label carried into the outputs.
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub class: String,
    /// Application-limited: the application produces data at most this fast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_cap: Option<Rate>,
    /// Number of identical flows.
    #[serde(default = "one_u32")]
    pub count: u32,
    /// Start of copy i is `start + i * spacing`.
    #[serde(default, skip_serializing_if = "is_zero_dur")]
    pub spacing: Dur,
}

impl FlowSpec {
    /// A long-lived flow from `src` to `dst` with algorithm `alg`.
    pub fn bulk(src: &str, dst: &str, alg: &str) -> FlowSpec {
        FlowSpec {
            src: src.into(),
            dst: dst.into(),
            alg: alg.into(),
            size: None,
            start: Dur(0),
            stop: None,
            class: String::new(),
            rate_cap: None,
            count: 1,
            spacing: Dur(0),
        }
    }
}

/// A flow generator.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadSpec {
    /// Poisson arrivals with sizes drawn from an empirical CDF.
    Poisson(PoissonSpec),
    /// N senders answer one receiver at the same instant, round after round.
    Incast(IncastSpec),
}

/// Poisson arrivals.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonSpec {
    /// Offered load as a fraction of `capacity`.
    pub load: f64,
    /// Flow-size CDF file (`size_bytes,cumulative_probability` lines, piecewise linear).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdf: Option<PathBuf>,
    /// The CDF inline, as `[size_bytes, probability]` pairs (instead of `cdf`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdf_points: Vec<(f64, f64)>,
    /// Hosts that send (default: every host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Hosts that receive (default: every host); a flow never goes to its own source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<String>,
    /// What `load` is a fraction of (default: the sum of the sources' access rates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Rate>,
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub alg: String,
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub class: String,
    #[serde(default)]
    pub start: Dur,
    /// No arrivals after this (default: the end of the scenario).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Dur>,
    /// At most this many flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_flows: Option<u64>,
}

/// Incast rounds.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncastSpec {
    /// The aggregator.
    pub receiver: String,
    /// The responders (default: every other host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub senders: Vec<String>,
    /// Bytes each responder sends per round.
    pub size: Size,
    /// Number of rounds; a round starts `gap` after every flow of the previous one completed.
    #[serde(default = "one_u32")]
    pub rounds: u32,
    #[serde(default)]
    pub gap: Dur,
    #[serde(default)]
    pub start: Dur,
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub alg: String,
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub class: String,
}

/// Which flows get time series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesFlows {
    /// Flows of the `flows` list (not generated ones).
    #[default]
    Listed,
    /// Every flow.
    All,
    /// None.
    None,
}

/// What to record.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Sampling step of the time series.
    #[serde(default = "default_step")]
    pub step: Dur,
    /// Flows with time series.
    #[serde(default)]
    pub flow_series: SeriesFlows,
    /// Record queue occupancy series.
    #[serde(default = "yes")]
    pub queue_series: bool,
    /// Restrict queue series and histograms to these queues (`from->to` names); empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<String>,
    /// Leave the packets that leave a queue before this time out of its delay histogram (and
    /// the `qdelay_*` columns of queues.csv): a warm-up. Default 0: the whole run.
    #[serde(default, skip_serializing_if = "is_zero_dur")]
    pub histograms_from: Dur,
}

fn default_step() -> Dur {
    Dur::ms(10)
}

impl Default for OutputSpec {
    fn default() -> Self {
        OutputSpec {
            step: default_step(),
            flow_series: SeriesFlows::Listed,
            queue_series: true,
            queues: vec![],
            histograms_from: Dur(0),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

impl Scenario {
    /// Parse YAML (JSON is YAML too); `file` names the source in messages and anchors relative
    /// paths.
    pub fn parse(file: &Path, text: &str) -> Result<Scenario, SimError> {
        let mut s: Scenario = serde_yaml::from_str(text).map_err(|e| SimError::Scenario {
            file: file.to_path_buf(),
            message: e.to_string(),
        })?;
        let base = file.parent().unwrap_or(Path::new(""));
        s.resolve_paths(base);
        s.validate().map_err(|message| SimError::Scenario {
            file: file.to_path_buf(),
            message,
        })?;
        Ok(s)
    }

    /// Load a YAML or JSON scenario file.
    pub fn load(path: &Path) -> Result<Scenario, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        Scenario::parse(path, &text)
    }

    /// The scenario as YAML.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).unwrap_or_default()
    }

    fn resolve_paths(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() && !base.as_os_str().is_empty() {
                *p = base.join(&*p);
            }
        };
        if let Some(serde_yaml::Value::String(policy)) = &mut self.agent.pricing {
            let mut p = PathBuf::from(&*policy);
            fix(&mut p);
            *policy = p.to_string_lossy().into_owned();
        }
        let mut links: Vec<&mut LinkSpec> = vec![];
        match &mut self.topology {
            TopologySpec::Dumbbell(d) => {
                links.push(&mut d.bottleneck);
                links.push(&mut d.access);
            }
            TopologySpec::ParkingLot(p) => {
                links.push(&mut p.link);
                links.push(&mut p.access);
            }
            TopologySpec::LeafSpine(l) => {
                links.push(&mut l.host_link);
                links.push(&mut l.fabric_link);
            }
            TopologySpec::Custom(c) => links.extend(c.links.iter_mut().map(|l| &mut l.spec)),
        }
        for l in links {
            if let Some(t) = &mut l.trace {
                fix(t);
            }
            if let Some(r) = &mut l.reverse
                && let Some(t) = &mut r.trace
            {
                fix(t);
            }
        }
        for w in &mut self.workloads {
            if let WorkloadSpec::Poisson(p) = w
                && let Some(c) = &mut p.cdf
            {
                fix(c);
            }
        }
    }

    /// Check what serde cannot: ranges and consistency. Host names are checked when the
    /// topology is built.
    pub fn validate(&self) -> Result<(), String> {
        let mut errs: Vec<String> = vec![];
        if self.duration.0 == 0 {
            errs.push("duration: must be positive".into());
        }
        let t = &self.transport;
        if t.mss == 0 || t.mss > 65_000 {
            errs.push(format!("transport.mss: {} is out of range 1..65000", t.mss));
        }
        if !(1..=64).contains(&t.ack_every) {
            errs.push(format!(
                "transport.ack_every: {} is out of range 1..64",
                t.ack_every
            ));
        }
        if t.init_cwnd == 0 {
            errs.push("transport.init_cwnd: must be at least 1 packet".into());
        }
        if t.tick.0 == 0 {
            errs.push("transport.tick: must be positive".into());
        }
        if t.reorder_threshold == 0 {
            errs.push("transport.reorder_threshold: must be at least 1".into());
        }
        if !(t.time_threshold.is_finite() && t.time_threshold >= 1.0) {
            errs.push("transport.time_threshold: must be at least 1".into());
        }
        if self.output.step.0 == 0 {
            errs.push("output.step: must be positive".into());
        }
        let check_link = |path: &str, l: &LinkSpec, errs: &mut Vec<String>| {
            if l.rate.is_none() && l.trace.is_none() {
                errs.push(format!("{path}.rate: a link needs a rate or a trace"));
            }
            if l.rate.is_some_and(|r| r.0 == 0) {
                errs.push(format!("{path}.rate: must be positive"));
            }
            if !(0.0..1.0).contains(&l.loss) {
                errs.push(format!(
                    "{path}.loss: {} is not a probability below 1",
                    l.loss
                ));
            }
            if let Some(red) = &l.red {
                if !(0.0..=1.0).contains(&red.max_p) {
                    errs.push(format!(
                        "{path}.red.max_p: {} is not a probability",
                        red.max_p
                    ));
                }
                if !(red.weight > 0.0 && red.weight <= 1.0) {
                    errs.push(format!("{path}.red.weight: must be in (0, 1]"));
                }
            }
            for (i, s) in l.schedule.iter().enumerate() {
                if s.rate.0 == 0 {
                    errs.push(format!("{path}.schedule[{i}].rate: must be positive"));
                }
                if i > 0 && s.at < l.schedule[i - 1].at {
                    errs.push(format!(
                        "{path}.schedule[{i}].at: steps must be in time order"
                    ));
                }
            }
            if let Some(r) = &l.reverse
                && r.loss.is_some_and(|p| !(0.0..1.0).contains(&p))
            {
                errs.push(format!("{path}.reverse.loss: not a probability below 1"));
            }
        };
        match &self.topology {
            TopologySpec::Dumbbell(d) => {
                if d.senders == 0 {
                    errs.push("topology.senders: at least one sender".into());
                }
                if d.receivers == Some(0) {
                    errs.push("topology.receivers: at least one receiver".into());
                }
                if !d.sender_delays.is_empty() && d.sender_delays.len() != d.senders as usize {
                    errs.push(format!(
                        "topology.sender_delays: {} delays for {} senders",
                        d.sender_delays.len(),
                        d.senders
                    ));
                }
                check_link("topology.bottleneck", &d.bottleneck, &mut errs);
                check_link("topology.access", &d.access, &mut errs);
            }
            TopologySpec::ParkingLot(p) => {
                if p.hops == 0 || p.hosts_per_switch == 0 {
                    errs.push("topology: hops and hosts_per_switch must be positive".into());
                }
                check_link("topology.link", &p.link, &mut errs);
                check_link("topology.access", &p.access, &mut errs);
            }
            TopologySpec::LeafSpine(l) => {
                if l.spines == 0 || l.leaves == 0 || l.hosts_per_leaf == 0 {
                    errs.push(
                        "topology: spines, leaves and hosts_per_leaf must be positive".into(),
                    );
                }
                check_link("topology.host_link", &l.host_link, &mut errs);
                check_link("topology.fabric_link", &l.fabric_link, &mut errs);
            }
            TopologySpec::Custom(c) => {
                if c.hosts.is_empty() {
                    errs.push("topology.hosts: at least one host".into());
                }
                for (i, l) in c.links.iter().enumerate() {
                    check_link(&format!("topology.links[{i}].spec"), &l.spec, &mut errs);
                }
            }
        }
        for (i, f) in self.flows.iter().enumerate() {
            if f.alg.len() >= ccp_engine::wire::MAX_CONG_ALG_SIZE {
                errs.push(format!(
                    "flows[{i}].alg: {} bytes; libccp carries at most {}",
                    f.alg.len(),
                    ccp_engine::wire::MAX_CONG_ALG_SIZE - 1
                ));
            }
            if f.size == Some(Size(0)) {
                errs.push(format!("flows[{i}].size: must be positive"));
            }
            if f.count == 0 {
                errs.push(format!("flows[{i}].count: must be at least 1"));
            }
            if f.rate_cap.is_some_and(|r| r.0 == 0) {
                errs.push(format!("flows[{i}].rate_cap: must be positive"));
            }
            if f.src == f.dst {
                errs.push(format!("flows[{i}]: src and dst are both {}", f.src));
            }
        }
        for (i, w) in self.workloads.iter().enumerate() {
            match w {
                WorkloadSpec::Poisson(p) => {
                    if !(p.load > 0.0 && p.load.is_finite()) {
                        errs.push(format!("workloads[{i}].load: must be positive"));
                    }
                    if p.cdf.is_none() == p.cdf_points.is_empty() {
                        errs.push(format!(
                            "workloads[{i}]: give exactly one of cdf (a file) and cdf_points"
                        ));
                    }
                    if p.alg.len() >= ccp_engine::wire::MAX_CONG_ALG_SIZE {
                        errs.push(format!("workloads[{i}].alg: too long for libccp"));
                    }
                }
                WorkloadSpec::Incast(c) => {
                    if c.size.0 == 0 {
                        errs.push(format!("workloads[{i}].size: must be positive"));
                    }
                    if c.alg.len() >= ccp_engine::wire::MAX_CONG_ALG_SIZE {
                        errs.push(format!("workloads[{i}].alg: too long for libccp"));
                    }
                }
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("\n"))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Built-in examples
// ---------------------------------------------------------------------------------------------

/// Names of the built-in example scenarios.
pub const EXAMPLES: &[&str] = &[
    "dumbbell",
    "parking-lot",
    "leaf-spine",
    "incast",
    "cellular",
];

/// Where the shared data (traces, workload CDFs) lives: `../shared/data` next to the project
/// root, found from this crate's source directory (or, if that is gone, relative to the current
/// directory, i.e. for a run from the project root).
pub fn shared_data_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    here.canonicalize()
        .unwrap_or_else(|_| PathBuf::from("../shared/data"))
}

/// A built-in example scenario.
pub fn example(name: &str) -> Option<Scenario> {
    let mut s = Scenario {
        name: name.to_string(),
        seed: 1,
        duration: Dur::secs(10),
        stop_when_done: false,
        agent: AgentSpec::default(),
        transport: TransportSpec::default(),
        topology: TopologySpec::Custom(CustomSpec {
            hosts: vec![],
            switches: vec![],
            links: vec![],
        }),
        flows: vec![],
        workloads: vec![],
        output: OutputSpec::default(),
    };
    match name {
        "dumbbell" => {
            s.topology = TopologySpec::Dumbbell(DumbbellSpec {
                senders: 2,
                receivers: None,
                bottleneck: LinkSpec::new(Rate::from_bits(100_000_000), Dur::ms(8))
                    .with_buffer(Amount::Bdp(1.0)),
                access: LinkSpec::new(Rate::from_bits(1_000_000_000), Dur::ms(1)),
                sender_delays: vec![],
            });
            s.flows = vec![
                FlowSpec::bulk("s0", "r0", "reno"),
                FlowSpec {
                    start: Dur::secs(1),
                    ..FlowSpec::bulk("s1", "r1", "cubic")
                },
            ];
        }
        "parking-lot" => {
            s.topology = TopologySpec::ParkingLot(ParkingLotSpec {
                hops: 3,
                hosts_per_switch: 2,
                link: LinkSpec::new(Rate::from_bits(100_000_000), Dur::ms(5))
                    .with_buffer(Amount::Packets(200)),
                access: LinkSpec::new(Rate::from_bits(1_000_000_000), Dur::us(100)),
            });
            s.flows = vec![FlowSpec::bulk("h0.0", "h3.0", "reno")];
            for i in 0..3 {
                s.flows.push(FlowSpec::bulk(
                    &format!("h{i}.1"),
                    &format!("h{}.1", i + 1),
                    "cubic",
                ));
            }
        }
        "leaf-spine" => {
            let host = LinkSpec {
                ecn_k: Some(Amount::Packets(65)),
                ..LinkSpec::new(Rate::from_bits(10_000_000_000), Dur::us(1))
                    .with_buffer(Amount::Bytes(1_000_000))
            };
            let fabric = LinkSpec {
                ecn_k: Some(Amount::Packets(260)),
                ..LinkSpec::new(Rate::from_bits(40_000_000_000), Dur::us(1))
                    .with_buffer(Amount::Bytes(4_000_000))
            };
            s.duration = Dur::ms(50);
            s.transport.min_rto = Dur::ms(1);
            s.transport.initial_rto = Dur::ms(1);
            s.transport.tick = Dur::ms(1);
            s.output.step = Dur::us(500);
            s.output.flow_series = SeriesFlows::None;
            s.topology = TopologySpec::LeafSpine(LeafSpineSpec {
                spines: 3,
                leaves: 8,
                hosts_per_leaf: 12,
                host_link: host,
                fabric_link: fabric,
            });
            s.workloads = vec![WorkloadSpec::Poisson(PoissonSpec {
                load: 0.5,
                cdf: Some(shared_data_dir().join("workloads/websearch.csv")),
                cdf_points: vec![],
                sources: vec![],
                destinations: vec![],
                capacity: None,
                alg: "reno".into(),
                class: "websearch".into(),
                start: Dur(0),
                stop: None,
                max_flows: None,
            })];
        }
        "incast" => {
            s.duration = Dur::ms(200);
            s.stop_when_done = true;
            s.transport.min_rto = Dur::ms(1);
            s.transport.initial_rto = Dur::ms(1);
            s.transport.tick = Dur::ms(1);
            s.output.step = Dur::us(100);
            s.output.flow_series = SeriesFlows::All;
            let link = LinkSpec {
                ecn_k: Some(Amount::Packets(65)),
                ..LinkSpec::new(Rate::from_bits(10_000_000_000), Dur::us(2))
                    .with_buffer(Amount::Bytes(200_000))
            };
            s.topology = TopologySpec::LeafSpine(LeafSpineSpec {
                spines: 1,
                leaves: 1,
                hosts_per_leaf: 17,
                host_link: link.clone(),
                fabric_link: link,
            });
            s.workloads = vec![WorkloadSpec::Incast(IncastSpec {
                receiver: "h0".into(),
                senders: vec![],
                size: Size(64_000),
                rounds: 10,
                gap: Dur::us(100),
                start: Dur(0),
                alg: "reno".into(),
                class: "incast".into(),
            })];
        }
        "cellular" => {
            let mut bottleneck = LinkSpec {
                rate: None,
                delay: Dur::ms(20),
                buffer: Some(Amount::Packets(200)),
                trace: Some(shared_data_dir().join("mahimahi/TMobile-LTE-short.down")),
                ..LinkSpec::default()
            };
            bottleneck.reverse = Some(Box::new(LinkOverride {
                trace: Some(shared_data_dir().join("mahimahi/TMobile-LTE-short.up")),
                ..LinkOverride::default()
            }));
            s.duration = Dur::secs(20);
            s.topology = TopologySpec::Dumbbell(DumbbellSpec {
                senders: 1,
                receivers: None,
                bottleneck,
                access: LinkSpec::new(Rate::from_bits(1_000_000_000), Dur::us(100)),
                sender_delays: vec![],
            });
            s.flows = vec![FlowSpec::bulk("s0", "r0", "cubic")];
        }
        _ => return None,
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_and_print() {
        assert_eq!(parse_rate("100mbit").unwrap(), Rate(12_500_000));
        assert_eq!(Rate(12_500_000).to_string(), "100mbit");
        assert_eq!(Rate::from_bits(40_000_000_000).to_string(), "40gbit");
        assert_eq!(parse_dur("500ns").unwrap(), Dur(500));
        assert_eq!(parse_dur("20ms").unwrap(), Dur::ms(20));
        assert_eq!(parse_dur("7").unwrap(), Dur::us(7));
        assert_eq!(Dur(1500).to_string(), "1500ns");
        assert_eq!(Dur::ms(20).to_string(), "20ms");
        assert_eq!(parse_amount("100pkts").unwrap(), Amount::Packets(100));
        assert_eq!(parse_amount("250KB").unwrap(), Amount::Bytes(250_000));
        assert_eq!(parse_amount("1.5bdp").unwrap(), Amount::Bdp(1.5));
        assert!(parse_amount("lots").is_err());
    }

    #[test]
    fn examples_round_trip_through_yaml() {
        for name in EXAMPLES {
            let s = example(name).unwrap();
            let y = s.to_yaml();
            let back = Scenario::parse(Path::new("example.yaml"), &y)
                .unwrap_or_else(|e| panic!("{name}: {e}\n{y}"));
            assert_eq!(back.to_yaml(), y, "{name}");
        }
    }

    #[test]
    fn unknown_fields_and_bad_values_are_named() {
        let y = "duration: 1s\ntopology: {kind: dumbbell, senders: 1, bottleneck: {rate: 1mbit}, access: {rate: 1gbit, dleay: 1ms}}\n";
        let e = Scenario::parse(Path::new("x.yaml"), y)
            .unwrap_err()
            .to_string();
        assert!(e.contains("dleay") && e.contains("x.yaml"), "{e}");
        let y = "duration: 1s\ntopology: {kind: dumbbell, senders: 1, bottleneck: {rate: fast}, access: {rate: 1gbit}}\n";
        let e = Scenario::parse(Path::new("x.yaml"), y)
            .unwrap_err()
            .to_string();
        assert!(e.contains("fast"), "{e}");
        let y = "duration: 1s\ntopology: {kind: dumbbell, senders: 1, bottleneck: {rate: 1mbit, loss: 2}, access: {rate: 1gbit}}\n";
        let e = Scenario::parse(Path::new("x.yaml"), y)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bottleneck.loss"), "{e}");
    }

    #[test]
    fn reverse_overrides_merge() {
        let mut l = LinkSpec::new(Rate(100), Dur::ms(1));
        l.loss = 0.1;
        l.reverse = Some(Box::new(LinkOverride {
            ack_aggregation: Some(Dur::ms(2)),
            ..LinkOverride::default()
        }));
        let r = l.reversed();
        assert_eq!(
            (r.loss, r.ack_aggregation, r.delay),
            (0.0, Dur::ms(2), Dur::ms(1))
        );
    }
}
