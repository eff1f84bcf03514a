//! Topologies: turning a [`TopologySpec`] into named nodes (hosts first, then switches) and
//! directed links, and computing shortest-path routes with equal-cost multipath (ECMP) choices
//! by flow hash.
//!
//! Hosts never forward: a route only transits switches. Between equal-cost next hops a switch
//! picks one by a hash of the flow's hash and its own index, so a flow keeps one path and
//! different flows spread over all of them.

use crate::error::SimError;
use crate::scenario::{Amount, LinkSpec, RedSpec, TopologySpec};
use std::collections::{BTreeMap, VecDeque};

/// A directed link as the topology sees it.
#[derive(Clone, Debug)]
pub struct LinkDef {
    pub from: u32,
    pub to: u32,
    pub spec: LinkSpec,
}

/// Nodes, links and routes.
#[derive(Clone, Debug)]
pub struct Topology {
    /// Node names; nodes `0..hosts` are hosts.
    pub names: Vec<String>,
    /// Number of hosts.
    pub hosts: u32,
    by_name: BTreeMap<String, u32>,
    /// Directed links (ports), in creation order.
    pub links: Vec<LinkDef>,
    /// Per `(node, destination host)`: range into `route_ports`.
    route_index: Vec<(u32, u32)>,
    route_ports: Vec<u32>,
    /// Outgoing links per node.
    out_links: Vec<Vec<u32>>,
}

struct Builder {
    names: Vec<String>,
    hosts: u32,
    links: Vec<LinkDef>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            names: vec![],
            hosts: 0,
            links: vec![],
        }
    }

    fn host(&mut self, name: String) -> u32 {
        assert_eq!(self.names.len() as u32, self.hosts, "hosts come first");
        self.names.push(name);
        self.hosts += 1;
        self.hosts - 1
    }

    fn switch(&mut self, name: String) -> u32 {
        self.names.push(name);
        self.names.len() as u32 - 1
    }

    /// Both directions of a link; `spec` is the direction a->b.
    fn pair(&mut self, a: u32, b: u32, spec: &LinkSpec) {
        self.links.push(LinkDef {
            from: a,
            to: b,
            spec: LinkSpec {
                reverse: None,
                ..spec.clone()
            },
        });
        self.links.push(LinkDef {
            from: b,
            to: a,
            spec: spec.reversed(),
        });
    }
}

fn no_bdp(path: &str, l: &LinkSpec) -> Result<(), SimError> {
    let uses = |a: &Option<Amount>| matches!(a, Some(Amount::Bdp(_)));
    let red = |r: &Option<RedSpec>| {
        r.as_ref()
            .is_some_and(|r| matches!(r.min, Amount::Bdp(_)) || matches!(r.max, Amount::Bdp(_)))
    };
    let bad = |what: &str| {
        Err(SimError::Invalid(format!(
            "{path}{what}: sizes in bdp are only defined for a dumbbell's bottleneck"
        )))
    };
    if uses(&l.buffer) || uses(&l.ecn_k) || red(&l.red) {
        return bad("");
    }
    if let Some(r) = &l.reverse
        && (uses(&r.buffer) || uses(&r.ecn_k) || red(&r.red))
    {
        return bad(".reverse");
    }
    Ok(())
}

/// A dumbbell bottleneck's RED thresholds given in BDPs, in bytes.
fn resolve_red(red: &mut Option<RedSpec>, bdp_bytes: f64) {
    if let Some(red) = red {
        for a in [&mut red.min, &mut red.max] {
            if let Amount::Bdp(x) = *a {
                *a = Amount::Bytes((x * bdp_bytes).round() as u64);
            }
        }
    }
}

fn resolve_bdp(a: &mut Option<Amount>, bdp_bytes: f64) {
    if let Some(Amount::Bdp(x)) = *a {
        *a = Some(Amount::Bytes((x * bdp_bytes).round() as u64));
    }
}

