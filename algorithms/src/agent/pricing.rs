//! Pricing in the agent: which class of service — a pair (θ, ω) — every flow gets, how a VM's
//! class is split among its flows, run-time class changes, and a running bill per VM and per flow
//! (PACCP, Sun et al. 2021, §Pricing model).
//!
//! PACCP's deployment note puts the (θ, ω) of a flow in the congestion control plane: the
//! operator sets them here, in the agent, not the tenant in the kernel. Only flows whose
//! algorithm declares both a `theta` and an `omega` parameter (today: `paccp`) are priced; every
//! other flow is left alone.
//!
//! # The policy file (YAML)
//!
//! ```yaml
//! prices:                  # all optional; currency units per second
//!   p0: 1.0                # VBP base price P0 (the BE price)
//!   p1: 0.6                # VBP price per unit of weight above 1, P1 (default 0.6·P0)
//!   p2: 0.5                # VBP price per Gbit/s of guaranteed rate, P2
//!   fbp_base: 1.0          # FBP: the BE fee of a VM, charged to the VM
//!   fbp_p0: 0.1            # FBP: P0^s, flat fee of a DS or MRG flow
//!   fbp_p1: 0.06           # FBP: P1^s, per unit of weight above 1 (default 0.6·P0^s)
//!   fbp_p2: 0.5            # FBP: P2^s, per Gbit/s of guaranteed rate
//! model: vbp               # model of VMs not listed below (vbp or fbp; default vbp)
//! vms:                     # VMs by source address (first match wins)
//!   - name: web
//!     src: [10.0.0.1, 10.0.0.2/31]
//!     model: vbp           # vbp (default) or fbp
//!     class: mrg           # be (0,1) | ds (0, omega, default 2) | mrg (theta, omega, default 1)
//!     theta: 2gbit         # a rate; required for mrg
//!     omega: 2
//! flows:                   # FBP per-flow classes, matched like agent rules (first match wins)
//!   - name: backup
//!     match: {dst_port: 873}
//!     class: ds
//!     omega: 2
//! ```
//!
//! Unlisted sources are VMs of their own (named by their address) of class BE under `model`.
//!
//! # Classes as built
//!
//! - **VBP** (VM-based): a VM buys one aggregate (θ, ω); its `n` live priced flows get
//!   (θ/n, ω/n) each, re-split whenever a flow starts or ends. Flow entries and the flow's own
//!   parameters are ignored (the VM's class is authoritative).
//! - **FBP** (flow-based): a flow's class is, in order, that of the first matching `flows` entry,
//!   else the (θ, ω) its algorithm parameters carry (what the flow asked for, or a rule or flag
//!   set: a purchase on demand), else BE.
//! - **Run-time changes**: [`Pricing::command`] `set-class TARGET CLASS [--weight W]
//!   [--theta RATE]`, where TARGET is a live flow `SRC_IP:SRC_PORT`, the name of a `flows` entry
//!   (its live flows and every later one), or `vm:NAME` (a VM's class; VBP re-splits it). The
//!   new parameters reach a flow's controller at its next report ([`Controller::set_params`]),
//!   i.e. within one report period — one RTT with per-RTT reports. The price changes at once.
//!
//! # Bills
//!
//! Prices are per unit of time and are charged while a VM has at least one live priced flow
//! (the agent cannot see a VM's lifetime; `active_s` reports the charged time):
//!
//! - VBP: the VM pays `P = P0 + P1·(ω − 1) + P2·θ` (θ in Gbit/s); each live flow is charged
//!   `P/n` of it, so the flows' bills add up to the VM's.
//! - FBP: the VM pays the base fee `fbp_base`; each DS or MRG flow pays
//!   `P^s = P0^s + P1^s·(ω − 1) + P2^s·θ` while it is in that class (BE flows pay nothing
//!   beyond the base). The VM's bill is its base plus its flows' bills.
//! - A weight below 1 is priced as 1: `(ω − 1)` counts from 0, with no rebate for a flow that
//!   asks for less than BE's share.
//!
//! Each flow's record also carries the bytes it had acknowledged (from its reports).
//! [`Pricing::bill`] exports everything as JSON (`ccp-agent ctl bill`, and `--bill FILE` at exit).

use crate::adapter::TimeSource;
use crate::agent::rules::{FlowKey, Match, Prefix, one_or_many, parse_match};
use crate::config::{ConfigError, ConfigErrors, Document, Node, Value, check_keys, join};
use crate::controller::{Controller, Decision, Measurement, forward_to_inner};
use crate::params::{ParamSet, Unit};
use crate::registry::AlgorithmSpec;
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::{info, warn};

/// Bytes/s in one Gbit/s (prices quote θ in Gbit/s).
const BYTES_PER_GBIT: f64 = 125_000_000.0;

/// The price constants, per second (θ terms per Gbit/s of guaranteed rate).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    /// VBP base price P0 (the BE class).
    pub p0: f64,
    /// VBP price per unit of weight above 1, P1 (default 0.6·P0, the paper's suggestion).
    pub p1: f64,
    /// VBP price per Gbit/s of guaranteed rate, P2 (not given by the paper).
    pub p2: f64,
    /// FBP: a VM's BE fee.
    pub fbp_base: f64,
    /// FBP: P0^s, flat fee of a DS or MRG flow.
    pub fbp_p0: f64,
    /// FBP: P1^s (default 0.6·P0^s, the paper's suggestion for FBP as for VBP).
    pub fbp_p1: f64,
    /// FBP: P2^s.
    pub fbp_p2: f64,
}

/// P1 over P0 (and P1^s over P0^s) when a policy does not give it (the paper's suggestion).
const P1_OF_P0: f64 = 0.6;

/// FBP's flat fee of a DS or MRG flow when a policy does not give it (not given by the paper).
const FBP_P0: f64 = 0.1;

