//! The testbed's service host (root only; skips with the reason otherwise): a sender and the
//! receiver both exchange UDP with it over the side path, whose round trip is twice its
//! configured one-way delay (and not the bottleneck's), and none of that traffic enters the
//! uplink or downlink pipelines. About one second.

use ccp_emu::testbed::{RECEIVER_ADDR, SERVICE_ADDR, ServiceHostConfig, Testbed, TestbedConfig};
use ccp_emu::{cleanup, sys};
use std::net::{SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

const PREFIX: &str = "svch";
/// The side path's one-way delay.
const SIDE_MS: u64 = 5;
/// The bottleneck path's one-way delay (different, so a wrong path shows in the RTT).
const PATH_MS: u64 = 20;
const PINGS: usize = 20;
/// Datagrams sent across the bottleneck, which the uplink must count exactly.
const DATA: u64 = 30;

fn skip_reason() -> Option<&'static str> {
    if !sys::is_root() {
        return Some("needs root (creates network namespaces and TUN devices)");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("needs /dev/net/tun");
    }
    None
}

/// Round trips, ms, of `PINGS` datagrams from a socket made inside `host` to the echo at
/// `to`, one at a time.
fn ping(host: &ccp_emu::Host, to: SocketAddrV4) -> Vec<f64> {
    let sock = host
        .run_inside(|| UdpSocket::bind("0.0.0.0:0").map_err(|e| ccp_emu::EmuError::sys("bind", e)))
        .unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut rtts = vec![];
    let mut buf = [0u8; 64];
    for i in 0..PINGS {
        let t = Instant::now();
        sock.send_to(&(i as u32).to_be_bytes(), to).unwrap();
        let (n, from) = sock
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("{}: no echo from the service host: {e}", host.name));
        assert_eq!((n, from), (4, to.into()), "{}: a foreign reply", host.name);
        assert_eq!(buf[..4], (i as u32).to_be_bytes());
        rtts.push(t.elapsed().as_secs_f64() * 1e3);
    }
    rtts
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn senders_and_receiver_reach_the_service_host_off_the_bottleneck() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping senders_and_receiver_reach_the_service_host_off_the_bottleneck: {why}");
        return;
    }
    cleanup::sweep(PREFIX).unwrap();
    let tb = Testbed::new(TestbedConfig {
        name_prefix: PREFIX.into(),
        service: Some(ServiceHostConfig {
            one_way: Duration::from_millis(SIDE_MS),
        }),
        ..TestbedConfig::dumbbell(2, 10_000_000, 100, Duration::from_millis(PATH_MS))
    })
    .unwrap();
    let service = tb.service().expect("a service host");
    assert_eq!(service.addr, SERVICE_ADDR);

    // An echo on the service host.
    let echo = service
        .run_inside(|| {
            UdpSocket::bind(SocketAddrV4::new(SERVICE_ADDR, 7000))
                .map_err(|e| ccp_emu::EmuError::sys("bind", e))
        })
        .unwrap();
    echo.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let echoed = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut n = 0u64;
        while let Ok((len, from)) = echo.recv_from(&mut buf) {
            echo.send_to(&buf[..len], from).unwrap();
            n += 1;
        }
        n
    });
    let to = SocketAddrV4::new(SERVICE_ADDR, 7000);
    let mut from_sender = ping(&tb.senders()[0], to);
    let mut from_receiver = ping(tb.receiver(), to);

    // Experiment traffic across the bottleneck still flows, and is all the uplink sees.
    let rx = tb
        .receiver()
        .run_inside(|| {
            UdpSocket::bind(SocketAddrV4::new(RECEIVER_ADDR, 7001))
                .map_err(|e| ccp_emu::EmuError::sys("bind", e))
        })
        .unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let tx = tb.senders()[1]
        .run_inside(|| UdpSocket::bind("0.0.0.0:0").map_err(|e| ccp_emu::EmuError::sys("bind", e)))
        .unwrap();
    for i in 0..DATA {
        tx.send_to(&i.to_be_bytes(), SocketAddrV4::new(RECEIVER_ADDR, 7001))
            .unwrap();
    }
    let mut buf = [0u8; 64];
    for _ in 0..DATA {
        rx.recv_from(&mut buf).expect("bottleneck datagram");
    }
    let echoes = echoed.join().unwrap();
    let side = tb.service_stats().expect("side path counters");
    let (up, down) = tb.shutdown();
    assert!(cleanup::find_inits(PREFIX).is_empty(), "namespaces left");

    let (ms, mr) = (median(&mut from_sender), median(&mut from_receiver));
    eprintln!(
        "service host RTT (side path {SIDE_MS} ms each way): sender median {ms:.2} ms, receiver median {mr:.2} ms; uplink {up:?}; downlink {down:?}; side {side:?}"
    );
    let expect = 2.0 * SIDE_MS as f64;
    for (who, m, all) in [
        ("sender", ms, &from_sender),
        ("receiver", mr, &from_receiver),
    ] {
        // Never shorter than the emulated delay; the median within 2 ms of it (a loaded
        // machine's scheduling), far from the bottleneck path's 40 ms.
        assert!(
            all.iter().all(|r| *r >= expect - 0.2),
            "{who}: an RTT below 2 x {SIDE_MS} ms: {all:?}"
        );
        assert!(
            m <= expect + 2.0,
            "{who}: median RTT {m:.2} ms against {expect} ms"
        );
    }
    assert_eq!(echoes, 2 * PINGS as u64);
    assert_eq!(side.0.in_pkts, 2 * PINGS as u64, "side path in: {side:?}");
    assert_eq!(side.1.in_pkts, 2 * PINGS as u64, "side path out: {side:?}");
    // The bottleneck saw only the experiment's datagrams, and the return path nothing.
    assert_eq!(up.in_pkts, DATA, "uplink: {up:?}");
    assert_eq!(down.in_pkts, 0, "downlink: {down:?}");
}
