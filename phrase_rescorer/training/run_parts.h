/* run_parts(work, parts_at, size, threads): work(parts_at + t * size) for t < parts(threads), the
   caller's thread among them; returns 0, or -1 where a pthread could not be started (its part then
   runs on the caller's). parts(threads): the count clamped to 1..MAX_PARTS (64), the size of the
   callers' job arrays. omp_runtime(), in an OpenMP build: where the library's omp_get_max_threads
   lives (c_library.py keeps an OpenMP build only where that is torch's own runtime). */
#include <pthread.h>
#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
void *omp_runtime(void) { return (void *)&omp_get_max_threads; }
#endif

/* The callers' job arrays hold MAX_PARTS parts; parts(threads): 1..MAX_PARTS. */
#define MAX_PARTS 64
static int parts(int threads) { return threads < 1 ? 1 : threads > MAX_PARTS ? MAX_PARTS : threads; }

static int run_parts(void *(*work)(void *), char *parts_at, size_t size, int threads) {
    threads = parts(threads);
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int t = 0; t < threads; t++) work(parts_at + t * size);
    return 0;
#else
    pthread_t ids[MAX_PARTS];
    int started[MAX_PARTS] = {0}, status = 0;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&ids[t], 0, work, parts_at + t * size) == 0) started[t] = 1;
        else status = -1;
    }
    work(parts_at);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(ids[t], 0);
        else work(parts_at + t * size);
    }
    return status;
#endif
}
