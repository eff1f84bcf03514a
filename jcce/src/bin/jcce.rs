//! `jcce`: the JointCloud aggregation service of Vivace-Distributed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

use jcce::bench::{self, BenchConfig};
use jcce::client::{Client, ClientConfig};
use jcce::core::{CoreConfig, MAX_WINDOW_MIS};
use jcce::server::{Server, ServiceConfig, fetch_metrics};
use jcce::wire::Key;

/// JCCE aggregates the delivered throughput that every Vivace-Distributed flow of a JointCloud
/// publishes once per monitor interval (MI), and answers each flow with its group's mean T_avg
/// and member count n, never another flow's value. One `jcce serve` process serves all the
/// agents of a JointCloud; every datagram is authenticated with the JointCloud's shared key
/// (HMAC-SHA256) and replay-protected. See jcce/README.md for the protocol and privacy notes.
#[derive(Parser)]
#[command(name = "jcce", version)]
struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info`, `debug`.
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the service on a UDP address until SIGINT/SIGTERM.
    Serve {
        /// UDP address to listen on, e.g. 0.0.0.0:7800 or 127.0.0.1:7800.
        #[arg(long)]
        listen: SocketAddr,
        /// File holding the JointCloud key in hexadecimal (16–64 bytes; `jcce keygen` makes one).
        #[arg(long)]
        key_file: PathBuf,
        /// k: minimum group size for releasing the mean (below it replies carry n only).
        /// 1 = the paper's behaviour; 3 is recommended between tenants that do not trust each
        /// other (with n = 2 the mean reveals the other member's value).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        min_group: u32,
        /// A member that has not published for this long is dropped from its group (e.g. 1s, 500ms).
        #[arg(long, default_value = "1s", value_parser = ccp_units::parse_duration_with_unit)]
        member_timeout: Duration,
        /// W: MIs in a member's window; its contribution is the mean of its values over its last
        /// W MIs (1 = the paper's "throughput within an MI"; at most 16).
        #[arg(long, default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=MAX_WINDOW_MIS as i64))]
        window: u32,
        /// Largest accepted difference between a sender's clock and this host's (replay protection).
        #[arg(long, default_value = "10s", value_parser = ccp_units::parse_duration_with_unit)]
        max_clock_skew: Duration,
        /// Most live members over all groups; new members beyond it are refused.
        #[arg(long, default_value_t = 1_000_000)]
        max_members: usize,
    },
    /// Ask a running service for its metrics (counters and gauges, never a member's value).
    Metrics {
        /// The service's UDP address.
        #[arg(long)]
        addr: SocketAddr,
        /// The JointCloud key file (metrics requests are authenticated like everything else).
        #[arg(long)]
        key_file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
        /// How long to wait for the reply.
        #[arg(long, default_value = "2s", value_parser = ccp_units::parse_duration_with_unit)]
        timeout: Duration,
    },
    /// Join a group through the agent's client and publish a constant rate for a number of MIs,
    /// printing every aggregate received (one JSON object per line): a reachability check for
    /// a deployment, e.g. from each sender host or network namespace.
    Probe {
        /// The service's address (host:port).
        #[arg(long)]
        addr: String,
        /// The JointCloud key file.
        #[arg(long)]
        key_file: PathBuf,
        /// Group id to join.
        #[arg(long, default_value_t = 1)]
        group: u64,
        /// Delivered throughput to publish every MI (e.g. 50mbit, 6MBps).
        #[arg(long, default_value = "10mbit", value_parser = ccp_units::parse_rate_with_unit)]
        rate: u64,
        /// MIs to publish.
        #[arg(long, default_value_t = 10)]
        mis: u64,
        /// MI length.
        #[arg(long, default_value = "30ms", value_parser = ccp_units::parse_duration_with_unit)]
        interval: Duration,
    },
    /// Write a new random 32-byte key in hexadecimal (to stdout, or to --out with mode 0600).
    Keygen {
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Load generator: updates/s and reply latency on loopback (see docs/benchmarks.md).
    Bench {
        /// Members in total.
        #[arg(long, default_value_t = 10_000)]
        members: usize,
        /// Groups (member j is in group j mod groups).
        #[arg(long, default_value_t = 100)]
        groups: usize,
        /// Updates per datagram (32 fits an Ethernet MTU; at most 1024).
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Unanswered datagrams per sender thread (more only queue on a 2-core machine).
        #[arg(long, default_value_t = 1)]
        inflight: usize,
        /// Sender threads.
        #[arg(long, default_value_t = 1)]
        senders: usize,
        /// Measured duration.
        #[arg(long, default_value = "5s", value_parser = ccp_units::parse_duration_with_unit)]
        duration: Duration,
        /// Warm-up before measuring.
        #[arg(long, default_value = "1s", value_parser = ccp_units::parse_duration_with_unit)]
        warmup: Duration,
        /// Offered load (updates/s over all senders); default: as fast as --inflight allows.
        #[arg(long)]
        rate: Option<f64>,
        /// Load a running service instead of starting one in-process (needs --key-file).
        #[arg(long, requires = "key_file")]
        addr: Option<SocketAddr>,
        /// Key file of the running service.
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Prometheus,
}

fn load_key(path: &std::path::Path) -> anyhow::Result<Key> {
    Key::from_file(path).with_context(|| format!("key file {}", path.display()))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: a log file (as experiments keep) stays plain text.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.cmd {
        Cmd::Serve {
            listen,
            key_file,
            min_group,
            member_timeout,
            window,
            max_clock_skew,
            max_members,
        } => {
            let key = load_key(&key_file)?;
            let cfg = ServiceConfig {
                core: CoreConfig {
                    window_mis: window,
                    member_timeout_us: member_timeout.as_micros().max(1) as u64,
                    min_group,
                    max_members,
                },
                max_clock_skew_us: max_clock_skew.as_micros() as u64,
                ..ServiceConfig::default()
            };
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let server = Server::bind(listen, key, cfg).await?;
                tracing::info!(
                    "jcce serving on {} (k = {min_group}, window = {window} MI, member timeout = {:?})",
                    server.local_addr()?,
                    member_timeout
                );
                let metrics = server.run(shutdown_signal()).await;
                tracing::info!("jcce stopping: {}", serde_json::to_string(&metrics)?);
                anyhow::Ok(())
            })
        }
        Cmd::Metrics {
            addr,
            key_file,
            format,
            timeout,
        } => {
            let key = load_key(&key_file)?;
            let m = fetch_metrics(addr, &key, timeout)?;
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&m)?),
                Format::Prometheus => print!("{}", m.prometheus()),
            }
            Ok(())
        }
        Cmd::Probe {
            addr,
            key_file,
            group,
            rate,
            mis,
            interval,
        } => {
            let client = Client::start(ClientConfig::new(addr, load_key(&key_file)?))?;
            let member = client.member(group);
            let mut answered = 0u64;
            let mut last = None;
            for mi in 1..=mis {
                member.publish(mi, rate);
                std::thread::sleep(interval);
                if let Some(a) = member.latest()
                    && last != Some(a.mi)
                {
                    last = Some(a.mi);
                    answered += 1;
                    let line = serde_json::json!({
                        "mi": a.mi,
                        "n": a.n,
                        "mean_bytes_per_s": a.mean,
                        "reachable": client.is_reachable(),
                    });
                    println!("{line}");
                }
            }
            anyhow::ensure!(
                answered > 0,
                "no reply from the service ({:?})",
                client.stats()
            );
            Ok(())
        }
        Cmd::Keygen { out } => {
            let bytes: [u8; 32] = rand::random();
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            match out {
                None => println!("{hex}"),
                Some(path) => {
                    use std::io::Write;
                    use std::os::unix::fs::OpenOptionsExt;
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&path)
                        .with_context(|| format!("creating {}", path.display()))?;
                    writeln!(f, "{hex}")?;
                }
            }
            Ok(())
        }
        Cmd::Bench {
            members,
            groups,
            batch,
            inflight,
            senders,
            duration,
            warmup,
            rate,
            addr,
            key_file,
            json,
        } => {
            let key = match &key_file {
                Some(p) => load_key(p)?,
                None => Key::from_bytes(&rand::random::<[u8; 32]>())?,
            };
            let report = bench::run(&BenchConfig {
                members,
                groups,
                batch,
                inflight: inflight.max(1),
                senders,
                duration,
                warmup,
                rate,
                target: addr,
                key,
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("{}", report.summary());
            }
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
