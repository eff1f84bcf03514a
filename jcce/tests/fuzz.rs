//! Malformed input never crashes the service: arbitrary bytes, mutated genuine datagrams, and
//! mutated datagrams re-signed with the right key (an authenticated but hostile peer).

mod common;

use std::time::Duration;

use common::{Peer, Running, key, publish};
use jcce::server::{Service, ServiceConfig, fetch_metrics};
use jcce::wire::{self, HEADER_LEN, Kind, TAG_LEN, Writer};
use proptest::prelude::*;

const NOW: u64 = 1_800_000_000_000_000;

fn genuine(seq: u64, entries: &[(u8, u64, u64, u64, u64)]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = Writer::new(&mut buf, Kind::Update, 77, seq, NOW);
    for &(op, group, member, mi, value) in entries {
        w.update(&wire::UpdateEntry {
            op: if op % 2 == 0 {
                wire::Op::Publish
            } else {
                wire::Op::Leave
            },
            group,
            member,
            mi,
            value: if op % 2 == 0 { value } else { 0 },
        });
    }
    w.finish(&key()).to_vec()
}

/// Every reply the service emits is an authenticated reply of the right kind, and every datagram
/// is either answered or counted as dropped.
fn check_reply(svc: &mut Service, d: &[u8], mono: u64) -> Result<(), TestCaseError> {
    let before = svc.metrics(mono);
    let reply = svc.handle(d, mono, NOW).map(|r| r.to_vec());
    let after = svc.metrics(mono);
    prop_assert_eq!(after.datagrams, before.datagrams + 1);
    match reply {
        Some(r) => {
            let m = wire::open(&key(), &r).expect("replies are authenticated");
            prop_assert!(matches!(
                m.header.kind,
                Kind::UpdateReply | Kind::MetricsReply
            ));
            prop_assert_eq!(after.replies, before.replies + 1);
            for e in m.replies() {
                prop_assert!(e.mean.is_none_or(|v| v.is_finite() && v >= 0.0));
            }
        }
        None => prop_assert_eq!(after.dropped.total(), before.dropped.total() + 1),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(d in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let mut svc = Service::new(key(), &ServiceConfig::default()).unwrap();
        check_reply(&mut svc, &d, 1)?;
        prop_assert_eq!(svc.core().members(), 0);
    }

    #[test]
    fn mutated_genuine_datagrams(
        entries in proptest::collection::vec((0u8..2, 0u64..4, 0u64..4, any::<u64>(), any::<u64>()), 1..20),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut svc = Service::new(key(), &ServiceConfig::default()).unwrap();
        let mut d = genuine(1, &entries);
        for (i, x) in flips {
            let i = i.index(d.len());
            d[i] ^= x;
        }
        if let Some(c) = cut {
            d.truncate(c.index(d.len()));
        }
        // Without the key, any change is refused before it reaches the core.
        check_reply(&mut svc, &d, 1)?;
        prop_assert_eq!(svc.core().members(), 0);
        prop_assert_eq!(svc.metrics(1).dropped.total(), 1);
    }

    #[test]
    fn hostile_authenticated_peer(
        seqs in proptest::collection::vec(0u64..8, 1..30),
        body in proptest::collection::vec(any::<u8>(), 0..400),
        kind in 0u8..8,
        count in any::<u16>(),
        skew in -20_000_000i64..20_000_000,
    ) {
        // A peer holding the key that signs garbage: arbitrary kind, count, body, seq and time.
        let mut svc = Service::new(key(), &ServiceConfig::default()).unwrap();
        for (i, seq) in seqs.into_iter().enumerate() {
            let mut d = Vec::new();
            d.extend_from_slice(b"JCCE");
            d.push(1);
            d.push(kind);
            d.extend_from_slice(&count.to_le_bytes());
            d.extend_from_slice(&5u64.to_le_bytes());
            d.extend_from_slice(&seq.to_le_bytes());
            d.extend_from_slice(&(NOW as i64 + skew).to_le_bytes());
            d.extend_from_slice(&body);
            let tag = key().tag(&d);
            d.extend_from_slice(&tag);
            check_reply(&mut svc, &d, i as u64)?;
        }
        let m = svc.metrics(100);
        prop_assert_eq!(m.datagrams, m.replies + m.dropped.total());
        prop_assert_eq!(m.dropped.bad_mac + m.dropped.not_jcce + m.dropped.truncated, 0);
    }
}

/// The same over a real socket: a burst of garbage and forgeries, then the service still answers
/// a genuine publication and has counted every bad datagram.
#[test]
fn live_service_survives_garbage() {
    let srv = Running::start("127.0.0.1:0", ServiceConfig::default());
    let k = key();
    let mut p = Peer::new(srv.addr);
    let mut rng_state = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state
    };
    // Bursts of 40 bad datagrams (well inside the socket's receive buffer), each followed by a
    // genuine publication whose reply shows the service processed the burst and still works.
    let garbage = 2000;
    let mut mi = 0;
    for i in 0..garbage {
        let len = (next() % 1500) as usize;
        let mut d: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 && len > HEADER_LEN + TAG_LEN {
            d[..4].copy_from_slice(b"JCCE");
            d[4] = 1;
        }
        p.sock.send(&d).unwrap();
        if i % 40 == 39 {
            mi += 1;
            let d = p.update(&k, &[publish(3, 3, mi, 300)]);
            let r = p.exchange(&d);
            let e = wire::open(&k, &r).unwrap().replies().next().unwrap();
            assert_eq!((e.n, e.mean), (1, Some(300.0)));
        }
    }
    let m = fetch_metrics(srv.addr, &k, Duration::from_secs(2)).unwrap();
    assert_eq!(m.dropped.total(), garbage, "{m:?}");
    assert_eq!(m.dropped.total(), m.dropped.unauthenticated(), "{m:?}");
    assert_eq!(m.replies, mi, "{m:?}");
    assert_eq!(m.datagrams, garbage + mi + 1, "{m:?}");
}