impl Default for Prices {
    fn default() -> Self {
        Prices {
            p0: 1.0,
            p1: P1_OF_P0,
            p2: 0.5,
            fbp_base: 1.0,
            fbp_p0: FBP_P0,
            fbp_p1: P1_OF_P0 * FBP_P0,
            fbp_p2: 0.5,
        }
    }
}

impl Prices {
    /// VBP price of a VM of class `c`, per second.
    pub fn vbp(&self, c: Class) -> f64 {
        self.p0 + self.p1 * (c.omega - 1.0).max(0.0) + self.p2 * c.theta / BYTES_PER_GBIT
    }

    /// FBP surcharge of a flow of class `c`, per second (0 for BE).
    pub fn fbp(&self, c: Class) -> f64 {
        if c.name() == "be" {
            return 0.0;
        }
        self.fbp_p0
            + self.fbp_p1 * (c.omega - 1.0).max(0.0)
            + self.fbp_p2 * c.theta / BYTES_PER_GBIT
    }
}

/// A class of service: minimum guaranteed rate θ (bytes/s) and utility weight ω.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Class {
    pub theta: f64,
    pub omega: f64,
}

impl Class {
    /// Best effort, (0, 1).
    pub const BE: Class = Class {
        theta: 0.0,
        omega: 1.0,
    };

    /// `mrg` when θ > 0, `ds` when ω > 1, else `be`.
    pub fn name(&self) -> &'static str {
        if self.theta > 0.0 {
            "mrg"
        } else if self.omega > 1.0 {
            "ds"
        } else {
            "be"
        }
    }

    /// A class from its name and optional θ (bytes/s) and ω; errors say what is missing.
    pub fn from_parts(name: &str, theta: Option<f64>, omega: Option<f64>) -> Result<Class, String> {
        if let Some(w) = omega
            && !(w.is_finite() && w > 0.0)
        {
            return Err(format!("omega must be a positive number, not {w}"));
        }
        if let Some(t) = theta
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(format!("theta must be a non-negative rate, not {t}"));
        }
        match name {
            "be" => {
                if theta.unwrap_or(0.0) != 0.0 || omega.unwrap_or(1.0) != 1.0 {
                    return Err("class be is (theta 0, omega 1); use ds or mrg for others".into());
                }
                Ok(Class::BE)
            }
            "ds" => {
                if theta.unwrap_or(0.0) != 0.0 {
                    return Err("class ds has no guaranteed rate; use mrg with theta".into());
                }
                Ok(Class {
                    theta: 0.0,
                    omega: omega.unwrap_or(2.0),
                })
            }
            "mrg" => match theta {
                Some(t) if t > 0.0 => Ok(Class {
                    theta: t,
                    omega: omega.unwrap_or(1.0),
                }),
                _ => Err("class mrg needs a positive theta (e.g. --theta 2gbit)".into()),
            },
            "" => Ok(Class {
                theta: theta.unwrap_or(0.0),
                omega: omega.unwrap_or(1.0),
            }),
            other => Err(format!("unknown class {other:?}; expected be, ds or mrg")),
        }
    }
}

/// A pricing model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// VM-based pricing: one class per VM, split among its flows.
    Vbp,
    /// Flow-based pricing: a class per flow, changeable at run time.
    Fbp,
}

impl Model {
    fn name(self) -> &'static str {
        match self {
            Model::Vbp => "vbp",
            Model::Fbp => "fbp",
        }
    }

    fn parse(s: &str) -> Result<Model, String> {
        match s {
            "vbp" => Ok(Model::Vbp),
            "fbp" => Ok(Model::Fbp),
            o => Err(format!("unknown pricing model {o:?}; expected vbp or fbp")),
        }
    }
}

/// A VM of the policy.
#[derive(Clone, Debug)]
pub struct VmEntry {
    pub name: String,
    pub src: Vec<Prefix>,
    pub model: Model,
    pub class: Class,
}

/// An FBP flow class entry.
#[derive(Clone, Debug)]
pub struct FlowEntry {
    pub name: String,
    pub when: Match,
    pub class: Class,
}

/// A checked pricing policy.
#[derive(Clone, Debug)]
pub struct PricingPolicy {
    pub prices: Prices,
    /// Model of VMs the policy does not list.
    pub model: Model,
    pub vms: Vec<VmEntry>,
    pub flows: Vec<FlowEntry>,
}

impl Default for PricingPolicy {
    fn default() -> Self {
        PricingPolicy {
            prices: Prices::default(),
            model: Model::Vbp,
            vms: vec![],
            flows: vec![],
        }
    }
}

impl PricingPolicy {
    /// Load and check a policy file.
    pub fn load(path: &Path) -> Result<PricingPolicy, ConfigErrors> {
        let doc = Document::load(path).map_err(|e| ConfigErrors(vec![e]))?;
        Self::from_document(&doc)
    }

    /// Parse and check policy text; `file` names it in messages.
    pub fn parse(file: &str, text: &str) -> Result<PricingPolicy, ConfigErrors> {
        let doc = Document::parse(file, text).map_err(|e| ConfigErrors(vec![e]))?;
        Self::from_document(&doc)
    }

