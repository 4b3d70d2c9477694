// SPDX-License-Identifier: MIT OR Apache-2.0
//! The record log: the physical format shared by write-ahead logs (`NNNNNN.log`) and MANIFESTs.
//!
//! A log is a sequence of 32 KiB blocks. Each logical record is cut into fragments that never
//! cross a block boundary; each fragment is a *physical record*:
//!
//! ```text
//! +---------+-----------+-----------+--- ... ---+
//! | CRC (4) | Length (2)| Type (1)  | Payload   |
//! +---------+-----------+-----------+--- ... ---+
//! CRC    = mask(crc32c(type ‖ payload)), u32 little-endian
//! Length = payload length, u16 little-endian
//! Type   = FULL (1) | FIRST (2) | MIDDLE (3) | LAST (4); 0 is reserved for preallocated space
//! ```
//!
//! A header never starts in the last 6 bytes of a block: those bytes are zero-filled (the
//! *trailer*), so a reader can skip them. When exactly 7 bytes remain, the writer emits an empty
//! fragment there.

mod damage;
mod reader;
mod writer;

pub use reader::{tail_damage, LogCorruption, LogReader, ReadMode};
pub use writer::LogWriter;

/// The size of a log block.
pub const BLOCK_SIZE: usize = 32 * 1024;
/// The size of a physical record header.
pub const HEADER_SIZE: usize = 7;

/// The type byte of a physical record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum RecordType {
    /// Reserved for preallocated files; a zero header ends the block.
    Zero = 0,
    Full = 1,
    First = 2,
    Middle = 3,
    Last = 4,
}

impl RecordType {
    pub(crate) fn from_byte(b: u8) -> Option<RecordType> {
        Some(match b {
            0 => RecordType::Zero,
            1 => RecordType::Full,
            2 => RecordType::First,
            3 => RecordType::Middle,
            4 => RecordType::Last,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
