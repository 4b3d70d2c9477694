// SPDX-License-Identifier: MIT OR Apache-2.0
//! Read-ahead for walks: the bytes a walk expects to read next (the next data block of a table
//! scan, lying in the table's mapping), brought into the CPU cache a few lines per step.
//!
//! A walk that asked for a whole block at once, when it opened the block before, issued one
//! prefetch per line in a burst (33-36 for a 4 KiB block stored compressed, 64 uncompressed):
//! more than the CPU has line-fill buffers, so the burst stalled until lines arrived, 3.5% of
//! a forward scan's time and 10% of an uncompressed one's. Two lines per step keep a few in flight and
//! still finish long before the block is needed: a block holds 30-40 entries of 100 bytes,
//! and 64 lines take 32 steps.

/// Bytes fetched per step: two 64-byte lines.
const BYTES_PER_STEP: usize = 128;

/// The part of a memory range not yet prefetched, as addresses (never dereferenced: a
/// prefetch reads nothing the program sees and cannot fault, so the range may even have been
/// unmapped since without harm).
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    next: usize,
    end: usize,
}

impl ReadAhead {
    /// Starts over on `bytes`, or stops when there are none (the next cursor's bytes are not in
    /// memory, or not known).
    pub(crate) fn start(&mut self, bytes: Option<&[u8]>) {
        (self.next, self.end) = match bytes {
            Some(b) => {
                let start = b.as_ptr() as usize;
                (start, start.saturating_add(b.len()))
            }
            None => (0, 0),
        };
    }

    /// One step of the walk: prefetches the next two lines, if any are left.
    #[inline(always)]
    pub(crate) fn step(&mut self) {
        if self.next < self.end {
            prefetch_line(self.next);
            prefetch_line(self.next.wrapping_add(64));
            // Never past `end`, so never wrapping.
            self.next += (self.end - self.next).min(BYTES_PER_STEP);
        }
    }

    /// Bytes not yet prefetched.
    #[cfg(test)]
    pub(crate) fn remaining(&self) -> usize {
        self.end.saturating_sub(self.next)
    }
}

/// Asks the CPU to fetch the cache line holding `address` into every cache level.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn prefetch_line(address: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint: it loads nothing into a register, changes no memory
    // and never faults, whatever the address. SSE, which it needs, is part of every x86-64 CPU.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            std::ptr::without_provenance::<i8>(address),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_through_the_range_two_lines_at_a_time_and_stop_at_its_end() {
        let bytes = vec![0u8; 1000];
        let mut ahead = ReadAhead::default();
        ahead.step(); // nothing to fetch: harmless
        assert_eq!(ahead.remaining(), 0);
        ahead.start(Some(&bytes));
        assert_eq!(ahead.remaining(), 1000);
        for left in [872, 744, 616, 488, 360, 232, 104, 0, 0] {
            ahead.step();
            assert_eq!(ahead.remaining(), left);
        }
        ahead.start(Some(&bytes[..10]));
        assert_eq!(ahead.remaining(), 10);
        ahead.start(None);
        assert_eq!(ahead.remaining(), 0);
    }

    #[test]
    fn a_range_ending_at_the_top_of_the_address_space_does_not_wrap() {
        let mut ahead = ReadAhead {
            next: usize::MAX - 100,
            end: usize::MAX,
        };
        ahead.step();
        assert_eq!(ahead.remaining(), 0);
        ahead.step();
        assert_eq!(ahead.remaining(), 0);
    }
}
