//! The typed recipe of one sweep point: backend, link, flows, workloads, runs and seeds,
//! metrics and plots, and its reading from the positioned tree with every error collected (file,
//! line, column, field, and the form the field expects).
//!
//! The link speaks mahimahi's vocabulary: a one-way `delay` (mm-delay), per-direction `rate` or
//! `trace` (mm-link), `loss` (mm-loss) and `queue` with `queue_args` (`droptail`, `drophead`,
//! `codel`, `pie`, `infinite`, arguments `packets=`, `bytes=`, `target=`, `interval=`,
//! `qdelay_ref=`, `max_burst=`). Data flows go from the senders to the receiver on the
//! *uplink*; ACKs come back on the *downlink*.

use crate::tree::{Node, Value, check_keys, join};
use ccp_algorithms::config::ConfigError;
use ccp_algorithms::params::did_you_mean;
use ccp_algorithms::registry;
use ccp_jitter::JitterModel;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where runs execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Backend {
    /// The deterministic simulator (`ccp-sim`), virtual time: runs go in parallel.
    Sim,
    /// `ccp-udp` on loopback with the real `ccp-agent` (and `ccp-udp relay` for delay and loss),
    /// wall-clock time: runs go one at a time.
    Udp,
    /// The mahimahi-compatible emulator (`ccp-emu`): `ccp-udp` across an emulated link in
    /// network namespaces, wall-clock time, one run at a time; needs root.
    Emu,
    /// The emulator as for `Emu`, with `ccp-quic` (QUIC on s2n-quic, the agent as its
    /// congestion controller) carrying the flows; needs root.
    Quic,
    /// Linux TCP through ccp-kernel.
    Kernel,
}

impl Backend {
    /// Every backend name.
    pub const NAMES: &'static [&'static str] = &["sim", "udp", "emu", "quic", "kernel"];

    /// The recipe name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Udp => "udp",
            Backend::Emu => "emu",
            Backend::Quic => "quic",
            Backend::Kernel => "kernel",
        }
    }

    /// From a recipe name.
    pub fn from_name(s: &str) -> Option<Backend> {
        match s {
            "sim" => Some(Backend::Sim),
            "udp" => Some(Backend::Udp),
            "emu" => Some(Backend::Emu),
            "quic" => Some(Backend::Quic),
            "kernel" => Some(Backend::Kernel),
            _ => None,
        }
    }

    /// Why this backend cannot run in this build, if it cannot.
    pub fn unavailable(self) -> Option<&'static str> {
        match self {
            Backend::Sim | Backend::Udp => None,
            Backend::Emu | Backend::Quic => None,
            Backend::Kernel => Some(
                "backend kernel is not available in this build: it needs the ccp-kernel module on the host, which ccp-exp does not drive yet; use backend sim or udp",
            ),
        }
    }

    /// Runs of this backend share the machine's cores (virtual time) rather than the wall clock.
    pub fn parallel(self) -> bool {
        self == Backend::Sim
    }

    /// One line about the backend for `ccp-exp list`.
    pub fn summary(self) -> &'static str {
        match self {
            Backend::Sim => "ccp-sim: deterministic simulator, virtual time, runs in parallel",
            Backend::Udp => {
                "ccp-udp on loopback with the real ccp-agent; delay and loss by ccp-udp relay; runs one at a time"
            }
            Backend::Emu => {
                "ccp-emu testbed: ccp-udp flows and the real ccp-agent across a mahimahi-compatible emulated link (namespaces + TUN; needs root); runs one at a time"
            }
            Backend::Quic => {
                "ccp-emu testbed as for emu, the flows over QUIC (ccp-quic, s2n-quic) under the real ccp-agent (needs root); runs one at a time"
            }
            Backend::Kernel => "Linux TCP through ccp-kernel",
        }
    }
}

/// A queue capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    Packets(u64),
    Bytes(u64),
    /// Bandwidth-delay products of the base RTT (simulator only; an extension of mahimahi's
    /// arguments).
    Bdp(f64),
}

/// A queue discipline, in mahimahi's vocabulary (plus `red`, which the simulator has).
#[derive(Clone, Debug, PartialEq)]
pub enum Queue {
    Infinite,
    DropTail(Limit),
    DropHead(Limit),
    Codel {
        limit: Limit,
        target_us: u64,
        interval_us: u64,
    },
    Pie {
        limit: Limit,
        qdelay_ref_us: u64,
        max_burst_us: u64,
    },
    Red {
        limit: Option<Limit>,
        min: Limit,
        max: Limit,
        max_p: f64,
        ecn: bool,
    },
}

impl Queue {
    /// Every queue type.
    pub const TYPES: &'static [&'static str] =
        &["infinite", "droptail", "drophead", "codel", "pie", "red"];

    /// Its type name.
    pub fn kind(&self) -> &'static str {
        match self {
            Queue::Infinite => "infinite",
            Queue::DropTail(_) => "droptail",
            Queue::DropHead(_) => "drophead",
            Queue::Codel { .. } => "codel",
            Queue::Pie { .. } => "pie",
            Queue::Red { .. } => "red",
        }
    }
}

/// One direction of the link.
#[derive(Clone, Debug, PartialEq)]
pub struct Direction {
    /// Constant rate, bytes/s.
    pub rate: Option<u64>,
    /// A mahimahi trace file.
    pub trace: Option<PathBuf>,
    /// Random loss probability.
    pub loss: f64,
    pub queue: Queue,
    /// Mark ECN CE on packets that find more than this in the queue (DCTCP's step threshold K).
    pub ecn_threshold: Option<Limit>,
    /// Changes of `rate` during the run, in time order (`link.schedule`, for a direction that
    /// runs at `link.rate`): the rate holds from the start to the first step, each step's rate
    /// from its time on.
    pub schedule: Vec<RateStep>,
}

/// One step of a rate schedule: from `at_us` on, the direction runs at `rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateStep {
    /// When the rate changes, µs from the start of the run.
    pub at_us: u64,
    /// The new rate, bytes/s.
    pub rate: u64,
}

impl Direction {
    /// The piecewise-constant rate as `(from µs, bytes/s)` segments, the first at 0 (empty
    /// without a rate).
    pub fn segments(&self) -> Vec<(u64, u64)> {
        let Some(rate) = self.rate else {
            return vec![];
        };
        std::iter::once((0, rate))
            .chain(self.schedule.iter().map(|s| (s.at_us, s.rate)))
            .collect()
    }

    /// The time-weighted mean rate from `from_us` to `to_us`, bytes/s (the rate at `from_us`
    /// when the span is empty; `None` without a rate).
    pub fn mean_rate(&self, from_us: u64, to_us: u64) -> Option<f64> {
        let segs = self.segments();
        let at = |t: u64| segs.iter().take_while(|(s, _)| *s <= t).last().map(|x| x.1);
        if to_us <= from_us {
            return at(from_us).map(|r| r as f64);
        }
        let mut sum = 0.0;
        for (i, &(start, rate)) in segs.iter().enumerate() {
            let end = segs.get(i + 1).map_or(u64::MAX, |n| n.0);
            let (lo, hi) = (start.max(from_us), end.min(to_us));
            if hi > lo {
                sum += rate as f64 * (hi - lo) as f64;
            }
        }
        Some(sum / (to_us - from_us) as f64)
    }
}

/// The bottleneck link.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// One-way propagation delay of each direction, µs.
    pub delay_us: u64,
    /// Extra one-way delay of each direction that varies between 0 and this, µs, never
    /// reordering packets.
    pub jitter_us: u64,
    /// How it varies (`link.jitter_model`, default smooth), the same process on every backend.
    pub jitter_model: JitterModel,
    /// Senders to receiver (data).
    pub uplink: Direction,
    /// Receiver to senders (ACKs).
    pub downlink: Direction,
}

/// One flow entry of a recipe (`count` copies).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub algorithm: String,
    /// Parameters as written (`key`, `value text`), checked against the registry.
    pub params: Vec<(String, String)>,
    pub count: u32,
    pub start_us: u64,
    /// Start of copy i is `start + i * spacing`.
    pub spacing_us: u64,
    pub size: Option<u64>,
    pub duration_us: Option<u64>,
    pub class: String,
    /// Application-limited: at most this rate, bytes/s.
    pub rate_cap: Option<u64>,
    /// The flow should complete within this time (sized flows).
    pub deadline_us: Option<u64>,
    /// The flow's minimum rate requirement, bytes/s (satisfaction ratio = goodput / this).
    pub min_rate: Option<u64>,
    /// `reverse: true`: the flow sends from the receiver side to a sender side, so its data
    /// crosses the downlink (`link.downlink`) and its ACKs the uplink (default false).
    pub reverse: bool,
}

impl FlowSpec {
    /// What the flow asks the agent for: `cubic` or `cubic:beta=0.8,init-cwnd=20`.
    pub fn requested(&self) -> String {
        requested(&self.algorithm, &self.params)
    }
}

/// The kernel congestion control of a flow written `kernel:NAME` or `kernel:NAME:group=G` (a
/// Linux TCP connection with `TCP_CONGESTION` = NAME, backends emu and quic), or `None` for an
/// agent algorithm.
pub fn kernel_cc(algorithm: &str) -> Option<&str> {
    let rest = algorithm.strip_prefix(KERNEL_PREFIX)?;
    Some(rest.split_once(':').map_or(rest, |(cc, _)| cc))
}

/// The JCCE group a kernel flow's receiver publishes its throughput to
/// (`kernel:NAME:group=G`, so Vivace-Distributed flows of group G count it in `T_avg`), if any.
pub fn kernel_group(flow: &FlowSpec) -> Option<u64> {
    kernel_cc(&flow.algorithm)?;
    flow.params
        .iter()
        .find(|(k, _)| k == "group")
        .and_then(|(_, v)| v.parse().ok())
}

/// The JCCE service of Vivace-Distributed flows (`jcce:`) on the sim, emu and quic backends.
#[derive(Clone, Debug, PartialEq)]
pub struct JcceOptions {
    /// One-way delay between every host and the JCCE service, each way, µs (`jcce.delay`): the
    /// simulator's JCCE latency (ccp-sim's `agent.jcce.latency`), the emulator's service-host
    /// side path. Default 1 ms: the paper gives no JCCE latency; a service inside the
    /// JointCloud's region.
    pub delay_us: u64,
}

impl Default for JcceOptions {
    fn default() -> Self {
        JcceOptions { delay_us: 1_000 }
    }
}

/// A control command the agent runs at a given time (`commands`): what `ccp-agent ctl
/// set-params FLOW KEY=VALUE ...` or `ccp-agent ctl set-algorithm FLOW NAME[:KEY=VALUE,...]`
/// does on a live agent, with the flow named by its index in the recipe's expanded flow list
/// (0-based, every copy of `count` counted, in recipe order), since a recipe does not know the
/// flows' addresses. Each backend turns the index into the flow's address when the command runs.
///
/// A switched flow keeps its recipe algorithm as its label in the per-flow metrics (the label
/// names the flow as the recipe wrote it); the run's notes and, on udp and emu,
/// `raw/commands.log` record the switch.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentCommand {
    /// When, µs from the start of the run (the clock of the flows' `start`).
    pub at_us: u64,
    /// The flow: its index in [`expand_flows`]'s list.
    pub flow: usize,
    /// The new parameters, `(key, value text)` as written (checked against the registry and the
    /// flow's algorithm's live changes; for `set-algorithm`, the new algorithm's).
    pub settings: Vec<(String, String)>,
    /// `set-algorithm`: the algorithm the flow is handed to (its parameters in `settings`, over
    /// its defaults). `None`: `set-params`.
    pub algorithm: Option<String>,
}

