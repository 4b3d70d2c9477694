// SPDX-License-Identifier: MIT OR Apache-2.0
//! The C API seen from C: programs in `tests/c/` compiled with `cc` against the libstrata_c
//! this test build produced (in the target directory's `deps/`), run, and checked.
//!
//! Needs `cc`. The checks against Debian's LevelDB 1.23 (`libleveldb-dev`: its header and
//! `-lleveldb`) and under `valgrind` are skipped, saying so, when those are not installed (a
//! fresh machine before `scripts/install-peers.sh`), unless `STRATA_REQUIRE_PEERS` is set, as
//! CI sets it: then a missing one fails the test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Debian's LevelDB 1.23 header, the contract.
const LEVELDB_HEADER: &str = "/usr/include/leveldb/c.h";

/// The crate's directory.
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding the libstrata_c.so and libstrata_c.a of this build. Cargo writes
/// them beside the test executable, in `<target>/<profile>/deps/`, when it builds the library
/// for the tests; it copies them up to `<target>/<profile>/` only for `cargo build`, so the
/// copies there may be older than the code under test and are not used.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe
        .parent()
        .expect("the test executable's directory")
        .to_path_buf();
    assert!(
        dir.join("libstrata_c.so").exists() && dir.join("libstrata_c.a").exists(),
        "libstrata_c.so/.a not found beside the test executable, in {}",
        dir.display()
    );
    dir
}

/// Runs `cmd`, failing the test with its output if it does not succeed.
///
/// `LD_LIBRARY_PATH` is removed: cargo sets it to directories that hold older copies of
/// libstrata_c.so (`<target>/<profile>/`), and it would win over the programs' rpath.
fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// How a test program is linked.
enum Link {
    /// libstrata_c.so, found at run time through an rpath.
    StrataShared,
    /// libstrata_c.a and the system libraries Rust's standard library needs.
    StrataStatic,
    /// Debian's libleveldb.
    LevelDb,
}

