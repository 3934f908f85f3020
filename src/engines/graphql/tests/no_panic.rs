//! Robustness: many mutated documents and bodies, and deeply nested inputs, go through
//! `Request::from_json`, `prepare` and `complete` without panicking or overflowing the stack.

use hotrule_graphql::{Request, Schema, complete, prepare};
use serde_json::{Map, Value, json};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SDL: &str = r#"
scalar Long
type Query { o(first: Int = 1, f: F, e: E): O  l: [O!]! n: Node u: [U] s(x: String!): String }
type Mutation { m(v: [Int!]!): Boolean! }
type O implements Node { id: ID! name: String k: Long e: E! child: O kids: [O] }
type P implements Node { id: ID! }
interface Node { id: ID! }
union U = O | P
enum E { X Y }
input F { a: Int! b: [String] c: F d: E = X }
"#;

const SEEDS: &[&str] = &[
    r#"query Q($a: Int = 2, $f: F) { o(first: $a, f: $f) { id name k e child { id kids { name } } } s(x: "\u00e9\n") }"#,
    r#"{ l { ...A ... on O { kids { id } } } n { __typename ... on P { id } } u { ... on O { name } } } fragment A on O { id child { ...B } } fragment B on O { e }"#,
    r#"mutation M($v: [Int!]!) { m(v: $v) } query N { x: o(f: {a: 1, b: ["x", "y"], c: {a: 2}}, e: Y) @include(if: true) { id @skip(if: false) } }"#,
    r#"{ __schema { types { name kind fields(includeDeprecated: true) { name type { kind ofType { name } } } } } __type(name: "O") { name } }"#,
    r#"query { o { id } } # comment
       """ignored"""
    "#,
];

fn mutate(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut b = src.to_vec();
    for _ in 0..rng.below(4) {
        let i = rng.below(b.len() + 1);
        match rng.below(7) {
            0 => b.truncate(i),
            1 if i < b.len() => b[i] = b"{}[]()!$@:.,\"\\#=|&0aZ_-\n"[rng.below(24)],
            2 => b.insert(i, rng.next() as u8),
            3 if i < b.len() => {
                let j = i + rng.below(b.len() - i);
                let chunk = b[i..j].to_vec();
                for _ in 0..1 + rng.below(3) {
                    b.splice(i..i, chunk.iter().copied());
                }
            }
            4 if i < b.len() => {
                let j = i + rng.below(b.len() - i);
                b.drain(i..j);
            }
            5 => b.splice(i..i, b"...on O{".iter().copied()).for_each(drop),
            _ => b.splice(i..i, b"{a{".iter().copied()).for_each(drop),
        }
    }
    b
}

fn random_json(rng: &mut Rng, depth: usize) -> Value {
    const KEYS: &[&str] = &["id", "name", "k", "e", "child", "kids", "__typename", "x"];
    match rng.below(if depth > 4 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => json!(rng.next() as i64),
        2 => json!(rng.below(100)),
        3 => json!(["X", "Y", "Z", "O", "P", ""][rng.below(6)]),
        4 => json!(rng.below(2) == 0),
        5 => json!(1.5),
        6 | 7 => {
            let mut m = Map::new();
            for _ in 0..rng.below(6) {
                m.insert(KEYS[rng.below(KEYS.len())].into(), random_json(rng, depth + 1));
            }
            Value::Object(m)
        }
        _ => Value::Array((0..rng.below(4)).map(|_| random_json(rng, depth + 1)).collect()),
    }
}

#[test]
fn mutated_documents_never_panic() {
    let schema = Schema::parse(SDL).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut prepared = 0;
    for n in 0..20_000 {
        let seed = SEEDS[n % SEEDS.len()];
        let req = if n % 4 == 0 {
            // Mutate the whole HTTP body, JSON included.
            let body = json!({"query": seed, "variables": {"a": 1, "v": [1, 2], "f": {"a": 3}}, "operationName": null}).to_string();
            match Request::from_json(&mutate(&mut rng, body.as_bytes())) {
                Ok(r) => r,
                Err(_) => continue,
            }
        } else {
            let doc = String::from_utf8_lossy(&mutate(&mut rng, seed.as_bytes())).into_owned();
            let vars = if rng.below(2) == 0 { random_json(&mut rng, 0) } else { Value::Null };
            let variables = match vars {
                Value::Object(m) => Some(m),
                _ => Some(json!({"a": 1, "v": [3], "f": {"a": 1, "c": {"a": 2}}}).as_object().cloned().unwrap_or_default()),
            };
            let operation_name = ["Q", "M", "N"].get(rng.below(6)).map(|s| s.to_string());
            Request { query: doc, variables, operation_name }
        };
        if let Ok(p) = prepare(&schema, &req) {
            prepared += 1;
            let resolved = p.fields.iter().map(|_| if rng.below(5) == 0 { Err("e".to_string()) } else { Ok(random_json(&mut rng, 0)) }).collect();
            let out = complete(&schema, &p, resolved);
            assert!(out.get("data").is_some());
        }
    }
    // The mutations must leave enough valid documents to exercise `complete`.
    assert!(prepared > 1_500, "{prepared}");
}

