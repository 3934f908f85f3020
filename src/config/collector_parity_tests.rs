//! The node's configuration against the OpenTelemetry Collector's confmap behaviour (issue 9,
//! section 6). Each test names the upstream test it mirrors.

use std::sync::Arc;
use std::time::Duration;

use hotrule_confmap::MapEnv;

use super::*;

fn env(vars: &[(&str, &str)]) -> Arc<dyn hotrule_confmap::Env> {
    Arc::new(MapEnv::new(vars.iter().map(|(k, v)| (k.to_string(), v.to_string()))))
}

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write");
    format!("file:{}", path.display())
}

fn load_uris(uris: &[String], vars: &[(&str, &str)]) -> Result<Loaded, ConfigErrors> {
    load(&ConfigSources { uris: uris.to_vec(), ..ConfigSources::default() }, env(vars))
}

fn defaults() -> NodeConfig {
    load(&ConfigSources::default(), env(&[])).expect("defaults are valid").config
}

/// upstream `confmap/internal/e2e/nil_test.go` `TestNilToStringMap` (`subsection_null.yaml`,
/// `subsection_set_but_empty.yaml`, `subsection_unset.yaml`): an empty or null nested key loads,
/// and the field keeps its default, as an unmarshalled nil does in the Collector.
#[test]
fn test_nil_to_string_map_empty_nested_keys_keep_their_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let documents = [
        "agents:\n  tls:\n",
        "agents:\n  tls: null\n",
        "agents:\n  tls:\n    cert_file:\n    key_file: ~\n",
        "cluster:\n  seeds:\n",
        "config:\n  watch: null\n",
        "config:\n  watch:\n",
        "rules:\n  scan_interval: ~\n  lock_timeout:\n",
        "cluster:\n  commit_replicas: null\n  insecure_bus:\n  id:\n",
        "agents:\nrules:\nconfig:\n",
    ];
    let expected = defaults();
    for (index, text) in documents.iter().enumerate() {
        let uri = file(&dir, &format!("n{index}.yaml"), text);
        let loaded = load_uris(&[uri], &[]).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(loaded.config, expected, "{text:?}");
    }
}

/// upstream `TestNilToStringMapEnv` (`types_map.yaml` with `VALUE` empty or `null`) and the env
/// provider's `TestUnsetEnvWithLoggerWarn` / `TestEmptyEnvWithLoggerWarn`: an unset or empty
/// `${env:X}` in an int, bool, duration or list field keeps the default; an unset one warns.
#[test]
fn test_nil_to_string_map_env_unset_or_empty_variables_keep_the_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "cluster:\n  commit_replicas: ${env:X}\n  insecure_bus: ${env:X}\n  seeds: ${env:X}\n  gossip_interval: ${env:X}\n\
                rules:\n  scan_interval: ${env:X}\n  tombstone_retention: \"${X}\"\nconfig:\n  watch: ${env:X}\n\
                admin:\n  insecure: ${env:X}\n  token: ${env:X}\nagents:\n  tls: ${env:X}\n  retention: ${env:X}\n";
    let uri = file(&dir, "env.yaml", text);
    let expected = defaults();
    for vars in [&[][..], &[("X", "")][..], &[("X", "null")][..], &[("X", "~")][..]] {
        let loaded = load_uris(std::slice::from_ref(&uri), vars).unwrap_or_else(|e| panic!("{vars:?}: {e}"));
        assert_eq!(loaded.config, expected, "{vars:?}");
        let unset_warnings = loaded.warnings.iter().filter(|w| w.contains("unset environment variable `X`")).count();
        assert_eq!(unset_warnings, if vars.is_empty() { 11 } else { 0 }, "{vars:?}: {:?}", loaded.warnings);
    }
}

/// A null list element is left out (an unset variable in a list is no element), not a type error.
#[test]
fn unset_variables_inside_a_list_are_left_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = file(
        &dir,
        "seeds.yaml",
        "cluster:\n  gossip_listen: 127.0.0.1:17946\n  insecure_bus: true\n  seeds: [\"${env:SEED_A}\", \"${env:SEED_B}\", 127.0.0.1:7946]\n",
    );
    let loaded = load_uris(&[uri], &[("SEED_A", "127.0.0.1:7001")]).expect("valid");
    let cluster = loaded.config.cluster.expect("clustered");
    assert_eq!(cluster.seeds, ["127.0.0.1:7001", "127.0.0.1:7946"]);
}

/// Null keys are still checked against the schema: a typo with no value is an unknown key.
#[test]
fn a_null_unknown_key_is_still_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = file(&dir, "typo.yaml", "agents:\n  tsl:\nconfig:\n  wacth: null\n");
    let issues = match load_uris(&[uri], &[]) {
        Ok(_) => panic!("typos must be reported"),
        Err(ConfigErrors(issues)) => issues,
    };
    let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["agents.tsl", "config.wacth"]);
    assert!(issues[0].message.contains("did you mean `agents.tls`"), "{}", issues[0].message);
}

/// upstream `confmap/internal/e2e/types_test.go` `TestIssue10787` (`issue-10787-main.yaml` pulling
/// in `issue-10787-snippet.yaml`, which starts with `# ${hello.world}`): a reference inside a
/// comment of a value that comes whole from a file or a variable does not stop loading.
#[test]
fn test_issue_10787_a_reference_in_a_comment_of_a_whole_value_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snippet = file(&dir, "agents-snippet.yaml", "# ${hello.world} and ${env:NOT_SET}\ndetail_delivery: fetch # ${file:/nonexistent}\n");
    let main = file(
        &dir,
        "main.yaml",
        &format!("agents: ${{{snippet}}}\nconfig: ${{env:CONF}}\nrules:\n  scan_interval: ${{env:SCAN}}\n"),
    );
    // (A variable whose YAML is a plain string is taken verbatim, comment included, as in the
    // Collector, so that `p@ss # w0rd` survives: that text is a value and is expanded.)
    let vars = [("CONF", "# ${hello.world}\nwatch: false # ${env:hello.world}\n"), ("SCAN", "5 # ${bad.name}")];
    let loaded = load_uris(&[main], &vars).expect("comments are not expanded");
    assert_eq!(loaded.config.raw.agents.detail_delivery, "fetch");
    assert!(!loaded.config.watch);
    assert_eq!(loaded.config.scan_interval, Duration::from_secs(5));
    assert!(loaded.warnings.is_empty(), "a comment warns about nothing: {:?}", loaded.warnings);
}

/// `hotrule config print --show-origin` with a `yaml:` source that spans lines: the origin comment
/// stays on its line, so the printed text is YAML that reads back to the same tree.
#[test]
fn show_origin_print_with_a_multi_line_yaml_source_reparses() {
    let uris = ["yaml:log:\n  level: debug\nrules:\n  scan_interval: 5s\n".to_string(), "yaml:admin::token: |\n  s3cret\n".to_string()];
    let loaded = load_uris(&uris, &[]).expect("valid");
    let effective = hotrule_confmap::redact(&loaded.effective, is_secret);
    let origins = hotrule_confmap::redact_origins(&loaded.origins, is_secret);
    let printed = hotrule_confmap::to_yaml_string(&effective, Some(&origins));
    let reread = hotrule_confmap::parse_yaml(&printed).unwrap_or_else(|e| panic!("{e}:\n{printed}"));
    assert_eq!(reread.to_json(), effective.to_json(), "{printed}");
    assert!(printed.contains("level: debug  # from yaml:log:\\n  level: debug\\nrules:"), "{printed}");
    assert!(!printed.contains("s3cret"), "{printed}");
}
