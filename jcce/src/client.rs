//! The agent's JCCE client.
//!
//! Made for a synchronous congestion-control callback: [`Member::publish`] puts an entry on a
//! bounded lock-free queue (when it is full the oldest entry is dropped and counted) and
//! [`Member::latest`] reads a lock-free latest-value slot; neither waits for the network. One
//! background thread (a single-threaded tokio runtime) owns the UDP socket: it sends queued
//! entries in batches, authenticates the replies and fills the slots, notices when the service
//! stops answering ([`Client::is_reachable`] turns false, so the controller can fall back to
//! plain Vivace) and probes it again with exponential backoff, on a fresh socket each time, until
//! it answers. The service keeps no per-client connection state beyond replay protection, so a
//! restarted service simply starts answering again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use tokio::net::UdpSocket;
use tokio::sync::Notify;

use crate::wire::{self, Key, Kind, Op, SeqWindow, UpdateEntry, Writer};

/// Client configuration. Every field: unit, default, reason.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The service, `host:port` (resolved again on every reconnection).
    pub server: String,
    /// The JointCloud's shared key.
    pub key: Key,
    /// Publish queue capacity (entries). Default 4096: one entry per flow per MI, so this covers
    /// thousands of flows for one MI; when full the oldest entry is dropped and counted.
    pub queue_capacity: usize,
    /// Entries per datagram (1..=1024). Default 32: a 1,344-byte datagram, inside an Ethernet MTU.
    pub max_batch: usize,
    /// No valid reply for this long after a send means "unreachable" (ms). Default 250 ms: several
    /// loopback or data-centre round trips, under one MI of a 30 ms-RTT flow times ten.
    pub reply_timeout: Duration,
    /// First probe delay after the service became unreachable. Default 50 ms.
    pub backoff_initial: Duration,
    /// Longest probe delay (doubling from `backoff_initial`). Default 2 s.
    pub backoff_max: Duration,
}

impl ClientConfig {
    /// Defaults for everything but the address and the key.
    pub fn new(server: impl Into<String>, key: Key) -> Self {
        ClientConfig {
            server: server.into(),
            key,
            queue_capacity: 4096,
            max_batch: wire::MTU_ENTRIES,
            reply_timeout: Duration::from_millis(250),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(2),
        }
    }
}

/// Whether the service answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reachability {
    /// No reply yet and no timeout yet.
    Connecting = 0,
    /// The latest request was answered in time.
    Reachable = 1,
    /// A request went unanswered for `reply_timeout`, or the socket reported an error.
    Unreachable = 2,
}

/// The aggregate a member received in the reply to its own publication.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupAggregate {
    /// Live members of the group, this one included.
    pub n: u32,
    /// Mean delivered throughput of the group (bytes/s); `None` when the service withheld it
    /// (`n < k`) or the member has left.
    pub mean: Option<f64>,
    /// The MI number of the publication this reply answers.
    pub mi: u64,
    /// How long ago the reply arrived.
    pub age: Duration,
}

/// Client counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Entries put on the queue.
    pub queued: u64,
    /// Entries dropped because the queue was full (oldest first) or coalesced away while the
    /// service was unreachable.
    pub dropped: u64,
    /// Datagrams sent.
    pub datagrams: u64,
    /// Authenticated replies accepted.
    pub replies: u64,
    /// Datagrams received that were not acceptable replies (forged, replayed, not ours).
    pub rejected: u64,
    /// Sockets opened (1 + reconnections).
    pub sockets: u64,
}

#[derive(Default)]
struct Slot {
    /// Seqlock version: odd while being written, 0 = never written.
    version: AtomicU64,
    n: AtomicU64,
    mean: AtomicU64,
    mi: AtomicU64,
    at_us: AtomicU64,
}

impl Slot {
    /// Single writer: the background thread.
    fn write(&self, n: u32, mean: Option<f64>, mi: u64, at_us: u64) {
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.n.store(n as u64, Ordering::Relaxed);
        self.mean
            .store(mean.map_or(u64::MAX, f64::to_bits), Ordering::Relaxed);
        self.mi.store(mi, Ordering::Relaxed);
        self.at_us.store(at_us, Ordering::Relaxed);
        self.version.store(v + 2, Ordering::Release);
    }

    fn read(&self) -> Option<(u32, Option<f64>, u64, u64)> {
        loop {
            let v1 = self.version.load(Ordering::Acquire);
            if v1 == 0 {
                return None;
            }
            if v1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let n = self.n.load(Ordering::Relaxed) as u32;
            let mean = self.mean.load(Ordering::Relaxed);
            let mi = self.mi.load(Ordering::Relaxed);
            let at = self.at_us.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.version.load(Ordering::Relaxed) == v1 {
                let mean = (mean != u64::MAX).then(|| f64::from_bits(mean));
                return Some((n, mean, mi, at));
            }
        }
    }
}

