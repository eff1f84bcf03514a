//! `ccp-quic`: QUIC flows (s2n-quic) whose congestion controller is the CCP agent through
//! libccp — the same controllers, agent and algorithms as the udp datapath (`ccp-udp`), on a
//! real, maintained QUIC stack.
//!
//! Why s2n-quic: its `unstable-congestion-controller` provider hands the whole controller to
//! the application — window, bytes in flight, and pacing through
//! `earliest_departure_time`, so rate-based algorithms (Vivace, Hercules, PolyCC) pace QUIC
//! packets themselves. quinn's `Controller` trait only supplies a window; its pacer derives
//! the rate from window / RTT, so a rate an algorithm sets cannot be enforced there.
//!
//! How a flow runs: the sender gives every flow its own s2n-quic client (own UDP socket) whose
//! congestion-controller provider is a [`controller::CcpEndpoint`]; when the stack creates the
//! flow's path, the endpoint asks the flow's [`controller::Factory`] — usually
//! `ccp_udp::ccp::ControlPlane::controller`, which opens a libccp connection at the agent with
//! the algorithm the flow names — for a `ccp_udp::cc::FlowController` and turns the stack's
//! ack, loss, ECN and RTT callbacks into its per-ACK primitives. The agent's window and rate
//! then govern the QUIC packets; when the agent is away the control plane's built-in Reno
//! takes over, exactly as in the udp datapath.
//!
//! Module map:
//! * [`controller`]: the s2n-quic congestion controller over a `FlowController`, pacing, ticks;
//! * [`io`]: the endpoints' I/O provider, s2n-quic's socket tasks and event loop on a timer
//!   precise enough for a packet to leave at its pacing time;
//! * [`sender`]: [`run_sender`], one client endpoint and one stream per flow;
//! * [`receiver`]: [`run_receiver`], one server endpoint, verification of every flow;
//! * [`wire`]: what the stream carries (header, pattern content, trailer or reset), the
//!   receiver's check of every byte against the pattern, and the verdict;
//! * [`tls`]: the receiver's self-signed certificate, made at start;
//! * [`arrivals`]: what reached the receiver when, and which stream bytes the sender saw
//!   acknowledged, from s2n-quic's connection events;
//! * [`summary`]: per-flow reports, in the udp datapath's JSON shape; [`error`]: [`Error`].

pub mod arrivals;
pub mod controller;
pub mod error;
pub mod io;
pub mod receiver;
pub mod sender;
pub mod summary;
pub mod tls;
pub mod wire;

pub use error::Error;
pub use receiver::{DEFAULT_MAX_ACK_DELAY, ReceiverConfig, run_receiver};
pub use sender::{SenderConfig, run_sender};
pub use summary::{ReceiverSummary, SenderSummary};
