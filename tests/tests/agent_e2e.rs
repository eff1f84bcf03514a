//! End to end: the real `ccp-agent` binary and a datapath on the project's engine, over a unix
//! socket in a temporary directory.

use ccp_engine::{EngineConfig, FlowInfo};
use ccp_tests::{Agent, TestDatapath, ack};
use nix::sys::signal::Signal;
use std::path::Path;
use std::time::Duration;

const MSS: u32 = 1448;

fn flow(alg: &str, dst_port: u32) -> FlowInfo {
    FlowInfo {
        init_cwnd: 10 * MSS,
        mss: MSS,
        src_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 1)),
        src_port: 40000 + dst_port,
        dst_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 2)),
        dst_port,
        cong_alg: alg.into(),
    }
}

/// Drive `sids` with ACKs for `rounds` ms-spaced steps: each step acks one MSS per flow with a
/// 5 ms RTT, at the window the datapath currently has.
fn drive(dp: &mut TestDatapath, sids: &[u32], steps: usize) {
    for _ in 0..steps {
        dp.poll();
        for &sid in sids {
            let cwnd = dp
                .seen
                .cwnd
                .get(&sid)
                .and_then(|v| v.last())
                .copied()
                .unwrap_or(10 * MSS);
            let _ = dp.invoke(sid, &ack(MSS, 5_000, cwnd, cwnd / 2));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn created(agent: &Agent) -> Vec<serde_json::Value> {
    agent.events("flow created")
}

fn wait_for(agent: &Agent, what: impl Fn(&Agent) -> bool) -> bool {
    for _ in 0..500 {
        if what(agent) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn field<'a>(v: &'a serde_json::Value, k: &str) -> &'a str {
    v.get(k).and_then(|x| x.as_str()).unwrap_or("")
}

const RULES: &str = "\
rules:
  - name: port-7000
    match: {dst_port: 7000}
    algorithm: reno
    params: {init-cwnd: 20}
";

fn ready(dp: &mut TestDatapath) {
    assert!(
        dp.poll_until(Duration::from_secs(5), |d| d
            .engine
            .agent_version()
            .is_some()),
        "agent never answered READY"
    );
}

#[test]
fn flows_get_named_and_rule_selected_algorithms_and_see_cwnd_changes() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let stats = dir.path().join("stats.json");
    let agent = Agent::start(
        dir.path(),
        &[
            "--default-alg",
            "cubic",
            "--rules",
            rules.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
        ],
    )
    .unwrap();
    let mut dp = TestDatapath::connect(dir.path(), "dp", &agent.socket).unwrap();
    ready(&mut dp);

    let a = dp.start_flow(flow("reno", 5000)).unwrap();
    let b = dp.start_flow(flow("cubic", 5001)).unwrap();
    let c = dp.start_flow(flow("", 7000)).unwrap();
    assert!(
        wait_for(&agent, |ag| created(ag).len() == 3),
        "{}",
        agent.logs()
    );

    let ev = created(&agent);
    let by_sid = |sid: u32| {
        ev.iter()
            .find(|e| e.get("sid").and_then(|s| s.as_u64()) == Some(u64::from(sid)))
            .cloned()
            .unwrap_or_else(|| panic!("no creation logged for sid {sid}: {}", agent.logs()))
    };
    let (ea, eb, ec) = (by_sid(a), by_sid(b), by_sid(c));
    assert_eq!(field(&ea, "algorithm"), "reno");
    assert_eq!(field(&ea, "chosen_by"), "Requested");
    assert_eq!(field(&eb, "algorithm"), "cubic");
    assert_eq!(field(&eb, "chosen_by"), "Requested");
    assert_eq!(field(&ec, "algorithm"), "reno");
    assert!(field(&ec, "chosen_by").contains("port-7000"), "{ec}");
    assert!(field(&ec, "params").contains("init-cwnd=20"), "{ec}");

    // The datapath applies the agent's initial windows and then its slow-start growth.
    drive(&mut dp, &[a, b, c], 200);
    let first = |sid: u32| dp.seen.cwnd.get(&sid).and_then(|v| v.first()).copied();
    let last = |sid: u32| {
        dp.seen
            .cwnd
            .get(&sid)
            .and_then(|v| v.last())
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(first(a), Some(10 * MSS));
    assert_eq!(first(b), Some(10 * MSS));
    assert_eq!(
        first(c),
        Some(20 * MSS),
        "rule parameters reach the datapath"
    );
    for sid in [a, b, c] {
        assert!(
            last(sid) > first(sid).unwrap(),
            "flow {sid} never grew: {:?}",
            dp.seen.cwnd.get(&sid)
        );
    }

    dp.end_flow(a).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(agent.stop().unwrap().success());
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert!(s["reports"].as_u64().unwrap() >= 3, "{s}");
    assert!(s["updates"].as_u64().unwrap() >= 3, "{s}");
    assert_eq!(s["flows_closed"].as_u64(), Some(1), "{s}");
    assert_eq!(s["malformed_datagrams"].as_u64(), Some(0), "{s}");
}

#[test]
fn sighup_reloads_rules_without_dropping_flows_and_keeps_old_rules_on_error() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let agent = Agent::start(
        dir.path(),
        &["--default-alg", "cubic", "--rules", rules.to_str().unwrap()],
    )
    .unwrap();
    let mut dp = TestDatapath::connect(dir.path(), "dp", &agent.socket).unwrap();
    ready(&mut dp);
    let old = dp.start_flow(flow("", 7000)).unwrap();
    assert!(wait_for(&agent, |ag| created(ag).len() == 1));
    drive(&mut dp, &[old], 50);

    std::fs::write(
        &rules,
        RULES
            .replace("algorithm: reno", "algorithm: cubic")
            .replace("init-cwnd: 20", "init-cwnd: 4"),
    )
    .unwrap();
    agent.signal(Signal::SIGHUP).unwrap();
    assert!(
        wait_for(&agent, |ag| !ag
            .events("rules reloaded; new flows use them")
            .is_empty()),
        "{}",
        agent.logs()
    );
    let new = dp.start_flow(flow("", 7000)).unwrap();
    assert!(wait_for(&agent, |ag| created(ag).len() == 2));
    let e = created(&agent).pop().unwrap();
    assert_eq!(field(&e, "algorithm"), "cubic");
    assert!(field(&e, "params").contains("init-cwnd=4"), "{e}");

    // A broken file is refused with its place, and the previous rules stay.
    std::fs::write(
        &rules,
        "rules:\n  - algorithm: cubic\n    params: {beta: 10ms}\n",
    )
    .unwrap();
    agent.signal(Signal::SIGHUP).unwrap();
    assert!(wait_for(&agent, |ag| !ag
        .events("rule reload refused; keeping the previous rules")
        .is_empty()));
    let refusal = agent
        .events("rule reload refused; keeping the previous rules")
        .pop()
        .unwrap();
    assert!(
        field(&refusal, "error").contains(
            "rules.yaml:3:20: rules[0].params.beta: unit \"ms\" does not fit: expected a number"
        ),
        "{refusal}"
    );
    let third = dp.start_flow(flow("", 7000)).unwrap();
    assert!(wait_for(&agent, |ag| created(ag).len() == 3));
    let e = created(&agent).pop().unwrap();
    assert!(
        field(&e, "params").contains("init-cwnd=4"),
        "old rules kept: {e}"
    );

    // The flow from before the reloads is still served.
    let before = dp.seen.cwnd.get(&old).map(|v| v.len()).unwrap_or(0);
    drive(&mut dp, &[old, new, third], 60);
    assert!(dp.seen.cwnd.get(&old).map(|v| v.len()).unwrap_or(0) > before);
}

fn refused_start(dir: &Path, rules_text: Option<&str>, extra: &[&str]) -> String {
    let mut args: Vec<String> = vec![];
    if let Some(t) = rules_text {
        let p = dir.join("rules.yaml");
        std::fs::write(&p, t).unwrap();
        args.push("--rules".into());
        args.push(p.to_str().unwrap().into());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = std::process::Command::new(ccp_tests::workspace_bin("ccp-agent").unwrap())
        .arg("--socket")
        .arg(dir.join("agent.sock"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "agent started despite bad input {args:?}"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_input_is_refused_at_start_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e = refused_start(d, Some("rules:\n  - algorithm: vegass\n"), &[]);
    assert!(
        e.contains("rules.yaml:2:16: rules[0].algorithm: unknown algorithm \"vegass\""),
        "{e}"
    );
    let e = refused_start(
        d,
        Some("rules:\n  - algorithm: cubic\n    params:\n      betta: 0.5\n"),
        &[],
    );
    assert!(
        e.contains("rules.yaml:4:7: rules[0].params.betta: algorithm \"cubic\" has no parameter"),
        "{e}"
    );
    let e = refused_start(
        d,
        Some("rules:\n  - algorithm: reno\n    params:\n      init-cwnd: 64KB\n"),
        &[],
    );
    assert!(
        e.contains("rules.yaml:4:18: rules[0].params.init-cwnd"),
        "{e}"
    );
    let e = refused_start(d, Some("rules:\n  - algorithm: reno\n   params: x\n"), &[]);
    assert!(e.contains("rules.yaml:3:"), "{e}");
    let e = refused_start(d, None, &["--param", "reno.init-cwnd=10ms"]);
    assert!(
        e.contains("reno.init-cwnd") && e.contains("number of packets"),
        "{e}"
    );
    let e = refused_start(d, None, &["--default-alg", "bbr2"]);
    assert!(
        e.contains("--default-alg: unknown algorithm \"bbr2\""),
        "{e}"
    );
}

#[test]
fn incompatible_protocol_versions_are_refused_by_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]).unwrap();
    let mut dp = TestDatapath::connect(dir.path(), "old", &agent.socket).unwrap();
    dp.engine = ccp_engine::Engine::new(
        ccp_engine::WallClock::default(),
        EngineConfig {
            protocol_version: 99,
            ..EngineConfig::default()
        },
    );
    // Announce again with the new engine.
    dp.reinit().unwrap();
    // The engine answers the agent's VERSION with its own; the agent refuses it, naming both.
    assert!(
        dp.poll_until(Duration::from_secs(2), |d| d.engine.agent_version()
            == Some(1))
    );
    assert!(
        wait_for(&agent, |ag| ag.logs().contains(
            "datapath speaks libccp wire v99, this agent speaks v1"
        )),
        "{}",
        agent.logs()
    );
    let sid = dp.start_flow(flow("reno", 1)).unwrap_or(1);
    let err = dp
        .invoke(sid, &ack(MSS, 1000, 14480, 0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("v1") && err.contains("v99"), "{err}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        created(&agent).is_empty(),
        "a refused datapath's flow was created: {}",
        agent.logs()
    );
}

#[test]
fn a_flow_created_before_its_datapath_is_refused_still_closes() {
    use ccp_engine::wire;
    let dir = tempfile::tempdir().unwrap();
    let ctl_sock = dir.path().join("agent.ctl");
    let stats = dir.path().join("stats.json");
    let agent = Agent::start(
        dir.path(),
        &[
            "--ctl",
            ctl_sock.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
        ],
    )
    .unwrap();
    let live_flows = || {
        let out = std::process::Command::new(ccp_tests::workspace_bin("ccp-agent").unwrap())
            .args(["ctl", "--ctl", ctl_sock.to_str().unwrap(), "flows"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["flows"].as_array().map_or(0, |f| f.len())
    };
    // A datapath that creates a flow before it answers the agent's VERSION, with another one.
    let raw = std::os::unix::net::UnixDatagram::bind(dir.path().join("raw.sock")).unwrap();
    raw.send_to(&wire::serialize_ready(7), &agent.socket)
        .unwrap();
    raw.send_to(
        &wire::serialize_create(1, &flow("reno", 1)).unwrap(),
        &agent.socket,
    )
    .unwrap();
    assert!(
        wait_for(&agent, |a| created(a).len() == 1),
        "{}",
        agent.logs()
    );
    assert_eq!(live_flows(), 1);
    raw.send_to(&wire::serialize_version(99), &agent.socket)
        .unwrap();
    assert!(
        wait_for(&agent, |a| a.logs().contains("refusing the datapath")),
        "{}",
        agent.logs()
    );
    // Its measurements are refused, its close is not: the flow ends.
    raw.send_to(&wire::serialize_measure(1, 1, &[1, 2, 3]), &agent.socket)
        .unwrap();
    raw.send_to(&wire::serialize_close(1), &agent.socket)
        .unwrap();
    assert!(
        wait_for(&agent, |_| live_flows() == 0),
        "the flow outlived its close: {}",
        agent.logs()
    );
    // The measurement was counted as refused and never reached the flow.
    assert!(agent.stop().unwrap().success());
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert_eq!(s["refused_messages"].as_u64(), Some(1), "{s}");
    assert_eq!(s["reports"].as_u64(), Some(0), "{s}");
    assert_eq!(s["bad_reports"].as_u64(), Some(0), "{s}");
    assert_eq!(s["flows_closed"].as_u64(), Some(1), "{s}");
}

#[test]
fn garbage_datagrams_are_dropped_and_the_agent_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]).unwrap();
    let junk = std::os::unix::net::UnixDatagram::bind(dir.path().join("junk.sock")).unwrap();
    let mut msgs: Vec<Vec<u8>> = vec![vec![], vec![1, 2, 3], vec![0xff; 2000]];
    // An UPDATE_FIELDS and an INSTALL sent to the agent (portus would panic on these).
    msgs.push(vec![3, 0, 12, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    msgs.push(vec![
        2, 0, 20, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    // A CREATE that is too short, and a MEASURE whose length lies.
    msgs.push(
        vec![0, 0, 40, 0, 1, 0, 0, 0]
            .into_iter()
            .chain([0u8; 32])
            .collect(),
    );
    msgs.push(vec![1, 0, 200, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
    for m in &msgs {
        let _ = junk.send_to(m, &agent.socket);
    }
    let mut dp = TestDatapath::connect(dir.path(), "dp", &agent.socket).unwrap();
    ready(&mut dp);
    let sid = dp.start_flow(flow("reno", 1)).unwrap();
    drive(&mut dp, &[sid], 50);
    assert!(
        dp.seen.cwnd.get(&sid).is_some_and(|v| v.len() > 1),
        "agent stopped serving: {}",
        agent.logs()
    );
    assert!(
        agent
            .logs()
            .contains("dropping a datagram that is not libccp 1 wire"),
        "{}",
        agent.logs()
    );
}
