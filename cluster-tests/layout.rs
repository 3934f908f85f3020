//! Keeps `docs/architecture.md`'s picture of the house true. It reads the node's non-test
//! sources under `src/` (the engine crates in `src/engines/` are separate crates and cannot
//! import the node) and checks:
//! - the top level of `src/` is the planes and nothing else;
//! - imports between planes run one way, down [`PLANES`];
//! - the data plane meets the control plane only at the runtime gates and the rules' claims;
//! - the rules inside each plane ([`ROOM_RULES`]);
//! - the rooms (a plane's folders, and the single-room planes) import each other without a
//!   circle;
//! - no two files import each other, other than a module and its own submodule.
//!
//! Run it alone with `cargo test --no-default-features --test layout`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// The planes, lowest first: a room may import its own plane and the planes before it.
const PLANES: &[&str] = &["base", "store", "control", "data", "cluster", "api", "config", "node", "bench", "cli"];

/// Planes whose folders are rooms of their own (`control::workflow`, `data::ingest`, ...). The
/// other planes are one room each.
const FOLDER_PLANES: &[&str] = &["base", "control", "cluster", "data", "api", "cli"];

/// What `src/` holds: the planes, the engine crates, and the crate roots.
const TOP_LEVEL: &[&str] = &[
    "api", "base", "bench", "cli", "cluster", "config", "control", "data", "engines", "lib.rs", "main.rs", "node", "store",
];

/// The only rooms of the control plane that the data plane may import: the dispatch gates,
/// the rules' claims, and the alarm rules its stored values feed (`data::alarms`).
const CONTROL_SEEN_BY_DATA: &[&str] = &["control::runtime", "control::rules", "control::alarms"];

/// (module prefix, module prefix exempt from the rule, module prefixes it must never import).
const ROOM_RULES: &[(&str, Option<&str>, &[&str])] = &[
    ("store", None, &["control", "data", "cluster", "api", "config", "node"]),
    ("control::rules", None, &["control::runtime", "control::scan", "control::workflow", "control::rolling", "store"]),
    ("control::runtime", None, &["control::scan", "control::workflow", "control::rolling", "store"]),
    // The alarm rules: settings, windows, states and hooks; nothing of the rule lifecycle.
    ("control::alarms", None, &["control::rules", "control::runtime", "control::scan", "control::workflow", "control::rolling", "store"]),
    ("control::scan", None, &["control::workflow"]),
    // Rule history's pure decisions (caller, retention plan, diff); the workflow does the IO.
    ("control::history", None, &["control::runtime", "control::scan", "control::workflow", "control::rolling", "store"]),
    ("control::compile_pool", None, &["control::runtime", "control::scan", "control::workflow", "store"]),
    // The pure roll decisions; the roller beside them does the IO.
    (
        "control::rolling",
        Some("control::rolling::roller"),
        &["control::compile_pool", "control::runtime", "control::scan", "control::workflow", "store"],
    ),
    ("control::agents", None, &["control::runtime", "control::scan", "control::workflow", "store"]),
    ("cluster::bus", None, &["cluster::gossip", "cluster::replication"]),
    ("cluster::gossip", None, &["cluster::replication"]),
    ("data::series_store", None, &["data::metrics", "data::logs", "data::evaluation", "data::ingest", "data::export", "data::seam"]),
    ("data::seam", None, &["data::metrics", "data::logs", "data::evaluation", "data::ingest", "data::export"]),
    ("data::ingest", None, &["control", "data::evaluation", "data::metrics", "data::logs", "data::export", "store"]),
    ("data::evaluation", None, &["data::ingest", "data::export"]),
    ("data::metrics", None, &["data::seam", "data::evaluation", "data::ingest", "data::export"]),
    ("data::logs", None, &["data::seam", "data::evaluation", "data::ingest", "data::export", "data::metrics"]),
    ("data::export", None, &["data::seam", "data::evaluation", "data::ingest", "store"]),
    ("api::query", None, &["control::workflow", "control::scan", "control::runtime", "store", "api::admin"]),
    // SkyWalking's query protocol reads through api::query; its template writes go through a
    // trait the admin API implements, never to the workflow or the store directly.
    ("api::graphql", None, &["control::workflow", "control::scan", "control::runtime", "store", "api::admin"]),
];

struct Source {
    module: String,
    path: PathBuf,
    text: String,
}

fn src_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn is_test_file(relative: &Path) -> bool {
    let name = relative.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    relative.components().any(|c| c.as_os_str() == "tests") || name == "tests.rs" || name.ends_with("_tests.rs")
}

