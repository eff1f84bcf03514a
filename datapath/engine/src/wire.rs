//! The libccp 1.2 wire format (protocol version 1), both directions.
//!
//! This module owns the byte layout of every message: constants for message
//! types, sizes, register types, opcodes and register indices; serializers for
//! datapath→agent messages (READY, CREATE, MEASURE, close, VERSION) and, for
//! tests and tools, agent→datapath messages (INSTALL, UPDATE_FIELDS,
//! CHANGE_PROG); and strict parsers for both directions. The agent uses
//! [`parse_to_agent`] to screen datagrams from a datapath; the engine uses
//! [`parse_from_agent_body`] (and [`parse_from_agent`] is the datagram-level
//! form of it).
//!
//! Every message starts with an 8-byte little-endian header: `u16` type,
//! `u16` length of the whole message including the header, `u32` socket id.
//! All integers are little-endian.
//!
//! # VERSION (type 6) — this project's extension
//!
//! `header(type 6, len 16, sid 0) + u32 version + u32 magic`, where magic is
//! [`VERSION_MAGIC`] = `0x5043_4356` (the ASCII bytes `"VCCP"` read as a
//! little-endian `u32`). After a datapath's READY, the agent sends its VERSION;
//! the datapath answers with its own VERSION (an echo when they agree) and
//! refuses the agent when they differ. Real libccp rejects type 6 as an
//! invalid header type and ignores it.

use crate::FlowInfo;
use std::ops::Range;

/// Wire protocol version spoken here: "libccp 1.2 / portus 0.9 wire".
pub const PROTOCOL_VERSION: u32 = 1;
/// Magic number closing a VERSION message: `"VCCP"` as little-endian bytes.
pub const VERSION_MAGIC: u32 = 0x5043_4356;

/// Message type: datapath→agent flow creation.
pub const CREATE: u16 = 0;
/// Message type: datapath→agent report (and, with uid 0 and no fields, close).
pub const MEASURE: u16 = 1;
/// Message type: agent→datapath program installation.
pub const INSTALL: u16 = 2;
/// Message type: agent→datapath register updates for one flow.
pub const UPDATE_FIELDS: u16 = 3;
/// Message type: agent→datapath program change for one flow.
pub const CHANGE_PROG: u16 = 4;
/// Message type: datapath→agent hello.
pub const READY: u16 = 5;
/// Message type: protocol version exchange (this project's extension).
pub const VERSION: u16 = 6;

/// Size of the common header.
pub const HEADER_LEN: usize = 8;
/// Size of a READY message.
pub const READY_LEN: usize = 12;
/// Size of a CREATE message.
pub const CREATE_LEN: usize = 96;
/// Size of a VERSION message.
pub const VERSION_LEN: usize = 16;
/// Size of a MEASURE message without fields (header, uid, field count).
pub const MEASURE_BASE_LEN: usize = 16;
/// Size of an INSTALL message without expressions and instructions.
pub const INSTALL_BASE_LEN: usize = 20;
/// Size of an UPDATE_FIELDS message without updates.
pub const UPDATE_FIELDS_BASE_LEN: usize = 12;
/// Size of a CHANGE_PROG message without updates.
pub const CHANGE_PROG_BASE_LEN: usize = 16;
/// Size of one serialized expression.
pub const EXPRESSION_LEN: usize = 16;
/// Size of one serialized instruction.
pub const INSTRUCTION_LEN: usize = 16;
/// Size of one serialized register update.
pub const UPDATE_FIELD_LEN: usize = 13;
/// Largest message libccp accepts from the agent (sic: 32678).
pub const BIGGEST_MSG_SIZE: usize = 32678;
/// Size of the NUL-padded algorithm name field in CREATE.
pub const MAX_CONG_ALG_SIZE: usize = 64;
/// Report registers per connection (and most fields in a MEASURE).
pub const MAX_REPORT_REG: usize = 110;
/// Control registers per connection.
pub const MAX_CONTROL_REG: usize = 110;
/// Implicit registers per connection.
pub const MAX_IMPLICIT_REG: usize = 6;
/// Temporary registers per connection.
pub const MAX_TMP_REG: usize = 8;
/// Local registers per connection.
pub const MAX_LOCAL_REG: usize = 8;
/// Most updates in one UPDATE_FIELDS or CHANGE_PROG message.
pub const MAX_MUTABLE_REG: u32 = 222;
/// Most expressions in one program.
pub const MAX_EXPRESSIONS: u32 = 256;
/// Most instructions in one program.
pub const MAX_INSTRUCTIONS: u32 = 256;
/// Number of primitive registers.
pub const NUM_PRIMITIVES: u32 = 15;