    fn from_document(doc: &Document) -> Result<PricingPolicy, ConfigErrors> {
        let root = &doc.root;
        if root.entries().is_none() {
            return Err(ConfigErrors(vec![doc.error(
                root,
                "",
                format!("expected a pricing policy mapping, found {}", root.kind()),
            )]));
        }
        let mut errs = check_keys(doc, root, "", &["prices", "model", "vms", "flows"]);
        let mut p = PricingPolicy::default();
        if let Some(n) = root.get("prices") {
            errs.extend(check_keys(
                doc,
                n,
                "prices",
                &["p0", "p1", "p2", "fbp_base", "fbp_p0", "fbp_p1", "fbp_p2"],
            ));
            let pr = &mut p.prices;
            let slots: [(&str, &mut f64); 7] = [
                ("p0", &mut pr.p0),
                ("p1", &mut pr.p1),
                ("p2", &mut pr.p2),
                ("fbp_base", &mut pr.fbp_base),
                ("fbp_p0", &mut pr.fbp_p0),
                ("fbp_p1", &mut pr.fbp_p1),
                ("fbp_p2", &mut pr.fbp_p2),
            ];
            for (k, slot) in slots {
                if let Some(v) = n.get(k) {
                    match number(v) {
                        Some(x) if x >= 0.0 => *slot = x,
                        _ => errs.push(doc.error(
                            v,
                            &join("prices", k),
                            "expected a non-negative price per second",
                        )),
                    }
                }
            }
            // P1 follows P0 unless it is given (the paper's P1 = 0.6·P0), and P1^s follows P0^s.
            if n.get("p1").is_none() {
                p.prices.p1 = P1_OF_P0 * p.prices.p0;
            }
            if n.get("fbp_p1").is_none() {
                p.prices.fbp_p1 = P1_OF_P0 * p.prices.fbp_p0;
            }
        }
        if let Some(n) = root.get("model") {
            match n.as_scalar().map(Model::parse) {
                Some(Ok(m)) => p.model = m,
                Some(Err(e)) => errs.push(doc.error(n, "model", e)),
                None => errs.push(doc.error(n, "model", "expected vbp or fbp")),
            }
        }
        for (i, item) in list(doc, root, "vms", &mut errs).iter().enumerate() {
            let path = format!("vms[{i}]");
            errs.extend(check_keys(
                doc,
                item,
                &path,
                &["name", "src", "model", "class", "theta", "omega"],
            ));
            let name = item
                .get("name")
                .and_then(Node::as_scalar)
                .map(str::to_string)
                .unwrap_or_else(|| format!("vm{}", i + 1));
            let src = match item.get("src") {
                None => {
                    errs.push(doc.error(
                        item,
                        &join(&path, "src"),
                        "missing: the VM's source addresses",
                    ));
                    vec![]
                }
                Some(n) => match one_or_many(
                    doc,
                    n,
                    &join(&path, "src"),
                    "an IPv4 address or CIDR",
                    Prefix::parse,
                ) {
                    Ok(v) => v,
                    Err(mut e) => {
                        errs.append(&mut e);
                        vec![]
                    }
                },
            };
            let model = match item.get("model") {
                None => Model::Vbp,
                Some(n) => match n.as_scalar().map(Model::parse) {
                    Some(Ok(m)) => m,
                    _ => {
                        errs.push(doc.error(n, &join(&path, "model"), "expected vbp or fbp"));
                        Model::Vbp
                    }
                },
            };
            let class = parse_class(doc, item, &path, &mut errs);
            p.vms.push(VmEntry {
                name,
                src,
                model,
                class,
            });
        }
        for (i, item) in list(doc, root, "flows", &mut errs).iter().enumerate() {
            let path = format!("flows[{i}]");
            errs.extend(check_keys(
                doc,
                item,
                &path,
                &["name", "match", "class", "theta", "omega"],
            ));
            let name = item
                .get("name")
                .and_then(Node::as_scalar)
                .map(str::to_string)
                .unwrap_or_else(|| format!("flows{}", i + 1));
            let when = match item.get("match") {
                None => Match::default(),
                Some(m) => match parse_match(doc, m, &join(&path, "match")) {
                    Ok(m) => m,
                    Err(mut e) => {
                        errs.append(&mut e);
                        Match::default()
                    }
                },
            };
            let class = parse_class(doc, item, &path, &mut errs);
            p.flows.push(FlowEntry { name, when, class });
        }
        let mut names: Vec<&str> = p.vms.iter().map(|v| v.name.as_str()).collect();
        names.extend(p.flows.iter().map(|f| f.name.as_str()));
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            errs.push(doc.error(root, "", format!("name {:?} is given twice", w[0])));
        }
        if errs.is_empty() {
            Ok(p)
        } else {
            Err(ConfigErrors(errs))
        }
    }
}

fn number(n: &Node) -> Option<f64> {
    n.as_scalar()?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
}

fn list<'a>(
    doc: &Document,
    root: &'a Node,
    key: &str,
    errs: &mut Vec<ConfigError>,
) -> Vec<&'a Node> {
    let Some(n) = root.get(key) else {
        return vec![];
    };
    match n.items() {
        Some(items) => items
            .iter()
            .filter(|i| {
                let ok = i.entries().is_some();
                if !ok {
                    errs.push(doc.error(i, key, format!("expected a mapping, found {}", i.kind())));
                }
                ok
            })
            .collect(),
        None if matches!(n.value, Value::Null) => vec![],
        None => {
            errs.push(doc.error(n, key, format!("expected a list, found {}", n.kind())));
            vec![]
        }
    }
}

