//! `jcce.delay` on the simulator: the recipe's JCCE delay is the simulated service's latency,
//! as it is the emulator's service-host side path (`emu_jcce.rs`). A vivace-distributed flow
//! holds its starting rate until the first aggregate comes back, so a far service delays its
//! start by about two delays.

mod common;

use common::{mean_goodput, run_recipe};
use std::path::Path;

/// Goodput (Mbit/s) of flow 0 of the one run of `recipe` over the series samples in (0, to] s.
fn early_goodput(dir: &Path, delay: &str, to: f64) -> f64 {
    let recipe = dir.join(format!("jcce-{delay}.yaml"));
    std::fs::write(
        &recipe,
        format!(
            "name: jcce-{delay}\nduration: 2s\n\
             link: {{rate: 100mbit, delay: 15ms, queue: droptail, queue_args: bytes=75000}}\n\
             jcce: {{delay: {delay}}}\n\
             metrics: {{warmup: 0s}}\nflows: [{{algorithm: vivace-distributed}}]\n"
        ),
    )
    .unwrap();
    let out = dir.join(format!("out-{delay}"));
    run_recipe(&recipe, &out);
    let run = std::fs::read_dir(out.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let series = walk(&run, "series.csv").expect("a series.csv");
    mean_goodput(series.parent().unwrap(), 0, 0.0, to)
}

/// The first file named `name` under `dir`.
fn walk(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = walk(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

#[test]
fn the_recipes_jcce_delay_is_the_simulated_services_latency() {
    let dir = tempfile::tempdir().unwrap();
    let near = early_goodput(dir.path(), "1ms", 0.7);
    let far = early_goodput(dir.path(), "400ms", 0.7);
    eprintln!(
        "goodput over the first 0.7 s: JCCE 1 ms away {near:.2} Mbit/s, 400 ms away {far:.2}"
    );
    assert!(
        far < 0.25 * near,
        "a service 400 ms away should hold the flow's start: {far:.2} against {near:.2} Mbit/s"
    );
}
