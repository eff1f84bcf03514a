//! What the `ccp-exp` integration tests share: running the built binary.

use std::process::{Command, Output, Stdio};

/// Runs `ccp-exp` with `args` (no stdin) and returns its output; fails the test, with both
/// streams, if it does not succeed.
pub fn ccp_exp(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ccp-exp"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("ccp-exp runs");
    assert!(
        out.status.success(),
        "ccp-exp {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs the recipe at `recipe` into `out` without a progress bar (see [`ccp_exp`]).
#[allow(dead_code)] // not every test file runs whole recipes
pub fn run_recipe(recipe: &std::path::Path, out: &std::path::Path) -> Output {
    ccp_exp(&[
        "run",
        recipe.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-progress",
    ])
}

/// A run's `run.json`.
#[allow(dead_code)]
pub fn run_json(run_dir: &std::path::Path) -> serde_json::Value {
    let path = run_dir.join("run.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Column `col` of `series.csv` in `run_dir` (0: time, s; 2: goodput, Mbit/s; 3: window, kB;
/// 4: RTT, ms)
/// for `flow`, over the samples in (from, to] s.
#[allow(dead_code)]
pub fn series_column(
    run_dir: &std::path::Path,
    flow: usize,
    col: usize,
    from: f64,
    to: f64,
) -> Vec<f64> {
    let text = std::fs::read_to_string(run_dir.join("series.csv")).unwrap();
    let flow = flow.to_string();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            let t: f64 = c[0].parse().ok()?;
            (c[1] == flow && t > from && t <= to).then(|| c[col].parse().unwrap())
        })
        .collect()
}

/// Mean goodput (Mbit/s) of `flow` over (from, to] s from the `series.csv` in `run_dir`: each
/// sample's goodput weighted by the interval it covers (since the previous sample, or `from`;
/// a flow's first sample, as long as the gap to its second), so that samples taken at uneven
/// times (a sampler woken late) do not bias it; fails the test if there is none.
#[allow(dead_code)]
pub fn mean_goodput(run_dir: &std::path::Path, flow: usize, from: f64, to: f64) -> f64 {
    let t = series_column(run_dir, flow, 0, f64::NEG_INFINITY, to);
    let g = series_column(run_dir, flow, 2, f64::NEG_INFINITY, to);
    let (mut bits, mut span) = (0.0, 0.0);
    for ((&ti, &gi), dt) in t.iter().zip(&g).zip(ccp_exp::stats::sample_intervals(&t)) {
        if ti > from {
            // The part of the sample's interval after `from`.
            let dt = dt.min(ti - from);
            bits += gi * dt;
            span += dt;
        }
    }
    assert!(span > 0.0, "flow {flow}: no samples in ({from}, {to}] s");
    bits / span
}

/// Why an emulator run with kernel Cubic flows cannot happen here, if it cannot: not root or
/// no TUN device, one of `bins` not built beside ccp-exp, or no cubic in the kernel.
#[allow(dead_code)]
pub fn emu_kernel_skip_reason(bins: &[&str]) -> Option<String> {
    if let Some(why) = ccp_exp::backend::emu::unavailable_here() {
        return Some(why);
    }
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_ccp-exp"));
    for b in bins {
        if !exe.with_file_name(b).is_file() {
            return Some(format!(
                "{b} is not built beside ccp-exp (cargo build --release --bins)"
            ));
        }
    }
    let cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !cc.split_whitespace().any(|c| c == "cubic") {
        return Some("the kernel has no cubic".into());
    }
    None
}

/// A path as the `&str` ccp-exp's arguments take.
#[allow(dead_code)]
pub fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}