fn parse_class(doc: &Document, item: &Node, path: &str, errs: &mut Vec<ConfigError>) -> Class {
    let mut theta = None;
    if let Some(n) = item.get("theta") {
        match n.as_scalar().map(|t| Unit::Rate.parse(t)) {
            Some(Ok(v)) => theta = Some(v),
            Some(Err(e)) => errs.push(doc.error(n, &join(path, "theta"), e)),
            None => errs.push(doc.error(n, &join(path, "theta"), "expected a rate, e.g. 2gbit")),
        }
    }
    let mut omega = None;
    if let Some(n) = item.get("omega") {
        match number(n) {
            Some(v) => omega = Some(v),
            None => errs.push(doc.error(n, &join(path, "omega"), "expected a number, e.g. 2")),
        }
    }
    let name = item.get("class").and_then(Node::as_scalar).unwrap_or("");
    match Class::from_parts(name, theta, omega) {
        Ok(c) => c,
        Err(e) => {
            errs.push(doc.error(item, &join(path, "class"), e));
            Class::BE
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Run time
// ---------------------------------------------------------------------------------------------

/// What a priced flow's controller wrapper shares with the pricing: bytes acknowledged and
/// parameters waiting to be applied.
#[derive(Debug, Default)]
pub struct FlowSlot {
    bytes: AtomicU64,
    has_pending: AtomicBool,
    pending: Mutex<Option<ParamSet>>,
}

impl FlowSlot {
    pub(crate) fn offer(&self, p: ParamSet) {
        if let Ok(mut slot) = self.pending.lock() {
            *slot = Some(p);
            self.has_pending.store(true, Ordering::Release);
        }
    }

    pub(crate) fn take(&self) -> Option<ParamSet> {
        if !self.has_pending.swap(false, Ordering::AcqRel) {
            return None;
        }
        self.pending.lock().ok().and_then(|mut s| s.take())
    }
}

struct VmState {
    name: String,
    model: Model,
    class: Class,
    /// Time charged up to, µs.
    last_us: u64,
    active_us: u64,
    /// FBP base fee accrued.
    base: f64,
    /// Everything the VM was charged (VBP: the VM price; FBP: base plus its flows).
    total: f64,
    /// Bytes of its closed flows.
    closed_bytes: u64,
    closed_flows: u64,
    live: Vec<u64>,
}

struct FlowState {
    label: String,
    vm: usize,
    /// The `flows` entry that chose its class (FBP).
    entry: Option<usize>,
    /// The flow's own class (FBP) — for VBP, the VM's class is used.
    class: Class,
    /// The parameters its controller has or is about to get.
    params: ParamSet,
    slot: Arc<FlowSlot>,
    bill: f64,
    start_us: u64,
    end_us: Option<u64>,
    changes: u32,
}

#[derive(Default)]
struct State {
    vms: Vec<VmState>,
    vm_index: HashMap<String, usize>,
    live: BTreeMap<u64, FlowState>,
    closed: Vec<FlowState>,
    /// Current class of each `flows` entry (changed by `set-class ENTRY`).
    entry_classes: Vec<Class>,
    /// Scheduled commands (agent time µs, text), earliest last.
    schedule: Vec<(u64, String)>,
}

/// The pricing of one agent: policy, live flows, bills.
pub struct Pricing {
    policy: PricingPolicy,
    time: Arc<dyn TimeSource>,
    state: Mutex<State>,
    next_id: AtomicU64,
    /// Agent time of the next scheduled command, µs (`u64::MAX`: none).
    next_command_us: AtomicU64,
}

/// A run-time command, parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Change the class of a flow, a `flows` entry or a VM.
    SetClass { target: String, class: Class },
    /// Export the bills.
    Bill,
}

impl Command {
    /// Parse `set-class TARGET CLASS [--weight W] [--theta RATE]` or `bill`.
    pub fn parse(text: &str) -> Result<Command, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["bill"] => Ok(Command::Bill),
            ["set-class", target, class, opts @ ..] => {
                let (mut theta, mut omega) = (None, None);
                let mut it = opts.iter();
                while let Some(o) = it.next() {
                    let (key, inline) = match o.split_once('=') {
                        Some((k, v)) => (k, Some(v)),
                        None => (*o, None),
                    };
                    let value = match inline {
                        Some(v) => v,
                        None => it
                            .next()
                            .copied()
                            .ok_or_else(|| format!("{key} needs a value"))?,
                    };
                    match key {
                        "--weight" | "--omega" => {
                            omega = Some(
                                value
                                    .parse::<f64>()
                                    .map_err(|_| format!("{key}: {value:?} is not a number"))?,
                            )
                        }
                        "--theta" => theta = Some(Unit::Rate.parse(value)?),
                        o => {
                            return Err(format!(
                                "unknown option {o:?}; expected --weight or --theta"
                            ));
                        }
                    }
                }
                Ok(Command::SetClass {
                    target: target.to_string(),
                    class: Class::from_parts(class, theta, omega)?,
                })
            }
            _ => Err(format!(
                "unknown command {text:?}; expected `set-class TARGET be|ds|mrg [--weight W] [--theta RATE]` or `bill`"
            )),
        }
    }
}

/// Whether flows of `spec` can be priced (it declares `theta` and `omega`).
pub fn priceable(spec: &AlgorithmSpec) -> bool {
    spec.params.iter().any(|p| p.key == "theta") && spec.params.iter().any(|p| p.key == "omega")
}

fn with_class(params: &ParamSet, c: Class) -> ParamSet {
    let mut p = params.clone();
    p.set_value("theta", c.theta);
    p.set_value("omega", c.omega);
    p
}

fn gbit(bytes_per_sec: f64) -> f64 {
    bytes_per_sec / BYTES_PER_GBIT
}

impl Pricing {
    /// Pricing with `policy`, reading time from `time` (the agent's clock).
    pub fn new(policy: PricingPolicy, time: Arc<dyn TimeSource>) -> Self {
        let state = State {
            entry_classes: policy.flows.iter().map(|f| f.class).collect(),
            ..State::default()
        };
        Pricing {
            policy,
            time,
            state: Mutex::new(state),
            next_id: AtomicU64::new(1),
            next_command_us: AtomicU64::new(u64::MAX),
        }
    }

    /// Run `commands` (agent time µs, text) when the agent's clock reaches them (checked at
    /// every report of a priced flow). Every command is checked now.
    pub fn with_schedule(self, commands: Vec<(u64, String)>) -> Result<Self, String> {
        for (_, c) in &commands {
            Command::parse(c)?;
        }
        if let Ok(mut s) = self.state.lock() {
            s.schedule = commands;
            s.schedule.sort_by_key(|c| std::cmp::Reverse(c.0));
            let next = s.schedule.last().map_or(u64::MAX, |c| c.0);
            self.next_command_us.store(next, Ordering::Release);
        }
        Ok(self)
    }

    /// The policy.
    pub fn policy(&self) -> &PricingPolicy {
        &self.policy
    }

