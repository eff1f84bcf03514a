//! What a finished flow reports: [`SenderSummary`] (with its sampled [`TraceSample`]s) and
//! [`ReceiverSummary`], both serde-serialisable, plus CSV writers for traces and percentile
//! helpers.
//!
//! Units follow the project: bytes, bytes/s and µs inside; Mbit/s, ms and s in the fields whose
//! names say so.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

/// One sample of a sender's state, taken every `trace_interval`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSample {
    /// Seconds since the flow's handshake completed.
    pub t_s: f64,
    /// Congestion window the controller set, bytes.
    pub cwnd_bytes: u32,
    /// Pacing rate the controller set, bytes/s (None: window-limited). Written
    /// `pacing_rate_Bps` (bytes: `B`, as ccp-sim's `rate_Bps`); summaries from before read under
    /// their old name, `pacing_rate_bps`, which held bytes/s too.
    #[serde(rename = "pacing_rate_Bps", alias = "pacing_rate_bps")]
    pub pacing_rate_bytes_per_s: Option<u64>,
    /// Smoothed RTT, µs.
    pub srtt_us: u64,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Stream bytes the receiver has in order.
    pub delivered_bytes: u64,
    /// Stream bytes the receiver has acknowledged, in order or beyond a hole (each byte once,
    /// retransmitted or not): what has crossed the path by this sample. `delivered_bytes` lags
    /// it while a loss is repaired and then jumps by what arrived behind the hole, so over a
    /// window that starts or ends inside a repair only this one is bounded by the link's rate.
    /// None from datapaths that do not track it (and in JSON written before the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bytes: Option<u64>,
    /// Controller in charge.
    pub controller: String,
    /// Mean relative one-way delay of the RTT samples taken since the previous trace sample,
    /// µs: each sample's receive timestamp minus its send timestamp, minus the smallest such
    /// difference of a sliding window (10 s by default; [`crate::rtt::OneWayDelay`]), i.e. the
    /// forward path's queueing delay (plus at most a window's drift between the two clocks).
    /// None if no RTT sample came in the interval, or the datapath does not measure it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_excess_us: Option<f64>,
}

/// The sender's account of one flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SenderSummary {
    /// Index of the flow in the sender's configuration.
    pub flow: usize,
    /// Flow id (random per flow).
    pub flow_id: u32,
    /// Algorithm the flow asked for ("" for the default).
    pub algorithm: String,
    /// Controllers that were in charge, in order of first appearance.
    pub controllers: Vec<String>,
    /// Local address of the flow's socket (what the agent knows the flow by; the `src` its
    /// start announced, [`crate::sender::FlowStart`]); empty if the flow never bound one.
    pub local: String,
    /// Receiver address.
    pub remote: String,
    /// Payload bytes per packet.
    pub mss: u32,
    /// Stream bytes delivered (the stream's final length when `completed`).
    pub bytes: u64,
    /// Seconds from the end of the handshake to the receiver's final acknowledgement.
    pub duration_s: f64,
    /// `bytes` over `duration_s`, Mbit/s.
    pub goodput_mbps: f64,
    /// Handshake round trip, ms.
    pub handshake_rtt_ms: f64,
    /// Minimum RTT, ms.
    pub rtt_min_ms: f64,
    /// Median RTT, ms, over the samples the percentiles count: every sample, or those from
    /// the sender's `rtt_from` on (0 without one).
    pub rtt_p50_ms: f64,
    /// 95th percentile RTT, ms.
    pub rtt_p95_ms: f64,
    /// 99th percentile RTT, ms.
    pub rtt_p99_ms: f64,
    /// RTT samples the sender took (None: a summary written before this was recorded); past the
    /// percentiles' reservoir of 2^20 samples they are drawn from a uniform sample of these.
    #[serde(default)]
    pub rtt_samples: Option<u64>,
    /// Smoothed RTT at the end, ms.
    pub srtt_ms: f64,
    /// Mean relative one-way delay over the RTT samples, µs: receive minus send timestamp of
    /// each sampled packet, minus the smallest of a sliding window (`rtt::OneWayDelay`); the
    /// forward path's queueing. None without samples.
    #[serde(default)]
    pub owd_excess_mean_us: Option<f64>,
    /// DATA packets sent (first transmissions, retransmissions, probes, FIN).
    pub sent_packets: u64,
    /// Payload bytes sent, retransmissions included.
    pub sent_bytes: u64,
    /// Packets that carried data sent before.
    pub retransmitted_packets: u64,
    /// Payload bytes sent again.
    pub retransmitted_bytes: u64,
    /// Packets declared lost (packet or time threshold, or timeout).
    pub lost_packets: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Tail-loss probes sent.
    pub probes: u64,
    /// ACK datagrams processed.
    pub acks: u64,
    /// Datagrams ignored (malformed, wrong flow, impossible ACKs).
    pub ignored_datagrams: u64,
    /// Packets the receiver saw marked ECN-CE.
    pub ecn_ce_packets: u64,
    /// Whether GSO was used.
    pub gso: bool,
    /// Most ACK datagrams carried a kernel receive timestamp and were timed by it, not when the
    /// sender read them (false where the kernel does not stamp received datagrams).
    #[serde(default)]
    pub ack_timestamps: bool,
    /// xxh3-128 hash of the stream the sender sent, 32 hex digits.
    pub hash: String,
    /// The receiver acknowledged the whole stream and the FIN.
    pub completed: bool,
    /// The receiver's verdict on length and hash (None if it never completed).
    pub receiver_intact: Option<bool>,
    /// The transfer was cut short by the stop flag.
    pub stopped_early: bool,
    /// State samples.
    pub trace: Vec<TraceSample>,
}

