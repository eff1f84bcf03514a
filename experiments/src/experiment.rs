//! A whole experiment: the recipe file with its includes merged, split into parts (each with one
//! backend), each part's sweep expanded into points (the cartesian product of its axes), and
//! every point read into a typed [`Recipe`]. Every error of every point is collected, each with
//! the file, line and column it comes from.

use crate::recipe::{self, PART_KEYS, PlotSpec, Reader, Recipe, default_plots, read_recipe};
use crate::tree::{self, Node, Step, Value, merge, parse_path, set_path};
use ccp_algorithms::config::{ConfigError, ConfigErrors};
use std::path::{Path, PathBuf};

/// One axis of a sweep.
#[derive(Clone, Debug)]
pub struct Axis {
    /// Short name (the last key of the path, or the whole path if that is ambiguous).
    pub name: String,
    /// The field path as written.
    pub path: String,
    pub steps: Vec<Step>,
    pub values: Vec<Node>,
    /// The sweep key (for errors).
    pub key: Node,
}

/// One point of a sweep.
#[derive(Clone, Debug)]
pub struct Point {
    pub index: usize,
    /// Directory-safe id, e.g. `p01-loss=0.01-algorithm=cubic`.
    pub id: String,
    /// For people, e.g. `loss=0.01, algorithm=cubic` (empty without a sweep).
    pub label: String,
    /// `(axis, value)` in axis order.
    pub values: Vec<(String, String)>,
    pub recipe: Recipe,
}

/// A part of an experiment: one backend, one sweep.
#[derive(Clone, Debug)]
pub struct Part {
    pub name: String,
    pub description: String,
    pub axes: Vec<String>,
    pub points: Vec<Point>,
    /// The plots (the recipe's, or the defaults).
    pub plots: Vec<PlotSpec>,
}

/// A loaded, validated experiment.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub name: String,
    pub description: String,
    /// The recipe file.
    pub file: PathBuf,
    /// The recipe file's text, as given.
    pub source: String,
    /// The recipe with its includes merged, as YAML.
    pub resolved: String,
    /// FNV-1a hash of `resolved` (hex).
    pub hash: String,
    pub parts: Vec<Part>,
}

/// Every error found in a recipe.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RecipeErrors(pub ConfigErrors);

impl RecipeErrors {
    /// The errors.
    pub fn list(&self) -> &[ConfigError] {
        &self.0.0
    }
}

const TOP_KEYS: &[&str] = &["name", "description", "include", "parts"];

/// 64-bit FNV-1a, hex.
pub fn fnv1a(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn push(errs: &mut Vec<ConfigError>, e: ConfigError) {
    if !errs.contains(&e) {
        errs.push(e);
    }
}

/// Read `path` and merge its includes under it (recursively).
fn load_tree(path: &Path, stack: &mut Vec<PathBuf>, errs: &mut Vec<ConfigError>) -> Option<Node> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            push(
                errs,
                ConfigError {
                    file: path.to_path_buf(),
                    line: 0,
                    col: 0,
                    field: String::new(),
                    message: format!("cannot read: {e}"),
                },
            );
            return None;
        }
    };
    let mut node = match Node::parse(path, &text) {
        Ok(n) => n,
        Err(e) => {
            push(errs, e);
            return None;
        }
    };
    if matches!(node.value, Value::Null) {
        node.value = Value::Map(vec![]);
    }
    // The root mapping is reported at the start of its file.
    node.pos.line = 1;
    node.pos.col = 1;
    if !matches!(node.value, Value::Map(_)) {
        push(
            errs,
            node.pos.error(
                "",
                format!("expected a mapping of recipe keys, got {}", node.kind()),
            ),
        );
        return None;
    }
    let Some(inc) = node.remove("include") else {
        return Some(node);
    };
    let names: Vec<Node> = match &inc.value {
        Value::Scalar(_) => vec![inc.clone()],
        Value::Seq(items) => items.clone(),
        _ => {
            push(
                errs,
                inc.pos.error(
                    "include",
                    format!("expected a file name or a list of them, got {}", inc.kind()),
                ),
            );
            return None;
        }
    };
    let mut base: Option<Node> = None;
    for n in names {
        let Some(name) = n.as_scalar() else {
            push(
                errs,
                n.pos
                    .error("include", format!("expected a file name, got {}", n.kind())),
            );
            continue;
        };
        let dir = path.parent().unwrap_or(Path::new(""));
        let target = dir.join(name);
        let canon = target.canonicalize().unwrap_or_else(|_| target.clone());
        if stack.contains(&canon) {
            push(
                errs,
                n.pos.error(
                    "include",
                    format!(
                        "{name:?} includes itself (through {})",
                        stack
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(" -> ")
                    ),
                ),
            );
            continue;
        }
        if !target.is_file() {
            push(
                errs,
                n.pos.error(
                    "include",
                    format!("no such file {:?}", target.display().to_string()),
                ),
            );
            continue;
        }
        stack.push(canon);
        let sub = load_tree(&target, stack, errs);
        stack.pop();
        if let Some(sub) = sub {
            base = Some(match base {
                Some(b) => merge(&b, &sub),
                None => sub,
            });
        }
    }
    Some(match base {
        Some(b) => merge(&b, &node),
        None => node,
    })
}

