//! Table tests for runtime layers. The first group ports SkyWalking's `RuntimeLayerRegistryTest`
//! case by case (each test names its upstream method); upstream mutates a registry, here the
//! registry is derived from the files, so "apply" is check-then-replace-the-file's-declarations
//! and "remove" drops the file (as delete and inactivate do).

use std::collections::BTreeMap;

use super::*;
use crate::base::ids::{Catalog, RuleName};

const RULE_A: &str = "test-a";
const RULE_B: &str = "test-b";

fn key(name: &str) -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("name"))
}

fn def(name: &str, ordinal: i64, normal: bool) -> LayerDefinition {
    LayerDefinition { name: name.to_owned(), ordinal, normal }
}

/// The files that claim layers: declarations and whether the file is bundled.
#[derive(Default)]
struct Files(BTreeMap<RuleKey, (Vec<LayerDefinition>, bool)>);

impl Files {
    fn registry(&self) -> Registry {
        Registry::of(self.0.iter().map(|(key, (layers, bundled))| FileLayers { key, layers, bundled: *bundled }))
    }

    /// What `/addOrUpdate` does: check against the registry, then the file claims its layers.
    fn apply(&mut self, rule: &str, layers: &[LayerDefinition]) -> Result<LayerChanges, LayerError> {
        let before = self.registry();
        check_declarations(&key(rule), layers, false, &before)?;
        self.0.insert(key(rule), (layers.to_vec(), false));
        Ok(before.changes(&self.registry()))
    }

    /// A bundled file loaded at boot: not checked (a boot-time declaration).
    fn bundled(&mut self, rule: &str, layers: &[LayerDefinition]) {
        self.0.insert(key(rule), (layers.to_vec(), true));
    }

    /// Delete or inactivate: the file claims nothing any more.
    fn remove(&mut self, rule: &str) {
        self.0.remove(&key(rule));
    }

    fn layer(&self, name: &str) -> Option<(i64, bool)> {
        self.registry().get(name).map(|l| (l.ordinal, l.normal))
    }

    fn claims_of(&self, rule: &str) -> Vec<String> {
        let registry = self.registry();
        registry.layers().into_iter().filter(|l| l.declared_by.contains(&key(rule))).map(|l| l.name.clone()).collect()
    }
}

fn names(list: &[&str]) -> std::collections::BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

// ---- RuntimeLayerRegistryTest ----

#[test]
fn apply_registers_new_layer_and_counts_claim() {
    // applyRegistersNewLayerAndCountsClaim
    let mut files = Files::default();
    let changes = files.apply(RULE_A, &[def("DYN_REGISTRY_A", 200_000, true)]).expect("applies");
    assert_eq!(changes.registered, names(&["DYN_REGISTRY_A"]));
    assert_eq!(files.claims_of(RULE_A), vec!["DYN_REGISTRY_A"]);
    assert_eq!(files.layer("DYN_REGISTRY_A"), Some((200_000, true)));
}

#[test]
fn second_claim_on_same_layer_is_idempotent() {
    // secondClaimOnSameLayerIsIdempotent
    let mut files = Files::default();
    let claim = def("DYN_REGISTRY_SHARED", 200_001, true);
    let first = files.apply(RULE_A, std::slice::from_ref(&claim)).expect("first");
    let second = files.apply(RULE_B, std::slice::from_ref(&claim)).expect("second");
    assert_eq!(first.registered, names(&["DYN_REGISTRY_SHARED"]));
    assert!(second.registered.is_empty() && second.unregistered.is_empty());
    assert_eq!(files.registry().get("DYN_REGISTRY_SHARED").map(|l| l.declared_by.len()), Some(2));
}

#[test]
fn unregister_drops_layer_when_last_claim_gone() {
    // unregisterDropsLayerWhenLastClaimGone
    let mut files = Files::default();
    let claim = def("DYN_REGISTRY_DROP", 200_002, true);
    files.apply(RULE_A, std::slice::from_ref(&claim)).expect("a");
    files.apply(RULE_B, std::slice::from_ref(&claim)).expect("b");
    files.remove(RULE_A);
    assert_eq!(files.layer("DYN_REGISTRY_DROP"), Some((200_002, true)), "B still claims it");
    files.remove(RULE_B);
    assert_eq!(files.layer("DYN_REGISTRY_DROP"), None, "the last claim is gone");
}

