/* SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * Exercises every function of LevelDB 1.23's C API against libstrata_c. Built twice by
 * tests/c_api.rs: with -DUSE_LEVELDB_HEADER against Debian's <leveldb/c.h>, and against our
 * "strata/c.h". Usage: c_api DIR (an empty scratch directory). Prints one "ok <part>" line per
 * part and "PASS" at the end; on a failed check prints "FAIL file:line: what" and exits 1.
 */
#ifdef USE_LEVELDB_HEADER
#include <leveldb/c.h>
#else
#include "strata/c.h"
#endif

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

#define CHECK_NO_ERROR(err)                                               \
  do {                                                                    \
    if ((err) != NULL) {                                                  \
      fprintf(stderr, "FAIL %s:%d: error %s\n", __FILE__, __LINE__, err); \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

static char dir_buf[4096];

/* A path under the scratch directory. */
static const char* path_of(const char* name) {
  static char buf[4200];
  snprintf(buf, sizeof buf, "%s/%s", dir_buf, name);
  return buf;
}

static int starts_with(const char* s, const char* prefix) {
  return s != NULL && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The value of key, as a NUL-terminated malloc'd string (NULL if absent), with no error. */
static char* get_string(leveldb_t* db, const leveldb_readoptions_t* ro, const char* key) {
  char* err = NULL;
  size_t len = 12345;
  char* v = leveldb_get(db, ro, key, strlen(key), &len, &err);
  CHECK_NO_ERROR(err);
  if (v == NULL) {
    CHECK(len == 0);
    return NULL;
  }
  char* s = malloc(len + 1);
  memcpy(s, v, len);
  s[len] = 0;
  leveldb_free(v);
  return s;
}

static void check_get(leveldb_t* db, const leveldb_readoptions_t* ro, const char* key,
                      const char* expected) {
  char* got = get_string(db, ro, key);
  if (expected == NULL) {
    if (got != NULL) fprintf(stderr, "FAIL: %s = %s, expected absent\n", key, got);
    CHECK(got == NULL);
  } else {
    if (got == NULL || strcmp(got, expected) != 0)
      fprintf(stderr, "FAIL: %s = %s, expected %s\n", key, got ? got : "(absent)", expected);
    CHECK(got != NULL && strcmp(got, expected) == 0);
  }
  free(got);
}

/* The keys and values of a full forward scan, "k=v," each, into buf. */
static void scan_forward(leveldb_t* db, const leveldb_readoptions_t* ro, char* buf, size_t cap) {
  leveldb_iterator_t* it = leveldb_create_iterator(db, ro);
  CHECK(it != NULL);
  buf[0] = 0;
  for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
    size_t kl, vl;
    const char* k = leveldb_iter_key(it, &kl);
    const char* v = leveldb_iter_value(it, &vl);
    size_t used = strlen(buf);
    snprintf(buf + used, cap - used, "%.*s=%.*s,", (int)kl, k, (int)vl, v);
  }
  char* err = NULL;
  leveldb_iter_get_error(it, &err);
  CHECK_NO_ERROR(err);
  leveldb_iter_destroy(it);
}

/* ---- write batch iteration ---- */

static char batch_log[1024];

static void batch_put(void* state, const char* k, size_t klen, const char* v, size_t vlen) {
  CHECK(state == (void*)batch_log);
  size_t used = strlen(batch_log);
  snprintf(batch_log + used, sizeof batch_log - used, "put(%.*s,%.*s)", (int)klen, k, (int)vlen, v);
}

static void batch_deleted(void* state, const char* k, size_t klen) {
  CHECK(state == (void*)batch_log);
  size_t used = strlen(batch_log);
  snprintf(batch_log + used, sizeof batch_log - used, "del(%.*s)", (int)klen, k);
}

/* ---- a reverse comparator ---- */

typedef struct {
  int destroyed;
  int compares;
} cmp_state;

static void cmp_destroy(void* arg) { ((cmp_state*)arg)->destroyed++; }

static int cmp_compare(void* arg, const char* a, size_t alen, const char* b, size_t blen) {
  __atomic_fetch_add(&((cmp_state*)arg)->compares, 1, __ATOMIC_RELAXED);
  size_t n = alen < blen ? alen : blen;
  int r = memcmp(a, b, n);
  if (r == 0) r = alen < blen ? -1 : alen > blen ? 1 : 0;
  return -r; /* descending */
}

static const char* cmp_name(void* arg) {
  (void)arg;
  return "strata-test.Reverse";
}

/* ---- a filter policy of our own: the filter lists its keys exactly ---- */

typedef struct {
  int destroyed;
  int created;
  int probed;
  int lie; /* answer "certainly absent" to every probe */
} filter_state;

static void filter_destroy(void* arg) { ((filter_state*)arg)->destroyed++; }

static char* filter_create(void* arg, const char* const* keys, const size_t* lens, int n,
                           size_t* filter_length) {
  __atomic_fetch_add(&((filter_state*)arg)->created, 1, __ATOMIC_RELAXED);
  size_t total = 0;
  for (int i = 0; i < n; i++) total += 4 + lens[i];
  char* f = malloc(total ? total : 1);
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    uint32_t l = (uint32_t)lens[i];
    memcpy(f + at, &l, 4);
    memcpy(f + at + 4, keys[i], lens[i]);
    at += 4 + lens[i];
  }
  *filter_length = total;
  return f;
}

static uint8_t filter_match(void* arg, const char* key, size_t length, const char* filter,
                            size_t filter_length) {
  filter_state* s = arg;
  __atomic_fetch_add(&s->probed, 1, __ATOMIC_RELAXED);
  if (__atomic_load_n(&s->lie, __ATOMIC_RELAXED)) return 0;
  size_t at = 0;
  while (at + 4 <= filter_length) {
    uint32_t l;
    memcpy(&l, filter + at, 4);
    if (l == length && memcmp(filter + at + 4, key, length) == 0) return 1;
    at += 4 + l;
  }
  return 0;
}

static const char* filter_name(void* arg) {
  (void)arg;
  return "strata-test.ExactFilter";
}

/* ---- several threads on one database ---- */

typedef struct {
  leveldb_t* db;
  int id;
  int failures;
} worker;

#define WORKER_KEYS 400

static void* work(void* arg) {
  worker* w = arg;
  char key[32], val[32], *err = NULL;
  for (int i = 0; i < WORKER_KEYS; i++) {
    snprintf(key, sizeof key, "t%d-%05d", w->id, i);
    snprintf(val, sizeof val, "v%d", i * w->id);
    leveldb_put(w->db, NULL, key, strlen(key), val, strlen(val), &err);
    if (err != NULL) {
      w->failures++;
      leveldb_free(err);
      err = NULL;
    }
  }
  for (int i = 0; i < WORKER_KEYS; i++) {
    snprintf(key, sizeof key, "t%d-%05d", w->id, i);
    snprintf(val, sizeof val, "v%d", i * w->id);
    size_t len;
    char* v = leveldb_get(w->db, NULL, key, strlen(key), &len, &err);
    if (err != NULL || v == NULL || len != strlen(val) || memcmp(v, val, len) != 0) w->failures++;
    leveldb_free(v);
    leveldb_free(err);
    err = NULL;
  }
  return NULL;
}

int main(int argc, char** argv) {
  CHECK(argc == 2);
  snprintf(dir_buf, sizeof dir_buf, "%s", argv[1]);
  char* err = NULL;

  /* ---- version ---- */
  CHECK(leveldb_major_version() == 1);
  CHECK(leveldb_minor_version() == 23);
  printf("ok version\n");

  /* ---- env and test directory ---- */
  leveldb_env_t* env = leveldb_create_default_env();
  CHECK(env != NULL);
  char* testdir = leveldb_env_get_test_directory(env);
  CHECK(testdir != NULL && testdir[0] == '/');
  leveldb_free(testdir);
  CHECK(leveldb_env_get_test_directory(NULL) == NULL);
  printf("ok env\n");

  /* ---- options: every setter ---- */
  leveldb_cache_t* cache = leveldb_cache_create_lru(1 << 20);
  CHECK(cache != NULL);
  leveldb_options_t* options = leveldb_options_create();
  leveldb_options_set_env(options, env);
  leveldb_options_set_info_log(options, NULL);
  leveldb_options_set_cache(options, cache);
  leveldb_options_set_write_buffer_size(options, 100000);
  leveldb_options_set_paranoid_checks(options, 1);
  leveldb_options_set_max_open_files(options, 100);
  leveldb_options_set_block_size(options, 1024);
  leveldb_options_set_block_restart_interval(options, 8);
  leveldb_options_set_max_file_size(options, 3 << 20);
  leveldb_options_set_compression(options, leveldb_no_compression);
  leveldb_options_set_error_if_exists(options, 0);
  leveldb_options_set_comparator(options, NULL);    /* strata: NULL restores bytewise */
  leveldb_options_set_filter_policy(options, NULL); /* strata: NULL is no filter */

  leveldb_readoptions_t* ro = leveldb_readoptions_create();
  leveldb_readoptions_set_verify_checksums(ro, 1);
  leveldb_readoptions_set_fill_cache(ro, 1);
  leveldb_writeoptions_t* wo = leveldb_writeoptions_create();
  leveldb_writeoptions_set_sync(wo, 1);
  printf("ok options\n");

  const char* dbname = path_of("db");
  leveldb_destroy_db(options, dbname, &err); /* nothing there: succeeds */
  CHECK_NO_ERROR(err);

  /* ---- open of a missing database without create_if_missing ---- */
  leveldb_options_set_create_if_missing(options, 0);
  leveldb_t* db = leveldb_open(options, dbname, &err);
  CHECK(db == NULL);
  CHECK(starts_with(err, "Invalid argument: "));
  /* An existing error string is freed before the next is stored: under valgrind, the 50
   * strings replaced here would be definite leaks otherwise. */
  for (int i = 0; i < 50; i++) {
    db = leveldb_open(options, dbname, &err);
    CHECK(db == NULL && starts_with(err, "Invalid argument: "));
  }
  leveldb_free(err);
  err = NULL;
  printf("ok open-missing\n");

  leveldb_options_set_create_if_missing(options, 1);
  db = leveldb_open(options, dbname, &err);
  CHECK_NO_ERROR(err);
  CHECK(db != NULL);

  /* A second handle on the same database is refused: an IO error about the lock. */
  leveldb_t* second = leveldb_open(options, dbname, &err);
  CHECK(second == NULL && starts_with(err, "IO error: "));
  leveldb_free(err);
  err = NULL;
  printf("ok open\n");

  /* ---- put, get, delete ---- */
  check_get(db, ro, "foo", NULL);
  leveldb_put(db, wo, "foo", 3, "hello", 5, &err);
  CHECK_NO_ERROR(err);
  check_get(db, ro, "foo", "hello");
  leveldb_put(db, NULL, "empty", 5, NULL, 0, &err); /* NULL options, empty value */
  CHECK_NO_ERROR(err);
  {
    size_t len = 99;
    char* v = leveldb_get(db, NULL, "empty", 5, &len, &err);
    CHECK_NO_ERROR(err);
    CHECK(v != NULL && len == 0); /* present and empty is not absent */
    leveldb_free(v);
  }
  leveldb_put(db, wo, "binary\0key", 10, "a\0b", 3, &err);
  CHECK_NO_ERROR(err);
  {
    size_t len = 0;
    char* v = leveldb_get(db, ro, "binary\0key", 10, &len, &err);
    CHECK_NO_ERROR(err);
    CHECK(v != NULL && len == 3 && memcmp(v, "a\0b", 3) == 0);
    free(v); /* plain free() works too */
  }
  leveldb_delete(db, wo, "empty", 5, &err);
  CHECK_NO_ERROR(err);
  check_get(db, ro, "empty", NULL);
  leveldb_delete(db, wo, "never-there", 11, &err);
  CHECK_NO_ERROR(err);
  leveldb_delete(db, wo, "binary\0key", 10, &err);
  CHECK_NO_ERROR(err);
  printf("ok put-get-delete\n");

  /* ---- error conventions ---- */
  {
    /* Success leaves *errptr exactly as it was. */
    char* kept = malloc(5);
    memcpy(kept, "kept", 5);
    err = kept;
    leveldb_put(db, wo, "k", 1, "v", 1, &err);
    CHECK(err == kept && strcmp(err, "kept") == 0);
    /* Failure frees the old string and stores a new one (valgrind: no leak of "kept"). */
    leveldb_put(NULL, wo, "k", 1, "v", 1, &err);
    CHECK(err != kept && starts_with(err, "Invalid argument: "));
    kept = NULL;
    for (int i = 0; i < 50; i++) {
      leveldb_put(NULL, wo, "k", 1, "v", 1, &err);
      CHECK(starts_with(err, "Invalid argument: "));
    }
    leveldb_free(err);
    err = NULL;
    /* A NULL key with a length is refused, never read. */
    leveldb_put(db, wo, NULL, 4, "v", 1, &err);
    CHECK(starts_with(err, "Invalid argument: "));
    size_t len = 7;
    CHECK(leveldb_get(db, ro, NULL, 4, &len, &err) == NULL && len == 0);
    CHECK(starts_with(err, "Invalid argument: "));
    leveldb_delete(db, wo, NULL, 2, &err);
    CHECK(starts_with(err, "Invalid argument: "));
    leveldb_write(db, wo, NULL, &err);
    CHECK(starts_with(err, "Invalid argument: "));
    leveldb_free(err);
    err = NULL;
    /* A NULL errptr is accepted: the error is dropped. */
    leveldb_put(NULL, wo, "k", 1, "v", 1, NULL);
    CHECK(leveldb_open(options, NULL, NULL) == NULL);
    /* Releasing NULL does nothing. */
    leveldb_close(NULL);
    leveldb_iter_destroy(NULL);
    leveldb_writebatch_destroy(NULL);
    leveldb_options_destroy(NULL);
    leveldb_readoptions_destroy(NULL);
    leveldb_writeoptions_destroy(NULL);
    leveldb_cache_destroy(NULL);
    leveldb_env_destroy(NULL);
    leveldb_comparator_destroy(NULL);
    leveldb_filterpolicy_destroy(NULL);
    leveldb_release_snapshot(db, NULL);
    leveldb_free(NULL);
  }
  printf("ok errors\n");

  /* ---- write batches ---- */
  {
    leveldb_writebatch_t* wb = leveldb_writebatch_create();
    leveldb_writebatch_put(wb, "foo", 3, "a", 1);
    leveldb_writebatch_clear(wb);
    leveldb_writebatch_put(wb, "bar", 3, "b", 1);
    leveldb_writebatch_put(wb, "box", 3, "c", 1);
    leveldb_writebatch_delete(wb, "bar", 3);
    leveldb_writebatch_t* wb2 = leveldb_writebatch_create();
    leveldb_writebatch_delete(wb2, "k", 1);
    leveldb_writebatch_put(wb2, "zed", 3, "z", 1);
    leveldb_writebatch_append(wb, wb2);
    leveldb_writebatch_destroy(wb2);

    batch_log[0] = 0;
    leveldb_writebatch_iterate(wb, batch_log, batch_put, batch_deleted);
    if (strcmp(batch_log, "put(bar,b)put(box,c)del(bar)del(k)put(zed,z)") != 0)
      fprintf(stderr, "batch: %s\n", batch_log);
    CHECK(strcmp(batch_log, "put(bar,b)put(box,c)del(bar)del(k)put(zed,z)") == 0);

    leveldb_write(db, wo, wb, &err);
    CHECK_NO_ERROR(err);
    check_get(db, ro, "foo", "hello");
    check_get(db, ro, "bar", NULL);
    check_get(db, ro, "box", "c");
    check_get(db, ro, "k", NULL);
    check_get(db, ro, "zed", "z");

    /* The batch is unchanged by the write; appending it to itself doubles it. */
    leveldb_writebatch_append(wb, wb);
    batch_log[0] = 0;
    leveldb_writebatch_iterate(wb, batch_log, batch_put, batch_deleted);
    CHECK(strcmp(batch_log,
                 "put(bar,b)put(box,c)del(bar)del(k)put(zed,z)"
                 "put(bar,b)put(box,c)del(bar)del(k)put(zed,z)") == 0);
    leveldb_writebatch_clear(wb);
    batch_log[0] = 0;
    leveldb_writebatch_iterate(wb, batch_log, batch_put, batch_deleted);
    CHECK(batch_log[0] == 0);
    leveldb_writebatch_destroy(wb);
  }
  printf("ok writebatch\n");

  /* ---- iterators ---- */
  {
    char buf[1024];
    scan_forward(db, ro, buf, sizeof buf);
    CHECK(strcmp(buf, "box=c,foo=hello,zed=z,") == 0);

    leveldb_iterator_t* it = leveldb_create_iterator(db, ro);
    CHECK(!leveldb_iter_valid(it));
    size_t len = 5;
    CHECK(leveldb_iter_key(it, &len) == NULL && len == 0); /* not positioned: NULL */
    leveldb_iter_next(it);                                 /* not positioned: nothing */
    leveldb_iter_prev(it);
    CHECK(!leveldb_iter_valid(it));
    leveldb_iter_seek_to_last(it);
    CHECK(leveldb_iter_valid(it));
    const char* k = leveldb_iter_key(it, &len);
    CHECK(len == 3 && memcmp(k, "zed", 3) == 0);
    leveldb_iter_prev(it);
    k = leveldb_iter_key(it, &len);
    CHECK(len == 3 && memcmp(k, "foo", 3) == 0);
    const char* v = leveldb_iter_value(it, &len);
    CHECK(len == 5 && memcmp(v, "hello", 5) == 0);
    leveldb_iter_seek(it, "c", 1);
    k = leveldb_iter_key(it, &len);
    CHECK(len == 3 && memcmp(k, "foo", 3) == 0);
    leveldb_iter_seek(it, "zz", 2);
    CHECK(!leveldb_iter_valid(it));
    CHECK(leveldb_iter_value(it, &len) == NULL && len == 0);
    leveldb_iter_seek_to_first(it);
    k = leveldb_iter_key(it, &len);
    CHECK(len == 3 && memcmp(k, "box", 3) == 0);
    leveldb_iter_next(it);
    leveldb_iter_next(it);
    leveldb_iter_next(it);
    CHECK(!leveldb_iter_valid(it));
    leveldb_iter_get_error(it, &err);
    CHECK_NO_ERROR(err);
    leveldb_iter_destroy(it);

    /* NULL cursors are accepted and do nothing. */
    CHECK(!leveldb_iter_valid(NULL));
    leveldb_iter_seek_to_first(NULL);
    leveldb_iter_get_error(NULL, &err);
    CHECK_NO_ERROR(err);
    CHECK(leveldb_create_iterator(NULL, ro) == NULL);
  }
  printf("ok iterator\n");

  /* ---- snapshots ---- */
  {
    const leveldb_snapshot_t* snap = leveldb_create_snapshot(db);
    CHECK(snap != NULL);
    leveldb_put(db, wo, "foo", 3, "changed", 7, &err);
    CHECK_NO_ERROR(err);
    leveldb_delete(db, wo, "box", 3, &err);
    CHECK_NO_ERROR(err);
    leveldb_readoptions_t* at = leveldb_readoptions_create();
    leveldb_readoptions_set_snapshot(at, snap);
    check_get(db, at, "foo", "hello");
    check_get(db, ro, "foo", "changed");
    char buf[1024];
    scan_forward(db, at, buf, sizeof buf);
    CHECK(strcmp(buf, "box=c,foo=hello,zed=z,") == 0);
    leveldb_readoptions_set_snapshot(at, NULL);
    check_get(db, at, "foo", "changed");
    leveldb_readoptions_destroy(at);
    leveldb_release_snapshot(db, snap);
    CHECK(leveldb_create_snapshot(NULL) == NULL);
  }
  printf("ok snapshot\n");

  /* ---- many keys: compaction, properties, approximate sizes ---- */
  {
    char key[32], val[128];
    memset(val, 'x', sizeof val);
    for (int i = 0; i < 3000; i++) {
      snprintf(key, sizeof key, "key%06d", i);
      leveldb_put(db, NULL, key, strlen(key), val, 100, &err);
      CHECK_NO_ERROR(err);
    }
    leveldb_compact_range(db, NULL, 0, NULL, 0);
    leveldb_compact_range(db, "key000100", 9, "key000200", 9);
    leveldb_compact_range(NULL, NULL, 0, NULL, 0); /* NULL db: nothing */

    char* prop = leveldb_property_value(db, "leveldb.stats");
    CHECK(prop != NULL && strlen(prop) > 0);
    leveldb_free(prop);
    prop = leveldb_property_value(db, "leveldb.num-files-at-level0");
    CHECK(prop != NULL && strcmp(prop, "0") == 0); /* everything compacted down */
    leveldb_free(prop);
    CHECK(leveldb_property_value(db, "leveldb.no-such-property") == NULL);
    CHECK(leveldb_property_value(db, NULL) == NULL);

    const char* starts[3] = {"key000000", "zzz1", NULL};
    size_t start_lens[3] = {9, 4, 3};
    const char* limits[3] = {"key003000", "zzz2", "b"};
    size_t limit_lens[3] = {9, 4, 1};
    uint64_t sizes[3] = {7, 7, 7};
    leveldb_approximate_sizes(db, 3, starts, start_lens, limits, limit_lens, sizes);
    CHECK(sizes[0] > 200000); /* 3000 values of 100 bytes, uncompressed */
    CHECK(sizes[0] < 1000000);
    CHECK(sizes[1] == 0);
    CHECK(sizes[2] == 0); /* a NULL key with a length: 0 */
    check_get(db, ro, "key001234", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
  }
  printf("ok compact-property-sizes\n");

  /* ---- close, repair, reopen, error_if_exists, destroy ---- */
  leveldb_close(db);
  leveldb_repair_db(options, dbname, &err);
  CHECK_NO_ERROR(err);
  leveldb_options_set_create_if_missing(options, 0);
  db = leveldb_open(options, dbname, &err);
  CHECK_NO_ERROR(err);
  check_get(db, ro, "foo", "changed");
  check_get(db, ro, "key002999", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
  leveldb_close(db);
  leveldb_options_set_error_if_exists(options, 1);
  db = leveldb_open(options, dbname, &err);
  CHECK(db == NULL && starts_with(err, "Invalid argument: "));
  leveldb_free(err);
  err = NULL;
  leveldb_options_set_error_if_exists(options, 0);
  leveldb_destroy_db(options, dbname, &err);
  CHECK_NO_ERROR(err);
  db = leveldb_open(options, dbname, &err);
  CHECK(db == NULL && err != NULL);
  leveldb_free(err);
  err = NULL;
  {
    /* An empty directory is destroyed (removed); one holding a file of another kind is
     * refused and kept. */
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && touch '%s/notes.txt'", path_of("other"),
             path_of("other"));
    CHECK(system(cmd) == 0);
    leveldb_destroy_db(options, path_of("other"), &err);
    CHECK(starts_with(err, "Invalid argument: "));
    leveldb_free(err);
    err = NULL;
    snprintf(cmd, sizeof cmd, "test -f '%s/notes.txt' && rm '%s/notes.txt'", path_of("other"),
             path_of("other"));
    CHECK(system(cmd) == 0);
    leveldb_destroy_db(options, path_of("other"), &err);
    CHECK_NO_ERROR(err);
    snprintf(cmd, sizeof cmd, "test ! -e '%s'", path_of("other"));
    CHECK(system(cmd) == 0);
  }
  leveldb_repair_db(options, NULL, &err);
  CHECK(starts_with(err, "Invalid argument: "));
  leveldb_free(err);
  err = NULL;
  printf("ok repair-destroy\n");

  /* ---- a comparator from C callbacks ---- */
  {
    cmp_state cs = {0, 0};
    leveldb_comparator_t* cmp = leveldb_comparator_create(&cs, cmp_destroy, cmp_compare, cmp_name);
    CHECK(cmp != NULL);
    CHECK(leveldb_comparator_create(&cs, cmp_destroy, NULL, cmp_name) == NULL);
    leveldb_options_t* o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    leveldb_options_set_comparator(o, cmp);
    const char* name = path_of("reverse");
    leveldb_t* rdb = leveldb_open(o, name, &err);
    CHECK_NO_ERROR(err);
    leveldb_put(rdb, wo, "a", 1, "1", 1, &err);
    leveldb_put(rdb, wo, "c", 1, "3", 1, &err);
    leveldb_put(rdb, wo, "b", 1, "2", 1, &err);
    CHECK_NO_ERROR(err);
    char buf[256];
    scan_forward(rdb, ro, buf, sizeof buf);
    CHECK(strcmp(buf, "c=3,b=2,a=1,") == 0);
    leveldb_compact_range(rdb, NULL, 0, NULL, 0); /* into a table, in that order */
    scan_forward(rdb, ro, buf, sizeof buf);
    CHECK(strcmp(buf, "c=3,b=2,a=1,") == 0);
    leveldb_iterator_t* it = leveldb_create_iterator(rdb, ro);
    leveldb_iter_seek(it, "bb", 2); /* first key at or after "bb" in descending order: "b" */
    size_t len;
    const char* k = leveldb_iter_key(it, &len);
    CHECK(len == 1 && k[0] == 'b');
    leveldb_iter_destroy(it);
    leveldb_close(rdb);
    CHECK(cs.compares > 0);

    /* The order's name is in the database: the bytewise order cannot open it. */
    leveldb_options_set_comparator(o, NULL);
    rdb = leveldb_open(o, name, &err);
    CHECK(rdb == NULL && starts_with(err, "Invalid argument: "));
    leveldb_free(err);
    err = NULL;

    CHECK(cs.destroyed == 0);
    leveldb_options_destroy(o); /* options do not run the destructor */
    CHECK(cs.destroyed == 0);
    leveldb_comparator_destroy(cmp);
    CHECK(cs.destroyed == 1);
  }
  printf("ok comparator\n");

  /* ---- a filter policy from C callbacks ---- */
  {
    filter_state fs = {0, 0, 0, 0};
    leveldb_filterpolicy_t* policy =
        leveldb_filterpolicy_create(&fs, filter_destroy, filter_create, filter_match, filter_name);
    CHECK(policy != NULL);
    CHECK(leveldb_filterpolicy_create(&fs, filter_destroy, filter_create, NULL, filter_name) == NULL);
    leveldb_options_t* o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    leveldb_options_set_filter_policy(o, policy);
    const char* name = path_of("filtered");
    leveldb_t* fdb = leveldb_open(o, name, &err);
    CHECK_NO_ERROR(err);
    leveldb_put(fdb, wo, "apple", 5, "red", 3, &err);
    leveldb_put(fdb, wo, "pear", 4, "green", 5, &err);
    CHECK_NO_ERROR(err);
    leveldb_compact_range(fdb, NULL, 0, NULL, 0);
    CHECK(fs.created > 0);
    check_get(fdb, ro, "apple", "red");
    check_get(fdb, ro, "banana", NULL);
    CHECK(fs.probed > 0);
    /* A filter that says "absent" for everything hides every key in tables: reads use it. */
    __atomic_store_n(&fs.lie, 1, __ATOMIC_RELAXED);
    check_get(fdb, ro, "apple", NULL);
    check_get(fdb, ro, "pear", NULL);
    __atomic_store_n(&fs.lie, 0, __ATOMIC_RELAXED);
    check_get(fdb, ro, "pear", "green");
    leveldb_close(fdb);
    leveldb_destroy_db(o, name, &err);
    CHECK_NO_ERROR(err);
    leveldb_options_destroy(o);
    CHECK(fs.destroyed == 0);
    leveldb_filterpolicy_destroy(policy);
    CHECK(fs.destroyed == 1);
  }
  printf("ok filterpolicy\n");

  /* ---- the bloom filter ---- */
  {
    leveldb_filterpolicy_t* bloom = leveldb_filterpolicy_create_bloom(10);
    CHECK(bloom != NULL);
    leveldb_options_t* o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    leveldb_options_set_filter_policy(o, bloom);
    leveldb_options_set_compression(o, leveldb_snappy_compression);
    const char* name = path_of("bloom");
    leveldb_t* bdb = leveldb_open(o, name, &err);
    CHECK_NO_ERROR(err);
    char key[32];
    for (int i = 0; i < 500; i++) {
      snprintf(key, sizeof key, "b%05d", i);
      leveldb_put(bdb, NULL, key, strlen(key), key, strlen(key), &err);
      CHECK_NO_ERROR(err);
    }
    leveldb_compact_range(bdb, NULL, 0, NULL, 0);
    check_get(bdb, ro, "b00042", "b00042");
    check_get(bdb, ro, "b00042x", NULL);
    char* prop = leveldb_property_value(bdb, "leveldb.sstables");
    CHECK(prop != NULL);
    leveldb_free(prop);
    leveldb_close(bdb);
    leveldb_destroy_db(o, name, &err);
    CHECK_NO_ERROR(err);
    leveldb_options_destroy(o);
    leveldb_filterpolicy_destroy(bloom);
  }
  printf("ok bloom\n");

  /* ---- threads: four writers and readers on one database, with a C comparator and a C
   * filter policy that flushes and compactions call from strata's background thread ---- */
  {
    cmp_state cs = {0, 0};
    filter_state fs = {0, 0, 0, 0};
    leveldb_comparator_t* cmp = leveldb_comparator_create(&cs, cmp_destroy, cmp_compare, cmp_name);
    leveldb_filterpolicy_t* policy =
        leveldb_filterpolicy_create(&fs, filter_destroy, filter_create, filter_match, filter_name);
    leveldb_options_t* o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    leveldb_options_set_comparator(o, cmp);
    leveldb_options_set_filter_policy(o, policy);
    leveldb_options_set_write_buffer_size(o, 64 << 10); /* flushes while the threads write */
    const char* name = path_of("threads");
    leveldb_t* tdb = leveldb_open(o, name, &err);
    CHECK_NO_ERROR(err);
    pthread_t threads[4];
    worker workers[4];
    for (int i = 0; i < 4; i++) {
      workers[i].db = tdb;
      workers[i].id = i + 1;
      workers[i].failures = 0;
      CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
      CHECK(pthread_join(threads[i], NULL) == 0);
      CHECK(workers[i].failures == 0);
    }
    leveldb_compact_range(tdb, NULL, 0, NULL, 0);
    CHECK(__atomic_load_n(&fs.created, __ATOMIC_RELAXED) > 0);
    /* Every key, in the comparator's (descending) order. */
    leveldb_iterator_t* it = leveldb_create_iterator(tdb, NULL);
    int n = 0;
    char prev[32] = "";
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
      size_t kl;
      const char* k = leveldb_iter_key(it, &kl);
      char cur[32];
      snprintf(cur, sizeof cur, "%.*s", (int)kl, k);
      CHECK(n == 0 || strcmp(prev, cur) > 0);
      memcpy(prev, cur, sizeof cur);
      n++;
    }
    CHECK(n == 4 * WORKER_KEYS);
    leveldb_iter_destroy(it);
    leveldb_close(tdb);
    leveldb_destroy_db(o, name, &err);
    CHECK_NO_ERROR(err);
    leveldb_options_destroy(o);
    leveldb_comparator_destroy(cmp);
    leveldb_filterpolicy_destroy(policy);
    CHECK(cs.destroyed == 1 && fs.destroyed == 1);
  }
  printf("ok threads\n");

  leveldb_options_destroy(options);
  leveldb_readoptions_destroy(ro);
  leveldb_writeoptions_destroy(wo);
  leveldb_cache_destroy(cache);
  leveldb_env_destroy(env);
  printf("PASS\n");
  return 0;
}
