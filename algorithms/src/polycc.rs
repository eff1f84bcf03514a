//! PolyCC (Zhu et al., SIGCOMM '23 demo): several congestion control algorithms on one flow.
//!
//! A policy names one **pilot** and one or more **copilots** from the whole registry, a **fusion
//! function** and the quantity it fuses (**cwnd** or pacing **rate**). Every member runs on every
//! measurement of the flow (the same [`Measurement`] the shared measurement program produces, so
//! the datapath program of every member is that one program and no member is special-cased); the
//! fusion function combines the members' windows or rates into one value; every member whose own
//! value differs is **calibrated** to it ([`Controller::calibrate`], each algorithm's own meaning:
//! Reno/CUBIC restart from the window, BBR takes the cwnd or pacing rate, Copa the window, the
//! online learners restart their rate search from the rate); the flow is then driven by the
//! pilot's logic: the pilot's calibrated state in the pilot's control mode is what is installed.
//!
//! Policies are data: `polycc:pilot=bbr,copilots=cubic,fuse=max,on=cwnd` as a flow's requested
//! algorithm, `polycc.fuse=min` as an agent flag, or a rule / recipe `params:` mapping. Members
//! take their own parameters as `MEMBER.KEY` (`cubic.beta=0.8`), checked against that member.
//!
//! Fusion functions (paper §2 Step 3):
//! - `max`, `min`: over every member with a value;
//! - `mean`: weighted mean with `weights` (one per member, pilot first; equal by default);
//! - `closest`: the member value closest to `target` (arg min |x_i − x*|);
//! - an expression over member values: numbers, member names (and `pilot`), `+ - * /`,
//!   parentheses and the functions `max(..)`, `min(..)`, `mean(..)`, `closest(t, ..)`, e.g.
//!   `0.7*bbr+0.3*cubic` or `max(bbr, min(cubic, 2*copa))` (`;` may separate arguments too). A
//!   member named only in the expression joins as a copilot.
//!
//! Values are in the fused quantity's unit: bytes for `cwnd`, bytes/s for `rate`. A member's cwnd
//! is its [`Controller::cwnd`]; its rate is its [`Controller::rate`], or for an unpaced member its
//! window over the last mean RTT (pacing rate ∝ cwnd/RTT, paper §2), which is also how the window
//! algorithms read a fused rate back.

use crate::controller::{
    ControlMode, Controller, Decision, FlowStart, Fused, Measurement, ReportPeriod, TakeOver,
};
use crate::params::{MEMBER_KEYS, ParamSet, ParamSpec, Unit, did_you_mean};
use crate::registry::{self, AlgorithmSpec};
use tracing::error;

/// The defaults of the policy when a key is not set: the paper's first demonstration (§3.1).
const DEFAULT_PILOT: &str = "bbr";
const DEFAULT_COPILOTS: &str = "cubic";
const DEFAULT_FUSE: &str = "max";
const DEFAULT_ON: &str = "cwnd";

/// The parameters of PolyCC: the policy, all text.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "pilot",
        unit: Unit::Text,
        default: 0.0,
        help: "the pilot: the algorithm whose logic drives the flow (a registry name); default bbr",
        source: "PolyCC §2 Pilot-Copilot Filter; bbr as in both demonstrations (§3.1, §3.2)",
    },
    ParamSpec {
        key: "copilots",
        unit: Unit::Text,
        default: 0.0,
        help: "the copilots, registry names joined by + (cubic+copa); default cubic",
        source: "PolyCC §2 Pilot-Copilot Filter; cubic as in §3.1",
    },
    ParamSpec {
        key: "fuse",
        unit: Unit::Text,
        default: 0.0,
        help: "fusion function: max, min, mean, closest or an expression over member values \
               (0.7*bbr+0.3*cubic, max(bbr;min(cubic;2*copa))); default max",
        source: "PolyCC §2 Fusion Controller, Step 3 (max, min, arg min |x − x*|); max as in §3.1",
    },
    ParamSpec {
        key: "on",
        unit: Unit::Text,
        default: 0.0,
        help: "what is fused: cwnd (bytes) or rate (pacing rate, bytes/s); default cwnd",
        source: "PolyCC §2 Fusion Controller (window or rate); cwnd in §3.1, rate in §3.2",
    },
    ParamSpec {
        key: "target",
        unit: Unit::Text,
        default: 0.0,
        help: "target x* of fuse=closest: an expression (bytes for cwnd, bytes/s for rate), \
               e.g. 250000 or 1.2*bbr; no default (closest needs it)",
        source: "PolyCC §2 Step 3 (cwnd*)",
    },
    ParamSpec {
        key: "weights",
        unit: Unit::Text,
        default: 0.0,
        help: "weights of fuse=mean, numbers joined by + in member order (pilot, copilots); \
               default equal weights",
        source: "this implementation (weighted mean)",
    },
    ParamSpec {
        key: MEMBER_KEYS,
        unit: Unit::Text,
        default: 0.0,
        help: "a member's own parameter, e.g. cubic.beta=0.8 (checked against the member)",
        source: "this implementation (members built from the registry with their own parameters)",
    },
];

/// PolyCC in the registry.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "polycc",
    summary: "PolyCC: a pilot and copilots on one flow, windows or rates fused by a policy",
    params: PARAMS,
    build: |p| Box::new(PolyCc::from_params(p)),
};

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

/// A fusion expression over member values.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Num(f64),
    /// A member's value (`pilot` is resolved to the pilot's name when the policy is built).
    Var(String),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
}

/// The functions of the expression language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Max,
    Min,
    Mean,
    /// `closest(t, a, b, ..)`: the argument after `t` closest to `t`.
    Closest,
}

impl Func {
    fn by_name(name: &str) -> Option<Func> {
        match name {
            "max" => Some(Func::Max),
            "min" => Some(Func::Min),
            "mean" => Some(Func::Mean),
            "closest" => Some(Func::Closest),
            _ => None,
        }
    }

    fn apply(self, args: &[f64]) -> f64 {
        match self {
            Func::Max => args.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Func::Min => args.iter().copied().fold(f64::INFINITY, f64::min),
            Func::Mean => args.iter().sum::<f64>() / args.len() as f64,
            Func::Closest => closest(args[0], &args[1..]),
        }
    }
}

/// The value of `xs` closest to `target` (the first on a tie).
fn closest(target: f64, xs: &[f64]) -> f64 {
    xs.iter()
        .copied()
        .fold(None::<f64>, |best, x| match best {
            Some(b) if (b - target).abs() <= (x - target).abs() => Some(b),
            _ => Some(x),
        })
        .unwrap_or(f64::NAN)
}