/// Register types as encoded in instructions and updates.
pub mod reg {
    /// Control register kept across reports.
    pub const NONVOLATILE_CONTROL: u8 = 0;
    /// Immediate: the register field holds the value.
    pub const IMMEDIATE: u8 = 1;
    /// Implicit register (see [`super::implicit`]).
    pub const IMPLICIT: u8 = 2;
    /// Local register.
    pub const LOCAL: u8 = 3;
    /// Primitive (read-only measurement, see [`super::prim`]).
    pub const PRIMITIVE: u8 = 4;
    /// Report register reset to its default after each report.
    pub const VOLATILE_REPORT: u8 = 5;
    /// Report register kept across reports.
    pub const NONVOLATILE_REPORT: u8 = 6;
    /// Temporary register.
    pub const TMP: u8 = 7;
    /// Control register reset to its default after each report.
    pub const VOLATILE_CONTROL: u8 = 8;
}

/// Opcodes.
pub mod op {
    /// `ret = left + right`, error on overflow.
    pub const ADD: u8 = 0;
    /// `ret = right`.
    pub const BIND: u8 = 1;
    /// Register definition (preamble only; a no-op when executed).
    pub const DEF: u8 = 2;
    /// `ret = left / right`, error on division by zero.
    pub const DIV: u8 = 3;
    /// `ret = (left == right)`.
    pub const EQUIV: u8 = 4;
    /// `ret = ewma(weight left, old ret, new right)`.
    pub const EWMA: u8 = 5;
    /// `ret = (left > right)`.
    pub const GT: u8 = 6;
    /// `if left != 0 { ret = right }`.
    pub const IF: u8 = 7;
    /// `ret = (left < right)`.
    pub const LT: u8 = 8;
    /// `ret = max(left, right)`.
    pub const MAX: u8 = 9;
    /// 32-bit wraparound-aware max.
    pub const MAXWRAP: u8 = 10;
    /// `ret = min(left, right)`.
    pub const MIN: u8 = 11;
    /// `ret = left * right`, error on (libccp-detected) overflow.
    pub const MUL: u8 = 12;
    /// `if left == 0 { ret = right }`.
    pub const NOTIF: u8 = 13;
    /// `ret = left - right`, error on underflow.
    pub const SUB: u8 = 14;
    /// Number of opcodes.
    pub const NUM_OPS: u8 = 15;
}

/// Implicit register indices.
pub mod implicit {
    /// Condition result of the current expression.
    pub const EXPR_FLAG: u32 = 0;
    /// Continue with the next expression even though this one matched.
    pub const SHOULD_FALLTHROUGH: u32 = 1;
    /// Send a report after the program run.
    pub const SHOULD_REPORT: u32 = 2;
    /// `Micros`: microseconds since the program's time zero.
    pub const US_ELAPSED: u32 = 3;
    /// `Cwnd`.
    pub const CWND: u32 = 4;
    /// `Rate`.
    pub const RATE: u32 = 5;
}

/// Primitive register indices (portus names in comments).
pub mod prim {
    /// `Ack.bytes_acked`
    pub const BYTES_ACKED: u32 = 0;
    /// `Ack.bytes_misordered`
    pub const BYTES_MISORDERED: u32 = 1;
    /// `Ack.ecn_bytes`
    pub const ECN_BYTES: u32 = 2;
    /// `Ack.ecn_packets`
    pub const ECN_PACKETS: u32 = 3;
    /// `Ack.lost_pkts_sample`
    pub const LOST_PKTS_SAMPLE: u32 = 4;
    /// `Ack.now`: microseconds since the datapath's time zero.
    pub const NOW: u32 = 5;
    /// `Ack.packets_acked`
    pub const PACKETS_ACKED: u32 = 6;
    /// `Ack.packets_misordered`
    pub const PACKETS_MISORDERED: u32 = 7;
    /// `Flow.bytes_in_flight`
    pub const BYTES_IN_FLIGHT: u32 = 8;
    /// `Flow.bytes_pending`
    pub const BYTES_PENDING: u32 = 9;
    /// `Flow.packets_in_flight`
    pub const PACKETS_IN_FLIGHT: u32 = 10;
    /// `Flow.rate_incoming`
    pub const RATE_INCOMING: u32 = 11;
    /// `Flow.rate_outgoing`
    pub const RATE_OUTGOING: u32 = 12;
    /// `Flow.rtt_sample_us` (0 reads as `0xFFFF_FFFF`)
    pub const RTT_SAMPLE_US: u32 = 13;
    /// `Flow.was_timeout`
    pub const WAS_TIMEOUT: u32 = 14;
    /// `Flow.owd_us`, this engine's extended primitive (never on the wire, see
    /// [`OWD_US_BINDING`]): the relative one-way delay of the data packet the
    /// ACK echoes, µs, i.e. its one-way delay minus the smallest the flow has
    /// seen ([`crate::ExtPrimitives::owd_us`]; none reads as `0xFFFF_FFFF`).
    pub const OWD_US: u32 = 15;
    /// portus 0.9's compiler knows only the 15 primitive names above and
    /// compiles any other name as a local register that arithmetic refuses,
    /// so a program reaches `Flow.owd_us` through a control register it
    /// declares with this default, e.g. `(def (Report ...) (owd_us
    /// 2000000001))`: at install the engine binds every read of such a
    /// register to [`OWD_US`]. The install message is an ordinary libccp one;
    /// libccp, or an engine whose datapath does not measure one-way delays,
    /// leaves the register holding this value (≥ 2·10⁹ µs, which no delay
    /// reaches), so a program can tell "not measured" by `(< owd_us
    /// 2000000000)` and a program without such a register runs unchanged.
    pub const OWD_US_BINDING: u32 = 2_000_000_001;
}

