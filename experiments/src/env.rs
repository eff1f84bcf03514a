//! The environment a results directory was made in: versions (ccp-exp, git commit, rustc,
//! kernel, the binaries a backend used), the machine's kind (OS, architecture, cores, CPU model;
//! never its hostname) and every invocation that wrote into the directory, with its times.
//! This is `environment.json`, the one file of a results directory that differs between two
//! runs of the same recipe.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The machine and the versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub ccp_exp: String,
    /// Commit of the project's git checkout (`+dirty` is not detected), if found.
    pub git_commit: Option<String>,
    pub rustc: String,
    pub kernel: Option<String>,
    pub os: Option<String>,
    pub arch: String,
    pub cpus: usize,
    pub cpu_model: Option<String>,
    /// `--version` of the binaries a backend ran.
    pub binaries: BTreeMap<String, String>,
}

/// One command that wrote into the directory.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    pub command: String,
    pub shard: Option<String>,
    /// The parts it ran (`--part`); empty: every part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<String>,
    pub started_unix: u64,
    pub finished_unix: u64,
    pub wall_s: f64,
    pub executed: usize,
    pub skipped: usize,
    pub failed: usize,
    pub machine: Machine,
}

/// `environment.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub invocations: Vec<Invocation>,
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Find the git commit of the checkout holding `start` by reading `.git` (no git needed).
pub fn git_commit(start: &Path) -> Option<String> {
    let mut dir: Option<PathBuf> = start.canonicalize().ok();
    while let Some(d) = dir {
        let git = d.join(".git");
        if git.is_dir() {
            let head = std::fs::read_to_string(git.join("HEAD")).ok()?;
            let head = head.trim();
            let Some(r) = head.strip_prefix("ref: ") else {
                return Some(head.to_string());
            };
            if let Ok(c) = std::fs::read_to_string(git.join(r)) {
                return Some(c.trim().to_string());
            }
            let packed = std::fs::read_to_string(git.join("packed-refs")).ok()?;
            return packed
                .lines()
                .find(|l| l.ends_with(&format!(" {r}")))
                .and_then(|l| l.split_whitespace().next())
                .map(str::to_string);
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    None
}

impl Machine {
    /// Describe this machine.
    pub fn here() -> Machine {
        let os = read_trim("/etc/os-release").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
        let cpu_model = read_trim("/proc/cpuinfo").and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        Machine {
            ccp_exp: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: git_commit(Path::new(env!("CARGO_MANIFEST_DIR")))
                .or_else(|| std::env::current_dir().ok().and_then(|d| git_commit(&d))),
            rustc: env!("CCP_EXP_RUSTC").to_string(),
            kernel: read_trim("/proc/sys/kernel/osrelease"),
            os,
            arch: std::env::consts::ARCH.to_string(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            binaries: BTreeMap::new(),
        }
    }

    /// Record `bin --version`.
    pub fn add_binary(&mut self, name: &str, path: &Path) {
        let v = std::process::Command::new(path)
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        self.binaries.insert(name.to_string(), v);
    }
}

/// Seconds since the epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Read `environment.json` of `dir` (empty if absent or unreadable).
pub fn load(dir: &Path) -> Environment {
    std::fs::read_to_string(dir.join("environment.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}
