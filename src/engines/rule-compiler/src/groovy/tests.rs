//! Parser tests. Trees are rendered as compact S-expressions so each case reads on one line.

use super::ast::{Block, Else, Expr, ExprKind, GStringPart, IfStmt, NumberValue, Stmt, StmtKind};
use crate::position::{Mark, ScalarOrigin, ScalarStyle, SourceText};

/// Parses `text` as if it were a plain scalar starting at line 1, column 1.
fn with_locator<T>(
    text: &str,
    parse: impl FnOnce(&str, &mut crate::position::Locator<'_>) -> T,
) -> T {
    let source = SourceText::decode(text.as_bytes()).expect("utf-8");
    let origin = ScalarOrigin::build(
        &source,
        text,
        ScalarStyle::Literal,
        Mark { line: 1, col0: 0 },
    );
    parse(text, &mut origin.locator(text))
}

fn expr(text: &str) -> String {
    match with_locator(text, super::parse_expression) {
        Ok(expr) => render(&expr),
        Err(error) => format!("error {}:{} {}", error.line, error.column, error.message),
    }
}

fn script(text: &str) -> String {
    match with_locator(text, super::parse_script) {
        Ok(block) => render_block(&block),
        Err(error) => format!("error {}:{} {}", error.line, error.column, error.message),
    }
}

fn render(expr: &Expr) -> String {
    match &expr.kind {
        ExprKind::Name(name) => name.clone(),
        ExprKind::Number(number) => match number.value {
            NumberValue::Integer(value) => value.to_string(),
            NumberValue::Decimal(value) => format!("{value:?}"),
        },
        ExprKind::Str(literal) => format!("{:?}", literal.value),
        ExprKind::GString(parts) => {
            let parts: Vec<String> = parts
                .iter()
                .map(|part| match part {
                    GStringPart::Text(text) => format!("{text:?}"),
                    GStringPart::Expr(inner) => format!("${{{}}}", render(inner)),
                })
                .collect();
            format!("(gstring {})", parts.join(" "))
        }
        ExprKind::Bool(value) => value.to_string(),
        ExprKind::Null => "null".to_owned(),
        ExprKind::List(items) => format!(
            "[{}]",
            items.iter().map(render).collect::<Vec<_>>().join(" ")
        ),
        ExprKind::Map(entries) => {
            let entries: Vec<String> = entries
                .iter()
                .map(|e| format!("{}:{}", render(&e.key), render(&e.value)))
                .collect();
            format!(
                "[{}]",
                if entries.is_empty() {
                    ":".to_owned()
                } else {
                    entries.join(" ")
                }
            )
        }
        ExprKind::Closure(closure) => {
            let params: Vec<&str> = closure
                .params
                .iter()
                .map(|p| p.name.name.as_str())
                .collect();
            format!(
                "{{{} -> {}}}",
                params.join(","),
                render_block(&closure.body)
            )
        }
        ExprKind::Property {
            receiver,
            name,
            safe,
        } => format!(
            "{}{}{}",
            render(receiver),
            if *safe { "?." } else { "." },
            name.name
        ),
        ExprKind::Call(call) => {
            let mut out = String::from("(");
            if let Some(receiver) = &call.receiver {
                out.push_str(&render(receiver));
                out.push_str(if call.safe { "?." } else { "." });
            }
            if let Some(namespace) = &call.namespace {
                out.push_str(&namespace.name);
                out.push_str("::");
            }
            out.push_str(&call.method.name);
            for arg in &call.args {
                out.push(' ');
                if let Some(name) = &arg.name {
                    out.push_str(&name.name);
                    out.push('=');
                }
                out.push_str(&render(&arg.value));
            }
            out.push(')');
            out
        }
        ExprKind::Index { receiver, index } => format!("{}[{}]", render(receiver), render(index)),
        ExprKind::Unary { op, operand } => format!("({op:?} {})", render(operand)),
        ExprKind::Binary { op, left, right } => {
            format!("({} {} {})", op.symbol(), render(left), render(right))
        }
        ExprKind::Ternary {
            condition,
            then,
            otherwise,
        } => format!(
            "(? {} {} {})",
            render(condition),
            render(then),
            render(otherwise)
        ),
        ExprKind::Elvis { value, fallback } => {
            format!("(?: {} {})", render(value), render(fallback))
        }
        ExprKind::Cast { value, ty } => format!("(as {} {})", render(value), ty.name),
        ExprKind::Assign { op, target, value } => {
            format!("({op:?}= {} {})", render(target), render(value))
        }
        ExprKind::Paren(inner) => format!("({})", render(inner)),
    }
}

fn render_block(block: &Block) -> String {
    block
        .statements
        .iter()
        .map(render_statement)
        .collect::<Vec<_>>()
        .join("; ")
}

fn render_statement(statement: &Stmt) -> String {
    match &statement.kind {
        StmtKind::Expr(expr) => render(expr),
        StmtKind::Local { ty, name, init } => {
            let ty = ty.as_ref().map_or("def", |t| t.name.as_str());
            format!(
                "{ty} {}{}",
                name.name,
                init.as_ref()
                    .map(|i| format!(" = {}", render(i)))
                    .unwrap_or_default()
            )
        }
        StmtKind::If(statement) => render_if(statement),
        StmtKind::Return(value) => format!(
            "return{}",
            value
                .as_ref()
                .map(|v| format!(" {}", render(v)))
                .unwrap_or_default()
        ),
    }
}

fn render_if(statement: &IfStmt) -> String {
    let otherwise = match &statement.otherwise {
        None => String::new(),
        Some(Else::Block(block)) => format!(" else {{{}}}", render_block(block)),
        Some(Else::If(nested)) => format!(" else {}", render_if(nested)),
    };
    format!(
        "if {} {{{}}}{otherwise}",
        render(&statement.condition),
        render_block(&statement.then)
    )
}

#[test]
fn mal_chains_and_arguments() {
    assert_eq!(
        expr("(a * 100).tagNotEqual('mode' , 'idle').sum(['h']).rate('PT1M')"),
        r#"(((((* a 100)).tagNotEqual "mode" "idle").sum ["h"]).rate "PT1M")"#
    );
    assert_eq!(
        expr("m.sum(by=['a']).histogram(le: 'le')"),
        r#"((m.sum by=["a"]).histogram le="le")"#
    );
    assert_eq!(expr("m.sum((['c']))"), r#"(m.sum (["c"]))"#);
    assert_eq!(
        expr("service(['a'], Layer.GENERAL)\n  .instance(['a'], ['b'], Layer.GENERAL)"),
        r#"((service ["a"] Layer.GENERAL).instance ["a"] ["b"] Layer.GENERAL)"#
    );
    assert_eq!(expr("ns::fn(x).other::m(1)"), "((ns::fn x).other::m 1)");
    assert_eq!(expr("time() - m.max(['a'])"), r#"(- (time) (m.max ["a"]))"#);
    assert_eq!(expr("1.5e3 + 10L - 0x1F"), "(- (+ 1500.0 10) 31)");
}

#[test]
fn closures_maps_and_conditionals() {
    assert_eq!(
        expr("{ tags -> tags.job_name in [ 'a', 'b' ] }"),
        r#"{tags -> (in tags.job_name ["a" "b"])}"#
    );
    assert_eq!(
        expr("{tags -> tags.s = 'A::'+(tags['x']?.trim()?:'A')}"),
        r#"{tags -> (Assign= tags.s (+ "A::" ((?: (tags["x"]?.trim) "A"))))}"#
    );
    assert_eq!(
        expr("{ tags -> ['pod': tags.pod, 'ns': tags.ns ?: 'n/a'] }"),
        r#"{tags -> ["pod":tags.pod "ns":(?: tags.ns "n/a")]}"#
    );
    assert_eq!(
        expr("{ a, String b -> a ? 'x'+b:'y' }"),
        r#"{a,b -> (? a (+ "x" b) "y")}"#
    );
    assert_eq!(
        expr("{ tags -> {tags.a == 'x' && tags.b} }"),
        r#"{tags -> { -> (&& (== tags.a "x") tags.b)}}"#
    );
    assert_eq!(expr("[:]"), "[:]");
    assert_eq!(expr("[]"), "[]");
}

#[test]
fn precedence_follows_groovy() {
    assert_eq!(
        expr("x as Integer < 400 && !y?.z()"),
        "(&& (< (as x Integer) 400) (Not (y?.z)))"
    );
    assert_eq!(expr("a + b as String"), "(as (+ a b) String)");
    assert_eq!(expr("-a * b + c % d"), "(+ (* (Neg a) b) (% c d))");
    assert_eq!(expr("a || b && c == d"), "(|| a (&& b (== c d)))");
    assert_eq!(expr("a = b = c"), "(Assign= a (Assign= b c))");
}

#[test]
fn strings_and_interpolation() {
    assert_eq!(
        expr(r#""${log.service}:${p?.q?.toString()}""#),
        r#"(gstring ${log.service} ":" ${(p?.q?.toString)})"#
    );
    assert_eq!(expr(r#""a $b.c d""#), r#"(gstring "a " ${b.c} " d")"#);
    assert_eq!(
        expr(r#"'it''s'"#),
        "error 1:5 unexpected string, expected end of expression"
    );
    assert_eq!(expr(r"'a\'b\n\u0041'"), r#""a'b\nA""#);
    assert_eq!(expr(r"$/(?<t>\d+) \[x]/$"), r#""(?<t>\\d+) \\[x]""#);
    assert_eq!(expr(r"$/a$/b$$/$"), r#""a/b$""#);
    assert_eq!(expr(r"x =~ /a\/b\d/"), r#"(=~ x "a/b\\d")"#);
    assert_eq!(expr(r"a / b / c"), "(/ (/ a b) c)");
    assert_eq!(expr(r"'\d'"), r"error 1:2 invalid escape sequence '\d'");
    // SkyWalking's LAL lexer takes any backslash escape; an unknown one is kept as written.
    assert_eq!(
        script(r"regexp '(?<n>\d+)\n'"),
        r#"(regexp "(?<n>\\d+)\n")"#
    );
    assert_eq!(script(r"json {} sink {}"), "(json { -> }); (sink { -> })");
    // A `$` that starts no interpolation is a literal dollar (SkyWalking's grammars allow it).
    assert_eq!(expr(r#""a $ b""#), r#""a $ b""#);
    assert_eq!(expr(r#""^(?<msg>.*)$""#), r#""^(?<msg>.*)$""#);
}

#[test]
fn lal_commands_and_statements() {
    assert_eq!(
        script("tag level: parsed.level\ntag 'a.b': \"x\", c: 1"),
        r#"(tag level=parsed.level); (tag a.b="x" c=1)"#
    );
    assert_eq!(
        script("timestamp parsed.time as String, \"yyyy\""),
        r#"(timestamp (as parsed.time String) "yyyy")"#
    );
    assert_eq!(
        script("processId P.gen(a as String) as String"),
        "(processId (as (P.gen (as a String)) String))"
    );
    assert_eq!(
        script("rateLimit(\"x\") {\n  rpm 6000\n}"),
        r#"(rateLimit "x" { -> (rpm 6000)})"#
    );
    assert_eq!(script("json{}\nabort {}"), "(json { -> }); (abort { -> })");
    assert_eq!(
        script("text {\n regexp $/a/$\n}"),
        r#"(text { -> (regexp "a")})"#
    );
    assert_eq!(
        script("String r = \"\"\ndef x\nr = '1'"),
        r#"String r = ""; def x; (Assign= r "1")"#
    );
    assert_eq!(script("layer x\nx y"), "(layer x); (x y)");
    assert_eq!(
        script("if (a) {\n b 1\n}\nelse if (c)\n  d 2\nelse {\n  return\n}"),
        "if a {(b 1)} else if c {(d 2)} else {return}"
    );
    assert_eq!(script("if (a\n && b) { }"), "if (&& a b) {}");
    assert_eq!(script("a\n  && b"), "(&& a b)");
    assert_eq!(script("a\n+ b"), "a; (Plus b)");
    assert_eq!(script("a; b // c\n/* d */ e"), "a; b; e");
}

#[test]
fn syntax_errors_point_at_the_token() {
    assert_eq!(
        expr("m.sum(['a'] )).rate('PT1M')"),
        "error 1:14 unexpected ')': it does not close anything"
    );
    assert_eq!(
        expr("m.sum(['a')"),
        "error 1:11 unexpected ')': expected ']' to close the '[' at line 1, column 7"
    );
    assert_eq!(
        expr("m.sum(\n['a'],\n,)"),
        "error 3:1 unexpected ',', expected an expression"
    );
    assert_eq!(
        script("filter {\n  a {\n}"),
        "error 1:8 '{' is never closed"
    );
    assert_eq!(
        script("a b c"),
        "error 1:5 unexpected 'c', expected end of statement (a new line or ';')"
    );
    assert_eq!(
        expr("a +"),
        "error 1:4 unexpected end of input, expected an expression"
    );
    assert_eq!(expr("'abc"), "error 1:1 unterminated string literal");
    assert_eq!(expr("1 = 2"), "error 1:3 cannot assign to this expression");
    assert_eq!(expr("3x"), "error 1:1 invalid number literal '3x'");
    assert_eq!(expr("a # b"), "error 1:3 unexpected character '#'");
}

#[test]
fn hostile_nesting_fails_cleanly() {
    let deep_parens = format!("{}a{}", "(".repeat(500), ")".repeat(500));
    assert!(
        expr(&deep_parens).contains("nested deeper"),
        "{}",
        expr(&deep_parens)
    );
    let deep_unary = format!("{}a", "!".repeat(10_000));
    assert!(expr(&deep_unary).contains("nested too deeply"));
    let long_chain = format!("a{}", ".b".repeat(10_000));
    assert!(expr(&long_chain).contains("nested too deeply"));
    let long_index = format!("a{}", "[0]".repeat(10_000));
    assert!(expr(&long_index).contains("nested too deeply"));
    let long_casts = format!("a{}", " as T".repeat(10_000));
    assert!(expr(&long_casts).contains("nested too deeply"));
    let long_else_if = format!("if (a) b{}", " else if (a) b".repeat(10_000));
    assert!(script(&long_else_if).contains("nested too deeply"));
    let long_sum = vec!["a"; 10_000].join(" + ");
    assert!(expr(&long_sum).contains("nested too deeply"));
    let deep_strings = format!("{}x{}", "\"${".repeat(200), "}\"".repeat(200));
    assert!(expr(&deep_strings).starts_with("error"));
}
