//! The one shared measurement datapath program, and the decoding of its reports.
//!
//! Every algorithm of the library is served by this program: it accumulates the per-ACK
//! primitives into one report per period (per smoothed RTT by default, set by the agent through
//! the `period` control register), and reports at once on loss or timeout. Algorithms never write
//! datapath programs of their own unless they truly need to; that is what lets PolyCC run several
//! algorithms on one flow and lets any datapath serve any algorithm.

use crate::controller::Measurement;
use portus::Report;
use portus::lang::Scope;

/// Name under which the program is installed on every datapath.
pub const PROGRAM_NAME: &str = "ccp_measure";

/// Initial report period before the agent learns the RTT, µs: short, so that a datacenter flow
/// (RTTs of tens of µs) is under control within a millisecond; the first report with an RTT
/// sample moves it to one smoothed RTT.
pub const INITIAL_PERIOD_US: u32 = 1_000;

/// Source of the shared program (portus datapath language).
///
/// Report fields: sums over the period (`acked`, `sacked`, `ecn_bytes`, `lost`, `rtt_sum`,
/// `rtt_cnt`, `owd_sum`), extremes (`rtt_min`, `rtt_max`, `dr_max`), the last value (`rtt_last`,
/// `dr`, `inflight`, `pending`, `cwnd`) and the period length (`micros`); `lost` also carries
/// whether a timeout was seen ([`TIMEOUT_FLAG`] added once). portus allows 16 report fields
/// (its serializer refuses a report register above 15; libccp and this project's engine take
/// 110); packet counts are derived from bytes and the MSS, and the pacing rate is the one the
/// agent installed. An RTT sample of 0 means "none" (libccp reads it as 2^32-1), so RTT fields
/// skip it (immediates must stay below 2^31, hence the 2000 s bound).
///
/// `dr` is the delivery-rate sample of each ACK as BBR takes it (draft-cheng-iccrg-delivery-rate-
/// estimation: the bytes delivered while the newest acknowledged packet was out, over the longer
/// of its send and ACK intervals): `min(Flow.rate_incoming, Flow.rate_outgoing)`, or
/// `rate_incoming` alone where the datapath gives no sending rate; `dr_max` is the largest such
/// sample of the period. Linux's BBR filters every ACK's sample; a controller reading only the
/// last one of each report would see a handful per RTT, and the maximum of a handful of noisy
/// samples lies below the maximum of all of them.
///
/// `owd_us` is the engine's extended primitive `Flow.owd_us` (the relative one-way delay,
/// `ccp_engine::ExtPrimitives`), bound through a control register with the reserved default
/// `ccp_engine::wire::prim::OWD_US_BINDING`: portus 0.9 compiles no primitive name beyond
/// libccp's. A datapath that measures it gives it with every RTT sample, so `owd_sum` sums it
/// over the same ACKs as `rtt_sum`; elsewhere the register keeps its default (2·10⁹ + 1) and
/// the mean decodes as "not measured".
pub const SOURCE: &str = "
(def
    (Report
        (volatile acked 0)
        (volatile sacked 0)
        (volatile ecn_bytes 0)
        (volatile lost 0)
        (volatile owd_sum 0)
        (volatile rtt_min +infinity)
        (volatile rtt_max 0)
        (volatile rtt_sum 0)
        (volatile rtt_cnt 0)
        (volatile rtt_last 0)
        (volatile dr 0)
        (volatile dr_max 0)
        (volatile inflight 0)
        (volatile pending 0)
        (volatile cwnd 0)
        (volatile micros 0)
    )
    (period 1000)
    (owd_us 2000000001)
)
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.sacked (+ Report.sacked Ack.bytes_misordered))
    (:= Report.ecn_bytes (+ Report.ecn_bytes Ack.ecn_bytes))
    (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
    (:= Report.dr Flow.rate_incoming)
    (:= Report.inflight Flow.bytes_in_flight)
    (:= Report.pending Flow.bytes_pending)
    (:= Report.cwnd Cwnd)
    (:= Report.micros Micros)
    (fallthrough)
)
(when (&& (> Flow.rate_outgoing 0) (< Flow.rate_outgoing Flow.rate_incoming))
    (:= Report.dr Flow.rate_outgoing)
    (fallthrough)
)
(when true
    (:= Report.dr_max (max Report.dr_max Report.dr))
    (fallthrough)
)
(when (&& Flow.was_timeout (< Report.lost 16777216))
    (:= Report.lost (+ Report.lost 16777216))
    (fallthrough)
)
(when (< Flow.rtt_sample_us 2000000000)
    (:= Report.rtt_min (min Report.rtt_min Flow.rtt_sample_us))
    (:= Report.rtt_max (max Report.rtt_max Flow.rtt_sample_us))
    (:= Report.rtt_sum (+ Report.rtt_sum Flow.rtt_sample_us))
    (:= Report.rtt_cnt (+ Report.rtt_cnt 1))
    (:= Report.rtt_last Flow.rtt_sample_us)
    (:= Report.owd_sum (+ Report.owd_sum owd_us))
    (fallthrough)
)
(when (|| (> Ack.lost_pkts_sample 0) Flow.was_timeout)
    (:= Micros 0)
    (report)
)
(when (> Micros period)
    (:= Micros 0)
    (report)
)
";

