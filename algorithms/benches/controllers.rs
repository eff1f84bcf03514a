//! Cost of one report in each algorithm of the registry: `Controller::on_measurement`, the work
//! the agent does per report and flow besides decoding the report and sending the decision.
//!
//! Each controller, with its defaults, first drives one flow on a packet-level path (100 Mbit/s,
//! 20 ms base RTT, a 1-BDP drop-tail buffer, 1448-byte packets; reports on every ACK, every
//! smoothed RTT or every given period, as the controller asks) for 20 s, and every report it is
//! given is recorded. The benchmark then replays the last 10 s of reports to a fresh controller
//! brought to the same state by the first 10 s, and times only `on_measurement`. A controller
//! is deterministic, so the replay makes the decisions the closed loop made, and the time is
//! the controller's alone (the path model costs more than most controllers). vivace-distributed
//! gets the simulator's JCCE core in-process, 1 ms each way, so its row includes the
//! aggregation's bookkeeping but no network.
//!
//! Besides criterion's figures the benchmark prints, per algorithm, the reports per second the
//! flow asked for and what the closed loop achieved: the agent's CPU per flow is the cost per
//! report times the reports per second.

use ccp_algorithms::adapter::TimeSource;
use ccp_algorithms::aggregator::{SharedSim, SimSource, with_source};
use ccp_algorithms::registry::{self, AlgorithmSpec};
use ccp_algorithms::{Controller, Decision, FlowStart, Measurement, ReportPeriod};
use criterion::{Criterion, black_box, criterion_group, criterion_main};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MSS: u32 = 1448;
const BASE_RTT_US: f64 = 20_000.0;
/// 100 Mbit/s in bytes per µs.
const CAPACITY: f64 = 12.5;
/// One BDP at the base RTT, bytes.
const BUFFER: f64 = CAPACITY * BASE_RTT_US;
/// What the application has queued at the sender, bytes (a bulk transfer).
const BACKLOG: u64 = 1 << 30;
/// Warm-up, then the recorded reports that are timed, µs.
const WARM_US: f64 = 10e6;
const RECORD_US: f64 = 10e6;

/// The path's clock, which the simulated JCCE reads.
#[derive(Default)]
struct Clock(AtomicU64);