/// The module path of a file under `src/`: `control/workflow/mod.rs` is `control::workflow`.
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// The source before its first `#[cfg(test)]` (test modules sit at the end of a file), with
/// line comments removed.
fn non_test_code(text: &str) -> String {
    let code = text.find("#[cfg(test)]").map_or(text, |at| &text[..at]);
    code.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// Every non-test source of the node (not the engine crates, not the crate roots).
fn node_sources() -> Vec<Source> {
    let root = src_root();
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable src dir").flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(&root).expect("under src").to_path_buf();
            if path.is_dir() {
                if relative != Path::new("engines") {
                    dirs.push(path);
                }
                continue;
            }
            let top = relative.to_string_lossy();
            if !top.ends_with(".rs") || top == "lib.rs" || top == "main.rs" || is_test_file(&relative) {
                continue;
            }
            let text = non_test_code(&std::fs::read_to_string(&path).expect("readable source"));
            out.push(Source { module: module_of(&relative), path: relative, text });
        }
    }
    out.sort_by(|a, b| a.module.cmp(&b.module));
    out
}

/// The paths a source names, each as written: `crate::a::b`, `super::c`, `self::d`, with
/// grouped imports (`crate::{a::b, c}`) expanded one level.
fn named_paths(text: &str) -> Vec<String> {
    let group = Regex::new(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{").expect("regex");
    let plain = Regex::new(r"\b(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+").expect("regex");
    let item = Regex::new(r"^\s*([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)").expect("regex");
    let mut paths: Vec<String> = plain.find_iter(text).map(|m| m.as_str().to_string()).collect();
    for found in group.captures_iter(text) {
        let prefix = &found[1];
        let start = found.get(0).map_or(0, |m| m.end());
        let (mut depth, mut at, mut item_start) = (1usize, start, start);
        let bytes = text.as_bytes();
        while at < bytes.len() && depth > 0 {
            match bytes[at] {
                b'{' => depth += 1,
                b'}' => depth -= 1,
                b',' if depth == 1 => {
                    if let Some(m) = item.captures(&text[item_start..at]) {
                        paths.push(format!("{prefix}::{}", &m[1]));
                    }
                    item_start = at + 1;
                }
                _ => {}
            }
            at += 1;
        }
        if let Some(m) = item.captures(&text[item_start..at.saturating_sub(1).max(item_start)]) {
            paths.push(format!("{prefix}::{}", &m[1]));
        }
    }
    paths
}

/// The module a written path lands in: the longest known module prefix of its absolute form.
fn resolve(from: &Source, written: &str, modules: &BTreeSet<String>) -> Option<String> {
    let mut segments: Vec<&str> = written.split("::").collect();
    let own: Vec<&str> = if from.module.is_empty() { Vec::new() } else { from.module.split("::").collect() };
    let mut absolute: Vec<&str> = match segments.first().copied() {
        Some("crate") => {
            segments.remove(0);
            Vec::new()
        }
        Some("self") => {
            segments.remove(0);
            own.clone()
        }
        Some("super") => {
            let mut base = own.clone();
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop();
            }
            base
        }
        _ => return None,
    };
    absolute.extend(segments);
    (1..=absolute.len()).rev().map(|n| absolute[..n].join("::")).find(|candidate| modules.contains(candidate))
}

/// Module → the modules its non-test code names.
fn module_graph(sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = sources.iter().map(|s| s.module.clone()).collect();
    let mut graph = BTreeMap::new();
    for source in sources {
        let targets: BTreeSet<String> = named_paths(&source.text)
            .iter()
            .filter_map(|written| resolve(source, written, &modules))
            .filter(|target| *target != source.module)
            .collect();
        graph.insert(source.module.clone(), targets);
    }
    graph
}

fn plane_of(module: &str) -> &str {
    module.split("::").next().unwrap_or_default()
}

/// The room a module belongs to: `control::workflow::rolling` is in `control::workflow`,
/// `node::roll_boards` in `node`.
fn room_of(module: &str) -> String {
    let segments: Vec<&str> = module.split("::").collect();
    if FOLDER_PLANES.contains(&segments[0]) && segments.len() > 1 {
        format!("{}::{}", segments[0], segments[1])
    } else {
        segments[0].to_string()
    }
}

fn starts_with_module(module: &str, prefix: &str) -> bool {
    module == prefix || module.starts_with(&format!("{prefix}::"))
}

fn rank(plane: &str) -> usize {
    PLANES.iter().position(|p| *p == plane).unwrap_or_else(|| panic!("{plane} is not a plane: add it to PLANES"))
}

#[test]
fn the_top_level_is_the_planes() {
    let mut entries: Vec<String> = std::fs::read_dir(src_root())
        .expect("readable src")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, TOP_LEVEL, "src/ should list the planes only (docs/architecture.md)");
}