/// Sentinel the program starts `rtt_min` from (libccp's "+infinity").
const RTT_NONE: u64 = u32::MAX as u64;

/// Added once to `Report.lost` when the period saw a timeout (far above any loss count).
pub const TIMEOUT_FLAG: u64 = 1 << 24;

/// A mean relative one-way delay at or above this many µs means the datapath does not measure
/// it (its `owd_us` register kept the binding value, 2·10⁹ + 1, or read 2^32 − 1).
const OWD_NONE_US: u64 = 2_000_000_000;

/// `Report.lost` as (packets lost, whether a timeout was seen).
fn split_lost(field: u64) -> (u64, bool) {
    (field % TIMEOUT_FLAG, field >= TIMEOUT_FLAG)
}

/// The mean relative one-way delay of `sum` over `samples`, µs (None: none or not measured).
fn owd_mean(sum: u64, samples: u64) -> Option<u64> {
    sum.checked_div(samples).filter(|&d| d < OWD_NONE_US)
}

/// Decodes reports of the shared program; resolves nothing per report but the field reads.
pub struct Decoder {
    scope: Scope,
}

/// A report that does not decode (stale program, missing field).
#[derive(Debug, thiserror::Error)]
#[error("report does not decode: field {field}: {reason}")]
pub struct DecodeError {
    field: &'static str,
    reason: String,
}

impl Decoder {
    /// A decoder for reports produced under `scope` (the scope `set_program` returned).
    pub fn new(scope: Scope) -> Self {
        Decoder { scope }
    }

