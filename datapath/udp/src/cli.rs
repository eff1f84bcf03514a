//! Command-line pieces shared by the datapath binaries (`ccp-udp` and `ccp-quic`): clap
//! argument groups to `#[command(flatten)]` into a binary's own arguments, and the helpers
//! every binary needs (logging, the stop flag, `--flow` specs, JSON output, `--flows-out`).
//!
//! The groups keep the flag names, defaults and help texts of `ccp-udp`'s original options, so
//! both binaries accept the same command lines for the options they share.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

use crate::ccp::{BackendKind, CcpConfig, CcpCounters, ControlPlane};
use crate::sender::{Amount, FlowSpec, FlowStart};

/// Log output format: human-readable lines (`text`) or one JSON object per event (`json`).
// The variants have no doc comments: clap would list them in the help texts, which stay as
// they were.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `--log-format` and `--log-level`, global to all subcommands.
#[derive(Args, Debug)]
pub struct LogArgs {
    /// Log format
    #[arg(long, value_enum, default_value = "text", global = true)]
    pub log_format: LogFormat,
    /// Log filter (tracing env-filter syntax)
    #[arg(long, default_value = "info", global = true)]
    pub log_level: String,
}

impl LogArgs {
    /// Installs the global tracing subscriber, writing to stderr; an invalid filter is an
    /// error (a mistyped filter would otherwise log what the user did not ask for).
    pub fn init(&self) -> Result<()> {
        let filter = tracing_subscriber::EnvFilter::try_new(&self.log_level)
            .with_context(|| format!("--log-level {:?}", self.log_level))?;
        let b = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // Colours only on a terminal: a log redirected to a file stays plain text.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
        match self.log_format {
            LogFormat::Json => b.json().flatten_event(true).init(),
            LogFormat::Text => b.init(),
        }
        Ok(())
    }
}

/// What the sender sends: `--bytes`/`--time` × `--flows` with `--alg`, or `--flow` specs.
#[derive(Args, Debug)]
pub struct FlowArgs {
    /// Bytes per flow, e.g. 100M or 1GiB
    #[arg(long, value_parser = ccp_units::parse_bytes, conflicts_with = "time")]
    pub bytes: Option<u64>,
    /// Duration per flow instead of a size, e.g. 30s
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit)]
    pub time: Option<Duration>,
    /// Number of flows like the above
    #[arg(long, default_value_t = 1)]
    pub flows: usize,
    /// Algorithm the flows ask the agent for, optionally with parameters: cubic or
    /// cubic:beta=0.8 (default: the agent's choice)
    #[arg(long, default_value = "")]
    pub alg: String,
    /// A flow of its own, repeatable: alg=NAME[:k=v;k=v],bytes=SIZE|time=DUR[,start=DUR][,cap=RATE]
    /// e.g. --flow alg=cubic:beta=0.8,bytes=50M (instead of --flows/--bytes/--time/--alg)
    // The text is `--help`'s, where brackets mean optional parts; rustdoc would read them as links.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long = "flow", value_name = "SPEC", conflicts_with_all = ["bytes", "time", "flows", "alg"])]
    pub flow_specs: Vec<String>,
}

impl FlowArgs {
    /// The flows these options describe.
    pub fn specs(&self) -> Result<Vec<FlowSpec>> {
        if !self.flow_specs.is_empty() {
            return self.flow_specs.iter().map(|s| parse_flow_spec(s)).collect();
        }
        check_alg_len(&self.alg, "--alg")?;
        let amount = match (self.bytes, self.time) {
            (Some(b), _) => Amount::Bytes(b),
            (None, Some(t)) => Amount::Duration(t),
            (None, None) => {
                bail!("say how much to send: --bytes SIZE or --time DURATION (or --flow specs)")
            }
        };
        if self.flows == 0 {
            bail!("--flows must be at least 1");
        }
        Ok((0..self.flows)
            .map(|_| FlowSpec {
                amount,
                algorithm: self.alg.clone(),
                start_after: Duration::ZERO,
                rate_cap: None,
            })
            .collect())
    }
}