    fn vm_of(&self, s: &mut State, src_ip: u32, now: u64) -> usize {
        let (name, model, class) = match self
            .policy
            .vms
            .iter()
            .find(|v| v.src.iter().any(|p| p.contains(src_ip)))
        {
            Some(v) => (v.name.clone(), v.model, v.class),
            None => (
                Ipv4Addr::from(src_ip).to_string(),
                self.policy.model,
                Class::BE,
            ),
        };
        if let Some(i) = s.vm_index.get(&name) {
            return *i;
        }
        s.vms.push(VmState {
            name: name.clone(),
            model,
            class,
            last_us: now,
            active_us: 0,
            base: 0.0,
            total: 0.0,
            closed_bytes: 0,
            closed_flows: 0,
            live: vec![],
        });
        s.vm_index.insert(name, s.vms.len() - 1);
        s.vms.len() - 1
    }

    /// Charge VM `vm` up to `now` at the prices in force.
    fn accrue(&self, s: &mut State, vm: usize, now: u64) {
        let State { vms, live, .. } = s;
        let v = &mut vms[vm];
        let dt_us = now.saturating_sub(v.last_us);
        v.last_us = v.last_us.max(now);
        if dt_us == 0 || v.live.is_empty() {
            return;
        }
        let dt = dt_us as f64 / 1e6;
        v.active_us += dt_us;
        let prices = &self.policy.prices;
        match v.model {
            Model::Vbp => {
                let share = prices.vbp(v.class) * dt / v.live.len() as f64;
                for id in &v.live {
                    if let Some(f) = live.get_mut(id) {
                        f.bill += share;
                        v.total += share;
                    }
                }
            }
            Model::Fbp => {
                let base = prices.fbp_base * dt;
                v.base += base;
                v.total += base;
                for id in &v.live {
                    if let Some(f) = live.get_mut(id) {
                        let c = prices.fbp(f.class) * dt;
                        f.bill += c;
                        v.total += c;
                    }
                }
            }
        }
    }

    /// VBP: give every live flow of `vm` its share (θ/n, ω/n).
    fn resplit(&self, s: &mut State, vm: usize) {
        let State { vms, live, .. } = s;
        let v = &vms[vm];
        if v.model != Model::Vbp || v.live.is_empty() {
            return;
        }
        let n = v.live.len() as f64;
        let share = Class {
            theta: v.class.theta / n,
            omega: v.class.omega / n,
        };
        for id in &v.live {
            if let Some(f) = live.get_mut(id) {
                let p = with_class(&f.params, share);
                if p != f.params {
                    f.params = p.clone();
                    f.slot.offer(p);
                }
            }
        }
    }