fn read_axes(r: &mut Reader, sweep: &Node) -> Vec<Axis> {
    let mut axes = vec![];
    if !matches!(sweep.value, Value::Map(_)) {
        r.err(
            sweep,
            "sweep",
            format!(
                "expected a mapping of field paths to lists of values (e.g. link.loss: [0, 0.01]), got {}",
                sweep.kind()
            ),
        );
        return axes;
    }
    for (k, knode, v) in sweep.entries() {
        let field = format!("sweep.{k}");
        let steps = match parse_path(k) {
            Ok(s) => s,
            Err(e) => {
                r.err(knode, &field, format!("not a field path: {e}"));
                continue;
            }
        };
        if let Some(Step::Key(first)) = steps.first()
            && (TOP_KEYS.contains(&first.as_str()) || first == "sweep")
        {
            r.err(knode, &field, format!("{first} cannot be swept"));
            continue;
        }
        if let Some(Step::Key(first)) = steps.first()
            && !PART_KEYS.contains(&first.as_str())
        {
            let hint = ccp_algorithms::params::did_you_mean(first, PART_KEYS.iter().copied())
                .map(|s| format!(" (did you mean {s:?}?)"))
                .unwrap_or_default();
            r.err(
                knode,
                &field,
                format!(
                    "no field {first:?} in a recipe{hint}; fields are: {}",
                    PART_KEYS.join(", ")
                ),
            );
            continue;
        }
        let values = match &v.value {
            Value::Seq(items) if !items.is_empty() => items.clone(),
            _ => {
                r.err(
                    v,
                    &field,
                    format!("expected a non-empty list of values, got {}", v.kind()),
                );
                continue;
            }
        };
        let name = steps
            .iter()
            .rev()
            .find_map(|s| match s {
                Step::Key(k) => Some(k.clone()),
                _ => None,
            })
            .unwrap_or_else(|| k.to_string());
        axes.push(Axis {
            name,
            path: k.to_string(),
            steps,
            values,
            key: knode.clone(),
        });
    }
    // Ambiguous short names fall back to the full path.
    let names: Vec<String> = axes.iter().map(|a| a.name.clone()).collect();
    for a in &mut axes {
        if names.iter().filter(|n| **n == a.name).count() > 1 {
            a.name = a.path.clone();
        }
    }
    axes
}

/// A directory-safe version of `s`.
pub fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '=' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.truncate(80);
    out
}

fn expand_part(
    name: String,
    description: String,
    tree: &Node,
    errs: &mut Vec<ConfigError>,
) -> Option<Part> {
    let before = errs.len();
    let mut r = Reader { errs };
    let mut tree = tree.clone();
    let axes = match tree.remove("sweep") {
        Some(s) => read_axes(&mut r, &s),
        None => vec![],
    };
    let axis_names: Vec<String> = axes.iter().map(|a| a.name.clone()).collect();
    let sizes: Vec<usize> = axes.iter().map(|a| a.values.len()).collect();
    let total: usize = sizes.iter().product();
    if total > 100_000 {
        r.err(&tree, "sweep", format!("{total} points; at most 100000"));
        return None;
    }
    let mut points = vec![];
    for index in 0..total {
        // First axis varies slowest.
        let mut rem = index;
        let mut choice = vec![0usize; axes.len()];
        for (i, n) in sizes.iter().enumerate().rev() {
            choice[i] = rem % n;
            rem /= n;
        }
        let mut t = tree.clone();
        let mut values = vec![];
        let mut ok = true;
        for (a, &c) in axes.iter().zip(&choice) {
            let v = &a.values[c];
            match set_path(&mut t, &a.steps, v, &a.key.pos) {
                Ok(_) => {}
                Err(e) => {
                    r.err(
                        &a.key,
                        &format!("sweep.{}", a.path),
                        format!("cannot set {}: {e}", a.path),
                    );
                    ok = false;
                }
            }
            values.push((a.name.clone(), v.compact()));
        }
        if !ok {
            continue;
        }
        let Some(recipe) = read_recipe(&t, &axis_names, r.errs) else {
            continue;
        };
        let label = values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut id = format!("p{index:02}");
        for (k, v) in &values {
            id.push('-');
            id.push_str(&format!("{k}={v}"));
        }
        points.push(Point {
            index,
            id: slug(&id),
            label,
            values,
            recipe,
        });
    }
    if errs.len() > before || points.is_empty() {
        return None;
    }
    let plots = if tree.get("plots").is_some() {
        points[0].recipe.plots.clone()
    } else {
        let sized = points.iter().any(|p| {
            p.recipe.flows.iter().any(|f| f.size.is_some()) || !p.recipe.workloads.is_empty()
        });
        default_plots(&axis_names, sized)
    };
    Some(Part {
        name,
        description,
        axes: axis_names,
        points,
        plots,
    })
}

