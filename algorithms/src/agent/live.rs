//! The agent's table of live flows and the generic run-time commands on them.
//!
//! - `flows`: every live flow as JSON — id, addresses, algorithm, current parameters.
//! - `set-params FLOW KEY=VALUE [KEY=VALUE ...]`: change parameters of a live flow. FLOW is
//!   addressed as `set-class` addresses one (`SRC_IP:SRC_PORT`) or by the id `flows` lists.
//!   Keys and values are checked against the flow's algorithm's parameter declarations (unit
//!   suffixes included) and by building a controller with the new set, so an algorithm that
//!   cannot change on a live flow ([`Controller::set_params`]'s default) is refused at once. The
//!   new parameters reach the flow's controller at its next report, as pricing class changes do.
//!
//! - `set-algorithm FLOW NAME[:KEY=VALUE,...]`: hand a live flow to another algorithm, with
//!   parameters written as a flow requests them (`cubic:beta=0.8`; the agent's `--param` values
//!   for that algorithm first, as for a flow that asks for it by name). The name and parameters
//!   are checked at once (an unknown name gets the registry's did-you-mean); the switch happens
//!   at the flow's next report. From then on `flows` lists the new algorithm and its parameters,
//!   and `set-params` checks against them.
//!
//! A priced flow's parameters belong to the pricing (`set-class`); `set-params` and
//! `set-algorithm` refuse it.
//!
//! # What a switch keeps
//!
//! At the report after `set-algorithm` the flow's `Live` wrapper builds the new controller and
//! hands the flow over, in this order:
//!
//! 1. `on_start` with the flow's MSS and its **current window** as the initial window (what the
//!    old controller would install now: its window if it was window-based, its rate times the
//!    last mean RTT if it was rate-based).
//! 2. [`Controller::take_over`] with the old state in the new controller's mode: [`Fused::Cwnd`]
//!    of that window for a window-based successor, [`Fused::Rate`] of the old pacing rate (or the
//!    window over the last mean RTT) for a rate-based one, and the old controller's slow-start
//!    threshold ([`Controller::ssthresh`]) if it had left slow start. Each algorithm takes it with
//!    its own meaning: Reno, Cubic, DCTCP and PACCP take the window (their calibration, as PolyCC
//!    syncs a member) and the threshold, as Linux keeps a socket's `ssthresh` across a change of
//!    congestion control — a flow past its slow start continues in congestion avoidance from its
//!    window, and a flow still in its first slow start (no threshold yet) keeps growing from its
//!    window until its first loss. Vegas measures the window handed over for one round and then
//!    leaves it by its γ exit (its module's "Taking over a live flow"). BBR, Vivace, Hercules take
//!    the rate as their pacing rate and go on with their own state machine (BBR in startup) from
//!    there. Algorithms without a Reno-style threshold say when their flow is past its start-up
//!    with one that stands for it ([`Controller::ssthresh`]: BBR's measured pipe once Startup
//!    has found it full, a learner's base rate times the smallest RTT once out of slow start,
//!    Copa's and LEDBAT's window once settled, RTCP's after its first halving), and Copa, the
//!    learners and PolyCC's members skip their own start-up for such a flow.
//! 3. The flow's **RTT history**: the new controller is shown one report with no acknowledgements
//!    whose RTT samples are the smallest RTT the flow has had (over its whole life), so delay-based
//!    algorithms (Vegas's baseRTT, Copa's and BBR's min RTT, LEDBAT's base delay) measure
//!    queueing against the path's base RTT, not against the queue the old algorithm built.
//! 4. The report that arrived, as any report.
//!
//! Lost: everything else the old controller had learnt (loss epochs, Cubic's W_max, BBR's
//! bandwidth filter, a utility learner's history) — the new one learns its own.
//!
//! The decision installed with that report carries the new controller's window and rate, and its
//! report period: the latest period it asked for in the hand-over (a controller names its period
//! only when it changes, so it may come with `on_start`, with the RTT history or with the report;
//! the per-RTT default if it named none). A learner scores its RTT gradient on the reports within
//! an MI, so keeping the predecessor's one report per RTT blinded it. **Rate to window:** a window-based successor sets no pacing rate,
//! and libccp-style datapaths (the engine, so the simulator and ccp-udp, and the kernel) ignore a
//! `Rate` of 0, so the old algorithm's pacing rate would stay. The hand-over therefore installs
//! `Rate` = `u32::MAX` bytes/s (about 34 Gbit/s, the wire's largest): pacing that never limits,
//! as a window-based flow has from its start.

use crate::agent::pricing::FlowSlot;
use crate::agent::rules::FlowKey;
use crate::controller::{
    ControlMode, Controller, Decision, FlowStart, Fused, Measurement, ReportPeriod, TakeOver,
};
use crate::params::ParamSet;
use crate::registry::{self, AlgorithmSpec};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::{info, warn};

