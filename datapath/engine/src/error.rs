//! The engine's error type: one variant per libccp error code (with the code
//! available through [`Error::libccp_code`]), plus this crate's own failures
//! (malformed messages libccp would misread, version mismatch, send errors).

use crate::wire::{Operand, WireError};

/// Everything the engine can report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `LIBCCP_MISSING_ARG`: a required setting is missing (a zero fallback
    /// timeout).
    #[error("missing argument: {0}")]
    MissingArg(&'static str),
    /// `LIBCCP_NULL_ARG` (kept for code parity; cannot happen in safe Rust).
    #[error("null argument")]
    NullArg,
    /// `LIBCCP_BUFSIZE_NEGATIVE` (kept for code parity).
    #[error("negative buffer size")]
    BufsizeNegative,
    /// `LIBCCP_BUFSIZE_TOO_SMALL`: the buffer is shorter than the message.
    #[error("{what} needs {needed} bytes but only {available} are there")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// `LIBCCP_MSG_TOO_LONG`: longer than libccp's 32678-byte limit.
    #[error("message is longer than libccp's 32678-byte limit")]
    MsgTooLong,
    /// `LIBCCP_WRITE_INVALID_HEADER_TYPE` (kept for code parity).
    #[error("cannot write message type {0}")]
    WriteInvalidHeaderType(u16),
    /// `LIBCCP_READ_INVALID_HEADER_TYPE`: a message type the datapath does not
    /// accept.
    #[error(
        "invalid message type {0} from agent; expected INSTALL(2), UPDATE_FIELDS(3), CHANGE_PROG(4) or VERSION(6)"
    )]
    InvalidHeaderType(u16),
    /// `LIBCCP_READ_INVALID_OP`.
    #[error("instruction {instr}: invalid opcode {opcode}")]
    InvalidOp {
        /// Instruction index.
        instr: usize,
        /// Opcode.
        opcode: u8,
    },
    /// `LIBCCP_READ_REG_NOT_ALLOWED`: result register IMMEDIATE or PRIMITIVE.
    #[error("instruction {instr}: result register may not have type {reg_type}")]
    RegNotAllowed {
        /// Instruction index.
        instr: usize,
        /// Register type.
        reg_type: u8,
    },
    /// `LIBCCP_READ_INVALID_RETURN_REG`: unknown type or index out of range.
    #[error("instruction {instr}: invalid result register (type {reg_type}, index {index})")]
    InvalidReturnReg {
        /// Instruction index.
        instr: usize,
        /// Register type.
        reg_type: u8,
        /// Register index.
        index: u32,
    },
    /// `LIBCCP_READ_INVALID_LEFT_REG`.
    #[error("instruction {instr}: invalid left register (type {reg_type}, index {index})")]
    InvalidLeftReg {
        /// Instruction index.
        instr: usize,
        /// Register type.
        reg_type: u8,
        /// Register index.
        index: u32,
    },
    /// `LIBCCP_READ_INVALID_RIGHT_REG`.
    #[error("instruction {instr}: invalid right register (type {reg_type}, index {index})")]
    InvalidRightReg {
        /// Instruction index.
        instr: usize,
        /// Register type.
        reg_type: u8,
        /// Register index.
        index: u32,
    },
    /// `LIBCCP_INSTALL_TYPE_MISMATCH` (kept for code parity).
    #[error("install message type mismatch")]
    InstallTypeMismatch,
    /// `LIBCCP_INSTALL_TOO_MANY_EXPR`.
    #[error("program has {0} expressions, at most 256 are allowed")]
    InstallTooManyExpr(u32),
    /// `LIBCCP_INSTALL_TOO_MANY_INSTR`.
    #[error("program has {0} instructions, at most 256 are allowed")]
    InstallTooManyInstr(u32),
    /// `LIBCCP_UPDATE_TYPE_MISMATCH` (kept for code parity).
    #[error("update message type mismatch")]
    UpdateTypeMismatch,
    /// `LIBCCP_UPDATE_TOO_MANY`.
    #[error("UPDATE_FIELDS carries {0} updates, at most 222 are allowed")]
    UpdateTooMany(u32),
    /// `LIBCCP_UPDATE_INVALID_REG_TYPE`: only control registers, `Cwnd` and
    /// `Rate` can be updated.
    #[error("cannot update register of type {reg_type} (index {index})")]
    UpdateInvalidRegType {
        /// Register type.
        reg_type: u8,
        /// Register index.
        index: u32,
    },
    /// `LIBCCP_CHANGE_TYPE_MISMATCH` (kept for code parity).
    #[error("change-program message type mismatch")]
    ChangeTypeMismatch,
    /// `LIBCCP_CHANGE_TOO_MANY`.
    #[error("CHANGE_PROG carries {0} updates, at most 222 are allowed")]
    ChangeTooMany(u32),
    /// `LIBCCP_UNKNOWN_CONNECTION`: no live connection with this socket id.
    #[error("unknown connection (no live flow with that socket id)")]
    UnknownConnection,
    /// `LIBCCP_CREATE_PENDING`: a CREATE was attempted less than 100 ms ago.
    #[error("CREATE message still pending")]
    CreatePending,
    /// `LIBCCP_CONNECTION_NOT_INITIALIZED` (kept for code parity).
    #[error("connection not initialized")]
    ConnectionNotInitialized,
    /// `LIBCCP_PROG_TABLE_FULL` (never happens: the table grows).
    #[error("program table full")]
    ProgTableFull,
    /// `LIBCCP_PROG_NOT_FOUND` (kept for code parity: like libccp, a
    /// CHANGE_PROG to an unknown program is ignored, not an error).
    #[error("datapath program not found")]
    ProgNotFound,
    /// `LIBCCP_ADD_INT_OVERFLOW`: an ADD wrapped (the program run was
    /// aborted).
    #[error("datapath program error: integer overflow in ADD")]
    AddOverflow,
    /// `LIBCCP_DIV_BY_ZERO`: a DIV by zero (the program run was aborted).
    #[error("datapath program error: division by zero")]
    DivByZero,
    /// `LIBCCP_MUL_INT_OVERFLOW`: a MUL wrapped to below its left operand
    /// (libccp's check; the program run was aborted).
    #[error("datapath program error: integer overflow in MUL")]
    MulOverflow,
    /// `LIBCCP_SUB_INT_UNDERFLOW`: a SUB wrapped (the program run was
    /// aborted).
    #[error("datapath program error: integer underflow in SUB")]
    SubUnderflow,
    /// `LIBCCP_PRIV_IS_NULL` (kept for code parity).
    #[error("connection state missing")]
    PrivIsNull,
    /// `LIBCCP_PROG_IS_NULL`: the connection has no (existing) program.
    #[error("connection has no datapath program")]
    ProgIsNull,
    /// `LIBCCP_FALLBACK_TIMED_OUT`: the agent has been unreachable for longer
    /// than the fallback timeout.
    #[error("fallback timer expired: agent unreachable")]
    FallbackTimedOut,
    /// A message libccp would misread: wrong length, an expression outside the
    /// instruction list, too many report fields, bad VERSION magic, ...
    #[error("malformed message: {0}")]
    Malformed(WireError),
    /// A control register index of 110 or more in an update.
    #[error("cannot update control register {index}: there are 110")]
    UpdateInvalidRegIndex {
        /// Register index.
        index: u32,
    },
    /// An algorithm name longer than 63 bytes.
    #[error("congestion algorithm name is {0} bytes, at most 63 fit the CREATE message")]
    CongAlgTooLong(usize),
    /// More than `u32::MAX` simultaneous connections.
    #[error("no socket id left")]
    TooManyConnections,
    /// The agent speaks another protocol version; it is refused.
    #[error(
        "protocol version mismatch: agent speaks libccp wire v{agent}, this datapath speaks v{datapath}; refusing agent"
    )]
    VersionMismatch {
        /// The agent's version.
        agent: u32,
        /// This datapath's version.
        datapath: u32,
    },
    /// Sending a message failed.
    #[error("sending a message to the agent failed: {0}")]
    Send(#[source] std::io::Error),
}

