//! Introspection of a small schema, checked field by field, plus `__type` and validation of
//! introspection selections.

use hotrule_graphql::{Request, Schema, complete, prepare};
use serde_json::{Value, json};

pub const SMALL_SDL: &str = r#"
"""
  The root.
"""
schema { query: Root mutation: Mut }

"A custom scalar."
scalar Long @specifiedBy(url: "https://example.com/long")

"A tag."
directive @tag("The tag name." name: String!) repeatable on FIELD_DEFINITION | OBJECT

interface Node { id: ID! }
interface Named implements Node { id: ID! name: String }

type Root {
  "Look one up."
  node(id: ID!, "How many." limit: Int = 10, order: Order = DES, label: String = "x\"y", tags: [String!] = ["a"], filter: Filter = {step: DAY}): Node
  old: String @deprecated(reason: "use new")
  older: String @deprecated
  search: [SearchResult!]!
  count: Long
}
type Mut { set(v: Int!): Boolean! }
type Service implements Node & Named @tag(name: "x") { id: ID! name: String }
type Instance implements Node { id: ID! service: Service }
union SearchResult = Service | Instance
enum Order { ASC DES @deprecated(reason: "typo") "Descending." DESC }
input Filter { step: Step! = DAY, names: [String] old: Int @deprecated(reason: "gone") }
enum Step { DAY HOUR }
"#;

fn run(schema: &Schema, q: &str) -> Value {
    let p = prepare(schema, &Request::new(q)).unwrap_or_else(|e| panic!("{e:?}"));
    complete(schema, &p, vec![])
}

fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array().unwrap().iter().find(|x| x["name"] == name).unwrap_or_else(|| panic!("no {name} in {list}"))
}

#[test]
fn full_introspection_field_by_field() {
    let s = Schema::parse(SMALL_SDL).unwrap();
    let out = run(&s, include_str!("data/introspection_query.graphql"));
    assert!(out.get("errors").is_none(), "{out}");
    if let Ok(path) = std::env::var("HOTRULE_GQL_DUMP_SMALL") {
        std::fs::write(path, serde_json::to_string_pretty(&out).unwrap()).unwrap();
    }
    let schema = &out["data"]["__schema"];
    assert_eq!(schema["description"], "The root.");
    assert_eq!(schema["queryType"], json!({"name": "Root", "kind": "OBJECT"}));
    assert_eq!(schema["mutationType"], json!({"name": "Mut", "kind": "OBJECT"}));
    assert_eq!(schema["subscriptionType"], Value::Null);
    let types = &schema["types"];
    let kinds = [
        ("Root", "OBJECT"), ("Long", "SCALAR"), ("Node", "INTERFACE"), ("SearchResult", "UNION"), ("Order", "ENUM"),
        ("Filter", "INPUT_OBJECT"), ("String", "SCALAR"), ("Int", "SCALAR"), ("Float", "SCALAR"), ("Boolean", "SCALAR"),
        ("ID", "SCALAR"), ("__Schema", "OBJECT"), ("__Type", "OBJECT"), ("__TypeKind", "ENUM"), ("__Field", "OBJECT"),
        ("__InputValue", "OBJECT"), ("__EnumValue", "OBJECT"), ("__Directive", "OBJECT"), ("__DirectiveLocation", "ENUM"),
    ];
    for (n, k) in kinds {
        assert_eq!(find(types, n)["kind"], k, "{n}");
    }
    assert_eq!(find(types, "Long")["specifiedByURL"], "https://example.com/long");
    assert_eq!(find(types, "Long")["description"], "A custom scalar.");

    let root = find(types, "Root");
    assert_eq!(root["interfaces"], json!([]));
    assert_eq!(root["enumValues"], Value::Null);
    assert_eq!(root["inputFields"], Value::Null);
    let node = find(&root["fields"], "node");
    assert_eq!(node["description"], "Look one up.");
    assert_eq!(node["type"], json!({"kind": "INTERFACE", "name": "Node", "ofType": null}));
    let args = &node["args"];
    assert_eq!(find(args, "id")["type"], json!({"kind": "NON_NULL", "name": null, "ofType": {"kind": "SCALAR", "name": "ID", "ofType": null}}));
    assert_eq!(find(args, "id")["defaultValue"], Value::Null);
    assert_eq!(find(args, "limit")["defaultValue"], "10");
    assert_eq!(find(args, "limit")["description"], "How many.");
    assert_eq!(find(args, "order")["defaultValue"], "DES");
    assert_eq!(find(args, "label")["defaultValue"], "\"x\\\"y\"");
    assert_eq!(find(args, "tags")["defaultValue"], "[\"a\"]");
    assert_eq!(find(args, "filter")["defaultValue"], "{step: DAY}");
    assert_eq!(find(args, "id")["isDeprecated"], false);
    let old = find(&root["fields"], "old");
    assert_eq!((&old["isDeprecated"], &old["deprecationReason"]), (&json!(true), &json!("use new")));
    assert_eq!(find(&root["fields"], "older")["deprecationReason"], "No longer supported");
    let search = find(&root["fields"], "search");
    assert_eq!(
        search["type"],
        json!({"kind": "NON_NULL", "name": null, "ofType": {"kind": "LIST", "name": null, "ofType":
            {"kind": "NON_NULL", "name": null, "ofType": {"kind": "UNION", "name": "SearchResult", "ofType": null}}}})
    );

    let node_t = find(types, "Node");
    assert_eq!(node_t["possibleTypes"], json!([{"kind": "OBJECT", "name": "Service", "ofType": null}, {"kind": "OBJECT", "name": "Instance", "ofType": null}]));
    assert_eq!(find(types, "Named")["interfaces"], json!([{"kind": "INTERFACE", "name": "Node", "ofType": null}]));
    assert_eq!(find(types, "Service")["interfaces"].as_array().unwrap().len(), 2);
    assert_eq!(find(types, "SearchResult")["possibleTypes"].as_array().unwrap().len(), 2);
    assert_eq!(find(types, "SearchResult")["fields"], Value::Null);

    let order = find(types, "Order");
    let des = find(&order["enumValues"], "DES");
    assert_eq!((&des["isDeprecated"], &des["deprecationReason"]), (&json!(true), &json!("typo")));
    assert_eq!(find(&order["enumValues"], "DESC")["description"], "Descending.");
    assert_eq!(find(&order["enumValues"], "ASC")["isDeprecated"], false);

    let filter = find(types, "Filter");
    assert_eq!(find(&filter["inputFields"], "step")["defaultValue"], "DAY");
    assert_eq!(find(&filter["inputFields"], "old")["deprecationReason"], "gone");
    assert_eq!(filter["fields"], Value::Null);

    let dirs = &schema["directives"];
    for d in ["include", "skip", "deprecated", "specifiedBy", "tag"] {
        find(dirs, d);
    }
    let tag = find(dirs, "tag");
    assert_eq!(tag["isRepeatable"], true);
    assert_eq!(tag["locations"], json!(["FIELD_DEFINITION", "OBJECT"]));
    assert_eq!(find(&tag["args"], "name")["description"], "The tag name.");
    assert_eq!(find(&find(dirs, "deprecated")["args"], "reason")["defaultValue"], "\"No longer supported\"");
    assert_eq!(find(dirs, "skip")["locations"], json!(["FIELD", "FRAGMENT_SPREAD", "INLINE_FRAGMENT"]));
}