/// The mapping `n` with only the entries whose key is in `keys` (others were reported already).
fn only_keys(n: &Node, keys: &[&str]) -> Node {
    let mut out = n.clone();
    if let Value::Map(e) = &mut out.value {
        e.retain(|(k, _)| k.as_scalar().is_some_and(|k| keys.contains(&k)));
    }
    out
}

/// Load and validate the recipe at `path`.
pub fn load(path: &Path) -> Result<Experiment, RecipeErrors> {
    let mut errs = vec![];
    // Sweep points read the same nodes, so an error can be recorded once per point.
    let fail = |errs: Vec<ConfigError>| {
        let mut once = vec![];
        errs.into_iter().for_each(|e| push(&mut once, e));
        RecipeErrors(ConfigErrors(once))
    };
    let source = std::fs::read_to_string(path).unwrap_or_default();
    let mut stack = vec![path.canonicalize().unwrap_or_else(|_| path.to_path_buf())];
    let Some(root) = load_tree(path, &mut stack, &mut errs) else {
        return Err(fail(errs));
    };
    let resolved = root.to_yaml();
    let mut allowed: Vec<&str> = TOP_KEYS.to_vec();
    allowed.extend_from_slice(PART_KEYS);
    let mut r = Reader { errs: &mut errs };
    r.map(&root, "", &allowed);
    let stem = path
        .file_stem()
        .map(|s| slug(&s.to_string_lossy()))
        .unwrap_or_else(|| "experiment".into());
    let name = match root.get("name") {
        Some(n) => r.label(n, "name").unwrap_or(stem),
        None => stem,
    };
    let description = match root.get("description") {
        Some(n) => r
            .scalar(n, "description", "a text")
            .unwrap_or("")
            .to_string(),
        None => String::new(),
    };
    let shared = only_keys(&root, PART_KEYS);
    let mut parts = vec![];
    match root.get("parts") {
        None => {
            if let Some(p) = expand_part(name.clone(), description.clone(), &shared, &mut errs) {
                parts.push(p);
            }
        }
        Some(list) => {
            let mut r = Reader { errs: &mut errs };
            let items = r
                .list(list, "parts", "parts (mappings with a name)")
                .unwrap_or(&[])
                .to_vec();
            if items.is_empty() && matches!(list.value, Value::Seq(_)) {
                r.err(list, "parts", "expected at least one part");
            }
            let mut names: Vec<String> = vec![];
            for (i, p) in items.iter().enumerate() {
                let field = format!("parts[{i}]");
                let mut r = Reader { errs: &mut errs };
                let mut keys: Vec<&str> = vec!["name", "description"];
                keys.extend_from_slice(PART_KEYS);
                if !r.map(p, &field, &keys) {
                    continue;
                }
                let Some(pname) = r
                    .required(p, &field, "name", "a label for the part, e.g. sim-sweep")
                    .and_then(|n| r.label(n, &tree::join(&field, "name")))
                else {
                    continue;
                };
                if names.contains(&pname) {
                    if let Some(n) = p.get("name") {
                        r.err(
                            n,
                            &tree::join(&field, "name"),
                            format!("another part is named {pname:?}"),
                        );
                    }
                    continue;
                }
                names.push(pname.clone());
                let pdesc = p
                    .get("description")
                    .and_then(|d| d.as_scalar())
                    .unwrap_or("")
                    .to_string();
                let body = only_keys(p, PART_KEYS);
                let merged = merge(&shared, &body);
                if let Some(part) = expand_part(pname, pdesc, &merged, &mut errs) {
                    parts.push(part);
                }
            }
        }
    }
    if !errs.is_empty() {
        // A simulator scenario fails as a recipe at nearly every line: the first error and the
        // hint say more than the whole list.
        if let Some(hint) = recipe::sim_scenario_hint(path, &root) {
            errs.truncate(1);
            errs.push(hint);
        }
        return Err(fail(errs));
    }
    Ok(Experiment {
        name,
        description,
        file: path.to_path_buf(),
        source,
        hash: fnv1a(&resolved),
        resolved,
        parts,
    })
}

impl Experiment {
    /// Total number of runs.
    pub fn run_count(&self) -> usize {
        self.parts
            .iter()
            .flat_map(|p| &p.points)
            .map(|p| p.recipe.seeds.len())
            .sum()
    }
}

/// The backend names a recipe may use, with availability.
pub fn backends() -> Vec<(recipe::Backend, Option<&'static str>)> {
    [
        recipe::Backend::Sim,
        recipe::Backend::Udp,
        recipe::Backend::Emu,
        recipe::Backend::Quic,
        recipe::Backend::Kernel,
    ]
    .into_iter()
    .map(|b| (b, b.unavailable()))
    .collect()
}