/// Parses one `--flow` spec: `alg=NAME[:k=v;k=v],bytes=SIZE|time=DUR[,start=DUR][,cap=RATE]`.
pub fn parse_flow_spec(spec: &str) -> Result<FlowSpec> {
    let mut f = FlowSpec {
        amount: Amount::Bytes(0),
        algorithm: String::new(),
        start_after: Duration::ZERO,
        rate_cap: None,
    };
    let mut amount = None;
    for part in spec.split(',') {
        let (k, v) = part
            .split_once('=')
            .with_context(|| format!("--flow {spec:?}: expected key=value pairs, got {part:?}"))?;
        let bad = |e: String| anyhow::anyhow!("--flow {spec:?}: {k}: {e}");
        match k.trim() {
            // Parameters inside alg= are separated by ';' (',' separates the fields here).
            "alg" => f.algorithm = v.trim().replace(';', ","),
            "bytes" | "time" if amount.is_some() => {
                bail!("--flow {spec:?}: give bytes= or time=, once")
            }
            "bytes" => amount = Some(Amount::Bytes(ccp_units::parse_bytes(v).map_err(bad)?)),
            "time" => {
                amount = Some(Amount::Duration(
                    ccp_units::parse_duration_with_unit(v).map_err(bad)?,
                ))
            }
            "start" => f.start_after = ccp_units::parse_duration_with_unit(v).map_err(bad)?,
            "cap" => f.rate_cap = Some(ccp_units::parse_rate_with_unit(v).map_err(bad)?),
            other => bail!(
                "--flow {spec:?}: unknown key {other:?}; expected alg, bytes, time, start, cap"
            ),
        }
    }
    f.amount =
        amount.with_context(|| format!("--flow {spec:?}: needs bytes=SIZE or time=DURATION"))?;
    check_alg_len(&f.algorithm, &format!("--flow {spec:?}: alg"))?;
    Ok(f)
}

/// Refuses an algorithm request (name and parameters) that does not fit libccp's CREATE
/// message (63 bytes, `ccp_engine::wire::MAX_CONG_ALG_SIZE` less its NUL), as the simulator's
/// scenario check does: cut short, the agent would run the flow with other parameters than the
/// ones asked for (the tail of the last one lost, the rest at their defaults).
fn check_alg_len(alg: &str, what: &str) -> Result<()> {
    let max = ccp_engine::wire::MAX_CONG_ALG_SIZE - 1;
    if alg.len() > max {
        bail!(
            "{what}: {:?} is {} bytes; libccp carries at most {max} (give fewer parameters)",
            alg,
            alg.len()
        );
    }
    Ok(())
}

/// How the sender reaches the agent: `--agent`, `--socket`, `--backend`, `--no-ccp`.
#[derive(Args, Debug)]
pub struct CcpArgs {
    /// The agent's unix socket
    #[arg(long, default_value = "/tmp/ccp/agent.sock")]
    pub agent: PathBuf,
    /// This datapath's unix socket (default: ccp-udp-PID.sock beside the agent's). A socket
    /// left there by a process that died is replaced, a live one refused; PATH.lock is held
    /// beside it while the sender runs
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// libccp implementation: the C libccp (as in ccp-kernel) or the project's engine
    #[arg(long, default_value = "libccp")]
    pub backend: BackendKind,
    /// No agent at all: every flow runs the built-in Reno
    #[arg(long)]
    pub no_ccp: bool,
}

impl CcpArgs {
    /// Starts the control plane these options ask for (None with `--no-ccp`).
    pub fn start(&self) -> Result<Option<ControlPlane>> {
        if self.no_ccp {
            return Ok(None);
        }
        Ok(Some(ControlPlane::start(CcpConfig {
            agent_socket: self.agent.clone(),
            local_socket: self.socket.clone(),
            backend: self.backend,
            ..CcpConfig::default()
        })?))
    }
}

/// Prints the control plane's message counters after a run.
pub fn print_ccp_counters(c: &CcpCounters) {
    println!(
        "ccp: {} messages to the agent, {} from it, {} undeliverable, {} fallbacks, {} returns",
        c.sent, c.agent_messages, c.send_failures, c.fallbacks, c.returns
    );
}

/// The sender's outputs: `--json`, `--csv`, `--trace-interval`, `--rtt-from`.
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Write the per-flow summaries (with traces) as JSON here
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the cwnd/rate trace of every flow as CSV here
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Trace sampling interval, e.g. 10ms
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit, default_value = "10ms")]
    pub trace_interval: Duration,
    /// Leave the RTT samples taken before this time (from the sender's start, the clock of a
    /// flow's start=) out of the summaries' RTT percentiles, e.g. a warm-up; the smallest RTT
    /// still counts every sample
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit, default_value = "0s")]
    pub rtt_from: Duration,
}

/// `--flows-out FILE`: every flow's start ([`FlowStart`]) as one JSON line,
/// `{"flow":N,"flow_id":ID,"src":"IP:PORT","at_us":T}`, written whole and unbuffered as the
/// flow's socket is bound (before its HELLO), so another process can read each flow's source
/// address while the sender runs. `flow` is the index the summaries (`--json`) use, `src` the
/// address the agent knows the flow by, `at_us` µs since the sender started. The file is
/// created empty before any flow starts.
pub struct FlowsOut {
    file: Mutex<std::fs::File>,
}

impl FlowsOut {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> Result<FlowsOut> {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(FlowsOut {
            file: Mutex::new(file),
        })
    }

