//! End-to-end transfers on loopback with the built-in Reno: a large transfer, several flows in
//! one sender, duration mode, tiny streams, the stop flag, and garbage blasted at the receiver.

mod transport_util;

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ccp_udp::packet::{self, DataHeader, Hello, flags};
use ccp_udp::{Amount, FlowSpec, SenderConfig};
use rand::{Rng, SeedableRng, rngs::StdRng};
use transport_util::*;

#[test]
fn transfer_50_mb_intact_with_reno() {
    bounded(Duration::from_secs(60), || {
        let rx = receiver(1);
        let cfg = one_flow(rx.addr, Amount::Bytes(50_000_000));
        let s = send(&cfg, &reno).expect("transfer");
        let r = rx.join().expect("receiver");
        assert_eq!(s.len(), 1);
        assert_eq!(r.flows.len(), 1);
        println!("50 MB: {}", describe(&s[0]));
        assert_eq!(s[0].bytes, 50_000_000);
        assert_intact(&s[0], &r.flows[0]);
        assert_eq!(s[0].controllers, vec!["builtin:reno".to_string()]);
        assert!(!s[0].trace.is_empty());
        assert_eq!(r.ignored.total(), 0, "{:?}", r.ignored);
        assert_eq!(
            s[0].hash,
            ccp_udp::pattern::hash_hex(ccp_udp::pattern::stream_hash(s[0].flow_id, 50_000_000))
        );
    });
}

#[test]
fn several_flows_from_one_sender_all_intact() {
    bounded(Duration::from_secs(60), || {
        let rx = receiver(4);
        // Overlapping flows of different sizes, two starting late.
        let flows = (0..4)
            .map(|i| FlowSpec {
                amount: Amount::Bytes(60_000_000 + i * 1_000_003),
                algorithm: format!("test-{i}"),
                start_after: Duration::from_millis(5 * (i / 2)),
                rate_cap: None,
            })
            .collect();
        let cfg = SenderConfig {
            dest: rx.addr,
            flows,
            ..SenderConfig::default()
        };
        let s = send(&cfg, &reno).expect("transfer");
        let r = rx.join().expect("receiver");
        assert_eq!(s.len(), 4);
        assert_eq!(r.flows.len(), 4);
        for (i, f) in s.iter().enumerate() {
            println!("flow {i}: {}", describe(f));
            assert_eq!(f.flow, i);
            assert_eq!(f.algorithm, format!("test-{i}"));
            assert_eq!(f.bytes, 60_000_000 + i as u64 * 1_000_003);
            let rf = r
                .flows
                .iter()
                .find(|x| x.flow_id == f.flow_id)
                .expect("receiver saw the flow");
            assert_intact(f, rf);
        }
        let mut ids: Vec<u32> = s.iter().map(|f| f.flow_id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 4);
    });
}

#[test]
fn duration_mode_stops_near_the_requested_time() {
    bounded(Duration::from_secs(30), || {
        let rx = receiver(1);
        let cfg = one_flow(rx.addr, Amount::Duration(Duration::from_millis(1500)));
        let t0 = Instant::now();
        let s = send(&cfg, &reno).expect("transfer");
        let wall = t0.elapsed();
        let r = rx.join().expect("receiver");
        println!("1.5 s: {} (wall {wall:?})", describe(&s[0]));
        assert_intact(&s[0], &r.flows[0]);
        assert!(
            (1.5..1.8).contains(&s[0].duration_s),
            "duration {} s",
            s[0].duration_s
        );
        assert!(wall < Duration::from_secs(3), "{wall:?}");
        assert!(s[0].bytes > 1_000_000);
    });
}

