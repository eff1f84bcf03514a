//! How a Vivace-Distributed flow reaches JCCE, the JointCloud aggregation service, without
//! knowing whether it runs in the simulator or in the agent.
//!
//! A flow holds one [`Aggregator`]: a member of a JCCE group. At every report it publishes its
//! delivered throughput over the last smoothed RTT; it reads the latest aggregate the service answered (the
//! group's mean throughput `T_avg` and member count `n`, never another member's value) and asks
//! whether the service is reachable. Two implementations:
//!
//! - [`JcceSource`]: the real service through the non-blocking [`jcce::Client`] (the agent,
//!   `ccp-agent --jcce ADDR --jcce-key-file F`); publishing and reading never block the agent.
//! - [`SimSource`]: the same aggregation core in the simulator's virtual time
//!   ([`jcce::sim::SimJcce`]), with simulated one-way latencies; deterministic.
//!
//! The runtime installs the source for the flows it creates with [`with_source`] around its
//! event loop (the portus loop runs on the calling thread, so flows created by it see the source);
//! [`crate::vivace_distributed`] takes a member from [`current_source`] when its flow is built.
//! Without a source a Vivace-Distributed flow runs as plain Vivace and says so once in the log.

/// The JCCE crate (client, keys), for programs that publish to a group beside the agent's
/// flows, e.g. a receiver of another algorithm's flow.
pub use jcce;

use crate::adapter::TimeSource;
use jcce::core::{CoreConfig, Micros};
use jcce::sim::SimJcce;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The latest aggregate a member received.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupView {
    /// Mean delivered throughput of the group's live members (bytes/s); `None` when the service
    /// withheld it (fewer members than its minimum group size).
    pub mean: Option<f64>,
    /// Live members of the group, this one included.
    pub n: u32,
    /// The number of this member's publication the reply answered (JCCE's `mi` field: a
    /// flow numbers its publications, one per report, not its monitor intervals).
    pub mi: u64,
    /// How long ago the reply arrived, µs.
    pub age_us: u64,
}

/// One flow's membership in a JCCE group.
pub trait Aggregator: Send {
    /// Publish this flow's delivered throughput (bytes/s) as its publication number `mi`
    /// (strictly increasing; JCCE's field is named for the paper's per-MI publications). Never
    /// blocks.
    fn publish(&mut self, mi: u64, bytes_per_s: f64);
    /// The latest reply to one of this member's publications, if any arrived.
    fn latest(&mut self) -> Option<GroupView>;
    /// Whether the service answers (else the flow runs as plain Vivace).
    fn reachable(&self) -> bool;
}

/// Where flows get their memberships: one per agent (or per simulation).
pub trait AggregatorSource: Send + Sync {
    /// A new member of `group`; dropping it leaves the group.
    fn member(&self, group: u64) -> Box<dyn Aggregator>;
}

thread_local! {
    static SOURCE: RefCell<Option<Arc<dyn AggregatorSource>>> = const { RefCell::new(None) };
}

/// Run `f` with `source` installed for the flows built on this thread (restored afterwards,
/// also on panic).
pub fn with_source<R>(source: Option<Arc<dyn AggregatorSource>>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<dyn AggregatorSource>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            SOURCE.with(|s| *s.borrow_mut() = prev);
        }
    }
    let prev = SOURCE.with(|s| s.replace(source));
    let _restore = Restore(prev);
    f()
}

/// The source installed on this thread, if any.
pub fn current_source() -> Option<Arc<dyn AggregatorSource>> {
    SOURCE.with(|s| s.borrow().clone())
}

// ---------------------------------------------------------------------------------------------
// The real service
// ---------------------------------------------------------------------------------------------

/// The real JCCE service through the agent's client (one client per agent, one member per flow).
pub struct JcceSource {
    client: Arc<jcce::Client>,
}

impl JcceSource {
    pub fn new(client: jcce::Client) -> Self {
        JcceSource {
            client: Arc::new(client),
        }
    }

    /// The client (reachability, counters).
    pub fn client(&self) -> &jcce::Client {
        &self.client
    }
}

struct JcceMember {
    client: Arc<jcce::Client>,
    member: jcce::Member,
}

impl Aggregator for JcceMember {
    fn publish(&mut self, mi: u64, bytes_per_s: f64) {
        self.member.publish(mi, bytes_per_s.max(0.0).round() as u64);
    }

    fn latest(&mut self) -> Option<GroupView> {
        self.member.latest().map(|a| GroupView {
            mean: a.mean,
            n: a.n,
            mi: a.mi,
            age_us: a.age.as_micros() as u64,
        })
    }

    fn reachable(&self) -> bool {
        self.client.reachability() != jcce::Reachability::Unreachable
    }
}

