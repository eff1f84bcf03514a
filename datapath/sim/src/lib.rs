//! `ccp-sim`: a deterministic discrete-event network simulator whose hosts run the project's
//! libccp-compatible datapath engine, and whose agent is the real `ccp-agent` core (every
//! algorithm of `ccp-algorithms`, on the portus 0.9 runtime), all in virtual time.
//!
//! It exists for the experiments a 2-core machine cannot emulate in real time: datacenter
//! fabrics at 10-40 Gbit/s, thousands of flows, incast. No algorithm is reimplemented here: a
//! flow asks for `reno` or `cubic:beta=0.8` in its Create message exactly as a real datapath
//! does, and the agent routes it.
//!
//! # How it fits together
//!
//! * Every sending flow is a connection of one [`ccp_engine::Engine`] whose [`ccp_engine::Clock`]
//!   is the simulator's [`VirtualClock`]. The simulated transport ([`transport`]) calls
//!   `Engine::invoke` with libccp's primitives on every ACK and on a timer while no ACK comes,
//!   and applies the window and rate the engine sets.
//! * The agent is `AgentCore` + `Pool` from `ccp_algorithms::agent`, with the virtual clock as
//!   its `TimeSource`, run by `portus::RunBuilder` in the caller's thread. Its IPC is
//!   [`ipc::SimIpc`] behind the agent's own `Screened` wrapper (which records the algorithm each
//!   Create asks for). `SimIpc::recv` runs the event loop until the next datapath-to-agent
//!   message is due (one IPC delay, 20 µs by default, after it was sent) and returns it;
//!   `SimIpc::send` schedules the agent's message for the engine one IPC delay later. When the
//!   scenario ends, `recv` clears portus's stop flag and fails, and [`run`] returns.
//! * The event core ([`event`]) orders events by time, then samples first, then insertion
//!   order. Ports ([`link`]) keep their own packets (queue, transmitter, wire) and schedule only
//!   the next event of each kind, so the heap stays small.
//!
//! # Determinism
//!
//! The same scenario and seed give byte-identical output files: time is integer ns; ties are
//! broken by insertion order; every random component (each queue's RED, each wire's loss and
//! jitter, each workload generator) has its own seeded ChaCha8 stream (`seed`, stream
//! `kind << 32 | index`); tables that reach the outputs are vectors or `BTreeMap`s; nothing reads
//! the wall clock. Several simulations may run at once in one process (each has its own engine,
//! agent core and clock); portus's process-wide program-uid counter only changes uids inside
//! messages, never what is measured.
//!
//! # Output files ([`write_outputs`])
//!
//! * `scenario.yaml`: the scenario as run, with the seed used.
//! * `summary.json`: `name`, `seed`, `duration_ns`, `end_ns`; `counters` (events, data and ACK
//!   packets, engine invocations, IPC messages each way, errors, flows); `agent` (flows created
//!   and closed, reports, updates, flows per algorithm); `flows` (`total`, `completed`);
//!   `classes`: per class label (`-` for none) `flows`, `completed`, `bytes_delivered`,
//!   `fct_mean_ns`, `fct_p50_ns`, `fct_p99_ns`, `slowdown_mean`, `slowdown_p50`,
//!   `slowdown_p99` (slowdown = FCT / ideal FCT, at least 1).
//! * `flows.csv`, one row per flow: `flow,src,dst,alg,class,group,size_bytes,start_ns,end_ns,
//!   fct_ns,ideal_fct_ns,base_rtt_ns,bytes_delivered,bytes_sent,packets_sent,retransmits,
//!   timeouts,completed`. `size_bytes` and `ideal_fct_ns` are empty for long-lived flows,
//!   `fct_ns` for those and for unfinished sized flows. `group` is `flows` for listed flows, `w<i>` for generator i, `w<i>.r<k>`
//!   for round k of an incast generator. `fct_ns` runs from the start to the arrival of the last
//!   byte at the receiver; `ideal_fct_ns` is what an empty network allows: the one-way
//!   propagation delay, the flow's bytes on the wire (payload and headers) at the slowest link
//!   of its path, and the last packet's serialization at every other link; `base_rtt_ns` is the
//!   propagation delay there and back; `end_ns` is the completion, the stop
//!   time, or the end of the run. Bytes are payload bytes; `bytes_delivered` counts in-order bytes
//!   at the receiver.
//! * `flow_series.csv`, one row per tracked flow per step while it sends:
//!   `time_ns,flow,delivered_bytes,goodput_bps,cwnd_bytes,rate_Bps,srtt_us,rtt_us,
//!   inflight_bytes,retransmits`; `goodput_bps` is in-order goodput over the step ending at
//!   `time_ns`, `rate_Bps` the pacing rate (0: unpaced), `rtt_us` the latest sample.
//! * `queues.csv`, one row per recorded queue: `queue,rate_Bps,buffer,enqueued_packets,
//!   enqueued_bytes,tx_packets,tx_bytes,drops,aqm_drops,wire_losses,ecn_marks,max_bytes,
//!   max_packets,qdelay_count,qdelay_mean_ns,qdelay_p50_ns,qdelay_p99_ns,qdelay_max_ns`.
//!   Queues are named `from->to` (e.g. `left->right`, `leaf0->spine2`, `h3->leaf0`). Queueing
//!   delay runs from enqueue to the start of transmission (trace links: to departure); mean and
//!   max are exact, quantiles are bucket upper edges (within 6.25 %). With
//!   `output.histograms_from` the delay columns count only the packets dequeued from then on.
//! * `qdelay_hist.csv`: `queue,lo_ns,hi_ns,count` per non-empty histogram bucket (`lo`
//!   inclusive, `hi` exclusive; exact below 16 ns, 16 buckets per power of two above).
//! * `queue_series.csv`: `time_ns,queue,bytes,packets,tx_bytes,drops,marks`; occupancy at
//!   `time_ns`, and bytes transmitted, drops (all kinds) and CE marks during the step ending
//!   at `time_ns` (an event at exactly `time_ns` belongs to the next step).
//! * `bill.json`, only with `agent.pricing`: the agent's bills per VM and per flow.
//!
//! # Module map
//!
//! * [`scenario`]: the scenario format, loading, validation, built-in examples;
//! * [`topology`]: nodes, links, routes and ECMP;
//! * [`link`]: queues (drop-tail, ECN, RED), transmitters (rate, schedule, trace) and wires;
//! * [`trace`], [`workload`]: mahimahi traces and flow-size CDFs;
//! * [`packet`], [`transport`]: packets, the sender and the receiver;
//! * [`event`], [`time`]: the event queue and the virtual clock;
//! * [`sim`]: the world and its event loop; [`ipc`]: the portus IPC; [`runner`]: [`run`];
//! * [`stats`], [`output`]: what is measured and how it is written;
//! * [`error`]: the error type, [`SimError`].

pub mod error;
pub mod event;
pub mod ipc;
pub mod link;
pub mod output;
pub mod packet;
pub mod runner;
pub mod scenario;
pub mod sim;
pub mod stats;
pub mod time;
pub mod topology;
pub mod trace;
pub mod transport;
pub mod workload;

pub use error::SimError;
pub use output::write_outputs;
pub use runner::{SimResult, check, run};
pub use scenario::Scenario;
pub use time::VirtualClock;
