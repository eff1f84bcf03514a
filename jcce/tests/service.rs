//! The JCCE service on loopback: aggregates and expiry through the real client, privacy of every
//! reply, authentication and replay rejection, and clients surviving a service restart.

mod common;

use std::time::Duration;

use common::{Peer, Running, key, publish, wait_for};
use jcce::client::{Client, ClientConfig, Reachability};
use jcce::core::{Applied, CoreConfig};
use jcce::server::{ServiceConfig, fetch_metrics};
use jcce::wire::{self, ENTRY_LEN, HEADER_LEN, Key, Kind, Op, TAG_LEN, UpdateEntry, Writer};

const LIVENESS: Duration = Duration::from_secs(10);

fn client(addr: std::net::SocketAddr) -> Client {
    let mut cfg = ClientConfig::new(addr.to_string(), key());
    cfg.reply_timeout = Duration::from_millis(150);
    cfg.backoff_initial = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(200);
    Client::start(cfg).unwrap()
}

fn service(k: u32, timeout_ms: u64) -> ServiceConfig {
    ServiceConfig {
        core: CoreConfig {
            min_group: k,
            member_timeout_us: timeout_ms * 1000,
            ..CoreConfig::default()
        },
        ..ServiceConfig::default()
    }
}

/// Three agents (clients) on "different hosts"; two groups; the client's members see the mean of
/// their group's live members, and a member that stops publishing expires.
#[test]
fn aggregate_and_expiry_through_the_client() {
    let srv = Running::start("127.0.0.1:0", service(1, 300));
    let (a, b, c) = (client(srv.addr), client(srv.addr), client(srv.addr));
    let a1 = a.member(1);
    let b1 = b.member(1);
    let c1 = c.member(1);
    let c2 = c.member(2);
    // Values in bytes/s; one MI each. Different clients race to the service, so each waits for
    // its reply before the next publishes: c1 then answers for all three members of group 1.
    a1.publish(1, 10_000_000);
    wait_for(LIVENESS, || a1.latest()).expect("a1's reply");
    b1.publish(1, 20_000_000);
    wait_for(LIVENESS, || b1.latest()).expect("b1's reply");
    c2.publish(1, 5_000_000);
    c1.publish(1, 60_000_000);
    let got = wait_for(LIVENESS, || c1.latest()).expect("c1's reply");
    assert_eq!(got.n, 3);
    assert_eq!(got.mean, Some(30_000_000.0));
    assert_eq!(got.mi, 1);
    assert!(a.is_reachable() && b.is_reachable() && c.is_reachable());
    let g2 = wait_for(LIVENESS, || c2.latest()).expect("c2's reply");
    assert_eq!((g2.n, g2.mean), (1, Some(5_000_000.0)));
    // a1 and c1 keep publishing every 20 ms; b1 goes silent and must expire (300 ms timeout).
    let expired = wait_for(LIVENESS, || {
        for mi in 2..1000u64 {
            a1.publish(mi, 10_000_000);
            c1.publish(mi, 50_000_000);
            std::thread::sleep(Duration::from_millis(20));
            if let Some(g) = c1.latest().filter(|g| g.mi == mi && g.n == 2) {
                return Some((mi, g));
            }
        }
        None
    })
    .expect("b1 expires");
    assert_eq!(expired.1.mean, Some(30_000_000.0));
    let mut mi = expired.0;
    // Dropping a member leaves at once: c1 alone sees n = 1 on its next publication.
    drop(a1);
    let alone = wait_for(LIVENESS, || {
        mi += 1;
        c1.publish(mi, 40_000_000);
        std::thread::sleep(Duration::from_millis(10));
        c1.latest().filter(|g| g.n == 1)
    })
    .expect("a1 left");
    assert_eq!(alone.mean, Some(40_000_000.0));
    assert!(c.is_reachable());
    assert_eq!(c.stats().rejected, 0);
    drop((a, b, c, b1, c1, c2));
    let m = srv.stop();
    assert!(m.core.expired >= 1, "{m:?}");
    assert!(m.core.left >= 1, "{m:?}");
    assert_eq!(m.dropped.total(), 0, "{m:?}");
}

