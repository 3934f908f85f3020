//! Function calls, as Prometheus 2.42's `FunctionCalls` (`promql/functions.go`): the argument
//! evaluation lives here, the per-value arithmetic in [`crate::functions`], [`crate::rate`] and
//! [`crate::histogram`]. A range argument is a range selector or a subquery (in parentheses or not);
//! its window is closed on both ends, as 2.42's range selection.

use promql_parser::parser::Expr;

use crate::error::Error;
use crate::eval::{Evaluator, Labels, Series, Value, without_name};
use crate::functions;

type Sample = (Labels, i64, f64);

/// A range argument's series and its window `(start, end, range)` in ms.
struct RangeArg {
    series: Vec<Series>,
    window: crate::rate::Window,
    /// The labels `absent_over_time` reports: the range selector's equality matchers.
    absent_labels: Labels,
}

impl Evaluator<'_> {
    pub(crate) fn call(&mut self, name: &str, args: &[Box<Expr>], t_ms: i64) -> Result<Value, Error> {
        match name {
            "time" => return Ok(Value::Scalar(t_ms, t_ms as f64 / 1000.0)),
            "pi" => return Ok(Value::Scalar(t_ms, std::f64::consts::PI)),
            "timestamp" => return self.timestamp(args, t_ms),
            "histogram_quantile" => {
                let q = self.scalar_arg(name, args, 0, t_ms)?;
                let samples = self.vector_arg_at(name, args, 1, t_ms)?;
                return Ok(Value::Vector(crate::histogram::histogram_quantile(q, samples, t_ms)));
            }
            _ => {}
        }
        if let Some(math) = functions::math(name) {
            let samples = self.vector_arg(name, args, t_ms)?;
            return Ok(per_sample(samples, &math));
        }
        if let Some(date) = functions::date(name) {
            if args.is_empty() {
                return Ok(Value::Vector(vec![(Labels::new(), t_ms, date(t_ms.div_euclid(1000)))]));
            }
            let samples = self.vector_arg(name, args, t_ms)?;
            // Go's time.Unix(int64(v), 0): the value truncated to whole seconds.
            return Ok(per_sample(samples, &|v| date(v as i64)));
        }
        if let Some(value) = self.call_range(name, args, t_ms)? {
            return Ok(value);
        }
        self.call_instant(name, args, t_ms)
    }

    /// `timestamp(v)`: a plain selector argument gives each selected sample's own timestamp
    /// (2.42 evaluates it specially); any other argument is evaluated at `t_ms`, so it gives `t_ms`.
    fn timestamp(&mut self, args: &[Box<Expr>], t_ms: i64) -> Result<Value, Error> {
        let Some(arg) = args.first() else {
            return Err(Error::Unsupported { construct: "function timestamp without an argument".to_string() });
        };
        if let Expr::VectorSelector(selector) = unwrap_parens(arg) {
            // 2.42 replaces the selector's offset by `t - @` when it has an `@`, so the original
            // offset is not applied then.
            let mut pinned = selector.clone();
            if pinned.at.is_some() {
                pinned.offset = None;
            }
            let samples = self.select_instant(&pinned, t_ms)?;
            return Ok(Value::Vector(samples.into_iter().map(|(labels, at, _)| (without_name(labels), t_ms, at as f64 / 1000.0)).collect()));
        }
        let samples = self.vector_arg("timestamp", args, t_ms)?;
        Ok(Value::Vector(samples.into_iter().map(|(labels, at, _)| (without_name(labels), t_ms, at as f64 / 1000.0)).collect()))
    }

    /// A scalar argument, evaluated at `t_ms`.
    fn scalar_arg(&mut self, name: &str, args: &[Box<Expr>], index: usize, t_ms: i64) -> Result<f64, Error> {
        match args.get(index).map(|arg| self.eval(arg, t_ms)).transpose()? {
            Some(Value::Scalar(_, v)) => Ok(v),
            _ => Err(Error::Unsupported { construct: format!("function {name} without scalar argument {}", index + 1) }),
        }
    }

    fn string_arg(&mut self, name: &str, args: &[Box<Expr>], index: usize, t_ms: i64) -> Result<String, Error> {
        match args.get(index).map(|arg| self.eval(arg, t_ms)).transpose()? {
            Some(Value::String(_, text)) => Ok(text),
            _ => Err(Error::Unsupported { construct: format!("function {name} without string argument {}", index + 1) }),
        }
    }

    fn vector_arg(&mut self, name: &str, args: &[Box<Expr>], t_ms: i64) -> Result<Vec<Sample>, Error> {
        self.vector_arg_at(name, args, 0, t_ms)
    }

    fn vector_arg_at(&mut self, name: &str, args: &[Box<Expr>], index: usize, t_ms: i64) -> Result<Vec<Sample>, Error> {
        match args.get(index).map(|arg| self.eval(arg, t_ms)).transpose()? {
            Some(Value::Vector(samples)) => Ok(samples),
            _ => Err(Error::Unsupported { construct: format!("function {name} over a non-vector argument") }),
        }
    }

    fn range_arg(&mut self, name: &str, args: &[Box<Expr>], index: usize, t_ms: i64) -> Result<RangeArg, Error> {
        let arg = args.get(index).map(|arg| unwrap_parens(arg));
        match arg {
            Some(Expr::MatrixSelector(matrix)) => {
                let end = self.instant_of(&matrix.vs, t_ms);
                let range_ms = crate::eval::millis(matrix.range);
                let Value::Matrix(series) = self.eval(&Expr::MatrixSelector(matrix.clone()), t_ms)? else {
                    return Err(Error::Unsupported { construct: format!("function {name} over a non-range argument") });
                };
                let absent_labels = functions::absent_labels(&matrix.vs);
                Ok(RangeArg { series, window: (end.saturating_sub(range_ms), end, range_ms), absent_labels })
            }
            Some(Expr::Subquery(subquery)) => {
                let (series, window) = self.subquery(subquery, t_ms)?;
                Ok(RangeArg { series, window, absent_labels: Labels::new() })
            }
            _ => Err(Error::Unsupported { construct: format!("function {name} over a non-range argument") }),
        }
    }

    /// The functions over a range argument; `None` when `name` is not one.
    fn call_range(&mut self, name: &str, args: &[Box<Expr>], t_ms: i64) -> Result<Option<Value>, Error> {
        let out: Vec<Sample> = match name {
            "rate" | "increase" | "delta" => {
                let (is_counter, is_rate) = (name != "delta", name == "rate");
                let arg = self.range_arg(name, args, 0, t_ms)?;
                arg.series
                    .into_iter()
                    .filter_map(|s| {
                        crate::rate::extrapolated_rate(&s.samples, arg.window, is_counter, is_rate).map(|v| (without_name(s.labels), t_ms, v))
                    })
                    .collect()
            }
            "quantile_over_time" => {
                let q = self.scalar_arg(name, args, 0, t_ms)?;
                let arg = self.range_arg(name, args, 1, t_ms)?;
                arg.series
                    .into_iter()
                    .map(|s| {
                        let values = s.samples.iter().map(|(_, v)| *v).collect();
                        (without_name(s.labels), t_ms, crate::aggregate::quantile(q, values))
                    })
                    .collect()
            }
            "predict_linear" => {
                let arg = self.range_arg(name, args, 0, t_ms)?;
                let duration = self.scalar_arg(name, args, 1, t_ms)?;
                arg.series
                    .into_iter()
                    .filter(|s| s.samples.len() >= 2)
                    .map(|s| {
                        let (slope, intercept) = crate::rate::linear_regression(&s.samples, t_ms);
                        (without_name(s.labels), t_ms, slope * duration + intercept)
                    })
                    .collect()
            }
            "holt_winters" => {
                let arg = self.range_arg(name, args, 0, t_ms)?;
                let smoothing = self.scalar_arg(name, args, 1, t_ms)?;
                let trend = self.scalar_arg(name, args, 2, t_ms)?;
                // 2.42 checks the factors per series, so an empty argument is no error.
                if !arg.series.is_empty() {
                    if smoothing <= 0.0 || smoothing >= 1.0 || smoothing.is_nan() {
                        return Err(Error::Execution { message: format!("invalid smoothing factor. Expected: 0 < sf < 1, got: {smoothing:.6}") });
                    }
                    if trend <= 0.0 || trend >= 1.0 || trend.is_nan() {
                        return Err(Error::Execution { message: format!("invalid trend factor. Expected: 0 < tf < 1, got: {trend:.6}") });
                    }
                }
                arg.series
                    .into_iter()
                    .filter_map(|s| crate::rate::holt_winters(&s.samples, smoothing, trend).map(|v| (without_name(s.labels), t_ms, v)))
                    .collect()
            }
            "absent_over_time" => {
                let arg = self.range_arg(name, args, 0, t_ms)?;
                if arg.series.iter().any(|s| !s.samples.is_empty()) {
                    Vec::new()
                } else {
                    vec![(arg.absent_labels, t_ms, 1.0)]
                }
            }
            _ => {
                if let Some(range_fn) = crate::rate::range_function(name) {
                    let arg = self.range_arg(name, args, 0, t_ms)?;
                    arg.series.into_iter().filter_map(|s| range_fn(&s.samples).map(|v| (without_name(s.labels), t_ms, v))).collect()
                } else if let Some(over_time) = functions::over_time(name) {
                    let arg = self.range_arg(name, args, 0, t_ms)?;
                    let keep_name = name == "last_over_time";
                    arg.series
                        .into_iter()
                        .filter(|s| !s.samples.is_empty())
                        .map(|s| {
                            let value = over_time(&s.samples);
                            (if keep_name { s.labels } else { without_name(s.labels) }, t_ms, value)
                        })
                        .collect()
                } else {
                    return Ok(None);
                }
            }
        };
        Ok(Some(Value::Vector(out)))
    }

    /// The instant functions with extra arguments or whole-vector behaviour (Prometheus 2.42's
    /// funcClamp*, funcRound, funcSort*, funcVector, funcScalar, funcLabel*, funcAbsent).
    fn call_instant(&mut self, name: &str, args: &[Box<Expr>], t_ms: i64) -> Result<Value, Error> {
        Ok(match name {
            "clamp" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let (min, max) = (self.scalar_arg(name, args, 1, t_ms)?, self.scalar_arg(name, args, 2, t_ms)?);
                if max < min {
                    return Ok(Value::Vector(Vec::new()));
                }
                per_sample(samples, &|v| functions::go_max(min, functions::go_min(max, v)))
            }
            "clamp_min" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let min = self.scalar_arg(name, args, 1, t_ms)?;
                per_sample(samples, &|v| functions::go_max(min, v))
            }
            "clamp_max" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let max = self.scalar_arg(name, args, 1, t_ms)?;
                per_sample(samples, &|v| functions::go_min(max, v))
            }
            "round" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let to_nearest = if args.len() > 1 { self.scalar_arg(name, args, 1, t_ms)? } else { 1.0 };
                // Ties round up; the inverse as 2.42 ("fewer floating point accuracy issues").
                let inverse = 1.0 / to_nearest;
                per_sample(samples, &|v| (v * inverse + 0.5).floor() / inverse)
            }
            "sort" | "sort_desc" => {
                let mut samples = self.vector_arg(name, args, t_ms)?;
                // NaN last in both orders, as 2.42's reversed vectorByValueHeap / vectorByReverseValueHeap.
                let descending = name == "sort_desc";
                samples.sort_by(|a, b| match (a.2.is_nan(), b.2.is_nan()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Greater,
                    (false, true) => std::cmp::Ordering::Less,
                    _ if descending => b.2.total_cmp(&a.2),
                    _ => a.2.total_cmp(&b.2),
                });
                Value::Vector(samples)
            }
            "vector" => Value::Vector(vec![(Labels::new(), t_ms, self.scalar_arg(name, args, 0, t_ms)?)]),
            "scalar" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                Value::Scalar(t_ms, if samples.len() == 1 { samples[0].2 } else { f64::NAN })
            }
            "label_replace" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let mut strings = Vec::with_capacity(4);
                for index in 1..5 {
                    strings.push(self.string_arg(name, args, index, t_ms)?);
                }
                functions::label_replace(samples, &strings[0], &strings[1], &strings[2], &strings[3])?
            }
            "label_join" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let mut strings = Vec::new();
                for index in 1..args.len() {
                    strings.push(self.string_arg(name, args, index, t_ms)?);
                }
                let [dst, separator, sources @ ..] = strings.as_slice() else {
                    return Err(Error::Unsupported { construct: format!("function {name} with too few arguments") });
                };
                functions::label_join(samples, dst, separator, sources)?
            }
            "absent" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                if !samples.is_empty() {
                    return Ok(Value::Vector(Vec::new()));
                }
                let labels = match args.first().map(|arg| arg.as_ref()) {
                    Some(Expr::VectorSelector(selector)) => functions::absent_labels(selector),
                    _ => Labels::new(),
                };
                Value::Vector(vec![(labels, t_ms, 1.0)])
            }
            _ => return Err(Error::Unsupported { construct: format!("function {name}") }),
        })
    }
}

fn per_sample(samples: Vec<Sample>, f: &dyn Fn(f64) -> f64) -> Value {
    Value::Vector(samples.into_iter().map(|(labels, at, v)| (without_name(labels), at, f(v))).collect())
}

/// The expression inside any number of parentheses.
pub(crate) fn unwrap_parens(mut expr: &Expr) -> &Expr {
    while let Expr::Paren(paren) = expr {
        expr = &paren.expr;
    }
    expr
}
