//! The seam between the transport and whatever controls its congestion window and pacing rate.
//!
//! The transport knows nothing of CCP: for every flow it holds one [`FlowController`], reports
//! every processed ACK (and periodic ticks while no ACK arrives) as an [`AckSample`], and obeys
//! the controller's window and pacing rate. The CCP integration (`crate::ccp`) implements it with
//! libccp or the project's engine; [`crate::reno::BuiltinReno`] implements it standalone and is
//! the fallback when the agent is away.

/// What one ACK (or a detected loss / timeout) taught the sender, in libccp's primitive terms.
///
/// Deltas (`bytes_acked` … `lost_pkts`, `was_timeout`) cover this event only; gauges
/// (`bytes_in_flight`, `packets_in_flight`, `bytes_pending`, rates) are the values after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckSample {
    /// Bytes newly acknowledged in order (cumulative ACK advance).
    pub bytes_acked: u32,
    /// Packets newly acknowledged in order.
    pub packets_acked: u32,
    /// Bytes newly acknowledged out of order (new SACKed bytes).
    pub bytes_misordered: u32,
    /// Packets newly acknowledged out of order.
    pub packets_misordered: u32,
    /// Bytes of newly acknowledged packets that carried ECN-CE.
    pub ecn_bytes: u32,
    /// Newly acknowledged packets that carried ECN-CE.
    pub ecn_packets: u32,
    /// Packets newly declared lost.
    pub lost_pkts: u32,
    /// A retransmission timeout fired.
    pub was_timeout: bool,
    /// RTT sample from this ACK, µs (0 if none).
    pub rtt_us: u64,
    /// Sending rate estimate, bytes/s.
    pub rate_outgoing: u64,
    /// Delivery rate estimate, bytes/s.
    pub rate_incoming: u64,
    /// Bytes in flight after this event.
    pub bytes_in_flight: u32,
    /// Packets in flight after this event.
    pub packets_in_flight: u32,
    /// Bytes the application has queued but not yet sent.
    pub bytes_pending: u32,
}

/// Start-of-flow facts a controller may need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMeta {
    /// Maximum payload per packet, bytes.
    pub mss: u32,
    /// Initial congestion window, bytes.
    pub init_cwnd: u32,
    /// Local and remote IPv4 addresses (host order) and ports.
    pub src_ip: u32,
    pub src_port: u16,
    pub dst_ip: u32,
    pub dst_port: u16,
    /// The algorithm the flow asks for (e.g. "cubic" or "cubic:beta=0.8"), "" for the default.
    pub algorithm: String,
}

/// Controls one flow's window and pacing. Called from the flow's sending thread.
pub trait FlowController: Send {
    /// An ACK was processed, or a loss or timeout was detected.
    fn on_ack(&mut self, s: &AckSample);
    /// An ACK that also measured the relative one-way delay `owd_us`: the receive timestamp
    /// minus the send timestamp of the packet whose RTT this ACK samples, minus the smallest
    /// such difference of a sliding window (10 s by default), µs (see
    /// [`crate::rtt::OneWayDelay`]). The sender calls this instead of [`FlowController::on_ack`]
    /// for every ACK with an RTT sample; the default ignores the delay.
    fn on_ack_with_owd(&mut self, s: &AckSample, owd_us: u64) {
        let _ = owd_us;
        self.on_ack(s);
    }
    /// No ACK for a while: called at least every [`FlowController::tick_us`] while the flow is
    /// active, with zero deltas and current gauges (libccp runs its timers only on invocations).
    fn on_tick(&mut self, s: &AckSample);
    /// Tick period the controller wants, µs.
    fn tick_us(&self) -> u64 {
        10_000
    }
    /// Congestion window, bytes.
    fn cwnd(&self) -> u32;
    /// Pacing rate, bytes/s; `None`: no pacing, the window alone limits sending.
    fn pacing_rate(&self) -> Option<u64>;
    /// Who is in control now, for logs and summaries (e.g. "ccp-agent", "fallback:reno").
    fn controller_name(&self) -> String;
    /// The flow ended.
    fn close(&mut self) {}
}
