//! End-to-end tests through real namespaces and TUN devices (root only; they skip with a message
//! otherwise). Each test uses its own name prefix, sweeps leftovers of that prefix first, and
//! checks at the end that no interface, namespace init or process of its own is left. Heavy
//! tests hold a lock so that two of them never compete for the machine's two cores.

use ccp_emu::cleanup;
use ccp_emu::link::LinkConfig;
use ccp_emu::queue::QueueConfig;
use ccp_emu::shell::{Shell, ShellConfig};
use ccp_emu::stage::{DelayConfig, PathConfig};
use ccp_emu::sys;
use ccp_emu::testbed::{Testbed, TestbedConfig};
use ccp_emu::trace::Trace;
use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn root(test: &str) -> bool {
    if sys::is_root() {
        true
    } else {
        eprintln!("skipping {test}: needs root (creates network namespaces and TUN devices)");
        false
    }
}

/// The common start of a root test: skips (with the reason) without root or one of the `tools`,
/// else holds the serial lock and sweeps `prefix` now and when the returned guards drop (the
/// sweep first, then the lock).
fn begin(
    test: &str,
    prefix: &'static str,
    tools: &[&str],
) -> Option<(std::sync::MutexGuard<'static, ()>, Clean)> {
    if !root(test) {
        return None;
    }
    if let Some(t) = tools.iter().find(|t| !have(t)) {
        eprintln!("skipping {test}: {t} is not installed (scripts/install-deps.sh installs it)");
        return None;
    }
    let serial = serial();
    Some((serial, Clean::new(prefix)))
}

/// Every network namespace some process is in or holds a descriptor of.
fn netns_inodes() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let p = e.path();
        if let Ok(l) = std::fs::read_link(p.join("ns/net")) {
            out.insert(l.to_string_lossy().into_owned());
        }
        if let Ok(fds) = std::fs::read_dir(p.join("fd")) {
            for f in fds.flatten() {
                if let Ok(l) = std::fs::read_link(f.path())
                    && l.to_string_lossy().starts_with("net:[")
                {
                    out.insert(l.to_string_lossy().into_owned());
                }
            }
        }
    }
    out
}

/// Sweeps leftovers of a prefix on creation and on drop; `assert_clean` checks nothing is left.
struct Clean {
    prefix: &'static str,
}

impl Clean {
    fn new(prefix: &'static str) -> Clean {
        cleanup::sweep(prefix).unwrap();
        Clean { prefix }
    }