impl AggregatorSource for JcceSource {
    fn member(&self, group: u64) -> Box<dyn Aggregator> {
        Box::new(JcceMember {
            client: self.client.clone(),
            member: self.client.member(group),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The simulated service
// ---------------------------------------------------------------------------------------------

/// JCCE in the simulator's virtual time: the service's core with one-way latencies, driven by
/// the simulation clock. Deterministic (member ids are assigned in creation order).
pub struct SimSource {
    time: Arc<dyn TimeSource>,
    state: Mutex<SimState>,
}

struct SimState {
    jcce: SimJcce,
    next_member: u64,
    /// Latest reply per member: (reply, delivery time µs).
    latest: HashMap<u64, (jcce::sim::Delivery, Micros)>,
    published: u64,
}

impl SimSource {
    /// `uplink_us`/`downlink_us`: one-way latency member → JCCE and back, µs; `min_group`: the
    /// service's minimum group size k.
    pub fn new(
        time: Arc<dyn TimeSource>,
        uplink_us: u64,
        downlink_us: u64,
        min_group: u32,
    ) -> Result<Self, String> {
        let cfg = CoreConfig {
            min_group,
            ..CoreConfig::default()
        };
        let jcce = SimJcce::new(cfg, uplink_us, downlink_us).map_err(|e| e.to_string())?;
        Ok(SimSource {
            time,
            state: Mutex::new(SimState {
                jcce,
                next_member: 1,
                latest: HashMap::new(),
                published: 0,
            }),
        })
    }

    /// Publications received so far.
    pub fn published(&self) -> u64 {
        self.state.lock().map(|s| s.published).unwrap_or(0)
    }

    fn with<R>(&self, f: impl FnOnce(&mut SimState, Micros) -> R) -> R {
        let now = self.time.now_us();
        let mut s = match self.state.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        for d in s.jcce.advance(now) {
            s.latest.insert(d.member, (d, d.at));
        }
        f(&mut s, now)
    }
}

struct SimMember {
    source: Arc<SimSource>,
    group: u64,
    id: u64,
}

impl Aggregator for SimMember {
    fn publish(&mut self, mi: u64, bytes_per_s: f64) {
        let (group, id) = (self.group, self.id);
        self.source.with(|s, now| {
            s.published += 1;
            s.jcce
                .publish(now, group, id, mi, bytes_per_s.max(0.0).round() as u64);
        });
    }

    fn latest(&mut self) -> Option<GroupView> {
        let id = self.id;
        self.source.with(|s, now| {
            s.latest
                .get(&id)
                .filter(|(d, _)| d.applied != jcce::Applied::Left)
                .map(|(d, at)| GroupView {
                    mean: d.aggregate.mean,
                    n: d.aggregate.n,
                    mi: d.mi,
                    age_us: now.saturating_sub(*at),
                })
        })
    }

    fn reachable(&self) -> bool {
        true
    }
}

impl Drop for SimMember {
    fn drop(&mut self) {
        let (group, id) = (self.group, self.id);
        self.source.with(|s, now| {
            s.latest.remove(&id);
            s.jcce.leave(now, group, id);
        });
    }
}

/// Members of a [`SimSource`] shared by the flows of one simulation.
pub struct SharedSim(pub Arc<SimSource>);

impl AggregatorSource for SharedSim {
    fn member(&self, group: u64) -> Box<dyn Aggregator> {
        let id = self.0.with(|s, _| {
            let id = s.next_member;
            s.next_member += 1;
            id
        });
        Box::new(SimMember {
            source: self.0.clone(),
            group,
            id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Clock(AtomicU64);
    impl TimeSource for Clock {
        fn now_us(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn simulated_members_see_the_group_mean_after_the_round_trip() {
        let clock = Arc::new(Clock(AtomicU64::new(0)));
        let src = Arc::new(SimSource::new(clock.clone(), 1_000, 2_000, 1).unwrap());
        let shared = SharedSim(src.clone());
        let mut a = shared.member(7);
        let mut b = shared.member(7);
        a.publish(1, 100.0);
        b.publish(1, 300.0);
        clock.0.store(2_999, Ordering::SeqCst);
        assert_eq!(a.latest(), None);
        clock.0.store(3_000, Ordering::SeqCst);
        let va = a.latest().unwrap();
        let vb = b.latest().unwrap();
        // a's publication reached JCCE first (alone), b's second (both).
        assert_eq!((va.mean, va.n, va.mi), (Some(100.0), 1, 1));
        assert_eq!((vb.mean, vb.n), (Some(200.0), 2));
        assert!(a.reachable());
        drop(b);
        a.publish(2, 100.0); // at 3 ms: back at 6 ms
        clock.0.store(10_000, Ordering::SeqCst);
        let va = a.latest().unwrap();
        assert_eq!(
            (va.mean, va.n, va.mi, va.age_us),
            (Some(100.0), 1, 2, 4_000)
        );
        assert_eq!(src.published(), 3);
    }

    #[test]
    fn the_source_is_scoped_to_the_thread_and_restored() {
        let clock = Arc::new(Clock(AtomicU64::new(0)));
        let src: Arc<dyn AggregatorSource> =
            Arc::new(SharedSim(Arc::new(SimSource::new(clock, 0, 0, 1).unwrap())));
        assert!(current_source().is_none());
        with_source(Some(src), || {
            assert!(current_source().is_some());
            std::thread::spawn(|| assert!(current_source().is_none()))
                .join()
                .unwrap();
        });
        assert!(current_source().is_none());
    }
}
