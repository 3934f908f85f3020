//! `${...}` expansion: escapes, defaults, nesting, depth limit, typing, origins, unset variables.

use serde::Deserialize;
use serde_json::json;

use super::{builder, resolve};
use crate::{ExpandError, ProviderError, ResolveError, Value};

fn expand_one(text: &str, env: &[(&str, &str)]) -> Result<Value, ResolveError> {
    let document = format!("v: {text}\n");
    let resolved = resolve(&["mem:doc"], env, [("doc", document.as_str())])?;
    Ok(resolved.value.get_path("v").cloned().unwrap_or(Value::Null))
}

fn expand_json(text: &str, env: &[(&str, &str)]) -> serde_json::Value {
    expand_one(text, env).expect("expands").to_json()
}

#[test]
fn dollar_dollar_escapes_a_reference_and_a_dollar() {
    let env = [("A", "x"), ("PORT", "80")];
    assert_eq!(expand_json("\"$${env:A}\"", &env), json!("${env:A}"));
    assert_eq!(expand_json("p@s$$w0rd", &env), json!("p@s$w0rd"));
    assert_eq!(expand_json("p@s$w0rd", &env), json!("p@s$w0rd"));
    assert_eq!(expand_json("\"$$$${env:A}\"", &env), json!("$${env:A}"));
    // Three dollars: an escaped dollar, then a real reference.
    assert_eq!(expand_json("\"$$${env:A}\"", &env), json!("$x"));
    // Collector bug #15867: the escaped reference must not stop later ones.
    assert_eq!(
        expand_json("\"$${env:A}:${env:PORT}\"", &env),
        json!("${env:A}:80")
    );
}

#[test]
fn bare_dollar_names_are_not_expanded_and_braces_alone_are_text() {
    let env = [("HOME", "/root")];
    assert_eq!(expand_json("$HOME/x", &env), json!("$HOME/x"));
    assert_eq!(expand_json("\"{a}\"", &env), json!("{a}"));
    assert_eq!(expand_json("\"a}b${\"", &env), json!("a}b${"));
}

#[test]
fn bare_names_use_the_default_scheme_or_stay_text_without_one() {
    assert_eq!(expand_json("\"${HOST}:1\"", &[("HOST", "h")]), json!("h:1"));
    let resolved = builder(
        &["mem:doc"],
        &[("HOST", "h")],
        [("doc", "v: \"${HOST}\"\n")],
    )
    .default_scheme(None)
    .build()
    .expect("builds")
    .resolve()
    .expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"v": "${HOST}"}));
}

#[test]
fn env_defaults_apply_only_when_unset() {
    assert_eq!(expand_json("${env:PORT:-9090}", &[]), json!(9090));
    assert_eq!(expand_json("${env:PORT:-9090}", &[("PORT", "1")]), json!(1));
    assert_eq!(expand_json("\"${env:NAME:-}x\"", &[]), json!("x"));
    assert_eq!(
        expand_json("${env:URL:-http://h:1/p}", &[]),
        json!("http://h:1/p")
    );
}

#[test]
fn nested_references_expand_innermost_first() {
    let env = [
        ("WHICH", "TARGET"),
        ("TARGET", "found"),
        ("PREFIX", "TAR"),
        ("SUFFIX", "GET"),
    ];
    assert_eq!(expand_json("${env:${env:WHICH}}", &env), json!("found"));
    assert_eq!(
        expand_json("\"<${env:${env:PREFIX}${env:SUFFIX}}>\"", &env),
        json!("<found>")
    );
}

#[test]
fn retrieved_values_are_expanded_again() {
    let env = [("OUTER", "${env:INNER}"), ("INNER", "42")];
    assert_eq!(expand_json("${env:OUTER}", &env), json!(42));
    let resolved = resolve(
        &["mem:doc"],
        &[("P", "7")],
        [("doc", "v: ${mem:part}\n"), ("part", "port: ${env:P}\n")],
    )
    .expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"v": {"port": 7}}));
}

