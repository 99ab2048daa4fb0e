/* The element-wise part of a GRU step's backward pass (gru_gates.py). */
/* Row-major arrays; rz has rows of 2H (r, then z), dx rows of 3H (r, z, candidate), the rest
   rows of H. hp == 0: the initial state is zero (h_{t-1} - h~ is then -h~). Rows i < m have a
   carry from the next step. */
void gru_back_gates(long n, long m, long H, const float *restrict ds, const float *restrict carry,
                    const float *restrict rz, const float *restrict hh, const float *restrict hp,
                    float *restrict dx, float *restrict dhz) {
    for (long i = 0; i < n; i++) {
        const float *dsi = ds + i * H, *zi = rz + i * 2 * H + H, *ci = hh + i * H;
        const float *ki = i < m ? carry + i * H : 0, *hi = hp ? hp + i * H : 0;
        float *dzi = dx + i * 3 * H + H, *dci = dx + i * 3 * H + 2 * H, *oi = dhz + i * H;
        for (long j = 0; j < H; j++) { /* ki, hi: the same for the whole row (unswitched) */
            float dh = ki ? dsi[j] + ki[j] : dsi[j];
            float z = zi[j], c = ci[j];
            float hmc = hi ? hi[j] - c : -c;
            dci[j] = (dh * (1.0f - z)) * (1.0f - c * c);
            dzi[j] = (dh * hmc) * (z * (1.0f - z));
            oi[j] = dh * z;
        }
    }
}

void gru_back_reset(long n, long H, const float *restrict drh, const float *restrict rz,
                    const float *restrict hp, float *restrict dx, float *restrict dhz) {
    for (long i = 0; i < n; i++) {
        const float *di = drh + i * H, *ri = rz + i * 2 * H, *hi = hp + i * H;
        float *dri = dx + i * 3 * H, *oi = dhz + i * H;
        for (long j = 0; j < H; j++) {
            float r = ri[j], d = di[j];
            dri[j] = (d * hi[j]) * (r * (1.0f - r));
            oi[j] = oi[j] + d * r;
        }
    }
}
