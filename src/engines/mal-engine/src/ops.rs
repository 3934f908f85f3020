//! Sample-family operations as SkyWalking's `SampleFamily` runs them: tag and value filters,
//! arithmetic between families and with numbers, aggregation by labels, and `histogram()`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::EvalError;
use crate::regex_cache::{Mode, RegexCache};
use crate::sample::{Family, Labels, Sample};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TagOp {
    Equal,
    NotEqual,
    Match,
    NotMatch,
}

/// `tagEqual/tagNotEqual/tagMatch/tagNotMatch(k1, v1, ...)`: pairs AND-ed, a missing label is `""`.
pub(crate) fn tag_filter(
    family: &Family,
    op: TagOp,
    pairs: &[(String, String)],
    regexes: &mut RegexCache,
    line: usize,
) -> Result<Family, EvalError> {
    let mut kept = Vec::new();
    for sample in family.samples() {
        let mut all = true;
        for (key, expected) in pairs {
            let actual = sample.label(key);
            let ok = match op {
                TagOp::Equal => string_comp(actual, expected),
                TagOp::NotEqual => !string_comp(actual, expected),
                TagOp::Match => regexes.get(expected, Mode::Whole, line)?.is_match(actual),
                TagOp::NotMatch => !regexes.get(expected, Mode::Whole, line)?.is_match(actual),
            };
            if !ok {
                all = false;
                break;
            }
        }
        if all {
            kept.push(sample.clone());
        }
    }
    Ok(Family::build(kept))
}

/// Upstream's `InternalOps.stringComp`: both empty are equal; an empty sample value never equals a
/// non-empty expectation.
fn string_comp(actual: &str, expected: &str) -> bool {
    if actual.is_empty() && expected.is_empty() {
        return true;
    }
    !actual.is_empty() && actual == expected
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueOp {
    Equal,
    NotEqual,
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
}

/// `valueEqual(n)` and friends, with Java's `Double.compare` (`-0.0 < 0.0`).
pub(crate) fn value_filter(family: &Family, op: ValueOp, operand: f64) -> Family {
    Family::build(
        family
            .samples()
            .iter()
            .filter(|sample| {
                let ordering = sample.value.total_cmp(&operand);
                match op {
                    ValueOp::Equal => ordering.is_eq(),
                    ValueOp::NotEqual => ordering.is_ne(),
                    ValueOp::Greater => ordering.is_gt(),
                    ValueOp::GreaterEqual => ordering.is_ge(),
                    ValueOp::Less => ordering.is_lt(),
                    ValueOp::LessEqual => ordering.is_le(),
                }
            })
            .cloned()
            .collect(),
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    SafeDiv,
}

impl Arith {
    pub(crate) fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
            Arith::Div => a / b,
            Arith::SafeDiv => {
                if b == 0.0 {
                    0.0
                } else {
                    a / b
                }
            }
        }
    }
}

/// `F op n`.
pub(crate) fn with_number(family: &Family, op: Arith, number: f64) -> Family {
    if op == Arith::SafeDiv && number == 0.0 {
        return family.map_values(|_| 0.0);
    }
    family.map_values(|v| op.apply(v, number))
}

/// `n op F`: `n − F = −(F − n)`, `n / F` per sample, `+` and `*` commute.
pub(crate) fn number_with(number: f64, op: Arith, family: &Family) -> Family {
    match op {
        Arith::Add | Arith::Mul => with_number(family, op, number),
        Arith::Sub => family.map_values(|v| -(v - number)),
        Arith::Div | Arith::SafeDiv => family.map_values(|v| op.apply(number, v)),
    }
}

