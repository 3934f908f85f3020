//! A replicated write's compiled content, handed to the scan that loads it.
//!
//! A peer compiles a replicated entry when it applies it (its metric claims come from the
//! compiled file), and its scan then loads the same content into the runtime. Without the
//! handoff the scan compiled it a second time: under a stream of writes, the larger part of a
//! peer's work per write. One compiled file per key is kept, the newest put; a take that names
//! other content (a newer write came in between) finds nothing and compiles as before.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::compiler::Compiled;
use crate::base::ids::{ContentHash, RuleKey};

/// At most this many files wait for their scan; past it the oldest handoffs are dropped (the
/// scan then compiles those files itself).
pub const MAX_HANDOFFS: usize = 256;

#[derive(Default)]
pub struct CompiledHandoff {
    waiting: Mutex<HashMap<RuleKey, (ContentHash, Compiled)>>,
}

impl CompiledHandoff {
    /// Keeps `compiled` (the compilation of content hashing to `hash`) for the next load of `key`.
    pub fn put(&self, key: &RuleKey, hash: &ContentHash, compiled: Compiled) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if waiting.len() >= MAX_HANDOFFS && !waiting.contains_key(key) {
            waiting.clear();
        }
        waiting.insert(key.clone(), (hash.clone(), compiled));
    }

    /// The compiled content of `key` if it was handed off for exactly the content `hash`.
    pub fn take(&self, key: &RuleKey, hash: &ContentHash) -> Option<Compiled> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        match waiting.remove(key) {
            Some((held, compiled)) if held == *hash => Some(compiled),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, RuleName};

    fn key(name: &str) -> RuleKey {
        RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("name"))
    }

    fn compiled(content: &str) -> Compiled {
        crate::compiler::compile_bundled(crate::compiler::DslKind::Mal, content.as_bytes()).expect("compiles")
    }

    const FILE: &str = "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: m\nmetricsRules:\n  - name: a\n    exp: x.sum(['svc'])\n";

    #[test]
    fn a_handoff_is_taken_once_and_only_for_its_content() {
        let handoff = CompiledHandoff::default();
        let (a, hash) = (key("a"), ContentHash::of(FILE.as_bytes()));
        handoff.put(&a, &hash, compiled(FILE));
        assert!(handoff.take(&a, &ContentHash::of(b"other")).is_none(), "other content: compile it");
        assert!(handoff.is_empty(), "a mismatched take drops the stale handoff");
        handoff.put(&a, &hash, compiled(FILE));
        assert!(handoff.take(&a, &hash).is_some());
        assert!(handoff.take(&a, &hash).is_none(), "taken once");
    }

    #[test]
    fn handoffs_are_bounded() {
        let handoff = CompiledHandoff::default();
        let hash = ContentHash::of(FILE.as_bytes());
        for n in 0..MAX_HANDOFFS + 10 {
            handoff.put(&key(&format!("f{n}")), &hash, compiled(FILE));
            assert!(handoff.len() <= MAX_HANDOFFS);
        }
    }
}
