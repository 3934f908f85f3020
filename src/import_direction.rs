//! Keeps `docs/architecture.md`'s import diagram true: imports between the node's modules run
//! one way (HTTP → replication → workflow → scan → runtime → rules → compiler, with the store
//! below them all). Each module's non-test sources are read and every `crate::<module>` path in
//! them is checked against the modules it may not name.

use std::path::{Path, PathBuf};

/// (module, modules it must never import).
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("replication", &["http", "node"]),
    ("workflow", &["replication", "http", "cluster", "bus", "node"]),
    ("scan", &["workflow", "replication", "http", "cluster", "bus", "node"]),
    ("runtime", &["scan", "workflow", "replication", "http", "cluster", "bus", "store", "node"]),
    ("rules", &["runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "store", "node"]),
    ("store", &["rules", "rolling", "runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "node"]),
    ("bus", &["workflow", "replication", "scan", "http", "cluster", "node"]),
    ("cluster", &["workflow", "replication", "scan", "http", "node"]),
    ("data", &["metrics", "runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "store", "node"]),
    ("metrics", &["data", "runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "node"]),
    ("ingest", &["dispatch", "metrics", "runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "store", "agent", "node"]),
    ("telemetry", &["data", "metrics", "runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "store", "node"]),
    ("export", &["data", "runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "store", "node", "ingest", "dispatch", "query"]),
    ("dispatch", &["http", "workflow", "scan", "replication", "cluster", "bus", "node", "ingest", "query", "export"]),
    ("logs", &["data", "dispatch", "ingest", "query", "export", "runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "node"]),
    ("query", &["workflow", "scan", "runtime", "store", "http", "node"]),
    ("rolling", &["compile_pool", "runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "store", "client", "data", "metrics", "telemetry", "node"]),
    ("roller", &["http", "workflow", "replication", "scan", "bus", "ingest", "query", "export", "node"]),
    ("compile_pool", &["runtime", "scan", "workflow", "replication", "http", "cluster", "bus", "store", "node"]),
];

/// Every `.rs` file of a module (the `name.rs` file or the `name/` tree), test files excluded.
fn sources(root: &Path, module: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let single = root.join(format!("{module}.rs"));
    if single.is_file() {
        files.push(single);
    }
    let mut dirs = vec![root.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The source before its first `#[cfg(test)]` (test modules sit at the end of a file).
fn non_test_part(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

#[test]
fn imports_run_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (module, forbidden) in FORBIDDEN {
        let files = sources(&root, module);
        assert!(!files.is_empty(), "no sources found for {module}");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("readable source");
            for (number, line) in non_test_part(&text).lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                for target in *forbidden {
                    if code.contains(&format!("crate::{target}::")) || code.contains(&format!("crate::{target};")) {
                        violations.push(format!("{}:{}: {module} imports {target}", file.display(), number + 1));
                    }
                }
            }
        }
    }
    assert!(violations.is_empty(), "imports against the direction:\n{}", violations.join("\n"));
}

#[test]
fn the_bus_handler_never_calls_the_sync_worker_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/replication");
    for file in ["handler.rs", "notices.rs", "pulls.rs"] {
        let text = std::fs::read_to_string(root.join(file)).expect("readable source");
        for forbidden in ["super::sync", "replication::sync"] {
            assert!(!non_test_part(&text).contains(forbidden), "{file} names {forbidden}: pulls are queued through `pulls`");
        }
    }
}