impl AgentCommand {
    /// The agent's command line with the flow named `target` (`SRC_IP:SRC_PORT` or an id):
    /// `set-params TARGET min=20mbit max=30mbit`, `set-algorithm TARGET vegas:alpha=3`.
    pub fn line(&self, target: &str) -> String {
        if let Some(a) = &self.algorithm {
            return format!("set-algorithm {target} {}", requested(a, &self.settings));
        }
        let mut s = format!("set-params {target}");
        for (k, v) in &self.settings {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }

    /// The command's name: `set-params` or `set-algorithm`.
    pub fn verb(&self) -> &'static str {
        if self.algorithm.is_some() {
            "set-algorithm"
        } else {
            "set-params"
        }
    }

    /// The command as a recipe writes it: `set-params flow=4 min=20mbit`.
    pub fn written(&self) -> String {
        self.line(&format!("flow={}", self.flow))
    }
}

/// The parameters flow instance `k` of `r` runs with after the commands before `upto` (an index
/// into `r.commands`): its algorithm's defaults, its recipe params, then every earlier
/// `set-params` on it; after a `set-algorithm`, the new algorithm's defaults and the parameters
/// it named, then later `set-params`. The set names its algorithm
/// ([`ccp_algorithms::params::ParamSet::algorithm`]). `None` for a kernel TCP flow or an index
/// out of range.
pub fn flow_params(r: &Recipe, k: usize, upto: usize) -> Option<ccp_algorithms::params::ParamSet> {
    params_after(&r.flows, &r.commands[..upto.min(r.commands.len())], k)
}

/// The parameters flow instance `k` of `flows` runs with after `commands`.
fn params_after(
    flows: &[FlowSpec],
    commands: &[AgentCommand],
    k: usize,
) -> Option<ccp_algorithms::params::ParamSet> {
    let (i, _, _) = *expand_flows(flows).get(k)?;
    let f = &flows[i];
    let spec = registry::find(&f.algorithm)?;
    let mut p = spec
        .params_from(f.params.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .ok()?;
    let mut spec = spec;
    for c in commands.iter().filter(|c| c.flow == k) {
        if let Some(a) = &c.algorithm {
            spec = registry::find(a)?;
            p = spec.defaults();
        }
        for (key, v) in &c.settings {
            p.set(spec.params, key, v).ok()?;
        }
    }
    Some(p)
}

/// How a recipe names a kernel TCP flow's algorithm: `kernel:cubic`.
pub const KERNEL_PREFIX: &str = "kernel:";

/// `alg` or `alg:k=v,k=v`.
pub fn requested(alg: &str, params: &[(String, String)]) -> String {
    if params.is_empty() {
        alg.to_string()
    } else {
        let kv: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{alg}:{}", kv.join(","))
    }
}

/// A flow generator (simulator).
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Offered load as a fraction of the uplink's capacity.
    pub load: f64,
    /// Flow-size CDF file.
    pub cdf: PathBuf,
    pub algorithm: String,
    pub params: Vec<(String, String)>,
    pub class: String,
    /// Sending hosts of this generator.
    pub senders: u32,
    pub start_us: u64,
    pub stop_us: Option<u64>,
    pub max_flows: Option<u64>,
    pub deadline_us: Option<u64>,
}

/// How flows are grouped in plots and per-group metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    Algorithm,
    Class,
}

impl GroupBy {
    /// The recipe word.
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Algorithm => "algorithm",
            GroupBy::Class => "class",
        }
    }
    /// The metric qualifier key.
    pub fn key(self) -> &'static str {
        match self {
            GroupBy::Algorithm => "alg",
            GroupBy::Class => "class",
        }
    }
}

/// A throughput ratio between two groups.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    pub by: GroupBy,
    pub numerator: String,
    pub denominator: String,
}

/// What to compute beyond the defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsSpec {
    /// Time excluded from goodput, utilisation and the delay percentiles at the start of a
    /// run, µs.
    pub warmup_us: u64,
    /// Upper edges of the FCT size buckets, bytes (a last bucket takes the rest).
    pub fct_buckets: Vec<u64>,
    /// Convergence band around the fair share (0.25: ±25 %).
    pub band: f64,
    /// Moving-average window of throughput for convergence, µs.
    pub window_us: u64,
    pub ratios: Vec<Ratio>,
    /// Metrics in the report's tables (default: a standard set).
    pub table: Vec<String>,
}

/// The series of a time-series plot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesKind {
    Throughput,
    Cwnd,
    Rtt,
}

/// Which delay a CDF shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayKind {
    /// RTT samples of every flow.
    Rtt,
    /// Per-packet one-way delay at the bottleneck (simulator).
    Owd,
}

/// A plot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlotSpec {
    /// One per sweep point (first `points` points), of run `run`.
    Timeseries {
        y: SeriesKind,
        run: u32,
        points: usize,
    },
    DelayCdf {
        delay: DelayKind,
        by: GroupBy,
        points: usize,
    },
    /// Throughput against 95th-percentile delay, delay axis reversed (Pantheon).
    Scatter { by: GroupBy },
    /// FCT by size bucket.
    Fct { by: GroupBy },
    /// Metrics against a sweep axis, with 95 % confidence intervals.
    Metric {
        metrics: Vec<String>,
        x: String,
        series: Option<String>,
        log_x: bool,
    },
}

/// Simulator settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SimOptions {
    /// Sampling step of the time series, µs.
    pub step_us: u64,
    /// One-way IPC delay between datapath and agent, µs.
    pub ipc_delay_us: u64,
    /// Rate of every host's access link (default: max(1 gbit, 4 × the uplink)).
    pub access_rate: Option<u64>,
    /// Overrides of ccp-sim's transport settings (checked against its format).
    pub transport: Option<serde_yaml::Value>,
    /// Keep ccp-sim's own output files under `raw/` of every run.
    pub keep_raw: bool,
}

/// udp backend settings.
#[derive(Clone, Debug, PartialEq)]
pub struct UdpOptions {
    pub mss: u32,
    /// Trace sampling interval, µs.
    pub trace_interval_us: u64,
    /// libccp implementation of the sender: `libccp` or `engine`.
    pub datapath: String,
}

/// One sweep point of one part, fully resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    pub backend: Backend,
    pub duration_us: u64,
    /// Seeds of the runs (one run per seed).
    pub seeds: Vec<u64>,
    pub link: Link,
    pub flows: Vec<FlowSpec>,
    pub workloads: Vec<Workload>,
    pub metrics: MetricsSpec,
    pub plots: Vec<PlotSpec>,
    pub sim: SimOptions,
    pub udp: UdpOptions,
    pub jcce: JcceOptions,
    /// Control commands run at given times (`commands`), in time order.
    pub commands: Vec<AgentCommand>,
}

/// Keys of a part (or of a recipe without parts).
pub const PART_KEYS: &[&str] = &[
    "backend",
    "duration",
    "runs",
    "seed",
    "seeds",
    "link",
    "flows",
    "workloads",
    "sweep",
    "metrics",
    "plots",
    "sim",
    "udp",
    "jcce",
    "commands",
];

/// Top-level keys of a `ccp-sim` scenario (`ccp_sim::Scenario`) that no recipe has.
pub const SIM_SCENARIO_KEYS: &[&str] =
    &["agent", "transport", "topology", "stop_when_done", "output"];

/// How the hint of [`sim_scenario_hint`] begins, for callers that report it apart from the
/// errors it follows.
pub const SIM_SCENARIO_HINT: &str = "this looks like a ccp-sim scenario";

/// For a file given as a recipe that is a `ccp-sim` scenario (a top-level key of
/// [`SIM_SCENARIO_KEYS`], and neither `backend` nor `link`): one line saying so and how to run
/// it, placed at the start of `file`.
pub fn sim_scenario_hint(file: &Path, root: &Node) -> Option<ConfigError> {
    let Value::Map(entries) = &root.value else {
        return None;
    };
    let keys: Vec<&str> = entries.iter().filter_map(|(k, _)| k.as_scalar()).collect();
    let sim: Vec<&str> = SIM_SCENARIO_KEYS
        .iter()
        .copied()
        .filter(|k| keys.contains(k))
        .collect();
    if sim.is_empty() || keys.contains(&"backend") || keys.contains(&"link") {
        return None;
    }
    Some(crate::tree::Pos::file_start(file).error(
        "",
        format!(
            "{SIM_SCENARIO_HINT} (top-level {}), not a ccp-exp recipe; check it with `ccp-sim check {f}`, run it with `ccp-sim run {f} --out DIR`",
            sim.join(", "),
            f = file.display()
        ),
    ))
}

/// Run-level metrics (qualify with `:alg=NAME`, `:class=NAME`, `:dir=reverse` or, for FCT,
/// `:size=BUCKET`). Unqualified and `:alg=`/`:class=` metrics are over the forward flows;
/// `:dir=reverse` over the flows with `reverse: true`.
pub const METRICS: &[&str] = &[
    "goodput_mbps",
    "utilization",
    "loss_rate",
    "rtt_p50_ms",
    "rtt_p95_ms",
    "rtt_p99_ms",
    "qdelay_p50_ms",
    "qdelay_p95_ms",
    "qdelay_p99_ms",
    "owd_p50_ms",
    "owd_p95_ms",
    "owd_p99_ms",
    "fwd_qdelay_p50_ms",
    "fwd_qdelay_p95_ms",
    "fwd_qdelay_p99_ms",
    "jain",
    "fct_mean_ms",
    "fct_p99_ms",
    "deadline_meet_rate",
    "satisfaction_mean",
    "satisfaction_min",
    "convergence_s",
    "converged_fraction",
    "ratio",
    "flows",
];

/// Metrics in the report's tables unless `metrics.table` says otherwise.
pub const DEFAULT_TABLE: &[&str] = &[
    "goodput_mbps",
    "utilization",
    "loss_rate",
    "rtt_p50_ms",
    "rtt_p95_ms",
    "owd_p95_ms",
    "jain",
    "fct_mean_ms",
    "fct_p99_ms",
    "deadline_meet_rate",
    "satisfaction_mean",
    "convergence_s",
    "ratio",
];

pub(crate) const DURATION: &str = "a duration with a unit, e.g. 10ms, 500us or 2s";
pub(crate) const RATE: &str = "a rate with a unit, e.g. 100mbit, 1gbit or 500kbit";
pub(crate) const SIZE: &str = "a size, e.g. 1448, 64KB, 10MB or 1MiB";
pub(crate) const PROB: &str = "a probability from 0 up to (not including) 1, e.g. 0.01";

/// Collects errors while reading a tree.
pub struct Reader<'e> {
    pub errs: &'e mut Vec<ConfigError>,
}

