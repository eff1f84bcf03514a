//! Agent rules: which algorithm, with which parameters, a flow gets by its addresses and ports.
//!
//! ccp-kernel asks for "reno" on every flow, so an operator needs rules to choose per flow. A rule
//! file is YAML:
//!
//! ```yaml
//! rules:
//!   - name: storage            # optional label, shown in logs
//!     match:                   # every given condition must hold; an empty match matches all
//!       src: 10.0.0.0/8        # IPv4 address or CIDR, or a list of them
//!       dst: 10.1.2.3
//!       src_port: 1000-2000    # port or inclusive range, or a list of them
//!       dst_port: 5201
//!       requested: reno        # the name the flow asked for ("" when it named none)
//!     algorithm: cubic
//!     params:                  # optional, checked against the algorithm's parameters
//!       beta: 0.8
//! ```
//!
//! The first matching rule wins. Rules are checked completely when loaded: an unknown algorithm, an
//! unknown parameter, a value of the wrong unit or a malformed file is refused with the file, line,
//! column and field. Addresses are compared as `u32::from(Ipv4Addr)` (host order), which is how
//! this project's datapaths fill libccp's `src_ip`/`dst_ip`.

use crate::config::{ConfigError, ConfigErrors, Document, Node, check_keys, join};
use crate::params::ParamSet;
use crate::registry::{self, AlgorithmSpec};
use std::net::Ipv4Addr;
use std::path::Path;

/// An IPv4 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: u32,
    pub len: u8,
}

impl Prefix {
    pub(crate) fn contains(&self, ip: u32) -> bool {
        if self.len == 0 {
            return true;
        }
        let mask = u32::MAX << (32 - u32::from(self.len));
        ip & mask == self.addr & mask
    }

    pub(crate) fn parse(s: &str) -> Result<Prefix, String> {
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => {
                let len: u8 = l
                    .parse()
                    .ok()
                    .filter(|l| *l <= 32)
                    .ok_or_else(|| format!("{s:?}: prefix length must be 0..=32"))?;
                (a, len)
            }
            None => (s, 32),
        };
        let addr: Ipv4Addr = a.trim().parse().map_err(|_| {
            format!("{s:?} is not an IPv4 address or CIDR prefix (e.g. 10.0.0.0/8)")
        })?;
        Ok(Prefix {
            addr: u32::from(addr),
            len,
        })
    }
}

/// The 4-tuple and requested name a rule is matched against.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowKey {
    pub src_ip: u32,
    pub src_port: u32,
    pub dst_ip: u32,
    pub dst_port: u32,
    /// The name in the Create message ("" for none).
    pub requested: String,
}

impl FlowKey {
    /// How run-time commands (`set-class`, `set-params`, `set-algorithm`) address a live flow:
    /// `SRC_IP:SRC_PORT`.
    pub fn label(&self) -> String {
        format!(
            "{}:{}",
            std::net::Ipv4Addr::from(self.src_ip),
            self.src_port
        )
    }
}

/// Conditions of one rule; `None` means "any".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    pub src: Option<Vec<Prefix>>,
    pub dst: Option<Vec<Prefix>>,
    pub src_port: Option<Vec<(u32, u32)>>,
    pub dst_port: Option<Vec<(u32, u32)>>,
    pub requested: Option<Vec<String>>,
}

impl Match {
    /// Whether `k` satisfies every condition.
    pub fn matches(&self, k: &FlowKey) -> bool {
        let ip = |c: &Option<Vec<Prefix>>, v| {
            c.as_ref().is_none_or(|ps| ps.iter().any(|p| p.contains(v)))
        };
        let port = |c: &Option<Vec<(u32, u32)>>, v| {
            c.as_ref()
                .is_none_or(|rs| rs.iter().any(|(lo, hi)| (*lo..=*hi).contains(&v)))
        };
        ip(&self.src, k.src_ip)
            && ip(&self.dst, k.dst_ip)
            && port(&self.src_port, k.src_port)
            && port(&self.dst_port, k.dst_port)
            && self
                .requested
                .as_ref()
                .is_none_or(|names| names.contains(&k.requested))
    }
}

/// One rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// Label for logs (defaults to `rule N`).
    pub name: String,
    /// Line of the rule in its file.
    pub line: usize,
    pub when: Match,
    pub algorithm: &'static AlgorithmSpec,
    /// The algorithm's defaults with the rule's values applied.
    pub params: ParamSet,
    /// Keys the rule sets itself (they override agent flags).
    pub explicit: Vec<String>,
}

