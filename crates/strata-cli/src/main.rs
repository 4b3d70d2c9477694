// SPDX-License-Identifier: MIT OR Apache-2.0
//! `strata`: look into, fill, check and repair a strata (or LevelDB) database from the shell.
//!
//! Every command is one module under `commands/`. Commands that read (get, scan, export,
//! stats, check, dump) open the database read-only: they write no file, start no compaction and
//! create no log. Errors are one line on stderr; the exit codes are listed in `error.rs` and in
//! `--help`.

mod commands;
mod encoding;
mod error;
mod units;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use strata::filter::BloomFilterPolicy;
use strata::{Compression, Options};

use crate::encoding::Encoding;
use crate::error::CliError;

/// Look into, fill, check and repair strata and LevelDB databases.
///
/// Keys and values are UTF-8 text unless --hex is given; then they are read and printed as
/// lowercase hex, so any bytes round-trip. Commands that read never change the database.
/// Exit codes: 0 success (check: sound); 1 the command failed (not a database, locked by
/// another process, a bad input line); 2 usage error; 3 damage found or met (corrupt data, from
/// any command); 4 not found (get of a key the database does not hold); 5 I/O error (a file
/// could not be opened, read or written).
#[derive(Parser, Debug)]
#[command(name = "strata", version, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the value of KEY; exit 4 if the database does not hold it.
    Get {
        /// The database directory.
        db: PathBuf,
        /// The key.
        key: String,
        #[command(flatten)]
        read: ReadFlags,
    },
    /// Set KEY to VALUE.
    Put {
        /// The database directory.
        db: PathBuf,
        /// The key.
        key: String,
        /// The value.
        value: String,
        #[command(flatten)]
        write: WriteFlags,
    },
    /// Delete KEY (not an error if it is absent).
    Delete {
        /// The database directory.
        db: PathBuf,
        /// The key.
        key: String,
        #[command(flatten)]
        write: WriteFlags,
    },
    /// Print entries in key order, as key<TAB>value lines.
    Scan(commands::read::ScanArgs),
    /// Write key<TAB>value lines from FILE (or stdin) into the database, in batches. At a bad
    /// line or a read error, the lines before it are written and the error names the line and
    /// how many entries are written.
    Load {
        /// The database directory.
        db: PathBuf,
        /// The input; standard input when absent or "-".
        file: Option<PathBuf>,
        /// Entries per write batch.
        #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
        #[command(flatten)]
        write: WriteFlags,
    },
    /// Print every entry as key<TAB>value lines in key order, to FILE or stdout.
    Export {
        /// The database directory.
        db: PathBuf,
        /// The output file, replaced only by a whole export (a failed export leaves FILE as it
        /// was); standard output when absent or "-".
        file: Option<PathBuf>,
        #[command(flatten)]
        read: ReadFlags,
    },
    /// Describe the database: levels, tables, sizes, entries, compression, LevelDB's
    /// properties. Reads every table.
    Stats {
        /// The database directory.
        db: PathBuf,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        read: ReadFlags,
    },
    /// Compact the whole database, or the tables that overlap [--from, --to).
    Compact {
        /// The database directory.
        db: PathBuf,
        /// The first key of the range.
        #[arg(long, value_name = "KEY")]
        from: Option<String>,
        /// The end of the range (exclusive).
        #[arg(long, value_name = "KEY")]
        to: Option<String>,
        #[command(flatten)]
        write: WriteFlags,
    },
    /// Read every block of every file, verify every checksum, list what is damaged. Exits 0
    /// when the database is sound, 3 when damage is found.
    Check {
        /// The database directory.
        db: PathBuf,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
        /// Bits per key of the bloom filters the tables were written with, if any.
        #[arg(long, value_name = "N")]
        bloom_bits: Option<usize>,
    },
    /// Rebuild a database that will not open, keeping every record that can be read; what
    /// cannot be read is moved into DB/lost/.
    Repair {
        /// The database directory.
        db: PathBuf,
        #[command(flatten)]
        write: WriteFlags,
    },
    /// Copy the database into DEST, a new or empty directory (its parent must exist), as a
    /// database that opens at once: tables and blob files are hard-linked where DEST is on the
    /// same file system, and copied otherwise. The database is opened read-only, so nothing in
    /// DB changes; a process that has it open for writing makes the command fail (that process
    /// can call `Db::checkpoint` itself).
    Checkpoint {
        /// The database directory.
        db: PathBuf,
        /// The directory to create the copy in.
        dest: PathBuf,
    },
    /// Print the records of one file: a .log, a MANIFEST, a .ldb or .sst table, CURRENT. Exits
    /// 3 when damage is found, 5 when the file cannot be read.
    Dump(commands::dump::DumpArgs),
    /// Delete the database: every file of its own in DB, then DB itself if it is left empty.
    /// A directory that is not a database (no CURRENT naming a MANIFEST that reads) is refused,
    /// and nothing in it is deleted.
    Destroy {
        /// The database directory.
        db: PathBuf,
    },
}

