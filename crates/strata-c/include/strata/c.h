/* SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * strata/c.h: the C interface of libstrata_c, strata's implementation of LevelDB 1.23's C API.
 *
 * The functions and types here have the names and signatures of LevelDB 1.23's leveldb/c.h, so
 * a program written for LevelDB builds against either header and links with -lstrata_c in
 * place of -lleveldb. Databases are LevelDB's on-disk format: one written by either library
 * opens in the other.
 *
 * Rules for every function:
 *  - Objects are opaque pointers. Each is released by its own function (leveldb_close,
 *    leveldb_*_destroy, leveldb_release_snapshot), once. Releasing NULL does nothing.
 *  - Memory handed to the caller (values, property values, error strings, the test directory)
 *    comes from malloc: release it with leveldb_free() or free().
 *  - Errors: a function that can fail takes `char** errptr` last. On entry *errptr is NULL or
 *    a string this library allocated. Success leaves *errptr as it was. Failure frees the old
 *    string, if any, and stores a new one; its text starts as LevelDB's does: "IO error: ",
 *    "Corruption: ", "Invalid argument: ", "Not implemented: ". A NULL errptr discards the error.
 *  - Booleans are uint8_t: 0 is false, anything else true.
 *  - Keys and values are (pointer, length) pairs and may hold any bytes. A NULL pointer is
 *    accepted with length 0. A NULL pointer with a non-zero length is refused: "Invalid
 *    argument" where the function has errptr; otherwise nothing is done (batch put and delete,
 *    iter_seek) or, in leveldb_approximate_sizes, the range's size is 0.
 *  - LevelDB requires every pointer argument to be non-NULL; where it leaves NULL undefined,
 *    this library does what each comment below says, never undefined behaviour: a NULL
 *    database, batch to write or name is "Invalid argument" where there is errptr; a NULL
 *    object to destroy or to modify is ignored; NULL options for open, destroy, repair, reads
 *    and writes mean the defaults; functions returning a pointer return NULL.
 *  - Nothing unwinds into the caller: an internal panic becomes an error string where the
 *    function has errptr, and otherwise the function's stated fallback (NULL, 0, nothing done).
 *  - Everything may be called from several threads, except that one iterator, batch or options
 *    object must not be used by two threads at once.
 */
#ifndef STRATA_C_H_
#define STRATA_C_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Opaque types ---------------------------------------------------------------------- */

typedef struct leveldb_t leveldb_t;                           /* an open database */
typedef struct leveldb_cache_t leveldb_cache_t;               /* a block cache, bounded in bytes */
typedef struct leveldb_comparator_t leveldb_comparator_t;     /* a key order from C callbacks */
typedef struct leveldb_env_t leveldb_env_t;                   /* the file system (POSIX) */
typedef struct leveldb_filelock_t leveldb_filelock_t;         /* declared for compatibility; unused */
typedef struct leveldb_filterpolicy_t leveldb_filterpolicy_t; /* bloom, or from C callbacks */
typedef struct leveldb_iterator_t leveldb_iterator_t;         /* a cursor */
typedef struct leveldb_logger_t leveldb_logger_t;             /* never constructed; see set_info_log */
typedef struct leveldb_options_t leveldb_options_t;           /* open/repair/destroy options */
typedef struct leveldb_randomfile_t leveldb_randomfile_t;     /* declared for compatibility; unused */
typedef struct leveldb_readoptions_t leveldb_readoptions_t;
typedef struct leveldb_seqfile_t leveldb_seqfile_t;           /* declared for compatibility; unused */
typedef struct leveldb_snapshot_t leveldb_snapshot_t;
typedef struct leveldb_writablefile_t leveldb_writablefile_t; /* declared for compatibility; unused */
typedef struct leveldb_writebatch_t leveldb_writebatch_t;
typedef struct leveldb_writeoptions_t leveldb_writeoptions_t;

/* ---- The database ---------------------------------------------------------------------- */

/* Opens the database in directory `name` (creating it if the options say so). NULL options
 * mean the defaults. Returns NULL and sets *errptr on failure; a missing database without
 * create_if_missing is "Invalid argument: ...", a database another handle holds is
 * "IO error: lock ...". */