impl Reader<'_> {
    /// Record an error. Every call adds one, even a repeat (each sweep point reads the same
    /// nodes again): readers tell whether a part of the tree failed by the count growing, and
    /// [`crate::experiment::load`] drops the repeats before it reports.
    pub fn err(&mut self, n: &Node, field: &str, msg: impl Into<String>) {
        self.errs.push(n.pos.error(field, msg));
    }

    /// A mapping with only `allowed` keys (errors otherwise); false if not a mapping.
    pub fn map(&mut self, n: &Node, field: &str, allowed: &[&str]) -> bool {
        if !matches!(n.value, Value::Map(_)) {
            self.err(
                n,
                field,
                format!(
                    "expected a mapping with keys from: {}, got {}",
                    allowed.join(", "),
                    n.kind()
                ),
            );
            return false;
        }
        for e in check_keys(n, field, allowed) {
            if !self.errs.contains(&e) {
                self.errs.push(e);
            }
        }
        true
    }

    /// A list.
    pub fn list<'n>(&mut self, n: &'n Node, field: &str, what: &str) -> Option<&'n [Node]> {
        match &n.value {
            Value::Seq(items) => Some(items),
            _ => {
                self.err(
                    n,
                    field,
                    format!("expected a list of {what}, got {}", n.kind()),
                );
                None
            }
        }
    }

    /// A scalar's text.
    pub fn scalar<'n>(&mut self, n: &'n Node, field: &str, expected: &str) -> Option<&'n str> {
        match &n.value {
            Value::Scalar(s) => Some(s.as_str()),
            _ => {
                self.err(n, field, format!("expected {expected}, got {}", n.kind()));
                None
            }
        }
    }

    fn bad(&mut self, n: &Node, field: &str, expected: &str, text: &str) {
        self.err(n, field, format!("expected {expected}, got {text:?}"));
    }

    /// A scalar read by `parse`, which gets the text and returns `None` when it does not fit;
    /// then the error says what was `expected`.
    fn parsed<T>(
        &mut self,
        n: &Node,
        field: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        let t = self.scalar(n, field, expected)?;
        let v = parse(t);
        if v.is_none() {
            self.bad(n, field, expected, t);
        }
        v
    }

    /// A duration, µs (a unit is required unless the value is 0).
    pub fn duration(&mut self, n: &Node, field: &str) -> Option<u64> {
        self.parsed(n, field, DURATION, |t| {
            ccp_units::parse_duration_with_unit(t)
                .ok()
                .map(|d| d.as_micros() as u64)
        })
    }

    /// A rate, bytes/s (a unit is required).
    pub fn rate(&mut self, n: &Node, field: &str) -> Option<u64> {
        self.parsed(n, field, RATE, |t| {
            ccp_units::parse_rate_with_unit(t).ok().filter(|&v| v >= 1)
        })
    }

    /// A size, bytes (positive).
    pub fn size(&mut self, n: &Node, field: &str) -> Option<u64> {
        self.parsed(n, field, SIZE, |t| {
            ccp_units::parse_bytes(t).ok().filter(|&v| v > 0)
        })
    }

    /// A probability in [0, 1).
    pub fn prob(&mut self, n: &Node, field: &str) -> Option<f64> {
        self.parsed(n, field, PROB, |t| {
            t.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| (0.0..1.0).contains(v))
        })
    }

    /// A number in `lo..=hi`.
    pub fn number(&mut self, n: &Node, field: &str, lo: f64, hi: f64) -> Option<f64> {
        let expected = format!("a number from {lo} to {hi}");
        self.parsed(n, field, &expected, |t| {
            t.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| *v >= lo && *v <= hi)
        })
    }

    /// A whole number in `lo..=hi`.
    pub fn count(&mut self, n: &Node, field: &str, lo: u64, hi: u64) -> Option<u64> {
        let expected = format!("a whole number from {lo} to {hi}");
        self.parsed(n, field, &expected, |t| {
            t.trim()
                .parse::<u64>()
                .ok()
                .filter(|v| (lo..=hi).contains(v))
        })
    }

    /// `true` or `false`.
    pub fn boolean(&mut self, n: &Node, field: &str) -> Option<bool> {
        self.parsed(n, field, "true or false", |t| match t.trim() {
            "true" | "yes" | "on" => Some(true),
            "false" | "no" | "off" => Some(false),
            _ => None,
        })
    }

    /// A label: letters, digits, `_`, `-`, `.`.
    pub fn label(&mut self, n: &Node, field: &str) -> Option<String> {
        const FORM: &str = "a label of letters, digits, '_', '-' and '.'";
        self.parsed(n, field, FORM, |t| {
            (!t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .then(|| t.to_string())
        })
    }

    /// A group name: a [`Reader::label`], or a kernel flow's algorithm `kernel:NAME`.
    pub fn group_label(&mut self, n: &Node, field: &str) -> Option<String> {
        const FORM: &str = "a label of letters, digits, '_', '-' and '.' (or kernel:NAME)";
        self.parsed(n, field, FORM, |t| {
            let rest = t.strip_prefix(KERNEL_PREFIX).unwrap_or(t);
            (!rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .then(|| t.to_string())
        })
    }

    /// One of `choices`.
    pub fn choice<'c>(&mut self, n: &Node, field: &str, choices: &[&'c str]) -> Option<&'c str> {
        let expected = format!("one of: {}", choices.join(", "));
        let t = self.scalar(n, field, &expected)?;
        if let Some(c) = choices.iter().find(|c| **c == t) {
            return Some(c);
        }
        let hint = did_you_mean(t, choices.iter().copied())
            .map(|s| format!(" (did you mean {s:?}?)"))
            .unwrap_or_default();
        self.err(n, field, format!("expected {expected}, got {t:?}{hint}"));
        None
    }

    /// A required key of mapping `n`.
    pub fn required<'n>(
        &mut self,
        n: &'n Node,
        field: &str,
        key: &str,
        expected: &str,
    ) -> Option<&'n Node> {
        let v = n.get(key);
        if v.is_none() {
            self.err(
                n,
                &join(field, key),
                format!("missing; expected {expected}"),
            );
        }
        v
    }
}

/// Where data files named in recipes are looked up after the recipe's own directory: the
/// directories in `CCP_DATA_PATH` (colon-separated), `experiments/traces`,
/// `experiments/workloads`, and the shared data directory (`../shared/data` beside the project).
pub fn data_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("CCP_DATA_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    dirs.push(here.join("traces"));
    dirs.push(here.join("workloads"));
    dirs.push(ccp_sim::scenario::shared_data_dir());
    dirs
}

/// Resolve a data file named in `file`'s recipe.
pub fn find_data(file: &Path, name: &str) -> Result<PathBuf, String> {
    let p = Path::new(name);
    if p.is_absolute() {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("no such file {name:?}"))
        };
    }
    let base = file.parent().unwrap_or(Path::new(""));
    let mut candidates = vec![base.join(p)];
    candidates.extend(data_dirs().into_iter().map(|d| d.join(p)));
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
    }
    Err(format!(
        "no such file {name:?} beside the recipe or in the data directories ($CCP_DATA_PATH, experiments/traces, experiments/workloads, ../shared/data)"
    ))
}

