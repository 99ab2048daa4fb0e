/* Dropout's masks from a counter-based generator, drawn where they are applied
   (dropout_masks.py). */
#include "run_parts.h"
#include <stdint.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#define M0 0xD2511F53u
#define M1 0xCD9E8D57u
#define W0 0x9E3779B9u
#define W1 0xBB67AE85u

/* Philox4x32-10 (Salmon, Moraes, Dror and Shaw 2011; Random123's philox4x32_R, R = 10): the four
   32-bit words of the counter c under the key (k0, k1), in place. */
static inline void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)M0 * c[0], p1 = (uint64_t)M1 * c[2];
        uint32_t o0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, o2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
        c[1] = (uint32_t)p1, c[3] = (uint32_t)p0, c[0] = o0, c[2] = o2;
        k0 += W0, k1 += W1;
    }
}

/* Philox4x32-10 of `blocks` counters of 4 words each, in place: what the tests hold against the
   generator's published values and the loop's own words. */
void philox_words(uint32_t *counters, long blocks, uint32_t k0, uint32_t k1) {
    for (long b = 0; b < blocks; b++) philox(counters + 4 * b, k0, k1);
}

/* Elements come in groups of 32: element i takes word (i / 8) % 4 of the counter 8 (i / 32) + i % 8,
   so that eight counters computed side by side give 32 consecutive elements their words. */
#define GROUP 32

/* The 32 words of group g: w[8 k + l] is word k of the counter 8 g + l (plain C, any CPU). */
static inline void group_words(uint32_t w[GROUP], long g, uint32_t k0, uint32_t k1) {
    for (int l = 0; l < 8; l++) {
        uint64_t n = (uint64_t)(8 * g + l);
        uint32_t c[4] = {(uint32_t)n, (uint32_t)(n >> 32), 0, 0};
        philox(c, k0, k1);
        for (int k = 0; k < 4; k++) w[8 * k + l] = c[k];
    }
}

/* y = x * noise for elements first .. first + count - 1 of group words w, noise = scale where the
   element's word is at least drop_below, else 0: torch's dropout arithmetic. */
static inline void apply(const uint32_t *restrict w, const float *restrict x, float *restrict y, long count,
                         uint32_t drop_below, float scale) {
    for (long e = 0; e < count; e++) y[e] = x[e] * ((float)(w[e] >= drop_below) * scale);
}

#ifdef __AVX2__
/* One whole group with AVX2: the same words as group_words, the same products as apply. */
static inline void group_avx2(long g, uint32_t k0, uint32_t k1, const float *x, float *y, uint32_t drop_below,
                              float scale) {
    uint32_t lo[8], hi[8];
    for (int l = 0; l < 8; l++) {
        uint64_t n = (uint64_t)(8 * g + l);
        lo[l] = (uint32_t)n, hi[l] = (uint32_t)(n >> 32);
    }
    __m256i c0 = _mm256_loadu_si256((const __m256i *)lo), c1 = _mm256_loadu_si256((const __m256i *)hi);
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    const __m256i m0 = _mm256_set1_epi32((int)M0), m1 = _mm256_set1_epi32((int)M1);
    for (int r = 0; r < 10; r++) {
        /* the 32x32-bit products of the even and the odd lanes, their low and high words */
        __m256i e0 = _mm256_mul_epu32(c0, m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
        __m256i e1 = _mm256_mul_epu32(c2, m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
        __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
        __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
        __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
        __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
        c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c1 = lo1, c3 = lo0;
        k0 += W0, k1 += W1;
    }
    const __m256i below = _mm256_set1_epi32((int)drop_below);
    const __m256 s = _mm256_set1_ps(scale);
    __m256i words[4] = {c0, c1, c2, c3};
    for (int k = 0; k < 4; k++) {
        /* word >= drop_below (unsigned): max(word, drop_below) == word */
        __m256i keep = _mm256_cmpeq_epi32(_mm256_max_epu32(words[k], below), words[k]);
        __m256 noise = _mm256_and_ps(_mm256_castsi256_ps(keep), s); /* scale or +0: (float)keep * scale */
        _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), noise));
    }
}
#endif

typedef struct {
    const float *x;
    float *y;
    long start, end; /* this part's groups */
    long n;
    uint32_t k0, k1, drop_below;
    float scale;
} job_t;

static void *run(void *arg) {
    job_t *j = (job_t *)arg;
    uint32_t w[GROUP];
    for (long g = j->start; g < j->end; g++) {
        long first = GROUP * g, count = j->n - first < GROUP ? j->n - first : GROUP;
#ifdef __AVX2__
        if (count == GROUP) {
            group_avx2(g, j->k0, j->k1, j->x + first, j->y + first, j->drop_below, j->scale);
            continue;
        }
#endif
        group_words(w, g, j->k0, j->k1);
        apply(w, j->x + first, j->y + first, count, j->drop_below, j->scale);
    }
    return 0;
}

/* y = x * noise over n float32 elements (y another buffer), the noise drawn under the key (k0, k1):
   dropout's forward pass on x, and on its output's gradient the backward pass (the same key draws
   the same noise). In `threads` parts; returns 0, or -1 where a thread could not be started (that
   part then runs here). */
int dropout_apply(const float *x, float *y, long n, uint32_t k0, uint32_t k1, uint32_t drop_below, float scale,
                  int threads) {
    long groups = (n + GROUP - 1) / GROUP;
    threads = parts(threads);
    job_t jobs[MAX_PARTS];
    for (int t = 0; t < threads; t++) {
        job_t j = {x, y, groups * t / threads, groups * (t + 1) / threads, n, k0, k1, drop_below, scale};
        jobs[t] = j;
    }
    return run_parts(run, (char *)jobs, sizeof(job_t), threads);
}
