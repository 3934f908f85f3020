//! Alarm settings at runtime: which `alarm-settings.yml` is in force on this node, and putting a
//! new one in force.
//!
//! Operators push settings to any node's admin port. The main validates them ([`validate`]) and
//! writes them as one entry (catalog `alarm-settings`, name `alarm-settings`) on the single write
//! path; the entry replicates and converges like a rule entry. On every node, each scan (the
//! periodic one, and the one a commit notice pokes) hands the entry, or its absence, to
//! [`LiveSettings::sync`], which puts in force ([`wanted`]):
//!
//! - the entry's content while the entry lives;
//! - else the boot file (`alarms.settings_file`), read once at start (deleting the entry
//!   returns every node to its file).
//!
//! Putting settings in force is SkyWalking's settings watcher: a rule equal in every attribute
//! keeps its windows and states, any other rule starts fresh (`AlarmEngine::replace`), and the
//! hooks are swapped (a kept hook keeps its queued deliveries). Content a node cannot read (a
//! newer build wrote it) leaves the settings in force as they are and is shown as refused.

use std::path::PathBuf;
use std::sync::Mutex;

use super::SharedAlarms;
use super::hooks::delivery::AlarmNotifier;
use super::hooks::target::{HookTarget, TargetError, targets_of};
use super::settings::{AlarmSettings, SettingsError};
use crate::base::ids::{Catalog, ContentHash, Revision, RuleKey, RuleName};

/// The one entry's name in the `alarm-settings` catalog.
pub const SETTINGS_NAME: &str = "alarm-settings";

/// The key of the runtime settings entry.
pub fn settings_key() -> &'static RuleKey {
    static KEY: std::sync::LazyLock<RuleKey> =
        std::sync::LazyLock::new(|| RuleKey::new(Catalog::AlarmSettings, RuleName::parse(SETTINGS_NAME).expect("a constant valid name")));
    &KEY
}

/// Why settings are refused.
#[derive(Debug, thiserror::Error)]
pub enum SettingsRefused {
    #[error("alarm settings must be UTF-8 text")]
    NotText,
    #[error("{0}")]
    Settings(#[from] SettingsError),
    #[error("{0}")]
    Hooks(#[from] TargetError),
}

/// Reads and validates settings as every node will: the rules (expressions verified) and the
/// hooks as delivery targets.
pub fn validate(content: &[u8]) -> Result<(AlarmSettings, Vec<HookTarget>), SettingsRefused> {
    let text = std::str::from_utf8(content).map_err(|_| SettingsRefused::NotText)?;
    let settings = AlarmSettings::parse(text, &super::verify::verify)?;
    let targets = targets_of(&settings)?;
    Ok((settings, targets))
}

/// Where settings in force came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Pushed at runtime, written at this revision.
    Runtime { revision: Revision },
    /// The boot file.
    File { path: PathBuf },
    /// No boot file and nothing pushed: no rules.
    Empty { path: PathBuf },
}

impl Source {
    /// `runtime`, `file` or `none`, as the admin API shows it.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Runtime { .. } => "runtime",
            Source::File { .. } => "file",
            Source::Empty { .. } => "none",
        }
    }
}

/// The boot file as the node read it at start (`text` none: there was none).
#[derive(Debug, Clone)]
pub struct Boot {
    pub path: PathBuf,
    pub text: Option<String>,
}

/// The live runtime settings entry, as the scan and the write path hand it over (this module
/// does not read storage).
#[derive(Debug, Clone, Copy)]
pub struct Pushed<'a> {
    pub content: &'a [u8],
    pub revision: &'a Revision,
}

/// Which settings should be in force: the live runtime entry's, else the boot file's.
pub fn wanted<'a>(pushed: Option<Pushed<'a>>, boot: &'a Boot) -> (Source, &'a [u8]) {
    match pushed {
        Some(pushed) => (Source::Runtime { revision: pushed.revision.clone() }, pushed.content),
        None => match &boot.text {
            Some(text) => (Source::File { path: boot.path.clone() }, text.as_bytes()),
            None => (Source::Empty { path: boot.path.clone() }, b""),
        },
    }
}

/// Settings this node would not put in force, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub source: Source,
    pub hash: ContentHash,
    pub reason: String,
}

/// The settings in force on this node.
#[derive(Debug, Clone)]
pub struct InForce {
    pub source: Source,
    pub content: String,
    pub hash: ContentHash,
    /// The rules' names, in file order, and the hooks' ids.
    pub rules: Vec<String>,
    pub hooks: Vec<String>,
    /// The last settings refused since these were put in force.
    pub refused: Option<Refused>,
}