/// `F op G`: each left sample takes the first right sample with exactly equal labels; unmatched
/// samples on either side are dropped. EMPTY is asymmetric (reference §1.5).
pub(crate) fn between(left: &Family, op: Arith, right: &Family) -> Family {
    match (left.is_empty(), right.is_empty(), op) {
        (true, true, _) => Family::empty(),
        (true, false, Arith::Add) => right.clone(),
        (true, false, Arith::Sub) => right.map_values(|v| -v),
        (true, false, _) => Family::empty(),
        (false, true, Arith::Add | Arith::Sub) => left.clone(),
        (false, true, Arith::Div) => with_number(left, Arith::Div, 0.0),
        (false, true, _) => Family::empty(),
        (false, false, _) => {
            let mut index: HashMap<&Labels, f64> = HashMap::with_capacity(right.samples().len());
            for sample in right.samples() {
                index.entry(&sample.labels).or_insert(sample.value);
            }
            Family::build(
                left.samples()
                    .iter()
                    .filter_map(|sample| {
                        index
                            .get(&sample.labels)
                            .map(|&other| sample.with_value(op.apply(sample.value, other)))
                    })
                    .collect(),
            )
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agg {
    Sum,
    Min,
    Max,
    Avg,
}

/// Groups samples by the values of `by` (missing = `""`), in first-seen order.
/// One group as a sample whose value is the group's size (named and timed after its first member).
fn group_size((key, group): (Labels, Vec<&Sample>)) -> Sample {
    Sample::new(group[0].name.clone(), key, group.len() as f64, group[0].timestamp_ms)
}

/// A sample's group key for `by`: the values of the `by` labels, missing ones `""`. When `by`
/// names exactly the sample's labels (`sum(['level', 'service', 'instance'])` on samples with
/// those three), the key is equal to the sample's label map, which is shared instead of copied.
fn key_of(sample: &Sample, by: &[String]) -> Labels {
    if by.iter().all(|label| sample.labels.contains_key(label))
        && sample.labels.keys().all(|key| by.contains(key))
    {
        return sample.labels.clone();
    }
    let mut key = crate::sample::LabelMap::new();
    for label in by {
        key.insert(label.clone(), sample.label(label).to_owned());
    }
    Arc::new(key)
}

fn group_by<'s>(samples: &'s [Sample], by: &[String]) -> Vec<(Labels, Vec<&'s Sample>)> {
    // One sample (the log-MAL case) is one group: no index to hash into.
    if let [sample] = samples {
        return vec![(key_of(sample, by), vec![sample])];
    }
    let mut groups: Vec<(Labels, Vec<&Sample>)> = Vec::new();
    let mut index: HashMap<Labels, usize> = HashMap::new();
    for sample in samples {
        let key = key_of(sample, by);
        match index.get(&key) {
            Some(&i) => groups[i].1.push(sample),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, vec![sample]));
            }
        }
    }
    groups
}

/// `sum/min/max/avg(by)`; `by = None` aggregates everything into one label-less sample.
pub(crate) fn aggregate(family: &Family, agg: Agg, by: Option<&[String]>) -> Family {
    let samples = family.samples();
    let Some(first) = samples.first() else {
        return Family::empty();
    };
    match by {
        None => {
            let all: Vec<&Sample> = samples.iter().collect();
            Family::build(vec![Sample::new(
                first.name.clone(),
                Labels::default(),
                reduce(agg, &all),
                first.timestamp_ms,
            )])
        }
        // One sample (the log-MAL case): one group of itself, and when its key is its own labels
        // and the reduction its own value, the result is the family as it was.
        Some(by) if samples.len() == 1 => {
            let key = key_of(first, by);
            let value = reduce(agg, &[first]);
            if Arc::ptr_eq(&key, &first.labels) && value.to_bits() == first.value.to_bits() {
                return family.clone();
            }
            Family::build(vec![Sample::new(
                first.name.clone(),
                key,
                value,
                first.timestamp_ms,
            )])
        }
        Some(by) => aggregate_grouped(family, agg, by),
    }
}

/// `sum/min/max/avg(by)` through the general grouping (any number of samples).
pub(crate) fn aggregate_grouped(family: &Family, agg: Agg, by: &[String]) -> Family {
    Family::build(
        group_by(family.samples(), by)
            .into_iter()
            .map(|(key, group)| {
                Sample::new(
                    group[0].name.clone(),
                    key,
                    reduce(agg, &group),
                    group[0].timestamp_ms,
                )
            })
            .collect(),
    )
}

fn reduce(agg: Agg, group: &[&Sample]) -> f64 {
    let values = group.iter().map(|s| s.value);
    match agg {
        Agg::Sum => values.sum(),
        Agg::Min => values.fold(f64::INFINITY, java_min),
        Agg::Max => values.fold(f64::NEG_INFINITY, java_max),
        Agg::Avg => values.sum::<f64>() / group.len() as f64,
    }
}

