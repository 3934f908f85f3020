//! Property-style: no input string makes the parser or the evaluator panic. Every prefix (and
//! every suffix) of a set of valid expressions, garbage strings, and deterministic random
//! mutations are parsed and, when they parse, evaluated over windows of several shapes.

use hotrule_mqe_engine::*;

const VALID: &[&str] = &[
    "sum((service_resp_time > 100) && (service_sla > 1)) >= 1",
    "sum(abs(increase(service_resp_time,1)) > 0) >= 1",
    "sum(service_resp_time > baseline(service_resp_time,lower)) >= 1",
    "aggregate_labels(service_percentile{p='50,75,90'}, avg(p)) / 1000 - avg(service_percentile{p=\"50\"})",
    "round(rate(service_cpm, 3) * 60 % 7, 2) != bool ceil(floor(service_sla))",
    "view_as_seq(nope, service_cpm, is_present(nope, service_sla)) || latest(service_cpm) <= 3",
    "top_n_of(top_n(cpm_top, 2, des, attr0='x', attr1 != 'y'), top_n(records, 1, asc), 3, DES)",
    "relabels(sort_label_values(sort_values(service_percentile, 2, asc, max), des, p, _), p='50,75', q='a,b')",
    "count(service_percentile{p='99'} - service_percentile) + min(max(service_cpm)) * 1.5",
    "(((service_cpm))) / 0 % 0 - increase(service_percentile{p='50'}, 100000)",
    "top_n(service_cpm, 99999999999999999999, des) + round(service_cpm, 99999999999) + increase(service_cpm, 99999999999)",
];

const GARBAGE: &[&str] = &[
    "", " ", "(", ")", "{", "}", "'", "\"", "&&", "||", "bool", "avg(", "m{", "m{p", "m{p=", "m{p='", "1.", ".5", "1..2",
    "1.5.5", "a,b", "top_n(", "top_n_of(top_n(a,1,des)", "round(m,", "increase(1,1)", "baseline(m,)", "_", "__", "é", "m{é='1'}",
    "\u{0}", "m\u{0}", "'é", "sort_values(m,,,)", "aggregate_labels(m,sum(", "relabels(m,p='1')", "m > > 1", "-1", "+m",
    "1 bool 2", "m{p='1',}", "m{,}", "attr0", "value(m)", "99999999999999999999999999999999999999", "1e5", "NaN", "inf",
];

fn source() -> MemSource {
    let mut s = MemSource::new();
    let step = Step::Minute.millis();
    for i in -5..8i64 {
        if i % 3 != 0 {
            s.set("service_resp_time", i * step, (i * 37 % 11) as f64 * 10.0);
            s.set("service_cpm", i * step, i as f64);
        }
        if i % 2 == 0 {
            s.set("service_sla", i * step, 0.0);
        }
        for p in ["50", "75", "99"] {
            if (i + p.len() as i64) % 4 != 0 {
                s.set_labeled("service_percentile", &[("p", p)], i * step, f64::from(i as i32) * 1.5);
            }
        }
    }
    s.set_baseline("service_resp_time", BaselineKind::Lower, 0, 5.0);
    let item = |n: &str, v: f64| TopNItem { name: n.to_string(), value: v, trace_id: None, owner: None };
    s.set_top_n("cpm_top", vec![item("a", 1.0), item("b", f64::NAN)]);
    s.set_records("records", vec![item("r", 2.0)]);
    s
}

fn windows() -> Vec<Duration> {
    let step = Step::Minute.millis();
    vec![
        Duration::new(0, 4 * step, Step::Minute),
        Duration::new(0, 0, Step::Minute),
        Duration::new(step, 0, Step::Minute), // no points
        Duration::new(i64::MIN, i64::MAX, Step::Second),
        Duration::new(i64::MAX - 10, i64::MAX, Step::Day),
    ]
}

fn check(input: &str, src: &MemSource, windows: &[Duration]) {
    if let Ok(e) = parse(input) {
        let _ = (e.text(), e.metric_names(), e.max_trend_range(), e.uses_top_n(), e.is_bool_result());
        for w in windows {
            let r = evaluate(&e, src, w);
            for vs in &r.results {
                for v in &vs.values {
                    let _ = v.value_string();
                }
            }
        }
    }
}

fn char_prefixes(s: &str) -> impl Iterator<Item = &str> {
    s.char_indices().map(move |(i, _)| &s[..i]).chain(std::iter::once(s))
}

#[test]
fn every_prefix_and_suffix_of_valid_expressions() {
    let (src, ws) = (source(), windows());
    for v in VALID {
        assert!(parse(v).is_ok(), "{v}: {:?}", parse(v).err());
        for p in char_prefixes(v) {
            check(p, &src, &ws);
        }
        for (i, _) in v.char_indices() {
            check(&v[i..], &src, &ws);
        }
    }
}

#[test]
fn garbage_and_combinations() {
    let (src, ws) = (source(), windows());
    for g in GARBAGE {
        check(g, &src, &ws);
        for v in VALID {
            check(&format!("{v}{g}"), &src, &ws);
            check(&format!("{g}{v}"), &src, &ws);
            check(&format!("{v} + ({g})"), &src, &ws);
        }
    }
}

#[test]
fn random_mutations() {
    let (src, ws) = (source(), windows());
    let alphabet: Vec<char> = "()[]{},.=+-*/%<>!&|'\"_ 0123456789abcdeimnoprstuvxyzé\t\n".chars().collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..4000 {
        let base: Vec<char> = VALID[round % VALID.len()].chars().collect();
        let mut s = base.clone();
        for _ in 0..(1 + next() % 4) {
            let pos = (next() as usize) % (s.len() + 1);
            match next() % 3 {
                0 if pos < s.len() => {
                    s.remove(pos);
                }
                1 if pos < s.len() => s[pos] = alphabet[(next() as usize) % alphabet.len()],
                _ => s.insert(pos, alphabet[(next() as usize) % alphabet.len()]),
            }
        }
        let s: String = s.into_iter().collect();
        check(&s, &src, &ws);
    }
}

#[test]
fn nesting_limits_do_not_overflow() {
    let (src, ws) = (source(), windows());
    for n in [10, 30, 100, 1000, 20_000] {
        check(&format!("{}service_cpm{}", "(".repeat(n), ")".repeat(n)), &src, &ws);
        check(&format!("{}service_cpm{}", "abs(".repeat(n), ")".repeat(n)), &src, &ws);
        check(&vec!["service_cpm"; n].join(" - "), &src, &ws);
        check(&format!("view_as_seq({})", vec!["service_cpm"; n].join(",")), &src, &ws);
    }
    assert!(parse(&format!("{}m{}", "(".repeat(30), ")".repeat(30))).is_ok());
}
