//! Cost of one `Engine::invoke` (one ACK) for each of the five test programs,
//! one connection, virtual clock advancing 10 µs per ACK.

use ccp_engine::{Clock, DatapathOps, Engine, EngineConfig, FlowInfo, Primitives};
use criterion::{BenchmarkId, Criterion, black_box, criterion_group, criterion_main};
use portus::serialize::{changeprog, install, serialize};
use std::cell::Cell;
use std::rc::Rc;

// shared with the differential test, which also uses the alternative program
#[allow(dead_code)]
#[path = "../tests/common/programs.rs"]
mod programs;

#[derive(Default)]
struct VClock(Cell<u64>);

impl Clock for VClock {
    fn now_ns(&self) -> u64 {
        self.0.get()
    }
}

/// Accepts everything, keeps only counters.
#[derive(Default)]
struct Sink {
    bytes: usize,
    calls: u64,
}

impl DatapathOps for Sink {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        self.bytes += msg.len();
        Ok(())
    }
    fn set_cwnd(&mut self, _: u32, cwnd: u32) {
        self.calls += u64::from(cwnd & 1);
    }
    fn set_rate_abs(&mut self, _: u32, rate: u32) {
        self.calls += u64::from(rate & 1);
    }
}

fn setup(src: &str) -> (Engine<Rc<VClock>>, Rc<VClock>, Sink, u32) {
    let (bin, scope) = portus::lang::compile(src.as_bytes(), &[]).expect("compiles");
    let uid = scope.program_uid;
    let msg = install::Msg {
        sid: 0,
        program_uid: uid,
        num_events: bin.events.len() as u32,
        num_instrs: bin.instrs.len() as u32,
        instrs: bin,
    };
    let clock = Rc::new(VClock(Cell::new(1_000_000_000)));
    let mut engine = Engine::new(clock.clone(), EngineConfig::default());
    let mut sink = Sink::default();
    engine.init(&mut sink).unwrap();
    engine
        .read_msg(&mut sink, &serialize(&msg).unwrap())
        .unwrap();
    let sid = engine
        .connection_start(&mut sink, FlowInfo::default())
        .unwrap();
    let change = changeprog::Msg {
        sid,
        program_uid: uid,
        num_fields: 0,
        fields: vec![],
    };
    engine
        .read_msg(&mut sink, &serialize(&change).unwrap())
        .unwrap();
    (engine, clock, sink, sid)
}

fn bench(c: &mut Criterion) {
    let cases = [
        ("a_per_ack_report", programs::PER_ACK),
        ("b_per_rtt_ewma", programs::PER_RTT),
        ("c_loss_fallthrough", programs::LOSS),
        ("d_rate_pulse", programs::PULSE),
        ("e_control_registers", programs::CONTROLLED),
    ];
    let mut group = c.benchmark_group("invoke");
    for (name, src) in cases {
        let (mut engine, clock, mut sink, sid) = setup(src);
        let mut i = 0u32;
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                clock.0.set(clock.0.get() + 10_000);
                let prims = Primitives {
                    bytes_acked: 1448,
                    packets_acked: 1,
                    lost_pkts_sample: u32::from(i.is_multiple_of(64)),
                    rtt_sample_us: 20_000 + u64::from(i % 1000),
                    rate_outgoing: 12_500_000,
                    rate_incoming: 12_000_000,
                    bytes_in_flight: 14_480,
                    packets_in_flight: 10,
                    snd_cwnd: 14_480 + (i % 100) * 1448,
                    bytes_pending: 100_000,
                    ..Default::default()
                };
                let r = engine.invoke(&mut sink, black_box(sid), black_box(&prims));
                black_box(r.is_ok())
            })
        });
        black_box(sink.bytes + sink.calls as usize);
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