/// Which operand of an instruction a register error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// The result register.
    Result,
    /// The left operand.
    Left,
    /// The right operand.
    Right,
}

impl std::fmt::Display for Operand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operand::Result => "result",
            Operand::Left => "left",
            Operand::Right => "right",
        })
    }
}

/// A malformed or unexpected message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the message needs.
    #[error("{what} needs {needed} bytes but only {available} are there")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The message is not the size its type (and counts) imply.
    #[error(
        "{what} message is {found} bytes, libccp 1.2 wire (v{PROTOCOL_VERSION}) expects {expected}"
    )]
    LengthMismatch {
        /// Message type name.
        what: &'static str,
        /// Length found (the header's length field).
        found: usize,
        /// Length expected.
        expected: usize,
    },
    /// The header's length field is shorter than the header itself.
    #[error("message of type {typ} claims to be {len} bytes, shorter than the 8-byte header")]
    HeaderLenTooSmall {
        /// Message type.
        typ: u16,
        /// Length field.
        len: u16,
    },
    /// Longer than libccp's largest accepted message.
    #[error("message is {len} bytes, libccp accepts at most {BIGGEST_MSG_SIZE}")]
    MsgTooLong {
        /// Length field.
        len: usize,
    },
    /// A message type not valid in this direction.
    #[error("message type {typ} is not valid here; expected {expected}")]
    InvalidHeaderType {
        /// The type found.
        typ: u16,
        /// The types accepted in this direction.
        expected: &'static str,
    },
    /// A MEASURE with more fields than libccp can report.
    #[error(
        "MEASURE message carries {n} fields, libccp 1.2 wire (v{PROTOCOL_VERSION}) allows at most {MAX_REPORT_REG}"
    )]
    TooManyFields {
        /// The field count.
        n: u32,
    },
    /// INSTALL with more than 256 expressions.
    #[error("program has {0} expressions, at most {MAX_EXPRESSIONS} are allowed")]
    TooManyExpressions(u32),
    /// INSTALL with more than 256 instructions.
    #[error("program has {0} instructions, at most {MAX_INSTRUCTIONS} are allowed")]
    TooManyInstructions(u32),
    /// UPDATE_FIELDS with more than 222 updates (count read as a signed byte).
    #[error("UPDATE_FIELDS carries {0} updates, at most {MAX_MUTABLE_REG} are allowed")]
    UpdateTooMany(u32),
    /// CHANGE_PROG with more than 222 updates.
    #[error("CHANGE_PROG carries {0} updates, at most {MAX_MUTABLE_REG} are allowed")]
    ChangeTooMany(u32),
    /// Unknown opcode.
    #[error("instruction {instr}: invalid opcode {opcode}")]
    InvalidOp {
        /// Instruction index.
        instr: usize,
        /// Opcode found.
        opcode: u8,
    },
    /// Result register of type IMMEDIATE or PRIMITIVE.
    #[error("instruction {instr}: result register may not have type {reg_type}")]
    RegNotAllowed {
        /// Instruction index.
        instr: usize,
        /// Register type found.
        reg_type: u8,
    },
    /// Unknown register type or index out of range.
    #[error("instruction {instr}: invalid {operand} register (type {reg_type}, index {index})")]
    InvalidRegister {
        /// Instruction index.
        instr: usize,
        /// Which operand.
        operand: Operand,
        /// Register type.
        reg_type: u8,
        /// Register index.
        index: u32,
    },
    /// An expression's instruction range leaves the instruction list.
    #[error(
        "expression {expr}: instructions {start}..{start}+{count} are outside the program's {num_instructions} instructions"
    )]
    ExprOutOfRange {
        /// Expression index.
        expr: usize,
        /// First instruction.
        start: u32,
        /// Number of instructions.
        count: u32,
        /// Instructions in the program.
        num_instructions: u32,
    },
    /// The DEF preamble defines more report fields than a MEASURE can carry.
    #[error("program reports {0} fields, at most {MAX_REPORT_REG} are allowed")]
    TooManyReportFields(usize),
    /// VERSION with the wrong magic number.
    #[error("VERSION message has magic {found:#010x}, expected {VERSION_MAGIC:#010x}")]
    BadVersionMagic {
        /// Magic found.
        found: u32,
    },
    /// Algorithm name longer than 63 bytes.
    #[error("congestion algorithm name is {0} bytes, at most 63 fit the CREATE message")]
    CongAlgTooLong(usize),
    /// A CREATE whose 64-byte name field is not a NUL-terminated UTF-8 string (portus's parser
    /// would panic on the first and stop on the second).
    #[error("CREATE's algorithm name {0}")]
    BadCongAlg(&'static str),
}

