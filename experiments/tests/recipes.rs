//! Recipe validation: a corpus of broken recipes (tests/broken/*.yaml), each with the exact
//! messages it must produce written at its end as `# expect: file:line:col: field: message`
//! lines, and every shipped recipe validating.

use ccp_exp::recipe::Backend;
use std::path::{Path, PathBuf};

fn algorithms() -> String {
    ccp_algorithms::registry::all()
        .iter()
        .map(|a| a.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn params(alg: &str) -> String {
    ccp_algorithms::registry::find(alg)
        .map(|a| {
            a.params
                .iter()
                .map(|p| p.key)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The expected messages of a corpus file, placeholders filled in: `{algorithms}` (the
/// registry's names) and `{params:NAME}` (an algorithm's parameter keys), which change as the
/// library grows.
fn expected(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# expect: "))
        .map(|l| {
            let mut l = l.replace("{algorithms}", &algorithms());
            while let Some(i) = l.find("{params:") {
                let end = l[i..].find('}').map(|e| i + e).unwrap_or(l.len() - 1);
                let name = l[i + 8..end].to_string();
                l.replace_range(i..=end, &params(&name));
            }
            l
        })
        .collect()
}

#[test]
fn every_broken_recipe_gives_its_exact_messages() {
    // Paths relative to the crate, as a user would type them there.
    let mut files: Vec<PathBuf> = std::fs::read_dir("tests/broken")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| Path::new("tests/broken").join(p.file_name().unwrap()))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "only {} broken recipes", files.len());
    let mut failures = vec![];
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let want = expected(&text);
        assert!(!want.is_empty(), "{} has no '# expect:' line", f.display());
        let got: Vec<String> = match ccp_exp::load(f) {
            Ok(_) => vec!["(no error)".into()],
            Err(e) => e.list().iter().map(|e| e.to_string()).collect(),
        };
        if got != want {
            failures.push(format!(
                "{}:\n  want: {}\n  got:  {}",
                f.display(),
                want.join("\n        "),
                got.join("\n        ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn messages_name_file_line_column_and_field() {
    // Every corpus message has the form file:line:col: field: message.
    for f in std::fs::read_dir("tests/broken").unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        for m in expected(&std::fs::read_to_string(&p).unwrap()) {
            let parts: Vec<&str> = m.splitn(5, ':').collect();
            assert_eq!(parts.len(), 5, "{m}");
            assert!(parts[0].ends_with(".yaml"), "{m}");
            assert!(parts[1].parse::<usize>().unwrap() >= 1, "{m}");
            assert!(parts[2].parse::<usize>().unwrap() >= 1, "{m}");
        }
    }
}

#[test]
fn shipped_recipes_validate() {
    let mut files = vec![PathBuf::from("recipes/quickstart.yaml")];
    for e in std::fs::read_dir("recipes/examples").unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            files.push(p);
        }
    }
    assert!(files.len() >= 4, "{files:?}");
    for f in files {
        let exp = ccp_exp::load(&f).unwrap_or_else(|e| panic!("{}:\n{e}", f.display()));
        assert!(exp.run_count() > 0, "{}", f.display());
    }
}

#[test]
fn quickstart_is_small_enough_for_make_run() {
    let exp = ccp_exp::load(Path::new("recipes/quickstart.yaml")).unwrap();
    let mut sim_s = 0.0;
    let mut real_s = 0.0;
    for p in exp.parts.iter().flat_map(|p| &p.points) {
        let d = p.recipe.duration_us as f64 / 1e6 * p.recipe.seeds.len() as f64;
        match p.recipe.backend {
            Backend::Sim => sim_s += d,
            _ => real_s += d,
        }
    }
    assert!(
        sim_s > 0.0 && real_s > 0.0,
        "both a simulator and a real-time part"
    );
    // Real time runs one run at a time; the simulator runs ~50x faster than real time here.
    assert!(
        real_s + sim_s / 20.0 < 120.0,
        "real {real_s} s, simulated {sim_s} s"
    );
}

#[test]
fn a_sweep_expands_to_the_cartesian_product_with_positions_kept() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.yaml");
    std::fs::write(
        &base,
        "duration: 5s\nlink: {rate: 10mbit, delay: 5ms}\nflows: [{algorithm: reno}, {algorithm: reno}]\n",
    )
    .unwrap();
    let main = dir.path().join("main.yaml");
    std::fs::write(
        &main,
        "include: base.yaml\nruns: 2\nsweep:\n  link.loss: [0, 0.01, 0.02]\n  flows[*].algorithm: [reno, cubic]\n",
    )
    .unwrap();
    let exp = ccp_exp::load(&main).unwrap();
    let part = &exp.parts[0];
    assert_eq!(part.axes, vec!["loss", "algorithm"]);
    assert_eq!(part.points.len(), 6);
    assert_eq!(exp.run_count(), 12);
    let p = &part.points[3];
    assert_eq!(p.label, "loss=0.01, algorithm=cubic");
    assert_eq!(p.id, "p03-loss=0.01-algorithm=cubic");
    assert_eq!(p.recipe.link.uplink.loss, 0.01);
    assert!(p.recipe.flows.iter().all(|f| f.algorithm == "cubic"));
    assert_eq!(p.recipe.seeds, vec![1, 2]);
    // Shards of the plan partition it: run i belongs to shard i mod n.
    let plan = ccp_exp::Plan::of(&exp);
    let shard: ccp_exp::Shard = "0/3".parse().unwrap();
    let mine: Vec<usize> = plan
        .runs
        .iter()
        .filter(|r| shard.contains(r.index))
        .map(|r| r.index)
        .collect();
    assert_eq!(mine, vec![0, 3, 6, 9]);
    // A bad value in the included file is reported in that file.
    std::fs::write(
        &base,
        "duration: 5s\nlink: {rate: 10mbit, delay: fast}\nflows: [{algorithm: reno}]\n",
    )
    .unwrap();
    let e = ccp_exp::load(&main).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}:2:29: link.delay: expected a duration with a unit, e.g. 10ms, 500us or 2s, got \"fast\"",
            base.display()
        )
    );
}

#[test]
fn kernel_flows_parse_on_the_emulator_with_their_algorithm_as_class() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("k.yaml");
    std::fs::write(
        &p,
        "backend: quic\nlink: {rate: 10mbit, delay: 5ms}\nflows:\n  - {algorithm: vivace}\n  - {algorithm: kernel:bbr, count: 2, size: 1MB}\nmetrics:\n  ratios: [{numerator: vivace, denominator: kernel:bbr}]\n",
    )
    .unwrap();
    let e = ccp_exp::load(&p).unwrap();
    let r = &e.parts[0].points[0].recipe;
    assert_eq!(r.flows[1].algorithm, "kernel:bbr");
    assert_eq!(r.flows[1].class, "kernel:bbr");
    assert_eq!(
        ccp_exp::recipe::kernel_cc(&r.flows[1].algorithm),
        Some("bbr")
    );
    assert_eq!(ccp_exp::recipe::kernel_cc(&r.flows[0].algorithm), None);
}