impl Expr {
    /// Parse `text`; errors say where and what was expected.
    pub fn parse(text: &str) -> Result<Expr, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let e = p.expr()?;
        p.skip_ws();
        if p.i < p.s.len() {
            return Err(p.err("expected an operator (+ - * /) or the end"));
        }
        Ok(e)
    }

    /// Every name the expression reads, in order of appearance.
    pub fn names(&self) -> Vec<&str> {
        let mut out = vec![];
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Num(_) => {}
            Expr::Var(v) => {
                if !out.contains(&v.as_str()) {
                    out.push(v)
                }
            }
            Expr::Neg(e) => e.collect(out),
            Expr::Bin(_, a, b) => {
                a.collect(out);
                b.collect(out);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.collect(out)),
        }
    }

    /// Evaluate with `value(name)`; `None` if a name has no value or the result is not finite
    /// (a negative result is refused later, by the fusion).
    pub fn eval(&self, value: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
        let v = match self {
            Expr::Num(x) => *x,
            Expr::Var(name) => value(name)?,
            Expr::Neg(e) => -e.eval(value)?,
            Expr::Bin(op, a, b) => {
                let (a, b) = (a.eval(value)?, b.eval(value)?);
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    _ => a / b,
                }
            }
            Expr::Call(f, args) => {
                let xs: Option<Vec<f64>> = args.iter().map(|a| a.eval(value)).collect();
                f.apply(&xs?)
            }
        };
        v.is_finite().then_some(v)
    }

    /// `pilot` replaced by the pilot's name.
    fn resolve_pilot(self, pilot: &str) -> Expr {
        match self {
            Expr::Var(v) if v == "pilot" => Expr::Var(pilot.to_string()),
            Expr::Neg(e) => Expr::Neg(Box::new(e.resolve_pilot(pilot))),
            Expr::Bin(op, a, b) => Expr::Bin(
                op,
                Box::new(a.resolve_pilot(pilot)),
                Box::new(b.resolve_pilot(pilot)),
            ),
            Expr::Call(f, args) => Expr::Call(
                f,
                args.into_iter().map(|a| a.resolve_pilot(pilot)).collect(),
            ),
            e => e,
        }
    }
}

/// A recursive-descent parser: expr = term {(+|-) term}; term = unary {(*|/) unary};
/// unary = -unary | atom; atom = number | name | name(expr {,|; expr}) | (expr).
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> String {
        let text = String::from_utf8_lossy(self.s);
        let found = match self.s.get(self.i) {
            Some(c) => format!("found {:?}", *c as char),
            None => "found the end".to_string(),
        };
        format!("in {text:?} at character {}: {what}, {found}", self.i + 1)
    }

    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let mut e = self.term()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            self.i += 1;
            e = Expr::Bin(op as char, Box::new(e), Box::new(self.term()?));
        }
        Ok(e)
    }

    fn term(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        while let Some(op @ (b'*' | b'/')) = self.peek() {
            self.i += 1;
            e = Expr::Bin(op as char, Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.peek() == Some(b'-') {
            self.i += 1;
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, String> {
        match self.peek() {
            Some(b'(') => {
                self.i += 1;
                let e = self.expr()?;
                self.expect(b')')?;
                Ok(e)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let from = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    self.i += 1;
                }
                let mut name = String::from_utf8_lossy(&self.s[from..self.i]).to_string();
                // A hyphen joins the next word when the two make an algorithm's name
                // (`vivace-distributed`); otherwise it is a minus (`cubic-bbr`).
                while self.s.get(self.i) == Some(&b'-')
                    && self
                        .s
                        .get(self.i + 1)
                        .is_some_and(|c| c.is_ascii_alphabetic())
                {
                    let mut end = self.i + 1;
                    while self
                        .s
                        .get(end)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                    {
                        end += 1;
                    }
                    let joined = String::from_utf8_lossy(&self.s[from..end]).to_string();
                    if !registry::all()
                        .iter()
                        .any(|a| a.name.starts_with(joined.as_str()))
                    {
                        break;
                    }
                    name = joined;
                    self.i = end;
                }
                if self.peek() != Some(b'(') {
                    return Ok(Expr::Var(name));
                }
                let Some(f) = Func::by_name(&name) else {
                    self.i = from;
                    return Err(self.err(&format!(
                        "unknown function {name:?} (functions: max, min, mean, closest)"
                    )));
                };
                self.i += 1;
                let mut args = vec![self.expr()?];
                while let Some(b',' | b';') = self.peek() {
                    self.i += 1;
                    args.push(self.expr()?);
                }
                self.expect(b')')?;
                if f == Func::Closest && args.len() < 2 {
                    self.i = from;
                    return Err(self.err("closest needs a target and at least one value"));
                }
                Ok(Expr::Call(f, args))
            }
            _ => Err(self.err("expected a number, a member name, a function or '('")),
        }
    }

    fn number(&mut self) -> Result<Expr, String> {
        let from = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_digit() || *c == b'.')
        {
            self.i += 1;
        }
        // An exponent: e or E, an optional sign, digits.
        if let Some(b'e' | b'E') = self.s.get(self.i) {
            let mut j = self.i + 1;
            if let Some(b'+' | b'-') = self.s.get(j) {
                j += 1;
            }
            if self.s.get(j).is_some_and(u8::is_ascii_digit) {
                while self.s.get(j).is_some_and(u8::is_ascii_digit) {
                    j += 1;
                }
                self.i = j;
            }
        }
        let text = String::from_utf8_lossy(&self.s[from..self.i]);
        text.parse::<f64>().map(Expr::Num).map_err(|_| {
            self.i = from;
            self.err("expected a number")
        })
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(&format!("expected {:?}", c as char)))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------------------------

/// What the fusion combines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// Congestion windows, bytes.
    Cwnd,
    /// Pacing rates, bytes/s.
    Rate,
}

/// A fusion function.
#[derive(Clone, Debug, PartialEq)]
pub enum Fusion {
    Max,
    Min,
    /// Weighted mean, one weight per member (pilot first).
    Mean(Vec<f64>),
    /// The member value closest to the target.
    Closest(Expr),
    /// A user-defined expression.
    Expr(Expr),
}

impl Fusion {
    /// Fuse member values (`None`: the member has none yet). `names[i]` is member i's name.
    /// `None` when nothing can be fused (no member has a value, or the expression lacks one).
    pub fn fuse(&self, names: &[&str], values: &[Option<f64>]) -> Option<f64> {
        let present = || values.iter().filter_map(|v| *v);
        let lookup = |n: &str| names.iter().position(|m| *m == n).and_then(|i| values[i]);
        let v = match self {
            Fusion::Max => present().reduce(f64::max)?,
            Fusion::Min => present().reduce(f64::min)?,
            Fusion::Mean(w) => {
                let (mut num, mut den) = (0.0, 0.0);
                for (i, v) in values.iter().enumerate() {
                    if let Some(v) = v {
                        let w = w.get(i).copied().unwrap_or(1.0);
                        num += w * v;
                        den += w;
                    }
                }
                if den <= 0.0 {
                    return None;
                }
                num / den
            }
            Fusion::Closest(t) => {
                let t = t.eval(&lookup)?;
                let xs: Vec<f64> = present().collect();
                if xs.is_empty() {
                    return None;
                }
                closest(t, &xs)
            }
            Fusion::Expr(e) => e.eval(&lookup)?,
        };
        (v.is_finite() && v >= 0.0).then_some(v)
    }
}

/// A parsed policy: members (pilot first), fusion, quantity.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Pilot first, then the copilots (listed, then those only the expression names).
    pub members: Vec<&'static AlgorithmSpec>,
    pub fusion: Fusion,
    pub on: Quantity,
}

