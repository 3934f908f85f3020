//! Hand-written recursive-descent parser for `MQEParser.g4`. Precedence, highest first, as the
//! grammar's left-recursive alternatives give it: `* / %`, `+ -`, compares (optional `bool`),
//! `&& ||`; all left-associative. The whole input must be one expression (upstream's
//! `parser.expression()` stops silently before trailing tokens; this parser reports them).

use crate::ast::*;
use crate::lexer::{Tok, Token, tokenize};

/// The nesting budget (bounds recursion in the parser, evaluator and drop): each parenthesis or
/// function call spends about five units (one per precedence level), each chained binary operator
/// one; so about 40 nested parentheses, or chains of about 190 operators, are accepted.
pub const MAX_DEPTH: u32 = 200;

/// A syntax error with its position (byte offset, 1-based line, 0-based column as ANTLR counts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}:{column} {message}")]
pub struct ParseError {
    pub offset: usize,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl ParseError {
    pub(crate) fn at(input: &str, offset: usize, message: String) -> Self {
        let before = input.get(..offset).unwrap_or(input);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0);
        ParseError { offset, line, column, message }
    }
}

/// Parses one MQE expression.
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    let tokens = tokenize(input)?;
    let mut p = Parser { input, tokens, i: 0 };
    let (e, _) = p.expr(0, 0)?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected("extraneous input"));
    }
    Ok(e)
}

/// Parses one MQE expression as OAP's `execExpression` does: tokens after a complete expression
/// are ignored (ANTLR's `parser.expression()` stops before them). The expression comes with
/// the error [`parse`] would have reported for them, if any. SkyWalking's own dashboards depend
/// on it (the Flink job manager's non-heap widget has an extra `)`).
pub fn parse_lenient(input: &str) -> Result<(Expr, Option<ParseError>), ParseError> {
    let tokens = tokenize(input)?;
    let mut p = Parser { input, tokens, i: 0 };
    let (e, _) = p.expr(0, 0)?;
    let trailing = (p.peek() != &Tok::Eof).then(|| p.unexpected("extraneous input"));
    Ok((e, trailing))
}

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<Token>,
    i: usize,
}

type Res<T> = Result<T, ParseError>;