/// An ordered rule list.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    pub rules: Vec<Rule>,
}

impl Rules {
    /// The first rule matching `k`.
    pub fn pick(&self, k: &FlowKey) -> Option<&Rule> {
        self.rules.iter().find(|r| r.when.matches(k))
    }

    /// Load and check a rule file.
    pub fn load(path: &Path) -> Result<Rules, ConfigErrors> {
        let doc = Document::load(path).map_err(|e| ConfigErrors(vec![e]))?;
        Rules::from_document(&doc)
    }

    /// Parse and check rule text; `file` names it in messages.
    pub fn parse(file: &str, text: &str) -> Result<Rules, ConfigErrors> {
        let doc = Document::parse(file, text).map_err(|e| ConfigErrors(vec![e]))?;
        Rules::from_document(&doc)
    }

    fn from_document(doc: &Document) -> Result<Rules, ConfigErrors> {
        let mut errs = vec![];
        let root = &doc.root;
        if root.entries().is_none() {
            return Err(ConfigErrors(vec![doc.error(
                root,
                "",
                format!(
                    "expected a mapping with a `rules:` list, found {}",
                    root.kind()
                ),
            )]));
        }
        errs.extend(check_keys(doc, root, "", &["rules"]));
        let Some(list) = root.get("rules") else {
            errs.push(doc.error(root, "rules", "missing: expected a list of rules"));
            return Err(ConfigErrors(errs));
        };
        let mut rules = vec![];
        match list.items() {
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    match parse_rule(doc, item, &format!("rules[{i}]"), i) {
                        Ok(r) => rules.push(r),
                        Err(mut e) => errs.append(&mut e),
                    }
                }
            }
            None if matches!(list.value, crate::config::Value::Null) => {}
            None => errs.push(doc.error(
                list,
                "rules",
                format!("expected a list of rules, found {}", list.kind()),
            )),
        }
        if errs.is_empty() {
            Ok(Rules { rules })
        } else {
            Err(ConfigErrors(errs))
        }
    }
}

fn parse_rule(
    doc: &Document,
    node: &Node,
    path: &str,
    index: usize,
) -> Result<Rule, Vec<ConfigError>> {
    let mut errs = vec![];
    if node.entries().is_none() {
        return Err(vec![doc.error(
            node,
            path,
            format!(
                "expected a rule (a mapping with `algorithm:`), found {}",
                node.kind()
            ),
        )]);
    }
    errs.extend(check_keys(
        doc,
        node,
        path,
        &["name", "match", "algorithm", "params"],
    ));
    let name = match node.get("name") {
        None => format!("rule {}", index + 1),
        Some(n) => match n.as_scalar() {
            Some(s) => s.to_string(),
            None => {
                errs.push(doc.error(n, &join(path, "name"), "expected a text label"));
                String::new()
            }
        },
    };
    let when = match node.get("match") {
        None => Match::default(),
        Some(m) => match parse_match(doc, m, &join(path, "match")) {
            Ok(m) => m,
            Err(mut e) => {
                errs.append(&mut e);
                Match::default()
            }
        },
    };
    let alg_path = join(path, "algorithm");
    let algorithm = match node.get("algorithm") {
        None => {
            errs.push(doc.error(node, &alg_path, "missing: every rule names an algorithm"));
            None
        }
        Some(a) => match a.as_scalar() {
            None => {
                errs.push(doc.error(
                    a,
                    &alg_path,
                    format!("expected an algorithm name, found {}", a.kind()),
                ));
                None
            }
            Some(s) => match registry::lookup(s) {
                Ok(spec) => Some(spec),
                Err(msg) => {
                    errs.push(doc.error(a, &alg_path, msg));
                    None
                }
            },
        },
    };
    let mut params = algorithm.map(|a| a.defaults());
    let mut explicit = vec![];
    if let (Some(spec), Some(p), Some(pnode)) = (algorithm, params.as_mut(), node.get("params")) {
        let ppath = join(path, "params");
        match pnode.entries() {
            None if matches!(pnode.value, crate::config::Value::Null) => {}
            None => errs.push(doc.error(
                pnode,
                &ppath,
                format!(
                    "expected a mapping of parameter: value, found {}",
                    pnode.kind()
                ),
            )),
            Some(entries) => {
                for (k, knode, v) in entries {
                    let field = join(&ppath, k);
                    let Some(text) = v.as_scalar() else {
                        errs.push(doc.error(
                            v,
                            &field,
                            format!("expected a value, found {}", v.kind()),
                        ));
                        continue;
                    };
                    explicit.push(k.to_string());
                    if let Err(e) = p.set(spec.params, k, text) {
                        let place = if matches!(e, crate::params::ParamError::Unknown { .. }) {
                            knode
                        } else {
                            v
                        };
                        errs.push(doc.error(place, &field, e.detail()));
                    }
                }
            }
        }
    }
    match (algorithm, params, errs.is_empty()) {
        (Some(algorithm), Some(params), true) => Ok(Rule {
            name,
            line: node.line,
            when,
            algorithm,
            params,
            explicit,
        }),
        _ => Err(errs),
    }
}