impl Topology {
    /// Build a topology. `trace_rate` gives the mean rate of a trace-driven link (for the BDP of
    /// a dumbbell whose bottleneck follows a trace).
    pub fn build(
        spec: &TopologySpec,
        trace_rate: &mut dyn FnMut(&LinkSpec) -> Result<u64, SimError>,
    ) -> Result<Topology, SimError> {
        let mut b = Builder::new();
        match spec {
            TopologySpec::Dumbbell(d) => {
                let receivers = d.receivers.unwrap_or(d.senders);
                let senders: Vec<u32> = (0..d.senders).map(|i| b.host(format!("s{i}"))).collect();
                let rcv: Vec<u32> = (0..receivers).map(|i| b.host(format!("r{i}"))).collect();
                let left = b.switch("left".into());
                let right = b.switch("right".into());
                no_bdp("topology.access", &d.access)?;
                let max_sender_delay = d
                    .sender_delays
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(d.access.delay)
                    .0;
                let base_rtt = 2 * (max_sender_delay + d.bottleneck.delay.0 + d.access.delay.0);
                let rate = match d.bottleneck.rate {
                    Some(r) => r.0,
                    None => trace_rate(&d.bottleneck)?,
                };
                let bdp = rate as f64 * base_rtt as f64 / 1e9;
                let mut bottleneck = d.bottleneck.clone();
                resolve_bdp(&mut bottleneck.buffer, bdp);
                resolve_bdp(&mut bottleneck.ecn_k, bdp);
                resolve_red(&mut bottleneck.red, bdp);
                if let Some(r) = &mut bottleneck.reverse {
                    resolve_bdp(&mut r.buffer, bdp);
                    resolve_bdp(&mut r.ecn_k, bdp);
                    resolve_red(&mut r.red, bdp);
                }
                for (i, &s) in senders.iter().enumerate() {
                    let mut a = d.access.clone();
                    if let Some(&delay) = d.sender_delays.get(i) {
                        a.delay = delay;
                    }
                    b.pair(s, left, &a);
                }
                b.pair(left, right, &bottleneck);
                for &r in &rcv {
                    // Receivers' links are given host->switch like every access link.
                    b.pair(r, right, &d.access);
                }
            }
            TopologySpec::ParkingLot(p) => {
                no_bdp("topology.link", &p.link)?;
                no_bdp("topology.access", &p.access)?;
                let mut hosts = vec![];
                for s in 0..=p.hops {
                    for k in 0..p.hosts_per_switch {
                        hosts.push((s, b.host(format!("h{s}.{k}"))));
                    }
                }
                let sw: Vec<u32> = (0..=p.hops).map(|s| b.switch(format!("sw{s}"))).collect();
                for (s, h) in hosts {
                    b.pair(h, sw[s as usize], &p.access);
                }
                for w in sw.windows(2) {
                    b.pair(w[0], w[1], &p.link);
                }
            }
            TopologySpec::LeafSpine(l) => {
                no_bdp("topology.host_link", &l.host_link)?;
                no_bdp("topology.fabric_link", &l.fabric_link)?;
                let n = l.leaves * l.hosts_per_leaf;
                let hosts: Vec<u32> = (0..n).map(|i| b.host(format!("h{i}"))).collect();
                let leaves: Vec<u32> = (0..l.leaves)
                    .map(|i| b.switch(format!("leaf{i}")))
                    .collect();
                let spines: Vec<u32> = (0..l.spines)
                    .map(|i| b.switch(format!("spine{i}")))
                    .collect();
                for (i, &h) in hosts.iter().enumerate() {
                    b.pair(h, leaves[i / l.hosts_per_leaf as usize], &l.host_link);
                }
                for &leaf in &leaves {
                    for &spine in &spines {
                        b.pair(leaf, spine, &l.fabric_link);
                    }
                }
            }
            TopologySpec::Custom(c) => {
                let mut ids = BTreeMap::new();
                for h in &c.hosts {
                    if ids.insert(h.clone(), b.host(h.clone())).is_some() {
                        return Err(SimError::Invalid(format!("topology: node {h} twice")));
                    }
                }
                for s in &c.switches {
                    if ids.insert(s.clone(), b.switch(s.clone())).is_some() {
                        return Err(SimError::Invalid(format!("topology: node {s} twice")));
                    }
                }
                for (i, l) in c.links.iter().enumerate() {
                    no_bdp(&format!("topology.links[{i}].spec"), &l.spec)?;
                    let find = |n: &String| {
                        ids.get(n).copied().ok_or_else(|| {
                            SimError::Invalid(format!("topology.links[{i}]: no node named {n}"))
                        })
                    };
                    let (a, z) = (find(&l.a)?, find(&l.b)?);
                    if a == z {
                        return Err(SimError::Invalid(format!(
                            "topology.links[{i}]: a link from {} to itself",
                            l.a
                        )));
                    }
                    b.pair(a, z, &l.spec);
                }
            }
        }
        Topology::finish(b)
    }