/// Default recipe values.
impl Default for MetricsSpec {
    fn default() -> Self {
        MetricsSpec {
            warmup_us: 0,
            fct_buckets: vec![100_000, 1_000_000, 10_000_000],
            band: 0.25,
            window_us: 1_000_000,
            ratios: vec![],
            table: DEFAULT_TABLE.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Read one point's recipe from `tree` (a part's tree after the sweep's values are set).
/// `axes` names the sweep axes (for plots). Errors go to `errs`; `None` if any was found.
pub fn read_recipe(tree: &Node, axes: &[String], errs: &mut Vec<ConfigError>) -> Option<Recipe> {
    let before = errs.len();
    let mut r = Reader { errs };
    let mut allowed: Vec<&str> = PART_KEYS.to_vec();
    allowed.retain(|k| *k != "sweep");
    r.map(tree, "", &allowed);

    let backend = match tree.get("backend") {
        None => Some(Backend::Sim),
        Some(n) => r
            .choice(n, "backend", Backend::NAMES)
            .and_then(Backend::from_name),
    };
    if let (Some(b), Some(n)) = (backend, tree.get("backend"))
        && let Some(why) = b.unavailable()
    {
        r.err(n, "backend", why);
    }
    let duration_us = match tree.get("duration") {
        None => Some(10_000_000),
        Some(n) => match r.duration(n, "duration") {
            Some(0) => {
                r.err(
                    n,
                    "duration",
                    format!("expected {DURATION} above 0, got \"0\""),
                );
                None
            }
            d => d,
        },
    };

    let seeds = read_seeds(&mut r, tree);
    let link = read_link(&mut r, tree, backend, duration_us);
    let flows = read_flows(&mut r, tree, duration_us, backend);
    let workloads = read_workloads(&mut r, tree, backend);
    if let (Some(f), Some(w)) = (&flows, &workloads)
        && f.is_empty()
        && w.is_empty()
    {
        r.err(
            tree,
            "flows",
            "missing; expected a list of flows (or workloads) to run",
        );
    }
    let metrics = read_metrics(&mut r, tree.get("metrics"));
    let plots = read_plots(&mut r, tree.get("plots"), axes);
    let sim = read_sim(&mut r, tree.get("sim"));
    let udp = read_udp(&mut r, tree.get("udp"));
    let jcce = read_jcce(&mut r, tree.get("jcce"));
    let commands = match (tree.get("commands"), &flows) {
        (None, _) => Some(vec![]),
        (Some(n), Some(f)) => read_commands(&mut r, n, f, duration_us, backend),
        // The flows have errors of their own; commands name them, so wait for a good list.
        (Some(_), None) => None,
    };

    if backend == Some(Backend::Udp) {
        check_udp(&mut r, tree);
    }
    if backend == Some(Backend::Sim)
        && let (Some(f), Some(d)) = (&flows, duration_us)
    {
        for (i, fl) in f.iter().enumerate() {
            if fl.start_us >= d {
                let node = tree
                    .get("flows")
                    .and_then(|l| l.items())
                    .and_then(|l| l.get(i))
                    .and_then(|f| f.get("start"));
                if let Some(n) = node {
                    r.err(
                        n,
                        &format!("flows[{i}].start"),
                        "the flow starts after the run's duration",
                    );
                }
            }
        }
    }
    if r.errs.len() > before {
        return None;
    }
    Some(Recipe {
        backend: backend?,
        duration_us: duration_us?,
        seeds: seeds?,
        link: link?,
        flows: flows?,
        workloads: workloads?,
        metrics: metrics?,
        plots: plots?,
        sim: sim?,
        udp: udp?,
        jcce: jcce?,
        commands: commands?,
    })
}

fn read_seeds(r: &mut Reader, tree: &Node) -> Option<Vec<u64>> {
    match (tree.get("seeds"), tree.get("seed")) {
        (Some(list), Some(seed)) => {
            let _ = list;
            r.err(
                tree.key_node("seed").unwrap_or(seed),
                "seed",
                "give either seed (with runs) or a list of seeds, not both",
            );
            None
        }
        (Some(list), None) => {
            let items = r.list(list, "seeds", "seeds (whole numbers)")?;
            if let Some(runs) = tree.get("runs") {
                r.err(
                    tree.key_node("runs").unwrap_or(runs),
                    "runs",
                    "give either runs (with seed) or a list of seeds, not both",
                );
            }
            if items.is_empty() {
                r.err(list, "seeds", "expected at least one seed");
                return None;
            }
            let mut seeds = vec![];
            for (i, s) in items.iter().enumerate() {
                seeds.push(r.count(s, &format!("seeds[{i}]"), 0, u64::MAX)?);
            }
            Some(seeds)
        }
        (None, seed) => {
            let runs = match tree.get("runs") {
                Some(n) => r.count(n, "runs", 1, 10_000)?,
                None => 1,
            };
            let first = match seed {
                Some(n) => r.count(n, "seed", 0, u64::MAX / 2)?,
                None => 1,
            };
            Some((0..runs).map(|i| first + i).collect())
        }
    }
}

const LINK_KEYS: &[&str] = &[
    "delay",
    "jitter",
    "jitter_model",
    "rate",
    "loss",
    "queue",
    "queue_args",
    "ecn_threshold",
    "schedule",
    "uplink",
    "downlink",
];
const DIR_KEYS: &[&str] = &[
    "rate",
    "trace",
    "loss",
    "queue",
    "queue_args",
    "ecn_threshold",
];

fn no_link() -> Link {
    let open = Direction {
        rate: None,
        trace: None,
        loss: 0.0,
        queue: Queue::Infinite,
        ecn_threshold: None,
        schedule: vec![],
    };
    Link {
        delay_us: 0,
        jitter_us: 0,
        jitter_model: JitterModel::default(),
        uplink: open.clone(),
        downlink: open,
    }
}

/// An ECN marking threshold: a packet count such as 65 or a size such as 30KB.
fn ecn_threshold(r: &mut Reader, n: &Node, field: &str) -> Option<Limit> {
    let t = r.scalar(n, field, "a threshold such as 65 (packets) or 30KB")?;
    match t.trim().parse::<u64>() {
        Ok(p) => Some(Limit::Packets(p)),
        Err(_) => r.size(n, field).map(Limit::Bytes),
    }
}

/// A time in µs as a recipe would write it (`60s`, `250ms`, `500us`).
fn show_us(us: u64) -> String {
    if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// `link.schedule`: a list of `{at: DURATION, rate: RATE}` steps, `at` above 0, strictly
/// increasing and before the end of the run (`duration_us`, when known).
fn read_schedule(r: &mut Reader, n: &Node, duration_us: Option<u64>) -> Option<Vec<RateStep>> {
    const FIELD: &str = "link.schedule";
    const WHAT: &str = "steps {at: DURATION, rate: RATE}, e.g. [{at: 60s, rate: 95mbit}]";
    let items = r.list(n, FIELD, WHAT)?;
    let before = r.errs.len();
    let mut out: Vec<RateStep> = vec![];
    for (i, item) in items.iter().enumerate() {
        let field = format!("{FIELD}[{i}]");
        if !r.map(item, &field, &["at", "rate"]) {
            continue;
        }
        let at = r
            .required(item, &field, "at", DURATION)
            .and_then(|a| r.duration(a, &join(&field, "at")));
        let rate = r
            .required(item, &field, "rate", RATE)
            .and_then(|v| r.rate(v, &join(&field, "rate")));
        let (Some(at), Some(rate)) = (at, rate) else {
            continue;
        };
        let at_node = item.get("at").unwrap_or(item);
        if at == 0 {
            r.err(
                at_node,
                &join(&field, "at"),
                "expected a time above 0 (the rate from 0 is link.rate)",
            );
        } else {
            let timing = Timed {
                what: "step",
                strict: true,
                never: "apply",
            };
            timing.check(
                r,
                at_node,
                &field,
                at,
                out.last().map(|p| p.at_us),
                duration_us,
            );
        }
        out.push(RateStep { at_us: at, rate });
    }
    (r.errs.len() == before).then_some(out)
}

/// The time rule of a list of timed items (`link.schedule` steps, `commands`): each after the
/// one before it (`strict`) or at the same time, and before the run's end, or it would never
/// take effect.
struct Timed {
    /// What an item is called in messages ("step").
    what: &'static str,
    strict: bool,
    /// What an item past the end would never do ("apply").
    never: &'static str,
}

impl Timed {
    fn check(
        &self,
        r: &mut Reader,
        at_node: &Node,
        field: &str,
        at: u64,
        prev: Option<u64>,
        duration_us: Option<u64>,
    ) {
        let after = if self.strict { "after" } else { "at or after" };
        if let Some(p) = prev
            && (at < p || (self.strict && at == p))
        {
            r.err(
                at_node,
                &join(field, "at"),
                format!(
                    "expected a time {} the previous {}'s ({}); {}s go in time order",
                    after,
                    self.what,
                    show_us(p),
                    self.what
                ),
            );
        } else if let Some(d) = duration_us
            && at >= d
        {
            r.err(
                at_node,
                &join(field, "at"),
                format!(
                    "the {} is not before the end of the run (duration {}), so it would never {}",
                    self.what,
                    show_us(d),
                    self.never
                ),
            );
        }
    }
}

fn read_link(
    r: &mut Reader,
    tree: &Node,
    backend: Option<Backend>,
    duration_us: Option<u64>,
) -> Option<Link> {
    let Some(n) = tree.get("link") else {
        if matches!(backend, Some(Backend::Sim | Backend::Emu | Backend::Quic)) {
            r.err(
                tree,
                "link",
                format!(
                    "missing; expected a mapping with at least a rate ({RATE}) or an uplink trace"
                ),
            );
            return None;
        }
        return Some(no_link());
    };
    if !r.map(n, "link", LINK_KEYS) {
        return None;
    }
    let before = r.errs.len();
    let delay_us = n.get("delay").and_then(|d| r.duration(d, "link.delay"));
    let jitter_us = n.get("jitter").and_then(|d| r.duration(d, "link.jitter"));
    let names = JitterModel::ALL.map(JitterModel::name);
    let jitter_model = n
        .get("jitter_model")
        .and_then(|d| r.choice(d, "link.jitter_model", &names))
        .and_then(|m| m.parse::<JitterModel>().ok());
    let rate = n.get("rate").and_then(|d| r.rate(d, "link.rate"));
    let loss = n.get("loss").and_then(|d| r.prob(d, "link.loss"));
    let ecn = n
        .get("ecn_threshold")
        .and_then(|d| ecn_threshold(r, d, "link.ecn_threshold"));
    let queue = match n.get("queue") {
        Some(q) => read_queue(r, q, n.get("queue_args"), "link", backend),
        None => {
            if let Some(a) = n.get("queue_args") {
                r.err(
                    a,
                    "link.queue_args",
                    "queue arguments without a queue; give link.queue too",
                );
            }
            Some(Queue::Infinite)
        }
    };
    let mut dirs = vec![];
    for (name, is_up) in [("uplink", true), ("downlink", false)] {
        let field = format!("link.{name}");
        let d = n.get(name);
        if let Some(d) = d {
            r.map(d, &field, DIR_KEYS);
        }
        let get = |k: &str| d.and_then(|d| d.get(k));
        let drate = get("rate").and_then(|v| r.rate(v, &join(&field, "rate")));
        let trace = match get("trace") {
            Some(t) => r
                .scalar(t, &join(&field, "trace"), "a mahimahi trace file")
                .and_then(|s| match find_data(&t.pos.file, s) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        r.err(t, &join(&field, "trace"), e);
                        None
                    }
                }),
            None => None,
        };
        if let (Some(rn), Some(_)) = (get("rate"), get("trace")) {
            r.err(
                rn,
                &join(&field, "rate"),
                "give a rate or a trace, not both",
            );
        }
        let dloss = match get("loss") {
            Some(v) => r.prob(v, &join(&field, "loss")),
            None => Some(if is_up { loss.unwrap_or(0.0) } else { 0.0 }),
        };
        let dqueue = match get("queue") {
            Some(q) => read_queue(r, q, get("queue_args"), &field, backend),
            None => {
                if let Some(a) = get("queue_args") {
                    r.err(
                        a,
                        &join(&field, "queue_args"),
                        "queue arguments without a queue; give a queue too",
                    );
                }
                queue.clone()
            }
        };
        let decn = match get("ecn_threshold") {
            Some(v) => ecn_threshold(r, v, &join(&field, "ecn_threshold")),
            None if is_up => ecn,
            None => None,
        };
        let has_trace = get("trace").is_some();
        dirs.push(Direction {
            rate: if has_trace { None } else { drate.or(rate) },
            trace,
            loss: dloss.unwrap_or(0.0),
            queue: dqueue.unwrap_or(Queue::Infinite),
            ecn_threshold: decn,
            schedule: vec![],
        });
    }
    let mut downlink = dirs.pop()?;
    let mut uplink = dirs.pop()?;
    let given = |k: &str| n.get(k).is_some() || n.get("uplink").and_then(|u| u.get(k)).is_some();
    if let Some(s) = n.get("schedule") {
        // The schedule changes `link.rate`: every direction that runs at it follows.
        let own = |name: &str| {
            n.get(name)
                .is_some_and(|d| d.get("rate").is_some() || d.get("trace").is_some())
        };
        let steps = read_schedule(r, s, duration_us).unwrap_or_default();
        // (The udp backend has no link to schedule; check_udp says so.)
        let has_link = matches!(backend, Some(Backend::Sim | Backend::Emu | Backend::Quic));
        if has_link && n.get("rate").is_none() {
            r.err(
                s,
                "link.schedule",
                "a schedule changes link.rate, which is not given; give link.rate (the rate from the start)",
            );
        } else if has_link && own("uplink") {
            r.err(
                s,
                "link.schedule",
                "the uplink has a rate or trace of its own, which the schedule (a change of link.rate) would not change; give the uplink's rate as link.rate",
            );
        }
        if !own("uplink") {
            uplink.schedule = steps.clone();
        }
        if !own("downlink") {
            downlink.schedule = steps;
        }
    }
    if matches!(backend, Some(Backend::Sim | Backend::Emu | Backend::Quic)) {
        if !given("rate") && !given("trace") {
            r.err(
                n,
                "link.rate",
                format!("missing; expected {RATE} (or link.uplink.trace, a mahimahi trace)"),
            );
        }
        if given("trace")
            && !n
                .get("downlink")
                .is_some_and(|d| d.get("rate").is_some() || d.get("trace").is_some())
            && n.get("rate").is_none()
        {
            r.err(
                n.get("uplink").unwrap_or(n),
                "link.downlink",
                "missing; an uplink trace needs a downlink trace or rate too (as mm-link)",
            );
        }
    }
    if r.errs.len() > before {
        return None;
    }
    Some(Link {
        delay_us: delay_us.unwrap_or(0),
        jitter_us: jitter_us.unwrap_or(0),
        jitter_model: jitter_model.unwrap_or_default(),
        uplink,
        downlink,
    })
}

fn read_limit(
    r: &mut Reader,
    args: &[(String, Node)],
    field: &str,
    need: bool,
    at: &Node,
) -> Option<Limit> {
    let mut out = None;
    let mut n_given = 0;
    for (k, v) in args {
        let f = join(field, k);
        match k.as_str() {
            "packets" => {
                n_given += 1;
                out = r.count(v, &f, 1, u64::MAX).map(Limit::Packets);
            }
            "bytes" => {
                n_given += 1;
                out = r.size(v, &f).map(Limit::Bytes);
            }
            "bdp" => {
                n_given += 1;
                out = r.number(v, &f, 0.01, 1000.0).map(Limit::Bdp);
            }
            _ => {}
        }
    }
    if n_given > 1 {
        r.err(at, field, "give one of packets, bytes and bdp, not several");
        return None;
    }
    if need && n_given == 0 {
        r.err(
            at,
            field,
            "missing the queue's size; expected packets=N, bytes=SIZE or bdp=X",
        );
    }
    out
}

/// Queue arguments as written: `"packets=100, target=5"` or a mapping.
fn queue_args(r: &mut Reader, n: Option<&Node>, field: &str) -> Option<Vec<(String, Node)>> {
    let Some(n) = n else { return Some(vec![]) };
    match &n.value {
        Value::Map(_) => Some(
            n.entries()
                .into_iter()
                .map(|(k, _, v)| (k.to_string(), v.clone()))
                .collect(),
        ),
        Value::Scalar(s) => {
            let mut out = vec![];
            for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                match part.split_once('=') {
                    Some((k, v)) => {
                        out.push((k.trim().to_string(), Node::scalar(v.trim(), n.pos.clone())))
                    }
                    None => {
                        r.err(
                            n,
                            field,
                            format!(
                                "expected key=value pairs such as \"packets=100\", got {part:?}"
                            ),
                        );
                        return None;
                    }
                }
            }
            Some(out)
        }
        _ => {
            r.err(
                n,
                field,
                format!(
                    "expected key=value pairs such as \"packets=100\" or a mapping, got {}",
                    n.kind()
                ),
            );
            None
        }
    }
}

/// A duration argument in mahimahi's form: a bare number is milliseconds.
fn ms_arg(r: &mut Reader, n: &Node, field: &str) -> Option<u64> {
    let t = r.scalar(
        n,
        field,
        "milliseconds (a bare number) or a duration such as 5ms",
    )?;
    if let Ok(v) = t.trim().parse::<f64>()
        && v >= 0.0
        && v.is_finite()
    {
        return Some((v * 1000.0).round() as u64);
    }
    r.duration(n, field)
}

fn read_queue(
    r: &mut Reader,
    q: &Node,
    args: Option<&Node>,
    at: &str,
    backend: Option<Backend>,
) -> Option<Queue> {
    let field = join(at, "queue");
    let afield = join(at, "queue_args");
    let kind = r.choice(q, &field, Queue::TYPES)?;
    let list = queue_args(r, args, &afield)?;
    let allowed: &[&str] = match kind {
        "infinite" => &[],
        "droptail" | "drophead" => &["packets", "bytes", "bdp"],
        "codel" => &["packets", "bytes", "bdp", "target", "interval"],
        "pie" => &["packets", "bytes", "bdp", "qdelay_ref", "max_burst"],
        _ => &["packets", "bytes", "bdp", "min", "max", "max_p", "ecn"],
    };
    let anode = args.unwrap_or(q);
    let mut unknown = false;
    for (k, v) in &list {
        if !allowed.contains(&k.as_str()) {
            let hint = did_you_mean(k, allowed.iter().copied())
                .map(|s| format!(" (did you mean {s:?}?)"))
                .unwrap_or_default();
            let expected = if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            };
            let place = if matches!(anode.value, Value::Map(_)) {
                anode.key_node(k).unwrap_or(v)
            } else {
                anode
            };
            r.err(
                place,
                &join(&afield, k),
                format!("queue {kind} has no argument {k:?}{hint}; its arguments are: {expected}"),
            );
            unknown = true;
        }
    }
    if unknown {
        return None;
    }
    let arg = |k: &str| list.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    let queue = match kind {
        "infinite" => Queue::Infinite,
        "droptail" => Queue::DropTail(read_limit(r, &list, &afield, true, anode)?),
        "drophead" => Queue::DropHead(read_limit(r, &list, &afield, true, anode)?),
        "codel" => Queue::Codel {
            limit: read_limit(r, &list, &afield, true, anode)?,
            target_us: match arg("target") {
                Some(v) => ms_arg(r, &v, &join(&afield, "target"))?,
                None => 5_000,
            },
            interval_us: match arg("interval") {
                Some(v) => ms_arg(r, &v, &join(&afield, "interval"))?,
                None => 100_000,
            },
        },
        "pie" => Queue::Pie {
            limit: read_limit(r, &list, &afield, true, anode)?,
            qdelay_ref_us: match arg("qdelay_ref") {
                Some(v) => ms_arg(r, &v, &join(&afield, "qdelay_ref"))?,
                None => 15_000,
            },
            max_burst_us: match arg("max_burst") {
                Some(v) => ms_arg(r, &v, &join(&afield, "max_burst"))?,
                None => 150_000,
            },
        },
        _ => {
            let thr = |r: &mut Reader, k: &str| -> Option<Limit> {
                let f = join(&afield, k);
                match arg(k) {
                    None => {
                        r.err(
                            anode,
                            &f,
                            "missing; expected a threshold such as 20 (packets) or 30KB",
                        );
                        None
                    }
                    Some(v) => {
                        let t = r.scalar(&v, &f, "a threshold such as 20 (packets) or 30KB")?;
                        if let Ok(p) = t.trim().parse::<u64>() {
                            Some(Limit::Packets(p))
                        } else {
                            r.size(&v, &f).map(Limit::Bytes)
                        }
                    }
                }
            };
            let min = thr(r, "min");
            let max = thr(r, "max");
            let max_p = match arg("max_p") {
                Some(v) => r.number(&v, &join(&afield, "max_p"), 0.0, 1.0)?,
                None => 0.1,
            };
            let ecn = match arg("ecn") {
                Some(v) => r.boolean(&v, &join(&afield, "ecn"))?,
                None => false,
            };
            Queue::Red {
                limit: read_limit(r, &list, &afield, false, anode),
                min: min?,
                max: max?,
                max_p,
                ecn,
            }
        }
    };
    match (backend, &queue) {
        (Some(Backend::Sim), Queue::DropHead(_) | Queue::Codel { .. } | Queue::Pie { .. }) => {
            r.err(
                q,
                &field,
                format!(
                    "queue {kind} is not modelled by the sim backend (it has infinite, droptail and red); mahimahi's {kind} needs backend emu"
                ),
            );
            return None;
        }
        (Some(Backend::Emu | Backend::Quic), Queue::Red { .. }) => {
            r.err(
                q,
                &field,
                "queue red is the simulator's; mahimahi (backend emu) has infinite, droptail, drophead, codel and pie",
            );
            return None;
        }
        (
            _,
            Queue::DropTail(Limit::Bdp(_))
            | Queue::DropHead(Limit::Bdp(_))
            | Queue::Codel {
                limit: Limit::Bdp(_),
                ..
            }
            | Queue::Pie {
                limit: Limit::Bdp(_),
                ..
            },
        ) if backend != Some(Backend::Sim) => {
            r.err(
                anode,
                &afield,
                "bdp=X is understood by the sim backend only; give packets=N or bytes=SIZE",
            );
            return None;
        }
        _ => {}
    }
    Some(queue)
}

