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

/// The relative one-way delay of one flow, µs: each sample is the receiver's receive timestamp
/// minus the sender's send timestamp of one packet (wrapping u32 arithmetic, both clocks with
/// arbitrary origins), and what a sample yields is its excess over the smallest the flow has
/// seen. The subtraction removes the constant offset between the two clocks (not a drift
/// between their rates, which the excess accumulates: a few ppm, µs per second), leaving the
/// forward path's queueing. Differences are taken against the current minimum, so the raw
/// values may wrap any number of times; an excess must stay below 2³¹ µs (35 min).
#[derive(Clone, Debug, Default)]
pub struct OneWayDelay {
    /// Smallest raw sample (`recv - send`, wrapping) so far.
    min_raw: Option<u32>,
    sum: u64,
    samples: u64,
    /// Sum and count of the excesses since the last [`OneWayDelay::take_interval_mean`].
    interval_sum: u64,
    interval_samples: u64,
}

impl OneWayDelay {
    /// Takes the send and receive timestamps of one packet; returns the sample's excess over
    /// the smallest one-way delay seen (0 for a new smallest).
    pub fn update(&mut self, send_ts: u32, recv_ts: u32) -> u64 {
        let raw = recv_ts.wrapping_sub(send_ts);
        let excess = match self.min_raw {
            Some(m) if raw.wrapping_sub(m) as i32 >= 0 => u64::from(raw.wrapping_sub(m)),
            _ => {
                self.min_raw = Some(raw);
                0
            }
        };
        self.sum += excess;
        self.samples += 1;
        self.interval_sum += excess;
        self.interval_samples += 1;
        excess
    }

    /// Mean excess of the samples taken since the previous call (or since the start), µs, and
    /// starts a new interval; None if no sample came in the interval. Each sample's excess is
    /// over the smallest one-way delay seen up to that sample, as [`OneWayDelay::update`]
    /// returned it.
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
        let mut d = OneWayDelay::default();
        assert_eq!(d.mean(), None);
        let at = |send: u32, owd: u32| (send, send.wrapping_add(offset).wrapping_add(owd));
        let (s, r) = at(1_000, 500);
        assert_eq!(d.update(s, r), 0);
        let (s, r) = at(2_000, 900);
        assert_eq!(d.update(s, r), 400);
        // A smaller delay becomes the new reference.
        let (s, r) = at(3_000, 200);
        assert_eq!(d.update(s, r), 0);
        let (s, r) = at(4_000, 1_200);
        assert_eq!(d.update(s, r), 1_000);
        // Send timestamps wrap too.
        let (s, r) = at(u32::MAX - 10, 250);
        assert_eq!(d.update(s, r), 50);
        let (s, r) = at(5, 200);
        assert_eq!(d.update(s, r), 0);
        assert_eq!(d.samples(), 6);
        assert_eq!(d.mean(), Some(1_450.0 / 6.0));
    }

    #[test]
    fn interval_mean_covers_only_the_samples_since_the_last_call() {
        let mut d = OneWayDelay::default();
        assert_eq!(d.take_interval_mean(), None);
        // Raw delay 1000 µs is the base; then 400 and 800 µs of forward queueing.
        d.update(0, 1_000);
        d.update(10, 1_410);
        d.update(20, 1_820);
        assert_eq!(d.take_interval_mean(), Some(1_200.0 / 3.0));
        // Nothing since: no figure for the interval (not a stale one, not zero).
        assert_eq!(d.take_interval_mean(), None);
        d.update(30, 1_330);
        d.update(40, 1_040);
        assert_eq!(d.take_interval_mean(), Some(150.0));
        // The whole-flow mean still covers every sample.
        assert_eq!(d.samples(), 5);
        assert_eq!(d.mean(), Some(1_500.0 / 5.0));
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