fn member_spec(name: &str) -> Result<&'static AlgorithmSpec, String> {
    let spec = registry::lookup(name)?;
    if spec.name == SPEC.name {
        return Err("polycc cannot be a member of itself".into());
    }
    Ok(spec)
}

fn list(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c == '+' || c.is_whitespace())
        .filter(|s| !s.is_empty())
}

/// Names an expression may read: registered algorithms and `pilot`.
fn check_names(e: &Expr) -> Result<(), String> {
    for n in e.names() {
        if n != "pilot" {
            member_spec(n).map_err(|m| format!("{n:?} in the expression: {m}"))?;
        }
    }
    Ok(())
}

fn parse_fuse(text: &str) -> Result<Option<Fusion>, String> {
    Ok(match text {
        "max" => Some(Fusion::Max),
        "min" => Some(Fusion::Min),
        "mean" => Some(Fusion::Mean(vec![])),
        "closest" => None,
        _ => {
            let e = Expr::parse(text).map_err(|m| {
                let hint = did_you_mean(text, ["max", "min", "mean", "closest"].into_iter())
                    .map(|k| format!(" (did you mean {k:?}?)"))
                    .unwrap_or_default();
                format!("not max, min, mean or closest{hint}, nor an expression: {m}")
            })?;
            if let Expr::Var(n) = &e
                && n != "pilot"
                && registry::find(n).is_none()
            {
                let words = ["max", "min", "mean", "closest"];
                let names = registry::all().iter().map(|a| a.name);
                let hint = did_you_mean(n, words.into_iter().chain(names))
                    .map(|k| format!(" (did you mean {k:?}?)"))
                    .unwrap_or_default();
                return Err(format!(
                    "{n:?} is not max, min, mean, closest, a member name or an expression{hint}"
                ));
            }
            check_names(&e)?;
            Some(Fusion::Expr(e))
        }
    })
}

fn parse_weights(text: &str) -> Result<Vec<f64>, String> {
    let w: Vec<f64> = list(text)
        .map(|t| {
            t.parse::<f64>()
                .ok()
                .filter(|w| w.is_finite() && *w >= 0.0)
                .ok_or_else(|| format!("weight {t:?} is not a non-negative number"))
        })
        .collect::<Result<_, _>>()?;
    if !w.iter().any(|w| *w > 0.0) {
        return Err("expected numbers joined by +, at least one positive (e.g. 0.7+0.3)".into());
    }
    Ok(w)
}

/// Check one text parameter of PolyCC when it is set (rule files, flags, recipes, requests).
pub fn check_text(key: &str, value: &str) -> Result<(), String> {
    match key {
        "pilot" => member_spec(value).map(|_| ()),
        "copilots" => {
            let mut seen = vec![];
            for n in list(value) {
                let s = member_spec(n)?;
                if seen.contains(&s.name) {
                    return Err(format!("{n:?} is listed twice"));
                }
                seen.push(s.name);
            }
            if seen.is_empty() {
                return Err("expected algorithm names joined by + (e.g. cubic+copa)".into());
            }
            Ok(())
        }
        "fuse" => parse_fuse(value).map(|_| ()),
        "on" => match value {
            "cwnd" | "rate" => Ok(()),
            _ => Err(format!("{value:?}: expected cwnd or rate")),
        },
        "target" => check_names(&Expr::parse(value)?),
        "weights" => parse_weights(value).map(|_| ()),
        _ => Ok(()),
    }
}