/// Compiles `source` (with extra `cc` flags) into `out`, linked as `link` says.
fn compile(source: &Path, out: &Path, flags: &[&str], link: Link) {
    let mut cc = Command::new("cc");
    cc.args(["-Wall", "-Wextra", "-Werror", "-g", "-O1", "-pthread"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .args(flags)
        .arg(source)
        .arg("-o")
        .arg(out);
    match link {
        Link::StrataShared => {
            let lib = lib_dir();
            cc.arg("-L")
                .arg(&lib)
                .arg("-lstrata_c")
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                // RPATH rather than RUNPATH: searched before LD_LIBRARY_PATH.
                .arg("-Wl,--disable-new-dtags");
        }
        Link::StrataStatic => {
            cc.arg(lib_dir().join("libstrata_c.a")).args([
                "-lgcc_s",
                "-lutil",
                "-lrt",
                "-lpthread",
                "-lm",
                "-ldl",
                "-lc",
            ]);
        }
        Link::LevelDb => {
            cc.arg("-lleveldb");
        }
    }
    run_ok(&mut cc);
}

/// The functions a C header declares: every `leveldb_<name>(`.
fn declared_functions(header: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = header;
    while let Some(at) = rest.find("leveldb_") {
        let tail = &rest[at..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if tail[len..].starts_with('(') {
            names.insert(tail[..len].to_string());
        }
        rest = &tail[len..];
    }
    names
}

/// The `leveldb_` symbols `nm` lists as defined in `lib` (`-D` for a shared library).
fn exported_functions(lib: &Path, dynamic: bool) -> BTreeSet<String> {
    let mut nm = Command::new("nm");
    if dynamic {
        nm.arg("-D");
    }
    nm.arg("--defined-only").arg(lib);
    let out = run_ok(&mut nm);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let (_addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
            (kind == "T" && name.starts_with("leveldb_")).then(|| name.to_string())
        })
        .collect()
}

/// Whether `what` (checked by `present`) may be used; when absent, skips (false) or, with
/// `STRATA_REQUIRE_PEERS` set, fails.
fn available(what: &str, present: bool) -> bool {
    if present {
        return true;
    }
    if std::env::var_os("STRATA_REQUIRE_PEERS").is_some() {
        panic!("{what} is not installed, and STRATA_REQUIRE_PEERS is set (scripts/install-peers.sh installs it)");
    }
    println!("skipped: {what} is not installed (scripts/install-peers.sh installs it)");
    false
}

/// Whether Debian's LevelDB is installed (its C header; the library comes with it).
fn leveldb_installed() -> bool {
    available(
        "Debian's libleveldb-dev",
        Path::new(LEVELDB_HEADER).exists(),
    )
}

fn leveldb_header() -> String {
    std::fs::read_to_string(LEVELDB_HEADER).unwrap_or_else(|e| {
        panic!("{LEVELDB_HEADER}: {e}: install Debian's libleveldb-dev (scripts/install-peers.sh)")
    })
}

#[test]
fn every_function_of_leveldbs_header_is_exported_declared_in_ours_and_called_by_c_api_c() {
    if !leveldb_installed() {
        return;
    }
    let theirs = declared_functions(&leveldb_header());
    assert_eq!(
        theirs.len(),
        68,
        "LevelDB 1.23's c.h declares 68 functions: {theirs:?}"
    );
    let ours = declared_functions(
        &std::fs::read_to_string(crate_dir().join("include/strata/c.h")).unwrap(),
    );
    assert_eq!(
        ours, theirs,
        "include/strata/c.h declares other functions than LevelDB's"
    );
    // c_api.c calls every one of them.
    let calls =
        declared_functions(&std::fs::read_to_string(crate_dir().join("tests/c/c_api.c")).unwrap());
    let uncalled: Vec<_> = theirs.difference(&calls).collect();
    assert!(
        uncalled.is_empty(),
        "tests/c/c_api.c never calls {uncalled:?}"
    );
    let dir = lib_dir();
    for (lib, dynamic) in [("libstrata_c.so", true), ("libstrata_c.a", false)] {
        let exported = exported_functions(&dir.join(lib), dynamic);
        let missing: Vec<_> = theirs.difference(&exported).collect();
        assert!(missing.is_empty(), "{lib} does not define {missing:?}");
    }
}

/// Our header and Debian's in one translation unit, as C11 and as C++: every function our
/// header declares must have exactly LevelDB's type, or the compiler reports conflicting
/// types. (The enumerators are renamed for the second header, which would redeclare them.)
#[test]
fn our_header_declares_leveldbs_exact_signatures_in_c_and_cpp() {
    if !leveldb_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("both.c");
    std::fs::write(
        &source,
        "#include <leveldb/c.h>\n\
         #define leveldb_no_compression strata_no_compression\n\
         #define leveldb_snappy_compression strata_snappy_compression\n\
         #include \"strata/c.h\"\n\
         int main(void) { return strata_snappy_compression - leveldb_snappy_compression; }\n",
    )
    .unwrap();
    for (compiler, std) in [("cc", "-std=c11"), ("c++", "-std=c++17")] {
        let mut cmd = Command::new(compiler);
        cmd.args([
            std,
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
        ]);
        if compiler == "c++" {
            cmd.args(["-x", "c++"]);
        }
        run_ok(cmd.arg("-I").arg(crate_dir().join("include")).arg(&source));
    }
}

/// c_api.c against both headers, with the shared library, and once with the static one.
#[test]
fn c_api_program_passes_with_leveldbs_header_and_ours() {
    let tmp = tempfile::tempdir().unwrap();
    let source = crate_dir().join("tests/c/c_api.c");
    let builds: [(&str, &[&str], Link); 3] = [
        ("ours", &[], Link::StrataShared),
        (
            "leveldb_header",
            &["-DUSE_LEVELDB_HEADER"],
            Link::StrataShared,
        ),
        ("static", &[], Link::StrataStatic),
    ];
    let with_leveldb = leveldb_installed();
    for (name, flags, link) in builds {
        if name == "leveldb_header" && !with_leveldb {
            continue;
        }
        let exe = tmp.path().join(name);
        compile(&source, &exe, flags, link);
        let scratch = tmp.path().join(format!("{name}-data"));
        std::fs::create_dir(&scratch).unwrap();
        let out = run_ok(
            Command::new(&exe)
                .arg(&scratch)
                .env("TEST_TMPDIR", &scratch),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.ends_with("PASS\n"), "{name}: {stdout}");
        // Every part ran.
        for part in [
            "writebatch",
            "comparator",
            "filterpolicy",
            "bloom",
            "errors",
        ] {
            assert!(stdout.contains(&format!("ok {part}\n")), "{name}: {stdout}");
        }
    }
}

/// A program written for LevelDB, unchanged, linked with LevelDB and with strata: the same
/// output, and each reads the database the other wrote.
#[test]
fn a_program_written_for_leveldb_behaves_the_same_on_strata() {
    if !leveldb_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let source = crate_dir().join("tests/c/for_leveldb.c");
    let with_leveldb = tmp.path().join("with_leveldb");
    let with_strata = tmp.path().join("with_strata");
    compile(&source, &with_leveldb, &[], Link::LevelDb);
    compile(&source, &with_strata, &[], Link::StrataShared);

    let run = |exe: &Path, mode: &str, dir: &Path| {
        String::from_utf8(run_ok(Command::new(exe).arg(mode).arg(dir)).stdout).unwrap()
    };
    let (by_leveldb, by_strata) = (tmp.path().join("by_leveldb"), tmp.path().join("by_strata"));
    let wrote_leveldb = run(&with_leveldb, "write", &by_leveldb);
    let wrote_strata = run(&with_strata, "write", &by_strata);
    assert_eq!(wrote_strata, wrote_leveldb);
    assert!(
        wrote_strata.contains("scan: 1334 entries"),
        "{wrote_strata}"
    );
    assert!(
        wrote_strata.contains("error kind \"Invalid argument\""),
        "{wrote_strata}"
    );

    // Each library reads the other's database, and its own, with the same result.
    let reads = [
        run(&with_leveldb, "read", &by_strata),
        run(&with_strata, "read", &by_leveldb),
        run(&with_leveldb, "read", &by_leveldb),
        run(&with_strata, "read", &by_strata),
    ];
    for r in &reads[1..] {
        assert_eq!(r, &reads[0]);
    }
    // And what they read is what was written (the write run ends by reading it back).
    let tail = &wrote_leveldb[wrote_leveldb.find("second open").unwrap()..];
    assert!(reads[0].ends_with(tail), "{}\n---\n{tail}", reads[0]);
}

/// The valgrind arguments of the issue: definite leaks and invalid accesses are errors.
const VALGRIND: [&str; 4] = [
    "--error-exitcode=1",
    "--leak-check=full",
    "--errors-for-leak-kinds=definite",
    "-q",
];

#[test]
fn c_api_program_under_valgrind_has_no_leak_or_invalid_access() {
    let valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    if !available("valgrind", valgrind) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The harness itself: a definite leak must fail under these arguments.
    let leaky = tmp.path().join("leaky.c");
    std::fs::write(
        &leaky,
        "#include <stdlib.h>\n#include <string.h>\nint main(void) {\n  char* p = malloc(64);\n  \
         memset(p, 1, 64);\n  p = NULL;\n  return p != NULL;\n}\n",
    )
    .unwrap();
    let leaky_exe = tmp.path().join("leaky");
    compile(&leaky, &leaky_exe, &["-O0"], Link::StrataShared);
    let status = Command::new("valgrind")
        .args(VALGRIND)
        .arg(&leaky_exe)
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(1), "valgrind missed a definite leak");

    let exe = tmp.path().join("c_api");
    compile(
        &crate_dir().join("tests/c/c_api.c"),
        &exe,
        &[],
        Link::StrataShared,
    );
    let scratch = tmp.path().join("data");
    std::fs::create_dir(&scratch).unwrap();
    let out = run_ok(
        Command::new("valgrind")
            .args(VALGRIND)
            .arg(&exe)
            .arg(&scratch)
            .env("TEST_TMPDIR", &scratch),
    );
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("PASS\n"));

    // The program written for LevelDB too: flushes, compactions and bloom filters.
    if !leveldb_installed() {
        return;
    }
    let exe = tmp.path().join("for_leveldb");
    compile(
        &crate_dir().join("tests/c/for_leveldb.c"),
        &exe,
        &[],
        Link::StrataShared,
    );
    let out = run_ok(
        Command::new("valgrind")
            .args(VALGRIND)
            .arg(&exe)
            .arg("write")
            .arg(tmp.path().join("for_leveldb.db")),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("scan: 1334 entries"));
}

/// The C example of the README, compiled and run as it is printed there.
#[test]
fn the_readme_c_example_compiles_and_runs() {
    let readme = std::fs::read_to_string(crate_dir().join("../../README.md")).unwrap();
    let section = &readme[readme
        .find("\n## C\n")
        .expect("the README has a \"## C\" section")..];
    let start = section
        .find("```c\n")
        .expect("a ```c block in the C section")
        + 5;
    let end = start + section[start..].find("```").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("example.c");
    std::fs::write(&source, &section[start..end]).unwrap();
    let exe = tmp.path().join("example");
    // As the README builds it: the include directory of the crate, linked with -lstrata_c.
    compile(&source, &exe, &[], Link::StrataShared);
    let out = run_ok(Command::new(&exe).current_dir(tmp.path()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "hello = world\n");
    assert!(tmp.path().join("example.db/CURRENT").exists());
}
