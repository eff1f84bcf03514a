//! The emulator backend: the recipe's link becomes a `ccp_emu::Testbed` (one sender host and
//! one receiver host, each in its own network namespace, joined by mahimahi-compatible uplink
//! and downlink pipelines: rate or trace, queue, loss, delay); `ccp-udp recv` runs on the
//! receiver host, `ccp-udp send` with one `--flow` per flow copy on the sender host, and the
//! real `ccp-agent` beside them (its unix socket is a file, reachable from every namespace).
//! Flows written `kernel:NAME` are not the agent's: they run as Linux TCP connections between
//! the same two hosts with the kernel's congestion control NAME (`kernel.rs`), started on the
//! sender's clock, and are merged into the run's flows in recipe order.
//!
//! Reverse flows (`reverse: true`) run the other way: a second `ccp-udp recv` in the sender
//! host, a second `ccp-udp send` with their `--flow`s in the receiver host (files `raw/
//! send-rev.*`, `raw/recv-rev.*`), started right after the first and driven by the same agent
//! (its unix socket is a file, reachable from the receiver host as from the sender host); their
//! data crosses the downlink and their ACKs the uplink, behind the forward flows' data. A reverse
//! `kernel:NAME` flow connects from the receiver host to the sender host. Both senders'
//! summaries are merged into the run's flows in recipe order, each reverse flow marked so.
//!
//! A run with `vivace-distributed` flows, or kernel flows in a JCCE group
//! (`kernel:NAME:group=G`), also gets the testbed's service host (`ccp_emu::testbed::
//! SERVICE_ADDR`), reached from every host over a delay-only side path of `jcce.delay` each way
//! that never crosses the bottleneck. The real `jcce serve` runs there, with a key from `jcce
//! keygen`; the agent then runs inside the sender host (its unix socket is still a file) with
//! `--jcce`, so it reaches JCCE over the emulated network, and the kernel flows' receivers
//! publish what they read to their group from the receiver host through the JCCE client
//! (`jcce::publisher`), as the paper's receivers do (seeds/000 §3). The service's log is
//! `raw/jcce.log`; the run's notes count the publications.
//! Wall-clock time, one run at a time; needs root (namespaces, TUN devices).