#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    dropped: AtomicU64,
    datagrams: AtomicU64,
    replies: AtomicU64,
    rejected: AtomicU64,
    sockets: AtomicU64,
}

struct Shared {
    queue: ArrayQueue<UpdateEntry>,
    pending: AtomicBool,
    notify: Notify,
    stop: AtomicBool,
    state: AtomicU8,
    slots: Mutex<HashMap<(u64, u64), Arc<Slot>>>,
    counters: Counters,
    epoch: Instant,
}

impl Shared {
    fn enqueue(&self, e: UpdateEntry) {
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        if self.queue.force_push(e).is_some() {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if !self.pending.swap(true, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }

    fn reachability(&self) -> Reachability {
        match self.state.load(Ordering::Acquire) {
            1 => Reachability::Reachable,
            2 => Reachability::Unreachable,
            _ => Reachability::Connecting,
        }
    }
}

/// A connection to a JCCE service, shared by every flow of the agent.
pub struct Client {
    shared: Arc<Shared>,
    sender: u64,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Client {
    /// Start the background thread. Fails only if the thread or its runtime cannot start; an
    /// unreachable or unresolvable service is reported through [`Client::reachability`].
    pub fn start(cfg: ClientConfig) -> std::io::Result<Client> {
        let shared = Arc::new(Shared {
            queue: ArrayQueue::new(cfg.queue_capacity.max(1)),
            pending: AtomicBool::new(false),
            notify: Notify::new(),
            stop: AtomicBool::new(false),
            state: AtomicU8::new(Reachability::Connecting as u8),
            slots: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            epoch: Instant::now(),
        });
        let sender: u64 = rand::random::<u64>() | 1;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let bg = Background::new(cfg, shared.clone(), sender);
        let thread = std::thread::Builder::new()
            .name("jcce-client".into())
            .spawn(move || rt.block_on(bg.run()))?;
        Ok(Client {
            shared,
            sender,
            thread: Some(thread),
        })
    }

    /// Join group `group` as a new member with a random id.
    pub fn member(&self, group: u64) -> Member {
        let id = rand::random::<u64>();
        let slot = Arc::new(Slot::default());
        self.shared
            .slots
            .lock()
            .expect("slots lock")
            .insert((group, id), slot.clone());
        Member {
            shared: self.shared.clone(),
            group,
            id,
            slot,
        }
    }

    /// True while the service answers in time. When false the controller runs without the
    /// aggregate (plain Vivace).
    pub fn is_reachable(&self) -> bool {
        self.reachability() == Reachability::Reachable
    }

    /// Finer-grained than [`Client::is_reachable`]: distinguishes "no answer yet" at start.
    pub fn reachability(&self) -> Reachability {
        self.shared.reachability()
    }

    /// This client's sender id (random per client).
    pub fn sender_id(&self) -> u64 {
        self.sender
    }

    /// Counters.
    pub fn stats(&self) -> ClientStats {
        let c = &self.shared.counters;
        ClientStats {
            queued: c.queued.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            datagrams: c.datagrams.load(Ordering::Relaxed),
            replies: c.replies.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            sockets: c.sockets.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.notify.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One flow's membership in a group. Dropping it leaves the group.
pub struct Member {
    shared: Arc<Shared>,
    group: u64,
    id: u64,
    slot: Arc<Slot>,
}

impl Member {
    /// The group id.
    pub fn group(&self) -> u64 {
        self.group
    }

    /// This member's id (random).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Publish the delivered throughput (bytes/s) of MI number `mi` (strictly increasing).
    /// Never blocks.
    pub fn publish(&self, mi: u64, bytes_per_sec: u64) {
        self.shared.enqueue(UpdateEntry {
            op: Op::Publish,
            group: self.group,
            member: self.id,
            mi,
            value: bytes_per_sec,
        });
    }

    /// The aggregate of the latest reply to this member's publications, if any. Never blocks.
    pub fn latest(&self) -> Option<GroupAggregate> {
        let (n, mean, mi, at_us) = self.slot.read()?;
        let now_us = self.shared.epoch.elapsed().as_micros() as u64;
        Some(GroupAggregate {
            n,
            mean,
            mi,
            age: Duration::from_micros(now_us.saturating_sub(at_us)),
        })
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.shared
            .slots
            .lock()
            .expect("slots lock")
            .remove(&(self.group, self.id));
        self.shared.enqueue(UpdateEntry {
            op: Op::Leave,
            group: self.group,
            member: self.id,
            mi: 0,
            value: 0,
        });
    }
}

struct Background {
    cfg: ClientConfig,
    shared: Arc<Shared>,
    sender: u64,
    seq: u64,
    replies: SeqWindow,
    outbox: Vec<UpdateEntry>,
    buf: Vec<u8>,
    /// The earliest send not followed by a reply yet.
    unanswered_since: Option<Instant>,
    backoff: Duration,
    next_probe: Instant,
}

impl Background {
    fn new(cfg: ClientConfig, shared: Arc<Shared>, sender: u64) -> Self {
        let backoff = cfg.backoff_initial;
        Background {
            cfg,
            shared,
            sender,
            seq: 0,
            replies: SeqWindow::default(),
            outbox: Vec::new(),
            buf: Vec::with_capacity(wire::MAX_DATAGRAM),
            unanswered_since: None,
            backoff,
            next_probe: Instant::now(),
        }
    }

    fn set_state(&self, s: Reachability) {
        let old = self.shared.state.swap(s as u8, Ordering::AcqRel);
        if old != s as u8 {
            match s {
                Reachability::Reachable => tracing::info!("JCCE at {} reachable", self.cfg.server),
                Reachability::Unreachable => tracing::warn!(
                    "JCCE at {} unreachable; flows run without the aggregate",
                    self.cfg.server
                ),
                Reachability::Connecting => {}
            }
        }
    }

    async fn connect(&self) -> Option<UdpSocket> {
        let addr = match tokio::net::lookup_host(&self.cfg.server).await {
            Ok(mut it) => it.next()?,
            Err(e) => {
                tracing::debug!("resolving {}: {e}", self.cfg.server);
                return None;
            }
        };
        let bind = if addr.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        };
        let sock = UdpSocket::bind(bind).await.ok()?;
        sock.connect(addr).await.ok()?;
        self.shared.counters.sockets.fetch_add(1, Ordering::Relaxed);
        Some(sock)
    }

    async fn run(mut self) {
        let mut sock = self.connect().await;
        let mut rbuf = vec![0u8; wire::MAX_DATAGRAM + 1];
        loop {
            let deadline = self.deadline();
            let got = tokio::select! {
                _ = self.shared.notify.notified() => None,
                r = async {
                    match &sock {
                        Some(s) => s.recv(&mut rbuf).await,
                        None => std::future::pending().await,
                    }
                } => Some(r),
                _ = tokio::time::sleep_until(deadline.into()) => None,
            };
            match got {
                Some(Ok(n)) => self.on_datagram(&rbuf[..n]),
                // Linux reports an ICMP port-unreachable on the connected socket.
                Some(Err(e)) => {
                    tracing::debug!("JCCE socket: {e}");
                    self.unreachable();
                }
                None => {}
            }
            let stopping = self.shared.stop.load(Ordering::Acquire);
            self.shared.pending.store(false, Ordering::Release);
            while let Some(e) = self.shared.queue.pop() {
                self.outbox.push(e);
            }
            let now = Instant::now();
            if let Some(t) = self.unanswered_since
                && now >= t + self.cfg.reply_timeout
            {
                self.unanswered_since = None;
                if self.shared.reachability() != Reachability::Unreachable {
                    self.unreachable();
                }
            }
            if self.shared.reachability() == Reachability::Unreachable {
                self.coalesce();
                if now >= self.next_probe && !self.outbox.is_empty() {
                    sock = self.connect().await;
                    self.flush(&sock).await;
                    // The first probe went `backoff_initial` after the service became
                    // unreachable; each next one waits twice as long as the one before.
                    self.backoff = (self.backoff * 2).min(self.cfg.backoff_max);
                    self.next_probe = now + self.backoff;
                }
            } else {
                self.flush(&sock).await;
            }
            if stopping {
                break;
            }
        }
    }

    fn deadline(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        let timeout = self
            .unanswered_since
            .map_or(far, |t| t + self.cfg.reply_timeout);
        if self.shared.reachability() == Reachability::Unreachable && !self.outbox.is_empty() {
            timeout.min(self.next_probe)
        } else {
            timeout
        }
    }

    fn unreachable(&mut self) {
        if self.shared.reachability() != Reachability::Unreachable {
            self.backoff = self.cfg.backoff_initial;
            self.next_probe = Instant::now() + self.backoff;
        }
        self.set_state(Reachability::Unreachable);
    }

    /// While unreachable, keep only each member's latest entry (in order), at most a queue's worth.
    fn coalesce(&mut self) {
        let mut seen = HashSet::new();
        let before = self.outbox.len();
        let mut kept: Vec<UpdateEntry> = self
            .outbox
            .iter()
            .rev()
            .filter(|e| seen.insert((e.group, e.member)))
            .take(self.cfg.queue_capacity.max(1))
            .copied()
            .collect();
        kept.reverse();
        let dropped = (before - kept.len()) as u64;
        self.shared
            .counters
            .dropped
            .fetch_add(dropped, Ordering::Relaxed);
        self.outbox = kept;
    }

    async fn flush(&mut self, sock: &Option<UdpSocket>) {
        let Some(s) = sock else {
            self.unreachable();
            return;
        };
        let batch = self.cfg.max_batch.clamp(1, wire::MAX_ENTRIES);
        let outbox = std::mem::take(&mut self.outbox);
        for chunk in outbox.chunks(batch) {
            self.seq += 1;
            let mut w = Writer::new(
                &mut self.buf,
                Kind::Update,
                self.sender,
                self.seq,
                wire::unix_micros(),
            );
            for e in chunk {
                w.update(e);
            }
            let d = w.finish(&self.cfg.key);
            // A fresh tokio socket reports "would block" until the reactor has seen it
            // writable once, so fall back to the awaiting send (a UDP send does not wait long).
            let sent = match s.try_send(d) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => s.send(d).await,
                r => r,
            };
            match sent {
                Ok(_) => {
                    self.shared
                        .counters
                        .datagrams
                        .fetch_add(1, Ordering::Relaxed);
                    self.unanswered_since.get_or_insert_with(Instant::now);
                }
                Err(e) => {
                    tracing::debug!("JCCE send: {e}");
                    self.shared
                        .counters
                        .dropped
                        .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    self.unreachable();
                }
            }
        }
        let mut outbox = outbox;
        outbox.clear();
        self.outbox = outbox;
    }

    fn on_datagram(&mut self, d: &[u8]) {
        let ok = match wire::open(&self.cfg.key, d) {
            Ok(m) => {
                let h = m.header;
                if h.kind == Kind::UpdateReply
                    && h.sender == self.sender
                    && h.seq <= self.seq
                    && self.replies.accept(h.seq)
                {
                    let at_us = self.shared.epoch.elapsed().as_micros() as u64;
                    let slots = self.shared.slots.lock().expect("slots lock");
                    for r in m.replies() {
                        if let Some(slot) = slots.get(&(r.group, r.member)) {
                            slot.write(r.n, r.mean, r.mi, at_us);
                        }
                    }
                    drop(slots);
                    self.unanswered_since = (h.seq != self.seq).then(Instant::now);
                    self.backoff = self.cfg.backoff_initial;
                    self.set_state(Reachability::Reachable);
                    true
                } else {
                    false
                }
            }
            Err(_) => false,
        };
        let c = if ok {
            &self.shared.counters.replies
        } else {
            &self.shared.counters.rejected
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(capacity: usize) -> Shared {
        Shared {
            queue: ArrayQueue::new(capacity),
            pending: AtomicBool::new(false),
            notify: Notify::new(),
            stop: AtomicBool::new(false),
            state: AtomicU8::new(0),
            slots: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            epoch: Instant::now(),
        }
    }

    fn entry(mi: u64) -> UpdateEntry {
        UpdateEntry {
            op: Op::Publish,
            group: 1,
            member: 1,
            mi,
            value: mi,
        }
    }

    /// The controller shares one client between flows and keeps a member per flow, possibly
    /// on other threads.
    #[test]
    fn client_and_member_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Client>();
        check::<Member>();
    }

    #[test]
    fn full_queue_drops_the_oldest_and_counts() {
        let s = shared(4);
        for mi in 1..=10 {
            s.enqueue(entry(mi));
        }
        assert_eq!(s.counters.queued.load(Ordering::Relaxed), 10);
        assert_eq!(s.counters.dropped.load(Ordering::Relaxed), 6);
        let left: Vec<u64> = std::iter::from_fn(|| s.queue.pop()).map(|e| e.mi).collect();
        assert_eq!(left, vec![7, 8, 9, 10]);
    }

    /// A reader racing the writer never sees a torn slot: every read is one written tuple.
    #[test]
    fn slot_reads_are_never_torn() {
        let slot = Arc::new(Slot::default());
        assert!(slot.read().is_none());
        let w = slot.clone();
        let writer = std::thread::spawn(move || {
            for i in 1..=200_000u64 {
                w.write(i as u32, Some(i as f64 * 2.0), i * 3, i * 4);
            }
        });
        let mut reads = 0;
        while !writer.is_finished() || reads == 0 {
            if let Some((n, mean, mi, at)) = slot.read() {
                let i = n as u64;
                assert_eq!((mean, mi, at), (Some(i as f64 * 2.0), i * 3, i * 4));
                reads += 1;
            }
        }
        writer.join().unwrap();
        slot.write(5, None, 1, 2);
        assert_eq!(slot.read(), Some((5, None, 1, 2)));
    }
}
