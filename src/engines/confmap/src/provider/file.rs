//! The `file` provider: `file:relative/path`, `file:/abs/path`, `file:C:\x`. The file is read and
//! parsed as YAML; an empty file is an empty value. Relative paths are relative to the working
//! directory. The file can be watched.

use std::path::{Path, PathBuf};

use super::{Provider, ProviderError, Retrieved};
use crate::uri::Uri;

/// Why a `file:` URI could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("file provider: empty path in `{uri}`")]
    EmptyPath { uri: String },
    #[error("unable to read the file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("file {} is not valid UTF-8", path.display())]
    NotUtf8 { path: PathBuf },
}

/// Serves `file:` URIs from the local file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileProvider;

impl FileProvider {
    fn path(uri: &Uri) -> Result<&Path, FileError> {
        if uri.opaque().is_empty() {
            return Err(FileError::EmptyPath {
                uri: uri.to_string(),
            });
        }
        Ok(Path::new(uri.opaque()))
    }
}

impl Provider for FileProvider {
    fn scheme(&self) -> &str {
        "file"
    }

    fn retrieve(&self, uri: &Uri) -> Result<Retrieved, ProviderError> {
        let path = FileProvider::path(uri)?;
        let bytes = std::fs::read(path).map_err(|source| FileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| FileError::NotUtf8 {
            path: path.to_owned(),
        })?;
        Ok(Retrieved::from_yaml(text))
    }

    fn watch_path(&self, uri: &Uri) -> Option<PathBuf> {
        FileProvider::path(uri).ok().map(Path::to_owned)
    }
}
