//! File positions: decoding the raw bytes, and mapping offsets inside a YAML scalar back to the file.
//!
//! Expressions and DSL bodies live inside YAML scalars. The YAML parser hands us the scalar's
//! *value* (quotes removed, escapes resolved, block indentation stripped, lines folded) plus the
//! position where it starts. To report an error at the right place, [`ScalarOrigin`] walks the
//! value and the raw source text side by side once and records an anchor wherever the two stop
//! advancing in lock-step (a new line, an escape, a folded line break). Between two anchors one
//! value character is one source character, so any value offset maps to a file position with a
//! binary search plus a short character count. Non-whitespace characters always map exactly;
//! whitespace produced by folding maps to a nearby position, which is all an error message needs.

use crate::CompileError;

/// A 1-based line and column (in characters) relative to the start of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    pub(crate) fn error(self, message: impl std::fmt::Display) -> CompileError {
        CompileError {
            line: self.line,
            column: self.column,
            message: message.to_string(),
        }
    }
}

/// A YAML parser mark: 1-based line, 0-based column in characters (yaml-rust2's convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub line: usize,
    pub col0: usize,
}

impl Mark {
    pub(crate) fn pos(self) -> Pos {
        Pos {
            line: self.line.max(1),
            column: self.col0 + 1,
        }
    }
}

/// How a scalar was written; decides how its value relates to the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

/// The decoded file plus the byte offset where each line starts.
pub(crate) struct SourceText<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> SourceText<'a> {
    /// Checks the bytes are UTF-8 (reporting the first bad byte's position) and strips a BOM, which
    /// editors do not display and so must not shift columns.
    pub(crate) fn decode(bytes: &'a [u8]) -> Result<SourceText<'a>, CompileError> {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(error) => return Err(invalid_utf8_error(bytes, error.valid_up_to())),
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(index, _)| index + 1));
        Ok(SourceText { text, line_starts })
    }

    pub(crate) fn text(&self) -> &'a str {
        self.text
    }

    /// Byte offset of a parser mark, or `None` when the mark lies outside the text.
    fn byte_offset(&self, mark: Mark) -> Option<usize> {
        let line_start = *self.line_starts.get(mark.line.checked_sub(1)?)?;
        let rest = self.text.get(line_start..)?;
        let mut chars = rest.char_indices();
        for _ in 0..mark.col0 {
            let (_, c) = chars.next()?;
            if c == '\n' {
                return None;
            }
        }
        Some(line_start + chars.next().map_or(rest.len(), |(index, _)| index))
    }
}

fn invalid_utf8_error(bytes: &[u8], valid_up_to: usize) -> CompileError {
    let valid = bytes.get(..valid_up_to).unwrap_or_default();
    // The prefix is valid UTF-8 by construction; fall back to byte counting if that ever changes.
    let prefix = std::str::from_utf8(valid).unwrap_or_default();
    let line = prefix.matches('\n').count() + 1;
    let line_text = prefix.rsplit('\n').next().unwrap_or_default();
    let bad_byte = bytes.get(valid_up_to).copied().unwrap_or_default();
    Pos {
        line,
        column: line_text.chars().count() + 1,
    }
    .error(format!(
        "file is not valid UTF-8: invalid byte 0x{bad_byte:02x}"
    ))
}

/// One point where value offset and file position are known to correspond.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    offset: usize,
    line: usize,
    column: usize,
}

/// Maps byte offsets inside one scalar's value to file positions (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct ScalarOrigin {
    anchors: Vec<Anchor>,
}

impl ScalarOrigin {
    /// Walks `value` against the source starting at `mark`. Linear in the scalar's length.
    pub(crate) fn build(
        source: &SourceText<'_>,
        value: &str,
        style: ScalarStyle,
        mark: Mark,
    ) -> Self {
        let start = mark.pos();
        let Some(mut s) = source.byte_offset(mark) else {
            return ScalarOrigin {
                anchors: vec![Anchor {
                    offset: 0,
                    line: start.line,
                    column: start.column,
                }],
            };
        };
        let src = source.text();
        let (mut line, mut column) = (start.line, start.column);
        let quote = match style {
            ScalarStyle::SingleQuoted => Some('\''),
            ScalarStyle::DoubleQuoted => Some('"'),
            _ => None,
        };
        if quote.is_some() && src.get(s..).and_then(|rest| rest.chars().next()) == quote {
            s += 1;
            column += 1;
        }
        let mut anchors = vec![Anchor {
            offset: 0,
            line,
            column,
        }];
        let mut v = 0;
        let mut synced = true;
        while let (Some(vc), Some(sc)) = (char_at(value, v), char_at(src, s)) {
            if sc == '\n' {
                s += 1;
                line += 1;
                column = 1;
                while let Some(' ' | '\t') = char_at(src, s) {
                    s += 1;
                    column += 1;
                }
                if vc.is_whitespace() {
                    v += vc.len_utf8();
                }
                synced = false;
                continue;
            }
            let escape_len = match (style, sc, char_at(src, s + 1)) {
                (ScalarStyle::DoubleQuoted, '\\', Some('\n' | '\r')) => Some((1, 0)),
                (ScalarStyle::DoubleQuoted, '\\', Some('x')) => Some((4, vc.len_utf8())),
                (ScalarStyle::DoubleQuoted, '\\', Some('u')) => Some((6, vc.len_utf8())),
                (ScalarStyle::DoubleQuoted, '\\', Some('U')) => Some((10, vc.len_utf8())),
                (ScalarStyle::DoubleQuoted, '\\', Some(_)) => Some((2, vc.len_utf8())),
                (ScalarStyle::SingleQuoted, '\'', Some('\'')) => Some((2, vc.len_utf8())),
                _ => None,
            };
            // Escapes first: `''` and `\\` would otherwise match their value character one-to-one.
            if escape_len.is_none() && vc == sc {
                if !synced {
                    anchors.push(Anchor {
                        offset: v,
                        line,
                        column,
                    });
                    synced = true;
                }
                v += vc.len_utf8();
                s += sc.len_utf8();
                column += 1;
                continue;
            }
            if let Some((source_len, value_len)) = escape_len {
                if src.get(s..s + source_len).is_none() {
                    break;
                }
                s += source_len;
                column += source_len;
                v += value_len;
                synced = false;
            } else if vc.is_whitespace() {
                v += vc.len_utf8();
                synced = false;
            } else if sc.is_whitespace() {
                s += sc.len_utf8();
                column += 1;
                synced = false;
            } else {
                // The streams cannot be re-synchronised; later offsets extrapolate from the last anchor.
                break;
            }
        }
        ScalarOrigin { anchors }
    }

