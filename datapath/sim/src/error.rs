//! The simulator's error type: everything that can go wrong loading a scenario, building it
//! and running it.

use std::path::PathBuf;

/// An error of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario does not parse or does not validate.
    #[error("{}: {message}", file.display())]
    Scenario { file: PathBuf, message: String },
    /// The scenario refers to something that does not exist (a host, an algorithm, a queue).
    #[error("scenario: {0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A trace or CDF file is malformed.
    #[error("{}:{line}: {message}", path.display())]
    Data {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// The agent loop or the datapath engine failed.
    #[error("agent: {0}")]
    Agent(String),
}

impl SimError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> SimError {
        SimError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