    /// A flow of algorithm `spec` with parameters `params` was created: returns the parameters
    /// it must start with and, if it is priced, the ticket its controller is wrapped with.
    pub fn flow_created(
        self: &Arc<Self>,
        key: &FlowKey,
        spec: &'static AlgorithmSpec,
        params: ParamSet,
    ) -> (ParamSet, Option<PricedTicket>) {
        if !priceable(spec) {
            return (params, None);
        }
        let now = self.time.now_us();
        let Ok(mut s) = self.state.lock() else {
            return (params, None);
        };
        let vm = self.vm_of(&mut s, key.src_ip, now);
        self.accrue(&mut s, vm, now);
        let (entry, class) = match s.vms[vm].model {
            Model::Vbp => (None, s.vms[vm].class),
            Model::Fbp => match self.policy.flows.iter().position(|f| f.when.matches(key)) {
                Some(i) => (Some(i), s.entry_classes[i]),
                None => (
                    None,
                    Class {
                        theta: params.get("theta").max(0.0),
                        omega: params.get("omega").max(0.01),
                    },
                ),
            },
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(FlowSlot::default());
        let label = key.label();
        s.live.insert(
            id,
            FlowState {
                label,
                vm,
                entry,
                class,
                params: with_class(&params, class),
                slot: slot.clone(),
                bill: 0.0,
                start_us: now,
                end_us: None,
                changes: 0,
            },
        );
        s.vms[vm].live.push(id);
        self.resplit(&mut s, vm);
        // The new flow starts with its share at once rather than at its first report.
        let start = s.live.get(&id).map(|f| {
            let _ = f.slot.take();
            f.params.clone()
        });
        let params = start.unwrap_or(params);
        (
            params,
            Some(PricedTicket {
                pricing: self.clone(),
                id,
                slot,
            }),
        )
    }

    fn flow_closed(&self, id: u64) {
        let now = self.time.now_us();
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let Some(vm) = s.live.get(&id).map(|f| f.vm) else {
            return;
        };
        self.accrue(&mut s, vm, now);
        let Some(mut f) = s.live.remove(&id) else {
            return;
        };
        f.end_us = Some(now);
        let v = &mut s.vms[vm];
        v.live.retain(|x| *x != id);
        v.closed_bytes += f.slot.bytes.load(Ordering::Relaxed);
        v.closed_flows += 1;
        s.closed.push(f);
        self.resplit(&mut s, vm);
    }

    /// Run scheduled commands that are due at agent time `now_us`.
    pub fn poll(&self, now_us: u64) {
        if now_us < self.next_command_us.load(Ordering::Acquire) {
            return;
        }
        let due: Vec<String> = {
            let Ok(mut s) = self.state.lock() else {
                return;
            };
            let mut due = vec![];
            while s.schedule.last().is_some_and(|c| c.0 <= now_us) {
                if let Some((_, c)) = s.schedule.pop() {
                    due.push(c);
                }
            }
            let next = s.schedule.last().map_or(u64::MAX, |c| c.0);
            self.next_command_us.store(next, Ordering::Release);
            due
        };
        for c in due {
            match self.command(&c) {
                Ok(r) => info!(command = %c, result = %r, "scheduled pricing command"),
                Err(e) => warn!(command = %c, error = %e, "scheduled pricing command failed"),
            }
        }
    }

    /// Run a control command; returns its answer (JSON for `bill`).
    pub fn command(&self, text: &str) -> Result<String, String> {
        match Command::parse(text)? {
            Command::Bill => Ok(self.bill().to_string()),
            Command::SetClass { target, class } => self.set_class(&target, class),
        }
    }

    /// Change the class of `target`: a live flow `IP:PORT`, a `flows` entry name, or `vm:NAME`.
    pub fn set_class(&self, target: &str, class: Class) -> Result<String, String> {
        let now = self.time.now_us();
        let mut s = self.state.lock().map_err(|_| "pricing state poisoned")?;
        if let Some(name) = target.strip_prefix("vm:") {
            let vm = *s
                .vm_index
                .get(name)
                .ok_or_else(|| format!("no VM {name:?} has had a priced flow"))?;
            self.accrue(&mut s, vm, now);
            s.vms[vm].class = class;
            if s.vms[vm].model == Model::Vbp {
                self.resplit(&mut s, vm);
            }
            info!(
                vm = name,
                class = class.name(),
                theta_gbps = gbit(class.theta),
                omega = class.omega,
                "VM class changed"
            );
            return Ok(format!("vm {name}: class {}", describe(class)));
        }
        let targets: Vec<u64> = if let Some(i) =
            self.policy.flows.iter().position(|f| f.name == target)
        {
            s.entry_classes[i] = class;
            s.live
                .iter()
                .filter(|(_, f)| f.entry == Some(i))
                .map(|(id, _)| *id)
                .collect()
        } else {
            let id = s
                .live
                .iter()
                .find(|(_, f)| f.label == target)
                .map(|(id, _)| *id)
                .ok_or_else(|| {
                    format!(
                        "no live priced flow {target:?} and no flow class of that name; \
                             targets are SRC_IP:SRC_PORT, a flows entry name or vm:NAME"
                    )
                })?;
            let vm = s.live[&id].vm;
            if s.vms[vm].model == Model::Vbp {
                return Err(format!(
                    "flow {target} belongs to VBP VM {:?}, whose class it shares; change the VM with vm:{}",
                    s.vms[vm].name, s.vms[vm].name
                ));
            }
            vec![id]
        };
        let mut vms: Vec<usize> = targets
            .iter()
            .filter_map(|id| s.live.get(id).map(|f| f.vm))
            .collect();
        vms.sort_unstable();
        vms.dedup();
        for vm in vms {
            self.accrue(&mut s, vm, now);
        }
        for id in &targets {
            if let Some(f) = s.live.get_mut(id) {
                f.class = class;
                f.changes += 1;
                f.params = with_class(&f.params, class);
                f.slot.offer(f.params.clone());
            }
        }
        info!(
            target,
            class = class.name(),
            flows = targets.len(),
            "flow class changed"
        );
        Ok(format!(
            "{target}: class {} on {} live flow(s)",
            describe(class),
            targets.len()
        ))
    }

    /// The bills so far, as JSON (every VM charged up to now).
    pub fn bill(&self) -> serde_json::Value {
        let now = self.time.now_us();
        let Ok(mut s) = self.state.lock() else {
            return serde_json::json!({"error": "pricing state poisoned"});
        };
        for vm in 0..s.vms.len() {
            self.accrue(&mut s, vm, now);
        }
        let flow_json = |f: &FlowState, vms: &[VmState]| {
            serde_json::json!({
                "flow": f.label,
                "vm": vms[f.vm].name,
                "class": f.class.name(),
                "theta_gbps": gbit(f.params.get("theta")),
                "omega": f.params.get("omega"),
                "bill": f.bill,
                "bytes": f.slot.bytes.load(Ordering::Relaxed),
                "start_s": f.start_us as f64 / 1e6,
                "end_s": f.end_us.map(|e| e as f64 / 1e6),
                "class_changes": f.changes,
            })
        };
        let flows: Vec<serde_json::Value> = s
            .closed
            .iter()
            .chain(s.live.values())
            .map(|f| flow_json(f, &s.vms))
            .collect();
        let vms: Vec<serde_json::Value> = s
            .vms
            .iter()
            .map(|v| {
                let live_bytes: u64 = v
                    .live
                    .iter()
                    .filter_map(|id| s.live.get(id))
                    .map(|f| f.slot.bytes.load(Ordering::Relaxed))
                    .sum();
                serde_json::json!({
                    "vm": v.name,
                    "model": v.model.name(),
                    "class": v.class.name(),
                    "theta_gbps": gbit(v.class.theta),
                    "omega": v.class.omega,
                    "active_s": v.active_us as f64 / 1e6,
                    "base": v.base,
                    "bill": v.total,
                    "bytes": v.closed_bytes + live_bytes,
                    "flows": v.closed_flows + v.live.len() as u64,
                    "live_flows": v.live.len(),
                })
            })
            .collect();
        let p = &self.policy.prices;
        serde_json::json!({
            "time_s": now as f64 / 1e6,
            "prices": {
                "p0": p.p0, "p1": p.p1, "p2": p.p2,
                "fbp_base": p.fbp_base, "fbp_p0": p.fbp_p0, "fbp_p1": p.fbp_p1, "fbp_p2": p.fbp_p2,
                "unit": "currency per second; theta terms per Gbit/s",
            },
            "vms": vms,
            "flows": flows,
        })
    }
}

fn describe(c: Class) -> String {
    format!(
        "{} (theta {} Gbit/s, omega {})",
        c.name(),
        gbit(c.theta),
        c.omega
    )
}

/// What [`Pricing::flow_created`] hands out for a priced flow: wrap its controller with it.
pub struct PricedTicket {
    pricing: Arc<Pricing>,
    id: u64,
    slot: Arc<FlowSlot>,
}

impl PricedTicket {
    /// The controller of the flow, wrapped so that it counts bytes, takes class changes at its
    /// next report and tells the pricing when the flow ends.
    pub fn wrap(self, inner: Box<dyn Controller>) -> Box<dyn Controller> {
        Box::new(Priced {
            inner,
            pricing: self.pricing,
            id: self.id,
            slot: self.slot,
        })
    }
}

/// A priced flow's controller: the algorithm's own, plus the pricing's hooks.
struct Priced {
    inner: Box<dyn Controller>,
    pricing: Arc<Pricing>,
    id: u64,
    slot: Arc<FlowSlot>,
}

impl Controller for Priced {
    forward_to_inner!();

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        self.slot.bytes.fetch_add(m.acked_bytes, Ordering::Relaxed);
        self.pricing.poll(m.now_us);
        if let Some(p) = self.slot.take()
            && let Err(e) = self.inner.set_params(&p)
        {
            warn!(error = %e, "could not change a priced flow's parameters");
        }
        self.inner.on_measurement(m)
    }
}