/// Why backend `b` cannot run a flow with `reverse: true`, or `None` when it can.
pub fn reverse_unsupported(b: Backend) -> Option<&'static str> {
    match b {
        Backend::Sim | Backend::Emu | Backend::Quic => None,
        Backend::Udp => Some(
            "loopback has no link whose downlink the flow could load (its relay only delays and drops); use backend sim or emu",
        ),
        // Not available in this build at all (`Backend::unavailable` says so).
        Backend::Kernel => None,
    }
}

const FLOW_KEYS: &[&str] = &[
    "algorithm",
    "params",
    "count",
    "start",
    "spacing",
    "size",
    "duration",
    "class",
    "rate_cap",
    "deadline",
    "min_rate",
    "reverse",
];

fn algorithm_names() -> String {
    registry::all()
        .iter()
        .map(|a| a.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A flow's `kernel:NAME` or `kernel:NAME:group=G` (node `a` at `afield`): NAME is a kernel
/// congestion control name, G a JCCE group (a number), the backend runs kernel TCP (emu,
/// quic), and there are no params.
fn read_kernel_algorithm(
    r: &mut Reader,
    a: &Node,
    afield: &str,
    cc: &str,
    backend: Option<Backend>,
    field: &str,
    params: Option<&Node>,
) -> Option<(String, Vec<(String, String)>)> {
    let before = r.errs.len();
    let written = format!("{KERNEL_PREFIX}{cc}");
    let (cc, group) = match cc.split_once(':') {
        None => (cc, None),
        Some((cc, opt)) => match opt.strip_prefix("group=").map(str::parse::<u64>) {
            Some(Ok(g)) => (cc, Some(g)),
            _ => {
                r.err(
                    a,
                    afield,
                    format!(
                        "expected kernel:NAME or kernel:NAME:group=G with G a JCCE group number, got {written:?}"
                    ),
                );
                (cc, None)
            }
        },
    };
    // Linux names congestion controls in at most 15 bytes (TCP_CA_NAME_MAX is 16).
    if cc.is_empty()
        || cc.len() > 15
        || !cc
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        r.err(
            a,
            afield,
            format!(
                "expected kernel:NAME with NAME a Linux TCP congestion control (e.g. kernel:cubic, kernel:bbr), got {:?}",
                format!("{KERNEL_PREFIX}{cc}")
            ),
        );
    }
    if let Some(b) = backend
        && !matches!(b, Backend::Emu | Backend::Quic)
    {
        r.err(
            a,
            afield,
            format!(
                "kernel TCP flows run on backends emu and quic only (a Linux TCP connection across the emulated link), not on {}",
                b.name()
            ),
        );
    }
    if let Some(p) = params {
        r.err(
            p,
            &join(field, "params"),
            "a kernel TCP flow takes no params (the kernel's congestion control is tuned by its sysctls and module parameters)",
        );
    }
    let params = group.map(|g| ("group".to_string(), g.to_string()));
    (r.errs.len() == before).then(|| (format!("{KERNEL_PREFIX}{cc}"), params.into_iter().collect()))
}

/// Read an algorithm name and its parameters (checked against the registry), or a kernel
/// flow's `kernel:NAME` when `backend` allows it.
fn read_algorithm(
    r: &mut Reader,
    n: &Node,
    field: &str,
    params: Option<&Node>,
    backend: Option<Backend>,
) -> Option<(String, Vec<(String, String)>)> {
    let expected = format!("an algorithm name (one of: {})", algorithm_names());
    let a = r.required(n, field, "algorithm", &expected)?;
    let afield = join(field, "algorithm");
    let name = r.scalar(a, &afield, &expected)?;
    if let Some(cc) = name.strip_prefix(KERNEL_PREFIX) {
        return read_kernel_algorithm(r, a, &afield, cc, backend, field, params);
    }
    // `NAME:KEY=VALUE,...` as a flow requests it (so a sweep over `algorithm` can compare
    // variants of one algorithm); `params` may add other keys.
    let (name, inline) = ccp_algorithms::agent::split_requested(name);
    let spec = match registry::lookup(name) {
        Ok(s) => s,
        Err(e) => {
            r.err(a, &afield, e);
            return None;
        }
    };
    let mut out = vec![];
    for (k, v) in inline {
        let checked = if v.is_empty() {
            Err(format!(
                "{k:?} is not KEY=VALUE (write {}:KEY=VALUE,KEY=VALUE)",
                spec.name
            ))
        } else {
            spec.params_from([(k, v)]).map_err(|e| e.to_string())
        };
        match checked {
            Ok(_) if out.iter().any(|(o, _): &(String, String)| o == k) => {
                r.err(a, &afield, format!("{k:?} is set twice"));
                return None;
            }
            Ok(_) => out.push((k.to_string(), v.to_string())),
            Err(e) => {
                r.err(a, &afield, e);
                return None;
            }
        }
    }
    if let Some(p) = params {
        let pfield = join(field, "params");
        if !matches!(p.value, Value::Map(_)) {
            r.err(
                p,
                &pfield,
                format!(
                    "expected a mapping of {}'s parameters, got {}",
                    spec.name,
                    p.kind()
                ),
            );
            return None;
        }
        let mut ok = true;
        for (k, knode, v) in p.entries() {
            let f = join(&pfield, k);
            let Some(text) = r.scalar(v, &f, "a parameter value") else {
                ok = false;
                continue;
            };
            match spec.params_from([(k, text)]) {
                Ok(_) if out.iter().any(|(o, _)| o == k) => {
                    r.err(
                        knode,
                        &f,
                        format!("{k:?} is also set in the algorithm's name; set it once"),
                    );
                    ok = false;
                }
                Ok(_) => out.push((k.to_string(), text.to_string())),
                Err(e @ ccp_algorithms::params::ParamError::Unknown { .. }) => {
                    r.err(knode, &f, e.to_string());
                    ok = false;
                }
                Err(e) => {
                    r.err(v, &f, e.detail());
                    ok = false;
                }
            }
        }
        if !ok {
            return None;
        }
    }
    // Keys that only make sense together (a PolyCC policy), checked on the whole set.
    let whole = spec
        .params_from(out.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| e.to_string())
        .and_then(|set| spec.check_set(&set, &set));
    if let Err(e) = whole {
        let (node, f) = match params {
            Some(p) => (p, join(field, "params")),
            None => (a, afield),
        };
        r.err(node, &f, e);
        return None;
    }
    // Every datapath hands the request to the agent in libccp's CREATE message, whose name
    // field carries at most 63 bytes: longer, it would be refused (ccp-sim, ccp-udp,
    // ccp-quic) or cut short.
    let req = requested(spec.name, &out);
    let max = ccp_engine::wire::MAX_CONG_ALG_SIZE - 1;
    if req.len() > max {
        let (node, f) = match params {
            Some(p) => (p, join(field, "params")),
            None => (a, afield),
        };
        r.err(
            node,
            &f,
            format!(
                "the flow's request {req:?} is {} bytes; a datapath passes at most {max} to the \
                 agent (give fewer parameters: leave out those at their defaults)",
                req.len()
            ),
        );
        return None;
    }
    Some((spec.name.to_string(), out))
}

fn read_flows(
    r: &mut Reader,
    tree: &Node,
    duration_us: Option<u64>,
    backend: Option<Backend>,
) -> Option<Vec<FlowSpec>> {
    let Some(list) = tree.get("flows") else {
        return Some(vec![]);
    };
    let items = r.list(list, "flows", "flows")?;
    let before = r.errs.len();
    let mut out = vec![];
    for (i, f) in items.iter().enumerate() {
        let field = format!("flows[{i}]");
        if !r.map(f, &field, FLOW_KEYS) {
            continue;
        }
        let alg = read_algorithm(r, f, &field, f.get("params"), backend);
        let g = |k: &str| f.get(k);
        if let (Some((a, _)), Some(n)) = (&alg, f.key_node("rate_cap"))
            && kernel_cc(a).is_some()
        {
            r.err(
                n,
                &join(&field, "rate_cap"),
                "a kernel TCP flow cannot be rate-capped; remove rate_cap",
            );
        }
        let fk = |k: &str| join(&field, k);
        let count = match g("count") {
            Some(n) => r.count(n, &fk("count"), 1, 100_000).map(|c| c as u32),
            None => Some(1),
        };
        let start_us = g("start").map_or(Some(0), |n| r.duration(n, &fk("start")));
        let spacing_us = g("spacing").map_or(Some(0), |n| r.duration(n, &fk("spacing")));
        let size = g("size").map(|n| r.size(n, &fk("size")));
        let duration = g("duration").map(|n| match r.duration(n, &fk("duration")) {
            Some(0) => {
                r.err(
                    n,
                    &fk("duration"),
                    format!("expected {DURATION} above 0, got \"0\""),
                );
                None
            }
            d => d,
        });
        if let (Some(_), Some(_)) = (g("size"), g("duration")) {
            r.err(
                f.key_node("duration").unwrap_or(f),
                &fk("duration"),
                "give a size or a duration, not both (neither: the flow runs to the end)",
            );
        }
        let class = match g("class") {
            Some(n) => r.label(n, &fk("class")),
            None => Some(String::new()),
        };
        let rate_cap = g("rate_cap").map(|n| r.rate(n, &fk("rate_cap")));
        let deadline = g("deadline").map(|n| r.duration(n, &fk("deadline")));
        if g("deadline").is_some() && g("size").is_none() {
            r.err(
                f.key_node("deadline").unwrap_or(f),
                &fk("deadline"),
                "a deadline needs a flow size (size: ...)",
            );
        }
        let min_rate = g("min_rate").map(|n| r.rate(n, &fk("min_rate")));
        let reverse = match g("reverse") {
            Some(n) => r.boolean(n, &fk("reverse")),
            None => Some(false),
        };
        if reverse == Some(true)
            && let Some(b) = backend
            && let Some(why) = reverse_unsupported(b)
        {
            r.err(
                f.key_node("reverse").unwrap_or(f),
                &fk("reverse"),
                format!(
                    "a reverse flow (receiver to sender) cannot run on backend {}: {why}",
                    b.name()
                ),
            );
        }
        if let (Some(Some(d)), Some(Some(start))) = (duration, start_us.map(Some))
            && let Some(total) = duration_us
            && start + d > total
            && let Some(n) = g("duration")
        {
            r.err(
                n,
                &fk("duration"),
                "the flow would run past the end of the run (start + duration > duration of the run)",
            );
        }
        let (
            Some((algorithm, params)),
            Some(count),
            Some(start_us),
            Some(spacing_us),
            Some(class),
            Some(reverse),
        ) = (alg, count, start_us, spacing_us, class, reverse)
        else {
            continue;
        };
        let class = if class.is_empty() {
            algorithm.clone()
        } else {
            class
        };
        out.push(FlowSpec {
            algorithm,
            params,
            count,
            start_us,
            spacing_us,
            size: size.flatten(),
            duration_us: duration.flatten(),
            class,
            rate_cap: rate_cap.flatten(),
            deadline_us: deadline.flatten(),
            min_rate: min_rate.flatten(),
            reverse,
        });
    }
    if r.errs.len() > before {
        None
    } else {
        Some(out)
    }
}

const WORKLOAD_KEYS: &[&str] = &[
    "kind",
    "load",
    "cdf",
    "algorithm",
    "params",
    "class",
    "senders",
    "start",
    "stop",
    "max_flows",
    "deadline",
];

fn read_workloads(r: &mut Reader, tree: &Node, backend: Option<Backend>) -> Option<Vec<Workload>> {
    let Some(list) = tree.get("workloads") else {
        return Some(vec![]);
    };
    let items = r.list(list, "workloads", "workloads")?;
    if backend.is_some_and(|b| b != Backend::Sim) && !items.is_empty() {
        r.err(list, "workloads", "workloads need backend sim");
        return None;
    }
    let before = r.errs.len();
    let mut out = vec![];
    for (i, w) in items.iter().enumerate() {
        let field = format!("workloads[{i}]");
        if !r.map(w, &field, WORKLOAD_KEYS) {
            continue;
        }
        let fk = |k: &str| join(&field, k);
        if let Some(k) = r.required(w, &field, "kind", "poisson") {
            r.choice(k, &fk("kind"), &["poisson"]);
        }
        let load = r
            .required(
                w,
                &field,
                "load",
                "a fraction of the uplink's capacity, e.g. 0.5",
            )
            .and_then(|n| r.number(n, &fk("load"), 0.001, 10.0));
        let cdf = r
            .required(w, &field, "cdf", "websearch, datamining or a CDF file")
            .and_then(|n| {
                let s = r.scalar(n, &fk("cdf"), "websearch, datamining or a CDF file")?;
                let name = match s {
                    "websearch" | "datamining" => format!("workloads/{s}.csv"),
                    other => other.to_string(),
                };
                match find_data(&n.pos.file, &name) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        r.err(n, &fk("cdf"), e);
                        None
                    }
                }
            });
        let alg = read_algorithm(r, w, &field, w.get("params"), backend);
        let class = match w.get("class") {
            Some(n) => r.label(n, &fk("class")),
            None => Some(format!("w{i}")),
        };
        let senders = match w.get("senders") {
            Some(n) => r.count(n, &fk("senders"), 1, 10_000).map(|c| c as u32),
            None => Some(1),
        };
        let start_us = w
            .get("start")
            .map_or(Some(0), |n| r.duration(n, &fk("start")));
        let stop_us = w.get("stop").map(|n| r.duration(n, &fk("stop")));
        let max_flows = w
            .get("max_flows")
            .map(|n| r.count(n, &fk("max_flows"), 1, u64::MAX));
        let deadline_us = w.get("deadline").map(|n| r.duration(n, &fk("deadline")));
        let (
            Some(load),
            Some(cdf),
            Some((algorithm, params)),
            Some(class),
            Some(senders),
            Some(start_us),
        ) = (load, cdf, alg, class, senders, start_us)
        else {
            continue;
        };
        out.push(Workload {
            load,
            cdf,
            algorithm,
            params,
            class,
            senders,
            start_us,
            stop_us: stop_us.flatten(),
            max_flows: max_flows.flatten(),
            deadline_us: deadline_us.flatten(),
        });
    }
    if r.errs.len() > before {
        None
    } else {
        Some(out)
    }
}