/// The common message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message type.
    pub typ: u16,
    /// Whole message length including the header.
    pub len: u16,
    /// Socket id (0 for messages not about a flow).
    pub sid: u32,
}

impl Header {
    /// The 8 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..2].copy_from_slice(&self.typ.to_le_bytes());
        b[2..4].copy_from_slice(&self.len.to_le_bytes());
        b[4..8].copy_from_slice(&self.sid.to_le_bytes());
        b
    }
}

/// Parse the header at the start of `buf`.
pub fn parse_header(buf: &[u8]) -> Result<Header, WireError> {
    if buf.len() < HEADER_LEN {
        return Err(WireError::Truncated {
            what: "header",
            needed: HEADER_LEN,
            available: buf.len(),
        });
    }
    let mut r = Reader::new(buf, "header");
    Ok(Header {
        typ: r.u16()?,
        len: r.u16()?,
        sid: r.u32()?,
    })
}

/// Printable name of a message type.
pub fn type_name(typ: u16) -> &'static str {
    match typ {
        CREATE => "CREATE",
        MEASURE => "MEASURE",
        INSTALL => "INSTALL",
        UPDATE_FIELDS => "UPDATE_FIELDS",
        CHANGE_PROG => "CHANGE_PROG",
        READY => "READY",
        VERSION => "VERSION",
        _ => "unknown",
    }
}

/// Little-endian reader over a byte slice that never panics.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, pos: 0, what }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let end = self.pos.saturating_add(N);
        let bytes = self
            .buf
            .get(self.pos..end)
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or(WireError::Truncated {
                what: self.what,
                needed: end,
                available: self.buf.len(),
            })?;
        self.pos = end;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.take()?))
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
}

fn message(typ: u16, sid: u32, body_len: usize) -> Vec<u8> {
    let len = HEADER_LEN + body_len;
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(
        &Header {
            typ,
            len: u16::try_from(len).unwrap_or(u16::MAX),
            sid,
        }
        .to_bytes(),
    );
    v
}

/// READY: `header(5, 12, 0) + u32 id`.
pub fn serialize_ready(id: u32) -> Vec<u8> {
    let mut v = message(READY, 0, 4);
    v.extend_from_slice(&id.to_le_bytes());
    v
}

/// CREATE: `header(0, 96, sid) + 6 × u32 + 64-byte NUL-padded algorithm name`.
pub fn serialize_create(sid: u32, info: &FlowInfo) -> Result<Vec<u8>, WireError> {
    let name = info.cong_alg.as_bytes();
    if name.len() >= MAX_CONG_ALG_SIZE {
        return Err(WireError::CongAlgTooLong(name.len()));
    }
    let mut v = message(CREATE, sid, CREATE_LEN - HEADER_LEN);
    for x in [
        info.init_cwnd,
        info.mss,
        info.src_ip,
        info.src_port,
        info.dst_ip,
        info.dst_port,
    ] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    let mut field = [0u8; MAX_CONG_ALG_SIZE];
    field[..name.len()].copy_from_slice(name);
    v.extend_from_slice(&field);
    Ok(v)
}

/// MEASURE: `header(1, 16 + 8n, sid) + u32 uid + u32 n + n × u64`.
///
/// At most [`MAX_REPORT_REG`] fields are written (libccp cannot carry more);
/// any further fields are dropped.
pub fn serialize_measure(sid: u32, program_uid: u32, fields: &[u64]) -> Vec<u8> {
    let fields = &fields[..fields.len().min(MAX_REPORT_REG)];
    let mut v = message(MEASURE, sid, 8 + 8 * fields.len());
    v.extend_from_slice(&program_uid.to_le_bytes());
    v.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    for f in fields {
        v.extend_from_slice(&f.to_le_bytes());
    }
    v
}

/// The close message libccp sends when a flow ends: MEASURE with uid 0 and no
/// fields.
pub fn serialize_close(sid: u32) -> Vec<u8> {
    serialize_measure(sid, 0, &[])
}