#[test]
fn update_replaces_prior_claims_and_unregisters_orphans() {
    // updateReplacesPriorClaimsAndUnregistersOrphans
    let mut files = Files::default();
    files.apply(RULE_A, &[def("DYN_REGISTRY_ORPHAN", 200_003, true)]).expect("original");
    let changes = files.apply(RULE_A, &[def("DYN_REGISTRY_KEEP", 200_004, true)]).expect("replacement");
    assert_eq!(changes, LayerChanges { registered: names(&["DYN_REGISTRY_KEEP"]), unregistered: names(&["DYN_REGISTRY_ORPHAN"]) });
    assert_eq!(files.layer("DYN_REGISTRY_ORPHAN"), None);
    assert_eq!(files.layer("DYN_REGISTRY_KEEP"), Some((200_004, true)));
    assert_eq!(files.claims_of(RULE_A), vec!["DYN_REGISTRY_KEEP"]);
}

#[test]
fn rollback_restores_prior_state_after_applied_update() {
    // rollbackRestoresPriorStateAfterAppliedUpdate: the registry is derived, so restoring the
    // file's prior declarations (a failed apply never changes the claims) restores it exactly.
    let mut files = Files::default();
    let original = [def("DYN_REGISTRY_ROLLBACK_PRIOR", 200_005, true)];
    files.apply(RULE_A, &original).expect("original");
    let prior = files.registry();
    files.apply(RULE_A, &[def("DYN_REGISTRY_ROLLBACK_NEW", 200_006, true)]).expect("replacement");
    assert_eq!(files.layer("DYN_REGISTRY_ROLLBACK_PRIOR"), None);
    assert_eq!(files.layer("DYN_REGISTRY_ROLLBACK_NEW"), Some((200_006, true)));
    files.apply(RULE_A, &original).expect("rollback");
    assert_eq!(files.registry(), prior);
    assert_eq!(files.claims_of(RULE_A), vec!["DYN_REGISTRY_ROLLBACK_PRIOR"]);
}

#[test]
fn self_update_with_different_ordinal_is_permitted() {
    // selfUpdateWithDifferentOrdinalIsPermitted
    let mut files = Files::default();
    files.apply(RULE_A, &[def("DYN_REGISTRY_SELF_EDIT", 200_007, true)]).expect("before");
    files.apply(RULE_A, &[def("DYN_REGISTRY_SELF_EDIT", 200_008, false)]).expect("after");
    assert_eq!(files.layer("DYN_REGISTRY_SELF_EDIT"), Some((200_008, false)));
}

#[test]
fn conflict_across_rules_raises_layer_name_conflict() {
    // conflictAcrossRulesRaisesLayerNameConflict
    let mut files = Files::default();
    files.apply(RULE_A, &[def("DYN_REGISTRY_CROSS_RULE", 200_009, true)]).expect("a");
    let err = files.apply(RULE_B, &[def("DYN_REGISTRY_CROSS_RULE", 200_010, true)]).expect_err("b conflicts");
    assert_eq!(err.apply_status(), ApplyStatus::LayerNameConflict);
    assert_eq!(err.apply_status().as_str(), "layer_name_conflict");
    let message = err.to_string();
    assert!(message.contains("DYN_REGISTRY_CROSS_RULE"), "{message}");
    assert!(message.contains("otel-rules/test-a"), "names the source rule: {message}");
    assert!(message.contains("otel-rules/test-b"), "names the offender: {message}");
}

#[test]
fn conflict_raises_ordinal_collision_for_different_name_same_ordinal() {
    // conflictRaisesOrdinalCollisionForDifferentNameSameOrdinal
    let mut files = Files::default();
    files.apply(RULE_A, &[def("DYN_REGISTRY_ORD_A", 200_011, true)]).expect("a");
    let err = files.apply(RULE_B, &[def("DYN_REGISTRY_ORD_B", 200_011, true)]).expect_err("collision");
    assert_eq!(err.apply_status().as_str(), "layer_ordinal_collision");
    assert!(err.to_string().contains("200011") && err.to_string().contains("DYN_REGISTRY_ORD_A"), "{err}");
}

