//! `ccp-engine`: a libccp-compatible datapath library written in Rust, with
//! the clock injected by the caller.
//!
//! This crate owns the datapath half of the CCP split: it speaks the libccp 1.2
//! wire protocol to a portus 0.9 agent, keeps the table of connections and the
//! table of installed datapath programs, runs the installed program of a
//! connection on every [`Engine::invoke`] (one call per ACK), and applies
//! congestion window and rate decisions through [`DatapathOps`] callbacks.
//! Because time is read only through [`Clock`], a discrete-event simulator can
//! drive the engine in virtual time, while a real datapath uses [`WallClock`].
//!
//! Module map:
//! * [`wire`]: the byte layout of every message in both directions, parsers
//!   and serializers (also used by the agent to screen datagrams);
//! * `program` (private): validated, executable datapath programs and the
//!   register machine that runs them;
//! * `engine` (private, re-exported as [`Engine`]): connection and program
//!   tables, fallback timer, message handling and the per-ACK machine;
//! * `clock` (private, re-exported): [`Clock`] and [`WallClock`];
//! * `error` (private, re-exported as [`Error`]): every error the engine reports;
//!
//! # Semantics
//!
//! The engine reproduces libccp 1.2 (`ccp.c`, `machine.c`, `serialize.c`,
//! `ccp_priv.c`) observable behaviour: the same bytes are sent to the agent, the
//! same `set_cwnd`/`set_rate_abs` calls are made in the same order, and the same
//! error codes are returned ([`Error::libccp_code`]). The differential test
//! (`tests/differential.rs`) checks this against the real C library.
//!
//! "Datapath time units" of libccp are nanoseconds here: [`Clock::now_ns`]
//! plays libccp's `now()`, and libccp's `since_usecs(then)` is
//! `now_ns.wrapping_sub(then) / 1000`. A clock should never return 0, because
//! libccp uses 0 as "timer not running" (a failed send at time 0 would not start
//! the fallback timer); [`WallClock`] adds one second for that reason.
//!
//! # Deliberate deviations from libccp 1.2
//!
//! 1. **Growable tables.** Connections and programs live in growable tables;
//!    there is no `max_connections` (1024 in the libccp crate) or
//!    `max_programs` limit, so `LIBCCP_PROG_TABLE_FULL` never happens. Socket
//!    ids are still "lowest free slot + 1", and slots are reused.
//! 2. **Full validation before install.** An INSTALL message is checked
//!    completely before anything changes: exact message length, at most 256
//!    expressions and 256 instructions (libccp's array sizes, which libccp
//!    itself checks before reading the counts, i.e. never), opcodes below 15,
//!    known register types, register indices in range (report < 110,
//!    control < 110, tmp < 8, local < 8, implicit < 6, primitive < 15), the
//!    result register not IMMEDIATE or PRIMITIVE, every expression's condition
//!    and body inside the instruction list, and at most 110 reported fields. A
//!    rejected program is not installed and, for `program_uid == 1`, does not
//!    clear the table. libccp installs partially (consuming a slot and leaving
//!    a half-read program findable by uid) or reads and writes out of bounds.
//!    UPDATE_FIELDS and CHANGE_PROG must have exactly the length their update
//!    count implies, and a control register index must be below 110 (libccp
//!    writes out of bounds); updates are still staged one by one like libccp,
//!    so a bad update leaves the earlier ones of the same message staged.
//! 3. **No stale create timestamp.** libccp keeps `last_create_msg_sent` in the
//!    connection slot across free and reuse, so a flow started in a slot freed
//!    less than 100 ms after that slot last sent CREATE does not send its own
//!    CREATE until an invoke 100 ms later. Here a new connection always starts
//!    with a fresh timestamp and sends CREATE at once.
//! 4. **Several messages per buffer.** [`Engine::read_msg`] processes every
//!    message of a buffer holding several concatenated ones (libccp processes
//!    only the first) and returns the first error after processing all.
//! 5. **Errors instead of silence.** [`Engine::connection_free`] and
//!    [`Engine::invoke`] report an unknown socket id as
//!    [`Error::UnknownConnection`]; [`Engine::init`] reports a failed READY send
//!    as [`Error::Send`] after initialising everything (libccp returns OK).
//!    Nonsensical messages that libccp would silently misread (a length field
//!    shorter than the header, a buffer shorter than 8 bytes) are errors.
//! 6. **No hangs.** libccp walks instructions with 8-bit counters, so a program
//!    whose expression ends at instruction 256, or which consists of 256 DEFs,
//!    loops forever in libccp; here it runs normally.
//! 7. **One clock read per call.** libccp calls `now()` again for every read of
//!    `Ack.now` and every write of `Micros`; the engine reads the clock once per
//!    public call. With a virtual clock this is indistinguishable.
//! 8. **Version check** (the project's own extension, see [`wire::VERSION`]):
//!    libccp rejects message type 6 as an invalid header type; this engine
//!    records the agent's version ([`Engine::agent_version`]) and always
//!    answers with its own VERSION message. On a mismatch it returns
//!    [`Error::VersionMismatch`] and enters a refused state: every later agent
//!    message and every [`Engine::invoke`] returns that error, and
//!    [`Engine::in_fallback`] is true. A later VERSION message is still
//!    processed, so an agent with the right version (or [`Engine::init`])
//!    lifts the refusal.
//! 9. **Extended primitives** (the project's own extension): a datapath may
//!    hand [`Engine::invoke_ext`] measurements libccp has no primitive for
//!    ([`ExtPrimitives`]: the relative one-way delay `Flow.owd_us`). portus
//!    0.9 compiles only libccp's 15 primitive names, so a program reads one
//!    through a control register declared with a reserved default
//!    ([`wire::prim::OWD_US_BINDING`]), which the engine binds to the
//!    measurement at install. Nothing changes on the wire; a program without
//!    such a register runs exactly as under libccp, and under libccp the
//!    register keeps its default, which the program can recognise.
//!
//! Quirks kept on purpose because they are observable on the wire: the
//! wrapping and overflow checks of libccp's arithmetic (MUL only notices a
//! product below its left operand), EWMA's wrapping weight, the 32-bit
//! truncation of `Cwnd`/`Rate` in callbacks and of `wrapped_max` results,
//! `Micros` writes subtracting microseconds from a nanosecond clock, the
//! UPDATE_FIELDS count read as a signed byte, a CHANGE_PROG to an unknown
//! program being accepted silently, and the per-program report count that
//! starts at 0 and is set by the first reset (a flow left on a slot refilled
//! after a `program_uid == 1` clear sends one report without fields).
//!
//! As in libccp, a failed send starts the fallback timer only for CREATE and
//! MEASURE messages (and, here, for the VERSION reply); a failed READY or close
//! message does not.

