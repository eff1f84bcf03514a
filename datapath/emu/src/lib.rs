//! `ccp-emu`: a link emulator with mahimahi's semantics, so congestion control algorithms can
//! be run against real Linux TCP (cubic, bbr, reno) and the project's UDP datapath on the same
//! emulated bottleneck.
//!
//! Like mahimahi, every shell runs a command in a new network namespace whose only interface is
//! a TUN device; the emulator reads each packet from one TUN device and writes it, at its
//! emulated departure time, to the TUN device on the other side. Shells nest
//! (`ccp-emu delay 20 -- ccp-emu link up down -- CMD`), and the inner command finds the outer
//! side at `$MAHIMAHI_BASE` / `$CCP_EMU_BASE`. A [`Testbed`] puts several sender hosts and one
//! receiver host behind one shared bottleneck.
//!
//! Layers, from the bottom:
//! - [`trace`], [`queue`], [`link`], [`stage`], [`log`]: the emulation itself, pure functions of
//!   packet arrivals and a µs clock (unit-tested with a virtual clock);
//! - [`packet`]: datagrams and the header edits the emulator makes (ECN CE marking);
//! - [`sys`]: TUN devices, interface and route ioctls, namespaces that die with the emulator;
//! - [`engine`]: the forwarding threads that move packets between TUN devices on a real clock;
//! - [`addr`]: address blocks that let shells nest;
//! - [`shell`], [`testbed`]: what users run; [`cleanup`]: the sweep for leftovers;
//! - [`tcp`]: kernel TCP flows between testbed hosts (Linux's own congestion control).
//!
//! A testbed, as the experiment runner uses it (needs root):
//!
//! ```no_run
//! use ccp_emu::{DelayConfig, LinkConfig, QueueConfig, Testbed, TestbedConfig};
//! use std::process::Command;
//! use std::time::Duration;
//!
//! let tb = Testbed::new(TestbedConfig {
//!     senders: 2,
//!     uplink: Some(LinkConfig::rate(50_000_000 / 8).with_queue(QueueConfig::droptail_packets(170))),
//!     delay: DelayConfig::fixed(Duration::from_millis(20)),
//!     ..Default::default()
//! })?;
//! let mut server = tb.spawn(tb.receiver(), Command::new("iperf3").args(["-s", "-1"]))?;
//! let receiver = tb.receiver().addr.to_string();
//! let mut client = tb.spawn(
//!     &tb.senders()[0],
//!     Command::new("iperf3").args(["-c", &receiver, "-C", "cubic", "-t", "10"]),
//! )?;
//! client.wait().ok();
//! server.wait().ok();
//! let (uplink, _downlink) = tb.shutdown(); // counters; everything is removed
//! println!("{} packets dropped at the bottleneck", uplink.dropped_pkts);
//! # Ok::<(), ccp_emu::EmuError>(())
//! ```

pub mod addr;
pub mod cleanup;
pub mod engine;
pub mod error;
pub mod link;
pub mod log;
pub mod packet;
pub mod queue;
pub mod shell;
pub mod stage;
pub mod sys;
pub mod tcp;
pub mod testbed;
pub mod trace;

pub use error::{EmuError, Result};
pub use link::{EcnThreshold, LinkConfig, Service};
pub use queue::{QueueConfig, QueueKind};
pub use shell::{Shell, ShellConfig};
pub use stage::{DelayConfig, PathConfig, StageStats};
pub use testbed::{Host, ServiceHostConfig, Testbed, TestbedConfig};
pub use trace::{Schedule, Trace};
