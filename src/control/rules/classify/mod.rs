//! Change classification and the storage guardrail, as pure functions over compiled files.
//!
//! - MAL: identical bytes → NO_CHANGE; no prior → NEW; otherwise compare metric-name sets and,
//!   for common metrics, their shapes. Nothing added, removed or reshaped (and the same
//!   `layerDefinitions`) → FILTER_ONLY; anything else → STRUCTURAL with the three sets.
//! - LAL: there is no FILTER_ONLY; any change is STRUCTURAL.
//! - Guardrail (`storage_impact`): MAL shape breaks, measured against the prior file *and* the
//!   schema registry; LAL keys added, removed, or with a changed `outputType`, measured against
//!   the prior file. A registered measure guards its shape only while a file that still exists
//!   answers for it ([`Holder`]): after a default-mode delete of a runtime-only file its
//!   measures are leftovers, and the next file to claim those names starts fresh, as in the
//!   reference (inactivate → delete → post the new shape is the documented way to reshape).
//!   Cross-file ownership is checked before this guardrail (see `rules::ownership`).

use std::collections::{BTreeMap, BTreeSet};

use crate::compiler::{Compiled, MetricShape};

/// What a file claims in storage: MAL metric names with shapes, or LAL keys with outputType.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claims {
    Mal(BTreeMap<String, MetricShape>),
    Lal(BTreeMap<String, Option<String>>),
}

impl Claims {
    pub fn of(compiled: &Compiled) -> Claims {
        match compiled {
            Compiled::Mal(file) => Claims::Mal(file.metrics()),
            Compiled::Lal(file) => {
                Claims::Lal(file.keys().into_iter().map(|(key, output)| (key.0, output)).collect())
            }
        }
    }

    pub fn names(&self) -> BTreeSet<String> {
        match self {
            Claims::Mal(m) => m.keys().cloned().collect(),
            Claims::Lal(m) => m.keys().cloned().collect(),
        }
    }

    pub fn is_mal(&self) -> bool {
        matches!(self, Claims::Mal(_))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    NoChange,
    New,
    FilterOnly,
    Structural,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::NoChange => "NO_CHANGE",
            ChangeKind::New => "NEW",
            ChangeKind::FilterOnly => "FILTER_ONLY",
            ChangeKind::Structural => "STRUCTURAL",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub kind: ChangeKind,
    pub added: BTreeSet<String>,
    pub removed: BTreeSet<String>,
    pub shape_break: BTreeSet<String>,
}

impl Classification {
    fn of_kind(kind: ChangeKind) -> Classification {
        Classification { kind, added: BTreeSet::new(), removed: BTreeSet::new(), shape_break: BTreeSet::new() }
    }

    /// Metrics whose alarm windows reset: `added ∪ removed ∪ shapeBreak`, STRUCTURAL only.
    pub fn alarm_reset(&self) -> BTreeSet<String> {
        if self.kind != ChangeKind::Structural {
            return BTreeSet::new();
        }
        self.added.iter().chain(&self.removed).chain(&self.shape_break).cloned().collect()
    }