/// Check a metric name (`goodput_mbps`, `goodput_mbps:alg=cubic`, `fct_mean_ms:size=0-100KB`,
/// `ratio:alg=cubic/reno`).
pub fn check_metric_name(name: &str) -> Result<(), String> {
    let (base, qual) = match name.split_once(':') {
        Some((b, q)) => (b, Some(q)),
        None => (name, None),
    };
    if !METRICS.contains(&base) {
        let hint = did_you_mean(base, METRICS.iter().copied())
            .map(|s| format!(" (did you mean {s:?}?)"))
            .unwrap_or_default();
        return Err(format!(
            "unknown metric {base:?}{hint}; metrics are: {}",
            METRICS.join(", ")
        ));
    }
    if let Some(q) = qual {
        let ok = match q.split_once('=') {
            Some(("alg" | "class", v)) => !v.is_empty(),
            Some(("size", v)) => base.starts_with("fct_") && !v.is_empty(),
            Some(("dir", v)) => v == "reverse" && base != "ratio",
            _ => false,
        };
        if base == "ratio" && q.starts_with("dir=") {
            return Err(
                "a ratio compares groups of forward flows (ratio:alg=A/B or ratio:class=A/B); it takes no dir=".into(),
            );
        }
        if !ok {
            return Err(format!(
                "unknown qualifier {q:?}; expected alg=NAME, class=NAME, dir=reverse (the reverse flows) or (for fct metrics) size=BUCKET"
            ));
        }
    }
    Ok(())
}

const METRICS_KEYS: &[&str] = &["warmup", "fct_buckets", "convergence", "ratios", "table"];

fn read_metrics(r: &mut Reader, n: Option<&Node>) -> Option<MetricsSpec> {
    let mut m = MetricsSpec::default();
    let Some(n) = n else { return Some(m) };
    if !r.map(n, "metrics", METRICS_KEYS) {
        return None;
    }
    let before = r.errs.len();
    if let Some(w) = n.get("warmup") {
        m.warmup_us = r.duration(w, "metrics.warmup").unwrap_or(0);
    }
    if let Some(b) = n.get("fct_buckets")
        && let Some(items) = r.list(b, "metrics.fct_buckets", "size edges, e.g. [100KB, 1MB]")
    {
        m.fct_buckets = items
            .iter()
            .enumerate()
            .filter_map(|(i, x)| r.size(x, &format!("metrics.fct_buckets[{i}]")))
            .collect();
        if m.fct_buckets.windows(2).any(|w| w[0] >= w[1]) {
            r.err(
                b,
                "metrics.fct_buckets",
                "expected sizes in increasing order",
            );
        }
    }
    if let Some(c) = n.get("convergence")
        && r.map(c, "metrics.convergence", &["band", "window"])
    {
        if let Some(b) = c.get("band") {
            m.band = r
                .number(b, "metrics.convergence.band", 0.01, 1.0)
                .unwrap_or(m.band);
        }
        if let Some(w) = c.get("window") {
            m.window_us = r
                .duration(w, "metrics.convergence.window")
                .unwrap_or(m.window_us);
        }
    }
    if let Some(list) = n.get("ratios")
        && let Some(items) = r.list(list, "metrics.ratios", "ratios")
    {
        for (i, x) in items.iter().enumerate() {
            let f = format!("metrics.ratios[{i}]");
            if !r.map(x, &f, &["by", "numerator", "denominator"]) {
                continue;
            }
            let by = match x.get("by") {
                Some(b) => r
                    .choice(b, &join(&f, "by"), &["algorithm", "class"])
                    .map(|s| {
                        if s == "class" {
                            GroupBy::Class
                        } else {
                            GroupBy::Algorithm
                        }
                    }),
                None => Some(GroupBy::Algorithm),
            };
            let num = r
                .required(x, &f, "numerator", "a group name, e.g. cubic")
                .and_then(|v| r.group_label(v, &join(&f, "numerator")));
            let den = r
                .required(x, &f, "denominator", "a group name, e.g. reno")
                .and_then(|v| r.group_label(v, &join(&f, "denominator")));
            if let (Some(by), Some(numerator), Some(denominator)) = (by, num, den) {
                m.ratios.push(Ratio {
                    by,
                    numerator,
                    denominator,
                });
            }
        }
    }
    if let Some(t) = n.get("table")
        && let Some(items) = r.list(t, "metrics.table", "metric names")
    {
        m.table.clear();
        for (i, x) in items.iter().enumerate() {
            let f = format!("metrics.table[{i}]");
            if let Some(s) = r.scalar(x, &f, "a metric name") {
                match check_metric_name(s) {
                    Ok(()) => m.table.push(s.to_string()),
                    Err(e) => r.err(x, &f, e),
                }
            }
        }
    }
    if r.errs.len() > before { None } else { Some(m) }
}

