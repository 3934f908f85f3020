//! Watching the files a resolution read ([`crate::Resolved::watched_files`]) and reporting changes.
//!
//! One worker thread owns the loop: it waits for a reason (a file-system notification, or the poll
//! interval elapsing), lets a burst of notifications settle (debounce), then compares each file's
//! fingerprint (modification time, length and a hash of the contents) with the last one it
//! reported, and emits one [`WatchEvent::Changed`] if any differs. Fingerprints decide, so events
//! caused by merely reading a file, or by unrelated files in the same directory, never fire.
//!
//! The parent directories are watched (with `notify`), not the files, so an editor or a deployment
//! tool that replaces a file by renaming another over it still triggers. Files that are symlinks
//! (Kubernetes ConfigMap mounts swap a `..data` link) accept any event in their directory. If
//! `notify` cannot be set up the watcher polls instead; even with `notify` it also polls at the
//! poll interval as a safety net for missed events (a recreated directory, an overflowed queue).
//! Env and inline sources have no file and are not watched.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use notify::Watcher as _;

/// Why watching could not start, or failed while running.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot resolve the path {}: {source}", path.display())]
    Path {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the watch thread: {0}")]
    Spawn(std::io::Error),
    #[error("file notification failed: {0}")]
    Notify(#[from] notify::Error),
}

/// What the watcher reports.
#[derive(Debug)]
pub enum WatchEvent {
    /// These files changed (or appeared, or disappeared) since the last report: resolve again.
    Changed { paths: Vec<PathBuf> },
    /// Notifications failed; polling continues.
    Failed(WatchError),
}

/// How to detect changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// File-system notifications, falling back to polling when they cannot be set up.
    Auto,
    /// Polling only.
    Poll,
}

/// What a running watcher uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchBackend {
    Notify,
    Poll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchOptions {
    pub mode: WatchMode,
    /// How long a burst of notifications must stay quiet before files are compared.
    pub debounce: Duration,
    /// How often files are compared without a notification.
    pub poll_interval: Duration,
}

impl Default for WatchOptions {
    fn default() -> WatchOptions {
        WatchOptions {
            mode: WatchMode::Auto,
            debounce: Duration::from_millis(200),
            poll_interval: Duration::from_secs(2),
        }
    }
}

/// A running watch; dropping it stops the worker thread.
pub struct Watcher {
    wake_tx: mpsc::Sender<Wake>,
    worker: Option<JoinHandle<()>>,
    backend: WatchBackend,
    files: Vec<PathBuf>,
    _notify: Option<notify::RecommendedWatcher>,
}

enum Wake {
    FileEvent,
    Failed(notify::Error),
    Stop,
}

/// What a file looked like when last compared; `None` when it could not be read.
type Fingerprint = Option<(Option<SystemTime>, u64, u64)>;

impl Watcher {
    /// Watches `files` and calls `on_event` from the worker thread for every change.
    pub fn start(
        files: &[PathBuf],
        options: WatchOptions,
        on_event: impl FnMut(WatchEvent) + Send + 'static,
    ) -> Result<Watcher, WatchError> {
        let mut absolute = Vec::new();
        for file in files {
            let path = std::path::absolute(file).map_err(|source| WatchError::Path {
                path: file.clone(),
                source,
            })?;
            if !absolute.contains(&path) {
                absolute.push(path);
            }
        }
        let (wake_tx, wake_rx) = mpsc::channel();
        let notify = match options.mode {
            WatchMode::Poll => None,
            WatchMode::Auto => match start_notify(&absolute, wake_tx.clone()) {
                Ok(notify) => Some(notify),
                Err(error) => {
                    tracing::warn!(%error, "file notifications unavailable; polling for configuration changes");
                    None
                }
            },
        };
        let backend = if notify.is_some() {
            WatchBackend::Notify
        } else {
            WatchBackend::Poll
        };
        // Fingerprint before returning, so a change made right after `start` is seen.
        let baseline = absolute
            .iter()
            .map(|path| (path.clone(), fingerprint(path)))
            .collect();
        let worker = Worker {
            files: baseline,
            options,
            wake_rx,
            on_event: Box::new(on_event),
        };
        let worker = std::thread::Builder::new()
            .name("confmap-watch".to_owned())
            .spawn(move || worker.run())
            .map_err(WatchError::Spawn)?;
        Ok(Watcher {
            wake_tx,
            worker: Some(worker),
            backend,
            files: absolute,
            _notify: notify,
        })
    }

