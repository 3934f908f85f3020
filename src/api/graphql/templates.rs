//! Dashboards and the menu, as OAP ≤ 10.4 serves them to booster-ui: the bundled
//! `ui-initialized-templates` (one folder per layer, each file a JSON array of
//! `{id, configuration}` after an optional license comment) and `menu.yaml`, read once at boot
//! from `ui.templates_dir` (default `./config/ui-templates`, a copy of SkyWalking v10.4.0's,
//! Apache-2.0). Runtime changes (`addTemplate` / `changeTemplate` / `disableTemplate`) are
//! entries of their own, laid over these by id ([`TemplateSet::with_changes`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use yaml_rust2::{Yaml, YamlLoader};

/// Why the templates dir could not be read; the node starts without dashboards and says why.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("reading {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

/// The runtime template changes as the GraphQL room sees them. The admin API implements it over
/// the node's store and the single write path (a node that is not the main forwards the
/// mutation there); this room never reaches the store or the workflow itself.
pub trait TemplateStore: Send + Sync {
    /// The runtime templates stored on this node, disabled ones included.
    fn list(&self) -> Result<Arc<Vec<Template>>, String>;
    /// Runs one mutation where writes run: `Ok` with what was done, or `Err` with why not.
    fn write<'a>(&'a self, op: crate::control::ui_templates::TemplateOp) -> crate::BoxFuture<'a, Result<String, String>>;
}

/// One dashboard: its id, its configuration (JSON text, as the protocol carries it) and
/// whether it is disabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub id: String,
    pub configuration: String,
    pub disabled: bool,
}

/// One menu entry (a group when it has sub items).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MenuEntry {
    pub title: String,
    pub icon: Option<String>,
    pub layer: String,
    pub description: Option<String>,
    pub document_link: Option<String>,
    pub i18n_key: Option<String>,
    pub sub_items: Vec<MenuEntry>,
}

/// The dashboards by id, and the menu.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateSet {
    pub templates: BTreeMap<String, Template>,
    pub menu: Vec<MenuEntry>,
}

impl TemplateSet {
    /// Reads `dir`: every `<layer>/*.json` and `menu.yaml`. A file that is only a comment is
    /// skipped; a file that is not a JSON array of `{id, configuration}` is an error.
    pub fn load(dir: &Path) -> Result<TemplateSet, TemplateError> {
        fn io(path: &Path) -> impl Fn(std::io::Error) -> TemplateError + '_ {
            move |source| TemplateError::Io { path: path.display().to_string(), source }
        }
        let mut set = TemplateSet::default();
        let mut folders: Vec<_> = std::fs::read_dir(dir).map_err(io(dir))?.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
        folders.sort();
        for folder in folders {
            let mut files: Vec<_> = std::fs::read_dir(&folder)
                .map_err(io(&folder))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect();
            files.sort();
            for file in files {
                let text = std::fs::read_to_string(&file).map_err(io(&file))?;
                let invalid = |reason: String| TemplateError::Invalid { path: file.display().to_string(), reason };
                for template in parse_template_file(&text).map_err(invalid)? {
                    set.templates.insert(template.id.clone(), template);
                }
            }
        }
        let menu = dir.join("menu.yaml");
        if menu.is_file() {
            let text = std::fs::read_to_string(&menu).map_err(io(&menu))?;
            set.menu = parse_menu(&text).map_err(|reason| TemplateError::Invalid { path: menu.display().to_string(), reason })?;
        }
        Ok(set)
    }

    /// The enabled dashboards, by id.
    pub fn enabled(&self) -> impl Iterator<Item = &Template> {
        self.templates.values().filter(|t| !t.disabled)
    }

    /// This set with runtime changes laid over it by id (a change replaces the bundled
    /// template of its id, or adds one).
    pub fn with_changes(&self, changes: impl IntoIterator<Item = Template>) -> TemplateSet {
        let mut set = self.clone();
        for change in changes {
            set.templates.insert(change.id.clone(), change);
        }
        set
    }
}