impl Policy {
    /// The policy of a parameter set (unset keys take the paper's §3.1 defaults). Errors are those
    /// that need several keys together (a target for `closest`, one weight per member).
    pub fn from_params(p: &ParamSet) -> Result<Policy, String> {
        let pilot = member_spec(p.text("pilot").unwrap_or(DEFAULT_PILOT))?;
        let mut members = vec![pilot];
        for n in list(p.text("copilots").unwrap_or(DEFAULT_COPILOTS)) {
            let s = member_spec(n)?;
            if !members.iter().any(|m| m.name == s.name) {
                members.push(s);
            }
        }
        let on = match p.text("on").unwrap_or(DEFAULT_ON) {
            "rate" => Quantity::Rate,
            "cwnd" => Quantity::Cwnd,
            other => return Err(format!("on: {other:?}: expected cwnd or rate")),
        };
        let fuse = p.text("fuse").unwrap_or(DEFAULT_FUSE);
        let mut fusion = match parse_fuse(fuse).map_err(|m| format!("fuse: {m}"))? {
            Some(f) => f,
            None => {
                let t = p
                    .text("target")
                    .ok_or("fuse=closest needs a target (target=...)")?;
                let e = Expr::parse(t).map_err(|m| format!("target: {m}"))?;
                check_names(&e).map_err(|m| format!("target: {m}"))?;
                Fusion::Closest(e.resolve_pilot(pilot.name))
            }
        };
        if let Fusion::Expr(e) = fusion {
            fusion = Fusion::Expr(e.resolve_pilot(pilot.name));
        }
        // Members named only in an expression join as copilots.
        let named: Vec<String> = match &fusion {
            Fusion::Expr(e) | Fusion::Closest(e) => {
                e.names().into_iter().map(str::to_string).collect()
            }
            _ => vec![],
        };
        for n in named {
            let s = member_spec(&n)?;
            if !members.iter().any(|m| m.name == s.name) {
                members.push(s);
            }
        }
        if let (Fusion::Mean(w), Some(text)) = (&mut fusion, p.text("weights")) {
            *w = parse_weights(text).map_err(|m| format!("weights: {m}"))?;
            if w.len() != members.len() {
                return Err(format!(
                    "weights: {} weights for {} members ({})",
                    w.len(),
                    members.len(),
                    members
                        .iter()
                        .map(|m| m.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Ok(Policy {
            members,
            fusion,
            on,
        })
    }
}

/// Check the PolyCC parameters a flow will run with ([`AlgorithmSpec::check_set`]): the policy
/// of `whole` must hold together ([`Policy::from_params`]), and `own`, the keys the caller's
/// layer gives, may not set weights without `fuse=mean` or a target without `fuse=closest` (as
/// `whole` has it). A flow built from a set whose policy does not hold runs its pilot alone.
/// Members' parameters (`MEMBER.KEY`) of algorithms that are not members are allowed: agent-wide
/// settings give them for every algorithm a policy may take in (a run's seed).
pub fn check_set(whole: &ParamSet, own: &ParamSet) -> Result<(), String> {
    let policy = Policy::from_params(whole)?;
    let fuse = whole.text("fuse").unwrap_or(DEFAULT_FUSE);
    if own.text("weights").is_some() && !matches!(policy.fusion, Fusion::Mean(_)) {
        return Err(format!(
            "weights: only fuse=mean uses weights, and fuse is {fuse}"
        ));
    }
    if own.text("target").is_some() && !matches!(policy.fusion, Fusion::Closest(_)) {
        return Err(format!(
            "target: only fuse=closest uses a target, and fuse is {fuse}"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// One member of the flow's team.
struct Member {
    name: &'static str,
    ctl: Box<dyn Controller>,
    /// The report period it asked for last.
    period: Option<ReportPeriod>,
}

/// The PolyCC controller.
pub struct PolyCc {
    /// Pilot first.
    members: Vec<Member>,
    fusion: Fusion,
    on: Quantity,
    /// Last mean RTT sample, µs (0: none yet): converts an unpaced member's window to a rate.
    rtt_us: u64,
    /// Each member's value at the last fusion (before calibration).
    values: Vec<Option<f64>>,
    fused: Option<f64>,
}

impl PolyCc {
    /// PolyCC for `policy`, members built with `params`' `MEMBER.KEY` settings.
    pub fn new(policy: Policy, params: &ParamSet) -> PolyCc {
        let members: Vec<Member> = policy
            .members
            .iter()
            .map(|spec| Member {
                name: spec.name,
                ctl: (spec.build)(&spec.member_params(params)),
                period: None,
            })
            .collect();
        PolyCc {
            values: vec![None; members.len()],
            members,
            fusion: policy.fusion,
            on: policy.on,
            rtt_us: 0,
            fused: None,
        }
    }

    /// From registry parameters. A policy that only fails when its keys are put together (a
    /// missing target, a wrong number of weights) is logged, once per distinct policy in the
    /// process (a workload starts thousands of flows), and the flow runs its pilot alone.
    pub fn from_params(p: &ParamSet) -> PolyCc {
        match Policy::from_params(p) {
            Ok(policy) => PolyCc::new(policy, p),
            Err(e) => {
                static LOGGED: crate::once::OncePerKey = crate::once::OncePerKey::new();
                if LOGGED.first(&p.to_string()) {
                    error!(
                        error = %e,
                        params = %p,
                        "polycc: bad policy; its flows run the pilot alone (said once per policy)"
                    );
                }
                let pilot = p
                    .text("pilot")
                    .and_then(|n| member_spec(n).ok())
                    .unwrap_or(&crate::bbr::SPEC);
                PolyCc::new(
                    Policy {
                        members: vec![pilot],
                        fusion: Fusion::Max,
                        on: Quantity::Cwnd,
                    },
                    p,
                )
            }
        }
    }

    /// Member names, pilot first.
    pub fn member_names(&self) -> Vec<&'static str> {
        self.members.iter().map(|m| m.name).collect()
    }

    /// Each member's value at the last fusion (before calibration), pilot first.
    pub fn last_values(&self) -> &[Option<f64>] {
        &self.values
    }

    /// The last fused value (`None`: nothing could be fused).
    pub fn last_fused(&self) -> Option<f64> {
        self.fused
    }

    /// A member's value of the fused quantity.
    fn value_of(&self, ctl: &dyn Controller) -> Option<f64> {
        match self.on {
            Quantity::Cwnd => Some(f64::from(ctl.cwnd())),
            Quantity::Rate => match ctl.rate() {
                Some(r) => Some(r as f64),
                None if self.rtt_us > 0 => Some(f64::from(ctl.cwnd()) * 1e6 / self.rtt_us as f64),
                None => None,
            },
        }
    }

    /// Fuse, calibrate the members that differ, and return the pilot's decision with its
    /// calibrated state; `any_period` says whether some member asked for a new report period.
    fn fuse_and_act(&mut self, pilot: Decision, any_period: bool) -> Decision {
        self.values = self
            .members
            .iter()
            .map(|m| self.value_of(m.ctl.as_ref()))
            .collect();
        let names: Vec<&str> = self.members.iter().map(|m| m.name).collect();
        self.fused = self.fusion.fuse(&names, &self.values);
        let mut d = pilot;
        if let Some(f) = self.fused {
            let (fused, target) = match self.on {
                Quantity::Cwnd => {
                    let w = f.round().clamp(1.0, f64::from(u32::MAX)) as u32;
                    (Fused::Cwnd(w), u64::from(w))
                }
                Quantity::Rate => {
                    let r = f.round().max(1.0) as u64;
                    (Fused::Rate(r), r)
                }
            };
            for (i, m) in self.members.iter_mut().enumerate() {
                let own = self.values[i].map(|v| v.round() as u64);
                if own == Some(target) {
                    continue;
                }
                m.ctl.calibrate(fused);
                if i == 0 {
                    // The pilot's calibrated state, in its own control mode, is installed.
                    d.cwnd = Some(m.ctl.cwnd());
                    d.rate = m.ctl.rate().or(d.rate);
                }
            }
        }
        d.report = if any_period {
            self.finest_period()
        } else {
            None
        };
        d
    }

    /// The finest report period any member asked for (per ACK, else the shortest fixed period,
    /// else per RTT).
    fn finest_period(&self) -> Option<ReportPeriod> {
        let rank = |p: &ReportPeriod| match p {
            ReportPeriod::PerAck => 0,
            ReportPeriod::Micros(us) => 1 + *us,
            ReportPeriod::PerRtt => u64::MAX,
        };
        self.members
            .iter()
            .filter_map(|m| m.period)
            .min_by_key(|p| rank(p))
    }

    fn note_period(&mut self, i: usize, d: &Decision) -> bool {
        if let Some(p) = d.report {
            self.members[i].period = Some(p);
            return true;
        }
        false
    }
}

impl Controller for PolyCc {
    fn name(&self) -> &'static str {
        "polycc"
    }

    /// The pilot's control mode.
    fn mode(&self) -> ControlMode {
        self.members[0].ctl.mode()
    }

    fn on_start(&mut self, start: &FlowStart) -> Decision {
        let mut pilot = Decision::none();
        let mut any = false;
        for i in 0..self.members.len() {
            let d = self.members[i].ctl.on_start(start);
            any |= self.note_period(i, &d);
            if i == 0 {
                pilot = d;
            }
        }
        self.fuse_and_act(pilot, any)
    }

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        let sample = if m.rtt_mean_us > 0 {
            m.rtt_mean_us
        } else {
            m.rtt_last_us
        };
        if sample > 0 {
            self.rtt_us = sample;
        }
        let mut pilot = Decision::none();
        let mut any = false;
        for i in 0..self.members.len() {
            let d = self.members[i].ctl.on_measurement(m);
            any |= self.note_period(i, &d);
            if i == 0 {
                pilot = d;
            }
        }
        self.fuse_and_act(pilot, any)
    }

    /// PolyCC as a member of something else: every member adopts the value.
    fn calibrate(&mut self, fused: Fused) {
        for m in &mut self.members {
            m.ctl.calibrate(fused);
        }
    }

    /// Every member takes the flow over.
    fn take_over(&mut self, handed: &TakeOver) {
        for m in &mut self.members {
            m.ctl.take_over(handed);
        }
    }

    /// The pilot's.
    fn ssthresh(&self) -> Option<u32> {
        self.members[0].ctl.ssthresh()
    }

    fn cwnd(&self) -> u32 {
        self.members[0].ctl.cwnd()
    }

    fn rate(&self) -> Option<u64> {
        self.members[0].ctl.rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    const MSS: u32 = 1448;

    fn params(kv: &[(&str, &str)]) -> ParamSet {
        SPEC.params_from(kv.iter().copied()).unwrap()
    }

    fn start() -> FlowStart {
        FlowStart {
            mss: MSS,
            init_cwnd: 10 * MSS,
            now_us: 0,
        }
    }

    /// A synthetic member: a fixed window or rate that it keeps until calibrated, then holds the
    /// calibrated value; it counts its calibrations.
    struct Fixed {
        cwnd: u32,
        rate: Option<u64>,
        calibrations: Arc<AtomicU32>,
    }

    impl Controller for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn mode(&self) -> ControlMode {
            if self.rate.is_some() {
                ControlMode::Rate
            } else {
                ControlMode::Window
            }
        }
        fn on_start(&mut self, _: &FlowStart) -> Decision {
            Decision {
                cwnd: Some(self.cwnd),
                rate: self.rate,
                report: None,
            }
        }
        fn on_measurement(&mut self, _: &Measurement) -> Decision {
            Decision {
                cwnd: Some(self.cwnd),
                rate: self.rate,
                report: Some(ReportPeriod::PerRtt),
            }
        }
        fn calibrate(&mut self, f: Fused) {
            self.calibrations.fetch_add(1, Ordering::Relaxed);
            match f {
                Fused::Cwnd(w) => self.cwnd = w,
                // A window member ignores a rate, like the real ones before an RTT sample.
                Fused::Rate(r) => {
                    if self.rate.is_some() {
                        self.rate = Some(r);
                    }
                }
            }
        }
        fn cwnd(&self) -> u32 {
            self.cwnd
        }
        fn rate(&self) -> Option<u64> {
            self.rate
        }
    }

    fn fixed(cwnd: u32, rate: Option<u64>) -> Member {
        counted(cwnd, rate, Arc::default())
    }

    fn counted(cwnd: u32, rate: Option<u64>, calibrations: Arc<AtomicU32>) -> Member {
        Member {
            name: "fixed",
            ctl: Box::new(Fixed {
                cwnd,
                rate,
                calibrations,
            }),
            period: None,
        }
    }

    /// A team of synthetic members named `names` (pilot first).
    fn team(names: &[&'static str], members: Vec<Member>, fusion: Fusion, on: Quantity) -> PolyCc {
        PolyCc {
            values: vec![None; members.len()],
            members: members
                .into_iter()
                .zip(names)
                .map(|(m, n)| Member { name: n, ..m })
                .collect(),
            fusion,
            on,
            rtt_us: 0,
            fused: None,
        }
    }

    fn report(now_us: u64, rtt_us: u64) -> Measurement {
        Measurement {
            now_us,
            interval_us: rtt_us,
            acked_bytes: 10 * u64::from(MSS),
            acked_packets: 10,
            rtt_min_us: rtt_us,
            rtt_mean_us: rtt_us,
            rtt_max_us: rtt_us,
            rtt_last_us: rtt_us,
            rtt_samples: 10,
            delivery_rate: 1_000_000,
            delivery_rate_max: 1_000_000,
            bytes_in_flight: 20 * u64::from(MSS),
            packets_in_flight: 20,
            cwnd: 20 * u64::from(MSS),
            mss: MSS,
            ..Measurement::default()
        }
    }

    fn fixed_state(p: &PolyCc, i: usize) -> (u32, Option<u64>) {
        (p.members[i].ctl.cwnd(), p.members[i].ctl.rate())
    }

    #[test]
    fn expressions_parse_and_evaluate() {
        let v = |n: &str| match n {
            "bbr" => Some(100.0),
            "cubic" => Some(40.0),
            "copa" => Some(30.0),
            _ => None,
        };
        let ev = |t: &str| Expr::parse(t).unwrap().eval(&v);
        assert_eq!(ev("0.7*bbr + 0.3*cubic"), Some(82.0));
        assert_eq!(ev("max(bbr, min(cubic, 2*copa))"), Some(100.0));
        assert_eq!(ev("min(cubic; 2*copa)"), Some(40.0));
        assert_eq!(ev("mean(bbr,cubic,copa)"), Some(170.0 / 3.0));
        assert_eq!(
            ev("closest(35, bbr, cubic, copa)"),
            Some(40.0),
            "a tie: the first"
        );
        assert_eq!(ev("closest(34, bbr, cubic, copa)"), Some(30.0));
        assert_eq!(ev("-(cubic - bbr) / 2"), Some(30.0));
        assert_eq!(ev("2 - 3 - 4"), Some(-5.0), "left associative");
        assert_eq!(ev("2 + 3 * 4"), Some(14.0), "precedence");
        assert_eq!(ev("1.5e3 * 2"), Some(3000.0));
        assert_eq!(ev("vegas + 1"), None, "no value for vegas");
        assert_eq!(ev("bbr / 0"), None, "not finite");
        assert_eq!(
            Expr::parse("max(bbr, cubic) + copa").unwrap().names(),
            ["bbr", "cubic", "copa"]
        );
        // Hyphenated algorithm names are names; other hyphens are minus signs.
        assert_eq!(
            Expr::parse("max(vivace-distributed, cubic-bbr)")
                .unwrap()
                .names(),
            ["vivace-distributed", "cubic", "bbr"]
        );
        let e = Expr::parse("vivace-distributed - cubic").unwrap();
        assert_eq!(e.names(), ["vivace-distributed", "cubic"]);
        let value = |n: &str| match n {
            "vivace-distributed" => Some(5.0),
            "cubic" => Some(2.0),
            _ => None,
        };
        assert_eq!(e.eval(&value), Some(3.0));
    }

    #[test]
    fn expression_errors_say_where_and_what() {
        let e = Expr::parse("0.7*bbr +").unwrap_err();
        assert!(
            e.contains("character 10") && e.contains("expected a number"),
            "{e}"
        );
        let e = Expr::parse("max(bbr, cubic").unwrap_err();
        assert!(e.contains("expected ')'"), "{e}");
        let e = Expr::parse("maxx(bbr)").unwrap_err();
        assert!(e.contains("unknown function \"maxx\""), "{e}");
        let e = Expr::parse("bbr cubic").unwrap_err();
        assert!(e.contains("expected an operator"), "{e}");
        let e = Expr::parse("closest(bbr)").unwrap_err();
        assert!(e.contains("closest needs a target"), "{e}");
        // Names are checked against the registry when the parameter is set.
        let mut p = SPEC.defaults();
        let e = p
            .set(PARAMS, "fuse", "max(bbr, cubc)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean \"cubic\""), "{e}");
        let e = p.set(PARAMS, "fuse", "mxa").unwrap_err().to_string();
        assert!(e.contains("did you mean \"max\""), "{e}");
    }

    #[test]
    fn fusion_functions_over_synthetic_values() {
        let names = ["a", "b", "c"];
        let vals = [Some(10.0), Some(30.0), None];
        assert_eq!(Fusion::Max.fuse(&names, &vals), Some(30.0));
        assert_eq!(Fusion::Min.fuse(&names, &vals), Some(10.0));
        assert_eq!(Fusion::Mean(vec![]).fuse(&names, &vals), Some(20.0));
        assert_eq!(
            Fusion::Mean(vec![3.0, 1.0, 100.0]).fuse(&names, &vals),
            Some(15.0),
            "a member without a value carries no weight"
        );
        let near = |t: &str| Fusion::Closest(Expr::parse(t).unwrap());
        assert_eq!(near("12").fuse(&names, &vals), Some(10.0));
        assert_eq!(near("b - 1").fuse(&names, &vals), Some(30.0));
        assert_eq!(
            Fusion::Expr(Expr::parse("a + b").unwrap()).fuse(&names, &vals),
            Some(40.0)
        );
        assert_eq!(
            Fusion::Expr(Expr::parse("a + c").unwrap()).fuse(&names, &vals),
            None
        );
        assert_eq!(
            Fusion::Expr(Expr::parse("a - b").unwrap()).fuse(&names, &vals),
            None
        );
        assert_eq!(Fusion::Max.fuse(&names, &[None, None, None]), None);
    }

    #[test]
    fn max_cwnd_calibrates_the_others_and_installs_the_pilot_state() {
        // Pilot: rate-based, cwnd 10 MSS, 1 MB/s; copilot: window 40 MSS.
        let mut p = team(
            &["pilot", "co"],
            vec![fixed(10 * MSS, Some(1_000_000)), fixed(40 * MSS, None)],
            Fusion::Max,
            Quantity::Cwnd,
        );
        let d = p.on_measurement(&report(100_000, 100_000));
        assert_eq!(
            p.last_values(),
            [Some(f64::from(10 * MSS)), Some(f64::from(40 * MSS))]
        );
        assert_eq!(p.last_fused(), Some(f64::from(40 * MSS)));
        assert_eq!(
            fixed_state(&p, 0),
            (40 * MSS, Some(1_000_000)),
            "pilot calibrated"
        );
        assert_eq!(fixed_state(&p, 1), (40 * MSS, None));
        assert_eq!(d.cwnd, Some(40 * MSS), "fused window installed");
        assert_eq!(d.rate, Some(1_000_000), "the pilot's own pacing");
        assert_eq!(d.report, Some(ReportPeriod::PerRtt));
        assert_eq!(p.mode(), ControlMode::Rate, "the pilot's mode");
    }

    #[test]
    fn min_rate_converts_an_unpaced_member_with_the_rtt() {
        // Copilot: a 50-MSS window; at a 100 ms RTT that is 724 kB/s, below the pilot's 1 MB/s.
        let mut p = team(
            &["pilot", "co"],
            vec![fixed(10 * MSS, Some(1_000_000)), fixed(50 * MSS, None)],
            Fusion::Min,
            Quantity::Rate,
        );
        // Before any RTT the window member has no rate: only the pilot counts, nothing changes.
        let d0 = p.on_start(&start());
        assert_eq!(p.last_values()[1], None);
        assert_eq!(d0.rate, Some(1_000_000));
        let d = p.on_measurement(&report(100_000, 100_000));
        let want = u64::from(50 * MSS) * 10;
        assert_eq!(p.last_fused(), Some(want as f64));
        assert_eq!(d.rate, Some(want));
        assert_eq!(d.cwnd, Some(10 * MSS), "the pilot's window is its own");
        assert_eq!(fixed_state(&p, 1).0, 50 * MSS, "the copilot already had it");
    }

    #[test]
    fn only_members_that_differ_are_calibrated() {
        let calls: Vec<Arc<AtomicU32>> = (0..3).map(|_| Arc::default()).collect();
        let mut p = team(
            &["a", "b", "c"],
            vec![
                counted(10 * MSS, None, calls[0].clone()),
                counted(30 * MSS, None, calls[1].clone()),
                counted(20 * MSS, None, calls[2].clone()),
            ],
            Fusion::Max,
            Quantity::Cwnd,
        );
        let n = |i: usize| calls[i].load(Ordering::Relaxed);
        let d = p.on_measurement(&report(1, 100_000));
        assert_eq!(d.cwnd, Some(30 * MSS));
        assert_eq!([n(0), n(1), n(2)], [1, 0, 1], "b had the maximum");
        for i in 0..3 {
            assert_eq!(fixed_state(&p, i).0, 30 * MSS);
        }
        // Everyone agrees now: nobody is calibrated again.
        p.on_measurement(&report(2, 100_000));
        assert_eq!([n(0), n(1), n(2)], [1, 0, 1]);
    }

    #[test]
    fn weighted_mean_and_user_expression_policies() {
        let p = params(&[
            ("pilot", "bbr"),
            ("copilots", "cubic"),
            ("fuse", "mean"),
            ("weights", "0.7+0.3"),
        ]);
        let pol = Policy::from_params(&p).unwrap();
        assert_eq!(pol.fusion, Fusion::Mean(vec![0.7, 0.3]));
        // Wrong number of weights.
        let p = params(&[("fuse", "mean"), ("weights", "1+1+1")]);
        let e = Policy::from_params(&p).unwrap_err();
        assert!(e.contains("3 weights for 2 members (bbr, cubic)"), "{e}");
        // A member named only in the expression joins; `pilot` is the pilot.
        let p = params(&[("fuse", "max(pilot, min(cubic, 2*copa))"), ("on", "rate")]);
        let pol = Policy::from_params(&p).unwrap();
        let names: Vec<&str> = pol.members.iter().map(|m| m.name).collect();
        assert_eq!(names, ["bbr", "cubic", "copa"]);
        assert_eq!(pol.on, Quantity::Rate);
        assert_eq!(
            Expr::parse("max(bbr, min(cubic, 2*copa))")
                .map(Fusion::Expr)
                .unwrap(),
            pol.fusion
        );
        // closest needs a target.
        let p = params(&[("fuse", "closest")]);
        assert!(
            Policy::from_params(&p)
                .unwrap_err()
                .contains("needs a target")
        );
        let p = params(&[("fuse", "closest"), ("target", "250000")]);
        assert!(matches!(
            Policy::from_params(&p).unwrap().fusion,
            Fusion::Closest(_)
        ));
    }

    #[test]
    fn policy_keys_are_checked_when_set() {
        let mut p = SPEC.defaults();
        assert!(
            p.set(PARAMS, "pilot", "bbrr")
                .unwrap_err()
                .to_string()
                .contains("did you mean \"bbr\"")
        );
        assert!(p.set(PARAMS, "pilot", "polycc").is_err());
        assert!(
            p.set(PARAMS, "copilots", "cubic+cubic")
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        assert!(p.set(PARAMS, "on", "window").is_err());
        assert!(p.set(PARAMS, "weights", "0+0").is_err());
        assert!(p.set(PARAMS, "cubic.beta", "0.8").is_ok());
        let e = p.set(PARAMS, "cubic.betta", "0.8").unwrap_err().to_string();
        assert!(e.contains("did you mean \"beta\""), "{e}");
        assert!(p.set(PARAMS, "cubic.beta", "10ms").is_err());
        assert!(p.set(PARAMS, "nosuch.x", "1").is_err());
        p.set(PARAMS, "copilots", "cubic copa").unwrap();
        // Member parameters reach the member.
        let mp = crate::cubic::SPEC.member_params(&p);
        assert_eq!(mp.get("beta"), 0.8);
        let pol = Policy::from_params(&p).unwrap();
        assert_eq!(
            pol.members.iter().map(|m| m.name).collect::<Vec<_>>(),
            ["bbr", "cubic", "copa"]
        );
        assert!(p.to_string().contains("cubic.beta=0.8"), "{p}");
    }

    #[test]
    fn policies_are_data_in_rules_flags_and_requests() {
        use crate::adapter::WallTime;
        use crate::agent::rules::{FlowKey, Rules};
        use crate::agent::{AgentCore, parse_param_settings, split_requested};
        use std::collections::HashMap;
        // A rule file.
        let rules = Rules::parse(
            "r.yaml",
            "rules:\n  - match: {dst_port: 5201}\n    algorithm: polycc\n    params:\n      \
             pilot: bbr\n      copilots: copa\n      fuse: min\n      on: rate\n      \
             copa.delta: 0.1\n",
        )
        .unwrap();
        let core = AgentCore::new(
            registry::find("cubic").unwrap(),
            HashMap::new(),
            rules,
            None,
            Arc::new(WallTime::default()),
        );
        let key = |port, requested: &str| FlowKey {
            dst_port: port,
            requested: requested.into(),
            ..FlowKey::default()
        };
        let (spec, p, _) = core.choose(&key(5201, ""));
        assert_eq!(spec.name, "polycc");
        assert_eq!(
            (p.text("copilots"), p.text("on"), p.text("copa.delta")),
            (Some("copa"), Some("rate"), Some("0.1"))
        );
        let pol = Policy::from_params(&p).unwrap();
        assert_eq!((pol.fusion, pol.on), (Fusion::Min, Quantity::Rate));
        assert_eq!(crate::copa::SPEC.member_params(&p).get("delta"), 0.1);
        // A flow's request, with an expression whose commas sit inside parentheses.
        let (spec, p, _) =
            core.choose(&key(80, "polycc:fuse=max(bbr, min(cubic, 2*copa)),on=rate"));
        assert_eq!(spec.name, "polycc");
        assert_eq!(p.text("fuse"), Some("max(bbr, min(cubic, 2*copa))"));
        assert_eq!(split_requested("polycc:fuse=min(a,b),on=rate").1.len(), 2);
        // Agent flags.
        let flags = parse_param_settings(&["polycc.copilots=cubic+copa".into()]).unwrap();
        assert_eq!(flags["polycc"].text("copilots"), Some("cubic+copa"));
        assert!(parse_param_settings(&["polycc.on=cwnds".into()]).is_err());
        // A bad rule is refused at load.
        assert!(
            Rules::parse(
                "r.yaml",
                "rules:\n  - algorithm: polycc\n    params: {pilot: bbrr}\n"
            )
            .is_err()
        );
    }

    #[test]
    fn whole_sets_refuse_keys_that_contradict_or_are_ignored() {
        let check = |kv: &[(&str, &str)]| SPEC.check_set(&params(kv), &params(kv));
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(check(&[("fuse", "mean"), ("weights", "2+1")]), Ok(()));
        assert_eq!(check(&[("fuse", "closest"), ("target", "1.2*bbr")]), Ok(()));
        // Settings for algorithms that may become members (agent-wide seeds) are allowed.
        assert_eq!(
            check(&[("copa.delta", "0.1"), ("hercules.seed", "7")]),
            Ok(())
        );
        for (kv, expected) in [
            (
                &[("weights", "0.7+0.3")][..],
                "weights: only fuse=mean uses weights, and fuse is max",
            ),
            (
                &[("fuse", "mean"), ("target", "250000")],
                "target: only fuse=closest uses a target, and fuse is mean",
            ),
            (
                &[("fuse", "closest")],
                "fuse=closest needs a target (target=...)",
            ),
            (
                &[("fuse", "mean"), ("weights", "1+1+1")],
                "weights: 3 weights for 2 members (bbr, cubic)",
            ),
        ] {
            assert_eq!(check(kv).unwrap_err(), expected, "{kv:?}");
        }
        // Agent-wide settings are not whole: a rule or a request completes them. Only for the
        // default algorithm, which flows run with as they are, are they checked whole.
        let flags = crate::agent::parse_param_settings(&["polycc.fuse=closest".into()]).unwrap();
        let e = crate::agent::check_default_settings(&SPEC, &flags).unwrap_err();
        assert_eq!(
            e,
            "the default algorithm polycc's settings: fuse=closest needs a target (target=...)"
        );
        assert!(crate::agent::check_default_settings(&crate::cubic::SPEC, &flags).is_ok());
        // A request laid over them: contradictions count in the whole, ignored keys only among
        // the request's own (an inherited target cannot be unset).
        let flags = crate::agent::parse_param_settings(&[
            "polycc.fuse=closest".into(),
            "polycc.target=2e5".into(),
        ])
        .unwrap();
        let over = |req: &str| {
            crate::agent::live::parse_algorithm(req, |s| {
                flags.get(s.name).cloned().unwrap_or_else(|| s.defaults())
            })
        };
        assert!(over("polycc").is_ok());
        assert!(over("polycc:fuse=max").is_ok());
        let e = over("polycc:fuse=max,target=1e5").unwrap_err();
        assert!(e.contains("only fuse=closest uses a target"), "{e}");
        let e = over("polycc:fuse=mean,weights=1+1+1").unwrap_err();
        assert!(e.contains("3 weights for 2 members"), "{e}");
        // A live switch is whole (and a recipe's commands go through the same parser).
        let e = crate::agent::live::parse_algorithm("polycc:fuse=closest", |s| s.defaults())
            .unwrap_err();
        assert!(e.contains("fuse=closest needs a target"), "{e}");
        assert!(
            crate::agent::live::parse_algorithm("polycc:fuse=closest,target=2e5", |s| {
                s.defaults()
            })
            .is_ok()
        );
    }

    /// Drive `a` and `b` with the same measurements of a simple fluid path and require identical
    /// decisions and state throughout.
    fn same_decisions(a: &mut dyn Controller, b: &mut dyn Controller) {
        assert_eq!(a.on_start(&start()), b.on_start(&start()));
        let mut now = 0u64;
        let mut inflight = 10 * u64::from(MSS);
        for i in 0..400u64 {
            let rtt = 40_000 + (i % 7) * 3_000 + if i % 50 > 45 { 60_000 } else { 0 };
            now += 10_000;
            let cwnd = u64::from(a.cwnd());
            let rate = a.rate().unwrap_or(cwnd * 1_000_000 / rtt);
            let acked = (rate.min(2_500_000) / 100).max(u64::from(MSS));
            inflight = (inflight + acked).min(cwnd.max(u64::from(MSS)));
            let m = Measurement {
                now_us: now,
                interval_us: 10_000,
                acked_bytes: acked,
                acked_packets: acked / u64::from(MSS),
                lost_packets: u64::from(i % 97 == 96),
                rtt_min_us: rtt - 1_000,
                rtt_mean_us: rtt,
                rtt_max_us: rtt + 1_000,
                rtt_last_us: rtt,
                rtt_samples: 4,
                delivery_rate: rate.min(2_500_000),
                delivery_rate_max: rate.min(2_500_000),
                bytes_in_flight: inflight,
                packets_in_flight: inflight / u64::from(MSS),
                bytes_pending: 1 << 20,
                cwnd,
                rate: a.rate().unwrap_or(0),
                mss: MSS,
                ..Measurement::default()
            };
            let (da, db) = (a.on_measurement(&m), b.on_measurement(&m));
            assert_eq!(da, db, "report {i}");
            assert_eq!((a.cwnd(), a.rate()), (b.cwnd(), b.rate()), "report {i}");
            assert_eq!(a.mode(), b.mode());
        }
    }

    #[test]
    fn a_single_member_behaves_exactly_like_that_member() {
        for (alg, fuse, on) in [
            ("bbr", "max", "cwnd"),
            ("cubic", "min", "rate"),
            ("copa", "mean", "rate"),
            ("reno", "max", "cwnd"),
            ("vivace", "min", "rate"),
            ("vegas", "closest", "cwnd"),
            ("bbr", "0.5*bbr+0.5*pilot", "rate"),
        ] {
            let spec = registry::find(alg).unwrap();
            let mut alone = (spec.build)(&spec.defaults());
            // A policy with only a pilot: copilots would default to cubic, so name the pilot.
            let mut p = params(&[
                ("pilot", alg),
                ("copilots", alg),
                ("fuse", fuse),
                ("on", on),
                ("target", "100000"),
            ]);
            p.set(PARAMS, "weights", "2").unwrap();
            let mut poly = PolyCc::from_params(&p);
            assert_eq!(poly.member_names(), [alg]);
            same_decisions(&mut poly, alone.as_mut());
        }
    }

    #[test]
    fn member_parameters_change_the_member() {
        // Reno's beta 0.5 versus 0.8 through PolyCC: a loss cuts to a different window.
        let run = |beta: &str| {
            let p = params(&[("pilot", "reno"), ("copilots", "reno"), ("reno.beta", beta)]);
            let mut poly = PolyCc::from_params(&p);
            poly.on_start(&start());
            let mut m = report(100_000, 100_000);
            m.bytes_in_flight = 40 * u64::from(MSS);
            for i in 1..6 {
                m.now_us = i * 100_000;
                poly.on_measurement(&m);
            }
            let before = poly.cwnd();
            m.now_us = 700_000;
            m.lost_packets = 1;
            poly.on_measurement(&m);
            f64::from(poly.cwnd()) / f64::from(before)
        };
        let (half, eight) = (run("0.5"), run("0.8"));
        assert!((half - 0.5).abs() < 0.05, "{half}");
        assert!((eight - 0.8).abs() < 0.05, "{eight}");
    }

    #[test]
    fn bbr_with_cubic_max_cwnd_never_installs_less_than_either() {
        let p = params(&[]); // the defaults: pilot bbr, copilot cubic, max, cwnd
        let mut poly = PolyCc::from_params(&p);
        assert_eq!(poly.member_names(), ["bbr", "cubic"]);
        let bbr = &crate::bbr::SPEC;
        let mut alone = (bbr.build)(&bbr.defaults());
        poly.on_start(&start());
        alone.on_start(&start());
        for i in 1..200u64 {
            let m = report(i * 20_000, 100_000);
            let d = poly.on_measurement(&m);
            let vals = poly.last_values().to_vec();
            let most = vals.iter().flatten().copied().fold(0.0, f64::max);
            assert_eq!(d.cwnd.map(f64::from), Some(most), "report {i}: {vals:?}");
            assert!(d.rate.is_some(), "bbr paces");
        }
    }

    #[test]
    fn bbr_piloting_under_a_cubic_window_keeps_pacing_at_the_link_past_probe_rtt() {
        // The default policy on an ideal 20 Mbit/s, 40 ms path. CUBIC's window (never cut: the
        // flow is paced, nothing is lost) holds the flow's window far above BBR's ProbeRTT
        // window, so BBR's ProbeRTT cannot drain the flight. Waiting for that drain, BBR stayed
        // in ProbeRTT from 10 s on, at gain 1 with no probing, and its pacing rate (the flow's)
        // fell by 1-2 % a second: 19.8 Mbit/s at 10 s, 13.4 at 30 s.
        let mut c = crate::test_support::started(PolyCc::from_params(&params(&[])));
        let mut path = crate::filters::path::Path::new(20.0, 40_000);
        path.start(&mut c);
        // The pacing rate every 100 ms; its median over each 5-s window from 5 s on (the gain
        // cycle puts single samples at 0.75 and 1.25 of it).
        let mut rates = vec![];
        for k in 1..=300 {
            path.run_observed(&mut c, f64::from(k) * 1e5, |_, _| {});
            rates.push(c.rate().unwrap() as f64 * 8e-6);
        }
        for w in rates[50..].chunks(50) {
            let mut w = w.to_vec();
            w.sort_by(f64::total_cmp);
            let median = w[w.len() / 2];
            assert!(
                median > 0.95 * 19.8,
                "median pacing {median:.2} Mbit/s: {rates:.1?}"
            );
        }
    }
    #[test]
    fn a_cubic_copilot_under_a_paced_pilot_stops_growing_its_window() {
        // The default policy on an ideal 20 Mbit/s, 40 ms path with an unbounded queue. BBR
        // paces the flow; CUBIC's window does not limit it after Startup, so CUBIC no longer
        // grows it (RFC 9438 §5.8). Grown on every acknowledged byte, it reached 65 MB in 30 s
        // and max(cwnd) installed it: no window bounded the flow any longer.
        let run = |limited: &str| {
            let p = params(&[("cubic.limited-growth", limited)]);
            let mut c = crate::test_support::started(PolyCc::from_params(&p));
            let mut path = crate::filters::path::Path::new(20.0, 40_000);
            path.start(&mut c);
            path.run_observed(&mut c, 3e6, |_, _| {});
            let at_3s = c.cwnd();
            path.run_observed(&mut c, 30e6, |_, _| {});
            (f64::from(at_3s), f64::from(c.cwnd()))
        };
        // Startup's queue put about 2 MB in flight; slow start allows twice that. From then on
        // the window stays where Startup left it.
        let (w3, w30) = run("true");
        assert_eq!(w30, w3, "window at 3 s {w3}, at 30 s {w30}");
        assert!(w30 < 5e6, "{w30}");
        let (o3, o30) = run("false");
        assert!(
            o30 > 10.0 * o3,
            "growing on every byte: {o3} at 3 s, {o30} at 30 s"
        );
    }
}
