//! A block's index: what a read checks before it decompresses the block. Pure: no IO.
//!
//! - **Trigrams.** Every three consecutive bytes of every log's content, as a set. A keyword is
//!   a substring of a content only if each of its trigrams is in that content, so a block
//!   missing one of the keyword's trigrams holds no match. Stored as a bitmap of `2^b` bits, one
//!   bit per trigram (a multiplicative hash), `b` chosen so the bitmap has at least
//!   [`TRIGRAM_BITS_PER_ENTRY`] bits per distinct trigram: about one bit in eight is set, and a
//!   keyword of `t` trigrams passes a block without it with a probability of about `0.12^t`. A
//!   keyword shorter than three bytes does not prune.
//! - **Terms.** Every log's instance, endpoint and `key:value` tag, hashed (FNV-1a, 64 bits),
//!   in a bloom filter of three probes and at least [`TERM_BITS_PER_ENTRY`] bits per distinct
//!   term: a term that is not there passes with a probability under 0.1%.
//!
//! Both are exact in one direction: a block that holds a match always passes. A block that
//! passes is then read and every log checked, so a false positive costs time, never a wrong
//! answer. The hashes are part of the stored format: changing them needs a new format version.

use crate::data::series_store::{Reader, ValueError, put_len};

/// Bits per distinct trigram (rounded up to a power of two in total).
pub const TRIGRAM_BITS_PER_ENTRY: usize = 8;
/// Bits per distinct term (rounded up to a power of two in total).
pub const TERM_BITS_PER_ENTRY: usize = 32;
/// The smallest and largest bitmaps, in bits.
const MIN_BITS: usize = 64;
const MAX_BITS: usize = 1 << 22;

/// A term of a log the terms filter holds: which name it is, and its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Term<'a> {
    Instance(&'a [u8]),
    Endpoint(&'a [u8]),
    Tag(&'a [u8], &'a [u8]),
}

/// FNV-1a over `parts`, each followed by a 0xff separator byte (no UTF-8 text holds it).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.iter().chain(std::iter::once(&0xff)) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

impl Term<'_> {
    pub fn hash(&self) -> u64 {
        match self {
            Term::Instance(name) => fnv1a(&[b"i", name]),
            Term::Endpoint(name) => fnv1a(&[b"e", name]),
            Term::Tag(key, value) => fnv1a(&[b"t", key, value]),
        }
    }
}

/// The bitmap width (a power of two, in bits) for `entries` distinct entries.
fn width_for(entries: usize, bits_per_entry: usize) -> usize {
    entries.saturating_mul(bits_per_entry).clamp(MIN_BITS, MAX_BITS).next_power_of_two()
}

/// The position of trigram `trigram` (24 bits) in a bitmap of `2^log2` bits.
fn trigram_bit(trigram: u32, log2: u32) -> usize {
    (trigram.wrapping_mul(0x9E37_79B1) >> (32 - log2)) as usize
}

/// The three positions of a term hash in a bitmap of `2^log2` bits.
fn term_bits(hash: u64, log2: u32) -> [usize; 3] {
    let mask = (1u64 << log2) - 1;
    [
        (hash & mask) as usize,
        ((hash >> 32).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - log2)) as usize,
        (hash.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) >> (64 - log2)) as usize,
    ]
}

/// The three-byte windows of `bytes`, each as a 24-bit number.
pub fn trigrams(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes.windows(3).map(|w| (u32::from(w[0]) << 16) | (u32::from(w[1]) << 8) | u32::from(w[2]))
}

/// Collects the distinct trigrams and terms of a block's logs. One per flushing thread: the
/// trigram set is a 2 MiB bitset over every possible trigram, reused from block to block.
pub struct IndexBuilder {
    seen: Vec<u64>,
    trigrams: Vec<u32>,
    /// Term hashes; already hashed, so the set does not hash them again.
    terms: std::collections::HashSet<u64, std::hash::BuildHasherDefault<Prehashed>>,
    /// The last term added (logs of a block repeat their instance and tags).
    last_term: u64,
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
pub struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 << 8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

impl Default for IndexBuilder {
    fn default() -> Self {
        IndexBuilder { seen: vec![0; (1 << 24) / 64], trigrams: Vec::new(), terms: Default::default(), last_term: 0 }
    }
}

impl IndexBuilder {
    /// Adds one log's content.
    pub fn add_content(&mut self, content: &[u8]) {
        for trigram in trigrams(content) {
            let (word, bit) = ((trigram >> 6) as usize, 1u64 << (trigram & 63));
            if let Some(slot) = self.seen.get_mut(word)
                && *slot & bit == 0
            {
                *slot |= bit;
                self.trigrams.push(trigram);
            }
        }
    }

