//! CRC-64/Jones, the checksum of RDB files and DUMP payloads (Redis's
//! `crc64.c`): polynomial 0xad93d23594c935a9, reflected, initial value 0,
//! no final xor. Check value: `crc64(0, b"123456789") == 0xe9c6d914c4b8d9ca`.
//!
//! Byte-at-a-time table lookup: saving is bounded by the disk and the
//! serializer far more than by this (a slice-by-8 variant is future work).

const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 bit-reflected

const fn table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u64; 256] = table();

/// Continue a CRC over `data` (start with 0).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = TABLE[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        // Incremental equals one pass.
        assert_eq!(crc64(crc64(0, b"1234"), b"56789"), 0xe9c6_d914_c4b8_d9ca);
    }
}