leveldb_t* leveldb_open(const leveldb_options_t* options, const char* name, char** errptr);

/* Closes the database (its log is synced first) and frees the handle. Destroy its iterators
 * and release its snapshots before. */
void leveldb_close(leveldb_t* db);

/* Stores val under key. NULL write options mean the defaults (no sync). NULL db is an error. */
void leveldb_put(leveldb_t* db, const leveldb_writeoptions_t* options, const char* key,
                 size_t keylen, const char* val, size_t vallen, char** errptr);

/* Deletes key; deleting a missing key succeeds. */
void leveldb_delete(leveldb_t* db, const leveldb_writeoptions_t* options, const char* key,
                    size_t keylen, char** errptr);

/* Applies every operation of batch, atomically. The batch is unchanged and may be reused. */
void leveldb_write(leveldb_t* db, const leveldb_writeoptions_t* options,
                   leveldb_writebatch_t* batch, char** errptr);

/* Returns a malloc'd copy of key's value and its length in *vallen, or NULL (and *vallen = 0)
 * if the key is absent; on failure NULL with *errptr set. The copy is not NUL-terminated. */
char* leveldb_get(leveldb_t* db, const leveldb_readoptions_t* options, const char* key,
                  size_t keylen, size_t* vallen, char** errptr);

/* A new, unpositioned cursor over the database (at the read options' snapshot, if any).
 * Returns NULL for a NULL db (and, were there a bug, for a panic caught). If the
 * cursor cannot be made (a table that cannot be read),
 * it is never valid and leveldb_iter_get_error reports why. */
leveldb_iterator_t* leveldb_create_iterator(leveldb_t* db, const leveldb_readoptions_t* options);

/* A consistent read view of the database as it is now. NULL for a NULL db (and, were there
 * a bug, for a panic caught). */
const leveldb_snapshot_t* leveldb_create_snapshot(leveldb_t* db);

/* Releases the snapshot; read options that point to it must not be used after. */
void leveldb_release_snapshot(leveldb_t* db, const leveldb_snapshot_t* snapshot);

/* A malloc'd, NUL-terminated property value, or NULL for an unknown name. Known names include
 * LevelDB's "leveldb.stats", "leveldb.sstables", "leveldb.num-files-at-level<N>" and
 * "leveldb.approximate-memory-usage". */
char* leveldb_property_value(leveldb_t* db, const char* propname);

/* For i < num_ranges, stores in sizes[i] the approximate file bytes used by keys in
 * [range_start_key[i], range_limit_key[i]). Ranges with a NULL key and a length get 0. */
void leveldb_approximate_sizes(leveldb_t* db, int num_ranges,
                               const char* const* range_start_key,
                               const size_t* range_start_key_len,
                               const char* const* range_limit_key,
                               const size_t* range_limit_key_len, uint64_t* sizes);

/* Compacts the keys in [start_key, limit_key]. A NULL key leaves that end open. Waits until
 * done; failures are not reported (as in LevelDB). */
void leveldb_compact_range(leveldb_t* db, const char* start_key, size_t start_key_len,
                           const char* limit_key, size_t limit_key_len);

/* Removes the database in `name`: only its own files, then the directory if it is left empty.
 * A directory that does not exist, or is empty (or holds only a LOCK file), succeeds, and the
 * directory is removed. A directory holding other files but no database is refused with
 * "Invalid argument" and left as it is (LevelDB would delete the files in it that have
 * database file names). */
void leveldb_destroy_db(const leveldb_options_t* options, const char* name, char** errptr);

/* Rebuilds a database that will not open from the logs and tables that can be read. */
void leveldb_repair_db(const leveldb_options_t* options, const char* name, char** errptr);

/* ---- Iterators ------------------------------------------------------------------------- */

void leveldb_iter_destroy(leveldb_iterator_t*);
/* 1 when positioned on an entry. */
uint8_t leveldb_iter_valid(const leveldb_iterator_t*);
void leveldb_iter_seek_to_first(leveldb_iterator_t*);
void leveldb_iter_seek_to_last(leveldb_iterator_t*);
/* Positions at the first key at or after k in the database's order. */
void leveldb_iter_seek(leveldb_iterator_t*, const char* k, size_t klen);
/* Step forward or back. On a cursor that is not valid they do nothing (LevelDB: undefined). */
void leveldb_iter_next(leveldb_iterator_t*);
void leveldb_iter_prev(leveldb_iterator_t*);
/* The current key or value and its length; the bytes stay valid until the cursor moves or is
 * destroyed. On a cursor that is not valid: NULL and length 0 (LevelDB: undefined). */