impl Drop for Priced {
    fn drop(&mut self) {
        self.pricing.flow_closed(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock the test sets.
    #[derive(Default)]
    struct Clock(AtomicU64);

    impl TimeSource for Clock {
        fn now_us(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    const POLICY: &str = "\
prices: {p0: 1.0, p1: 0.6, p2: 0.5}
vms:
  - {name: be-vm, src: 10.0.0.1, class: be}
  - {name: mrg-vm, src: 10.0.0.2, class: mrg, theta: 2gbit, omega: 2}
  - {name: tenant, src: 10.0.0.3, model: fbp}
flows:
  - {name: backup, match: {dst_port: 873}, class: ds, omega: 3}
";

    fn setup(text: &str) -> (Arc<Pricing>, Arc<Clock>) {
        let clock = Arc::new(Clock::default());
        let p = PricingPolicy::parse("p.yaml", text).unwrap();
        (Arc::new(Pricing::new(p, clock.clone())), clock)
    }

    fn key(src: &str, port: u32, dst_port: u32) -> FlowKey {
        FlowKey {
            src_ip: u32::from(src.parse::<Ipv4Addr>().unwrap()),
            src_port: port,
            dst_ip: 1,
            dst_port,
            requested: "paccp".into(),
        }
    }

    fn paccp() -> &'static AlgorithmSpec {
        crate::registry::find("paccp").unwrap()
    }

    /// Create a priced flow; returns its start parameters and wrapped controller.
    fn create(p: &Arc<Pricing>, k: &FlowKey, params: ParamSet) -> (ParamSet, Box<dyn Controller>) {
        let (params, ticket) = p.flow_created(k, paccp(), params);
        let ctl = (paccp().build)(&params);
        (
            params.clone(),
            ticket.expect("paccp flows are priced").wrap(ctl),
        )
    }

    fn report(now_us: u64) -> Measurement {
        Measurement {
            now_us,
            acked_bytes: 1000,
            mss: 1448,
            ..Measurement::default()
        }
    }

    fn bill_of<'a>(
        b: &'a serde_json::Value,
        list: &str,
        key: &str,
        name: &str,
    ) -> &'a serde_json::Value {
        b[list]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v[key] == name)
            .unwrap_or_else(|| panic!("{name} not in {b}"))
    }

    #[test]
    fn vbp_splits_the_vms_class_among_live_flows_and_bills_add_up() {
        let (p, clock) = setup(POLICY);
        let k1 = key("10.0.0.2", 1, 80);
        let (p1, mut c1) = create(&p, &k1, paccp().defaults());
        assert_eq!((p1.get("theta"), p1.get("omega")), (250e6, 2.0));
        clock.0.store(1_000_000, Ordering::SeqCst);
        let (p2, c2) = create(&p, &key("10.0.0.2", 2, 80), paccp().defaults());
        assert_eq!((p2.get("theta"), p2.get("omega")), (125e6, 1.0));
        // The first flow takes its new share at its next report.
        c1.on_measurement(&report(1_000_100));
        {
            let s = p.state.lock().unwrap();
            let f = s.live.values().find(|f| f.label == "10.0.0.2:1").unwrap();
            assert_eq!(f.params.get("omega"), 1.0);
            assert!(!f.slot.has_pending.load(Ordering::SeqCst));
        }
        clock.0.store(3_000_000, Ordering::SeqCst);
        drop(c2);
        clock.0.store(4_000_000, Ordering::SeqCst);
        let b = p.bill();
        let price = 1.0 + 0.6 * 1.0 + 0.5 * 2.0; // P0 + P1(ω−1) + P2·θ[Gbit/s]
        let vm = bill_of(&b, "vms", "vm", "mrg-vm");
        assert!(
            (vm["bill"].as_f64().unwrap() - 4.0 * price).abs() < 1e-9,
            "{vm}"
        );
        assert_eq!(vm["active_s"].as_f64().unwrap(), 4.0);
        let f1 = bill_of(&b, "flows", "flow", "10.0.0.2:1")["bill"]
            .as_f64()
            .unwrap();
        let f2 = bill_of(&b, "flows", "flow", "10.0.0.2:2")["bill"]
            .as_f64()
            .unwrap();
        // Alone for 1 s, shared for 2 s, alone again for 1 s.
        assert!((f1 - price * (1.0 + 1.0 + 1.0)).abs() < 1e-9, "{f1}");
        assert!((f2 - price * 1.0).abs() < 1e-9, "{f2}");
        assert!((f1 + f2 - vm["bill"].as_f64().unwrap()).abs() < 1e-9);
        // The survivor got the whole class back.
        c1.on_measurement(&report(4_000_100));
        let s = p.state.lock().unwrap();
        assert_eq!(s.live.values().next().unwrap().params.get("theta"), 250e6);
    }

