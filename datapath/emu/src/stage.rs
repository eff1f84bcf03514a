//! One direction of an emulated path as a chain of stages (link, then loss, then delay with
//! jitter), each a pure function of packet arrivals and a µs clock. Packets move between stages
//! at their scheduled times, not at the time the emulator happens to process them, so lateness
//! of the forwarding loop never accumulates along the chain.

use crate::error::{EmuError, Result};
use crate::link::{Link, LinkConfig};
use crate::log::LogHeader;
use crate::packet::Packet;
use ccp_jitter::{JitterModel, Smooth};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::time::Duration;

/// Counters of one stage or of a whole direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageStats {
    /// Packets that entered.
    pub in_pkts: u64,
    /// Bytes that entered (4 bytes of header per packet).
    pub in_bytes: u64,
    /// Packets that left.
    pub out_pkts: u64,
    /// Bytes that left.
    pub out_bytes: u64,
    /// Packets dropped (queue, AQM or random loss).
    pub dropped_pkts: u64,
    /// Bytes dropped.
    pub dropped_bytes: u64,
    /// Packets that left marked CE by the link.
    pub ce_marked: u64,
}

/// A packet-processing stage driven by a µs clock. Arrivals must come in non-decreasing time
/// order, and `advance(now)` before an arrival at `now`.
pub trait Stage: Send {
    /// A packet arrives at `now`.
    fn arrive(&mut self, now: u64, pkt: Packet);
    /// Process everything due at or before `now`.
    fn advance(&mut self, now: u64);
    /// When `advance` next has something to do, if anything.
    fn next_event(&self) -> Option<u64>;
    /// A packet that left at or before `now`, with its scheduled departure time.
    fn pop(&mut self, now: u64) -> Option<(u64, Packet)>;
    /// Whether the stage will never deliver again (a `--once` trace ended).
    fn finished(&self) -> bool {
        false
    }
    /// Counters.
    fn stats(&self) -> StageStats;
    /// Flush logs.
    fn flush(&mut self) {}
}

/// Fixed one-way delay plus order-preserving jitter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelayConfig {
    /// Fixed one-way delay.
    pub delay: Duration,
    /// Extra delay within [0, jitter], never reordering packets.
    pub jitter: Duration,
    /// How the extra delay varies: smoothly in time (the default) or drawn per packet
    /// (`ccp_jitter` explains the difference).
    pub model: JitterModel,
}

impl DelayConfig {
    /// A fixed delay without jitter.
    pub fn fixed(delay: Duration) -> DelayConfig {
        DelayConfig {
            delay,
            ..DelayConfig::default()
        }
    }
}

/// The delay stage.
pub struct Delay {
    base: u64,
    jitter: u64,
    model: JitterModel,
    smooth: Smooth,
    seed: u64,
    /// Packets drawn so far (the uniform model's stream position).
    drawn: u64,
    last: u64,
    q: VecDeque<(u64, Packet)>,
    stats: StageStats,
}

impl Delay {
    /// A delay stage.
    pub fn new(cfg: DelayConfig, seed: u64) -> Delay {
        let jitter = cfg.jitter.as_micros() as u64;
        Delay {
            base: cfg.delay.as_micros() as u64,
            jitter,
            model: cfg.model,
            smooth: Smooth::new(jitter, 1000, seed),
            seed,
            drawn: 0,
            last: 0,
            q: VecDeque::new(),
            stats: StageStats::default(),
        }
    }

    /// The smooth model's extra delay at time `t`, µs, in [0, jitter].
    pub fn jitter_at(&self, t: u64) -> u64 {
        self.smooth.at(t)
    }

    /// The extra delay of a packet arriving at `now`.
    fn extra(&mut self, now: u64) -> u64 {
        match self.model {
            _ if self.jitter == 0 => 0,
            JitterModel::Smooth => self.smooth.at(now),
            JitterModel::Uniform => {
                self.drawn += 1;
                ccp_jitter::uniform(self.seed, self.jitter, self.drawn)
            }
        }
    }
}