mod clock;
mod engine;
mod error;
mod program;
pub mod wire;

#[cfg(test)]
mod tests;

pub use clock::{Clock, WallClock};
pub use engine::Engine;
pub use error::Error;

/// Callbacks through which the engine acts on the datapath and reaches the
/// agent. All of them are called synchronously from engine methods.
pub trait DatapathOps {
    /// Send one message to the agent. An Err starts libccp's fallback timer.
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()>;
    /// Set the congestion window of connection `sid`, in bytes.
    fn set_cwnd(&mut self, sid: u32, cwnd_bytes: u32);
    /// Set the pacing rate of connection `sid`, in bytes per second.
    fn set_rate_abs(&mut self, sid: u32, rate_bytes_per_sec: u32);
}

impl<T: DatapathOps + ?Sized> DatapathOps for &mut T {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        (**self).send_msg(msg)
    }
    fn set_cwnd(&mut self, sid: u32, cwnd_bytes: u32) {
        (**self).set_cwnd(sid, cwnd_bytes)
    }
    fn set_rate_abs(&mut self, sid: u32, rate_bytes_per_sec: u32) {
        (**self).set_rate_abs(sid, rate_bytes_per_sec)
    }
}

/// Measurements handed to [`Engine::invoke`], with libccp's `ccp_primitives`
/// meaning: values are per invocation (per ACK), except `bytes_pending`
/// (absolute) and `snd_cwnd`/`snd_rate` (the datapath's current window and
/// rate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Primitives {
    /// Newly acknowledged in-order bytes.
    pub bytes_acked: u32,
    /// Newly acknowledged in-order packets.
    pub packets_acked: u32,
    /// Out-of-order bytes.
    pub bytes_misordered: u32,
    /// Out-of-order packets.
    pub packets_misordered: u32,
    /// Bytes of ECN-marked packets.
    pub ecn_bytes: u32,
    /// ECN-marked packets.
    pub ecn_packets: u32,
    /// Estimate of the number of packets lost.
    pub lost_pkts_sample: u32,
    /// Whether a retransmission timeout was observed.
    pub was_timeout: bool,
    /// A recent round-trip time sample in microseconds (0: none; programs then
    /// read `0xFFFF_FFFF`).
    pub rtt_sample_us: u64,
    /// Sending rate sample, bytes per second.
    pub rate_outgoing: u64,
    /// Receiving rate sample, bytes per second.
    pub rate_incoming: u64,
    /// Bytes in flight.
    pub bytes_in_flight: u32,
    /// Packets in flight.
    pub packets_in_flight: u32,
    /// The datapath's current congestion window, bytes.
    pub snd_cwnd: u32,
    /// The datapath's current rate, bytes per second.
    pub snd_rate: u64,
    /// Bytes waiting to be sent (absolute, not per ACK).
    pub bytes_pending: u32,
}

