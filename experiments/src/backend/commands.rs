//! A recipe's `commands` on the wall-clock backends (udp, emu): the agent runs with a control
//! socket (`--ctl`), and at each command's time, counted on the clock of the flows' starts (from
//! the moment `ccp-udp send` is started), ccp-exp runs `ccp-agent ctl --ctl SOCKET set-params
//! SRC_IP:SRC_PORT KEY=VALUE ...` (or `set-algorithm SRC_IP:SRC_PORT NAME[:KEY=VALUE,...]`),
//! exactly what a person would type against a live agent.
//!
//! A recipe names a flow by its index; the agent knows it by its source address, which the
//! sender picks when the flow starts. So the sender announces each flow's address as it starts
//! (`ccp-udp send --flows-out raw/<stem>-flows.jsonl`: one JSON line per flow, with the flow's
//! index in that sender, once its socket is bound, before its HELLO), and a command's flow is
//! found there: recipe flow N is the sender's flow j of the process that carries it
//! ([`sender_flow`]: `send`, or on the emulator `send-rev` for the reverse flows; j counts that
//! process's agent flows in recipe order, as their `--flow` specs are given). Flows alike in
//! algorithm and parameters, started at the same instant, are told apart like any others. The
//! command then waits until the agent lists a flow at that address (`ccp-agent ctl flows`; the
//! flow reaches it with its handshake), running the flow's algorithm and parameters (the
//! recipe's, after any earlier command on it), up to [`REACH_WAIT`] after the command's time.
//! After the run, every address a command went to is checked against the sender's own account
//! of its flows' addresses (`send.json`), so a command that reached the wrong flow fails the run.
//!
//! Every command, the announcement it was resolved by, the agent's flow list and the agent's
//! answer go to `raw/commands.log`. A command the agent refuses (or that cannot reach it) fails
//! the run with the agent's answer.

use super::{BackendError, RunContext};
use crate::recipe::{AgentCommand, Recipe, expand_flows, flow_params, kernel_cc};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long after a command's time ccp-exp waits for its flow to be announced by its sender and
/// to reach the agent.
pub const REACH_WAIT: Duration = Duration::from_secs(2);

/// One live flow of the agent's `flows` answer.
#[derive(Clone, Debug, serde::Deserialize)]
struct LiveFlow {
    id: u64,
    src: String,
    algorithm: String,
    params: String,
}

#[derive(serde::Deserialize)]
struct LiveFlows {
    flows: Vec<LiveFlow>,
}

/// One line of a sender's `--flows-out` file: a flow's start.
#[derive(Clone, Debug, serde::Deserialize)]
struct Announced {
    /// The flow's index in its sender.
    flow: usize,
    /// Its source address.
    src: String,
    /// µs since the sender started.
    at_us: u64,
}

/// The `--flows-out` file of the sender whose files are named `stem` (`send`, `send-rev`).
pub(crate) fn flows_out_path(raw: &Path, stem: &str) -> PathBuf {
    raw.join(format!("{stem}-flows.jsonl"))
}

/// The complete lines of a `--flows-out` file so far (none while it does not exist yet; a line
/// being written is left for the next read).
fn announced(path: &Path) -> Result<Vec<Announced>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| format!("{}: not a flow announcement ({e}): {l}", path.display()))
        })
        .collect()
}

/// Which sender carries recipe flow `k` of `r`, and as which of its flows: the stem of the
/// sender's files (`send`; `send-rev` for a reverse flow, which the emulator's receiver host
/// sends) and the index among that sender's flows, which are the recipe's agent flows of the
/// same direction in recipe order (the `--flow` specs of [`super::udp::flow_args_of`] over
/// [`super::udp::agent_instances`], split by direction on the emulator). `None` for a kernel
/// TCP flow or an index out of range.
pub(crate) fn sender_flow(r: &Recipe, k: usize) -> Option<(&'static str, usize)> {
    let instances = expand_flows(&r.flows);
    let &(e, _, _) = instances.get(k)?;
    let agent_flow = |e: usize| kernel_cc(&r.flows[e].algorithm).is_none();
    if !agent_flow(e) {
        return None;
    }
    let reverse = r.flows[e].reverse;
    let j = instances[..k]
        .iter()
        .filter(|(x, _, _)| agent_flow(*x) && r.flows[*x].reverse == reverse)
        .count();
    Some((if reverse { "send-rev" } else { "send" }, j))
}

/// The commands of one run, run as their times come.
pub(crate) struct Commander {
    agent_bin: PathBuf,
    ctl: PathBuf,
    /// The run's `raw/`, where the senders announce their flows.
    raw: PathBuf,
    log_path: PathBuf,
    log: std::fs::File,
    recipe: Recipe,
    /// The next command (index into `recipe.commands`).
    next: usize,
    /// Flow index -> the address a command found it at.
    known: HashMap<usize, String>,
}

