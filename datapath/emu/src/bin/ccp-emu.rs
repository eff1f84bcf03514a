//! `ccp-emu`: mahimahi's shells (link, delay, loss) and a multi-host testbed, on TUN devices in
//! network namespaces.

use anyhow::{Context, Result, bail};
use ccp_emu::cleanup;
use ccp_emu::link::{EcnThreshold, LinkConfig, Service};
use ccp_emu::queue::QueueConfig;
use ccp_emu::shell::{DEFAULT_PREFIX, Shell, ShellConfig};
use ccp_emu::stage::{DelayConfig, PathConfig, StageStats};
use ccp_emu::testbed::{Testbed, TestbedConfig};
use ccp_emu::trace::{Schedule, Trace};
use ccp_jitter::JitterModel;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A link emulator with mahimahi's semantics: run a command in a network namespace whose
/// traffic crosses an emulated link to the enclosing namespace.
///
/// Shells nest like mahimahi's, e.g.
///   ccp-emu delay 20 -- ccp-emu link up.trace down.trace -- iperf3 -c $MAHIMAHI_BASE
/// Inside, $MAHIMAHI_BASE (and $CCP_EMU_BASE) is the address of the outermost shell's outer
/// side, where a server in the enclosing namespace can be reached; the enclosing namespace
/// reaches the inner one through a route (the inner address is $CCP_EMU_ADDR).
/// Without a command after `--`, $SHELL (or /bin/sh) runs. Needs root.
#[derive(Parser, Debug)]
#[command(name = "ccp-emu", version, about, long_about, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
    /// Log filter (tracing env-filter syntax)
    #[arg(long, default_value = "warn", global = true)]
    log_level: String,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// A bottleneck link in each direction: mahimahi traces, a constant rate or a rate schedule
    Link(LinkArgs),
    /// A fixed one-way delay in each direction, optionally with jitter
    Delay(DelayArgs),
    /// Independent random loss in one direction
    Loss(LossArgs),
    /// Several sender hosts sharing one emulated bottleneck to one receiver host
    Testbed(TestbedArgs),
    /// Remove leftovers (interfaces, namespace inits) of emulators that used a name prefix
    Cleanup(CleanupArgs),
    /// Check a trace file and print its length and mean rate
    CheckTrace {
        /// Trace files
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// Prefix of the interface names and init processes this emulator creates (1-6 letters or
    /// digits; `ccp-emu cleanup --prefix` finds them)
    #[arg(long, default_value = DEFAULT_PREFIX)]
    name_prefix: String,
    /// Seed of random loss, jitter and PIE
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Forward at normal priority instead of SCHED_FIFO (less precise timing under load)
    #[arg(long)]
    no_realtime: bool,
}

/// Link options, as mm-link spells them where mm-link has them.
#[derive(Args, Debug)]
#[command(after_help = "\
Each direction needs exactly one of: a trace file (positional UPLINK DOWNLINK), a rate or a
schedule. Trace lines are ms timestamps; each is one delivery opportunity of 1504 bytes
(packet sizes count a 4-byte TUN header, as in mahimahi); the trace loops unless --once.
QUEUE is infinite | droptail | drophead | codel | pie; QUEUE_ARGS is \"NAME=NUMBER, ...\" with
NAME in packets, bytes (droptail, drophead, codel, pie), target, interval (codel, ms),
qdelay_ref, max_burst (pie, ms). Unknown names are errors.

Examples:
  ccp-emu link up.trace down.trace -- iperf3 -c $MAHIMAHI_BASE
  ccp-emu link --rate 50mbit --uplink-queue=droptail --uplink-queue-args=packets=100 -- CMD
  ccp-emu link --schedule \"0s:20mbit,5s:10mbit\" --ecn-threshold 30KB -- CMD")]