    /// One line for responses and logs.
    pub fn summary(&self) -> String {
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
        format!(
            "{} added=[{}] removed=[{}] shapeBreak=[{}]",
            self.kind.as_str(),
            list(&self.added),
            list(&self.removed),
            list(&self.shape_break)
        )
    }
}

/// The file's previous content, as far as classification is concerned.
#[derive(Debug, Clone, Copy)]
pub enum Prior<'a> {
    /// No prior content (a new rule).
    None,
    /// Prior bytes exist but do not compile (tolerated: the change is STRUCTURAL).
    Unparseable { bytes: &'a [u8] },
    Compiled { bytes: &'a [u8], compiled: &'a Compiled },
}

pub fn classify(prior: Prior<'_>, new_bytes: &[u8], new: &Compiled) -> Classification {
    let new_claims = Claims::of(new);
    match prior {
        Prior::None => {
            let mut c = Classification::of_kind(ChangeKind::New);
            c.added = new_claims.names();
            c
        }
        Prior::Unparseable { bytes } if bytes == new_bytes => Classification::of_kind(ChangeKind::NoChange),
        Prior::Unparseable { .. } => {
            let mut c = Classification::of_kind(ChangeKind::Structural);
            c.added = new_claims.names();
            c
        }
        Prior::Compiled { bytes, .. } if bytes == new_bytes => Classification::of_kind(ChangeKind::NoChange),
        Prior::Compiled { compiled: old, .. } => {
            let old_claims = Claims::of(old);
            let old_names = old_claims.names();
            let new_names = new_claims.names();
            let mut c = Classification::of_kind(ChangeKind::Structural);
            c.added = new_names.difference(&old_names).cloned().collect();
            c.removed = old_names.difference(&new_names).cloned().collect();
            // LAL has no filter-only path; a catalog never changes language, but if the two
            // sides disagree the change is structural all the same.
            if let (Claims::Mal(o), Claims::Mal(n), Compiled::Mal(of), Compiled::Mal(nf)) = (&old_claims, &new_claims, old, new) {
                c.shape_break =
                    o.iter().filter(|(name, shape)| n.get(*name).is_some_and(|s| s != *shape)).map(|(k, _)| k.clone()).collect();
                let layers_same = of.layer_definitions == nf.layer_definitions;
                if c.added.is_empty() && c.removed.is_empty() && c.shape_break.is_empty() && layers_same {
                    c.kind = ChangeKind::FilterOnly;
                }
            }
            c
        }
    }
}

/// Who still answers for a measure in the schema registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// The file being written created it and still exists (an ACTIVE or INACTIVE entry, or a
    /// bundled file): a reshape is a change of that file, and needs approval.
    ThisFile,
    /// Another file that still exists created it (and no longer claims it, or the ownership
    /// check would have refused first): its data is still that file's.
    OtherFile,
    /// The file that created it is gone (a runtime-only file removed by a default-mode delete):
    /// a leftover, which the next claimer reshapes without approval.
    Nobody,
}

impl Holder {
    /// The holder of a measure whose recorded owner is (or is not) the file being written, and
    /// does (or does not) still exist.
    pub fn of(owner_is_candidate: bool, owner_exists: bool) -> Holder {
        match (owner_exists, owner_is_candidate) {
            (false, _) => Holder::Nobody,
            (true, true) => Holder::ThisFile,
            (true, false) => Holder::OtherFile,
        }
    }

    /// Whether a measure so held keeps its shape unless the operator approves a change.
    pub fn guards_shape(self) -> bool {
        self != Holder::Nobody
    }
}

/// A measure the schema registry holds for a metric name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    pub shape: MetricShape,
    pub holder: Holder,
}

/// The guardrail: keys whose change needs `allowStorageChange=true`. Empty means no approval needed.
pub fn storage_impact(
    prior: Prior<'_>,
    new: &Compiled,
    registry: impl Fn(&str) -> Option<Registered>,
) -> BTreeSet<String> {
    let new_claims = Claims::of(new);
    let mut impact = BTreeSet::new();
    match &new_claims {
        Claims::Mal(new_metrics) => {
            if let Prior::Compiled { compiled: old, .. } = prior
                && let Claims::Mal(old_metrics) = Claims::of(old)
            {
                for (name, shape) in &old_metrics {
                    if new_metrics.get(name).is_some_and(|s| s != shape) {
                        impact.insert(name.clone());
                    }
                }
            }
            for (name, shape) in new_metrics {
                if registry(name).is_some_and(|stored| stored.holder.guards_shape() && stored.shape != *shape) {
                    impact.insert(name.clone());
                }
            }
        }
        Claims::Lal(new_keys) => {
            if let Prior::Compiled { compiled: old, .. } = prior
                && let Claims::Lal(old_keys) = Claims::of(old)
            {
                for key in old_keys.keys().chain(new_keys.keys()) {
                    if old_keys.get(key) != new_keys.get(key) {
                        impact.insert(key.clone());
                    }
                }
            }
        }
    }
    impact
}

#[cfg(test)]
mod tests;
