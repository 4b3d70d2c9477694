// SPDX-License-Identifier: MIT OR Apache-2.0
// How a mapped log's pages are best made (docs/benchmarks.md, section (30)): 128 chunks of
// 1 MiB, each allocated with fallocate and mapped shared, then filled with 130-byte records
// 64 KiB at a time after one of:
//   0  madvise(MADV_POPULATE_WRITE) of the 64 KiB (strata before bfe690b)
//   1  pwrite of 64 KiB of zeros, then the populate (strata since bfe690b)
//   2  pwrite of 64 KiB of zeros alone (stores fault page by page)
//   3  pwrite of the whole chunk's zeros at allocation, then the populates
// Prints the time per MiB. Build: gcc -O2 -o log_pages log_pages.c; run: ./log_pages MODE DIR
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static char zeros[1 << 20];

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODE DIR\n", argv[0]);
        return 2;
    }
    int mode = atoi(argv[1]);
    char path[4096];
    snprintf(path, sizeof path, "%s/log_pages.tmp", argv[2]);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    const long chunk = 1 << 20, step = 64 << 10;
    const int chunks = 128;
    double total = 0;
    for (int i = 0; i < chunks; i++) {
        double start = now_us();
        long off = (long)i * chunk;
        if (fallocate(fd, 0, off, chunk) != 0) {
            perror("fallocate");
            return 1;
        }
        if (mode == 3) pwrite(fd, zeros, chunk, off);
        char *m = mmap(0, chunk, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
        if (m == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        for (long k = 0; k < chunk / step; k++) {
            if (mode == 1 || mode == 2) pwrite(fd, zeros, step, off + k * step);
            if (mode != 2) madvise(m + k * step, step, MADV_POPULATE_WRITE);
            for (long b = 0; b < step; b += 130) {
                long n = step - b < 130 ? step - b : 130;
                memset(m + k * step + b, 7, n);
            }
        }
        munmap(m, chunk);
        total += now_us() - start;
    }
    printf("mode %d: %.1f us per MiB\n", mode, total / chunks);
    close(fd);
    unlink(path);
    return 0;
}
