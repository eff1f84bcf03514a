//! Recipe validation: a corpus of broken recipes (tests/broken/*.yaml), each with the exact
//! messages it must produce written at its end as `# expect: file:line:col: field: message`
//! lines; every shipped YAML file (recipe, include base, simulator scenario) loading with its
//! loader.

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

/// The kinds of YAML file shipped under recipes/.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A `ccp-exp` recipe: loads with `ccp_exp::load` and has at least one run.
    Recipe,
    /// An include base: not runnable alone; included by a shipped recipe that loads.
    Base,
    /// A `ccp-sim` scenario: passes `ccp-sim check FILE` (what `ccp-sim run FILE` checks first).
    Scenario,
}

/// Every `.yaml` file under `dir`, recursively, sorted.
fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
    out.sort();
}

/// The kind of a shipped file, first rule that applies:
/// 1. in a directory named `base`: an include base;
/// 2. a top-level key of the simulator scenario's own (`agent`, `transport`, `topology`,
///    `stop_when_done`, `output`: `ccp_exp::recipe::SIM_SCENARIO_KEYS`) and neither `backend`
///    nor `link`: a ccp-sim scenario (the rule of `ccp-exp validate`'s hint);
/// 3. any other mapping: a ccp-exp recipe.
///
/// A file that is not a YAML mapping cannot be classified: an error.
fn classify(f: &Path) -> Result<Kind, String> {
    let text = std::fs::read_to_string(f).map_err(|e| e.to_string())?;
    let root = ccp_exp::tree::Node::parse(f, &text).map_err(|e| e.to_string())?;
    if !matches!(root.value, ccp_exp::tree::Value::Map(_)) {
        return Err(format!("cannot classify: {} at the top level", root.kind()));
    }
    if f.parent()
        .and_then(|d| d.file_name())
        .is_some_and(|d| d == "base")
    {
        return Ok(Kind::Base);
    }
    if ccp_exp::recipe::sim_scenario_hint(f, &root).is_some() {
        return Ok(Kind::Scenario);
    }
    Ok(Kind::Recipe)
}

/// The files `f` includes, directly or through the files it includes (canonical paths).
fn includes(f: &Path, out: &mut Vec<PathBuf>) {
    let text = std::fs::read_to_string(f).unwrap();
    let root = ccp_exp::tree::Node::parse(f, &text).unwrap();
    let names: Vec<String> = match root.get("include").map(|n| &n.value) {
        Some(ccp_exp::tree::Value::Scalar(s)) => vec![s.clone()],
        Some(ccp_exp::tree::Value::Seq(items)) => items
            .iter()
            .filter_map(|n| n.as_scalar().map(str::to_string))
            .collect(),
        _ => vec![],
    };
    for n in names {
        let Ok(p) = f.parent().unwrap_or(Path::new("")).join(n).canonicalize() else {
            continue;
        };
        if !out.contains(&p) {
            out.push(p.clone());
            includes(&p, out);
        }
    }
}

/// Load a ccp-sim scenario and check it as `ccp-sim check` (and `ccp-sim run` before it
/// simulates) does: the scenario parser (serde, ranges, consistency), the algorithms every flow,
/// generator and the agent name, and the world's construction (topology and host names, traces,
/// workload CDFs, recorded queues).
fn load_scenario(f: &Path) -> Result<(), String> {
    let s = ccp_sim::Scenario::load(f).map_err(|e| e.to_string())?;
    ccp_sim::check(&s).map_err(|e| e.to_string())
}