/// Options of commands that only read.
#[derive(Args, Debug, Clone)]
struct ReadFlags {
    /// Read and print keys and values as lowercase hex.
    #[arg(long)]
    hex: bool,
    /// Block cache size, in bytes (suffixes K, M, G: 8M).
    #[arg(long, value_name = "BYTES", value_parser = units::parse_size)]
    cache_size: Option<usize>,
    /// Bits per key of the bloom filters the tables were written with, to use them.
    #[arg(long, value_name = "N")]
    bloom_bits: Option<usize>,
}

/// Options of commands that write.
#[derive(Args, Debug, Clone)]
struct WriteFlags {
    /// Read keys and values as lowercase hex.
    #[arg(long)]
    hex: bool,
    /// Create the database if it does not exist.
    #[arg(long)]
    create: bool,
    /// Sync every write (every batch for load) to disk before going on.
    #[arg(long)]
    sync: bool,
    /// Write new tables without Snappy compression.
    #[arg(long)]
    no_compression: bool,
    /// Write bloom filters with N bits per key into new tables (and use them).
    #[arg(long, value_name = "N")]
    bloom_bits: Option<usize>,
    /// Block cache size, in bytes (suffixes K, M, G: 8M).
    #[arg(long, value_name = "BYTES", value_parser = units::parse_size)]
    cache_size: Option<usize>,
}

impl ReadFlags {
    fn options(&self) -> Options {
        database_options(false, false, self.bloom_bits, self.cache_size)
    }
    fn encoding(&self) -> Encoding {
        Encoding::new(self.hex)
    }
}

impl WriteFlags {
    fn options(&self) -> Options {
        database_options(
            self.create,
            self.no_compression,
            self.bloom_bits,
            self.cache_size,
        )
    }
    fn encoding(&self) -> Encoding {
        Encoding::new(self.hex)
    }
}

fn database_options(
    create: bool,
    no_compression: bool,
    bloom_bits: Option<usize>,
    cache_size: Option<usize>,
) -> Options {
    let mut options = Options {
        create_if_missing: create,
        ..Options::default()
    };
    if no_compression {
        options.compression = Compression::None;
    }
    if let Some(bits) = bloom_bits {
        options.filter_policy = Some(Arc::new(BloomFilterPolicy::new(bits)));
    }
    if let Some(bytes) = cache_size {
        options.block_cache_capacity = bytes;
    }
    options
}

fn run(command: Command) -> Result<ExitCode, CliError> {
    use commands::*;
    match command {
        Command::Get { db, key, read } => read::get(&db, &key, &read),
        Command::Put {
            db,
            key,
            value,
            write,
        } => write::put(&db, &key, &value, &write),
        Command::Delete { db, key, write } => write::delete(&db, &key, &write),
        Command::Scan(args) => read::scan(&args),
        Command::Load {
            db,
            file,
            batch,
            write,
        } => write::load(&db, file.as_deref(), batch as usize, &write),
        Command::Export { db, file, read } => read::export(&db, file.as_deref(), &read),
        Command::Stats { db, json, read } => inspect::stats(&db, json, &read),
        Command::Compact {
            db,
            from,
            to,
            write,
        } => write::compact(&db, from.as_deref(), to.as_deref(), &write),
        Command::Check {
            db,
            json,
            bloom_bits,
        } => inspect::check(&db, json, bloom_bits),
        Command::Repair { db, write } => admin::repair(&db, &write),
        Command::Checkpoint { db, dest } => admin::checkpoint(&db, &dest),
        Command::Dump(args) => dump::dump(&args),
        Command::Destroy { db } => admin::destroy(&db),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::from(e.exit_code() as u8);
            }
            return CliError::Usage(error::one_line(&e.render().to_string())).report();
        }
    };
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}
