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
//! A priced flow's parameters belong to the pricing (`set-class`); `set-params` refuses it.

use crate::agent::pricing::FlowSlot;
use crate::agent::rules::FlowKey;
use crate::controller::{Controller, Decision, Measurement, forward_to_inner};
use crate::params::ParamSet;
use crate::registry::AlgorithmSpec;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
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
}

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
                },
            );
        }
        Box::new(Live {
            inner,
            table: self.clone(),
            id,
            slot,
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
        for kv in settings {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("{kv:?}: expected KEY=VALUE"))?;
            p.set(f.spec.params, k.trim(), v)
                .map_err(|e| e.to_string())?;
        }
        // Whether the algorithm takes changes on a live flow, and whether it accepts these
        // values, asked of a controller of the same algorithm built for the check.
        (f.spec.build)(&f.params)
            .set_params(&p)
            .map_err(|e| format!("flow {target}: {e}"))?;
        f.params = p.clone();
        f.slot.offer(p.clone());
        info!(flow = %f.label, id, params = %p, "flow parameters changed");
        Ok(format!(
            "flow {id} ({}): {p}, applied at its next report",
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

/// A live flow's controller: the algorithm's own, plus the `set-params` hook.
struct Live {
    inner: Box<dyn Controller>,
    table: Arc<LiveFlows>,
    id: u64,
    slot: Arc<FlowSlot>,
}

impl Controller for Live {
    forward_to_inner!();

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        if let Some(p) = self.slot.take()
            && let Err(e) = self.inner.set_params(&p)
        {
            warn!(id = self.id, error = %e, "could not change a flow's parameters");
        }
        self.inner.on_measurement(m)
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
}