    fn assert_clean(&self) {
        // Namespace inits notice the closed pipe within 200 ms.
        let t0 = Instant::now();
        loop {
            let inits = cleanup::find_inits(self.prefix);
            let ifs = cleanup::find_interfaces(self.prefix);
            if inits.is_empty() && ifs.is_empty() {
                return;
            }
            if t0.elapsed() > Duration::from_secs(3) {
                panic!(
                    "left behind with prefix {}: inits {inits:?}, interfaces {ifs:?}",
                    self.prefix
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Clean {
    fn drop(&mut self) {
        let _ = cleanup::sweep(self.prefix);
    }
}

fn shared_data(rel: &str) -> Option<PathBuf> {
    // Tests run in the crate directory; the checkout is <dir>/main with shared at <dir>/shared.
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    p.exists().then_some(p)
}

fn link_shell(prefix: &str, up: LinkConfig, down: LinkConfig) -> Shell {
    Shell::start(ShellConfig {
        uplink: PathConfig {
            link: Some(up),
            ..Default::default()
        },
        downlink: PathConfig {
            link: Some(down),
            ..Default::default()
        },
        name_prefix: prefix.into(),
        ..Default::default()
    })
    .unwrap()
}

/// A UDP socket inside the shell and a receiver outside, connected.
fn udp_pair(shell: &Shell) -> (UdpSocket, UdpSocket) {
    let rx = UdpSocket::bind((shell.outer_addr(), 0)).unwrap();
    let to = rx.local_addr().unwrap();
    let inner = shell.inner_addr();
    let tx = shell
        .run_inside(move || {
            let s = UdpSocket::bind((inner, 0)).map_err(|e| ccp_emu::EmuError::sys("bind", e))?;
            s.connect(to)
                .map_err(|e| ccp_emu::EmuError::sys("connect", e))?;
            Ok(s)
        })
        .unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    (tx, rx)
}

/// Receive until `quiet` passes without a packet; (µs of the shell's clock, length) per
/// datagram. Times are the kernel's receive timestamps (SO_TIMESTAMPNS), i.e. when the emulator
/// wrote the packet, unaffected by when this thread gets to run.
fn receive_all(rx: &UdpSocket, shell: &Shell, quiet: Duration) -> Vec<(u64, usize)> {
    receive_until(rx, shell, quiet, || true)
}

/// As `receive_all` while `sender` runs: a quiet spell ends the receiving only once the sender
/// has finished, so a loaded machine that stalls the sender or the emulator for longer than
/// `quiet` does not cut the measurement short.
fn receive_while<T>(
    rx: &UdpSocket,
    shell: &Shell,
    quiet: Duration,
    sender: &std::thread::JoinHandle<T>,
) -> Vec<(u64, usize)> {
    receive_until(rx, shell, quiet, || sender.is_finished())
}

fn receive_until(
    rx: &UdpSocket,
    shell: &Shell,
    quiet: Duration,
    may_stop: impl Fn() -> bool,
) -> Vec<(u64, usize)> {
    rx.set_read_timeout(Some(quiet)).unwrap();
    let fd = rx.as_raw_fd();
    let on: libc::c_int = 1;
    // SAFETY: setting an int socket option on our socket.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let origin = shell.clock().unix_us();
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    let mut ctl = [0u64; 16];
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr points at live buffers for the duration of the call.
        let (n, ts) = unsafe {
            let mut m: libc::msghdr = std::mem::zeroed();
            m.msg_iov = &mut iov;
            m.msg_iovlen = 1;
            m.msg_control = ctl.as_mut_ptr().cast();
            m.msg_controllen = std::mem::size_of_val(&ctl) as _;
            let n = libc::recvmsg(fd, &mut m, 0);
            if n < 0 {
                if may_stop() {
                    break;
                }
                continue;
            }
            let mut ts = None;
            let mut c = libc::CMSG_FIRSTHDR(&m);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_TIMESTAMPNS {
                    let t: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    ts = Some(t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000);
                }
                c = libc::CMSG_NXTHDR(&m, c);
            }
            (n as usize, ts)
        };
        let t = ts.map_or_else(|| shell.clock().now_us(), |t| t.saturating_sub(origin));
        out.push((t, n));
    }
    out
}

/// Send datagrams of `payload` bytes at `rate_bps` (IP-level bits/s) for `dur`.
fn blast(tx: &UdpSocket, payload: usize, rate_bps: f64, dur: Duration) -> u64 {
    let buf = vec![0x5a; payload];
    let per_pkt = Duration::from_secs_f64((payload + 28) as f64 * 8.0 / rate_bps);
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < dur {
        let due = t0 + per_pkt * sent as u32;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if tx.send(&buf).is_ok() {
            sent += 1;
        }
    }
    sent
}

#[test]
fn hand_computed_trace_end_to_end() {
    let Some((_s, clean)) = begin("hand_computed_trace_end_to_end", "tetr", &[]) else {
        return;
    };
    // Opportunities at 20, 40, 40, 60, 100 ms, repeating every 100 ms.
    let trace = Trace::from_ms("hand.trace", vec![20, 40, 40, 60, 100]).unwrap();
    let shell = link_shell(
        "tetr",
        LinkConfig::trace(trace.clone()),
        LinkConfig::trace(trace),
    );
    let (tx, rx) = udp_pair(&shell);
    let origin = shell.link_origin_us();
    // Wait until we are 5-12 ms into a period, then send four 1500-byte IP packets and one
    // 100-byte one: they leave at +20, +40, +40, +60 and +100 of that period.
    let period_start = loop {
        let t = shell.clock().now_us() - origin;
        let into = t % 100_000;
        if (5_000..12_000).contains(&into) && t > 100_000 {
            break origin + t - into;
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    for _ in 0..4 {
        tx.send(&[1u8; 1472]).unwrap();
    }
    tx.send(&[2u8; 72]).unwrap();
    let got = receive_all(&rx, &shell, Duration::from_millis(300));
    let expect = [20_000u64, 40_000, 40_000, 60_000, 100_000];
    assert_eq!(got.len(), 5, "{got:?}");
    let errs: Vec<i64> = got
        .iter()
        .zip(expect)
        .map(|((t, _), e)| *t as i64 - (period_start + e) as i64)
        .collect();
    eprintln!("hand-computed trace: departures late by {errs:?} µs");
    for (i, ((t, len), e)) in got.iter().zip(expect).enumerate() {
        let want = period_start + e;
        let err = *t as i64 - want as i64;
        assert!(
            (0..=2_000).contains(&err),
            "packet {i} ({len} B) arrived {err} µs from its opportunity at {} ms",
            e / 1000
        );
    }
    drop(shell);
    clean.assert_clean();
}

#[test]
fn constant_rate_is_within_one_percent() {
    let Some((_s, clean)) = begin("constant_rate_is_within_one_percent", "terate", &[]) else {
        return;
    };
    let rate = 50_000_000.0 / 8.0;
    let up = LinkConfig::rate(rate as u64).with_queue(QueueConfig::droptail_packets(1000));
    let shell = link_shell("terate", up, LinkConfig::rate(rate as u64));
    let (tx, rx) = udp_pair(&shell);
    let sender = std::thread::spawn(move || blast(&tx, 1472, 55e6, Duration::from_secs(3)));
    let got = receive_while(&rx, &shell, Duration::from_millis(500), &sender);
    sender.join().unwrap();
    let (up, _) = shell.dir_stats();
    assert!(
        got.len() > 1000,
        "only {} datagrams; emulator read {}, link {:?}",
        got.len(),
        up.read.load(std::sync::atomic::Ordering::Relaxed),
        shell.stats().0
    );
    // Skip the first 0.5 s; measure IP bytes over the rest of the busy period.
    let t_start = got[0].0 + 500_000;
    let window: Vec<_> = got.iter().filter(|(t, _)| *t >= t_start).collect();
    let (t0, t1) = (window[0].0, window[window.len() - 1].0);
    let bytes: usize = window[1..].iter().map(|(_, n)| n + 28).sum();
    let measured = bytes as f64 / ((t1 - t0) as f64 / 1e6);
    // The link carries 1504 bytes (with the TUN header) per 1500-byte IP packet.
    let expected = rate * 1500.0 / 1504.0;
    let err = (measured - expected).abs() / expected;
    eprintln!(
        "50 Mbit/s link: {:.3} Mbit/s of IP measured, {:.3} expected ({:.3} %)",
        measured * 8e-6,
        expected * 8e-6,
        err * 100.0
    );
    assert!(err < 0.01, "rate off by {:.2} %", err * 100.0);
    drop(shell);
    clean.assert_clean();
}

fn ping_rtts(shell_args: &[&str], prefix: &str) -> Option<Vec<f64>> {
    let out = Command::new(env!("CARGO_BIN_EXE_ccp-emu"))
        .args(shell_args)
        .args(["--name-prefix", prefix, "--"])
        .args(["sh", "-c", "ping -n -c 20 -i 0.05 $MAHIMAHI_BASE"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rtts: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect();
    Some(rtts)
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn delay_adds_twice_the_delay_to_ping() {
    let Some((_s, clean)) = begin("delay_adds_twice_the_delay_to_ping", "tedel", &["ping"]) else {
        return;
    };
    let base = ping_rtts(&["delay", "0"], "tedel").unwrap();
    let delayed = ping_rtts(&["delay", "20"], "tedel").unwrap();
    assert_eq!((base.len(), delayed.len()), (20, 20));
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    eprintln!(
        "ping RTT: delay 0 → {:.3} ms, delay 20 → {:.3} ms (min {:.3}, max {:.3})",
        avg(&base),
        avg(&delayed),
        delayed.iter().cloned().fold(f64::MAX, f64::min),
        delayed.iter().cloned().fold(0.0, f64::max)
    );
    let mut sorted = delayed.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    // The emulator adds exactly 2 × 20 ms; what is left is scheduling (ping's own included),
    // which a loaded 2-core machine stretches now and then: judge the median and the mean of
    // the 18 smallest samples. (One ping delayed by a 20-ms time slice moves the mean of all
    // 20 by 1 ms: a run read 41.51 ms with one sample at 59.9 ms and the other 19 at 40.2-41.)
    let trimmed = avg(&sorted[..18]);
    assert!(
        (trimmed - avg(&base) - 40.0).abs() < 1.0,
        "mean of the 18 smallest {trimmed} ms over a base of {} ms",
        avg(&base)
    );
    assert!((40.0..41.0).contains(&median), "median RTT {median} ms");
    assert!(sorted[0] >= 40.0, "RTT below 40 ms: {sorted:?}");
    clean.assert_clean();
}

#[test]
fn jitter_keeps_rtt_in_range_and_order() {
    let Some((_s, clean)) = begin("jitter_keeps_rtt_in_range_and_order", "tejit", &["ping"]) else {
        return;
    };
    let rtts = ping_rtts(&["delay", "10", "--jitter", "10ms"], "tejit").unwrap();
    assert_eq!(rtts.len(), 20);
    // 2 × 10 ms plus 0..2 × 10 ms of jitter; ping's own scheduling on a loaded machine may
    // add a little on top.
    for r in &rtts {
        assert!(
            (20.0..45.0).contains(r),
            "RTT {r} ms outside [20, 40] + scheduling"
        );
    }
    let spread =
        rtts.iter().cloned().fold(0.0, f64::max) - rtts.iter().cloned().fold(f64::MAX, f64::min);
    assert!(spread > 1.0, "jitter produced no variation: {rtts:?}");
    clean.assert_clean();
}

#[test]
fn loss_rate_is_within_statistical_bounds() {
    let Some((_s, clean)) = begin("loss_rate_is_within_statistical_bounds", "teloss", &[]) else {
        return;
    };
    let shell = Shell::start(ShellConfig {
        uplink: PathConfig {
            loss: 0.2,
            ..Default::default()
        },
        name_prefix: "teloss".into(),
        seed: 12345,
        ..Default::default()
    })
    .unwrap();
    let (tx, rx) = udp_pair(&shell);
    let n = 5000u64;
    let sender = std::thread::spawn(move || {
        for _ in 0..n {
            tx.send(&[0u8; 100]).unwrap();
            std::thread::sleep(Duration::from_micros(100));
        }
    });
    let got = receive_while(&rx, &shell, Duration::from_millis(500), &sender);
    sender.join().unwrap();
    let lost = (n as f64 - got.len() as f64) / n as f64;
    // Binomial: sd = sqrt(0.2·0.8/5000) ≈ 0.0057; allow 5 sd.
    eprintln!("loss 0.2: measured {lost:.4}");
    assert!((lost - 0.2).abs() < 0.0285, "measured loss {lost}");
    let (up, _) = shell.stats();
    assert_eq!(up.dropped_pkts + got.len() as u64, n);
    drop(shell);
    clean.assert_clean();
}

#[test]
fn droptail_queue_drops_what_it_should() {
    let Some((_s, clean)) = begin("droptail_queue_drops_what_it_should", "tedt", &[]) else {
        return;
    };
    // 1 Mbit/s: a 1500-byte packet takes 12 ms, so a burst of 100 finds one packet on the
    // wire and 20 in the queue; the other 79 are dropped.
    let up = LinkConfig::rate(125_000).with_queue(QueueConfig::droptail_packets(20));
    let shell = link_shell("tedt", up, LinkConfig::rate(125_000));
    let (tx, rx) = udp_pair(&shell);
    for _ in 0..100 {
        tx.send(&[0u8; 1472]).unwrap();
    }
    let got = receive_all(&rx, &shell, Duration::from_millis(500));
    assert_eq!(got.len(), 21);
    let (up, _) = shell.stats();
    assert_eq!(up.dropped_pkts, 79);
    // Back to back at 12.032 ms each (receive times can be late, never early).
    for (k, (t, _)) in got.iter().enumerate() {
        let since = (t - got[0].0) as i64;
        assert!(
            since >= k as i64 * 12_032 - 1_000,
            "packet {k} at {since} µs"
        );
    }
    let span = got[20].0 - got[0].0;
    assert!(
        (20 * 12_032 - 1_000..=20 * 12_032 + 3_000).contains(&span),
        "span {span} µs"
    );
    drop(shell);
    clean.assert_clean();
}

#[test]
fn real_mahimahi_traces_load_and_replay() {
    let Some(dir) = shared_data("mahimahi") else {
        eprintln!(
            "skipping real_mahimahi_traces_load_and_replay: ../shared/data/mahimahi is absent"
        );
        return;
    };
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if matches!(p.extension().and_then(|x| x.to_str()), Some("up" | "down")) {
            let t = Trace::load(&p).unwrap();
            assert!(t.mean_rate() > 1000.0, "{}", p.display());
            n += 1;
        }
    }
    assert!(n >= 2, "no traces in {}", dir.display());
    let Some((_s, clean)) = begin(
        "real_mahimahi_traces_load_and_replay (replay part)",
        "tereal",
        &[],
    ) else {
        return;
    };
    let up = Trace::load(dir.join("Verizon-LTE-short.up")).unwrap();
    let down = Trace::load(dir.join("Verizon-LTE-short.down")).unwrap();
    let shell = link_shell(
        "tereal",
        LinkConfig::trace(up.clone()),
        LinkConfig::trace(down),
    );
    let (tx, rx) = udp_pair(&shell);
    let start = shell.clock().now_us() - shell.link_origin_us();
    let sender = std::thread::spawn(move || blast(&tx, 1472, 20e6, Duration::from_secs(2)));
    let got = receive_while(&rx, &shell, Duration::from_millis(800), &sender);
    sender.join().unwrap();
    // Every datagram used one whole opportunity: count the opportunities in the window.
    let end = got.last().map(|g| g.0).unwrap_or(0) - shell.link_origin_us();
    let opportunities = up
        .ms
        .iter()
        .filter(|&&m| m * 1000 > start && m * 1000 <= end)
        .count();
    eprintln!(
        "Verizon-LTE-short.up: {} datagrams through {} opportunities",
        got.len(),
        opportunities
    );
    assert!(got.len() > 100);
    assert!(got.len() <= opportunities + 1);
    drop(shell);
    clean.assert_clean();
}

#[test]
fn shells_nest_and_route_both_ways() {
    let Some((_s, clean)) = begin("shells_nest_and_route_both_ways", "tenest", &[]) else {
        return;
    };
    let emu = env!("CARGO_BIN_EXE_ccp-emu");
    // A server outside (UDP echo on the outermost shell's base address) reached from two levels
    // in; and the inner address printed for the outside to check the route.
    let out = Command::new(emu)
        .args(["delay", "5", "--name-prefix", "tenest", "--"])
        .args([emu, "link", "--rate", "10mbit", "--name-prefix", "tenest", "--"])
        .args([
            "sh",
            "-c",
            "echo base=$MAHIMAHI_BASE ccp=$CCP_EMU_BASE addr=$CCP_EMU_ADDR block=$CCP_EMU_BLOCK; ip route",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text.lines().next().unwrap();
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .unwrap()
            .to_string()
    };
    let (base, addr, block) = (field("base="), field("addr="), field("block="));
    assert_eq!(field("ccp="), base);
    let outer_block: ccp_emu::addr::Block = block.parse().unwrap();
    assert_eq!(outer_block.prefix, 18, "nested block {block}");
    assert!(outer_block.contains(addr.parse().unwrap()));
    clean.assert_clean();

    // Both directions at once through the library: a UDP echo outside, a client two levels in.
    let clean2 = Clean::new("tenes2");
    let echo = UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = echo.local_addr().unwrap().port();
    echo.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        let (n, from) = echo.recv_from(&mut buf).unwrap();
        echo.send_to(&buf[..n], from).unwrap();
        from
    });
    let shell = Shell::start(ShellConfig {
        uplink: PathConfig {
            delay: DelayConfig::fixed(Duration::from_millis(5)),
            ..Default::default()
        },
        downlink: PathConfig {
            delay: DelayConfig::fixed(Duration::from_millis(5)),
            ..Default::default()
        },
        command: Some(vec![
            emu.into(),
            "link".into(),
            "--rate".into(),
            "10mbit".into(),
            "--name-prefix".into(),
            "tenes2".into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            format!(
                "python3 -c \"import socket,os,time;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(5);t=time.time();s.sendto(b'hi',(os.environ['MAHIMAHI_BASE'],{port}));print(s.recvfrom(100)[0], time.time()-t)\""
            )
            .into(),
        ]),
        name_prefix: "tenes2".into(),
        ..Default::default()
    })
    .unwrap();
    let mut shell = shell;
    let st = shell.wait(None).unwrap();
    let from: SocketAddr = server.join().unwrap();
    assert!(st.success(), "inner client failed");
    // The echo came from the innermost address, inside the outer shell's block.
    let std::net::IpAddr::V4(a) = from.ip() else {
        panic!("{from}")
    };
    assert!(shell.block().contains(a), "{a} not in {}", shell.block());
    assert_ne!(a, shell.inner_addr());
    drop(shell);
    clean2.assert_clean();
}

#[test]
fn killed_emulator_leaves_nothing_behind() {
    let Some((_s, clean)) = begin("killed_emulator_leaves_nothing_behind", "tekill", &[]) else {
        return;
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccp-emu"))
        .args(["delay", "10", "--name-prefix", "tekill", "--"])
        // Durations no other process on the host is likely to sleep for: the check below
        // finds the sleepers by their command lines (a `sleep 300` of a shell elsewhere on the
        // machine once failed this test).
        .args(["sh", "-c", "sleep 300.017 & sleep 301.017"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the namespace and the outer device.
    let t0 = Instant::now();
    while cleanup::find_inits("tekill").is_empty() || cleanup::find_interfaces("tekill").is_empty()
    {
        assert!(t0.elapsed() < Duration::from_secs(5), "shell did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // The namespace of this emulator: its init's.
    let ours: BTreeSet<String> = cleanup::find_inits("tekill")
        .iter()
        .filter_map(|p| std::fs::read_link(format!("/proc/{p}/ns/net")).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .collect();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert!(netns_inodes().is_superset(&ours));
    // Both sleepers run (so the check below can see them go).
    let sleepers = || -> Vec<String> {
        let out = Command::new("pgrep")
            .args(["-f", r"^sleep 30[01]\.017$"])
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    let t0 = Instant::now();
    while sleepers().len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the shell's two sleepers did not show: {:?}",
            sleepers()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let t0 = Instant::now();
    loop {
        let sleepers = sleepers();
        let alive: Vec<_> = netns_inodes().intersection(&ours).cloned().collect();
        if alive.is_empty()
            && sleepers.is_empty()
            && cleanup::find_inits("tekill").is_empty()
            && cleanup::find_interfaces("tekill").is_empty()
        {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "left behind after SIGKILL: namespace {alive:?}, sleep processes {sleepers:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    clean.assert_clean();
}

#[test]
fn ctrl_c_cleans_up_and_once_ends_the_shell() {
    let Some((_s, clean)) = begin("ctrl_c_cleans_up_and_once_ends_the_shell", "tesig", &[]) else {
        return;
    };
    let emu = env!("CARGO_BIN_EXE_ccp-emu");
    let child = Command::new(emu)
        .args(["delay", "1", "--name-prefix", "tesig", "--", "sleep", "300"])
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while cleanup::find_interfaces("tesig").is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(t0.elapsed() < Duration::from_secs(5));
    clean.assert_clean();

    // --once: a 300 ms trace ends the shell (mahimahi's behaviour) long before `sleep 300`.
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("short.trace");
    std::fs::write(&t, "100\n200\n300\n").unwrap();
    let t0 = Instant::now();
    let st = Command::new(emu)
        .arg("link")
        .args([&t, &t])
        .args(["--once", "--name-prefix", "tesig", "--", "sleep", "300"])
        .status()
        .unwrap();
    assert!(!st.success());
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    clean.assert_clean();
}

fn find_workspace_bin(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile = exe.parent()?.parent()?;
    let candidates = [
        profile.join(name),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/release")
            .join(name),
    ];
    candidates.into_iter().find(|p| p.exists())
}

#[test]
fn kernel_cubic_and_udp_reno_share_a_bottleneck() {
    let Some((_s, clean)) = begin(
        "kernel_cubic_and_udp_reno_share_a_bottleneck",
        "tefair",
        &["iperf3"],
    ) else {
        return;
    };
    let Some(udp) = find_workspace_bin("ccp-udp") else {
        eprintln!(
            "skipping kernel_cubic_and_udp_reno_share_a_bottleneck: ccp-udp is not built (cargo build --workspace --release --bins)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // 50 Mbit/s, 20 ms each way (40 ms RTT), a droptail queue of about one BDP.
    let link = LinkConfig::rate(50_000_000 / 8).with_queue(QueueConfig::droptail_packets(170));
    let tb = Testbed::new(TestbedConfig {
        senders: 2,
        uplink: Some(link),
        downlink: None,
        delay: DelayConfig::fixed(Duration::from_millis(20)),
        name_prefix: "tefair".into(),
        ..Default::default()
    })
    .unwrap();
    let rjson = dir.path().join("recv.json");
    let mut iperf_srv = tb
        .spawn(
            tb.receiver(),
            Command::new("iperf3")
                .args(["-s", "-1", "-p", "5201"])
                .stdout(Stdio::null()),
        )
        .unwrap();
    let mut udp_srv = tb
        .spawn(
            tb.receiver(),
            Command::new(&udp)
                .args([
                    "recv",
                    "--listen",
                    "0.0.0.0:4433",
                    "--flows",
                    "1",
                    "--log-level",
                    "warn",
                ])
                .arg("--json")
                .arg(&rjson)
                .stdout(Stdio::null()),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let receiver = tb.receiver().addr.to_string();
    let cubic = tb
        .spawn(
            &tb.senders()[0],
            Command::new("iperf3")
                .args([
                    "-c", &receiver, "-p", "5201", "-C", "cubic", "-t", "8", "-J",
                ])
                .stdout(Stdio::piped()),
        )
        .unwrap();
    let reno = tb
        .spawn(
            &tb.senders()[1],
            Command::new(&udp)
                .args([
                    "send",
                    "--to",
                    &format!("{receiver}:4433"),
                    "--time",
                    "8s",
                    "--no-ccp",
                ])
                .args(["--log-level", "warn"])
                .stdout(Stdio::piped()),
        )
        .unwrap();
    let cubic_out = cubic.wait_with_output().unwrap();
    let reno_out = reno.wait_with_output().unwrap();
    let _ = udp_srv.wait();
    let _ = iperf_srv.kill();
    let _ = iperf_srv.wait();
    let (up, _) = tb.shutdown();
    let j = String::from_utf8_lossy(&cubic_out.stdout);
    let cubic_bps = j
        .split("\"sum_received\"")
        .nth(1)
        .and_then(|s| s.split("\"bits_per_second\":").nth(1))
        .and_then(|s| s.split([',', '\n', '}']).next())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no iperf3 result: {j}"));
    let r = String::from_utf8_lossy(&reno_out.stdout);
    let reno_mbps: f64 = r
        .split(" = ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no ccp-udp result: {r}"));
    eprintln!(
        "50 Mbit/s, 40 ms: kernel cubic {:.1} Mbit/s, ccp-udp reno {reno_mbps:.1} Mbit/s; link dropped {} of {}",
        cubic_bps / 1e6,
        up.dropped_pkts,
        up.in_pkts
    );
    assert!(cubic_bps / 1e6 >= 5.0, "cubic starved");
    assert!(reno_mbps >= 5.0, "ccp-udp reno starved");
    assert!(cubic_bps / 1e6 + reno_mbps <= 50.0);
    clean.assert_clean();
}

#[test]
fn cli_errors_are_clear() {
    let emu = env!("CARGO_BIN_EXE_ccp-emu");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.trace");
    std::fs::write(&bad, "1\n2\nthree\n").unwrap();
    let missing = dir.path().join("missing.trace");
    let run = |args: &[&std::ffi::OsStr]| {
        let o = Command::new(emu).args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let b = bad.as_os_str();
    let e = run(&["link".as_ref(), b, b, "--".as_ref(), "true".as_ref()]);
    assert!(e.contains(&format!("{}:3:", bad.display())), "{e}");
    let e = run(&["check-trace".as_ref(), missing.as_os_str()]);
    assert!(e.contains("missing.trace"), "{e}");
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "link",
                "--rate",
                "10mbit",
                "--uplink-queue=droptail",
                "--uplink-queue-args=packets=10, tagret=5",
            ],
            "unknown argument \"tagret\"",
        ),
        (
            &["link", "--uplink-rate", "10mbit"],
            "downlink needs a trace file, --rate or --schedule",
        ),
        (&["link", "--rate", "10ms"], "is not a rate with a unit"),
        // Bare numbers: 100 would be bytes/s, 30 and 5 microseconds, not what a person means.
        (&["link", "--rate", "100"], "no unit; write e.g. 100mbit"),
        (
            &["link", "--schedule", "0:10mbit,5:20mbit"],
            "entry 2 time: \"5\" has no unit",
        ),
        (&["delay", "10", "--jitter", "5"], "no unit; write e.g. 5s"),
        (
            &[
                "testbed",
                "--rate",
                "10mbit",
                "--duration",
                "30",
                "--sender",
                "true",
            ],
            "no unit; write e.g. 30s",
        ),
        (&["loss", "uplink", "1.5"], "between 0 and 1"),
        (
            &["link", "--schedule", "5s:10mbit"],
            "first entry must start at 0s",
        ),
        (
            &[
                "testbed",
                "--senders",
                "3",
                "--sender",
                "true",
                "--sender",
                "true",
            ],
            "give --sender once",
        ),
        (
            &[
                "testbed",
                "--rate",
                "10mbit",
                "--downlink-rate",
                "0",
                "--sender",
                "true",
            ],
            "--downlink-rate must be > 0",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        let e = run(&args);
        assert!(e.contains(expected), "{args:?}: {e}");
    }
}

#[test]
fn ecn_marks_reach_kernel_tcp() {
    let Some((_s, clean)) = begin("ecn_marks_reach_kernel_tcp", "teecn", &["iperf3"]) else {
        return;
    };
    let mut link = LinkConfig::rate(20_000_000 / 8);
    link.ecn = Some(ccp_emu::EcnThreshold::Packets(20));
    let tb = Testbed::new(TestbedConfig {
        senders: 1,
        uplink: Some(link),
        delay: DelayConfig::fixed(Duration::from_millis(10)),
        name_prefix: "teecn".into(),
        ..Default::default()
    })
    .unwrap();
    let sh = |script: &str| {
        let mut c = Command::new("sh");
        c.args(["-c", script]).stdout(Stdio::null());
        c
    };
    let mut srv = tb
        .spawn(
            tb.receiver(),
            &mut sh("sysctl -qw net.ipv4.tcp_ecn=1; iperf3 -s -1"),
        )
        .unwrap();
    let st = tb
        .spawn(
            &tb.senders()[0],
            &mut sh("sysctl -qw net.ipv4.tcp_ecn=1; sleep 0.3; iperf3 -c $CCP_EMU_RECEIVER -t 2"),
        )
        .unwrap()
        .wait()
        .unwrap();
    let _ = srv.wait();
    let (up, _) = tb.shutdown();
    eprintln!("ECN at 20 packets: {up:?}");
    assert!(st.success());
    assert!(up.ce_marked > 10, "no CE marks: {up:?}");
    assert_eq!(up.dropped_pkts, 0);
    clean.assert_clean();
}

#[test]
fn testbed_cli_runs_a_command_per_host() {
    let Some((_s, clean)) = begin("testbed_cli_runs_a_command_per_host", "tetbc", &["ping"]) else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_ccp-emu"))
        .args(["testbed", "--senders", "2", "--rate", "10mbit", "--delay", "5"])
        .args(["--name-prefix", "tetbc", "--receiver", "sleep 30"])
        .args([
            "--sender",
            "ping -n -c 2 -i 0.2 $CCP_EMU_RECEIVER | tail -1; echo host=$CCP_EMU_HOST index=$CCP_EMU_INDEX",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("host=sender1 index=1") && text.contains("host=sender2 index=2"));
    assert_eq!(text.matches("rtt min/avg/max").count(), 2, "{text}");
    clean.assert_clean();
}