/// The receiver's account of one flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverSummary {
    /// Index of the flow in order of arrival at the receiver.
    pub flow: usize,
    /// Flow id.
    pub flow_id: u32,
    /// Sender address (as seen by the receiver).
    pub peer: String,
    /// Stream bytes received in order.
    pub bytes: u64,
    /// Total length announced by the FIN (None: no FIN seen).
    pub expected_bytes: Option<u64>,
    /// xxh3-128 hash of the bytes received in order, 32 hex digits.
    pub hash: String,
    /// Hash the sender announced in the FIN.
    pub sender_hash: Option<String>,
    /// FIN seen, every byte received, length and hash equal to the sender's.
    pub intact: bool,
    /// The stream completed (FIN seen, no hole).
    pub completed: bool,
    /// DATA packets received (duplicates included).
    pub packets: u64,
    /// Packets that brought no new byte (duplicated or retransmitted twice).
    pub duplicates: u64,
    /// Packets that arrived ahead of a hole.
    pub out_of_order: u64,
    /// Packets received with ECN-CE.
    pub ecn_ce_packets: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// Seconds from the first DATA packet to the last in-order byte.
    pub duration_s: f64,
    /// `bytes` over `duration_s`, Mbit/s.
    pub goodput_mbps: f64,
    /// Longest interval without a new in-order byte, ms.
    pub longest_stall_ms: f64,
    /// Datagrams the receiver ignored (all flows, garbage included) when this summary was made.
    pub ignored_datagrams: u64,
    /// Bytes received over time, on the receiver's clock: a sample at most every
    /// [`ARRIVAL_INTERVAL_US`] while data arrives, and one when the stream completes.
    /// Empty in JSON written before the field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrivals: Vec<Arrival>,
    /// Most messages (datagrams, or GRO batches of them) the receiver had read by this summary
    /// carried a kernel receive timestamp and were timed by it, not when read: the receive
    /// timestamps it echoed (the one-way delay) and its arrival samples leave out the time data
    /// waited in its socket, and the ACK delays it reported include that wait, which the
    /// sender's RTT samples then leave out up to [`crate::rtt::MAX_ACK_DELAY_US`] (false where
    /// the kernel does not stamp received datagrams, and in JSON written before the field).
    #[serde(default)]
    pub rx_timestamps: bool,
}

/// Spacing of a receiver's [`Arrival`] samples, µs (10 ms: the sender's default trace
/// interval; a 30-s flow keeps 3,000 samples).
pub const ARRIVAL_INTERVAL_US: u64 = 10_000;

/// What a receiver had of a flow at one time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Arrival {
    /// Seconds since the flow's HELLO reached the receiver (the one the sender's handshake
    /// ended with: about half the handshake's RTT before the sender's time zero, from which
    /// its trace counts; the first DATA packet can come much later, when it is lost).
    pub t_s: f64,
    /// Distinct stream bytes received by then, in order or held beyond a hole: when the data
    /// crossed the path, which the in-order count (and the sender, which learns it an ACK
    /// later and only as far as the ACK's ranges reach) can only tell late.
    pub bytes: u64,
}

/// Header line of [`write_trace_csv`].
pub const TRACE_CSV_HEADER: &str =
    "flow_id,t_s,cwnd_bytes,pacing_rate_Bps,srtt_us,bytes_in_flight,delivered_bytes,controller";

impl SenderSummary {
    /// Writes this flow's trace as CSV rows (without header).
    pub fn write_trace_rows(&self, w: &mut dyn Write) -> io::Result<()> {
        write_trace_rows(w, self.flow_id, &self.trace)
    }
}