impl Stage for Delay {
    fn arrive(&mut self, now: u64, pkt: Packet) {
        self.stats.in_pkts += 1;
        self.stats.in_bytes += pkt.wire_size() as u64;
        let t = (now + self.base + self.extra(now)).max(self.last);
        self.last = t;
        self.q.push_back((t, pkt));
    }
    fn advance(&mut self, _now: u64) {}
    fn next_event(&self) -> Option<u64> {
        self.q.front().map(|(t, _)| *t)
    }
    fn pop(&mut self, now: u64) -> Option<(u64, Packet)> {
        if self.q.front()?.0 > now {
            return None;
        }
        let (t, p) = self.q.pop_front()?;
        self.stats.out_pkts += 1;
        self.stats.out_bytes += p.wire_size() as u64;
        Some((t, p))
    }
    fn stats(&self) -> StageStats {
        self.stats
    }
}

/// Independent random loss.
pub struct Loss {
    rate: f64,
    rng: StdRng,
    /// Survivors not yet taken: an earlier stage may hand over several in one advance.
    out: VecDeque<(u64, Packet)>,
    stats: StageStats,
}

impl Loss {
    /// Drop each packet with probability `rate`.
    pub fn new(rate: f64, seed: u64) -> Loss {
        Loss {
            rate,
            rng: StdRng::seed_from_u64(seed),
            out: VecDeque::new(),
            stats: StageStats::default(),
        }
    }
}

impl Stage for Loss {
    fn arrive(&mut self, now: u64, pkt: Packet) {
        self.stats.in_pkts += 1;
        self.stats.in_bytes += pkt.wire_size() as u64;
        if self.rng.r#gen::<f64>() < self.rate {
            self.stats.dropped_pkts += 1;
            self.stats.dropped_bytes += pkt.wire_size() as u64;
        } else {
            self.stats.out_pkts += 1;
            self.stats.out_bytes += pkt.wire_size() as u64;
            self.out.push_back((now, pkt));
        }
    }
    fn advance(&mut self, _now: u64) {}
    fn next_event(&self) -> Option<u64> {
        self.out.front().map(|(t, _)| *t)
    }
    fn pop(&mut self, _now: u64) -> Option<(u64, Packet)> {
        self.out.pop_front()
    }
    fn stats(&self) -> StageStats {
        self.stats
    }
}

/// What one direction of a path does: a bottleneck link, random loss, delay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathConfig {
    /// The bottleneck, if any (none: infinitely fast).
    pub link: Option<LinkConfig>,
    /// Independent loss probability, 0..=1, applied after the link.
    pub loss: f64,
    /// Delay applied last.
    pub delay: DelayConfig,
}

impl PathConfig {
    /// Check values a person may have mistyped.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.loss) || self.loss.is_nan() {
            return Err(EmuError::Config(format!(
                "loss rate {} must be between 0 and 1",
                self.loss
            )));
        }
        if let Some(l) = &self.link {
            l.queue.validate()?;
        }
        Ok(())
    }
}

/// One direction: the stages of a `PathConfig`, chained.
pub struct Pipeline {
    stages: Vec<Box<dyn Stage>>,
}

impl Pipeline {
    /// Build the stages of `cfg`, starting at `start` µs.
    pub fn new(
        cfg: &PathConfig,
        start: u64,
        seed: u64,
        header: Option<LogHeader>,
    ) -> Result<Pipeline> {
        cfg.validate()?;
        let mut stages: Vec<Box<dyn Stage>> = Vec::new();
        if let Some(l) = &cfg.link {
            stages.push(Box::new(Link::new(l, start, seed, header)?));
        }
        if cfg.loss > 0.0 {
            stages.push(Box::new(Loss::new(cfg.loss, seed ^ 0x1055)));
        }
        if cfg.delay != DelayConfig::default() {
            stages.push(Box::new(Delay::new(cfg.delay, seed ^ 0xde1a)));
        }
        Ok(Pipeline { stages })
    }

    /// A pipeline of explicit stages (tests).
    pub fn from_stages(stages: Vec<Box<dyn Stage>>) -> Pipeline {
        Pipeline { stages }
    }

    /// A packet enters at `now`. Call `advance(now, ..)` first.
    pub fn arrive(&mut self, now: u64, pkt: Packet, out: &mut impl FnMut(u64, Packet)) {
        match self.stages.first_mut() {
            Some(s) => s.arrive(now, pkt),
            None => out(now, pkt),
        }
    }