struct LiveFlow {
    label: String,
    dst: String,
    spec: &'static AlgorithmSpec,
    /// The parameters its controller has or is about to get.
    params: ParamSet,
    priced: bool,
    slot: Arc<FlowSlot>,
    /// A `set-algorithm` waiting for the flow's next report.
    switch: Arc<SwitchSlot>,
    /// Algorithms the flow had before, oldest first (for `flows`).
    history: Vec<&'static str>,
}

/// The algorithm and parameters a flow is handed to at its next report.
struct Switch {
    spec: &'static AlgorithmSpec,
    params: ParamSet,
}

/// A `set-algorithm` waiting for the flow's next report; the flag spares every report the lock.
#[derive(Default)]
struct SwitchSlot {
    pending: AtomicBool,
    switch: Mutex<Option<Switch>>,
}

impl SwitchSlot {
    fn take(&self) -> Option<Switch> {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return None;
        }
        self.switch.lock().ok().and_then(|mut s| s.take())
    }
}

/// The pacing rate installed when a window-based algorithm takes over a paced flow, bytes/s: the
/// largest the wire carries, so pacing never limits (a `Rate` of 0 is ignored by libccp-style
/// datapaths, which would keep the old rate).
pub const UNPACED_RATE: u64 = u32::MAX as u64;

/// Every live flow of the agent.
#[derive(Default)]
pub struct LiveFlows {
    flows: Mutex<BTreeMap<u64, LiveFlow>>,
    next_id: AtomicU64,
}

impl LiveFlows {
    /// Register a new flow and wrap its controller so that it takes `set-params` changes at its
    /// next report and leaves the table when it ends.
    pub fn wrap(
        self: &Arc<Self>,
        inner: Box<dyn Controller>,
        key: &FlowKey,
        spec: &'static AlgorithmSpec,
        params: ParamSet,
        priced: bool,
    ) -> Box<dyn Controller> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let slot = Arc::new(FlowSlot::default());
        let switch = Arc::new(SwitchSlot::default());
        if let Ok(mut f) = self.flows.lock() {
            f.insert(
                id,
                LiveFlow {
                    label: key.label(),
                    dst: format!("{}:{}", Ipv4Addr::from(key.dst_ip), key.dst_port),
                    spec,
                    params,
                    priced,
                    slot: slot.clone(),
                    switch: switch.clone(),
                    history: Vec::new(),
                },
            );
        }
        Box::new(Live {
            inner,
            table: self.clone(),
            id,
            slot,
            switch,
            start: None,
            min_rtt_us: 0,
        })
    }

    /// The live flows as JSON (`flows`), in creation order.
    pub fn list(&self) -> serde_json::Value {
        let Ok(f) = self.flows.lock() else {
            return serde_json::json!({"error": "flow table poisoned"});
        };
        let flows: Vec<serde_json::Value> = f
            .iter()
            .map(|(id, l)| {
                serde_json::json!({
                    "id": id,
                    "src": l.label,
                    "dst": l.dst,
                    "algorithm": l.spec.name,
                    "priced": l.priced,
                    "params": l.params.to_string(),
                    "switched_from": l.history,
                })
            })
            .collect();
        serde_json::json!({ "flows": flows })
    }

    /// `set-params FLOW KEY=VALUE ...` (the words after the command name).
    pub fn set_params(&self, args: &[&str]) -> Result<String, String> {
        let Some((target, settings)) = args.split_first() else {
            return Err("usage: set-params FLOW KEY=VALUE [KEY=VALUE ...] \
                 (FLOW: SRC_IP:SRC_PORT or an id from `flows`)"
                .into());
        };
        if settings.is_empty() {
            return Err(format!("set-params {target}: no KEY=VALUE given"));
        }
        let mut flows = self.flows.lock().map_err(|_| "flow table poisoned")?;
        let id = resolve(&flows, target)?;
        let f = flows.get_mut(&id).ok_or("flow table changed")?;
        if f.priced {
            return Err(format!(
                "flow {target} is priced: its parameters come from the pricing policy; \
                 change its class with set-class"
            ));
        }
        let mut p = f.params.clone();
        let mut own = f.spec.defaults();
        for kv in settings {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("{kv:?}: expected KEY=VALUE"))?;
            p.set(f.spec.params, k.trim(), v)
                .map_err(|e| e.to_string())?;
            own.set(f.spec.params, k.trim(), v)
                .map_err(|e| e.to_string())?;
        }
        // Whether the algorithm takes changes on a live flow, and whether it accepts these
        // values, asked of a controller of the same algorithm built for the check; then whether
        // the whole set holds together.
        (f.spec.build)(&f.params)
            .set_params(&p)
            .map_err(|e| format!("flow {target}: {e}"))?;
        f.spec
            .check_set(&p, &own)
            .map_err(|e| format!("flow {target}: {e}"))?;
        f.params = p.clone();
        // After a `set-algorithm` not yet applied, the new parameters go with the switch.
        let mut pending = f.switch.switch.lock().map_err(|_| "flow table poisoned")?;
        match pending.as_mut() {
            Some(sw) => sw.params = p.clone(),
            None => f.slot.offer(p.clone()),
        }
        drop(pending);
        info!(flow = %f.label, id, params = %p, "flow parameters changed");
        Ok(format!(
            "flow {id} ({}): {p}, applied at its next report",
            f.label
        ))
    }

    /// `set-algorithm FLOW NAME[:KEY=VALUE,...]` (the words after the command name). `base`
    /// gives an algorithm's parameters before the ones named (the agent's `--param` values).
    pub fn set_algorithm(
        &self,
        args: &[&str],
        base: impl Fn(&'static AlgorithmSpec) -> ParamSet,
    ) -> Result<String, String> {
        const USAGE: &str = "usage: set-algorithm FLOW NAME[:KEY=VALUE,...] \
             (FLOW: SRC_IP:SRC_PORT or an id from `flows`; e.g. set-algorithm 1 cubic:beta=0.8)";
        let [target, requested] = args else {
            return Err(USAGE.into());
        };
        let (spec, p) = parse_algorithm(requested, base)?;
        let mut flows = self.flows.lock().map_err(|_| "flow table poisoned")?;
        let id = resolve(&flows, target)?;
        let f = flows.get_mut(&id).ok_or("flow table changed")?;
        if f.priced {
            return Err(format!(
                "flow {target} is priced: its algorithm and parameters come from the pricing \
                 policy; change its class with set-class"
            ));
        }
        let old = format!("{}", f.params);
        let mut pending = f.switch.switch.lock().map_err(|_| "flow table poisoned")?;
        *pending = Some(Switch {
            spec,
            params: p.clone(),
        });
        f.switch.pending.store(true, Ordering::Release);
        drop(pending);
        // Parameters of the old algorithm not yet applied are superseded by the switch.
        let _ = f.slot.take();
        if f.spec.name != spec.name {
            f.history.push(f.spec.name);
        }
        f.spec = spec;
        f.params = p.clone();
        info!(flow = %f.label, id, old = %old, new = %p, "flow algorithm switched (at its next report)");
        Ok(format!(
            "flow {id} ({}): {old} -> {p}, applied at its next report",
            f.label
        ))
    }

    fn closed(&self, id: u64) {
        if let Ok(mut f) = self.flows.lock() {
            f.remove(&id);
        }
    }
}

