//! A mahimahi-style shell: a command in a new network (and PID) namespace whose only way out is
//! a TUN device, connected through an emulated path to a TUN device in the enclosing
//! namespace. Uplink is inner → outer, downlink outer → inner. The inner command gets
//! `MAHIMAHI_BASE` / `CCP_EMU_BASE` (the outermost shell's outer address, as mahimahi sets it),
//! `CCP_EMU_PEER` (this shell's outer address), `CCP_EMU_ADDR` (its own address) and
//! `CCP_EMU_BLOCK` (for nesting). Everything the shell creates goes away when it is dropped.

use crate::addr::{self, BLOCK_ENV, Block};
use crate::engine::{Clock, DirStats, Direction, Output};
use crate::error::{EmuError, Result};
use crate::log::LogHeader;
use crate::stage::{PathConfig, Pipeline, StageStats};
use crate::sys::{self, Netns, Tun};
use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Name of the TUN device inside a shell, as in mahimahi.
pub const INNER_DEVICE: &str = "ingress";
/// Default interface-name prefix of the devices a shell creates in the enclosing namespace.
pub const DEFAULT_PREFIX: &str = "ccpemu";
/// MTU of every emulator device.
pub const MTU: i32 = 1500;
/// Transmit queue of every emulator device: room for 120 ms at 1 Gbit/s, so a forwarding thread
/// that is not scheduled for a while loses nothing (the kernel's default is 1000 packets).
pub const TXQLEN: i32 = 10_000;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Check an interface-name prefix (it leaves room for a process id and a sequence number).
pub fn check_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() || prefix.len() > 6 || !prefix.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(EmuError::Config(format!(
            "name prefix {prefix:?} must be 1 to 6 letters or digits"
        )));
    }
    Ok(())
}

/// A fresh interface name `PREFIX<pid hex>x<seq hex>`, cut to 15 bytes.
pub fn device_name(prefix: &str) -> String {
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut n = format!("{prefix}{:x}x{:x}", std::process::id(), seq);
    n.truncate(15);
    n
}

/// The name given to the init process of namespaces made with `prefix` (found by cleanup).
pub fn init_name(prefix: &str) -> String {
    format!("{prefix}-ns")
}

/// What a shell emulates and runs.
#[derive(Clone, Debug)]
pub struct ShellConfig {
    /// Inner → outer.
    pub uplink: PathConfig,
    /// Outer → inner.
    pub downlink: PathConfig,
    /// The command; `None` runs nothing (the shell lives until dropped; use [`Shell::spawn`]).
    pub command: Option<Vec<OsString>>,
    /// Prefix of interface names (1-6 alphanumerics); tests use one per test.
    pub name_prefix: String,
    /// Shown in logs: the command line that started the emulator.
    pub command_line: String,
    /// Seed of random loss, jitter and PIE.
    pub seed: u64,
    /// Extra environment for the command.
    pub env: Vec<(String, String)>,
    /// Run the forwarding threads under SCHED_FIFO (precise timing on a loaded machine).
    pub realtime: bool,
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            uplink: PathConfig::default(),
            downlink: PathConfig::default(),
            command: None,
            name_prefix: DEFAULT_PREFIX.into(),
            command_line: String::new(),
            seed: 1,
            env: Vec::new(),
            realtime: true,
        }
    }
}

/// A running shell.
pub struct Shell {
    block: Block,
    outer_addr: Ipv4Addr,
    inner_addr: Ipv4Addr,
    outer_name: String,
    base: String,
    up: Direction,
    down: Direction,
    ns: Netns,
    child: Option<Child>,
    env: Vec<(String, String)>,
    _outer: Arc<Tun>,
    _inner: Arc<Tun>,
    clock: Clock,
    origin: u64,
}

