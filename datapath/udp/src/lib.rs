//! `ccp-udp`: a real, reliable userspace transport over UDP whose congestion window and pacing
//! rate come from a [`cc::FlowController`] — the CCP agent through libccp, or the built-in
//! [`reno::BuiltinReno`].
//!
//! A sender runs one thread and one UDP socket per flow; a receiver serves any number of flows
//! on one socket. The protocol is QUIC-like: a HELLO handshake, DATA packets with never-reused
//! packet numbers (retransmissions get new ones, so every RTT sample is unambiguous) and stream
//! offsets, ACKs with up to 32 ranges, the echoed send timestamp and the receive timestamp of the
//! same packet (for the one-way delay), the ACK delay, the receiver's contiguous offset and its
//! ECN-CE count, and a FIN carrying the stream's length and xxh3-128 hash so the receiver can
//! prove the stream arrived intact. Payloads are a deterministic
//! pattern of the flow id and offset ([`pattern`]), so reordering or duplication bugs change
//! the hash.
//!
//! Both ends time what they receive by when the kernel received it (`SO_TIMESTAMPNS`), not when
//! they read their socket (module `arrival`), as a kernel TCP stack does. The sender's RTT and
//! delivery-rate samples then leave out the time an ACK waited in its socket while it was
//! sending or descheduled: on the emulator this kept BBR's max-filtered bandwidth estimate
//! within its 1 % pacing margin at the median of each run, and its queue short
//! (docs/results/datapaths.md, "ACK timing"; `tests/tests/emu_baselines.rs`). The receive
//! timestamp the receiver echoes (the one-way delay) leaves out the time data waited in its
//! socket, and the ACK delay it reports includes it, which the sender takes out of its RTT
//! samples up to [`rtt::MAX_ACK_DELAY_US`] (as QUIC does its peer's). On loopback, where the
//! receiver's socket is the only queue, the one-way delay therefore shows no queue. Where the
//! kernel gives no stamp, a datagram is timed when read.
//!
//! Module map:
//! * [`cc`]: the seam to controllers ([`cc::FlowController`], [`cc::AckSample`], [`cc::FlowMeta`]);
//! * [`packet`]: the wire format; [`pattern`]: stream content;
//! * [`sender`]: [`run_sender`] ([`run_sender_announcing`] also reports each flow's source
//!   address as it starts) and the per-flow state machine (loss detection, recovery,
//!   GSO batching, pacing, samples, trace); [`rtt`] and [`pacing`] hold its estimators;
//! * [`receiver`]: [`run_receiver`], reassembly, hashing and the ACK policy; [`ranges`] keeps
//!   the received packet numbers;
//! * [`io`]: sockets, GSO/GRO, ECN, receive timestamps, batched system calls (the only `unsafe`
//!   code); `arrival` dates received datagrams by their timestamps;
//! * [`reno`]: [`reno::BuiltinReno`]; [`relay`]: a seeded lossy relay for tests;
//! * [`summary`]: per-flow reports and trace CSV; [`error`]: [`Error`];
//! * [`cli`]: command-line option groups and helpers the datapath binaries share.
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use ccp_udp::{Amount, FlowSpec, ReceiverConfig, SenderConfig, reno::BuiltinReno};
//!
//! let stop = AtomicBool::new(false);
//! let cfg = SenderConfig {
//!     dest: "127.0.0.1:4433".parse().unwrap(),
//!     flows: vec![FlowSpec { amount: Amount::Bytes(1 << 30), ..FlowSpec::default() }],
//!     ..SenderConfig::default()
//! };
//! let make = |m: &ccp_udp::cc::FlowMeta| -> Box<dyn ccp_udp::cc::FlowController> {
//!     Box::new(BuiltinReno::new(m.mss, m.init_cwnd))
//! };
//! let summaries = ccp_udp::run_sender(&cfg, &make, &stop)?;
//! println!("{:.0} Mbit/s", summaries[0].goodput_mbps);
//! # Ok::<(), ccp_udp::Error>(())
//! ```

mod arrival;
pub mod cc;
pub mod ccp;
pub mod cli;
pub mod error;
pub mod io;
pub mod pacing;
pub mod packet;
pub mod pattern;
pub mod ranges;
pub mod receiver;
pub mod relay;
pub mod reno;
pub mod rtt;
pub mod sender;
pub mod summary;

pub use error::Error;
pub use receiver::{ReceiverConfig, ReceiverReport, run_receiver, run_receiver_report};
pub use relay::{RelayConfig, RelayStats, run_relay};
pub use sender::{
    Amount, ControllerFactory, FlowSpec, FlowStart, SenderConfig, StartHook, run_sender,
    run_sender_announcing,
};
pub use summary::{ReceiverSummary, SenderSummary, TraceSample};
