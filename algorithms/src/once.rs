//! Saying something once per key. A workload starts thousands of flows with the same settings;
//! a message about those settings is worth one line, not one per flow.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The keys already said.
#[derive(Debug, Default)]
pub struct OncePerKey(Mutex<BTreeSet<String>>);

impl OncePerKey {
    /// None said yet (usable in a `static`).
    pub const fn new() -> Self {
        OncePerKey(Mutex::new(BTreeSet::new()))
    }

    /// Whether `key` comes for the first time (then it is remembered). A poisoned lock says
    /// yes: a repeated message is better than a lost one.
    pub fn first(&self, key: &str) -> bool {
        match self.0.lock() {
            Ok(mut seen) => seen.insert(key.to_string()),
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_is_first_once() {
        let once = OncePerKey::new();
        assert!(once.first("a"));
        assert!(once.first("b"));
        assert!(!once.first("a"));
        assert!(!once.first("b"));
    }
}
