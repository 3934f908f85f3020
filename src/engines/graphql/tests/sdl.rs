//! `Schema::parse`: SDL edge cases and schema errors with positions.

use hotrule_graphql::{Request, Schema, SchemaError, complete, prepare};
use serde_json::json;

#[test]
fn extensions_may_precede_their_type_and_roots_default() {
    let s = Schema::parse("extend type Query { b: Int }\n# c\ntype Query { a: Int }\ntype Mutation { m: Int }").unwrap();
    assert_eq!((s.query_type(), s.mutation_type()), ("Query", Some("Mutation")));
    let p = prepare(&s, &Request::new("{ a b }")).unwrap();
    assert_eq!(complete(&s, &p, vec![Ok(json!(1)), Ok(json!(2))]), json!({"data": {"a": 1, "b": 2}}));
    let s = Schema::parse("type Query { a: Int }").unwrap();
    assert_eq!(s.mutation_type(), None);
    let s = Schema::parse("schema { query: Q } type Q { a: Int } type Mutation { x: Int }").unwrap();
    assert_eq!((s.query_type(), s.mutation_type()), ("Q", Some("Mutation")));
}

#[test]
fn descriptions_directives_and_type_forms() {
    let sdl = r#"
        "d" scalar Long
        """
        block
        """
        directive @a(x: Int = 1) on FIELD_DEFINITION | ENUM_VALUE
        directive @b on | OBJECT
        interface I { id: ID }
        interface J { id: ID }
        type Query implements I & J @b { "f" id: ID @a(x: 2) u: U e: E i(arg: In = {a: [1, 2], b: "s"}): Int }
        type Legacy implements I J { id: ID }
        union U = | Query | Legacy
        enum E { "v" A @a B @deprecated(reason: """r""") }
        input In { a: [Int!]! "d" b: String = "x" @deprecated }
        scalar String
    "#;
    let s = Schema::parse(sdl).unwrap();
    let p = prepare(&s, &Request::new(r#"{ __type(name: "Legacy") { interfaces { name } } i }"#)).unwrap();
    assert_eq!(p.fields[0].args, *json!({"arg": {"a": [1, 2], "b": "s"}}).as_object().unwrap());
    let out = complete(&s, &p, vec![Ok(json!(3))]);
    assert_eq!(out["data"]["__type"]["interfaces"], json!([{"name": "I"}, {"name": "J"}]));
}

#[test]
fn schema_errors_carry_positions() {
    let cases = [
        ("type Query { a: Nope }", "unknown or non-output type 'Nope'", (1, 14)),
        ("type Query { a: Int }\ntype Query { b: Int }", "defined more than once", (2, 1)),
        ("type Query { a(x: Query): Int }", "non-input type", (1, 16)),
        ("type Query { a: In } input In { x: Int }", "non-output type", (1, 14)),
        ("type Query { a: Int a: Int }", "defined more than once", (1, 21)),
        ("extend type Nope { a: Int } type Query { a: Int }", "cannot extend undefined type", (1, 1)),
        ("type Q { a: Int }", "query root type 'Query'", (1, 1)),
        ("type Query { a: Int } union U = Query | Int", "not an object type", (1, 23)),
        ("type Query { a: Int } type __X { a: Int }", "reserved", (1, 23)),
        ("enum E {} type Query { a: E }", "no fields, values or members", (1, 1)),
        ("type Query { a: Int }\ndirective @d on FIELD\n  directive @d on FIELD", "'@d' is defined more than once", (3, 3)),
    ];
    for (sdl, want, pos) in cases {
        match Schema::parse(sdl) {
            Err(SchemaError::Invalid { message, line, col }) => {
                assert!(message.contains(want), "{sdl}: {message}");
                assert_eq!((line, col), pos, "{sdl}: {message}");
            }
            other => panic!("{sdl}: {other:?}"),
        }
    }
    let e = Schema::parse("type Query {\n  a: Int\n  b(: Int\n}").unwrap_err();
    assert!(matches!(e, SchemaError::Syntax { line: 3, col: 5, .. }), "{e:?}");
    assert_eq!(e.to_string(), "schema syntax error at 3:5: Invalid syntax with offending token ':'");
    assert!(Schema::parse("typo Query { a: Int }").is_err());
    assert!(Schema::parse("").is_err(), "no Query type");
}