struct LinkArgs {
    /// Uplink (inner → outer) and downlink trace files
    #[arg(value_name = "TRACE", num_args = 0..=2)]
    traces: Vec<PathBuf>,
    /// Constant rate of both directions, e.g. 100mbit
    #[arg(long, value_parser = ccp_units::parse_rate_with_unit)]
    rate: Option<u64>,
    /// Constant uplink rate
    #[arg(long, value_parser = ccp_units::parse_rate_with_unit)]
    uplink_rate: Option<u64>,
    /// Constant downlink rate
    #[arg(long, value_parser = ccp_units::parse_rate_with_unit)]
    downlink_rate: Option<u64>,
    /// Rate schedule of both directions: TIME:RATE,... e.g. "0s:20mbit,5s:10mbit" (the last
    /// rate holds; 0 is an outage)
    #[arg(long)]
    schedule: Option<String>,
    /// Uplink rate schedule
    #[arg(long)]
    uplink_schedule: Option<String>,
    /// Downlink rate schedule
    #[arg(long)]
    downlink_schedule: Option<String>,
    /// Stop at the end of the traces (and end the command) instead of looping
    #[arg(long)]
    once: bool,
    /// Uplink queue
    #[arg(long, value_name = "QUEUE", default_value = "infinite")]
    uplink_queue: String,
    /// Uplink queue arguments
    #[arg(long, value_name = "QUEUE_ARGS", default_value = "")]
    uplink_queue_args: String,
    /// Downlink queue
    #[arg(long, value_name = "QUEUE", default_value = "infinite")]
    downlink_queue: String,
    /// Downlink queue arguments
    #[arg(long, value_name = "QUEUE_ARGS", default_value = "")]
    downlink_queue_args: String,
    /// Mark CE on ECN-capable packets when the queue holds more than this, both directions:
    /// bytes (30KB) or packets (20pkts)
    #[arg(long, value_parser = EcnThreshold::parse)]
    ecn_threshold: Option<EcnThreshold>,
    /// ECN threshold of the uplink only
    #[arg(long, value_parser = EcnThreshold::parse)]
    uplink_ecn_threshold: Option<EcnThreshold>,
    /// ECN threshold of the downlink only
    #[arg(long, value_parser = EcnThreshold::parse)]
    downlink_ecn_threshold: Option<EcnThreshold>,
    /// Write the uplink's log here (mm-link format)
    #[arg(long)]
    uplink_log: Option<PathBuf>,
    /// Write the downlink's log here (mm-link format)
    #[arg(long)]
    downlink_log: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
    /// The command to run inside (after `--`)
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(Args, Debug)]
#[command(after_help = "Example: ccp-emu delay 20 --jitter 5ms -- ping $MAHIMAHI_BASE")]
struct DelayArgs {
    /// One-way delay in each direction: ms as a bare number (mahimahi), or with a unit
    #[arg(value_parser = parse_ms)]
    delay: Duration,
    /// Extra delay within [0, JITTER] in each direction, never reordering
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit, default_value = "0ms")]
    jitter: Duration,
    /// How the jitter varies: `smooth` (in time, the same for every packet at a given moment)
    /// or `uniform` (drawn per packet; a packet waits for the one ahead of it)
    #[arg(long, default_value = "smooth")]
    jitter_model: JitterModel,
    #[command(flatten)]
    common: Common,
    /// The command to run inside (after `--`)
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Which {
    Uplink,
    Downlink,
}

