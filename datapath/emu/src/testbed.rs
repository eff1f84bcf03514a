//! The experiment testbed: N sender hosts and one receiver host, each its own network and PID
//! namespace with one TUN device, joined by the emulator. Everything the senders send to the
//! receiver crosses one shared uplink pipeline (the bottleneck: link, loss, delay); everything
//! the receiver sends crosses the downlink pipeline and is routed to the sender it is
//! addressed to. The hosts are isolated from the machine's own namespace, so addresses never
//! collide with anything: the receiver is 100.127.0.1, sender i (from 1) is
//! 100.127.(1 + i / 250).(i % 250), so 100.127.1.i up to sender 249.
//!
//! Optionally a service host ([`TestbedConfig::service`], 100.127.0.2) runs a shared control
//! service such as JCCE. Every sender host and the receiver host reach it over a side path of
//! its own: a second TUN device per host ([`SIDE_DEVICE`], routed to the service host's
//! address only) and two more forwarding threads that only delay (no rate limit, no queue, no
//! loss). Control traffic thereby never enters the uplink or downlink pipelines: it neither
//! shares the bottleneck nor shows in its counters.

use crate::engine::{Clock, DirStats, Direction, Output};
use crate::error::{EmuError, Result};
use crate::link::LinkConfig;
use crate::log::LogHeader;
use crate::shell::{DEFAULT_PREFIX, MTU, TXQLEN, check_prefix, init_name};
use crate::stage::{DelayConfig, PathConfig, Pipeline, StageStats};
use crate::sys::{self, Netns, Tun};
use std::net::Ipv4Addr;
use std::process::{Child, Command};
use std::sync::Arc;

/// The device name inside every host.
pub const HOST_DEVICE: &str = "emu0";
/// The receiver's address.
pub const RECEIVER_ADDR: Ipv4Addr = Ipv4Addr::new(100, 127, 0, 1);

/// The service host's address (when [`TestbedConfig::service`] is set).
pub const SERVICE_ADDR: Ipv4Addr = Ipv4Addr::new(100, 127, 0, 2);
/// The device of the side path to the service host, inside every sender and the receiver.
pub const SIDE_DEVICE: &str = "side0";

/// The service host and its side path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceHostConfig {
    /// One-way delay of the side path, each way (host → service and back), applied alone: no
    /// rate limit, no queue, no loss. The round trip between any host and the service is twice
    /// this.
    pub one_way: std::time::Duration,
}

/// Address of sender `i` (1-based).
pub fn sender_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(100, 127, (i / 250 + 1) as u8, (i % 250) as u8)
}

/// What a testbed emulates.
#[derive(Clone, Debug)]
pub struct TestbedConfig {
    /// Number of sender hosts (1 to 1000).
    pub senders: usize,
    /// The shared bottleneck from senders to the receiver (none: infinitely fast).
    pub uplink: Option<LinkConfig>,
    /// The link from the receiver back to the senders (none: infinitely fast).
    pub downlink: Option<LinkConfig>,
    /// One-way delay (and jitter) in each direction.
    pub delay: DelayConfig,
    /// Random loss on the uplink, 0..=1.
    pub uplink_loss: f64,
    /// Random loss on the downlink, 0..=1.
    pub downlink_loss: f64,
    /// Prefix for the init processes' names (1-6 alphanumerics); tests use one per test.
    pub name_prefix: String,
    /// Seed of random loss, jitter and PIE.
    pub seed: u64,
    /// Shown in link logs.
    pub command_line: String,
    /// Run the forwarding threads under SCHED_FIFO (precise timing on a loaded machine).
    pub realtime: bool,
    /// A service host beside the experiment, reached over its own side path (none: no such
    /// host).
    pub service: Option<ServiceHostConfig>,
}

impl Default for TestbedConfig {
    fn default() -> Self {
        TestbedConfig {
            senders: 1,
            uplink: None,
            downlink: None,
            delay: DelayConfig::default(),
            uplink_loss: 0.0,
            downlink_loss: 0.0,
            name_prefix: DEFAULT_PREFIX.into(),
            seed: 1,
            command_line: String::new(),
            realtime: true,
            service: None,
        }
    }
}

impl TestbedConfig {
    /// The dumbbell most experiments use: `senders` hosts share one bottleneck of `rate_bps`
    /// bit/s towards the receiver with a drop-tail buffer of `buffer_packets`, the return path
    /// is infinitely fast, and each direction has the fixed one-way delay `one_way`. The other
    /// fields are the defaults; set `name_prefix` and `command_line` on top.
    pub fn dumbbell(
        senders: usize,
        rate_bps: u64,
        buffer_packets: u32,
        one_way: std::time::Duration,
    ) -> TestbedConfig {
        TestbedConfig {
            senders,
            uplink: Some(
                LinkConfig::rate(rate_bps / 8)
                    .with_queue(crate::queue::QueueConfig::droptail_packets(buffer_packets)),
            ),
            delay: DelayConfig::fixed(one_way),
            ..TestbedConfig::default()
        }
    }
}

