//! What a finished QUIC flow reports. The field names and units are those of the udp
//! datapath's summaries (`ccp_udp::summary`) wherever the quantity exists in both, so tools
//! read either; QUIC-only quantities have fields of their own. Trace samples are
//! [`ccp_udp::summary::TraceSample`]s, and [`write_trace_csv`] writes them with
//! [`ccp_udp::summary::write_trace_rows`], in the udp datapath's CSV layout.

use crate::controller::{PacketEvent, PacketEventKind};
use ccp_udp::summary::{Arrival, TRACE_CSV_HEADER, TraceSample, write_trace_rows};
use serde::{Deserialize, Serialize};
use std::io;

/// The sender's account of one flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SenderSummary {
    /// Index of the flow in the sender's configuration.
    pub flow: usize,
    /// Flow id (random per flow; in the stream header).
    pub flow_id: u32,
    /// Algorithm the flow asked for ("" for the default).
    pub algorithm: String,
    /// Controllers that were in charge, in order of first appearance.
    pub controllers: Vec<String>,
    /// Local address of the flow's socket.
    pub local: String,
    /// Receiver address.
    pub remote: String,
    /// Maximum UDP payload (QUIC packet) per datagram, bytes: the MSS the controller sees.
    pub mss: u32,
    /// Stream content bytes the receiver confirmed, from its verdict: the content length of a
    /// sized flow; for a timed or stopped flow, whose unsent rest the sender abandoned, the
    /// prefix the receiver read and verified against the pattern (0 without a verdict).
    pub bytes: u64,
    /// Stream content bytes the sender handed to the stream. A sized flow's `bytes` when
    /// intact; for a timed or stopped flow it includes what was still queued or in flight
    /// when the sender reset the stream, so it exceeds `bytes` by up to about
    /// [`crate::sender::SEND_BUFFER`].
    #[serde(default)]
    pub written_bytes: u64,
    /// How the sender ended its stream: "trailer" (length and hash, then FIN: a sized flow),
    /// "deadline" (a timed flow at its duration: RESET_STREAM, unsent data abandoned) or
    /// "stop" (the stop flag: RESET_STREAM).
    #[serde(default)]
    pub ended_by: String,
    /// Seconds from the end of the handshake to when the sender stopped giving the stream new
    /// data (wrote the trailer, or reset the stream).
    #[serde(default)]
    pub data_end_s: f64,
    /// Seconds from the end of the handshake to the receiver's verdict.
    pub duration_s: f64,
    /// `bytes` over `duration_s`, Mbit/s.
    pub goodput_mbps: f64,
    /// Handshake time (QUIC/TLS 1.3: one round trip plus crypto), ms.
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
    /// RTT samples the percentiles count (None: a summary written before this was recorded).
    #[serde(default)]
    pub rtt_samples: Option<u64>,
    /// Smoothed RTT at the end, ms.
    pub srtt_ms: f64,
    /// Congestion-controlled QUIC packets sent.
    pub sent_packets: u64,
    /// Their UDP payload bytes (QUIC headers and AEAD tags included).
    pub sent_bytes: u64,
    /// Packets declared lost (QUIC retransmits their frames in new packets).
    pub lost_packets: u64,
    /// UDP payload bytes declared lost.
    pub lost_bytes: u64,
    /// Persistent-congestion events (RFC 9002 §7.6), QUIC's counterpart of a timeout.
    pub timeouts: u64,
    /// ACK frames that acknowledged new packets.
    pub acks: u64,
    /// ECN-CE marks the receiver reported.
    pub ecn_ce_packets: u64,
    /// Invocations of the controller on ACKs.
    pub ack_invocations: u64,
    /// Invocations of the controller without an ACK (ticks).
    pub ticks: u64,
    /// Times the window or pacing rate set by the controller changed.
    pub control_changes: u64,
    /// xxh3-128 hash, 32 hex digits, of the stream content: of all the sender wrote for a
    /// sized flow; for a reset stream, of the pattern's first `bytes` bytes (what the receiver
    /// read), or of all it wrote if no verdict came.
    pub hash: String,
    /// The receiver's verdict arrived.
    pub completed: bool,
    /// The receiver's verdict (None if it never arrived): it found the content intact and
    /// its length and hash agree with the sender's — for a sized flow the whole content, for
    /// a reset stream a prefix of what was written with the pattern's hash of that prefix.
    pub receiver_intact: Option<bool>,
    /// The transfer was cut short by the stop flag.
    pub stopped_early: bool,
    /// State samples. Their byte counts are stream content bytes the receiver acknowledged,
    /// as the udp datapath's: `delivered_bytes` in order (it stalls while a loss is repaired,
    /// then jumps), `received_bytes` beyond a hole too ([`crate::arrivals::AckedStream`]:
    /// the stream ranges each acknowledged packet carried) — not the packets' UDP payload
    /// bytes (`sent_bytes`), about 2.5 % more. Stream bytes acknowledged beyond a hole just
    /// before a reset count in `received_bytes` but not in `bytes` if the hole was never
    /// filled (the receiver's stack discards them at the reset).
    pub trace: Vec<TraceSample>,
    /// Every data packet sent and every RTT sample, if the sender recorded them
    /// ([`crate::sender::SenderConfig::packet_trace`]; [`write_packet_csv`] writes them). Not
    /// in the JSON summary.
    #[serde(skip)]
    pub packets: Vec<PacketEvent>,
}

