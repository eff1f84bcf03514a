//! Server-side CPU cost without the network: the core alone, and one 32-update datagram through
//! the whole service (authenticate, replay check, 32 core updates, build and sign the reply).
//! 10,000 members in 100 groups, as in the loopback benchmark (`jcce bench`).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use jcce::core::{Core, CoreConfig};
use jcce::server::{Service, ServiceConfig};
use jcce::wire::{self, Key, Kind, Op, UpdateEntry, Writer};

const MEMBERS: u64 = 10_000;
const GROUPS: u64 = 100;
const BATCH: u64 = 32;

fn core(c: &mut Criterion) {
    let mut g = c.benchmark_group("core");
    g.throughput(Throughput::Elements(1));
    g.bench_function("publish_10k_members_100_groups", |b| {
        let mut core = Core::new(CoreConfig::default()).unwrap();
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            let m = i % MEMBERS;
            core.publish(i, m % GROUPS, m, i / MEMBERS + 1, 1_000_000 + m)
        });
    });
    g.finish();
}

fn service(c: &mut Criterion) {
    let key = Key::from_bytes(&[1; 32]).unwrap();
    let cfg = ServiceConfig {
        max_clock_skew_us: u64::MAX / 4,
        ..ServiceConfig::default()
    };
    let mut g = c.benchmark_group("service");
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function("datagram_of_32_updates", |b| {
        let mut svc = Service::new(key.clone(), &cfg).unwrap();
        let mut buf = Vec::new();
        let mut seq = 0u64;
        let mut next = 0u64;
        b.iter_batched(
            || {
                seq += 1;
                let mut w = Writer::new(&mut buf, Kind::Update, 9, seq, 1);
                for _ in 0..BATCH {
                    next += 1;
                    let m = next % MEMBERS;
                    w.update(&UpdateEntry {
                        op: Op::Publish,
                        group: m % GROUPS,
                        member: m,
                        mi: next / MEMBERS + 1,
                        value: 1_000_000 + m,
                    });
                }
                (w.finish(&key).to_vec(), seq)
            },
            |(d, t)| svc.handle(&d, t, 1).map(|r| r.len()),
            criterion::BatchSize::SmallInput,
        );
    });
    g.bench_function("hmac_sha256_1344_bytes", |b| {
        let d = vec![7u8; HEADER + 32 * wire::ENTRY_LEN];
        b.iter(|| key.tag(&d));
    });
    g.finish();
}

const HEADER: usize = wire::HEADER_LEN;

criterion_group!(benches, core, service);
criterion_main!(benches);
