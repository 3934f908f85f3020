//! Bundled rule files: the rules shipped on disk as `<rules-dir>/<catalog>/<name>.yaml`.
//!
//! They are read once at boot and never written. A bundled file is the content a rule falls
//! back to when it has no entry, and what `delete?mode=revertToBundled` restores.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::base::ids::{Catalog, ContentHash, RuleKey, RuleName};

/// The largest rule file accepted, bundled or posted.
pub const MAX_CONTENT_BYTES: usize = 1_000_000;
const MAX_DEPTH: usize = 16;

#[derive(Debug, Clone)]
pub struct BundledRule {
    pub key: RuleKey,
    pub content: Arc<Vec<u8>>,
    pub hash: ContentHash,
    pub path: PathBuf,
}

#[derive(Debug, Default)]
pub struct Bundled {
    rules: BTreeMap<RuleKey, BundledRule>,
}

#[derive(Debug, thiserror::Error)]
pub enum BundledError {
    #[error("rules dir {path}: {source}")]
    Read { path: String, source: std::io::Error },
}

impl Bundled {
    pub fn empty() -> Bundled {
        Bundled::default()
    }

    /// Reads every `*.yaml`/`*.yml` under `<dir>/<catalog>/`. Files that cannot be used (bad
    /// name, too large, unreadable) are skipped and reported in the returned warnings.
    pub fn load(dir: &Path) -> Result<(Bundled, Vec<String>), BundledError> {
        let mut rules = BTreeMap::new();
        let mut warnings = Vec::new();
        std::fs::read_dir(dir).map_err(|source| BundledError::Read { path: dir.display().to_string(), source })?;
        for catalog in Catalog::ALL {
            let root = dir.join(catalog.as_str());
            if root.is_dir() {
                walk(&root, &root, catalog, 0, &mut rules, &mut warnings);
            }
        }
        Ok((Bundled { rules }, warnings))
    }

    pub fn get(&self, key: &RuleKey) -> Option<&BundledRule> {
        self.rules.get(key)
    }

    pub fn contains(&self, key: &RuleKey) -> bool {
        self.rules.contains_key(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &BundledRule> {
        self.rules.values()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

fn walk(
    root: &Path,
    dir: &Path,
    catalog: Catalog,
    depth: usize,
    rules: &mut BTreeMap<RuleKey, BundledRule>,
    warnings: &mut Vec<String>,
) {
    if depth > MAX_DEPTH {
        warnings.push(format!("{}: deeper than {MAX_DEPTH} levels, skipped", dir.display()));
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            warnings.push(format!("{}: {e}", dir.display()));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            walk(root, &path, catalog, depth + 1, rules, warnings);
            continue;
        }
        let Some(ext) = path.extension().and_then(|e| e.to_str()) else { continue };
        if ext != "yaml" && ext != "yml" {
            continue;
        }
        match read_rule(root, &path, catalog) {
            Ok(rule) => {
                if let Some(previous) = rules.insert(rule.key.clone(), rule) {
                    warnings.push(format!("{}: duplicate rule name, {} wins", previous.path.display(), path.display()));
                }
            }
            Err(message) => warnings.push(format!("{}: {message}", path.display())),
        }
    }
}

fn read_rule(root: &Path, path: &Path, catalog: Catalog) -> Result<BundledRule, String> {
    let relative = path.strip_prefix(root).map_err(|e| e.to_string())?.with_extension("");
    let name_text = relative
        .components()
        .map(|c| c.as_os_str().to_str().ok_or("name is not UTF-8"))
        .collect::<Result<Vec<_>, _>>()?
        .join("/");
    let name = RuleName::parse(&name_text).map_err(|e| e.to_string())?;
    let content = std::fs::read(path).map_err(|e| e.to_string())?;
    if content.len() > MAX_CONTENT_BYTES {
        return Err(format!("{} bytes, larger than the {MAX_CONTENT_BYTES}-byte limit", content.len()));
    }
    Ok(BundledRule {
        key: RuleKey::new(catalog, name),
        hash: ContentHash::of(&content),
        content: Arc::new(content),
        path: path.to_path_buf(),
    })
}