const char* leveldb_iter_key(const leveldb_iterator_t*, size_t* klen);
const char* leveldb_iter_value(const leveldb_iterator_t*, size_t* vlen);
/* Sets *errptr to the first error the cursor met; leaves it alone if there was none. */
void leveldb_iter_get_error(const leveldb_iterator_t*, char** errptr);

/* ---- Write batches --------------------------------------------------------------------- */

leveldb_writebatch_t* leveldb_writebatch_create(void);
void leveldb_writebatch_destroy(leveldb_writebatch_t*);
/* Removes every operation. */
void leveldb_writebatch_clear(leveldb_writebatch_t*);
void leveldb_writebatch_put(leveldb_writebatch_t*, const char* key, size_t klen,
                            const char* val, size_t vlen);
void leveldb_writebatch_delete(leveldb_writebatch_t*, const char* key, size_t klen);
/* Calls put(state, ...) for each put and deleted(state, ...) for each deletion, in the order
 * they were added. The bytes passed are valid during the call only. */
void leveldb_writebatch_iterate(const leveldb_writebatch_t*, void* state,
                                void (*put)(void*, const char* k, size_t klen, const char* v,
                                            size_t vlen),
                                void (*deleted)(void*, const char* k, size_t klen));
/* Adds source's operations after destination's own (source may be destination). */
void leveldb_writebatch_append(leveldb_writebatch_t* destination,
                               const leveldb_writebatch_t* source);

/* ---- Options ---------------------------------------------------------------------------
 * Defaults are LevelDB's, except that read options verify checksums (below). Every setter maps
 * to the strata option of the same meaning, with
 * these exceptions:
 *  - set_info_log is accepted and has no effect (C cannot make a logger; strata keeps its own
 *    LOG file in the database directory);
 *  - set_env: strata's POSIX env is the only env; NULL restores it;
 *  - set_compression: values other than leveldb_no_compression and leveldb_snappy_compression
 *    are ignored;
 *  - sizes are clamped when the database opens, as LevelDB clamps them (write buffer
 *    64 KiB..1 GiB, block 1 KiB..4 MiB, file 1 MiB..1 GiB, open files 74..50,000); a block
 *    restart interval below 1 makes leveldb_open fail with "Invalid argument";
 *  - a comparator's or filter policy's name must be UTF-8: other bytes are replaced (U+FFFD),
 *    so such a database would not open in LevelDB with the original name, nor a LevelDB
 *    database made with such a name in strata.
 * Options keep the comparator, filter policy, cache and env set on them by reference: keep them
 * alive (not destroyed) while a database opened with them is open. NULL for any of them
 * restores the default (bytewise order, no filter, a cache of the database's own, POSIX). */

leveldb_options_t* leveldb_options_create(void);
void leveldb_options_destroy(leveldb_options_t*);
void leveldb_options_set_comparator(leveldb_options_t*, leveldb_comparator_t*);
void leveldb_options_set_filter_policy(leveldb_options_t*, leveldb_filterpolicy_t*);
void leveldb_options_set_create_if_missing(leveldb_options_t*, uint8_t);
void leveldb_options_set_error_if_exists(leveldb_options_t*, uint8_t);
/* Non-zero: also open and check every table when the database opens. */
void leveldb_options_set_paranoid_checks(leveldb_options_t*, uint8_t);
void leveldb_options_set_env(leveldb_options_t*, leveldb_env_t*);
void leveldb_options_set_info_log(leveldb_options_t*, leveldb_logger_t*);
void leveldb_options_set_write_buffer_size(leveldb_options_t*, size_t);
void leveldb_options_set_max_open_files(leveldb_options_t*, int);
void leveldb_options_set_cache(leveldb_options_t*, leveldb_cache_t*);
void leveldb_options_set_block_size(leveldb_options_t*, size_t);
void leveldb_options_set_block_restart_interval(leveldb_options_t*, int);
void leveldb_options_set_max_file_size(leveldb_options_t*, size_t);

