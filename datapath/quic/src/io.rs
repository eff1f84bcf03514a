//! The endpoints' I/O: s2n-quic's socket tasks and event loop, woken by a timer precise to
//! tens of microseconds instead of s2n-quic's tokio timer.
//!
//! **Why.** s2n-quic's tokio I/O provider arms its event loop's timer on whole milliseconds
//! and sleeps on tokio's timer wheel, whose ticks are a millisecond apart; and s2n-quic counts
//! every timer, the pacing timer included, as expired once it is less than its granularity
//! ([`K_GRANULARITY`], 1 ms) ahead. A paced flow whose packets are due less than a millisecond
//! apart therefore leaves in batches that share one send time: measured over the emulated link
//! (`ccp-quic send --packet-trace`), 29.7 % of the packets of 8–11 Mbit/s flows left in pairs,
//! and a pair's second packet queues a packet time behind the first at the bottleneck, which
//! rate-based learners read as an RTT gradient (docs/results/datapaths.md, "Vivace's slow
//! start over `ccp-quic`").
//!
//! **What this provider changes.** [`PreciseIo`] builds the same pieces as s2n-quic's own
//! provider — its socket ring buffers, its receive and transmit tasks and its endpoint event
//! loop, all public parts of s2n-quic — around a [`PreciseClock`] whose timer is a Linux
//! `timerfd` registered with tokio's I/O driver: the event loop wakes a set slack (zero to
//! [`K_GRANULARITY`]) after s2n-quic counts the timer as expired (its time less
//! [`K_GRANULARITY`]), to the kernel's timer slack (50 µs by default), not on the next
//! millisecond tick. The congestion controller
//! ([`crate::controller::CcpEndpoint::with_precise_departures`]) hands s2n-quic each departure
//! time [`departure_shift`] later than it means (the granularity less the slack), so the loop
//! wakes at a packet's departure time and sends it with every packet due within the slack
//! after it: a packet leaves at its departure time or up to the slack before it, never a
//! millisecond before.
//!
//! **What it leaves as it was.** The socket options (ECN marks, packet info, GRO, no
//! fragmentation), the ring sizes (8 MiB of receive and 128 KiB of transmit buffer) and GSO's
//! default segments are s2n-quic's defaults; every other timer (loss detection, idle, ACK
//! delay) fires between s2n-quic's expiry point and its time, up to a millisecond sooner than
//! under the tokio timer, which s2n-quic's own expiry rule already allows.
//!
//! **The cost** (docs/benchmarks.md): one wake-up of the endpoint per paced packet, instead of
//! one per millisecond with several packets. A sender paced at 28 Mbit/s on loopback used
//! 0.9–1.1 CPU-seconds in 5 s, against 0.4–0.5 on the millisecond timer. The slack bounds the
//! wake-ups at high rates: at 377 Mbit/s the sender used 5.0 CPU-seconds in 5 s without slack,
//! 2.9 with the sender's default 100 µs, 2.3 on the millisecond timer; below 116 Mbit/s
//! (1448-byte packets more than 100 µs apart) the slack changes nothing.

use s2n_quic::provider::io::Provider;
use s2n_quic_core::endpoint::Endpoint;
use s2n_quic_core::inet::SocketAddress;
use s2n_quic_core::io::event_loop::EventLoop;
use s2n_quic_core::path::{MaxMtu, mtu};
use s2n_quic_core::task::cooldown::Cooldown;
use s2n_quic_core::time::{self, Clock as _, Timestamp};
use s2n_quic_platform::features::Gso;
use s2n_quic_platform::message::default as message;
use s2n_quic_platform::socket::{self, ring, task};
use s2n_quic_platform::syscall;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

pub use s2n_quic_core::recovery::K_GRANULARITY;

/// Receive ring buffer, bytes (s2n-quic's default).
const RX_BUFFER: u32 = 8 << 20;
/// Transmit ring buffer, bytes (s2n-quic's default).
const TX_BUFFER: u32 = 128 << 10;

/// An s2n-quic I/O provider on one bound UDP socket, with a precise event-loop timer (see the
/// module documentation).
#[derive(Debug)]
pub struct PreciseIo {
    socket: socket2::Socket,
    mtu: mtu::Config,
    slack: Duration,
}

