/* Adadelta's update as one loop (adadelta_loop.py). */
#include "run_parts.h"
#include <math.h>

typedef struct {
    float **p, **g, **sq, **acc;
    const long *n;
    int k;
    long start, end; /* this thread's elements, counted over all parameters */
    float rho, one_minus_rho, eps, neg_lr, scale;
} job_t;

/* torch/optim/adadelta.py, _single_tensor_adadelta, one element at a time:
   square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
   std = square_avg.add(eps).sqrt_()
   delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
   acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
   param.add_(delta, alpha=-lr)
   on grad * scale (clip_grad_norm_'s torch._foreach_mul_, one float32 product), with the
   multiply-adds that torch's vectorized kernels fuse, fused here too (addcmul:
   fmadd(value * t1, t2, self); add with alpha: fmadd(other, alpha, self)). The square roots
   are IEEE's, correctly rounded; torch's vectorized ones (Sleef's) may differ in the last bit. */
static void update(float *restrict p, const float *restrict g, float *restrict sq, float *restrict acc,
                   long n, float rho, float one_minus_rho, float eps, float neg_lr, float scale) {
    for (long i = 0; i < n; i++) {
        float gi = g[i] * scale;
        float s = fmaf(one_minus_rho * gi, gi, sq[i] * rho);
        sq[i] = s;
        float std = sqrtf(s + eps);
        float d = sqrtf(acc[i] + eps);
        d = d / std;
        d = d * gi;
        acc[i] = fmaf(one_minus_rho * d, d, acc[i] * rho);
        p[i] = fmaf(d, neg_lr, p[i]);
    }
}

static void *run(void *arg) {
    job_t *j = (job_t *)arg;
    long offset = 0;
    for (int t = 0; t < j->k; t++) {
        long lo = j->start > offset ? j->start : offset;
        long hi = j->end < offset + j->n[t] ? j->end : offset + j->n[t];
        if (lo < hi)
            update(j->p[t] + (lo - offset), j->g[t] + (lo - offset), j->sq[t] + (lo - offset),
                   j->acc[t] + (lo - offset), hi - lo, j->rho, j->one_minus_rho, j->eps, j->neg_lr, j->scale);
        offset += j->n[t];
    }
    return 0;
}

/* One step over k parameters of n[t] elements each, in `threads` parts (run_parts: c_library).
   Returns 0, or -1 where a thread could not be started (that part then runs here). */
int adadelta_step(float **p, float **g, float **sq, float **acc, const long *n, int k, int threads,
                  float rho, float one_minus_rho, float eps, float neg_lr, float scale) {
    long total = 0;
    for (int t = 0; t < k; t++) total += n[t];
    threads = parts(threads);
    job_t jobs[MAX_PARTS];
    for (int t = 0; t < threads; t++) {
        job_t j = {p, g, sq, acc, n, k, total * t / threads, total * (t + 1) / threads,
                   rho, one_minus_rho, eps, neg_lr, scale};
        jobs[t] = j;
    }
    return run_parts(run, (char *)jobs, sizeof(job_t), threads);
}
