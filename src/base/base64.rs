//! Standard, padded base64 (RFC 4648 §4) over bytes: how SkyWalking writes entity ids (Java's
//! `Base64.getEncoder()`, not the URL-safe alphabet).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` in standard base64 with `=` padding.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::encode;

    /// RFC 4648 §10's vectors, and SkyWalking's documented service id.
    #[test]
    fn encodes_the_rfc_vectors() {
        let cases = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"), ("host-1", "aG9zdC0x")];
        for (plain, encoded) in cases {
            assert_eq!(encode(plain.as_bytes()), encoded, "{plain:?}");
        }
        assert_eq!(encode(&[0xff, 0xfe]), "//4=");
    }
}