impl Error {
    /// The libccp error code (`LIBCCP_*`, negative) this error corresponds to,
    /// if libccp has one.
    pub fn libccp_code(&self) -> Option<i32> {
        Some(match self {
            Error::MissingArg(_) => -11,
            Error::NullArg => -12,
            Error::BufsizeNegative => -21,
            Error::Truncated { .. } => -22,
            Error::MsgTooLong => -23,
            Error::WriteInvalidHeaderType(_) => -31,
            Error::InvalidHeaderType(_) => -32,
            Error::InvalidOp { .. } => -33,
            Error::RegNotAllowed { .. } => -34,
            Error::InvalidReturnReg { .. } => -35,
            Error::InvalidLeftReg { .. } => -36,
            Error::InvalidRightReg { .. } => -37,
            Error::InstallTypeMismatch => -41,
            Error::InstallTooManyExpr(_) => -42,
            Error::InstallTooManyInstr(_) => -43,
            Error::UpdateTypeMismatch => -51,
            Error::UpdateTooMany(_) => -52,
            Error::UpdateInvalidRegType { .. } => -53,
            Error::ChangeTypeMismatch => -61,
            Error::ChangeTooMany(_) => -62,
            Error::UnknownConnection => -71,
            Error::CreatePending => -72,
            Error::ConnectionNotInitialized => -73,
            Error::ProgTableFull => -81,
            Error::ProgNotFound => -82,
            Error::AddOverflow => -91,
            Error::DivByZero => -92,
            Error::MulOverflow => -93,
            Error::SubUnderflow => -94,
            Error::PrivIsNull => -95,
            Error::ProgIsNull => -96,
            Error::FallbackTimedOut => -101,
            Error::Malformed(_)
            | Error::UpdateInvalidRegIndex { .. }
            | Error::CongAlgTooLong(_)
            | Error::TooManyConnections
            | Error::VersionMismatch { .. }
            | Error::Send(_) => return None,
        })
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated {
                what,
                needed,
                available,
            } => Error::Truncated {
                what,
                needed,
                available,
            },
            WireError::MsgTooLong { .. } => Error::MsgTooLong,
            WireError::InvalidHeaderType { typ, .. } => Error::InvalidHeaderType(typ),
            WireError::TooManyExpressions(n) => Error::InstallTooManyExpr(n),
            WireError::TooManyInstructions(n) => Error::InstallTooManyInstr(n),
            WireError::UpdateTooMany(n) => Error::UpdateTooMany(n),
            WireError::ChangeTooMany(n) => Error::ChangeTooMany(n),
            WireError::InvalidOp { instr, opcode } => Error::InvalidOp { instr, opcode },
            WireError::RegNotAllowed { instr, reg_type } => {
                Error::RegNotAllowed { instr, reg_type }
            }
            WireError::InvalidRegister {
                instr,
                operand,
                reg_type,
                index,
            } => match operand {
                Operand::Result => Error::InvalidReturnReg {
                    instr,
                    reg_type,
                    index,
                },
                Operand::Left => Error::InvalidLeftReg {
                    instr,
                    reg_type,
                    index,
                },
                Operand::Right => Error::InvalidRightReg {
                    instr,
                    reg_type,
                    index,
                },
            },
            WireError::CongAlgTooLong(n) => Error::CongAlgTooLong(n),
            other @ (WireError::LengthMismatch { .. }
            | WireError::HeaderLenTooSmall { .. }
            | WireError::TooManyFields { .. }
            | WireError::ExprOutOfRange { .. }
            | WireError::TooManyReportFields(_)
            | WireError::BadVersionMagic { .. }
            | WireError::BadCongAlg(_)) => Error::Malformed(other),
        }
    }
}