    /// Process everything due at or before `now`; packets that leave the last stage go to `out`
    /// with their scheduled departure times.
    pub fn advance(&mut self, now: u64, out: &mut impl FnMut(u64, Packet)) {
        let n = self.stages.len();
        for i in 0..n {
            self.stages[i].advance(now);
            while let Some((t, p)) = self.stages[i].pop(now) {
                if i + 1 < n {
                    self.stages[i + 1].arrive(t, p);
                } else {
                    out(t, p);
                }
            }
        }
    }

    /// The earliest time `advance` has work.
    pub fn next_event(&self) -> Option<u64> {
        self.stages.iter().filter_map(|s| s.next_event()).min()
    }

    /// Whether a stage has finished for good (a `--once` trace ended).
    pub fn finished(&self) -> bool {
        self.stages.iter().any(|s| s.finished())
    }

    /// Counters: packets in at the first stage, out at the last, drops and marks summed.
    pub fn stats(&self) -> StageStats {
        let mut s = StageStats::default();
        if let Some(f) = self.stages.first() {
            s.in_pkts = f.stats().in_pkts;
            s.in_bytes = f.stats().in_bytes;
        }
        if let Some(l) = self.stages.last() {
            s.out_pkts = l.stats().out_pkts;
            s.out_bytes = l.stats().out_bytes;
        }
        for st in &self.stages {
            let x = st.stats();
            s.dropped_pkts += x.dropped_pkts;
            s.dropped_bytes += x.dropped_bytes;
            s.ce_marked += x.ce_marked;
        }
        s
    }

