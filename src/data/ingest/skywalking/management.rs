//! `ManagementService` to instance traffic, as `ManagementServiceHandler` records it. Pure: a
//! report or a ping becomes one value of the metric [`INSTANCE_TRAFFIC`] for the instance
//! entity, valued by the time of the call (the instance's last ping, stored `latest`), in the
//! current minute.
//!
//! hotrule keeps no traffic tables of its own: a service and its instances exist while they have
//! values (`api::graphql::metadata`). So an instance that reported its properties or pinged is
//! listed, with those properties as its attributes, before it sends any meter or log.
//!
//! - Names are cut to SkyWalking's default lengths (70 characters for service and instance).
//! - Properties: every `ipv4` entry is collected into `ipv4s`, joined with `,` (always written,
//!   even empty); any other key is kept, the last of a repeated key winning.
//! - `reportInstanceProperties` ignores `layer` (as upstream): its instance is in `GENERAL`.
//!   `keepAlive` reads it: empty is `GENERAL`, a name that is not a layer is `UNDEFINED`.

use std::collections::BTreeMap;

use hotrule_mal_engine::{DataType, Downsampling, MetricValue, ScopeType, Value, minute_bucket};

use super::wire::{InstancePingPkg, InstanceProperties};
use crate::data::seam::Entity;

/// The metric management calls write (SkyWalking's `instance_traffic`).
pub const INSTANCE_TRAFFIC: &str = "instance_traffic";

/// SkyWalking's default limits on service and instance names (`NamingControl`).
pub const MAX_NAME_CHARS: usize = 70;

/// Why a management call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagementError {
    #[error("service is empty")]
    NoService,
    #[error("serviceInstance is empty")]
    NoInstance,
}

/// `reportInstanceProperties` at `now_ms`.
pub fn reported(report: &InstanceProperties, now_ms: i64) -> Result<MetricValue, ManagementError> {
    let mut properties: BTreeMap<String, String> = BTreeMap::new();
    let mut ipv4s: Vec<&str> = Vec::new();
    for pair in &report.properties {
        if pair.key == "ipv4" {
            ipv4s.push(&pair.value);
        } else {
            properties.insert(pair.key.clone(), pair.value.clone());
        }
    }
    properties.insert("ipv4s".to_owned(), ipv4s.join(","));
    instance_value(&report.service, &report.service_instance, "GENERAL", Some(properties), now_ms)
}

/// `keepAlive` at `now_ms`.
pub fn pinged(ping: &InstancePingPkg, now_ms: i64) -> Result<MetricValue, ManagementError> {
    let layer = match ping.layer.as_str() {
        "" => "GENERAL",
        name if hotrule_rule_compiler::layers::built_in(name).is_some() => name,
        _ => "UNDEFINED",
    };
    instance_value(&ping.service, &ping.service_instance, layer, None, now_ms)
}

fn instance_value(
    service: &str,
    instance: &str,
    layer: &str,
    properties: Option<BTreeMap<String, String>>,
    now_ms: i64,
) -> Result<MetricValue, ManagementError> {
    if service.is_empty() {
        return Err(ManagementError::NoService);
    }
    if instance.is_empty() {
        return Err(ManagementError::NoInstance);
    }
    let mut entity = Entity::new(ScopeType::ServiceInstance);
    entity.service_name = cut(service);
    entity.instance_name = cut(instance);
    entity.layer = layer.to_owned();
    entity.instance_properties = properties;
    Ok(MetricValue {
        metric: INSTANCE_TRAFFIC.to_owned(),
        rule: "management".to_owned(),
        entity,
        time_bucket: minute_bucket(now_ms),
        timestamp_ms: now_ms,
        value: Value::Single(now_ms),
        data_type: DataType::Single,
        downsampling: Downsampling::Latest,
    })
}

/// The first [`MAX_NAME_CHARS`] characters.
fn cut(name: &str) -> String {
    name.chars().take(MAX_NAME_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::ingest::skywalking::wire::KeyStringValuePair;

    fn pair(key: &str, value: &str) -> KeyStringValuePair {
        KeyStringValuePair { key: key.into(), value: value.into() }
    }

    #[test]
    fn properties_become_the_instance_attributes_with_ipv4s_collected() {
        let report = InstanceProperties {
            service: "svc".into(),
            service_instance: "inst".into(),
            properties: vec![pair("language", "python"), pair("ipv4", "10.0.0.1"), pair("ipv4", "10.0.0.2"), pair("hostname", "a"), pair("hostname", "b")],
            layer: "MESH".into(),
        };
        let value = reported(&report, 1_700_000_000_000).expect("value");
        assert_eq!((value.metric.as_str(), value.entity.scope, value.entity.layer.as_str()), (INSTANCE_TRAFFIC, ScopeType::ServiceInstance, "GENERAL"));
        let properties = value.entity.instance_properties.expect("properties");
        assert_eq!(properties.get("ipv4s").map(String::as_str), Some("10.0.0.1,10.0.0.2"));
        assert_eq!(properties.get("hostname").map(String::as_str), Some("b"));
        assert_eq!(properties.get("language").map(String::as_str), Some("python"));
        assert!(!properties.contains_key("ipv4"));
        assert_eq!((value.value, value.time_bucket), (Value::Single(1_700_000_000_000), minute_bucket(1_700_000_000_000)));
        let bare = reported(&InstanceProperties { service: "s".into(), service_instance: "i".into(), ..Default::default() }, 1).expect("value");
        assert_eq!(bare.entity.instance_properties.expect("properties").get("ipv4s").map(String::as_str), Some(""));
    }

    #[test]
    fn a_ping_reads_its_layer_and_carries_no_properties() {
        let ping = |layer: &str| pinged(&InstancePingPkg { service: "s".into(), service_instance: "i".into(), layer: layer.into() }, 5).expect("value");
        assert_eq!(ping("").entity.layer, "GENERAL");
        assert_eq!(ping("MESH").entity.layer, "MESH");
        assert_eq!(ping("NOT_A_LAYER").entity.layer, "UNDEFINED");
        assert_eq!(ping("").entity.instance_properties, None);
    }

    #[test]
    fn names_are_required_and_cut_to_seventy_characters() {
        let long = "x".repeat(100);
        let value = pinged(&InstancePingPkg { service: long.clone(), service_instance: "é".repeat(80), layer: String::new() }, 1).expect("value");
        assert_eq!((value.entity.service_name.chars().count(), value.entity.instance_name.chars().count()), (70, 70));
        assert_eq!(pinged(&InstancePingPkg { service: String::new(), service_instance: "i".into(), layer: String::new() }, 1), Err(ManagementError::NoService));
        assert_eq!(pinged(&InstancePingPkg { service: "s".into(), service_instance: String::new(), layer: String::new() }, 1), Err(ManagementError::NoInstance));
    }
}