impl<'a> Parser<'a> {
    fn peek(&self) -> &Tok {
        self.tokens.get(self.i).map(|t| &t.tok).unwrap_or(&Tok::Eof)
    }
    fn peek_at(&self, k: usize) -> &Tok {
        self.tokens.get(self.i + k).map(|t| &t.tok).unwrap_or(&Tok::Eof)
    }
    fn pos(&self) -> usize {
        self.tokens.get(self.i).map(|t| t.pos).unwrap_or(self.input.len())
    }
    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.i < self.tokens.len() {
            self.i += 1;
        }
        t
    }
    fn unexpected(&self, what: &str) -> ParseError {
        ParseError::at(self.input, self.pos(), format!("{} {}", what, self.peek().describe()))
    }
    fn expect_p(&mut self, p: &'static str) -> Res<()> {
        if self.peek() == &Tok::P(p) {
            self.bump();
            Ok(())
        } else {
            Err(self.unexpected(&format!("expecting '{}' but found", p)))
        }
    }
    fn eat_p(&mut self, p: &'static str) -> bool {
        if self.peek() == &Tok::P(p) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn integer(&mut self) -> Res<String> {
        match self.bump() {
            Tok::Int(s) => Ok(s),
            _ => {
                self.i -= 1;
                Err(self.unexpected("expecting an INTEGER but found"))
            }
        }
    }
    fn check_depth(&self, depth: u32) -> Res<()> {
        if depth > MAX_DEPTH {
            Err(ParseError::at(self.input, self.pos(), format!("expression nested deeper than {}", MAX_DEPTH)))
        } else {
            Ok(())
        }
    }

    /// Precedence level 0: `&& ||`, 1: compares, 2: `+ -`, 3: `* / %`, 4: primary.
    fn expr(&mut self, level: u8, depth: u32) -> Res<(Expr, u32)> {
        self.check_depth(depth)?;
        if level >= 4 {
            return self.primary(depth);
        }
        let (mut left, mut d) = self.expr(level + 1, depth + 1)?;
        loop {
            let tok = self.peek().clone();
            let node: Box<dyn Fn(Box<Expr>, Box<Expr>) -> Expr> = match (level, &tok) {
                (0, Tok::P("&&")) => Box::new(|l, r| Expr::Bool { op: BoolOp::And, left: l, right: r }),
                (0, Tok::P("||")) => Box::new(|l, r| Expr::Bool { op: BoolOp::Or, left: l, right: r }),
                (1, Tok::P(p)) if compare_op(p).is_some() => {
                    let op = compare_op(p).unwrap_or(CompareOp::Eq);
                    self.bump();
                    let has_bool = self.peek() == &Tok::Kw("bool");
                    if has_bool {
                        self.bump();
                    }
                    let (right, rd) = self.expr(level + 1, depth + 1)?;
                    d = d.max(rd) + 1;
                    self.check_depth(d)?;
                    left = Expr::Compare { op, has_bool, left: Box::new(left), right: Box::new(right) };
                    continue;
                }
                (2, Tok::P("+")) => Box::new(|l, r| Expr::Binary { op: BinaryOp::Add, left: l, right: r }),
                (2, Tok::P("-")) => Box::new(|l, r| Expr::Binary { op: BinaryOp::Sub, left: l, right: r }),
                (3, Tok::P("*")) => Box::new(|l, r| Expr::Binary { op: BinaryOp::Mul, left: l, right: r }),
                (3, Tok::P("/")) => Box::new(|l, r| Expr::Binary { op: BinaryOp::Div, left: l, right: r }),
                (3, Tok::P("%")) => Box::new(|l, r| Expr::Binary { op: BinaryOp::Mod, left: l, right: r }),
                _ => return Ok((left, d)),
            };
            self.bump();
            let (right, rd) = self.expr(level + 1, depth + 1)?;
            d = d.max(rd) + 1;
            self.check_depth(d)?;
            left = node(Box::new(left), Box::new(right));
        }
    }

    fn primary(&mut self, depth: u32) -> Res<(Expr, u32)> {
        let d = depth + 1;
        let tok = self.peek().clone();
        let e = match tok {
            Tok::P("(") => {
                self.bump();
                let (e, _) = self.expr(0, d)?;
                self.expect_p(")")?;
                Expr::Parens(Box::new(e))
            }
            Tok::Int(s) | Tok::Dec(s) => {
                self.bump();
                let value = s.parse::<f64>().unwrap_or(f64::NAN);
                Expr::Scalar { text: s, value }
            }
            Tok::Name(_) => Expr::Metric(self.metric()?),
            Tok::Kw(k) => {
                if self.peek_at(1) != &Tok::P("(") {
                    return Err(self.unexpected("mismatched input"));
                }
                self.bump();
                self.bump();
                let e = self.function(k, d)?;
                self.expect_p(")")?;
                e
            }
            _ => return Err(self.unexpected("mismatched input")),
        };
        Ok((e, d))
    }

    /// The body of `k(` ... (the closing parenthesis is checked by the caller).
    fn function(&mut self, k: &'static str, d: u32) -> Res<Expr> {
        let sub = |p: &mut Self| -> Res<Box<Expr>> { Ok(Box::new(p.expr(0, d)?.0)) };
        Ok(match k {
            "avg" | "count" | "latest" | "sum" | "max" | "min" => Expr::Aggregation { op: aggregation(k).unwrap_or(AggregationOp::Avg), expr: sub(self)? },
            "abs" => Expr::Math { op: MathOp::Abs, expr: sub(self)? },
            "ceil" => Expr::Math { op: MathOp::Ceil, expr: sub(self)? },
            "floor" => Expr::Math { op: MathOp::Floor, expr: sub(self)? },
            "round" => {
                let expr = sub(self)?;
                self.expect_p(",")?;
                Expr::Round { expr, scale: self.integer()? }
            }
            "increase" | "rate" => {
                let metric = self.metric()?;
                self.expect_p(",")?;
                let op = if k == "increase" { TrendOp::Increase } else { TrendOp::Rate };
                Expr::Trend { op, metric, range: self.integer()? }
            }
            "view_as_seq" | "is_present" => {
                let mut exprs = vec![self.expr(0, d)?.0];
                while self.eat_p(",") {
                    exprs.push(self.expr(0, d)?.0);
                }
                let op = if k == "view_as_seq" { LogicalOp::ViewAsSeq } else { LogicalOp::IsPresent };
                Expr::Logical { op, exprs }
            }
            "top_n" => Expr::TopN(self.top_n_body()?),
            "top_n_of" => {
                let mut top_ns = Vec::new();
                loop {
                    if self.peek() != &Tok::Kw("top_n") {
                        return Err(self.unexpected("expecting 'top_n' but found"));
                    }
                    self.bump();
                    self.expect_p("(")?;
                    top_ns.push(self.top_n_body()?);
                    self.expect_p(")")?;
                    self.expect_p(",")?;
                    if self.peek() != &Tok::Kw("top_n") {
                        break;
                    }
                }
                let n = self.integer()?;
                self.expect_p(",")?;
                Expr::TopNOf { top_ns, n, order: self.order()? }
            }
            "relabels" => {
                let expr = sub(self)?;
                self.expect_p(",")?;
                let target = self.label_arg()?;
                self.expect_p(",")?;
                Expr::Relabels { expr, target, replace: self.label_arg()? }
            }
            "aggregate_labels" => {
                let expr = sub(self)?;
                self.expect_p(",")?;
                let func = match self.bump() {
                    Tok::Kw("avg") => LabelsAgg::Avg,
                    Tok::Kw("sum") => LabelsAgg::Sum,
                    Tok::Kw("max") => LabelsAgg::Max,
                    Tok::Kw("min") => LabelsAgg::Min,
                    _ => {
                        self.i -= 1;
                        return Err(self.unexpected("expecting avg, sum, max or min but found"));
                    }
                };
                let labels = if self.eat_p("(") {
                    let l = self.label_names()?;
                    self.expect_p(")")?;
                    Some(l)
                } else {
                    None
                };
                Expr::AggregateLabels { expr, func, labels }
            }
            "sort_values" => {
                let expr = sub(self)?;
                self.expect_p(",")?;
                let limit = self.integer()?;
                self.expect_p(",")?;
                let order = self.order()?;
                self.expect_p(",")?;
                // `aggregation` has an empty alternative in the grammar.
                let agg = match self.peek() {
                    Tok::Kw(k) => aggregation(k),
                    _ => None,
                };
                if agg.is_some() {
                    self.bump();
                }
                Expr::SortValues { expr, limit, order, agg }
            }
            "sort_label_values" => {
                let expr = sub(self)?;
                self.expect_p(",")?;
                let order = self.order()?;
                self.expect_p(",")?;
                Expr::SortLabelValues { expr, order, labels: self.label_names()? }
            }
            "baseline" => {
                let metric = self.metric()?;
                self.expect_p(",")?;
                let kind = match self.bump() {
                    Tok::Kw("value") => BaselineKind::Value,
                    Tok::Kw("upper") => BaselineKind::Upper,
                    Tok::Kw("lower") => BaselineKind::Lower,
                    _ => {
                        self.i -= 1;
                        return Err(self.unexpected("expecting value, upper or lower but found"));
                    }
                };
                Expr::Baseline { metric, kind }
            }
            _ => {
                self.i -= 2;
                return Err(self.unexpected("mismatched input"));
            }
        })
    }

    fn metric(&mut self) -> Res<Metric> {
        let name = match self.bump() {
            Tok::Name(n) => n,
            _ => {
                self.i -= 1;
                return Err(self.unexpected("expecting a metric name but found"));
            }
        };
        let mut labels = Vec::new();
        let braces = self.eat_p("{");
        if braces && !self.eat_p("}") {
            loop {
                labels.push(self.label_arg()?);
                if self.eat_p("}") {
                    break;
                }
                self.expect_p(",")?;
            }
        }
        Ok(Metric { name, labels, braces })
    }

    fn label_name(&mut self) -> Res<String> {
        match self.bump() {
            Tok::Name(n) => Ok(n),
            Tok::Kw("_") => Ok("_".to_string()),
            _ => {
                self.i -= 1;
                Err(self.unexpected("expecting a label name but found"))
            }
        }
    }

    fn label_names(&mut self) -> Res<Vec<String>> {
        let mut out = vec![self.label_name()?];
        while self.eat_p(",") {
            out.push(self.label_name()?);
        }
        Ok(out)
    }

    fn label_arg(&mut self) -> Res<LabelArg> {
        let name = self.label_name()?;
        self.expect_p("=")?;
        match self.bump() {
            Tok::Str(value, quote) => Ok(LabelArg { name, value, quote }),
            _ => {
                self.i -= 1;
                Err(self.unexpected("expecting a quoted label value but found"))
            }
        }
    }

    fn order(&mut self) -> Res<Order> {
        match self.bump() {
            Tok::Kw("asc") => Ok(Order::Asc),
            Tok::Kw("des") => Ok(Order::Des),
            _ => {
                self.i -= 1;
                Err(self.unexpected("expecting asc or des but found"))
            }
        }
    }

    /// `metric, N, order (, attrN ('='|'!=') 'v')*` inside `top_n( ... )`.
    fn top_n_body(&mut self) -> Res<TopN> {
        let metric = self.metric()?;
        self.expect_p(",")?;
        let n = self.integer()?;
        self.expect_p(",")?;
        let order = self.order()?;
        let mut attrs = Vec::new();
        while self.eat_p(",") {
            let name = match self.bump() {
                Tok::Kw(k) if k.starts_with("attr") => k.to_string(),
                _ => {
                    self.i -= 1;
                    return Err(self.unexpected("expecting attr0..attr5 but found"));
                }
            };
            let equals = match self.bump() {
                Tok::P("=") => true,
                Tok::P("!=") => false,
                _ => {
                    self.i -= 1;
                    return Err(self.unexpected("expecting '=' or '!=' but found"));
                }
            };
            let value = match self.bump() {
                Tok::Str(v, _) => v,
                _ => {
                    self.i -= 1;
                    return Err(self.unexpected("expecting a quoted value but found"));
                }
            };
            attrs.push(AttrCondition { name, value, equals });
        }
        Ok(TopN { metric, n, order, attrs })
    }
}

fn compare_op(p: &str) -> Option<CompareOp> {
    Some(match p {
        "==" => CompareOp::Eq,
        "!=" => CompareOp::Neq,
        "<=" => CompareOp::Lte,
        "<" => CompareOp::Lt,
        ">=" => CompareOp::Gte,
        ">" => CompareOp::Gt,
        _ => return None,
    })
}

fn aggregation(k: &str) -> Option<AggregationOp> {
    Some(match k {
        "avg" => AggregationOp::Avg,
        "count" => AggregationOp::Count,
        "latest" => AggregationOp::Latest,
        "sum" => AggregationOp::Sum,
        "max" => AggregationOp::Max,
        "min" => AggregationOp::Min,
        _ => return None,
    })
}