/// Measurements beyond libccp's [`Primitives`] that this engine's programs can
/// read (handed to [`Engine::invoke_ext`]; [`Engine::invoke`] passes none).
/// They stay on the datapath: the wire format is libccp's, and a program
/// reaches them through the bindings of [`wire::prim::OWD_US_BINDING`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtPrimitives {
    /// `Flow.owd_us`: one-way delay of the data packet this ACK echoes (the
    /// receiver's receive time stamp minus the sender's send time stamp)
    /// minus the smallest such delay of the flow, µs; the subtraction removes
    /// any constant offset between the two hosts' clocks, leaving the
    /// forward path's queueing. `None`: not measured (reads `0xFFFF_FFFF`).
    pub owd_us: Option<u64>,
}

/// Flow description sent to the agent in the CREATE message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowInfo {
    /// Initial congestion window, bytes.
    pub init_cwnd: u32,
    /// Maximum segment size, bytes.
    pub mss: u32,
    /// Source IPv4 address.
    pub src_ip: u32,
    /// Source port.
    pub src_port: u32,
    /// Destination IPv4 address.
    pub dst_ip: u32,
    /// Destination port.
    pub dst_port: u32,
    /// Requested algorithm name; at most 63 bytes (it travels NUL-terminated in
    /// a 64-byte field), longer names are rejected with
    /// [`Error::CongAlgTooLong`].
    pub cong_alg: String,
}

/// Engine parameters.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Datapath id sent in the READY message.
    pub id: u32,
    /// libccp's `fto_us`: after a failed send, invocations more than this many
    /// microseconds later enter fallback. Must be nonzero (libccp's
    /// `LIBCCP_MISSING_ARG` otherwise).
    pub fallback_timeout_us: u64,
    /// Protocol version this datapath speaks, compared with the agent's
    /// VERSION message.
    pub protocol_version: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            id: 0,
            fallback_timeout_us: 1000,
            protocol_version: wire::PROTOCOL_VERSION,
        }
    }
}
