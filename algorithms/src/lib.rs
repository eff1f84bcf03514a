//! The algorithm library of the congestion control plane, and the `ccp-agent` that hosts it.
//!
//! - [`controller`]: the seam every algorithm implements (measurements in, decisions out).
//! - [`params`], [`registry`]: parameters with units and defaults; every algorithm by name.
//! - [`program`]: the one shared measurement datapath program and its report decoding.
//! - [`adapter`]: turns any controller into a portus flow.
//! - [`reno`], [`cubic`]: the classic window algorithms.
//! - [`bbr`], [`copa`], [`vegas`]: the delay- and model-based baselines; [`filters`]: the
//!   estimators they share (windowed min/max filters, round counting, srtt, report period).
//! - [`dctcp`], [`ledbat`], [`timely`]: the datacenter and background baselines (ECN fraction,
//!   delay target, RTT gradient).
//! - [`mi`]: the monitor-interval engine of the online learners; [`vivace`]: PCC Vivace on it;
//!   [`hercules`]: Hercules on it (per-flow requirements, HRF fairness).
//! - [`paccp`]: price-aware Reno with per-flow (θ, ω) classes (BE, DS, MRG).
//! - [`rtcp`]: Regulated TCP (counter H, desired rate, delay-regulated window).
//! - [`polycc`]: several algorithms on one flow, their windows or rates fused by a policy.
//! - [`vivace_distributed`]: Vivace with the group's mean throughput from JCCE; [`aggregator`]:
//!   how a flow reaches JCCE (the real service or its simulated core).
//! - [`agent`]: rules, IPC and the runtime of the `ccp-agent` binary.

pub mod adapter;
pub mod agent;
pub mod aggregator;
pub mod bbr;
pub mod config;
pub mod controller;
pub mod copa;
pub mod cubic;
pub mod dctcp;
pub mod filters;
pub mod hercules;
pub mod ledbat;
pub mod mi;
pub mod once;
pub mod paccp;
pub mod params;
pub mod polycc;
pub mod program;
pub mod registry;
pub mod reno;
pub mod rtcp;
#[cfg(test)]
mod test_support;
pub mod timely;
pub mod vegas;
pub mod vivace;
pub mod vivace_distributed;
pub mod window;

/// The log target of an algorithm's mode changes (a service in use or lost, a fallback taken
/// or left): logged at `info` or `warn` under this target, so that a runner keeping only
/// warnings from everything else can keep them with the directive `ccp_mode=info`, whatever
/// the algorithm.
pub const MODE_LOG: &str = "ccp_mode";

pub use controller::{
    ControlMode, Controller, Decision, FlowStart, Fused, Measurement, ReportPeriod,
};
