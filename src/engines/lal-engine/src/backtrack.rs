//! A small backtracking matcher for the capture groups of LAL `regexp` patterns: the fast path
//! of [`crate::java_regex::JavaRegex`], with the `regex` crate as the reference and fallback.
//!
//! LAL's patterns are written for Java's backtracking engine, e.g. SkyWalking's nginx rule
//! `.+ \"(?<request>.+)\" (?<status>\d{3}) .+`. The `regex` crate finds their groups with its
//! bounded backtracker over a Unicode NFA, about 3 µs for a 170-byte access line, the largest
//! part of a log's LAL analysis. This matcher runs the same leftmost-first search (start
//! positions left to right; at each, alternatives and repetitions in priority order) over a
//! program built from the pattern's HIR, with two shortcuts a general engine cannot take:
//! - a repetition of one character class (`.+`, `\d{3}`, `[^"]*`) is one instruction that
//!   consumes a run of characters at once and gives them back one at a time on backtracking;
//! - when such a run is followed by a literal, it gives back straight to the previous place the
//!   literal occurs (`memrchr`), not one character at a time: every place skipped would fail
//!   on the literal at once.
//!
//! What it supports: literals, classes, concatenation, alternation, capture groups, `?` of
//! anything, other repetitions of one character class or literal character, and the looks
//! `^`, `$` (text or line) and ASCII `\b`/`\B`. Anything else compiles to `None` and the
//! pattern runs on the `regex` crate only. A search counts its steps; past a budget
//! proportional to the text it gives up ([`Outcome::GaveUp`]) and the caller asks the `regex`
//! crate, so no text costs more than the budget plus the reference's own search.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Program {
    insts: Vec<Inst>,
    /// Two per group, group 0 (the whole match) included.
    slots: usize,
}

#[derive(Debug, Clone)]
enum Inst {
    /// These bytes (whole UTF-8 characters).
    Literal(Box<[u8]>),
    /// One character of the set.
    Char(CharSet),
    /// `min..=max` characters of the set (`max` None: no bound), greedy or lazy. `then` is a
    /// literal that must follow at once (after capture ends only), for the greedy give-back.
    Run { set: CharSet, min: u32, max: Option<u32>, greedy: bool, then: Option<Box<[u8]>> },
    /// Try `.0` first, then `.1`.
    Split(usize, usize),
    Jump(usize),
    Save(usize),
    Assert(Assertion),
    Match,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Assertion {
    Start,
    End,
    StartLine,
    EndLine,
    WordBoundary,
    NotWordBoundary,
}

/// A set of characters: ASCII by bitmap, the rest by sorted ranges.
#[derive(Debug, Clone)]
struct CharSet {
    ascii: [u64; 2],
    /// Ranges of non-ASCII characters, sorted, as code points.
    wide: Vec<(u32, u32)>,
}

impl CharSet {
    fn from_ranges(ranges: impl Iterator<Item = (u32, u32)>) -> CharSet {
        let mut set = CharSet { ascii: [0; 2], wide: Vec::new() };
        for (start, end) in ranges {
            for c in start..=end.min(0x7f) {
                set.ascii[(c / 64) as usize] |= 1 << (c % 64);
            }
            if end >= 0x80 {
                set.wide.push((start.max(0x80), end));
            }
        }
        set
    }

