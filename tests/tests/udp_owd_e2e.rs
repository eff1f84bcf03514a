//! The one-way delay ccp-udp measures reaches the agent: with the engine backend the shared
//! measurement program's reports carry it (`Report.owd_sum`, which the agent decodes into
//! `Measurement::owd_mean_us` and RTCP takes its queueing delay from); with the C libccp backend,
//! which has no such primitive, they say "not measured". The reports are read on their way to
//! the real `ccp-agent` by a relay between the datapath's and the agent's unix sockets.

use ccp_engine::wire::{self, ToAgentMsg};
use ccp_tests::{Agent, UdpReceiver, udp_send};
use serde_json::Value;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A mean at or above this is the program's "not measured" (its `owd_us` register kept the
/// reserved default 2·10⁹ + 1; the agent's decoder uses the same bound).
const OWD_NONE_US: u64 = 2_000_000_000;

/// Index of `name` among the report fields of the shared program: portus numbers report
/// registers in the order the `Report` block declares them, and the datapath sends them so.
fn report_index(name: &str) -> usize {
    let src = ccp_algorithms::program::SOURCE;
    let block = &src[src.find("(Report").expect("a Report block")..];
    let block = &block[..block.find("\n    )").expect("the block ends")];
    block
        .lines()
        .filter_map(|l| l.trim().strip_prefix("(volatile "))
        .position(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no report field {name}"))
}

/// Forwards datagrams between a datapath (which takes `dp_side` for the agent's socket) and
/// the agent, and keeps every report the datapath sends: (rtt samples, one-way delay sum).
struct Tap {
    stop: Arc<AtomicBool>,
    reports: Arc<Mutex<Vec<(u64, u64)>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Tap {
    fn start(dir: &Path, agent: &Path) -> (Tap, PathBuf) {
        let dp_path = dir.join("tap.sock");
        let dp_side = UnixDatagram::bind(&dp_path).unwrap();
        let agent_side = UnixDatagram::bind(dir.join("tap-agent.sock")).unwrap();
        for s in [&dp_side, &agent_side] {
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        }
        let (owd_i, cnt_i) = (report_index("owd_sum"), report_index("rtt_cnt"));
        let stop = Arc::new(AtomicBool::new(false));
        let reports = Arc::new(Mutex::new(Vec::new()));
        let datapath: Arc<Mutex<Option<PathBuf>>> = Arc::default();
        let up = {
            let (stop, reports, datapath) = (stop.clone(), reports.clone(), datapath.clone());
            let (rx, tx) = (
                dp_side.try_clone().unwrap(),
                agent_side.try_clone().unwrap(),
            );
            let agent = agent.to_path_buf();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = rx.recv_from(&mut buf) else {
                        continue;
                    };
                    if let Some(p) = from.as_pathname() {
                        *datapath.lock().unwrap() = Some(p.to_path_buf());
                    }
                    for (m, _) in wire::parse_to_agent(&buf[..n]).unwrap_or_default() {
                        if let ToAgentMsg::Measure { fields, .. } = m
                            && fields.len() > owd_i.max(cnt_i)
                        {
                            reports.lock().unwrap().push((fields[cnt_i], fields[owd_i]));
                        }
                    }
                    let _ = tx.send_to(&buf[..n], &agent);
                }
            })
        };
        let down = {
            let stop = stop.clone();
            let (rx, tx) = (agent_side, dp_side);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(n) = rx.recv(&mut buf) else {
                        continue;
                    };
                    if let Some(p) = datapath.lock().unwrap().as_ref() {
                        let _ = tx.send_to(&buf[..n], p);
                    }
                }
            })
        };
        let tap = Tap {
            stop,
            reports,
            threads: vec![up, down],
        };
        (tap, dp_path)
    }

    fn reports(&self) -> Vec<(u64, u64)> {
        self.reports.lock().unwrap().clone()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One 30 MB RTCP flow through the tap under `backend`: its sender summary and the reports
/// with RTT samples as (samples, one-way delay sum).
fn run(backend: &str) -> (Value, Vec<(u64, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]).unwrap();
    let (tap, via) = Tap::start(dir.path(), &agent.socket);
    let recv = UdpReceiver::start(dir.path(), "recv", 1, &[]).unwrap();
    let sj = dir.path().join("send.json");
    let (ok, out, err) = udp_send(
        &[
            "--to",
            &recv.addr.to_string(),
            "--agent",
            via.to_str().unwrap(),
            "--backend",
            backend,
            "--alg",
            "rtcp",
            "--bytes",
            "30M",
            "--json",
            sj.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    )
    .unwrap();
    assert!(ok, "{out}{err}");
    let r = recv.finish(Duration::from_secs(30)).unwrap();
    assert_eq!(r["flows"][0]["intact"], true, "{r}");
    let sent: Value = serde_json::from_str(&std::fs::read_to_string(&sj).unwrap()).unwrap();
    let flow = sent["flows"][0].clone();
    assert_eq!(
        flow["controllers"],
        serde_json::json!(["ccp-agent"]),
        "{flow}\nthe sender's log: {err}"
    );
    let reports = tap.reports();
    drop(tap);
    drop(agent);
    (flow, reports.into_iter().filter(|r| r.0 > 0).collect())
}

#[test]
fn the_engine_backend_reports_the_one_way_delay_and_libccp_does_not() {
    let (flow, reports) = run("engine");
    assert!(
        reports.len() >= 5,
        "{} reports with RTT samples",
        reports.len()
    );
    let measured = reports
        .iter()
        .filter(|(n, sum)| sum / n < OWD_NONE_US)
        .count();
    // Every report with RTT samples carries the measurement (one per sample).
    assert_eq!(measured, reports.len(), "{reports:?}");
    let (n, sum) = reports.iter().fold((0, 0), |(n, s), r| (n + r.0, s + r.1));
    let mean = sum as f64 / n as f64;
    let own = flow["owd_excess_mean_us"].as_f64().expect("sender mean");
    eprintln!(
        "engine: {} reports, {n} samples, mean one-way delay excess {mean:.0} µs (sender: {own:.0} µs)",
        reports.len()
    );

    let (flow, reports) = run("libccp");
    assert!(
        reports.len() >= 5,
        "{} reports with RTT samples",
        reports.len()
    );
    assert!(
        reports.iter().all(|(n, sum)| sum / n >= OWD_NONE_US),
        "{reports:?}"
    );
    // The sender measures it either way; only the engine can hand it on.
    assert!(flow["owd_excess_mean_us"].as_f64().is_some(), "{flow}");
}
