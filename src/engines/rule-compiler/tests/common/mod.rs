//! Loading the bundled SkyWalking rule corpus for the integration tests.

use std::path::{Path, PathBuf};

use hotrule_rule_compiler::DslKind;
/// The corpus holds 98 rule files; fewer means the checkout is incomplete and the test would lie.
const EXPECTED_FILES: usize = 98;

const MAL_DIRS: &[&str] = &[
    "otel-rules",
    "log-mal-rules",
    "telegraf-rules",
    "meter-analyzer-config",
];

/// The repository's bundled rules: a verbatim copy of the SkyWalking corpus, so the tests need
/// nothing outside the checkout.
fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../config/rules")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            out.push(path);
        }
    }
}

/// Every corpus file with its language, relative path and bytes.
pub fn corpus() -> Vec<(DslKind, String, Vec<u8>)> {
    let root = corpus_root();
    assert!(
        root.is_dir(),
        "corpus directory {} is missing",
        root.display()
    );
    let mut files = Vec::new();
    for (dir, kind) in MAL_DIRS
        .iter()
        .map(|d| (*d, DslKind::Mal))
        .chain([("lal", DslKind::Lal)])
    {
        let mut paths = Vec::new();
        yaml_files(&root.join(dir), &mut paths);
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let relative = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            files.push((kind, relative, bytes));
        }
    }
    assert!(
        files.len() >= EXPECTED_FILES,
        "corpus holds {} rule files, expected at least {EXPECTED_FILES}",
        files.len()
    );
    files
}
