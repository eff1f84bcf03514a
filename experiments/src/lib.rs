//! `ccp-exp`: the experiment runner of the congestion control plane.
//!
//! An experiment is a YAML recipe (data, not code): the backend (`sim`, `udp` on loopback, `emu`
//! and `quic` on the emulator with root; `kernel` is named but not available in this build), the
//! link in mahimahi's
//! vocabulary, the flows (algorithm and parameters, count, start, size or duration, class,
//! application-limited rate, deadline, minimum rate), workloads, runs and seeds, a sweep (the
//! cartesian product over any fields), metrics and plots. The runner validates it with messages
//! that name the file, line, column and field; runs it (the simulator's runs in parallel,
//! real-time runs one at a time), resumably and in deterministic shards; and writes a results
//! directory with per-run JSON/CSV, summaries with confidence intervals, SVG plots and one
//! self-contained HTML report. The format is described in `experiments/README.md`.
//!
//! Modules, in the order data flows through them:
//!
//! * [`tree`]: positioned YAML nodes that know their file; merging, field paths.
//! * [`recipe`]: the typed recipe of one sweep point and its validation.
//! * [`experiment`]: includes, parts and the sweep's points.
//! * [`results`]: the plan of runs, shards, the results directory, resume and merge.
//! * [`backend`]: running one run ([`backend::sim`], [`backend::udp`], [`backend::emu`],
//!   [`backend::quic`]; the kernel backend says why it cannot).
//! * [`data`]: the backend-independent run data and the records written per run.
//! * [`metrics`], [`stats`]: metric definitions; mean, standard deviation, Student-t CI.
//! * [`runner`]: executing a plan with progress bars.
//! * [`svg`], [`plots`], [`report`]: charts, the plots of a results directory, the HTML report.
//! * [`env`](mod@env): versions and machine of `environment.json`; [`error`]: the error type.

pub mod backend;
pub mod data;
pub mod env;
pub mod error;
pub mod experiment;
pub mod metrics;
pub mod plots;
pub mod recipe;
pub mod report;
pub mod results;
pub mod runner;
pub mod stats;
pub mod svg;
pub mod tree;

pub use error::ExpError;
pub use experiment::{Experiment, RecipeErrors, load};
pub use results::{Plan, Shard};
pub use runner::{Outcome, RunOptions, run};