fn java_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn java_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `count(by)`: one label → a label-less sample counting distinct non-blank values; several →
/// samples having all `by` labels, then per combination of all but the last label, the number of
/// distinct values of the last one.
pub(crate) fn count(family: &Family, by: Option<&[String]>) -> Family {
    let samples = family.samples();
    let Some(first) = samples.first() else {
        return Family::empty();
    };
    let single = |value: f64| {
        Family::build(vec![Sample::new(
            first.name.clone(),
            Labels::default(),
            value,
            first.timestamp_ms,
        )])
    };
    match by {
        None => single(samples.len() as f64),
        Some([only]) => {
            let distinct: std::collections::HashSet<&str> = samples
                .iter()
                .map(|s| s.label(only))
                .filter(|v| !v.trim().is_empty())
                .collect();
            single(distinct.len() as f64)
        }
        Some(by) => {
            let having: Vec<Sample> = samples
                .iter()
                .filter(|s| by.iter().all(|label| s.labels.contains_key(label)))
                .cloned()
                .collect();
            if by.is_empty() {
                return single(samples.len() as f64);
            }
            let combos: Vec<Sample> = group_by(&having, by).into_iter().map(group_size).collect();
            let rest: Vec<String> = by[..by.len() - 1].to_vec();
            Family::build(group_by(&combos, &rest).into_iter().map(group_size).collect())
        }
    }
}

/// Java's `Double.parseDouble` for bucket bounds: accepts `Infinity`, `+Infinity`, `-Infinity`,
/// decimals and exponents; rejects `+Inf` and `inf`.
pub(crate) fn parse_java_double(text: &str) -> Option<f64> {
    let trimmed = text.trim();
    match trimmed {
        "Infinity" | "+Infinity" => return Some(f64::INFINITY),
        "-Infinity" => return Some(f64::NEG_INFINITY),
        "NaN" => return Some(f64::NAN),
        _ => {}
    }
    let body = trimmed.trim_end_matches(['d', 'D', 'f', 'F']);
    if body
        .chars()
        .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
    {
        return None;
    }
    body.parse::<f64>().ok()
}

/// `histogram(le, unit)`: tagged samples sorted by bound, the tag renamed `le` and written as the
/// bound × `scale_ms` truncated to a long; untagged samples pass through first.
pub(crate) fn histogram(
    family: &Family,
    le: &str,
    scale_ms: f64,
    line: usize,
) -> Result<Family, EvalError> {
    let mut untagged = Vec::new();
    let mut tagged = Vec::new();
    for sample in family.samples() {
        match sample.labels.get(le) {
            None => untagged.push(sample.clone()),
            Some(bound) => {
                let Some(parsed) = parse_java_double(bound) else {
                    return Err(EvalError::NotANumber {
                        label: le.to_owned(),
                        value: bound.clone(),
                        line,
                    });
                };
                tagged.push((parsed, sample));
            }
        }
    }
    tagged.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (bound, sample) in tagged {
        let mut labels = sample.labels.as_ref().clone();
        labels.remove(le);
        // Java's `(long) double` saturates and maps NaN to 0, as `as` does.
        labels.insert("le".to_owned(), ((bound * scale_ms) as i64).to_string());
        untagged.push(Sample::new(
            sample.name.clone(),
            Arc::new(labels),
            sample.value,
            sample.timestamp_ms,
        ));
    }
    Ok(Family::build(untagged))
}

#[cfg(test)]
mod group_by_tests {
    use super::*;
    use crate::sample::labels;

    /// `group_by` without the one-sample shortcut.
    fn group_by_reference<'s>(samples: &'s [Sample], by: &[String]) -> Vec<(Labels, Vec<&'s Sample>)> {
        let mut groups: Vec<(Labels, Vec<&Sample>)> = Vec::new();
        for sample in samples {
            let key: Labels = Arc::new(
                by.iter()
                    .map(|label| (label.clone(), sample.label(label).to_owned()))
                    .collect(),
            );
            match groups.iter().position(|(k, _)| *k == key) {
                Some(i) => groups[i].1.push(sample),
                None => groups.push((key, vec![sample])),
            }
        }
        groups
    }

    #[test]
    fn group_by_matches_reference() {
        let bys: Vec<Vec<String>> = vec![
            vec![],
            vec!["service".into()],
            vec!["level".into(), "service".into(), "missing".into()],
        ];
        let all: Vec<Sample> = (0..12)
            .map(|i| {
                let mut pairs = vec![("level", format!("l{}", i % 2))];
                if i % 3 != 0 {
                    pairs.push(("service", format!("s{}", i % 4)));
                }
                Sample::new("m", labels(pairs), i as f64, i)
            })
            .collect();
        for by in &bys {
            for len in [0, 1, 2, all.len()] {
                assert_eq!(group_by(&all[..len], by), group_by_reference(&all[..len], by));
            }
            for sample in &all {
                let one = std::slice::from_ref(sample);
                assert_eq!(group_by(one, by), group_by_reference(one, by));
            }
        }
    }
}