/// The templates of one file: a JSON array of `{id, configuration}` after an optional
/// `/* ... */` comment (the Apache license block every shipped file opens with).
pub fn parse_template_file(text: &str) -> Result<Vec<Template>, String> {
    let mut body = text.trim_start();
    if let Some(rest) = body.strip_prefix("/*") {
        let end = rest.find("*/").ok_or("an unterminated /* comment")?;
        body = rest[end + 2..].trim_start();
    }
    if body.is_empty() {
        return Ok(Vec::new());
    }
    let items: Vec<Value> = serde_json::from_str(body).map_err(|e| format!("not a JSON array of templates: {e}"))?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let id = item.get("id").and_then(Value::as_str).ok_or_else(|| format!("template {i} has no string id"))?;
            let configuration = match item.get("configuration") {
                Some(Value::String(text)) => text.clone(),
                Some(object @ Value::Object(_)) => object.to_string(),
                _ => return Err(format!("template {id} has no configuration object")),
            };
            Ok(Template { id: id.to_string(), configuration, disabled: false })
        })
        .collect()
}

/// `menu.yaml`: `menus:` of groups, each with `menus:` of items (two levels, as booster-ui
/// reads them).
pub fn parse_menu(text: &str) -> Result<Vec<MenuEntry>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    let Some(doc) = docs.first() else { return Ok(Vec::new()) };
    fn entries(items: &Yaml) -> Result<Vec<MenuEntry>, String> {
        let Some(items) = items.as_vec() else { return Ok(Vec::new()) };
        items
            .iter()
            .map(|item| {
                let text = |key: &str| item[key].as_str().map(str::to_string);
                Ok(MenuEntry {
                    title: text("title").ok_or("a menu item has no title")?,
                    icon: text("icon"),
                    layer: text("layer").unwrap_or_default(),
                    description: text("description"),
                    document_link: text("documentLink"),
                    i18n_key: text("i18nKey"),
                    sub_items: entries(&item["menus"])?,
                })
            })
            .collect()
    }
    entries(&doc["menus"])
}

/// The menu as `getMenuItems` answers it: an item is active when its layer has services, a
/// group when one of its items is (OAP's `UIMenuManagementService`).
pub fn menu_json(menu: &[MenuEntry], active: &dyn Fn(&str) -> bool) -> Vec<Value> {
    menu.iter()
        .map(|entry| {
            let sub_items = menu_json(&entry.sub_items, active);
            let activate = if entry.sub_items.is_empty() {
                !entry.layer.is_empty() && active(&entry.layer)
            } else {
                sub_items.iter().any(|s| s["activate"] == json!(true))
            };
            json!({
                "title": entry.title,
                "icon": entry.icon,
                "layer": entry.layer,
                "activate": activate,
                "subItems": sub_items,
                "description": entry.description,
                "documentLink": entry.document_link,
                "i18nKey": entry.i18n_key,
            })
        })
        .collect()
}

