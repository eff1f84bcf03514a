//! The one generic adapter that turns any [`Controller`] into a portus flow.
//!
//! It installs the shared measurement program, decodes each report into a
//! [`Measurement`](crate::controller::Measurement),
//! hands it to the controller and installs the [`Decision`] with one `update_field` message.
//! Every report that decodes is answered (with the current window if the controller changed
//! nothing), so a datapath can take the agent's silence for its absence; one that does not (a
//! datapath running another program) is counted, warned about once per flow, and left
//! unanswered.
//! It also keeps the report period at one smoothed RTT when the controller asks for per-RTT
//! reports. This is the only place that knows portus's `Datapath` and `Report` types.

use crate::controller::{Controller, Decision, FlowStart, ReportPeriod};
use crate::program::{Decoder, INITIAL_PERIOD_US, PROGRAM_NAME};
use portus::ipc::Ipc;
use portus::{Datapath, DatapathInfo, DatapathTrait, Report};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tracing::{debug, warn};

/// Where the agent's notion of time comes from: the wall clock in a real agent, virtual time in
/// the simulator.
pub trait TimeSource: Send + Sync {
    /// Monotonic microseconds.
    fn now_us(&self) -> u64;
}

/// The wall clock, counted from the agent's start.
pub struct WallTime(Instant);

impl Default for WallTime {
    fn default() -> Self {
        WallTime(Instant::now())
    }
}

