//! The keyspace hash: SipHash-1-2 over the key bytes with a random 128-bit
//! key per database, as Redis's dict uses (`siphash.c`, SipHash-1-2).
//!
//! Why SipHash and not a faster non-cryptographic hash: key names come from
//! clients, and with a hash whose collisions can be found without the key
//! (multiply-and-fold hashes have had seed-independent collision attacks)
//! a client could pile keys into one probe sequence and make every lookup
//! O(n) — HashDoS. SipHash with a secret key is a PRF, so collisions
//! cannot be aimed. The 1-2 variant (one compression round per word, two
//! finalization rounds) is Redis's trade-off: weaker than the 2-4 of the
//! paper, still not practically attackable, about half the cost. What made
//! the keyspace hash slow here was less SipHash itself than std's
//! streaming `Hasher` (buffering, a length prefix written as a second
//! message); this one-shot version hashes a 16-byte key in ~60
//! instructions.

/// SipHash-c-d of `msg` under the key `(k0, k1)`.
fn siphash<const C: usize, const D: usize>(k0: u64, k1: u64, msg: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut words = msg.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        compress::<C>(&mut v, u64::from_le_bytes(b));
    }
    // The last word: the remaining bytes and the length's low byte on top.
    let last = tail_word(words.remainder()) | ((msg.len() as u64) << 56);
    compress::<C>(&mut v, last);
    v[2] ^= 0xff;
    for _ in 0..D {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// The 0..=7 bytes of `rest` as a little-endian word (zero-padded), read
/// as at most two overlapping loads rather than a variable-length copy
/// (which costs a `memcpy` call per key).
#[inline(always)]
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    let load4 = |i: usize| {
        rest.get(i..i + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map_or(0, |w| u64::from(u32::from_le_bytes(w)))
    };
    if n >= 4 {
        // Bytes 0..4, and n-4..n shifted into place: the overlap ORs
        // equal bytes.
        load4(0) | (load4(n - 4) << (8 * (n - 4)))
    } else {
        let mut w = 0;
        for (i, &b) in rest.iter().enumerate() {
            w |= u64::from(b) << (8 * i);
        }
        w
    }
}

#[inline(always)]
fn compress<const C: usize>(v: &mut [u64; 4], m: u64) {
    v[3] ^= m;
    for _ in 0..C {
        round(v);
    }
    v[0] ^= m;
}

#[inline(always)]
fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// A keyed SipHash-1-2.
#[derive(Clone, Copy, Debug)]
pub struct KeyHasher {
    k0: u64,
    k1: u64,
}

impl KeyHasher {
    /// A hasher with a random key: drawn from std's `RandomState`, whose
    /// keys come from the OS's random source once per thread.
    pub fn random() -> KeyHasher {
        use std::hash::BuildHasher;
        let rs = std::collections::hash_map::RandomState::new();
        KeyHasher {
            k0: rs.hash_one(0u8),
            k1: rs.hash_one(1u8),
        }
    }

    pub fn with_key(k0: u64, k1: u64) -> KeyHasher {
        KeyHasher { k0, k1 }
    }

    pub fn hash(&self, bytes: &[u8]) -> u64 {
        siphash::<1, 2>(self.k0, self.k1, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference vectors of the SipHash paper (SipHash-2-4, key
    /// 00..0f): the empty message and the paper's 15-byte example.
    #[test]
    fn siphash24_reference_vectors() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(siphash::<2, 4>(k0, k1, b""), 0x726f_db47_dd0e_0e31);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash::<2, 4>(k0, k1, &msg), 0xa129_ca61_49be_45e5);
    }

    /// The tail word equals the zero-padded copy it replaces, for every
    /// length.
    #[test]
    fn tail_word_is_the_padded_bytes() {
        let data: Vec<u8> = (1..=8).map(|i| i * 17).collect();
        for n in 0..8 {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&data[..n]);
            assert_eq!(tail_word(&data[..n]), u64::from_le_bytes(b), "length {n}");
        }
    }

    #[test]
    fn keys_and_lengths_change_the_hash() {
        let h = KeyHasher::with_key(1, 2);
        assert_ne!(h.hash(b"a"), h.hash(b"a\0"));
        assert_ne!(h.hash(b""), h.hash(b"\0"));
        assert_ne!(h.hash(b"key"), KeyHasher::with_key(1, 3).hash(b"key"));
        assert_eq!(h.hash(b"key:__rand_int__"), h.hash(b"key:__rand_int__"));
    }
}
