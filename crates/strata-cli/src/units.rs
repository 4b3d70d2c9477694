// SPDX-License-Identifier: MIT OR Apache-2.0
//! Sizes: parsing `8M` on the command line, printing `1.5 MiB` for a person.

/// Parses a byte count with an optional binary suffix: `4096`, `64K`, `8M`, `1G`.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let (digits, shift) = match text.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&text[..text.len() - 1], 10),
        Some(b'M') => (&text[..text.len() - 1], 20),
        Some(b'G') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size in bytes (such as 4096, 64K, 8M or 1G)"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// `bytes` for a person: `512 B`, `12.3 KiB`, `1.5 MiB`, `2.0 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("8M"), Ok(8 << 20));
        assert!(parse_size("8X").unwrap_err().contains("not a size"));
        assert!(parse_size("").is_err());
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
    }
}
