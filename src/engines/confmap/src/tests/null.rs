//! Null means "unset" at every depth of a typed decode, as a nil does when the Collector unmarshals
//! (mirrors upstream `confmap/internal/e2e/nil_test.go` `TestNilToStringMap`/`TestNilToStringMapEnv`
//! decoded into a typed config, and the env provider's `TestUnsetEnvWithLoggerWarn` and
//! `TestEmptyEnvWithLoggerWarn`: an unset or empty variable is nil, and a nil keeps the default).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::resolve;
use crate::{Value, from_value};

fn default_port() -> u16 {
    8080
}
fn default_true() -> bool {
    true
}
fn default_mode() -> String {
    "strict".into()
}
fn default_interval() -> String {
    "30s".into()
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Tls {
    #[serde(default)]
    cert_file: Option<String>,
    #[serde(default = "default_mode")]
    mode: String,
}

impl Default for Tls {
    fn default() -> Tls {
        Tls {
            cert_file: None,
            mode: default_mode(),
        }
    }
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "default_port")]
    port: u16,
    #[serde(default = "default_true")]
    watch: bool,
    #[serde(default = "default_interval")]
    interval: String,
    #[serde(default)]
    seeds: Vec<String>,
    #[serde(default)]
    tls: Tls,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    token: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            port: default_port(),
            watch: default_true(),
            interval: default_interval(),
            seeds: Vec::new(),
            tls: Tls::default(),
            labels: BTreeMap::new(),
            token: None,
        }
    }
}

fn decoded(document: &str, env: &[(&str, &str)]) -> Config {
    let resolved = resolve(&["mem:doc"], env, [("doc", document)])
        .unwrap_or_else(|error| panic!("{document}: {error}"));
    resolved
        .decode::<Config>()
        .unwrap_or_else(|error| panic!("{document}: {error}"))
}

/// Every kind of nested null keeps the field's default: an empty line, `null`/`~`, and an unset or
/// empty `${env:X}`, in an int, bool, duration-like string, list, map and struct field.
#[test]
fn test_nil_to_string_map_nested_nulls_keep_defaults() {
    let env = [("EMPTY", ""), ("NULL", "null")];
    let documents = [
        "tls:\n",
        "seeds:\n",
        "labels:\n",
        "watch: null\n",
        "port: ~\n",
        "tls: {mode: ~, cert_file: null}\n",
        "port: ${env:UNSET}\nwatch: ${env:UNSET}\ninterval: ${env:UNSET}\nseeds: ${env:UNSET}\ntls: ${env:UNSET}\nlabels: ${env:UNSET}\n",
        "port: ${env:EMPTY}\nwatch: ${env:EMPTY}\ninterval: ${env:EMPTY}\nseeds: ${env:EMPTY}\ntls: ${env:EMPTY}\nlabels: ${env:EMPTY}\n",
        "port: ${env:NULL}\nwatch: ${env:NULL}\ninterval: ${env:NULL}\nseeds: ${env:NULL}\ntls: ${env:NULL}\ntoken: ${env:NULL}\n",
        "tls:\n  mode: ${env:UNSET}\n  cert_file: ${env:EMPTY}\n",
    ];
    for document in documents {
        assert_eq!(decoded(document, &env), Config::default(), "{document}");
    }
}

/// A null list element or map entry is left out; the others stay, with their own paths in errors.
#[test]
fn null_list_elements_and_map_entries_are_left_out() {
    let config = decoded(
        "seeds: [a, ~, \"${env:UNSET}\", b]\nlabels: {x: \"1\", y: ~, z: \"${env:UNSET}\"}\n",
        &[],
    );
    assert_eq!(config.seeds, ["a", "b"]);
    assert_eq!(
        config.labels,
        BTreeMap::from([("x".to_owned(), "1".to_owned())])
    );
    let resolved = resolve(&["mem:doc"], &[], [("doc", "seeds: [~, a, [x]]\n")]).expect("resolves");
    let error = resolved
        .decode::<Config>()
        .expect_err("a list is not a string");
    assert_eq!(error.path, "seeds.2");
}

/// Null at the root, or where a struct or list is wanted, reads as an empty one.
#[test]
fn a_null_root_is_an_empty_map() {
    assert_eq!(
        from_value::<Config>(&Value::Null).expect("defaults"),
        Config::default()
    );
    assert_eq!(
        from_value::<Vec<String>>(&Value::Null).expect("empty"),
        Vec::<String>::new()
    );
    assert_eq!(from_value::<Option<u16>>(&Value::Null).expect("none"), None);
}

/// Only null is unset: an explicit empty string (`${env:X:-}`, `""`) is a string, and a field
/// with no default that is null is a missing field, not a type error.
#[test]
fn empty_strings_stay_and_required_fields_are_missing() {
    let config = decoded("interval: \"${env:UNSET:-}\"\ntoken: \"\"\n", &[]);
    assert_eq!(
        (config.interval.as_str(), config.token.as_deref()),
        ("", Some(""))
    );
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Required {
        port: u16,
    }
    let resolved = resolve(&["mem:doc"], &[], [("doc", "port: ${env:UNSET}\n")]).expect("resolves");
    let error = resolved.decode::<Required>().expect_err("no default");
    assert_eq!(error.to_string(), "missing field `port`");
    // A wrong type is still an error, with its path.
    let resolved = resolve(&["mem:doc"], &[], [("doc", "tls: {mode: [x]}\n")]).expect("resolves");
    let error = resolved
        .decode::<Config>()
        .expect_err("a list is no string");
    assert_eq!(error.path, "tls.mode");
}
