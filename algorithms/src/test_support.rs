//! What the algorithms' unit tests share: the flow they start and the report of acknowledged
//! and lost data at one RTT that most of them build theirs on.

use crate::controller::{Controller, FlowStart, Measurement};

/// The MSS of the test flows, bytes.
pub const MSS: u64 = 1448;

/// The start of a test flow: time 0, an MSS of [`MSS`], a 10-packet initial window.
pub const START: FlowStart = FlowStart {
    mss: MSS as u32,
    init_cwnd: 14480,
    now_us: 0,
};

/// `c` with a flow started at [`START`].
pub fn started<C: Controller>(mut c: C) -> C {
    c.on_start(&START);
    c
}

/// A report at `now` (one `rtt` after the last) acknowledging `acked` bytes, `acked / MSS`
/// packets, with as many RTT samples (at least one), all `rtt` µs, and `lost` packets lost.
pub fn report(now: u64, acked: u64, lost: u64, rtt: u64) -> Measurement {
    Measurement {
        now_us: now,
        interval_us: rtt,
        acked_bytes: acked,
        acked_packets: acked / MSS,
        lost_packets: lost,
        rtt_min_us: rtt,
        rtt_mean_us: rtt,
        rtt_max_us: rtt,
        rtt_last_us: rtt,
        rtt_samples: (acked / MSS).max(1),
        mss: MSS as u32,
        ..Measurement::default()
    }
}

/// `m` as a flow whose window of `cwnd` bytes limits it reports it: the window was full before
/// the report's ACKs, so the bytes in flight at its last ACK are the window less what it
/// acknowledged.
pub fn window_full(mut m: Measurement, cwnd: u32) -> Measurement {
    m.bytes_in_flight = u64::from(cwnd).saturating_sub(m.acked_bytes);
    m
}
