//! Parser tests: the grammar's constructs, precedence, lexer corner cases, errors with positions,
//! and the AST helpers the alarm engine uses.

use hotrule_mqe_engine::*;

fn p(s: &str) -> Expr {
    match parse(s) {
        Ok(e) => e,
        Err(e) => panic!("{s}: {e}"),
    }
}

#[test]
fn every_construct_parses_and_renders_as_get_text() {
    // (input, ANTLR getText of the tree)
    let cases = [
        ("service_sla", "service_sla"),
        ("service_percentile{p='50,75'}", "service_percentile{p='50,75'}"),
        ("k8s{namespace='sw', status=\"true\"}", "k8s{namespace='sw',status=\"true\"}"),
        ("m{}", "m{}"),
        ("m{_='x'}", "m{_='x'}"),
        ("1 + 2.5 * 3 % 2 - 4 / 5", "1+2.5*3%2-4/5"),
        ("a > 1 && b <= 2 || c == 3", "a>1&&b<=2||c==3"),
        ("a != 1", "a!=1"),
        ("a >= bool 1", "a>=bool1"),
        ("a < BOOL 1", "a<bool1"),
        ("avg(m) + count(m) + latest(m) + sum(m) + max(m) + min(m)", "avg(m)+count(m)+latest(m)+sum(m)+max(m)+min(m)"),
        ("abs(m) - ceil(m) - floor(m)", "abs(m)-ceil(m)-floor(m)"),
        ("round(m / 60, 2)", "round(m/60,2)"),
        ("increase(m, 2)", "increase(m,2)"),
        ("rate(m{p='1'}, 5)", "rate(m{p='1'},5)"),
        ("view_as_seq(a, b, c)", "view_as_seq(a,b,c)"),
        ("is_present(a, b)", "is_present(a,b)"),
        ("top_n(service_cpm, 10, des)", "top_n(service_cpm,10,des)"),
        ("top_n(service_cpm, 10, ASC, attr0='GENERAL', attr1 != 'x')", "top_n(service_cpm,10,asc,attr0='GENERAL',attr1!='x')"),
        ("top_n_of(top_n(a, 10, des), top_n(b, 10, des), 10, des)", "top_n_of(top_n(a,10,des),top_n(b,10,des),10,des)"),
        ("relabels(m{p='50,75'}, p='50,75', percentile='P50,P75')", "relabels(m{p='50,75'},p='50,75',percentile='P50,P75')"),
        ("aggregate_labels(m, sum)", "aggregate_labels(m,sum)"),
        ("aggregate_labels(m, avg(a, b))", "aggregate_labels(m,avg(a,b))"),
        ("sort_values(m, 2, des, avg)", "sort_values(m,2,des,avg)"),
        ("sort_values(m, 2, des, )", "sort_values(m,2,des,)"),
        ("sort_label_values(m, des, p, q)", "sort_label_values(m,des,p,q)"),
        ("baseline(service_resp_time, upper)", "baseline(service_resp_time,upper)"),
        ("sum((service_resp_time > 100) && (service_sla > 1)) >= 1", "sum((service_resp_time>100)&&(service_sla>1))>=1"),
    ];
    for (input, text) in cases {
        assert_eq!(p(input).text(), text, "{input}");
    }
}

#[test]
fn precedence_is_mul_then_add_then_compare_then_bool_left_associative() {
    let e = p("a + b * c > 1 && d < 2");
    let Expr::Bool { op: BoolOp::And, left, right } = e else { panic!("root is not &&") };
    let Expr::Compare { op: CompareOp::Gt, left: sum, .. } = *left else { panic!("left is not >") };
    let Expr::Binary { op: BinaryOp::Add, right: mul, .. } = *sum else { panic!("not +") };
    assert!(matches!(*mul, Expr::Binary { op: BinaryOp::Mul, .. }));
    assert!(matches!(*right, Expr::Compare { op: CompareOp::Lt, .. }));
    // left associativity
    let Expr::Binary { op: BinaryOp::Sub, left, right } = p("10 - 4 - 3") else { panic!() };
    assert!(matches!(*left, Expr::Binary { op: BinaryOp::Sub, .. }));
    assert!(matches!(*right, Expr::Scalar { .. }));
}

