// SPDX-License-Identifier: MIT OR Apache-2.0
// Dumps the Snappy-compressed data blocks of LevelDB-format tables (docs/benchmarks.md,
// section (35)), to time Snappy decoders on real blocks: reads each table's footer and index
// block (decompressing it if stored with Snappy), and for every data block stored with Snappy
// appends `u32 length ‖ bytes` to OUT.
// Build: gcc -O2 -o extract_blocks extract_blocks.c -lsnappy
// Run:   ./extract_blocks OUT DB/*.ldb
#include <snappy-c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t *varint(const uint8_t *p, uint64_t *v) {
  uint64_t r = 0;
  int shift = 0;
  while (*p & 0x80) {
    r |= (uint64_t)(*p & 0x7f) << shift;
    shift += 7;
    p++;
  }
  *v = r | (uint64_t)*p << shift;
  return p + 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s OUT TABLE...\n", argv[0]);
    return 2;
  }
  FILE *out = fopen(argv[1], "wb");
  long blocks = 0;
  for (int a = 2; a < argc; a++) {
    FILE *f = fopen(argv[a], "rb");
    if (!f) { perror(argv[a]); return 1; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *d = malloc(size);
    if (fread(d, 1, size, f) != (size_t)size) { perror("read"); return 1; }
    fclose(f);
    uint64_t meta_offset, meta_size, index_offset, index_size;
    const uint8_t *p = d + size - 48;
    p = varint(p, &meta_offset);
    p = varint(p, &meta_size);
    p = varint(p, &index_offset);
    varint(p, &index_size);
    uint8_t *index = d + index_offset;
    size_t index_len = index_size;
    if (d[index_offset + index_size] == 1) {
      size_t len;
      snappy_uncompressed_length((char *)d + index_offset, index_size, &len);
      index = malloc(len);
      snappy_uncompress((char *)d + index_offset, index_size, (char *)index, &len);
      index_len = len;
    }
    uint32_t restarts;
    memcpy(&restarts, index + index_len - 4, 4);
    const uint8_t *end = index + index_len - 4 - 4 * restarts;
    for (const uint8_t *q = index; q < end;) {
      uint64_t shared, non_shared, value_len, offset, stored;
      q = varint(q, &shared);
      q = varint(q, &non_shared);
      q = varint(q, &value_len);
      q += non_shared;
      varint(varint(q, &offset), &stored);
      q += value_len;
      if (d[offset + stored] == 1) {
        uint32_t len = (uint32_t)stored;
        fwrite(&len, 4, 1, out);
        fwrite(d + offset, 1, stored, out);
        blocks++;
      }
    }
    free(d);
  }
  fclose(out);
  fprintf(stderr, "%ld compressed blocks\n", blocks);
  return 0;
}