#[test]
fn conflict_raises_ordinal_out_of_range_below_floor() {
    // conflictRaisesOrdinalOutOfRangeBelowFloor
    let err = Files::default().apply(RULE_A, &[def("DYN_REGISTRY_LOW", 99_999, true)]).expect_err("below");
    assert_eq!(err.apply_status(), ApplyStatus::LayerOrdinalOutOfRange);
    assert!(err.to_string().contains("99999") && err.to_string().contains("100000"), "{err}");
}

#[test]
fn conflict_raises_name_invalid_for_bad_shape() {
    // conflictRaisesNameInvalidForBadShape
    let err = Files::default().apply(RULE_A, &[def("bad-name", 200_012, true)]).expect_err("bad name");
    assert_eq!(err.apply_status(), ApplyStatus::LayerNameInvalid);
    assert!(err.to_string().contains("bad-name"), "{err}");
}

#[test]
fn conflict_against_bundled_layer_labels_source_clearly() {
    // conflictAgainstBundledLayerLabelsSourceClearly: MESH is the built-in layer with ordinal 1.
    let err = Files::default().apply(RULE_A, &[def("MESH", 200_013, true)]).expect_err("built-in");
    assert_eq!(err.apply_status(), ApplyStatus::LayerNameConflict);
    let message = err.to_string();
    assert!(message.contains("MESH") && message.contains("built-in") && message.contains("ordinal=1"), "{message}");
}

#[test]
fn in_batch_duplicate_name_with_different_triples_is_rejected() {
    // inBatchDuplicateNameWithDifferentTriplesIsRejected
    let mut files = Files::default();
    let err = files
        .apply(RULE_A, &[def("DYN_BATCH_DUP_NAME", 200_020, true), def("DYN_BATCH_DUP_NAME", 200_021, true)])
        .expect_err("twice");
    assert_eq!(err.apply_status(), ApplyStatus::LayerNameConflict);
    assert_eq!(files.layer("DYN_BATCH_DUP_NAME"), None);
    assert!(files.claims_of(RULE_A).is_empty());
}

#[test]
fn in_batch_duplicate_ordinal_under_different_names_is_rejected() {
    // inBatchDuplicateOrdinalUnderDifferentNamesIsRejected
    let mut files = Files::default();
    let err = files
        .apply(RULE_A, &[def("DYN_BATCH_ORD_X", 200_022, true), def("DYN_BATCH_ORD_Y", 200_022, true)])
        .expect_err("one ordinal, two names");
    assert_eq!(err.apply_status(), ApplyStatus::LayerOrdinalCollision);
    assert_eq!((files.layer("DYN_BATCH_ORD_X"), files.layer("DYN_BATCH_ORD_Y")), (None, None));
}

#[test]
fn in_batch_same_triple_repeated_is_accepted() {
    // inBatchSameTripleRepeatedIsAccepted
    let mut files = Files::default();
    let twice = [def("DYN_BATCH_IDEMPOTENT", 200_023, true), def("DYN_BATCH_IDEMPOTENT", 200_023, true)];
    files.apply(RULE_A, &twice).expect("a harmless repeat");
    assert_eq!(files.layer("DYN_BATCH_IDEMPOTENT"), Some((200_023, true)));
    assert!(files.registry().shadowed.is_empty());
}

#[test]
fn self_update_swapping_ordinals_across_two_layers_is_atomic() {
    // selfUpdateSwappingOrdinalsAcrossTwoLayersIsAtomic
    let mut files = Files::default();
    files.apply(RULE_A, &[def("DYN_SWAP_X", 200_030, true), def("DYN_SWAP_Y", 200_031, true)]).expect("before");
    files.apply(RULE_A, &[def("DYN_SWAP_X", 200_031, true), def("DYN_SWAP_Y", 200_030, true)]).expect("swap");
    assert_eq!((files.layer("DYN_SWAP_X"), files.layer("DYN_SWAP_Y")), (Some((200_031, true)), Some((200_030, true))));
}

