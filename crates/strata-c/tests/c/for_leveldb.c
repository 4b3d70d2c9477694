/* SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * A program written for LevelDB's C API, using nothing but <leveldb/c.h>. tests/c_api.rs
 * builds it unchanged twice, linked with -lleveldb and with -lstrata_c, and compares what the
 * two print; a database written by either is then read by the other.
 *
 *   for_leveldb write DIR   creates a database in DIR and prints what it wrote and read
 *   for_leveldb read DIR    opens the database in DIR and prints its contents
 *
 * Exit status 0 on success, 1 on an unexpected error (printed).
 */
#include <leveldb/c.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die_on(char* err, const char* what) {
  if (err != NULL) {
    printf("unexpected error in %s: %s\n", what, err);
    exit(1);
  }
}

/* The part of an error string before its first ':', which names its kind in LevelDB. */
static void print_error_kind(const char* what, char* err) {
  if (err == NULL) {
    printf("%s: no error\n", what);
    return;
  }
  const char* colon = strchr(err, ':');
  printf("%s: error kind \"%.*s\"\n", what, colon ? (int)(colon - err) : (int)strlen(err), err);
  leveldb_free(err);
}

static void print_get(leveldb_t* db, const leveldb_readoptions_t* ro, const char* key) {
  char* err = NULL;
  size_t len;
  char* v = leveldb_get(db, ro, key, strlen(key), &len, &err);
  die_on(err, "get");
  if (v == NULL) {
    printf("get %s: absent\n", key);
  } else {
    printf("get %s: %.*s\n", key, (int)len, v);
    leveldb_free(v);
  }
}

/* FNV-1a over every key and value, in scan order, with the count and first and last keys. */
static void print_scan(leveldb_t* db, const leveldb_readoptions_t* ro) {
  leveldb_iterator_t* it = leveldb_create_iterator(db, ro);
  uint64_t h = 1469598103934665603ULL;
  int n = 0;
  for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
    size_t kl, vl;
    const char* k = leveldb_iter_key(it, &kl);
    const char* v = leveldb_iter_value(it, &vl);
    for (size_t i = 0; i < kl; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    for (size_t i = 0; i < vl; i++) h = (h ^ (unsigned char)v[i]) * 1099511628211ULL;
    n++;
  }
  char* err = NULL;
  leveldb_iter_get_error(it, &err);
  die_on(err, "scan");
  printf("scan: %d entries, hash %016llx\n", n, (unsigned long long)h);

  printf("last five, backward:");
  leveldb_iter_seek_to_last(it);
  for (int i = 0; i < 5 && leveldb_iter_valid(it); i++, leveldb_iter_prev(it)) {
    size_t kl;
    const char* k = leveldb_iter_key(it, &kl);
    printf(" %.*s", (int)kl, k);
  }
  printf("\n");
  leveldb_iter_seek(it, "user0500", 8);
  if (leveldb_iter_valid(it)) {
    size_t kl;
    const char* k = leveldb_iter_key(it, &kl);
    printf("seek user0500: %.*s\n", (int)kl, k);
  }
  leveldb_iter_destroy(it);
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "read") != 0)) {
    fprintf(stderr, "usage: %s write|read DIR\n", argv[0]);
    return 2;
  }
  const char* dir = argv[2];
  char* err = NULL;
  leveldb_filterpolicy_t* bloom = leveldb_filterpolicy_create_bloom(10);
  leveldb_options_t* options = leveldb_options_create();
  leveldb_options_set_filter_policy(options, bloom);
  leveldb_readoptions_t* ro = leveldb_readoptions_create();
  leveldb_writeoptions_t* wo = leveldb_writeoptions_create();
  leveldb_t* db;

  printf("api version %d.%d\n", leveldb_major_version(), leveldb_minor_version());

  if (strcmp(argv[1], "write") == 0) {
    db = leveldb_open(options, dir, &err);
    print_error_kind("open without create_if_missing", err);
    err = NULL;
    leveldb_options_set_create_if_missing(options, 1);
    leveldb_options_set_write_buffer_size(options, 64 << 10); /* several tables */
    db = leveldb_open(options, dir, &err);
    die_on(err, "open");

    char key[32], val[64];
    for (int i = 0; i < 2000; i++) {
      snprintf(key, sizeof key, "user%04d", (i * 7919) % 2000);
      snprintf(val, sizeof val, "value-%d-%0*d", i, 20 + i % 17, i);
      leveldb_put(db, wo, key, strlen(key), val, strlen(val), &err);
      die_on(err, "put");
    }
    for (int i = 0; i < 2000; i += 3) {
      snprintf(key, sizeof key, "user%04d", i);
      leveldb_delete(db, wo, key, strlen(key), &err);
      die_on(err, "delete");
    }
    leveldb_writebatch_t* batch = leveldb_writebatch_create();
    leveldb_writebatch_put(batch, "batch-a", 7, "1", 1);
    leveldb_writebatch_put(batch, "batch-b", 7, "2", 1);
    leveldb_writebatch_delete(batch, "user0001", 8);
    leveldb_write(db, wo, batch, &err);
    die_on(err, "write");
    leveldb_writebatch_destroy(batch);

    const leveldb_snapshot_t* snap = leveldb_create_snapshot(db);
    leveldb_put(db, wo, "user0002", 8, "after the snapshot", 18, &err);
    die_on(err, "put");
    leveldb_readoptions_set_snapshot(ro, snap);
    print_get(db, ro, "user0002");
    leveldb_readoptions_set_snapshot(ro, NULL);
    leveldb_release_snapshot(db, snap);

    leveldb_compact_range(db, "user0000", 8, "user0999", 8);
    leveldb_close(db);

    leveldb_options_set_error_if_exists(options, 1);
    db = leveldb_open(options, dir, &err);
    print_error_kind("open with error_if_exists", err);
    err = NULL;
    leveldb_options_set_error_if_exists(options, 0);
    leveldb_options_set_create_if_missing(options, 0);
  }

  db = leveldb_open(options, dir, &err);
  die_on(err, "reopen");
  leveldb_t* twice = leveldb_open(options, dir, &err);
  print_error_kind("second open of an open database", err);
  err = NULL;
  if (twice != NULL) leveldb_close(twice);
  print_get(db, ro, "user0002");
  print_get(db, ro, "user0003");
  print_get(db, ro, "user1999");
  print_get(db, ro, "batch-b");
  print_get(db, ro, "user0001");
  print_get(db, ro, "nobody");
  print_scan(db, ro);
  leveldb_close(db);

  leveldb_options_destroy(options);
  leveldb_filterpolicy_destroy(bloom);
  leveldb_readoptions_destroy(ro);
  leveldb_writeoptions_destroy(wo);
  return 0;
}
