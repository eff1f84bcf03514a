//! Round-trip time estimation and the timer periods derived from it (RFC 9002 §5–6): latest,
//! minimum and smoothed RTT, RTT variation, the loss-detection time threshold and the probe
//! timeout; and the relative one-way delay ([`OneWayDelay`]).

/// Timer granularity, µs (RFC 9002's kGranularity).
pub const GRANULARITY_US: u64 = 1_000;
/// Maximum ACK delay assumed of the receiver, µs. It acks at least every 1 ms, but a busy or
/// virtualised host may wake its timer a scheduler tick (4 ms at HZ=250) late; 5 ms keeps
/// probes from firing on such hiccups.
pub const MAX_ACK_DELAY_US: u64 = 5_000;
/// RTT assumed before any sample, µs (RFC 9002's kInitialRtt).
pub const INITIAL_RTT_US: u64 = 333_000;

/// RTT state of one flow, µs.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    latest: u64,
    min: u64,
    smoothed: u64,
    var: u64,
    has_sample: bool,
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator {
            latest: 0,
            min: 0,
            smoothed: INITIAL_RTT_US,
            var: INITIAL_RTT_US / 2,
            has_sample: false,
        }
    }
}

impl RttEstimator {
    /// Takes one sample: `latest` measured RTT and the peer's reported `ack_delay`. Returns the
    /// ack-delay-adjusted sample (what controllers are told).
    pub fn update(&mut self, latest: u64, ack_delay: u64) -> u64 {
        let latest = latest.max(1);
        self.latest = latest;
        if !self.has_sample {
            self.has_sample = true;
            self.min = latest;
            self.smoothed = latest;
            self.var = latest / 2;
            return latest;
        }
        self.min = self.min.min(latest);
        let ack_delay = ack_delay.min(MAX_ACK_DELAY_US);
        let adjusted = if latest >= self.min + ack_delay {
            latest - ack_delay
        } else {
            latest
        };
        let dev = self.smoothed.abs_diff(adjusted);
        self.var = (3 * self.var + dev) / 4;
        self.smoothed = (7 * self.smoothed + adjusted) / 8;
        adjusted
    }

    /// Whether any sample was taken.
    pub fn has_sample(&self) -> bool {
        self.has_sample
    }

    /// Smoothed RTT.
    pub fn smoothed(&self) -> u64 {
        self.smoothed
    }

    /// RTT variation.
    pub fn var(&self) -> u64 {
        self.var
    }

    /// Minimum RTT seen (0 before any sample).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// Latest sample (0 before any sample).
    pub fn latest(&self) -> u64 {
        self.latest
    }

    /// Time threshold for loss detection: 9/8 · max(smoothed, latest), at least the granularity.
    pub fn loss_delay(&self) -> u64 {
        (self.smoothed.max(self.latest) * 9 / 8).max(GRANULARITY_US)
    }

    /// Probe timeout before backoff: smoothed + max(4·var, granularity) + max ACK delay.
    pub fn pto(&self) -> u64 {
        self.smoothed + (4 * self.var).max(GRANULARITY_US) + MAX_ACK_DELAY_US
    }
}

/// Buckets of the one-way delay's base history ([`OneWayDelay`]): the base is the smallest
/// raw one-way delay of the current bucket and the `OWD_BASE_BUCKETS - 1` before it. Ten, as
/// LEDBAT's base-delay history keeps (RFC 6817 §3.4.2, BASE_HISTORY = 10): with ten buckets the
/// window's span varies by a tenth as buckets turn over (between 0.9 and 1.0 of the window).
pub const OWD_BASE_BUCKETS: usize = 10;

