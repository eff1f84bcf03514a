//! Forwarding benchmark (root only): the highest rate the emulator forwards with < 1 % loss not
//! caused by the emulated link, and how late departures are against their schedule (p50, p99,
//! max), for a constant 1 Gbit/s link and a 100 Mbit/s trace, plus kernel TCP (iperf3 cubic)
//! through the 1 Gbit/s link.
//!
//! Run: `cargo bench -p ccp-emu --bench forward` (as root). Each point: a UDP sender in the
//! shell paces 1500-byte IP packets at the offered rate for 2 s to a receiver outside; the
//! queue is infinite, so every loss is the emulator's (its TUN queue, or the receiver).

use ccp_emu::link::LinkConfig;
use ccp_emu::shell::{Shell, ShellConfig};
use ccp_emu::stage::PathConfig;
use ccp_emu::trace::Trace;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn shell(link: Option<LinkConfig>) -> Shell {
    Shell::start(ShellConfig {
        uplink: PathConfig {
            link: link.clone(),
            ..Default::default()
        },
        downlink: PathConfig {
            link,
            ..Default::default()
        },
        name_prefix: "bench".into(),
        realtime: std::env::var_os("BENCH_NO_RT").is_none(),
        ..Default::default()
    })
    .expect("start shell")
}

fn big_rcvbuf(s: &UdpSocket) {
    let v: libc::c_int = 64 << 20;
    // SAFETY: setting an int socket option on our socket.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

struct Point {
    offered_mbps: f64,
    sent: u64,
    received: u64,
    link_drops: u64,
    delivered_mbps: f64,
    p50: u64,
    p99: u64,
    max: u64,
}

fn run_point(sh: &Shell, offered_bps: f64, dur: Duration) -> Point {
    let rx = UdpSocket::bind((sh.outer_addr(), 0)).unwrap();
    big_rcvbuf(&rx);
    let to = rx.local_addr().unwrap();
    let inner = sh.inner_addr();
    let tx = sh
        .run_inside(move || {
            let s = UdpSocket::bind((inner, 0)).unwrap();
            s.connect(to).unwrap();
            Ok(s)
        })
        .unwrap();
    let (up, _) = sh.dir_stats();
    up.lateness.lock().unwrap().reset();
    let drops0 = sh.stats().0.dropped_pkts;
    rx.set_read_timeout(Some(Duration::from_millis(400)))
        .unwrap();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut n = 0u64;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        while rx.recv(&mut buf).is_ok() {
            n += 1;
            last = Instant::now();
            first.get_or_insert(last);
        }
        (n, first.map(|f| (last - f).as_secs_f64()).unwrap_or(0.0))
    });
    let payload = [0x5au8; 1472];
    let per_pkt = 1500.0 * 8.0 / offered_bps;
    let sent = std::thread::scope(|s| {
        s.spawn(|| {
            ccp_emu::sys::precise_timers();
            let t0 = Instant::now();
            let mut sent = 0u64;
            while t0.elapsed() < dur {
                // Pace in bursts of 16, sleeping (not spinning) until each is due.
                let due = t0 + Duration::from_secs_f64(per_pkt * sent as f64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                for _ in 0..16 {
                    let _ = tx.send(&payload);
                    sent += 1;
                }
            }
            sent
        })
        .join()
        .unwrap()
    });
    let (received, secs) = receiver.join().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let late = up.lateness.lock().unwrap().clone();
    Point {
        offered_mbps: offered_bps / 1e6,
        sent,
        received,
        link_drops: sh.stats().0.dropped_pkts - drops0,
        delivered_mbps: if secs > 0.0 {
            received as f64 * 1500.0 * 8.0 / secs / 1e6
        } else {
            0.0
        },
        p50: late.quantile(0.5),
        p99: late.quantile(0.99),
        max: late.max(),
    }
}

fn sweep(name: &str, link: Option<LinkConfig>, rates_mbps: &[f64]) {
    println!("\n{name}");
    println!(
        "{:>10} {:>10} {:>10} {:>8} {:>10} {:>12} {:>9} {:>9} {:>9}",
        "offered",
        "sent",
        "received",
        "loss %",
        "link drop",
        "delivered",
        "late p50",
        "late p99",
        "late max"
    );
    let sh = shell(link);
    let mut best = 0.0;
    for &r in rates_mbps {
        let p = run_point(&sh, r * 1e6, Duration::from_secs(2));
        let loss = 1.0 - (p.received + p.link_drops) as f64 / p.sent as f64;
        println!(
            "{:>7.0} Mb {:>10} {:>10} {:>8.3} {:>10} {:>9.1} Mb {:>6} µs {:>6} µs {:>6} µs",
            p.offered_mbps,
            p.sent,
            p.received,
            loss * 100.0,
            p.link_drops,
            p.delivered_mbps,
            p.p50,
            p.p99,
            p.max
        );
        if loss < 0.01 {
            best = r;
        }
    }
    let (up, _) = sh.dir_stats();
    println!(
        "highest offered rate forwarded with < 1 % emulator loss: {best:.0} Mbit/s (write errors {})",
        up.write_errors.load(Ordering::Relaxed)
    );
}

fn tcp(name: &str, link: Option<LinkConfig>) {
    let Ok(mut srv) = std::process::Command::new("iperf3")
        .args(["-s", "-1", "-p", "5299"])
        .stdout(std::process::Stdio::null())
        .spawn()
    else {
        println!("iperf3 not installed: TCP figure skipped");
        return;
    };
    std::thread::sleep(Duration::from_millis(300));
    let sh = shell(link);
    let out = sh
        .spawn(
            std::process::Command::new("sh")
                .args([
                    "-c",
                    "iperf3 -c $MAHIMAHI_BASE -p 5299 -C cubic -t 4 | grep -E 'sender|receiver'",
                ])
                .stdout(std::process::Stdio::piped()),
        )
        .unwrap()
        .wait_with_output()
        .unwrap();
    let _ = srv.kill();
    let _ = srv.wait();
    println!("\niperf3 -C cubic, {name} (4 s):");
    print!("{}", String::from_utf8_lossy(&out.stdout));
}

fn main() {
    if !ccp_emu::sys::is_root() {
        println!("forward bench skipped: needs root (network namespaces and TUN devices)");
        return;
    }
    let _ = ccp_emu::cleanup::sweep("bench");
    println!(
        "ccp-emu forwarding benchmark (UDP, 1500-byte IP packets, 2 s per point, infinite queue)"
    );
    sweep(
        "constant 1 Gbit/s link (--rate 1gbit):",
        Some(LinkConfig::rate(125_000_000)),
        &[200.0, 400.0, 600.0, 800.0, 900.0, 980.0],
    );
    let trace = Trace::constant(12_500_000, 1000).expect("trace");
    sweep(
        "100 Mbit/s trace (8.31 opportunities per ms, looping every 1 s):",
        Some(LinkConfig::trace(trace)),
        &[50.0, 90.0, 98.0],
    );
    sweep(
        "no link (delay 0): the forwarding engine alone",
        None,
        &[1000.0, 1500.0, 2000.0],
    );
    tcp(
        "through the 1 Gbit/s link",
        Some(LinkConfig::rate(125_000_000)),
    );
    tcp("no link (delay 0)", None);
}
