//! Cost of one relative one-way delay sample (`OneWayDelay::update`, once per RTT sample on
//! the sender's ACK path): the default 10 s window of ten buckets against the flow-long
//! minimum (window 0), over a path whose receiver clock runs 100 ppm fast, one sample per
//! 100 µs of sender time with 0–63 µs of jitter.

use ccp_udp::rtt::{DEFAULT_OWD_BASE_WINDOW_US, OneWayDelay};
use criterion::{BenchmarkId, Criterion, black_box, criterion_group, criterion_main};

/// Samples per iteration: 2 s of sender time at one per 100 µs (two bucket turns).
const SAMPLES: u64 = 20_000;

/// (now µs, send timestamp, receive timestamp) of each sample.
fn samples() -> Vec<(u64, u32, u32)> {
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    (0..SAMPLES)
        .map(|i| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let t = i * 100;
            let arrival = t + 20_000 + (rng & 63);
            // 100 ppm fast: 1 µs more per 10 ms.
            let recv = (arrival + arrival / 10_000) as u32;
            (t, t as u32, recv.wrapping_add(3_000_000_000))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let input = samples();
    let mut g = c.benchmark_group("owd_update");
    g.throughput(criterion::Throughput::Elements(SAMPLES));
    for (name, window) in [("window_10s", DEFAULT_OWD_BASE_WINDOW_US), ("flow_long", 0)] {
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            // One estimator across iterations, its clock continuing, so bucket turns keep
            // coming at their real rate.
            let mut d = OneWayDelay::new(window);
            let mut offset = 0u64;
            b.iter(|| {
                let mut sum = 0u64;
                for &(t, s, r) in &input {
                    sum += d.update(offset + t, s, r);
                }
                offset += SAMPLES * 100;
                black_box(sum)
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
