//! The receiver-side publisher on loopback: a flow delivering a steady 10 MB/s counts in its
//! group's mean as 10 MB/s, next to a member that publishes 0.

mod common;

use common::{Running, key, wait_for};
use jcce::client::{Client, ClientConfig};
use jcce::publisher::ReceiverPublisher;
use jcce::server::ServiceConfig;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The counter's rate, bytes/s.
const RATE: f64 = 10_000_000.0;

#[test]
fn a_receivers_rate_counts_in_its_groups_mean() {
    let srv = Running::start("127.0.0.1:0", ServiceConfig::default());
    let client = Client::start(ClientConfig::new(srv.addr.to_string(), key())).unwrap();
    // Bytes delivered so far, following the clock (so the rate does not depend on how
    // punctually this thread runs).
    let delivered = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (d, s) = (delivered.clone(), stop.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !s.load(Ordering::Relaxed) {
                d.store(
                    (t0.elapsed().as_secs_f64() * RATE) as u64,
                    Ordering::Relaxed,
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let publisher = ReceiverPublisher::start(&client, 3, vec![delivered]).unwrap();
    let other = client.member(3);
    let mut mi = 0;
    let seen = wait_for(Duration::from_secs(10), || {
        mi += 1;
        other.publish(mi, 0);
        std::thread::sleep(Duration::from_millis(10));
        other.latest().filter(|g| g.n == 2 && mi > 20)
    })
    .expect("the group's mean with both members");
    let report = publisher.stop();
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    let mean = seen.mean.expect("a mean");
    assert!(
        (0.4 * RATE..=0.6 * RATE).contains(&mean),
        "mean {mean} against {}",
        RATE / 2.0
    );
    assert!(report.answered, "{report:?}");
    assert!(report.published >= 10, "{report:?}");
}
