//! A unified line diff (`diff -u` style, 3 lines of context) by longest common subsequence.
//!
//! Rule files are small (a few hundred lines), so the quadratic LCS table is cheap once the
//! common head and tail are trimmed. Past [`MAX_TABLE_CELLS`] the middle is shown as removed and
//! added whole rather than spending memory on the table: still a correct diff, only not minimal.

/// The largest LCS table computed (old lines × new lines in the differing middle).
pub const MAX_TABLE_CELLS: usize = 4_000_000;

const CONTEXT: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// The unified diff turning `old` into `new`, headed `--- old_label` / `+++ new_label`; empty when
/// the texts are equal.
pub fn unified(old: &str, new: &str, old_label: &str, new_label: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let script = edit_script(&old_lines, &new_lines);
    if script.iter().all(|line| matches!(line, Line::Same(_))) {
        return String::new();
    }
    let mut out = format!("--- {old_label}\n+++ {new_label}\n");
    for hunk in hunks(&script) {
        out.push_str(&hunk);
    }
    out
}

fn edit_script<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<Line<'a>> {
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let tail = old[head..].iter().rev().zip(new[head..].iter().rev()).take_while(|(a, b)| a == b).count();
    let (old_mid, new_mid) = (&old[head..old.len() - tail], &new[head..new.len() - tail]);
    let mut script: Vec<Line<'a>> = old[..head].iter().map(|l| Line::Same(l)).collect();
    if old_mid.len().saturating_mul(new_mid.len()) > MAX_TABLE_CELLS {
        script.extend(old_mid.iter().map(|l| Line::Removed(l)));
        script.extend(new_mid.iter().map(|l| Line::Added(l)));
    } else {
        script.extend(lcs_script(old_mid, new_mid));
    }
    script.extend(old[old.len() - tail..].iter().map(|l| Line::Same(l)));
    script
}

