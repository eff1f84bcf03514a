//! The receiver's record of which packet numbers arrived, as disjoint inclusive ranges, from
//! which it builds ACK ranges. Bounded: beyond [`PnRanges::MAX_KEPT`] ranges the lowest are
//! forgotten (the sender still learns of that data through the contiguous stream offset).

use std::collections::VecDeque;

use crate::packet::Ack;

/// Disjoint, non-adjacent inclusive ranges of packet numbers, ascending.
#[derive(Clone, Debug, Default)]
pub struct PnRanges {
    r: VecDeque<(u64, u64)>,
}

/// What an insertion found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// Already recorded.
    Duplicate,
    /// Extends the highest range by one (the in-order case).
    InOrder,
    /// New, but not next in sequence (a gap before it, or it fills an older gap).
    OutOfOrder,
}

impl PnRanges {
    /// Most ranges remembered.
    pub const MAX_KEPT: usize = 256;

    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The largest packet number recorded.
    pub fn largest(&self) -> Option<u64> {
        self.r.back().map(|r| r.1)
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.r.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.r.is_empty()
    }

    /// Whether `pn` is recorded (packet numbers below the forgotten ranges read as absent).
    pub fn contains(&self, pn: u64) -> bool {
        match self.r.binary_search_by(|&(lo, _)| lo.cmp(&pn)) {
            Ok(_) => true,
            Err(0) => false,
            Err(i) => self.r[i - 1].1 >= pn,
        }
    }

    /// Records `pn`.
    pub fn insert(&mut self, pn: u64) -> Insert {
        if let Some(last) = self.r.back_mut() {
            if pn == last.1 + 1 {
                last.1 = pn;
                return Insert::InOrder;
            }
            if pn > last.1 + 1 {
                self.r.push_back((pn, pn));
                self.trim();
                return Insert::OutOfOrder;
            }
        } else {
            self.r.push_back((pn, pn));
            return Insert::InOrder;
        }
        if self.contains(pn) {
            return Insert::Duplicate;
        }
        // Index of the first range starting above pn.
        let i = match self.r.binary_search_by(|&(lo, _)| lo.cmp(&pn)) {
            Ok(i) | Err(i) => i,
        };
        let joins_prev = i > 0 && self.r[i - 1].1 + 1 == pn;
        let joins_next = i < self.r.len() && self.r[i].0 == pn + 1;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.r[i - 1].1 = self.r[i].1;
                self.r.remove(i);
            }
            (true, false) => self.r[i - 1].1 = pn,
            (false, true) => self.r[i].0 = pn,
            (false, false) => {
                self.r.insert(i, (pn, pn));
                self.trim();
            }
        }
        Insert::OutOfOrder
    }

    fn trim(&mut self) {
        while self.r.len() > Self::MAX_KEPT {
            self.r.pop_front();
        }
    }

    /// Fills `ack` with the highest ranges (up to what an ACK carries).
    pub fn fill_ack(&self, ack: &mut Ack) {
        for &(lo, hi) in self.r.iter().rev() {
            if !ack.push_range(lo, hi) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::StdRng, seq::SliceRandom};

    #[test]
    fn in_order_and_gaps() {
        let mut s = PnRanges::new();
        assert_eq!(s.insert(0), Insert::InOrder);
        assert_eq!(s.insert(1), Insert::InOrder);
        assert_eq!(s.insert(4), Insert::OutOfOrder);
        assert_eq!(s.insert(1), Insert::Duplicate);
        assert_eq!(s.insert(3), Insert::OutOfOrder);
        assert_eq!(s.len(), 2);
        assert_eq!(s.insert(2), Insert::OutOfOrder);
        assert_eq!(s.len(), 1);
        assert!(s.contains(0) && s.contains(4) && !s.contains(5));
        let mut a = Ack::new(1);
        s.fill_ack(&mut a);
        assert_eq!(a.ranges(), &[(0, 4)]);
    }

    #[test]
    fn random_order_matches_a_set() {
        // Few enough packets that the islands never exceed MAX_KEPT.
        let mut rng = StdRng::seed_from_u64(3);
        let mut pns: Vec<u64> = (0..400).filter(|v| v % 7 != 3).collect();
        pns.shuffle(&mut rng);
        let mut s = PnRanges::new();
        for &p in &pns {
            assert_ne!(s.insert(p), Insert::Duplicate);
        }
        for &p in &pns {
            assert_eq!(s.insert(p), Insert::Duplicate);
        }
        for v in 0..400 {
            assert_eq!(s.contains(v), v % 7 != 3, "{v}");
        }
        let mut a = Ack::new(1);
        s.fill_ack(&mut a);
        assert_eq!(a.ranges().len(), crate::packet::MAX_ACK_RANGES);
        assert_eq!(a.largest(), Some(399));
    }
}