    fn finish(b: Builder) -> Result<Topology, SimError> {
        let n = b.names.len();
        let mut by_name = BTreeMap::new();
        for (i, name) in b.names.iter().enumerate() {
            by_name.insert(name.clone(), i as u32);
        }
        let mut out_links = vec![Vec::new(); n];
        let mut in_links = vec![Vec::new(); n];
        for (i, l) in b.links.iter().enumerate() {
            out_links[l.from as usize].push(i as u32);
            in_links[l.to as usize].push(i as u32);
        }
        for h in 0..b.hosts {
            if out_links[h as usize].len() != 1 {
                return Err(SimError::Invalid(format!(
                    "host {} has {} links; a host has exactly one",
                    b.names[h as usize],
                    out_links[h as usize].len()
                )));
            }
        }
        let hosts = b.hosts as usize;
        let mut route_index = vec![(0u32, 0u32); n * hosts];
        let mut route_ports = Vec::new();
        let mut dist = vec![u32::MAX; n];
        let mut queue = VecDeque::new();
        for d in 0..hosts {
            dist.iter_mut().for_each(|x| *x = u32::MAX);
            dist[d] = 0;
            queue.clear();
            queue.push_back(d as u32);
            while let Some(u) = queue.pop_front() {
                for &li in &in_links[u as usize] {
                    let v = b.links[li as usize].from;
                    if dist[v as usize] == u32::MAX {
                        dist[v as usize] = dist[u as usize] + 1;
                        if v >= b.hosts {
                            queue.push_back(v);
                        }
                    }
                }
            }
            for v in 0..n {
                if v == d || dist[v] == u32::MAX {
                    continue;
                }
                let start = route_ports.len() as u32;
                for &li in &out_links[v] {
                    let w = b.links[li as usize].to as usize;
                    if (w == d || w >= hosts) && dist[w] != u32::MAX && dist[w] + 1 == dist[v] {
                        route_ports.push(li);
                    }
                }
                route_index[v * hosts + d] = (start, route_ports.len() as u32 - start);
            }
        }
        Ok(Topology {
            names: b.names,
            hosts: b.hosts,
            by_name,
            links: b.links,
            route_index,
            route_ports,
            out_links,
        })
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The host called `name`, or an error naming `what`.
    pub fn host(&self, name: &str, what: &str) -> Result<u32, SimError> {
        match self.node(name) {
            Some(n) if n < self.hosts => Ok(n),
            Some(_) => Err(SimError::Invalid(format!(
                "{what}: {name} is a switch, not a host"
            ))),
            None => {
                let mut hint: Vec<&str> = self
                    .names
                    .iter()
                    .take(self.hosts as usize)
                    .map(String::as_str)
                    .take(6)
                    .collect();
                if self.hosts > 6 {
                    hint.push("...");
                }
                Err(SimError::Invalid(format!(
                    "{what}: no host named {name} (hosts: {})",
                    hint.join(", ")
                )))
            }
        }
    }

    /// The link a packet to host `dst` with flow hash `hash` leaves `node` on.
    #[inline]
    pub fn next_link(&self, node: u32, dst: u32, hash: u32) -> Option<u32> {
        let (start, len) = self.route_index[node as usize * self.hosts as usize + dst as usize];
        match len {
            0 => None,
            1 => Some(self.route_ports[start as usize]),
            _ => {
                let i = ecmp(hash, node) % u64::from(len);
                Some(self.route_ports[start as usize + i as usize])
            }
        }
    }

    /// The host's one link.
    pub fn uplink(&self, host: u32) -> u32 {
        self.out_links[host as usize][0]
    }

    /// The links from `src` to `dst` for a flow of hash `hash` (empty if unreachable).
    pub fn path(&self, src: u32, dst: u32, hash: u32) -> Vec<u32> {
        let mut links = vec![];
        let mut node = src;
        while node != dst {
            let Some(l) = self.next_link(node, dst, hash) else {
                return vec![];
            };
            links.push(l);
            node = self.links[l as usize].to;
            if links.len() > self.names.len() {
                return vec![];
            }
        }
        links
    }
}

/// Mix a flow hash with a node index (splitmix64 finalizer).
#[inline]
fn ecmp(hash: u32, node: u32) -> u64 {
    mix64((u64::from(hash) << 32) | u64::from(node))
}

/// splitmix64's finalizer.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Dur, LeafSpineSpec, ParkingLotSpec, Rate};

