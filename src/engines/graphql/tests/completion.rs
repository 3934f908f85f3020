//! `complete`: selections applied to resolved JSON, leaf checks, abstract types and null
//! propagation per the spec.

use hotrule_graphql::{Request, Schema, complete, prepare};
use serde_json::{Value, json};

const SDL: &str = r#"
scalar Long
type Query {
  o: Obj
  nn: Obj!
  list: [Obj!]
  nnList: [Obj]!
  i: Int
  f: Float
  s: String
  id: ID
  b: Boolean
  l: Long
  step: Step
  steps: [Step!]
  node: Node
  any: [Any!]!
  bad: String
}
type Obj { name: String! opt: String n: Int child: Obj kids: [Obj!]! step: Step! }
enum Step { DAY HOUR }
interface Node { id: ID! }
type A implements Node { id: ID! a: String }
type B implements Node { id: ID! b: String }
union Any = A | B
"#;

fn run(q: &str, resolved: Vec<Result<Value, String>>) -> Value {
    let s = Schema::parse(SDL).unwrap();
    let p = prepare(&s, &Request::new(q)).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.fields.len(), resolved.len(), "resolver count");
    complete(&s, &p, resolved)
}

#[test]
fn objects_aliases_typename_and_order() {
    let out = run(
        "{ o { z: name __typename name child { n } alias: opt } }",
        vec![Ok(json!({"name": "x", "opt": null, "n": 1, "child": {"n": 2, "name": "c"}, "extra": true}))],
    );
    assert_eq!(out, json!({"data": {"o": {"z": "x", "__typename": "Obj", "name": "x", "child": {"n": 2}, "alias": null}}}));
    let keys: Vec<_> = out["data"]["o"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["__typename", "alias", "child", "name", "z"], "every alias a key (sorted: serde_json's maps)");
    // Fields of the same key are merged, fragments included.
    let out = run("{ o { child { n } ...F } } fragment F on Obj { child { name } }", vec![Ok(json!({"child": {"n": 1, "name": "m"}}))]);
    assert_eq!(out, json!({"data": {"o": {"child": {"n": 1, "name": "m"}}}}));
}