#[test]
fn soft_claim_against_bundled_layer_succeeds_but_cannot_remove() {
    // softClaimAgainstBundledLayerSucceedsButCannotRemove: a bundled file declares the layer;
    // a runtime file declaring the same triple shares it, and removing it keeps the layer.
    let mut files = Files::default();
    files.bundled("boot", &[def("DYN_REG_SOFT_CLAIM_TARGET", 250_010, true)]);
    files.apply(RULE_A, &[def("DYN_REG_SOFT_CLAIM_TARGET", 250_010, true)]).expect("soft claim");
    let layer = files.registry().get("DYN_REG_SOFT_CLAIM_TARGET").cloned().expect("registered");
    assert!(layer.declared_by.contains(&key(RULE_A)) && layer.bundled, "{layer:?}");
    files.remove(RULE_A);
    assert_eq!(files.layer("DYN_REG_SOFT_CLAIM_TARGET"), Some((250_010, true)), "the bundled file keeps it");
    assert!(files.claims_of(RULE_A).is_empty());
    // A bundled layer is immovable: another triple is a conflict even for a former claimant.
    files.apply(RULE_A, &[def("DYN_REG_SOFT_CLAIM_TARGET", 250_010, true)]).expect("claim again");
    let err = files.apply(RULE_A, &[def("DYN_REG_SOFT_CLAIM_TARGET", 250_011, true)]).expect_err("bundled");
    assert!(err.to_string().contains("file(s) otel-rules/boot"), "{err}");
}

#[test]
fn self_update_reusing_multi_claimant_ordinal_is_rejected_structured() {
    // selfUpdateReusingMultiClaimantOrdinalIsRejectedStructured
    let mut files = Files::default();
    let shared = def("DYN_MULTI_CLAIM_OLD", 200_090, true);
    files.apply(RULE_A, std::slice::from_ref(&shared)).expect("a");
    files.apply(RULE_B, std::slice::from_ref(&shared)).expect("b");
    let err = files.apply(RULE_A, &[def("DYN_MULTI_CLAIM_NEW", 200_090, true)]).expect_err("b still holds the ordinal");
    assert_eq!(err.apply_status(), ApplyStatus::LayerOrdinalCollision);
    assert!(err.to_string().contains("otel-rules/test-b"), "names the rule still holding it: {err}");
    assert_eq!((files.layer("DYN_MULTI_CLAIM_NEW"), files.layer("DYN_MULTI_CLAIM_OLD")), (None, Some((200_090, true))));
}

#[test]
fn reactivation_after_inactive_surfaces_conflict_against_new_claimant() {
    // reactivationAfterInactiveSurfacesConflictAgainstNewClaimant
    let mut files = Files::default();
    files.apply(RULE_A, &[def("DYN_REACTIVATE_PROBE", 200_080, true)]).expect("a");
    files.remove(RULE_A); // inactivated: an INACTIVE file claims nothing
    assert_eq!(files.layer("DYN_REACTIVATE_PROBE"), None);
    files.apply(RULE_B, &[def("DYN_REACTIVATE_PROBE", 200_081, true)]).expect("b takes the name");
    let err = files.apply(RULE_A, &[def("DYN_REACTIVATE_PROBE", 200_080, true)]).expect_err("a comes back");
    assert_eq!(err.apply_status(), ApplyStatus::LayerNameConflict);
    assert!(err.to_string().contains("otel-rules/test-b"), "names the current claimant: {err}");
}

#[test]
fn no_op_redeclare_does_not_perturb_live_layer() {
    // noOpRedeclareDoesNotPerturbLiveLayer
    let mut files = Files::default();
    files.apply(RULE_A, &[def("DYN_STABLE_REAPPLY", 200_040, true)]).expect("first");
    let before = files.registry();
    let changes = files.apply(RULE_A, &[def("DYN_STABLE_REAPPLY", 200_040, true)]).expect("again");
    assert_eq!(changes, LayerChanges::default());
    assert_eq!(files.registry(), before);
}

// ---- hotrule's own cases ----

#[test]
fn a_self_edit_of_a_shared_layer_is_a_name_conflict() {
    // Upstream's checker: a triple change by one of several claimants.
    let mut files = Files::default();
    let shared = def("DYN_SHARED_EDIT", 200_100, true);
    files.apply(RULE_A, std::slice::from_ref(&shared)).expect("a");
    files.apply(RULE_B, std::slice::from_ref(&shared)).expect("b");
    let err = files.apply(RULE_A, &[def("DYN_SHARED_EDIT", 200_101, true)]).expect_err("shared");
    assert_eq!(err.apply_status(), ApplyStatus::LayerNameConflict);
    assert!(err.to_string().contains("also claimed by otel-rules/test-b"), "{err}");
}

