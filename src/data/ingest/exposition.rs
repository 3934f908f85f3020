//! Prometheus text exposition (a scrape, or a push to `/ingest/prometheus`) into one batch.
//! Pure: the text is parsed by the engine's exposition parser, the target's labels are attached
//! as Prometheus attaches them, then the samples are converted like remote-write's
//! ([`super::prom::to_mal`]).
//!
//! Target labels (`job`, `instance`, a job's static labels) win over the scraped ones, as with
//! Prometheus' `honor_labels: false`: a scraped label of the same name is kept as
//! `exported_<name>`.

use std::sync::Arc;

use hotrule_mal_engine::LabelMap;
use hotrule_mal_engine::exposition::{self, ExpositionError};

use super::prom::{self, BadBucket};
use crate::data::seam::{Batch, Catalog, Protocol};

/// Why an exposition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpositionRefused {
    #[error("the body is not UTF-8 text (byte {at})")]
    NotUtf8 { at: usize },
    #[error("exposition {0}")]
    Parse(#[from] ExpositionError),
    #[error(transparent)]
    BadBucket(#[from] BadBucket),
}

/// The labels a target adds to every sample: `job`, `instance`, and static labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetLabels(pub LabelMap);

impl TargetLabels {
    pub fn new(job: &str, instance: Option<&str>, extra: &LabelMap) -> TargetLabels {
        let mut labels = extra.clone();
        labels.insert("job".into(), job.into());
        if let Some(instance) = instance {
            labels.insert("instance".into(), instance.into());
        }
        TargetLabels(labels)
    }
}

/// Parses `body` and converts it into one batch (`None` when it holds no sample). Samples without
/// a timestamp get `now_ms`.
pub fn to_batch(body: &[u8], target: &TargetLabels, protocol: Protocol, now_ms: i64) -> Result<Option<Batch>, ExpositionRefused> {
    let text = std::str::from_utf8(body).map_err(|e| ExpositionRefused::NotUtf8 { at: e.valid_up_to() })?;
    let parsed = exposition::parse(text, now_ms, usize::MAX)?;
    let samples = parsed
        .samples
        .into_iter()
        .map(|mut sample| {
            sample.labels = Arc::new(with_target(&sample.labels, target));
            sample
        })
        .collect();
    let (samples, bad) = prom::to_mal(samples);
    if let Some(bad) = bad.into_iter().next() {
        return Err(bad.into());
    }
    Ok((!samples.is_empty()).then_some(Batch { protocol, catalog: Catalog::Otel, samples, received_ms: now_ms }))
}

fn with_target(scraped: &LabelMap, target: &TargetLabels) -> LabelMap {
    let mut labels = scraped.clone();
    for (key, value) in &target.0 {
        if let Some(previous) = labels.insert(key.clone(), value.clone()) {
            labels.insert(format!("exported_{key}"), previous);
        }
    }
    labels
}
