//! JCCE in virtual time, for the simulator: the same [`Core`] as the service, with a simulated
//! one-way latency on the way in (member → JCCE) and on the way back (JCCE → member).
//!
//! Deterministic: events are processed in (time, submission order); no clock, no threads.
//! The caller submits publications at its virtual time and calls [`SimJcce::advance`] as its
//! clock moves; [`SimJcce::next_event`] tells an event-driven simulator when to come back.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::core::{Aggregate, Applied, ConfigError, Core, CoreConfig, Micros};

/// A reply delivered to a member.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delivery {
    /// Virtual time the reply reaches the member (µs).
    pub at: Micros,
    pub group: u64,
    pub member: u64,
    /// The MI number of the publication it answers (0 for a leave).
    pub mi: u64,
    pub applied: Applied,
    pub aggregate: Aggregate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Payload {
    Publish {
        group: u64,
        member: u64,
        mi: u64,
        value: u64,
    },
    Leave {
        group: u64,
        member: u64,
    },
}

/// The simulated service.
pub struct SimJcce {
    core: Core,
    uplink_us: Micros,
    downlink_us: Micros,
    arrivals: BinaryHeap<Reverse<(Micros, u64, Payload)>>,
    replies: Vec<Delivery>,
    order: u64,
}

impl SimJcce {
    /// `uplink_us`/`downlink_us`: one-way latency member → JCCE and back (µs).
    pub fn new(
        cfg: CoreConfig,
        uplink_us: Micros,
        downlink_us: Micros,
    ) -> Result<Self, ConfigError> {
        Ok(SimJcce {
            core: Core::new(cfg)?,
            uplink_us,
            downlink_us,
            arrivals: BinaryHeap::new(),
            replies: Vec::new(),
            order: 0,
        })
    }

    fn submit(&mut self, now: Micros, p: Payload) {
        self.order += 1;
        self.arrivals
            .push(Reverse((now + self.uplink_us, self.order, p)));
    }

    /// A member publishes at virtual time `now` (it reaches JCCE `uplink_us` later).
    pub fn publish(&mut self, now: Micros, group: u64, member: u64, mi: u64, value: u64) {
        self.submit(
            now,
            Payload::Publish {
                group,
                member,
                mi,
                value,
            },
        );
    }

    /// A member leaves at virtual time `now`.
    pub fn leave(&mut self, now: Micros, group: u64, member: u64) {
        self.submit(now, Payload::Leave { group, member });
    }

    /// The earliest time something happens (an arrival at JCCE or a reply delivery).
    pub fn next_event(&self) -> Option<Micros> {
        let a = self.arrivals.peek().map(|Reverse((t, _, _))| *t);
        let r = self.replies.iter().map(|d| d.at).min();
        match (a, r) {
            (Some(a), Some(r)) => Some(a.min(r)),
            (a, r) => a.or(r),
        }
    }

    /// Move to virtual time `now`: apply every publication that reached JCCE by then, and return
    /// every reply that reached its member by then, in delivery order.
    pub fn advance(&mut self, now: Micros) -> Vec<Delivery> {
        while let Some(Reverse((t, _, _))) = self.arrivals.peek() {
            if *t > now {
                break;
            }
            let Reverse((t, _, p)) = self.arrivals.pop().expect("peeked");
            let (group, member, mi, o) = match p {
                Payload::Publish {
                    group,
                    member,
                    mi,
                    value,
                } => (
                    group,
                    member,
                    mi,
                    self.core.publish(t, group, member, mi, value),
                ),
                Payload::Leave { group, member } => {
                    (group, member, 0, self.core.leave(t, group, member))
                }
            };
            self.replies.push(Delivery {
                at: t + self.downlink_us,
                group,
                member,
                mi,
                applied: o.applied,
                aggregate: o.aggregate,
            });
        }
        // Replies share one latency, so they are in arrival order unless a caller submitted
        // with a time earlier than one already processed; keep them sorted (stably) regardless.
        if !self.replies.is_sorted_by_key(|d| d.at) {
            self.replies.sort_by_key(|d| d.at);
        }
        let due = self.replies.partition_point(|d| d.at <= now);
        self.replies.drain(..due).collect()
    }

    /// The core (e.g. to read its counters).
    pub fn core(&self) -> &Core {
        &self.core
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_arrive_after_the_round_trip_with_the_aggregate_at_arrival() {
        let mut j = SimJcce::new(CoreConfig::default(), 5_000, 7_000).unwrap();
        j.publish(0, 1, 1, 1, 100);
        j.publish(1_000, 1, 2, 1, 300);
        assert_eq!(j.next_event(), Some(5_000));
        assert!(j.advance(11_999).is_empty());
        let d = j.advance(12_000);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].member, d[0].aggregate),
            (
                1,
                Aggregate {
                    n: 1,
                    mean: Some(100.0)
                }
            )
        );
        assert_eq!(j.next_event(), Some(13_000));
        let d = j.advance(20_000);
        assert_eq!((d[0].at, d[0].member), (13_000, 2));
        assert_eq!(
            d[0].aggregate,
            Aggregate {
                n: 2,
                mean: Some(200.0)
            }
        );
        assert_eq!(j.next_event(), None);
        j.leave(20_000, 1, 1);
        let d = j.advance(40_000);
        assert_eq!((d[0].applied, d[0].aggregate.n), (Applied::Left, 1));
    }

    #[test]
    fn same_inputs_same_outputs() {
        let run = || {
            let mut j = SimJcce::new(CoreConfig::default(), 3_000, 3_000).unwrap();
            let mut out = Vec::new();
            for t in 0..200u64 {
                j.publish(t * 500, t % 3, t % 5, t / 5 + 1, t * 1000);
                out.extend(j.advance(t * 500));
            }
            out.extend(j.advance(u64::MAX / 2));
            out
        };
        let a = run();
        assert_eq!(a.len(), 200);
        assert_eq!(a, run());
    }
}