    pub fn add_term(&mut self, term: Term<'_>) {
        let hash = term.hash();
        if hash != self.last_term {
            self.terms.insert(hash);
            self.last_term = hash;
        }
    }

    /// The index of everything added since the last `finish`, and a clean builder.
    pub fn finish(&mut self) -> BlockIndex {
        let trigram_width = width_for(self.trigrams.len(), TRIGRAM_BITS_PER_ENTRY);
        let mut trigram_bits = vec![0u8; trigram_width / 8];
        let log2 = trigram_width.trailing_zeros();
        for trigram in self.trigrams.drain(..) {
            if let Some(slot) = self.seen.get_mut((trigram >> 6) as usize) {
                *slot = 0;
            }
            set(&mut trigram_bits, trigram_bit(trigram, log2));
        }
        let term_width = width_for(self.terms.len(), TERM_BITS_PER_ENTRY);
        let mut term_bits_map = vec![0u8; term_width / 8];
        let log2 = term_width.trailing_zeros();
        for hash in self.terms.drain() {
            for bit in term_bits(hash, log2) {
                set(&mut term_bits_map, bit);
            }
        }
        self.last_term = 0;
        BlockIndex { trigrams: trigram_bits, terms: term_bits_map }
    }
}

fn set(bits: &mut [u8], bit: usize) {
    if let Some(byte) = bits.get_mut(bit / 8) {
        *byte |= 1 << (bit % 8);
    }
}

fn get(bits: &[u8], bit: usize) -> bool {
    bits.get(bit / 8).is_some_and(|byte| byte & (1 << (bit % 8)) != 0)
}

/// The log2 of a bitmap's width in bits, when it is a power of two of at least [`MIN_BITS`].
fn log2_of(bits: &[u8]) -> Option<u32> {
    let width = bits.len().checked_mul(8)?;
    (width.is_power_of_two() && width >= MIN_BITS).then(|| width.trailing_zeros())
}

/// A block's index as stored (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockIndex {
    pub trigrams: Vec<u8>,
    pub terms: Vec<u8>,
}

impl BlockIndex {
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_len(out, self.trigrams.len());
        out.extend_from_slice(&self.trigrams);
        put_len(out, self.terms.len());
        out.extend_from_slice(&self.terms);
    }
}

/// An index read in place from a stored meta value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexView<'a> {
    trigrams: &'a [u8],
    terms: &'a [u8],
}

impl<'a> IndexView<'a> {
    pub fn read(reader: &mut Reader<'a>) -> Result<IndexView<'a>, ValueError> {
        let trigrams = reader.bytes()?;
        let terms = reader.bytes()?;
        for bitmap in [trigrams, terms] {
            if log2_of(bitmap).is_none() {
                return Err(ValueError::UnknownCode { what: "index bitmap width", code: 0 });
            }
        }
        Ok(IndexView { trigrams, terms })
    }

    /// Whether the block may hold logs matching `probe` (false: it holds none).
    pub fn may_match(&self, probe: &Probe) -> bool {
        let (Some(trigram_log2), Some(term_log2)) = (log2_of(self.trigrams), log2_of(self.terms)) else { return true };
        probe.trigrams.iter().all(|t| get(self.trigrams, trigram_bit(*t, trigram_log2)))
            && probe.terms.iter().all(|h| term_bits(*h, term_log2).iter().all(|bit| get(self.terms, *bit)))
    }
}

/// What a read's filter asks of an index: trigrams of its keyword, hashes of its terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    trigrams: Vec<u32>,
    terms: Vec<u64>,
}