#[test]
fn deprecated_items_hidden_by_default() {
    let s = Schema::parse(SMALL_SDL).unwrap();
    let out = run(&s, r#"{ __type(name: "Root") { fields { name } all: fields(includeDeprecated: true) { name } }
                          o: __type(name: "Order") { enumValues { name } }
                          f: __type(name: "Filter") { inputFields { name } } }"#);
    let d = &out["data"];
    assert_eq!(d["__type"]["fields"], json!([{"name": "node"}, {"name": "search"}, {"name": "count"}]));
    assert_eq!(d["__type"]["all"].as_array().unwrap().len(), 5);
    assert_eq!(d["o"]["enumValues"], json!([{"name": "ASC"}, {"name": "DESC"}]));
    assert_eq!(d["f"]["inputFields"], json!([{"name": "step"}, {"name": "names"}]));
}

#[test]
fn type_lookup_typename_and_deep_of_type() {
    let s = Schema::parse("type Query { m: [[[[String!]!]]]! }").unwrap();
    let out = run(&s, r#"{ __typename missing: __type(name: "Nope") { name } __type(name: "Query") { __typename name fields { type { kind ofType { kind ofType { kind ofType { kind ofType { kind ofType { kind ofType { kind ofType { kind name } } } } } } } } } } }"#);
    let d = &out["data"];
    assert_eq!(d["__typename"], "Query");
    assert_eq!(d["missing"], Value::Null);
    assert_eq!(d["__type"]["__typename"], "__Type");
    let mut t = &d["__type"]["fields"][0]["type"];
    let mut kinds = Vec::new();
    while t.is_object() {
        kinds.push(t["kind"].as_str().unwrap().to_string());
        t = &t["ofType"];
    }
    assert_eq!(kinds, ["NON_NULL", "LIST", "LIST", "LIST", "NON_NULL", "LIST", "NON_NULL", "SCALAR"]);
}

#[test]
fn introspection_fields_are_validated() {
    let s = Schema::parse(SMALL_SDL).unwrap();
    let e = prepare(&s, &Request::new("{ __schema { foo } }")).unwrap_err();
    assert_eq!(e[0].message, "Validation error (FieldUndefined@[__schema/foo]) : Field 'foo' in type '__Schema' is undefined");
    let e = prepare(&s, &Request::new("{ __type { name } }")).unwrap_err();
    assert!(e[0].message.contains("MissingFieldArgument"), "{e:?}");
    let e = prepare(&s, &Request::new("{ __schema }")).unwrap_err();
    assert!(e[0].message.contains("SubselectionRequired"), "{e:?}");
    // __schema only exists on the query root.
    let e = prepare(&s, &Request::new("mutation { __schema { description } }")).unwrap_err();
    assert!(e[0].message.contains("FieldUndefined"), "{e:?}");
    let p = prepare(&s, &Request::new("mutation { __typename }")).unwrap();
    assert_eq!(complete(&s, &p, vec![]), json!({"data": {"__typename": "Mut"}}));
}
