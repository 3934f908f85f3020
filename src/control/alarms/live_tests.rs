//! Which settings are in force, and what a sync changes.

use super::*;
use crate::base::ids::NodeId;

const BOOT: &str = "\
rules:
  cpu_rule:
    expression: sum(meter_vm_cpu_total_percentage > 90) >= 2
    period: 5
hooks:
  webhook:
    default:
      is-default: true
      urls: [http://127.0.0.1:9/boot]
";

const PUSHED: &str = "\
rules:
  cpu_rule:
    expression: sum(meter_vm_cpu_total_percentage > 90) >= 2
    period: 5
  memory_rule:
    expression: sum(meter_vm_memory_used > 100) >= 1
hooks:
  webhook:
    default:
      is-default: true
      urls: [http://127.0.0.1:9/pushed]
  alertmanager:
    team:
      urls: [http://127.0.0.1:9]
";

/// A pushed entry's content and revision (`millis` orders them).
struct Entry {
    content: String,
    revision: Revision,
}

impl Entry {
    fn pushed(&self) -> Option<Pushed<'_>> {
        Some(Pushed { content: self.content.as_bytes(), revision: &self.revision })
    }

    fn hash(&self) -> ContentHash {
        ContentHash::of(self.content.as_bytes())
    }
}

fn entry(content: &str, millis: u64) -> Entry {
    Entry { content: content.to_string(), revision: Revision { millis, counter: 0, node: NodeId("a".into()) } }
}

fn boot(text: Option<&str>) -> Boot {
    Boot { path: PathBuf::from("config/alarm-settings.yml"), text: text.map(str::to_string) }
}

fn live(text: Option<&str>) -> (LiveSettings, SharedAlarms, AlarmNotifier) {
    test_live(boot(text))
}

fn rule_names(alarms: &SharedAlarms) -> Vec<String> {
    alarms.lock().expect("lock").settings().rules.iter().map(|r| r.name.clone()).collect()
}

#[test]
fn a_live_entry_wins_and_the_boot_file_is_the_fallback() {
    let file = boot(Some(BOOT));
    let active = entry(PUSHED, 7);
    let (source, content) = wanted(active.pushed(), &file);
    assert_eq!((source, content), (Source::Runtime { revision: active.revision.clone() }, PUSHED.as_bytes()));
    assert_eq!(wanted(None, &file), (Source::File { path: file.path.clone() }, BOOT.as_bytes()));
    let none = boot(None);
    assert_eq!(wanted(None, &none), (Source::Empty { path: none.path.clone() }, &b""[..]));
    assert_eq!(Source::Empty { path: none.path.clone() }.kind(), "none");
}

#[test]
fn a_push_puts_rules_and_hooks_in_force_and_only_new_or_changed_rules_start_fresh() {
    let (live, alarms, notifier) = live(Some(BOOT));
    assert_eq!(live.in_force().source.kind(), "file");
    assert_eq!(notifier.target_ids(), vec!["webhook.default".to_string()]);

    let pushed = entry(PUSHED, 10);
    let names = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(live.sync(pushed.pushed()), Synced::Applied { kept: names(&["cpu_rule"]), fresh: names(&["memory_rule"]), removed: Vec::new() });
    assert_eq!(rule_names(&alarms), vec!["cpu_rule", "memory_rule"]);
    assert_eq!(notifier.target_ids(), vec!["alertmanager.team".to_string(), "webhook.default".to_string()]);
    let in_force = live.in_force();
    assert_eq!((in_force.source, in_force.content.as_str()), (Source::Runtime { revision: pushed.revision.clone() }, PUSHED));
    assert_eq!(in_force.rules, vec!["cpu_rule", "memory_rule"]);

    // The same entry again (every scan hands it over): nothing happens.
    assert_eq!(live.sync(pushed.pushed()), Synced::Unchanged);

    // Deleted (the scan hands over no live entry): back to the boot file.
    assert_eq!(live.sync(None), Synced::Applied { kept: names(&["cpu_rule"]), fresh: Vec::new(), removed: names(&["memory_rule"]) });
    assert_eq!(rule_names(&alarms), vec!["cpu_rule"]);
    assert_eq!(live.in_force().source.kind(), "file");
    assert_eq!(notifier.target_ids(), vec!["webhook.default".to_string()]);
}

#[test]
fn settings_a_node_cannot_read_leave_those_in_force_and_are_shown_once() {
    let (live, alarms, _) = live(Some(BOOT));
    let bad = entry("rules:\n  cpu_rule:\n    expression: top_n(m, 3, des) > 1\n", 10);
    let Synced::Refused { reason } = live.sync(bad.pushed()) else { panic!("refused expected") };
    assert!(reason.contains("cpu_rule"), "{reason}");
    assert_eq!(rule_names(&alarms), vec!["cpu_rule"]);
    let in_force = live.in_force();
    assert_eq!(in_force.source.kind(), "file");
    assert_eq!(in_force.refused.as_ref().map(|r| r.hash.clone()), Some(bad.hash()));
    // The next scan sees the same entry: not tried (nor logged) again.
    assert_eq!(live.sync(bad.pushed()), Synced::Unchanged);
    // Readable settings clear the refusal.
    assert!(matches!(live.sync(entry(PUSHED, 12).pushed()), Synced::Applied { .. }));
    assert!(live.in_force().refused.is_none());
}

#[test]
fn pushing_the_boot_files_text_changes_only_where_it_comes_from() {
    let (live, _, _) = live(Some(BOOT));
    let same = entry(BOOT, 10);
    assert_eq!(live.sync(same.pushed()), Synced::Unchanged);
    assert_eq!(live.in_force().source, Source::Runtime { revision: same.revision.clone() });
}

#[test]
fn no_boot_file_means_no_rules_until_settings_are_pushed() {
    let (live, alarms, _) = live(None);
    assert_eq!(live.in_force().source.kind(), "none");
    assert!(rule_names(&alarms).is_empty());
    assert!(matches!(live.sync(entry(PUSHED, 10).pushed()), Synced::Applied { .. }));
    assert_eq!(rule_names(&alarms).len(), 2);
}

#[test]
fn validate_names_what_is_wrong() {
    assert!(matches!(validate(&[0xff, 0xfe]), Err(SettingsRefused::NotText)));
    let bad_hook = "hooks:\n  webhook:\n    default:\n      urls: [not-a-url]\n";
    let error = validate(bad_hook.as_bytes()).expect_err("bad url");
    assert!(error.to_string().contains("not-a-url"), "{error}");
    let (settings, targets) = validate(PUSHED.as_bytes()).expect("valid");
    assert_eq!((settings.rules.len(), targets.len()), (2, 2));
}
