//! The metadata the query protocol lists (services by layer, their instances and endpoints),
//! derived from the entities the metric store holds: hotrule keeps no separate traffic tables,
//! so a service exists while it has values (and, for LAL-only layers, kept logs). Pure: the
//! caller reads the entities; this indexes and renders them.

use std::collections::{BTreeMap, BTreeSet};

use hotrule_mal_engine::ScopeType;
use serde_json::{Value, json};

use crate::base::entity_ids as ids;
use crate::data::metrics::Entity;

/// One service: the layers it was seen in, its instances (with their attributes) and endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceEntry {
    pub name: String,
    pub layers: BTreeSet<String>,
    pub instances: BTreeMap<String, BTreeMap<String, String>>,
    pub endpoints: BTreeSet<String>,
}

/// Every service seen, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    services: BTreeMap<String, ServiceEntry>,
}

impl Catalog {
    /// Indexes entities: a service, instance or endpoint entity registers its service in its
    /// layer (as OAP's traffic does); relation and process entities register nothing.
    pub fn from_entities<'a>(entities: impl IntoIterator<Item = &'a Entity>) -> Catalog {
        let mut catalog = Catalog::default();
        for entity in entities {
            match entity.scope {
                ScopeType::Service => {
                    catalog.add_service(&entity.service_name, &entity.layer);
                }
                ScopeType::ServiceInstance => {
                    let attributes = entity.instance_properties.clone().unwrap_or_default();
                    let entry = catalog.add_service(&entity.service_name, &entity.layer);
                    let known = entry.instances.entry(entity.instance_name.clone()).or_default();
                    known.extend(attributes);
                }
                ScopeType::Endpoint => {
                    let entry = catalog.add_service(&entity.service_name, &entity.layer);
                    entry.endpoints.insert(entity.endpoint_name.clone());
                }
                _ => {}
            }
        }
        catalog
    }

    /// Registers `service` in `layer` (and returns it).
    pub fn add_service(&mut self, service: &str, layer: &str) -> &mut ServiceEntry {
        let entry = self.services.entry(service.to_string()).or_insert_with(|| ServiceEntry { name: service.to_string(), ..ServiceEntry::default() });
        if !layer.is_empty() {
            entry.layers.insert(layer.to_string());
        }
        entry
    }

    /// Every layer some service is in.
    pub fn layers(&self) -> BTreeSet<&str> {
        self.services.values().flat_map(|s| s.layers.iter().map(String::as_str)).collect()
    }

    /// The services in `layer` (all of them when none), by name.
    pub fn services<'a>(&'a self, layer: Option<&'a str>) -> impl Iterator<Item = &'a ServiceEntry> + 'a {
        self.services.values().filter(move |s| layer.is_none_or(|l| s.layers.contains(l)))
    }

    pub fn service(&self, name: &str) -> Option<&ServiceEntry> {
        self.services.get(name)
    }
}

/// A `Service`.
pub fn service_json(entry: &ServiceEntry) -> Value {
    let (group, short_name) = ids::group_and_short_name(&entry.name);
    json!({
        "id": ids::service_id(&entry.name),
        "name": entry.name,
        "group": group,
        "shortName": short_name,
        "layers": entry.layers,
        "normal": true,
    })
}

/// A `ServiceInstance`: its `language` from the `language` attribute (as OAP), else UNKNOWN.
pub fn instance_json(service: &str, name: &str, attributes: &BTreeMap<String, String>) -> Value {
    const LANGUAGES: [&str; 9] = ["UNKNOWN", "JAVA", "DOTNET", "NODEJS", "PYTHON", "RUBY", "GO", "LUA", "PHP"];
    let language = attributes.get("language").map(|l| l.to_ascii_uppercase()).filter(|l| LANGUAGES.contains(&l.as_str()));
    let id = ids::instance_id(service, name);
    json!({
        "id": id,
        "name": name,
        "attributes": attributes.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
        "language": language.as_deref().unwrap_or("UNKNOWN"),
        "instanceUUID": id,
    })
}

/// An `Endpoint`.
pub fn endpoint_json(service: &str, name: &str) -> Value {
    json!({"id": ids::endpoint_id(service, name), "name": name})
}

/// An `EndpointInfo`.
pub fn endpoint_info_json(service: &str, name: &str) -> Value {
    json!({"id": ids::endpoint_id(service, name), "name": name, "serviceId": ids::service_id(service), "serviceName": service})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(scope: ScopeType, service: &str, child: &str, layer: &str) -> Entity {
        let mut e = Entity::new(scope);
        e.service_name = service.into();
        e.layer = layer.into();
        match scope {
            ScopeType::ServiceInstance => e.instance_name = child.into(),
            ScopeType::Endpoint => e.endpoint_name = child.into(),
            ScopeType::ServiceRelation => e.dest_service_name = child.into(),
            _ => {}
        }
        e
    }

    #[test]
    fn entities_register_services_per_layer() {
        let mut with_props = entity(ScopeType::ServiceInstance, "db::mysql-1", "i1", "MYSQL");
        with_props.instance_properties = Some([("language".to_string(), "java".to_string())].into());
        let entities = [
            entity(ScopeType::Service, "host-1", "", "OS_LINUX"),
            entity(ScopeType::Service, "db::mysql-1", "", "MYSQL"),
            with_props,
            entity(ScopeType::Endpoint, "db::mysql-1", "GET:/", "MYSQL"),
            entity(ScopeType::ServiceRelation, "a", "b", "MESH"),
        ];
        let catalog = Catalog::from_entities(&entities);
        assert_eq!(catalog.layers().into_iter().collect::<Vec<_>>(), ["MYSQL", "OS_LINUX"], "a relation registers no service");
        let linux: Vec<_> = catalog.services(Some("OS_LINUX")).map(service_json).collect();
        assert_eq!(linux, [json!({"id": "aG9zdC0x.1", "name": "host-1", "group": "", "shortName": "host-1", "layers": ["OS_LINUX"], "normal": true})]);
        let mysql = catalog.service("db::mysql-1").expect("registered");
        assert_eq!(service_json(mysql)["group"], "db");
        assert_eq!(service_json(mysql)["shortName"], "mysql-1");
        let instance = instance_json(&mysql.name, "i1", &mysql.instances["i1"]);
        assert_eq!(instance["language"], "JAVA");
        assert_eq!(instance["attributes"], json!([{"name": "language", "value": "java"}]));
        assert_eq!(instance["id"], instance["instanceUUID"]);
        assert_eq!(mysql.endpoints.iter().collect::<Vec<_>>(), ["GET:/"]);
        assert_eq!(catalog.services(None).count(), 2);
    }
}
