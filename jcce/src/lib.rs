//! JCCE, the JointCloud Collaboration Environment's aggregation service for Vivace-Distributed.
//!
//! Every Vivace-Distributed flow publishes its delivered throughput once per monitor interval
//! (MI) under a group id; JCCE answers with the group's aggregate `T_avg` (the mean over the
//! group's live members, paper §5.1 eq. 16) and the member count `n`, never another member's
//! value. One JCCE process serves every agent of a JointCloud, across hosts.
//!
//! * [`core`]: the pure, deterministic aggregation core (time is an argument). The simulator
//!   embeds it directly, adding its own simulated latency.
//! * [`wire`]: the datagram format, HMAC-SHA256 authentication and replay protection.
//! * [`server`]: the tokio UDP service (`jcce serve`) and its metrics.
//! * [`client`]: the agent's non-blocking client (publish and read from a synchronous callback).
//! * [`publisher`]: a receiver publishing what other flows (the kernel's TCP) deliver.
//! * [`sim`]: the core in virtual time with simulated one-way latencies, for the simulator.
//! * [`bench`](mod@bench): the load generator behind `jcce bench`.
//!
//! See README.md in this crate for the protocol and the privacy notes.

pub mod bench;
pub mod client;
pub mod core;
pub mod publisher;
pub mod server;
pub mod sim;
pub mod wire;

/// Errors of the service, metrics and benchmark entry points.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("invalid configuration: {0}")]
    Config(#[from] core::ConfigError),
    #[error("no reply from {addr}: {source}")]
    NoReply {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("unreadable metrics reply: {0}")]
    Metrics(#[from] serde_json::Error),
    #[error("invalid benchmark: {0}")]
    Bench(&'static str),
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

pub use client::{Client, ClientConfig, GroupAggregate, Member, Reachability};
pub use core::{Aggregate, Applied, Core, CoreConfig, Micros, Outcome};
pub use server::{Metrics, Server, Service, ServiceConfig};
pub use wire::Key;
