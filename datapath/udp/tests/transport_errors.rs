//! Failures a user meets: nobody listening (ICMP port unreachable), a port that swallows
//! datagrams, a peer that answers garbage, and bad configurations. Each must end in its own
//! clear error within the handshake timeout, without a panic.

mod transport_util;

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ccp_udp::{Amount, Error, FlowSpec, SenderConfig};
use rand::{Rng, SeedableRng, rngs::StdRng};
use transport_util::*;

#[test]
fn nothing_listening_is_reported_as_refused() {
    bounded(Duration::from_secs(20), || {
        // A port that was free a moment ago: the kernel answers ICMP port unreachable.
        let port = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dest = format!("127.0.0.1:{port}").parse().unwrap();
        let mut cfg = one_flow(dest, Amount::Bytes(1_000_000));
        cfg.handshake_timeout = Duration::from_secs(2);
        let t0 = Instant::now();
        let err = send(&cfg, &reno).expect_err("no receiver");
        let took = t0.elapsed();
        println!("{err} (after {took:?})");
        assert!(
            matches!(err, Error::Refused { addr } if addr == dest),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
        assert!(msg.contains("connection refused"), "{msg}");
        assert!(took < cfg.handshake_timeout, "{took:?}");
    });
}

#[test]
fn a_silent_port_times_out_with_the_address_and_timeout() {
    bounded(Duration::from_secs(20), || {
        // Bound but never read: no ICMP, no answer.
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dest = silent.local_addr().unwrap();
        let mut cfg = one_flow(dest, Amount::Bytes(1_000_000));
        cfg.handshake_timeout = Duration::from_millis(700);
        let t0 = Instant::now();
        let err = send(&cfg, &reno).expect_err("no answer");
        let took = t0.elapsed();
        assert!(matches!(err, Error::NoAnswer { ignored: 0, .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("no ccp-udp receiver answered at {dest} within 700 ms")
        );
        assert!(
            took >= Duration::from_millis(700) && took < Duration::from_millis(1500),
            "{took:?}"
        );
        drop(silent);
    });
}

#[test]
fn a_peer_answering_garbage_is_ignored_and_times_out() {
    bounded(Duration::from_secs(20), || {
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let dest = peer.local_addr().unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let (d, a) = (done.clone(), answered.clone());
        let t = std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(5);
            let mut buf = [0u8; 2048];
            while !d.load(Ordering::Relaxed) {
                if let Ok((n, from)) = peer.recv_from(&mut buf) {
                    // Answer every datagram with a few garbage ones, one of them a mangled
                    // copy of what came in (right magic and flow id, wrong type).
                    for i in 0..3 {
                        let len = if i == 0 { n } else { rng.gen_range(1..600) };
                        if i > 0 {
                            rng.fill(&mut buf[..len]);
                        } else {
                            buf[2] = 0x7f;
                        }
                        if peer.send_to(&buf[..len], from).is_ok() {
                            a.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        });
        let mut cfg = one_flow(dest, Amount::Bytes(1_000_000));
        cfg.handshake_timeout = Duration::from_secs(1);
        let t0 = Instant::now();
        let err = send(&cfg, &reno).expect_err("garbage peer");
        let took = t0.elapsed();
        done.store(true, Ordering::Relaxed);
        t.join().unwrap();
        println!("{err} (after {took:?})");
        match &err {
            Error::NoAnswer {
                addr,
                timeout,
                ignored,
            } => {
                assert_eq!(*addr, dest);
                assert_eq!(*timeout, Duration::from_secs(1));
                assert!(*ignored > 0 && *ignored <= answered.load(Ordering::Relaxed));
            }
            other => panic!("expected NoAnswer, got {other:?}"),
        }
        assert!(
            err.to_string().starts_with(&format!(
                "no ccp-udp receiver answered at {dest} within 1 s"
            )),
            "{err}"
        );
        assert!(took < Duration::from_millis(1800), "{took:?}");
    });
}

#[test]
fn bad_configurations_are_refused_up_front() {
    let base = one_flow("127.0.0.1:9".parse().unwrap(), Amount::Bytes(1));
    let cases: Vec<(SenderConfig, &str)> = vec![
        (
            SenderConfig {
                mss: 10,
                ..base.clone()
            },
            "MSS, 10 bytes",
        ),
        (
            SenderConfig {
                mss: 20_000,
                ..base.clone()
            },
            "MSS, 20000 bytes",
        ),
        (
            SenderConfig {
                init_cwnd_pkts: 0,
                ..base.clone()
            },
            "initial window must be at least 1",
        ),
        (
            SenderConfig {
                handshake_timeout: Duration::ZERO,
                ..base.clone()
            },
            "handshake timeout must be positive",
        ),
        (
            one_flow("127.0.0.1:9".parse().unwrap(), Amount::Bytes(1 << 49)),
            "flow 0: 562949953421312 bytes exceed",
        ),
        (
            one_flow(
                "127.0.0.1:9".parse().unwrap(),
                Amount::Duration(Duration::ZERO),
            ),
            "flow 0: duration must be positive",
        ),
        (
            SenderConfig {
                flows: vec![FlowSpec {
                    rate_cap: Some(0),
                    ..FlowSpec::default()
                }],
                ..base.clone()
            },
            "flow 0: rate cap must be positive",
        ),
        (
            SenderConfig {
                flows: vec![],
                ..base.clone()
            },
            "no flows",
        ),
        (
            SenderConfig {
                dest: "127.0.0.1:0".parse().unwrap(),
                ..base.clone()
            },
            "port 0",
        ),
        (
            SenderConfig {
                bind_ip: Some("::1".parse().unwrap()),
                ..base.clone()
            },
            "different IP versions",
        ),
    ];
    for (cfg, needle) in cases {
        let err = send(&cfg, &reno).expect_err(needle);
        assert!(matches!(err, Error::Config(_)), "{err:?}");
        assert!(err.to_string().contains(needle), "{err} lacks {needle}");
    }
}

#[test]
fn a_receiver_that_disappears_mid_transfer_is_reported() {
    bounded(Duration::from_secs(30), || {
        let rx = receiver(1);
        let addr = rx.addr;
        let cfg = one_flow(addr, Amount::Duration(Duration::from_secs(20)));
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            rx.stop()
        });
        let t0 = Instant::now();
        let err = send(&cfg, &reno).expect_err("receiver gone");
        killer.join().unwrap().expect("receiver result");
        println!("{err} (after {:?})", t0.elapsed());
        assert!(matches!(err, Error::PeerLost { .. }), "{err:?}");
        assert!(err.to_string().contains(&addr.to_string()));
        assert!(t0.elapsed() < Duration::from_secs(5));
    });
}
