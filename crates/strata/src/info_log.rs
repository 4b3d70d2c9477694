// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`InfoLog`]: the human-readable `LOG` file, in LevelDB's line format
//! `YYYY/MM/DD-HH:MM:SS.uuuuuu <thread> <message>`. Failures to write it are ignored: it is a
//! diagnostic, never needed to read the database.

use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::env::{Env, WritableFile};
use crate::filename;

/// The info log of one open database. Locking: one mutex around the file.
pub(crate) struct InfoLog {
    file: Mutex<Option<Box<dyn WritableFile>>>,
}

impl InfoLog {
    /// Starts a new `LOG` in `dir`, keeping the previous one as `LOG.old`.
    pub(crate) fn open(env: &dyn Env, dir: &Path) -> InfoLog {
        let log = filename::info_log_file(dir);
        let _ = env.rename(&log, &filename::old_info_log_file(dir));
        InfoLog {
            file: Mutex::new(env.new_writable_file(&log).ok()),
        }
    }

    /// A log that writes nowhere (read-only opens).
    pub(crate) fn disabled() -> InfoLog {
        InfoLog {
            file: Mutex::new(None),
        }
    }

    /// Appends one line.
    pub(crate) fn log(&self, message: std::fmt::Arguments<'_>) {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = file.as_mut() {
            let line = format!(
                "{} {:?} {message}\n",
                timestamp(),
                std::thread::current().id()
            );
            if f.append(line.as_bytes()).and_then(|()| f.flush()).is_err() {
                *file = None;
            }
        }
    }
}

/// The current UTC time as `YYYY/MM/DD-HH:MM:SS.uuuuuu`.
fn timestamp() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}/{m:02}/{d:02}-{:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_micros()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_right() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_778), (2026, 11, 21));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