    /// Appends `s` as one line (one write, so a reader never sees two lines interleaved).
    pub fn announce(&self, s: &FlowStart) -> std::io::Result<()> {
        let mut line = serde_json::to_string(s)?;
        line.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(line.as_bytes())?;
        f.flush()
    }
}

/// A flag set on Ctrl-C (SIGINT) or SIGTERM.
pub fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// A duration with a unit, above zero (a timeout).
pub fn positive_duration(s: &str) -> std::result::Result<Duration, String> {
    let d = ccp_units::parse_duration_with_unit(s)?;
    if d.is_zero() {
        return Err("must be positive".into());
    }
    Ok(d)
}

/// A peer's address as a person writes it: `IP:PORT` (`[::1]:4433` for IPv6), or
/// `HOST:PORT`, resolved once here to its first IPv4 address (a receiver listening on the
/// default 0.0.0.0 gets no IPv6 traffic), or its first address if it has none.
pub fn parse_peer(s: &str) -> std::result::Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} is not HOST:PORT or IP:PORT"));
    };
    if port.parse::<u16>().is_err() || host.is_empty() {
        return Err(format!("{s:?} is not HOST:PORT or IP:PORT"));
    }
    // `fe80::1:4433` is an address of its own: which colon starts the port is not for us to
    // guess.
    if host.contains(':') {
        return Err(format!(
            "{s:?}: write an IPv6 address in brackets, e.g. [::1]:4433"
        ));
    }
    let all: Vec<std::net::SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {s:?}: {e}"))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| format!("{s:?} resolves to no address"))
}

/// Writes `v` as pretty JSON to `path`, through a temporary file renamed into place so readers
/// never see a partial file.
pub fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> Result<()> {
    ccp_files::write_whole(path, |w| {
        serde_json::to_writer_pretty(&mut *w, v).map_err(std::io::Error::other)
    })
    .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser, Debug)]
    struct Send {
        #[command(flatten)]
        flows: FlowArgs,
    }

    #[test]
    fn peers_are_addresses_or_resolved_host_names() {
        assert_eq!(
            parse_peer("127.0.0.1:4433").unwrap(),
            "127.0.0.1:4433".parse().unwrap()
        );
        assert_eq!(parse_peer("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        // localhost resolves without a network (the hosts file), to IPv4 first.
        assert_eq!(
            parse_peer("localhost:4433").unwrap(),
            "127.0.0.1:4433".parse().unwrap()
        );
        for bad in [
            "localhost",
            "localhost:http",
            "127.0.0.1:70000",
            ":4433",
            "fe80::1:4433",
        ] {
            let e = parse_peer(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn flow_specs_refuse_the_options_they_replace() {
        use clap::Parser;
        for other in [
            ["--alg", "cubic"],
            ["--bytes", "1M"],
            ["--time", "1s"],
            ["--flows", "2"],
        ] {
            let e = Send::try_parse_from(["send", "--flow", "bytes=1M", other[0], other[1]])
                .unwrap_err();
            assert!(
                e.to_string().contains("cannot be used with"),
                "{other:?}: {e}"
            );
        }
        // Their defaults alone do not count.
        let s = Send::try_parse_from(["send", "--flow", "alg=reno,bytes=1M"]).unwrap();
        assert_eq!(s.flows.specs().unwrap()[0].algorithm, "reno");
        let bad = LogArgs {
            log_format: LogFormat::Text,
            log_level: "ccp=debgu[".into(),
        };
        assert!(bad.init().unwrap_err().to_string().contains("--log-level"));
    }

    #[test]
    fn flow_spec_fields() {
        let f = parse_flow_spec("alg=cubic:beta=0.8;c=0.4,bytes=50M,start=2s,cap=10Mbit").unwrap();
        assert_eq!(f.algorithm, "cubic:beta=0.8,c=0.4");
        assert!(matches!(f.amount, Amount::Bytes(b) if b > 0));
        assert_eq!(f.start_after, Duration::from_secs(2));
        assert!(f.rate_cap.is_some());
        assert!(
            parse_flow_spec("alg=cubic").is_err(),
            "an amount is required"
        );
        assert!(parse_flow_spec("alg=cubic,bytes=1M,color=red").is_err());
        let e = parse_flow_spec("bytes=1M,time=2s").unwrap_err().to_string();
        assert!(e.contains("give bytes= or time=, once"), "{e}");
        // A request longer than libccp's 63 bytes is refused, not cut short.
        let long =
            "alg=timely:t-low=22ms;t-high=35ms;min-rtt=0us;delta=1mbit;init-rate=10mbit,time=1s";
        let e = parse_flow_spec(long).unwrap_err().to_string();
        assert!(e.contains("70 bytes; libccp carries at most 63"), "{e}");
        let fits = format!("alg={},bytes=1M", "x".repeat(63));
        assert_eq!(parse_flow_spec(&fits).unwrap().algorithm.len(), 63);
    }
}
