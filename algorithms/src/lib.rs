//! The algorithm library of the congestion control plane, and the `ccp-agent` that hosts it.
//!
//! - [`controller`]: the seam every algorithm implements (measurements in, decisions out).
//! - [`params`], [`registry`]: parameters with units and defaults; every algorithm by name.
//! - [`program`]: the one shared measurement datapath program and its report decoding.
//! - [`adapter`]: turns any controller into a portus flow.
//! - [`reno`], [`cubic`]: the classic window algorithms.
//! - [`agent`]: rules, IPC and the runtime of the `ccp-agent` binary.

pub mod adapter;
pub mod agent;
pub mod config;
pub mod controller;
pub mod cubic;
pub mod params;
pub mod program;
pub mod registry;
pub mod reno;
pub mod window;

pub use controller::{
    ControlMode, Controller, Decision, FlowStart, Fused, Measurement, ReportPeriod,
};
