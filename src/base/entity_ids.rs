//! SkyWalking's entity ids (`IDManager`), as alarm messages carry them and the query protocol
//! hands them to clients and takes them back: a service is `base64(name) + ".1"` (MAL entities are always "normal"), an
//! instance or endpoint `serviceId + "_" + base64(name)`. The base64 is the standard alphabet
//! with padding over UTF-8 (Java's `Base64.getEncoder()`), and a blank name is `_blank`.

/// `.1`: a normal service (every entity MAL and LAL produce is normal).
const NORMAL: &str = ".1";

/// Java's `Const.BLANK_ENTITY_NAME` as ids encode it.
const BLANK: &str = "_blank";

fn encode_name(name: &str) -> String {
    if name.is_empty() { BLANK.to_string() } else { crate::base::base64::encode(name.as_bytes()) }
}

fn decode_name(encoded: &str) -> Option<String> {
    if encoded == BLANK {
        return Some(String::new());
    }
    String::from_utf8(crate::base::base64::decode(encoded)?).ok()
}

/// A (normal) service's id.
pub fn service_id(name: &str) -> String {
    format!("{}{NORMAL}", encode_name(name))
}

/// An instance's id, under its service.
pub fn instance_id(service: &str, instance: &str) -> String {
    format!("{}_{}", service_id(service), encode_name(instance))
}

/// An endpoint's id, under its service.
pub fn endpoint_id(service: &str, endpoint: &str) -> String {
    format!("{}_{}", service_id(service), encode_name(endpoint))
}

/// The service name of a service id (`base64(name).1`, or `.0` for a conjectured one); none
/// when it is not one.
pub fn service_name(id: &str) -> Option<String> {
    let (encoded, normal) = id.rsplit_once('.')?;
    if normal != "1" && normal != "0" {
        return None;
    }
    decode_name(encoded)
}

/// The service and instance (or endpoint) names of an instance or endpoint id.
pub fn child_names(id: &str) -> Option<(String, String)> {
    // Base64 has no '.', so the first one ends the service's name (`_blank` has '_' in it).
    let dot = id.find('.')?;
    let (service, child) = id.get(dot + 2..)?.strip_prefix('_').map(|child| (&id[..dot + 2], child))?;
    Some((service_name(service)?, decode_name(child)?))
}

/// A service name's group and short name: split on the first `::` (`ServiceTraffic`).
pub fn group_and_short_name(name: &str) -> (&str, &str) {
    name.split_once("::").unwrap_or(("", name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_javas() {
        // IDManager's own examples and Java's Base64.getEncoder() output.
        assert_eq!(service_id("host-1"), "aG9zdC0x.1");
        assert_eq!(instance_id("host-1", "inst-1"), "aG9zdC0x.1_aW5zdC0x");
        assert_eq!(service_id("é/?>"), "w6kvPz4=.1");
        assert_eq!(service_id(""), "_blank.1");
    }

    #[test]
    fn ids_round_trip() {
        for name in ["host-1", "a::b", "", "é/?>", "x_y.z", "with space"] {
            assert_eq!(service_name(&service_id(name)).as_deref(), Some(name));
            assert_eq!(child_names(&endpoint_id(name, "GET:/a_b")), Some((name.to_string(), "GET:/a_b".to_string())));
        }
        assert_eq!(service_name("aG9zdC0x.0").as_deref(), Some("host-1"), "a conjectured service's id still names it");
    }

    #[test]
    fn bad_ids_are_none() {
        for id in ["", "aG9zdC0x", "aG9zdC0x.2", "!!!.1", "A.1", "/w==.1", "aG9zdC0x====.1"] {
            assert_eq!(service_name(id), None, "{id}");
        }
        assert_eq!(child_names("aG9zdC0x.1"), None);
        assert_eq!(child_names("aG9zdC0x.1_!!"), None);
    }

    #[test]
    fn groups_split_on_the_first_double_colon() {
        assert_eq!(group_and_short_name("g::s::t"), ("g", "s::t"));
        assert_eq!(group_and_short_name("plain"), ("", "plain"));
    }
}
