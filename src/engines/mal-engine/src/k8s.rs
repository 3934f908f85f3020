//! `retagByK8sMeta`: the Kubernetes metadata lookup is a trait the caller implements (SkyWalking's
//! `K8sInfoRegistry`); without one, samples keep their labels and a warning is reported once.

use std::sync::Arc;

use crate::sample::{Family, Sample};

/// A Kubernetes metadata source.
pub trait K8sMetadata: Send + Sync + std::fmt::Debug {
    /// `K8sRetagType.Pod2Service`: the service name SkyWalking gives the service selecting `pod`
    /// in `namespace` (`name.namespace`), or `None` when there is none.
    fn service_of_pod(&self, namespace: &str, pod: &str) -> Option<String>;
}

/// `K8sRetagType.Pod2Service` as upstream runs it: samples with a non-empty pod and namespace get
/// `new_label` = the pod's service, or `""` when unknown; the others are untouched.
pub(crate) fn pod_to_service(
    family: &Family,
    metadata: &dyn K8sMetadata,
    new_label: &str,
    pod_label: &str,
    namespace_label: &str,
) -> Family {
    let retagged: Vec<Sample> = family
        .samples()
        .iter()
        .map(|sample| {
            let (pod, namespace) = (sample.label(pod_label), sample.label(namespace_label));
            if pod.is_empty() || namespace.is_empty() {
                return sample.clone();
            }
            let service = metadata.service_of_pod(namespace, pod).unwrap_or_default();
            let mut retagged = sample.clone();
            Arc::make_mut(&mut retagged.labels).insert(new_label.to_owned(), service);
            retagged
        })
        .collect();
    Family::build(retagged)
}
