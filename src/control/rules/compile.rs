//! Compiling a rule file for a key: the catalog picks the DSL (MAL or LAL), the pure compiler
//! does the rest. It sits below both the workflow (operator writes, replicated writes) and the
//! scan (loading stored and bundled content), so neither has to reach into the other to compile.

use crate::compiler::{CompileError, Compiled};
use crate::base::ids::RuleKey;

/// Compiles content already accepted (a stored entry, a bundled file, a prior version). Such content
/// may declare nothing (SkyWalking bundles a comment-only file). Agent catalogs never compile.
pub fn compile_for(key: &RuleKey, content: &[u8]) -> Result<Compiled, CompileError> {
    let Some(dsl) = key.catalog.dsl() else {
        return Err(not_a_rule_catalog(key));
    };
    crate::compiler::compile_bundled(dsl, content)
}

/// Compiles an operator's new content: as [`compile_for`], except that a file that declares
/// nothing (empty, comments only, a null document) is an error.
pub fn compile_new_for(key: &RuleKey, content: &[u8]) -> Result<Compiled, CompileError> {
    let Some(dsl) = key.catalog.dsl() else {
        return Err(not_a_rule_catalog(key));
    };
    crate::compiler::compile(dsl, content)
}

fn not_a_rule_catalog(key: &RuleKey) -> CompileError {
    CompileError { line: 0, column: 0, message: format!("{} is not a rule catalog", key.catalog) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, RuleName};

    fn key(catalog: Catalog) -> RuleKey {
        RuleKey::new(catalog, RuleName::parse("vm").expect("name"))
    }

    #[test]
    fn accepted_content_may_declare_nothing_but_new_content_may_not() {
        let comment_only = b"# nothing here\n";
        assert!(compile_for(&key(Catalog::OtelRules), comment_only).is_ok());
        assert!(compile_new_for(&key(Catalog::OtelRules), comment_only).is_err());
    }

    #[test]
    fn agent_catalogs_never_compile() {
        let error = compile_for(&key(Catalog::AgentGroups), b"a: b\n").expect_err("not a rule catalog");
        assert!(error.message.contains("is not a rule catalog"), "{error}");
        assert!(compile_new_for(&key(Catalog::AgentGroups), b"a: b\n").is_err());
    }
}