#[test]
fn runaway_recursion_stops_at_the_depth_limit_naming_the_key() {
    let document = "server:\n  listen: ${env:LOOP}\n";
    let error = resolve(
        &["mem:doc"],
        &[("LOOP", "${env:LOOP}")],
        [("doc", document)],
    )
    .expect_err("loops");
    assert!(
        matches!(&error, ResolveError::Expand(ExpandError::TooDeep { key, limit: 10 }) if key == "server.listen")
    );
    assert_eq!(
        error.to_string(),
        "expanding `server.listen`: more than 10 levels of recursive expansion"
    );

    let chain = [("A1", "${env:A2}"), ("A2", "${env:A3}"), ("A3", "done")];
    assert_eq!(expand_json("${env:A1}", &chain), json!("done"));
    let shallow = builder(&["mem:doc"], &chain, [("doc", "v: ${env:A1}\n")])
        .max_expansion_depth(2)
        .build()
        .expect("builds");
    assert!(matches!(
        shallow.resolve(),
        Err(ResolveError::Expand(ExpandError::TooDeep { limit: 2, .. }))
    ));
}

#[test]
fn a_whole_value_reference_takes_the_retrieved_type_and_embedded_ones_stay_text() {
    let env = [
        ("PORT", "8080"),
        ("ON", "true"),
        ("LIST", "[a, b]"),
        ("MAP", "{k: v}"),
        ("RATIO", "0.5"),
    ];
    assert_eq!(expand_json("${env:PORT}", &env), json!(8080));
    assert_eq!(expand_json("${env:ON}", &env), json!(true));
    assert_eq!(expand_json("${env:RATIO}", &env), json!(0.5));
    assert_eq!(expand_json("${env:LIST}", &env), json!(["a", "b"]));
    assert_eq!(expand_json("${env:MAP}", &env), json!({"k": "v"}));
    assert_eq!(
        expand_json("\"port ${env:PORT}\"", &env),
        json!("port 8080")
    );
    assert_eq!(
        expand_json("\"${env:PORT}${env:PORT}\"", &env),
        json!("80808080")
    );
    assert_eq!(expand_json("\"[${env:LIST}]\"", &env), json!("[[a, b]]"));
}

#[test]
fn leading_zeros_survive_for_string_fields() {
    #[derive(Deserialize)]
    struct Typed {
        quoted: String,
        plain: String,
        plain_number: i64,
        from_env: String,
        from_env_number: u32,
    }
    let document = "quoted: \"0123\"\nplain: 0123\nplain_number: 0123\nfrom_env: ${env:CODE}\nfrom_env_number: ${env:CODE}\n";
    let resolved =
        resolve(&["mem:doc"], &[("CODE", "0123")], [("doc", document)]).expect("resolves");
    assert_eq!(
        resolved.value.get_path("quoted"),
        Some(&Value::String("0123".into()))
    );
    let typed: Typed = resolved.decode().expect("decodes");
    assert_eq!(typed.quoted, "0123");
    assert_eq!(typed.plain, "0123");
    // YAML 1.1 octal in a typed field, as the Collector reads it; the text in a string field.
    assert_eq!(typed.plain_number, 83);
    assert_eq!(typed.from_env, "0123");
    assert_eq!(typed.from_env_number, 83);
    // A quoted "0123" is a string and nothing else.
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Strict {
        quoted: i64,
    }
    let error = resolved
        .decode::<Strict>()
        .expect_err("a quoted string is not an integer");
    assert!(
        error
            .to_string()
            .starts_with("`quoted`: invalid type: string \"0123\""),
        "{error}"
    );
}

#[test]
fn env_values_that_parse_as_strings_are_kept_verbatim() {
    assert_eq!(
        expand_json("${env:SECRET}", &[("SECRET", "p@ss # w0rd")]),
        json!("p@ss # w0rd")
    );
    assert_eq!(
        expand_json("${env:BROKEN}", &[("BROKEN", "a: b: c")]),
        json!("a: b: c")
    );
}