/// Writes the samples of the flow `flow_id` as CSV rows under [`TRACE_CSV_HEADER`] (without
/// the header). Any datapath's trace uses this layout.
pub fn write_trace_rows(w: &mut dyn Write, flow_id: u32, trace: &[TraceSample]) -> io::Result<()> {
    for s in trace {
        writeln!(
            w,
            "{:08x},{:.6},{},{},{},{},{},{}",
            flow_id,
            s.t_s,
            s.cwnd_bytes,
            s.pacing_rate_bytes_per_s
                .map(|r| r.to_string())
                .unwrap_or_default(),
            s.srtt_us,
            s.bytes_in_flight,
            s.delivered_bytes,
            csv_field(&s.controller)
        )?;
    }
    Ok(())
}

/// Writes the traces of `flows` as one CSV table with [`TRACE_CSV_HEADER`] to `w`.
pub fn write_trace_csv_to(w: &mut dyn Write, flows: &[SenderSummary]) -> io::Result<()> {
    writeln!(w, "{TRACE_CSV_HEADER}")?;
    for f in flows {
        f.write_trace_rows(w)?;
    }
    Ok(())
}

/// Writes the traces of `flows` to the file `path`, one table for all flows
/// ([`write_trace_csv_to`] for any writer): through a temporary file beside it, renamed when
/// complete, so a failed write leaves no half table.
pub fn write_trace_csv(path: &std::path::Path, flows: &[SenderSummary]) -> io::Result<()> {
    ccp_files::write_whole(path, |w| write_trace_csv_to(w, flows))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The `q` quantile (0..=1) of `sorted` (nearest rank); 0 when empty.
pub fn percentile(sorted: &[u32], q: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Mbit/s for `bytes` over `secs` (0 when no time passed).
pub fn mbps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e6
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_csv() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&[], 0.5), 0);
        assert_eq!(mbps(1_000_000, 1.0), 8.0);
        let s = TraceSample {
            t_s: 0.01,
            cwnd_bytes: 14480,
            pacing_rate_bytes_per_s: None,
            srtt_us: 50,
            bytes_in_flight: 1448,
            delivered_bytes: 0,
            received_bytes: Some(2896),
            controller: "agent:cubic,beta".into(),
            owd_excess_us: Some(250.0),
        };
        let f = SenderSummary {
            flow: 0,
            flow_id: 0xab,
            algorithm: String::new(),
            controllers: vec![],
            local: String::new(),
            remote: String::new(),
            mss: 1448,
            bytes: 0,
            duration_s: 0.0,
            goodput_mbps: 0.0,
            handshake_rtt_ms: 0.0,
            rtt_min_ms: 0.0,
            rtt_p50_ms: 0.0,
            rtt_p95_ms: 0.0,
            rtt_p99_ms: 0.0,
            rtt_samples: None,
            srtt_ms: 0.0,
            owd_excess_mean_us: Some(12.5),
            sent_packets: 0,
            sent_bytes: 0,
            retransmitted_packets: 0,
            retransmitted_bytes: 0,
            lost_packets: 0,
            timeouts: 0,
            probes: 0,
            acks: 0,
            ignored_datagrams: 0,
            ecn_ce_packets: 0,
            gso: false,
            ack_timestamps: true,
            hash: String::new(),
            completed: false,
            receiver_intact: None,
            stopped_early: false,
            trace: vec![s],
        };
        let mut out = Vec::new();
        write_trace_csv_to(&mut out, std::slice::from_ref(&f)).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines().nth(1).unwrap(),
            "000000ab,0.010000,14480,,50,1448,0,\"agent:cubic,beta\""
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        write_trace_csv(&path, std::slice::from_ref(&f)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let json = serde_json::to_string(&f).unwrap();
        let back: SenderSummary = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn trace_samples_without_a_one_way_figure_round_trip() {
        // JSON written before the field existed still parses, as "not measured".
        let old = r#"{"t_s":0.5,"cwnd_bytes":14480,"pacing_rate_bps":null,"srtt_us":900,
            "bytes_in_flight":0,"delivered_bytes":10,"controller":"agent:reno"}"#;
        let s: TraceSample = serde_json::from_str(old).unwrap();
        assert_eq!(s.owd_excess_us, None);
        // The pacing rate's old name (bytes/s then as now) still reads; it is written as
        // `pacing_rate_Bps`.
        let paced: TraceSample = serde_json::from_str(
            &old.replace("\"pacing_rate_bps\":null", "\"pacing_rate_bps\":125000"),
        )
        .unwrap();
        assert_eq!(paced.pacing_rate_bytes_per_s, Some(125_000));
        let json = serde_json::to_string(&paced).unwrap();
        assert!(json.contains("\"pacing_rate_Bps\":125000"), "{json}");
        assert_eq!(s.received_bytes, None);
        // An interval without a figure writes no field; one with a figure keeps it.
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("owd_excess_us"), "{json}");
        let with = TraceSample {
            owd_excess_us: Some(1_234.5),
            ..s
        };
        let back: TraceSample =
            serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back.owd_excess_us, Some(1_234.5));
    }
}