/// One host of the testbed.
pub struct Host {
    /// `receiver` or `sender1`, `sender2`, ...
    pub name: String,
    /// Its address.
    pub addr: Ipv4Addr,
    ns: Netns,
    tun: Arc<Tun>,
    /// The side path's device towards the service host, if there is one.
    side: Option<Arc<Tun>>,
}

impl Host {
    /// A host whose device reaches every other host; with `side`, a second device reaches the
    /// service host (a more specific route than the others').
    fn new(name: String, addr: Ipv4Addr, prefix: &str, side: bool) -> Result<Host> {
        let ns = Netns::new(&init_name(prefix))?;
        let (tun, side) = ns.run(|| {
            let t = Tun::create(HOST_DEVICE)?;
            sys::disable_ipv6(HOST_DEVICE)?;
            sys::set_address(HOST_DEVICE, addr, 32)?;
            sys::set_mtu_txqlen(HOST_DEVICE, MTU, TXQLEN)?;
            sys::link_up(HOST_DEVICE)?;
            // Every other host is behind the device.
            sys::add_route(Ipv4Addr::new(100, 127, 0, 0), 16, None, HOST_DEVICE)?;
            let s = if side {
                let s = Tun::create(SIDE_DEVICE)?;
                sys::disable_ipv6(SIDE_DEVICE)?;
                // The same address as the host's, so what leaves here carries it.
                sys::set_address(SIDE_DEVICE, addr, 32)?;
                sys::set_mtu_txqlen(SIDE_DEVICE, MTU, TXQLEN)?;
                sys::link_up(SIDE_DEVICE)?;
                sys::add_route(SERVICE_ADDR, 32, None, SIDE_DEVICE)?;
                Some(Arc::new(s))
            } else {
                None
            };
            Ok((t, s))
        })?;
        Ok(Host {
            name,
            addr,
            ns,
            tun: Arc::new(tun),
            side,
        })
    }

    /// Run `f` on a thread inside the host's network namespace.
    pub fn run_inside<R: Send>(&self, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
        self.ns.run(f)
    }
}

/// A running testbed; dropping it (or [`Testbed::shutdown`]) removes every namespace, device
/// and process.
pub struct Testbed {
    receiver: Host,
    senders: Vec<Host>,
    up: Direction,
    down: Direction,
    clock: Clock,
    service: Option<Service>,
}

/// The service host and the two directions of its side path.
struct Service {
    host: Host,
    /// Every host → the service host.
    to: Direction,
    /// The service host → every host.
    from: Direction,
}

impl Testbed {
    /// Build the hosts and start the emulator.
    pub fn new(cfg: TestbedConfig) -> Result<Testbed> {
        if !sys::is_root() {
            return Err(EmuError::NotRoot("starting a testbed".into()));
        }
        check_prefix(&cfg.name_prefix)?;
        if cfg.senders == 0 || cfg.senders > 1000 {
            return Err(EmuError::Config(format!(
                "a testbed needs 1 to 1000 senders, not {}",
                cfg.senders
            )));
        }
        let up_cfg = PathConfig {
            link: cfg.uplink.clone(),
            loss: cfg.uplink_loss,
            delay: cfg.delay,
        };
        let down_cfg = PathConfig {
            link: cfg.downlink.clone(),
            loss: cfg.downlink_loss,
            delay: cfg.delay,
        };
        up_cfg.validate()?;
        down_cfg.validate()?;
        let clock = Clock::start();
        let side = cfg.service.is_some();
        let receiver = Host::new("receiver".into(), RECEIVER_ADDR, &cfg.name_prefix, side)?;
        let senders = (1..=cfg.senders)
            .map(|i| Host::new(format!("sender{i}"), sender_addr(i), &cfg.name_prefix, side))
            .collect::<Result<Vec<_>>>()?;
        let start = clock.now_us() / 1000 * 1000;
        let header = |dir: &str, l: &Option<LinkConfig>| {
            l.as_ref().map(|l| LogHeader {
                direction: dir.into(),
                source: l.service.describe(),
                command_line: cfg.command_line.clone(),
                queue: l.queue.describe(),
                init_unix_ms: clock.unix_ms(),
                base_ms: start / 1000,
            })
        };
        let up = Direction::start(
            "up",
            senders.iter().map(|h| h.tun.clone()).collect(),
            Output::One(receiver.tun.clone()),
            Pipeline::new(&up_cfg, start, cfg.seed, header("Uplink", &cfg.uplink))?,
            clock,
            cfg.realtime,
        )?;
        let down = Direction::start(
            "down",
            vec![receiver.tun.clone()],
            Output::Route(senders.iter().map(|h| (h.addr, h.tun.clone())).collect()),
            Pipeline::new(
                &down_cfg,
                start,
                cfg.seed.wrapping_add(0x5eed),
                header("Downlink", &cfg.downlink),
            )?,
            clock,
            cfg.realtime,
        )?;
        let service = match cfg.service {
            None => None,
            Some(sc) => Some(Self::start_service(
                &sc, &cfg, &receiver, &senders, start, clock,
            )?),
        };
        Ok(Testbed {
            receiver,
            senders,
            up,
            down,
            clock,
            service,
        })
    }

