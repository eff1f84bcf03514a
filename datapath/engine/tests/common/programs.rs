//! The portus datapath programs shared by the differential test and the
//! benchmark: (a) a per-ACK report, (b) a per-RTT report with EWMA, min, max
//! and wrapped max, (c) a loss-triggered report with fallthrough and a timer
//! report, (d) a timed rate pulse driven by `Micros` and a control register,
//! (e) a program steered by control registers (with an alternative to switch
//! to via CHANGE_PROG).

pub const PER_ACK: &str = "
(def (Report
    (volatile acked 0)
    (volatile rtt 0)
    (volatile cwnd 0)
    (volatile now 0)
    (volatile inflight 0)
))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.cwnd Cwnd)
    (:= Report.now Ack.now)
    (:= Report.inflight Flow.packets_in_flight)
    (report)
)";

pub const PER_RTT: &str = "
(def (Report
    (volatile acked 0)
    (volatile minrtt +infinity)
    (volatile maxrtt 0)
    (srtt 0)
    (volatile rin 0)
    (volatile rout 0)
    (volatile lost 0)
    (volatile wmax 0)
    (volatile misordered 0)
))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
    (:= Report.maxrtt (max Report.maxrtt Flow.rtt_sample_us))
    (:= Report.srtt (ewma 2 Flow.rtt_sample_us))
    (:= Report.rin (max Report.rin Flow.rate_incoming))
    (:= Report.rout (+ Report.rout Flow.rate_outgoing))
    (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
    (:= Report.wmax (wrapped_max Report.wmax Flow.bytes_pending))
    (:= Report.misordered (+ Report.misordered Ack.bytes_misordered))
    (fallthrough)
)
(when (> Micros Report.srtt)
    (:= Micros 0)
    (report)
)";

pub const LOSS: &str = "
(def (Report
    (volatile acked 0)
    (volatile lost 0)
    (volatile timeout false)
    (volatile inflight 0)
    (volatile ecn 0)
    (volatile ecnbytes 0)
    (pkts 0)
))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
    (:= Report.timeout Flow.was_timeout)
    (:= Report.inflight Flow.bytes_in_flight)
    (:= Report.ecn (+ Report.ecn Ack.ecn_packets))
    (:= Report.ecnbytes (+ Report.ecnbytes Ack.ecn_bytes))
    (:= Report.pkts (+ Report.pkts Ack.packets_acked))
    (fallthrough)
)
(when (> Ack.lost_pkts_sample 0)
    (report)
)
(when (&& Flow.was_timeout true)
    (:= Cwnd (/ Cwnd 2))
    (report)
)
(when (> Micros 10000)
    (:= Micros 0)
    (report)
)";

pub const PULSE: &str = "
(def
    (Report (volatile acked 0) (volatile pulses 0) (volatile state 0))
    (Control.state 0)
    (Control.cur 0)
    (Control.high 125000000)
    (Control.low 12500000)
    (Control.period 20000)
)
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Control.cur (if (== Control.state 1) Control.high))
    (:= Control.cur (!if (== Control.state 1) Control.low))
    (:= Rate Control.cur)
    (fallthrough)
)
(when (> Micros Control.period)
    (:= Control.state (- 1 Control.state))
    (:= Report.pulses (+ Report.pulses 1))
    (:= Report.state Control.state)
    (:= Micros 0)
    (report)
)";

pub const CONTROLLED: &str = "
(def
    (Report (volatile acked 0) (volatile gain 0) (volatile cwnd 0) (volatile burst 0))
    (Control.gain 2)
    (Control.target 15000)
    (Control.interval 5000)
    (volatile Control.burst 0)
)
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Control.burst (+ Control.burst Ack.packets_acked))
    (:= Report.gain Control.gain)
    (:= Cwnd (+ Cwnd (* Control.gain Ack.bytes_acked)))
    (:= Report.cwnd Cwnd)
    (:= Report.burst Control.burst)
    (fallthrough)
)
(when (> Control.burst Control.target)
    (:= Cwnd (- Cwnd Control.target))
    (report)
)
(when (> Micros Control.interval)
    (:= Micros 0)
    (report)
)";

pub const CONTROLLED_ALT: &str = "
(def
    (Report (volatile acked 0) (volatile floor 0))
    (Control.floor 30000)
    (Control.step 1448)
)
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Cwnd (max Control.floor (+ Cwnd Control.step)))
    (:= Report.floor Control.floor)
    (fallthrough)
)
(when (> Micros 2000)
    (:= Micros 0)
    (report)
)";