/// The flow `target` names: `SRC_IP:SRC_PORT` or a numeric id.
fn resolve(flows: &BTreeMap<u64, LiveFlow>, target: &str) -> Result<u64, String> {
    if let Ok(id) = target.parse::<u64>() {
        return flows
            .contains_key(&id)
            .then_some(id)
            .ok_or_else(|| format!("no live flow with id {id}; see `flows`"));
    }
    flows
        .iter()
        .find(|(_, f)| f.label == target)
        .map(|(id, _)| *id)
        .ok_or_else(|| {
            format!("no live flow {target:?}; flows are SRC_IP:SRC_PORT or an id from `flows`")
        })
}

/// Parse `NAME[:KEY=VALUE,...]` as a flow requests an algorithm (see
/// [`super::split_requested`]) into the algorithm and its parameters over `base`; every error
/// is returned (unknown name with the registry's did-you-mean, unknown key, bad value).
pub fn parse_algorithm(
    requested: &str,
    base: impl Fn(&'static AlgorithmSpec) -> ParamSet,
) -> Result<(&'static AlgorithmSpec, ParamSet), String> {
    let (name, settings) = super::split_requested(requested);
    let spec = registry::lookup(name)?;
    let mut p = base(spec);
    for &(k, v) in &settings {
        if v.is_empty() {
            return Err(format!(
                "{requested:?}: {k:?} is not KEY=VALUE (NAME:KEY=VALUE,KEY=VALUE)"
            ));
        }
        p.set(spec.params, k, v).map_err(|e| e.to_string())?;
    }
    // The request's own keys were each set above; they cannot fail again here.
    let own = spec.params_from(settings).map_err(|e| e.to_string())?;
    spec.check_set(&p, &own)
        .map_err(|e| format!("{requested:?}: {e}"))?;
    Ok((spec, p))
}

/// A live flow's controller: the algorithm's own, plus the `set-params` and `set-algorithm`
/// hooks.
struct Live {
    inner: Box<dyn Controller>,
    table: Arc<LiveFlows>,
    id: u64,
    slot: Arc<FlowSlot>,
    switch: Arc<SwitchSlot>,
    /// The flow's start, for a successor's `on_start`.
    start: Option<FlowStart>,
    /// The smallest RTT sample of the flow's life, µs (0 before any).
    min_rtt_us: u64,
}

impl Live {
    /// Hand the flow to the algorithm of `sw` at report `m` (see the module documentation):
    /// returns the decision to install with this report.
    fn hand_over(&mut self, sw: Switch, m: &Measurement) -> Decision {
        let old_name = self.inner.name();
        let old_mode = self.inner.mode();
        let rtt = if m.rtt_mean_us > 0 {
            m.rtt_mean_us
        } else {
            self.min_rtt_us
        };
        // The flow's window and rate as the old controller leaves them.
        let old_rate = self.inner.rate().filter(|r| *r > 0);
        let window = match (old_mode, old_rate) {
            (ControlMode::Rate, Some(r)) if rtt > 0 => {
                (r as f64 * rtt as f64 / 1e6).min(u32::MAX as f64) as u32
            }
            _ => self.inner.cwnd(),
        }
        .max(m.mss.max(1));
        let rate = match old_rate {
            Some(r) if old_mode == ControlMode::Rate => Some(r),
            _ if rtt > 0 => Some((window as f64 * 1e6 / rtt as f64) as u64),
            _ => None,
        };
        let mss = if m.mss > 0 {
            m.mss
        } else {
            self.start.as_ref().map_or(1448, |s| s.mss)
        };
        let mut new = (sw.spec.build)(&sw.params);
        let first = new.on_start(&FlowStart {
            mss,
            init_cwnd: window,
            now_us: m.now_us,
        });
        let ssthresh = self.inner.ssthresh();
        new.take_over(&TakeOver {
            fused: match (new.mode(), rate) {
                (ControlMode::Rate, Some(r)) => Fused::Rate(r),
                _ => Fused::Cwnd(window),
            },
            ssthresh,
        });
        // A controller sends its report period only when it changes, so the period may come
        // with any of these decisions; the latest one given is the one to install.
        let history = (self.min_rtt_us > 0)
            .then(|| {
                new.on_measurement(&history_report(m, self.min_rtt_us))
                    .report
            })
            .flatten();
        let d = new.on_measurement(m);
        let new_mode = new.mode();
        info!(
            id = self.id,
            old = old_name,
            new = %sw.params,
            window,
            rate = rate.unwrap_or(0),
            ssthresh = ssthresh.unwrap_or(0),
            min_rtt_us = self.min_rtt_us,
            "flow handed to a new algorithm"
        );
        self.inner = new;
        Decision {
            cwnd: d.cwnd.or(Some(self.inner.cwnd())),
            rate: match (d.rate, new_mode) {
                (Some(r), _) => Some(r),
                (None, ControlMode::Rate) => self.inner.rate(),
                // A window-based successor of a paced flow: stop pacing at the old rate.
                (None, ControlMode::Window) => (m.rate > 0).then_some(UNPACED_RATE),
            },
            report: d
                .report
                .or(history)
                .or(first.report)
                .or(Some(ReportPeriod::PerRtt)),
        }
    }
}

/// A report with no acknowledgements whose RTT samples are `min_rtt_us`: the flow's RTT history
/// for a controller that takes it over.
fn history_report(m: &Measurement, min_rtt_us: u64) -> Measurement {
    Measurement {
        now_us: m.now_us,
        interval_us: m.interval_us,
        rtt_min_us: min_rtt_us,
        rtt_mean_us: min_rtt_us,
        rtt_max_us: min_rtt_us,
        rtt_last_us: min_rtt_us,
        rtt_samples: 1,
        owd_mean_us: m.owd_mean_us.map(|_| 0),
        delivery_rate: m.delivery_rate,
        delivery_rate_max: m.delivery_rate_max,
        bytes_in_flight: m.bytes_in_flight,
        packets_in_flight: m.packets_in_flight,
        bytes_pending: m.bytes_pending,
        cwnd: m.cwnd,
        rate: m.rate,
        mss: m.mss,
        ..Measurement::default()
    }
}

impl Controller for Live {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn mode(&self) -> ControlMode {
        self.inner.mode()
    }

    fn on_start(&mut self, start: &FlowStart) -> Decision {
        self.start = Some(start.clone());
        self.inner.on_start(start)
    }

    crate::controller::forward_state_to_inner!();

    fn set_params(&mut self, params: &ParamSet) -> Result<(), String> {
        self.inner.set_params(params)
    }

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        let switch = self.switch.take();
        if m.rtt_samples > 0 && m.rtt_min_us > 0 {
            self.min_rtt_us = match self.min_rtt_us {
                0 => m.rtt_min_us,
                r => r.min(m.rtt_min_us),
            };
        }
        if let Some(p) = self.slot.take()
            && let Err(e) = self.inner.set_params(&p)
        {
            warn!(id = self.id, error = %e, "could not change a flow's parameters");
        }
        match switch {
            Some(sw) => self.hand_over(sw, m),
            None => self.inner.on_measurement(m),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.table.closed(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::FlowStart;
    use crate::registry;

    fn key(src: &str, port: u32) -> FlowKey {
        FlowKey {
            src_ip: u32::from(src.parse::<Ipv4Addr>().unwrap()),
            src_port: port,
            dst_ip: u32::from(Ipv4Addr::new(10, 0, 0, 9)),
            dst_port: 80,
            requested: String::new(),
        }
    }

    fn flow(t: &Arc<LiveFlows>, alg: &str, port: u32) -> Box<dyn Controller> {
        let spec = registry::find(alg).unwrap();
        let p = spec.defaults();
        t.wrap((spec.build)(&p), &key("10.0.0.1", port), spec, p, false)
    }

    fn report(now_us: u64) -> Measurement {
        Measurement {
            now_us,
            interval_us: 10_000,
            acked_bytes: 14_480,
            acked_packets: 10,
            rtt_min_us: 10_000,
            rtt_mean_us: 10_000,
            rtt_max_us: 10_000,
            rtt_last_us: 10_000,
            rtt_samples: 10,
            mss: 1448,
            ..Measurement::default()
        }
    }

    #[test]
    fn set_params_reaches_the_controller_at_its_next_report() {
        let t = Arc::new(LiveFlows::default());
        let mut h = flow(&t, "hercules", 5000);
        h.on_start(&FlowStart {
            mss: 1448,
            init_cwnd: 14480,
            now_us: 0,
        });
        for i in 1..50 {
            h.on_measurement(&report(i * 10_000));
        }
        let before = h.rate().unwrap();
        // A bounded maximum below the current rate: the controller must obey it once it has
        // the new parameters, and not before.
        let cap = before / 4;
        let a = t
            .set_params(&["10.0.0.1:5000", &format!("max={cap}"), "bounded=true"])
            .unwrap();
        assert!(a.contains("next report"), "{a}");
        assert_eq!(h.rate().unwrap(), before, "applied before the next report");
        h.on_measurement(&report(500_000));
        assert!(
            h.rate().unwrap() as f64 <= cap as f64 * 1.01,
            "rate {} above the new max {cap}",
            h.rate().unwrap()
        );
        let listed = t.list().to_string();
        assert!(listed.contains("\"algorithm\":\"hercules\""), "{listed}");
        assert!(listed.contains("\"src\":\"10.0.0.1:5000\""), "{listed}");
        // Addressed by id too; the flow leaves the table when it ends.
        assert!(t.set_params(&["1", "min=1mbit"]).is_ok());
        drop(h);
        assert!(
            t.set_params(&["1", "min=1mbit"])
                .unwrap_err()
                .contains("no live flow")
        );
        assert_eq!(t.list()["flows"].as_array().unwrap().len(), 0);
    }

    #[test]
    fn set_params_errors_are_clear() {
        let t = Arc::new(LiveFlows::default());
        let _h = flow(&t, "hercules", 1);
        let _r = flow(&t, "reno", 2);
        let e = t.set_params(&["10.0.0.1:1", "mn=1mbit"]).unwrap_err();
        assert!(
            e.contains("did you mean \"min\"") && e.contains("max, bounded"),
            "{e}"
        );
        let e = t.set_params(&["10.0.0.1:1", "min=10ms"]).unwrap_err();
        assert!(e.contains("hercules.min"), "{e}");
        let e = t.set_params(&["10.0.0.1:1", "min"]).unwrap_err();
        assert!(e.contains("KEY=VALUE"), "{e}");
        let e = t.set_params(&["10.0.0.1:1"]).unwrap_err();
        assert!(e.contains("no KEY=VALUE"), "{e}");
        let e = t.set_params(&["10.0.0.1:9", "min=1mbit"]).unwrap_err();
        assert!(e.contains("no live flow \"10.0.0.1:9\""), "{e}");
        let e = t.set_params(&["10.0.0.1:2", "beta=0.7"]).unwrap_err();
        assert!(e.contains("reno does not take parameter changes"), "{e}");
        // A refused change leaves the flow's parameters as they were.
        let listed = t.list().to_string();
        assert!(!listed.contains("beta=0.7"), "{listed}");
    }

    /// A report at `now_us` acknowledging `acked` bytes with RTT `rtt_us`, as the adapter decodes
    /// it: `rate` the pacing rate last installed, `cwnd` the window.
    fn report_at(now_us: u64, acked: u64, rtt_us: u64, cwnd: u64, rate: u64) -> Measurement {
        Measurement {
            now_us,
            interval_us: rtt_us,
            acked_bytes: acked,
            acked_packets: acked / 1448,
            rtt_min_us: rtt_us,
            rtt_mean_us: rtt_us,
            rtt_max_us: rtt_us,
            rtt_last_us: rtt_us,
            rtt_samples: (acked / 1448).max(1),
            delivery_rate: acked * 1_000_000 / rtt_us,
            delivery_rate_max: acked * 1_000_000 / rtt_us,
            bytes_in_flight: cwnd,
            packets_in_flight: cwnd / 1448,
            bytes_pending: 1 << 30,
            cwnd,
            rate,
            mss: 1448,
            ..Measurement::default()
        }
    }

    const START: FlowStart = FlowStart {
        mss: 1448,
        init_cwnd: 14480,
        now_us: 0,
    };

    /// A cubic flow on `port` given `reports` window-sized reports 20 ms apart (20 ms RTT), the
    /// seventh with a loss: slow start to ~400 packets, then congestion avoidance. Returns the
    /// flow and the time of its last report, µs.
    fn cubic_past_a_loss(
        t: &Arc<LiveFlows>,
        port: u32,
        reports: u64,
    ) -> (Box<dyn Controller>, u64) {
        let mut h = flow(t, "cubic", port);
        h.on_start(&START);
        let mut now = 0;
        for i in 0..reports {
            now += 20_000;
            let w = u64::from(h.cwnd());
            let mut m = report_at(now, w, 20_000, w, 0);
            m.lost_packets = u64::from(i == 6);
            h.on_measurement(&m);
        }
        (h, now)
    }

    #[test]
    fn a_cubic_flow_switched_to_reno_keeps_its_window() {
        let t = Arc::new(LiveFlows::default());
        let (mut h, mut now) = cubic_past_a_loss(&t, 7, 60);
        let before = h.cwnd();
        assert!(before > 100 * 1448, "cubic reached only {before} bytes");
        let a = t.set_algorithm(&["10.0.0.1:7", "reno"], |s| s.defaults());
        assert!(a.unwrap().contains("cubic(") && t.list().to_string().contains("reno"));
        assert_eq!(h.name(), "cubic", "switched before the next report");
        now += 20_000;
        let d = h.on_measurement(&report_at(
            now,
            u64::from(before),
            20_000,
            u64::from(before),
            0,
        ));
        assert_eq!(h.name(), "reno");
        // Reno continues from cubic's window: no restart at its 10-packet initial window.
        let after = d.cwnd.unwrap();
        assert!(
            after >= before && after <= before + 2 * before,
            "window {before} -> {after}"
        );
        assert_eq!(d.rate, None, "an unpaced flow stays unpaced");
        assert_eq!(
            d.report,
            Some(ReportPeriod::PerRtt),
            "reno's period installed"
        );
        // It goes on as Reno: a loss halves the window it took over.
        now += 20_000;
        let mut m = report_at(now, u64::from(after), 20_000, u64::from(after), 0);
        m.lost_packets = 1;
        let halved = h.on_measurement(&m).cwnd.unwrap();
        assert!(
            (halved as f64 - after as f64 / 2.0).abs() < 3.0 * 1448.0,
            "{after} -> {halved} on a loss"
        );
        let listed = t.list().to_string();
        assert!(
            listed.contains("\"algorithm\":\"reno\"")
                && listed.contains("\"switched_from\":[\"cubic\"]"),
            "{listed}"
        );
    }

    /// A report every 2.5 ms (a quarter of a 10 ms RTT) acknowledging `acked` bytes.
    fn paced(now_us: u64, acked: u64, rate: u64) -> Measurement {
        Measurement {
            interval_us: 2_500,
            delivery_rate: acked * 400,
            delivery_rate_max: acked * 400,
            bytes_in_flight: acked * 4,
            ..report_at(now_us, acked, 10_000, 0, rate)
        }
    }

    #[test]
    fn a_paced_bbr_flow_switched_to_reno_stops_pacing_at_bbrs_rate() {
        let t = Arc::new(LiveFlows::default());
        let mut h = flow(&t, "bbr", 8);
        let mut rate = h.on_start(&START).rate.unwrap_or(0);
        let mut now = 0;
        // BBR over a 10 ms path with a 1000-packets-per-RTT (~145 MB/s) bottleneck.
        for _ in 0..200u64 {
            now += 2_500;
            let acked = (rate * 2_500 / 1_000_000).clamp(1448, 1448 * 250);
            let d = h.on_measurement(&paced(now, acked, rate));
            if let Some(r) = d.rate {
                rate = r;
            }
        }
        assert!(rate > 0, "bbr sets a pacing rate");
        let rate = h.rate().unwrap();
        t.set_algorithm(&["1", "reno"], |s| s.defaults()).unwrap();
        now += 2_500;
        let d = h.on_measurement(&paced(now, rate * 2_500 / 1_000_000, rate));
        assert_eq!(h.mode(), ControlMode::Window);
        // The adapter installs this rate: bbr's stops, no pacing takes its place.
        assert_eq!(
            d.rate,
            Some(UNPACED_RATE),
            "rate {rate} left on the datapath"
        );
        // The window is bbr's rate over the RTT (what bbr kept in flight), not 10 packets.
        let w = d.cwnd.unwrap() as f64;
        let bdp = rate as f64 * 0.010;
        assert!(
            w > 0.8 * bdp && w < 2.5 * bdp,
            "window {w} for rate·RTT {bdp}"
        );
        // Reno's later decisions carry no rate: the adapter keeps the unpaced one.
        now += 10_000;
        let d = h.on_measurement(&paced(now, rate * 2_500 / 1_000_000, UNPACED_RATE));
        assert_eq!(d.rate, None);
    }

    #[test]
    fn a_window_flow_switched_to_a_rate_algorithm_paces_at_its_rate() {
        let t = Arc::new(LiveFlows::default());
        let mut h = flow(&t, "reno", 9);
        h.on_start(&START);
        for i in 1..8u64 {
            let w = u64::from(h.cwnd());
            h.on_measurement(&report_at(i * 10_000, w, 10_000, w, 0));
        }
        let w = u64::from(h.cwnd());
        t.set_algorithm(&["10.0.0.1:9", "hercules"], |s| s.defaults())
            .unwrap();
        let d = h.on_measurement(&report_at(80_000, w, 10_000, w, 0));
        assert_eq!((h.name(), h.mode()), ("hercules", ControlMode::Rate));
        let r = d.rate.expect("a rate-based successor installs its rate");
        assert!(r > 0);
        // And the learner's report period (8 reports per MI; Hercules's MI lasts 1.5 × 20 ms),
        // not the predecessor's one per RTT: it fits its RTT gradient to the reports in an MI.
        assert!(
            matches!(d.report, Some(ReportPeriod::Micros(p)) if p <= 5_000),
            "{:?}",
            d.report
        );
        // set-params now checks against hercules's parameters.
        assert!(t.set_params(&["1", "min=1mbit"]).is_ok());
    }

    #[test]
    fn a_delay_based_successor_measures_queueing_against_the_flows_base_rtt() {
        // A cubic flow that first saw a 10 ms path, now with 30 ms of queue: Vegas taking over
        // must see the 10 ms: its first round measures the window it took over (no growth) and
        // its slow start ends (diff > γ) with that window · 10/40. Without the flow's RTT history
        // its baseRTT would be 40 ms, diff 0, and it would go on growing the queue; without the
        // measuring round it would double the window first (3.7 MB -> 9.05 MB held).
        let t = Arc::new(LiveFlows::default());
        let mut h = flow(&t, "cubic", 10);
        h.on_start(&START);
        let mut now = 0;
        for i in 0..8u64 {
            now += 10_000;
            let w = u64::from(h.cwnd());
            h.on_measurement(&report_at(
                now,
                w,
                if i < 4 { 10_000 } else { 40_000 },
                w,
                0,
            ));
        }
        t.set_algorithm(&["1", "vegas"], |s| s.defaults()).unwrap();
        let w0 = h.cwnd();
        let mut most = 0;
        for _ in 0..40 {
            now += 10_000;
            let w = u64::from(h.cwnd());
            // A queue of 3 pipes: RTT 40 ms while the window is above 4x its switch value / 4.
            let rtt = (10_000.0 * (w as f64 / (w0 as f64 / 4.0))).clamp(10_000.0, 40_000.0);
            most = most.max(
                h.on_measurement(&report_at(now, w / 4, rtt as u64, w, 0))
                    .cwnd
                    .unwrap_or(0),
            );
        }
        assert_eq!(h.name(), "vegas");
        let w1 = h.cwnd();
        assert!(
            most <= w0,
            "vegas grew the window it took over: {w0} -> {most}"
        );
        assert!(
            (w1 as f64) < 0.3 * w0 as f64,
            "vegas kept the queue: window {w0} -> {w1}"
        );
    }

    #[test]
    fn a_successor_keeps_the_flows_slow_start_threshold() {
        // Past a loss, cubic has a threshold: reno takes it and grows by one MSS per RTT from
        // the window it took over, as Linux after a change of congestion control, instead of
        // doubling it in a second slow start.
        let t = Arc::new(LiveFlows::default());
        let (mut h, mut now) = cubic_past_a_loss(&t, 11, 20);
        let threshold = h.ssthresh().expect("cubic left slow start at its loss");
        t.set_algorithm(&["10.0.0.1:11", "reno"], |s| s.defaults())
            .unwrap();
        let before = u64::from(h.cwnd());
        let mut w = before;
        for _ in 0..5 {
            now += 20_000;
            w = u64::from(
                h.on_measurement(&report_at(now, w, 20_000, w, 0))
                    .cwnd
                    .unwrap(),
            );
        }
        assert_eq!(h.name(), "reno");
        assert_eq!(h.ssthresh(), Some(threshold));
        assert!(
            w <= before + 6 * 1448,
            "reno slow-started from {before}: {w} after 5 RTTs"
        );
        // A flow still in its first slow start has no threshold to hand on: the successor keeps
        // doubling from the flow's window.
        let mut g = flow(&t, "reno", 12);
        g.on_start(&START);
        for i in 1..4u64 {
            let w = u64::from(g.cwnd());
            g.on_measurement(&report_at(i * 20_000, w, 20_000, w, 0));
        }
        assert_eq!(g.ssthresh(), None);
        t.set_algorithm(&["10.0.0.1:12", "cubic"], |s| s.defaults())
            .unwrap();
        let before = u64::from(g.cwnd());
        let w = u64::from(
            g.on_measurement(&report_at(80_000, before, 20_000, before, 0))
                .cwnd
                .unwrap(),
        );
        assert_eq!(g.name(), "cubic");
        assert!(w >= 2 * before - 1448, "{before} -> {w}");
    }

    #[test]
    fn set_algorithm_errors_are_clear() {
        let t = Arc::new(LiveFlows::default());
        let _c = flow(&t, "cubic", 1);
        let spec = registry::find("hercules").unwrap();
        let p = spec.defaults();
        let _priced = t.wrap((spec.build)(&p), &key("10.0.0.1", 2), spec, p, true);
        let d = |s: &'static AlgorithmSpec| s.defaults();
        let e = t.set_algorithm(&["10.0.0.1:1", "vegsa"], d).unwrap_err();
        assert!(e.contains("did you mean \"vegas\""), "{e}");
        let e = t.set_algorithm(&["10.0.0.1:2", "reno"], d).unwrap_err();
        assert!(e.contains("priced") && e.contains("set-class"), "{e}");
        let e = t
            .set_algorithm(&["10.0.0.1:1", "cubic:betta=0.8"], d)
            .unwrap_err();
        assert!(e.contains("did you mean \"beta\""), "{e}");
        let e = t
            .set_algorithm(&["10.0.0.1:1", "cubic:beta=10ms"], d)
            .unwrap_err();
        assert!(e.contains("cubic.beta"), "{e}");
        let e = t
            .set_algorithm(&["10.0.0.1:1", "cubic:beta"], d)
            .unwrap_err();
        assert!(e.contains("KEY=VALUE"), "{e}");
        let e = t.set_algorithm(&["10.0.0.1:1"], d).unwrap_err();
        assert!(e.contains("usage: set-algorithm FLOW NAME"), "{e}");
        let e = t.set_algorithm(&["10.0.0.1:9", "reno"], d).unwrap_err();
        assert!(e.contains("no live flow"), "{e}");
        // Nothing refused changed the flow.
        let listed = t.list().to_string();
        assert!(listed.contains("\"algorithm\":\"cubic\""), "{listed}");
        // Parameters written as flows request them; set-params then checks the new algorithm.
        let a = t.set_algorithm(&["1", "vegas:alpha=3,beta=6"], d).unwrap();
        assert!(a.contains("alpha=3") && a.contains("beta=6"), "{a}");
        let e = t.set_params(&["1", "min=1mbit"]).unwrap_err();
        assert!(e.contains("vegas"), "{e}");
    }

    #[test]
    fn every_algorithm_takes_over_a_live_flow_and_hands_it_on() {
        // A cubic flow at ~100 packets handed to each algorithm of the registry in turn, each
        // driven for 50 reports: every hand-over installs a window (and a rate for a paced
        // successor), and nothing restarts at the initial window or collapses to nothing.
        let t = Arc::new(LiveFlows::default());
        let mut h = flow(&t, "cubic", 11);
        h.on_start(&START);
        let (mut now, mut rate) = (0u64, 0u64);
        let step = |h: &mut Box<dyn Controller>, now: &mut u64, rate: &mut u64| {
            *now += 10_000;
            let w = u64::from(h.cwnd()).min(150 * 1448);
            let d = h.on_measurement(&report_at(*now, w, 20_000, w, *rate));
            if let Some(r) = d.rate {
                *rate = r;
            }
            d
        };
        for _ in 0..30 {
            step(&mut h, &mut now, &mut rate);
        }
        for spec in registry::all() {
            let before = h.cwnd();
            t.set_algorithm(&["1", spec.name], |s| s.defaults())
                .unwrap();
            let d = step(&mut h, &mut now, &mut rate);
            assert_eq!(h.name(), spec.name);
            let w = d.cwnd.unwrap_or_else(|| panic!("{}: no window", spec.name));
            assert!(w >= 1448, "{}: window {w}", spec.name);
            if h.mode() == ControlMode::Rate {
                assert!(d.rate.is_some_and(|r| r > 0), "{}: {d:?}", spec.name);
            }
            assert!(d.report.is_some(), "{}: no report period", spec.name);
            for _ in 0..50 {
                step(&mut h, &mut now, &mut rate);
            }
            assert!(
                h.cwnd() >= 1448 && (h.mode() == ControlMode::Window || h.rate().unwrap() > 0),
                "{} after 50 reports (took over {before} bytes): cwnd {} rate {:?}",
                spec.name,
                h.cwnd(),
                h.rate()
            );
        }
        let listed = t.list().to_string();
        assert!(listed.contains("\"algorithm\":\"hercules\""), "{listed}");
    }
}