    fn link() -> LinkSpec {
        LinkSpec::new(Rate(1_000_000), Dur::us(1))
    }

    #[test]
    fn bdp_sizes_resolve_on_a_dumbbells_bottleneck_both_ways_and_nowhere_else() {
        use crate::scenario::{DumbbellSpec, LinkOverride};
        let red = || RedSpec {
            min: Amount::Bdp(0.5),
            max: Amount::Bdp(1.0),
            max_p: 0.1,
            weight: 0.002,
            ecn: true,
        };
        // 8 Mbit/s (1 MB/s) and 1 ms each way on the bottleneck, access links without delay:
        // a BDP of 2,000 bytes.
        let dumbbell = |bottleneck: LinkSpec, access: LinkSpec| {
            Topology::build(
                &TopologySpec::Dumbbell(DumbbellSpec {
                    senders: 1,
                    receivers: None,
                    bottleneck,
                    access,
                    sender_delays: vec![],
                }),
                &mut |_| Ok(0),
            )
        };
        let mut b = LinkSpec::new(Rate(1_000_000), Dur::us(1000));
        b.reverse = Some(Box::new(LinkOverride {
            buffer: Some(Amount::Bdp(2.0)),
            red: Some(red()),
            ..LinkOverride::default()
        }));
        let t = dumbbell(b.clone(), LinkSpec::new(Rate(1_000_000_000), Dur(0))).unwrap();
        let back = t
            .links
            .iter()
            .find(|l| l.spec.rate == b.rate && l.from > l.to)
            .map(|l| l.spec.clone())
            .unwrap();
        assert_eq!(back.buffer, Some(Amount::Bytes(4000)), "{back:?}");
        let r = back.red.unwrap();
        assert_eq!((r.min, r.max), (Amount::Bytes(1000), Amount::Bytes(2000)));
        // Elsewhere, reverse overrides included, BDPs are refused rather than left unlimited.
        let mut access = LinkSpec::new(Rate(1_000_000_000), Dur(0));
        access.reverse = Some(Box::new(LinkOverride {
            buffer: Some(Amount::Bdp(1.0)),
            ..LinkOverride::default()
        }));
        let e = dumbbell(b, access).unwrap_err().to_string();
        assert!(e.contains("topology.access.reverse"), "{e}");
    }

    #[test]
    fn leaf_spine_routes_spread_over_spines() {
        let t = Topology::build(
            &TopologySpec::LeafSpine(LeafSpineSpec {
                spines: 3,
                leaves: 4,
                hosts_per_leaf: 2,
                host_link: link(),
                fabric_link: link(),
            }),
            &mut |_| Ok(0),
        )
        .unwrap();
        assert_eq!(t.hosts, 8);
        let (h0, h7) = (t.node("h0").unwrap(), t.node("h7").unwrap());
        let mut spines = std::collections::BTreeSet::new();
        for hash in 0..64 {
            let p = t.path(h0, h7, hash);
            assert_eq!(p.len(), 4, "host-leaf-spine-leaf-host");
            spines.insert(t.links[p[1] as usize].to);
        }
        assert_eq!(spines.len(), 3, "ECMP uses every spine");
        // Same leaf: no spine.
        assert_eq!(t.path(h0, t.node("h1").unwrap(), 5).len(), 2);
    }

    #[test]
    fn parking_lot_is_a_row_and_hosts_do_not_forward() {
        let t = Topology::build(
            &TopologySpec::ParkingLot(ParkingLotSpec {
                hops: 3,
                hosts_per_switch: 2,
                link: link(),
                access: link(),
            }),
            &mut |_| Ok(0),
        )
        .unwrap();
        let p = t.path(t.node("h0.0").unwrap(), t.node("h3.1").unwrap(), 0);
        let names: Vec<String> = p
            .iter()
            .map(|&l| t.names[t.links[l as usize].to as usize].clone())
            .collect();
        assert_eq!(names, ["sw0", "sw1", "sw2", "sw3", "h3.1"]);
        assert!(t.host("sw1", "x").is_err());
        assert!(
            t.host("nobody", "flows[0].src")
                .unwrap_err()
                .to_string()
                .contains("h0.0")
        );
    }
}