#[test]
fn empty_and_tiny_streams() {
    bounded(Duration::from_secs(30), || {
        let sizes = [0u64, 1, 1447, 1448, 1449, 100_000];
        let rx = receiver(sizes.len());
        let cfg = SenderConfig {
            dest: rx.addr,
            flows: sizes
                .iter()
                .map(|&b| FlowSpec {
                    amount: Amount::Bytes(b),
                    ..FlowSpec::default()
                })
                .collect(),
            ..SenderConfig::default()
        };
        let s = send(&cfg, &reno).expect("transfer");
        let r = rx.join().expect("receiver");
        for (f, &size) in s.iter().zip(&sizes) {
            let rf = r.flows.iter().find(|x| x.flow_id == f.flow_id).unwrap();
            assert_intact(f, rf);
            assert_eq!(f.bytes, size);
        }
    });
}

#[test]
fn stop_flag_ends_a_transfer_early_and_cleanly() {
    bounded(Duration::from_secs(30), || {
        let rx = receiver(1);
        let cfg = one_flow(rx.addr, Amount::Duration(Duration::from_secs(60)));
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            st.store(true, Ordering::Relaxed);
        });
        let t0 = Instant::now();
        let s = ccp_udp::run_sender(&cfg, &reno, &stop).expect("transfer");
        t.join().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(3));
        let r = rx.join().expect("receiver");
        assert!(s[0].stopped_early);
        // The shortened stream still ends with a FIN both sides agree on.
        assert_intact(&s[0], &r.flows[0]);
    });
}

/// Garbage of every kind: random bytes, valid headers with random contents, DATA for flows that
/// never said HELLO, and impossible packet types for a receiver.
fn garbage(rng: &mut StdRng, buf: &mut [u8]) -> usize {
    let kind = rng.gen_range(0..5);
    let len = rng.gen_range(0..1500);
    rng.fill(&mut buf[..len]);
    match kind {
        0 => len,
        1 if len > 8 => {
            buf[0] = packet::MAGIC;
            buf[1] = packet::VERSION;
            len
        }
        2 => {
            let h = DataHeader {
                flow_id: rng.r#gen(),
                flags: 0,
                pn: rng.gen_range(0..1000),
                offset: rng.gen_range(0..1 << 20),
                ts: 0,
            };
            packet::encode_data_header(buf, &h);
            packet::DATA_HEADER_LEN + 100
        }
        3 => {
            let h = Hello {
                flow_id: rng.r#gen(),
                mss: 1448,
                ts: 0,
            };
            packet::encode_hello(buf, &h, true)
        }
        _ => {
            let h = DataHeader {
                flow_id: 1,
                flags: flags::FIN | 0x80,
                pn: 0,
                offset: 0,
                ts: 0,
            };
            packet::encode_data_header(buf, &h);
            packet::DATA_HEADER_LEN + 16
        }
    }
}

