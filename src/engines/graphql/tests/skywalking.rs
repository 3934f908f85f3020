//! The official SkyWalking query protocol (all files concatenated) parses, and real client
//! documents (booster-ui, swctl) prepare and complete against it.

use hotrule_graphql::{OperationKind, Request, Schema, complete, prepare};
use serde_json::{Value, json};

fn skywalking_schema() -> Schema {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/skywalking-query-protocol");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "graphqls"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{files:?}");
    let sdl: String = files.iter().map(|p| std::fs::read_to_string(p).unwrap() + "\n").collect();
    Schema::parse(&sdl).unwrap()
}

const BOOSTER_UI: &str = r#"query queryData($expression00: String!, $expression01: String!, $entity: Entity!, $duration: Duration!) {
  expression00: execExpression(expression: $expression00, entity: $entity, duration: $duration) { type results { metric { labels { key value } } values { name: id value refId: traceID owner { scope serviceID serviceName normal serviceInstanceID serviceInstanceName endpointID endpointName } } } error }
  expression01: execExpression(expression: $expression01, entity: $entity, duration: $duration) { type error }
}"#;

#[test]
fn official_schema_parses() {
    let s = skywalking_schema();
    assert_eq!(s.query_type(), "Query");
    assert_eq!(s.mutation_type(), Some("Mutation"));
}

#[test]
fn booster_ui_six_style_aliased_roots_with_shared_variables() {
    let s = skywalking_schema();
    let body = json!({
        "query": BOOSTER_UI,
        "variables": {
            "expression00": "service_cpm",
            "expression01": "service_sla/100",
            "entity": {"serviceName": "h", "normal": true},
            "duration": {"start": "2024-01-01 1200", "end": "2024-01-01 1300", "step": "MINUTE", "coldStage": false}
        },
        "operationName": null
    });
    let req = Request::from_json(body.to_string().as_bytes()).unwrap();
    let p = prepare(&s, &req).unwrap();
    assert_eq!(p.kind, OperationKind::Query);
    assert_eq!(p.fields.len(), 2);
    let f = &p.fields[0];
    assert_eq!((f.response_key.as_str(), f.name.as_str()), ("expression00", "execExpression"));
    assert_eq!(f.args["expression"], json!("service_cpm"));
    assert_eq!(f.args["entity"], json!({"serviceName": "h", "normal": true}));
    assert_eq!(
        f.args["duration"],
        json!({"start": "2024-01-01 1200", "end": "2024-01-01 1300", "step": "MINUTE", "coldStage": false})
    );
    // Absent optional arguments without defaults stay absent.
    assert!(!f.args.contains_key("debug"));
    assert_eq!(p.fields[1].args["expression"], json!("service_sla/100"));

    let resolved = vec![
        Ok(json!({
            "type": "TIME_SERIES_VALUES",
            "results": [{
                "metric": {"labels": [{"key": "p", "value": "50"}]},
                "values": [{"id": 1704110400000i64, "value": "12", "traceID": null, "owner": null, "extra": 1}]
            }],
            "error": null,
            "debuggingTrace": null
        })),
        Ok(json!({"type": "UNKNOWN", "results": [], "error": "bad expression"})),
    ];
    let out = complete(&s, &p, resolved);
    let expected = json!({"data": {
        "expression00": {"type": "TIME_SERIES_VALUES", "results": [{
            "metric": {"labels": [{"key": "p", "value": "50"}]},
            "values": [{"name": "1704110400000", "value": "12", "refId": null, "owner": null}]
        }], "error": null},
        "expression01": {"type": "UNKNOWN", "error": "bad expression"}
    }});
    assert_eq!(out, expected);
    // Aliases are the keys (sorted: serde_json's maps, see the crate docs).
    let keys: Vec<_> = out["data"]["expression00"]["results"][0]["values"][0].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["name", "owner", "refId", "value"]);
}

#[test]
fn swctl_literal_arguments_with_null_variables() {
    let s = skywalking_schema();
    let query = r#"query ($duration: Duration!) {
        result: execExpression(expression: "avg(service_resp_time)", entity: {serviceName: "svc", normal: true}, duration: {start: "2024-01-01 1200", end: "2024-01-01 1300", step: MINUTE}, debug: false) {
            type results { values { id value } } error
        }
        version: version
    }"#;
    let mut body = json!({"query": query, "variables": {"duration": {"start": "a", "end": "b", "step": "HOUR"}}});
    let p = prepare(&s, &Request::from_json(body.to_string().as_bytes()).unwrap()).unwrap();
    assert_eq!(p.fields[0].args["entity"], json!({"serviceName": "svc", "normal": true}));
    assert_eq!(p.fields[0].args["duration"]["step"], json!("MINUTE"));
    assert_eq!(p.fields[0].args["debug"], json!(false));
    assert_eq!(p.fields[1].name, "version");

    // Literal-only document with "variables": null.
    let q2 = r#"{ listLayers listServices(layer: "GENERAL") { id label: name } }"#;
    body = json!({"query": q2, "variables": null, "operationName": null});
    let p = prepare(&s, &Request::from_json(body.to_string().as_bytes()).unwrap()).unwrap();
    assert_eq!(p.fields.len(), 2);
    let out = complete(&s, &p, vec![Ok(json!(["GENERAL"])), Ok(json!([{"id": "c3Zj.1", "name": "svc"}]))]);
    assert_eq!(out, json!({"data": {"listLayers": ["GENERAL"], "listServices": [{"id": "c3Zj.1", "label": "svc"}]}}));
}

#[test]
fn unknown_field_error_is_graphql_java_style() {
    let s = skywalking_schema();
    let q = r#"{ result: execExpression(expression: "x", entity: {}, duration: {start: "a", end: "b", step: DAY}) { results { values { foo } } } }"#;
    let errs = prepare(&s, &Request::new(q)).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].message, "Validation error (FieldUndefined@[result/results/values/foo]) : Field 'foo' in type 'MQEValue' is undefined");
    assert_eq!(errs[0].locations, vec![(1, 121)]);
}

#[test]
fn full_introspection_of_official_schema() {
    let s = skywalking_schema();
    let p = prepare(&s, &Request::new(hotrule_graphql_tests_introspection_query())).unwrap();
    assert!(p.fields.is_empty());
    let out = complete(&s, &p, vec![]);
    assert!(out.get("errors").is_none(), "{out}");
    let types = out["data"]["__schema"]["types"].as_array().unwrap();
    let names: Vec<&str> = types.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for n in ["Query", "Mutation", "Long", "Duration", "String", "__Schema", "__TypeKind", "__DirectiveLocation"] {
        assert!(names.contains(&n), "{n}");
    }
    let query = types.iter().find(|t| t["name"] == "Query").unwrap();
    let exec = query["fields"].as_array().unwrap().iter().find(|f| f["name"] == "execExpression").unwrap();
    assert_eq!(exec["type"], json!({"kind": "NON_NULL", "name": null, "ofType": {"kind": "OBJECT", "name": "ExpressionResult", "ofType": null}}));
    // For manual cross-checks with graphql-core's build_client_schema (not needed by the test).
    if let Ok(path) = std::env::var("HOTRULE_GQL_DUMP") {
        std::fs::write(path, show(&out)).unwrap();
    }
    let size = serde_json::to_vec(&out).unwrap().len();
    assert!(size > 100_000, "{size}");
}

fn hotrule_graphql_tests_introspection_query() -> &'static str {
    include_str!("data/introspection_query.graphql")
}

fn show(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}
