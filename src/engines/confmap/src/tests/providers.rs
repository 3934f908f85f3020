//! Provider and builder errors, `--set`, converters, printing, redaction and decoding.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use super::{MemoryProvider, TempDir, builder, resolve};
use crate::{
    ConvertError, EnvError, FileError, MapEnv, ProviderError, RenameKeys, ResolveError, Resolver,
    UriError, Value, redact, redact_origins, set_to_yaml_uri, to_yaml_string,
};

#[test]
fn file_sources_are_read_and_watched_and_bare_paths_are_files() {
    let dir = TempDir::new("files");
    let base = dir.write("base.yaml", "server: {port: 1}\nrules: ${file:rules.txt}\n");
    let empty = dir.write("empty.yaml", "");
    let rules = dir.write("rules.txt", "line one\nline two\n");
    let base_uri = format!("file:{}", base.display());
    let empty_path = empty.display().to_string();
    // `${file:rules.txt}` is relative to the working directory, so name it absolutely.
    let overlay = format!("yaml:rules: ${{file:{}}}", rules.display());
    let resolved = resolve(&[&base_uri, &empty_path, &overlay], &[], []).expect("resolves");
    assert_eq!(
        resolved.value.to_json(),
        json!({"server": {"port": 1}, "rules": "line one\nline two\n"})
    );
    assert_eq!(resolved.watched_files, [base, empty, rules]);
}

#[test]
fn a_missing_file_names_the_path() {
    let dir = TempDir::new("missing");
    let missing = dir.path().join("nope.yaml");
    let error = resolve(&[&format!("file:{}", missing.display())], &[], []).expect_err("missing");
    assert!(matches!(
        &error,
        ResolveError::Retrieve {
            source: ProviderError::File(FileError::Read { .. }),
            ..
        }
    ));
    assert!(
        error
            .to_string()
            .contains(&format!("unable to read the file {}", missing.display())),
        "{error}"
    );
}

#[test]
fn a_source_must_be_a_map() {
    let error = resolve(&["yaml:[1, 2]"], &[], []).expect_err("a list");
    assert_eq!(
        error.to_string(),
        "yaml:[1, 2]: retrieved a list, but a configuration source must be a map"
    );
    let error = resolve(&["yaml:a: b: c"], &[], []).expect_err("invalid yaml");
    assert!(
        error
            .to_string()
            .contains("(assuming string type since contents are not valid YAML"),
        "{error}"
    );
}

#[test]
fn env_sources_hold_yaml_and_an_unset_one_is_empty_with_a_warning() {
    let resolved = resolve(
        &["env:HOTRULE_CONFIG"],
        &[("HOTRULE_CONFIG", "server: {port: 3}")],
        [],
    )
    .expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"server": {"port": 3}}));
    assert!(resolved.warnings.is_empty(), "{:?}", resolved.warnings);
    // As the Collector: an empty configuration, and a warning naming the variable.
    let resolved = resolve(&["env:HOTRULE_CONFIG"], &[], []).expect("an unset source is empty");
    assert_eq!(resolved.value.to_json(), json!({}));
    assert_eq!(
        resolved.warnings,
        vec!["source `env:HOTRULE_CONFIG`: environment variable `HOTRULE_CONFIG` is not set; the source is empty".to_string()]
    );
    // The sources after it still count.
    let resolved = resolve(&["env:UNSET", "env:SET"], &[("SET", "a: 1")], []).expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"a": 1}));
    // `env:X:?message` still refuses.
    let error = resolve(&["env:HOTRULE_CONFIG:?say where"], &[], []).expect_err("required");
    assert!(matches!(&error, ResolveError::Retrieve { source: ProviderError::Env(EnvError::Required { .. }), .. }), "{error}");
}

