//! Every MAL file of the shipped corpus (`config/rules`, a copy of the SkyWalking rules: otel-rules,
//! log-mal-rules, telegraf-rules, meter-analyzer-config; the `lal` folder is LAL, not evaluated
//! here) evaluates: for each file, samples are synthesized for every metric name and label its
//! rules read, two batches 60 s apart are run (so rates have history), and every metric rule must
//! yield at least one value and no error. Rules that cannot are listed in `KNOWN_GAPS` with the
//! reason; the test fails if the list is stale in either direction.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use hotrule_mal_engine::synth::synthesize;
use hotrule_mal_engine::{EngineState, PreparedFile};
use hotrule_rule_compiler::{Compiled, DslKind, compile_bundled};

/// The repository's bundled copy of the SkyWalking rules (`config/rules`, identical to the corpus).
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../config/rules");

/// `(file relative to the corpus, rule name, reason)`.
const KNOWN_GAPS: &[(&str, &str, &str)] = &[];

#[test]
fn every_corpus_rule_yields_a_value() {
    let root = Path::new(CORPUS);
    if !root.is_dir() {
        panic!("corpus not found at {CORPUS}");
    }
    let files = hotrule_mal_engine::synth::rule_files(root);
    assert!(
        files.len() >= 80,
        "expected the corpus' MAL files, found {}",
        files.len()
    );
    let t0 = 1_700_000_000_000_i64;
    let mut failures: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut rules_total = 0;
    for path in &files {
        let relative = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        let bytes = std::fs::read(path).unwrap_or_default();
        let file = match compile_bundled(DslKind::Mal, &bytes) {
            Ok(Compiled::Mal(file)) => PreparedFile::new(file),
            other => {
                failures.insert((relative, "*".to_owned(), format!("compile: {other:?}")));
                continue;
            }
        };
        let mut state = EngineState::default();
        let mut produced: BTreeSet<String> = BTreeSet::new();
        for (batch_index, value) in [(0_i64, 100.0), (1, 160.0)] {
            let ts = t0 + batch_index * 60_000;
            let batch = synthesize(&file, value, ts);
            let evaluation = file.evaluate(&batch, ts, &mut state);
            for warning in evaluation.warnings {
                if let hotrule_mal_engine::Warning::FilterFailed { rule, reason } = warning {
                    failures.insert((relative.clone(), rule, format!("filter failed: {reason}")));
                }
            }
            for error in evaluation.errors {
                failures.insert((
                    relative.clone(),
                    error.rule.clone(),
                    format!("error: {}", error.error),
                ));
            }
            for value in evaluation.values {
                produced.insert(value.rule);
            }
        }
        for rule in &file.file().rules {
            rules_total += 1;
            if !produced.contains(&rule.name)
                && !failures
                    .iter()
                    .any(|(f, r, _)| *f == relative && *r == rule.name)
            {
                failures.insert((relative.clone(), rule.name.clone(), "no value".to_owned()));
            }
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN_GAPS
        .iter()
        .map(|(f, r, _)| ((*f).to_owned(), (*r).to_owned()))
        .collect();
    let unexpected: Vec<_> = failures
        .iter()
        .filter(|(f, r, _)| !known.contains(&(f.clone(), r.clone())))
        .collect();
    let stale: Vec<_> = known
        .iter()
        .filter(|(f, r)| !failures.iter().any(|(ff, rr, _)| ff == f && rr == r))
        .collect();
    eprintln!(
        "{} files, {rules_total} rules, {} failing ({} known)",
        files.len(),
        failures.len(),
        known.len()
    );
    assert!(
        unexpected.is_empty(),
        "rules without a value or with an error:\n{unexpected:#?}"
    );
    assert!(
        stale.is_empty(),
        "KNOWN_GAPS entries that now pass: {stale:?}"
    );
}

/// Hostile input must never panic: every corpus file on samples whose label values are odd
/// (empty, `+Inf`, non-numeric bounds, unicode, very long) and whose values are NaN, ±∞, negative
/// or zero. Errors are allowed (they are per rule); a panic fails the test.
#[test]
fn hostile_samples_never_panic() {
    let root = Path::new(CORPUS);
    let files = hotrule_mal_engine::synth::rule_files(root);
    let odd_labels = [
        "",
        "+Inf",
        "abc",
        "∞ é 🚀",
        "-Infinity",
        "1e400",
        "server",
        "null",
    ];
    let odd_values = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 0.0, 1e308];
    let long = "x".repeat(10_000);
    let mut runs = 0;
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_default();
        let Ok(Compiled::Mal(file)) = compile_bundled(DslKind::Mal, &bytes) else {
            continue;
        };
        let file = PreparedFile::new(file);
        let mut state = EngineState::default();
        for (round, odd) in odd_labels
            .iter()
            .chain(std::iter::once(&long.as_str()))
            .enumerate()
        {
            let ts = 1_700_000_000_000 + round as i64 * 60_000;
            let mut batch = synthesize(&file, 1.0, ts);
            for (i, sample) in batch.iter_mut().enumerate() {
                sample.value = odd_values[(i + round) % odd_values.len()];
                for (j, value) in std::sync::Arc::make_mut(&mut sample.labels)
                    .values_mut()
                    .enumerate()
                {
                    if (i + j + round) % 2 == 0 {
                        *value = (*odd).to_owned();
                    }
                }
                if (i + round) % 3 == 0 {
                    let first = sample.labels.keys().next().cloned();
                    if let Some(first) = first {
                        std::sync::Arc::make_mut(&mut sample.labels).remove(&first);
                    }
                }
            }
            let _ = file.evaluate(&batch, ts, &mut state);
            runs += 1;
        }
    }
    assert!(runs > 0);
}
