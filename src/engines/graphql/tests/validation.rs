//! `prepare`: documents, operations, variables, arguments, fragments, directives and limits.

use hotrule_graphql::{GraphQLError, Request, Schema, error_response, prepare};
use serde_json::{Map, Value, json};

const SDL: &str = r#"
scalar Long
type Query {
  a: A
  list(first: Int = 10, order: Order = ASC, ids: [ID!], f: Filter): [A!]!
  need(x: Int!, s: String!): String
  float(v: Float!): Float
  long(v: Long): Long
  node: Node
  search: [Result!]
}
type Mutation { set(v: Int!): Boolean! }
type A implements Node { id: ID! name: String b: B sub(flag: Boolean!): String }
type B implements Node { id: ID! a: A }
interface Node { id: ID! }
union Result = A | B
enum Order { ASC DES }
input Filter { step: Order!, names: [String], inner: Inner, opt: Int = 3 }
input Inner { v: Int! }
"#;

fn schema() -> Schema {
    Schema::parse(SDL).unwrap()
}

fn errs(q: &str) -> Vec<String> {
    errs_vars(q, None)
}

fn errs_vars(q: &str, vars: Option<Value>) -> Vec<String> {
    let variables = vars.map(|v| v.as_object().unwrap().clone());
    let req = Request { query: q.into(), variables, operation_name: None };
    prepare(&schema(), &req).err().unwrap_or_default().into_iter().map(|e| e.message).collect()
}

fn args(q: &str, vars: Value) -> Map<String, Value> {
    let req = Request { query: q.into(), variables: vars.as_object().cloned(), operation_name: None };
    let p = prepare(&schema(), &req).unwrap_or_else(|e| panic!("{e:?}"));
    p.fields[0].args.clone()
}

#[test]
fn field_and_argument_errors() {
    assert_eq!(errs("{ a { foo } }"), ["Validation error (FieldUndefined@[a/foo]) : Field 'foo' in type 'A' is undefined"]);
    assert_eq!(errs("{ x: a { y: foo } }"), ["Validation error (FieldUndefined@[x/y]) : Field 'foo' in type 'A' is undefined"]);
    assert_eq!(errs("{ need(x: 1, s: \"\", z: 2) }"), ["Validation error (UnknownArgument@[need]) : Unknown field argument 'z'"]);
    assert_eq!(errs("{ need(x: 1) }"), ["Validation error (MissingFieldArgument@[need]) : Missing field argument 's' of type 'String!'"]);
    let e = errs("{ need(x: \"1\", s: \"\") }");
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("Validation error (WrongType@[need]) : argument 'x' with value '\"1\"' is not a valid input"), "{e:?}");
    assert!(errs("{ need(x: 2147483648, s: \"\") }")[0].contains("WrongType"));
    assert!(errs("{ need(x: 1.5, s: \"\") }")[0].contains("WrongType"));
    assert!(errs("{ need(x: null, s: \"\") }")[0].contains("WrongType"));
    assert!(errs("{ list(order: \"ASC\") { id } }")[0].contains("WrongType"), "enum literal must not be a string");
    assert!(errs("{ list(order: NOPE) { id } }")[0].contains("WrongType"));
    assert!(errs("{ list(f: {step: ASC, bogus: 1}) { id } }")[0].contains("unknown field 'bogus'"));
    assert!(errs("{ list(f: {names: []}) { id } }")[0].contains("missing required field 'step'"));
    assert!(errs("{ list(f: {step: ASC, inner: {}}) { id } }")[0].contains("missing required field 'v'"));
    assert!(errs("{ need(x: 1, x: 2, s: \"\") }")[0].contains("DuplicateArgumentNames"));
    assert_eq!(errs("{ a { id(x: 1) } }"), ["Validation error (UnknownArgument@[a/id]) : Unknown field argument 'x'"]);
    assert!(errs("{ a { sub } }")[0].contains("MissingFieldArgument@[a/sub]"));
}

