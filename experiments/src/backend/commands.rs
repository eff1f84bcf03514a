//! A recipe's `commands` on the wall-clock backends (udp, emu): the agent runs with a control
//! socket (`--ctl`), and at each command's time, counted on the clock of the flows' starts (from
//! the moment `ccp-udp send` is started), ccp-exp runs `ccp-agent ctl --ctl SOCKET set-params
//! SRC_IP:SRC_PORT KEY=VALUE ...`, exactly what a person would type against a live agent.
//!
//! A recipe names a flow by its index; the agent knows it by its source address, which the
//! sender picks when the flow starts. So before a command ccp-exp asks the agent for its live
//! flows (`ccp-agent ctl flows`) and picks the one with the flow's algorithm and parameters (the
//! recipe's, after any earlier command on it). Flows alike in both are told apart by the order
//! they reached the agent (its flow ids), which is the order of their starts: recipes where such
//! flows start less than [`COMMAND_START_GAP_US`] apart are refused when they are read. A flow
//! that has not reached the agent yet (its handshake) is waited for, up to [`REACH_WAIT`].
//! After the run, every address a command went to is checked against the sender's own account
//! of its flows' addresses (`send.json`), so a command that reached the wrong flow fails the run.
//!
//! Every command, the agent's flow list it was resolved against and the agent's answer go to
//! `raw/commands.log`. A command the agent refuses (or that cannot reach it) fails the run with
//! the agent's answer.

use super::{BackendError, RunContext};
use crate::recipe::{AgentCommand, COMMAND_START_GAP_US, Recipe, expand_flows, flow_params};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long after a command's time ccp-exp waits for its flow to reach the agent.
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

/// The commands of one run, run as their times come.
pub(crate) struct Commander {
    agent_bin: PathBuf,
    ctl: PathBuf,
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
        while let Some(at) = self.next_at()
            && at <= elapsed
        {
            let i = self.next;
            self.next += 1;
            self.run_one(i, Instant::now() - (elapsed - at))?;
        }
        Ok(())
    }

    /// Command `i`, due at `due`: find its flow among the agent's, then send it.
    fn run_one(&mut self, i: usize, due: Instant) -> Result<(), BackendError> {
        let c = self.recipe.commands[i].clone();
        let fail = |m: String| {
            BackendError::Process(format!(
                "commands[{i}] ({} at {}): {m}",
                c.written(),
                secs(c.at_us)
            ))
        };
        let src = loop {
            let listed = self.ctl("flows").map_err(|e| fail(e.clone()))?;
            let live: LiveFlows = serde_json::from_str(&listed)
                .map_err(|e| fail(format!("the agent's flow list is not JSON ({e}): {listed}")))?;
            let waited = due.elapsed();
            self.note(&format!(
                "{:.3} s: commands[{i}] {}: the agent's flows: {}",
                (c.at_us as f64 / 1e6) + waited.as_secs_f64(),
                c.written(),
                listed
            ))?;
            match self.find(i, &c, &live.flows, waited) {
                Ok(Some(src)) => break src,
                Ok(None) if waited < REACH_WAIT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) => {
                    return Err(fail(format!(
                        "flow={} is not among the agent's flows {} s after the command's time: it has not reached the agent, or it has ended (a sized flow that finished); looked for {}, the agent has: {}",
                        c.flow,
                        REACH_WAIT.as_secs_f64(),
                        flow_params(&self.recipe, c.flow, i)
                            .map_or_else(|| "its algorithm".to_string(), |p| p.to_string()),
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
                Err(m) => return Err(fail(m)),
            }
        };
        let line = c.line(&src);
        let answer = self.ctl(&line);
        self.note(&format!(
            "{:.3} s: ccp-agent ctl {line} -> {}",
            (c.at_us as f64 / 1e6) + due.elapsed().as_secs_f64(),
            match &answer {
                Ok(a) => a.clone(),
                Err(e) => format!("FAILED: {e}"),
            }
        ))?;
        let answer = answer.map_err(|e| fail(format!("the agent refused {line:?}: {e}")))?;
        if !answer.starts_with("ok") {
            return Err(fail(format!("the agent answered {line:?} with: {answer}")));
        }
        self.known.insert(c.flow, src);
        Ok(())
    }

    /// The address of command `i`'s flow among the agent's `live` flows (`None`: not there
    /// yet), `waited` after the command's time.
    fn find(
        &self,
        i: usize,
        c: &AgentCommand,
        live: &[LiveFlow],
        waited: Duration,
    ) -> Result<Option<String>, String> {
        let r = &self.recipe;
        if let Some(src) = self.known.get(&c.flow) {
            return if live.iter().any(|f| &f.src == src) {
                Ok(Some(src.clone()))
            } else {
                Err(format!(
                    "flow={} ({src}) is no longer among the agent's flows: it has ended",
                    c.flow
                ))
            };
        }
        let instances = expand_flows(&r.flows);
        let algorithm = |k: usize| r.flows[instances[k].0].algorithm.as_str();
        let want = |k: usize| flow_params(r, k, i).map(|p| p.to_string());
        let target = want(c.flow);
        let claimed: Vec<&String> = self.known.values().collect();
        let mut candidates: Vec<&LiveFlow> = live
            .iter()
            .filter(|f| {
                !claimed.contains(&&f.src)
                    && f.algorithm == algorithm(c.flow)
                    && Some(&f.params) == target.as_ref()
            })
            .collect();
        candidates.sort_by_key(|f| f.id);
        match candidates.len() {
            0 => return Ok(None),
            1 => return Ok(Some(candidates[0].src.clone())),
            _ => {}
        }
        // Several alike: the recipe's flows alike, started by now, not ended and not found by
        // an earlier command, in the order they reached the agent (their starts; recipes with
        // such starts closer than COMMAND_START_GAP_US are refused).
        let now_us = c.at_us + waited.as_micros() as u64;
        let mut peers: Vec<(u64, usize)> = instances
            .iter()
            .enumerate()
            .filter(|(k, (e, _, start))| {
                let f = &r.flows[*e];
                *start < now_us
                    && f.duration_us.is_none_or(|d| start + d > now_us)
                    && !self.known.contains_key(k)
                    && f.algorithm == algorithm(c.flow)
                    && want(*k) == target
            })
            .map(|(k, (_, _, start))| (*start, k))
            .collect();
        peers.sort();
        let close = peers
            .windows(2)
            .any(|w| w[1].0 - w[0].0 < COMMAND_START_GAP_US);
        match peers.iter().position(|p| p.1 == c.flow) {
            Some(pos) if peers.len() == candidates.len() && !close => {
                Ok(Some(candidates[pos].src.clone()))
            }
            _ => Err(format!(
                "cannot tell flow={} from the agent's other flows with the same algorithm and parameters ({} live, {} expected)",
                c.flow,
                candidates.len(),
                peers.len()
            )),
        }
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
