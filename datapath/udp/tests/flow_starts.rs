//! Flow starts announced while the sender runs: every flow's source address, reported once its
//! socket is bound (`run_sender_announcing`, `ccp-udp send --flows-out FILE`), is the address
//! the flow's final summary gives, under the summary's flow index and flow id, also for flows
//! that start at the same instant.

mod transport_util;

use std::collections::HashSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ccp_udp::{Amount, FlowSpec, FlowStart, SenderConfig, SenderSummary};
use transport_util::*;

/// Each summary's flow was announced exactly once, with its index, id and source address.
fn assert_announced_as_summarised(starts: &[FlowStart], summaries: &[SenderSummary]) {
    assert_eq!(starts.len(), summaries.len(), "{starts:?}");
    for s in summaries {
        let mine: Vec<&FlowStart> = starts.iter().filter(|a| a.flow == s.flow).collect();
        assert_eq!(mine.len(), 1, "flow {}: {starts:?}", s.flow);
        assert_eq!(mine[0].src.to_string(), s.local, "flow {}", s.flow);
        assert_eq!(mine[0].flow_id, s.flow_id, "flow {}", s.flow);
    }
    let distinct: HashSet<_> = starts.iter().map(|a| a.src).collect();
    assert_eq!(distinct.len(), starts.len(), "{starts:?}");
}

#[test]
fn announced_addresses_are_the_summaries() {
    bounded(Duration::from_secs(60), || {
        // Flows 0 and 1 start at the same instant, flow 2 50 ms later.
        let rx = receiver(3);
        let flows = (0..3)
            .map(|i| FlowSpec {
                amount: Amount::Bytes(2_000_000),
                algorithm: "same".into(),
                start_after: Duration::from_millis(if i == 2 { 50 } else { 0 }),
                rate_cap: None,
            })
            .collect();
        let cfg = SenderConfig {
            dest: rx.addr,
            flows,
            ..SenderConfig::default()
        };
        let starts = Mutex::new(vec![]);
        let stop = AtomicBool::new(false);
        let s = ccp_udp::run_sender_announcing(&cfg, &reno, &stop, &|a| {
            starts.lock().unwrap().push(a.clone());
            Ok(())
        })
        .expect("transfer");
        rx.join().expect("receiver");
        let starts = starts.into_inner().unwrap();
        assert_announced_as_summarised(&starts, &s);
        assert!(s.iter().all(|f| f.completed), "{s:?}");
        let late = starts.iter().find(|a| a.flow == 2).unwrap();
        assert!(
            late.at_us >= 50_000,
            "flow 2 announced before its start: {late:?}"
        );
    });
}

#[test]
fn a_failed_announcement_fails_the_sender() {
    bounded(Duration::from_secs(30), || {
        let rx = receiver(1);
        let cfg = one_flow(rx.addr, Amount::Bytes(100_000));
        let stop = AtomicBool::new(false);
        let e = ccp_udp::run_sender_announcing(&cfg, &reno, &stop, &|_| {
            Err(std::io::Error::other("disk full"))
        })
        .expect_err("the announcement failed");
        assert!(e.to_string().contains("announcing flow 0's start"), "{e}");
        let _ = rx.stop();
    });
}

/// A child process killed when dropped (also when the test fails).
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sigterm(c: &Child) {
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(c.id() as i32, libc::SIGTERM);
    }
}

/// The complete lines of `--flows-out` file `path`, parsed.
fn announced(path: &Path) -> Vec<FlowStart> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let Some(end) = text.rfind('\n') else {
        return vec![];
    };
    text[..end]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

#[test]
fn flows_out_is_readable_while_the_sender_runs() {
    let bin = env!("CARGO_BIN_EXE_ccp-udp");
    let dir = tempfile::tempdir().unwrap();
    let recv_err = dir.path().join("recv.err");
    let mut recv = Kid(Command::new(bin)
        .args(["recv", "--listen", "127.0.0.1:0", "--idle-timeout", "10s"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&recv_err).unwrap())
        .spawn()
        .unwrap());
    let mut addr = None;
    for _ in 0..500 {
        let text = std::fs::read_to_string(&recv_err).unwrap_or_default();
        addr = text
            .split_inclusive('\n')
            .filter_map(|l| l.strip_suffix('\n'))
            .find_map(|l| l.strip_prefix("listening on "))
            .map(str::to_string);
        if addr.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let addr = addr.expect("the receiver did not say where it listens");
    // Three 30-s flows at 5 Mbit/s, two alike starting together, the third 200 ms later; the
    // sender is stopped once all three are announced, long before they would end.
    let out = dir.path().join("flows.jsonl");
    let json = dir.path().join("send.json");
    let flow = "alg=reno,time=30s,cap=5mbit";
    let mut send = Kid(Command::new(bin)
        .args(["send", "--to", &addr, "--no-ccp", "--log-level", "warn"])
        .args(["--flow", flow, "--flow", flow])
        .args(["--flow", &format!("{flow},start=200ms")])
        .arg("--flows-out")
        .arg(&out)
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    let mut starts = vec![];
    for _ in 0..2000 {
        starts = announced(&out);
        if starts.len() == 3 {
            break;
        }
        assert!(
            send.0.try_wait().unwrap().is_none(),
            "the sender ended before announcing its flows: {starts:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(starts.len(), 3, "{starts:?}");
    assert!(
        send.0.try_wait().unwrap().is_none(),
        "the flows run for 30 s; the announcements came while they ran"
    );
    sigterm(&send.0);
    let status = send.0.wait().unwrap();
    assert!(status.success(), "ccp-udp send: {status}");
    sigterm(&recv.0);
    let _ = recv.0.wait();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let summaries: Vec<SenderSummary> = serde_json::from_value(v["flows"].clone()).unwrap();
    assert_announced_as_summarised(&starts, &summaries);
    // The stop came after every start: nothing was announced twice or left out of the file.
    assert_eq!(announced(&out), starts);
    assert!(
        starts.iter().all(|a| a.src.ip().is_loopback()),
        "{starts:?}"
    );
}
