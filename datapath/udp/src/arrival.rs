//! When a received datagram reached its socket, by the kernel's receive timestamp
//! (`SO_TIMESTAMPNS`, [`crate::io::enable_rx_timestamps`]), not when it was read.
//!
//! A datagram that waits in a socket while its reader is busy or descheduled would otherwise
//! carry that wait into every measurement timed by it. The sender times ACKs so (its RTT,
//! one-way-delay and delivery-rate samples); the receiver times DATA so (the receive timestamp
//! it echoes for the one-way delay, and the ACK delay it reports, which the sender takes out of
//! its RTT samples up to [`crate::rtt::MAX_ACK_DELAY_US`]).

/// Longest a received datagram can plausibly have waited in the socket by its kernel timestamp;
/// a longer wait means the wall clock stepped, and the datagram is timed when read.
pub(crate) const MAX_SOCKET_WAIT_NS: u64 = 1_000_000_000;

/// When a datagram of a batch read at `now` (flow clock, µs; `wall_ns` on the wall clock, read
/// with it) reached the socket: `now` less the time it waited there by the kernel's receive
/// timestamp `rx_wall_ns`, or `now` itself without a plausible stamp (none, or one that says
/// the wall clock stepped). Never before `floor` (≤ `now`; the caller's: the previous
/// datagram's time, or the start of the last read that emptied the socket) nor after `now`.
pub(crate) fn arrival_us(rx_wall_ns: Option<u64>, now: u64, wall_ns: u64, floor: u64) -> u64 {
    now.saturating_sub(socket_wait_us(rx_wall_ns, wall_ns).unwrap_or(0))
        .max(floor)
        .min(now)
}

/// How long a datagram stamped `rx_wall_ns` had waited when the wall clock read `wall_ns`, µs;
/// None without a plausible stamp.
fn socket_wait_us(rx_wall_ns: Option<u64>, wall_ns: u64) -> Option<u64> {
    let at = rx_wall_ns?;
    (at <= wall_ns && wall_ns - at < MAX_SOCKET_WAIT_NS).then(|| (wall_ns - at) / 1000)
}

/// Arrival times of one socket's datagrams, in order, and how long they waited to be read.
///
/// Per batch: [`Self::read_began`] before the read, then (if it returned anything)
/// [`Self::wall_ns`] and then the flow clock, in that order (a delay between the two clock
/// reads then dates the batch later, as if read, never earlier than it arrived), then
/// [`Self::stamp`] for each message, then [`Self::batch_done`].
#[derive(Debug, Default)]
pub(crate) struct ArrivalClock {
    /// The kernel was asked to stamp received datagrams and accepted.
    stamps: bool,
    /// Arrival time of the last message, µs: arrival times never go backwards.
    last_us: u64,
    /// When the read in progress began, µs.
    read_began_us: u64,
    /// When the last read that left the socket empty began, µs: nothing read later arrived
    /// before it.
    drained_at_us: u64,
    /// Messages timed, those of them with a plausible stamp, and how long they waited in the
    /// socket before they were read, µs: total and largest.
    messages: u64,
    stamped: u64,
    wait_total_us: u64,
    wait_max_us: u64,
}

impl ArrivalClock {
    /// A clock for a socket on which [`crate::io::enable_rx_timestamps`] returned `stamps`.
    pub(crate) fn new(stamps: bool) -> Self {
        ArrivalClock {
            stamps,
            ..Self::default()
        }
    }

    /// A read begins at `now` (flow clock, µs).
    pub(crate) fn read_began(&mut self, now: u64) {
        self.read_began_us = now;
    }

    /// The wall clock for the batch just read, ns (0 when nothing is stamped: no cost).
    pub(crate) fn wall_ns(&self) -> u64 {
        if self.stamps {
            crate::io::wall_clock_ns()
        } else {
            0
        }
    }