/// Default span of the one-way delay's base window, µs: 10 s, ten buckets of 1 s (LEDBAT's ten
/// one-minute buckets, RFC 6817 §3.4.2, scaled down 60×). Why 10 s, for clock rates that differ
/// by ε (crystal oscillators: 10–100 ppm):
/// * Drift. A receiver clock that gains makes the raw one-way delay grow by ε per second; the
///   base is at most one window old, so the excess reads at most ε·10 s high: 1 ms at 100 ppm,
///   0.1 ms at 10 ppm, under the queues a delay signal on a WAN or emulated bottleneck works
///   with (the RTCP emulator runs hold ≈ 10 ms of forward queue; a 20 Mbit/s link's 100-packet
///   buffer is 60 ms). A flow-long minimum reads ε·t high instead: 6 ms after a minute, 60 ms
///   after ten at 100 ppm.
/// * Standing queues. A queue that never empties for a whole window becomes the base: one
///   lasting under 9 s is never absorbed, one lasting 10 s or more is (the excess then counts
///   only what lies above the queue's own floor); between the two it depends on where the
///   bucket edges fall. A loss-based flow over a buffer deeper than the path's BDP keeps such a
///   queue (measured: one Reno flow over an emulated 20 Mbit/s link, 20 ms RTT, 100-packet
///   buffer, whose queue stopped draining 10 s in; 20–25 s in, the excess's median read
///   23.5 ms with this window against 46.7 ms with window 0). A longer window keeps longer
///   standing queues at ε·window of drift error; a shorter one bounds the drift error tighter
///   (100 ms: 10 µs at 100 ppm, the scale of a datacenter queue) but forgets any queue that
///   stands longer than the window.
///   Hosts with synchronised clock rates (one host, as on loopback or the emulator, or PTP)
///   have no drift: window 0 keeps the flow-long minimum there.
pub const DEFAULT_OWD_BASE_WINDOW_US: u64 = 10_000_000;

/// The relative one-way delay of one flow, µs: each sample is the receiver's receive timestamp
/// minus the sender's send timestamp of one packet (wrapping u32 arithmetic, both clocks with
/// arbitrary origins), and what a sample yields is its excess over the base: the smallest raw
/// sample of a sliding window of the sender's time (see [`DEFAULT_OWD_BASE_WINDOW_US`] for the
/// span and why), or of the flow's whole life with window 0. The subtraction removes the
/// constant offset between the two clocks, leaving the forward path's queueing; the window
/// bounds what a drift between the clocks' rates adds to it:
/// * receiver clock fast (the raw delay grows at ε): at most ε × window (a flow-long minimum
///   accumulates ε × the flow's age);
/// * receiver clock slow (the raw delay falls at ε): each new queue-free sample is a new
///   smallest, so the base follows the clock down under either rule, and the excess reads low
///   by ε × the time since the queue was last empty (a queue standing for T seconds is worn
///   down by ε·T; no minimum can tell that from a shrinking queue).
///
/// The history is [`OWD_BASE_BUCKETS`] buckets of window/[`OWD_BASE_BUCKETS`] each, holding
/// the smallest sample that arrived in it; a sample costs O(1) and no allocation, and the
/// minimum of the older buckets is recomputed (O(buckets)) once per bucket. Differences are
/// taken against the base, so the raw values may wrap any number of times; an excess must stay
/// below 2³¹ µs (35 min).
#[derive(Clone, Debug)]
pub struct OneWayDelay {
    /// Length of one bucket, µs; 0: a single bucket for the flow's whole life.
    bucket_us: u64,
    /// Smallest raw sample (`recv - send`, wrapping) of each bucket, a ring; None: no sample.
    buckets: [Option<u32>; OWD_BASE_BUCKETS],
    /// Index of the current bucket in `buckets`.
    current: usize,
    /// Sender time at which the current bucket ends, µs (None before the first sample).
    current_end_us: Option<u64>,
    /// Smallest raw sample of the buckets before the current one.
    older_min: Option<u32>,
    sum: u64,
    samples: u64,
    /// Sum and count of the excesses since the last [`OneWayDelay::take_interval_mean`].
    interval_sum: u64,
    interval_samples: u64,
}

impl Default for OneWayDelay {
    fn default() -> Self {
        OneWayDelay::new(DEFAULT_OWD_BASE_WINDOW_US)
    }
}