/// Decode a reply datagram by its layout alone and check it holds nothing but the echoed request
/// identifiers, n and the mean; return (n, mean bytes, status) per entry.
fn parse_reply_strictly(r: &[u8], req: &[UpdateEntry]) -> Vec<(u32, [u8; 8], u8)> {
    assert_eq!(r.len(), HEADER_LEN + req.len() * ENTRY_LEN + TAG_LEN);
    assert_eq!(r[5], Kind::UpdateReply as u8);
    let m = wire::open(&key(), r).expect("authenticated reply");
    assert_eq!(m.header.count as usize, req.len());
    let body = &r[HEADER_LEN..r.len() - TAG_LEN];
    body.chunks_exact(ENTRY_LEN)
        .zip(req)
        .map(|(e, q)| {
            // echo of the requester's own ids
            assert_eq!(&e[0..8], &q.group.to_le_bytes());
            assert_eq!(&e[8..16], &q.member.to_le_bytes());
            assert_eq!(&e[16..24], &q.mi.to_le_bytes());
            assert_eq!(&e[30..32], &[0, 0], "reserved bytes are zero");
            (
                u32::from_le_bytes(e[24..28].try_into().unwrap()),
                e[32..40].try_into().unwrap(),
                e[28],
            )
        })
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// k = 3: below three members no reply carries any aggregate (the mean field is zero and marked
/// withheld); at and above three the mean is released and no reply ever contains another
/// member's value, in any encoding the protocol uses (u64 or f64, little-endian).
#[test]
fn privacy_no_individual_value_in_any_reply() {
    let srv = Running::start("127.0.0.1:0", service(3, 10_000));
    let k = key();
    // Distinct values whose subset means differ from every value.
    let values = [1_000_003u64, 2_000_029, 4_000_037, 8_000_081];
    let mut peers: Vec<Peer> = (0..4).map(|_| Peer::new(srv.addr)).collect();
    let mut replies = Vec::new();
    for round in 1..=3u64 {
        for (i, p) in peers.iter_mut().enumerate() {
            let e = publish(42, 100 + i as u64, round, values[i] + round);
            let d = p.update(&k, &[e]);
            let r = p.exchange(&d);
            let parsed = parse_reply_strictly(&r, &[e]);
            replies.push((i, round, r, parsed[0]));
        }
    }
    for (i, round, r, (n, mean_bytes, status)) in &replies {
        let n = *n;
        // Others' values as they were published in any round.
        for (j, v) in values.iter().enumerate() {
            if j == *i {
                continue;
            }
            for rr in 1..=3 {
                let other = v + rr;
                assert!(
                    !contains(r, &other.to_le_bytes()),
                    "u64 value of {j} in reply to {i}"
                );
                assert!(
                    !contains(r, &(other as f64).to_le_bytes()),
                    "f64 value of {j} in reply to {i}"
                );
            }
        }
        let mean = f64::from_le_bytes(*mean_bytes);
        if n < 3 {
            assert_eq!(*status, 2, "withheld below k");
            assert_eq!(
                *mean_bytes, [0; 8],
                "no aggregate below k (n = {n}, round {round})"
            );
        } else {
            assert_eq!(*status, 1);
            // the released mean is the mean of the live members' latest values
            let live: Vec<f64> = (0..4)
                .filter(|&j| j < n as usize || *round > 1)
                .map(|j| {
                    let latest_round = if j <= *i { *round } else { *round - 1 };
                    (values[j] + latest_round) as f64
                })
                .collect();
            assert_eq!(live.len(), n as usize);
            let expect = live.iter().sum::<f64>() / n as f64;
            assert!((mean - expect).abs() < 1e-6, "{mean} vs {expect}");
        }
    }
    // The first round: n = 1, 2 withheld; 3, 4 released. Later rounds: all released (n = 4).
    let ns: Vec<u32> = replies.iter().map(|r| r.3.0).collect();
    assert_eq!(ns, vec![1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4]);
    let m = srv.stop();
    assert_eq!(m.withheld, 2);
}

/// What the README documents a member can still infer with k = 1: with n = 2 the mean and its own
/// value give the other member's value exactly. (This is why k = 3 is recommended between
/// tenants that do not trust each other.)
#[test]
fn privacy_with_two_members_and_k1_reveals_the_other_value() {
    let srv = Running::start("127.0.0.1:0", service(1, 10_000));
    let k = key();
    let (mut p, mut q) = (Peer::new(srv.addr), Peer::new(srv.addr));
    let d = q.update(&k, &[publish(1, 2, 1, 7_654_321)]);
    q.exchange(&d);
    let e = publish(1, 1, 1, 1_234_567);
    let d = p.update(&k, &[e]);
    let r = p.exchange(&d);
    let m = wire::open(&k, &r).unwrap();
    let reply = m.replies().next().unwrap();
    assert_eq!(reply.n, 2);
    let inferred = 2.0 * reply.mean.unwrap() - 1_234_567.0;
    assert_eq!(inferred, 7_654_321.0);
}

/// Forged, garbled, wrong-key, replayed, stale-clock and wrong-direction datagrams get no reply,
/// change nothing, and are counted by reason.
#[test]
fn unauthenticated_and_replayed_datagrams_are_dropped_and_counted() {
    let srv = Running::start("127.0.0.1:0", service(1, 10_000));
    let k = key();
    let wrong = Key::from_bytes(&[0xa5; 32]).unwrap();
    let mut p = Peer::new(srv.addr);
    let quiet = Duration::from_millis(150);

    // A genuine publication: value 1000.
    let good = p.update(&k, &[publish(9, 1, 1, 1000)]);
    let r = p.exchange(&good);
    assert_eq!(wire::open(&k, &r).unwrap().replies().next().unwrap().n, 1);

    // Wrong key (an outsider trying to inject a huge value).
    let forged = p.update(&wrong, &[publish(9, 2, 1, 999_999_999)]);
    p.expect_silence(&forged, quiet);
    // A genuine datagram with one bit flipped in the value.
    let mut flipped = p.update(&k, &[publish(9, 3, 1, 5)]);
    flipped[HEADER_LEN + 32] ^= 0x40;
    p.expect_silence(&flipped, quiet);
    // Garbage and truncation.
    p.expect_silence(b"hello", quiet);
    p.expect_silence(&[0u8; 200], quiet);
    let t = p.update(&k, &[publish(9, 4, 1, 5)]);
    p.expect_silence(&t[..t.len() - 1], quiet);
    // Replay of the genuine datagram.
    p.expect_silence(&good, quiet);
    // Authenticated but stamped an hour ago.
    p.seq += 1;
    let mut buf = Vec::new();
    let mut w = Writer::new(
        &mut buf,
        Kind::Update,
        p.sender,
        p.seq,
        wire::unix_micros() - 3_600_000_000,
    );
    w.update(&publish(9, 5, 1, 5));
    let old = w.finish(&k).to_vec();
    p.expect_silence(&old, quiet);
    // A reply sent to the service (wrong direction), correctly signed.
    let mut w = Writer::new(
        &mut buf,
        Kind::UpdateReply,
        p.sender,
        p.seq + 1,
        wire::unix_micros(),
    );
    w.reply(&wire::ReplyEntry {
        group: 9,
        member: 6,
        mi: 1,
        n: 1,
        applied: Applied::Accepted,
        mean: Some(1.0),
    });
    let reflected = w.finish(&k).to_vec();
    p.expect_silence(&reflected, quiet);
    // Authenticated but malformed (a leave must carry value 0).
    let bad = p.update(
        &k,
        &[UpdateEntry {
            op: Op::Leave,
            group: 9,
            member: 1,
            mi: 0,
            value: 7,
        }],
    );
    p.expect_silence(&bad, quiet);

    // Nothing above reached the core: the group still has one member at 1000.
    let next = p.update(&k, &[publish(9, 1, 2, 1000)]);
    let r = wire::open(&k, &p.exchange(&next))
        .unwrap()
        .replies()
        .next()
        .unwrap();
    assert_eq!((r.n, r.mean), (1, Some(1000.0)));

    let m = fetch_metrics(srv.addr, &k, Duration::from_secs(2)).unwrap();
    let d = m.dropped;
    // wrong key, flipped bit, and the truncated one (its tag no longer covers what arrived)
    assert_eq!(d.bad_mac, 3, "{d:?}");
    assert_eq!(d.not_jcce, 1, "{d:?}");
    assert_eq!(d.truncated, 1, "{d:?}");
    assert_eq!(d.replayed, 1, "{d:?}");
    assert_eq!(d.clock_skew, 1, "{d:?}");
    assert_eq!(d.unexpected_kind, 1, "{d:?}");
    assert_eq!(d.malformed, 1, "{d:?}");
    assert_eq!(m.entries, 2);
    assert_eq!((m.members, m.groups), (1, 1));
    // Metrics need the key too.
    assert!(fetch_metrics(srv.addr, &wrong, Duration::from_millis(200)).is_err());
    let m = srv.stop();
    assert_eq!(m.dropped.bad_mac, 4);
    assert!(
        m.prometheus()
            .contains("jcce_dropped_total{reason=\"bad_mac\"} 4")
    );
}

/// The service goes away and comes back on the same address with empty state: clients notice
/// (`is_reachable` false), keep accepting publications without blocking, and resume on their
/// own; the aggregate is rebuilt from the next publications.
#[test]
fn service_restart_clients_reconnect() {
    let srv = Running::start("127.0.0.1:0", service(1, 1000));
    let addr = srv.addr;
    let (a, b) = (client(addr), client(addr));
    let (ma, mb) = (a.member(7), b.member(7));
    let mut mi = 0u64;
    let mut step = |ma: &jcce::Member, mb: &jcce::Member| {
        mi += 1;
        ma.publish(mi, 30_000_000);
        mb.publish(mi, 50_000_000);
        std::thread::sleep(Duration::from_millis(10));
        mi
    };
    let both = |ma: &jcce::Member| {
        ma.latest()
            .filter(|g| g.n == 2 && g.age < Duration::from_millis(100))
    };
    let g = wait_for(LIVENESS, || {
        step(&ma, &mb);
        both(&ma)
    })
    .expect("aggregate before restart");
    assert_eq!(g.mean, Some(40_000_000.0));
    assert!(a.is_reachable() && b.is_reachable());

    let before = srv.stop();
    assert!(before.entries > 0);
    wait_for(LIVENESS, || {
        step(&ma, &mb);
        (!a.is_reachable() && !b.is_reachable()).then_some(())
    })
    .expect("clients notice the service is gone");
    assert_eq!(a.reachability(), Reachability::Unreachable);
    // Publishing goes on meanwhile (nothing blocks; the queue coalesces).
    for _ in 0..20 {
        step(&ma, &mb);
    }

    let srv = Running::start(&addr.to_string(), service(1, 1000));
    let g = wait_for(LIVENESS, || {
        let m = step(&ma, &mb);
        both(&ma).filter(|g| g.mi >= m.saturating_sub(5))
    })
    .expect("aggregate after restart");
    assert_eq!(g.mean, Some(40_000_000.0));
    assert!(a.is_reachable() && b.is_reachable());
    assert!(a.stats().sockets >= 2, "{:?}", a.stats());
    let after = srv.stop();
    assert!(after.entries > 0);
    assert_eq!(after.dropped.total(), 0, "{after:?}");
}

/// The `jcce` binary: keygen, serve with a key file, metrics in both formats, clean SIGTERM.
#[test]
fn cli_serve_and_metrics() {
    let exe = env!("CARGO_BIN_EXE_jcce");
    let dir = tempfile::tempdir().unwrap();
    let keyfile = dir.path().join("jointcloud.key");
    let st = std::process::Command::new(exe)
        .args(["keygen", "--out"])
        .arg(&keyfile)
        .status()
        .unwrap();
    assert!(st.success());
    let k = Key::from_file(&keyfile).unwrap();
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = std::process::Command::new(exe)
        .args([
            "serve",
            "--listen",
            &addr,
            "--min-group",
            "2",
            "--member-timeout",
            "2s",
            "--window",
            "2",
        ])
        .arg("--key-file")
        .arg(&keyfile)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sa: std::net::SocketAddr = addr.parse().unwrap();
    let m = wait_for(LIVENESS, || {
        fetch_metrics(sa, &k, Duration::from_millis(100)).ok()
    })
    .expect("service answers");
    assert_eq!(m.min_group, 2);
    let mut p = Peer::new(sa);
    let d = p.update(&k, &[publish(1, 1, 1, 100), publish(1, 2, 1, 300)]);
    let r = p.exchange(&d);
    let replies: Vec<_> = wire::open(&k, &r).unwrap().replies().collect();
    assert_eq!((replies[0].n, replies[0].mean), (1, None));
    assert_eq!((replies[1].n, replies[1].mean), (2, Some(200.0)));
    // window of two MIs: member 1's contribution becomes (100 + 500) / 2
    let d = p.update(&k, &[publish(1, 1, 2, 500)]);
    let r = wire::open(&k, &p.exchange(&d))
        .unwrap()
        .replies()
        .next()
        .unwrap();
    assert_eq!(r.mean, Some((300.0 + 300.0) / 2.0));
    let out = std::process::Command::new(exe)
        .args([
            "metrics",
            "--addr",
            &addr,
            "--format",
            "prometheus",
            "--key-file",
        ])
        .arg(&keyfile)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("jcce_members 2\n"), "{text}");
    assert!(text.contains("jcce_withheld_total 1\n"), "{text}");
    let out = std::process::Command::new(exe)
        .args(["metrics", "--addr", &addr, "--key-file"])
        .arg(&keyfile)
        .output()
        .unwrap();
    let m: jcce::Metrics = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m.entries, 3);
    // The probe joins group 5 through the real client; a second probe running at the same time
    // in another process sees n = 2 at some point.
    let probe = |rate: &str| {
        std::process::Command::new(exe)
            .args([
                "probe", "--addr", &addr, "--group", "5", "--rate", rate, "--mis", "60",
            ])
            .args(["--interval", "10ms", "--key-file"])
            .arg(&keyfile)
            .stderr(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let (p1, p2) = std::thread::scope(|s| {
        let a = s.spawn(|| probe("8mbit"));
        let b = s.spawn(|| probe("24mbit"));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(p1.status.success() && p2.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(p1.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());
    // k = 2 on this service: alone, the mean is withheld; together, it is (1 + 3) / 2 MB/s.
    for l in &lines {
        match l["n"].as_u64().unwrap() {
            1 => assert!(l["mean_bytes_per_s"].is_null(), "{l}"),
            2 => assert_eq!(l["mean_bytes_per_s"].as_f64(), Some(2_000_000.0), "{l}"),
            n => panic!("n = {n}"),
        }
    }
    assert!(lines.iter().any(|l| l["n"] == 2), "{lines:?}");
    // SIGTERM: the service exits cleanly.
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let st = wait_for(LIVENESS, || child.try_wait().unwrap()).expect("service exits");
    assert!(st.success());
}