#[test]
fn lexer_follows_longest_match_and_keyword_rules() {
    // a name may start with digits; a keyword prefix does not make a keyword
    assert_eq!(p("100abc").metric_names(), ["100abc"]);
    assert_eq!(p("avg_latency").metric_names(), ["avg_latency"]);
    assert!(matches!(p("100"), Expr::Scalar { value, .. } if value == 100.0));
    assert!(matches!(p("1.5"), Expr::Scalar { value, .. } if value == 1.5));
    // keywords cannot be metric names; `AVG` (case-sensitive keyword) can
    assert!(parse("sum").is_err());
    assert_eq!(p("AVG").metric_names(), ["AVG"]);
    // label names cannot be keywords (the grammar's labelName is NAME_STRING | '_')
    assert!(parse("m{value='1'}").is_err());
    // order keywords are case-insensitive; `desc` is a name, not an order (the MQE doc's example)
    assert!(parse("top_n(m, 1, DeS)").is_ok());
    assert!(parse("sort_values(http_requests_total, 2, desc, avg)").is_err());
    // the doc's `relabel` and `ton_n_of` spellings are not grammar tokens
    assert!(parse("relabel(m, p='1', q='2')").is_err());
    // quotes carry no escapes; the value is what is between them
    let Expr::Metric(m) = p("m{a='x\"y', b=\"it's\"}") else { panic!() };
    assert_eq!((m.labels[0].value.as_str(), m.labels[1].value.as_str()), ("x\"y", "it's"));
}

#[test]
fn parse_errors_carry_position_and_message() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("avg(m", 1, 5, "expecting ')'"),
        ("m +", 1, 3, "mismatched input <EOF>"),
        ("m{p=50}", 1, 4, "quoted label value"),
        ("m ? 1", 1, 2, "token recognition error at: '?'"),
        ("m{p='50}", 1, 4, "unterminated"),
        ("a b", 1, 2, "extraneous input 'b'"),
        ("round(m, 1.5)", 1, 9, "INTEGER"),
        ("increase(avg(m), 1)", 1, 9, "metric name"),
        ("top_n(m, 1)", 1, 10, "expecting ','"),
        ("baseline(m, max)", 1, 12, "value, upper or lower"),
        ("a +\n  (b", 2, 4, "expecting ')'"),
        ("", 1, 0, "mismatched input <EOF>"),
    ];
    for (input, line, column, msg) in cases {
        let e = parse(input).expect_err(input);
        assert_eq!((e.line, e.column), (*line, *column), "{input}: {e}");
        assert!(e.message.contains(msg), "{input}: {e}");
        assert!(e.to_string().starts_with(&format!("line {}:{} ", line, column)));
    }
}

#[test]
fn nesting_is_bounded() {
    let deep = format!("{}m{}", "(".repeat(1000), ")".repeat(1000));
    assert!(parse(&deep).unwrap_err().message.contains("nested deeper"));
    let long_chain = vec!["1"; 5000].join("+");
    assert!(parse(&long_chain).is_err());
    let ok_chain = vec!["1"; 100].join("+");
    assert!(parse(&ok_chain).is_ok());
}

#[test]
fn alarm_helpers() {
    let e = p("sum(service_resp_time > baseline(service_resp_time, lower)) >= 1 && increase(a, 3) > rate(b{p='1'}, 7)");
    assert_eq!(e.metric_names(), ["service_resp_time", "a", "b"]);
    assert_eq!(e.max_trend_range(), 7);
    assert!(!e.uses_top_n());
    assert!(p("top_n(m, 1, des) > 1").uses_top_n());
    assert!(p("top_n_of(top_n(a, 1, des), 1, des)").uses_top_n());
    assert_eq!(p("m").max_trend_range(), 0);
    // isBoolResult (SkyWalking alarm docs "Expression")
    let cases = [
        ("sum(x > 1) >= 3", true),
        ("avg(x > 1000) + 1", false),
        ("x > 1000", true),
        ("(a > 1) && (b > 1)", true),
        ("a > 1 || b < 2", true),
        ("(x > 1)", false),
        ("x + 1", false),
        ("sum(abs(increase(service_resp_time,1)) > 0) >= 1", true),
    ];
    for (input, want) in cases {
        assert_eq!(p(input).is_bool_result(), want, "{input}");
    }
}
