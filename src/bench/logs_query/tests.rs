use std::time::Duration;

use super::corpus::{self, Corpus};
use super::*;

const END_MS: i64 = 1_790_000_000_000;

#[test]
fn percentiles_of_unsorted_samples() {
    let samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
    let times = Times::of(samples);
    assert_eq!(times.p50, Duration::from_millis(51));
    assert_eq!(times.p99, Duration::from_millis(99));
    assert_eq!(Times::of(vec![Duration::from_millis(7)]).p99, Duration::from_millis(7));
}

#[test]
fn the_comparison_reports_a_changed_log_and_a_missing_one() {
    let corpus = Corpus::new(2_000, 2, END_MS, BATCH).unwrap();
    let logs: Vec<KeptLog> = (0..5).map(|i| corpus.log(i)).collect();
    assert_eq!(first_difference(&logs, &logs.clone()), None);

    let mut changed = logs.clone();
    changed[3].record.content.push('!');
    assert!(matches!(first_difference(&logs, &changed), Some(Difference::At { position: 3, .. })));
    let mut retagged = logs.clone();
    retagged[0].record.tags.push(("user".into(), "vip-1".into()));
    assert!(matches!(first_difference(&logs, &retagged), Some(Difference::At { position: 0, .. })));

    assert_eq!(first_difference(&logs, &logs[..4]), Some(Difference::Count { left: 5, right: 4 }));
    let reordered: Vec<KeptLog> = logs.iter().rev().cloned().collect();
    assert!(first_difference(&logs, &reordered).is_some());
}

#[test]
fn each_query_expects_what_the_corpus_planted() {
    let corpus = Corpus::new(20_000, 4, END_MS, BATCH).unwrap();
    for round in 0..corpus::KEYWORD_NEEDLES {
        let (filter, indices) = QueryKind::RareKeyword.query(&corpus, round);
        assert_eq!(indices.len(), corpus::planted(round));
        assert_eq!(filter.keyword, Some(corpus::keyword(round)));
        assert!(indices.windows(2).all(|w| w[0] > w[1]), "newest first");
    }
    let (filter, indices) = QueryKind::RareTag.query(&corpus, 13);
    assert_eq!(indices.len(), corpus::planted(3));
    assert_eq!(filter.tags, vec![("user".to_string(), corpus::tag_value(3))]);
    let (_, indices) = QueryKind::QuietService.query(&corpus, 0);
    assert_eq!(indices.len(), corpus::QUIET_LOGS);
    let (filter, indices) = QueryKind::BusyService.query(&corpus, 1);
    assert_eq!(indices.len(), LIMIT);
    assert!(indices.iter().all(|i| corpus.log(*i).record.service == "service-01"));
    assert_eq!(filter.service.as_deref(), Some("service-01"));
    let (_, indices) = QueryKind::Newest.query(&corpus, 0);
    assert_eq!(indices, (19_900..20_000).rev().collect::<Vec<_>>());
}

#[test]
fn both_stores_answer_every_query_kind_alike_on_the_in_memory_twin() {
    let args = LogsQueryArgs { dir: None, logs: 20_000, services: 5, queries: 12, no_baseline: false, writers: 2 };
    let report = measure(&args).unwrap();
    assert_eq!(report.logs, 20_000);
    assert!(report.v1.is_some());
    assert_eq!(report.kinds.len(), QueryKind::ALL.len());
    for kind in &report.kinds {
        assert!(kind.v1.is_some());
        let expected = match kind.kind {
            QueryKind::RareKeyword | QueryKind::RareTag => (8, 12),
            QueryKind::QuietService => (corpus::QUIET_LOGS, corpus::QUIET_LOGS),
            QueryKind::BusyService | QueryKind::Newest => (LIMIT, LIMIT),
        };
        assert_eq!(kind.found, expected, "{}", kind.kind.label());
    }

    let without = measure(&LogsQueryArgs { no_baseline: true, queries: 3, ..args }).unwrap();
    assert!(without.v1.is_none());
    assert!(without.kinds.iter().all(|k| k.v1.is_none()));
}
