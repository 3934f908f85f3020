//! A replay of the Collector's `confmap/internal/e2e` tests (`types_test.go`, `expand_test.go`,
//! `nil_test.go`) and its env provider tests, with their testdata inlined. Each test is named after
//! the upstream function it mirrors; where hotrule differs on purpose the case says so.

use serde::Deserialize;
use serde_json::json;

use super::{TempDir, builder, resolve};
use crate::{ExpandError, ResolveError, Resolved};

/// upstream `types_expand.yaml` and `types_expand_inline.yaml`.
const TYPES_EXPAND: &str = "field: ${env:ENV}\n";
const TYPES_EXPAND_INLINE: &str = "field: \"inline field with ${env:ENV} expansion\"\n";

#[derive(Debug, Deserialize)]
struct TargetConfig<T> {
    field: T,
}

/// Upstream's `TargetField` constants (`int_field`, `string_field`, ...).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug)]
enum Target {
    IntField,
    StringField,
    BoolField,
    InlineStringField,
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    Int(i64),
    Str(&'static str),
    Bool(bool),
    /// Decoding fails with a message containing this.
    UnmarshalErr(&'static str),
    /// Resolving fails with a message containing this.
    ResolveErr(&'static str),
}

/// Resolves the upstream testdata file for `target` with `env`, decodes `field`, checks `expect`.
fn check(env: &[(&str, &str)], target: Target, expect: Expect) -> Result<(), String> {
    let document = match target {
        Target::InlineStringField => TYPES_EXPAND_INLINE,
        _ => TYPES_EXPAND,
    };
    let resolved = match (resolve(&["mem:doc"], env, [("doc", document)]), expect) {
        (Err(error), Expect::ResolveErr(want)) if error.to_string().contains(want) => return Ok(()),
        (Err(error), _) => return Err(format!("resolve failed: {error}")),
        (Ok(_), Expect::ResolveErr(want)) => return Err(format!("resolved, want error {want:?}")),
        (Ok(resolved), _) => resolved,
    };
    let got = match target {
        Target::IntField => decode::<i64>(&resolved).map(|v| json!(v)),
        Target::BoolField => decode::<bool>(&resolved).map(|v| json!(v)),
        Target::StringField | Target::InlineStringField => {
            decode::<String>(&resolved).map(|v| json!(v))
        }
    };
    match (got, expect) {
        (Err(error), Expect::UnmarshalErr(want)) if error.contains(want) => Ok(()),
        (Ok(got), Expect::Int(want)) if got == json!(want) => Ok(()),
        (Ok(got), Expect::Str(want)) if got == json!(want) => Ok(()),
        (Ok(got), Expect::Bool(want)) if got == json!(want) => Ok(()),
        (got, want) => Err(format!("got {got:?}, want {want:?}")),
    }
}

fn decode<T: for<'de> Deserialize<'de>>(resolved: &Resolved) -> Result<T, String> {
    resolved
        .decode::<TargetConfig<T>>()
        .map(|config| config.field)
        .map_err(|error| error.to_string())
}

/// upstream `TestStrictTypeCasting`, every case, each both "direct" (`ENV=value`) and "indirect"
/// (`ENV=${env:ENV2}`, `ENV2=value`), as upstream runs them.
#[test]
fn test_strict_type_casting() {
    use Expect::*;
    use Target::{BoolField, InlineStringField, IntField, StringField};
    #[rustfmt::skip]
    let cases: &[(&str, Target, Expect)] = &[
        ("123", IntField, Int(123)),
        ("123", StringField, Str("123")),
        ("123", InlineStringField, Str("inline field with 123 expansion")),
        // YAML 1.1 octal, as upstream reads it.
        ("0123", IntField, Int(83)),
        ("0123", StringField, Str("0123")),
        ("0123", InlineStringField, Str("inline field with 0123 expansion")),
        ("0xdeadbeef", IntField, Int(3735928559)),
        ("0xdeadbeef", StringField, Str("0xdeadbeef")),
        ("0xdeadbeef", InlineStringField, Str("inline field with 0xdeadbeef expansion")),
        ("\"0123\"", StringField, Str("\"0123\"")),
        ("\"0123\"", IntField, UnmarshalErr("invalid type: string")),
        ("\"0123\"", InlineStringField, Str("inline field with \"0123\" expansion")),
        ("!!str 0123", StringField, Str("!!str 0123")),
        ("!!str 0123", InlineStringField, Str("inline field with !!str 0123 expansion")),
        ("t", BoolField, UnmarshalErr("invalid type: string \"t\"")),
        ("23", BoolField, UnmarshalErr("invalid type: integer `23`")),
        ("{\"field\": 123}", InlineStringField, Str("inline field with {\"field\": 123} expansion")),
        ("1111:1111:1111:1111:1111::", InlineStringField, Str("inline field with 1111:1111:1111:1111:1111:: expansion")),
        ("1111:1111:1111:1111:1111::", StringField, Str("1111:1111:1111:1111:1111::")),
        ("2006-01-02T15:04:05Z07:00", StringField, Str("2006-01-02T15:04:05Z07:00")),
        ("2006-01-02T15:04:05Z07:00", InlineStringField, Str("inline field with 2006-01-02T15:04:05Z07:00 expansion")),
        // Issue 10787: a reference inside a comment of a whole value does not stop loading; the
        // text (comment included) is dropped, so a string field has nothing to read.
        ("true # comment with a ${env:hello.world} reference", BoolField, Bool(true)),
        ("true # comment with a ${env:hello.world} reference", StringField, UnmarshalErr("invalid type: boolean `true`")),
        // Embedded in longer text, the value is text, comment included, and is expanded as text.
        ("true # comment with a ${env:hello.world} reference", InlineStringField, ResolveErr("`hello.world` has an invalid name")),
    ];
    let mut failures = Vec::new();
    for (value, target, expect) in cases {
        let direct = [("ENV", *value)];
        let indirect = [("ENV", "${env:ENV2}"), ("ENV2", *value)];
        for (how, env) in [("direct", &direct[..]), ("indirect", &indirect[..])] {
            if let Err(why) = check(env, *target, *expect) {
                failures.push(format!("{value}/{target:?}/{how}: {why}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// upstream `TestRecursiveInlineString`.
#[test]
fn test_recursive_inline_string() {
    let cases = [
        (
            "123",
            Target::StringField,
            "The value The value 123 is wrapped is wrapped",
        ),
        (
            "123",
            Target::InlineStringField,
            "inline field with The value The value 123 is wrapped is wrapped expansion",
        ),
        (
            "opentelemetry",
            Target::StringField,
            "The value The value opentelemetry is wrapped is wrapped",
        ),
        (
            "opentelemetry",
            Target::InlineStringField,
            "inline field with The value The value opentelemetry is wrapped is wrapped expansion",
        ),
    ];
    for (value, target, expected) in cases {
        let env = [
            ("ENV", "The value ${env:ENV2} is wrapped"),
            ("ENV2", "The value ${env:ENV3} is wrapped"),
            ("ENV3", value),
        ];
        check(&env, target, Expect::Str(expected))
            .unwrap_or_else(|why| panic!("{value}/{target:?}: {why}"));
    }
}

/// upstream `TestRecursiveMaps`: a map read whole keeps its expanded text for a string field.
#[test]
fn test_recursive_maps() {
    let env = [
        (
            "ENV",
            "{env: \"${env:ENV2}\", inline: \"inline ${env:ENV2}\"}",
        ),
        ("ENV2", "{env2: \"${env:ENV3}\"}"),
        ("ENV3", "{value: 123}"),
    ];
    let resolved = resolve(&["mem:doc"], &env, [("doc", TYPES_EXPAND)]).expect("resolves");
    #[derive(Debug, Deserialize, PartialEq)]
    struct Value {
        value: i64,
    }
    #[derive(Debug, Deserialize, PartialEq)]
    struct Env2 {
        env2: Value,
    }
    #[derive(Debug, Deserialize, PartialEq)]
    struct Env {
        env: Env2,
        inline: String,
    }
    let typed: TargetConfig<Env> = resolved.decode().expect("decodes");
    assert_eq!(
        typed.field,
        Env {
            env: Env2 {
                env2: Value { value: 123 }
            },
            inline: "inline {env2: \"{value: 123}\"}".into(),
        }
    );
    assert_eq!(
        decode::<String>(&resolved).expect("a string field reads the text"),
        "{env: \"{env2: \"{value: 123}\"}\", inline: \"inline {env2: \"{value: 123}\"}\"}"
    );
}

/// upstream `TestIssue10787` with `issue-10787-main.yaml` and `issue-10787-snippet.yaml`: a comment
/// holding `${hello.world}` in a file pulled in whole must not stop loading.
#[test]
fn test_issue_10787() {
    let dir = TempDir::new("issue-10787");
    let snippet = dir.write(
        "issue-10787-snippet.yaml",
        "# ${hello.world}\nlogging:\n  verbosity: detailed\n",
    );
    let main = dir.write(
        "issue-10787-main.yaml",
        &format!(
            "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 0.0.0.0:4317\n      http:\n        endpoint: 0.0.0.0:4318\n\
             processors:\n  batch:\n\nexporters:\n  ${{file:{}}}\n\nservice:\n  telemetry:\n    metrics:\n      level: detailed\n\
             \x20 pipelines:\n    traces:\n      receivers: [otlp]\n      processors: [batch]\n      exporters: [logging]\n",
            snippet.display()
        ),
    );
    let uri = format!("file:{}", main.display());
    let resolved = resolve(&[uri.as_str()], &[], []).expect("a comment does not stop loading");
    assert_eq!(
        resolved.value.to_json(),
        json!({
            "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": "0.0.0.0:4317"}, "http": {"endpoint": "0.0.0.0:4318"}}}},
            "processors": {"batch": null},
            "exporters": {"logging": {"verbosity": "detailed"}},
            "service": {
                "telemetry": {"metrics": {"level": "detailed"}},
                "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"], "exporters": ["logging"]}},
            },
        })
    );
    assert!(resolved.warnings.is_empty(), "{:?}", resolved.warnings);
    assert!(
        resolved.watched_files.contains(&snippet),
        "the snippet is watched"
    );
    // The same through a variable, and a comment naming an unset variable warns about nothing.
    let resolved = resolve(
        &["mem:doc"],
        &[(
            "SNIPPET",
            "# ${env:NOT_SET} ${hello.world}\nlogging: {verbosity: detailed}\n",
        )],
        [("doc", "exporters: ${env:SNIPPET}\n")],
    )
    .expect("a comment in a variable does not stop loading");
    assert_eq!(
        resolved.value.to_json(),
        json!({"exporters": {"logging": {"verbosity": "detailed"}}})
    );
    assert!(resolved.warnings.is_empty(), "{:?}", resolved.warnings);
    // A reference that is part of the value still fails loudly.
    let error = resolve(
        &["mem:doc"],
        &[("SNIPPET", "logging: {verbosity: \"${hello.world}\"}\n")],
        [("doc", "exporters: ${env:SNIPPET}\n")],
    )
    .expect_err("a bad reference in the value");
    assert!(
        matches!(&error, ResolveError::Expand(ExpandError::Retrieve { key, .. }) if key == "exporters.logging.verbosity"),
        "{error}"
    );
}

/// upstream `Test_EscapedEnvVars_NoDefaultScheme` and `Test_EscapedEnvVars_DefaultScheme` with
/// `expand-escaped-env.yaml` (keys 16 to 20 read the variables upstream sets for them).
#[test]
fn test_escaped_env_vars() {
    const DOCUMENT: &str = "test_map:\n\
        \x20 # $$ -> escaped $\n  key1: \"$$ENV_VALUE\"\n\
        \x20 # $$$$ -> two escaped $\n  key2: \"$$$$ENV_VALUE\"\n\
        \x20 key3: \"$$${ENV_VALUE}\"\n  key4: \"some${ENV_VALUE}text\"\n  key5: \"some$${ENV_VALUE}text\"\n\
        \x20 key6: \"$${ONE}$${TWO}\"\n  key7: \"text$$\"\n  key8: \"$$\"\n  key9: \"$${1}$${env:2}\"\n\
        \x20 key10: \"some$${env:ENV_VALUE}text\"\n  key11: \"$${env:${ENV_VALUE}}\"\n\
        \x20 key12: \"$${env:$${ENV_VALUE}}\"\n  key13: \"env:MAP_VALUE_2}$${ENV_VALUE}{\"\n\
        \x20 key14: \"$$${env:ENV_VALUE}\"\n  key15: \"$ENV_VALUE\"\n\
        \x20 key16: ${env:ENV_LIST}\n  key17: ${env:ENV_MAP}\n  key18: ${env:ENV_NESTED_DOLLARSIGN}\n\
        \x20 key19: ${env:ENV_NESTED_DOLLARSIGN_ESCAPED}\n  key20: ${env:ENV_EXPAND_NESTED}\n";
    let value = "some expanded value";
    let env = [
        ("ENV_VALUE", value),
        (
            "ENV_LIST",
            "['$$ESCAPE_ME','$${ESCAPE_ME}','$${env:ESCAPE_ME}']",
        ),
        (
            "ENV_MAP",
            "{'key1':'$$ESCAPE_ME','key2':'$${ESCAPE_ME}','key3':'$${env:ESCAPE_ME}'}",
        ),
        ("ENV_NESTED_DOLLARSIGN", "here is 1 $$"),
        ("ENV_NESTED_DOLLARSIGN_ESCAPED", "here are 2 $$$"),
        (
            "ENV_EXPAND_NESTED",
            "${env:ENV_VALUE} came from nested expansion",
        ),
    ];
    let common = json!({
        "key1": "$ENV_VALUE", "key2": "$$ENV_VALUE", "key5": "some${ENV_VALUE}text",
        "key6": "${ONE}${TWO}", "key7": "text$", "key8": "$", "key9": "${1}${env:2}",
        "key10": "some${env:ENV_VALUE}text", "key12": "${env:${ENV_VALUE}}",
        "key13": "env:MAP_VALUE_2}${ENV_VALUE}{", "key14": format!("${value}"), "key15": "$ENV_VALUE",
        "key16": ["$ESCAPE_ME", "${ESCAPE_ME}", "${env:ESCAPE_ME}"],
        "key17": {"key1": "$ESCAPE_ME", "key2": "${ESCAPE_ME}", "key3": "${env:ESCAPE_ME}"},
        "key18": "here is 1 $", "key19": "here are 2 $$",
        "key20": "some expanded value came from nested expansion",
    });
    let without_default = json!({
        "key3": "$${ENV_VALUE}", "key4": "some${ENV_VALUE}text", "key11": "${env:${ENV_VALUE}}",
    });
    let with_default = json!({
        "key3": format!("${value}"), "key4": format!("some{value}text"),
        "key11": format!("${{env:{value}}}"),
    });
    for (default_scheme, specific) in [(None, without_default), (Some("env"), with_default)] {
        let mut expected = common.clone();
        let (Some(expected_map), Some(specific)) = (expected.as_object_mut(), specific.as_object())
        else {
            unreachable!("objects")
        };
        expected_map.extend(specific.clone());
        let resolved = builder(&["mem:doc"], &env, [("doc", DOCUMENT)])
            .default_scheme(default_scheme)
            .build()
            .expect("builds")
            .resolve()
            .expect("resolves");
        assert_eq!(
            resolved.value.to_json(),
            json!({ "test_map": expected }),
            "default scheme {default_scheme:?}"
        );
    }
}

/// upstream `TestNilToStringMap` (`subsection_*.yaml`) and `TestNilToStringMapEnv`
/// (`types_map.yaml` with `VALUE` set to `null`, `{}`, or empty): the tree keeps the null, and a
/// typed decode treats it as unset (the field keeps its default) — see `null.rs`.
#[test]
fn test_nil_to_string_map() {
    let files = [
        (
            "subsection_null.yaml",
            "field:\n  key: null\n",
            json!({"field": {"key": null}}),
        ),
        (
            "subsection_empty_map.yaml",
            "field:\n  key: {}\n",
            json!({"field": {"key": {}}}),
        ),
        (
            "subsection_set_but_empty.yaml",
            "field:\n  key:\n",
            json!({"field": {"key": null}}),
        ),
        ("subsection_unset.yaml", "field:\n", json!({"field": null})),
        (
            "subsection_unset_empty_map.yaml",
            "field: {}\n",
            json!({"field": {}}),
        ),
    ];
    for (name, text, expected) in files {
        let resolved = resolve(&["mem:doc"], &[], [("doc", text)]).expect(name);
        assert_eq!(resolved.value.to_json(), expected, "{name}");
    }
    for (value, expected) in [
        ("null", json!({"field": {"key": null}})),
        ("{}", json!({"field": {"key": {}}})),
        ("", json!({"field": {"key": null}})),
    ] {
        let resolved = resolve(
            &["mem:doc"],
            &[("VALUE", value)],
            [("doc", "field:\n  key: ${env:VALUE}\n")],
        )
        .expect(value);
        assert_eq!(resolved.value.to_json(), expected, "VALUE={value:?}");
    }
}

/// upstream envprovider `TestUnsetEnvWithLoggerWarn` and `TestEnvWithErrorMessage`, through the
/// resolver: an unset variable as a whole source (`--config env:UNSET`) is an empty config and a
/// warning; inside a value it reads null and warns. `${env:X:?message}` fails the resolve naming
/// the key.
#[test]
fn test_unset_env_with_logger_warn_and_error_message() {
    let resolved = resolve(&["env:UNSET"], &[], []).expect("an empty config");
    assert_eq!(resolved.value.to_json(), json!({}));
    assert_eq!(resolved.warnings.len(), 1, "{:?}", resolved.warnings);
    assert!(resolved.warnings[0].contains("`UNSET`"), "{:?}", resolved.warnings);
    let resolved = resolve(&["mem:doc"], &[], [("doc", "port: ${env:UNSET}\n")]).expect("null");
    assert_eq!(resolved.value.to_json(), json!({"port": null}));
    assert_eq!(resolved.warnings.len(), 1, "{:?}", resolved.warnings);
    let error = resolve(
        &["mem:doc"],
        &[],
        [("doc", "server:\n  port: ${env:PORT:?set PORT}\n")],
    )
    .expect_err("required");
    assert_eq!(
        error.to_string(),
        "expanding `server.port`: ${env:PORT:?set PORT}: environment variable `PORT` is required: set PORT"
    );
    let resolved = resolve(
        &["mem:doc"],
        &[("PORT", "1")],
        [("doc", "port: ${env:PORT:?set PORT}\n")],
    )
    .expect("set");
    assert_eq!(resolved.value.to_json(), json!({"port": 1}));
}
