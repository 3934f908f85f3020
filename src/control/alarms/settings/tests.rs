use regex::Regex;

use super::*;

/// A stand-in for the MQE verifier: metric names are the identifiers that are neither
/// functions nor function arguments, the trend range comes from `increase/rate(m, N)`; it
/// refuses `top_n`, unbalanced parentheses, and metrics starting with `unknown_`.
fn test_verifier(expression: &str) -> Result<ExpressionFacts, String> {
    if expression.contains("top_n") {
        return Err("Unsupported operation: [top_n] in alarm expression.".into());
    }
    if expression.matches('(').count() != expression.matches(')').count() {
        return Err("unbalanced parentheses".into());
    }
    let without_labels = Regex::new(r"\{[^}]*\}").expect("regex").replace_all(expression, "");
    let identifier = Regex::new(r"[A-Za-z_][A-Za-z0-9_]*\s*\(?").expect("regex");
    const WORDS: &[&str] = &["sum", "avg", "max", "min", "count", "latest", "upper", "lower", "value", "bool"];
    let mut metrics = Vec::new();
    for found in identifier.find_iter(&without_labels) {
        let text = found.as_str();
        if text.ends_with('(') || WORDS.contains(&text.trim()) {
            continue;
        }
        if text.starts_with("unknown_") {
            return Err(format!("Metric: [{}] does not exist.", text.trim()));
        }
        metrics.push(text.trim().to_string());
    }
    let trend = Regex::new(r"(?:increase|rate)\(\s*\w+\s*,\s*(\d+)\s*\)").expect("regex");
    let max_trend_range = trend.captures_iter(expression).filter_map(|c| c[1].parse().ok()).max().unwrap_or(0);
    Ok(ExpressionFacts { metrics, max_trend_range })
}

fn parse(text: &str) -> Result<AlarmSettings, SettingsError> {
    AlarmSettings::parse(text, &test_verifier)
}

fn parsed(text: &str) -> AlarmSettings {
    match parse(text) {
        Ok(settings) => settings,
        Err(e) => panic!("should parse: {e}\n{text}"),
    }
}

fn hook(kind: HookKind, name: &str) -> HookId {
    HookId { kind, name: name.into() }
}

#[test]
fn the_shipped_dist_file() {
    let settings = parsed(include_str!("../testdata/dist-alarm-settings.yml"));
    assert!(settings.hooks.is_empty());
    let rows: Vec<(&str, u32, u32, u32)> = settings
        .rules
        .iter()
        .map(|r| (r.name.as_str(), r.periods.period, r.periods.silence_period, r.periods.recovery_observation_period))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("service_resp_time_rule", 10, 5, 3),
            ("service_sla_rule", 10, 3, 2),
            ("service_resp_time_percentile_rule", 10, 5, 3),
            ("service_instance_resp_time_rule", 10, 5, 2),
            ("database_access_resp_time_rule", 10, 10, 0), // silence-period absent: = period
            ("endpoint_relation_resp_time_rule", 10, 10, 0),
        ]
    );
    let percentile = settings.rule("service_resp_time_percentile_rule").expect("rule");
    assert_eq!(percentile.metrics, vec!["service_percentile".to_string()]);
    assert_eq!(percentile.window_size(), 10);
    // No hooks at all: every rule warns that it notifies nobody.
    let silent = settings.warnings.iter().filter(|w| matches!(w, SettingsWarning::RuleWithoutHooks { .. })).count();
    assert_eq!((silent, settings.warnings.len()), (6, 6), "{:?}", settings.warnings);
}

#[test]
fn the_starter_file_and_its_defaults() {
    let settings = parsed(include_str!("../testdata/starter-alarm-settings.yml"));
    let [rule] = settings.rules.as_slice() else { panic!("one rule") };
    assert_eq!(rule.include_names, vec!["dubbox-provider".to_string(), "dubbox-consumer".to_string()]);
    assert_eq!(rule.periods, Periods { period: 10, silence_period: 10, recovery_observation_period: 0 });
    assert_eq!(rule.message.as_str(), "Alarm caused by Rule service_resp_time_rule");
    assert_eq!(rule.tags, vec![("level".to_string(), "WARNING".to_string())]);
    assert!(rule.hooks.is_empty() && rule.hooks_from_defaults);
}

