// SPDX-License-Identifier: MIT OR Apache-2.0
// Times libsnappy's whole-block decode (snappy_uncompress) over the blocks extract_blocks
// dumped (docs/benchmarks.md, section (35)): the first N blocks, REPS times over.
// Build: gcc -O2 -o libsnappy_decode libsnappy_decode.c -lsnappy
// Run:   ./libsnappy_decode BLOCKS N REPS   (64 5000: in the CPU cache; 100000 3: all of them)
#include <snappy-c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s BLOCKS N REPS\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[2]), reps = atoi(argv[3]);
  FILE *f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 1; }
  int cap = 1 << 20, count = 0;
  char **blocks = malloc(sizeof(char *) * cap);
  uint32_t *lens = malloc(sizeof(uint32_t) * cap);
  uint32_t len;
  while (count < cap && fread(&len, 4, 1, f) == 1) {
    blocks[count] = malloc(len);
    if (fread(blocks[count], 1, len, f) != len) break;
    lens[count++] = len;
  }
  if (n > count) n = count;
  static char out[1 << 17];
  size_t total = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < n; i++) {
      size_t out_len = sizeof out;
      snappy_uncompress(blocks[i], lens[i], out, &out_len);
      total += out_len;
    }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
  printf("libsnappy: %d blocks x %d: %.1f ns a block, %.0f bytes a block\n", n, reps,
         ns / ((double)n * reps), (double)total / ((double)n * reps));
  return 0;
}
