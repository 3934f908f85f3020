//! A replay of the Collector's `confmap/expand_test.go` through the resolver. Each test is named
//! after the upstream function it mirrors; table cases keep their upstream names. Where hotrule
//! differs on purpose, the case says so (and docs/configuration.md lists the difference).

use std::sync::Arc;

use serde_json::json;

use super::MemoryProvider;
use crate::{
    ExpandError, MapEnv, Provider, ProviderError, ResolveError, Resolver, ResolverBuilder,
    Retrieved, Uri, Value,
};

type Retrieve = dyn Fn(&Uri) -> Result<Retrieved, ProviderError> + Send + Sync;

/// A provider answering with a closure, like the upstream tests' `newFakeProvider`.
struct FakeProvider {
    scheme: &'static str,
    retrieve: Box<Retrieve>,
}

impl FakeProvider {
    fn new(
        scheme: &'static str,
        retrieve: impl Fn(&Uri) -> Result<Retrieved, ProviderError> + Send + Sync + 'static,
    ) -> FakeProvider {
        FakeProvider {
            scheme,
            retrieve: Box::new(retrieve),
        }
    }

    /// `test:X` retrieves the string `X` itself (upstream: `NewRetrieved(uri[5:])`).
    fn echo() -> FakeProvider {
        FakeProvider::new("test", |uri| {
            Ok(Retrieved::from_value(Value::String(
                uri.opaque().to_owned(),
            )))
        })
    }

    /// `test:X` fails with an error naming `case`.
    fn failing(case: &'static str) -> FakeProvider {
        FakeProvider::new("test", move |uri| {
            Err(ProviderError::Custom {
                uri: uri.to_string(),
                source: case.into(),
            })
        })
    }
}

impl Provider for FakeProvider {
    fn scheme(&self) -> &str {
        self.scheme
    }

    fn retrieve(&self, uri: &Uri) -> Result<Retrieved, ProviderError> {
        (self.retrieve)(uri)
    }
}

/// The variables of upstream's `newEnvProvider`, as the text an environment holds.
const ENV: [(&str, &str); 13] = [
    ("COMPLEX_VALUE", "[localhost:3042]"),
    ("HOST", "localhost"),
    ("TIMESTAMP", "2023-03-20T03:17:55.432328Z"),
    ("OS", "ubuntu"),
    ("PR", "amd"),
    ("PORT", "3044"),
    ("INT", "1"),
    ("INT32", "32"),
    ("INT64", "64"),
    ("FLOAT32", "3.25"),
    ("FLOAT64", "6.4"),
    ("BOOL", "true"),
    ("EXTRA", "some string"),
];

/// `mem:doc` holding `document`, the env provider over [`ENV`], and `extra`; no default scheme
/// unless `default_provider` (upstream: `DefaultScheme: "env"` only when the case asks for it).
fn builder(document: &str, default_provider: bool, extra: FakeProvider) -> ResolverBuilder {
    Resolver::builder()
        .uri("mem:doc")
        .standard_providers(Arc::new(MapEnv::new(ENV)))
        .provider(MemoryProvider::new([("doc", document)]))
        .provider(extra)
        .default_scheme(default_provider.then_some("env"))
}

fn resolve_json(document: &str, default_provider: bool) -> serde_json::Value {
    builder(document, default_provider, FakeProvider::echo())
        .build()
        .expect("builds")
        .resolve()
        .unwrap_or_else(|error| panic!("{document}: {error}"))
        .value
        .to_json()
}

