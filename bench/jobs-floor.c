/* The read floor of per-job collection: what the kernel charges for the jobs' files alone.
 *
 *   cc -O2 -Wall -o jobs-floor bench/jobs-floor.c
 *   jobs-floor LIST INTERVAL_S
 *
 * Opens every file named in LIST (one path a line; a file that does not exist is skipped, as
 * the agent skips a file a job does not have; any other failure to open ends it, status 1) once, keeps the descriptors, and then once per
 * INTERVAL_S seconds, on the interval's boundary, reads each from offset 0 with pread until a
 * short read (4 KiB buffer): what the agent's reading of the same files through its kept
 * descriptors costs at the least, with no parsing, no arithmetic and no line written. Runs
 * until SIGTERM or SIGINT; prints the number of files kept, and on exit the readings made.
 * CPU is measured from outside (bench/jobs-cost.sh: schedstat, as for the agents).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_sig(int s) { (void)s; stop = 1; }
static char buf[4096];

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: jobs-floor LIST INTERVAL_S\n");
		return 2;
	}
	long interval = atol(argv[2]);
	if (interval < 1) interval = 1;
	/* 7 descriptors a job: past the soft limit (often 1024) the opens would fail. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	FILE *f = fopen(argv[1], "r");
	if (!f) { perror(argv[1]); return 1; }
	int *fds = NULL;
	size_t n = 0, cap = 0;
	char line[4096];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!line[0]) continue;
		int fd = open(line, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			/* A file the job does not have is skipped, as the agent skips it; any other
			 * failure would make the floor read less than the agent: stop. */
			if (errno == ENOENT) continue;
			perror(line);
			return 1;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			fds = realloc(fds, cap * sizeof *fds);
			if (!fds) return 1;
		}
		fds[n++] = fd;
	}
	fclose(f);
	printf("jobs-floor: %zu files kept open\n", n);
	fflush(stdout);
	struct sigaction sa = {0};
	sa.sa_handler = on_sig;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	long readings = 0;
	unsigned long long bytes = 0;
	while (!stop) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		/* Sleep to the next boundary of the interval (the agent's reading is on the clock too). */
		long long next_ns = ((long long)now.tv_sec / interval + 1) * interval * 1000000000LL;
		long long left = next_ns - ((long long)now.tv_sec * 1000000000LL + now.tv_nsec);
		struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
		if (nanosleep(&ts, NULL) != 0 && errno == EINTR) continue;
		for (size_t i = 0; i < n; i++) {
			off_t off = 0;
			for (;;) {
				ssize_t r = pread(fds[i], buf, sizeof buf, off);
				if (r > 0) bytes += (unsigned long long)r;
				if (r < (ssize_t)sizeof buf) break;
				off += r;
			}
		}
		readings++;
	}
	printf("jobs-floor: %ld readings, %llu bytes\n", readings, bytes);
	return 0;
}