#[derive(Args, Debug)]
#[command(after_help = "Example: ccp-emu loss uplink 0.05 -- CMD")]
struct LossArgs {
    /// Direction
    which: Which,
    /// Loss probability, 0 to 1
    #[arg(value_parser = parse_prob)]
    rate: f64,
    #[command(flatten)]
    common: Common,
    /// The command to run inside (after `--`)
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Hosts: the receiver is 100.127.0.1, sender i is 100.127.(1 + i / 250).(i % 250): 100.127.1.i up
to sender 249, then 100.127.2.0 and on. Each command is a shell command (sh -c) with
$CCP_EMU_RECEIVER (the receiver's address), $CCP_EMU_ADDR (its host's address), $CCP_EMU_HOST
(receiver, sender1, ...) and $CCP_EMU_INDEX (0 for the receiver, i for sender i).
Give --sender once (every sender runs it) or once per sender. The testbed ends when every
sender command has exited (or after --duration); the receiver command is then stopped.
The bottleneck is the uplink (senders → receiver); the downlink is unconstrained unless given.

Example: two kernel TCPs sharing 50 Mbit/s with 20 ms each way:
  ccp-emu testbed --senders 2 --rate 50mbit --delay 20 \\
    --receiver 'iperf3 -s -p 5201 & iperf3 -s -p 5202 & wait' \\
    --sender 'sleep 0.5; iperf3 -c $CCP_EMU_RECEIVER -p 5201 -C cubic -t 10' \\
    --sender 'sleep 0.5; iperf3 -c $CCP_EMU_RECEIVER -p 5202 -C bbr -t 10'")]
struct TestbedArgs {
    /// Number of sender hosts
    #[arg(long, default_value_t = 1)]
    senders: usize,
    /// Bottleneck rate (senders → receiver)
    #[arg(long, value_parser = ccp_units::parse_rate_with_unit)]
    rate: Option<u64>,
    /// Bottleneck rate schedule, e.g. "0s:50mbit,10s:20mbit"
    #[arg(long)]
    schedule: Option<String>,
    /// Bottleneck trace (mahimahi format)
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Stop at the end of the trace instead of looping
    #[arg(long)]
    once: bool,
    /// Bottleneck queue
    #[arg(long, value_name = "QUEUE", default_value = "infinite")]
    queue: String,
    /// Bottleneck queue arguments
    #[arg(long, value_name = "QUEUE_ARGS", default_value = "")]
    queue_args: String,
    /// ECN threshold of the bottleneck: bytes (30KB) or packets (20pkts)
    #[arg(long, value_parser = EcnThreshold::parse)]
    ecn_threshold: Option<EcnThreshold>,
    /// Write the bottleneck's log here (mm-link format)
    #[arg(long)]
    log: Option<PathBuf>,
    /// Rate of the return path (receiver → senders)
    #[arg(long, value_parser = ccp_units::parse_rate_with_unit)]
    downlink_rate: Option<u64>,
    /// One-way delay each way: ms as a bare number, or with a unit
    #[arg(long, value_parser = parse_ms, default_value = "0")]
    delay: Duration,
    /// Jitter each way, within [0, JITTER] (order-preserving)
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit, default_value = "0ms")]
    jitter: Duration,
    /// How the jitter varies: `smooth` (in time) or `uniform` (drawn per packet)
    #[arg(long, default_value = "smooth")]
    jitter_model: JitterModel,
    /// Random loss on the bottleneck, 0 to 1
    #[arg(long, value_parser = parse_prob, default_value_t = 0.0)]
    loss: f64,
    /// Command of the receiver host
    #[arg(long)]
    receiver: Option<String>,
    /// Command of the sender hosts (once for all, or once per sender)
    #[arg(long = "sender", required = true)]
    sender: Vec<String>,
    /// Stop everything after this long, e.g. 30s
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit)]
    duration: Option<Duration>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct CleanupArgs {
    /// The name prefix the emulators used
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
}

/// A delay as mahimahi takes it: a bare number (decimals too) is milliseconds; anything else
/// needs a unit.
fn parse_ms(s: &str) -> Result<Duration, String> {
    if let Ok(ms) = s.trim().parse::<f64>() {
        return Duration::try_from_secs_f64(ms / 1e3).map_err(|_| {
            format!("{s:?} is not a delay: a non-negative number of ms, or e.g. 10ms")
        });
    }
    ccp_units::parse_duration_with_unit(s)
}

fn parse_prob(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number between 0 and 1"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{v} is not between 0 and 1"));
    }
    Ok(v)
}

fn shell_quote(a: &str) -> String {
    if !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

fn command_line() -> String {
    std::env::args()
        .map(|a| shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn default_command(cmd: Vec<OsString>) -> Vec<OsString> {
    if cmd.is_empty() {
        vec![std::env::var_os("SHELL").unwrap_or_else(|| "/bin/sh".into())]
    } else {
        cmd
    }
}

fn service(
    dir: &str,
    trace: Option<&PathBuf>,
    rate: Option<u64>,
    schedule: Option<&String>,
    once: bool,
) -> Result<Service> {
    let n = trace.is_some() as u8 + rate.is_some() as u8 + schedule.is_some() as u8;
    if n == 0 {
        bail!("the {dir} needs a trace file, --rate or --schedule");
    }
    if n > 1 {
        bail!("the {dir} has more than one of: a trace file, a rate, a schedule; give one");
    }
    if let Some(t) = trace {
        return Ok(Service::Trace {
            trace: Trace::load(t)?,
            repeat: !once,
        });
    }
    if once {
        bail!("--once applies to trace files only");
    }
    if let Some(r) = rate {
        if r == 0 {
            bail!("the {dir} rate must be > 0 (a schedule can have outages)");
        }
        return Ok(Service::Rate(Schedule::constant(r)));
    }
    Ok(Service::Rate(Schedule::parse(
        schedule.expect("counted above"),
    )?))
}

fn signals() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, flag.clone()).context("installing signal handlers")?;
    }
    Ok(flag)
}