/// What one [`LiveSettings::sync`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Synced {
    /// The wanted settings were in force already.
    Unchanged,
    /// New settings are in force: `kept` rules kept their windows and states, `fresh` started
    /// fresh (changed or added), `removed` are gone (their alarms dropped, no recovery).
    Applied { kept: Vec<String>, fresh: Vec<String>, removed: Vec<String> },
    /// The wanted settings could not be read; those in force stay.
    Refused { reason: String },
}

/// The node's alarm settings: the running rules and hooks, and what is in force.
pub struct LiveSettings {
    alarms: SharedAlarms,
    notifier: AlarmNotifier,
    boot: Boot,
    in_force: Mutex<InForce>,
}

impl LiveSettings {
    /// `alarms` and `notifier` run `settings`, read from `boot` (the boot file is in force).
    pub fn new(alarms: SharedAlarms, notifier: AlarmNotifier, boot: Boot, settings: &AlarmSettings) -> LiveSettings {
        let (source, content) = wanted(None, &boot);
        let in_force = InForce {
            source,
            content: String::from_utf8_lossy(content).into_owned(),
            hash: ContentHash::of(content),
            rules: settings.rules.iter().map(|r| r.name.clone()).collect(),
            hooks: settings.hooks.iter().map(|h| h.id.to_string()).collect(),
            refused: None,
        };
        LiveSettings { alarms, notifier, boot, in_force: Mutex::new(in_force) }
    }

    /// The settings in force.
    pub fn in_force(&self) -> InForce {
        self.lock().clone()
    }

    /// Puts in force what `pushed` (the live runtime entry; none when there is none, or only
    /// its tombstone) asks for.
    pub fn sync(&self, pushed: Option<Pushed<'_>>) -> Synced {
        let (source, content) = wanted(pushed, &self.boot);
        let hash = ContentHash::of(content);
        let mut in_force = self.lock();
        if in_force.hash == hash {
            // The same text from elsewhere (pushed the boot file's content, or deleted back to
            // it): the rules in force are these already.
            in_force.source = source;
            return Synced::Unchanged;
        }
        if in_force.refused.as_ref().is_some_and(|r| r.hash == hash) {
            return Synced::Unchanged;
        }
        let (settings, targets) = match validate(content) {
            Ok(valid) => valid,
            Err(e) => {
                let reason = e.to_string();
                tracing::warn!(source = source.kind(), %reason, "alarm settings refused; the settings in force stay");
                in_force.refused = Some(Refused { source, hash, reason: reason.clone() });
                return Synced::Refused { reason };
            }
        };
        if let Err(e) = self.notifier.replace_targets(targets) {
            let reason = e.to_string();
            tracing::warn!(source = source.kind(), %reason, "alarm hooks refused; the settings in force stay");
            in_force.refused = Some(Refused { source, hash, reason: reason.clone() });
            return Synced::Refused { reason };
        }
        let rules: Vec<String> = settings.rules.iter().map(|r| r.name.clone()).collect();
        let hooks: Vec<String> = settings.hooks.iter().map(|h| h.id.to_string()).collect();
        for warning in &settings.warnings {
            tracing::warn!(source = source.kind(), %warning, "alarm settings");
        }
        let fresh = self.alarms.lock().unwrap_or_else(|p| p.into_inner()).replace(settings);
        let removed: Vec<String> = in_force.rules.iter().filter(|r| !rules.contains(r)).cloned().collect();
        let kept: Vec<String> = rules.iter().filter(|r| !fresh.contains(r)).cloned().collect();
        tracing::info!(source = source.kind(), rules = rules.len(), hooks = hooks.len(), ?fresh, ?removed, "alarm settings in force");
        *in_force = InForce { source, content: String::from_utf8_lossy(content).into_owned(), hash, rules, hooks, refused: None };
        Synced::Applied { kept, fresh, removed }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InForce> {
        self.in_force.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Settings read from `boot`, with hooks that deliver to nothing (the hook worker is not run).
#[cfg(test)]
pub(crate) fn test_live(boot: Boot) -> (LiveSettings, SharedAlarms, AlarmNotifier) {
    use std::sync::{Arc, Mutex};
    let (settings, targets) = validate(boot.text.as_deref().unwrap_or("").as_bytes()).expect("valid boot settings");
    let alarms: SharedAlarms = Arc::new(Mutex::new(super::engine::AlarmEngine::new(settings.clone())));
    let sender = Arc::new(super::hooks::twin::MemHookSender::new());
    let metrics = Arc::new(crate::base::self_metrics::SelfMetrics::new());
    let (notifier, _worker) = super::hooks::delivery::hook_delivery(targets, super::hooks::target::DeliverySettings::default(), sender, metrics).expect("hooks");
    (LiveSettings::new(alarms.clone(), notifier.clone(), boot, &settings), alarms, notifier)
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