/// The receiver's account of one flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverSummary {
    /// Index of the flow in order of arrival at the receiver.
    pub flow: usize,
    /// Flow id from the stream header (0 if the sender reset the stream before its header
    /// arrived: a timed flow of next to no duration, which delivered nothing).
    pub flow_id: u32,
    /// Sender address (as seen by the receiver).
    pub peer: String,
    /// Stream content bytes received (read by the application; for a reset stream the
    /// delivered prefix).
    pub bytes: u64,
    /// Content length the sender's trailer announced (None: no trailer).
    pub expected_bytes: Option<u64>,
    /// xxh3-128 hash of the content received, 32 hex digits.
    pub hash: String,
    /// Hash the sender's trailer announced.
    pub sender_hash: Option<String>,
    /// Every content byte received is the flow's pattern at its offset and, for a stream
    /// that ended with a trailer, length and hash equal the trailer's.
    pub intact: bool,
    /// The stream ended as the sender ends it: with a trailer and FIN, or with the sender's
    /// own RESET_STREAM (see `ended_by`).
    pub completed: bool,
    /// How the stream ended: "trailer" (a sized flow, checked by length and hash),
    /// "deadline" (a timed flow reset at its duration: `bytes` is the prefix read), "stop"
    /// (the sender was stopped), "" (it failed: see `error`).
    #[serde(default)]
    pub ended_by: String,
    /// Stream reads (chunks) the receiver got.
    pub chunks: u64,
    /// Seconds from the first content byte to the end of the stream.
    pub duration_s: f64,
    /// `bytes` over `duration_s`, Mbit/s.
    pub goodput_mbps: f64,
    /// Longest interval without new stream bytes, ms.
    pub longest_stall_ms: f64,
    /// Content bytes that had reached the receiver over time, in order or beyond a hole, each
    /// counted once when it first arrived ([`crate::arrivals`]): a record at the first data,
    /// then at most every 10 ms while data comes, and one when the stream ended, which equals
    /// `bytes`. Times count from when the connection's first packet reached the receiver,
    /// about half the handshake's RTT before the sender's time zero — the udp datapath's
    /// `arrivals`, in its shape and time base.
    #[serde(default)]
    pub arrivals: Vec<Arrival>,
    /// Why the stream failed, if it did.
    pub error: Option<String>,
}

/// Writes the traces of `flows` as one CSV table with the udp datapath's
/// [`TRACE_CSV_HEADER`] and row layout ([`ccp_udp::summary::write_trace_rows`]) to `path`.
pub fn write_trace_csv(path: &std::path::Path, flows: &[SenderSummary]) -> io::Result<()> {
    ccp_files::write_whole(path, |w| {
        writeln!(w, "{TRACE_CSV_HEADER}")?;
        for f in flows {
            write_trace_rows(w, f.flow_id, &f.trace)?;
        }
        Ok(())
    })
}

/// The header of [`write_packet_csv`]'s table.
pub const PACKET_CSV_HEADER: &str = "flow_id,event,time_us,packet_sent_us,bytes,rtt_us";

/// Writes the recorded packets of `flows` ([`SenderSummary::packets`]) as one CSV table to
/// `path`: a `sent` row per data packet (`time_us` = `packet_sent_us`, its send time; packets
/// s2n-quic sent in one batch share it) and an `rtt` row per RTT sample (`time_us` when the
/// ACK was processed, `packet_sent_us` when the sampled packet left). Times are µs on
/// s2n-quic's clock from the flow's first data packet, in the order the events happened.
pub fn write_packet_csv(path: &std::path::Path, flows: &[SenderSummary]) -> io::Result<()> {
    ccp_files::write_whole(path, |w| {
        writeln!(w, "{PACKET_CSV_HEADER}")?;
        for f in flows {
            for e in &f.packets {
                let event = match e.kind {
                    PacketEventKind::Sent => "sent",
                    PacketEventKind::Rtt => "rtt",
                };
                writeln!(
                    w,
                    "{},{event},{},{},{},{}",
                    f.flow_id, e.at_us, e.sent_us, e.bytes, e.rtt_us
                )?;
            }
        }
        Ok(())
    })
}