    /// Watches `files` and reports on a channel of capacity 1 that coalesces: while an event is
    /// waiting to be received, later ones are dropped (the waiting one already says "resolve again").
    pub fn start_with_channel(
        files: &[PathBuf],
        options: WatchOptions,
    ) -> Result<(Watcher, mpsc::Receiver<WatchEvent>), WatchError> {
        let (event_tx, event_rx): (SyncSender<WatchEvent>, _) = mpsc::sync_channel(1);
        let watcher = Watcher::start(files, options, move |event| {
            match event_tx.try_send(event) {
                Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
            }
        })?;
        Ok((watcher, event_rx))
    }

    pub fn backend(&self) -> WatchBackend {
        self.backend
    }

    /// The watched files, as absolute paths.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.wake_tx.send(Wake::Stop);
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

fn start_notify(
    files: &[PathBuf],
    wake_tx: mpsc::Sender<Wake>,
) -> Result<notify::RecommendedWatcher, WatchError> {
    let watched_files = files.to_vec();
    let mut any_event_dirs: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for file in files {
        let dir = file
            .parent()
            .map(Path::to_owned)
            .unwrap_or_else(|| PathBuf::from("/"));
        let is_symlink =
            std::fs::symlink_metadata(file).is_ok_and(|meta| meta.file_type().is_symlink());
        if is_symlink && !any_event_dirs.contains(&dir) {
            any_event_dirs.push(dir.clone());
        }
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let mut notify = notify::recommended_watcher(move |result: notify::Result<notify::Event>| {
        let wake = match result {
            Ok(event) if matches!(event.kind, notify::EventKind::Access(_)) => return,
            Ok(event) => {
                let relevant = event.paths.iter().any(|path| {
                    watched_files.contains(path)
                        || path
                            .parent()
                            .is_some_and(|dir| any_event_dirs.iter().any(|d| d == dir))
                });
                if !relevant {
                    return;
                }
                Wake::FileEvent
            }
            Err(error) => Wake::Failed(error),
        };
        let _ = wake_tx.send(wake);
    })?;
    for dir in &dirs {
        notify.watch(dir, notify::RecursiveMode::NonRecursive)?;
    }
    Ok(notify)
}

struct Worker {
    files: BTreeMap<PathBuf, Fingerprint>,
    options: WatchOptions,
    wake_rx: mpsc::Receiver<Wake>,
    on_event: Box<dyn FnMut(WatchEvent) + Send>,
}

impl Worker {
    fn run(mut self) {
        loop {
            let woken_by_event = match self.wake_rx.recv_timeout(self.options.poll_interval) {
                Ok(Wake::FileEvent) => true,
                Ok(Wake::Failed(error)) => {
                    (self.on_event)(WatchEvent::Failed(WatchError::Notify(error)));
                    continue;
                }
                Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => false,
            };
            if !woken_by_event && self.changed_files().is_empty() {
                continue;
            }
            if !self.settle() {
                return;
            }
            let changed = self.changed_files();
            if changed.is_empty() {
                continue;
            }
            for (path, fingerprint) in &changed {
                self.files.insert(path.clone(), *fingerprint);
            }
            tracing::debug!(files = ?changed.iter().map(|(path, _)| path).collect::<Vec<_>>(), "configuration files changed");
            (self.on_event)(WatchEvent::Changed {
                paths: changed.into_iter().map(|(path, _)| path).collect(),
            });
        }
    }

    /// Waits until no file event arrived for one debounce period (at most ten periods in all).
    /// Returns false when asked to stop.
    fn settle(&mut self) -> bool {
        let give_up_at = Instant::now() + self.options.debounce * 10;
        loop {
            let quiet_for = self
                .options
                .debounce
                .min(give_up_at.saturating_duration_since(Instant::now()));
            if quiet_for.is_zero() {
                return true;
            }
            match self.wake_rx.recv_timeout(quiet_for) {
                Ok(Wake::FileEvent) => {}
                Ok(Wake::Failed(error)) => {
                    (self.on_event)(WatchEvent::Failed(WatchError::Notify(error)))
                }
                Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
                Err(RecvTimeoutError::Timeout) => return true,
            }
        }
    }

    fn changed_files(&self) -> Vec<(PathBuf, Fingerprint)> {
        self.files
            .iter()
            .filter_map(|(path, last)| {
                let now = fingerprint(path);
                (now != *last).then(|| (path.clone(), now))
            })
            .collect()
    }
}

fn fingerprint(path: &Path) -> Fingerprint {
    let metadata = std::fs::metadata(path).ok()?;
    let contents = std::fs::read(path).ok()?;
    let mut hasher = DefaultHasher::new();
    hasher.write(&contents);
    Some((metadata.modified().ok(), metadata.len(), hasher.finish()))
}