    /// The program's scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    fn field(&self, r: &Report, name: &'static str) -> Result<u64, DecodeError> {
        r.get_field(name, &self.scope).map_err(|e| DecodeError {
            field: name,
            reason: format!("{e:?}"),
        })
    }

    /// Decode one report; `now_us` and `mss` come from the agent.
    /// `rate` is the pacing rate the agent last installed (bytes/s, 0 for none).
    pub fn decode(
        &self,
        r: &Report,
        now_us: u64,
        mss: u32,
        rate: u64,
    ) -> Result<Measurement, DecodeError> {
        let f = |n| self.field(r, n);
        let rtt_cnt = f("Report.rtt_cnt")?;
        let rtt_min = f("Report.rtt_min")?;
        let rtt_sum = f("Report.rtt_sum")?;
        let per_mss = |bytes: u64| bytes.div_ceil(u64::from(mss.max(1)));
        let acked = f("Report.acked")?;
        let ecn = f("Report.ecn_bytes")?;
        let inflight = f("Report.inflight")?;
        let (lost, timeout) = split_lost(f("Report.lost")?);
        let owd_mean = owd_mean(f("Report.owd_sum")?, rtt_cnt);
        Ok(Measurement {
            now_us,
            interval_us: f("Report.micros")?,
            acked_bytes: acked,
            acked_packets: per_mss(acked),
            sacked_bytes: f("Report.sacked")?,
            ecn_bytes: ecn,
            ecn_packets: per_mss(ecn),
            lost_packets: lost,
            timeout,
            rtt_min_us: if rtt_cnt == 0 || rtt_min >= RTT_NONE {
                0
            } else {
                rtt_min
            },
            rtt_mean_us: rtt_sum.checked_div(rtt_cnt).unwrap_or(0),
            rtt_max_us: f("Report.rtt_max")?,
            rtt_last_us: f("Report.rtt_last")?,
            rtt_samples: rtt_cnt,
            owd_mean_us: owd_mean,
            delivery_rate: f("Report.dr")?,
            delivery_rate_max: f("Report.dr_max")?,
            bytes_in_flight: inflight,
            packets_in_flight: per_mss(inflight),
            bytes_pending: f("Report.pending")?,
            cwnd: f("Report.cwnd")?,
            rate,
            mss,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_engine::{
        Clock, DatapathOps, Engine, EngineConfig, ExtPrimitives, FlowInfo, Primitives, wire,
    };

    struct At(u64);
    impl Clock for At {
        fn now_ns(&self) -> u64 {
            self.0
        }
    }

    #[derive(Default)]
    struct Sent(Vec<Vec<u8>>);
    impl DatapathOps for Sent {
        fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
            self.0.push(msg.to_vec());
            Ok(())
        }
        fn set_cwnd(&mut self, _: u32, _: u32) {}
        fn set_rate_abs(&mut self, _: u32, _: u32) {}
    }

    /// The fields, by name, of the first report the program sends over `acks` (each with
    /// `ext`), on this project's engine; the engine's clock stands still, so only a loss or a
    /// timeout makes it report.
    fn first_report(acks: &[Primitives], ext: &ExtPrimitives) -> impl Fn(&str) -> u64 + use<> {
        let (bin, scope) = portus::lang::compile(SOURCE.as_bytes(), &[]).expect("compiles");
        let install = portus::serialize::serialize(&portus::serialize::install::Msg {
            sid: 0,
            program_uid: scope.program_uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin,
        })
        .unwrap();
        let mut engine = Engine::new(At(1_000_000_000), EngineConfig::default());
        let mut sent = Sent::default();
        engine.init(&mut sent).unwrap();
        engine.read_msg(&mut sent, &install).unwrap();
        let info = FlowInfo {
            mss: 1448,
            init_cwnd: 14480,
            cong_alg: "reno".into(),
            ..FlowInfo::default()
        };
        let sid = engine.connection_start(&mut sent, info).unwrap();
        engine
            .read_msg(
                &mut sent,
                &wire::serialize_change_prog(sid, scope.program_uid, &[]),
            )
            .unwrap();
        sent.0.clear();
        for prims in acks {
            engine.invoke_ext(&mut sent, sid, prims, ext).unwrap();
        }
        let fields = wire::parse_to_agent(&sent.0.concat())
            .unwrap()
            .into_iter()
            .find_map(|(m, _)| match m {
                wire::ToAgent::Measure { fields, .. } => Some(fields),
                _ => None,
            })
            .expect("a report");
        move |name: &str| match scope.get(name) {
            Some(portus::lang::Reg::Report(i, _, _)) => fields[usize::from(*i)],
            r => panic!("{name}: {r:?}"),
        }
    }

    /// The decoded (lost, timeout, rtt samples, mean OWD) of the report the program sends
    /// after one ACK with `prims` and `ext`.
    fn one_report(prims: &Primitives, ext: &ExtPrimitives) -> (u64, bool, u64, Option<u64>) {
        let field = first_report(std::slice::from_ref(prims), ext);
        let (lost, timeout) = split_lost(field("Report.lost"));
        let samples = field("Report.rtt_cnt");
        (
            lost,
            timeout,
            samples,
            owd_mean(field("Report.owd_sum"), samples),
        )
    }

    #[test]
    fn reports_carry_the_last_and_the_largest_delivery_rate_sample() {
        // Each ACK's sample is the smaller of the two rates, or the incoming one where the
        // datapath gives no outgoing rate; the report's last ACK (a loss) makes it report.
        let ack = |rin: u64, rout: u64, lost: u32| Primitives {
            rate_incoming: rin,
            rate_outgoing: rout,
            lost_pkts_sample: lost,
            ..Primitives::default()
        };
        let acks = [
            ack(5_000_000, 9_000_000, 0),
            ack(9_000_000, 8_000_000, 0),
            ack(7_000_000, 0, 0),
            ack(6_000_000, 4_000_000, 1),
        ];
        let field = first_report(&acks, &ExtPrimitives::default());
        assert_eq!(field("Report.dr"), 4_000_000, "the last ACK's sample");
        assert_eq!(
            field("Report.dr_max"),
            8_000_000,
            "the largest ACK's sample"
        );
        // A lone ACK without an outgoing rate: its incoming rate.
        let field = first_report(&[ack(7_000_000, 0, 1)], &ExtPrimitives::default());
        assert_eq!(
            (field("Report.dr"), field("Report.dr_max")),
            (7_000_000, 7_000_000)
        );
    }

    #[test]
    fn reports_carry_losses_timeouts_and_the_one_way_delay() {
        let lossy = Primitives {
            lost_pkts_sample: 3,
            rtt_sample_us: 120,
            ..Primitives::default()
        };
        let owd = ExtPrimitives { owd_us: Some(7) };
        assert_eq!(one_report(&lossy, &owd), (3, false, 1, Some(7)));
        let timeout = Primitives {
            was_timeout: true,
            ..lossy
        };
        assert_eq!(one_report(&timeout, &owd), (3, true, 1, Some(7)));
        let only_timeout = Primitives {
            was_timeout: true,
            ..Primitives::default()
        };
        assert_eq!(one_report(&only_timeout, &owd), (0, true, 0, None));
        // A datapath that does not measure the one-way delay.
        assert_eq!(
            one_report(&lossy, &ExtPrimitives::default()),
            (3, false, 1, None)
        );
    }

    #[test]
    fn program_compiles_and_declares_every_decoded_field() {
        let (bin, scope) = portus::lang::compile(SOURCE.as_bytes(), &[]).expect("compiles");
        // The install message serializes (portus allows at most 16 report registers) and fits
        // libccp's 256 instructions.
        assert!(bin.instrs.len() <= 256);
        let msg = portus::serialize::install::Msg {
            sid: 0,
            program_uid: scope.program_uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin.clone(),
        };
        portus::serialize::serialize(&msg).expect("install message serializes");
        assert!(!bin.instrs.is_empty());
        // The one-way delay register carries the engine's binding value.
        assert!(SOURCE.contains(&format!(
            "(owd_us {})",
            ccp_engine::wire::prim::OWD_US_BINDING
        )));
        assert!(
            u64::from(ccp_engine::wire::prim::OWD_US_BINDING) >= OWD_NONE_US
                && OWD_NONE_US < u64::from(u32::MAX)
        );
        for f in [
            "Report.acked",
            "Report.sacked",
            "Report.ecn_bytes",
            "Report.lost",
            "Report.owd_sum",
            "owd_us",
            "Report.rtt_min",
            "Report.rtt_max",
            "Report.rtt_sum",
            "Report.rtt_cnt",
            "Report.rtt_last",
            "Report.dr",
            "Report.dr_max",
            "Report.inflight",
            "Report.pending",
            "Report.cwnd",
            "Report.micros",
            "period",
        ] {
            assert!(scope.get(f).is_some(), "{f} missing from the program scope");
        }
    }
}