/// VERSION: `header(6, 16, 0) + u32 version + u32 VERSION_MAGIC`.
pub fn serialize_version(version: u32) -> Vec<u8> {
    let mut v = message(VERSION, 0, 8);
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&VERSION_MAGIC.to_le_bytes());
    v
}

/// One register reference as encoded in an instruction: a type and either an
/// index or, for [`reg::IMMEDIATE`], the value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Register {
    /// Register type ([`reg`]).
    pub typ: u8,
    /// Index, or the value of an immediate.
    pub index: u32,
}

/// One serialized instruction (16 packed bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Instruction {
    /// Opcode ([`op`]).
    pub opcode: u8,
    /// Where the result goes.
    pub result: Register,
    /// Left operand.
    pub left: Register,
    /// Right operand.
    pub right: Register,
}

/// One serialized expression: condition and body instruction ranges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expression {
    /// First condition instruction.
    pub cond_start: u32,
    /// Number of condition instructions.
    pub num_cond: u32,
    /// First body instruction.
    pub event_start: u32,
    /// Number of body instructions.
    pub num_event: u32,
}

/// One register update (13 packed bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpdateField {
    /// Register type ([`reg`]).
    pub reg_type: u8,
    /// Register index.
    pub reg_index: u32,
    /// New value.
    pub value: u64,
}

/// INSTALL: `header(2, 20 + 16(e + i), sid) + u32 uid + u32 e + u32 i +
/// expressions + instructions`. Counts beyond 256 are written as given (the
/// result is then rejected by a datapath).
pub fn serialize_install(
    sid: u32,
    program_uid: u32,
    expressions: &[Expression],
    instructions: &[Instruction],
) -> Vec<u8> {
    let body = 12 + EXPRESSION_LEN * expressions.len() + INSTRUCTION_LEN * instructions.len();
    let mut v = message(INSTALL, sid, body);
    v.extend_from_slice(&program_uid.to_le_bytes());
    v.extend_from_slice(&(expressions.len() as u32).to_le_bytes());
    v.extend_from_slice(&(instructions.len() as u32).to_le_bytes());
    for e in expressions {
        for x in [e.cond_start, e.num_cond, e.event_start, e.num_event] {
            v.extend_from_slice(&x.to_le_bytes());
        }
    }
    for i in instructions {
        v.push(i.opcode);
        for r in [i.result, i.left, i.right] {
            v.push(r.typ);
            v.extend_from_slice(&r.index.to_le_bytes());
        }
    }
    v
}

fn push_updates(v: &mut Vec<u8>, updates: &[UpdateField]) {
    for u in updates {
        v.push(u.reg_type);
        v.extend_from_slice(&u.reg_index.to_le_bytes());
        v.extend_from_slice(&u.value.to_le_bytes());
    }
}

/// UPDATE_FIELDS: `header(3, 12 + 13n, sid) + u32 n + n updates`. At most 127
/// updates are written (libccp reads the count as a signed byte); any further
/// updates are dropped.
pub fn serialize_update_fields(sid: u32, updates: &[UpdateField]) -> Vec<u8> {
    let updates = &updates[..updates.len().min(127)];
    let mut v = message(UPDATE_FIELDS, sid, 4 + UPDATE_FIELD_LEN * updates.len());
    v.extend_from_slice(&(updates.len() as u32).to_le_bytes());
    push_updates(&mut v, updates);
    v
}

/// CHANGE_PROG: `header(4, 16 + 13n, sid) + u32 uid + u32 n + n updates`. At
/// most [`MAX_MUTABLE_REG`] updates are written; any further are dropped.
pub fn serialize_change_prog(sid: u32, program_uid: u32, updates: &[UpdateField]) -> Vec<u8> {
    let updates = &updates[..updates.len().min(MAX_MUTABLE_REG as usize)];
    let mut v = message(CHANGE_PROG, sid, 8 + UPDATE_FIELD_LEN * updates.len());
    v.extend_from_slice(&program_uid.to_le_bytes());
    v.extend_from_slice(&(updates.len() as u32).to_le_bytes());
    push_updates(&mut v, updates);
    v
}

/// A datapath→agent message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToAgentMsg {
    /// READY: a datapath (re)started.
    Ready {
        /// Datapath id.
        id: u32,
    },
    /// CREATE: a flow started.
    Create {
        /// Socket id.
        sid: u32,
        /// Flow description (the name is cut at the first NUL, invalid UTF-8
        /// replaced; a name filling all 64 bytes is kept whole).
        info: FlowInfo,
    },
    /// MEASURE: a report.
    Measure {
        /// Socket id.
        sid: u32,
        /// Program that produced the report.
        program_uid: u32,
        /// Report fields.
        fields: Vec<u64>,
    },
    /// MEASURE with program uid 0 and no fields: the flow ended.
    Close {
        /// Socket id.
        sid: u32,
    },
    /// VERSION: the datapath's protocol version.
    Version {
        /// Version number.
        version: u32,
    },
}

