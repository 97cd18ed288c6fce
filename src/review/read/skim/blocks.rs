//! Bytes by the block: one scan of the whole body for control bytes and non-ASCII, 16- and
//! 64-byte loads padded past the end, vector compares that classify a block's bytes, and the bit
//! arithmetic that finds escaped bytes and the inside of strings. Pure functions of the bytes;
//! the walker in [`super`] decides what the bits mean.

use wide::u8x16;
/// What one pass over the whole body tells the reader.
pub(super) struct Bytes {
    /// A byte below 0x20 somewhere.
    pub(super) control: bool,
    /// Every byte below 0x80: then every key is UTF-8 without checking it.
    pub(super) ascii: bool,
}

pub(super) fn scan(body: &[u8]) -> Bytes {
    const CONTROL: u8x16 = u8x16::new([0xe0; 16]);
    let (mut high, mut control) = (u8x16::ZERO, u8x16::ZERO);
    let mut add = |block: &[u8]| {
        let v = u8x16::new(block.try_into().expect("16 bytes"));
        high |= v;
        control |= (v & CONTROL).simd_eq(u8x16::ZERO);
    };
    // Four blocks per step: the loop costs as much as the compares otherwise.
    let mut quads = body.chunks_exact(64);
    for quad in &mut quads {
        quad.chunks_exact(16).for_each(&mut add);
    }
    let mut blocks = quads.remainder().chunks_exact(16);
    blocks.by_ref().for_each(&mut add);
    let mut tail = [b' '; 16];
    tail[..blocks.remainder().len()].copy_from_slice(blocks.remainder());
    add(&tail);
    Bytes { control: control.to_bitmask() != 0, ascii: high.to_bitmask() == 0 }
}

/// The `N` bytes from `i`, padded with zeros past the end of `b` (a zero is neither a quote, a
/// backslash nor in any class of [`Classes`], so the walker takes it for a literal and fails
/// there); `None` from the end on.
#[inline(always)]
pub(super) fn block<const N: usize>(b: &[u8], i: usize) -> Option<[u8; N]> {
    if let Some(block) = b.get(i..i + N) {
        return block.try_into().ok();
    }
    let rest = b.get(i..).filter(|rest| !rest.is_empty())?;
    let mut block = [0; N];
    block[..rest.len()].copy_from_slice(rest);
    Some(block)
}

/// Bit `k` set where byte `k` of `block` is `"`, and where it is `\\`: one vector compare each
/// (SSE2 on x86-64, NEON on aarch64, through `wide`).
#[inline(always)]
pub(super) fn quotes_and_backslashes(block: [u8; 16]) -> (u32, u32) {
    let v = u8x16::new(block);
    (eq(v, b'"'), eq(v, b'\\'))
}

/// Bit `k` set where byte `k` of `v` is `c`.
#[inline(always)]
pub(super) fn eq(v: u8x16, c: u8) -> u32 {
    v.simd_eq(u8x16::splat(c)).to_bitmask()
}

/// The bytes of a 64-byte block by class, bit `k` for byte `k`.
pub(super) struct Classes {
    pub(super) quotes: u64,
    pub(super) backslashes: u64,
    pub(super) spaces: u64,
    /// `{ } [ ] : ,`
    pub(super) structural: u64,
}

impl Classes {
    #[inline(always)]
    pub(super) fn of(block: &[u8; 64]) -> Self {
        let (quotes, backslashes, spaces, structural) = lanes(block, |v| {
            // `[` and `]` are `{` and `}` without the 0x20 bit.
            let folded = v | u8x16::splat(0x20);
            let structural = folded.simd_eq(u8x16::splat(b'{'))
                | folded.simd_eq(u8x16::splat(b'}'))
                | v.simd_eq(u8x16::splat(b':'))
                | v.simd_eq(u8x16::splat(b','));
            (eq(v, b'"'), eq(v, b'\\'), eq(v, b' '), structural.to_bitmask())
        });
        Classes { quotes, backslashes, spaces, structural }
    }
}

