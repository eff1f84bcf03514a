//! The pure aggregation core: groups of members, each publishing its delivered throughput once
//! per monitor interval (MI); the aggregate of a group is the mean over its live members.
//!
//! No clock, no I/O, no randomness: every call takes the current time (`now`, µs on any
//! monotonic time base the caller chooses) as an argument, so the network service, the
//! simulator (virtual time, simulated latency) and the tests all drive the same code and get the
//! same answers for the same inputs.
//!
//! # Definitions (Vivace-Distributed, paper §5.1, eq. 16)
//! * A member publishes `(mi, value)`: `mi` is its own MI sequence number (strictly increasing per
//!   member) and `value` its delivered throughput in that MI, in bytes/s.
//! * A member's *window* holds its values of the MIs `mi_last − W + 1 ..= mi_last` that it
//!   published (an MI whose publication was lost simply has no value); its *contribution* is the
//!   mean of those values. `W` = [`CoreConfig::window_mis`]; `W = 1` (the default and the
//!   paper's definition) means "the value of its latest MI".
//! * A member is *live* while `now − last_publication < member_timeout`; it also leaves at once
//!   with [`Core::leave`].
//! * The group's aggregate is `T_avg = Σ contributions / n` over its `n` live members. It is
//!   released only if `n ≥ k` ([`CoreConfig::min_group`]); below that only `n` is returned.
//!
//! Sums are kept in exact integer arithmetic (contributions scaled by `lcm(1..=W)`), so a group's
//! aggregate never drifts however many updates it has seen, and every update costs O(1).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Time in µs on the caller's monotonic time base.
pub type Micros = u64;

/// Largest supported window, in MIs (contributions are scaled by lcm(1..=16) = 720,720).
pub const MAX_WINDOW_MIS: u32 = 16;

/// Configuration of a [`Core`]. Every field is documented with its unit, default and source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreConfig {
    /// `W`: MIs per member window (count, 1..=16). Default 1: the paper's aggregate is the mean
    /// throughput "within an MI" (§5.1, eq. 16). Larger windows smooth a member's contribution.
    pub window_mis: u32,
    /// Member expiry (µs). Default 1,000,000 (1 s): a few MIs of the longest RTTs expected between
    /// clouds (MI = 1 smoothed RTT, ALGORITHMS.md); the paper does not specify expiry.
    pub member_timeout_us: Micros,
    /// `k`: minimum group size (count) below which no aggregate is released, only `n`.
    /// Default 1 (the paper's behaviour: always release); 3 is recommended between tenants that
    /// do not trust each other (with n = 2 the mean reveals the other member's value).
    pub min_group: u32,
    /// Upper bound on live members over all groups (count); publications of new members beyond it
    /// are refused ([`Applied::Full`]). Default 1,000,000. Not from the paper: bounds memory.
    pub max_members: usize,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            window_mis: 1,
            member_timeout_us: 1_000_000,
            min_group: 1,
            max_members: 1_000_000,
        }
    }
}

/// Invalid [`CoreConfig`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("window must be 1..={MAX_WINDOW_MIS} MIs, got {0}")]
    Window(u32),
    #[error("member timeout must be positive")]
    Timeout,
    #[error("max members must be positive")]
    MaxMembers,
}

/// What a group's members may learn: `n` always, the mean only when `n ≥ k`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aggregate {
    /// Live members of the group (count), including the caller if it is one.
    pub n: u32,
    /// Mean delivered throughput over the live members (bytes/s); `None` when `n = 0` or
    /// `n < k` (withheld).
    pub mean: Option<f64>,
}

/// What happened to one update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Applied {
    /// The value entered the member's window (a new member joined, or a newer MI).
    Accepted = 1,
    /// The MI was not newer than the member's latest one; ignored.
    Stale = 2,
    /// A new member was refused because `max_members` live members exist.
    Full = 3,
    /// The member left.
    Left = 4,
    /// A leave for a member that is not live; nothing changed.
    NotMember = 5,
}

impl Applied {
    /// Decode the wire byte.
    pub fn from_u8(b: u8) -> Option<Applied> {
        Some(match b {
            1 => Applied::Accepted,
            2 => Applied::Stale,
            3 => Applied::Full,
            4 => Applied::Left,
            5 => Applied::NotMember,
            _ => return None,
        })
    }
}

