//! The receiver's part for flows that are not the agent's (e.g. the kernel's TCP): the paper's
//! receivers compute "the throughput in this interval" and send it to JCCE (seeds/000 §3), so a
//! flow whose sender knows nothing of JCCE still counts in its group's `T_avg`. A
//! [`ReceiverPublisher`] samples byte counters (what each flow's receiving application has
//! read) every [`INTERVAL`] and publishes, per flow, the rate over the last [`WINDOW`] (over
//! the flow's samples so far while it is younger than that) as one member of the group.

use crate::client::{Client, Member};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often each flow publishes. Default 10 ms: several publications per MI of the paper's
/// 30 ms-RTT link (an MI is one to two RTTs, seeds/000 §3), so the group's mean is never older
/// than a fraction of an MI.
pub const INTERVAL: Duration = Duration::from_millis(10);
/// The rate published is the bytes read over this window. Default 40 ms: a little over one
/// MI of that link, which smooths TCP's bursts of ACK-clocked delivery like an MI does.
pub const WINDOW: Duration = Duration::from_millis(40);

/// What a publisher did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublisherReport {
    /// Publications made (one per flow per interval, from the flow's second sample on).
    pub published: u64,
    /// Whether every member had a reply from JCCE by the end.
    pub answered: bool,
}

/// Publishes the rates of a set of byte counters to one group, from a thread of its own, until
/// stopped.
pub struct ReceiverPublisher {
    stop: Arc<AtomicBool>,
    published: Arc<AtomicU64>,
    thread: Option<JoinHandle<PublisherReport>>,
}

impl ReceiverPublisher {
    /// Start publishing the rate of each of `counters` (bytes delivered so far, one per flow)
    /// as its own member of `group` through `client`, every [`INTERVAL`] over [`WINDOW`].
    pub fn start(
        client: &Client,
        group: u64,
        counters: Vec<Arc<AtomicU64>>,
    ) -> std::io::Result<ReceiverPublisher> {
        Self::start_with(client, group, counters, INTERVAL, WINDOW)
    }

    /// [`ReceiverPublisher::start`] with another interval and window.
    pub fn start_with(
        client: &Client,
        group: u64,
        counters: Vec<Arc<AtomicU64>>,
        interval: Duration,
        window: Duration,
    ) -> std::io::Result<ReceiverPublisher> {
        let members: Vec<Member> = counters.iter().map(|_| client.member(group)).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let published = Arc::new(AtomicU64::new(0));
        let (s2, p2) = (stop.clone(), published.clone());
        let thread = std::thread::Builder::new()
            .name("jcce-publisher".into())
            .spawn(move || run(&members, &counters, interval, window, &s2, &p2))?;
        Ok(ReceiverPublisher {
            stop,
            published,
            thread: Some(thread),
        })
    }

    /// Publications so far.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// Stop (the members leave the group) and say what was done.
    pub fn stop(mut self) -> PublisherReport {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for ReceiverPublisher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    members: &[Member],
    counters: &[Arc<AtomicU64>],
    interval: Duration,
    window: Duration,
    stop: &AtomicBool,
    published: &AtomicU64,
) -> PublisherReport {
    let mut history: Vec<VecDeque<(Instant, u64)>> = vec![VecDeque::new(); counters.len()];
    let mut mi = 0u64;
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += interval;
        let now = Instant::now();
        mi += 1;
        for ((h, c), m) in history.iter_mut().zip(counters).zip(members) {
            h.push_back((now, c.load(Ordering::Relaxed)));
            while h.len() > 1 && now.duration_since(h[0].0) > window {
                h.pop_front();
            }
            let ((t0, b0), (_, b1)) = (h[0], h[h.len() - 1]);
            let dt = now.duration_since(t0).as_secs_f64();
            if dt > 0.0 {
                m.publish(mi, (b1.saturating_sub(b0) as f64 / dt) as u64);
                published.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    PublisherReport {
        published: published.load(Ordering::Relaxed),
        answered: members.iter().all(|m| m.latest().is_some()),
    }
}