/// Masks of a 64-byte block from masks of its four 16-byte lanes.
#[inline(always)]
pub(super) fn lanes<M: LaneMasks>(block: &[u8; 64], masks: impl Fn(u8x16) -> M) -> M::Wide {
    let mut wide = M::Wide::default();
    for (lane, bytes) in block.chunks_exact(16).enumerate() {
        masks(u8x16::new(bytes.try_into().expect("16 bytes"))).widen_into(&mut wide, 16 * lane);
    }
    wide
}

/// A tuple of 16-bit lane masks, widened into the same tuple of 64-bit block masks.
pub(super) trait LaneMasks {
    type Wide: Default;
    fn widen_into(self, wide: &mut Self::Wide, shift: usize);
}

impl LaneMasks for (u32, u32) {
    type Wide = (u64, u64);
    #[inline(always)]
    fn widen_into(self, wide: &mut Self::Wide, shift: usize) {
        wide.0 |= u64::from(self.0) << shift;
        wide.1 |= u64::from(self.1) << shift;
    }
}

impl LaneMasks for (u32, u32, u32, u32) {
    type Wide = (u64, u64, u64, u64);
    #[inline(always)]
    fn widen_into(self, wide: &mut Self::Wide, shift: usize) {
        wide.0 |= u64::from(self.0) << shift;
        wide.1 |= u64::from(self.1) << shift;
        wide.2 |= u64::from(self.2) << shift;
        wide.3 |= u64::from(self.3) << shift;
    }
}

/// The escaped bytes of a block from its backslashes: the byte after a run of backslashes is
/// escaped when the run is odd. `carry` (bit 0) says the block's first byte is escaped by a run
/// that ended the previous block, and is updated for the next block.
#[inline(always)]
pub(super) fn escaped(backslashes: u64, carry: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    if backslashes | *carry == 0 {
        return 0;
    }
    let backslashes = backslashes & !*carry;
    let starts = backslashes & !(backslashes << 1);
    // Adding a run's first bit clears the run and sets the bit after it.
    let (even_runs, _) = backslashes.overflowing_add(starts & EVEN);
    let (odd_runs, odd_out) = backslashes.overflowing_add(starts & !EVEN);
    let escaped = (even_runs & !backslashes & !EVEN) | (odd_runs & !backslashes & EVEN) | *carry;
    *carry = u64::from(odd_out);
    escaped
}

/// Bit `k` set where an odd number of bits of `x` are set at or below `k`.
#[inline(always)]
pub(super) fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

/// The escaped bytes `escapes` of the 64-byte `block` at `at` in `b` are ones JSON allows, and
/// every `\\u` has four hex digits.
pub(super) fn check_escapes(b: &[u8], at: usize, block: &[u8; 64], escapes: u64) -> Option<()> {
    let (valid, unicode) = lanes(block, |v| {
        let simple = [b'"', b'\\', b'/', b'b', b'f', b'n', b'r', b't'].iter().fold(0, |m, &c| m | eq(v, c));
        (simple, eq(v, b'u'))
    });
    let mut unicode = unicode & escapes;
    if escapes & !(valid | unicode) != 0 {
        return None;
    }
    while unicode != 0 {
        let from = at + unicode.trailing_zeros() as usize + 1;
        if !b.get(from..from + 4)?.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        unicode &= unicode - 1;
    }
    Some(())
}

/// The index of the first `"` or `\\` in `b` from `from`, 16 bytes at a time. Inlined: most
/// strings here are keys shorter than one block, where a call costs as much as the search.
#[inline(always)]
pub(super) fn quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        let (quotes, backslashes) = quotes_and_backslashes(block::<16>(b, i)?);
        let stops = quotes | backslashes;
        if stops != 0 {
            return Some(i + stops.trailing_zeros() as usize);
        }
        i += 16;
    }
}