const PLOT_KINDS: &[&str] = &["timeseries", "delay_cdf", "scatter", "fct", "metric"];

/// The plots made when a recipe names none: time series of throughput, cwnd and RTT, the RTT
/// CDF, the throughput-delay scatter, FCT by size when flows have sizes, and goodput and
/// 95th-percentile RTT against every sweep axis.
pub fn default_plots(axes: &[String], sized: bool) -> Vec<PlotSpec> {
    let mut p = vec![
        PlotSpec::Timeseries {
            y: SeriesKind::Throughput,
            run: 0,
            points: 4,
        },
        PlotSpec::Timeseries {
            y: SeriesKind::Cwnd,
            run: 0,
            points: 4,
        },
        PlotSpec::Timeseries {
            y: SeriesKind::Rtt,
            run: 0,
            points: 4,
        },
        PlotSpec::DelayCdf {
            delay: DelayKind::Rtt,
            by: GroupBy::Algorithm,
            points: 4,
        },
        PlotSpec::Scatter {
            by: GroupBy::Algorithm,
        },
    ];
    if sized {
        p.push(PlotSpec::Fct {
            by: GroupBy::Algorithm,
        });
    }
    for (i, a) in axes.iter().enumerate() {
        let series = axes
            .iter()
            .enumerate()
            .find(|(j, _)| *j != i)
            .map(|(_, s)| s.clone());
        for m in ["goodput_mbps", "rtt_p95_ms"] {
            p.push(PlotSpec::Metric {
                metrics: vec![m.to_string()],
                x: a.clone(),
                series: series.clone(),
                log_x: false,
            });
        }
    }
    p
}

fn read_plots(r: &mut Reader, n: Option<&Node>, axes: &[String]) -> Option<Vec<PlotSpec>> {
    let Some(n) = n else {
        return Some(vec![]); // defaults are chosen when the plan is made
    };
    let items = r.list(n, "plots", "plots")?;
    let before = r.errs.len();
    let mut out = vec![];
    for (i, p) in items.iter().enumerate() {
        let f = format!("plots[{i}]");
        if !matches!(p.value, Value::Map(_)) {
            r.err(
                p,
                &f,
                format!(
                    "expected a mapping with a kind ({}), got {}",
                    PLOT_KINDS.join(", "),
                    p.kind()
                ),
            );
            continue;
        }
        let Some(kind) = r
            .required(p, &f, "kind", &format!("one of: {}", PLOT_KINDS.join(", ")))
            .and_then(|k| r.choice(k, &join(&f, "kind"), PLOT_KINDS))
        else {
            continue;
        };
        let by = |r: &mut Reader| -> Option<GroupBy> {
            match p.get("by") {
                Some(b) => r
                    .choice(b, &join(&f, "by"), &["algorithm", "class"])
                    .map(|s| {
                        if s == "class" {
                            GroupBy::Class
                        } else {
                            GroupBy::Algorithm
                        }
                    }),
                None => Some(GroupBy::Algorithm),
            }
        };
        let points = |r: &mut Reader| -> Option<usize> {
            match p.get("points") {
                Some(x) => r.count(x, &join(&f, "points"), 1, 1000).map(|v| v as usize),
                None => Some(4),
            }
        };
        let spec = match kind {
            "timeseries" => {
                r.map(p, &f, &["kind", "y", "run", "points"]);
                let y = r
                    .required(p, &f, "y", "one of: throughput, cwnd, rtt")
                    .and_then(|y| r.choice(y, &join(&f, "y"), &["throughput", "cwnd", "rtt"]))
                    .map(|y| match y {
                        "throughput" => SeriesKind::Throughput,
                        "cwnd" => SeriesKind::Cwnd,
                        _ => SeriesKind::Rtt,
                    });
                let run = match p.get("run") {
                    Some(x) => r.count(x, &join(&f, "run"), 0, 10_000).map(|v| v as u32),
                    None => Some(0),
                };
                let points = points(r);
                match (y, run, points) {
                    (Some(y), Some(run), Some(points)) => {
                        Some(PlotSpec::Timeseries { y, run, points })
                    }
                    _ => None,
                }
            }
            "delay_cdf" => {
                r.map(p, &f, &["kind", "delay", "by", "points"]);
                let delay = match p.get("delay") {
                    Some(d) => r.choice(d, &join(&f, "delay"), &["rtt", "owd"]).map(|d| {
                        if d == "owd" {
                            DelayKind::Owd
                        } else {
                            DelayKind::Rtt
                        }
                    }),
                    None => Some(DelayKind::Rtt),
                };
                match (delay, by(r), points(r)) {
                    (Some(delay), Some(by), Some(points)) => {
                        Some(PlotSpec::DelayCdf { delay, by, points })
                    }
                    _ => None,
                }
            }
            "scatter" => {
                r.map(p, &f, &["kind", "by"]);
                by(r).map(|by| PlotSpec::Scatter { by })
            }
            "fct" => {
                r.map(p, &f, &["kind", "by"]);
                by(r).map(|by| PlotSpec::Fct { by })
            }
            _ => {
                r.map(p, &f, &["kind", "metric", "x", "series", "log_x"]);
                let metrics = r
                    .required(
                        p,
                        &f,
                        "metric",
                        "a metric name or a list of them, e.g. goodput_mbps",
                    )
                    .and_then(|m| {
                        let mf = join(&f, "metric");
                        let nodes: Vec<&Node> = match &m.value {
                            Value::Seq(items) => items.iter().collect(),
                            _ => vec![m],
                        };
                        let mut names = vec![];
                        for x in nodes {
                            let s = r.scalar(x, &mf, "a metric name")?;
                            match check_metric_name(s) {
                                Ok(()) => names.push(s.to_string()),
                                Err(e) => {
                                    r.err(x, &mf, e);
                                    return None;
                                }
                            }
                        }
                        Some(names)
                    });
                let axis = |r: &mut Reader, key: &str| -> Option<String> {
                    let x = p.get(key)?;
                    let s = r.scalar(x, &join(&f, key), "a sweep axis")?;
                    if axes.iter().any(|a| a == s) {
                        Some(s.to_string())
                    } else {
                        let hint = did_you_mean(s, axes.iter().map(String::as_str))
                            .map(|h| format!(" (did you mean {h:?}?)"))
                            .unwrap_or_default();
                        let known = if axes.is_empty() {
                            "this recipe has no sweep".to_string()
                        } else {
                            format!("the sweep's axes are: {}", axes.join(", "))
                        };
                        r.err(
                            x,
                            &join(&f, key),
                            format!("{s:?} is not a sweep axis{hint}; {known}"),
                        );
                        None
                    }
                };
                let x = if p.get("x").is_some() {
                    axis(r, "x")
                } else {
                    r.required(p, &f, "x", "a sweep axis");
                    None
                };
                let series = if p.get("series").is_some() {
                    axis(r, "series").map(Some)
                } else {
                    Some(None)
                };
                let log_x = match p.get("log_x") {
                    Some(b) => r.boolean(b, &join(&f, "log_x")),
                    None => Some(false),
                };
                match (metrics, x, series, log_x) {
                    (Some(metrics), Some(x), Some(series), Some(log_x)) => Some(PlotSpec::Metric {
                        metrics,
                        x,
                        series,
                        log_x,
                    }),
                    _ => None,
                }
            }
        };
        if let Some(s) = spec {
            out.push(s);
        }
    }
    if r.errs.len() > before {
        None
    } else {
        Some(out)
    }
}

const SIM_KEYS: &[&str] = &["step", "ipc_delay", "access_rate", "transport", "keep_raw"];

fn read_sim(r: &mut Reader, n: Option<&Node>) -> Option<SimOptions> {
    let mut s = SimOptions {
        step_us: 10_000,
        ipc_delay_us: 20,
        access_rate: None,
        transport: None,
        keep_raw: true,
    };
    let Some(n) = n else { return Some(s) };
    if !r.map(n, "sim", SIM_KEYS) {
        return None;
    }
    let before = r.errs.len();
    if let Some(x) = n.get("step") {
        match r.duration(x, "sim.step") {
            Some(0) => r.err(
                x,
                "sim.step",
                format!("expected {DURATION} above 0, got \"0\""),
            ),
            Some(v) => s.step_us = v,
            None => {}
        }
    }
    if let Some(x) = n.get("ipc_delay") {
        s.ipc_delay_us = r.duration(x, "sim.ipc_delay").unwrap_or(20);
    }
    if let Some(x) = n.get("access_rate") {
        s.access_rate = r.rate(x, "sim.access_rate");
    }
    if let Some(x) = n.get("keep_raw") {
        s.keep_raw = r.boolean(x, "sim.keep_raw").unwrap_or(true);
    }
    if let Some(x) = n.get("transport") {
        let v = x.to_yaml_value();
        match serde_yaml::from_value::<ccp_sim::scenario::TransportSpec>(v.clone()) {
            Ok(_) => s.transport = Some(v),
            Err(e) => r.err(x, "sim.transport", format!("not a ccp-sim transport: {e}")),
        }
    }
    if r.errs.len() > before { None } else { Some(s) }
}

fn read_udp(r: &mut Reader, n: Option<&Node>) -> Option<UdpOptions> {
    let mut u = UdpOptions {
        mss: 1448,
        trace_interval_us: 10_000,
        datapath: "libccp".into(),
    };
    let Some(n) = n else { return Some(u) };
    if !r.map(n, "udp", &["mss", "trace_interval", "datapath"]) {
        return None;
    }
    let before = r.errs.len();
    if let Some(x) = n.get("mss") {
        u.mss = r.count(x, "udp.mss", 500, 8948).unwrap_or(1448) as u32;
    }
    if let Some(x) = n.get("trace_interval") {
        match r.duration(x, "udp.trace_interval") {
            Some(0) => r.err(
                x,
                "udp.trace_interval",
                format!("expected {DURATION} above 0, got \"0\""),
            ),
            Some(v) => u.trace_interval_us = v,
            None => {}
        }
    }
    if let Some(x) = n.get("datapath")
        && let Some(d) = r.choice(x, "udp.datapath", &["libccp", "engine"])
    {
        u.datapath = d.to_string();
    }
    if r.errs.len() > before { None } else { Some(u) }
}