    /// The length of the character at `at` if the set holds it.
    #[inline]
    fn at(&self, hay: &[u8], at: usize) -> Option<usize> {
        let &b = hay.get(at)?;
        if b < 0x80 {
            return ((self.ascii[(b / 64) as usize] >> (b % 64)) & 1 == 1).then_some(1);
        }
        if self.wide.is_empty() {
            return None;
        }
        let (c, len) = decode(hay, at)?;
        let held = self.wide.binary_search_by(|&(s, e)| if e < c { std::cmp::Ordering::Less } else if s > c { std::cmp::Ordering::Greater } else { std::cmp::Ordering::Equal });
        held.is_ok().then_some(len)
    }
}

/// The code point at `at` and its length; `hay` is valid UTF-8 (it is a `str`'s bytes).
fn decode(hay: &[u8], at: usize) -> Option<(u32, usize)> {
    let b = *hay.get(at)?;
    let len = match b {
        0x00..=0x7f => return Some((b as u32, 1)),
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    };
    let bytes = hay.get(at..at + len)?;
    let text = std::str::from_utf8(bytes).ok()?;
    text.chars().next().map(|c| (c as u32, len))
}

/// The start of the character before `at` (`at` > 0, at a character boundary).
fn previous_boundary(hay: &[u8], at: usize) -> usize {
    let mut p = at.saturating_sub(1);
    while p > 0 && hay.get(p).is_some_and(|b| b & 0xc0 == 0x80) {
        p -= 1;
    }
    p
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Assertion {
    fn holds(self, hay: &[u8], at: usize) -> bool {
        match self {
            Assertion::Start => at == 0,
            Assertion::End => at == hay.len(),
            Assertion::StartLine => at == 0 || hay.get(at - 1) == Some(&b'\n'),
            Assertion::EndLine => at == hay.len() || hay.get(at) == Some(&b'\n'),
            Assertion::WordBoundary | Assertion::NotWordBoundary => {
                let before = at > 0 && hay.get(at - 1).is_some_and(|&b| is_word_byte(b));
                let after = hay.get(at).is_some_and(|&b| is_word_byte(b));
                (before != after) == (self == Assertion::WordBoundary)
            }
        }
    }
}

/// Why a pattern has no program.
struct Unsupported;

impl Program {
    /// The program of `pattern` (the `regex` crate's spelling, parsed as the `regex` crate does
    /// by default), or None when it uses something this matcher does not run.
    pub fn compile(pattern: &str) -> Option<Program> {
        let hir = regex_syntax::ParserBuilder::new().build().parse(pattern).ok()?;
        let mut compiler = Compiler { insts: vec![Inst::Save(0)], groups: 1 };
        compiler.hir(&hir).ok()?;
        compiler.insts.push(Inst::Save(1));
        compiler.insts.push(Inst::Match);
        let mut insts = compiler.insts;
        link_literals(&mut insts);
        Some(Program { insts, slots: compiler.groups * 2 })
    }

    /// The number of slots a search fills (two per group, group 0 first).
    pub fn slots(&self) -> usize {
        self.slots
    }
}

struct Compiler {
    insts: Vec<Inst>,
    groups: usize,
}

impl Compiler {
    fn hir(&mut self, hir: &Hir) -> Result<(), Unsupported> {
        match hir.kind() {
            HirKind::Empty => Ok(()),
            HirKind::Literal(literal) => {
                self.insts.push(Inst::Literal(literal.0.clone()));
                Ok(())
            }
            HirKind::Class(class) => {
                self.insts.push(Inst::Char(char_set(class)?));
                Ok(())
            }
            HirKind::Look(look) => {
                self.insts.push(Inst::Assert(assertion(*look)?));
                Ok(())
            }
            HirKind::Capture(capture) => {
                let index = capture.index as usize;
                self.groups = self.groups.max(index + 1);
                self.insts.push(Inst::Save(index * 2));
                self.hir(&capture.sub)?;
                self.insts.push(Inst::Save(index * 2 + 1));
                Ok(())
            }
            HirKind::Concat(parts) => parts.iter().try_for_each(|part| self.hir(part)),
            HirKind::Alternation(branches) => self.alternation(branches),
            HirKind::Repetition(repetition) => {
                if let Some(set) = single_char(&repetition.sub) {
                    if repetition.max.is_some_and(|max| max < repetition.min) {
                        return Err(Unsupported);
                    }
                    self.insts.push(Inst::Run { set, min: repetition.min, max: repetition.max, greedy: repetition.greedy, then: None });
                    return Ok(());
                }
                if repetition.min == 0 && repetition.max == Some(1) {
                    return self.optional(&repetition.sub, repetition.greedy);
                }
                Err(Unsupported)
            }
        }
    }

    /// `a|b|c`: a split before each branch but the last, each branch jumping past the rest.
    fn alternation(&mut self, branches: &[Hir]) -> Result<(), Unsupported> {
        let mut jumps = Vec::with_capacity(branches.len());
        for (i, branch) in branches.iter().enumerate() {
            let last = i + 1 == branches.len();
            let split = self.insts.len();
            if !last {
                self.insts.push(Inst::Split(split + 1, 0));
            }
            self.hir(branch)?;
            if !last {
                jumps.push(self.insts.len());
                self.insts.push(Inst::Jump(0));
                let next = self.insts.len();
                if let Some(Inst::Split(_, second)) = self.insts.get_mut(split) {
                    *second = next;
                }
            }
        }
        let end = self.insts.len();
        for at in jumps {
            if let Some(Inst::Jump(to)) = self.insts.get_mut(at) {
                *to = end;
            }
        }
        Ok(())
    }

    /// `x?` (greedy: try `x` first) or `x??`.
    fn optional(&mut self, sub: &Hir, greedy: bool) -> Result<(), Unsupported> {
        let split = self.insts.len();
        self.insts.push(Inst::Split(0, 0));
        self.hir(sub)?;
        let end = self.insts.len();
        if let Some(Inst::Split(first, second)) = self.insts.get_mut(split) {
            (*first, *second) = if greedy { (split + 1, end) } else { (end, split + 1) };
        }
        Ok(())
    }
}

/// The set of a class; byte classes only when ASCII (a `str` pattern's are).
fn char_set(class: &Class) -> Result<CharSet, Unsupported> {
    match class {
        Class::Unicode(class) => Ok(CharSet::from_ranges(class.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)))),
        Class::Bytes(class) => {
            if class.ranges().iter().any(|r| r.end() >= 0x80) {
                return Err(Unsupported);
            }
            Ok(CharSet::from_ranges(class.ranges().iter().map(|r| (r.start() as u32, r.end() as u32))))
        }
    }
}