#[test]
fn an_override_of_a_bundled_file_may_not_declare_layers() {
    let registry = Registry::default();
    let err = check_declarations(&key("vm"), &[def("MY_LAYER", 100_000, true)], true, &registry).expect_err("override");
    assert_eq!(err.apply_status(), ApplyStatus::LayerOverrideForbidden);
    assert!(err.to_string().contains("MY_LAYER"), "{err}");
    // Without declarations an override is fine.
    assert!(check_declarations(&key("vm"), &[], true, &registry).is_ok());
}

#[test]
fn ordinal_range_is_100000_to_java_int_max_and_a_missing_ordinal_is_zero() {
    let registry = Registry::default();
    let check = |ordinal| check_declarations(&key("r"), &[def("MY_LAYER", ordinal, true)], false, &registry);
    for (ordinal, ok) in [(0, false), (1, false), (99_999, false), (-100_000, false), (100_000, true), (2_147_483_647, true), (2_147_483_648, false)] {
        assert_eq!(check(ordinal).is_ok(), ok, "ordinal {ordinal}");
        if !ok {
            assert_eq!(check(ordinal).expect_err("range").apply_status(), ApplyStatus::LayerOrdinalOutOfRange);
        }
    }
}

#[test]
fn layer_name_shapes() {
    for (name, ok) in [
        ("A", true),
        ("MY_LAYER", true),
        ("L7_PROXY_2", true),
        ("A_", true),
        ("", false),
        ("my_layer", false),
        ("My_Layer", false),
        ("_LAYER", false),
        ("1LAYER", false),
        ("MY-LAYER", false),
        ("MY LAYER", false),
        ("ÄLAYER", false),
    ] {
        assert_eq!(valid_name(name), ok, "{name:?}");
    }
}

#[test]
fn the_name_is_checked_before_the_ordinal_and_the_ordinal_before_clashes() {
    let registry = Registry::default();
    let status = |d: LayerDefinition| check_declarations(&key("r"), &[d], false, &registry).expect_err("rejected").apply_status();
    assert_eq!(status(def("bad", 5, true)), ApplyStatus::LayerNameInvalid);
    assert_eq!(status(def("MESH", 1, true)), ApplyStatus::LayerOrdinalOutOfRange, "built-in ordinals are below the range");
    assert_eq!(status(def("MESH", 100_001, true)), ApplyStatus::LayerNameConflict);
    // The first bad declaration of a file decides.
    let both = [def("OK_LAYER", 100_002, true), def("GENERAL", 100_003, true), def("bad", 1, true)];
    let err = check_declarations(&key("r"), &both, false, &registry).expect_err("rejected");
    assert!(matches!(err, LayerError::BuiltInName { ref name, .. } if name == "GENERAL"), "{err:?}");
}

#[test]
fn every_layer_error_answers_its_400_code() {
    let k = key("r");
    let cases = [
        (LayerError::OverrideForbidden { file: k.clone(), names: "X".into() }, "layer_override_forbidden"),
        (LayerError::NameInvalid { file: k.clone(), name: "x".into() }, "layer_name_invalid"),
        (LayerError::OrdinalOutOfRange { file: k.clone(), name: "X".into(), ordinal: 1 }, "layer_ordinal_out_of_range"),
        (
            LayerError::DuplicateName { file: k.clone(), name: "X".into(), first_ordinal: 1, first_normal: true, ordinal: 2, normal: true },
            "layer_name_conflict",
        ),
        (
            LayerError::BuiltInName { file: k.clone(), name: "MESH".into(), builtin_ordinal: 1, builtin_normal: true, ordinal: 2, normal: true },
            "layer_name_conflict",
        ),
        (
            LayerError::NameRegistered {
                file: k.clone(),
                name: "X".into(),
                holders: "h".into(),
                held_ordinal: 1,
                held_normal: true,
                ordinal: 2,
                normal: true,
            },
            "layer_name_conflict",
        ),
        (
            LayerError::NameShared { file: k.clone(), name: "X".into(), others: "o".into(), held_ordinal: 1, held_normal: true, ordinal: 2, normal: true },
            "layer_name_conflict",
        ),
        (LayerError::DuplicateOrdinal { file: k.clone(), ordinal: 1, first: "X".into(), second: "Y".into() }, "layer_ordinal_collision"),
        (
            LayerError::OrdinalRegistered { file: k.clone(), name: "X".into(), ordinal: 1, holder_layer: "Y".into(), holders: "h".into() },
            "layer_ordinal_collision",
        ),
        (
            LayerError::OrdinalShared { file: k.clone(), name: "X".into(), ordinal: 1, holder_layer: "Y".into(), others: "o".into() },
            "layer_ordinal_collision",
        ),
    ];
    for (error, code) in cases {
        assert_eq!(error.apply_status().as_str(), code, "{error:?}");
    }
}

