/* The output layer's log-softmax and pick, and their gradient (target_log_probs.py). */
#include "run_parts.h"
#include <math.h>
#include <string.h>

#define LANES 16

/* e^x for x <= 0 (NaN stays NaN): Cephes' expf polynomial on x - k ln 2, scaled by 2^k; 0 below
   -87 (where e^x is under 2^-125). Written so that the compiler vectorizes it. */
static inline float exp_nonpositive(float x) {
    float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* rounded: 1.5 * 2^23 */
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int e = (x >= -87.0f ? (int)k : 0) + 127; /* 1..127 for -87 <= x <= 0; NaN: any */
    int bits = e << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : p * scale;
}

typedef struct {
    long start, end, V;
    float *logits;
    const float *bias;
    const long *tgt;
    float *mx, *ls, *picked; /* per row: the maximum of logits + bias, log sum exp(. - max) */
    const float *g;
    double *sums; /* this thread's V column sums */
    float *zsum;  /* per row: the sum of logits + bias (0: not wanted) */
    float spread, keep; /* label smoothing: g eps / K added off <pad>, g (1 - eps) at the target */
    long pad;
} job_t;

/* Rows start..end, z = logits + bias: mx = max z, ls = log sum_j exp(z_j - mx), picked = (z_t - mx) - ls
   (torch's order: the maximum taken off first, so that large logits lose no precision); zsum =
   sum_j z_j where wanted (label smoothing). */
static void *forward_rows(void *arg) {
    job_t *j = (job_t *)arg;
    long V = j->V, full = V - V % LANES;
    const float *restrict b = j->bias;
    for (long i = j->start; i < j->end; i++) {
        const float *restrict l = j->logits + i * V;
        float mx[LANES], sm[LANES], zs[LANES];
        for (int k = 0; k < LANES; k++) mx[k] = -INFINITY, sm[k] = 0.0f, zs[k] = 0.0f;
        for (long c = 0; c < full; c += LANES)
            for (int k = 0; k < LANES; k++) {
                float z = l[c + k] + b[c + k];
                mx[k] = z > mx[k] ? z : mx[k];
            }
        for (long c = full; c < V; c++) {
            float z = l[c] + b[c];
            mx[c - full] = z > mx[c - full] ? z : mx[c - full];
        }
        float m = mx[0];
        for (int k = 1; k < LANES; k++) m = mx[k] > m ? mx[k] : m;
        if (!(m > -INFINITY)) m = 0.0f; /* every logit -inf: the sum is 0, lse -inf */
        for (long c = 0; c < full; c += LANES)
            for (int k = 0; k < LANES; k++) sm[k] += exp_nonpositive(l[c + k] + b[c + k] - m);
        for (long c = full; c < V; c++) sm[c - full] += exp_nonpositive(l[c] + b[c] - m);
        if (j->zsum) {
            for (long c = 0; c < full; c += LANES)
                for (int k = 0; k < LANES; k++) zs[k] += l[c + k] + b[c + k];
            for (long c = full; c < V; c++) zs[c - full] += l[c] + b[c];
            float z = 0.0f;
            for (int k = 0; k < LANES; k++) z += zs[k];
            j->zsum[i] = z;
        }
        float s = 0.0f;
        for (int k = 0; k < LANES; k++) s += sm[k];
        float ls = logf(s);
        long t = j->tgt[i];
        j->mx[i] = m;
        j->ls[i] = ls;
        j->picked[i] = ((l[t] + b[t]) - m) - ls;
    }
    return 0;
}

/* Rows start..end: logits become exp((z - mx) - ls) * -g, + g at the target; their column sums
   added to dbias. With label smoothing (spread > 0): + g eps / K off <pad>, + g (1 - eps) at the
   target instead. */
static void *backward_rows(void *arg) {
    job_t *j = (job_t *)arg;
    long V = j->V;
    const float *restrict b = j->bias;
    double *restrict db = j->sums;
    for (long c = 0; c < V; c++) db[c] = 0.0;
    for (long i = j->start; i < j->end; i++) {
        float *restrict l = j->logits + i * V;
        float m = j->mx[i], ls = j->ls[i], neg = -j->g[i];
        long t = j->tgt[i];
        if (j->spread == 0.0f) {
            for (long c = 0; c < V; c++) {
                float d = exp_nonpositive(((l[c] + b[c]) - m) - ls) * neg;
                l[c] = d;
                db[c] += d;
            }
            l[t] += j->g[i];
            db[t] += j->g[i];
            continue;
        }
        float add = j->g[i] * j->spread, at = j->g[i] * j->keep;
        for (long c = 0; c < V; c++) {
            float d = exp_nonpositive(((l[c] + b[c]) - m) - ls) * neg + add;
            l[c] = d;
            db[c] += d;
        }
        l[j->pad] -= add;
        db[j->pad] -= add;
        l[t] += at;
        db[t] += at;
    }
    return 0;
}

/* Rows 0..n of `job` split over `threads` parts (run_parts: c_library); part t sums into its own
   V doubles at job.sums + t * V. */
static int on_threads(void *(*work)(void *), job_t job, int threads, long n) {
    job_t jobs[MAX_PARTS];
    for (int t = 0; t < threads; t++) {
        jobs[t] = job;
        jobs[t].start = n * t / threads, jobs[t].end = n * (t + 1) / threads;
        if (job.sums) jobs[t].sums = job.sums + t * job.V;
    }
    return run_parts(work, (char *)jobs, sizeof(job_t), threads);
}

int out_forward(long n, long V, float *logits, const float *bias, const long *tgt, float *mx, float *ls,
                float *picked, float *zsum, int threads) {
    job_t job = {0, 0, V, logits, bias, tgt, mx, ls, picked, 0, 0, zsum, 0.0f, 1.0f, 0};
    return on_threads(forward_rows, job, parts(threads), n);
}

/* sums: threads * V doubles of scratch; dbias: the V column sums (in double, added in thread order). */
int out_backward(long n, long V, float *logits, const float *bias, const long *tgt, const float *mx,
                 const float *ls, const float *g, double *sums, float *dbias, float spread, float keep,
                 long pad, int threads) {
    threads = parts(threads);
    job_t job = {0, 0, V, logits, bias, tgt, (float *)mx, (float *)ls, 0, g, sums, 0, spread, keep, pad};
    int status = on_threads(backward_rows, job, threads, n);
    for (int t = 1; t < threads; t++)
        for (long c = 0; c < V; c++) sums[c] += sums[t * V + c];
    for (long c = 0; c < V; c++) dbias[c] = (float)sums[c];
    return status;
}
