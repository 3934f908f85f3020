use super::*;
use crate::testing::Rng;

/// The reference: the `regex` crate's slots for `text`, or None without a match.
fn reference(regex: &regex::Regex, text: &str) -> Option<Vec<Option<usize>>> {
    let captures = regex.captures(text)?;
    Some((0..captures.len()).flat_map(|i| {
        let m = captures.get(i);
        [m.map(|m| m.start()), m.map(|m| m.end())]
    }).collect())
}

/// Asserts the program answers as the `regex` crate does; true when it answered itself (did
/// not give up).
fn same(pattern: &str, text: &str) -> bool {
    let regex = regex::Regex::new(pattern).expect("the reference compiles");
    let program = Program::compile(pattern).unwrap_or_else(|| panic!("{pattern:?} should be supported"));
    assert_eq!(program.slots(), regex.captures_len() * 2, "{pattern:?}: slots");
    match program.search(text) {
        Outcome::Matched(slots) => {
            assert_eq!(Some(slots), reference(&regex, text), "{pattern:?} on {text:?}");
            true
        }
        Outcome::NoMatch => {
            assert_eq!(None, reference(&regex, text), "{pattern:?} on {text:?}: no match");
            true
        }
        Outcome::GaveUp => false,
    }
}

const ACCESS: &str = r#".+ \"(?P<request>.+)\" (?P<status>(?-u:\d){3}) .+"#;
const ERROR: &str = r"(?P<time>(?-u:\d){4}/(?-u:\d){2}/(?-u:\d){2} (?-u:\d){2}:(?-u:\d){2}:(?-u:\d){2}) \[(?P<level>.+)].*";

#[test]
fn the_shipped_nginx_patterns_match_as_the_regex_crate_does() {
    let access = [
        r#"10.0.3.77 - - [28/Nov/2026:19:52:16 +0000] "GET /api/v1/orders/12345?page=2 HTTP/1.1" 200 5123 "-" "Mozilla/5.0 (X11; Linux x86_64)""#,
        r#"10.0.0.1 - - [01/Jan/2021:00:00:00 +0000] "GET /api HTTP/1.1" 200 1234"#,
        r#"1.2.3.4 - - [x] "POST /é "quoted" HTTP/2" 404 0 "ref" "ua ü""#,
        r#"no quotes here 200 at all"#,
        r#"a "b" 12 c"#,
        "",
    ];
    for line in access {
        assert!(same(ACCESS, line), "{line:?} gave up");
    }
    let error = [
        "2026/11/28 19:52:16 [error] 1234#0: *5 open() \"/x\" failed (2: No such file or directory)",
        "2021/01/01 00:00:00 [warn] [nested] brackets]",
        "2021/01/01 00:00:00 [] nothing",
        "not a time [error] x",
    ];
    for line in error {
        assert!(same(ERROR, line), "{line:?} gave up");
    }
}

#[test]
fn each_construct_matches_as_the_regex_crate_does() {
    let cases: &[(&str, &[&str])] = &[
        ("abc", &["xxabcxx", "ab", "abcabc"]),
        ("a|ab|b", &["ab", "b", "c"]),
        ("(a|ab)(c|bcd)(d*)", &["abcd", "abcdd", "xabcx"]),
        ("(?P<x>a)?b", &["b", "ab", "aab"]),
        ("(a)??b", &["ab", "b"]),
        ("a+?b", &["aaab", "ab", "b"]),
        ("a*?", &["aaa", ""]),
        ("a{2,3}", &["a", "aa", "aaaa"]),
        ("a{2,3}?a", &["aaaa", "aaa"]),
        ("x{0}y", &["y", "xy"]),
        ("^ab$", &["ab", "xab", "ab\n"]),
        ("(?m)^b$", &["a\nb\nc", "b"]),
        ("(?-u:\\b)fo+(?-u:\\b)", &["a foo b", "afoo", "foo"]),
        ("(?-u:\\B)o", &["foo", "o"]),
        ("[^\"]*\"", &["abc\"d", "no quote"]),
        ("(?i)hello", &["HeLLo world", "hell"]),
        ("é+(.)", &["ééé!", "é"]),
        (".+(é)", &["aébé", "é"]),
        ("[a-zé]+", &["123ébc4", "ÉÉ"]),
        ("(a(b)?)+", &[]),
    ];
    for (pattern, texts) in cases {
        if Program::compile(pattern).is_none() {
            // Only a repetition of a group is expected to be unsupported here.
            assert_eq!(*pattern, "(a(b)?)+", "{pattern:?} should compile");
            continue;
        }
        for text in *texts {
            assert!(same(pattern, text), "{pattern:?} on {text:?} gave up");
        }
    }
}

#[test]
fn unsupported_constructs_compile_to_none() {
    for pattern in ["(ab)+", "(a|b)*", "\\bword\\b", "(?:ab){2}"] {
        assert!(Program::compile(pattern).is_none(), "{pattern:?}");
    }
}

#[test]
fn a_search_past_its_budget_gives_up() {
    // Nested runs over a long text with no match: each start tries every split.
    let text = "a".repeat(5000);
    let program = Program::compile("a*a*a*a*b").expect("compiles");
    assert_eq!(program.search(&text), Outcome::GaveUp);
}

fn atom(rng: &mut Rng, depth: u32) -> String {
    let atoms = ["a", "b", " ", "\"", "é", ".", "[ab]", "[^ \"]", "(?-u:\\d)", "[0-9é]"];
    let pick = rng.next() % 10;
    let base = if depth > 0 && pick == 0 {
        format!("({})", pattern(rng, depth - 1))
    } else if depth > 0 && pick == 1 {
        format!("(?:{}|{})", pattern(rng, depth - 1), pattern(rng, depth - 1))
    } else {
        rng.pick(&atoms).to_string()
    };
    let single = atoms.contains(&base.as_str());
    let repeat = if single { ["", "", "+", "*", "?", "+?", "*?", "??", "{2}", "{1,3}", "{0,2}?"] } else { ["", "", "", "?", "??", "", "", "", "", "", ""] };
    format!("{base}{}", rng.pick(&repeat))
}

fn pattern(rng: &mut Rng, depth: u32) -> String {
    let parts = 1 + rng.next() % 4;
    let mut out = String::new();
    if rng.next() % 8 == 0 {
        out.push('^');
    }
    for _ in 0..parts {
        out.push_str(&atom(rng, depth));
    }
    if rng.next() % 8 == 0 {
        out.push('$');
    }
    out
}

fn text(rng: &mut Rng) -> String {
    let len = rng.next() % 14;
    (0..len).map(|_| rng.pick(&["a", "b", " ", "\"", "é", "1", "2", "\n"])).collect()
}

#[test]
fn random_patterns_and_texts_match_as_the_regex_crate_does() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut compared, mut gave_up) = (0, 0);
    for _ in 0..1500 {
        let pattern = pattern(&mut rng, 2);
        if Program::compile(&pattern).is_none() || regex::Regex::new(&pattern).is_err() {
            continue;
        }
        for _ in 0..8 {
            let text = text(&mut rng);
            if same(&pattern, &text) {
                compared += 1;
            } else {
                gave_up += 1;
            }
        }
    }
    assert!(compared > 8000, "{compared} compared, {gave_up} gave up");
}