#[test]
fn leaf_and_composite_selections() {
    assert_eq!(
        errs("{ a { id { x } } }"),
        ["Validation error (SubselectionNotAllowed@[a/id]) : Subselection not allowed on leaf type 'ID' of field 'id'"]
    );
    assert_eq!(errs("{ a }"), ["Validation error (SubselectionRequired@[a]) : Subselection required for type 'A' of field 'a'"]);
    // Several errors are all reported.
    assert_eq!(errs("{ a list { x } }").len(), 2);
}

#[test]
fn argument_coercion() {
    assert_eq!(args("{ list { id } }", json!({})), json!({"first": 10, "order": "ASC"}).as_object().unwrap().clone());
    let a = args("{ list(ids: 7, f: {step: DES, names: \"n\"}) { id } }", json!({}));
    assert_eq!(a["ids"], json!(["7"]), "single value to a list; Int literal to ID");
    assert_eq!(a["f"], json!({"step": "DES", "names": ["n"], "opt": 3}));
    assert_eq!(args("{ float(v: 3) }", json!({}))["v"], json!(3.0));
    assert_eq!(args("{ long(v: 12345678901234) }", json!({}))["v"], json!(12345678901234i64));
    assert_eq!(args("{ long(v: \"7\") }", json!({}))["v"], json!("7"));
    assert_eq!(args("{ need(x: -5, s: \"\"\"\n    block\n      text \"\"\") }", json!({}))["s"], json!("block\n  text "));
    assert_eq!(args("{ need(x: 1, s: \"\\u00e9\\t\") }", json!({}))["s"], json!("\u{e9}\t"));
}

#[test]
fn variables() {
    let q = "query Q($n: Int!, $s: String = \"d\", $o: Order, $f: Filter, $ids: [ID!]) { need(x: $n, s: $s) list(order: $o, f: $f, ids: $ids) { id } }";
    let req = |v: Value| Request { query: q.into(), variables: v.as_object().cloned(), operation_name: Some("Q".into()) };
    let p = prepare(&schema(), &req(json!({"n": 3, "o": "DES", "f": {"step": "ASC"}, "ids": [1, "x"]}))).unwrap();
    assert_eq!(p.fields[0].args, *json!({"x": 3, "s": "d"}).as_object().unwrap());
    assert_eq!(p.fields[1].args, *json!({"first": 10, "order": "DES", "ids": ["1", "x"], "f": {"step": "ASC", "opt": 3}}).as_object().unwrap());
    // An unset nullable variable leaves the argument to its default / absent.
    let p = prepare(&schema(), &req(json!({"n": 3}))).unwrap();
    assert_eq!(p.fields[1].args, *json!({"first": 10, "order": "ASC"}).as_object().unwrap());
    // Explicit null is kept.
    let p = prepare(&schema(), &req(json!({"n": 3, "o": null}))).unwrap();
    assert_eq!(p.fields[1].args["order"], Value::Null);

    let e = |v: Value| prepare(&schema(), &req(v)).unwrap_err().into_iter().map(|e| e.message).collect::<Vec<_>>();
    assert_eq!(e(json!({})), ["Variable 'n' has coerced Null value for NonNull type 'Int!'"]);
    assert!(e(json!({"n": "3"}))[0].starts_with("Variable 'n' has an invalid value"));
    assert!(e(json!({"n": 3, "o": "NOPE"}))[0].starts_with("Variable 'o' has an invalid value"));
    assert!(e(json!({"n": 3, "f": {"step": "ASC", "x": 1}}))[0].contains("unknown field 'x'"));
    assert!(e(json!({"n": 3, "f": {}}))[0].contains("missing required field 'step'"));
    assert!(e(json!({"n": 3, "ids": [null]}))[0].starts_with("Variable 'ids' has an invalid value"));
    assert!(e(json!({"n": 3000000000i64}))[0].starts_with("Variable 'n' has an invalid value"));

    let mismatch = errs_vars("query($s: String) { need(x: $s, s: \"\") }", Some(json!({"s": "abc"})));
    assert!(mismatch[0].contains("WrongType@[need]") && mismatch[0].contains("variable '$s'"), "{mismatch:?}");
    assert!(errs_vars("query($s: String) { need(x: 1, s: $s) }", Some(json!({"s": null})))[0].contains("is null"));
    assert_eq!(errs("{ need(x: $nope, s: \"\") }"), ["Validation error (UndefinedVariable@[need]) : Undefined variable 'nope'"]);
    assert!(errs("query($x: Nope) { a { id } }")[0].contains("Unknown type 'Nope'"));
    assert!(errs("query($x: A) { a { id } }")[0].contains("NonInputTypeOnVariable"));
    assert!(errs("query($x: Int!) { list { id } }").iter().any(|m| m.contains("coerced Null")));
    // A `null` variables map is the same as none.
    let body = br#"{"query": "query($s: String = \"z\") { need(x: 1, s: $s) }", "variables": null}"#;
    let p = prepare(&schema(), &Request::from_json(body).unwrap()).unwrap();
    assert_eq!(p.fields[0].args["s"], "z");
}