/// The spelling of [`ToAgentMsg`] used by callers: the lifetime names the
/// datagram a message was parsed from (messages are owned, so any lifetime,
/// including `'static`, works).
pub type ToAgent<'a> = ToAgentMsg;

const TO_AGENT_TYPES: &str = "CREATE(0), MEASURE(1), READY(5) or VERSION(6)";
const FROM_AGENT_TYPES: &str = "INSTALL(2), UPDATE_FIELDS(3), CHANGE_PROG(4) or VERSION(6)";

fn expect_len(what: &'static str, found: usize, expected: usize) -> Result<(), WireError> {
    if found == expected {
        Ok(())
    } else {
        Err(WireError::LengthMismatch {
            what,
            found,
            expected,
        })
    }
}

/// Split a datagram into messages: each message's extent per its header, the
/// header checked for a usable length. Calls `f` with the header and the
/// message bytes.
fn split<T>(
    buf: &[u8],
    mut f: impl FnMut(Header, &[u8]) -> Result<T, WireError>,
) -> Result<Vec<(T, Range<usize>)>, WireError> {
    let mut out = Vec::new();
    let mut off = 0usize;
    loop {
        let rest = buf.get(off..).unwrap_or(&[]);
        let hdr = parse_header(rest)?;
        let len = usize::from(hdr.len);
        if len < HEADER_LEN {
            return Err(WireError::HeaderLenTooSmall {
                typ: hdr.typ,
                len: hdr.len,
            });
        }
        let msg = rest.get(..len).ok_or(WireError::Truncated {
            what: type_name(hdr.typ),
            needed: len,
            available: rest.len(),
        })?;
        out.push((f(hdr, msg)?, off..off + len));
        off += len;
        if off >= buf.len() {
            return Ok(out);
        }
    }
}

/// Parse a datapath→agent datagram holding one or more messages, checking
/// each message's exact length for its type: READY 12, CREATE 96, MEASURE
/// 16 + 8n with n ≤ 110 and n equal to the field count, VERSION 16 (with the
/// right magic). Other types are rejected. Returns each message with its byte
/// range in `buf`.
pub fn parse_to_agent(buf: &[u8]) -> Result<Vec<(ToAgent<'_>, Range<usize>)>, WireError> {
    split(buf, parse_to_agent_message)
}

fn parse_to_agent_message(hdr: Header, msg: &[u8]) -> Result<ToAgentMsg, WireError> {
    let what = type_name(hdr.typ);
    let len = msg.len();
    let mut r = Reader::new(msg, what);
    r.pos = HEADER_LEN;
    match hdr.typ {
        READY => {
            expect_len(what, len, READY_LEN)?;
            Ok(ToAgentMsg::Ready { id: r.u32()? })
        }
        CREATE => {
            expect_len(what, len, CREATE_LEN)?;
            let mut info = FlowInfo {
                init_cwnd: r.u32()?,
                mss: r.u32()?,
                src_ip: r.u32()?,
                src_port: r.u32()?,
                dst_ip: r.u32()?,
                dst_port: r.u32()?,
                cong_alg: String::new(),
            };
            let name: [u8; MAX_CONG_ALG_SIZE] = r.take()?;
            let end = name
                .iter()
                .position(|&b| b == 0)
                .ok_or(WireError::BadCongAlg(
                    "has no terminating NUL in its 64 bytes",
                ))?;
            info.cong_alg = std::str::from_utf8(&name[..end])
                .map_err(|_| WireError::BadCongAlg("is not UTF-8"))?
                .to_string();
            Ok(ToAgentMsg::Create { sid: hdr.sid, info })
        }
        MEASURE => {
            if len < MEASURE_BASE_LEN {
                return Err(WireError::Truncated {
                    what,
                    needed: MEASURE_BASE_LEN,
                    available: len,
                });
            }
            let program_uid = r.u32()?;
            let n = r.u32()?;
            if n as usize > MAX_REPORT_REG {
                return Err(WireError::TooManyFields { n });
            }
            expect_len(what, len, MEASURE_BASE_LEN + 8 * n as usize)?;
            let fields = (0..n).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
            if program_uid == 0 && fields.is_empty() {
                Ok(ToAgentMsg::Close { sid: hdr.sid })
            } else {
                Ok(ToAgentMsg::Measure {
                    sid: hdr.sid,
                    program_uid,
                    fields,
                })
            }
        }
        VERSION => Ok(ToAgentMsg::Version {
            version: parse_version_body(len, &mut r)?,
        }),
        typ => Err(WireError::InvalidHeaderType {
            typ,
            expected: TO_AGENT_TYPES,
        }),
    }
}