enum { leveldb_no_compression = 0, leveldb_snappy_compression = 1 };
void leveldb_options_set_compression(leveldb_options_t*, int);

/* ---- Comparators and filter policies from C callbacks ----------------------------------
 * `name(state)` is called once, at creation, and the string copied: it names the order (or
 * filter) in the database's files, so a database must be reopened with the same name.
 * The callbacks are called from several threads at once (reads, and background compactions),
 * until the object is destroyed. `destructor(state)` is called exactly once, by the destroy
 * function, and may be NULL. Destroy a comparator or policy only after closing every database
 * that uses it. Creation returns NULL if a required callback is NULL. */

/* compare returns <0, 0 or >0 as a sorts before, with, or after b. Keys are not shortened in
 * table indexes with a C comparator (as in LevelDB). */
leveldb_comparator_t* leveldb_comparator_create(
    void* state, void (*destructor)(void*),
    int (*compare)(void*, const char* a, size_t alen, const char* b, size_t blen),
    const char* (*name)(void*));
void leveldb_comparator_destroy(leveldb_comparator_t*);

/* create_filter returns a filter over num_keys keys, allocated with malloc (the library frees
 * it), its length in *filter_length; key_may_match returns 0 only if key was certainly not
 * among the keys of the filter. */
leveldb_filterpolicy_t* leveldb_filterpolicy_create(
    void* state, void (*destructor)(void*),
    char* (*create_filter)(void*, const char* const* key_array, const size_t* key_length_array,
                           int num_keys, size_t* filter_length),
    uint8_t (*key_may_match)(void*, const char* key, size_t length, const char* filter,
                             size_t filter_length),
    const char* (*name)(void*));
void leveldb_filterpolicy_destroy(leveldb_filterpolicy_t*);

/* LevelDB's bloom filter, bit-compatible with LevelDB's tables; 10 bits per key gives about
 * 1% false positives. */
leveldb_filterpolicy_t* leveldb_filterpolicy_create_bloom(int bits_per_key);

/* ---- Read and write options ------------------------------------------------------------ */

/* Defaults: checksums verified (strata's default; LevelDB's is off), fill the cache, no
 * snapshot. */
leveldb_readoptions_t* leveldb_readoptions_create(void);
void leveldb_readoptions_destroy(leveldb_readoptions_t*);
void leveldb_readoptions_set_verify_checksums(leveldb_readoptions_t*, uint8_t);
void leveldb_readoptions_set_fill_cache(leveldb_readoptions_t*, uint8_t);
/* Reads at the snapshot (NULL: the latest state). The snapshot is referenced, not copied. */
void leveldb_readoptions_set_snapshot(leveldb_readoptions_t*, const leveldb_snapshot_t*);

/* Default: no sync. With sync, a write returns once it is on stable storage. */
leveldb_writeoptions_t* leveldb_writeoptions_create(void);
void leveldb_writeoptions_destroy(leveldb_writeoptions_t*);
void leveldb_writeoptions_set_sync(leveldb_writeoptions_t*, uint8_t);

/* ---- Cache, env, memory, version ------------------------------------------------------- */

/* A block cache holding up to `capacity` bytes, which databases share through their options. */
leveldb_cache_t* leveldb_cache_create_lru(size_t capacity);
void leveldb_cache_destroy(leveldb_cache_t* cache);

/* The POSIX environment. */
leveldb_env_t* leveldb_create_default_env(void);
void leveldb_env_destroy(leveldb_env_t*);

/* A malloc'd path of a directory for tests, created if missing: $TEST_TMPDIR when set, else
 * /tmp/leveldbtest-<euid>. NULL if env is NULL or the directory cannot be created. */
char* leveldb_env_get_test_directory(leveldb_env_t*);

/* Frees memory returned by this library (same as free()). */
void leveldb_free(void* ptr);

/* The version of the C API implemented: 1 and 23 (LevelDB 1.23's), not strata's version. */
int leveldb_major_version(void);
int leveldb_minor_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRATA_C_H_ */