    /// Times a message of a batch read at `now` by its receive timestamp ([`arrival_us`]), no
    /// earlier than the previous message nor than the start of the last read that emptied the
    /// socket, and keeps the statistics of how long messages waited.
    pub(crate) fn stamp(&mut self, rx_wall_ns: Option<u64>, now: u64, wall_ns: u64) -> u64 {
        let floor = self.last_us.max(self.drained_at_us);
        let at = arrival_us(rx_wall_ns, now, wall_ns, floor);
        self.last_us = at;
        self.messages += 1;
        self.stamped += u64::from(socket_wait_us(rx_wall_ns, wall_ns).is_some());
        self.wait_total_us += now - at;
        self.wait_max_us = self.wait_max_us.max(now - at);
        at
    }

    /// The read that began at [`Self::read_began`] returned; `drained`: it left the socket
    /// empty (it returned fewer messages than it had room for), so whatever is read next
    /// arrived after it began.
    pub(crate) fn batch_done(&mut self, drained: bool) {
        if drained {
            self.drained_at_us = self.read_began_us;
        }
    }

    /// Most messages timed so far carried a plausible stamp.
    pub(crate) fn mostly_stamped(&self) -> bool {
        self.stamped * 2 > self.messages
    }

    /// Logs (debug) how long messages waited in the socket; `what` names them.
    pub(crate) fn log(&self, what: &str, flow: Option<usize>) {
        tracing::debug!(
            flow,
            what,
            rx_timestamps = self.stamps,
            messages = self.messages,
            stamped = self.stamped,
            wait_mean_us = self.wait_total_us.checked_div(self.messages).unwrap_or(0),
            wait_max_us = self.wait_max_us,
            "time received datagrams waited in the socket before they were read"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_are_timed_when_they_arrived() {
        // Read at 50,000 µs, wall clock 1,000 s then: a datagram stamped 300 µs earlier arrived
        // at 49,700 µs.
        let wall = 1_000_000_000_000;
        assert_eq!(arrival_us(Some(wall - 300_000), 50_000, wall, 0), 49_700);
        // No stamp: when read.
        assert_eq!(arrival_us(None, 50_000, wall, 0), 50_000);
        // A stamp after the read, or one that waited implausibly long, says the wall clock
        // stepped: when read.
        assert_eq!(arrival_us(Some(wall + 5_000), 50_000, wall, 0), 50_000);
        assert_eq!(
            arrival_us(Some(wall - MAX_SOCKET_WAIT_NS), 50_000, wall, 0),
            50_000
        );
        // Never before the previous datagram, never after the read, never below zero.
        assert_eq!(
            arrival_us(Some(wall - 300_000), 50_000, wall, 49_900),
            49_900
        );
        assert_eq!(
            arrival_us(Some(wall - 300_000), 50_000, wall, 60_000),
            50_000
        );
        assert_eq!(arrival_us(Some(wall - 900_000_000), 50_000, wall, 0), 0);
    }

    #[test]
    fn the_clock_keeps_order_and_the_drained_floor() {
        let wall = 1_000_000_000_000;
        let mut c = ArrivalClock::new(true);
        // A read at 10,000 µs finds nothing: what comes later arrived after it began.
        c.read_began(10_000);
        c.batch_done(true);
        // Read at 10,500 µs: a stamp 2 ms old is impossible (the socket was empty at 10,000).
        c.read_began(10_400);
        assert_eq!(c.stamp(Some(wall - 2_000_000), 10_500, wall), 10_000);
        // The next message of the batch was stamped 100 µs before the read.
        assert_eq!(c.stamp(Some(wall - 100_000), 10_500, wall), 10_400);
        // One stamped earlier than the message before it keeps the order.
        assert_eq!(c.stamp(Some(wall - 300_000), 10_500, wall), 10_400);
        // A full batch does not move the floor; the next read's messages keep their stamps.
        c.batch_done(false);
        assert_eq!(c.stamp(None, 11_000, wall + 500_000), 11_000);
        assert!(c.mostly_stamped());
        assert_eq!(c.wait_max_us, 500);
        // Unstamped messages outnumber stamped ones: not mostly stamped.
        for _ in 0..4 {
            c.stamp(None, 12_000, wall + 1_500_000);
        }
        assert!(!c.mostly_stamped());
    }
}