/// The result of one update: what happened, and the group's aggregate afterwards.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub applied: Applied,
    pub aggregate: Aggregate,
}

/// Counters since the core was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CoreStats {
    /// Updates accepted into a window.
    pub accepted: u64,
    /// Updates ignored because their MI was not newer.
    pub stale: u64,
    /// New members refused because the core was full.
    pub refused_full: u64,
    /// Members that expired (no publication for `member_timeout`).
    pub expired: u64,
    /// Members that left explicitly.
    pub left: u64,
}

const NIL: u32 = u32::MAX;

struct Member {
    /// Slot of its group in `Core::groups`.
    group: u32,
    id: u64,
    last_update: Micros,
    last_mi: u64,
    /// (mi, value) of the MIs in the window, oldest first.
    window: VecDeque<(u64, u64)>,
    window_sum: u128,
    /// This member's term in its group's `sum`: `window_sum · scale / window.len()`.
    contribution: u128,
    /// Neighbours in the group's list, ordered by `last_update` (oldest at `head`).
    prev: u32,
    next: u32,
}

struct Group {
    id: u64,
    sum: u128,
    n: u32,
    head: u32,
    tail: u32,
}

/// A small, fast, deterministic hasher for the (group, member) keys. Keys come only from
/// authenticated peers, so hash flooding would need the JointCloud key.
#[derive(Default, Clone, Copy)]
pub struct MixHasher(u64);

impl Hasher for MixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(23) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        // murmur3's fmix64, so that both the low bits (bucket) and the high bits (tag) mix.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<MixHasher>>;

