//! Receiver tests: decoder tables per protocol, the HTTP status codes and their bodies, the
//! scrape worker against loopback servers (alone, and divided among nodes), and random input
//! for every decoder.

mod fuzz;
mod http;
mod logs_fuzz;
mod logs_http;
mod logs_python;
mod native_logs;
mod otlp;
mod otlp_json;
mod otlp_logs;
mod prom;
mod remote_write;
mod remote_write_wire;
mod scrape;
mod scrape_divided;

use crate::data::seam::Sample;

/// The one sample named `name` whose labels include every pair of `labels`.
pub(super) fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> &'a Sample {
    let matching: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .collect();
    assert_eq!(matching.len(), 1, "expected one {name}{labels:?} in {samples:#?}");
    matching[0]
}

/// `(name, value)` of every sample carrying label `key`, as `(name, key value, value)`.
pub(super) fn by_label(samples: &[Sample], name: &str, key: &str) -> Vec<(String, f64)> {
    samples.iter().filter(|s| s.name == name).filter_map(|s| s.labels.get(key).map(|v| (v.clone(), s.value))).collect()
}
