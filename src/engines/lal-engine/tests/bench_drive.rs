//! The benchmark's driver does the real work: every line through both nginx rules.

mod common;

use common::{NOW_MS, load_lal, rules_path};
use hotrule_lal_engine::bench::{Driven, drive};
use hotrule_lal_engine::{Body, LogData};

#[test]
fn drive_runs_every_line_through_the_file() {
    let file = load_lal(&rules_path("lal/nginx.yaml"));
    let line = |kind: &str, body: &str| LogData {
        service: "nginx".into(),
        service_instance: "nginx-0".into(),
        layer: "NGINX".into(),
        timestamp_ms: NOW_MS,
        body: Body::Text(body.into()),
        tags: vec![("LOG_KIND".into(), kind.into())],
        ..LogData::default()
    };
    let logs = [
        line(
            "NGINX_ACCESS_LOG",
            "1.2.3.4 - - [x] \"GET / HTTP/1.1\" 200 5 \"-\"",
        ),
        line("NGINX_ERROR_LOG", "2021/01/01 00:00:00 [error] 1#1: boom"),
        line("NGINX_ACCESS_LOG", "no match"),
    ];
    assert_eq!(
        drive(&file, &logs, 9),
        Driven {
            lines: 9,
            kept: 6,
            samples: 3,
            errors: 0
        }
    );
    assert_eq!(drive(&file, &[], 9), Driven::default());
}
