//! The crate's error type: every way building or running an emulated path can fail, each with
//! the file, line, argument or system call that a person needs to fix it.

use std::path::PathBuf;

/// Errors of the emulator library.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// A trace file could not be read.
    #[error("{path}: cannot read trace: {source}")]
    TraceIo {
        /// The trace file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A trace file is malformed; `line` is 1-based (0 when the problem is the whole file).
    #[error("{path}:{line}: {message}")]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// 1-based line number, 0 for the whole file.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A rate schedule such as `0s:20mbit,5s:10mbit` is malformed.
    #[error("bad rate schedule {text:?}: {message}")]
    Schedule {
        /// The schedule as written.
        text: String,
        /// What is wrong.
        message: String,
    },
    /// A queue type or its arguments are wrong.
    #[error("bad queue {queue:?} with arguments {args:?}: {message}")]
    Queue {
        /// The queue type as written.
        queue: String,
        /// The arguments as written.
        args: String,
        /// What is wrong.
        message: String,
    },
    /// Any other invalid configuration value.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The emulator needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create namespaces and TUN devices.
    #[error("{0}: the emulator must run as root (it creates network namespaces and TUN devices)")]
    NotRoot(String),
    /// No free address block was found for a new shell.
    #[error("no free address block: {0}")]
    Addresses(String),
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A log file could not be written.
    #[error("{path}: cannot write log: {source}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Result alias of the crate.
pub type Result<T, E = EmuError> = std::result::Result<T, E>;

impl EmuError {
    /// A failed system call, with the OS error taken from `errno`.
    pub fn last_os(what: impl Into<String>) -> Self {
        EmuError::Sys {
            what: what.into(),
            source: std::io::Error::last_os_error(),
        }
    }

    /// A failed operation with a given I/O error.
    pub fn sys(what: impl Into<String>, source: std::io::Error) -> Self {
        EmuError::Sys {
            what: what.into(),
            source,
        }
    }
}