/// upstream `TestResolverExpandStringValues`: every table case, by its upstream name.
#[test]
fn test_resolver_expand_string_values() {
    // (name, input, output, defaultProvider)
    #[rustfmt::skip]
    let cases: &[(&str, &str, serde_json::Value, bool)] = &[
        // Embedded.
        ("NoMatchOldStyle", "${HOST}:${PORT}", json!("${HOST}:${PORT}"), false),
        ("NoMatchOldStyleDefaultProvider", "${HOST}:${PORT}", json!("localhost:3044"), true),
        ("NoMatchOldStyleNoBrackets", "${HOST}:$PORT", json!("${HOST}:$PORT"), false),
        ("NoMatchOldStyleNoBracketsDefaultProvider", "${HOST}:$PORT", json!("localhost:$PORT"), true),
        ("ComplexValue", "${env:COMPLEX_VALUE}", json!(["localhost:3042"]), false),
        ("Embedded", "${env:HOST}:3043", json!("localhost:3043"), false),
        ("EmbeddedMulti", "${env:HOST}:${env:PORT}", json!("localhost:3044"), false),
        ("EmbeddedConcat", "https://${env:HOST}:3045", json!("https://localhost:3045"), false),
        ("EmbeddedNewAndOldStyle", "${env:HOST}:${PORT}", json!("localhost:${PORT}"), false),
        ("EmbeddedNewAndOldStyleDefaultProvider", "${env:HOST}:${PORT}", json!("localhost:3044"), true),
        ("Int", "test_${env:INT}", json!("test_1"), false),
        ("Int32", "test_${env:INT32}", json!("test_32"), false),
        ("Int64", "test_${env:INT64}", json!("test_64"), false),
        ("Float32", "test_${env:FLOAT32}", json!("test_3.25"), false),
        ("Float64", "test_${env:FLOAT64}", json!("test_6.4"), false),
        ("Bool", "test_${env:BOOL}", json!("test_true"), false),
        ("Timestamp", "test_${env:TIMESTAMP}", json!("test_2023-03-20T03:17:55.432328Z"), false),
        ("MultipleSameMatches", "test_${env:BOOL}_test_${env:BOOL}", json!("test_true_test_true"), false),
        // Nested.
        ("Nested", "${test:localhost:${env:PORT}}", json!("localhost:3044"), false),
        ("NestedDefaultProvider", "${test:localhost:${PORT}}", json!("localhost:3044"), true),
        ("EmbeddedInNested", "${test:${env:HOST}:${env:PORT}}", json!("localhost:3044"), false),
        ("EmbeddedInNestedDefaultProvider", "${test:${HOST}:${PORT}}", json!("localhost:3044"), true),
        ("EmbeddedAndNested", "${test:localhost:${env:PORT}}?os=${env:OS}", json!("localhost:3044?os=ubuntu"), false),
        ("NestedMultiple", "${test:1${test:2${test:3${test:4${test:5${test:6}}}}}}", json!("123456"), false),
        // No expand.
        ("NoMatchMissingOpeningBracket", "env:HOST}", json!("env:HOST}"), false),
        ("NoMatchMissingOpeningBracketDefaultProvider", "env:HOST}", json!("env:HOST}"), true),
        ("NoMatchMissingClosingBracket", "${HOST", json!("${HOST"), false),
        ("NoMatchMissingClosingBracketDefaultProvider", "${HOST", json!("${HOST"), true),
        ("NoMatchBracketsWithout$", "HO{ST}", json!("HO{ST}"), false),
        ("NoMatchBracketsWithout$DefaultProvider", "HO{ST}", json!("HO{ST}"), true),
        ("NoMatchOnlyMissingClosingBracket", "${env:HOST${env:PORT?os=${env:OS", json!("${env:HOST${env:PORT?os=${env:OS"), false),
        ("NoMatchOnlyMissingClosingBracketDefaultProvider", "${env:HOST${env:PORT?os=${env:OS", json!("${env:HOST${env:PORT?os=${env:OS"), true),
        ("NoMatchOnlyMissingOpeningBracket", "env:HOST}env:PORT}?os=env:OS}", json!("env:HOST}env:PORT}?os=env:OS}"), false),
        ("NoMatchOnlyMissingOpeningBracketDefaultProvider", "env:HOST}env:PORT}?os=env:OS}", json!("env:HOST}env:PORT}?os=env:OS}"), true),
        ("NoMatchCloseBeforeOpen", "env:HOST}${env:PORT", json!("env:HOST}${env:PORT"), false),
        ("NoMatchCloseBeforeOpenDefaultProvider", "env:HOST}${env:PORT", json!("env:HOST}${env:PORT"), true),
        ("NoMatchOldStyleNested", "${test:localhost:${PORT}}", json!("${test:localhost:${PORT}}"), false),
        // Partial expand.
        ("PartialMatchMissingOpeningBracketFirst", "env:HOST}${env:PORT}", json!("env:HOST}3044"), false),
        ("PartialMatchMissingOpeningBracketFirstDefaultProvider", "env:HOST}${PORT}", json!("env:HOST}3044"), true),
        ("PartialMatchMissingOpeningBracketLast", "${env:HOST}env:PORT}", json!("localhostenv:PORT}"), false),
        ("PartialMatchMissingClosingBracketFirst", "${env:HOST${env:PORT}", json!("${env:HOST3044"), false),
        ("PartialMatchMissingClosingBracketLast", "${env:HOST}${env:PORT", json!("localhost${env:PORT"), false),
        ("PartialMatchMultipleMissingOpen", "env:HOST}env:PORT}?os=${env:OS}", json!("env:HOST}env:PORT}?os=ubuntu"), false),
        ("PartialMatchMultipleMissingClosing", "${env:HOST${env:PORT?os=${env:OS}", json!("${env:HOST${env:PORT?os=ubuntu"), false),
        ("PartialMatchMoreClosingBrackets", "${env:HOST}}}}}}${env:PORT?os=${env:OS}", json!("localhost}}}}}${env:PORT?os=ubuntu"), false),
        ("PartialMatchMoreOpeningBrackets", "${env:HOST}${${${${${env:PORT}?os=${env:OS}", json!("localhost${${${${3044?os=ubuntu"), false),
        ("PartialMatchAlternatingMissingOpening", "env:HOST}${env:PORT}?os=env:OS}&pr=${env:PR}", json!("env:HOST}3044?os=env:OS}&pr=amd"), false),
        ("PartialMatchAlternatingMissingClosing", "${env:HOST${env:PORT}?os=${env:OS&pr=${env:PR}", json!("${env:HOST3044?os=${env:OS&pr=amd"), false),
        ("SchemeAfterNoSchemeIsExpanded", "${HOST}${env:PORT}", json!("${HOST}3044"), false),
        ("SchemeAfterNoSchemeIsExpandedDefaultProvider", "${HOST}${env:PORT}", json!("localhost3044"), true),
        ("SchemeBeforeNoSchemeIsExpanded", "${env:HOST}${PORT}", json!("localhost${PORT}"), false),
        ("SchemeBeforeNoSchemeIsExpandedDefaultProvider", "${env:HOST}${PORT}", json!("localhost3044"), true),
    ];
    let mut failures = Vec::new();
    for (name, input, output, default_provider) in cases {
        let document = format!("{}: {}\n", json!(name), json!(input));
        let got = resolve_json(&document, *default_provider);
        if got != json!({ *name: output }) {
            failures.push(format!("{name}: {input} gave {got}, want {output}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// upstream `TestResolverDoneNotExpandOldEnvVars`: without a default scheme, `${X}` and `$X` stay.
#[test]
fn test_resolver_done_not_expand_old_env_vars() {
    let document = "test.1: \"${EXTRA}\"\ntest.2: \"$EXTRA\"\ntest.3: \"${EXTRA}:${EXTRA}\"\n";
    assert_eq!(
        resolve_json(document, false),
        json!({"test.1": "${EXTRA}", "test.2": "$EXTRA", "test.3": "${EXTRA}:${EXTRA}"})
    );
}

/// upstream `TestResolverExpandMapAndSliceValues`.
#[test]
fn test_resolver_expand_map_and_slice_values() {
    let extra = FakeProvider::new("test", |_| {
        Ok(Retrieved::from_value(Value::String(
            "some map value".into(),
        )))
    });
    let document = "test_map: {recv: \"${test:MAP_VALUE}\"}\ntest_slice: [\"${test:MAP_VALUE}\"]\n";
    let resolved = builder(document, false, extra)
        .build()
        .expect("builds")
        .resolve()
        .expect("resolves");
    assert_eq!(
        resolved.value.to_json(),
        json!({"test_map": {"recv": "some map value"}, "test_slice": ["some map value"]})
    );
}

/// upstream `TestResolverDefaultProviderExpand`.
#[test]
fn test_resolver_default_provider_expand() {
    assert_eq!(
        resolve_json("foo: \"${HOST}\"\n", true),
        json!({"foo": "localhost"})
    );
}

/// upstream `TestResolverExpandReturnError`: a provider error fails the resolve, wherever the
/// reference sits.
#[test]
fn test_resolver_expand_return_error() {
    let cases = [
        ("string_value", "string_value: \"${test:VALUE}\"\n"),
        ("slice_value", "slice_value: [\"${test:VALUE}\"]\n"),
        ("map_value", "map_value: {test: \"${test:VALUE}\"}\n"),
        (
            "string_embedded_value",
            "string_embedded_value: \"https://${test:HOST}:3045\"\n",
        ),
    ];
    for (name, document) in cases {
        let error = builder(document, false, FakeProvider::failing(name))
            .build()
            .expect("builds")
            .resolve()
            .expect_err(name);
        assert!(
            matches!(
                &error,
                ResolveError::Expand(ExpandError::Retrieve {
                    source: ProviderError::Custom { .. },
                    ..
                })
            ),
            "{name}: {error}"
        );
        assert!(error.to_string().ends_with(name), "{name}: {error}");
    }
}

/// upstream `TestResolverInfiniteExpand`. Difference: upstream stops after 1000 rounds, hotrule
/// after [`crate::DEFAULT_MAX_EXPANSION_DEPTH`] (10) levels.
#[test]
fn test_resolver_infinite_expand() {
    let extra = FakeProvider::new("test", |_| {
        Ok(Retrieved::from_value(Value::String("${test:VALUE}".into())))
    });
    let error = builder("test: \"${test:VALUE}\"\n", false, extra)
        .build()
        .expect("builds")
        .resolve()
        .expect_err("never ends");
    assert!(
        matches!(error, ResolveError::Expand(ExpandError::TooDeep { .. })),
        "{error}"
    );
}

/// upstream `TestResolverExpandInvalidScheme`: a provider whose scheme is malformed is refused
/// when the resolver is built.
#[test]
fn test_resolver_expand_invalid_scheme() {
    let extra = FakeProvider::new("g_c_s", |_| unreachable!("must not be called"));
    let error = builder("test: \"${g_c_s:VALUE}\"\n", false, extra)
        .build()
        .err()
        .expect("refused");
    assert!(
        matches!(&error, ResolveError::BadProviderScheme { scheme } if scheme == "g_c_s"),
        "{error}"
    );
}

/// upstream `TestResolverExpandInvalidOpaqueValue`.
#[test]
fn test_resolver_expand_invalid_opaque_value() {
    let extra = FakeProvider::new("test", |_| unreachable!("must not be called"));
    let error = builder("test: [{test: \"${test:$VALUE}\"}]\n", false, extra)
        .build()
        .expect("builds")
        .resolve()
        .expect_err("a `$` in the uri");
    assert!(
        matches!(&error, ResolveError::Expand(ExpandError::Dollar { key, .. }) if key == "test.0.test"),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("contains unsupported characters ('$')"),
        "{error}"
    );
}

/// upstream `TestResolverExpandUnsupportedScheme`.
#[test]
fn test_resolver_expand_unsupported_scheme() {
    let error = builder(
        "test: \"${unsupported:VALUE}\"\n",
        false,
        FakeProvider::echo(),
    )
    .build()
    .expect("builds")
    .resolve()
    .expect_err("no such scheme");
    assert!(
        matches!(&error, ResolveError::Expand(ExpandError::Retrieve { source: ProviderError::UnknownScheme { scheme, .. }, .. }) if scheme == "unsupported"),
        "{error}"
    );
}

/// upstream `TestResolverExpandStringValueInvalidReturnValue`: a list cannot be embedded in text.
#[test]
fn test_resolver_expand_string_value_invalid_return_value() {
    let extra = FakeProvider::new("test", |_| {
        Ok(Retrieved::from_value(Value::List(vec![Value::Int(1243)])))
    });
    let error = builder("test: \"localhost:${test:PORT}\"\n", false, extra)
        .build()
        .expect("builds")
        .resolve()
        .expect_err("not embeddable");
    assert!(
        matches!(
            &error,
            ResolveError::Expand(ExpandError::NotEmbeddable { kind: "list", .. })
        ),
        "{error}"
    );
}

/// upstream `TestResolverExpandEnvVars` with `expand-with-all-env.yaml`, `expand-with-partial-env.yaml`
/// and `expand-with-no-env.yaml`: all three resolve to the same tree. (Their `${NAME}` references
/// have no scheme; they expand through the default scheme `env`.)
#[test]
fn test_resolver_expand_env_vars() {
    let env = [
        ("EXTRA", "some string"),
        ("EXTRA_MAP_VALUE_1", "some map value_1"),
        ("EXTRA_MAP_VALUE_2", "some map value_2"),
        ("EXTRA_LIST_MAP_VALUE_1", "some list map value_1"),
        ("EXTRA_LIST_MAP_VALUE_2", "some list map value_2"),
        ("EXTRA_LIST_VALUE_1", "some list value_1"),
        ("EXTRA_LIST_VALUE_2", "some list value_2"),
    ];
    let files = [
        (
            "expand-with-all-env.yaml",
            "test_map:\n  extra: \"${EXTRA}\"\n  extra_map:\n    recv.1: \"${EXTRA_MAP_VALUE_1}\"\n    recv.2: \"${EXTRA_MAP_VALUE_2}\"\n\
             \x20 extra_list_map:\n    - { recv.1: \"${EXTRA_LIST_MAP_VALUE_1}\",recv.2: \"${EXTRA_LIST_MAP_VALUE_2}\" }\n\
             \x20 extra_list:\n    - \"${EXTRA_LIST_VALUE_1}\"\n    - \"${EXTRA_LIST_VALUE_2}\"\n    \n",
        ),
        (
            "expand-with-partial-env.yaml",
            "test_map:\n  extra: \"${EXTRA}\"\n  extra_map:\n    recv.1: \"${EXTRA_MAP_VALUE_1}\"\n    recv.2: \"some map value_2\"\n\
             \x20 extra_list_map:\n    - { recv.1: \"some list map value_1\",recv.2: \"${EXTRA_LIST_MAP_VALUE_2}\" }\n\
             \x20 extra_list:\n    - \"some list value_1\"\n    - \"${EXTRA_LIST_VALUE_2}\"\n",
        ),
        (
            "expand-with-no-env.yaml",
            "test_map:\n  extra: \"some string\"\n  extra_map:\n    recv.1: \"some map value_1\"\n    recv.2: \"some map value_2\"\n\
             \x20 extra_list_map:\n    - { recv.1: \"some list map value_1\",recv.2: \"some list map value_2\" }\n\
             \x20 extra_list:\n    - \"some list value_1\"\n    - \"some list value_2\"\n",
        ),
    ];
    let expected = json!({"test_map": {
        "extra": "some string",
        "extra_map": {"recv.1": "some map value_1", "recv.2": "some map value_2"},
        "extra_list_map": [{"recv.1": "some list map value_1", "recv.2": "some list map value_2"}],
        "extra_list": ["some list value_1", "some list value_2"],
    }});
    for (name, text) in files {
        let resolved = super::resolve(&["mem:doc"], &env, [("doc", text)])
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(resolved.value.to_json(), expected, "{name}");
    }
}
