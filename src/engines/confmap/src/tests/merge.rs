//! Merge order, deep maps, replaced lists, null semantics and the null-map warning, origins.

use serde_json::json;

use super::resolve;

#[test]
fn later_sources_win_and_maps_merge_deeply() {
    let resolved = resolve(
        &["mem:a", "mem:b", "mem:c"],
        &[],
        [
            (
                "a",
                "server: {host: a, port: 1, tls: {enabled: false}}\nname: a\n",
            ),
            ("b", "server: {port: 2, tls: {cert: /b.pem}}\n"),
            ("c", "name: c\n"),
        ],
    )
    .expect("resolves");
    assert_eq!(
        resolved.value.to_json(),
        json!({"server": {"host": "a", "port": 2, "tls": {"enabled": false, "cert": "/b.pem"}}, "name": "c"})
    );
}

#[test]
fn lists_and_scalars_are_replaced_never_concatenated() {
    let resolved = resolve(
        &["mem:a", "mem:b"],
        &[],
        [
            ("a", "peers: [x, y, z]\nlevels: {a: 1}\n"),
            ("b", "peers: [w]\nlevels: 7\n"),
        ],
    )
    .expect("resolves");
    assert_eq!(
        resolved.value.to_json(),
        json!({"peers": ["w"], "levels": 7})
    );
}

#[test]
fn a_map_replaces_a_scalar_and_empty_sources_change_nothing() {
    let resolved = resolve(
        &["mem:a", "mem:empty", "mem:b"],
        &[],
        [("a", "x: 1\n"), ("empty", ""), ("b", "x: {y: 2}\n")],
    )
    .expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"x": {"y": 2}}));
}

#[test]
fn explicit_null_replaces_and_nulling_a_filled_map_warns() {
    // The Collector README's example: B's `processors:` wipes A's processors.
    let resolved = resolve(
        &["mem:a", "mem:b"],
        &[],
        [
            (
                "a",
                "processors:\n  nop:\nexporters: {nop: {}}\nlevel: info\n",
            ),
            ("b", "processors:\nlevel: ~\n"),
        ],
    )
    .expect("resolves");
    assert_eq!(
        resolved.value.to_json(),
        json!({"processors": null, "exporters": {"nop": {}}, "level": null})
    );
    assert_eq!(
        resolved.warnings,
        [
            "`processors` is null in mem:b, which discards the map set by mem:a; \
          write `processors: {}` or leave the key out to keep it"
        ]
    );
}

#[test]
fn an_empty_map_keeps_the_earlier_map() {
    let resolved = resolve(
        &["mem:a", "mem:b"],
        &[],
        [("a", "processors: {nop: {}}\n"), ("b", "processors: {}\n")],
    )
    .expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"processors": {"nop": {}}}));
    assert!(resolved.warnings.is_empty());
}

#[test]
fn the_null_map_warning_names_every_earlier_source() {
    let resolved = resolve(
        &["mem:a", "mem:b", "mem:c"],
        &[],
        [
            ("a", "p: {x: 1}\n"),
            ("b", "p: {y: 2}\n"),
            ("c", "p: null\n"),
        ],
    )
    .expect("resolves");
    assert_eq!(resolved.warnings.len(), 1);
    assert!(
        resolved.warnings[0].contains("discards the map set by mem:a, mem:b"),
        "{:?}",
        resolved.warnings
    );
}

#[test]
fn delimited_keys_nest_in_every_source() {
    let resolved = resolve(
        &["mem:a", "yaml:server::tls::cert: /x.pem"],
        &[],
        [("a", "server::port: 1\n")],
    )
    .expect("resolves");
    assert_eq!(
        resolved.value.to_json(),
        json!({"server": {"port": 1, "tls": {"cert": "/x.pem"}}})
    );
}

#[test]
fn origins_name_the_source_of_every_leaf() {
    let resolved = resolve(
        &["mem:a", "mem:b", "yaml:server::port: 9"],
        &[],
        [
            (
                "a",
                "server: {host: h, port: 1}\npeers: [p, q]\nempty: {}\n",
            ),
            ("b", "peers: [r]\nnothing: ~\n"),
        ],
    )
    .expect("resolves");
    let origins: Vec<(&str, &str)> = resolved
        .origins
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        origins,
        [
            ("empty", "mem:a"),
            ("nothing", "mem:b"),
            ("peers.0", "mem:b"),
            ("server.host", "mem:a"),
            ("server.port", "yaml:server::port: 9"),
        ]
    );
}