/// The set of a sub-expression that is one character: a class, or a literal of one character.
fn single_char(hir: &Hir) -> Option<CharSet> {
    match hir.kind() {
        HirKind::Class(class) => char_set(class).ok(),
        HirKind::Literal(literal) => {
            let text = std::str::from_utf8(&literal.0).ok()?;
            let mut chars = text.chars();
            let c = chars.next()?;
            chars.next().is_none().then(|| CharSet::from_ranges(std::iter::once((c as u32, c as u32))))
        }
        _ => None,
    }
}

fn assertion(look: Look) -> Result<Assertion, Unsupported> {
    match look {
        Look::Start => Ok(Assertion::Start),
        Look::End => Ok(Assertion::End),
        Look::StartLF => Ok(Assertion::StartLine),
        Look::EndLF => Ok(Assertion::EndLine),
        Look::WordAscii => Ok(Assertion::WordBoundary),
        Look::WordAsciiNegate => Ok(Assertion::NotWordBoundary),
        _ => Err(Unsupported),
    }
}

/// Gives each greedy run the literal that must follow it (past capture ends only), for the
/// give-back straight to the literal's previous place.
fn link_literals(insts: &mut [Inst]) {
    for at in 0..insts.len() {
        if !matches!(insts.get(at), Some(Inst::Run { greedy: true, .. })) {
            continue;
        }
        let mut next = at + 1;
        while matches!(insts.get(next), Some(Inst::Save(_))) {
            next += 1;
        }
        let literal = match insts.get(next) {
            Some(Inst::Literal(bytes)) if !bytes.is_empty() => Some(bytes.clone()),
            _ => None,
        };
        if let Some(Inst::Run { then, .. }) = insts.get_mut(at) {
            *then = literal;
        }
    }
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The slots of the first match (group 0 first; None for a group that did not take part).
    Matched(Vec<Option<usize>>),
    NoMatch,
    /// The step budget ran out: ask the reference engine.
    GaveUp,
}

