//! Positioned YAML: configuration files (agent rules, pricing policies, recipes) parsed into a
//! tree whose every node knows its line and column, so that every error names the file, the
//! line, the column, the field and what was expected.

use crate::params::did_you_mean;
use std::fmt;
use std::path::{Path, PathBuf};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// An error in a configuration file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based line (0 if the error is not tied to a place).
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// Dotted path of the field, e.g. `rules[2].params.beta`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.col)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Several errors at once (a validator reports all it finds).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// A YAML value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Any scalar, as written (numbers and booleans too; the reader interprets it).
    Scalar(String),
    Seq(Vec<Node>),
    /// Keys in file order.
    Map(Vec<(Node, Node)>),
    Null,
}

/// A YAML node with its place in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
}

/// A parsed file: its path (for messages) and its root node.
#[derive(Clone, Debug)]
pub struct Document {
    pub file: PathBuf,
    pub root: Node,
}

struct Builder {
    stack: Vec<(Node, Option<Node>)>,
    root: Option<Node>,
    anchors: Vec<(usize, Node)>,
    pending_anchor: Vec<usize>,
}

impl Builder {
    fn push_value(&mut self, n: Node) {
        match self.stack.last_mut() {
            None => self.root = Some(n),
            Some((parent, key)) => match &mut parent.value {
                Value::Seq(items) => items.push(n),
                Value::Map(entries) => match key.take() {
                    None => *key = Some(n),
                    Some(k) => entries.push((k, n)),
                },
                _ => {}
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let at = |value| Node {
            value,
            line: mark.line(),
            col: mark.col() + 1,
        };
        match ev {
            Event::Scalar(s, style, anchor, _) => {
                let plain = style == yaml_rust2::scanner::TScalarStyle::Plain;
                let v = if plain && (s.is_empty() || s == "~" || s == "null") {
                    Value::Null
                } else {
                    Value::Scalar(s)
                };
                let n = at(v);
                if anchor > 0 {
                    self.anchors.push((anchor, n.clone()));
                }
                self.push_value(n);
            }
            Event::SequenceStart(anchor, _) => {
                self.pending_anchor.push(anchor);
                self.stack.push((at(Value::Seq(vec![])), None));
            }
            Event::MappingStart(anchor, _) => {
                self.pending_anchor.push(anchor);
                self.stack.push((at(Value::Map(vec![])), None));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((n, _)) = self.stack.pop() {
                    if let Some(anchor) = self.pending_anchor.pop()
                        && anchor > 0
                    {
                        self.anchors.push((anchor, n.clone()));
                    }
                    self.push_value(n);
                }
            }
            Event::Alias(id) => {
                let found = self
                    .anchors
                    .iter()
                    .rev()
                    .find(|(a, _)| *a == id)
                    .map(|(_, n)| n.clone());
                let mut n = found.unwrap_or_else(|| at(Value::Null));
                n.line = mark.line();
                n.col = mark.col() + 1;
                self.push_value(n);
            }
            _ => {}
        }
    }
}

impl Document {
    /// Parse YAML text; `file` is only used in messages.
    pub fn parse(file: impl Into<PathBuf>, text: &str) -> Result<Document, ConfigError> {
        let file = file.into();
        let mut b = Builder {
            stack: vec![],
            root: None,
            anchors: vec![],
            pending_anchor: vec![],
        };
        let mut parser = Parser::new_from_str(text);
        parser.load(&mut b, false).map_err(|e| ConfigError {
            file: file.clone(),
            line: e.marker().line(),
            col: e.marker().col() + 1,
            field: String::new(),
            message: format!("not valid YAML: {}", e.info()),
        })?;
        let root = b.root.unwrap_or(Node {
            value: Value::Null,
            line: 1,
            col: 1,
        });
        Ok(Document { file, root })
    }

    /// Read and parse a file.
    pub fn load(path: &Path) -> Result<Document, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: 0,
            col: 0,
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        Document::parse(path, &text)
    }

    /// An error at `node`, for `field`.
    pub fn error(&self, node: &Node, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            line: node.line,
            col: node.col,
            field: field.to_string(),
            message: message.into(),
        }
    }
}

impl Node {
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

    /// Map entries as `(key text, key node, value node)`, if this is a mapping.
    pub fn entries(&self) -> Option<Vec<(&str, &Node, &Node)>> {
        match &self.value {
            Value::Map(e) => Some(
                e.iter()
                    .map(|(k, v)| (k.as_scalar().unwrap_or(""), k, v))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// The value under `key`, if this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(e) => e
                .iter()
                .find(|(k, _)| k.as_scalar() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The items, if this is a list.
    pub fn items(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(v) => Some(v),
            _ => None,
        }
    }
}

/// Check that every key of mapping `node` is one of `allowed`; each unknown key is an error with
/// a did-you-mean. Duplicate keys are errors too.
pub fn check_keys(doc: &Document, node: &Node, path: &str, allowed: &[&str]) -> Vec<ConfigError> {
    let mut errs = vec![];
    let Some(entries) = node.entries() else {
        return errs;
    };
    let mut seen: Vec<&str> = vec![];
    for (k, knode, _) in entries {
        let field = join(path, k);
        if !allowed.contains(&k) {
            let hint = did_you_mean(k, allowed.iter().copied())
                .map(|s| format!(" (did you mean {s:?}?)"))
                .unwrap_or_default();
            errs.push(doc.error(
                knode,
                &field,
                format!("unknown key{hint}; expected one of: {}", allowed.join(", ")),
            ));
        } else if seen.contains(&k) {
            errs.push(doc.error(knode, &field, "key given twice"));
        }
        seen.push(k);
    }
    errs
}

/// `a.b`, or `b` when `a` is empty.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_know_their_place() {
        let d = Document::parse("f.yaml", "a: 1\nb:\n  - x\n  - y: 2\n").unwrap();
        let b = d.root.get("b").unwrap();
        let items = b.items().unwrap();
        assert_eq!((items[0].line, items[0].col), (3, 5));
        let y = items[1].get("y").unwrap();
        assert_eq!(y.as_scalar(), Some("2"));
        assert_eq!(y.line, 4);
    }

    #[test]
    fn syntax_errors_name_file_and_line() {
        let e = Document::parse("r.yaml", "a: [1, 2\nb: 3\n").unwrap_err();
        assert_eq!(e.file, PathBuf::from("r.yaml"));
        assert!(e.line >= 1, "{e}");
        assert!(e.to_string().starts_with("r.yaml:"), "{e}");
    }

    #[test]
    fn unknown_keys_get_a_suggestion() {
        let d = Document::parse("f.yaml", "algoritm: x\n").unwrap();
        let errs = check_keys(&d, &d.root, "", &["algorithm", "params"]);
        assert_eq!(errs.len(), 1);
        let s = errs[0].to_string();
        assert!(
            s.contains("f.yaml:1:1: algoritm: unknown key (did you mean \"algorithm\"?)"),
            "{s}"
        );
    }
}