impl PreciseIo {
    /// Serves `socket` (bound; it is made non-blocking). `base_mtu` and `initial_mtu`, when
    /// given, are s2n-quic's MTU settings of the same names; `max_mtu` bounds the datagrams.
    pub fn new(
        socket: std::net::UdpSocket,
        max_mtu: u16,
        initial_mtu: Option<u16>,
        base_mtu: Option<u16>,
    ) -> io::Result<Self> {
        let invalid = |e: mtu::MtuError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
        let mut b = mtu::Config::builder()
            .with_max_mtu(max_mtu)
            .map_err(invalid)?;
        if let Some(m) = initial_mtu {
            b = b.with_initial_mtu(m).map_err(invalid)?;
        }
        if let Some(m) = base_mtu {
            b = b.with_base_mtu(m).map_err(invalid)?;
        }
        let mtu = b.build().map_err(invalid)?;
        Ok(Self {
            socket: socket.into(),
            mtu,
            slack: Duration::ZERO,
        })
    }

    /// Wakes the event loop `slack` later than s2n-quic counts a timer as expired (at most
    /// [`K_GRANULARITY`]; default zero). With a controller whose departures are handed over
    /// [`departure_shift`]`(slack)` later than meant, the loop then wakes at a packet's
    /// departure time and sends with it every packet due within `slack` after it.
    pub fn with_slack(mut self, slack: Duration) -> Self {
        self.slack = slack.min(K_GRANULARITY);
        self
    }

    /// Binds `addr` and serves it.
    pub fn bind(addr: std::net::SocketAddr, max_mtu: u16) -> io::Result<Self> {
        let socket = syscall::bind_udp(addr, false, false, false)?;
        Self::new(socket.into(), max_mtu, None, None)
    }
}

/// A power of two of ring entries holding about `bytes` of `payload`-sized messages.
fn ring_entries(bytes: u32, payload: u32) -> u32 {
    (bytes / payload.max(1)).max(1).next_power_of_two()
}

/// A non-blocking copy of `socket`, registered with the current tokio runtime.
fn registered(socket: &socket2::Socket) -> io::Result<AsyncFd<std::net::UdpSocket>> {
    let s: std::net::UdpSocket = socket.try_clone()?.into();
    s.set_nonblocking(true)?;
    // SAFETY: the AsyncFd owns the socket, so its descriptor stays open and the same for the
    // AsyncFd's lifetime.
    unsafe { AsyncFd::register(s) }.map_err(io::Error::from)
}

impl Provider for PreciseIo {
    type PathHandle = message::Handle;
    type Error = io::Error;

    fn start<E: Endpoint<PathHandle = Self::PathHandle>>(
        self,
        mut endpoint: E,
    ) -> Result<SocketAddress, Self::Error> {
        let handle = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        let _guard = handle.enter();
        let Self {
            socket,
            mut mtu,
            slack,
        } = self;
        let local = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket"))?;
        let max_mtu: u16 = mtu.max_mtu().into();
        if !syscall::configure_mtu_disc(&socket) {
            // Without the don't-fragment bit no path MTU can be probed.
            mtu = mtu::Config::MIN;
        }
        let gro = syscall::configure_gro(&socket);
        syscall::configure_pktinfo(&socket);
        syscall::configure_tos(&socket);
        let (stats_tx, stats_rx) = socket::stats::channel();

        let rx_payload = if gro { u16::MAX } else { max_mtu };
        let (producer, consumer) = ring::pair::<message::Message>(
            ring_entries(RX_BUFFER, rx_payload.into()),
            rx_payload.into(),
        );
        handle.spawn(task::rx::Receiver::new(
            producer,
            registered(&socket)?,
            None,
            Cooldown::new(0),
            stats_tx.clone(),
        ));
        let rx_max = MaxMtu::try_from(rx_payload)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let addr: SocketAddress = local.into();
        let rx = socket::io::rx::Rx::new(vec![consumer], rx_max, addr.into());

        let gso = Gso::default();
        let tx_payload = (u32::from(max_mtu) * gso.max_segments() as u32).min(u16::MAX.into());
        let (producer, consumer) =
            ring::pair::<message::Message>(ring_entries(TX_BUFFER, tx_payload), tx_payload);
        handle.spawn(task::tx::Sender::new(
            consumer,
            registered(&socket)?,
            gso.clone(),
            Cooldown::new(0),
            stats_tx,
        ));
        let tx = socket::io::tx::Tx::new(vec![producer], gso, mtu.max_mtu());

        endpoint.set_mtu_config(mtu);
        let clock = PreciseClock::new(slack);
        handle.spawn(
            EventLoop {
                endpoint,
                clock,
                rx,
                tx,
                cooldown: Cooldown::new(0),
                stats: stats_rx,
            }
            .start(addr),
        );
        Ok(addr)
    }
}