/// Every MQE expression a dashboard configuration's widgets send (`expressions` and
/// `subExpressions`, wherever they nest: widgets sit inside tabs), in order, blanks left out.
pub fn expressions(configuration: &Value) -> Vec<String> {
    fn collect(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    if key == "expressions" || key == "subExpressions" {
                        out.extend(child.as_array().into_iter().flatten().filter_map(Value::as_str).filter(|e| !e.trim().is_empty()).map(str::to_string));
                    } else {
                        collect(child, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| collect(item, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    collect(configuration, &mut out);
    out
}

/// A `DashboardConfiguration`.
pub fn template_json(template: &Template) -> Value {
    json!({"id": template.id, "configuration": template.configuration})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundled() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ui-templates")
    }

    #[test]
    fn the_bundled_templates_load() {
        let set = TemplateSet::load(&bundled()).expect("bundled templates");
        let linux = set.templates.get("Linux-Service").expect("Linux-Service");
        let configuration: Value = serde_json::from_str(&linux.configuration).expect("configuration is JSON text");
        assert_eq!(configuration["layer"], "OS_LINUX");
        assert_eq!(configuration["entity"], "Service");
        assert!(set.templates.contains_key("Linux-Root"));
        assert!(set.templates.len() > 80, "{} templates", set.templates.len());
        let infrastructure = set.menu.iter().find(|m| m.sub_items.iter().any(|s| s.layer == "OS_LINUX")).expect("Linux in the menu");
        assert_eq!(infrastructure.sub_items.iter().find(|s| s.layer == "OS_LINUX").map(|s| s.title.as_str()), Some("Linux"));
    }

    /// Every MQE expression of every bundled dashboard (widgets nest inside tabs, so the whole
    /// configuration is walked) parses as `execExpression` parses it, and runs without an error
    /// over a store that has its metrics (labeled where the expression reads labels, empty): no
    /// construct the templates use is missing.
    #[test]
    fn every_bundled_expression_parses_and_runs() {
        let set = TemplateSet::load(&bundled()).expect("bundled templates");
        let mut expressions = Vec::new();
        for template in set.enabled() {
            let configuration: Value = serde_json::from_str(&template.configuration).expect("JSON");
            expressions.extend(super::expressions(&configuration));
        }
        expressions.sort();
        expressions.dedup();
        assert!(expressions.len() > 800, "{} distinct expressions", expressions.len());
        use hotrule_mqe_engine::Expr;
        let window = hotrule_mqe_engine::Duration::new(0, 9 * 60_000, hotrule_mqe_engine::Step::Minute);
        let mut failures = Vec::new();
        let mut trailing = Vec::new();
        for text in &expressions {
            let expr = match hotrule_mqe_engine::parse_lenient(text) {
                Err(e) => {
                    failures.push(format!("{text}: {e}"));
                    continue;
                }
                Ok((expr, extra)) => {
                    if extra.is_some() {
                        trailing.push(text.clone());
                    }
                    expr
                }
            };
            // A metric read with labels, or under a label operation, is a labeled metric.
            let mut labeled = std::collections::HashSet::new();
            expr.walk(&mut |e| match e {
                Expr::Metric(m) if !m.labels.is_empty() => {
                    labeled.insert(m.name.clone());
                }
                Expr::Relabels { expr, .. } | Expr::AggregateLabels { expr, .. } | Expr::SortLabelValues { expr, .. } => {
                    labeled.extend(expr.metric_names());
                }
                _ => {}
            });
            let mut source = hotrule_mqe_engine::MemSource::new();
            for name in expr.metric_names() {
                if labeled.contains(&name) { source.declare_labeled(&name) } else { source.declare_common(&name) }
            }
            if let Some(error) = hotrule_mqe_engine::evaluate(&expr, &source, &window).error {
                failures.push(format!("{text}: {error}"));
            }
        }
        assert_eq!(trailing, ["(meter_flink_jobManager_jvm_memory_nonHeap_available)/1024/1024)"], "the one shipped typo OAP ignores");
        assert!(failures.is_empty(), "{} of {} expressions fail:\n{}", failures.len(), expressions.len(), failures.join("\n"));
    }

    #[test]
    fn menu_activates_layers_with_services() {
        let menu = parse_menu("menus:\n  - title: G\n    icon: g\n    menus:\n      - title: Linux\n        layer: OS_LINUX\n      - title: Win\n        layer: OS_WINDOWS\n  - title: H\n    menus:\n      - title: X\n        layer: X\n")
            .expect("menu");
        let json = menu_json(&menu, &|layer| layer == "OS_LINUX");
        assert_eq!(json[0]["activate"], true);
        assert_eq!(json[0]["subItems"][0]["activate"], true);
        assert_eq!(json[0]["subItems"][1]["activate"], false);
        assert_eq!(json[1]["activate"], false);
        assert_eq!(json[0]["layer"], "", "a group has no layer");
        assert_eq!(json[0]["subItems"][0]["subItems"], json!([]));
    }

    #[test]
    fn template_files_are_checked() {
        assert_eq!(parse_template_file("/* only a license */\n").expect("empty"), Vec::new());
        let one = parse_template_file("/* c */ [{\"id\": \"a\", \"configuration\": {\"layer\": \"X\"}}]").expect("one");
        assert_eq!(one, [Template { id: "a".into(), configuration: "{\"layer\":\"X\"}".into(), disabled: false }]);
        for bad in ["/* open", "{}", "[{\"configuration\": {}}]", "[{\"id\": \"a\"}]"] {
            assert!(parse_template_file(bad).is_err(), "{bad}");
        }
        let set = TemplateSet { templates: one.into_iter().map(|t| (t.id.clone(), t)).collect(), menu: Vec::new() };
        let changed = set.with_changes([Template { id: "a".into(), configuration: "{}".into(), disabled: true }]);
        assert_eq!(changed.enabled().count(), 0);
        assert_eq!(set.enabled().count(), 1);
    }
}
