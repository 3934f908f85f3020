//! Cross-file ownership of metric names (MAL) and rule keys (LAL).
//!
//! Every file that has content, whether an ACTIVE or INACTIVE entry or a bundled file with
//! no entry, owns the names its content claims. INACTIVE entries keep their names so that
//! `/inactivate` stays reversible. A file may not claim a name another file owns, except for
//! **bundled twins**. Two MAL files are twins when they have the same rule name in two
//! different MAL catalogs and both ship as bundled files (for example `otel-rules/vm` and
//! `telegraf-rules/vm`, which feed the same `meter_vm_*` metrics from two sources). Twins may
//! co-own a metric name when their shapes for it are identical. This holds whether either
//! twin currently runs its bundled content or a runtime override.

use crate::compiler::{Compiled, LayerDefinition};
use crate::base::ids::RuleKey;
use crate::control::rules::classify::Claims;

/// What one other file holds, as the ownership check needs it.
#[derive(Debug, Clone)]
pub struct FileClaims {
    pub claims: Claims,
    pub inactive: bool,
    pub bundled: bool,
    /// The file's `layerDefinitions` (claimed only while the file is not INACTIVE).
    pub layers: Vec<LayerDefinition>,
}

impl FileClaims {
    /// What `compiled` claims, for a file that is INACTIVE or not and has a bundled twin or not.
    pub fn of(compiled: &Compiled, inactive: bool, bundled: bool) -> FileClaims {
        let layers = match compiled {
            Compiled::Mal(file) => file.layer_definitions.clone(),
            Compiled::Lal(file) => file.layer_definitions.clone(),
        };
        FileClaims { claims: Claims::of(compiled), inactive, bundled, layers }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} is held by {}{holder}{detail}", if *.holder_inactive { "inactive " } else { "" })]
pub struct Conflict {
    pub name: String,
    pub holder: RuleKey,
    pub holder_inactive: bool,
    /// Extra explanation, e.g. twin shapes that differ.
    pub detail: String,
}

/// Checks `candidate`'s claims against every other file. `others` may include the candidate
/// itself; it is skipped.
pub fn check<'a>(
    candidate: &RuleKey,
    candidate_claims: &Claims,
    candidate_bundled: bool,
    others: impl IntoIterator<Item = (&'a RuleKey, &'a FileClaims)>,
) -> Result<(), Conflict> {
    for (holder, held) in others {
        if holder == candidate {
            continue;
        }
        match (candidate_claims, &held.claims) {
            (Claims::Mal(mine), Claims::Mal(theirs)) => {
                let twins = candidate_bundled
                    && held.bundled
                    && holder.name == candidate.name
                    && holder.catalog != candidate.catalog;
                for (name, shape) in mine {
                    let Some(their_shape) = theirs.get(name) else { continue };
                    if twins && their_shape == shape {
                        continue;
                    }
                    let detail = if twins {
                        format!(" (bundled twin with a different shape: {their_shape} vs {shape})")
                    } else {
                        String::new()
                    };
                    return Err(Conflict {
                        name: name.clone(),
                        holder: holder.clone(),
                        holder_inactive: held.inactive,
                        detail,
                    });
                }
            }
            (Claims::Lal(mine), Claims::Lal(theirs)) => {
                if let Some(name) = mine.keys().find(|k| theirs.contains_key(*k)) {
                    return Err(Conflict {
                        name: name.clone(),
                        holder: holder.clone(),
                        holder_inactive: held.inactive,
                        detail: String::new(),
                    });
                }
            }
            // MAL metric names and LAL keys live in different namespaces.
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::{DataType, Downsampling, MetricShape, ScopeType};
    use crate::base::ids::{Catalog, RuleName};
    use std::collections::BTreeMap;

    fn key(c: Catalog, n: &str) -> RuleKey {
        RuleKey::new(c, RuleName::parse(n).expect("name"))
    }
    fn shape(scope: ScopeType) -> MetricShape {
        MetricShape { scope, downsampling: Downsampling::Avg, data_type: DataType::Single }
    }
    fn mal(names: &[(&str, ScopeType)]) -> Claims {
        Claims::Mal(names.iter().map(|(n, s)| (n.to_string(), shape(*s))).collect())
    }
    fn held(claims: Claims, inactive: bool, bundled: bool) -> FileClaims {
        FileClaims { claims, inactive, bundled, layers: Vec::new() }
    }

    #[test]
    fn a_name_held_by_another_file_conflicts_and_says_so() {
        let other = key(Catalog::OtelRules, "a");
        let files = BTreeMap::from([(other.clone(), held(mal(&[("m", ScopeType::Service)]), false, false))]);
        let err = check(&key(Catalog::OtelRules, "b"), &mal(&[("m", ScopeType::Service)]), false, &files)
            .expect_err("conflict");
        assert_eq!(err.to_string(), "m is held by otel-rules/a");
    }

    #[test]
    fn inactive_entries_still_hold_their_names() {
        let other = key(Catalog::OtelRules, "a");
        let files = BTreeMap::from([(other, held(mal(&[("m", ScopeType::Service)]), true, false))]);
        let err = check(&key(Catalog::LogMalRules, "b"), &mal(&[("m", ScopeType::Service)]), false, &files)
            .expect_err("conflict");
        assert!(err.to_string().contains("held by inactive otel-rules/a"), "{err}");
    }

    #[test]
    fn bundled_twins_share_names_with_identical_shapes_only() {
        let otel = key(Catalog::OtelRules, "vm");
        let telegraf = key(Catalog::TelegrafRules, "vm");
        let files = BTreeMap::from([(otel.clone(), held(mal(&[("meter_vm_x", ScopeType::Service)]), false, true))]);
        assert!(check(&telegraf, &mal(&[("meter_vm_x", ScopeType::Service)]), true, &files).is_ok());
        let err = check(&telegraf, &mal(&[("meter_vm_x", ScopeType::Endpoint)]), true, &files).expect_err("shape");
        assert!(err.detail.contains("bundled twin"), "{err}");
        // Not twins: the candidate is not a bundled file.
        assert!(check(&telegraf, &mal(&[("meter_vm_x", ScopeType::Service)]), false, &files).is_err());
        // Not twins: a different rule name.
        let other = key(Catalog::TelegrafRules, "vm2");
        assert!(check(&other, &mal(&[("meter_vm_x", ScopeType::Service)]), true, &files).is_err());
    }

    #[test]
    fn lal_keys_conflict_across_files_and_namespaces_are_separate() {
        let a = key(Catalog::Lal, "a");
        let lal = |k: &str| Claims::Lal(BTreeMap::from([(k.to_string(), None)]));
        let files = BTreeMap::from([(a.clone(), held(lal("GENERAL:default"), false, true))]);
        assert!(check(&key(Catalog::Lal, "b"), &lal("GENERAL:default"), false, &files).is_err());
        assert!(check(&key(Catalog::Lal, "b"), &lal("GENERAL:other"), false, &files).is_ok());
        // A MAL metric that happens to be spelled like a LAL key is no conflict.
        assert!(check(&key(Catalog::OtelRules, "c"), &mal(&[("GENERAL:default", ScopeType::Service)]), false, &files).is_ok());
        // A file never conflicts with itself.
        assert!(check(&a, &lal("GENERAL:default"), true, &files).is_ok());
    }
}
