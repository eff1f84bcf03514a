//! ECN end to end, with scripted peers built from the public packet API: the sender marks
//! ECT(0); the receiver counts CE marks from the TOS byte and echoes the count; the sender turns
//! new CE counts into `ecn_packets` / `ecn_bytes` for its controller.

mod transport_util;

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccp_udp::io::{self as sio, RecvBatch};
use ccp_udp::packet::{self, DataHeader, Hello, Packet, flags};
use ccp_udp::{Amount, pattern};
use transport_util::*;

#[test]
fn the_sender_marks_ect0() {
    bounded(Duration::from_secs(10), || {
        let fake = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(sio::enable_recv_tos(&fake, false));
        let mut cfg = one_flow(fake.local_addr().unwrap(), Amount::Bytes(1));
        cfg.handshake_timeout = Duration::from_millis(300);
        let t = std::thread::spawn(move || send(&cfg, &reno));
        let mut batch = RecvBatch::new(4, 2048);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut tos = None;
        while tos.is_none() && Instant::now() < deadline {
            let _ = sio::wait(fake.as_raw_fd(), false, Some(Duration::from_millis(50)));
            if sio::recv_batch(fake.as_raw_fd(), &mut batch).unwrap() > 0 {
                assert!(matches!(
                    packet::decode(batch.data(0)),
                    Ok(Packet::Hello(_))
                ));
                tos = batch.meta(0).tos;
            }
        }
        assert_eq!(tos.map(|t| t & 3), Some(sio::ECN_ECT0));
        assert!(t.join().unwrap().is_err(), "nobody answered");
    });
}

#[test]
fn the_receiver_counts_ce_and_echoes_it() {
    bounded(Duration::from_secs(10), || {
        let rx = receiver(1);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(rx.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        sio::set_tos(&s, false, sio::ECN_CE).unwrap();
        let flow = 0x0ec0_0001;
        let mut buf = [0u8; 2048];
        let n = packet::encode_hello(
            &mut buf,
            &Hello {
                flow_id: flow,
                mss: 1000,
                ts: 1,
            },
            false,
        );
        s.send(&buf[..n]).unwrap();
        let n = s.recv(&mut buf).unwrap();
        assert!(
            matches!(packet::decode(&buf[..n]), Ok(Packet::HelloAck(h)) if h.flow_id == flow && h.ts == 1)
        );
        let seed = pattern::seed(flow);
        let pkts = 10u64;
        for pn in 0..pkts {
            let h = DataHeader {
                flow_id: flow,
                flags: 0,
                pn,
                offset: pn * 1000,
                ts: pn as u32,
            };
            packet::encode_data_header(&mut buf, &h);
            buf[packet::DATA_HEADER_LEN..packet::DATA_HEADER_LEN + 1000]
                .copy_from_slice(pattern::slice(seed, pn * 1000, 1000));
            s.send(&buf[..packet::DATA_HEADER_LEN + 1000]).unwrap();
        }
        let total = pkts * 1000;
        let h = DataHeader {
            flow_id: flow,
            flags: flags::FIN,
            pn: pkts,
            offset: total,
            ts: 0,
        };
        packet::encode_data_header(&mut buf, &h);
        buf[packet::DATA_HEADER_LEN..packet::DATA_HEADER_LEN + 16]
            .copy_from_slice(&pattern::stream_hash(flow, total).to_be_bytes());
        s.send(&buf[..packet::DATA_HEADER_LEN + 16]).unwrap();
        // Read ACKs until the completing one.
        let mut last = None;
        while let Ok(n) = s.recv(&mut buf) {
            if let Ok(Packet::Ack(a)) = packet::decode(&buf[..n]) {
                let done = a.flags & flags::COMPLETE != 0;
                last = Some(a);
                if done {
                    break;
                }
            }
        }
        let a = last.expect("an ACK");
        assert_eq!(
            a.flags & (flags::COMPLETE | flags::INTACT),
            flags::COMPLETE | flags::INTACT
        );
        assert_eq!(a.cum_offset, total);
        assert_eq!(a.largest(), Some(pkts));
        assert_eq!(a.ranges(), &[(0, pkts)]);
        assert_eq!(a.ecn_ce, pkts + 1, "every packet (FIN included) carried CE");
        let r = rx.join().unwrap();
        assert_eq!(r.flows[0].ecn_ce_packets, pkts + 1);
        assert!(r.flows[0].intact);
        assert!(r.ecn);
    });
}

#[test]
fn the_sender_reports_ce_to_its_controller() {
    bounded(Duration::from_secs(20), || {
        // A scripted receiver that acknowledges every packet and claims each was CE-marked.
        let mut ce = 0u64;
        let (dest, peer) = scripted_receiver(move |_, a| {
            ce += 1;
            a.ecn_ce = ce;
        });
        let log = Arc::new(Mutex::new(Log::default()));
        let make = recording(log.clone(), reno);
        let mut cfg = one_flow(dest, Amount::Bytes(200_000));
        cfg.gso = false;
        let s = send(&cfg, &make).expect("transfer");
        let marked = peer.join().unwrap();
        let log = log.lock().unwrap();
        assert!(s[0].completed);
        assert_eq!(s[0].ecn_ce_packets, marked);
        assert_eq!(log.sum(|a| u64::from(a.ecn_packets)), marked);
        assert_eq!(log.sum(|a| u64::from(a.ecn_bytes)), marked * 1448);
        assert_eq!(log.sum(|a| u64::from(a.bytes_acked)), 200_000);
    });
}
