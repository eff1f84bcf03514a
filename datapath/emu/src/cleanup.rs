//! The sweep for leftovers: interfaces whose names start with a prefix (in the calling
//! namespace) and namespace init processes named `PREFIX-ns`. In normal operation there is
//! nothing to sweep: TUN devices are non-persistent and vanish with the emulator's descriptors,
//! and namespace inits exit (killing their namespace) as soon as the emulator's end of their
//! life pipe closes, SIGKILL included. The sweep covers an emulator that is stopped (SIGSTOP)
//! or hung, and is what tests run first.

use crate::error::Result;
use crate::shell::init_name;
use crate::sys;

/// What a sweep removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Interfaces deleted.
    pub interfaces: Vec<String>,
    /// Namespace init processes killed (pids).
    pub processes: Vec<i32>,
}

/// Pids of live namespace inits whose process name is `PREFIX-ns` (zombies, which hold no
/// namespace, are left to whoever reaps them).
pub fn find_inits(prefix: &str) -> Vec<i32> {
    let want = init_name(prefix);
    let want = &want[..want.len().min(15)];
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            // /proc/PID/stat: "pid (comm) state ..."; zombies hold nothing and are skipped.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| {
                    let open = st.find('(')?;
                    let close = st.rfind(')')?;
                    let comm = &st[open + 1..close];
                    let state = st[close + 1..].split_whitespace().next()?;
                    Some(comm == want && state != "Z" && state != "X")
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Interfaces of the calling namespace whose names start with `prefix`.
pub fn find_interfaces(prefix: &str) -> Vec<String> {
    sys::interface_names()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Remove leftovers of emulators that used `prefix`.
pub fn sweep(prefix: &str) -> Result<Sweep> {
    crate::shell::check_prefix(prefix)?;
    let mut out = Sweep::default();
    for pid in find_inits(prefix) {
        // SAFETY: signalling a process by pid.
        if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
            out.processes.push(pid);
        }
    }
    for name in find_interfaces(prefix) {
        let ok = std::process::Command::new("ip")
            .args(["link", "delete", &name])
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            out.interfaces.push(name);
        }
    }
    Ok(out)
}