/// s2n-quic's clock for [`PreciseIo`]: microseconds since the endpoint started, on the
/// monotonic clock, with a `timerfd` timer.
#[derive(Clone, Debug)]
pub struct PreciseClock {
    epoch: Instant,
    /// How long after s2n-quic counts a timer expired the timer wakes (≤ [`K_GRANULARITY`]).
    slack: Duration,
}

impl PreciseClock {
    /// `slack` at most [`K_GRANULARITY`] ([`PreciseIo::with_slack`] bounds it).
    fn new(slack: Duration) -> Self {
        Self {
            epoch: Instant::now(),
            slack,
        }
    }
}

/// How much later than meant a congestion controller hands s2n-quic its departure times, for
/// an endpoint on [`PreciseIo`] with `slack`: s2n-quic lets a packet leave once its departure
/// time is less than [`K_GRANULARITY`] ahead, and the loop wakes `slack` after that, so a
/// packet leaves at its departure time or up to `slack` before it, never sooner.
pub fn departure_shift(slack: Duration) -> Duration {
    K_GRANULARITY.saturating_sub(slack)
}

impl time::Clock for PreciseClock {
    fn get_time(&self) -> Timestamp {
        // SAFETY (of s2n-quic's contract): every timestamp of this clock is a duration since
        // the one `epoch`.
        unsafe { Timestamp::from_duration(self.epoch.elapsed()) }
    }
}

impl time::ClockWithTimer for PreciseClock {
    type Timer = PreciseTimer;

    fn timer(&self) -> PreciseTimer {
        PreciseTimer::new(self.clone()).expect("a timerfd for the endpoint's event loop")
    }
}