/// The edit script of the LCS: `table[i][j]` is the LCS length of `old[i..]` and `new[j..]`.
fn lcs_script<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<Line<'a>> {
    let width = new.len() + 1;
    let mut table = vec![0u32; (old.len() + 1) * width];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            table[i * width + j] = if old[i] == new[j] {
                table[(i + 1) * width + j + 1] + 1
            } else {
                table[(i + 1) * width + j].max(table[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut script = Vec::with_capacity(old.len() + new.len());
    while i < old.len() && j < new.len() {
        if old[i] == new[j] {
            script.push(Line::Same(old[i]));
            i += 1;
            j += 1;
        } else if table[(i + 1) * width + j] >= table[i * width + j + 1] {
            script.push(Line::Removed(old[i]));
            i += 1;
        } else {
            script.push(Line::Added(new[j]));
            j += 1;
        }
    }
    script.extend(old[i..].iter().map(|l| Line::Removed(l)));
    script.extend(new[j..].iter().map(|l| Line::Added(l)));
    script
}

/// Groups the script into hunks with [`CONTEXT`] lines around each change.
fn hunks(script: &[Line<'_>]) -> Vec<String> {
    let changed: Vec<usize> =
        script.iter().enumerate().filter(|(_, l)| !matches!(l, Line::Same(_))).map(|(i, _)| i).collect();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for &at in &changed {
        let start = at.saturating_sub(CONTEXT);
        let end = (at + CONTEXT + 1).min(script.len());
        match ranges.last_mut() {
            Some((_, last_end)) if start <= *last_end => *last_end = end.max(*last_end),
            _ => ranges.push((start, end)),
        }
    }
    // Line numbers (1-based) before each script position, in the old and the new text.
    let mut old_at = vec![1usize; script.len() + 1];
    let mut new_at = vec![1usize; script.len() + 1];
    for (i, line) in script.iter().enumerate() {
        old_at[i + 1] = old_at[i] + usize::from(!matches!(line, Line::Added(_)));
        new_at[i + 1] = new_at[i] + usize::from(!matches!(line, Line::Removed(_)));
    }
    ranges
        .into_iter()
        .map(|(start, end)| {
            let lines = &script[start..end];
            let old_len = lines.iter().filter(|l| !matches!(l, Line::Added(_))).count();
            let new_len = lines.iter().filter(|l| !matches!(l, Line::Removed(_))).count();
            // `diff -u` numbers an empty side by the line before it.
            let old_start = if old_len == 0 { old_at[start] - 1 } else { old_at[start] };
            let new_start = if new_len == 0 { new_at[start] - 1 } else { new_at[start] };
            let mut out = format!("@@ -{} +{} @@\n", span(old_start, old_len), span(new_start, new_len));
            for line in lines {
                let (mark, text) = match line {
                    Line::Same(t) => (' ', t),
                    Line::Removed(t) => ('-', t),
                    Line::Added(t) => ('+', t),
                };
                out.push(mark);
                out.push_str(text);
                out.push('\n');
            }
            out
        })
        .collect()
}

fn span(start: usize, len: usize) -> String {
    if len == 1 { start.to_string() } else { format!("{start},{len}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "x", "y"), "");
        assert_eq!(unified("", "", "x", "y"), "");
    }

    #[test]
    fn one_changed_line_in_the_middle_shows_three_lines_of_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        let expected = "--- r1\n+++ r2\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n";
        assert_eq!(unified(old, new, "r1", "r2"), expected);
    }

    #[test]
    fn insertions_and_deletions_at_the_ends() {
        assert_eq!(unified("", "a\nb\n", "o", "n"), "--- o\n+++ n\n@@ -0,0 +1,2 @@\n+a\n+b\n");
        assert_eq!(unified("a\nb\n", "", "o", "n"), "--- o\n+++ n\n@@ -1,2 +0,0 @@\n-a\n-b\n");
        assert_eq!(unified("a\n", "a\nb\n", "o", "n"), "--- o\n+++ n\n@@ -1 +1,2 @@\n a\n+b\n");
    }

    #[test]
    fn distant_changes_are_separate_hunks_and_close_ones_merge() {
        let old: String = (1..=20).map(|n| format!("{n}\n")).collect();
        let far = old.replace("2\n", "two\n").replace("19\n", "nineteen\n");
        let diff = unified(&old, &far, "o", "n");
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        let near = old.replace("5\n", "five\n").replace("\n8\n", "\neight\n");
        assert_eq!(unified(&old, &near, "o", "n").matches("@@ -").count(), 1);
    }

    #[test]
    fn the_diff_is_minimal_where_lines_move() {
        // LCS keeps the longest common run (b, c) and moves a.
        let diff = unified("a\nb\nc\n", "b\nc\na\n", "o", "n");
        assert_eq!(diff, "--- o\n+++ n\n@@ -1,3 +1,3 @@\n-a\n b\n c\n+a\n");
    }

    #[test]
    fn applying_the_script_gives_back_the_new_text() {
        let old = "metricPrefix: a\nexpSuffix: x\nmetricsRules:\n  - name: m1\n    exp: y.sum()\n";
        let new = "metricPrefix: a\nmetricsRules:\n  - name: m1\n    exp: y.sum(['svc'])\n  - name: m2\n    exp: z\n";
        let script = edit_script(&old.lines().collect::<Vec<_>>(), &new.lines().collect::<Vec<_>>());
        let rebuilt: Vec<&str> = script.iter().filter_map(|l| match l { Line::Removed(_) => None, Line::Same(t) | Line::Added(t) => Some(*t) }).collect();
        assert_eq!(rebuilt, new.lines().collect::<Vec<_>>());
        let original: Vec<&str> = script.iter().filter_map(|l| match l { Line::Added(_) => None, Line::Same(t) | Line::Removed(t) => Some(*t) }).collect();
        assert_eq!(original, old.lines().collect::<Vec<_>>());
    }
}
