/* What one read of the thread CPU clock costs: the agent reads it between one collector and the
 * next, for each collector's `<name>_cpu_us` on the `agent` line (docs/performance.md,
 * "Self-cost per collector").
 *
 *   cc -O2 -o clock-cost bench/clock-cost.c && ./clock-cost
 *
 * Prints the wall time per read and the CPU time per read (the process CPU clock around the
 * loop), over 2,000,000 reads. */
#include <stdio.h>
#include <time.h>

static double ns(struct timespec a, struct timespec b) {
  return (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
}

int main(void) {
  const int n = 2000000;
  struct timespec a, b, t;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < n; i++) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("CLOCK_THREAD_CPUTIME_ID: %.0f ns of wall time per read\n", ns(a, b) / n);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  for (int i = 0; i < n; i++) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  printf("CLOCK_THREAD_CPUTIME_ID: %.0f ns of CPU per read\n", ns(a, b) / n);
  return 0;
}