use super::commands::Commander;
use super::udp::{
    Proc, ReceiverSummary, SenderSummary, agent_instances, ctl_path, file, flow_args_of, read_json,
    sender_command, tempdir, to_run_data_of, udp_send_args, wait_for_sender, wait_line, wait_text,
};
use super::{BackendError, RunContext, kernel};
use crate::data::RunData;
use crate::recipe::{Direction, Limit, Queue, Recipe, expand_flows, kernel_cc, kernel_group};
use ccp_algorithms::aggregator::jcce;
use ccp_emu::testbed::SERVICE_ADDR;
use ccp_emu::{
    DelayConfig, EcnThreshold, LinkConfig, QueueConfig, QueueKind, ServiceHostConfig, Testbed,
    TestbedConfig, Trace,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The port the receiver listens on inside its namespace.
const PORT: u16 = 4433;
/// The port JCCE listens on, on the service host.
const JCCE_PORT: u16 = 7700;
/// The algorithm whose flows publish to JCCE.
const VD: &str = "vivace-distributed";

/// The JCCE service of a run, on the testbed's service host.
struct JcceRun {
    proc: Proc,
    /// `host:port` on the service host.
    addr: String,
    key_file: PathBuf,
}

/// Whether a run needs JCCE: a vivace-distributed flow, or a kernel flow in a group.
fn uses_jcce(r: &Recipe) -> bool {
    r.flows
        .iter()
        .any(|f| f.algorithm == VD || kernel_group(f).is_some())
}

/// `jcce keygen` (into `keydir`), then `jcce serve` on the service host; returns once it
/// serves. Its log is `raw/jcce.log`.
fn start_jcce(
    ctx: &RunContext,
    tb: &Testbed,
    raw: &Path,
    keydir: &Path,
) -> Result<JcceRun, BackendError> {
    let bin = ctx.bins.find("jcce")?;
    let host = tb
        .service()
        .ok_or_else(|| BackendError::Process("the testbed has no service host".into()))?;
    let key_file = keydir.join("jointcloud.key");
    let out = Command::new(&bin)
        .arg("keygen")
        .arg("--out")
        .arg(&key_file)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BackendError::Process(format!("jcce keygen: {e}")))?;
    if !out.status.success() {
        return Err(BackendError::Process(format!(
            "jcce keygen failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let addr = format!("{SERVICE_ADDR}:{JCCE_PORT}");
    let log = raw.join("jcce.log");
    let mut proc = Proc::adopt(
        "jcce serve",
        tb.spawn(
            host,
            Command::new(&bin)
                .args(["serve", "--listen", &addr, "--key-file"])
                .arg(&key_file)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(file(&log)?),
        )
        .map_err(emu_err)?,
    );
    wait_text(&mut proc, &log, "jcce serving on", Duration::from_secs(10))?;
    Ok(JcceRun {
        proc,
        addr,
        key_file,
    })
}

/// A JCCE client inside the receiver host (its socket, made by its own thread, lives there),
/// for the kernel flows' receivers.
fn receiver_client(tb: &Testbed, j: &JcceRun) -> Result<jcce::Client, BackendError> {
    let text =
        std::fs::read_to_string(&j.key_file).map_err(|e| BackendError::io(&j.key_file, e))?;
    let key = jcce::Key::from_hex(text.trim())
        .map_err(|e| BackendError::Process(format!("the JCCE key: {e}")))?;
    let cfg = jcce::ClientConfig::new(j.addr.clone(), key);
    tb.receiver()
        .run_inside(|| {
            jcce::Client::start(cfg)
                .map_err(|e| ccp_emu::EmuError::sys("starting a JCCE client", e))
        })
        .map_err(emu_err)
}

fn emu_err(e: ccp_emu::EmuError) -> BackendError {
    BackendError::Process(format!("emulator: {e}"))
}

fn queue_config(q: &Queue) -> Result<QueueConfig, BackendError> {
    let limit = |l: &Limit| -> Result<(u32, u32), BackendError> {
        match l {
            Limit::Packets(p) => Ok((u32::try_from(*p).unwrap_or(u32::MAX), 0)),
            Limit::Bytes(b) => Ok((0, u32::try_from(*b).unwrap_or(u32::MAX))),
            Limit::Bdp(_) => Err(BackendError::Unavailable(
                "bdp= queue sizes are understood by the sim backend only".into(),
            )),
        }
    };
    let ms = |us: u64| u32::try_from(us.div_ceil(1000)).unwrap_or(u32::MAX);
    let mut c = QueueConfig::default();
    match q {
        Queue::Infinite => {}
        Queue::DropTail(l) | Queue::DropHead(l) => {
            c.kind = if matches!(q, Queue::DropTail(_)) {
                QueueKind::DropTail
            } else {
                QueueKind::DropHead
            };
            (c.packets, c.bytes) = limit(l)?;
        }
        Queue::Codel {
            limit: l,
            target_us,
            interval_us,
        } => {
            c.kind = QueueKind::Codel;
            (c.packets, c.bytes) = limit(l)?;
            c.target_ms = ms(*target_us);
            c.interval_ms = ms(*interval_us);
        }
        Queue::Pie {
            limit: l,
            qdelay_ref_us,
            max_burst_us,
        } => {
            c.kind = QueueKind::Pie;
            (c.packets, c.bytes) = limit(l)?;
            c.qdelay_ref_ms = ms(*qdelay_ref_us);
            c.max_burst_ms = ms(*max_burst_us);
        }
        Queue::Red { .. } => {
            return Err(BackendError::Unavailable(
                "queue red is the simulator's; mahimahi has no red".into(),
            ));
        }
    }
    Ok(c)
}

fn link_config(d: &Direction) -> Result<Option<LinkConfig>, BackendError> {
    let mut l = match (&d.trace, d.rate) {
        (Some(t), _) => LinkConfig::trace(Trace::load(t).map_err(emu_err)?),
        (None, Some(r)) if d.schedule.is_empty() => LinkConfig::rate(r),
        // `link.schedule`: ccp-emu's piecewise-constant rate, timed from the link's start.
        (None, Some(r)) => LinkConfig {
            service: ccp_emu::Service::Rate(ccp_emu::Schedule {
                segments: d.segments(),
            }),
            ..LinkConfig::rate(r)
        },
        (None, None) => return Ok(None),
    };
    l.queue = queue_config(&d.queue)?;
    l.ecn = match d.ecn_threshold {
        None => None,
        Some(Limit::Packets(p)) => Some(EcnThreshold::Packets(p)),
        Some(Limit::Bytes(b)) => Some(EcnThreshold::Bytes(b)),
        Some(Limit::Bdp(_)) => {
            return Err(BackendError::Process(
                "an ECN threshold in BDP is not supported on the emulator; give packets or bytes"
                    .into(),
            ));
        }
    };
    Ok(Some(l))
}

/// Whether this process may build a testbed, and if not why.
pub fn unavailable_here() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("backends emu and quic need root (network namespaces and TUN devices)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("backends emu and quic need /dev/net/tun".into());
    }
    None
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The transport that carries a run's flows across the testbed: a binary with `recv` and
/// `send` subcommands taking `ccp-udp`'s options, plus arguments of its own.
pub(crate) struct Transport {
    /// The binary (`ccp-udp`, `ccp-quic`).
    pub(crate) bin: &'static str,
    /// Its receiver and sender, for messages.
    pub(crate) recv_name: &'static str,
    pub(crate) send_name: &'static str,
    /// Extra arguments of `recv` and of `send`.
    pub(crate) recv_args: Vec<std::ffi::OsString>,
    pub(crate) send_args: Vec<std::ffi::OsString>,
    /// Extra arguments of the reverse flows' `recv` (in the sender host) and `send` (in the
    /// receiver host).
    pub(crate) rev_recv_args: Vec<std::ffi::OsString>,
    pub(crate) rev_send_args: Vec<std::ffi::OsString>,
}

/// Names of the reverse flows' receiver and sender processes, for messages.
fn rev_name(name: &'static str) -> &'static str {
    match name {
        "ccp-udp recv" => "ccp-udp recv (reverse flows)",
        "ccp-udp send" => "ccp-udp send (reverse flows)",
        "ccp-quic recv" => "ccp-quic recv (reverse flows)",
        "ccp-quic send" => "ccp-quic send (reverse flows)",
        other => other,
    }
}

/// Run one run through the emulator.
pub fn run(ctx: &RunContext) -> Result<RunData, BackendError> {
    run_with(
        ctx,
        &Transport {
            bin: "ccp-udp",
            recv_name: "ccp-udp recv",
            send_name: "ccp-udp send",
            recv_args: vec![],
            send_args: udp_send_args(),
            rev_recv_args: vec![],
            rev_send_args: udp_send_args(),
        },
    )
}

/// Start the agent for the run's agent flows; returns once its socket is there. With `jcce`
/// the agent runs inside the (first) sender host and reaches the service over the emulated
/// network. The agent's log keeps warnings and algorithms' mode changes
/// ([`super::agent_log_level`]).
fn start_agent(
    ctx: &RunContext,
    tb: &Testbed,
    raw: &std::path::Path,
    sockdir: &std::path::Path,
    jcce: Option<&JcceRun>,
) -> Result<Proc, BackendError> {
    let agent_bin = ctx.bins.find("ccp-agent")?;
    let agent_sock = sockdir.join("agent.sock");
    let mut cmd = Command::new(&agent_bin);
    cmd.arg("--socket")
        .arg(&agent_sock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file(&raw.join("agent.log"))?);
    // `commands`: a control socket, a file like the agent's socket, so ccp-exp reaches it
    // from outside the testbed's namespaces.
    if !ctx.recipe.commands.is_empty() {
        cmd.arg("--ctl").arg(ctl_path(sockdir));
    }
    cmd.args(["--log-level", &super::agent_log_level()]);
    let mut agent = match jcce {
        None => Proc::spawn("ccp-agent", &mut cmd)?,
        Some(j) => {
            cmd.args(["--jcce", &j.addr, "--jcce-key-file"])
                .arg(&j.key_file);
            Proc::adopt(
                "ccp-agent",
                tb.spawn(&tb.senders()[0], &mut cmd).map_err(emu_err)?,
            )
        }
    };
    let t0 = Instant::now();
    while !agent_sock.exists() {
        if t0.elapsed() > Duration::from_secs(10) || matches!(agent.child.try_wait(), Ok(Some(_))) {
            return Err(BackendError::Process("ccp-agent did not start".into()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(agent)
}

/// Start the transport's receiver of `n` flows on `host` (files `raw/<stem>.*`: `recv`, or
/// `recv-rev` for the reverse flows in the sender host); returns it once it listens.
#[allow(clippy::too_many_arguments)]
fn start_recv(
    ctx: &RunContext,
    tb: &Testbed,
    host: &ccp_emu::testbed::Host,
    name: &'static str,
    args: &[std::ffi::OsString],
    bin: &str,
    raw: &std::path::Path,
    stem: &str,
    n: usize,
) -> Result<Proc, BackendError> {
    let udp_bin = ctx.bins.find(bin)?;
    let recv_err = raw.join(format!("{stem}.err"));
    let mut recv = Proc::adopt(
        name,
        tb.spawn(
            host,
            Command::new(&udp_bin)
                .args(["recv", "--listen", &format!("{}:{PORT}", host.addr)])
                .args(["--flows", &n.to_string()])
                .args(["--log-level", &super::datapath_log_level("info")])
                .args(args)
                .arg("--json")
                .arg(raw.join(format!("{stem}.json")))
                .stdin(Stdio::null())
                .stdout(file(&raw.join(format!("{stem}.out")))?)
                .stderr(file(&recv_err)?),
        )
        .map_err(emu_err)?,
    );
    wait_line(
        &mut recv,
        &recv_err,
        "listening on ",
        Duration::from_secs(10),
    )?;
    Ok(recv)
}

/// The agent and the transport's receivers of a run with agent flows.
struct AgentSide {
    agent: Proc,
    /// The forward flows' receiver (receiver host), if the run has forward agent flows.
    recv: Option<Proc>,
    /// The reverse flows' receiver (sender host), if it has reverse agent flows.
    recv_rev: Option<Proc>,
}

/// Check a receiver's summary: it exited cleanly and every stream arrived intact.
fn check_received(
    status: std::process::ExitStatus,
    got: &ReceiverSummary,
    err: &Path,
) -> Result<(), BackendError> {
    if !status.success() || got.flows.iter().any(|f| !f.intact) {
        return Err(BackendError::Process(format!(
            "the receiver reports a corrupt or incomplete stream ({status}): {}",
            std::fs::read_to_string(err).unwrap_or_default().trim()
        )));
    }
    Ok(())
}

/// Run one run through the emulator with the flows carried by `t`.
pub(crate) fn run_with(ctx: &RunContext, t: &Transport) -> Result<RunData, BackendError> {
    if let Some(why) = unavailable_here() {
        return Err(BackendError::Unavailable(why));
    }
    let r = ctx.recipe;
    let raw = ctx.dir.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| BackendError::io(&raw, e))?;
    let uplink = link_config(&r.link.uplink)?;
    let capacity_bps = match (&r.link.uplink.trace, r.link.uplink.rate) {
        (Some(t), _) => Some(Trace::load(t).map_err(emu_err)?.mean_rate() * 8.0),
        (None, Some(rate)) => Some(rate as f64 * 8.0),
        _ => None,
    };
    let with_jcce = uses_jcce(r);
    let cfg = TestbedConfig {
        senders: 1,
        uplink,
        downlink: link_config(&r.link.downlink)?,
        delay: DelayConfig {
            delay: Duration::from_micros(r.link.delay_us),
            jitter: Duration::from_micros(r.link.jitter_us),
            model: r.link.jitter_model,
        },
        uplink_loss: r.link.uplink.loss,
        downlink_loss: r.link.downlink.loss,
        name_prefix: format!("cx{}", SEQ.fetch_add(1, Ordering::SeqCst) % 10_000),
        seed: ctx.seed,
        command_line: format!("ccp-exp {}", ctx.name),
        service: with_jcce.then_some(ServiceHostConfig {
            one_way: Duration::from_micros(r.jcce.delay_us),
        }),
        ..TestbedConfig::default()
    };
    let instances = expand_flows(&r.flows);
    let is_kernel: Vec<bool> = instances
        .iter()
        .map(|(i, _, _)| kernel_cc(&r.flows[*i].algorithm).is_some())
        .collect();
    let kernel_flows: Vec<(usize, u64)> = instances
        .iter()
        .zip(&is_kernel)
        .filter(|(_, k)| **k)
        .map(|((i, _, start), _)| (*i, *start))
        .collect();
    kernel::check_available(r)?;
    // The agent's flows, forward (sender host to receiver host) and reverse.
    let agent_all = agent_instances(r);
    let which: Vec<usize> = agent_all
        .iter()
        .map(|(i, _, _)| usize::from(r.flows[*i].reverse))
        .collect();
    let part = |p: usize| -> Vec<(usize, u32, u64)> {
        agent_all
            .iter()
            .zip(&which)
            .filter(|(_, w)| **w == p)
            .map(|(x, _)| *x)
            .collect()
    };
    let (fwd_inst, rev_inst) = (part(0), part(1));
    let flows = flow_args_of(r, &fwd_inst);
    let rflows = flow_args_of(r, &rev_inst);
    let tb = Testbed::new(cfg).map_err(emu_err)?;

    let sockdir = tempdir()?;
    let mut service = if with_jcce {
        Some(start_jcce(ctx, &tb, &raw, &sockdir)?)
    } else {
        None
    };
    let client = match &service {
        Some(j) if r.flows.iter().any(|f| kernel_group(f).is_some()) => {
            Some(receiver_client(&tb, j)?)
        }
        _ => None,
    };
    let mut agents = if agent_all.is_empty() {
        None
    } else {
        let agent = start_agent(ctx, &tb, &raw, &sockdir, service.as_ref())?;
        let recv = if flows.is_empty() {
            None
        } else {
            Some(start_recv(
                ctx,
                &tb,
                tb.receiver(),
                t.recv_name,
                &t.recv_args,
                t.bin,
                &raw,
                "recv",
                flows.len(),
            )?)
        };
        let recv_rev = if rflows.is_empty() {
            None
        } else {
            Some(start_recv(
                ctx,
                &tb,
                &tb.senders()[0],
                rev_name(t.recv_name),
                &t.rev_recv_args,
                t.bin,
                &raw,
                "recv-rev",
                rflows.len(),
            )?)
        };
        Some(AgentSide {
            agent,
            recv,
            recv_rev,
        })
    };
    let mut commands = Commander::new(ctx, &ctl_path(&sockdir), &raw)?;
    let receiver = tb.receiver().addr;
    let sender_addr = tb.senders()[0].addr;
    // Time zero of the run: the agent's sender starts its flows' clocks when it starts, the
    // kernel flows count from here.
    let t0 = Instant::now();
    type Statuses = (
        Option<std::process::ExitStatus>,
        Option<std::process::ExitStatus>,
    );
    // What the uplink had carried over the run, read from the emulator's live counters every
    // 20 ms, so that utilisation counts the bytes between the warm-up and the flows' end, not
    // what the link carries after it (final acknowledgements, FINs, a last retransmission).
    let run_over = AtomicBool::new(false);
    let (kernel_out, sent, uplink_samples) = std::thread::scope(|sc| {
        let sampler = {
            let (tb, run_over) = (&tb, &run_over);
            sc.spawn(move || -> Vec<(f64, u64)> {
                let mut v = vec![(0.0, 0)];
                while !run_over.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                    v.push((t0.elapsed().as_secs_f64(), tb.stats().0.out_bytes));
                }
                v
            })
        };
        let handles: Vec<_> = kernel_flows
            .iter()
            .enumerate()
            .map(|(k, &(i, start))| {
                let (tb, client) = (&tb, client.as_ref());
                sc.spawn(move || kernel::run_flow(tb, r, k, i, start, t0, client))
            })
            .collect();
        let sent = match agents.as_mut() {
            Some(s) => (|| -> Result<Statuses, BackendError> {
                let bin = ctx.bins.find(t.bin)?;
                // The forward flows' sender in the sender host, the reverse flows' in the
                // receiver host, started one after the other.
                let mut senders = vec![];
                if !flows.is_empty() {
                    let mut cmd = sender_command(
                        &bin,
                        &format!("{receiver}:{PORT}"),
                        &sockdir,
                        r,
                        &flows,
                        &t.send_args,
                        &raw,
                        "send",
                    )?;
                    cmd.stdin(Stdio::null())
                        .stdout(file(&raw.join("send.out"))?)
                        .stderr(file(&raw.join("send.err"))?);
                    let host = &tb.senders()[0];
                    let p = Proc::adopt(t.send_name, tb.spawn(host, &mut cmd).map_err(emu_err)?);
                    senders.push((p, "send"));
                }
                if !rflows.is_empty() {
                    let mut cmd = sender_command(
                        &bin,
                        &format!("{sender_addr}:{PORT}"),
                        &sockdir,
                        r,
                        &rflows,
                        &t.rev_send_args,
                        &raw,
                        "send-rev",
                    )?;
                    cmd.stdin(Stdio::null())
                        .stdout(file(&raw.join("send-rev.out"))?)
                        .stderr(file(&raw.join("send-rev.err"))?);
                    let p = Proc::adopt(
                        rev_name(t.send_name),
                        tb.spawn(tb.receiver(), &mut cmd).map_err(emu_err)?,
                    );
                    senders.push((p, "send-rev"));
                }
                // The commands run while the first sender runs (their clock is its start).
                for (k, (p, stem)) in senders.iter_mut().enumerate() {
                    let c = if k == 0 { commands.as_mut() } else { None };
                    wait_for_sender(p, ctx, &raw, stem, c)?;
                }
                let fwd = match s.recv.as_mut() {
                    Some(p) => Some(p.wait_for(Duration::from_secs(20))?),
                    None => None,
                };
                let rev = match s.recv_rev.as_mut() {
                    Some(p) => Some(p.wait_for(Duration::from_secs(20))?),
                    None => None,
                };
                Ok((fwd, rev))
            })()
            .map(Some),
            None => {
                let expected = Duration::from_micros(r.duration_us);
                while !handles.iter().all(|h| h.is_finished()) {
                    if let Some(pb) = ctx.progress {
                        pb.set_position(
                            (t0.elapsed().as_millis() as u64).min(expected.as_millis() as u64),
                        );
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(None)
            }
        };
        let out: Vec<
            Result<(kernel::Measured, Option<jcce::publisher::PublisherReport>), BackendError>,
        > = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BackendError::Process(
                        "a kernel flow's thread panicked".into(),
                    ))
                })
            })
            .collect();
        run_over.store(true, Ordering::Relaxed);
        let samples = sampler.join().unwrap_or_default();
        (out, sent, samples)
    });
    if let Some(mut s) = agents.take() {
        s.agent.terminate(Duration::from_secs(2));
    }
    drop(client);
    if let Some(j) = service.as_mut() {
        j.proc.terminate(Duration::from_secs(2));
    }
    let side = tb.service_stats();
    let (up, down) = tb.shutdown();
    drop(sockdir);
    let rstatus = sent?;
    let (kernel_data, reports): (Vec<_>, Vec<_>) = kernel_out
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .unzip();

    let mut command_notes = vec![];
    let agent_data = match rstatus {
        None => RunData::default(),
        Some((fwd_status, rev_status)) => {
            // Each sender's and receiver's summaries; then the flows in recipe order.
            let mut parts = vec![];
            let mut locals: [Vec<String>; 2] = [vec![], vec![]];
            for (p, status, stem, inst) in [
                (0, fwd_status, "", &fwd_inst),
                (1, rev_status, "-rev", &rev_inst),
            ] {
                let Some(status) = status else {
                    parts.push(RunData::default());
                    continue;
                };
                let sent: SenderSummary = read_json(&raw.join(format!("send{stem}.json")))?;
                let got: ReceiverSummary = read_json(&raw.join(format!("recv{stem}.json")))?;
                check_received(status, &got, &raw.join(format!("recv{stem}.err")))?;
                locals[p] = sent.locals();
                parts.push(to_run_data_of(ctx, inst, &sent, &got)?);
            }
            if let Some(c) = commands.as_mut() {
                // Every agent flow's address in recipe order, as the commands name them.
                let mut next = [0usize; 2];
                let all: Vec<String> = which
                    .iter()
                    .map(|&p| {
                        next[p] += 1;
                        locals[p].get(next[p] - 1).cloned().unwrap_or_default()
                    })
                    .collect();
                command_notes = c.verify(&all)?;
            }
            kernel::interleave(parts, &which)
        }
    };
    let kernel_count = kernel_data.len();
    let mut data = kernel::merge(agent_data, kernel_data, &is_kernel);
    for f in &mut data.flows {
        f.base_rtt_ms = Some(2.0 * r.link.delay_us as f64 / 1e3);
    }
    data.capacity_bps = capacity_bps;
    data.owd_base_ms = Some(r.link.delay_us as f64 / 1e3);
    data.notes = vec![format!(
        "emulated link: uplink {} packets in, {} out, {} dropped; downlink {} in, {} out, {} dropped",
        up.in_pkts, up.out_pkts, up.dropped_pkts, down.in_pkts, down.out_pkts, down.dropped_pkts
    )];
    if let (Some(j), Some((to, from))) = (&service, side) {
        let reports: Vec<_> = reports.iter().flatten().collect();
        let published: u64 = reports.iter().map(|p| p.published).sum();
        let in_use = std::fs::read_to_string(raw.join("agent.log"))
            .is_ok_and(|l| l.contains("JCCE aggregate in use"));
        data.notes.push(format!(
            "JCCE: jcce serve at {} on the service host, {} ms each way over a side path off the bottleneck ({} datagrams to it, {} back); the agent used the aggregate: {}; {} kernel flows in a group published {published} times{}",
            j.addr,
            r.jcce.delay_us as f64 / 1e3,
            to.in_pkts,
            from.in_pkts,
            if in_use { "yes" } else { "no (see raw/agent.log)" },
            reports.len(),
            if reports.iter().all(|p| p.answered) {
                ""
            } else {
                " (some never answered)"
            }
        ));
    }
    data.notes.extend(command_notes);
    if kernel_count > 0 {
        data.notes.push(format!(
            "{kernel_count} kernel TCP flows (kernel:NAME): goodput counts what the receiving application read, RTT and window are the sender's TCP_INFO"
        ));
    }
    if data.end_s > 0.0 {
        let warm = r.metrics.warmup_us as f64 / 1e6;
        data.link_tx = link_steps(&uplink_samples, warm, data.end_s, up.out_bytes);
    }
    Ok(data)
}

/// The uplink's bytes as `link_tx` steps: up to the warm-up's end `warm` and from there to the
/// flows' end `end` (s from the run's start), each read off the counter's `samples`
/// (`(s, bytes)` in time order) by linear interpolation between the two around it. What the
/// link carries after `end` is left out; a point after the last sample reads the counter's
/// final value `total`.
fn link_steps(samples: &[(f64, u64)], warm: f64, end: f64, total: u64) -> Vec<(f64, u64)> {
    let at = |t: f64| -> u64 {
        match samples.iter().position(|&(s, _)| s >= t) {
            None => total,
            Some(0) => samples[0].1,
            Some(k) => {
                let ((a, ba), (b, bb)) = (samples[k - 1], samples[k]);
                let f = if b > a { (t - a) / (b - a) } else { 1.0 };
                ba + (bb.saturating_sub(ba) as f64 * f).round() as u64
            }
        }
    };
    let e = at(end).min(total);
    if warm > 0.0 && warm < end {
        let w = at(warm).min(e);
        vec![(warm, w), (end, e - w)]
    } else {
        vec![(end, e)]
    }
}

#[cfg(test)]
mod tests {
    use super::link_steps;

    #[test]
    fn link_steps_cut_at_the_warm_up_and_the_flows_end() {
        let samples = [(0.0, 0), (1.0, 100), (2.0, 300), (3.0, 350)];
        // Interpolated at 0.5 s (50) and 2.5 s (325); the 75 bytes after the end are left out.
        assert_eq!(
            link_steps(&samples, 0.5, 2.5, 400),
            vec![(0.5, 50), (2.5, 275)]
        );
        // No warm-up: one step to the end.
        assert_eq!(link_steps(&samples, 0.0, 2.0, 400), vec![(2.0, 300)]);
        // An end after the last sample reads the counter's final value.
        assert_eq!(
            link_steps(&samples, 1.0, 4.0, 400),
            vec![(1.0, 100), (4.0, 300)]
        );
    }
}