    /// The service host and its side path: delay only, each way.
    fn start_service(
        sc: &ServiceHostConfig,
        cfg: &TestbedConfig,
        receiver: &Host,
        senders: &[Host],
        start: u64,
        clock: Clock,
    ) -> Result<Service> {
        let host = Host::new("service".into(), SERVICE_ADDR, &cfg.name_prefix, false)?;
        let path = PathConfig {
            link: None,
            loss: 0.0,
            delay: DelayConfig::fixed(sc.one_way),
        };
        let hosts = || std::iter::once(receiver).chain(senders);
        let side = |h: &Host| {
            h.side
                .clone()
                .ok_or_else(|| EmuError::Config(format!("{} has no side path", h.name)))
        };
        let to = Direction::start(
            "svc-to",
            hosts().map(side).collect::<Result<Vec<_>>>()?,
            Output::One(host.tun.clone()),
            Pipeline::new(&path, start, cfg.seed ^ 0x5e41, None)?,
            clock,
            cfg.realtime,
        )?;
        let from = Direction::start(
            "svc-from",
            vec![host.tun.clone()],
            Output::Route(
                hosts()
                    .map(|h| Ok((h.addr, side(h)?)))
                    .collect::<Result<Vec<_>>>()?,
            ),
            Pipeline::new(&path, start, cfg.seed ^ 0x5e42, None)?,
            clock,
            cfg.realtime,
        )?;
        Ok(Service { host, to, from })
    }

    /// The receiver host.
    pub fn receiver(&self) -> &Host {
        &self.receiver
    }

    /// The sender hosts, in order.
    pub fn senders(&self) -> &[Host] {
        &self.senders
    }

    /// The service host, if the testbed has one ([`TestbedConfig::service`]).
    pub fn service(&self) -> Option<&Host> {
        self.service.as_ref().map(|s| &s.host)
    }

    /// Spawn `cmd` on `host`. It gets `CCP_EMU_RECEIVER` (the receiver's address),
    /// `CCP_EMU_ADDR` (its host's), `CCP_EMU_HOST` (the host's name) and, with a service host,
    /// `CCP_EMU_SERVICE` (its address); it is killed when the testbed goes away, if it has not
    /// exited (wait for it with the handle).
    pub fn spawn(&self, host: &Host, cmd: &mut Command) -> Result<Child> {
        cmd.env("CCP_EMU_RECEIVER", RECEIVER_ADDR.to_string())
            .env("CCP_EMU_ADDR", host.addr.to_string())
            .env("CCP_EMU_HOST", &host.name);
        if self.service.is_some() {
            cmd.env("CCP_EMU_SERVICE", SERVICE_ADDR.to_string());
        }
        host.ns.spawn(cmd)
    }

    /// The emulator's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Counters of the uplink (senders → receiver) and downlink.
    pub fn stats(&self) -> (StageStats, StageStats) {
        let get = |d: &DirStats| d.stages.lock().map(|s| *s).unwrap_or_default();
        (get(&self.up.stats), get(&self.down.stats))
    }

    /// Counters of the service host's side path: (every host → service, service → hosts);
    /// `None` without a service host.
    pub fn service_stats(&self) -> Option<(StageStats, StageStats)> {
        let get = |d: &DirStats| d.stages.lock().map(|s| *s).unwrap_or_default();
        self.service
            .as_ref()
            .map(|s| (get(&s.to.stats), get(&s.from.stats)))
    }

    /// Live counters of both directions.
    pub fn dir_stats(&self) -> (Arc<DirStats>, Arc<DirStats>) {
        (self.up.stats.clone(), self.down.stats.clone())
    }

    /// Stop and remove everything; returns the final counters.
    pub fn shutdown(mut self) -> (StageStats, StageStats) {
        self.up.stop();
        self.down.stop();
        if let Some(s) = &mut self.service {
            s.to.stop();
            s.from.stop();
        }
        self.stats()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.receiver.ns.kill();
        for s in &mut self.senders {
            s.ns.kill();
        }
        if let Some(s) = &mut self.service {
            s.host.ns.kill();
            s.to.stop();
            s.from.stop();
        }
        self.up.stop();
        self.down.stop();
    }
}
