//! The Prometheus → MAL conversion shared by remote-write, scrapes and pushes.

use hotrule_mal_engine::labels;

use super::{by_label, find};
use crate::data::seam::Sample;
use crate::data::ingest::prom::{split_scrapes, to_mal};

fn prom(name: &str, pairs: &[(&str, &str)], value: f64, ts: i64) -> Sample {
    Sample::new(name, labels(pairs.iter().copied()), value, ts)
}

#[test]
fn job_and_instance_become_the_collector_resource_labels() {
    let (out, bad) = to_mal(vec![prom("node_load1", &[("job", "vm-monitoring"), ("instance", "10.0.0.7:9100"), ("cpu", "0")], 0.5, 1000)]);
    assert!(bad.is_empty());
    let got: Vec<(&str, &str)> = out[0].labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        got,
        vec![
            ("cpu", "0"),
            ("job_name", "vm-monitoring"),
            ("node_identifier_host_name", "10.0.0.7"),
            ("server_address", "10.0.0.7"),
            ("server_port", "9100"),
            ("service_instance_id", "10.0.0.7:9100"),
            ("service_name", "vm-monitoring"),
        ]
    );
    assert_eq!((out[0].name.as_str(), out[0].value, out[0].timestamp_ms), ("node_load1", 0.5, 1000));
}

#[test]
fn series_labels_override_the_resource_labels_and_ipv6_hosts_split() {
    let (out, _) = to_mal(vec![prom("up", &[("job", "j"), ("instance", "[::1]:9100"), ("service_name", "mine")], 1.0, 0)]);
    assert_eq!(out[0].label("service_name"), "mine");
    assert_eq!(out[0].label("job_name"), "j");
    assert_eq!((out[0].label("server_address"), out[0].label("server_port")), ("::1", "9100"));
    let (bare, _) = to_mal(vec![prom("up", &[("instance", "node-a")], 1.0, 0)]);
    assert_eq!((bare[0].label("node_identifier_host_name"), bare[0].label("server_port")), ("node-a", ""));
    assert!(!bare[0].labels.contains_key("job_name"));
}

#[test]
fn cumulative_buckets_are_de_cumulated_under_the_base_name() {
    let j = ("job", "api");
    let input = vec![
        prom("http_seconds_bucket", &[j, ("path", "/a"), ("le", "1")], 6.0, 5),
        prom("http_seconds_bucket", &[j, ("path", "/a"), ("le", "0.1")], 1.0, 5),
        prom("http_seconds_bucket", &[j, ("path", "/a"), ("le", "+Inf")], 10.0, 5),
        prom("http_seconds_bucket", &[j, ("path", "/a"), ("le", "0.5")], 3.0, 5),
        prom("http_seconds_bucket", &[j, ("path", "/b"), ("le", "0.1")], 2.0, 5),
        prom("http_seconds_bucket", &[j, ("path", "/b"), ("le", "+Inf")], 2.0, 5),
        prom("http_seconds_sum", &[j, ("path", "/a")], 4.2, 5),
        prom("http_seconds_count", &[j, ("path", "/a")], 10.0, 5),
    ];
    let (out, bad) = to_mal(input);
    assert!(bad.is_empty());
    assert!(out.iter().all(|s| s.name != "http_seconds_bucket"));
    let a: Vec<(String, f64)> = by_label(&out, "http_seconds", "le").into_iter().take(4).collect();
    assert_eq!(a, vec![("0.1".into(), 1.0), ("0.5".into(), 2.0), ("1.0".into(), 3.0), ("Infinity".into(), 4.0)]);
    assert_eq!(find(&out, "http_seconds", &[("path", "/b"), ("le", "Infinity")]).value, 0.0);
    assert_eq!(find(&out, "http_seconds", &[("path", "/b"), ("le", "0.1")]).value, 2.0);
    assert_eq!(find(&out, "http_seconds_sum", &[("path", "/a")]).value, 4.2);
    assert_eq!(find(&out, "http_seconds_count", &[("path", "/a")]).value, 10.0);
    // The buckets take the place of the first bucket: /a's, then /b's, then sum and count.
    let order: Vec<&str> = out.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(order, vec!["http_seconds"; 6].into_iter().chain(["http_seconds_sum", "http_seconds_count"]).collect::<Vec<_>>());
}

#[test]
fn a_bucket_with_an_unreadable_le_is_refused_and_quantiles_are_java_spelled() {
    let (out, bad) = to_mal(vec![
        prom("x_bucket", &[("le", "fast")], 1.0, 0),
        prom("rpc", &[("quantile", "1")], 9.0, 0),
        prom("rpc", &[("quantile", "0.99")], 8.0, 0),
        // `_bucket` without `le` is an ordinary series.
        prom("queue_bucket", &[("shard", "1")], 3.0, 0),
    ]);
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].to_string(), "series x_bucket{le=\"fast\"}: le=\"fast\" is not a number");
    assert_eq!(by_label(&out, "rpc", "quantile"), vec![("1.0".into(), 9.0), ("0.99".into(), 8.0)]);
    assert_eq!(find(&out, "queue_bucket", &[]).value, 3.0);
}

#[test]
fn samples_split_into_scrapes_by_job_instance_and_time() {
    let groups = split_scrapes(vec![
        prom("a", &[("job", "j"), ("instance", "i1")], 1.0, 10),
        prom("a", &[("job", "j"), ("instance", "i2")], 2.0, 10),
        prom("b", &[("job", "j"), ("instance", "i1")], 3.0, 10),
        prom("a", &[("job", "j"), ("instance", "i1")], 4.0, 20),
    ]);
    let values: Vec<Vec<f64>> = groups.iter().map(|g| g.iter().map(|s| s.value).collect()).collect();
    assert_eq!(values, vec![vec![1.0, 3.0], vec![2.0], vec![4.0]]);
}