    /// A cursor for looking up positions in increasing offset order (amortised linear).
    pub(crate) fn locator<'a>(&'a self, value: &'a str) -> Locator<'a> {
        Locator {
            value,
            anchors: &self.anchors,
            anchor: usize::MAX,
            offset: 0,
            column: 0,
        }
    }
}

fn char_at(text: &str, offset: usize) -> Option<char> {
    text.get(offset..)?.chars().next()
}

/// Converts value offsets to file positions; caches the last lookup so sequential lookups are cheap.
pub(crate) struct Locator<'a> {
    value: &'a str,
    anchors: &'a [Anchor],
    anchor: usize,
    offset: usize,
    column: usize,
}

impl Locator<'_> {
    pub(crate) fn pos(&mut self, offset: usize) -> Pos {
        let index = self
            .anchors
            .partition_point(|anchor| anchor.offset <= offset)
            .saturating_sub(1);
        let Some(anchor) = self.anchors.get(index) else {
            return Pos { line: 1, column: 1 };
        };
        if index != self.anchor || offset < self.offset {
            self.anchor = index;
            self.offset = anchor.offset;
            self.column = anchor.column;
        }
        let skipped = match self.value.get(self.offset..offset) {
            Some(text) => text.chars().count(),
            None => offset.saturating_sub(self.offset),
        };
        self.column += skipped;
        self.offset = offset;
        Pos {
            line: anchor.line,
            column: self.column,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(
        src: &str,
        value: &str,
        style: ScalarStyle,
        mark: Mark,
        offsets: &[usize],
    ) -> Vec<(usize, usize)> {
        let source = SourceText::decode(src.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let origin = ScalarOrigin::build(&source, value, style, mark);
        let mut locator = origin.locator(value);
        offsets
            .iter()
            .map(|&o| locator.pos(o))
            .map(|p| (p.line, p.column))
            .collect()
    }

    #[test]
    fn plain_folded_lines_map_exactly() {
        let src = "exp: a.b(\n   c)\n";
        let got = origin(
            src,
            "a.b( c)",
            ScalarStyle::Plain,
            Mark { line: 1, col0: 5 },
            &[0, 4, 5, 6],
        );
        assert_eq!(got, vec![(1, 6), (1, 10), (2, 4), (2, 5)]);
    }

    #[test]
    fn literal_block_keeps_columns_of_more_indented_lines() {
        let src = "dsl: |\n  filter {\n    x\n  }\n";
        let value = "filter {\n  x\n}\n";
        let got = origin(
            src,
            value,
            ScalarStyle::Literal,
            Mark { line: 2, col0: 2 },
            &[0, 11, 13],
        );
        assert_eq!(got, vec![(2, 3), (3, 5), (4, 3)]);
    }

    #[test]
    fn quoted_escapes_are_skipped() {
        let src = "f: \"a\\\"b c\"\n";
        let got = origin(
            src,
            "a\"b c",
            ScalarStyle::DoubleQuoted,
            Mark { line: 1, col0: 3 },
            &[0, 2, 4],
        );
        assert_eq!(got, vec![(1, 5), (1, 8), (1, 10)]);
        let src = "f: 'a''b'\n";
        let got = origin(
            src,
            "a'b",
            ScalarStyle::SingleQuoted,
            Mark { line: 1, col0: 3 },
            &[0, 2],
        );
        assert_eq!(got, vec![(1, 5), (1, 8)]);
    }

    #[test]
    fn invalid_utf8_reports_the_first_bad_byte() {
        let error = SourceText::decode(b"a: b\nc: d\xffe").err();
        assert_eq!(error.map(|e| (e.line, e.column)), Some((2, 5)));
    }
}
