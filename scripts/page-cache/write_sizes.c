// SPDX-License-Identifier: MIT OR Apache-2.0
// What the size of sequential buffered writes costs in the page cache (docs/benchmarks.md,
// section (30)): writes 64 MiB to a new file SIZE bytes at a time, five times, and prints
// the best time per MiB. Build: gcc -O2 -o write_sizes write_sizes.c;
// run: ./write_sizes SIZE DIR (e.g. 65536, 65000, 4000, 100061, 102400).
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SIZE DIR\n", argv[0]);
        return 2;
    }
    long size = atol(argv[1]);
    if (size <= 0 || size > (1 << 21)) {
        fprintf(stderr, "SIZE must be 1 to 2097152\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/write_sizes.tmp", argv[2]);
    const long total = 64L << 20;
    char *buf = malloc(1 << 21);
    memset(buf, 3, 1 << 21);
    double best = 1e18;
    for (int rep = 0; rep < 5; rep++) {
        int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0) {
            perror(path);
            return 1;
        }
        double start = now_us();
        for (long off = 0; off < total; off += size) {
            if (write(fd, buf, size) != size) {
                perror("write");
                return 1;
            }
        }
        double t = now_us() - start;
        if (t < best) best = t;
        close(fd);
        unlink(path);
    }
    printf("writes of %ld bytes: %.1f us per MiB\n", size, best / 64);
    free(buf);
    return 0;
}