fn exit_code(st: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

fn run_shell(cfg: ShellConfig) -> Result<i32> {
    let stop = signals()?;
    let mut shell = Shell::start(cfg)?;
    let st = shell.wait(Some(&stop))?;
    drop(shell);
    Ok(exit_code(st))
}

fn link(a: LinkArgs) -> Result<i32> {
    if a.traces.len() == 1 {
        bail!("give both traces (UPLINK DOWNLINK), or none with --rate / --schedule");
    }
    let up_q = QueueConfig::parse(&a.uplink_queue, &a.uplink_queue_args)
        .context("--uplink-queue / --uplink-queue-args")?;
    let down_q = QueueConfig::parse(&a.downlink_queue, &a.downlink_queue_args)
        .context("--downlink-queue / --downlink-queue-args")?;
    let up = LinkConfig {
        service: service(
            "uplink",
            a.traces.first(),
            a.uplink_rate.or(a.rate),
            a.uplink_schedule.as_ref().or(a.schedule.as_ref()),
            a.once,
        )?,
        queue: up_q,
        ecn: a.uplink_ecn_threshold.or(a.ecn_threshold),
        log: a.uplink_log,
    };
    let down = LinkConfig {
        service: service(
            "downlink",
            a.traces.get(1),
            a.downlink_rate.or(a.rate),
            a.downlink_schedule.as_ref().or(a.schedule.as_ref()),
            a.once,
        )?,
        queue: down_q,
        ecn: a.downlink_ecn_threshold.or(a.ecn_threshold),
        log: a.downlink_log,
    };
    run_shell(ShellConfig {
        uplink: PathConfig {
            link: Some(up),
            ..Default::default()
        },
        downlink: PathConfig {
            link: Some(down),
            ..Default::default()
        },
        command: Some(default_command(a.command)),
        name_prefix: a.common.name_prefix,
        command_line: command_line(),
        seed: a.common.seed,
        realtime: !a.common.no_realtime,
        env: vec![("MAHIMAHI_SHELL_PREFIX".into(), "[link] ".into())],
    })
}

fn delay(a: DelayArgs) -> Result<i32> {
    let d = DelayConfig {
        delay: a.delay,
        jitter: a.jitter,
        model: a.jitter_model,
    };
    let path = PathConfig {
        delay: d,
        ..Default::default()
    };
    run_shell(ShellConfig {
        uplink: path.clone(),
        downlink: path,
        command: Some(default_command(a.command)),
        name_prefix: a.common.name_prefix,
        command_line: command_line(),
        seed: a.common.seed,
        realtime: !a.common.no_realtime,
        env: vec![(
            "MAHIMAHI_SHELL_PREFIX".into(),
            format!("[delay {} ms] ", a.delay.as_millis()),
        )],
    })
}

fn loss(a: LossArgs) -> Result<i32> {
    let lossy = PathConfig {
        loss: a.rate,
        ..Default::default()
    };
    let (uplink, downlink) = match a.which {
        Which::Uplink => (lossy, PathConfig::default()),
        Which::Downlink => (PathConfig::default(), lossy),
    };
    run_shell(ShellConfig {
        uplink,
        downlink,
        command: Some(default_command(a.command)),
        name_prefix: a.common.name_prefix,
        command_line: command_line(),
        seed: a.common.seed,
        realtime: !a.common.no_realtime,
        env: vec![("MAHIMAHI_SHELL_PREFIX".into(), "[loss] ".into())],
    })
}

fn show(s: &StageStats) -> String {
    format!(
        "{} packets in, {} out, {} dropped, {} CE-marked",
        s.in_pkts, s.out_pkts, s.dropped_pkts, s.ce_marked
    )
}

fn testbed(a: TestbedArgs) -> Result<i32> {
    if a.sender.len() != 1 && a.sender.len() != a.senders {
        bail!(
            "give --sender once (for every sender) or {} times (one per sender), not {}",
            a.senders,
            a.sender.len()
        );
    }
    let n = a.rate.is_some() as u8 + a.schedule.is_some() as u8 + a.trace.is_some() as u8;
    let uplink = if n == 0 {
        if a.queue != "infinite" || a.ecn_threshold.is_some() || a.log.is_some() {
            bail!(
                "--queue, --ecn-threshold and --log need a bottleneck: --rate, --schedule or --trace"
            );
        }
        None
    } else {
        Some(LinkConfig {
            service: service(
                "bottleneck",
                a.trace.as_ref(),
                a.rate,
                a.schedule.as_ref(),
                a.once,
            )?,
            queue: QueueConfig::parse(&a.queue, &a.queue_args).context("--queue / --queue-args")?,
            ecn: a.ecn_threshold,
            log: a.log,
        })
    };
    if a.downlink_rate == Some(0) {
        bail!("--downlink-rate must be > 0 (leave it out for an unconstrained return path)");
    }
    let downlink = a.downlink_rate.map(LinkConfig::rate);
    let stop = signals()?;
    let tb = Testbed::new(TestbedConfig {
        senders: a.senders,
        uplink,
        downlink,
        delay: DelayConfig {
            delay: a.delay,
            jitter: a.jitter,
            model: a.jitter_model,
        },
        uplink_loss: a.loss,
        downlink_loss: 0.0,
        name_prefix: a.common.name_prefix,
        seed: a.common.seed,
        command_line: command_line(),
        realtime: !a.common.no_realtime,
        service: None,
    })?;
    let sh = |script: &str, idx: usize| {
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(script)
            .env("CCP_EMU_INDEX", idx.to_string());
        c
    };
    let mut receiver = match &a.receiver {
        Some(s) => Some(tb.spawn(tb.receiver(), &mut sh(s, 0))?),
        None => None,
    };
    let mut senders = Vec::new();
    for (i, h) in tb.senders().iter().enumerate() {
        let script = &a.sender[if a.sender.len() == 1 { 0 } else { i }];
        senders.push(Some(tb.spawn(h, &mut sh(script, i + 1))?));
    }
    let t0 = Instant::now();
    let mut worst = 0;
    let mut stopping: Option<Instant> = None;
    loop {
        for s in senders.iter_mut() {
            if let Some(c) = s
                && let Some(st) = c.try_wait()?
            {
                worst = worst.max(exit_code(st));
                *s = None;
            }
        }
        if senders.iter().all(Option::is_none) {
            break;
        }
        let timed_out = a.duration.is_some_and(|d| t0.elapsed() >= d);
        if stopping.is_none() && (stop.load(Ordering::SeqCst) || timed_out) {
            for c in senders.iter().flatten() {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
            }
            stopping = Some(Instant::now());
        }
        if stopping.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            for c in senders.iter_mut().flatten() {
                let _ = c.kill();
                let _ = c.wait();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(r) = receiver.as_mut() {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(r.id() as libc::pid_t, libc::SIGTERM) };
        let t = Instant::now();
        while r.try_wait()?.is_none() && t.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = r.kill();
        let _ = r.wait();
    }
    let (up, down) = tb.shutdown();
    eprintln!("ccp-emu testbed: uplink: {}", show(&up));
    eprintln!("ccp-emu testbed: downlink: {}", show(&down));
    Ok(worst)
}

fn check_trace(files: Vec<PathBuf>) -> Result<i32> {
    for f in files {
        let t = Trace::load(&f)?;
        println!(
            "{}: {} opportunities over {} ms, mean {}",
            f.display(),
            t.ms.len(),
            t.period_ms(),
            ccp_units::Unit::Rate.show(t.mean_rate())
        );
    }
    Ok(0)
}

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log_level)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log redirected to a file stays plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let res = match cli.command {
        Cmd::Link(a) => link(a),
        Cmd::Delay(a) => delay(a),
        Cmd::Loss(a) => loss(a),
        Cmd::Testbed(a) => testbed(a),
        Cmd::CheckTrace { files } => check_trace(files),
        Cmd::Cleanup(a) => cleanup::sweep(&a.prefix).map_err(Into::into).map(|s| {
            println!(
                "removed {} interface(s) {:?} and {} namespace process(es) {:?}",
                s.interfaces.len(),
                s.interfaces,
                s.processes.len(),
                s.processes
            );
            0
        }),
    };
    match res {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("ccp-emu: {e:#}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_delay_is_milliseconds_decimals_too() {
        assert_eq!(parse_ms("20").unwrap(), Duration::from_millis(20));
        assert_eq!(parse_ms("2.5").unwrap(), Duration::from_micros(2500));
        assert_eq!(parse_ms("0.5").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_ms("250us").unwrap(), Duration::from_micros(250));
        for bad in ["-1", "inf", "1e30", "5sec"] {
            assert!(parse_ms(bad).is_err(), "{bad}");
        }
    }
}
