//! Content digests of payloads: equal bytes, equal digest, so a payload is stored once
//! per run and comparisons can skip byte-equal pairs.

pub const DIGEST_PREFIX: &str = "blake3:";

pub fn content_digest(bytes: &[u8]) -> String {
    // The rayon-parallel hasher pays off only on large payloads.
    let hash = if bytes.len() >= 1 << 20 {
        let mut hasher = blake3::Hasher::new();
        hasher.update_rayon(bytes);
        hasher.finalize()
    } else {
        blake3::hash(bytes)
    };
    format_digest(&hash)
}

/// A finished hash as the digest string stored in runs.
pub fn format_digest(hash: &blake3::Hash) -> String {
    format!("{DIGEST_PREFIX}{}", hash.to_hex())
}
