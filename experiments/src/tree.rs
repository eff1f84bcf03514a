//! The recipe tree: YAML parsed by `ccp_algorithms::config` (every node knows its line and
//! column) and turned into nodes that also know their *file*, so that a recipe built from several
//! files (`include:`) and a sweep that substitutes values still reports every error at the right
//! file, line and column. Also: merging (include and parts), field paths for sweeps, and
//! rendering a tree back to YAML.

use ccp_algorithms::config::{self, ConfigError, Document};
use ccp_algorithms::params::did_you_mean;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a node was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pos {
    pub file: Arc<PathBuf>,
    /// 1-based line (0: not tied to a place).
    pub line: usize,
    /// 1-based column.
    pub col: usize,
}

impl Pos {
    /// The start of `file`.
    pub fn file_start(file: &Path) -> Pos {
        Pos {
            file: Arc::new(file.to_path_buf()),
            line: 1,
            col: 1,
        }
    }

    /// An error at this place about `field`.
    pub fn error(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: (*self.file).clone(),
            line: self.line,
            col: self.col,
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// A value of the tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Any scalar, as written.
    Scalar(String),
    Seq(Vec<Node>),
    /// Keys in file order.
    Map(Vec<(Node, Node)>),
    Null,
}

/// A node with its place.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    pub pos: Pos,
}

impl Node {
    /// Convert a node of a parsed document.
    pub fn from_config(n: &config::Node, file: &Arc<PathBuf>) -> Node {
        let pos = Pos {
            file: file.clone(),
            line: n.line,
            col: n.col,
        };
        let value = match &n.value {
            config::Value::Scalar(s) => Value::Scalar(s.clone()),
            config::Value::Null => Value::Null,
            config::Value::Seq(items) => {
                Value::Seq(items.iter().map(|i| Node::from_config(i, file)).collect())
            }
            config::Value::Map(entries) => Value::Map(
                entries
                    .iter()
                    .map(|(k, v)| (Node::from_config(k, file), Node::from_config(v, file)))
                    .collect(),
            ),
        };
        Node { value, pos }
    }

    /// Parse YAML text; `file` names it in messages.
    pub fn parse(file: &Path, text: &str) -> Result<Node, ConfigError> {
        let doc = Document::parse(file, text)?;
        Ok(Node::from_config(&doc.root, &Arc::new(file.to_path_buf())))
    }

    /// A scalar node at `pos`.
    pub fn scalar(s: impl Into<String>, pos: Pos) -> Node {
        Node {
            value: Value::Scalar(s.into()),
            pos,
        }
    }