/// Whether raw delay `a` is smaller than `b`, both wrapping u32 values within 2³¹ of each
/// other.
fn below(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// The smaller of two optional raw delays (None: no sample).
fn smaller(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if below(y, x) { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

impl OneWayDelay {
    /// An estimator whose base is the smallest sample of the last `window_us` µs of sender
    /// time (0: of the flow's whole life). A window shorter than [`OWD_BASE_BUCKETS`] µs is
    /// taken as that.
    pub fn new(window_us: u64) -> Self {
        OneWayDelay {
            bucket_us: if window_us == 0 {
                0
            } else {
                (window_us / OWD_BASE_BUCKETS as u64).max(1)
            },
            buckets: [None; OWD_BASE_BUCKETS],
            current: 0,
            current_end_us: None,
            older_min: None,
            sum: 0,
            samples: 0,
            interval_sum: 0,
            interval_samples: 0,
        }
    }

    /// Span of the base window, µs (0: the flow's whole life).
    pub fn window_us(&self) -> u64 {
        self.bucket_us * OWD_BASE_BUCKETS as u64
    }

    /// Takes the sample time `now_us` (sender's clock, µs, non-decreasing) and the send and
    /// receive timestamps of one packet; returns the sample's excess over the base (0 for a new
    /// smallest).
    pub fn update(&mut self, now_us: u64, send_ts: u32, recv_ts: u32) -> u64 {
        let raw = recv_ts.wrapping_sub(send_ts);
        if self.bucket_us > 0 {
            self.turn(now_us);
        }
        let cur = smaller(self.buckets[self.current], Some(raw));
        self.buckets[self.current] = cur;
        let base = smaller(self.older_min, cur).unwrap_or(raw);
        let excess = if below(raw, base) {
            0
        } else {
            u64::from(raw.wrapping_sub(base))
        };
        self.sum += excess;
        self.samples += 1;
        self.interval_sum += excess;
        self.interval_samples += 1;
        excess
    }

    /// Starts the buckets `now_us` has reached, dropping the oldest ones.
    fn turn(&mut self, now_us: u64) {
        let Some(end) = self.current_end_us else {
            self.current_end_us = Some(now_us.saturating_add(self.bucket_us));
            return;
        };
        if now_us < end {
            return;
        }
        let started = (now_us - end) / self.bucket_us + 1;
        if started >= OWD_BASE_BUCKETS as u64 {
            // Silent for a whole window: nothing of the history is recent enough.
            self.buckets = [None; OWD_BASE_BUCKETS];
        } else {
            for _ in 0..started {
                self.current = (self.current + 1) % OWD_BASE_BUCKETS;
                self.buckets[self.current] = None;
            }
        }
        self.current_end_us = Some(end.saturating_add(started * self.bucket_us));
        let current = self.current;
        self.older_min = self
            .buckets
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != current)
            .fold(None, |m, (_, &b)| smaller(m, b));
    }

    /// Mean excess of the samples taken since the previous call (or since the start), µs, and
    /// starts a new interval; None if no sample came in the interval. Each sample's excess is
    /// over the base at that sample, as [`OneWayDelay::update`] returned it.
    pub fn take_interval_mean(&mut self) -> Option<f64> {
        let mean = (self.interval_samples > 0)
            .then(|| self.interval_sum as f64 / self.interval_samples as f64);
        self.interval_sum = 0;
        self.interval_samples = 0;
        mean
    }

    /// Samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Mean excess over all samples, µs (None before any).
    pub fn mean(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.sum as f64 / self.samples as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_way_delay_is_relative_to_the_smallest_and_survives_wrapping() {
        // The receiver's clock is ahead by an offset that puts the raw delays across the
        // u32 wrap.
        let offset = u32::MAX - 300;
        let mut d = OneWayDelay::new(0);
        assert_eq!(d.mean(), None);
        let at = |send: u32, owd: u32| (send, send.wrapping_add(offset).wrapping_add(owd));
        let (s, r) = at(1_000, 500);
        assert_eq!(d.update(0, s, r), 0);
        let (s, r) = at(2_000, 900);
        assert_eq!(d.update(0, s, r), 400);
        // A smaller delay becomes the new reference.
        let (s, r) = at(3_000, 200);
        assert_eq!(d.update(0, s, r), 0);
        let (s, r) = at(4_000, 1_200);
        assert_eq!(d.update(0, s, r), 1_000);
        // Send timestamps wrap too.
        let (s, r) = at(u32::MAX - 10, 250);
        assert_eq!(d.update(0, s, r), 50);
        let (s, r) = at(5, 200);
        assert_eq!(d.update(0, s, r), 0);
        assert_eq!(d.samples(), 6);
        assert_eq!(d.mean(), Some(1_450.0 / 6.0));
    }

    #[test]
    fn interval_mean_covers_only_the_samples_since_the_last_call() {
        let mut d = OneWayDelay::default();
        assert_eq!(d.take_interval_mean(), None);
        // Raw delay 1000 µs is the base; then 400 and 800 µs of forward queueing.
        d.update(0, 0, 1_000);
        d.update(10, 10, 1_410);
        d.update(20, 20, 1_820);
        assert_eq!(d.take_interval_mean(), Some(1_200.0 / 3.0));
        // Nothing since: no figure for the interval (not a stale one, not zero).
        assert_eq!(d.take_interval_mean(), None);
        d.update(30, 30, 1_330);
        d.update(40, 40, 1_040);
        assert_eq!(d.take_interval_mean(), Some(150.0));
        // The whole-flow mean still covers every sample.
        assert_eq!(d.samples(), 5);
        assert_eq!(d.mean(), Some(1_500.0 / 5.0));
    }

    #[test]
    fn the_base_is_the_smallest_of_the_last_ten_buckets() {
        // Default window: ten buckets of 1 s, the first starting at the first sample.
        let mut d = OneWayDelay::default();
        assert_eq!(d.window_us(), 10_000_000);
        assert_eq!(d.update(0, 0, 1_000), 0);
        // 500 µs above the base for as long as the 1 000 µs sample is in the window...
        for t in (100_000..10_000_000).step_by(100_000) {
            assert_eq!(d.update(t, 0, 1_500), 500, "at {t} µs");
        }
        // ...which it leaves when the eleventh bucket starts, at 10 s: the base rises to the
        // smallest of the ten buckets since (1 500 µs).
        assert_eq!(d.update(10_000_000, 0, 1_600), 100);
        assert_eq!(d.update(10_000_001, 0, 1_500), 0);
        // A flow silent for a whole window starts a fresh history.
        assert_eq!(d.update(30_000_000, 0, 1_700), 0);
        assert_eq!(d.update(30_000_001, 0, 1_750), 50);
        // Window 0 keeps the flow's smallest whatever the time.
        let mut w = OneWayDelay::new(0);
        assert_eq!(w.window_us(), 0);
        assert_eq!(w.update(0, 0, 1_000), 0);
        assert_eq!(w.update(3_600_000_000, 0, 1_500), 500);
    }

    /// Sender time between samples of the synthetic path, µs (an RTT sample every ms).
    const STEP_US: u64 = 1_000;
    /// Ten minutes of sender time, µs.
    const TEN_MINUTES_US: u64 = 600_000_000;
    /// Largest forward jitter of the synthetic path, µs.
    const JITTER_US: u64 = 50;
    /// Forward queueing of the synthetic queue episodes, µs.
    const QUEUE_US: u64 = 5_000;

    /// One sample of the synthetic path: what the sender sees, and the truth.
    struct Sample {
        t_us: u64,
        send_ts: u32,
        recv_ts: u32,
        /// Forward delay above the path's smallest (queue + jitter), µs of true time.
        true_excess: u64,
    }

    /// A sample every [`STEP_US`] for `duration_us` over a path of 20 ms propagation, 0–50 µs
    /// of jitter (xorshift) and the forward queue `queue(t)`, µs; both clocks start at origins
    /// that make the timestamps wrap, and the receiver's runs `ppm` parts per million fast
    /// (negative: slow).
    fn path(
        ppm: f64,
        duration_us: u64,
        queue: impl Fn(u64) -> u64,
    ) -> impl Iterator<Item = Sample> {
        const SEND_ORIGIN: u64 = u32::MAX as u64 - 1_000_000;
        const RECV_ORIGIN: u64 = 3_000_000_000;
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        (0..duration_us / STEP_US).map(move |i| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let t = i * STEP_US;
            let true_excess = queue(t) + rng % (JITTER_US + 1);
            let arrival = (t + 20_000 + true_excess) as f64;
            let recv = RECV_ORIGIN + (arrival * (1.0 + ppm * 1e-6)).round() as u64;
            Sample {
                t_us: t,
                send_ts: (SEND_ORIGIN + t) as u32,
                recv_ts: recv as u32,
                true_excess,
            }
        })
    }

    /// A 5 ms queue for the last 3 s of every minute (the last one ends at 10 minutes).
    fn minute_episodes(t: u64) -> u64 {
        if t % 60_000_000 >= 57_000_000 {
            QUEUE_US
        } else {
            0
        }
    }

    /// Largest |excess − true excess| of the default window and of the flow-long minimum over
    /// `samples`, and both errors at the last sample, µs.
    fn errors(samples: impl Iterator<Item = Sample>) -> [i64; 4] {
        let mut windowed = OneWayDelay::default();
        let mut flow_long = OneWayDelay::new(0);
        let mut e = [0i64; 4];
        for s in samples {
            let w = windowed.update(s.t_us, s.send_ts, s.recv_ts) as i64 - s.true_excess as i64;
            let f = flow_long.update(s.t_us, s.send_ts, s.recv_ts) as i64 - s.true_excess as i64;
            e = [e[0].max(w.abs()), e[1].max(f.abs()), w, f];
        }
        e
    }

    /// What 100 ppm adds over one default window (10 s), plus 5 µs for rounding the receiver's
    /// clock and its drift over a queued packet's delay, µs.
    const DRIFT_BOUND_US: i64 = 1_005;

    #[test]
    fn a_receiver_clock_100_ppm_fast_stays_within_a_window_of_drift() {
        let [max_w, _, end_w, end_f] = errors(path(100.0, TEN_MINUTES_US, minute_episodes));
        eprintln!("+100 ppm: windowed max error {max_w} µs, at 10 min {end_w}; flow-long {end_f}");
        // The base is at most one window old: 100 ppm × 10 s = 1 ms over the truth at worst,
        // in and out of the queue episodes, for all ten minutes (measured: 1 000 µs; 997 µs
        // at the end).
        assert!(max_w <= DRIFT_BOUND_US, "{max_w} µs");
        // The flow-long minimum stays at the flow's start: 100 ppm × 600 s = 60 ms over the
        // truth at the end (measured: 59 995 µs), twelve times the 5 ms queue.
        assert!(end_f >= 59_000, "{end_f} µs");
    }

    #[test]
    fn a_receiver_clock_100_ppm_slow_stays_within_a_window_of_drift() {
        let [max_w, max_f, end_w, end_f] = errors(path(-100.0, TEN_MINUTES_US, minute_episodes));
        eprintln!("-100 ppm: windowed max error {max_w} µs, at 10 min {end_w}; flow-long {end_f}");
        // The raw delay falls, so each queue-free sample is a new smallest and the base follows
        // the clock down; during an episode the excess reads low by 100 ppm × the time since
        // the queue was empty, 0.3 ms after the 3 s episode, plus up to the path's jitter
        // (measured: 303 µs).
        assert!(max_w <= DRIFT_BOUND_US, "{max_w} µs");
        assert!(
            end_w < 0 && -end_w <= 300 + JITTER_US as i64 + 5,
            "{end_w} µs"
        );
        // The flow-long minimum follows the clock down just the same (the newest queue-free
        // sample is always the smallest): in this direction the two rules agree.
        assert_eq!((max_f, end_f), (max_w, end_w));
    }

    #[test]
    fn a_standing_queue_shorter_than_the_window_is_not_absorbed() {
        // 5 ms of queue standing for 8.9 s, 100 s into the flow; the window's history reaches
        // at least 9 s back, so the base stays below the queue throughout.
        let standing = |t: u64| {
            if (100_000_000..108_900_000).contains(&t) {
                QUEUE_US
            } else {
                0
            }
        };
        for (ppm, low, high) in [(0.0, 0, 0), (100.0, 0, DRIFT_BOUND_US), (-100.0, 895, 0)] {
            let mut d = OneWayDelay::default();
            let mut seen = 0;
            for s in path(ppm, 120_000_000, standing) {
                let excess = d.update(s.t_us, s.send_ts, s.recv_ts);
                if standing(s.t_us) > 0 {
                    seen += 1;
                    // The base is the smallest queue-free sample of the window, up to the
                    // path's jitter above its smallest; 100 ppm fast adds at most a window of
                    // drift, 100 ppm slow takes away at most 100 ppm × 8.9 s.
                    let err = excess as i64 - s.true_excess as i64;
                    assert!(
                        err >= -(JITTER_US as i64) - low && err <= high,
                        "{ppm} ppm, {} µs: {excess} µs for {}",
                        s.t_us,
                        s.true_excess
                    );
                }
            }
            assert_eq!(seen, 8_900);
        }
        // The trade-off: a queue that stands for a whole window becomes the base (here 20 s,
        // read from its 11th second on as its jitter alone), where the flow-long minimum keeps
        // counting it.
        let long = |t: u64| {
            if (100_000_000..120_000_000).contains(&t) {
                QUEUE_US
            } else {
                0
            }
        };
        let mut windowed = OneWayDelay::default();
        let mut flow_long = OneWayDelay::new(0);
        for s in path(0.0, 130_000_000, long) {
            let w = windowed.update(s.t_us, s.send_ts, s.recv_ts);
            let f = flow_long.update(s.t_us, s.send_ts, s.recv_ts);
            if (111_000_000..120_000_000).contains(&s.t_us) {
                assert!(w <= JITTER_US, "{} µs: {w}", s.t_us);
                assert_eq!(f, s.true_excess);
            }
        }
    }

    #[test]
    fn without_drift_the_window_changes_nothing() {
        // Queue episodes of 3 to 8 s (never a whole window) over ten minutes on a path whose
        // clocks agree: every window holds a queue-free sample at the path's smallest, so the
        // windowed base is the flow-long minimum, sample for sample.
        let episodes = |t: u64| {
            let minute = t / 60_000_000;
            let into = t % 60_000_000;
            if into >= 40_000_000 && into < 40_000_000 + (3 + minute % 6) * 1_000_000 {
                QUEUE_US
            } else {
                0
            }
        };
        let mut windowed = OneWayDelay::default();
        let mut flow_long = OneWayDelay::new(0);
        let mut queued = 0;
        for s in path(0.0, TEN_MINUTES_US, episodes) {
            let w = windowed.update(s.t_us, s.send_ts, s.recv_ts);
            let f = flow_long.update(s.t_us, s.send_ts, s.recv_ts);
            assert_eq!(w, f, "at {} µs", s.t_us);
            // Both exact once the path's smallest (zero jitter) was seen.
            if s.t_us >= 1_000_000 {
                assert_eq!(w, s.true_excess, "at {} µs", s.t_us);
            }
            queued += u64::from(s.true_excess >= QUEUE_US);
        }
        assert!(queued >= 50_000, "{queued} queued samples");
        assert_eq!(windowed.mean(), flow_long.mean());
    }

    #[test]
    fn follows_rfc9002() {
        let mut r = RttEstimator::default();
        assert_eq!(r.pto(), 333_000 + 4 * 166_500 + MAX_ACK_DELAY_US);
        assert_eq!(r.update(10_000, 500), 10_000);
        assert_eq!((r.smoothed(), r.var(), r.min()), (10_000, 5_000, 10_000));
        // Ack delay is subtracted only when the result stays above min_rtt.
        assert_eq!(r.update(12_000, 1_000), 11_000);
        assert_eq!(r.update(10_500, 1_000), 10_500);
        assert_eq!(r.min(), 10_000);
        assert!(r.loss_delay() >= r.smoothed() * 9 / 8);
    }
}