const COMMAND_FORM: &str =
    "a command such as \"set-params flow=0 min=20mbit\" or \"set-algorithm flow=0 vegas\"";

/// `commands`: a list of `{at: DURATION, command: "set-params flow=N KEY=VALUE ..."}` or
/// `{at: DURATION, command: "set-algorithm flow=N NAME[:KEY=VALUE,...]"}` in time order, each
/// after its flow's start and before the end of the run (and of a flow with a duration), naming
/// an agent flow of `flows` by its index in the expanded list, with parameters its algorithm
/// (after any earlier `set-algorithm` on it) declares and takes on a live flow.
fn read_commands(
    r: &mut Reader,
    n: &Node,
    flows: &[FlowSpec],
    duration_us: Option<u64>,
    backend: Option<Backend>,
) -> Option<Vec<AgentCommand>> {
    const FIELD: &str = "commands";
    const WHAT: &str = "commands {at: DURATION, command: \"set-params flow=N KEY=VALUE ...\" or \"set-algorithm flow=N NAME[:KEY=VALUE,...]\"}, e.g. [{at: 20s, command: \"set-params flow=0 min=20mbit\"}, {at: 30s, command: \"set-algorithm flow=0 vegas\"}]";
    let items = r.list(n, FIELD, WHAT)?;
    let before = r.errs.len();
    if let Some(b) = backend
        && matches!(b, Backend::Quic | Backend::Kernel)
        && !items.is_empty()
    {
        r.err(
            n,
            FIELD,
            format!(
                "commands are not supported on backend {}: ccp-exp cannot name its flows to the agent at run time; use backend sim, udp or emu",
                b.name()
            ),
        );
        return None;
    }
    let instances = expand_flows(flows);
    let mut out: Vec<AgentCommand> = vec![];
    for (ci, item) in items.iter().enumerate() {
        let field = format!("{FIELD}[{ci}]");
        if !r.map(item, &field, &["at", "command"]) {
            continue;
        }
        let at = r
            .required(item, &field, "at", DURATION)
            .and_then(|a| r.duration(a, &join(&field, "at")));
        let cfield = join(&field, "command");
        let cmd = r
            .required(item, &field, "command", COMMAND_FORM)
            .and_then(|c| r.scalar(c, &cfield, COMMAND_FORM).map(|t| (c, t)));
        let at_node = item.get("at").unwrap_or(item);
        if let Some(at) = at {
            let timing = Timed {
                what: "command",
                strict: false,
                never: "run",
            };
            timing.check(
                r,
                at_node,
                &field,
                at,
                out.last().map(|p| p.at_us),
                duration_us,
            );
        }
        let Some((cnode, text)) = cmd else { continue };
        let words: Vec<&str> = text.split_whitespace().collect();
        let bad = |r: &mut Reader, m: String| r.err(cnode, &cfield, m);
        let switch = words.first() == Some(&"set-algorithm");
        match words.first().copied() {
            Some("set-params" | "set-algorithm") => {}
            None => {
                bad(r, format!("expected {COMMAND_FORM}, got an empty command"));
                continue;
            }
            Some(w @ ("set-class" | "bill")) => {
                bad(
                    r,
                    format!(
                        "{w} needs the agent's pricing policy, which recipes do not give; recipes take set-params (a ccp-sim scenario has agent.pricing with agent.commands)"
                    ),
                );
                continue;
            }
            Some("flows") => {
                bad(
                    r,
                    "flows only lists the live flows and changes nothing; the udp and emu backends write that list to the run's raw/commands.log with every command".into(),
                );
                continue;
            }
            Some(w) => {
                let hint = did_you_mean(w, ["set-params", "set-algorithm"].into_iter())
                    .map(|s| format!(" (did you mean {s:?}?)"))
                    .unwrap_or_default();
                bad(
                    r,
                    format!(
                        "unknown command {w:?}{hint}; recipes take set-params flow=N KEY=VALUE ... and set-algorithm flow=N NAME[:KEY=VALUE,...] (ccp-agent ctl's, the flow named by its index)"
                    ),
                );
                continue;
            }
        }
        let usage = if switch {
            "set-algorithm flow=N NAME[:KEY=VALUE,...], N the flow's index in the recipe's flow list (0-based, every copy of count counted)"
        } else {
            "set-params flow=N KEY=VALUE [KEY=VALUE ...], N the flow's index in the recipe's flow list (0-based, every copy of count counted)"
        };
        let Some(target) = words.get(1) else {
            bad(r, format!("expected {usage}"));
            continue;
        };
        let Some(num) = target.strip_prefix("flow=") else {
            let why = if target.contains(':') || target.contains('.') {
                "a recipe does not know its flows' addresses; "
            } else {
                ""
            };
            bad(r, format!("{why}expected {usage}, got {target:?}"));
            continue;
        };
        let Ok(k) = num.parse::<usize>() else {
            bad(
                r,
                format!("expected flow=N with N a whole number (the flow's index), got {target:?}"),
            );
            continue;
        };
        let Some(&(entry, _, start)) = instances.get(k) else {
            let have = match instances.len() {
                0 => "the recipe has no flows (a workload's flows cannot be named)".to_string(),
                1 => "the recipe has 1 flow, flow=0".to_string(),
                m => format!(
                    "the recipe has {m} flows, flow=0 to flow={} (every copy of count counted)",
                    m - 1
                ),
            };
            bad(r, format!("no flow {k}: {have}"));
            continue;
        };
        let f = &flows[entry];
        if kernel_cc(&f.algorithm).is_some() {
            bad(
                r,
                format!(
                    "flow={k} is a kernel TCP flow ({}), which the agent does not control; commands change agent flows",
                    f.algorithm
                ),
            );
            continue;
        }
        if let Some(at) = at {
            if at <= start {
                r.err(
                    at_node,
                    &join(&field, "at"),
                    format!(
                        "flow={k} starts at {}; a command must come after its start (the agent has no flow={k} before)",
                        show_us(start)
                    ),
                );
            } else if let Some(d) = f.duration_us
                && at >= start + d
            {
                r.err(
                    at_node,
                    &join(&field, "at"),
                    format!(
                        "flow={k} runs from {} to {} (its duration); the command would come after its end",
                        show_us(start),
                        show_us(start + d)
                    ),
                );
            }
        }
        let settings = &words[2..];
        if switch {
            let [requested] = settings else {
                bad(r, format!("expected {usage}"));
                continue;
            };
            match ccp_algorithms::agent::live::parse_algorithm(requested, |s| s.defaults()) {
                Ok((spec, _)) => {
                    let (_, kv) = ccp_algorithms::agent::split_requested(requested);
                    out.push(AgentCommand {
                        at_us: at.unwrap_or(0),
                        flow: k,
                        settings: kv
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        algorithm: Some(spec.name.to_string()),
                    });
                }
                Err(e) => bad(r, format!("flow={k}: {e}")),
            }
            continue;
        }
        if settings.is_empty() {
            bad(r, format!("no KEY=VALUE given; expected {usage}"));
            continue;
        }
        let Some(old) = params_after(flows, &out, k) else {
            continue;
        };
        // The flow's algorithm now: the recipe's, or the last set-algorithm's.
        let Some(spec) = registry::find(old.algorithm()) else {
            continue;
        };
        let mut new = old.clone();
        let mut kv = vec![];
        let mut ok = true;
        for s in settings {
            let Some((key, v)) = s.split_once('=') else {
                bad(r, format!("{s:?}: expected KEY=VALUE"));
                ok = false;
                continue;
            };
            match new.set(spec.params, key.trim(), v) {
                Ok(()) => kv.push((key.trim().to_string(), v.trim().to_string())),
                Err(e) => {
                    bad(r, format!("flow={k} runs {}: {e}", spec.name));
                    ok = false;
                }
            }
        }
        if !ok {
            continue;
        }
        // What the agent asks too: whether the algorithm takes changes on a live flow, and
        // these values.
        if let Err(e) = (spec.build)(&old).set_params(&new) {
            bad(r, format!("flow={k}: {e}"));
            continue;
        }
        out.push(AgentCommand {
            at_us: at.unwrap_or(0),
            flow: k,
            settings: kv,
            algorithm: None,
        });
    }
    (r.errs.len() == before).then_some(out)
}

fn read_jcce(r: &mut Reader, n: Option<&Node>) -> Option<JcceOptions> {
    let mut j = JcceOptions::default();
    let Some(n) = n else { return Some(j) };
    if !r.map(n, "jcce", &["delay"]) {
        return None;
    }
    if let Some(x) = n.get("delay") {
        j.delay_us = r.duration(x, "jcce.delay")?;
    }
    Some(j)
}

/// What loopback cannot do.
fn check_udp(r: &mut Reader, tree: &Node) {
    let Some(link) = tree.get("link") else { return };
    const NO_RATE: &str = "the udp backend runs on loopback, which has no rate limit or queue to shape; remove it, or use backend sim (or emu)";
    if let Some(s) = link.get("schedule") {
        r.err(
            s,
            "link.schedule",
            "the udp backend runs on loopback, which has no rate to change; remove it, or use backend sim or emu",
        );
    }
    if let Some(j) = link.get("jitter")
        && r.duration(j, "link.jitter").is_some_and(|v| v > 0)
    {
        r.err(
            j,
            "link.jitter",
            "the udp backend's relay delays every packet alike; remove it, or use backend sim or emu",
        );
    }
    for (path, node) in [
        ("link.rate", link.get("rate")),
        ("link.queue", link.get("queue")),
        ("link.ecn_threshold", link.get("ecn_threshold")),
        (
            "link.uplink.ecn_threshold",
            link.get("uplink").and_then(|u| u.get("ecn_threshold")),
        ),
        (
            "link.downlink.ecn_threshold",
            link.get("downlink").and_then(|u| u.get("ecn_threshold")),
        ),
        (
            "link.uplink.rate",
            link.get("uplink").and_then(|u| u.get("rate")),
        ),
        (
            "link.uplink.trace",
            link.get("uplink").and_then(|u| u.get("trace")),
        ),
        (
            "link.uplink.queue",
            link.get("uplink").and_then(|u| u.get("queue")),
        ),
        (
            "link.downlink.rate",
            link.get("downlink").and_then(|u| u.get("rate")),
        ),
        (
            "link.downlink.trace",
            link.get("downlink").and_then(|u| u.get("trace")),
        ),
        (
            "link.downlink.queue",
            link.get("downlink").and_then(|u| u.get("queue")),
        ),
    ] {
        if let Some(n) = node {
            if n.as_scalar() == Some("infinite") {
                continue;
            }
            r.err(n, path, NO_RATE);
        }
    }
    let up = link
        .get("uplink")
        .and_then(|u| u.get("loss"))
        .or(link.get("loss"))
        .and_then(|n| n.as_scalar())
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(0.0);
    if let Some(d) = link.get("downlink").and_then(|u| u.get("loss"))
        && let Some(v) = d.as_scalar().and_then(|s| s.parse::<f64>().ok())
        && v != up
    {
        r.err(
            d,
            "link.downlink.loss",
            "the udp backend's relay (ccp-udp relay --loss) drops in both directions alike: give the downlink the uplink's loss, or leave it out",
        );
    }
}

/// Flow instances in order: `(flow entry index, copy index, start µs)`.
pub fn expand_flows(flows: &[FlowSpec]) -> Vec<(usize, u32, u64)> {
    let mut out = vec![];
    for (i, f) in flows.iter().enumerate() {
        for c in 0..f.count {
            out.push((i, c, f.start_us + u64::from(c) * f.spacing_us));
        }
    }
    out
}