impl Probe {
    pub fn new(keyword: Option<&str>, terms: &[Term<'_>]) -> Probe {
        let mut trigrams: Vec<u32> = keyword.map(|k| trigrams(k.as_bytes()).collect()).unwrap_or_default();
        trigrams.sort_unstable();
        trigrams.dedup();
        Probe { trigrams, terms: terms.iter().map(Term::hash).collect() }
    }

    /// Whether the probe prunes anything.
    pub fn is_empty(&self) -> bool {
        self.trigrams.is_empty() && self.terms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_of(contents: &[&str], terms: &[Term<'_>]) -> BlockIndex {
        let mut builder = IndexBuilder::default();
        for content in contents {
            builder.add_content(content.as_bytes());
        }
        for term in terms {
            builder.add_term(*term);
        }
        builder.finish()
    }

    fn view(index: &BlockIndex) -> IndexView<'_> {
        let mut out = Vec::new();
        index.encode(&mut out);
        let leaked: &'static [u8] = Box::leak(out.into_boxed_slice());
        IndexView::read(&mut Reader::new(leaked)).expect("reads back")
    }

    #[test]
    fn every_substring_of_three_bytes_or_more_passes_and_absent_words_are_pruned() {
        let contents = ["GET /api/v1/orders/42 200", "connect() failed (111: Connection refused)"];
        let index = index_of(&contents, &[Term::Instance(b"nginx-1"), Term::Tag(b"level", b"ERROR")]);
        let view = view(&index);
        for content in contents {
            for start in 0..content.len() {
                for end in start + 1..=content.len() {
                    let probe = Probe::new(Some(&content[start..end]), &[]);
                    assert!(view.may_match(&probe), "a substring always passes: {:?}", &content[start..end]);
                }
            }
        }
        assert!(view.may_match(&Probe::new(None, &[Term::Instance(b"nginx-1"), Term::Tag(b"level", b"ERROR")])));
        let absent = ["timeout-xyz", "deadline exceeded", "ZZZZZZ"];
        assert!(absent.iter().all(|k| !view.may_match(&Probe::new(Some(k), &[]))), "absent keywords are pruned here");
        assert!(!view.may_match(&Probe::new(None, &[Term::Tag(b"level", b"WARN")])));
        assert!(!view.may_match(&Probe::new(None, &[Term::Instance(b"nginx-2")])));
        assert!(!view.may_match(&Probe::new(None, &[Term::Endpoint(b"nginx-1")])), "names of one kind never match another");
        assert!(view.may_match(&Probe::new(Some("zz"), &[])), "a keyword of two bytes does not prune");
        assert!(Probe::new(Some("ab"), &[]).is_empty() && !Probe::new(Some("abc"), &[]).is_empty());
    }

    #[test]
    fn the_builder_starts_clean_after_finish_and_sizes_grow_with_distinct_entries() {
        let mut builder = IndexBuilder::default();
        builder.add_content(b"unique-words-here");
        let first = builder.finish();
        builder.add_content(b"other");
        let second = builder.finish();
        let probe = Probe::new(Some("unique"), &[]);
        assert!(view(&first).may_match(&probe));
        assert!(!view(&second).may_match(&probe), "the second block does not inherit the first one's trigrams");
        let big: Vec<String> = (0..5000).map(|i| format!("request id {i:08x} done")).collect();
        let refs: Vec<&str> = big.iter().map(String::as_str).collect();
        let large = index_of(&refs, &[]);
        assert!(large.trigrams.len() > first.trigrams.len());
        let passing = (0..2000).filter(|i| view(&large).may_match(&Probe::new(Some(&format!("missing{i:05}zq")), &[]))).count();
        assert!(passing < 20, "false positives stay rare: {passing} of 2000");
    }

    #[test]
    fn a_bad_width_is_a_decode_error_not_a_panic() {
        let mut out = Vec::new();
        BlockIndex { trigrams: vec![0; 3], terms: vec![0; 8] }.encode(&mut out);
        assert!(IndexView::read(&mut Reader::new(&out)).is_err());
        assert!(IndexView::read(&mut Reader::new(&[0, 0, 0])).is_err());
    }

    #[test]
    fn hashes_are_pinned() {
        assert_eq!(Term::Tag(b"level", b"ERROR").hash(), fnv1a(&[b"t", b"level", b"ERROR"]));
        assert_eq!(fnv1a(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(trigrams(b"abcd").collect::<Vec<_>>(), vec![0x616263, 0x626364]);
        assert_eq!(trigram_bit(0x616263, 10), ((0x616263u32.wrapping_mul(0x9E37_79B1)) >> 22) as usize);
    }
}
