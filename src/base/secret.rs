//! Comparing secrets (tokens) without leaking them through timing.

/// Compares SHA-256 digests without an early exit, so neither the first differing byte nor the
/// expected token's length shows in the time taken.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    let difference = a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn equal_tokens_match_and_others_do_not() {
        assert!(super::constant_time_eq(b"token", b"token"));
        assert!(!super::constant_time_eq(b"token", b"tokem"));
        assert!(!super::constant_time_eq(b"token", b"token2"));
        assert!(!super::constant_time_eq(b"", b"token"));
    }
}