#[test]
fn the_doc_example_with_its_hooks() {
    let settings = parsed(include_str!("../testdata/doc-example.yml"));
    assert_eq!(settings.rules.len(), 5);
    let endpoint = settings.rule("endpoint_percent_rule").expect("rule");
    assert_eq!(endpoint.periods, Periods { period: 10, silence_period: 10, recovery_observation_period: 2 });
    assert_eq!(endpoint.metrics, vec!["endpoint_sla".to_string()]);
    // No `hooks`: the two `is-default` hooks (webhook.default, slack.default), sorted.
    assert_eq!(endpoint.hooks, vec![hook(HookKind::Webhook, "default"), hook(HookKind::Slack, "default")]);
    assert!(endpoint.hooks_from_defaults);
    let percent = settings.rule("service_percent_rule").expect("rule");
    assert_eq!(percent.exclude_names, vec!["service_c".to_string()]);
    assert!(percent.accepts_entity("service_a") && !percent.accepts_entity("service_c") && !percent.accepts_entity("x"));
    let comp = settings.rule("comp_rule").expect("rule");
    assert_eq!(comp.metrics, vec!["service_percentile".to_string(), "service_sla".to_string()]);
    assert_eq!(comp.hooks, vec![hook(HookKind::Slack, "custom1"), hook(HookKind::Slack, "default"), hook(HookKind::Pagerduty, "custom1")]);
    assert!(!comp.hooks_from_defaults);
    assert_eq!(comp.message.render("svc-a", "c3ZjLWE=.1").split(' ').nth(1), Some("svc-a"));

    let custom1 = settings.hook(&hook(HookKind::Webhook, "custom1")).expect("hook");
    assert_eq!(
        custom1.config,
        HookConfig::Webhook(WebhookConfig {
            urls: vec!["http://127.0.0.1/custom1".into()],
            recovery_urls: vec!["http://127.0.0.1/custom1/recovery".into()],
            headers: vec![("Authorization".into(), "Bearer bearer_token".into())],
        })
    );
    assert!(settings.hook(&hook(HookKind::Webhook, "default")).is_some_and(|h| h.is_default));
    let unsupported: Vec<String> = settings
        .warnings
        .iter()
        .filter_map(|w| match w {
            SettingsWarning::UnsupportedHook { hook } => Some(hook.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(unsupported, vec!["slack.default", "slack.custom1", "pagerduty.custom1"]);
}

#[test]
fn alertmanager_hooks() {
    let text = "hooks:\n  alertmanager:\n    am:\n      is-default: true\n      urls: [http://am:9093]\n      timeout: 5s\n      headers: {X-Scope-OrgID: 7}\n    plain:\n      urls: [https://am2]\nrules:\n  a_rule:\n    expression: sum(m > 1) >= 1\n";
    let settings = parsed(text);
    assert_eq!(
        settings.hooks[0].config,
        HookConfig::Alertmanager(AlertmanagerConfig {
            urls: vec!["http://am:9093".into()],
            timeout: Some(std::time::Duration::from_secs(5)),
            headers: vec![("X-Scope-OrgID".into(), "7".into())],
        })
    );
    assert_eq!(settings.rules[0].hooks, vec![hook(HookKind::Alertmanager, "am")]);
    assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
    for (timeout, ok) in [("10", true), ("\"500ms\"", true), ("\"2m\"", true), ("0", false), ("\"6m\"", false), ("-1", false), ("\"soon\"", false)] {
        let text = format!("hooks:\n  alertmanager:\n    am:\n      urls: [http://am]\n      timeout: {timeout}\n");
        assert_eq!(parse(&text).is_ok(), ok, "timeout {timeout}");
    }
}

/// Each case: a rule body (under `rules: x_rule:`), and the error it must produce.
#[test]
fn invalid_rules_are_refused_with_the_rule_and_the_reason() {
    let rule = |name: &str| Place::Rule(name.to_string());
    let cases: Vec<(&str, SettingsError)> = vec![
        ("{period: 3}", SettingsError::EmptyExpression { rule: "x_rule".into() }),
        ("{expression: '  '}", SettingsError::EmptyExpression { rule: "x_rule".into() }),
        (
            "{metrics-name: service_sla, op: '<', threshold: 8000}",
            SettingsError::LegacyRule { rule: "x_rule".into(), keys: "metrics-name, threshold, op".into() },
        ),
        (
            "{expression: 'top_n(m, 3, des) > 1'}",
            SettingsError::ExpressionRejected {
                rule: "x_rule".into(),
                expression: "top_n(m, 3, des) > 1".into(),
                reason: "Unsupported operation: [top_n] in alarm expression.".into(),
            },
        ),
        (
            "{expression: 'sum(m > 1) >= 1', period: ten}",
            SettingsError::WrongType { place: rule("x_rule"), key: "period".into(), expected: "a whole number", found: "a string" },
        ),
        ("{expression: 'sum(m > 1) >= 1', period: 0}", SettingsError::ZeroPeriod { rule: "x_rule".into() }),
        (
            "{expression: 'sum(m > 1) >= 1', silence-period: -1}",
            SettingsError::OutOfRange { place: rule("x_rule"), key: "silence-period".into(), value: -1, max: MAX_WINDOW_MINUTES },
        ),
        (
            "{expression: 'sum(increase(m, 30) > 1) >= 1', period: 10080}",
            SettingsError::WindowTooLarge { rule: "x_rule".into(), period: 10080, trend: 30, max: MAX_WINDOW_MINUTES },
        ),
        (
            "{expression: 'sum(m > 1) >= 1', include-names: svc}",
            SettingsError::WrongType { place: rule("x_rule"), key: "include-names".into(), expected: "a list of strings", found: "a string" },
        ),
        (
            "{expression: 'sum(m > 1) >= 1', exclude-names: [1]}",
            SettingsError::WrongType { place: rule("x_rule"), key: "exclude-names".into(), expected: "a list of strings", found: "an integer" },
        ),
        (
            "{expression: 'sum(m > 1) >= 1', tags: [level]}",
            SettingsError::WrongType { place: rule("x_rule"), key: "tags".into(), expected: "a mapping", found: "a list" },
        ),
        (
            "{expression: 'sum(m > 1) >= 1', message: 'value {value} of {name}'}",
            SettingsError::BadMessage { rule: "x_rule".into(), var: "value".into(), message: "value {value} of {name}".into() },
        ),
        (
            "{expression: 'sum(m > 1) >= 1', hooks: [webhook.nope]}",
            SettingsError::UnknownHook { rule: "x_rule".into(), hook: "webhook.nope".into() },
        ),
        (
            "{expression: 'sum(m > 1) >= 1', hooks: [default]}",
            SettingsError::UnknownHook { rule: "x_rule".into(), hook: "default".into() },
        ),
        ("[sum(m > 1) >= 1]", SettingsError::NotAMapping { place: rule("x_rule"), found: "a list" }),
    ];
    for (body, expected) in cases {
        let text = format!("hooks:\n  webhook:\n    default:\n      urls: [http://x]\nrules:\n  x_rule: {body}\n");
        assert_eq!(parse(&text), Err(expected), "{body}");
    }
    // A bad regex names the rule and the key.
    let text = "rules:\n  x_rule:\n    expression: sum(m > 1) >= 1\n    include-names-regex: '(unclosed'\n";
    assert!(matches!(parse(text), Err(SettingsError::BadRegex { rule, key: "include-names-regex", .. }) if rule == "x_rule"));
    // Lookaround (Java has it, RE2 syntax does not) is refused, not silently changed.
    let text = "rules:\n  x_rule:\n    expression: sum(m > 1) >= 1\n    exclude-names-regex: 'a(?!b)'\n";
    assert!(matches!(parse(text), Err(SettingsError::BadRegex { .. })));
}

#[test]
fn invalid_files_and_hooks_are_refused() {
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, fn(&SettingsError) -> bool)> = vec![
        ("rules: [a_rule]", |e| matches!(e, SettingsError::WrongType { place: Place::TopLevel, .. })),
        ("- just a list", |e| matches!(e, SettingsError::NotAMapping { place: Place::TopLevel, .. })),
        ("rules: {a_rule: {expression: 'x > 1'}\n", |e| matches!(e, SettingsError::BadYaml { .. })),
        ("rules: {}\n---\nrules: {}\n", |e| matches!(e, SettingsError::DocumentCount { count: 2 })),
        ("rules:\n  1: {expression: 'm > 1'}\n", |e| matches!(e, SettingsError::RuleNameNotText { .. })),
        ("hooks: {webhook: {a: {urls: [ftp://x]}}}", |e| matches!(e, SettingsError::BadUrl { .. })),
        ("hooks: {webhook: {a: {urls: ['http://']}}}", |e| matches!(e, SettingsError::BadUrl { .. })),
        ("hooks: {webhook: {a: {urls: [http://x], headers: {'Bad Header': v}}}}", |e| matches!(e, SettingsError::BadHeader { .. })),
        ("hooks: {webhook: {a: {urls: [http://x], is-default: yes-please}}}", |e| {
            matches!(e, SettingsError::WrongType { place: Place::Hook(h), key, .. } if h == "webhook.a" && key == "is-default")
        }),
        ("hooks: {webhook: {a: [http://x]}}", |e| matches!(e, SettingsError::NotAMapping { place: Place::Hook(_), .. })),
        ("hooks: {alertmanager: {a: {timeout: 5}}}", |e| matches!(e, SettingsError::HookNeedsUrls { .. })),
        ("hooks: [webhook]", |e| matches!(e, SettingsError::WrongType { place: Place::TopLevel, .. })),
    ];
    for (text, check) in cases {
        match parse(text) {
            Err(e) => assert!(check(&e), "{text}: unexpected error {e}"),
            Ok(_) => panic!("{text}: should be refused"),
        }
    }
}

#[test]
fn warnings_for_what_is_skipped_or_ignored() {
    let text = "\
composite-rules: {}
extra: 1
hooks:
  email: {a: {to: x}}
  webhook:
    empty: {}
    a: {urls: [http://x], retries: 3}
rules:
  not_a_rule_name: {expression: 'sum(m > 1) >= 1'}
  x_rule: {expression: 'sum(m > 1) >= 1', count: 3, severity: high, hooks: [webhook.a]}
";
    let settings = parsed(text);
    let shown: Vec<String> = settings.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        vec![
            "the top level: `composite-rules` is from the pre-9.6 format and is ignored",
            "the top level: unknown key `extra` is ignored",
            "hook kind `email` is unknown and skipped",
            "hook `webhook.empty` has neither `urls` nor `recovery-urls`",
            "hook `webhook.a`: unknown key `retries` is ignored",
            "`rules.not_a_rule_name` is skipped: rule names must end in `_rule` (as SkyWalking)",
            "rule `x_rule`: `count` is from the pre-9.6 format and is ignored",
            "rule `x_rule`: unknown key `severity` is ignored",
        ]
    );
    assert_eq!(settings.rules.len(), 1);
}

#[test]
fn empty_and_null_texts_are_empty_settings() {
    for text in ["", "# only a comment\n", "~", "rules:\nhooks:\n"] {
        assert_eq!(parse(text), Ok(AlarmSettings::empty()), "{text:?}");
    }
}

#[test]
fn alias_bombs_and_deep_nesting_are_refused() {
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..8 {
        let prev = i - 1;
        bomb.push_str(&format!("a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"));
    }
    assert_eq!(parse(&bomb), Err(SettingsError::TooManyNodes { max: MAX_YAML_NODES }));
    let deep = format!("rules: {}{}", "[".repeat(40), "]".repeat(40));
    assert_eq!(parse(&deep), Err(SettingsError::TooDeep { max: MAX_YAML_DEPTH }));
    // A small anchor reused is fine.
    let text = "rules:\n  a_rule: {expression: 'sum(m > 1) >= 1', tags: &t {level: WARNING}}\n  b_rule: {expression: 'sum(m > 2) >= 1', tags: *t}\n";
    assert_eq!(parsed(text).rules[1].tags, vec![("level".to_string(), "WARNING".to_string())]);
}

#[test]
fn message_templates_follow_the_formatter() {
    let cases = [
        ("Alarm on {name} ({id})", Ok("Alarm on svc (aWQ=.1)")),
        ("{name}{name}", Ok("svcsvc")),
        ("no placeholders", Ok("no placeholders")),
        ("open { without close", Ok("open { without close")),
        ("{id} then { open", Ok("aWQ=.1 then { open")),
        ("{}", Err("")),
        ("{ name }", Err(" name ")),
        ("{value}", Err("value")),
    ];
    for (source, expected) in cases {
        let rendered = MessageTemplate::parse(source).map(|t| t.render("svc", "aWQ=.1"));
        assert_eq!(rendered.as_deref().map_err(String::as_str), expected, "{source}");
    }
}

#[test]
fn name_filters_in_skywalking_order() {
    let text = "rules:\n  x_rule:\n    expression: sum(m > 1) >= 1\n    include-names: [a, b, instance_7]\n    exclude-names: [b]\n    include-names-regex: 'instance\\_\\d+|a'\n    exclude-names-regex: a\n";
    let rule = &parsed(text).rules[0];
    for (name, accepted) in [("a", false), ("b", false), ("instance_7", true), ("instance_7x", false), ("c", false)] {
        assert_eq!(rule.accepts_entity(name), accepted, "{name}");
    }
    // Empty regex strings are "no filter", as SkyWalking's "" default.
    let text = "rules:\n  x_rule: {expression: 'sum(m > 1) >= 1', include-names-regex: ''}\n";
    assert!(parsed(text).rules[0].accepts_entity("anything"));
}

#[test]
fn diff_by_rule_name() {
    let base = "hooks: {webhook: {d: {is-default: true, urls: [http://x]}, o: {urls: [http://y]}}}\nrules:\n";
    let old = parsed(&format!(
        "{base}  same_rule: {{expression: 'sum(a > 1) >= 1', tags: {{k1: v1, k2: v2}}}}\n  period_rule: {{expression: 'sum(a > 1) >= 1'}}\n  gone_rule: {{expression: 'sum(a > 1) >= 1'}}\n  hooks_rule: {{expression: 'sum(a > 1) >= 1'}}\n"
    ));
    let new = parsed(&format!(
        "{base}  same_rule: {{expression: 'sum(a > 1) >= 1', tags: {{k2: v2, k1: v1}}}}\n  period_rule: {{expression: 'sum(a > 1) >= 1', period: 2}}\n  new_rule: {{expression: 'sum(a > 1) >= 1'}}\n  hooks_rule: {{expression: 'sum(a > 1) >= 1', hooks: [webhook.o]}}\n"
    ));
    assert_eq!(
        diff(&old, &new),
        SettingsDiff {
            unchanged: vec!["same_rule".into()],
            changed: vec!["hooks_rule".into(), "period_rule".into()],
            added: vec!["new_rule".into()],
            removed: vec!["gone_rule".into()],
        }
    );
    assert_eq!(diff(&new, &new).unchanged.len(), 4);
    // The explicit default period equals the implicit one: no change.
    let implicit = parsed("rules:\n  a_rule: {expression: 'sum(a > 1) >= 1'}\n");
    let explicit = parsed("rules:\n  a_rule: {expression: 'sum(a > 1) >= 1', period: 1, silence-period: 1, recovery-observation-period: 0}\n");
    assert_eq!(diff(&implicit, &explicit).unchanged, vec!["a_rule".to_string()]);
    // Naming the default hooks explicitly is the same hook set: no change.
    let named = parsed(&format!("{base}  same_rule: {{expression: 'sum(a > 1) >= 1', tags: {{k1: v1, k2: v2}}, hooks: [webhook.d]}}\n"));
    assert_eq!(diff(&old, &named).unchanged, vec!["same_rule".to_string()]);
    // Everything removed (a deleted dynamic config installs empty settings).
    assert_eq!(diff(&implicit, &AlarmSettings::empty()).removed, vec!["a_rule".to_string()]);
}