#[test]
fn garbage_blasted_at_the_receiver_is_ignored_and_counted() {
    bounded(Duration::from_secs(60), || {
        let rx = receiver(1);
        let target = rx.addr;
        let done = Arc::new(AtomicBool::new(false));
        let blasted = Arc::new(AtomicU64::new(0));
        let (d, b) = (done.clone(), blasted.clone());
        let blaster = std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut rng = StdRng::seed_from_u64(99);
            let mut buf = [0u8; 2048];
            while !d.load(Ordering::Relaxed) {
                for _ in 0..50 {
                    let n = garbage(&mut rng, &mut buf);
                    if sock.send_to(&buf[..n], target).is_ok() {
                        b.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        // A duration-mode flow, so garbage and data interleave for the whole second.
        let cfg = one_flow(rx.addr, Amount::Duration(Duration::from_secs(1)));
        let s = send(&cfg, &reno).expect("transfer under garbage");
        done.store(true, Ordering::Relaxed);
        blaster.join().unwrap();
        let r = rx.join().expect("receiver");
        let sent = blasted.load(Ordering::Relaxed);
        println!(
            "garbage: {sent} blasted, ignored {:?}; {}",
            r.ignored,
            describe(&s[0])
        );
        // The HELLO_ACK-typed garbage makes the receiver neither answer nor create flows.
        assert_eq!(r.flows.len(), 1, "garbage created no flow");
        assert_intact(&s[0], &r.flows[0]);
        let ignored = r.ignored.total();
        assert!(sent > 100, "blaster sent {sent}");
        // Loopback may drop some of the garbage when the socket buffer is full; the rest is
        // counted.
        assert!(
            ignored >= sent / 2 && ignored <= sent,
            "ignored {ignored} of {sent}"
        );
        assert!(
            r.ignored.malformed > 0 && r.ignored.unknown_flow > 0 && r.ignored.unexpected_type > 0
        );
    });
}

#[test]
fn ipv6_loopback_transfer() {
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        eprintln!("skipped: no IPv6 loopback on this host");
        return;
    }
    bounded(Duration::from_secs(30), || {
        let rx = start_receiver(ccp_udp::ReceiverConfig {
            bind: "[::1]:0".parse().unwrap(),
            expect_flows: Some(1),
            idle_timeout: Some(Duration::from_secs(20)),
            gro: true,
        });
        let cfg = one_flow(rx.addr, Amount::Bytes(20_000_000));
        let s = send(&cfg, &reno).expect("transfer over IPv6");
        let r = rx.join().expect("receiver");
        println!("IPv6: {}", describe(&s[0]));
        assert_intact(&s[0], &r.flows[0]);
        assert!(s[0].local.starts_with("[::1]"), "{}", s[0].local);
    });
}

#[test]
fn rtt_percentiles_leave_out_the_samples_before_rtt_from() {
    bounded(Duration::from_secs(30), || {
        let rx = receiver(2);
        // Two flows at one steady, capped rate (one RTT sample per ACK): the first from 0 to
        // 1 s, the second from 0.5 to 1.5 s. With `rtt_from` at 0.5 s the first counts the
        // samples of its second half only, the second all of its own.
        let flow = |start_ms| FlowSpec {
            amount: Amount::Duration(Duration::from_secs(1)),
            algorithm: String::new(),
            start_after: Duration::from_millis(start_ms),
            rate_cap: Some(500_000),
        };
        let cfg = SenderConfig {
            dest: rx.addr,
            flows: vec![flow(0), flow(500)],
            rtt_from: Duration::from_millis(500),
            ..SenderConfig::default()
        };
        let s = send(&cfg, &reno).expect("transfer");
        let r = rx.join().expect("receiver");
        for f in &s {
            println!(
                "{}: {} RTT samples counted",
                describe(f),
                f.rtt_samples.unwrap_or(0)
            );
            let rf = r.flows.iter().find(|x| x.flow_id == f.flow_id).unwrap();
            assert_intact(f, rf);
            assert!(f.rtt_min_ms > 0.0);
        }
        let (early, late) = (s[0].rtt_samples.unwrap(), s[1].rtt_samples.unwrap());
        assert!(late > 100, "the late flow counted {late} samples");
        let share = early as f64 / late as f64;
        assert!(
            (0.35..0.65).contains(&share),
            "the early flow counted {early} samples against the late one's {late}"
        );
        assert!(s[0].rtt_p50_ms > 0.0 && s[0].rtt_p50_ms <= s[0].rtt_p99_ms);

        // A start after the flow's end leaves no sample in the percentiles, and says so.
        let rx = receiver(1);
        let cfg = SenderConfig {
            rtt_from: Duration::from_secs(60),
            ..one_flow(rx.addr, Amount::Bytes(1_000_000))
        };
        let s = send(&cfg, &reno).expect("transfer");
        rx.join().expect("receiver");
        assert_eq!(s[0].rtt_samples, Some(0));
        assert_eq!(s[0].rtt_p99_ms, 0.0);
        assert!(
            s[0].rtt_min_ms > 0.0,
            "the smallest RTT counts every sample"
        );
    });
}