#[test]
fn the_registry_shadows_declarations_that_contradict_an_earlier_one_or_a_built_in() {
    // Only storage written behind the workflow's back can hold these; the registry stays sane.
    let mut files = Files::default();
    files.bundled("a", &[def("X", 200_000, true), def("MESH", 200_001, true), def("Y", 1, true)]);
    files.bundled("b", &[def("X", 200_002, true), def("Z", 200_000, true)]);
    let registry = files.registry();
    assert_eq!(registry.layers().iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), vec!["X"]);
    let shadowed: Vec<&str> = registry.shadowed.iter().map(|(_, d)| d.name.as_str()).collect();
    assert_eq!(shadowed, vec!["MESH", "Y", "X", "Z"]);
}

#[test]
fn the_registry_lists_layers_in_ordinal_order_with_their_claimants() {
    let mut files = Files::default();
    files.apply(RULE_B, &[def("LATER", 300_000, false), def("EARLIER", 100_000, true)]).expect("b");
    files.apply(RULE_A, &[def("LATER", 300_000, false)]).expect("a");
    let registry = files.registry();
    let listed: Vec<(&str, i64, usize)> = registry.layers().iter().map(|l| (l.name.as_str(), l.ordinal, l.declared_by.len())).collect();
    assert_eq!(listed, vec![("EARLIER", 100_000, 1), ("LATER", 300_000, 2)]);
    assert_eq!(registry.by_ordinal(300_000).map(|l| l.name.as_str()), Some("LATER"));
    assert!(!registry.is_empty() && Registry::default().is_empty());
}

#[test]
fn uses_must_be_built_in_declared_here_or_registered_by_another_file() {
    let mut files = Files::default();
    files.apply(RULE_B, &[def("FROM_B", 100_010, true)]).expect("b");
    files.apply(RULE_A, &[def("FROM_A", 100_011, true)]).expect("a");
    let registry = files.registry();
    let used = |name: &str| LayerRef { name: name.to_owned(), line: 3, column: 9 };
    let own = [def("MINE", 100_012, true)];
    let check = |name: &str| check_uses(&key(RULE_A), &[used(name)], &own, &registry);
    assert!(check("GENERAL").is_ok(), "built-in");
    assert!(check("UNDEFINED").is_ok(), "built-in");
    assert!(check("MINE").is_ok(), "declared by the file itself");
    assert!(check("FROM_B").is_ok(), "registered by another file");
    let err = check("FROM_A").expect_err("only this file's prior version declared it, and the new one does not");
    assert_eq!(err.name, "FROM_A");
    let err = check("NOWHERE").expect_err("unknown");
    assert_eq!(
        err.to_string(),
        "line 3, column 9: unknown layer 'NOWHERE': it is not a built-in layer, not declared in this file's layerDefinitions and not registered by another active file"
    );
    assert!(check_uses(&key(RULE_A), &[], &[], &Registry::default()).is_ok());
}

#[test]
fn change_notes_name_what_registered_and_unregistered() {
    let set = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
    assert_eq!(LayerChanges::default().note(), "");
    assert_eq!(LayerChanges { registered: set(&["A", "B"]), unregistered: set(&[]) }.note(), "; layers registered [A,B]");
    assert_eq!(LayerChanges { registered: set(&[]), unregistered: set(&["C"]) }.note(), "; layers unregistered [C]");
    assert_eq!(
        LayerChanges { registered: set(&["A"]), unregistered: set(&["C"]) }.note(),
        "; layers registered [A] unregistered [C]"
    );
}