#[test]
fn builder_rejects_bad_uris_unknown_schemes_and_too_many_sources() {
    let error = resolve(&["1x:foo"], &[], []).expect_err("bad scheme");
    assert!(matches!(
        error,
        ResolveError::BadUri(UriError::BadScheme { .. })
    ));
    let error = resolve(&["vault:secret/x"], &[], []).expect_err("unknown scheme");
    assert_eq!(
        error.to_string(),
        "vault:secret/x: scheme `vault` of `vault:secret/x` is not supported; known schemes: env, file, http, https, mem, yaml"
    );
    let many: Vec<String> = (0..101).map(|index| format!("yaml:k{index}: 1")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert!(matches!(
        resolve(&many, &[], []),
        Err(ResolveError::TooManyUris {
            count: 101,
            limit: 100
        })
    ));
    assert!(resolve(&many[..100], &[], []).is_ok());
    assert!(matches!(resolve(&[], &[], []), Err(ResolveError::NoUris)));
    let twice = builder(&["mem:a"], &[], [])
        .provider(MemoryProvider::new([]))
        .build();
    assert!(matches!(twice, Err(ResolveError::DuplicateScheme { scheme }) if scheme == "mem"));
    let no_env = Resolver::builder()
        .uri("mem:a")
        .provider(MemoryProvider::new([]))
        .build();
    assert!(matches!(
        no_env,
        Err(ResolveError::DefaultSchemeNotRegistered { .. })
    ));
}

#[test]
fn set_flags_become_yaml_sources_that_win() {
    let set = set_to_yaml_uri("server.tls.enabled=true").expect("valid flag");
    assert_eq!(set, "yaml:server::tls::enabled: true");
    let resolved = resolve(
        &["mem:a", &set],
        &[],
        [("a", "server: {tls: {enabled: false, cert: c}}\n")],
    )
    .expect("ok");
    assert_eq!(
        resolved.value.to_json(),
        json!({"server": {"tls": {"enabled": true, "cert": "c"}}})
    );
    assert_eq!(resolved.origins.get("server.tls.enabled"), Some(&set));
}

fn renamed(document: &str) -> Result<crate::Resolved, ResolveError> {
    builder(&["mem:doc"], &[], [("doc", document)])
        .converter(RenameKeys::new([
            ("cluster.seed_nodes", "cluster.seeds"),
            ("admin_port", "http.admin.port"),
        ]))
        .build()
        .expect("builds")
        .resolve()
}

#[test]
fn rename_keys_moves_deprecated_keys_with_their_origins() {
    let resolved =
        renamed("cluster: {seed_nodes: [a, b], name: c}\nadmin_port: 9\nhttp: {data_port: 8}\n")
            .expect("ok");
    assert_eq!(
        resolved.value.to_json(),
        json!({"cluster": {"name": "c", "seeds": ["a", "b"]}, "http": {"data_port": 8, "admin": {"port": 9}}})
    );
    assert_eq!(
        resolved.origins.get("cluster.seeds.1").map(String::as_str),
        Some("mem:doc")
    );
    assert_eq!(
        resolved.origins.get("http.admin.port").map(String::as_str),
        Some("mem:doc")
    );
    assert!(!resolved.origins.contains_key("admin_port"));
    assert_eq!(
        resolved.warnings,
        [
            "`cluster.seed_nodes` is deprecated; its value was moved to `cluster.seeds`",
            "`admin_port` is deprecated; its value was moved to `http.admin.port`",
        ]
    );
}

#[test]
fn rename_keys_prefers_the_new_key_when_both_are_set() {
    let resolved = renamed("cluster: {seed_nodes: [old], seeds: [new]}\n").expect("ok");
    assert_eq!(
        resolved.value.to_json(),
        json!({"cluster": {"seeds": ["new"]}})
    );
    assert_eq!(
        resolved.warnings,
        [
            "`cluster.seed_nodes` is deprecated and was ignored because `cluster.seeds` is also set; remove `cluster.seed_nodes`"
        ]
    );
    let untouched = renamed("cluster: {seeds: [new]}\n").expect("ok");
    assert!(untouched.warnings.is_empty());
}

#[test]
fn rename_keys_refuses_to_overwrite_a_scalar_on_the_way() {
    let error = renamed("admin_port: 9\nhttp: 8080\n").expect_err("http is a scalar");
    assert!(
        matches!(&error, ResolveError::Convert(ConvertError::Blocked { blocked_at, .. }) if blocked_at == "http")
    );
}

#[test]
fn printing_with_origins_and_redaction() {
    let resolved = resolve(
        &["mem:a", "yaml:auth::token: s3cr3t"],
        &[],
        [(
            "a",
            "auth: {user: u, token: t}\npeers: [{host: a, port: 1}]\n",
        )],
    )
    .expect("resolves");
    let shown = redact(&resolved.value, |path| path.ends_with("token"));
    assert_eq!(
        shown.get_path("auth.token"),
        Some(&Value::String("[REDACTED]".into()))
    );
    assert_eq!(
        to_yaml_string(&shown, Some(&resolved.origins)),
        "auth:\n  user: u  # from mem:a\n  token: \"[REDACTED]\"  # from yaml:auth::token: s3cr3t\n\
         peers:\n  - host: a  # from mem:a\n    port: 1  # from mem:a\n"
    );
    assert_eq!(to_yaml_string(&shown, None).lines().count(), 6);
    // Inline sources spell out their values; the origins of secrets are masked too.
    let origins = redact_origins(&resolved.origins, |path| path.ends_with("token"));
    assert_eq!(
        origins.get("auth.token").map(String::as_str),
        Some("yaml:auth::token: [REDACTED]")
    );
    assert_eq!(origins.get("auth.user").map(String::as_str), Some("mem:a"));
    // A secret held as a map or an inferred value disappears entirely, text included.
    let nested = crate::parse_yaml("creds: {a: 1}\nport: 0123\n").expect("valid");
    let hidden = redact(&nested, |path| path == "creds" || path == "port");
    assert_eq!(
        hidden.to_json(),
        json!({"creds": "[REDACTED]", "port": "[REDACTED]"})
    );
}

#[test]
fn decoding_into_typed_config_reports_the_key_path() {
    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Server {
        port: u16,
        mode: Mode,
        tags: Vec<String>,
        timeout: Option<u64>,
    }
    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Leader,
        Follower,
    }
    #[derive(Debug, Deserialize, PartialEq)]
    struct Node {
        server: Server,
    }
    let env = Arc::new(MapEnv::new([("PORT", "8080")]));
    let resolved = Resolver::builder()
        .uri("yaml:server: {port: '${env:PORT}', mode: follower, tags: [a, 1], timeout: ~}")
        .standard_providers(env)
        .build()
        .expect("builds")
        .resolve()
        .expect("resolves");
    let node: Node = resolved.decode().expect("decodes");
    let expected = Server {
        port: 8080,
        mode: Mode::Follower,
        tags: vec!["a".into(), "1".into()],
        timeout: None,
    };
    assert_eq!(node, Node { server: expected });

    let bad = resolve(
        &["yaml:server: {port: 70000, mode: leader, tags: []}"],
        &[],
        [],
    )
    .expect("resolves");
    let error = bad.decode::<Node>().expect_err("out of range");
    assert_eq!(
        error.to_string(),
        "`server.port`: invalid value: integer `70000`, expected u16"
    );
    let unknown = resolve(
        &["yaml:server: {port: 1, mode: leader, tags: [], extra: 1}"],
        &[],
        [],
    )
    .expect("resolves");
    let error = unknown.decode::<Node>().expect_err("unknown field");
    assert!(
        error
            .to_string()
            .starts_with("`server`: unknown field `extra`"),
        "{error}"
    );
}
