/* What one small-file read costs the kernel, four ways, for the agent's choice of read path.
 *
 *   gcc -O2 -o /tmp/read-walk bench/read-walk.c
 *   /tmp/read-walk /sys/block/vda/queue/scheduler      (a sysfs attribute)
 *   /tmp/read-walk /proc/uptime                        (a one-record procfs file)
 *   /tmp/read-walk FILE ROUNDS                         (fewer rounds, e.g. for a smoke run)
 *
 * Prints microseconds per read for: the full path, then read to the end (open, read, the read
 * that returns 0, close: what a read-to-end costs); the full path, one read (the end left out);
 * and both again opened relative to a kept descriptor of the file's directory (a shorter path
 * walk). 200,000 rounds each unless ROUNDS says otherwise. Exits 1 when a file cannot be read.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static char buf[65536];

static double run(int dir, const char *path, int to_end, int n) {
    double t0 = now_ns();
    for (int i = 0; i < n; i++) {
        int fd = dir >= 0 ? openat(dir, path, O_RDONLY | O_CLOEXEC) : open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            perror(path);
            return -1;
        }
        ssize_t r = read(fd, buf, sizeof buf);
        while (to_end && r > 0)
            r = read(fd, buf, sizeof buf);
        close(fd);
    }
    return (now_ns() - t0) / n / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s FILE [ROUNDS]\n", argv[0]);
        return 2;
    }
    const int n = argc == 3 ? atoi(argv[2]) : 200000;
    if (n <= 0) {
        fprintf(stderr, "ROUNDS must be a positive number\n");
        return 2;
    }
    char d[4096], b[4096];
    snprintf(d, sizeof d, "%s", argv[1]);
    snprintf(b, sizeof b, "%s", argv[1]);
    int dir = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        perror(d);
        return 1;
    }
    const char *name = basename(b);
    double t[4] = {run(-1, argv[1], 1, n), run(-1, argv[1], 0, n), run(dir, name, 1, n),
                   run(dir, name, 0, n)};
    for (int i = 0; i < 4; i++)
        if (t[i] < 0)
            return 1;
    printf("%s: full path, to the end %.2f us; full path, one read %.2f us; "
           "from the directory, to the end %.2f us; from the directory, one read %.2f us\n",
           argv[1], t[0], t[1], t[2], t[3]);
    return 0;
}