fn parse_version_body(len: usize, r: &mut Reader<'_>) -> Result<u32, WireError> {
    expect_len("VERSION", len, VERSION_LEN)?;
    let version = r.u32()?;
    let magic = r.u32()?;
    if magic != VERSION_MAGIC {
        return Err(WireError::BadVersionMagic { found: magic });
    }
    Ok(version)
}

/// An agent→datapath message, fully validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromAgent {
    /// Install a datapath program for all flows.
    Install {
        /// Socket id in the header (ignored by datapaths).
        sid: u32,
        /// Program uid assigned by the agent (1 means "a new agent": clear the
        /// program table first).
        program_uid: u32,
        /// Expressions, in evaluation order.
        expressions: Vec<Expression>,
        /// Instructions, the DEF preamble first.
        instructions: Vec<Instruction>,
    },
    /// Stage register updates for one flow.
    UpdateFields {
        /// Socket id.
        sid: u32,
        /// Updates in order.
        updates: Vec<UpdateField>,
    },
    /// Switch one flow to another installed program, with updates.
    ChangeProg {
        /// Socket id.
        sid: u32,
        /// Program to switch to.
        program_uid: u32,
        /// Updates staged after the switch.
        updates: Vec<UpdateField>,
    },
    /// The agent's protocol version.
    Version {
        /// Version number.
        version: u32,
    },
}

/// Parse an agent→datapath datagram holding one or more messages. Checks per
/// message: type INSTALL, UPDATE_FIELDS, CHANGE_PROG or VERSION; length at
/// most [`BIGGEST_MSG_SIZE`]; then [`parse_from_agent_body`]. Returns each
/// message with its byte range in `buf`.
pub fn parse_from_agent(buf: &[u8]) -> Result<Vec<(FromAgent, Range<usize>)>, WireError> {
    split(buf, |hdr, msg| {
        check_from_agent_type(hdr.typ)?;
        check_len_limit(hdr.len)?;
        parse_from_agent_body(&hdr, msg.get(HEADER_LEN..).unwrap_or(&[]))
    })
}

/// libccp's header type check for agent→datapath messages.
pub(crate) fn check_from_agent_type(typ: u16) -> Result<(), WireError> {
    match typ {
        INSTALL | UPDATE_FIELDS | CHANGE_PROG | VERSION => Ok(()),
        typ => Err(WireError::InvalidHeaderType {
            typ,
            expected: FROM_AGENT_TYPES,
        }),
    }
}

/// libccp's length limit for agent→datapath messages.
pub(crate) fn check_len_limit(len: u16) -> Result<(), WireError> {
    if usize::from(len) > BIGGEST_MSG_SIZE {
        return Err(WireError::MsgTooLong {
            len: usize::from(len),
        });
    }
    Ok(())
}

/// Parse and validate the body (the bytes after the header, `hdr.len - 8` of
/// them) of an agent→datapath message. For INSTALL this is the engine's full
/// validation (see the crate documentation).
pub fn parse_from_agent_body(hdr: &Header, body: &[u8]) -> Result<FromAgent, WireError> {
    let what = type_name(hdr.typ);
    let len = HEADER_LEN + body.len();
    let mut r = Reader::new(body, what);
    match hdr.typ {
        INSTALL => parse_install(hdr.sid, len, &mut r),
        UPDATE_FIELDS => {
            let first = *body.first().ok_or(WireError::Truncated {
                what,
                needed: UPDATE_FIELDS_BASE_LEN,
                available: len,
            })?;
            // libccp reads the count through a (signed) `char *`: only the
            // first byte counts, and bytes >= 0x80 become huge counts.
            let n = first as i8 as i32 as u32;
            if n > MAX_MUTABLE_REG {
                return Err(WireError::UpdateTooMany(n));
            }
            expect_len(
                what,
                len,
                UPDATE_FIELDS_BASE_LEN + UPDATE_FIELD_LEN * n as usize,
            )?;
            r.pos = 4;
            Ok(FromAgent::UpdateFields {
                sid: hdr.sid,
                updates: read_updates(&mut r, n)?,
            })
        }
        CHANGE_PROG => {
            if len < CHANGE_PROG_BASE_LEN {
                return Err(WireError::Truncated {
                    what,
                    needed: CHANGE_PROG_BASE_LEN,
                    available: len,
                });
            }
            let program_uid = r.u32()?;
            let n = r.u32()?;
            if n > MAX_MUTABLE_REG {
                return Err(WireError::ChangeTooMany(n));
            }
            expect_len(
                what,
                len,
                CHANGE_PROG_BASE_LEN + UPDATE_FIELD_LEN * n as usize,
            )?;
            Ok(FromAgent::ChangeProg {
                sid: hdr.sid,
                program_uid,
                updates: read_updates(&mut r, n)?,
            })
        }
        VERSION => Ok(FromAgent::Version {
            version: parse_version_body(len, &mut r)?,
        }),
        typ => Err(WireError::InvalidHeaderType {
            typ,
            expected: FROM_AGENT_TYPES,
        }),
    }
}

