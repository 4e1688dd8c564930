//! Signed, timestamped tokens in the manner of `Phoenix.Token`: the server hands a page's session
//! to the browser inside the first render and trusts it back on join only if its MAC checks and
//! it is not too old. The payload is signed, not encrypted: the client can read it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;
use std::io::Read;

type HmacSha256 = Hmac<Sha256>;

/// The shortest secret accepted, in bytes: HMAC-SHA256's output size, below which the key is the
/// weak point.
pub(crate) const MIN_SECRET_BYTES: usize = 32;

/// The longest token [`Signer::verify`] reads, in bytes; longer input is refused before any
/// decoding or hashing.
pub(crate) const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Bytes of secret [`Signer::generate`] draws.
const GENERATED_SECRET_BYTES: usize = 64;

/// Bytes of the big-endian issue time at the front of a token's body.
const TIME_BYTES: usize = 8;

/// Bytes of an HMAC-SHA256 tag.
const MAC_BYTES: usize = 32;

/// Why a secret or a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// [`Signer::new`] was given fewer than 32 bytes.
    #[error("the signing secret is {0} bytes; it must be at least 32")]
    SecretTooShort(usize),
    /// The token is not two base64url parts joined by a dot, or its parts are too short.
    #[error("the token is malformed")]
    Malformed,
    /// The token's MAC does not match: it was altered, made with another secret or for another
    /// salt.
    #[error("the token's signature does not match")]
    BadSignature,
    /// The token is genuine but older than the maximum age.
    #[error("the token has expired")]
    Expired,
    /// The token is over 8 KiB, longer than any this server issues.
    #[error("the token is {0} bytes; the limit is 8192")]
    TooLong(usize),
}

