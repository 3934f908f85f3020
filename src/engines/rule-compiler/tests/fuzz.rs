//! Deterministic fuzzing: `compile` must return (Ok or Err) on any input, never panic.
//!
//! Inputs are corpus files truncated at many offsets and corrupted with a fixed-seed PRNG (random
//! byte flips, plus insertions and deletions of the characters the YAML and Groovy lexers treat
//! specially, which reach far more error paths than uniform noise), and "token soup": random
//! sequences of Groovy fragments placed where a MAL `exp` or a LAL `dsl` body goes. The default run
//! is bounded to stay fast; `cargo test -- --ignored` runs a much longer soak.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use hotrule_rule_compiler::{DslKind, compile};

/// xorshift64*: tiny, deterministic, good enough to pick offsets and bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        if bound == 0 {
            0
        } else {
            (self.next() % bound as u64) as usize
        }
    }
}

/// Characters with syntactic meaning somewhere in the pipeline.
const SPECIAL: &[u8] = b"{}()[]'\"$/\\:,.;-|>#&*!?=<\n\t 0aZ_\xc3\xff";

fn mutate(rng: &mut Rng, bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let edits = 1 + rng.below(4);
    for _ in 0..edits {
        let at = rng.below(out.len() + 1);
        match rng.below(4) {
            0 if at < out.len() => {
                if let Some(byte) = out.get_mut(at) {
                    *byte ^= 1 << rng.below(8);
                }
            }
            1 if at < out.len() => {
                out.remove(at);
            }
            _ => {
                let special = SPECIAL
                    .get(rng.below(SPECIAL.len()))
                    .copied()
                    .unwrap_or(b'{');
                out.insert(at, special);
            }
        }
    }
    out
}

/// Runs `compile` on every generated input and returns a description of each panic.
fn run(truncations: usize, mutations: usize, seed: u64) -> (usize, Vec<String>) {
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    let mut inputs = 0;
    for (kind, path, bytes) in common::corpus() {
        let mut candidates: Vec<(String, Vec<u8>)> = Vec::new();
        for _ in 0..truncations {
            let cut = rng.below(bytes.len() + 1);
            candidates.push((
                format!("{path} truncated at {cut}"),
                bytes.get(..cut).unwrap_or_default().to_vec(),
            ));
        }
        for index in 0..mutations {
            candidates.push((
                format!("{path} mutation #{index} (seed {seed})"),
                mutate(&mut rng, &bytes),
            ));
        }
        for (label, input) in candidates {
            inputs += 1;
            let other = if kind == DslKind::Mal {
                DslKind::Lal
            } else {
                DslKind::Mal
            };
            for kind in [kind, other] {
                if catch_unwind(AssertUnwindSafe(|| compile(kind, &input))).is_err() {
                    failures.push(format!(
                        "{kind:?} {label}: {:?}",
                        String::from_utf8_lossy(&input)
                    ));
                }
            }
        }
    }
    (inputs, failures)
}

#[test]
fn mutated_corpus_never_panics() {
    let (inputs, failures) = run(4, 4, 0x5eed_cafe_f00d_0001);
    assert!(inputs > 700, "only {inputs} inputs generated");
    assert!(
        failures.is_empty(),
        "{} panic(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Fragments the Groovy lexer and parser give meaning to, including unbalanced and unterminated ones.
const FRAGMENTS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "a",
    "b.c",
    "?.",
    ".",
    "::",
    "->",
    "=",
    "==",
    "?",
    ":",
    "?:",
    "+",
    "-",
    "*",
    "/",
    "!",
    " as ",
    " in ",
    "if",
    "else",
    "def ",
    "return",
    "1",
    "2.5",
    "'s'",
    "\"g${x}\"",
    "\"$y.z\"",
    "$/r/$",
    "/re/",
    ",",
    ";",
    "\n",
    " ",
    "//c\n",
    "/*c*/",
    "x y",
    "tag k: v",
    "filter",
    "json",
    "sum(['a'])",
    "service(['a'], Layer.X)",
    "@",
    "\\",
    "'''t'''",
    "0x1F",
    "1L",
    "${",
    "\"",
    "'",
    "é",
];

/// Random fragment sequences as a MAL `exp` and as the body of a LAL `filter`.
fn token_soup(iterations: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    for _ in 0..iterations {
        let mut body = String::new();
        for _ in 0..rng.below(40) {
            body.push_str(
                FRAGMENTS
                    .get(rng.below(FRAGMENTS.len()))
                    .copied()
                    .unwrap_or("a"),
            );
        }
        let indented = body.replace('\n', "\n      ");
        let mal = format!(
            "metricPrefix: p\nexpSuffix: service(['s'], Layer.G)\nmetricsRules:\n  - name: r\n    exp: |\n      {indented}\n"
        );
        let lal = format!(
            "rules:\n  - name: r\n    dsl: |\n      filter {{\n      {indented}\n      }}\n"
        );
        for (kind, text) in [(DslKind::Mal, mal), (DslKind::Lal, lal)] {
            if catch_unwind(AssertUnwindSafe(|| compile(kind, text.as_bytes()))).is_err() {
                failures.push(format!("{kind:?}: {text:?}"));
            }
        }
    }
    failures
}

#[test]
fn token_soup_never_panics() {
    let failures = token_soup(3_000, 0x0dd_ba11);
    assert!(
        failures.is_empty(),
        "{} panic(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
#[ignore = "long soak; run with --ignored"]
fn mutated_corpus_never_panics_soak() {
    for seed in 1..=20 {
        let (_, failures) = run(20, 60, seed);
        assert!(
            failures.is_empty(),
            "{} panic(s):\n{}",
            failures.len(),
            failures.join("\n")
        );
        let failures = token_soup(20_000, seed);
        assert!(
            failures.is_empty(),
            "{} panic(s):\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}