/// One scalar or a list of scalars, each converted by `f`.
pub(crate) fn one_or_many<T>(
    doc: &Document,
    node: &Node,
    path: &str,
    expected: &str,
    f: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, Vec<ConfigError>> {
    let nodes: Vec<&Node> = match (&node.value, node.items()) {
        (_, Some(items)) => items.iter().collect(),
        (crate::config::Value::Scalar(_), None) => vec![node],
        _ => {
            return Err(vec![doc.error(
                node,
                path,
                format!("expected {expected}, found {}", node.kind()),
            )]);
        }
    };
    let mut out = vec![];
    let mut errs = vec![];
    for n in nodes {
        match n.as_scalar() {
            Some(s) => match f(s) {
                Ok(v) => out.push(v),
                Err(m) => errs.push(doc.error(n, path, m)),
            },
            None => {
                errs.push(doc.error(n, path, format!("expected {expected}, found {}", n.kind())))
            }
        }
    }
    if errs.is_empty() { Ok(out) } else { Err(errs) }
}

fn parse_port_range(s: &str) -> Result<(u32, u32), String> {
    let port = |p: &str| -> Result<u32, String> {
        p.trim()
            .parse::<u16>()
            .map(u32::from)
            .map_err(|_| format!("{s:?} is not a port (0-65535) or range like 1000-2000"))
    };
    match s.split_once('-') {
        Some((a, b)) => {
            let (lo, hi) = (port(a)?, port(b)?);
            if lo > hi {
                return Err(format!("{s:?}: range start is above its end"));
            }
            Ok((lo, hi))
        }
        None => {
            let p = port(s)?;
            Ok((p, p))
        }
    }
}

pub(crate) fn parse_match(
    doc: &Document,
    node: &Node,
    path: &str,
) -> Result<Match, Vec<ConfigError>> {
    let mut errs = vec![];
    if matches!(node.value, crate::config::Value::Null) {
        return Ok(Match::default());
    }
    if node.entries().is_none() {
        return Err(vec![doc.error(
            node,
            path,
            format!("expected a mapping of conditions, found {}", node.kind()),
        )]);
    }
    errs.extend(check_keys(
        doc,
        node,
        path,
        &["src", "dst", "src_port", "dst_port", "requested"],
    ));
    let mut m = Match::default();
    let take = |key: &str| node.get(key).map(|n| (n, join(path, key)));
    if let Some((n, p)) = take("src") {
        match one_or_many(doc, n, &p, "an IPv4 address or CIDR", Prefix::parse) {
            Ok(v) => m.src = Some(v),
            Err(mut e) => errs.append(&mut e),
        }
    }
    if let Some((n, p)) = take("dst") {
        match one_or_many(doc, n, &p, "an IPv4 address or CIDR", Prefix::parse) {
            Ok(v) => m.dst = Some(v),
            Err(mut e) => errs.append(&mut e),
        }
    }
    if let Some((n, p)) = take("src_port") {
        match one_or_many(doc, n, &p, "a port or range", parse_port_range) {
            Ok(v) => m.src_port = Some(v),
            Err(mut e) => errs.append(&mut e),
        }
    }
    if let Some((n, p)) = take("dst_port") {
        match one_or_many(doc, n, &p, "a port or range", parse_port_range) {
            Ok(v) => m.dst_port = Some(v),
            Err(mut e) => errs.append(&mut e),
        }
    }
    if let Some((n, p)) = take("requested") {
        // Flows are matched by the name they asked for without its parameters, so a name with
        // parameters could never match.
        let name = |s: &str| match s.split_once(':') {
            Some((alg, _)) => Err(format!(
                "{s:?} carries parameters; rules match the requested name alone (write {alg:?})"
            )),
            None => Ok(s.to_string()),
        };
        match one_or_many(doc, n, &p, "an algorithm name", name) {
            Ok(v) => m.requested = Some(v),
            Err(mut e) => errs.append(&mut e),
        }
    }
    if errs.is_empty() { Ok(m) } else { Err(errs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(src: &str, sp: u32, dst: &str, dp: u32, req: &str) -> FlowKey {
        FlowKey {
            src_ip: u32::from(src.parse::<Ipv4Addr>().unwrap()),
            src_port: sp,
            dst_ip: u32::from(dst.parse::<Ipv4Addr>().unwrap()),
            dst_port: dp,
            requested: req.into(),
        }
    }

    const GOOD: &str = "\
rules:
  - name: storage
    match:
      dst: 10.1.0.0/16
      dst_port: [5201, 6000-6010]
    algorithm: cubic
    params:
      beta: 0.8
  - match: {requested: reno}
    algorithm: reno
    params: {init-cwnd: 20}
  - algorithm: cubic
";

    #[test]
    fn first_match_wins() {
        let r = Rules::parse("r.yaml", GOOD).unwrap();
        assert_eq!(r.rules.len(), 3);
        let a = r
            .pick(&key("1.2.3.4", 1, "10.1.9.9", 6005, "reno"))
            .unwrap();
        assert_eq!(a.name, "storage");
        assert_eq!(a.params.get("beta"), 0.8);
        let b = r
            .pick(&key("1.2.3.4", 1, "10.2.9.9", 6005, "reno"))
            .unwrap();
        assert_eq!(b.algorithm.name, "reno");
        assert_eq!(b.params.get("init-cwnd"), 20.0);
        let c = r.pick(&key("1.2.3.4", 1, "10.2.9.9", 6005, "")).unwrap();
        assert_eq!((c.name.as_str(), c.line), ("rule 3", 12));
    }

    fn err(text: &str) -> String {
        Rules::parse("rules.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn unknown_algorithm_names_file_line_and_field() {
        let e = err("rules:\n  - algorithm: cubci\n");
        assert!(e.contains("rules.yaml:2:16: rules[0].algorithm: unknown algorithm \"cubci\" (did you mean \"cubic\"?)"), "{e}");
    }

    #[test]
    fn unknown_parameter_and_wrong_unit() {
        let e = err("rules:\n  - algorithm: reno\n    params:\n      init-cwdn: 3\n");
        assert!(
            e.contains("rules.yaml:4:7: rules[0].params.init-cwdn:"),
            "{e}"
        );
        assert!(e.contains("did you mean \"init-cwnd\""), "{e}");
        let e = err("rules:\n  - algorithm: reno\n    params:\n      init-cwnd: 10ms\n");
        assert!(
            e.contains("rules.yaml:4:18: rules[0].params.init-cwnd:"),
            "{e}"
        );
        assert!(e.contains("number of packets"), "{e}");
    }

    #[test]
    fn malformed_files_are_refused_with_a_place() {
        let e = err("rules:\n  - algorithm: reno\n    match: {dst: 10.0.0.300}\n");
        assert!(e.contains("rules.yaml:3:18: rules[0].match.dst:"), "{e}");
        let e = err("rules:\n  - algorithm: reno\n    match: {dst_port: 70000}\n");
        assert!(e.contains("rules[0].match.dst_port"), "{e}");
        let e = err("rules:\n  - algorithm: reno\n    mach: {}\n");
        assert!(
            e.contains("rules.yaml:3:5: rules[0].mach: unknown key (did you mean \"match\"?)"),
            "{e}"
        );
        let e = err("rules: [\n");
        assert!(e.starts_with("rules.yaml:"), "{e}");
        let e = err("- algorithm: reno\n");
        assert!(e.contains("expected a mapping with a `rules:` list"), "{e}");
        let e = err("rules:\n  - name: x\n");
        assert!(e.contains("rules[0].algorithm: missing"), "{e}");
        // A requested name with parameters could never match: refused at load.
        let e = err("rules:\n  - algorithm: reno\n    match: {requested: \"cubic:beta=0.8\"}\n");
        assert!(e.contains("rules[0].match.requested:"), "{e}");
        assert!(e.contains("write \"cubic\""), "{e}");
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let e = Rules::parse(
            "r.yaml",
            "rules:\n  - algorithm: nope\n  - algorithm: reno\n    params: {x: 1}\n",
        )
        .unwrap_err();
        assert_eq!(e.0.len(), 2, "{e}");
    }
}
