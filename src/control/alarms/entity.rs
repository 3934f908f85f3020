//! The entity an alarm is about, as SkyWalking's alarm engine names it (`AlarmEntity`,
//! `NotifyHandler`): a scope, the name the rule filters and `{name}` use, and the ids `id0` /
//! `id1` (`IDManager`: `base64(service) + ".1"` for a service, the service id + `_` +
//! `base64(name)` below it; a relation's source and destination). Only these six scopes reach
//! SkyWalking's alarm engine; the caller leaves other entities out.

use serde::{Deserialize, Serialize};


/// SkyWalking's scope catalogs that alarms see, with their `DefaultScopeDefine` ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AlarmScope {
    Service,
    ServiceInstance,
    Endpoint,
    ServiceRelation,
    ServiceInstanceRelation,
    EndpointRelation,
}

impl AlarmScope {
    /// `scopeId` in an `AlarmMessage`.
    pub fn id(self) -> i32 {
        match self {
            AlarmScope::Service => 1,
            AlarmScope::ServiceInstance => 2,
            AlarmScope::Endpoint => 3,
            AlarmScope::ServiceRelation => 4,
            AlarmScope::ServiceInstanceRelation => 5,
            AlarmScope::EndpointRelation => 6,
        }
    }

    /// `scope` in an `AlarmMessage`.
    pub fn name(self) -> &'static str {
        match self {
            AlarmScope::Service => "SERVICE",
            AlarmScope::ServiceInstance => "SERVICE_INSTANCE",
            AlarmScope::Endpoint => "ENDPOINT",
            AlarmScope::ServiceRelation => "SERVICE_RELATION",
            AlarmScope::ServiceInstanceRelation => "SERVICE_INSTANCE_RELATION",
            AlarmScope::EndpointRelation => "ENDPOINT_RELATION",
        }
    }
}

/// One alarm entity: a rule keeps one window and one state per entity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AlarmEntity {
    pub scope: AlarmScope,
    /// `svc`, `inst of svc`, `ep in svc`, `src to dst`, `si of ss to di of ds`, `se in ss to de in ds`.
    pub name: String,
    pub id0: String,
    pub id1: String,
}

pub use crate::base::entity_ids::service_id;

fn child_id(service: &str, name: &str) -> String {
    crate::base::entity_ids::instance_id(service, name)
}

impl AlarmEntity {
    pub fn service(service: &str) -> AlarmEntity {
        AlarmEntity { scope: AlarmScope::Service, name: service.to_string(), id0: service_id(service), id1: String::new() }
    }

    pub fn instance(service: &str, instance: &str) -> AlarmEntity {
        AlarmEntity { scope: AlarmScope::ServiceInstance, name: format!("{instance} of {service}"), id0: child_id(service, instance), id1: String::new() }
    }

    pub fn endpoint(service: &str, endpoint: &str) -> AlarmEntity {
        AlarmEntity { scope: AlarmScope::Endpoint, name: format!("{endpoint} in {service}"), id0: child_id(service, endpoint), id1: String::new() }
    }

    pub fn service_relation(source: &str, dest: &str) -> AlarmEntity {
        AlarmEntity { scope: AlarmScope::ServiceRelation, name: format!("{source} to {dest}"), id0: service_id(source), id1: service_id(dest) }
    }

    pub fn instance_relation(source_service: &str, source: &str, dest_service: &str, dest: &str) -> AlarmEntity {
        AlarmEntity {
            scope: AlarmScope::ServiceInstanceRelation,
            name: format!("{source} of {source_service} to {dest} of {dest_service}"),
            id0: child_id(source_service, source),
            id1: child_id(dest_service, dest),
        }
    }

    pub fn endpoint_relation(source_service: &str, source: &str, dest_service: &str, dest: &str) -> AlarmEntity {
        AlarmEntity {
            scope: AlarmScope::EndpointRelation,
            name: format!("{source} in {source_service} to {dest} in {dest_service}"),
            id0: child_id(source_service, source),
            id1: child_id(dest_service, dest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the alarm doc's "Entity name" list, and the ids of the query protocol's
    /// table (`host-1` → `aG9zdC0x.1`).
    #[test]
    fn names_and_ids_are_skywalkings() {
        let svc = AlarmEntity::service("host-1");
        assert_eq!((svc.name.as_str(), svc.id0.as_str(), svc.scope.id()), ("host-1", "aG9zdC0x.1", 1));
        let inst = AlarmEntity::instance("host-1", "inst-1");
        assert_eq!((inst.name.as_str(), inst.id0.as_str()), ("inst-1 of host-1", "aG9zdC0x.1_aW5zdC0x"));
        assert_eq!(AlarmEntity::endpoint("s", "/a").name, "/a in s");
        let rel = AlarmEntity::service_relation("a", "b");
        assert_eq!((rel.name.as_str(), rel.id0.as_str(), rel.id1.as_str()), ("a to b", "YQ==.1", "Yg==.1"));
        assert_eq!(AlarmEntity::instance_relation("ss", "si", "ds", "di").name, "si of ss to di of ds");
        assert_eq!(AlarmEntity::endpoint_relation("ss", "se", "ds", "de").name, "se in ss to de in ds");
        assert_eq!(service_id(""), "_blank.1");
    }
}
