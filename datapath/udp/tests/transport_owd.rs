//! The relative one-way delay: the receiver puts the receive timestamp of the packet whose send
//! timestamp it echoes in every ACK; with every RTT sample the sender hands its controller the
//! receive-minus-send difference above the smallest of a sliding window (the flow's smallest
//! with window 0).

mod transport_util;

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use ccp_udp::cc::{FlowController, FlowMeta};
use ccp_udp::packet::{self, DataHeader, Hello, Packet};
use ccp_udp::{Amount, ReceiverConfig};
use transport_util::*;

/// The forward queueing the scripted receiver claims for packet `pn`, µs.
fn claimed_queueing(pn: u64) -> u32 {
    (pn % 4) as u32 * 1_000
}

#[test]
fn the_sender_turns_receive_timestamps_into_the_relative_one_way_delay() {
    bounded(Duration::from_secs(20), || {
        // A scripted receiver that acknowledges every packet at once and claims it received
        // packet `pn` at send time + a clock offset that wraps the u32 timestamps + a queueing
        // of 0, 1, 2 or 3 ms by `pn`.
        let offset = u32::MAX - 1_500;
        let (dest, peer) = scripted_receiver(move |h, a| {
            a.recv_ts =
                h.ts.wrapping_add(offset)
                    .wrapping_add(claimed_queueing(h.pn));
        });
        let log = Arc::new(Mutex::new(Log::default()));
        let make = recording(log.clone(), reno);
        let mut cfg = one_flow(dest, Amount::Bytes(400_000));
        cfg.gso = false;
        let s = send(&cfg, &make).expect("transfer");
        peer.join().unwrap();
        let log = log.lock().unwrap();
        assert!(s[0].completed);
        assert_eq!(log.acks.len(), log.owds.len());
        // A delay with every RTT sample and only then.
        for (a, d) in log.acks.iter().zip(&log.owds) {
            assert_eq!(a.rtt_us > 0, d.is_some(), "{a:?} {d:?}");
        }
        let owds: Vec<u64> = log.owds.iter().flatten().copied().collect();
        assert!(owds.len() >= 250, "{} samples", owds.len());
        // Packet 0 sets the smallest (no queueing), so every sample is exactly the claimed
        // queueing: the clock offset and the wrapping cancel.
        assert_eq!(owds[0], 0);
        assert!(
            owds.iter().all(|d| [0, 1_000, 2_000, 3_000].contains(d)),
            "{owds:?}"
        );
        for q in [1_000, 2_000, 3_000] {
            let n = owds.iter().filter(|&&d| d == q).count();
            assert!(n * 5 >= owds.len(), "{q} µs in {n} of {}", owds.len());
        }
        let mean = owds.iter().sum::<u64>() as f64 / owds.len() as f64;
        let reported = s[0].owd_excess_mean_us.expect("summary has the mean");
        assert!((reported - mean).abs() < 1e-6, "{reported} vs {mean}");
    });
}

#[test]
fn the_base_window_bounds_what_a_clock_drift_adds() {
    bounded(Duration::from_secs(30), || {
        // A scripted receiver whose clock runs 2 000 ppm fast (2 µs per ms of the sender's
        // clock; real hosts differ by 10–100 ppm, exaggerated here so that a 1.5 s flow shows
        // it) and claims no queueing: every excess is drift. The flow is paced at 2 MB/s
        // (about 1 400 RTT samples a second).
        let run = |window: Duration| {
            let (dest, peer) = scripted_receiver(|h, a| {
                a.recv_ts = h.ts.wrapping_add(h.ts / 500).wrapping_add(7_000_000);
            });
            let log = Arc::new(Mutex::new(Log::default()));
            let make = recording(log.clone(), |_: &FlowMeta| -> Box<dyn FlowController> {
                Box::new(Fixed {
                    cwnd: 20 * 1448,
                    rate: Some(2_000_000),
                })
            });
            let mut cfg = one_flow(dest, Amount::Duration(Duration::from_millis(1_500)));
            cfg.gso = false;
            cfg.owd_base_window = window;
            let s = send(&cfg, &make).expect("transfer");
            peer.join().unwrap();
            assert!(s[0].completed);
            let log = log.lock().unwrap();
            let owds: Vec<u64> = log.owds.iter().flatten().copied().collect();
            assert!(owds.len() >= 1_000, "{} samples", owds.len());
            // The last third of the flow, well past the first window.
            let mut tail = owds[owds.len() * 2 / 3..].to_vec();
            tail.sort_unstable();
            (tail[tail.len() / 2], tail[tail.len() - 1])
        };
        let (windowed_median, windowed_max) = run(Duration::from_millis(200));
        let (flow_long_median, flow_long_max) = run(Duration::ZERO);
        eprintln!(
            "2000 ppm drift, last third of 1.5 s: window 200 ms median {windowed_median} µs, \
             max {windowed_max}; flow-long median {flow_long_median}, max {flow_long_max}"
        );
        // With a 200 ms window the base is 180-200 ms old: 360-400 µs of drift (a sample
        // handled late, after a scheduling stall, counts from a base older by the stall).
        assert!(
            (300..=450).contains(&windowed_median),
            "{windowed_median} µs"
        );
        assert!(windowed_max <= 1_000, "{windowed_max} µs");
        // The flow's smallest is from its start: 2 µs per ms of the flow's age, 2-3 ms in the
        // last third.
        assert!(flow_long_median >= 1_800, "{flow_long_median} µs");
        assert!(flow_long_max >= 2_500, "{flow_long_max} µs");
    });
}