    #[test]
    fn fbp_classes_come_from_entries_requests_and_run_time_changes() {
        let (p, clock) = setup(POLICY);
        let (pa, mut ca) = create(&p, &key("10.0.0.3", 7, 873), paccp().defaults());
        assert_eq!(pa.get("omega"), 3.0, "the backup entry's class");
        let mut req = paccp().defaults();
        req.set_value("omega", 2.0);
        let (pb, _cb) = create(&p, &key("10.0.0.3", 8, 80), req);
        assert_eq!(pb.get("omega"), 2.0, "what the flow asked for");
        let (pc, mut cc) = create(&p, &key("10.0.0.3", 9, 80), paccp().defaults());
        assert_eq!(pc.get("omega"), 1.0, "BE");
        clock.0.store(2_000_000, Ordering::SeqCst);
        let r = p
            .command("set-class 10.0.0.3:9 mrg --theta 1gbit --weight 2")
            .unwrap();
        assert!(r.contains("mrg"), "{r}");
        cc.on_measurement(&report(2_000_010));
        p.command("set-class backup be").unwrap();
        ca.on_measurement(&report(2_000_010));
        clock.0.store(3_000_000, Ordering::SeqCst);
        let b = p.bill();
        let pr = Prices::default();
        let f = |n: &str| bill_of(&b, "flows", "flow", n)["bill"].as_f64().unwrap();
        let ds3 = pr.fbp_p0 + pr.fbp_p1 * 2.0;
        let ds2 = pr.fbp_p0 + pr.fbp_p1;
        let mrg = pr.fbp_p0 + pr.fbp_p1 + pr.fbp_p2 * 1.0;
        assert!((f("10.0.0.3:7") - 2.0 * ds3).abs() < 1e-9);
        assert!((f("10.0.0.3:8") - 3.0 * ds2).abs() < 1e-9);
        assert!((f("10.0.0.3:9") - 1.0 * mrg).abs() < 1e-9);
        let vm = bill_of(&b, "vms", "vm", "tenant");
        let total = vm["bill"].as_f64().unwrap();
        assert!((vm["base"].as_f64().unwrap() - 3.0 * pr.fbp_base).abs() < 1e-9);
        assert!(
            (total - 3.0 * pr.fbp_base - f("10.0.0.3:7") - f("10.0.0.3:8") - f("10.0.0.3:9")).abs()
                < 1e-9
        );
        let s = p.state.lock().unwrap();
        let c = s.live.values().find(|f| f.label == "10.0.0.3:9").unwrap();
        assert_eq!((c.params.get("theta"), c.params.get("omega")), (125e6, 2.0));
    }

    #[test]
    fn scheduled_commands_run_at_their_time_and_bad_ones_are_refused() {
        let (p, _clock) = setup(POLICY);
        assert!(
            Arc::try_unwrap(p)
                .ok()
                .unwrap()
                .with_schedule(vec![(5, "set-class x gold".into())])
                .is_err()
        );
        let clock = Arc::new(Clock::default());
        let policy = PricingPolicy::parse("p.yaml", POLICY).unwrap();
        let p = Arc::new(
            Pricing::new(policy, clock.clone())
                .with_schedule(vec![(
                    1_000_000,
                    "set-class 10.0.0.3:9 ds --weight 4".into(),
                )])
                .unwrap(),
        );
        let (_, mut c) = create(&p, &key("10.0.0.3", 9, 80), paccp().defaults());
        c.on_measurement(&report(999_999));
        let omega = |p: &Pricing| {
            p.state
                .lock()
                .unwrap()
                .live
                .values()
                .next()
                .unwrap()
                .params
                .get("omega")
        };
        assert_eq!(omega(&p), 1.0);
        c.on_measurement(&report(1_000_001));
        assert_eq!(omega(&p), 4.0);
    }

    #[test]
    fn commands_and_policies_are_checked() {
        assert!(
            Command::parse("set-class a mrg")
                .unwrap_err()
                .contains("theta")
        );
        assert!(
            Command::parse("set-class a gold")
                .unwrap_err()
                .contains("unknown class")
        );
        assert!(Command::parse("set-class a ds --weight x").is_err());
        assert_eq!(
            Command::parse("set-class a ds --weight=2").unwrap(),
            Command::SetClass {
                target: "a".into(),
                class: Class {
                    theta: 0.0,
                    omega: 2.0
                }
            }
        );
        assert!(Command::parse("frobnicate").is_err());
        let e = PricingPolicy::parse("p.yaml", "vms:\n  - {name: a, src: 10.0.0.300}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.yaml:2") && e.contains("vms[0].src"), "{e}");
        let e = PricingPolicy::parse("p.yaml", "vms:\n  - {src: 10.0.0.1, class: mrg}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("theta"), "{e}");
        let e = PricingPolicy::parse("p.yaml", "prices: {p9: 1}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("prices.p9"), "{e}");
        // P1 defaults to 0.6·P0 and P1^s to 0.6·P0^s; a given one stands.
        let prices = |text: &str| PricingPolicy::parse("p.yaml", text).unwrap().prices;
        assert_eq!(prices("prices: {p0: 2.0}\n").p1, 1.2);
        assert_eq!(prices("prices: {p0: 2.0, p1: 0.3}\n").p1, 0.3);
        assert_eq!(prices("vms: []\n").p1, 0.6);
        assert!((prices("prices: {fbp_p0: 0.5}\n").fbp_p1 - 0.3).abs() < 1e-12);
        assert_eq!(prices("prices: {fbp_p0: 0.5, fbp_p1: 2.0}\n").fbp_p1, 2.0);
        assert!((prices("vms: []\n").fbp_p1 - 0.06).abs() < 1e-12);
        let (p, _) = setup(POLICY);
        // A VBP flow's class is its VM's.
        let (_, _c) = create(&p, &key("10.0.0.1", 3, 80), paccp().defaults());
        assert!(
            p.command("set-class 10.0.0.1:3 ds")
                .unwrap_err()
                .contains("VBP")
        );
        assert!(p.command("set-class 10.9.9.9:1 ds").is_err());
        // Other algorithms are not priced.
        let reno = crate::registry::find("reno").unwrap();
        assert!(
            p.flow_created(&key("10.0.0.1", 4, 80), reno, reno.defaults())
                .1
                .is_none()
        );
    }
}