impl Shell {
    /// Create the namespace, devices, routes and forwarding threads, then start the command.
    pub fn start(cfg: ShellConfig) -> Result<Shell> {
        if !sys::is_root() {
            return Err(EmuError::NotRoot("starting a shell".into()));
        }
        check_prefix(&cfg.name_prefix)?;
        cfg.uplink.validate()?;
        cfg.downlink.validate()?;
        let clock = Clock::start();
        let parent = addr::current_block()?;
        let outer_name = device_name(&cfg.name_prefix);
        // Allocate a block and claim it with a route before anyone else looks.
        let (block, outer) = {
            let _lock = addr::lock()?;
            let block = addr::allocate(parent)?;
            let (e, i) = (block.host(1), block.host(2));
            let tun = Tun::create(&outer_name)?;
            sys::disable_ipv6(&outer_name)?;
            sys::set_addresses(&outer_name, e, i, 32)?;
            sys::set_mtu_txqlen(&outer_name, MTU, TXQLEN)?;
            sys::link_up(&outer_name)?;
            sys::add_route(block.net, block.prefix, None, &outer_name)?;
            (block, Arc::new(tun))
        };
        let (outer_addr, inner_addr) = (block.host(1), block.host(2));
        let ns = Netns::new(&init_name(&cfg.name_prefix))?;
        let inner = Arc::new(ns.run(|| {
            let t = Tun::create(INNER_DEVICE)?;
            sys::disable_ipv6(INNER_DEVICE)?;
            sys::set_addresses(INNER_DEVICE, inner_addr, outer_addr, 32)?;
            sys::set_mtu_txqlen(INNER_DEVICE, MTU, TXQLEN)?;
            sys::link_up(INNER_DEVICE)?;
            sys::add_route(Ipv4Addr::UNSPECIFIED, 0, Some(outer_addr), INNER_DEVICE)?;
            Ok(t)
        })?);
        let start = clock.now_us() / 1000 * 1000;
        let header = |dir: &str, p: &PathConfig| {
            p.link.as_ref().map(|l| LogHeader {
                direction: dir.into(),
                source: l.service.describe(),
                command_line: cfg.command_line.clone(),
                queue: l.queue.describe(),
                init_unix_ms: clock.unix_ms(),
                base_ms: start / 1000,
            })
        };
        let up_pipe = Pipeline::new(&cfg.uplink, start, cfg.seed, header("Uplink", &cfg.uplink))?;
        let down_pipe = Pipeline::new(
            &cfg.downlink,
            start,
            cfg.seed.wrapping_add(0x5eed),
            header("Downlink", &cfg.downlink),
        )?;
        let up = Direction::start(
            "up",
            vec![inner.clone()],
            Output::One(outer.clone()),
            up_pipe,
            clock,
            cfg.realtime,
        )?;
        let down = Direction::start(
            "down",
            vec![outer.clone()],
            Output::One(inner.clone()),
            down_pipe,
            clock,
            cfg.realtime,
        )?;
        // mahimahi: MAHIMAHI_BASE names the outermost shell's outer side; set it only if unset.
        let base = std::env::var("MAHIMAHI_BASE")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| outer_addr.to_string());
        let mut env = vec![
            ("MAHIMAHI_BASE".to_string(), base.clone()),
            (
                "CCP_EMU_BASE".to_string(),
                std::env::var("CCP_EMU_BASE")
                    .ok()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| base.clone()),
            ),
            ("CCP_EMU_PEER".to_string(), outer_addr.to_string()),
            ("CCP_EMU_ADDR".to_string(), inner_addr.to_string()),
            (BLOCK_ENV.to_string(), block.to_string()),
        ];
        env.extend(cfg.env.iter().cloned());
        let mut shell = Shell {
            block,
            outer_addr,
            inner_addr,
            outer_name,
            base,
            up,
            down,
            ns,
            child: None,
            env,
            _outer: outer,
            _inner: inner,
            clock,
            origin: start,
        };
        if let Some(argv) = &cfg.command {
            let (prog, args) = argv
                .split_first()
                .ok_or_else(|| EmuError::Config("empty command".into()))?;
            let mut cmd = Command::new(prog);
            cmd.args(args);
            shell.child = Some(shell.spawn(&mut cmd)?);
        }
        Ok(shell)
    }

    /// Spawn another command inside the shell (with the shell's environment variables).
    pub fn spawn(&self, cmd: &mut Command) -> Result<Child> {
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        self.ns.spawn(cmd)
    }

    /// Run `f` on a thread inside the shell's network namespace (e.g. to open sockets there).
    pub fn run_inside<R: Send>(&self, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
        self.ns.run(f)
    }

    /// The outer side's address (reachable from inside).
    pub fn outer_addr(&self) -> Ipv4Addr {
        self.outer_addr
    }

    /// The inner side's address (reachable from outside through the route to the block).
    pub fn inner_addr(&self) -> Ipv4Addr {
        self.inner_addr
    }

    /// The value given to `MAHIMAHI_BASE`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The address block routed to this shell.
    pub fn block(&self) -> Block {
        self.block
    }

    /// The outer TUN device's name.
    pub fn outer_device(&self) -> &str {
        &self.outer_name
    }

    /// The emulator's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// When the links started (their trace time 0), µs of [`Shell::clock`].
    pub fn link_origin_us(&self) -> u64 {
        self.origin
    }

    /// Counters of the uplink and downlink.
    pub fn stats(&self) -> (StageStats, StageStats) {
        let get = |d: &DirStats| d.stages.lock().map(|s| *s).unwrap_or_default();
        (get(&self.up.stats), get(&self.down.stats))
    }

    /// Live counters of both directions (lateness, emulator-side losses).
    pub fn dir_stats(&self) -> (Arc<DirStats>, Arc<DirStats>) {
        (self.up.stats.clone(), self.down.stats.clone())
    }

    /// Whether a `--once` trace has ended in either direction.
    pub fn link_finished(&self) -> bool {
        self.up.stats.finished.load(Ordering::SeqCst)
            || self.down.stats.finished.load(Ordering::SeqCst)
    }

    /// Wait for the command to exit. If `interrupt` becomes true or a `--once` trace ends, the
    /// command gets SIGTERM and, 2 s later, everything in the namespace is killed.
    pub fn wait(&mut self, interrupt: Option<&AtomicBool>) -> Result<ExitStatus> {
        let Some(child) = self.child.as_mut() else {
            return Err(EmuError::Config("the shell runs no command".into()));
        };
        let mut term_at: Option<Instant> = None;
        loop {
            if let Some(st) = child
                .try_wait()
                .map_err(|e| EmuError::sys("waiting for the command", e))?
            {
                return Ok(st);
            }
            let stop = interrupt.is_some_and(|f| f.load(Ordering::SeqCst))
                || self.up.stats.finished.load(Ordering::SeqCst)
                || self.down.stats.finished.load(Ordering::SeqCst);
            match term_at {
                None if stop => {
                    // SAFETY: signalling our own child.
                    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
                    term_at = Some(Instant::now());
                }
                Some(t) if t.elapsed() > Duration::from_secs(2) => {
                    self.ns.kill();
                    return child
                        .wait()
                        .map_err(|e| EmuError::sys("waiting for the command", e));
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stop forwarding and remove everything (also done on drop).
    pub fn shutdown(mut self) -> (StageStats, StageStats) {
        let s = self.stats_final();
        drop(self);
        s
    }

    fn stats_final(&mut self) -> (StageStats, StageStats) {
        self.up.stop();
        self.down.stop();
        self.stats()
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        self.ns.kill();
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.up.stop();
        self.down.stop();
    }
}