    /// Flush logs.
    pub fn flush(&mut self) {
        for s in &mut self.stages {
            s.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;

    fn run(p: &mut Pipeline, arrivals: &[(u64, usize)], until: u64) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        let mut events: Vec<u64> = arrivals.iter().map(|a| a.0).collect();
        events.push(until);
        let mut ai = 0;
        let mut now = 0;
        loop {
            let next_arrival = arrivals.get(ai).map(|a| a.0);
            let next = [next_arrival, p.next_event(), Some(until)]
                .into_iter()
                .flatten()
                .min()
                .unwrap();
            now = now.max(next);
            p.advance(now, &mut |t, pk: Packet| out.push((t, pk.len())));
            while ai < arrivals.len() && arrivals[ai].0 <= now {
                p.arrive(now, Packet::zeroed(arrivals[ai].1), &mut |t, pk: Packet| {
                    out.push((t, pk.len()))
                });
                ai += 1;
            }
            p.advance(now, &mut |t, pk: Packet| out.push((t, pk.len())));
            if now >= until {
                return out;
            }
        }
    }

    #[test]
    fn link_then_delay_schedules_precisely() {
        let cfg = PathConfig {
            link: Some(LinkConfig::trace(
                Trace::from_ms("t", vec![1, 2, 2, 5, 10]).unwrap(),
            )),
            loss: 0.0,
            delay: DelayConfig::fixed(Duration::from_millis(20)),
        };
        let mut p = Pipeline::new(&cfg, 0, 1, None).unwrap();
        let out = run(&mut p, &[(0, 1500), (0, 996), (3000, 100)], 100_000);
        assert_eq!(out, vec![(21_000, 1500), (22_000, 996), (25_000, 100)]);
    }

    #[test]
    fn jitter_preserves_order_and_stays_in_range() {
        let d = Delay::new(
            DelayConfig {
                delay: Duration::from_millis(10),
                jitter: Duration::from_millis(20),
                model: JitterModel::Smooth,
            },
            42,
        );
        let mut lo = u64::MAX;
        let mut hi = 0;
        for t in (0..10_000_000).step_by(997) {
            let j = d.jitter_at(t);
            lo = lo.min(j);
            hi = hi.max(j);
            assert!(j <= 20_000);
        }
        assert!(lo < 2_000 && hi > 18_000, "{lo} {hi}");
        let mut p = Pipeline::from_stages(vec![Box::new(d)]);
        let arrivals: Vec<(u64, usize)> = (0..5000).map(|i| (i * 100, 100)).collect();
        let out = run(&mut p, &arrivals, 2_000_000);
        assert_eq!(out.len(), 5000);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
        for (i, (t, _)) in out.iter().enumerate() {
            let sent = i as u64 * 100;
            assert!(*t >= sent + 10_000 && *t <= sent + 30_000, "{i}: {t}");
        }
    }

    #[test]
    fn uniform_jitter_is_drawn_per_packet_and_keeps_order() {
        // Packets 5 ms apart, farther than the 2-ms span: each shows its own draw, over the span.
        let cfg = DelayConfig {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(2),
            model: JitterModel::Uniform,
        };
        let mut p = Pipeline::from_stages(vec![Box::new(Delay::new(cfg, 5))]);
        let arrivals: Vec<(u64, usize)> = (0..2000).map(|i| (i * 5_000, 100)).collect();
        let out = run(&mut p, &arrivals, 20_000_000);
        assert_eq!(out.len(), 2000);
        let extra: Vec<u64> = out
            .iter()
            .enumerate()
            .map(|(i, (t, _))| t - i as u64 * 5_000 - 10_000)
            .collect();
        assert!(extra.iter().all(|&e| e <= 2_000));
        let mean = extra.iter().sum::<u64>() as f64 / 2000.0;
        assert!((mean - 1_000.0).abs() < 60.0, "{mean}");
        assert!(extra.iter().filter(|&&e| e < 200).count() > 100);
        // Packets 100 µs apart: order kept, and most wait for the one ahead near the top.
        let mut p = Pipeline::from_stages(vec![Box::new(Delay::new(cfg, 5))]);
        let arrivals: Vec<(u64, usize)> = (0..5000).map(|i| (i * 100, 100)).collect();
        let out = run(&mut p, &arrivals, 2_000_000);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
        let mean = out
            .iter()
            .enumerate()
            .map(|(i, (t, _))| (t - i as u64 * 100 - 10_000) as f64)
            .sum::<f64>()
            / 5000.0;
        assert!(mean > 1_400.0, "{mean}");
    }

    #[test]
    fn loss_is_within_bounds() {
        let mut p = Pipeline::from_stages(vec![Box::new(Loss::new(0.1, 9))]);
        let arrivals: Vec<(u64, usize)> = (0..100_000).map(|i| (i, 100)).collect();
        let out = run(&mut p, &arrivals, 200_000);
        let lost = 100_000 - out.len();
        // Binomial(100000, 0.1): sd ≈ 95; allow 5 sd.
        assert!((9525..=10475).contains(&lost), "{lost}");
    }

    #[test]
    fn loss_after_a_link_keeps_every_packet_the_link_releases_at_once() {
        // Opportunities at 1, 2, 2, 5 and 10 ms; the pipeline is advanced only at 50 ms, so the
        // link hands four packets to the loss stage in one advance. A loss rate too small to
        // draw a drop must let all four through, at their own times.
        let cfg = PathConfig {
            link: Some(LinkConfig::trace(
                Trace::from_ms("t", vec![1, 2, 2, 5, 10]).unwrap(),
            )),
            loss: 1e-12,
            delay: DelayConfig::fixed(Duration::from_millis(20)),
        };
        let mut p = Pipeline::new(&cfg, 0, 1, None).unwrap();
        let mut out = Vec::new();
        for len in [1500, 1500, 1500, 1500] {
            p.arrive(0, Packet::zeroed(len), &mut |t, pk: Packet| {
                out.push((t, pk.len()))
            });
        }
        p.advance(50_000, &mut |t, pk: Packet| out.push((t, pk.len())));
        assert_eq!(
            out,
            vec![
                (21_000, 1500),
                (22_000, 1500),
                (22_000, 1500),
                (25_000, 1500)
            ]
        );
        let s = p.stats();
        assert_eq!((s.in_pkts, s.out_pkts, s.dropped_pkts), (4, 4, 0));
    }

    #[test]
    fn bad_loss_rate_is_an_error() {
        let cfg = PathConfig {
            loss: 1.5,
            ..Default::default()
        };
        assert!(Pipeline::new(&cfg, 0, 1, None).is_err());
    }
}