#[test]
fn operations() {
    let s = schema();
    let doc = "query A { a { id } } query B { list { id } } mutation M { set(v: 1) }";
    let pick = |n: Option<&str>| prepare(&s, &Request { query: doc.into(), variables: None, operation_name: n.map(Into::into) });
    assert_eq!(pick(Some("B")).unwrap().fields[0].name, "list");
    let m = pick(Some("M")).unwrap();
    assert_eq!((m.kind, m.fields[0].name.as_str()), (hotrule_graphql::OperationKind::Mutation, "set"));
    assert_eq!(pick(None).unwrap_err()[0].message, "Must provide operation name if query contains multiple operations.");
    assert_eq!(pick(Some("Z")).unwrap_err()[0].message, "Unknown operation named 'Z'.");
    assert_eq!(errs("subscription { a { id } }"), ["subscriptions are not supported"]);
    assert!(errs("query A { a { id } } query A { a { id } }")[0].contains("only one operation named 'A'"));
    assert!(errs("{ a { id } } { a { id } }")[0].contains("anonymous operation"));
    assert!(errs("fragment F on A { id }").iter().any(|m| m.contains("no operation")));
    let no_mut = Schema::parse("type Query { a: Int }").unwrap();
    assert!(prepare(&no_mut, &Request::new("mutation { a }")).unwrap_err()[0].message.contains("not configured for mutations"));
}

#[test]
fn fragments_and_directives() {
    let s = schema();
    let q = r#"query($yes: Boolean!) {
        a { ...F id @skip(if: $yes) name @include(if: $yes) ... @include(if: false) { b { id } } }
        node { __typename id ... on A { name } ...OnB }
        search { ... on Node { id } ... on B { a { id } } }
    }
    fragment F on A { x: id ...G }
    fragment G on Node { id }
    fragment OnB on B { a { name } }"#;
    let req = Request { query: q.into(), variables: json!({"yes": true}).as_object().cloned(), operation_name: None };
    let p = prepare(&s, &req).unwrap();
    assert_eq!(p.fields.len(), 3);

    assert_eq!(errs("{ a { ...Nope } }"), ["Validation error (UndefinedFragment@[a]) : Undefined fragment 'Nope'"]);
    let cyc = errs("{ a { ...F } } fragment F on A { ...G } fragment G on A { ...F }");
    assert!(cyc.iter().any(|m| m.contains("FragmentCycle")), "{cyc:?}");
    assert!(errs("{ a { ... on Nope { id } } }")[0].contains("Unknown type 'Nope'"));
    assert!(errs("{ a { ... on B { id } } }")[0].contains("InvalidFragmentType"));
    assert!(errs("{ a { ... on Order { id } } }")[0].contains("not a composite type"));
    assert!(errs("{ a { id @nope } }")[0].contains("Unknown directive 'nope'"));
    assert!(errs("{ a { id @skip } }")[0].contains("MissingFieldArgument"));
    assert!(errs("{ a { id @deprecated } }")[0].contains("MisplacedDirective"));
    assert!(errs("{ search { id } }")[0].contains("Field 'id' in type 'Result' is undefined"));
    // Validation is static: skipped selections are checked too.
    assert!(errs("{ a { id @skip(if: true) { x } } }")[0].contains("SubselectionNotAllowed"));
    assert!(errs("{ a { ... @skip(if: true) { nope } } }")[0].contains("FieldUndefined"));
    assert!(errs("{ a { ...F @include(if: false) } } fragment F on A { nope }")[0].contains("FieldUndefined"));
    assert!(errs("query @skip(if: true) { a { id } }")[0].contains("MisplacedDirective"));
    assert!(errs("query { a { ...F } } fragment F on A @include(if: true) { id }")[0].contains("MisplacedDirective"));
    assert!(errs("query @nope { a { id } }")[0].contains("UnknownDirective"));
    // Descriptions on executable definitions are accepted and ignored.
    assert!(errs("\"d\" query { a { ...F } } \"\"\"e\"\"\" fragment F on A { id }").is_empty());
    assert!(errs("{ a { x: id x: name } }")[0].contains("FieldsConflict"));
    assert!(errs("{ need(x: 1, s: \"\") need(x: 2, s: \"\") }")[0].contains("FieldsConflict"));
    // Same key, same field and arguments: merged into one root field.
    let p = prepare(&s, &Request::new("{ a { id } a { name } }")).unwrap();
    assert_eq!(p.fields.len(), 1);
}