    /// A short word for the node's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self.value {
            Value::Scalar(_) => "a scalar",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
            Value::Null => "nothing",
        }
    }

    /// The scalar text, if this is a scalar.
    pub fn as_scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The value under `key`, if this is a mapping that has it (the last one, if given twice).
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(e) => e
                .iter()
                .rev()
                .find(|(k, _)| k.as_scalar() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// Mutable value under `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        match &mut self.value {
            Value::Map(e) => e
                .iter_mut()
                .rev()
                .find(|(k, _)| k.as_scalar() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The key node of `key`, if present.
    pub fn key_node(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(e) => e
                .iter()
                .rev()
                .find(|(k, _)| k.as_scalar() == Some(key))
                .map(|(k, _)| k),
            _ => None,
        }
    }

    /// Map entries as `(key text, key node, value node)`.
    pub fn entries(&self) -> Vec<(&str, &Node, &Node)> {
        match &self.value {
            Value::Map(e) => e
                .iter()
                .map(|(k, v)| (k.as_scalar().unwrap_or(""), k, v))
                .collect(),
            _ => vec![],
        }
    }

    /// The items, if this is a list.
    pub fn items(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(v) => Some(v),
            _ => None,
        }
    }

    /// Remove `key` from a mapping; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Node> {
        match &mut self.value {
            Value::Map(e) => {
                let mut out = None;
                e.retain(|(k, v)| {
                    if k.as_scalar() == Some(key) {
                        out = Some(v.clone());
                        false
                    } else {
                        true
                    }
                });
                out
            }
            _ => None,
        }
    }

    /// Set `key` of a mapping (replacing an existing value, else appending with `key_pos`).
    pub fn set(&mut self, key: &str, value: Node, key_pos: Pos) {
        if let Some(slot) = self.get_mut(key) {
            *slot = value;
            return;
        }
        if let Value::Map(e) = &mut self.value {
            e.push((Node::scalar(key, key_pos), value));
        }
    }

    /// Compact one-line rendering (for sweep labels): scalars as written, others as flow YAML.
    pub fn compact(&self) -> String {
        match &self.value {
            Value::Scalar(s) => s.clone(),
            Value::Null => "null".into(),
            Value::Seq(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(Node::compact)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Value::Map(e) => format!(
                "{{{}}}",
                e.iter()
                    .map(|(k, v)| format!("{}: {}", k.compact(), v.compact()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// As a `serde_yaml::Value` (scalars typed the way YAML would read them).
    pub fn to_yaml_value(&self) -> serde_yaml::Value {
        match &self.value {
            Value::Null => serde_yaml::Value::Null,
            Value::Scalar(s) => serde_yaml::from_str::<serde_yaml::Value>(s)
                .ok()
                .filter(|v| {
                    !matches!(
                        v,
                        serde_yaml::Value::Mapping(_)
                            | serde_yaml::Value::Sequence(_)
                            | serde_yaml::Value::Tagged(_)
                    )
                })
                .filter(|v| !matches!(v, serde_yaml::Value::Null))
                .unwrap_or_else(|| serde_yaml::Value::String(s.clone())),
            Value::Seq(items) => {
                serde_yaml::Value::Sequence(items.iter().map(Node::to_yaml_value).collect())
            }
            Value::Map(e) => {
                let mut m = serde_yaml::Mapping::new();
                for (k, v) in e {
                    m.insert(k.to_yaml_value(), v.to_yaml_value());
                }
                serde_yaml::Value::Mapping(m)
            }
        }
    }

    /// Render as block YAML.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(&self.to_yaml_value()).unwrap_or_default()
    }
}

/// Merge `over` onto `base`: mappings merge key by key (recursively), anything else in `over`
/// replaces what `base` has. Positions stay those of the node that provided each value.
pub fn merge(base: &Node, over: &Node) -> Node {
    match (&base.value, &over.value) {
        (Value::Map(b), Value::Map(o)) => {
            let mut out: Vec<(Node, Node)> = b.clone();
            for (k, v) in o {
                let key = k.as_scalar();
                match out
                    .iter_mut()
                    .find(|(bk, _)| key.is_some() && bk.as_scalar() == key)
                {
                    Some((bk, bv)) => {
                        *bv = merge(bv, v);
                        *bk = k.clone();
                    }
                    None => out.push((k.clone(), v.clone())),
                }
            }
            Node {
                value: Value::Map(out),
                pos: over.pos.clone(),
            }
        }
        _ => over.clone(),
    }
}

/// Errors for keys of mapping `node` that are not in `allowed` (with a did-you-mean), and for
/// keys given twice.
pub fn check_keys(node: &Node, path: &str, allowed: &[&str]) -> Vec<ConfigError> {
    let mut errs = vec![];
    let mut seen: Vec<&str> = vec![];
    for (k, knode, _) in node.entries() {
        let field = join(path, k);
        if !allowed.contains(&k) {
            let hint = did_you_mean(k, allowed.iter().copied())
                .map(|s| format!(" (did you mean {s:?}?)"))
                .unwrap_or_default();
            errs.push(knode.pos.error(
                &field,
                format!("unknown key{hint}; expected one of: {}", allowed.join(", ")),
            ));
        } else if seen.contains(&k) {
            errs.push(knode.pos.error(&field, "key given twice"));
        }
        seen.push(k);
    }
    errs
}

/// `a.b`, or `b` when `a` is empty.
pub fn join(path: &str, key: &str) -> String {
    config::join(path, key)
}

/// One step of a field path: a key, an item, or every item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
    All,
}

/// Parse a field path such as `link.uplink.loss`, `flows[0].algorithm` or
/// `flows[*].params.beta`.
pub fn parse_path(text: &str) -> Result<Vec<Step>, String> {
    let mut steps = vec![];
    if text.trim().is_empty() {
        return Err("an empty field path".into());
    }
    for part in text.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() && (steps.is_empty() || rest.is_empty()) {
            return Err(format!("{text:?}: an empty key"));
        }
        if !key.is_empty() {
            steps.push(Step::Key(key.to_string()));
        }
        while !rest.is_empty() {
            let close = rest
                .find(']')
                .ok_or_else(|| format!("{text:?}: a '[' without ']'"))?;
            let inner = &rest[1..close];
            if inner == "*" {
                steps.push(Step::All);
            } else {
                let i: usize = inner.parse().map_err(|_| {
                    format!("{text:?}: [{inner}] is not an index (a whole number or *)")
                })?;
                steps.push(Step::Index(i));
            }
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(format!("{text:?}: unexpected {rest:?} after ']'"));
            }
        }
    }
    Ok(steps)
}

/// Set every field `steps` designates in `root` to `value`. Missing keys of an existing mapping
/// are created (their key node is placed at `key_pos`, so that an unknown key is reported where
/// the sweep names it). Returns how many fields were set, or a message if the path leads
/// through something that is not there.
pub fn set_path(
    root: &mut Node,
    steps: &[Step],
    value: &Node,
    key_pos: &Pos,
) -> Result<usize, String> {
    let Some((first, rest)) = steps.split_first() else {
        *root = value.clone();
        return Ok(1);
    };
    match first {
        Step::Key(k) => {
            if matches!(root.value, Value::Null) {
                root.value = Value::Map(vec![]);
            }
            if !matches!(root.value, Value::Map(_)) {
                return Err(format!("{k:?} is under {}, not a mapping", root.kind()));
            }
            if root.get(k).is_none() {
                if !rest.is_empty() && matches!(rest[0], Step::Index(_) | Step::All) {
                    return Err(format!("there is no list {k:?} to index"));
                }
                root.set(
                    k,
                    Node {
                        value: Value::Null,
                        pos: key_pos.clone(),
                    },
                    key_pos.clone(),
                );
            }
            let child = root.get_mut(k).expect("just set");
            set_path(child, rest, value, key_pos)
        }
        Step::Index(i) => match &mut root.value {
            Value::Seq(items) => {
                let n = items.len();
                let item = items
                    .get_mut(*i)
                    .ok_or_else(|| format!("index {i} is past the end of a list of {n}"))?;
                set_path(item, rest, value, key_pos)
            }
            _ => Err(format!("[{i}] indexes {}, not a list", root.kind())),
        },
        Step::All => match &mut root.value {
            Value::Seq(items) => {
                let mut n = 0;
                for item in items.iter_mut() {
                    n += set_path(item, rest, value, key_pos)?;
                }
                Ok(n)
            }
            _ => Err(format!("[*] applies to {}, not a list", root.kind())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Node {
        Node::parse(Path::new("t.yaml"), text).unwrap()
    }

    #[test]
    fn merge_overrides_maps_and_replaces_lists() {
        let base = parse("a: 1\nb: {c: 2, d: 3}\nl: [1, 2]\n");
        let over = parse("b: {d: 4}\nl: [9]\ne: 5\n");
        let m = merge(&base, &over);
        assert_eq!(m.get("a").unwrap().as_scalar(), Some("1"));
        assert_eq!(m.get("b").unwrap().get("c").unwrap().as_scalar(), Some("2"));
        assert_eq!(m.get("b").unwrap().get("d").unwrap().as_scalar(), Some("4"));
        assert_eq!(m.get("l").unwrap().items().unwrap().len(), 1);
        assert_eq!(m.get("e").unwrap().pos.line, 3);
    }

    #[test]
    fn paths_parse_and_set() {
        assert_eq!(
            parse_path("flows[*].params.beta").unwrap(),
            vec![
                Step::Key("flows".into()),
                Step::All,
                Step::Key("params".into()),
                Step::Key("beta".into())
            ]
        );
        assert!(parse_path("a[x]").is_err());
        assert!(parse_path("a..b").is_err());
        let mut root = parse("flows:\n  - {algorithm: reno}\n  - {algorithm: reno}\n");
        let v = Node::scalar("cubic", Pos::file_start(Path::new("s.yaml")));
        let n = set_path(
            &mut root,
            &parse_path("flows[*].algorithm").unwrap(),
            &v,
            &v.pos,
        )
        .unwrap();
        assert_eq!(n, 2);
        let items = root.get("flows").unwrap().items().unwrap();
        assert_eq!(
            items[1].get("algorithm").unwrap().as_scalar(),
            Some("cubic")
        );
        let n = set_path(&mut root, &parse_path("link.loss").unwrap(), &v, &v.pos).unwrap();
        assert_eq!(n, 1);
        assert!(set_path(&mut root, &parse_path("flows[5].x").unwrap(), &v, &v.pos).is_err());
    }

    #[test]
    fn yaml_round_trip_keeps_types() {
        let n = parse("a: 1\nb: 100mbit\nc: [true, 0.5]\nd: \"x: y\"\n");
        let y = n.to_yaml();
        assert!(y.contains("a: 1\n"), "{y}");
        assert!(y.contains("b: 100mbit\n"), "{y}");
        assert!(y.contains("- true\n"), "{y}");
        let back = parse(&y);
        assert_eq!(back.get("d").unwrap().as_scalar(), Some("x: y"));
    }
}