#[test]
fn unset_variables_become_null_or_empty_text_with_a_warning() {
    let resolved = resolve(
        &["mem:doc"],
        &[],
        [("doc", "whole: ${env:NOPE}\ntext: \"<${env:NOPE}>\"\n")],
    )
    .expect("resolves");
    assert_eq!(
        resolved.value.to_json(),
        json!({"whole": null, "text": "<>"})
    );
    assert_eq!(resolved.warnings.len(), 2, "{:?}", resolved.warnings);
    assert!(resolved.warnings[0].contains("`whole` references unset environment variable `NOPE`"));
    #[derive(Deserialize)]
    struct Typed {
        whole: Option<u16>,
    }
    assert_eq!(resolved.decode::<Typed>().expect("decodes").whole, None);
}

#[test]
fn reference_errors_name_the_key() {
    let error = expand_one("\"${x:foo}\"", &[]).expect_err("scheme too short");
    assert!(
        error
            .to_string()
            .starts_with("expanding `v`: invalid reference ${x:foo}"),
        "{error}"
    );
    let error = expand_one("\"a ${vault:secret/x}\"", &[]).expect_err("unknown scheme");
    assert!(matches!(
        &error,
        ResolveError::Expand(ExpandError::Retrieve {
            source: ProviderError::UnknownScheme { .. },
            ..
        })
    ));
    assert!(
        error
            .to_string()
            .contains("known schemes: env, file, http, https, mem, yaml"),
        "{error}"
    );
    let error = expand_one("\"${env:A$B}\"", &[]).expect_err("dollar in uri");
    assert!(matches!(
        error,
        ResolveError::Expand(ExpandError::Dollar { .. })
    ));
    let error = expand_one("${1}", &[]).expect_err("not a variable name");
    assert!(error.to_string().contains("invalid name"), "{error}");
}

#[test]
fn expansion_does_not_touch_keys_and_reaches_into_lists() {
    let resolved = resolve(
        &["mem:doc"],
        &[("A", "1")],
        [("doc", "\"${env:A}\": [\"${env:A}\", {k: \"${env:A}\"}]\n")],
    )
    .expect("ok");
    assert_eq!(resolved.value.to_json(), json!({"${env:A}": [1, {"k": 1}]}));
}

#[test]
fn expanded_leaves_record_the_reference_in_their_origin() {
    let resolved = resolve(
        &["mem:doc"],
        &[("PORT", "1"), ("TLS", "{cert: /c.pem}")],
        [("doc", "port: ${env:PORT}\ntls: ${env:TLS}\nplain: x\n")],
    )
    .expect("resolves");
    assert_eq!(
        resolved.origins.get("port").map(String::as_str),
        Some("mem:doc via ${env:PORT}")
    );
    assert_eq!(
        resolved.origins.get("tls.cert").map(String::as_str),
        Some("mem:doc via ${env:TLS}")
    );
    assert_eq!(resolved.origins.get("tls"), None);
    assert_eq!(
        resolved.origins.get("plain").map(String::as_str),
        Some("mem:doc")
    );
}

#[test]
fn odd_strings_never_panic() {
    let odd = [
        "${",
        "}",
        "}${",
        "${}",
        "$${}",
        "${env:}",
        "${:x}",
        "$$$",
        "${env:A}}}",
        "{{${env:A}",
        "é${env:A}ü",
        "${env:A",
        "${${${}}}",
    ];
    for text in odd {
        let document = format!("v: {}\n", serde_json::to_string(text).expect("json string"));
        let _ = resolve(&["mem:doc"], &[("A", "a")], [("doc", document.as_str())]);
    }
    assert_eq!(expand_json("\"é${env:A}ü}\"", &[("A", "a")]), json!("éaü}"));
}