impl TimeSource for Clock {
    fn now_us(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A controller of `spec` with its defaults and a JCCE of its own on `clock`, and its decision
/// at the flow's start.
fn start(spec: &AlgorithmSpec, clock: &Arc<Clock>) -> (Box<dyn Controller>, Decision) {
    let source = Arc::new(SimSource::new(clock.clone(), 1_000, 1_000, 1).expect("a JCCE core"));
    let mut c = with_source(Some(Arc::new(SharedSim(source))), || {
        (spec.build)(&spec.defaults())
    });
    let d = c.on_start(&START);
    (c, d)
}

const START: FlowStart = FlowStart {
    mss: MSS,
    init_cwnd: 10 * MSS,
    now_us: 0,
};

/// What the next report will carry.
#[derive(Default)]
struct Pending {
    acked: u64,
    rtt_sum: f64,
    rtt_min: f64,
    rtt_max: f64,
    rtt_last: f64,
    samples: u64,
    lost: u64,
}

/// One flow alone on a drop-tail FIFO bottleneck, packet by packet. The sender sends whenever
/// its window has room, at most at its pacing rate; a packet the full buffer drops is declared
/// lost when a packet sent with it would have been acknowledged.
struct Path {
    now: f64,
    period: ReportPeriod,
    cwnd: f64,
    rate: f64,
    srtt: f64,
    in_flight: f64,
    next_send: f64,
    /// When the bottleneck has sent everything it holds.
    busy_until: f64,
    /// (time, RTT) of each acknowledgement to come; time of each loss to be declared.
    acks: VecDeque<(f64, f64)>,
    losses: VecDeque<f64>,
    pending: Pending,
    last_report: f64,
    next_report: f64,
    delivered: u64,
    dropped: u64,
}

impl Path {
    fn new() -> Path {
        Path {
            now: 0.0,
            period: ReportPeriod::PerRtt,
            cwnd: f64::from(START.init_cwnd),
            rate: 0.0,
            srtt: BASE_RTT_US,
            in_flight: 0.0,
            next_send: 0.0,
            busy_until: 0.0,
            acks: VecDeque::new(),
            losses: VecDeque::new(),
            pending: Pending::default(),
            last_report: 0.0,
            next_report: BASE_RTT_US,
            delivered: 0,
            dropped: 0,
        }
    }

    fn apply(&mut self, d: Decision) {
        if let Some(c) = d.cwnd {
            self.cwnd = f64::from(c);
        }
        if let Some(r) = d.rate {
            self.rate = r as f64 / 1e6;
        }
        if let Some(p) = d.report {
            self.period = p;
        }
    }

    fn send(&mut self) {
        let t = self.now;
        let queued = (self.busy_until - t).max(0.0) * CAPACITY;
        let rtt_if_sent = (queued + f64::from(MSS)) / CAPACITY + BASE_RTT_US;
        if queued + f64::from(MSS) > BUFFER {
            self.losses.push_back(t + rtt_if_sent);
            self.dropped += 1;
        } else {
            self.busy_until = self.busy_until.max(t) + f64::from(MSS) / CAPACITY;
            self.acks.push_back((t + rtt_if_sent, rtt_if_sent));
        }
        self.in_flight += f64::from(MSS);
        self.next_send = if self.rate > 0.0 {
            t + f64::from(MSS) / self.rate
        } else {
            t
        };
    }

    fn report(&mut self) -> Measurement {
        let p = std::mem::take(&mut self.pending);
        let interval = (self.now - self.last_report).max(1.0);
        self.last_report = self.now;
        self.next_report = self.now
            + match self.period {
                ReportPeriod::PerAck => f64::INFINITY,
                ReportPeriod::PerRtt => self.srtt,
                ReportPeriod::Micros(us) => us.max(1) as f64,
            };
        let mut m = Measurement {
            now_us: self.now as u64,
            interval_us: interval as u64,
            acked_bytes: p.acked,
            acked_packets: p.acked / u64::from(MSS),
            lost_packets: p.lost,
            rtt_samples: p.samples,
            delivery_rate: (p.acked as f64 / interval * 1e6) as u64,
            bytes_in_flight: self.in_flight as u64,
            // A bulk sender: always more to send.
            bytes_pending: BACKLOG,
            packets_in_flight: (self.in_flight / f64::from(MSS)) as u64,
            cwnd: self.cwnd as u64,
            rate: (self.rate * 1e6) as u64,
            mss: MSS,
            ..Measurement::default()
        };
        m.delivery_rate_max = m.delivery_rate;
        if p.samples > 0 {
            m.rtt_min_us = p.rtt_min as u64;
            m.rtt_max_us = p.rtt_max as u64;
            m.rtt_last_us = p.rtt_last as u64;
            m.rtt_mean_us = (p.rtt_sum / p.samples as f64) as u64;
        }
        m
    }

    /// Run until the next report and return it.
    fn next(&mut self) -> Measurement {
        loop {
            let can_send = self.in_flight + f64::from(MSS) <= self.cwnd.max(f64::from(MSS));
            let t_send = if can_send {
                self.next_send.max(self.now)
            } else {
                f64::INFINITY
            };
            let t_ack = self.acks.front().map_or(f64::INFINITY, |a| a.0);
            let t_loss = self.losses.front().copied().unwrap_or(f64::INFINITY);
            let t = t_send.min(t_ack).min(t_loss).min(self.next_report);
            self.now = t;
            if t == t_ack {
                let (_, rtt) = self.acks.pop_front().expect("an ACK");
                self.in_flight -= f64::from(MSS);
                self.delivered += 1;
                self.srtt += (rtt - self.srtt) / 8.0;
                let p = &mut self.pending;
                p.acked += u64::from(MSS);
                p.rtt_sum += rtt;
                p.rtt_min = if p.samples == 0 {
                    rtt
                } else {
                    p.rtt_min.min(rtt)
                };
                p.rtt_max = p.rtt_max.max(rtt);
                p.rtt_last = rtt;
                p.samples += 1;
                if self.period == ReportPeriod::PerAck {
                    return self.report();
                }
            } else if t == t_loss {
                self.losses.pop_front();
                self.in_flight -= f64::from(MSS);
                self.pending.lost += 1;
            } else if t == self.next_report {
                return self.report();
            } else {
                self.send();
            }
        }
    }
}

/// Every report the closed loop gave `spec`'s controller over `WARM_US + RECORD_US`, and how
/// many of them fall in the warm-up.
struct Recording {
    reports: Vec<Measurement>,
    /// The decision the controller made on each report of the warm-up.
    decisions: Vec<Decision>,
    warm: usize,
    goodput_mbps: f64,
    loss: f64,
}

fn record(spec: &AlgorithmSpec) -> Recording {
    let clock = Arc::new(Clock::default());
    let (mut c, d) = start(spec, &clock);
    let mut path = Path::new();
    path.apply(d);
    let (mut reports, mut decisions, mut warm) = (Vec::new(), Vec::new(), 0);
    let (mut delivered0, mut dropped0) = (0, 0);
    while path.now < WARM_US + RECORD_US {
        let m = path.next();
        if path.now < WARM_US {
            warm += 1;
            (delivered0, dropped0) = (path.delivered, path.dropped);
        }
        clock.0.store(m.now_us, Ordering::Relaxed);
        let d = c.on_measurement(&m);
        if path.now < WARM_US {
            decisions.push(d);
        }
        path.apply(d);
        reports.push(m);
    }
    let (delivered, dropped) = (path.delivered - delivered0, path.dropped - dropped0);
    Recording {
        reports,
        decisions,
        warm,
        goodput_mbps: delivered as f64 * f64::from(MSS) * 8.0 / RECORD_US,
        loss: dropped as f64 / (delivered + dropped).max(1) as f64,
    }
}

/// Replays `rec` to fresh controllers: `iters` timed reports from the recorded part, warming a
/// new controller up (untimed) whenever the recording runs out. The warm-up checks that the
/// controller decides as it did in the closed loop.
fn replay(spec: &AlgorithmSpec, rec: &Recording, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let clock = Arc::new(Clock::default());
        let (mut c, _) = start(spec, &clock);
        for (i, (m, want)) in rec.reports[..rec.warm]
            .iter()
            .zip(&rec.decisions)
            .enumerate()
        {
            clock.0.store(m.now_us, Ordering::Relaxed);
            let d = c.on_measurement(m);
            assert_eq!(
                &d, want,
                "{}: report {i} replayed to a decision of its own",
                spec.name
            );
        }
        let timed = &rec.reports[rec.warm..];
        let n = timed.len().min(left as usize);
        let t0 = Instant::now();
        for m in &timed[..n] {
            clock.0.store(m.now_us, Ordering::Relaxed);
            black_box(c.on_measurement(black_box(m)));
        }
        total += t0.elapsed();
        left -= n as u64;
    }
    total
}

fn controllers(c: &mut Criterion) {
    let mut g = c.benchmark_group("report");
    for spec in registry::all() {
        let rec = record(spec);
        let per_s = (rec.reports.len() - rec.warm) as f64 / (RECORD_US / 1e6);
        eprintln!(
            "{}: {:.0} reports/s, {:.1} Mbit/s, {:.2} % lost (10-20 s of the closed loop)",
            spec.name,
            per_s,
            rec.goodput_mbps,
            rec.loss * 100.0
        );
        g.bench_function(spec.name, |b| {
            b.iter_custom(|iters| replay(spec, &rec, iters))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    targets = controllers
}
criterion_main!(benches);
