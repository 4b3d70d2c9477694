// SPDX-License-Identifier: MIT OR Apache-2.0
//! `strata`: the command-line tool. Its commands arrive with issue #5, on top of the database
//! layer (issue #3).

fn main() {
    eprintln!("strata: no commands yet; the command-line tool is built in issue #5");
    std::process::exit(2);
}