#[test]
fn imports_between_planes_run_down() {
    let graph = module_graph(&node_sources());
    let mut violations = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            let (from_plane, to_plane) = (plane_of(from), plane_of(to));
            if rank(to_plane) > rank(from_plane) {
                violations.push(format!("{from} imports {to}: {to_plane} is above {from_plane}"));
            }
            if from_plane == "data" && to_plane == "control" && !CONTROL_SEEN_BY_DATA.iter().any(|r| starts_with_module(to, r)) {
                violations.push(format!("{from} imports {to}: data meets control only at {CONTROL_SEEN_BY_DATA:?}"));
            }
        }
    }
    assert!(violations.is_empty(), "imports against the planes:\n{}", violations.join("\n"));
}

#[test]
fn rooms_keep_their_rules() {
    let graph = module_graph(&node_sources());
    let mut violations = Vec::new();
    for (room, exempt, forbidden) in ROOM_RULES {
        for (from, targets) in graph.iter().filter(|(m, _)| starts_with_module(m, room)) {
            if exempt.is_some_and(|e| starts_with_module(from, e)) {
                continue;
            }
            for to in targets.iter().filter(|t| forbidden.iter().any(|f| starts_with_module(t, f))) {
                violations.push(format!("{from} imports {to} ({room} must not import {forbidden:?})"));
            }
        }
    }
    assert!(violations.is_empty(), "imports against the room rules:\n{}", violations.join("\n"));
}

#[test]
fn rooms_import_each_other_without_a_circle() {
    let graph = module_graph(&node_sources());
    let mut rooms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in &graph {
        let from_room = room_of(from);
        // A plane folder's own `mod.rs` and its rooms are a module and its submodules.
        let nested = |to: &String| plane_of(to) == plane_of(&from_room) && (*to == plane_of(to) || from_room == plane_of(&from_room));
        let entry = rooms.entry(from_room.clone()).or_default();
        entry.extend(targets.iter().map(|t| room_of(t)).filter(|t| *t != from_room && !nested(t)));
    }
    // Kahn's algorithm: what cannot be peeled off lies on a circle.
    let mut remaining = rooms.clone();
    loop {
        let leaves: Vec<String> = remaining
            .iter()
            .filter(|(_, targets)| targets.iter().all(|t| !remaining.contains_key(t)))
            .map(|(room, _)| room.clone())
            .collect();
        if leaves.is_empty() {
            break;
        }
        for leaf in leaves {
            remaining.remove(&leaf);
        }
    }
    let circles: Vec<String> = remaining
        .iter()
        .map(|(room, targets)| {
            let on: Vec<&String> = targets.iter().filter(|t| remaining.contains_key(*t)).collect();
            format!("{room} -> {on:?}")
        })
        .collect();
    assert!(circles.is_empty(), "rooms on a circle:\n{}", circles.join("\n"));
    assert!(rooms.len() >= 30, "the room graph lost its rooms ({}): the source walk is broken", rooms.len());
}

#[test]
fn no_two_files_import_each_other() {
    let sources = node_sources();
    let files: BTreeMap<&str, &Path> = sources.iter().map(|s| (s.module.as_str(), s.path.as_path())).collect();
    let graph = module_graph(&sources);
    let mut circles = Vec::new();
    for (a, targets) in &graph {
        for b in targets.iter().filter(|b| a < *b) {
            let nested = starts_with_module(a, b) || starts_with_module(b, a);
            if !nested && graph.get(b).is_some_and(|back| back.contains(a)) {
                circles.push(format!("{} <-> {}", files[a.as_str()].display(), files[b.as_str()].display()));
            }
        }
    }
    assert!(circles.is_empty(), "files that import each other:\n{}", circles.join("\n"));
}

#[test]
fn the_walker_sees_the_imports_it_checks() {
    // A check that found nothing because it read nothing would pass: make sure the walk and the
    // resolver see a few imports that are known to be there.
    let graph = module_graph(&node_sources());
    let has = |from: &str, to: &str| {
        graph.iter().any(|(m, targets)| starts_with_module(m, from) && targets.iter().any(|t| starts_with_module(t, to)))
    };
    assert!(has("control::workflow", "store"), "workflow -> store not seen");
    assert!(has("data::evaluation", "control::runtime"), "evaluation -> runtime not seen");
    assert!(has("cluster::replication", "control::workflow"), "replication -> workflow not seen");
    assert!(has("api::admin::writes", "api::admin::forward"), "a grouped or super import not seen");
}

#[test]
fn the_bus_handler_never_calls_the_sync_worker_back() {
    let root = src_root().join("cluster/replication");
    for file in ["handler.rs", "notices/mod.rs", "pulls.rs"] {
        let text = std::fs::read_to_string(root.join(file)).expect("readable source");
        for forbidden in ["super::sync", "replication::sync"] {
            assert!(!non_test_code(&text).contains(forbidden), "{file} names {forbidden}: pulls are queued through `pulls`");
        }
    }
}
