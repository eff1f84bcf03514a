//! Vivace-Distributed flows on the emulator reach the real JCCE service: the recipe forms of a
//! kernel flow in a JCCE group and of the service's delay, and (as root) a short run in which
//! the agent uses the group's aggregate and the kernel flow's receiver publishes to the group.

mod common;

use common::{ccp_exp, emu_kernel_skip_reason, s};
use std::path::Path;

fn load(dir: &Path, text: &str) -> Result<ccp_exp::recipe::Recipe, String> {
    let p = dir.join("r.yaml");
    std::fs::write(&p, text).unwrap();
    ccp_exp::load(&p)
        .map(|e| e.parts[0].points[0].recipe.clone())
        .map_err(|e| e.to_string())
}

#[test]
fn kernel_flows_join_a_group_and_the_service_delay_has_a_default() {
    let dir = tempfile::tempdir().unwrap();
    let r = load(
        dir.path(),
        "backend: emu\nlink: {rate: 10mbit, delay: 5ms}\nflows:\n  - {algorithm: vivace-distributed, params: {group: 7}}\n  - {algorithm: \"kernel:cubic:group=7\"}\n  - {algorithm: kernel:bbr}\n",
    )
    .unwrap();
    let f = &r.flows;
    assert_eq!(f[1].algorithm, "kernel:cubic");
    assert_eq!(f[1].requested(), "kernel:cubic:group=7");
    assert_eq!(ccp_exp::recipe::kernel_cc(&f[1].algorithm), Some("cubic"));
    assert_eq!(ccp_exp::recipe::kernel_group(&f[1]), Some(7));
    assert_eq!(ccp_exp::recipe::kernel_group(&f[2]), None);
    assert_eq!(ccp_exp::recipe::kernel_group(&f[0]), None);
    assert_eq!(r.jcce.delay_us, 1_000);

    let r = load(
        dir.path(),
        "backend: emu\nlink: {rate: 10mbit, delay: 5ms}\njcce: {delay: 3ms}\nflows:\n  - {algorithm: kernel:cubic}\n",
    )
    .unwrap();
    assert_eq!(r.jcce.delay_us, 3_000);

    let e = load(
        dir.path(),
        "backend: emu\nlink: {rate: 10mbit, delay: 5ms}\nflows:\n  - {algorithm: \"kernel:cubic:grp=x\"}\n",
    )
    .unwrap_err();
    assert!(
        e.contains("expected kernel:NAME or kernel:NAME:group=G"),
        "{e}"
    );
    let e = load(
        dir.path(),
        "backend: emu\nlink: {rate: 10mbit, delay: 5ms}\njcce: {latency: 3ms}\nflows:\n  - {algorithm: kernel:cubic}\n",
    )
    .unwrap_err();
    assert!(e.contains("jcce"), "{e}");
}

#[test]
fn an_emulator_run_with_vivace_distributed_uses_the_real_jcce_when_root() {
    if let Some(why) = emu_kernel_skip_reason(&["ccp-agent", "ccp-udp", "jcce"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("vd.yaml");
    std::fs::write(
        &recipe,
        "name: vdj\nbackend: emu\nduration: 4s\nlink: {rate: 20mbit, delay: 10ms, queue: droptail, queue_args: packets=60}\njcce: {delay: 2ms}\nflows:\n  - {algorithm: vivace-distributed, params: {group: 7}}\n  - {algorithm: \"kernel:cubic:group=7\"}\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    ccp_exp(&["run", s(&recipe), "--out", s(&out), "--no-progress"]);
    let run_dir = out.join("runs/vdj/p00/r0");
    let agent_log = std::fs::read_to_string(run_dir.join("raw/agent.log")).unwrap();
    let jcce_log = std::fs::read_to_string(run_dir.join("raw/jcce.log")).unwrap();
    // The service ran on the service host, and the agent (in the sender host) used its
    // aggregate rather than the plain-Vivace fallback.
    assert!(
        jcce_log.contains("jcce serving on 100.127.0.2:"),
        "{jcce_log}"
    );
    assert!(
        agent_log.contains("JCCE aggregate in use"),
        "agent log: {agent_log}"
    );
    assert!(
        !agent_log.contains("running as plain vivace"),
        "{agent_log}"
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    let notes: Vec<&str> = run["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    let jcce = notes
        .iter()
        .find(|n| n.starts_with("JCCE:"))
        .unwrap_or_else(|| panic!("no JCCE note: {notes:?}"));
    // The kernel flow's receiver published to the group (every 10 ms for about 4 s), and
    // every member was answered.
    let published: u64 = jcce
        .split(" published ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{jcce}"));
    assert!(published > 0, "{jcce}");
    assert!(!jcce.contains("never answered"), "{jcce}");
    assert!(jcce.contains("1 kernel flows in a group"), "{jcce}");
    let flows = run["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    for f in flows {
        assert!(f["bytes_delivered"].as_u64().unwrap() > 0, "{f}");
    }
}
