//! The event core: a priority queue of timestamped events, ordered by time, then by class
//! (statistics samples before everything else at the same instant), then by insertion order.
//!
//! Events are small copyable tags; the state they refer to (packets on a wire, queued packets,
//! IPC messages) lives in the components, so the heap stays small and cheap to reorder. The
//! insertion counter makes the order of simultaneous events, and hence every run, deterministic.

/// What happens at an event. Indices refer to the simulator's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Record the periodic statistics sample.
    Sample,
    /// The end of the scenario.
    End,
    /// Port `0` finished serializing its current packet.
    TxDone(u32),
    /// The packet at the head of port `0`'s wire reaches the next node.
    WireArrive(u32),
    /// A delivery opportunity of trace-driven port `0`.
    TraceOpportunity(u32),
    /// Port `0` changes rate (the next step of its schedule).
    RateChange(u32),
    /// Sender timer of flow `0` (RTO, loss timer, pacing, idle invoke, app data).
    FlowTimer(u32),
    /// Delayed-ACK timer of the receiver of flow `0`.
    AckTimer(u32),
    /// Flow `0` starts.
    FlowStart(u32),
    /// Flow `0` stops sending (its stop time).
    FlowStop(u32),
    /// Flow `0`'s engine connection is freed (once the agent's last answers have arrived).
    Release(u32),
    /// Next arrival of workload generator `0`.
    Arrival(u32),
    /// The oldest datapath-to-agent message is due at the agent.
    ToAgent,
    /// The oldest agent-to-datapath message is due at the datapath engine.
    ToDatapath,
}

impl Event {
    fn class(self) -> u64 {
        match self {
            Event::Sample => 0,
            _ => 1,
        }
    }
}

/// A pending event: its sort key is `time << 64 | class << 62 | insertion number`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    key: u128,
    event: Event,
}

const CLASS_SHIFT: u32 = 62;

/// The pending events of one simulation: a 4-ary min-heap on one integer key (shallower than a
/// binary heap, and one comparison per pair of entries).
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: Vec<Entry>,
    seq: u64,
    popped: u64,
}

const ARITY: usize = 4;

impl EventQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedule `event` at `time` (ns).
    pub fn push(&mut self, time: u64, event: Event) {
        self.seq += 1;
        let order = (event.class() << CLASS_SHIFT) | self.seq;
        let e = Entry {
            key: (u128::from(time) << 64) | u128::from(order),
            event,
        };
        // Sift up.
        let mut i = self.heap.len();
        self.heap.push(e);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.heap[parent].key <= e.key {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = e;
    }

    /// The earliest event, removed.
    pub fn pop(&mut self) -> Option<(u64, Event)> {
        let top = *self.heap.first()?;
        let last = self.heap.pop()?;
        let n = self.heap.len();
        if n > 0 {
            // Sift the last entry down from the root.
            let mut i = 0;
            loop {
                let first = i * ARITY + 1;
                if first >= n {
                    break;
                }
                let end = (first + ARITY).min(n);
                let mut best = first;
                for c in first + 1..end {
                    if self.heap[c].key < self.heap[best].key {
                        best = c;
                    }
                }
                if self.heap[best].key >= last.key {
                    break;
                }
                self.heap[i] = self.heap[best];
                i = best;
            }
            self.heap[i] = last;
        }
        self.popped += 1;
        Some(((top.key >> 64) as u64, top.event))
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.first().map(|e| (e.key >> 64) as u64)
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Events popped so far.
    pub fn processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_samples_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(10, Event::TxDone(1));
        q.push(5, Event::TxDone(2));
        q.push(10, Event::TxDone(3));
        q.push(10, Event::Sample);
        q.push(7, Event::End);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (5, Event::TxDone(2)),
                (7, Event::End),
                (10, Event::Sample),
                (10, Event::TxDone(1)),
                (10, Event::TxDone(3)),
            ]
        );
        assert_eq!(q.processed(), 5);
        assert!(q.is_empty());
    }

    #[test]
    fn matches_a_sorted_order_on_random_input() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut q = EventQueue::new();
        let mut expect = vec![];
        let mut seq = 0u64;
        for round in 0..50 {
            for _ in 0..rng.gen_range(0..200) {
                let t = rng.gen_range(0..1000u64) + round * 100;
                seq += 1;
                q.push(t, Event::FlowTimer(seq as u32));
                expect.push((t, seq));
            }
            expect.sort();
            for _ in 0..rng.gen_range(0..150).min(expect.len()) {
                let (t, s) = expect.remove(0);
                assert_eq!(q.pop(), Some((t, Event::FlowTimer(s as u32))));
            }
        }
        while let Some((t, s)) = expect.first().copied() {
            expect.remove(0);
            assert_eq!(q.pop(), Some((t, Event::FlowTimer(s as u32))));
        }
        assert!(q.is_empty());
    }
}