impl Commander {
    /// The commander of `ctx`'s recipe (`None` without commands), for an agent whose control
    /// socket is `ctl`; its log is `raw/commands.log`.
    pub(crate) fn new(
        ctx: &RunContext,
        ctl: &Path,
        raw: &Path,
    ) -> Result<Option<Commander>, BackendError> {
        if ctx.recipe.commands.is_empty() {
            return Ok(None);
        }
        let log_path = raw.join("commands.log");
        Ok(Some(Commander {
            agent_bin: ctx.bins.find("ccp-agent")?,
            ctl: ctl.to_path_buf(),
            raw: raw.to_path_buf(),
            log: super::udp::file(&log_path)?,
            log_path,
            recipe: ctx.recipe.clone(),
            next: 0,
            known: HashMap::new(),
        }))
    }

    /// Time (from the run's start) of the next command, if any is left.
    pub(crate) fn next_at(&self) -> Option<Duration> {
        self.recipe
            .commands
            .get(self.next)
            .map(|c| Duration::from_micros(c.at_us))
    }

    fn note(&mut self, line: &str) -> Result<(), BackendError> {
        writeln!(self.log, "{line}").map_err(|e| BackendError::io(&self.log_path, e))
    }

    /// Run `ccp-agent ctl --ctl SOCKET WORDS...`; its answer, or why it failed.
    fn ctl(&self, line: &str) -> Result<String, String> {
        let out = Command::new(&self.agent_bin)
            .arg("ctl")
            .arg("--ctl")
            .arg(&self.ctl)
            .args(line.split_whitespace())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run ccp-agent ctl: {e}"))?;
        let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() {
            Ok(answer)
        } else {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            Err([answer, err]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("; "))
        }
    }

    /// Run every command that is due at `elapsed` (time since the run's start).
    pub(crate) fn poll(&mut self, elapsed: Duration) -> Result<(), BackendError> {
        // The run's start, once: each due command's time is counted from it, also when an
        // earlier command of this poll took a while.
        let start = Instant::now() - elapsed;
        while let Some(at) = self.next_at()
            && at <= elapsed
        {
            let i = self.next;
            self.next += 1;
            self.run_one(i, start + at)?;
        }
        Ok(())
    }