/// A monotonic `timerfd`, owned.
#[derive(Debug)]
struct TimerFd(OwnedFd);

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl TimerFd {
    fn new() -> io::Result<Self> {
        // SAFETY: a plain system call; the descriptor it returns is owned from here on.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Arms the timer to expire once, `after` from now (at least a nanosecond: zero disarms).
    fn arm(&self, after: Duration) -> io::Result<()> {
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `spec` lives across the call; the old value is not asked for.
        let r =
            unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Consumes the expirations counted so far, if any.
    fn drain(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `count`; EAGAIN (nothing expired) is fine.
        unsafe {
            libc::read(self.0.as_raw_fd(), count.as_mut_ptr().cast(), count.len());
        }
    }
}

/// The event loop's timer: ready once s2n-quic counts its target as elapsed.
#[derive(Debug)]
pub struct PreciseTimer {
    clock: PreciseClock,
    fd: AsyncFd<TimerFd>,
    target: Option<Timestamp>,
}

impl PreciseTimer {
    fn new(clock: PreciseClock) -> io::Result<Self> {
        Ok(Self {
            clock,
            // SAFETY: the AsyncFd owns the timerfd (as `OwnedFd`), so its descriptor stays
            // open and the same for the AsyncFd's lifetime.
            fd: unsafe { AsyncFd::register(TimerFd::new()?) }.map_err(io::Error::from)?,
            target: None,
        })
    }

    /// How long from now until the clock's slack after s2n-quic counts `target` as elapsed
    /// (`target` less than [`K_GRANULARITY`] ahead), plus a microsecond so that it does by then.
    fn wait_for(&self, target: Timestamp) -> Duration {
        let now = self.clock.get_time();
        let due = target
            .checked_sub(K_GRANULARITY - self.clock.slack)
            .map_or(now, |t| t + Duration::from_micros(1));
        due.saturating_duration_since(now)
    }
}

impl time::clock::Timer for PreciseTimer {
    fn poll_ready(&mut self, cx: &mut Context) -> Poll<()> {
        let Some(target) = self.target else {
            return Poll::Pending;
        };
        loop {
            if target.has_elapsed(self.clock.get_time()) {
                self.target = None;
                return Poll::Ready(());
            }
            match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(mut guard)) => {
                    guard.get_inner().drain();
                    guard.clear_ready();
                }
                Poll::Ready(Err(_)) => {
                    // The descriptor failed: wake now rather than never; the event loop
                    // re-arms the timer with its next expiration.
                    self.target = None;
                    return Poll::Ready(());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn update(&mut self, timestamp: Timestamp) {
        if self.target == Some(timestamp) {
            return;
        }
        self.target = Some(timestamp);
        if self.fd.get_ref().arm(self.wait_for(timestamp)).is_err() {
            // Cannot happen with a valid descriptor and value; if it does, `poll_ready` finds
            // the target elapsed at the loop's next wake-up (a packet or the application).
            tracing::warn!("arming the endpoint timer failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use s2n_quic_core::time::clock::Timer as _;

    #[tokio::test]
    async fn the_timer_wakes_when_s2n_quic_counts_its_target_elapsed() {
        let clock = PreciseClock::new(Duration::ZERO);
        let mut timer = PreciseTimer::new(clock.clone()).unwrap();
        for ahead_us in [300u64, 1_000, 1_700, 5_000] {
            let target = clock.get_time() + Duration::from_micros(ahead_us);
            timer.update(target);
            timer.ready().await;
            let woke = clock.get_time();
            // Never before the target counts as elapsed, and then unarmed until updated.
            assert!(target.has_elapsed(woke), "{ahead_us} µs: woke too early");
            assert!(timer.target.is_none());
        }
    }

    #[tokio::test]
    async fn an_updated_target_replaces_the_armed_one() {
        let clock = PreciseClock::new(Duration::ZERO);
        let mut timer = PreciseTimer::new(clock.clone()).unwrap();
        let far = clock.get_time() + Duration::from_secs(3600);
        timer.update(far);
        let near = clock.get_time() + Duration::from_millis(3);
        timer.update(near);
        tokio::time::timeout(Duration::from_secs(10), timer.ready())
            .await
            .expect("the nearer target fires, not the hour-away one");
        assert!(near.has_elapsed(clock.get_time()));
    }

    #[tokio::test]
    async fn with_slack_the_timer_wakes_that_much_after_s2n_quic_counts_its_target_elapsed() {
        // A departure meant at `t` is handed over shifted by departure_shift(slack): the timer
        // wakes at `t` (not up to a millisecond before it), and s2n-quic then counts anything
        // due within `slack` after `t` as due too.
        let slack = Duration::from_micros(300);
        let clock = PreciseClock::new(slack);
        let mut timer = PreciseTimer::new(clock.clone()).unwrap();
        for ahead_us in [500u64, 2_000] {
            let meant = clock.get_time() + Duration::from_micros(ahead_us);
            timer.update(meant + departure_shift(slack));
            timer.ready().await;
            assert!(
                clock.get_time() >= meant,
                "{ahead_us} µs: woke before the departure"
            );
            // Due at the wake-up: a packet meant `slack` (less a microsecond) later.
            let next = meant + slack - Duration::from_micros(1) + departure_shift(slack);
            assert!(next.has_elapsed(clock.get_time()));
        }
        assert_eq!(departure_shift(Duration::ZERO), K_GRANULARITY);
        assert_eq!(departure_shift(Duration::from_millis(5)), Duration::ZERO);
    }

    #[test]
    fn ring_entries_are_powers_of_two() {
        // s2n-quic's own sizes: 8 MiB of 64-KiB GRO messages, 128 KiB of 10-segment GSO ones.
        assert_eq!(ring_entries(8 << 20, 65535), 128);
        assert_eq!(ring_entries(128 << 10, 1500 * 10), 8);
        assert_eq!(ring_entries(128 << 10, 1500 * 11), 8);
        assert_eq!(ring_entries(128 << 10, 1500 * 9), 16);
        assert_eq!(ring_entries(100, 1500), 1);
    }
}