#[test]
fn deep_inputs_are_errors_not_crashes() {
    let schema = Schema::parse(SDL).unwrap();
    let n = 100_000;
    let docs = [
        "{o{child".repeat(n) + &"}".repeat(2 * n),
        format!("{{ o(f: {}) {{ id }} }}", "{c:".repeat(n) + &"}".repeat(n)),
        format!("{{ o(f: {}1{}) {{ id }} }}", "[".repeat(n), "]".repeat(n)),
        format!("query($x: {}Int{}) {{ o {{ id }} }}", "[".repeat(n), "]".repeat(n)),
        "{".repeat(n),
        "[".repeat(n),
        "\"".repeat(n),
        format!("{{ o {{ {} }} }}", "...on O{".repeat(n)),
    ];
    for d in docs {
        assert!(prepare(&schema, &Request::new(d)).is_err());
    }
    // Within the limits, deep input objects coerce.
    let ok = format!("{{ o(f: {}{{a: 1}}{}) {{ id }} }}", "{a: 1, c: ".repeat(40), "}".repeat(40));
    let p = prepare(&schema, &Request::new(ok)).unwrap();
    let mut f = &p.fields[0].args["f"];
    for _ in 0..40 {
        assert_eq!(f["d"], "X", "defaults applied at every level");
        f = &f["c"];
    }
    // Deep JSON bodies are rejected by serde_json's own recursion limit.
    let body = format!("{{\"query\": \"{{o{{id}}}}\", \"variables\": {{\"f\": {}1{}}}}}", "[".repeat(n), "]".repeat(n));
    assert!(Request::from_json(body.as_bytes()).is_err());
    // SDL too.
    assert!(Schema::parse(&format!("type Query {{ a: {}Int{} }}", "[".repeat(n), "]".repeat(n))).is_err());
    assert!(Schema::parse(&format!("type Query {{ a(x: Int = {}1{}): Int }}", "[".repeat(n), "]".repeat(n))).is_err());
}

/// Inputs that would be quadratic or multiply memory with naive code; each must finish fast
/// (this test takes seconds; a regression would take minutes).
#[test]
fn pathological_inputs_stay_bounded() {
    let schema = Schema::parse(SDL).unwrap();
    let start = std::time::Instant::now();
    let n = 60_000;
    // Many variables, many arguments, many operations, many input fields.
    let vars: String = (0..n).map(|i| format!("$v{i}: Int ")).collect();
    assert!(prepare(&schema, &Request::new(format!("query({vars}) {{ o {{ id }} }}"))).is_ok());
    let dup_vars = "$v: Int ".repeat(n);
    assert!(prepare(&schema, &Request::new(format!("query({dup_vars}) {{ o {{ id }} }}"))).is_err());
    let args: String = (0..n).map(|i| format!("a{i}: 1 ")).collect();
    assert!(prepare(&schema, &Request::new(format!("{{ o({args}) {{ id }} }}"))).is_err());
    let dup_args = "first: 1 ".repeat(n);
    assert!(prepare(&schema, &Request::new(format!("{{ o({dup_args}) {{ id }} }}"))).is_err());
    let obj = "a: 1 ".repeat(n);
    assert!(prepare(&schema, &Request::new(format!("{{ o(f: {{{obj}}}) {{ id }} }}"))).is_err());
    let ops: String = (0..n / 2).map(|i| format!("query q{i} {{ o {{ id }} }} ")).collect();
    let req = Request { query: ops, variables: None, operation_name: Some("q7".into()) };
    assert!(prepare(&schema, &req).is_ok());
    let blank = format!("{{ s(x: \"\"\"{}x\"\"\") }}", "\n".repeat(500_000));
    assert_eq!(prepare(&schema, &Request::new(blank)).unwrap().fields[0].args["x"], "x");
    // A wide selection: many distinct keys on one object type, over many list items.
    let wide: String = (0..5_000).map(|i| format!("k{i}: id ")).collect();
    let p = prepare(&schema, &Request::new(format!("{{ l {{ {wide} }} }}"))).unwrap();
    let items: Vec<Value> = (0..50).map(|i| json!({"id": i})).collect();
    let out = complete(&schema, &p, vec![Ok(Value::Array(items))]);
    assert_eq!(out["data"]["l"][49]["k4999"], "49");
    // A huge argument repeated through fragments: the argument budget stops it.
    let big: String = (0..100_000).map(|i| format!("\"s{i}\" ")).collect();
    let mut q = format!("{{ ...F0 }} fragment F14 on Query {{ o(f: {{a: 1, b: [{big}]}}) {{ id }} }}\n");
    for i in 0..14 {
        q.push_str(&format!("fragment F{i} on Query {{ ...F{} ...F{} }}\n", i + 1, i + 1));
    }
    let e = prepare(&schema, &Request::new(q)).unwrap_err();
    assert!(e[0].message.contains("values in field arguments"), "{e:?}");
    // The same with a bad literal: errors are capped and messages short.
    let mut q = format!("{{ ...F0 }} fragment F12 on Query {{ o(first: [{big}]) {{ id }} }}\n");
    for i in 0..12 {
        q.push_str(&format!("fragment F{i} on Query {{ ...F{} ...F{} }}\n", i + 1, i + 1));
    }
    let e = prepare(&schema, &Request::new(q)).unwrap_err();
    assert!(e.len() <= 100 && e.iter().all(|e| e.message.len() < 400), "{}", e.len());
    // Thousands of completion errors are capped too.
    let p = prepare(&schema, &Request::new("{ u { ... on O { e } } }")).unwrap();
    let bad: Vec<Value> = (0..5_000).map(|_| json!({"__typename": "O", "e": "BAD"})).collect();
    let out = complete(&schema, &p, vec![Ok(Value::Array(bad))]);
    assert_eq!(out["errors"].as_array().unwrap().len(), 1_000);
    assert!(start.elapsed() < std::time::Duration::from_secs(120));
}