#[test]
fn limits() {
    let s = schema();
    let big = format!("{{ a {{ id }} }} #{}", "x".repeat(1 << 20));
    assert!(prepare(&s, &Request::new(big)).unwrap_err()[0].message.contains("larger than"));
    // Fragment blow-up: 2^20 fields after expansion are refused, quickly.
    let mut q = String::from("{ a { ...F0 } }\n");
    for i in 0..20 {
        q.push_str(&format!("fragment F{i} on A {{ ...F{} ...F{} }}\n", i + 1, i + 1));
    }
    q.push_str("fragment F20 on A { id }\n");
    let e = prepare(&s, &Request::new(q)).unwrap_err();
    assert!(e.iter().any(|e| e.message.contains("more than 10000 fields")), "{e:?}");
    // Depth through fragments: each fragment nests a field; the parser's per-definition
    // limit does not see it, the prepare limit does.
    let mut q = String::from("{ a { ...F0 } }\n");
    for i in 0..100 {
        q.push_str(&format!("fragment F{i} on A {{ b {{ a {{ ...F{} }} }} }}\n", i + 1));
    }
    q.push_str("fragment F100 on A { id }\n");
    let e = prepare(&s, &Request::new(q)).unwrap_err();
    assert!(e.iter().any(|e| e.message.contains("deeper than")), "{e:?}");
    let roots = format!("{{ {} }}", (0..1001).map(|i| format!("k{i}: a {{ id }}")).collect::<Vec<_>>().join(" "));
    assert!(prepare(&s, &Request::new(roots)).unwrap_err()[0].message.contains("root fields"));
}

#[test]
fn request_from_json() {
    let r = Request::from_json(br#"{"query": "{ a { id } }"}"#).unwrap();
    assert_eq!((r.variables, r.operation_name), (None, None));
    let r = Request::from_json(br#"{"query": "q", "variables": {"a": 1}, "operationName": "Q"}"#).unwrap();
    assert_eq!((r.variables.unwrap()["a"].clone(), r.operation_name.as_deref()), (json!(1), Some("Q")));
    for bad in [&b"[]"[..], b"{}", br#"{"query": 1}"#, br#"{"query": "q", "variables": 3}"#, br#"{"query": "q", "operationName": 1}"#, b"nope", b""] {
        let e: Vec<GraphQLError> = Request::from_json(bad).unwrap_err();
        assert_eq!(error_response(&e)["errors"][0]["message"].as_str().map(|m| !m.is_empty()), Some(true));
    }
}

#[test]
fn syntax_errors_have_locations() {
    let e = prepare(&schema(), &Request::new("{ a { id }\n  ]")).unwrap_err();
    assert_eq!(e[0].locations, vec![(2, 3)]);
    assert_eq!(
        error_response(&e),
        json!({"errors": [{"message": "Invalid syntax with offending token ']' at line 2 column 3", "locations": [{"line": 2, "column": 3}]}]})
    );
}
