//! The seed's CPU jobs (seed 001, "Erlang Dirty Scheduler Overhead"): sealing `N` bytes with
//! XChaCha20-Poly1305 (libsodium's `secretbox` case, whose cost grows with `N`) and an Argon2id
//! password hash (a job of many milliseconds). `galleon serve` answers them at `/seal?bytes=N`
//! and `/hash?cost=N`, through the offload pool, to show where moving work off the request
//! workers pays and where the hop costs more than the job.

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// Default most bytes `/seal` takes: 4 MiB, four times the seed's largest case (1 MB).
pub const DEFAULT_MAX_SEAL_BYTES: usize = 4 * 1024 * 1024;

/// Largest `--max-seal-bytes`: 256 MiB (a request's job holds the plaintext and the box).
pub const MAX_SEAL_BYTES: usize = 256 * 1024 * 1024;

/// Default most passes `/hash` takes: 16 (each pass over 8 MiB takes ~10-20 ms here).
pub const DEFAULT_MAX_HASH_COST: u32 = 16;

/// Largest `--max-hash-cost`.
pub const MAX_HASH_COST: u32 = 1000;

/// Argon2id memory per hash, in KiB: 8 MiB, so a few concurrent hashes stay small.
const HASH_MEMORY_KIB: u32 = 8 * 1024;

/// The bounds of `/seal` and `/hash` (flags `--max-seal-bytes`, `--max-hash-cost`,
/// `--max-heavy-requests`).
#[derive(Debug, Clone, Copy)]
pub struct WorkLimits {
    /// Most bytes one `/seal` request seals.
    pub max_seal_bytes: usize,
    /// Most Argon2id passes one `/hash` request runs.
    pub max_hash_cost: u32,
    /// Most `/seal` requests, and most `/hash` requests, in flight at once; past it a request
    /// is answered 503 with `retry-after`.
    pub max_in_flight: usize,
}

impl Default for WorkLimits {
    fn default() -> Self {
        WorkLimits {
            max_seal_bytes: DEFAULT_MAX_SEAL_BYTES,
            max_hash_cost: DEFAULT_MAX_HASH_COST,
            max_in_flight: 4,
        }
    }
}

/// The key every `/seal` uses: fixed, because the example shows the cost of sealing, not key
/// management.
const KEY: [u8; 32] = *b"galleon seed 001 secretbox key!!";

/// `bytes` bytes of a fixed pattern sealed with XChaCha20-Poly1305 under a nonce made from
/// `counter`: the ciphertext followed by the 16-byte tag (libsodium's `secretbox` layout, tag
/// last). The plaintext is built here so the job's cost is all of the work for `bytes`.
pub fn seal(bytes: usize, counter: u64) -> Vec<u8> {
    let mut buf: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let mut nonce = [0u8; 24];
    nonce[..8].copy_from_slice(&counter.to_le_bytes());
    let cipher = XChaCha20Poly1305::new(&KEY.into());
    let tag = cipher
        .encrypt_in_place_detached(XNonce::from_slice(&nonce), b"", &mut buf)
        .expect("a buffer under 256 GiB always seals");
    buf.extend_from_slice(&tag);
    buf
}

/// An Argon2id hash (8 MiB, `cost` passes, one lane) of a fixed password, as 32 bytes.
pub fn hash(cost: u32) -> [u8; 32] {
    let params = argon2::Params::new(HASH_MEMORY_KIB, cost.max(1), 1, Some(32))
        .expect("fixed memory and output sizes are valid");
    let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    let mut out = [0u8; 32];
    argon
        .hash_password_into(b"correct horse battery staple", b"galleon-salt", &mut out)
        .expect("fixed password and salt lengths are valid");
    out
}

/// `?bytes=N` of `/seal`: an integer in `0..=max`, or the message a 400 carries.
pub fn seal_bytes(value: Option<&str>, max: usize) -> Result<usize, String> {
    let v = value.ok_or("bytes: required (e.g. /seal?bytes=8192)")?;
    match v.parse::<usize>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("bytes: expected an integer from 0 to {max}")),
    }
}

/// `?cost=N` of `/hash`: an integer in `1..=max` (1 without the parameter), or a 400's message.
pub fn hash_cost(value: Option<&str>, max: u32) -> Result<u32, String> {
    let Some(v) = value else { return Ok(1) };
    match v.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("cost: expected an integer from 1 to {max}")),
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chacha20poly1305::aead::Aead;

    #[test]
    fn a_sealed_box_opens_to_the_pattern_and_tampering_is_caught() {
        let sealed = seal(1000, 7);
        assert_eq!(sealed.len(), 1000 + 16);
        let cipher = XChaCha20Poly1305::new(&KEY.into());
        let mut nonce = [0u8; 24];
        nonce[..8].copy_from_slice(&7u64.to_le_bytes());
        let opened = cipher
            .decrypt(XNonce::from_slice(&nonce), &sealed[..])
            .unwrap();
        assert!(
            opened
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i % 251) as u8)
        );
        let mut bad = sealed.clone();
        bad[3] ^= 1;
        assert!(
            cipher
                .decrypt(XNonce::from_slice(&nonce), &bad[..])
                .is_err()
        );
        // Another counter, another nonce: another box.
        assert_ne!(seal(1000, 8), sealed);
        assert_eq!(seal(0, 1).len(), 16);
    }

    #[test]
    fn hashes_are_deterministic_and_depend_on_the_cost() {
        assert_eq!(hash(1), hash(1));
        assert_ne!(hash(1), hash(2));
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }

    #[test]
    fn parameters_are_checked_with_a_message() {
        assert_eq!(seal_bytes(Some("8192"), 10_000), Ok(8192));
        assert_eq!(seal_bytes(Some("0"), 10_000), Ok(0));
        for bad in ["", "-1", "1e3", "10001", "99999999999999999999999", " 1"] {
            let e = seal_bytes(Some(bad), 10_000).unwrap_err();
            assert!(e.contains("0 to 10000"), "{bad:?}: {e}");
        }
        assert!(seal_bytes(None, 10).unwrap_err().contains("required"));
        assert_eq!(hash_cost(None, 4), Ok(1));
        assert_eq!(hash_cost(Some("4"), 4), Ok(4));
        for bad in ["0", "5", "x", "-1"] {
            assert!(hash_cost(Some(bad), 4).unwrap_err().contains("1 to 4"));
        }
    }
}