#[test]
fn scalars_and_enums() {
    let out = run(
        "{ i f s id b l step steps }",
        vec![Ok(json!(7)), Ok(json!(1.5)), Ok(json!(3)), Ok(json!(42)), Ok(json!(true)), Ok(json!(1u64 << 40)), Ok(json!("DAY")), Ok(json!(["HOUR"]))],
    );
    assert_eq!(out, json!({"data": {"i": 7, "f": 1.5, "s": "3", "id": "42", "b": true, "l": 1099511627776u64, "step": "DAY", "steps": ["HOUR"]}}));

    let out = run("{ i b step }", vec![Ok(json!(1u64 << 40)), Ok(json!("yes")), Ok(json!("WEEK"))]);
    assert_eq!(out["data"], json!({"i": null, "b": null, "step": null}));
    let errors = out["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 3);
    assert_eq!(errors[0]["path"], json!(["i"]));
    assert_eq!(errors[0]["locations"], json!([{"line": 1, "column": 3}]));
    assert!(errors[2]["message"].as_str().unwrap().contains("enum 'Step'"));
    // A bad enum inside a non-null list item nulls the whole (nullable) list.
    let out = run("{ steps }", vec![Ok(json!(["DAY", "NOPE"]))]);
    assert_eq!(out["data"], json!({"steps": null}));
    assert_eq!(out["errors"][0]["path"], json!(["steps", 1]));
    // Lists must be lists; objects must be objects.
    let out = run("{ steps o { name } }", vec![Ok(json!("DAY")), Ok(json!(3))]);
    assert_eq!(out["data"], json!({"steps": null, "o": null}));
    assert_eq!(out["errors"].as_array().unwrap().len(), 2);
}

#[test]
fn null_propagation() {
    // Missing non-null field: the nearest nullable parent (o) becomes null.
    let out = run("{ o { name opt } s }", vec![Ok(json!({"opt": "x"})), Ok(json!("s"))]);
    assert_eq!(out["data"], json!({"o": null, "s": "s"}));
    assert_eq!(out["errors"][0]["message"], "Cannot return null for non-nullable field Obj.name.");
    assert_eq!(out["errors"][0]["path"], json!(["o", "name"]));
    // Through a non-null list item up to the nullable list.
    let out = run("{ list { name } }", vec![Ok(json!([{"name": "a"}, {"name": null}]))]);
    assert_eq!(out["data"], json!({"list": null}));
    assert_eq!(out["errors"][0]["path"], json!(["list", 1, "name"]));
    // Nullable list items absorb it.
    let out = run("{ nnList { name } }", vec![Ok(json!([{"name": "a"}, {}]))]);
    assert_eq!(out["data"], json!({"nnList": [{"name": "a"}, null]}));
    // Through nested non-nulls to a non-null root: data is null.
    let out = run("{ nn { kids { step } } s }", vec![Ok(json!({"kids": [{"step": "BAD"}]})), Ok(json!("s"))]);
    assert_eq!(out["data"], Value::Null);
    assert_eq!(out["errors"].as_array().unwrap().len(), 1);
    assert_eq!(out["errors"][0]["path"], json!(["nn", "kids", 0, "step"]));
    let out = run("{ nn { name } }", vec![Ok(Value::Null)]);
    assert_eq!(out, json!({"data": null, "errors": [{"message": "Cannot return null for non-nullable field Query.nn.", "locations": [{"line": 1, "column": 3}], "path": ["nn"]}]}));
}

#[test]
fn resolver_errors() {
    let out = run("{ s x: bad }", vec![Ok(json!("ok")), Err("boom".into())]);
    assert_eq!(out, json!({"data": {"s": "ok", "x": null}, "errors": [{"message": "boom", "locations": [{"line": 1, "column": 5}], "path": ["x"]}]}));
    let out = run("{ nn { name } s }", vec![Err("down".into()), Ok(json!("s"))]);
    assert_eq!(out["data"], Value::Null);
    assert_eq!(out["errors"][0]["message"], "down");
    // Too few resolved values is an error per missing field, not a panic.
    let s = Schema::parse(SDL).unwrap();
    let p = prepare(&s, &Request::new("{ s b }")).unwrap();
    let out = complete(&s, &p, vec![Ok(json!("x"))]);
    assert_eq!(out["data"], json!({"s": "x", "b": null}));
    assert_eq!(out["errors"].as_array().unwrap().len(), 1);
}

#[test]
fn abstract_types() {
    let out = run(
        "{ node { id __typename ... on A { a } ... on B { b } } any { __typename ... on A { id a } ... on B { b } } }",
        vec![
            Ok(json!({"__typename": "B", "id": 5, "a": "no", "b": "yes"})),
            Ok(json!([{"__typename": "A", "id": "1", "a": "x"}, {"__typename": "B", "b": "y"}])),
        ],
    );
    assert_eq!(
        out,
        json!({"data": {"node": {"id": "5", "__typename": "B", "b": "yes"}, "any": [{"__typename": "A", "id": "1", "a": "x"}, {"__typename": "B", "b": "y"}]}})
    );
    let out = run("{ node { id } }", vec![Ok(json!({"id": 1}))]);
    assert_eq!(out["data"], json!({"node": null}));
    assert!(out["errors"][0]["message"].as_str().unwrap().contains("concrete type"));
}

#[test]
fn skip_include_and_variables_in_output() {
    let s = Schema::parse(SDL).unwrap();
    let req = Request {
        query: "query($t: Boolean = true) { s @skip(if: $t) i @include(if: $t) o { name @skip(if: $t) opt } }".into(),
        variables: None,
        operation_name: None,
    };
    let p = prepare(&s, &req).unwrap();
    assert_eq!(p.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["i", "o"]);
    let out = complete(&s, &p, vec![Ok(json!(1)), Ok(json!({"opt": "x"}))]);
    assert_eq!(out, json!({"data": {"i": 1, "o": {"opt": "x"}}}));
}

#[test]
fn response_size_is_bounded() {
    let s = Schema::parse("type Query { t: T! } type T { a: T! b: T! c: T! d: T! e: T! }").unwrap();
    // Nested introspection multiplies: each level re-expands T's five fields (5^10 values).
    let mut q = String::from("{ __schema { types { ");
    for _ in 0..10 {
        q.push_str("fields { name type { ofType { ");
    }
    q.push_str("name ");
    q.push_str(&"} } } ".repeat(10));
    q.push_str("} } }");
    let p = prepare(&s, &Request::new(q)).unwrap();
    let out = complete(&s, &p, vec![]);
    assert!(out["errors"][0]["message"].as_str().unwrap().contains("response has more than"), "{}", out["errors"]);
}

#[test]
fn the_body_is_written_in_selection_order_and_nulls_cut_what_was_written() {
    let s = Schema::parse(SDL).unwrap();
    let body = |q: &str, resolved: Vec<Result<Value, String>>| {
        let p = prepare(&s, &Request::new(q)).unwrap_or_else(|e| panic!("{e:?}"));
        let completed = hotrule_graphql::complete_body(&s, &p, resolved);
        (String::from_utf8(completed.body).unwrap(), completed.has_errors, completed.data_null)
    };
    let (text, errors, null) = body("{ o { z: name n alias: opt } s }", vec![Ok(json!({"name": "x", "n": 1, "opt": "y"})), Ok(json!("t"))]);
    assert_eq!(text, r#"{"data":{"o":{"z":"x","n":1,"alias":"y"},"s":"t"}}"#);
    assert!(!errors && !null);
    // `name` is non-null: `child` was half written when it failed, and is `null` in the body.
    let (text, errors, null) = body("{ o { n child { n name } } }", vec![Ok(json!({"n": 1, "child": {"n": 2, "name": null}}))]);
    let v: Value = serde_json::from_str(&text).expect("the body is JSON");
    assert_eq!(v["data"], json!({"o": {"n": 1, "child": null}}));
    assert!(text.starts_with(r#"{"data":{"o":{"n":1,"child":null}},"errors":[{"#), "{text}");
    assert!(errors && !null);
    let (text, errors, null) = body("{ nn { name } }", vec![Ok(json!({"name": null}))]);
    assert!(text.starts_with(r#"{"data":null,"errors":["#), "{text}");
    assert!(errors && null);
}
