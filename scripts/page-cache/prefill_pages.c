// SPDX-License-Identifier: MIT OR Apache-2.0
// Whether making a blob file's page-cache pages ahead of its 100 KB appends pays
// (docs/benchmarks.md, section (32)). Writes 6 files of 16 MiB in appends of 100,061 bytes
// (a blob record of a 100,000-byte value), as strata's blob writer does, and prints the mean
// time of an append and the wall time per append. MODE:
//   0  a new file, 4 MiB reserved ahead with fallocate (strata's blob writer)
//   1  the same, into pages made beforehand by writing zeros over the whole file (not timed):
//      what an append costs once its pages exist
//   2  as 1, with the zeros' writing timed (the writer makes its own pages)
//   3  a second thread writes zeros 1 MiB at a time, up to 4 MiB ahead of the appends, into
//      the file being appended to
//   4  a second thread makes the next file whole (zeros) while the appends fill this one;
//      an append that finds its next file not ready makes one as mode 0 does
// Build: gcc -O2 -pthread -o prefill_pages prefill_pages.c; run: ./prefill_pages MODE DIR.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FILES 6
#define RECORD 100061L
#define FILE_BYTES (16L << 20)
#define RESERVE (4L << 20)
#define PIECE (1L << 20)

static const char *dir;
static char *zeros;
static _Atomic long appended_to, filled_to;
static _Atomic int active_fd = -1, done;
static _Atomic int ready[FILES], taken[FILES];

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void file_path(char *out, size_t len, int n) { snprintf(out, len, "%s/prefill%d.tmp", dir, n); }

static void fill(int fd, long from, long to) {
    for (long off = from; off < to; off += PIECE) {
        if (pwrite(fd, zeros, PIECE, off) != PIECE) {
            perror("pwrite zeros");
            exit(1);
        }
    }
}

// Mode 3: zeros ahead of the appends in the same file. A model of the cost only: nothing
// stops an append from overtaking a fill in flight (a real writer would need a lock).
static void *fill_ahead(void *arg) {
    (void)arg;
    while (!done) {
        int fd = active_fd;
        long from = filled_to, appended = appended_to;
        if (fd < 0 || from >= FILE_BYTES || from >= appended + RESERVE) {
            usleep(20);
            continue;
        }
        if (from < appended + RECORD) from = appended + RECORD;
        fill(fd, from, from + PIECE);
        filled_to = from + PIECE;
    }
    return NULL;
}

// Mode 4: each next file made whole while the writer fills the one before it.
static void *fill_spares(void *arg) {
    (void)arg;
    for (int n = 1; n < FILES; n++) {
        while (!taken[n - 1]) usleep(50);
        char path[4096];
        file_path(path, sizeof path, n);
        int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
        fill(fd, 0, FILE_BYTES);
        close(fd);
        ready[n] = 1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODE DIR\n", argv[0]);
        return 2;
    }
    int mode = atoi(argv[1]);
    dir = argv[2];
    char *record = malloc(RECORD);
    memset(record, 7, RECORD);
    zeros = calloc(1, PIECE);
    pthread_t helper;
    if (mode == 3) pthread_create(&helper, NULL, fill_ahead, NULL);
    if (mode == 4) pthread_create(&helper, NULL, fill_spares, NULL);
    double appending = 0, start = now_us();
    long appends = 0, not_ready = 0;
    for (int n = 0; n < FILES; n++) {
        char path[4096];
        file_path(path, sizeof path, n);
        int fd;
        if (mode == 4 && n > 0 && ready[n]) {
            fd = open(path, O_RDWR);
        } else {
            not_ready += mode == 4 && n > 0;
            fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
        }
        taken[n] = 1;
        if (mode == 1 || mode == 2) {
            double t = now_us();
            fill(fd, 0, FILE_BYTES);
            if (mode == 2) appending += now_us() - t;
        }
        appended_to = 0;
        filled_to = 0;
        active_fd = fd;
        long off = 0, reserved = 0;
        while (off + RECORD <= FILE_BYTES) {
            double t = now_us();
            if ((mode == 0 || mode == 3 || mode == 4) && off + RECORD > reserved) {
                fallocate(fd, FALLOC_FL_KEEP_SIZE, reserved, RESERVE);
                reserved += RESERVE;
            }
            if (pwrite(fd, record, RECORD, off) != RECORD) {
                perror("pwrite");
                return 1;
            }
            appending += now_us() - t;
            appends++;
            off += RECORD;
            appended_to = off;
        }
        active_fd = -1;
        usleep(200); // lets a mode-3 fill in flight end before the file is closed
        close(fd);
    }
    double wall = now_us() - start;
    done = 1;
    if (mode == 3 || mode == 4) pthread_join(helper, NULL);
    printf("mode %d: %ld appends, %.2f us each, wall %.2f us per append", mode, appends,
           appending / appends, wall / appends);
    if (mode == 4) printf(", next file not ready %ld of %d", not_ready, FILES - 1);
    printf("\n");
    for (int n = 0; n < FILES; n++) {
        char path[4096];
        file_path(path, sizeof path, n);
        unlink(path);
    }
    return 0;
}
