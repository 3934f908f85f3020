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

/// The bytes of standard or URL-safe base64, padding optional (proto3 JSON accepts both
/// alphabets; SkyWalking's ids use the standard one); none when it is not base64.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let digits = text.trim_end_matches('=');
    if text.len() - digits.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in digits.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single leftover digit carries fewer than 8 bits: not a valid encoding.
    (bits < 6).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn decodes_what_it_encodes_in_either_alphabet() {
        for plain in [&b""[..], b"f", b"fo", b"foo", b"foob", &[0xff, 0xfe, 0xfd]] {
            assert_eq!(decode(&encode(plain)).as_deref(), Some(plain));
        }
        assert_eq!(decode("__4").as_deref(), Some(&[0xff, 0xfe][..]), "URL-safe, unpadded");
        for bad in ["A", "Zg===", "!!", "Zm9v YQ"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

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