fn read_updates(r: &mut Reader<'_>, n: u32) -> Result<Vec<UpdateField>, WireError> {
    (0..n)
        .map(|_| {
            Ok(UpdateField {
                reg_type: r.u8()?,
                reg_index: r.u32()?,
                value: r.u64()?,
            })
        })
        .collect()
}

/// Whether `(typ, index)` names an existing register that an operand may read.
pub(crate) fn register_in_range(typ: u8, index: u32) -> bool {
    let limit = match typ {
        reg::IMMEDIATE => return true,
        reg::NONVOLATILE_CONTROL | reg::VOLATILE_CONTROL => MAX_CONTROL_REG,
        reg::NONVOLATILE_REPORT | reg::VOLATILE_REPORT => MAX_REPORT_REG,
        reg::IMPLICIT => MAX_IMPLICIT_REG,
        reg::LOCAL => MAX_LOCAL_REG,
        reg::TMP => MAX_TMP_REG,
        reg::PRIMITIVE => NUM_PRIMITIVES as usize,
        _ => return false,
    };
    (index as usize) < limit
}

fn validate_instruction(i: usize, ins: &Instruction) -> Result<(), WireError> {
    if ins.opcode >= op::NUM_OPS {
        return Err(WireError::InvalidOp {
            instr: i,
            opcode: ins.opcode,
        });
    }
    if ins.result.typ == reg::IMMEDIATE || ins.result.typ == reg::PRIMITIVE {
        return Err(WireError::RegNotAllowed {
            instr: i,
            reg_type: ins.result.typ,
        });
    }
    for (operand, r) in [
        (Operand::Result, ins.result),
        (Operand::Left, ins.left),
        (Operand::Right, ins.right),
    ] {
        if !register_in_range(r.typ, r.index) {
            return Err(WireError::InvalidRegister {
                instr: i,
                operand,
                reg_type: r.typ,
                index: r.index,
            });
        }
    }
    Ok(())
}

fn parse_install(sid: u32, len: usize, r: &mut Reader<'_>) -> Result<FromAgent, WireError> {
    if len < INSTALL_BASE_LEN {
        return Err(WireError::Truncated {
            what: "INSTALL",
            needed: INSTALL_BASE_LEN,
            available: len,
        });
    }
    let program_uid = r.u32()?;
    let ne = r.u32()?;
    let ni = r.u32()?;
    if ne > MAX_EXPRESSIONS {
        return Err(WireError::TooManyExpressions(ne));
    }
    if ni > MAX_INSTRUCTIONS {
        return Err(WireError::TooManyInstructions(ni));
    }
    expect_len(
        "INSTALL",
        len,
        INSTALL_BASE_LEN + EXPRESSION_LEN * ne as usize + INSTRUCTION_LEN * ni as usize,
    )?;
    let expressions = (0..ne)
        .map(|_| {
            Ok(Expression {
                cond_start: r.u32()?,
                num_cond: r.u32()?,
                event_start: r.u32()?,
                num_event: r.u32()?,
            })
        })
        .collect::<Result<Vec<_>, WireError>>()?;
    let mut instructions = Vec::with_capacity(ni as usize);
    for i in 0..ni as usize {
        let opcode = r.u8()?;
        let mut regs = [Register::default(); 3];
        for reg in &mut regs {
            reg.typ = r.u8()?;
            reg.index = r.u32()?;
        }
        let ins = Instruction {
            opcode,
            result: regs[0],
            left: regs[1],
            right: regs[2],
        };
        validate_instruction(i, &ins)?;
        instructions.push(ins);
    }
    for (i, e) in expressions.iter().enumerate() {
        for (start, count) in [(e.cond_start, e.num_cond), (e.event_start, e.num_event)] {
            if u64::from(start) + u64::from(count) > u64::from(ni) {
                return Err(WireError::ExprOutOfRange {
                    expr: i,
                    start,
                    count,
                    num_instructions: ni,
                });
            }
        }
    }
    let reported = instructions
        .iter()
        .take_while(|i| i.opcode == op::DEF)
        .filter(|i| matches!(i.left.typ, reg::VOLATILE_REPORT | reg::NONVOLATILE_REPORT))
        .count();
    if reported > MAX_REPORT_REG {
        return Err(WireError::TooManyReportFields(reported));
    }
    Ok(FromAgent::Install {
        sid,
        program_uid,
        expressions,
        instructions,
    })
}
