//! One way for a test to skip when a real component it needs is missing (a Debian package,
//! a Python client, a built UI). Outside CI it prints `SKIP: <test>: <why>` and the test passes.
//! Under CI (`CI` set to `true` or `1`, which `.ci/run` sets) a skip is a failure: a green CI
//! run must mean every real-component test ran, and `cargo test` hides the output of passing
//! tests, so a printed skip alone would go unseen. `HOTRULE_ALLOW_SKIPS=1` lets a CI run skip
//! anyway (say why in the run's log).

/// Reports that `test` cannot run because of `why`; returns `false` (the caller returns).
/// Panics under CI unless skips are allowed.
pub fn skip(test: &str, why: &str) -> bool {
    eprintln!("SKIP: {test}: {why}");
    if skips_fail() {
        panic!("{test} was skipped under CI ({why}); .ci/run installs what it needs, or set HOTRULE_ALLOW_SKIPS=1");
    }
    false
}

/// Whether a skip fails the run: under CI, unless `HOTRULE_ALLOW_SKIPS=1`.
pub fn skips_fail() -> bool {
    skips_fail_given(std::env::var("CI").ok().as_deref(), std::env::var("HOTRULE_ALLOW_SKIPS").ok().as_deref())
}

/// [`skips_fail`] for the values of `CI` and `HOTRULE_ALLOW_SKIPS`.
pub fn skips_fail_given(ci: Option<&str>, allow: Option<&str>) -> bool {
    let set = |value: Option<&str>| value.is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    set(ci) && !set(allow)
}

#[cfg(test)]
mod tests {
    use super::skips_fail_given;

    #[test]
    fn a_skip_fails_under_ci_unless_allowed() {
        assert!(skips_fail_given(Some("true"), None));
        assert!(skips_fail_given(Some("1"), Some("0")));
        assert!(skips_fail_given(Some("TRUE"), None));
        assert!(!skips_fail_given(Some("true"), Some("1")));
        assert!(!skips_fail_given(None, None));
        assert!(!skips_fail_given(Some("false"), None));
        assert!(!skips_fail_given(Some(""), None));
    }
}
