// SPDX-License-Identifier: MIT OR Apache-2.0
//! How keys and values are read from and written as text: UTF-8 text (the default) or
//! lowercase hex (`--hex`), and the escaped form `dump` shows a person.
//!
//! Text mode is strict: bytes that are not UTF-8, or that would break the line format (a tab in
//! a key, a newline anywhere), are an error that says to use `--hex`, never silently mangled
//! output that would not load back.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::error::CliError;

/// Which spelling of bytes a command reads and prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 text, as is.
    Text,
    /// Lowercase hex, two digits a byte.
    Hex,
}

/// Which field of a `key<TAB>value` line a piece of bytes is, for the rules of text lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// A key followed by a tab and a value.
    Key,
    /// A key alone on its line (`--keys-only`).
    LoneKey,
    /// A value, last on its line.
    Value,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Key | Field::LoneKey => "key",
            Field::Value => "value",
        }
    }
}

impl Encoding {
    /// `--hex` or not.
    pub fn new(hex: bool) -> Encoding {
        if hex {
            Encoding::Hex
        } else {
            Encoding::Text
        }
    }

    /// The bytes a command-line argument spells. A bad hex string is a usage error.
    pub fn parse_arg(self, what: &str, arg: &str) -> Result<Vec<u8>, CliError> {
        match self {
            Encoding::Text => Ok(arg.as_bytes().to_vec()),
            Encoding::Hex => unhex(arg.as_bytes())
                .map_err(|e| CliError::Usage(format!("{what} {arg:?} is not hex: {e}"))),
        }
    }

    /// The bytes one field of an input line spells.
    pub fn parse_field(self, field: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Encoding::Text => match std::str::from_utf8(field) {
                Ok(_) => Ok(field.to_vec()),
                Err(e) => Err(format!(
                    "not UTF-8 text (byte {} is invalid); use --hex for binary data",
                    e.valid_up_to() + 1
                )),
            },
            Encoding::Hex => unhex(field),
        }
    }

    /// `bytes` spelled for one field of an output line.
    pub fn line_field(self, bytes: &[u8], field: Field) -> Result<Cow<'_, str>, String> {
        match self {
            Encoding::Hex => Ok(Cow::Owned(hex(bytes))),
            Encoding::Text => {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    format!(
                        "{} {} is not UTF-8 text; use --hex to print binary data",
                        field.name(),
                        shown(bytes)
                    )
                })?;
                let breaks_line =
                    text.contains('\n') || (field == Field::Key && text.contains('\t'));
                if breaks_line {
                    return Err(format!(
                        "{} {} holds a {} and cannot be printed as one text line; use --hex",
                        field.name(),
                        shown(bytes),
                        if text.contains('\n') {
                            "newline"
                        } else {
                            "tab"
                        }
                    ));
                }
                Ok(Cow::Borrowed(text))
            }
        }
    }

    /// `bytes` spelled where any text goes (a JSON string, a lone value): text mode asks only
    /// for UTF-8.
    pub fn any_text(self, bytes: &[u8], field: Field) -> Result<String, String> {
        match self {
            Encoding::Hex => Ok(hex(bytes)),
            Encoding::Text => String::from_utf8(bytes.to_vec()).map_err(|_| {
                format!(
                    "{} {} is not UTF-8 text; use --hex to print binary data",
                    field.name(),
                    shown(bytes)
                )
            }),
        }
    }

    /// `bytes` spelled for a person: escaped text (quoted), or hex.
    pub fn show(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Text => format!("'{}'", escape(bytes)),
            Encoding::Hex => hex(bytes),
        }
    }
}

/// Bytes in an error message: escaped, and cut short when long.
fn shown(bytes: &[u8]) -> String {
    const MAX: usize = 64;
    if bytes.len() <= MAX {
        format!("'{}'", escape(bytes))
    } else {
        format!("'{}'... ({} bytes)", escape(&bytes[..MAX]), bytes.len())
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The bytes a hex string spells (either case).
pub fn unhex(text: &[u8]) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", text.len()));
    }
    let digit = |i: usize| -> Result<u8, String> {
        let c = text[i];
        (c as char)
            .to_digit(16)
            .map(|d| d as u8)
            .ok_or_else(|| format!("{} at position {} is not a hex digit", escape(&[c]), i + 1))
    };
    (0..text.len() / 2)
        .map(|i| Ok(digit(2 * i)? << 4 | digit(2 * i + 1)?))
        .collect()
}

/// Printable ASCII as is (backslash doubled), every other byte as `\xNN`: LevelDB's escaping,
/// unambiguous.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b' '..=b'~' => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(hex(&all).as_bytes()).unwrap(), all);
        assert_eq!(unhex(b"00FFaB").unwrap(), vec![0, 255, 0xab]);
    }

    #[test]
    fn bad_hex_says_where() {
        assert_eq!(unhex(b"abc").unwrap_err(), "odd number of hex digits (3)");
        assert_eq!(
            unhex(b"00zz").unwrap_err(),
            "z at position 3 is not a hex digit"
        );
    }

    #[test]
    fn text_lines_refuse_what_would_not_load_back() {
        let t = Encoding::Text;
        assert_eq!(t.line_field(b"plain", Field::Key).unwrap(), "plain");
        assert_eq!(t.line_field(b"a\tb", Field::Value).unwrap(), "a\tb");
        assert_eq!(t.line_field(b"a\tb", Field::LoneKey).unwrap(), "a\tb");
        assert!(t
            .line_field(b"a\tb", Field::Key)
            .unwrap_err()
            .contains("tab"));
        assert!(t
            .line_field(b"a\nb", Field::Value)
            .unwrap_err()
            .contains("newline"));
        let err = t.line_field(b"\xff\x00", Field::Key).unwrap_err();
        assert_eq!(
            err,
            "key '\\xff\\x00' is not UTF-8 text; use --hex to print binary data"
        );
        assert!(t.parse_field(b"ok\xff").unwrap_err().contains("byte 3"));
    }

    #[test]
    fn escape_is_unambiguous() {
        assert_eq!(escape(b"a\\x41\x00~"), "a\\\\x41\\x00~");
    }
}
