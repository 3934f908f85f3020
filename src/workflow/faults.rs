//! Named failpoints of the on-demand workflow, for fault-injection tests and chaos runs.
//!
//! They exist only in builds with the `failpoints` feature and are set with the `FAILPOINTS`
//! environment variable (`name=return`, `name=return(abort)`, ...) or the debug admin route of
//! such a build. `return(abort)` aborts the process on the spot, as a crash at that step.

pub const BEFORE_PERSIST: &str = "workflow::before_persist";
pub const PERSIST: &str = "workflow::persist";
pub const AFTER_PERSIST: &str = "workflow::after_persist";
pub const TEARDOWN: &str = "workflow::teardown";

/// Every failpoint name the workflow and store declare.
pub const ALL: [&str; 5] = [BEFORE_PERSIST, PERSIST, AFTER_PERSIST, TEARDOWN, "store::read"];

/// `Some(argument)` when the failpoint `name` is set to `return(argument)`.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub fn injected(name: &str) -> Option<String> {
    fail::fail_point!(name, |argument: Option<String>| {
        let argument = argument.unwrap_or_default();
        if argument == "abort" {
            tracing::error!(failpoint = name, "failpoint: aborting the process");
            std::process::abort();
        }
        Some(argument)
    });
    None
}