#[test]
fn every_shipped_yaml_file_loads_with_its_loader() {
    let mut files = vec![];
    yaml_files(Path::new("recipes"), &mut files);
    let mut kinds: Vec<(PathBuf, Kind)> = vec![];
    let mut failures: Vec<String> = vec![];
    for f in &files {
        match classify(f) {
            Ok(k) => kinds.push((f.clone(), k)),
            Err(e) => failures.push(format!("{}: {e}", f.display())),
        }
    }
    // Recipes, and what the ones that load include.
    let mut included: Vec<PathBuf> = vec![];
    for (f, _) in kinds.iter().filter(|(_, k)| *k == Kind::Recipe) {
        match ccp_exp::load(f) {
            Ok(exp) if exp.run_count() > 0 => includes(f, &mut included),
            Ok(_) => failures.push(format!("{}: ccp-exp recipe with no run", f.display())),
            Err(e) => failures.push(format!("{} (ccp-exp recipe):\n{e}", f.display())),
        }
    }
    for (f, _) in kinds.iter().filter(|(_, k)| *k == Kind::Base) {
        if !included.contains(&f.canonicalize().unwrap()) {
            failures.push(format!(
                "{}: include base that no shipped recipe that loads includes (a dead file)",
                f.display()
            ));
        }
    }
    for (f, _) in kinds.iter().filter(|(_, k)| *k == Kind::Scenario) {
        if let Err(e) = load_scenario(f) {
            failures.push(format!("{} (ccp-sim scenario): {e}", f.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let count = |kind: Kind| kinds.iter().filter(|(_, k)| *k == kind).count();
    let (recipes, bases, scenarios) = (
        count(Kind::Recipe),
        count(Kind::Base),
        count(Kind::Scenario),
    );
    eprintln!("{recipes} recipes, {bases} include bases, {scenarios} ccp-sim scenarios");
    // Not vacuous: every file found was classified and checked, and each kind has members
    // (quickstart and the examples among the recipes).
    assert_eq!(recipes + bases + scenarios, files.len());
    assert!(
        recipes > 0 && bases > 0 && scenarios > 0,
        "{recipes} recipes, {bases} bases, {scenarios} scenarios"
    );
    for must in ["recipes/quickstart.yaml", "recipes/examples/fairness.yaml"] {
        assert!(
            kinds.contains(&(PathBuf::from(must), Kind::Recipe)),
            "{must} not checked as a recipe"
        );
    }
}

#[test]
fn ccp_exp_list_names_every_shipped_recipe_and_scenario_in_its_folder() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ccp-exp"))
        .arg("list")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let (recipes, scenarios) = text
        .split_once("ccp-sim scenarios")
        .expect("a ccp-sim scenarios section");
    let recipes = recipes
        .split_once("\nrecipes in ")
        .expect("a recipes section")
        .1;
    // `  folder/: a.yaml, b.yaml` (the top folder's files without `folder/: `), continued on
    // lines indented further.
    let parse = |section: &str| -> Vec<PathBuf> {
        let mut out = vec![];
        let mut folder = String::new();
        for l in section.lines().filter(|l| l.starts_with("  ")) {
            let t = l.trim_start();
            let items = if l.starts_with("    ") {
                t
            } else if let Some((d, rest)) = t.split_once("/: ") {
                folder = d.to_string();
                rest
            } else {
                folder.clear();
                t
            };
            for i in items.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                out.push(Path::new("recipes").join(&folder).join(i));
            }
        }
        out
    };
    let (recipes, scenarios) = (parse(recipes), parse(scenarios));
    let mut files = vec![];
    yaml_files(Path::new("recipes"), &mut files);
    let mut runnable = 0;
    for f in &files {
        let kind = classify(f).unwrap();
        runnable += usize::from(kind != Kind::Base);
        match kind {
            Kind::Recipe => assert!(recipes.contains(f), "{} not listed:\n{text}", f.display()),
            Kind::Scenario => {
                assert!(scenarios.contains(f), "{} not listed:\n{text}", f.display())
            }
            Kind::Base => assert!(!recipes.contains(f) && !scenarios.contains(f)),
        }
    }
    // Each once, and nothing else.
    assert_eq!(recipes.len() + scenarios.len(), runnable, "{text}");
}

#[test]
fn a_simulator_scenario_given_as_a_recipe_says_so_and_how_to_run_it() {
    let f = Path::new("recipes/polycc/jitter.yaml");
    let errs = ccp_exp::load(f).unwrap_err();
    let list: Vec<String> = errs.list().iter().map(|e| e.to_string()).collect();
    // The file:line:col errors stay, the hint comes last, once.
    assert!(
        list.iter()
            .any(|e| e.starts_with("recipes/polycc/jitter.yaml:18:1: topology: unknown key")),
        "{list:?}"
    );
    assert_eq!(
        list.last().unwrap(),
        "recipes/polycc/jitter.yaml:1:1: this looks like a ccp-sim scenario (top-level topology, output), not a ccp-exp recipe; check it with `ccp-sim check recipes/polycc/jitter.yaml`, run it with `ccp-sim run recipes/polycc/jitter.yaml --out DIR`"
    );
    assert_eq!(list.iter().filter(|e| e.contains("ccp-sim")).count(), 1);
    // A recipe with a stray simulator key has a link: its error is only the unknown key.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.yaml");
    std::fs::write(
        &p,
        "link: {rate: 10mbit, delay: 5ms}\ntransport: {mss: 1448}\nflows: [{algorithm: reno}]\n",
    )
    .unwrap();
    let list: Vec<String> = ccp_exp::load(&p)
        .unwrap_err()
        .list()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(list.len(), 1, "{list:?}");
    assert!(list[0].contains("transport: unknown key"), "{list:?}");
    // The simulator's keys are none of a recipe's.
    for k in ccp_exp::recipe::SIM_SCENARIO_KEYS {
        assert!(!ccp_exp::recipe::PART_KEYS.contains(k), "{k}");
    }
    // Every shipped scenario gets the hint.
    let mut files = vec![];
    yaml_files(Path::new("recipes"), &mut files);
    let mut n = 0;
    for f in files.iter().filter(|f| classify(f) == Ok(Kind::Scenario)) {
        let last = ccp_exp::load(f)
            .unwrap_err()
            .list()
            .last()
            .unwrap()
            .to_string();
        assert!(
            last.contains("looks like a ccp-sim scenario"),
            "{}: {last}",
            f.display()
        );
        n += 1;
    }
    assert!(n > 0);
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

#[test]
fn a_sweep_over_algorithm_compares_variants_written_name_colon_params() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.yaml");
    std::fs::write(
        &p,
        "link: {rate: 10mbit, delay: 5ms}\nflows: [{algorithm: vivace, params: {epsilon: 0.1}}]\nsweep:\n  flows[0].algorithm: [vivace, \"vivace:latency-filter=0.025, gradient-confidence=0\"]\n",
    )
    .unwrap();
    let e = ccp_exp::load(&p).unwrap();
    let pts = &e.parts[0].points;
    let flow = |i: usize| &pts[i].recipe.flows[0];
    assert_eq!(flow(0).params, vec![("epsilon".into(), "0.1".into())]);
    // The name's settings and the params map are merged; the class is the algorithm's name.
    assert_eq!(
        (flow(1).algorithm.as_str(), flow(1).class.as_str()),
        ("vivace", "vivace")
    );
    assert_eq!(
        flow(1).params,
        vec![
            ("latency-filter".into(), "0.025".into()),
            ("gradient-confidence".into(), "0".into()),
            ("epsilon".into(), "0.1".into()),
        ]
    );
    // A key set both ways, and a bad inline value, are errors at the place they are written.
    std::fs::write(
        &p,
        "link: {rate: 10mbit, delay: 5ms}\nflows:\n  - {algorithm: \"vivace:epsilon=0.2\", params: {epsilon: 0.1}}\n  - {algorithm: \"vivace:epsilon=fast\"}\n",
    )
    .unwrap();
    let e = ccp_exp::load(&p).unwrap_err().to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(
        lines[0].ends_with(":3:48: flows[0].params.epsilon: \"epsilon\" is also set in the algorithm's name; set it once"),
        "{e}"
    );
    assert!(
        lines[1].contains(":4:17: flows[1].algorithm: ") && lines[1].contains("epsilon"),
        "{e}"
    );
}

#[test]
fn the_runs_of_a_point_differ_by_the_learners_seed_as_well_as_the_paths() {
    // A lossless, jitter-free path has no random element of its own: before the run's seed
    // reached the learners, every run of a point was the same run.
    let dir = tempfile::tempdir().unwrap();
    let delivered = |flows: &str, seed: u64| -> Vec<u64> {
        let p = dir.path().join("s.yaml");
        std::fs::write(
            &p,
            format!("duration: 5s\nlink: {{rate: 20mbit, delay: 10ms}}\nflows:\n{flows}"),
        )
        .unwrap();
        let e = ccp_exp::load(&p).unwrap();
        let sc = ccp_exp::backend::sim::scenario(&e.parts[0].points[0].recipe, seed, "s").unwrap();
        // The run's seed is every learner's default seed, as `ccp-agent --param` sets it.
        for a in [
            "vivace",
            "vivace-distributed",
            "hercules",
            "bbr",
            "polycc.bbr",
            "polycc.vivace",
            "jcce-member.vivace",
        ] {
            let want = format!("{a}.seed={seed}");
            assert!(sc.agent.params.contains(&want), "{:?}", sc.agent.params);
        }
        let res = ccp_sim::run(&sc, Some(seed)).unwrap();
        res.flows.iter().map(|f| f.bytes_delivered).collect()
    };
    let two = "  - {algorithm: vivace, count: 2}\n";
    let a = delivered(two, 1);
    assert_eq!(a, delivered(two, 1), "the same seed gives the same bytes");
    assert_ne!(a, delivered(two, 2), "two seeds gave the same bytes");
    // A flow that sets its own seed keeps it in every run.
    let pinned = "  - {algorithm: vivace, count: 2, params: {seed: 9}}\n";
    assert_eq!(delivered(pinned, 1), delivered(pinned, 2));
    // The members of a PolyCC pool get it too, and keep a seed the flow sets for them.
    let pool = "  - {algorithm: polycc, count: 2, params: {pilot: bbr, copilots: vivace}}\n";
    assert_ne!(
        delivered(pool, 1),
        delivered(pool, 2),
        "two seeds, one pool run"
    );
    let pinned = "  - {algorithm: polycc, count: 2, params: {pilot: bbr, copilots: vivace, \
                  bbr.seed: 9, vivace.seed: 9}}\n";
    assert_eq!(delivered(pinned, 1), delivered(pinned, 2));
}
