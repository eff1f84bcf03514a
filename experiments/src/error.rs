//! The runner's error type.

use crate::backend::BackendError;
use crate::experiment::RecipeErrors;
use std::path::{Path, PathBuf};

/// Anything that stops a command of the runner.
#[derive(Debug, thiserror::Error)]
pub enum ExpError {
    /// The recipe does not validate (every error, one per line).
    #[error("{0}")]
    Recipe(#[from] RecipeErrors),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A results directory that cannot be used as asked.
    #[error("{0}")]
    Results(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// An option that does not fit the recipe (a part it does not have).
    #[error("{0}")]
    Usage(String),
}

impl ExpError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> ExpError {
        ExpError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