#[test]
fn a_real_receiver_gives_a_one_way_delay_with_every_rtt_sample() {
    let _serial = serial();
    bounded(Duration::from_secs(30), || {
        let rx = receiver(1);
        let log = Arc::new(Mutex::new(Log::default()));
        let make = recording(log.clone(), reno);
        let s = send(&one_flow(rx.addr, Amount::Bytes(20 << 20)), &make).expect("transfer");
        let r = rx.join().unwrap();
        assert_intact(&s[0], &r.flows[0]);
        let log = log.lock().unwrap();
        let mut samples = 0;
        let mut positive = 0;
        let mut smallest = u64::MAX;
        for (a, d) in log.acks.iter().zip(&log.owds) {
            assert_eq!(a.rtt_us > 0, d.is_some(), "{a:?} {d:?}");
            if let Some(d) = d {
                samples += 1;
                positive += usize::from(*d > 0);
                smallest = smallest.min(*d);
            }
        }
        assert!(samples > 100, "{samples} samples");
        // Excesses over the flow's own smallest: the first sample and every new smallest is 0,
        // and the receiver's clock shows the loopback's jitter in the others (without receive
        // timestamps every sample would be a new smallest; the time data waits in the
        // receiver's socket is left out).
        assert_eq!(smallest, 0);
        assert!(positive > 0, "all {samples} samples 0");
        assert!(s[0].owd_excess_mean_us.is_some());
    });
}

/// Data that waited in the receiver's socket before it was read is dated by when it arrived:
/// the ACK delay the receiver reports includes the wait (the sender takes it out of its RTT
/// sample, up to `MAX_ACK_DELAY_US`), and the receive timestamp it echoes (the one-way delay)
/// leaves it out. A HELLO and a DATA packet reach the receiver's socket before its first read,
/// which comes 30 ms later.
#[test]
fn data_that_waited_in_the_receivers_socket_is_dated_by_its_arrival() {
    let _serial = serial();
    bounded(Duration::from_secs(20), || {
        // The kernel turns its receive stamping on asynchronously the first time a socket
        // asks (until then it stamps datagrams when they are read): one socket asks, holds it
        // on, and checks that a datagram that waited 20 ms is stamped with its arrival before
        // the receiver starts.
        let keep = UdpSocket::bind("127.0.0.1:0").unwrap();
        if !ccp_udp::io::enable_rx_timestamps(&keep) {
            eprintln!("the kernel refused SO_TIMESTAMPNS (a sandbox?); nothing to check");
            return;
        }
        keep.connect(keep.local_addr().unwrap()).unwrap();
        let mut probe = ccp_udp::io::RecvBatch::new(1, 64);
        let stamping = (0..50).any(|_| {
            keep.send(b"probe").unwrap();
            std::thread::sleep(Duration::from_millis(20));
            let read_at = ccp_udp::io::wall_clock_ns();
            let n = ccp_udp::io::recv_batch(keep.as_raw_fd(), &mut probe).unwrap();
            n == 1
                && probe
                    .meta(0)
                    .rx_wall_ns
                    .is_some_and(|at| at + 15_000_000 <= read_at)
        });
        assert!(stamping, "no datagram stamped with its arrival in 50 tries");
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let to_rx = peer.try_clone().unwrap();
        let cfg = ReceiverConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            expect_flows: None,
            idle_timeout: Some(Duration::from_secs(10)),
            gro: false,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (bound_tx, bound_rx) = mpsc::channel();
        let s = stop.clone();
        let rx = std::thread::spawn(move || {
            ccp_udp::run_receiver_report(&cfg, &s, &mut |addr| {
                let mut buf = [0u8; 1500];
                let hello = Hello {
                    flow_id: 7,
                    mss: 1200,
                    ts: 1,
                };
                let n = packet::encode_hello(&mut buf, &hello, false);
                to_rx.send_to(&buf[..n], addr).unwrap();
                packet::encode_data_header(
                    &mut buf,
                    &DataHeader {
                        flow_id: 7,
                        flags: 0,
                        pn: 0,
                        offset: 0,
                        ts: 1_000,
                    },
                );
                to_rx
                    .send_to(&buf[..packet::DATA_HEADER_LEN + 1000], addr)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(30));
                bound_tx.send(addr).unwrap();
            })
        });
        bound_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let mut buf = [0u8; 1500];
        let ack = loop {
            let n = peer.recv(&mut buf).expect("an ACK");
            match packet::decode(&buf[..n]).unwrap() {
                Packet::HelloAck(_) => continue,
                Packet::Ack(a) => break a,
                p => panic!("unexpected {p:?}"),
            }
        };
        stop.store(true, Ordering::Relaxed);
        let report = rx.join().unwrap().unwrap();
        assert!(
            report.rx_timestamps,
            "the receiver's datagrams were not stamped"
        );
        assert_eq!((ack.flow_id, ack.echo_ts), (7, 1_000));
        assert_eq!(ack.ranges(), &[(0, 0)]);
        // 30 ms in the socket, and the time between the read and the ACK (short, unless the
        // machine is very busy).
        assert!(
            (25_000..1_000_000).contains(&ack.ack_delay_us),
            "ACK delay {} µs after 30 ms in the socket",
            ack.ack_delay_us
        );
        // The receive timestamp is the arrival, at the receiver's start (µs since then), not
        // the read 30 ms later.
        assert!(
            ack.recv_ts < 20_000,
            "received at {} µs, read after 30 ms",
            ack.recv_ts
        );
    });
}