impl TimeSource for WallTime {
    fn now_us(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// Counters the agent exports (reports decoded, updates sent, failures).
#[derive(Debug, Default)]
pub struct FlowCounters {
    pub flows_created: AtomicU64,
    pub flows_closed: AtomicU64,
    pub reports: AtomicU64,
    pub bad_reports: AtomicU64,
    pub updates: AtomicU64,
    pub update_errors: AtomicU64,
}

/// Smallest report period the adapter installs for per-RTT reporting, µs.
const MIN_PERIOD_US: f64 = 100.0;

/// A flow driven by one controller.
pub struct ControlledFlow<I: Ipc> {
    ctl: Box<dyn Controller>,
    dp: Datapath<I>,
    decoder: Option<Decoder>,
    mss: u32,
    time: Arc<dyn TimeSource>,
    counters: Arc<FlowCounters>,
    period: ReportPeriod,
    /// The agent fixed the report period (`--report`); the controller's wishes are ignored.
    forced_period: bool,
    period_sent_us: u32,
    srtt_us: f64,
    /// The pacing rate last installed, bytes/s.
    rate: u64,
    /// A report this flow could not decode was logged (once per flow; all are counted).
    warned_bad_report: bool,
}

impl<I: Ipc> ControlledFlow<I> {
    /// Install the shared program on the flow and the controller's initial decision with it.
    /// `report` fixes the report period for this flow whatever the controller asks.
    pub fn start(
        mut ctl: Box<dyn Controller>,
        mut dp: Datapath<I>,
        info: &DatapathInfo,
        time: Arc<dyn TimeSource>,
        counters: Arc<FlowCounters>,
        report: Option<ReportPeriod>,
    ) -> Self {
        let mss = info.mss.max(1);
        let d = ctl.on_start(&FlowStart {
            mss,
            init_cwnd: info.init_cwnd,
            now_us: time.now_us(),
        });
        let period = report.or(d.report).unwrap_or(ReportPeriod::PerRtt);
        let period_us = initial_period(period);
        let mut fields: Vec<(&str, u32)> = decision_fields(&d);
        fields.push(("period", period_us));
        let decoder = match dp.set_program(PROGRAM_NAME, Some(&fields)) {
            Ok(scope) => Some(Decoder::new(scope)),
            Err(e) => {
                warn!(sid = info.sock_id, error = ?e, "could not install the measurement program");
                None
            }
        };
        counters.flows_created.fetch_add(1, Ordering::Relaxed);
        ControlledFlow {
            ctl,
            dp,
            decoder,
            mss,
            time,
            counters,
            period,
            forced_period: report.is_some(),
            period_sent_us: period_us,
            srtt_us: 0.0,
            rate: d.rate.unwrap_or(0),
            warned_bad_report: false,
        }
    }

    /// The controller driving this flow.
    pub fn controller(&self) -> &dyn Controller {
        self.ctl.as_ref()
    }

    fn apply(&mut self, d: &Decision) {
        let Some(decoder) = &self.decoder else {
            return;
        };
        if let Some(p) = d.report
            && !self.forced_period
        {
            self.period = p;
        }
        if let Some(r) = d.rate {
            self.rate = r;
        }
        let mut fields = decision_fields(d);
        let want = match self.period {
            ReportPeriod::PerAck => 0,
            ReportPeriod::Micros(us) => us.min(u32::MAX as u64) as u32,
            ReportPeriod::PerRtt if self.srtt_us > 0.0 => {
                self.srtt_us.max(MIN_PERIOD_US).min(u32::MAX as f64) as u32
            }
            ReportPeriod::PerRtt => self.period_sent_us,
        };
        // Re-install the period only when it moved by more than 1/8, to keep IPC quiet.
        let moved =
            (want as f64 - self.period_sent_us as f64).abs() > self.period_sent_us as f64 / 8.0;
        if want != self.period_sent_us && (moved || want == 0 || self.period_sent_us == 0) {
            fields.push(("period", want));
            self.period_sent_us = want;
        }
        if fields.is_empty() {
            // Every report gets an answer: datapaths read the agent's silence as its absence and
            // fall back to their own control (see the udp datapath).
            fields.push(("Cwnd", self.ctl.cwnd()));
        }
        match self.dp.update_field(decoder.scope(), &fields) {
            Ok(()) => {
                self.counters.updates.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counters.update_errors.fetch_add(1, Ordering::Relaxed);
                debug!(error = ?e, "update_field failed");
            }
        }
    }
}

fn initial_period(p: ReportPeriod) -> u32 {
    match p {
        ReportPeriod::PerAck => 0,
        ReportPeriod::PerRtt => INITIAL_PERIOD_US,
        ReportPeriod::Micros(us) => us.min(u32::MAX as u64) as u32,
    }
}

fn decision_fields(d: &Decision) -> Vec<(&'static str, u32)> {
    let mut v = Vec::with_capacity(3);
    if let Some(c) = d.cwnd {
        v.push(("Cwnd", c));
    }
    if let Some(r) = d.rate {
        v.push(("Rate", r.min(u32::MAX as u64) as u32));
    }
    v
}

impl<I: Ipc> portus::Flow for ControlledFlow<I> {
    fn on_report(&mut self, sock_id: u32, r: Report) {
        let Some(decoder) = &self.decoder else {
            return;
        };
        let m = match decoder.decode(&r, self.time.now_us(), self.mss, self.rate) {
            Ok(m) => m,
            Err(e) => {
                self.counters.bad_reports.fetch_add(1, Ordering::Relaxed);
                if self.warned_bad_report {
                    debug!(sid = sock_id, error = %e, "dropping report");
                } else {
                    self.warned_bad_report = true;
                    warn!(sid = sock_id, error = %e, "dropping a report that does not decode (further ones of this flow are counted in bad_reports, logged at debug)");
                }
                return;
            }
        };
        self.counters.reports.fetch_add(1, Ordering::Relaxed);
        if m.rtt_samples > 0 {
            let sample = m.rtt_mean_us as f64;
            self.srtt_us = if self.srtt_us == 0.0 {
                sample
            } else {
                0.875 * self.srtt_us + 0.125 * sample
            };
        }
        let d = self.ctl.on_measurement(&m);
        self.apply(&d);
    }

    fn close(&mut self) {
        self.counters.flows_closed.fetch_add(1, Ordering::Relaxed);
    }
}