/// Signs and verifies tokens with one secret.
///
/// A token is `b64(issued_at || payload) "." b64(mac)`: base64url without padding, `issued_at`
/// the issue time in Unix seconds as 8 big-endian bytes, and `mac` HMAC-SHA256 over the salt's
/// length (4 big-endian bytes), the salt, and the body `issued_at || payload`. The salt keeps a
/// token minted for one purpose from being accepted for another.
///
/// # Examples
///
/// ```
/// use galleon_live::{Signer, TokenError};
///
/// let signer = Signer::new(&[7; 32]).unwrap();
/// let token = signer.sign("live session", b"user 42", 1_000);
/// assert_eq!(signer.verify("live session", &token, 60, 1_030).unwrap(), b"user 42");
/// assert_eq!(signer.verify("other", &token, 60, 1_030), Err(TokenError::BadSignature));
/// assert_eq!(signer.verify("live session", &token, 60, 1_061), Err(TokenError::Expired));
/// ```
#[derive(Clone)]
pub struct Signer {
    /// HMAC state already keyed with the secret; cloned for each token.
    keyed: HmacSha256,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret is left out on purpose: a Debug print must not leak it into logs.
        f.debug_struct("Signer").finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer with `secret`, which must be at least 32 bytes (random, and the same on every
    /// server that verifies the tokens).
    ///
    /// # Errors
    ///
    /// [`TokenError::SecretTooShort`] when `secret` is shorter than 32 bytes.
    pub fn new(secret: &[u8]) -> Result<Signer, TokenError> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(TokenError::SecretTooShort(secret.len()));
        }
        let keyed = HmacSha256::new_from_slice(secret)
            .map_err(|_| TokenError::SecretTooShort(secret.len()))?;
        Ok(Signer { keyed })
    }

    /// A signer with a fresh 64-byte secret from `/dev/urandom`: tokens it signs verify only in
    /// this process, which suits a single server that may forget its sessions on restart.
    ///
    /// # Errors
    ///
    /// The I/O error when `/dev/urandom` cannot be opened or read.
    pub fn generate() -> std::io::Result<Signer> {
        let mut secret = [0u8; GENERATED_SECRET_BYTES];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut secret)?;
        let signer = Signer::new(&secret).map_err(std::io::Error::other);
        secret.fill(0);
        signer
    }

    /// A token carrying `payload`, stamped as issued at `issued_at_unix_s`, valid only for
    /// `salt`.
    pub fn sign(&self, salt: &str, payload: &[u8], issued_at_unix_s: u64) -> String {
        let mut body = Vec::with_capacity(TIME_BYTES + payload.len());
        body.extend_from_slice(&issued_at_unix_s.to_be_bytes());
        body.extend_from_slice(payload);
        let tag = self.mac(salt, &body).finalize().into_bytes();
        let mut token = URL_SAFE_NO_PAD.encode(&body);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(tag, &mut token);
        token
    }

    /// The payload of `token` if it was signed by this secret for `salt` and, at `now_unix_s`,
    /// is at most `max_age_s` seconds old.
    ///
    /// # Errors
    ///
    /// [`TokenError::TooLong`] over 8 KiB, [`TokenError::Malformed`] when it does not parse,
    /// [`TokenError::BadSignature`] when the MAC does not match (checked in constant time), and
    /// [`TokenError::Expired`] when it is too old.
    pub fn verify(
        &self,
        salt: &str,
        token: &str,
        max_age_s: u64,
        now_unix_s: u64,
    ) -> Result<Vec<u8>, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::TooLong(token.len()));
        }
        let (body_b64, tag_b64) = token.split_once('.').ok_or(TokenError::Malformed)?;
        let body = URL_SAFE_NO_PAD
            .decode(body_b64)
            .map_err(|_| TokenError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag_b64)
            .map_err(|_| TokenError::Malformed)?;
        if body.len() < TIME_BYTES || tag.len() != MAC_BYTES {
            return Err(TokenError::Malformed);
        }
        self.mac(salt, &body)
            .verify_slice(&tag)
            .map_err(|_| TokenError::BadSignature)?;
        let (time, payload) = body.split_at(TIME_BYTES);
        let mut issued_at = [0u8; TIME_BYTES];
        issued_at.copy_from_slice(time);
        let issued_at = u64::from_be_bytes(issued_at);
        if now_unix_s > issued_at.saturating_add(max_age_s) {
            return Err(TokenError::Expired);
        }
        Ok(payload.to_vec())
    }

    /// The MAC state after the salt (length-prefixed, so salt and body cannot trade bytes) and
    /// the body.
    fn mac(&self, salt: &str, body: &[u8]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        // A salt over 4 GiB cannot exist in a `str` handed to us in practice; saturate anyway.
        let len = u32::try_from(salt.len()).unwrap_or(u32::MAX);
        mac.update(&len.to_be_bytes());
        mac.update(salt.as_bytes());
        mac.update(body);
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SALT: &str = "galleon live session";

    fn signer() -> Signer {
        Signer::new(b"0123456789abcdef0123456789abcdef").unwrap()
    }

    #[test]
    fn round_trips() {
        let s = signer();
        for payload in [
            &b""[..],
            b"x",
            b"{\"view\":\"Counter\",\"id\":\"phx-1\"}",
            &[0, 255, 10],
        ] {
            let token = s.sign(SALT, payload, 1_700_000_000);
            assert_eq!(
                s.verify(SALT, &token, 60, 1_700_000_030).unwrap(),
                payload,
                "{token}"
            );
        }
    }

    #[test]
    fn tokens_are_url_safe_and_deterministic() {
        let s = signer();
        let token = s.sign(SALT, &[0xfb; 40], 5);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'),
            "{token}"
        );
        assert_eq!(token, s.sign(SALT, &[0xfb; 40], 5));
        assert_ne!(token, s.sign(SALT, &[0xfb; 40], 6));
    }

    #[test]
    fn short_secrets_are_refused() {
        assert_eq!(
            Signer::new(&[1; 31]).unwrap_err(),
            TokenError::SecretTooShort(31)
        );
        assert_eq!(Signer::new(b"").unwrap_err(), TokenError::SecretTooShort(0));
        assert!(Signer::new(&[1; 32]).is_ok());
        assert!(Signer::new(&[1; 200]).is_ok());
    }

    #[test]
    fn another_secret_is_refused() {
        let token = signer().sign(SALT, b"p", 10);
        let other = Signer::new(b"0123456789abcdef0123456789abcdeF").unwrap();
        assert_eq!(
            other.verify(SALT, &token, 60, 10),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn another_salt_is_refused() {
        let s = signer();
        let token = s.sign(SALT, b"p", 10);
        for salt in ["", "galleon live sessio", "galleon live session ", "other"] {
            assert_eq!(
                s.verify(salt, &token, 60, 10),
                Err(TokenError::BadSignature),
                "{salt:?}"
            );
        }
    }

    #[test]
    fn salt_and_body_cannot_trade_bytes() {
        // Without the length prefix, salt "ab" + body "c..." would equal salt "a" + body "bc...".
        let s = signer();
        let token = s.sign("ab", b"", 0);
        let (body, tag) = token.split_once('.').unwrap();
        let mut shifted = b"b".to_vec();
        shifted.extend(URL_SAFE_NO_PAD.decode(body).unwrap());
        let forged = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(shifted));
        assert!(s.verify("a", &forged, u64::MAX, 0).is_err());
    }

    #[test]
    fn every_changed_character_is_refused() {
        let s = signer();
        let token = s.sign(SALT, b"sixteen byte pay", 1_000);
        assert!(s.verify(SALT, &token, 60, 1_000).is_ok());
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ ";
        let mut tried = 0;
        for i in 0..token.len() {
            for &c in alphabet {
                let mut bytes = token.clone().into_bytes();
                if bytes[i] == c {
                    continue;
                }
                bytes[i] = c;
                let altered = String::from_utf8(bytes).unwrap();
                assert!(s.verify(SALT, &altered, 60, 1_000).is_err(), "{altered}");
                tried += 1;
            }
        }
        assert!(tried > 5_000, "{tried}");
    }

    #[test]
    fn every_bit_flipped_is_refused() {
        let s = signer();
        let token = s.sign(SALT, b"payload", 1_000);
        for i in 0..token.len() {
            for bit in 0..7 {
                let mut bytes = token.clone().into_bytes();
                bytes[i] ^= 1 << bit;
                let altered = String::from_utf8(bytes).unwrap();
                assert!(s.verify(SALT, &altered, 60, 1_000).is_err(), "{altered}");
            }
        }
    }

    #[test]
    fn expiry_is_inclusive_of_the_maximum_age() {
        let s = signer();
        let token = s.sign(SALT, b"p", 1_000);
        assert!(s.verify(SALT, &token, 60, 1_060).is_ok());
        assert_eq!(s.verify(SALT, &token, 60, 1_061), Err(TokenError::Expired));
        assert_eq!(s.verify(SALT, &token, 0, 1_001), Err(TokenError::Expired));
        assert!(s.verify(SALT, &token, 0, 1_000).is_ok());
        // No overflow when issued near the end of time with a huge maximum age.
        let late = s.sign(SALT, b"p", u64::MAX - 1);
        assert!(s.verify(SALT, &late, u64::MAX, u64::MAX).is_ok());
    }

    #[test]
    fn a_forged_token_is_refused_before_its_age_is_read() {
        // An expired token with a bad MAC says BadSignature: nothing unsigned is trusted.
        let s = signer();
        let token = s.sign(SALT, b"p", 0);
        let other = Signer::new(&[9; 32]).unwrap();
        assert_eq!(
            other.verify(SALT, &token, 1, 1_000),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn garbage_and_truncations_are_refused() {
        let s = signer();
        for bad in [
            "",
            ".",
            "abc",
            "abc.",
            ".abc",
            "a.b.c",
            "!!!.???",
            "AAAAAAAAAAA=.AAAA",
        ] {
            assert_eq!(
                s.verify(SALT, bad, 60, 0),
                Err(TokenError::Malformed),
                "{bad:?}"
            );
        }
        let token = s.sign(SALT, b"payload", 1_000);
        for end in 0..token.len() {
            assert!(s.verify(SALT, &token[..end], 60, 1_000).is_err(), "{end}");
        }
        // A body shorter than the 8-byte time, however well signed, is malformed.
        let (_, tag) = token.split_once('.').unwrap();
        let short = format!("{}.{tag}", URL_SAFE_NO_PAD.encode([0u8; 7]));
        assert_eq!(s.verify(SALT, &short, 60, 0), Err(TokenError::Malformed));
    }

    #[test]
    fn overlong_input_is_refused_before_decoding() {
        let s = signer();
        let long = s.sign(SALT, &[1; MAX_TOKEN_BYTES], 0);
        assert_eq!(
            s.verify(SALT, &long, 60, 0),
            Err(TokenError::TooLong(long.len()))
        );
        let garbage = "!".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(
            s.verify(SALT, &garbage, 60, 0),
            Err(TokenError::TooLong(MAX_TOKEN_BYTES + 1))
        );
        // At the limit it is read, and here it is garbage.
        let at = "!".repeat(MAX_TOKEN_BYTES);
        assert_eq!(s.verify(SALT, &at, 60, 0), Err(TokenError::Malformed));
    }

    #[test]
    fn debug_does_not_show_the_secret() {
        let secret = b"this is the secret, keep it out";
        let s = Signer::new(&[secret.as_slice(), b"!"].concat()).unwrap();
        let shown = format!("{s:?} {s:#?}");
        assert_eq!(format!("{s:?}"), "Signer { .. }");
        assert!(!shown.contains("secret"), "{shown}");
    }

    #[test]
    fn generated_signers_differ() {
        let a = Signer::generate().unwrap();
        let b = Signer::generate().unwrap();
        let token = a.sign(SALT, b"p", 0);
        assert!(a.verify(SALT, &token, 60, 0).is_ok());
        assert_eq!(b.verify(SALT, &token, 60, 0), Err(TokenError::BadSignature));
    }

    #[test]
    fn errors_read_well() {
        assert_eq!(
            TokenError::SecretTooShort(3).to_string(),
            "the signing secret is 3 bytes; it must be at least 32"
        );
        assert_eq!(
            TokenError::TooLong(9000).to_string(),
            "the token is 9000 bytes; the limit is 8192"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_strings_never_panic_nor_verify(text in ".*", salt in ".{0,8}") {
            prop_assert!(signer().verify(&salt, &text, u64::MAX, 0).is_err());
        }

        #[test]
        fn arbitrary_base64_pairs_never_verify(
            body in prop::collection::vec(any::<u8>(), 0..64),
            tag in prop::collection::vec(any::<u8>(), 0..40),
        ) {
            let text = format!("{}.{}", URL_SAFE_NO_PAD.encode(body), URL_SAFE_NO_PAD.encode(tag));
            prop_assert!(signer().verify(SALT, &text, u64::MAX, 0).is_err());
        }

        #[test]
        fn signed_payloads_round_trip(
            payload in prop::collection::vec(any::<u8>(), 0..256),
            salt in ".{0,16}",
            issued_at in any::<u64>(),
        ) {
            let s = signer();
            let token = s.sign(&salt, &payload, issued_at);
            prop_assert_eq!(s.verify(&salt, &token, 0, issued_at), Ok(payload));
        }
    }
}