    /// Command `i`, due at `due`: find its flow's address in its sender's announcements, wait
    /// until the agent has the flow, then send it.
    fn run_one(&mut self, i: usize, due: Instant) -> Result<(), BackendError> {
        let c = self.recipe.commands[i].clone();
        let fail = |m: String| {
            BackendError::Process(format!(
                "commands[{i}] ({} at {}): {m}",
                c.written(),
                secs(c.at_us)
            ))
        };
        let r = &self.recipe;
        // Validation lets commands name agent flows only.
        let (stem, j) = sender_flow(r, c.flow)
            .ok_or_else(|| fail(format!("flow={} is not a flow of the agent", c.flow)))?;
        let instances = expand_flows(&r.flows);
        // The flow's algorithm and parameters as the agent should list them: the recipe's, after
        // every earlier command on it (a set-algorithm's new algorithm included).
        let now = flow_params(r, c.flow, i);
        let algorithm = now.as_ref().map_or_else(
            || r.flows[instances[c.flow].0].algorithm.clone(),
            |p| p.algorithm().to_string(),
        );
        let params = now.map(|p| p.to_string());
        let path = flows_out_path(&self.raw, stem);
        let file = format!("raw/{stem}-flows.jsonl");
        let (src, line, listed) = loop {
            let waited = due.elapsed();
            let late = waited >= REACH_WAIT;
            let all = announced(&path).map_err(fail)?;
            let Some(a) = all.iter().rfind(|a| a.flow == j) else {
                if !late {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                return Err(fail(format!(
                    "flow={} (flow {j} of ccp-udp {stem}) has not announced its address in {file} {} s after the command's time: it has not started",
                    c.flow,
                    REACH_WAIT.as_secs_f64()
                )));
            };
            // A later flow of the same sender on the same address: this one has ended and the
            // port went to the other.
            if let Some(b) = all
                .iter()
                .find(|b| b.src == a.src && b.flow != j && b.at_us >= a.at_us)
            {
                return Err(fail(format!(
                    "flow={} ({}) has ended: its address now belongs to flow {} of ccp-udp {stem}",
                    c.flow, a.src, b.flow
                )));
            }
            let line = format!(
                "{file}: flow {j} at {} ({} µs after the sender's start)",
                a.src, a.at_us
            );
            let listed = self.ctl("flows").map_err(|e| fail(e.clone()))?;
            let live: LiveFlows = serde_json::from_str(&listed)
                .map_err(|e| fail(format!("the agent's flow list is not JSON ({e}): {listed}")))?;
            match live.flows.iter().find(|f| f.src == a.src) {
                Some(f) if f.algorithm == algorithm && Some(&f.params) == params.as_ref() => {
                    break (a.src.clone(), line, listed);
                }
                Some(f) => {
                    self.note(&format!(
                        "{}: the agent's flows: {listed}",
                        self.stamp(&c, due)
                    ))?;
                    return Err(fail(format!(
                        "the agent's flow at {} ({}) runs {} ({}), but flow={} runs {algorithm} ({})",
                        a.src,
                        f.id,
                        f.algorithm,
                        f.params,
                        c.flow,
                        params.as_deref().unwrap_or("its parameters")
                    )));
                }
                None if !late => std::thread::sleep(Duration::from_millis(20)),
                None => {
                    self.note(&format!(
                        "{}: commands[{i}] {}: {line}; the agent's flows: {listed}",
                        self.stamp(&c, due),
                        c.written()
                    ))?;
                    return Err(fail(format!(
                        "flow={} ({}, announced in {file}) is not among the agent's flows {} s after the command's time: it has not reached the agent, or it has ended (a sized flow that finished); the agent has: {}",
                        c.flow,
                        a.src,
                        REACH_WAIT.as_secs_f64(),
                        if live.flows.is_empty() {
                            "no flows".to_string()
                        } else {
                            live.flows
                                .iter()
                                .map(|f| format!("{} {} ({})", f.id, f.src, f.algorithm))
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    )));
                }
            }
        };
        if let Some(earlier) = self.known.get(&c.flow)
            && earlier != &src
        {
            return Err(fail(format!(
                "flow={} was at {earlier} for an earlier command, its sender now announces {src}",
                c.flow
            )));
        }
        self.note(&format!(
            "{}: commands[{i}] {}: {line}; the agent's flows: {listed}",
            self.stamp(&c, due),
            c.written()
        ))?;
        let cmd = c.line(&src);
        let answer = self.ctl(&cmd);
        self.note(&format!(
            "{}: ccp-agent ctl {cmd} -> {}",
            self.stamp(&c, due),
            match &answer {
                Ok(a) => a.clone(),
                Err(e) => format!("FAILED: {e}"),
            }
        ))?;
        let answer = answer.map_err(|e| fail(format!("the agent refused {cmd:?}: {e}")))?;
        if !answer.starts_with("ok") {
            return Err(fail(format!("the agent answered {cmd:?} with: {answer}")));
        }
        self.known.insert(c.flow, src);
        Ok(())
    }

    /// The time on the run's clock now, for command `c` due at `due`: `12.345 s`.
    fn stamp(&self, c: &AgentCommand, due: Instant) -> String {
        format!(
            "{:.3} s",
            (c.at_us as f64 / 1e6) + due.elapsed().as_secs_f64()
        )
    }

    /// After the run: the address each command went to is its flow's, by the sender's account
    /// (`locals[j]`: the source address of the sender's flow `j`, the `j`-th agent flow of the
    /// recipe). Notes for the run's record.
    pub(crate) fn verify(&mut self, locals: &[String]) -> Result<Vec<String>, BackendError> {
        let instances = super::udp::agent_instances(&self.recipe);
        let all = expand_flows(&self.recipe.flows);
        let mut checked = vec![];
        for (k, src) in &self.known {
            let j = instances.iter().position(|x| Some(x) == all.get(*k));
            let local = j.and_then(|j| locals.get(j));
            if local != Some(src) {
                let line = format!(
                    "flow={k}: the commands went to {src}, but the sender's flow={k} was at {}",
                    local.map_or("(none)", String::as_str)
                );
                self.note(&format!("ERROR: {line}"))?;
                return Err(BackendError::Process(format!(
                    "commands reached the wrong flow: {line}"
                )));
            }
            checked.push((*k, src.clone()));
        }
        checked.sort();
        let ran = self.next;
        self.note(&format!(
            "{ran} commands run; each went to its flow's address (checked against send.json)"
        ))?;
        Ok(vec![format!(
            "agent commands: {ran} run through ccp-agent ctl ({}; raw/commands.log)",
            checked
                .iter()
                .map(|(k, s)| format!("flow={k} at {s}"))
                .collect::<Vec<_>>()
                .join(", ")
        )])
    }

    /// Commands not run yet (the sender finished before their time).
    pub(crate) fn left(&self) -> usize {
        self.recipe.commands.len() - self.next
    }
}

fn secs(us: u64) -> String {
    format!("{} s", us as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::sender_flow;

    #[test]
    fn recipe_flows_map_to_their_senders_flows() {
        // Flow instances: 0, 1 hercules (count 2), 2 kernel cubic, 3 reverse reno, 4 cubic, 5
        // reverse reno. The forward sender carries 0, 1, 4 as its flows 0, 1, 2; the reverse
        // sender 3, 5 as its 0, 1; the kernel flow is no sender's.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.yaml");
        std::fs::write(
            &path,
            "backend: emu\nduration: 10s\nlink: {rate: 20mbit, delay: 5ms}\nflows:\n  \
             - {algorithm: hercules, count: 2}\n  - {algorithm: \"kernel:cubic\"}\n  \
             - {algorithm: reno, reverse: true}\n  - {algorithm: cubic}\n  \
             - {algorithm: reno, reverse: true}\n",
        )
        .unwrap();
        let exp = crate::load(&path).unwrap();
        let r = &exp.parts[0].points[0].recipe;
        let got: Vec<_> = (0..7).map(|k| sender_flow(r, k)).collect();
        assert_eq!(
            got,
            [
                Some(("send", 0)),
                Some(("send", 1)),
                None,
                Some(("send-rev", 0)),
                Some(("send", 2)),
                Some(("send-rev", 1)),
                None,
            ]
        );
    }
}
