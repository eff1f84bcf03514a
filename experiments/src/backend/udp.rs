//! The udp backend: a real transfer on loopback. For one run it starts `ccp-agent` on a unix
//! socket in the run's directory, `ccp-udp recv` on an ephemeral port, `ccp-udp relay` in
//! between when the link has a delay or a loss (the relay applies both to each direction), and
//! `ccp-udp send` with one `--flow` per flow copy; it then reads the sender's and the receiver's
//! JSON summaries (kept under `raw/`) into [`RunData`]. Every child process dies with ccp-exp
//! (`PR_SET_PDEATHSIG`), and is killed when the run ends or fails.

use super::commands::Commander;
use super::{BackendError, RunContext};
use crate::data::{FlowData, RunData, Sample};
use crate::recipe::{expand_flows, kernel_cc};
use serde::Deserialize;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (and reaped) when dropped.
pub(crate) struct Proc {
    pub(crate) child: Child,
    pub(crate) name: &'static str,
}

impl Proc {
    /// Wrap a child started elsewhere (e.g. inside a namespace).
    pub(crate) fn adopt(name: &'static str, child: Child) -> Proc {
        Proc { child, name }
    }

    pub(crate) fn spawn(name: &'static str, cmd: &mut Command) -> Result<Proc, BackendError> {
        // SAFETY: prctl is async-signal-safe; the closure touches nothing else.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| BackendError::Process(format!("cannot start {name}: {e}")))?;
        tracing::debug!(name, pid = child.id(), "started");
        Ok(Proc { child, name })
    }