/// A place to come back to.
enum Frame {
    /// Go on at `pc` from `at`.
    Alternative { pc: usize, at: usize },
    /// Put a slot back as it was.
    Restore { slot: usize, was: Option<usize> },
    /// A greedy run at `run` (instruction) holds `[min_end, end)`: give back a character (or
    /// to the previous place of its literal) and go on after it.
    Greedy { run: usize, min_end: usize, end: usize },
    /// A lazy run at `run` ends at `end` after `count` characters: take one more.
    Lazy { run: usize, end: usize, count: u32 },
}

/// Steps a search may take: enough for the shipped patterns on any realistic line many times
/// over, small against the `regex` crate's own cost on a line that needs more.
fn budget(len: usize) -> usize {
    len.saturating_mul(16).saturating_add(1024)
}

impl Program {
    /// Leftmost-first search of `text`, as `regex::Regex::captures` reports it.
    pub fn search(&self, text: &str) -> Outcome {
        let hay = text.as_bytes();
        let mut steps = budget(hay.len());
        let mut slots = vec![None; self.slots];
        let mut stack: Vec<Frame> = Vec::new();
        let mut start = 0;
        loop {
            match self.run_at(hay, start, &mut slots, &mut stack, &mut steps) {
                Some(true) => return Outcome::Matched(slots),
                Some(false) => {}
                None => return Outcome::GaveUp,
            }
            if start >= hay.len() {
                return Outcome::NoMatch;
            }
            start += 1;
            while start < hay.len() && hay.get(start).is_some_and(|b| b & 0xc0 == 0x80) {
                start += 1;
            }
            slots.iter_mut().for_each(|s| *s = None);
        }
    }

