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