/// The aggregation core. See the module documentation for the definitions.
///
/// Members and groups live in slabs (vectors with free lists) and refer to each other by slot;
/// each group keeps its members in a list ordered by last publication, so expiry pops from the
/// front and every operation is O(1) amortised.
pub struct Core {
    cfg: CoreConfig,
    /// lcm(1..=W): scales a window mean to an integer.
    scale: u128,
    group_index: Map<u64, u32>,
    groups: Vec<Group>,
    free_groups: Vec<u32>,
    index: Map<(u64, u64), u32>,
    members: Vec<Member>,
    free: Vec<u32>,
    now: Micros,
    stats: CoreStats,
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Core {
    /// A core with the given configuration.
    pub fn new(cfg: CoreConfig) -> Result<Core, ConfigError> {
        if cfg.window_mis == 0 || cfg.window_mis > MAX_WINDOW_MIS {
            return Err(ConfigError::Window(cfg.window_mis));
        }
        if cfg.member_timeout_us == 0 {
            return Err(ConfigError::Timeout);
        }
        if cfg.max_members == 0 {
            return Err(ConfigError::MaxMembers);
        }
        let scale = (1..=cfg.window_mis as u128).fold(1, |l, i| l / gcd(l, i) * i);
        Ok(Core {
            cfg,
            scale,
            group_index: Map::default(),
            groups: Vec::new(),
            free_groups: Vec::new(),
            index: Map::default(),
            members: Vec::new(),
            free: Vec::new(),
            now: 0,
            stats: CoreStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// Counters since creation.
    pub fn stats(&self) -> CoreStats {
        self.stats
    }

    /// Live members over all groups (members whose expiry has not been noticed yet by a
    /// [`Core::sweep`] or an access to their group are included).
    pub fn members(&self) -> usize {
        self.index.len()
    }

    /// Groups with at least one member (same caveat as [`Core::members`]).
    pub fn groups(&self) -> usize {
        self.group_index.len()
    }

    /// Time never goes backwards inside the core: an earlier `now` is taken as the latest seen.
    fn advance(&mut self, now: Micros) -> Micros {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    /// Member `member` of group `group` publishes `value` (bytes/s) for its MI number `mi`.
    pub fn publish(
        &mut self,
        now: Micros,
        group: u64,
        member: u64,
        mi: u64,
        value: u64,
    ) -> Outcome {
        let now = self.advance(now);
        let g = self.live_group(group, now);
        let (applied, g) = match self.index.get(&(group, member)).copied() {
            Some(slot) => {
                if mi <= self.members[slot as usize].last_mi {
                    self.stats.stale += 1;
                    (Applied::Stale, g)
                } else {
                    self.update(slot, now, mi, value);
                    self.stats.accepted += 1;
                    (Applied::Accepted, g)
                }
            }
            None if self.index.len() >= self.cfg.max_members => {
                self.stats.refused_full += 1;
                (Applied::Full, g)
            }
            None => {
                let g = match g {
                    Some(g) => g,
                    None => self.new_group(group),
                };
                self.insert(g, now, member, mi, value);
                self.stats.accepted += 1;
                (Applied::Accepted, Some(g))
            }
        };
        Outcome {
            applied,
            aggregate: self.current(g),
        }
    }

    /// Member `member` leaves group `group` now (e.g. its flow ended).
    pub fn leave(&mut self, now: Micros, group: u64, member: u64) -> Outcome {
        let now = self.advance(now);
        let _ = self.live_group(group, now);
        let applied = match self.index.get(&(group, member)).copied() {
            Some(slot) => {
                self.remove(slot);
                self.stats.left += 1;
                Applied::Left
            }
            None => Applied::NotMember,
        };
        let g = self.group_index.get(&group).copied();
        Outcome {
            applied,
            aggregate: self.current(g),
        }
    }

    /// The aggregate of `group` at time `now`, without publishing.
    pub fn aggregate(&mut self, now: Micros, group: u64) -> Aggregate {
        let now = self.advance(now);
        let g = self.live_group(group, now);
        self.current(g)
    }

    /// Expire the members of every group that timed out by `now` and forget empty groups.
    /// Returns how many members expired. Accesses to a group expire its members anyway; a sweep
    /// reclaims the memory of groups nobody touches any more.
    pub fn sweep(&mut self, now: Micros) -> usize {
        let now = self.advance(now);
        let before = self.stats.expired;
        let slots: Vec<u32> = self.group_index.values().copied().collect();
        for g in slots {
            self.expire(g, now);
        }
        (self.stats.expired - before) as usize
    }

    fn current(&self, g: Option<u32>) -> Aggregate {
        let Some(g) = g else {
            return Aggregate { n: 0, mean: None };
        };
        let g = &self.groups[g as usize];
        let released = g.n > 0 && g.n >= self.cfg.min_group;
        Aggregate {
            n: g.n,
            mean: released.then(|| g.sum as f64 / (self.scale as f64 * g.n as f64)),
        }
    }

    /// The slot of `group` after expiring its timed-out members; None if it has no member.
    fn live_group(&mut self, group: u64, now: Micros) -> Option<u32> {
        let g = *self.group_index.get(&group)?;
        self.expire(g, now);
        (self.groups[g as usize].n > 0).then_some(g)
    }

    fn expire(&mut self, g: u32, now: Micros) {
        let mut head = self.groups[g as usize].head;
        while head != NIL {
            let m = &self.members[head as usize];
            if m.last_update.saturating_add(self.cfg.member_timeout_us) > now {
                break;
            }
            let next = m.next;
            self.remove(head);
            self.stats.expired += 1;
            head = next;
        }
    }

    fn new_group(&mut self, id: u64) -> u32 {
        let group = Group {
            id,
            sum: 0,
            n: 0,
            head: NIL,
            tail: NIL,
        };
        let g = match self.free_groups.pop() {
            Some(g) => {
                self.groups[g as usize] = group;
                g
            }
            None => {
                self.groups.push(group);
                (self.groups.len() - 1) as u32
            }
        };
        self.group_index.insert(id, g);
        g
    }

    fn update(&mut self, slot: u32, now: Micros, mi: u64, value: u64) {
        let w = self.cfg.window_mis as u64;
        let scale = self.scale;
        let m = &mut self.members[slot as usize];
        while let Some(&(old_mi, old_v)) = m.window.front() {
            if old_mi + w > mi {
                break;
            }
            m.window.pop_front();
            m.window_sum -= old_v as u128;
        }
        m.window.push_back((mi, value));
        m.window_sum += value as u128;
        m.last_mi = mi;
        m.last_update = now;
        let old = m.contribution;
        let new = m.window_sum * (scale / m.window.len() as u128);
        m.contribution = new;
        let g = &mut self.groups[m.group as usize];
        g.sum = g.sum - old + new;
        self.unlink(slot);
        self.push_back(slot);
    }

    fn insert(&mut self, g: u32, now: Micros, member: u64, mi: u64, value: u64) {
        let mut window = VecDeque::with_capacity(self.cfg.window_mis as usize);
        window.push_back((mi, value));
        let contribution = value as u128 * self.scale;
        let m = Member {
            group: g,
            id: member,
            last_update: now,
            last_mi: mi,
            window,
            window_sum: value as u128,
            contribution,
            prev: NIL,
            next: NIL,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.members[s as usize] = m;
                s
            }
            None => {
                self.members.push(m);
                (self.members.len() - 1) as u32
            }
        };
        let grp = &mut self.groups[g as usize];
        grp.sum += contribution;
        grp.n += 1;
        let id = grp.id;
        self.index.insert((id, member), slot);
        self.push_back(slot);
    }

    fn remove(&mut self, slot: u32) {
        self.unlink(slot);
        let m = &self.members[slot as usize];
        let (g, id, contribution) = (m.group, m.id, m.contribution);
        let grp = &mut self.groups[g as usize];
        grp.sum -= contribution;
        grp.n -= 1;
        let (gid, empty) = (grp.id, grp.n == 0);
        self.index.remove(&(gid, id));
        self.free.push(slot);
        if empty {
            self.group_index.remove(&gid);
            self.free_groups.push(g);
        }
    }

    fn unlink(&mut self, slot: u32) {
        let (prev, next, g) = {
            let m = &self.members[slot as usize];
            (m.prev, m.next, m.group)
        };
        if prev != NIL {
            self.members[prev as usize].next = next;
        }
        if next != NIL {
            self.members[next as usize].prev = prev;
        }
        let grp = &mut self.groups[g as usize];
        if grp.head == slot {
            grp.head = next;
        }
        if grp.tail == slot {
            grp.tail = prev;
        }
        let m = &mut self.members[slot as usize];
        m.prev = NIL;
        m.next = NIL;
    }

    fn push_back(&mut self, slot: u32) {
        let g = self.members[slot as usize].group;
        let grp = &mut self.groups[g as usize];
        let tail = grp.tail;
        grp.tail = slot;
        if grp.head == NIL {
            grp.head = slot;
        }
        if tail != NIL {
            self.members[tail as usize].next = slot;
        }
        let m = &mut self.members[slot as usize];
        m.prev = tail;
        m.next = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn core(window: u32, timeout: Micros, k: u32) -> Core {
        Core::new(CoreConfig {
            window_mis: window,
            member_timeout_us: timeout,
            min_group: k,
            max_members: 1000,
        })
        .unwrap()
    }

    #[test]
    fn mean_over_members_of_latest_mi() {
        let mut c = core(1, 1_000_000, 1);
        assert_eq!(c.publish(0, 7, 1, 1, 100).aggregate.mean, Some(100.0));
        let o = c.publish(10, 7, 2, 1, 300);
        assert_eq!(o.applied, Applied::Accepted);
        assert_eq!(
            o.aggregate,
            Aggregate {
                n: 2,
                mean: Some(200.0)
            }
        );
        // member 1's next MI replaces its previous value (window of one MI)
        let o = c.publish(20, 7, 1, 2, 500);
        assert_eq!(
            o.aggregate,
            Aggregate {
                n: 2,
                mean: Some(400.0)
            }
        );
        // other groups are independent
        assert_eq!(
            c.publish(20, 8, 1, 1, 9).aggregate,
            Aggregate {
                n: 1,
                mean: Some(9.0)
            }
        );
        assert_eq!(
            c.aggregate(30, 7),
            Aggregate {
                n: 2,
                mean: Some(400.0)
            }
        );
        assert_eq!(c.aggregate(30, 9), Aggregate { n: 0, mean: None });
        assert_eq!(c.groups(), 2);
        assert_eq!(c.members(), 3);
    }

    #[test]
    fn stale_and_duplicate_mis_are_ignored() {
        let mut c = core(1, 1_000_000, 1);
        c.publish(0, 1, 1, 5, 100);
        let o = c.publish(1, 1, 1, 5, 999);
        assert_eq!(o.applied, Applied::Stale);
        assert_eq!(o.aggregate.mean, Some(100.0));
        assert_eq!(c.publish(2, 1, 1, 4, 999).applied, Applied::Stale);
        assert_eq!(c.stats().stale, 2);
    }

    #[test]
    fn window_is_aligned_to_the_members_mis() {
        let mut c = core(3, 1_000_000, 1);
        c.publish(0, 1, 1, 1, 30);
        c.publish(1, 1, 1, 2, 60);
        // mean of MIs 1..=3: (30 + 60 + 90) / 3
        assert_eq!(c.publish(2, 1, 1, 3, 90).aggregate.mean, Some(60.0));
        // MI 4: window is 2..=4
        assert_eq!(c.publish(3, 1, 1, 4, 150).aggregate.mean, Some(100.0));
        // MIs 5 and 6 lost; MI 7's window is 5..=7 and holds only MI 7
        assert_eq!(c.publish(4, 1, 1, 7, 10).aggregate.mean, Some(10.0));
        // a second member with one value: mean of contributions (10 and 40)
        assert_eq!(c.publish(5, 1, 2, 1, 40).aggregate.mean, Some(25.0));
    }

    #[test]
    fn members_expire_after_the_timeout_exactly() {
        let mut c = core(1, 1000, 1);
        c.publish(0, 1, 1, 1, 100);
        c.publish(500, 1, 2, 1, 300);
        assert_eq!(
            c.aggregate(999, 1),
            Aggregate {
                n: 2,
                mean: Some(200.0)
            }
        );
        // member 1 last published at 0: not live from 1000 on
        assert_eq!(
            c.aggregate(1000, 1),
            Aggregate {
                n: 1,
                mean: Some(300.0)
            }
        );
        // member 2 refreshes at 1400, so it outlives its first deadline (1500)
        c.publish(1400, 1, 2, 2, 500);
        assert_eq!(c.aggregate(2399, 1).n, 1);
        assert_eq!(c.aggregate(2400, 1), Aggregate { n: 0, mean: None });
        assert_eq!(c.stats().expired, 2);
        assert_eq!(c.groups(), 0);
        assert_eq!(c.members(), 0);
        // an expired member that comes back is a new member
        assert_eq!(
            c.publish(3000, 1, 1, 2, 7).aggregate,
            Aggregate {
                n: 1,
                mean: Some(7.0)
            }
        );
    }

    #[test]
    fn sweep_reclaims_untouched_groups() {
        let mut c = core(1, 1000, 1);
        for g in 0..10 {
            c.publish(0, g, 1, 1, 1);
        }
        c.publish(600, 99, 1, 1, 1);
        assert_eq!(c.sweep(999), 0);
        assert_eq!(c.sweep(1000), 10);
        assert_eq!((c.groups(), c.members()), (1, 1));
    }

    #[test]
    fn leave_removes_at_once() {
        let mut c = core(1, 1_000_000, 1);
        c.publish(0, 1, 1, 1, 100);
        c.publish(0, 1, 2, 1, 200);
        let o = c.leave(1, 1, 1);
        assert_eq!(o.applied, Applied::Left);
        assert_eq!(
            o.aggregate,
            Aggregate {
                n: 1,
                mean: Some(200.0)
            }
        );
        assert_eq!(c.leave(2, 1, 1).applied, Applied::NotMember);
    }

    #[test]
    fn below_min_group_only_n_is_released() {
        let mut c = core(1, 1_000_000, 3);
        assert_eq!(
            c.publish(0, 1, 1, 1, 100).aggregate,
            Aggregate { n: 1, mean: None }
        );
        assert_eq!(
            c.publish(0, 1, 2, 1, 200).aggregate,
            Aggregate { n: 2, mean: None }
        );
        assert_eq!(
            c.publish(0, 1, 3, 1, 600).aggregate,
            Aggregate {
                n: 3,
                mean: Some(300.0)
            }
        );
        c.leave(1, 1, 3);
        assert_eq!(c.aggregate(1, 1), Aggregate { n: 2, mean: None });
    }

    #[test]
    fn full_core_refuses_new_members_only() {
        let mut c = Core::new(CoreConfig {
            max_members: 2,
            ..CoreConfig::default()
        })
        .unwrap();
        c.publish(0, 1, 1, 1, 10);
        c.publish(0, 2, 1, 1, 20);
        let o = c.publish(0, 1, 2, 1, 30);
        assert_eq!(o.applied, Applied::Full);
        assert_eq!(
            o.aggregate,
            Aggregate {
                n: 1,
                mean: Some(10.0)
            }
        );
        assert_eq!(c.publish(1, 1, 1, 2, 40).applied, Applied::Accepted);
    }

    #[test]
    fn time_going_backwards_is_clamped() {
        let mut c = core(1, 1000, 1);
        c.publish(5000, 1, 1, 1, 10);
        // an earlier `now` counts as 5000: the member is still live
        assert_eq!(c.aggregate(10, 1).n, 1);
        assert_eq!(c.aggregate(6000, 1).n, 0);
    }

    #[test]
    fn bad_configs_are_refused() {
        let bad = |f: fn(&mut CoreConfig)| {
            let mut cfg = CoreConfig::default();
            f(&mut cfg);
            Core::new(cfg).err()
        };
        assert_eq!(bad(|c| c.window_mis = 0), Some(ConfigError::Window(0)));
        assert_eq!(bad(|c| c.window_mis = 17), Some(ConfigError::Window(17)));
        assert_eq!(bad(|c| c.member_timeout_us = 0), Some(ConfigError::Timeout));
        assert_eq!(bad(|c| c.max_members = 0), Some(ConfigError::MaxMembers));
    }

    /// A model member: (last_update, last_mi, (mi, value) of every accepted publication).
    type ModelMember = (u64, u64, Vec<(u64, u64)>);

    /// A direct, slow model of the definitions in the module documentation.
    struct Model {
        w: u64,
        timeout: u64,
        k: u32,
        /// (group, member) -> (last_update, last_mi, values by mi)
        members: std::collections::BTreeMap<(u64, u64), ModelMember>,
    }

    impl Model {
        fn expire(&mut self, now: u64) {
            let t = self.timeout;
            self.members.retain(|_, m| m.0 + t > now);
        }
        fn aggregate(&self, group: u64) -> (u32, Option<f64>) {
            let mut n = 0u32;
            let mut sum = 0.0f64;
            for (&(g, _), (_, last_mi, vals)) in &self.members {
                if g != group {
                    continue;
                }
                let inwin: Vec<u64> = vals
                    .iter()
                    .filter(|(mi, _)| mi + self.w > *last_mi)
                    .map(|&(_, v)| v)
                    .collect();
                sum += inwin.iter().map(|&v| v as f64).sum::<f64>() / inwin.len() as f64;
                n += 1;
            }
            (n, (n > 0 && n >= self.k).then(|| sum / n as f64))
        }
    }

    proptest! {
        #[test]
        fn core_matches_the_definition(
            window in 1u32..=5,
            k in 1u32..=3,
            ops in proptest::collection::vec(
                (0u64..300, 0u64..3, 0u64..5, 0u64..4, 0u64..1_000_000_000, any::<bool>()),
                1..200,
            ),
        ) {
            let timeout = 1000;
            let mut c = core(window, timeout, k);
            let mut m = Model { w: window as u64, timeout, k, members: Default::default() };
            let mut now = 0;
            for (dt, group, member, dmi, value, leave) in ops {
                now += dt;
                m.expire(now);
                let o = if leave {
                    m.members.remove(&(group, member));
                    c.leave(now, group, member)
                } else {
                    let e = m.members.entry((group, member)).or_insert((now, 0, Vec::new()));
                    let mi = e.1 + dmi;
                    if e.2.is_empty() || mi > e.1 {
                        e.0 = now;
                        e.1 = mi;
                        e.2.push((mi, value));
                    }
                    c.publish(now, group, member, mi, value)
                };
                let (n, mean) = m.aggregate(group);
                prop_assert_eq!(o.aggregate.n, n);
                match (o.aggregate.mean, mean) {
                    (None, None) => {}
                    (Some(a), Some(b)) => prop_assert!((a - b).abs() <= 1e-9 * b.max(1.0), "{} vs {}", a, b),
                    (a, b) => prop_assert!(false, "{:?} vs {:?}", a, b),
                }
            }
        }
    }
}
