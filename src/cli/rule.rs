//! `hotrule rule ...`: the rule commands (push, get, list, layers, inactivate, delete, status,
//! dump, history, diff, restore), `rule roll ...` (a rolling change's status, rollback and force-commit) and `rule test`
//! (a MAL file on sample files, or a LAL file on sample logs, without storing it). Each command
//! is one call into the protocol client (`admin::rule`, `admin::rolling`, `admin::rule_test`);
//! this file maps flags to that call and its result to an exit code: 0 done, 1 a failed or
//! refused request (or, for `rule test`, a rule error or a bad log line), 2 a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::admin::history;
use super::admin::rule::{self, CliError};
use super::admin::rolling::{self, RollEnd, RollQuery, RollingPush};
use super::admin::rule_test::{self, TestVerdict};
use crate::api::client::AdminClient;
use super::{ServerArgs, admin_client, exit_code};

#[derive(Subcommand)]
pub(super) enum RuleCommand {
    /// Create, update or reactivate a rule from a file.
    Push {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        file: PathBuf,
        #[arg(long)]
        allow_storage_change: bool,
        #[arg(long)]
        force: bool,
        /// Roll the change out one node at a time (docs/rolling.md) instead of everywhere at once.
        #[arg(long)]
        rolling: bool,
        /// With --rolling: how long each node may take to prove healthy (5m, 30s, ...).
        #[arg(long, requires = "rolling")]
        step_timeout: Option<String>,
        /// With --rolling: how long each node must run the new content cleanly.
        #[arg(long, requires = "rolling")]
        health_window: Option<String>,
        /// With --rolling: the optional checks, a comma list of evalErrors and values, or none.
        #[arg(long, requires = "rolling")]
        health_checks: Option<String>,
    },
    /// Print one rule (raw YAML, or JSON with --json).
    Get {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        bundled: bool,
        #[arg(long)]
        json: bool,
    },
    /// List rules as a table (or JSON with --json).
    List {
        #[arg(long)]
        catalog: Option<String>,
        #[arg(long)]
        json: bool,
        /// Every live node's view: a row per rule x node, with whether it has converged.
        #[arg(long)]
        cluster: bool,
    },
    /// List the runtime layers (`layerDefinitions`) registered on the node.
    Layers {
        /// Include SkyWalking's built-in layers.
        #[arg(long)]
        built_in: bool,
        #[arg(long)]
        json: bool,
    },
    /// Inactivate a rule (its measures are kept).
    Inactivate {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
    },
    /// Every kept revision of a rule file (or agent object, alarm settings, template), newest
    /// first, with who made it (a table, or JSON with --json).
    History {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// A unified diff between two revisions of a file (revisions as `rule history` shows them).
    Diff {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
    },
    /// Put a revision back: a normal write of its content with every check a push gets (a
    /// reshape needs --allow-storage-change). Restoring an INACTIVE revision inactivates the
    /// file, a delete deletes it, a revert to bundled reverts it.
    Restore {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        revision: String,
        #[arg(long)]
        allow_storage_change: bool,
        #[arg(long)]
        force: bool,
        /// Roll the restore out one node at a time (docs/rolling.md).
        #[arg(long)]
        rolling: bool,
    },
    /// Delete an INACTIVE rule.
    Delete {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        revert_to_bundled: bool,
    },
    /// The phase of a structural apply: by --apply-id (from a push's answer), or the latest
    /// apply of --catalog/--name (optionally of exactly --content-hash).
    Status {
        #[arg(long, conflicts_with_all = ["catalog", "name", "content_hash"], required_unless_present_all = ["catalog", "name"])]
        apply_id: Option<String>,
        #[arg(long, requires = "name")]
        catalog: Option<String>,
        #[arg(long, requires = "catalog")]
        name: Option<String>,
        #[arg(long, requires = "catalog")]
        content_hash: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Dry-run a MAL file on sample files (Prometheus text exposition), or a LAL file
    /// (--catalog lal) on sample logs (--logs), without storing it: prints the values each rule
    /// would produce, or per log the extraction, the sink's decision and the emitted samples;
    /// rule errors and bad log lines on stderr (exit 1).
    Test {
        #[arg(long)]
        catalog: String,
        /// The rule file to test.
        file: PathBuf,
        /// A batch of samples; repeatable, in time order (one batch per file).
        #[arg(long = "samples", value_name = "FILE", required_unless_present = "logs", conflicts_with = "logs")]
        samples: Vec<PathBuf>,
        /// Sample logs for a LAL file (--catalog lal): one SkyWalking LogData JSON object per
        /// line (as POST /v3/logs takes them), e.g.
        /// {"service":"nginx-1","serviceInstance":"i1","layer":"NGINX","timestamp":1700000000000,
        /// "tags":{"data":[{"key":"LOG_KIND","value":"NGINX_ACCESS_LOG"}]},
        /// "body":{"text":{"text":"GET / 200"}}}. Also: "endpoint", "traceContext":{"traceId",
        /// "traceSegmentId","spanId"}, a body {"json":{"json":"<text>"}} or {"yaml":{"yaml":"<text>"}};
        /// timestamp 0 or absent is now. Blank lines are skipped; a bad line is reported with its
        /// number and the others still run.
        #[arg(long, value_name = "FILE.jsonl")]
        logs: Option<PathBuf>,
        /// A log-mal-rules file the emitted samples go through (repeatable; named after the
        /// file); none: the node's bundled log-mal-rules files.
        #[arg(long = "mal", value_name = "FILE", requires = "logs")]
        mal: Vec<PathBuf>,
        /// Time between batches: the last batch is stamped now, each earlier one an interval
        /// before (500ms, 30s, 5m ...).
        #[arg(long, default_value = "60s")]
        interval: String,
        /// A label added to every sample, name=value; repeatable (e.g. job_name=vm-monitoring).
        #[arg(long = "label", value_name = "NAME=VALUE")]
        labels: Vec<String>,
        #[arg(long)]
        json: bool,
        /// Also run the file stored under --name on the same samples and show the difference.
        #[arg(long)]
        against_current: bool,
        /// The stored rule to compare with (default: FILE's name without its extension).
        #[arg(long)]
        name: Option<String>,
    },
    /// Rolling changes (one node at a time): see docs/rolling.md.
    Roll {
        #[command(subcommand)]
        command: RollCommand,
    },
    /// Save a tar.gz backup of the stored rules.
    Dump {
        #[arg(long)]
        catalog: Option<String>,
        #[arg(short, long, default_value = "runtime-rule-dump.tar.gz")]
        output: PathBuf,
    },
}

#[derive(Subcommand)]
pub(super) enum RollCommand {
    /// Every roll this node holds (or one file's), with a progress bar and each node's state.
    Status {
        #[arg(long, requires = "name")]
        catalog: Option<String>,
        #[arg(long, requires = "catalog")]
        name: Option<String>,
        /// Redraw every --interval-secs until no roll is in progress.
        #[arg(long)]
        watch: bool,
        #[arg(long, default_value_t = 2)]
        interval_secs: u64,
        #[arg(long)]
        json: bool,
    },
    /// Return every node to the committed content.
    Rollback {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
    },
    /// Make the rolling content the committed entry everywhere now.
    ForceCommit {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
    },
}

/// Runs one rule command against the node `server` names.
pub(super) async fn run(server: ServerArgs, command: RuleCommand) -> ExitCode {
    let client = match admin_client(&server) {
        Ok(client) => client,
        Err(code) => return code,
    };
    let result = match command {
        RuleCommand::Push { catalog, name, file, allow_storage_change, force, rolling: false, .. } => {
            rule::push(&client, &catalog, &name, &file, allow_storage_change, force).await
        }
        RuleCommand::Push {
            catalog, name, file, allow_storage_change, force, rolling: true, step_timeout, health_window, health_checks,
        } => {
            let settings = RollingPush { step_timeout, health_window, health_checks };
            rolling::push_rolling(&client, &catalog, &name, &file, allow_storage_change, force, &settings).await
        }
        RuleCommand::Roll { command: RollCommand::Rollback { catalog, name } } => {
            rolling::end(&client, &catalog, &name, RollEnd::Rollback).await
        }
        RuleCommand::Roll { command: RollCommand::ForceCommit { catalog, name } } => {
            rolling::end(&client, &catalog, &name, RollEnd::ForceCommit).await
        }
        RuleCommand::Get { catalog, name, bundled, json } => rule::get(&client, &catalog, &name, bundled, json).await,
        RuleCommand::List { catalog, json, cluster: false } => rule::list(&client, catalog.as_deref(), json).await,
        RuleCommand::List { json, cluster: true, .. } => rule::cluster_list(&client, json).await,
        RuleCommand::Layers { built_in, json } => rule::layers(&client, built_in, json).await,
        RuleCommand::Inactivate { catalog, name } => rule::inactivate(&client, &catalog, &name).await,
        RuleCommand::Delete { catalog, name, revert_to_bundled } => {
            rule::delete(&client, &catalog, &name, revert_to_bundled).await
        }
        RuleCommand::Status { apply_id, catalog, name, content_hash, json } => {
            let query = match (apply_id, catalog, name) {
                (Some(id), _, _) => rule::StatusQuery::ApplyId(id),
                (None, Some(catalog), Some(name)) => rule::StatusQuery::Rule { catalog, name, content_hash },
                _ => {
                    eprintln!("hotrule: rule status needs --apply-id, or --catalog and --name");
                    return ExitCode::from(2);
                }
            };
            rule::status(&client, &query, json).await
        }
        RuleCommand::History { catalog, name, json } => history::history(&client, &catalog, &name, json).await,
        RuleCommand::Diff { catalog, name, from, to } => history::diff(&client, &catalog, &name, &from, &to).await,
        RuleCommand::Restore { catalog, name, revision, allow_storage_change, force, rolling } => {
            let flags = history::RestoreFlags { allow_storage_change, force, rolling };
            history::restore(&client, &catalog, &name, &revision, &flags).await
        }
        RuleCommand::Dump { catalog, output } => rule::dump(&client, catalog.as_deref(), &output).await,
        RuleCommand::Roll { command: RollCommand::Status { catalog, name, watch, interval_secs, json } } => {
            let query = match (catalog, name) {
                (Some(catalog), Some(name)) => RollQuery::One { catalog, name },
                _ => RollQuery::All,
            };
            let every = watch.then(|| std::time::Duration::from_secs(interval_secs.max(1)));
            rolling::status(&client, &query, every, json).await
        }
        RuleCommand::Test { catalog, file, samples, logs, mal, interval, labels, json, against_current, name } => {
            if let Some(logs) = logs {
                return lal_rule_test(&client, &catalog, file, logs, mal, json, against_current, name).await;
            }
            return rule_test(&client, catalog, file, samples, &interval, &labels, json, against_current, name).await;
        }
    };
    exit_code(result)
}

/// `hotrule rule test`: exit 0 when every rule evaluated, 1 on a rule error or a refused
/// request, 2 on a usage error.
#[allow(clippy::too_many_arguments)]
async fn rule_test(
    client: &AdminClient,
    catalog: String,
    file: PathBuf,
    samples: Vec<PathBuf>,
    interval: &str,
    labels: &[String],
    json: bool,
    against_current: bool,
    name: Option<String>,
) -> ExitCode {
    let usage = |message: String| {
        eprintln!("hotrule: {message}");
        ExitCode::from(2)
    };
    let interval = match crate::config::DurationSetting::parse(interval) {
        Ok(d) => d.0,
        Err(e) => return usage(format!("--interval: {e}")),
    };
    let labels = match labels.iter().map(|l| rule_test::parse_label(l)).collect::<Result<Vec<_>, _>>() {
        Ok(labels) => labels,
        Err(e) => return usage(e),
    };
    let args = rule_test::TestArgs { catalog, name, file, samples, interval, labels, json, against_current, now_ms: None };
    test_exit(rule_test::test(client, &args).await)
}

/// `hotrule rule test --catalog lal FILE --logs LOGS`: exit as [`rule_test`] does; a bad log
/// line counts as a failure (the other lines still ran).
#[allow(clippy::too_many_arguments)]
async fn lal_rule_test(
    client: &AdminClient,
    catalog: &str,
    file: PathBuf,
    logs: PathBuf,
    mal: Vec<PathBuf>,
    json: bool,
    against_current: bool,
    name: Option<String>,
) -> ExitCode {
    if catalog != "lal" {
        eprintln!("hotrule: --logs runs a LAL file: use --catalog lal (got {catalog})");
        return ExitCode::from(2);
    }
    if against_current {
        eprintln!("hotrule: --against-current compares MAL values; it does not apply to --logs");
        return ExitCode::from(2);
    }
    let args = rule_test::lal::LalTestArgs { name, file, logs, mal, json, now_ms: None };
    test_exit(rule_test::lal::test(client, &args).await)
}

/// A test's verdict as an exit code: 0 clean, 1 with the failures counted on stderr.
fn test_exit(result: Result<TestVerdict, CliError>) -> ExitCode {
    match result {
        Ok(TestVerdict::Clean) => ExitCode::SUCCESS,
        Ok(TestVerdict::RuleErrors(n)) => {
            eprintln!("hotrule: {n} rule evaluation(s) failed");
            ExitCode::FAILURE
        }
        Ok(TestVerdict::LogProblems { bad_lines, rule_errors }) => {
            eprintln!("hotrule: {bad_lines} bad log line(s), {rule_errors} rule evaluation(s) failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("hotrule: {e}");
            ExitCode::FAILURE
        }
    }
}