    pub(crate) fn terminate(&mut self, grace: Duration) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: sending a signal to our own child.
            unsafe {
                libc::kill(self.child.id() as i32, libc::SIGTERM);
            }
            let t0 = Instant::now();
            while t0.elapsed() < grace {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn wait_for(
        &mut self,
        timeout: Duration,
    ) -> Result<std::process::ExitStatus, BackendError> {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self
                .child
                .try_wait()
                .map_err(|e| BackendError::Process(format!("{}: {e}", self.name)))?
            {
                return Ok(s);
            }
            if t0.elapsed() > timeout {
                return Err(BackendError::Process(format!(
                    "{} did not finish within {timeout:?}",
                    self.name
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate(Duration::from_millis(500));
    }
}

pub(crate) fn file(path: &Path) -> Result<std::fs::File, BackendError> {
    std::fs::File::create(path).map_err(|e| BackendError::io(path, e))
}

/// Wait until `path` has a line starting with `prefix`; returns the rest of that line.
pub(crate) fn wait_line(
    p: &mut Proc,
    path: &Path,
    prefix: &str,
    timeout: Duration,
) -> Result<String, BackendError> {
    wait_until(p, path, timeout, |l| {
        l.strip_prefix(prefix).map(|rest| rest.trim().to_string())
    })
}

/// Wait until `path` has a line containing `text` (e.g. after a log line's time stamp).
pub(crate) fn wait_text(
    p: &mut Proc,
    path: &Path,
    text: &str,
    timeout: Duration,
) -> Result<(), BackendError> {
    wait_until(p, path, timeout, |l| l.contains(text).then(String::new)).map(drop)
}

/// Wait until `find` matches a line of `path`, or fail if `p` exits or `timeout` passes. Only
/// finished lines count: the file may be read while its writer is half-way through one.
fn wait_until(
    p: &mut Proc,
    path: &Path,
    timeout: Duration,
    find: impl Fn(&str) -> Option<String>,
) -> Result<String, BackendError> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(found) = text
            .split_inclusive('\n')
            .filter_map(|l| l.strip_suffix('\n'))
            .find_map(&find)
        {
            return Ok(found);
        }
        if let Ok(Some(status)) = p.child.try_wait() {
            return Err(BackendError::Process(format!(
                "{} exited ({status}) before it was ready: {}",
                p.name,
                text.trim()
            )));
        }
        if t0.elapsed() > timeout {
            return Err(BackendError::Process(format!(
                "{} was not ready within {timeout:?}: {}",
                p.name,
                text.trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[derive(Deserialize)]
struct TraceSample {
    t_s: f64,
    cwnd_bytes: u64,
    srtt_us: u64,
    delivered_bytes: u64,
    /// Bytes the receiver has acknowledged, beyond a hole too (absent: a summary from before
    /// the transport wrote it).
    #[serde(default)]
    received_bytes: Option<u64>,
    /// Mean one-way delay in excess of the flow's smallest since the previous sample, µs
    /// (absent: none measured in the interval, or a summary from before ccp-udp wrote it).
    #[serde(default)]
    owd_excess_us: Option<f64>,
}

#[derive(Deserialize)]
struct SenderFlow {
    flow: usize,
    #[serde(default)]
    flow_id: u32,
    algorithm: String,
    bytes: u64,
    duration_s: f64,
    handshake_rtt_ms: f64,
    rtt_min_ms: f64,
    rtt_p50_ms: f64,
    rtt_p95_ms: f64,
    rtt_p99_ms: f64,
    /// RTT samples the percentiles count (after the warm-up: `--rtt-from`); absent from a
    /// summary of a sender from before it wrote the count.
    #[serde(default)]
    rtt_samples: Option<u64>,
    sent_packets: u64,
    lost_packets: u64,
    completed: bool,
    /// The flow's source address (what the agent knows it by).
    #[serde(default)]
    local: String,
    #[serde(default)]
    trace: Vec<TraceSample>,
}

#[derive(Deserialize)]
pub(crate) struct SenderSummary {
    flows: Vec<SenderFlow>,
}

impl SenderSummary {
    /// Every flow's source address, in the sender's order.
    pub(crate) fn locals(&self) -> Vec<String> {
        self.flows.iter().map(|f| f.local.clone()).collect()
    }
}

/// Arguments of every `ccp-udp send` ccp-exp starts. Its receivers run on the sender's machine
/// (loopback, or the emulator's namespaces): one clock, no drift to forget, so the one-way
/// delay's base is the flow's smallest (window 0), and a queue standing longer than ccp-udp's
/// default window still counts as queueing in `fwd_qdelay` and in what the agent is handed.
pub(crate) fn udp_send_args() -> Vec<std::ffi::OsString> {
    vec!["--owd-base-window".into(), "0s".into()]
}

/// The agent's control socket in `sockdir`, for a recipe with commands.
pub(crate) fn ctl_path(sockdir: &Path) -> PathBuf {
    sockdir.join("agent.ctl")
}

#[derive(Deserialize)]
pub(crate) struct ReceiverFlow {
    pub(crate) intact: bool,
    pub(crate) bytes: u64,
    #[serde(default)]
    flow_id: u32,
    /// What had arrived by when, s since the flow's HELLO (ccp-udp) or its connection's first
    /// packet (ccp-quic) reached the receiver (absent from older summaries).
    #[serde(default)]
    arrivals: Vec<Arrival>,
}

#[derive(Deserialize)]
struct Arrival {
    t_s: f64,
    bytes: u64,
}

#[derive(Deserialize)]
pub(crate) struct ReceiverSummary {
    pub(crate) flows: Vec<ReceiverFlow>,
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, BackendError> {
    let text = std::fs::read_to_string(path).map_err(|e| BackendError::io(path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| BackendError::Process(format!("{}: not a summary: {e}", path.display())))
}

/// Flow instances the agent's sender carries: every one but kernel TCP flows (`kernel:NAME`,
/// which the emu backend runs itself), as `(flow entry index, copy index, start µs)`.
pub(crate) fn agent_instances(r: &crate::recipe::Recipe) -> Vec<(usize, u32, u64)> {
    expand_flows(&r.flows)
        .into_iter()
        .filter(|(i, _, _)| kernel_cc(&r.flows[*i].algorithm).is_none())
        .collect()
}

/// `--flow` specs of the run, one per flow copy (kernel TCP flows left out).
pub fn flow_args(ctx: &RunContext) -> Vec<String> {
    flow_args_of(ctx.recipe, &agent_instances(ctx.recipe))
}

/// `--flow` specs of the flow `instances` of `r` (as [`agent_instances`] gives them).
pub(crate) fn flow_args_of(
    r: &crate::recipe::Recipe,
    instances: &[(usize, u32, u64)],
) -> Vec<String> {
    instances
        .iter()
        .map(|&(i, _, start)| {
            let f = &r.flows[i];
            let mut alg = f.algorithm.clone();
            if !f.params.is_empty() {
                let kv: Vec<String> = f.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                alg = format!("{alg}:{}", kv.join(";"));
            }
            let amount = match (f.size, f.duration_us) {
                (Some(b), _) => format!("bytes={b}"),
                (None, Some(d)) => format!("time={d}us"),
                (None, None) => format!("time={}us", r.duration_us.saturating_sub(start).max(1)),
            };
            let mut s = format!("alg={alg},{amount},start={start}us");
            if let Some(c) = f.rate_cap {
                s.push_str(&format!(",cap={c}Bps"));
            }
            s
        })
        .collect()
}

/// Run one run on loopback.
pub fn run(ctx: &RunContext) -> Result<RunData, BackendError> {
    let r = ctx.recipe;
    let raw = ctx.dir.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| BackendError::io(&raw, e))?;
    let agent_bin = ctx.bins.find("ccp-agent")?;
    let udp_bin = ctx.bins.find("ccp-udp")?;
    // Unix socket paths must stay short: keep them in a private directory under /tmp.
    let sockdir = tempdir()?;
    let agent_sock = sockdir.join("agent.sock");
    let mut agent_cmd = Command::new(&agent_bin);
    agent_cmd
        .arg("--socket")
        .arg(&agent_sock)
        .args(["--log-level", &super::agent_log_level()])
        .stdout(Stdio::null())
        .stderr(file(&raw.join("agent.log"))?);
    if !r.commands.is_empty() {
        agent_cmd.arg("--ctl").arg(ctl_path(&sockdir));
    }
    let mut agent = Proc::spawn("ccp-agent", &mut agent_cmd)?;
    let t0 = Instant::now();
    while !agent_sock.exists() {
        if let Ok(Some(s)) = agent.child.try_wait() {
            return Err(BackendError::Process(format!(
                "ccp-agent exited ({s}): {}",
                std::fs::read_to_string(raw.join("agent.log")).unwrap_or_default()
            )));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(BackendError::Process(
                "ccp-agent's socket did not appear".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    let flows = flow_args(ctx);
    let recv_err = raw.join("recv.err");
    let mut recv = Proc::spawn(
        "ccp-udp recv",
        Command::new(&udp_bin)
            .args([
                "recv",
                "--listen",
                "127.0.0.1:0",
                "--flows",
                &flows.len().to_string(),
            ])
            .args(["--log-level", &super::datapath_log_level("info")])
            .arg("--json")
            .arg(raw.join("recv.json"))
            .stdout(file(&raw.join("recv.out"))?)
            .stderr(file(&recv_err)?),
    )?;
    let recv_addr = wait_line(
        &mut recv,
        &recv_err,
        "listening on ",
        Duration::from_secs(10),
    )?;

    let link = &r.link;
    let loss = link.uplink.loss;
    let mut relay = None;
    let target = if link.delay_us > 0 || loss > 0.0 {
        let relay_err = raw.join("relay.err");
        let mut p = Proc::spawn(
            "ccp-udp relay",
            Command::new(&udp_bin)
                .args(["relay", "--listen", "127.0.0.1:0", "--to", &recv_addr])
                .args(["--loss", &loss.to_string()])
                .args(["--delay", &format!("{}us", link.delay_us)])
                .args(["--seed", &ctx.seed.to_string()])
                .stdout(file(&raw.join("relay.json"))?)
                .stderr(file(&relay_err)?),
        )?;
        let line = wait_line(&mut p, &relay_err, "relaying ", Duration::from_secs(10))?;
        let addr = line.split(" -> ").next().unwrap_or("").trim().to_string();
        relay = Some(p);
        addr
    } else {
        recv_addr.clone()
    };

    let mut cmd = sender_command(
        &udp_bin,
        &target,
        &sockdir,
        r,
        &flows,
        &udp_send_args(),
        &raw,
        "send",
    )?;
    let mut commands = Commander::new(ctx, &ctl_path(&sockdir), &raw)?;
    let mut send = Proc::spawn(
        "ccp-udp send",
        cmd.stdout(file(&raw.join("send.out"))?)
            .stderr(file(&raw.join("send.err"))?),
    )?;
    wait_for_sender(&mut send, ctx, &raw, "send", commands.as_mut())?;
    let rstatus = recv.wait_for(Duration::from_secs(20))?;
    if let Some(mut p) = relay.take() {
        p.terminate(Duration::from_secs(2));
    }
    agent.terminate(Duration::from_secs(2));
    drop(sockdir);

    let sent: SenderSummary = read_json(&raw.join("send.json"))?;
    let got: ReceiverSummary = read_json(&raw.join("recv.json"))?;
    if !rstatus.success() || got.flows.iter().any(|f| !f.intact) {
        return Err(BackendError::Process(format!(
            "the receiver reports a corrupt or incomplete stream ({rstatus}): {}",
            std::fs::read_to_string(&recv_err)
                .unwrap_or_default()
                .trim()
        )));
    }
    let notes = match commands.as_mut() {
        Some(c) => c.verify(&sent.locals())?,
        None => vec![],
    };
    let mut data = to_run_data(ctx, &sent, &got)?;
    data.notes.extend(notes);
    Ok(data)
}

pub(crate) fn to_run_data(
    ctx: &RunContext,
    sent: &SenderSummary,
    got: &ReceiverSummary,
) -> Result<RunData, BackendError> {
    to_run_data_of(ctx, &agent_instances(ctx.recipe), sent, got)
}

/// [`RunData`] of one sender's and its receiver's summaries, whose flows are `instances` (as
/// [`agent_instances`] gives them), in order.
pub(crate) fn to_run_data_of(
    ctx: &RunContext,
    instances: &[(usize, u32, u64)],
    sent: &SenderSummary,
    got: &ReceiverSummary,
) -> Result<RunData, BackendError> {
    let r = ctx.recipe;
    if sent.flows.len() != instances.len() {
        return Err(BackendError::Process(format!(
            "the sender reports {} flows, the recipe has {}",
            sent.flows.len(),
            instances.len()
        )));
    }
    let mut data = RunData {
        notes: vec![format!(
            "loopback; {} flows delivered {} bytes intact at the receiver",
            got.flows.len(),
            got.flows.iter().map(|f| f.bytes).sum::<u64>()
        )],
        ..RunData::default()
    };
    let mut end: f64 = 0.0;
    for f in &sent.flows {
        let Some(&(i, _, start_us)) = instances.get(f.flow) else {
            continue;
        };
        let spec = &r.flows[i];
        let start = start_us as f64 / 1e6;
        let begin = start + f.handshake_rtt_ms / 1e3;
        let fend = begin + f.duration_s;
        end = end.max(fend);
        // The receiver counts from the HELLO, about half the handshake's RTT after the sender
        // sent it, and half an RTT before the sender's time zero (`begin`).
        let arrivals = got
            .flows
            .iter()
            .find(|g| g.flow_id != 0 && g.flow_id == f.flow_id)
            .map(|g| {
                let first = begin - f.handshake_rtt_ms / 2e3;
                g.arrivals
                    .iter()
                    .map(|a| (first + a.t_s, a.bytes))
                    .collect()
            })
            .unwrap_or_default();
        let idx = data.flows.len();
        let mut last_t = 0.0;
        let mut last_d = 0u64;
        for s in &f.trace {
            let dt = s.t_s - last_t;
            let delivered = s.received_bytes.unwrap_or(s.delivered_bytes);
            let g = if dt > 0.0 {
                delivered.saturating_sub(last_d) as f64 * 8.0 / dt
            } else {
                0.0
            };
            data.series.push(Sample {
                t_s: begin + s.t_s,
                flow: idx,
                goodput_bps: g,
                cwnd_bytes: s.cwnd_bytes as f64,
                rtt_ms: s.srtt_us as f64 / 1e3,
                delivered,
                fwd_qdelay_ms: s.owd_excess_us.map(|us| us / 1e3),
            });
            last_t = s.t_s;
            last_d = delivered;
        }
        data.flows.push(FlowData {
            algorithm: spec.algorithm.clone(),
            requested: if f.algorithm.is_empty() {
                spec.requested()
            } else {
                f.algorithm.clone()
            },
            class: spec.class.clone(),
            group: "flows".into(),
            size: spec.size,
            start_s: start,
            end_s: fend,
            fct_s: (spec.size.is_some() && f.completed)
                .then_some(f.duration_s + f.handshake_rtt_ms / 1e3),
            completed: f.completed,
            bytes_delivered: f.bytes,
            packets_sent: f.sent_packets,
            lost_packets: f.lost_packets,
            base_rtt_ms: None,
            rtt_min_ms: Some(f.rtt_min_ms),
            // A flow with no RTT sample after the warm-up has no percentiles (its summary's
            // zeros are no measurement).
            rtt_pct_ms: (f.rtt_samples != Some(0)).then_some([
                f.rtt_p50_ms,
                f.rtt_p95_ms,
                f.rtt_p99_ms,
            ]),
            deadline_s: spec.deadline_us.map(|d| d as f64 / 1e6),
            min_rate_bps: spec.min_rate.map(|m| m as f64 * 8.0),
            has_series: !f.trace.is_empty(),
            arrivals,
            reverse: spec.reverse,
        });
    }
    data.end_s = end;
    Ok(data)
}

/// A private directory for a run's sockets, removed when dropped (also when the run fails).
pub(crate) struct SockDir(PathBuf);

impl std::ops::Deref for SockDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for SockDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `ccp-udp send` command of a run (the `--flow` specs `flows`, the agent's socket
/// `agent.sock` and the datapath's socket in `sockdir`, JSON summary into `raw`, with commands
/// the flows' announced addresses into `raw/<stem>-flows.jsonl`, then the transport's own
/// `extra` arguments), with all its arguments recorded in `raw/<stem>.args`;
/// `stem` names its files (`send`; `send-rev` for the emulator's reverse flows, whose
/// datapath socket is then `datapath-rev.sock`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sender_command(
    udp_bin: &Path,
    target: &str,
    sockdir: &Path,
    r: &crate::recipe::Recipe,
    flows: &[String],
    extra: &[std::ffi::OsString],
    raw: &Path,
    stem: &str,
) -> Result<Command, BackendError> {
    let socket = match stem.strip_prefix("send") {
        Some(tag) => format!("datapath{tag}.sock"),
        None => format!("datapath-{stem}.sock"),
    };
    let mut cmd = Command::new(udp_bin);
    cmd.args(["send", "--to", target])
        .arg("--agent")
        .arg(sockdir.join("agent.sock"))
        .arg("--socket")
        .arg(sockdir.join(socket))
        .args(["--log-level", &super::datapath_log_level("warn")])
        .args(["--backend", &r.udp.datapath])
        .args(["--mss", &r.udp.mss.to_string()])
        .args([
            "--trace-interval",
            &format!("{}us", r.udp.trace_interval_us),
        ])
        .arg("--json")
        .arg(raw.join(format!("{stem}.json")));
    if r.metrics.warmup_us > 0 {
        // The RTT percentiles, like the goodput, cover the time after the warm-up (the
        // sender's clock is the run's: the flows' starts count from it).
        cmd.args(["--rtt-from", &format!("{}us", r.metrics.warmup_us)]);
    }
    for f in flows {
        cmd.args(["--flow", f]);
    }
    if !r.commands.is_empty() {
        // Each flow's source address as it starts, for the commands (ccp-udp's option; the
        // recipes of the other transports have no commands).
        cmd.arg("--flows-out")
            .arg(super::commands::flows_out_path(raw, stem));
    }
    cmd.args(extra);
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args_file = raw.join(format!("{stem}.args"));
    std::fs::write(&args_file, args.join(" ") + "\n")
        .map_err(|e| BackendError::io(&args_file, e))?;
    Ok(cmd)
}

/// Wait for `ccp-udp send` to finish (updating the progress bar), within a limit derived from
/// the recipe: its duration plus 30 s, or three times it plus 60 s when flows are sized. A
/// failure carries the sender's stderr.
/// With `commands`, each runs when its time comes (counted from the sender's start, the clock
/// of the flows' starts); a failed command fails the run. `stem` names the sender's files
/// (`raw/<stem>.err`).
pub(crate) fn wait_for_sender(
    send: &mut Proc,
    ctx: &RunContext,
    raw: &Path,
    stem: &str,
    mut commands: Option<&mut Commander>,
) -> Result<(), BackendError> {
    let r = ctx.recipe;
    let expected = Duration::from_micros(r.duration_us);
    let sized = r.flows.iter().any(|f| f.size.is_some());
    let limit = if sized {
        expected * 3 + Duration::from_secs(60)
    } else {
        expected + Duration::from_secs(30)
    };
    let t0 = Instant::now();
    let status = loop {
        if let Some(pb) = ctx.progress {
            pb.set_position((t0.elapsed().as_millis() as u64).min(expected.as_millis() as u64));
        }
        if let Some(s) = send
            .child
            .try_wait()
            .map_err(|e| BackendError::Process(format!("{}: {e}", send.name)))?
        {
            break s;
        }
        if t0.elapsed() > limit {
            return Err(BackendError::Process(format!(
                "{} did not finish within {limit:?}",
                send.name
            )));
        }
        let mut nap = Duration::from_millis(50);
        if let Some(c) = commands.as_deref_mut() {
            c.poll(t0.elapsed())?;
            if let Some(at) = c.next_at() {
                nap = nap.min(at.saturating_sub(t0.elapsed()));
            }
        }
        std::thread::sleep(nap);
    };
    if let Some(c) = commands
        && c.left() > 0
    {
        return Err(BackendError::Process(format!(
            "{} of the recipe's commands did not run: the sender finished after {:.3} s, before their time",
            c.left(),
            t0.elapsed().as_secs_f64()
        )));
    }
    if !status.success() {
        return Err(BackendError::Process(format!(
            "{} failed ({status}): {}",
            send.name,
            std::fs::read_to_string(raw.join(format!("{stem}.err")))
                .unwrap_or_default()
                .trim()
        )));
    }
    Ok(())
}

/// A fresh private directory under /tmp (unix socket paths are limited to 108 bytes).
pub(crate) fn tempdir() -> Result<SockDir, BackendError> {
    let base = std::env::temp_dir();
    for i in 0..1000u32 {
        let p = base.join(format!("ccp-exp-{}-{i}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(SockDir(p)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(BackendError::io(&p, e)),
        }
    }
    Err(BackendError::Process(
        "cannot create a socket directory under /tmp".into(),
    ))
}
