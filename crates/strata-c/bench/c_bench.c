/* SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * A small benchmark through LevelDB's C API, built unchanged against libleveldb and against
 * libstrata_c (scripts/c-bench.sh builds and runs both). In the spirit of LevelDB's db_bench:
 *
 *   fillrandom  N puts of 16-byte keys (random numbers below N) and 100-byte values, no sync
 *   readrandom  N gets of keys drawn the same way (about 63% of them present)
 *   readseq     one forward scan of the whole database with an iterator
 *
 * Usage: c_bench [--num=N] [--value_size=B] DIR   (DIR is destroyed first).
 * Prints "name micros/op" lines, and for readrandom how many keys were found.
 */
#include <leveldb/c.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_micros(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

/* xorshift64*: fixed seed, so both libraries get the same keys in the same order. */
static uint64_t next_random(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ULL;
}

static void die_on(char* err, const char* what) {
  if (err != NULL) {
    fprintf(stderr, "%s: %s\n", what, err);
    exit(1);
  }
}

int main(int argc, char** argv) {
  long num = 1000000;
  int value_size = 100;
  const char* dir = NULL;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--num=", 6) == 0) {
      num = atol(argv[i] + 6);
    } else if (strncmp(argv[i], "--value_size=", 13) == 0) {
      value_size = atoi(argv[i] + 13);
    } else if (argv[i][0] != '-' && dir == NULL) {
      dir = argv[i];
    } else {
      fprintf(stderr, "usage: %s [--num=N] [--value_size=B] DIR\n", argv[0]);
      return 2;
    }
  }
  if (dir == NULL || num <= 0 || num >= 10000000000000000L || value_size <= 0) {
    fprintf(stderr, "usage: %s [--num=N] [--value_size=B] DIR\n", argv[0]);
    return 2;
  }

  /* Values compress to about half, as db_bench's do: half random letters, half repeated. */
  char* value = malloc(value_size);
  for (int i = 0; i < value_size; i++)
    value[i] = i < value_size / 2 ? (char)('a' + next_random() % 26) : 'x';

  char* err = NULL;
  leveldb_options_t* options = leveldb_options_create();
  leveldb_destroy_db(options, dir, &err);
  die_on(err, "destroy");
  leveldb_options_set_create_if_missing(options, 1);
  leveldb_t* db = leveldb_open(options, dir, &err);
  die_on(err, "open");
  leveldb_writeoptions_t* wo = leveldb_writeoptions_create();
  leveldb_readoptions_t* ro = leveldb_readoptions_create();
  /* The same work for both: LevelDB's default is not to verify checksums, strata's is. */
  leveldb_readoptions_set_verify_checksums(ro, 0);

  char key[32]; /* 16 digits: num is below 10^16 */
  double start = now_micros();
  for (long i = 0; i < num; i++) {
    snprintf(key, sizeof key, "%016llu", (unsigned long long)(next_random() % num));
    leveldb_put(db, wo, key, 16, value, value_size, &err);
    die_on(err, "put");
  }
  printf("fillrandom %.3f micros/op\n", (now_micros() - start) / num);

  long found = 0;
  start = now_micros();
  for (long i = 0; i < num; i++) {
    snprintf(key, sizeof key, "%016llu", (unsigned long long)(next_random() % num));
    size_t len;
    char* v = leveldb_get(db, ro, key, 16, &len, &err);
    die_on(err, "get");
    if (v != NULL) {
      found++;
      leveldb_free(v);
    }
  }
  printf("readrandom %.3f micros/op (%ld of %ld found)\n", (now_micros() - start) / num, found, num);

  long entries = 0;
  size_t bytes = 0;
  start = now_micros();
  leveldb_iterator_t* it = leveldb_create_iterator(db, ro);
  for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
    size_t kl, vl;
    leveldb_iter_key(it, &kl);
    leveldb_iter_value(it, &vl);
    bytes += kl + vl;
    entries++;
  }
  leveldb_iter_get_error(it, &err);
  die_on(err, "scan");
  leveldb_iter_destroy(it);
  printf("readseq %.3f micros/op (%ld entries, %zu bytes)\n",
         (now_micros() - start) / (entries ? entries : 1), entries, bytes);

  leveldb_close(db);
  leveldb_destroy_db(options, dir, &err);
  die_on(err, "destroy");
  leveldb_options_destroy(options);
  leveldb_readoptions_destroy(ro);
  leveldb_writeoptions_destroy(wo);
  free(value);
  return 0;
}
