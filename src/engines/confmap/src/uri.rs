//! Configuration URIs (`scheme:opaque`) and the `--set key.path=value` sugar.
//!
//! As in the Collector (`confmap/resolver.go`, `confmap/expand.go`): a scheme matches
//! `[A-Za-z][A-Za-z0-9+.-]+`, so it is at least two characters long and a Windows drive letter
//! (`C:\x`) is never mistaken for one; a string without `:` or starting with a drive letter is a path
//! and becomes `file:<path>`.

use std::fmt;

/// Why a URI or a `--set` flag could not be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum UriError {
    #[error(
        "invalid URI `{uri}`: the scheme `{scheme}` must match [A-Za-z][A-Za-z0-9+.-]+ (at least 2 characters)"
    )]
    BadScheme { uri: String, scheme: String },
    #[error("invalid URI: empty")]
    Empty,
    #[error("invalid --set `{flag}`: missing equal sign")]
    SetMissingEquals { flag: String },
}

/// A parsed `scheme:opaque` configuration URI.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Uri {
    scheme: String,
    opaque: String,
}

impl Uri {
    /// Parses a URI as given on the command line; a bare path becomes a `file:` URI.
    pub fn parse(text: &str) -> Result<Uri, UriError> {
        if text.is_empty() {
            return Err(UriError::Empty);
        }
        let Some((scheme, opaque)) = text.split_once(':') else {
            return Ok(Uri::file(text));
        };
        if starts_with_drive_letter(text) {
            return Ok(Uri::file(text));
        }
        if !is_valid_scheme(scheme) {
            return Err(UriError::BadScheme {
                uri: text.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        Ok(Uri {
            scheme: scheme.to_owned(),
            opaque: opaque.to_owned(),
        })
    }

    /// Parses the inside of a `${...}` reference: it must name its scheme (no bare-path rule).
    pub(crate) fn parse_reference(text: &str) -> Result<Uri, UriError> {
        let (scheme, opaque) = text.split_once(':').unwrap_or((text, ""));
        if !is_valid_scheme(scheme) {
            return Err(UriError::BadScheme {
                uri: text.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        Ok(Uri {
            scheme: scheme.to_owned(),
            opaque: opaque.to_owned(),
        })
    }

    fn file(path: &str) -> Uri {
        Uri {
            scheme: "file".to_owned(),
            opaque: path.to_owned(),
        }
    }

    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// Everything after the first `:`.
    pub fn opaque(&self) -> &str {
        &self.opaque
    }
}

impl fmt::Display for Uri {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}:{}", self.scheme, self.opaque)
    }
}

/// Whether `scheme` matches `[A-Za-z][A-Za-z0-9+.-]+`.
pub fn is_valid_scheme(scheme: &str) -> bool {
    let mut chars = scheme.chars();
    let first_ok = chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic());
    first_ok
        && scheme.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

fn starts_with_drive_letter(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

/// Rewrites `--set key.path=value` into the equivalent `yaml:` URI, exactly as the Collector does
/// (`otelcol/flags.go`): split at the first `=`, replace every `.` in the key with `::`, trim both
/// sides. There is no escape for a key that contains a dot; the value is parsed as YAML.
pub fn set_to_yaml_uri(flag: &str) -> Result<String, UriError> {
    let Some((key, value)) = flag.split_once('=') else {
        return Err(UriError::SetMissingEquals {
            flag: flag.to_owned(),
        });
    };
    Ok(format!(
        "yaml:{}: {}",
        key.replace('.', "::").trim(),
        value.trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_paths_and_drive_letters() {
        let uri = Uri::parse("env:HOME").expect("valid");
        assert_eq!((uri.scheme(), uri.opaque()), ("env", "HOME"));
        assert_eq!(
            Uri::parse("http://h:1/p").expect("valid").opaque(),
            "//h:1/p"
        );
        assert_eq!(
            Uri::parse("conf/node.yaml").expect("path").to_string(),
            "file:conf/node.yaml"
        );
        assert_eq!(
            Uri::parse("C:\\conf\\node.yaml").expect("drive").scheme(),
            "file"
        );
        assert_eq!(
            Uri::parse("yaml:a::b: 1").expect("yaml").opaque(),
            "a::b: 1"
        );
    }

    #[test]
    fn bad_schemes_are_rejected() {
        assert!(matches!(
            Uri::parse("1x:foo"),
            Err(UriError::BadScheme { .. })
        ));
        assert!(matches!(
            Uri::parse("my scheme:foo"),
            Err(UriError::BadScheme { .. })
        ));
        assert!(matches!(
            Uri::parse(":foo"),
            Err(UriError::BadScheme { .. })
        ));
        assert_eq!(Uri::parse(""), Err(UriError::Empty));
        // A one-letter scheme can only be a drive letter, so it is read as a path.
        assert_eq!(Uri::parse("x:foo").expect("drive").scheme(), "file");
        assert!(matches!(
            Uri::parse_reference("x:foo"),
            Err(UriError::BadScheme { .. })
        ));
    }

    #[test]
    fn set_flag_sugar_mirrors_the_collector() {
        assert_eq!(
            set_to_yaml_uri("processors.batch.timeout=2s").as_deref(),
            Ok("yaml:processors::batch::timeout: 2s")
        );
        assert_eq!(
            set_to_yaml_uri(" a.b = [1, 2] ").as_deref(),
            Ok("yaml:a::b: [1, 2]")
        );
        assert_eq!(set_to_yaml_uri("a=b=c").as_deref(), Ok("yaml:a: b=c"));
        assert!(matches!(
            set_to_yaml_uri("a.b"),
            Err(UriError::SetMissingEquals { .. })
        ));
    }
}