    /// Whether the program matches starting at `start`; None when the steps ran out.
    fn run_at(&self, hay: &[u8], start: usize, slots: &mut [Option<usize>], stack: &mut Vec<Frame>, steps: &mut usize) -> Option<bool> {
        stack.clear();
        let (mut pc, mut at) = (0usize, start);
        loop {
            *steps = steps.checked_sub(1)?;
            let advanced = match self.insts.get(pc)? {
                Inst::Literal(bytes) => {
                    if literal_at(hay, at, bytes) {
                        at += bytes.len();
                        true
                    } else {
                        false
                    }
                }
                Inst::Char(set) => match set.at(hay, at) {
                    Some(len) => {
                        at += len;
                        true
                    }
                    None => false,
                },
                Inst::Save(slot) => {
                    let was = slots.get(*slot).copied().flatten();
                    stack.push(Frame::Restore { slot: *slot, was });
                    if let Some(s) = slots.get_mut(*slot) {
                        *s = Some(at);
                    }
                    true
                }
                Inst::Split(first, second) => {
                    stack.push(Frame::Alternative { pc: *second, at });
                    pc = *first;
                    continue;
                }
                Inst::Jump(to) => {
                    pc = *to;
                    continue;
                }
                Inst::Assert(assertion) => assertion.holds(hay, at),
                Inst::Match => return Some(true),
                Inst::Run { set, min, max, greedy, then } => match take(set, hay, at, *min) {
                    None => false,
                    Some(min_end) if *greedy => {
                        let (end, taken) = take_most(set, hay, min_end, max.map(|m| m - *min));
                        *steps = steps.checked_sub(taken / 8)?;
                        match give_back(hay, min_end, end, end, then.as_deref()) {
                            Some(end) => {
                                stack.push(Frame::Greedy { run: pc, min_end, end });
                                at = end;
                                true
                            }
                            None => false,
                        }
                    }
                    Some(min_end) => {
                        stack.push(Frame::Lazy { run: pc, end: min_end, count: *min });
                        at = min_end;
                        true
                    }
                },
            };
            if advanced {
                pc += 1;
                continue;
            }
            // Backtrack to the newest place to come back to.
            loop {
                *steps = steps.checked_sub(1)?;
                match stack.pop() {
                    None => return Some(false),
                    Some(Frame::Restore { slot, was }) => {
                        if let Some(s) = slots.get_mut(slot) {
                            *s = was;
                        }
                    }
                    Some(Frame::Alternative { pc: next, at: from }) => {
                        (pc, at) = (next, from);
                        break;
                    }
                    Some(Frame::Greedy { run, min_end, end }) => {
                        if end <= min_end {
                            continue;
                        }
                        let then = match self.insts.get(run) {
                            Some(Inst::Run { then, .. }) => then.as_deref(),
                            _ => None,
                        };
                        let before = previous_boundary(hay, end);
                        if let Some(end) = give_back(hay, min_end, before, end, then) {
                            stack.push(Frame::Greedy { run, min_end, end });
                            (pc, at) = (run + 1, end);
                            break;
                        }
                    }
                    Some(Frame::Lazy { run, end, count }) => {
                        let Some(Inst::Run { set, max, .. }) = self.insts.get(run) else { continue };
                        if max.is_some_and(|max| count >= max) {
                            continue;
                        }
                        if let Some(len) = set.at(hay, end) {
                            stack.push(Frame::Lazy { run, end: end + len, count: count + 1 });
                            (pc, at) = (run + 1, end + len);
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// Whether `hay` holds `literal` at `at` (short literals compared in line: most are a byte or
/// two, where a call to `memcmp` costs more than the comparison).
#[inline]
fn literal_at(hay: &[u8], at: usize, literal: &[u8]) -> bool {
    match hay.get(at..at.saturating_add(literal.len())) {
        Some(window) if literal.len() <= 4 => window.iter().zip(literal).all(|(a, b)| a == b),
        Some(window) => window == literal,
        None => false,
    }
}

/// Where `count` characters of `set` from `at` end, if they are there.
fn take(set: &CharSet, hay: &[u8], mut at: usize, count: u32) -> Option<usize> {
    for _ in 0..count {
        at += set.at(hay, at)?;
    }
    Some(at)
}

/// Where the longest run of `set` from `at` (at most `most` characters) ends, and how many
/// bytes it took.
fn take_most(set: &CharSet, hay: &[u8], from: usize, most: Option<u32>) -> (usize, usize) {
    let mut at = from;
    let mut count = 0u32;
    while most.is_none_or(|m| count < m) {
        // ASCII by the bitmap in line (the common case: `.+` over an ASCII line), the rest
        // through the set.
        let len = match hay.get(at) {
            None => break,
            Some(&b) if b < 0x80 => {
                if (set.ascii[(b / 64) as usize] >> (b % 64)) & 1 == 0 {
                    break;
                }
                1
            }
            Some(_) => match set.at(hay, at) {
                Some(len) => len,
                None => break,
            },
        };
        at += len;
        count += 1;
    }
    (at, at - from)
}

/// The end a greedy run may stop at, at most `upto` (a character boundary within
/// `[min_end, limit]`), not below `min_end`: without a literal to follow, `upto` itself;
/// with one, the last place at or before `upto` where the literal starts.
fn give_back(hay: &[u8], min_end: usize, upto: usize, limit: usize, then: Option<&[u8]>) -> Option<usize> {
    if upto < min_end || upto > limit {
        return None;
    }
    let Some(literal) = then else { return Some(upto) };
    let first = *literal.first()?;
    let mut end = upto;
    loop {
        let window = hay.get(min_end..end + 1).or_else(|| hay.get(min_end..end))?;
        let found = memchr::memrchr(first, window)? + min_end;
        if literal_at(hay, found, literal) {
            return Some(found);
        }
        if found == min_end {
            return None;
        }
        end = found - 1;
    }
}

#[cfg(test)]
mod tests;
