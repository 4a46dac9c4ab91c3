/* Accuracy harness for src/backend/vmath.h, compiled and run by tests/vmath.rs (VMATH_H is the header's path).
 *
 *   harness sweep STRIDE   every STRIDE-th f32 bit pattern through each unary function, every input of the
 *                          structured powf sets; prints one line per function:
 *                          SWEEP name max_ulp worst_x_bits worst_y_bits got_bits want_bits count
 *                          and for sin/cos beyond the accurate range: RANGE name bad_count x_bits got_bits
 *   harness special        SPEC name x_bits y_bits got_bits want_bits for every special input (the test decides)
 *   harness bench N        ns per element of each function and of libm over N floats
 * The reference is libm in double, rounded to float.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#define FF_FN static inline
#include VMATH_H

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float fbits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ulp distance: floats mapped to a monotone integer line (+0 and -0 both at 0); NaN matches only NaN. */
static int64_t key(float x) {
    uint32_t u = bits(x);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}
static int64_t ulp_dist(float got, float want) {
    if (got != got || want != want) return (got != got && want != want) ? 0 : INT64_MAX;
    int64_t d = key(got) - key(want);
    return d < 0 ? -d : d;
}

static float ref_exp(float x) { return (float)exp((double)x); }
static float ref_expm1(float x) { return (float)expm1((double)x); }
static float ref_log(float x) { return (float)log((double)x); }
static float ref_log1p(float x) { return (float)log1p((double)x); }
static float ref_tanh(float x) { return (float)tanh((double)x); }
static float ref_sigmoid(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }
static float ref_erf(float x) { return (float)erf((double)x); }
static float ref_sin(float x) { return (float)sin((double)x); }
static float ref_cos(float x) { return (float)cos((double)x); }
static float ref_rsqrt(float x) { return (float)(1.0 / sqrt((double)x)); }
static float lib_rsqrt(float x) { return 1.0f / sqrtf(x); }
static float ref_pow(float x, float y) { return (float)pow((double)x, (double)y); }

/* Each wrapped so that the sweep loop below is one call per element (not inlined into the sweep itself). */
#define WRAP(f)                                                                                                     \
    static void run_##f(const float *x, float *y, int n) {                                                         \
        for (int i = 0; i < n; i++) y[i] = ff_##f(x[i]);                                                          \
    }
WRAP(expf)
WRAP(expm1f)
WRAP(logf)
WRAP(log1pf)
WRAP(tanhf)
WRAP(sigmoidf)
WRAP(erff)
WRAP(sinf)
WRAP(cosf)
WRAP(rsqrtf)
static void run_powf(const float *x, const float *y, float *z, int n) {
    for (int i = 0; i < n; i++) z[i] = ff_powf(x[i], y[i]);
}

struct unary {
    const char *name;
    void (*run)(const float *, float *, int);
    float (*ref)(float);
    float (*lib)(float);
};
static const struct unary UNARY[] = {
    {"expf", run_expf, ref_exp, expf},         {"expm1f", run_expm1f, ref_expm1, expm1f},
    {"logf", run_logf, ref_log, logf},         {"log1pf", run_log1pf, ref_log1p, log1pf},
    {"tanhf", run_tanhf, ref_tanh, tanhf},     {"sigmoidf", run_sigmoidf, ref_sigmoid, NULL},
    {"erff", run_erff, ref_erf, erff},         {"sinf", run_sinf, ref_sin, sinf},
    {"cosf", run_cosf, ref_cos, cosf},         {"rsqrtf", run_rsqrtf, ref_rsqrt, lib_rsqrt},
};
#define NUNARY (sizeof UNARY / sizeof UNARY[0])
#define CHUNK 4096
/* sin/cos are accurate for |x| below this; beyond, only |result| <= 1 is checked. */
#define TRIG_LIMIT 0x1p30f

struct worst {
    int64_t ulp;
    float x, y, got, want;
    long long count;
};
static void note(struct worst *w, float x, float y, float got, float want) {
    int64_t d = ulp_dist(got, want);
    w->count++;
    if (d > w->ulp) {
        w->ulp = d;
        w->x = x;
        w->y = y;
        w->got = got;
        w->want = want;
    }
}
static void print_worst(const char *name, const struct worst *w) {
    printf("SWEEP %s %lld %08x %08x %08x %08x %lld\n", name, (long long)w->ulp, bits(w->x), bits(w->y), bits(w->got),
           bits(w->want), w->count);
}

static void sweep_unary(const struct unary *f, uint32_t stride) {
    static float xs[CHUNK], ys[CHUNK];
    struct worst w = {0};
    int trig = !strcmp(f->name, "sinf") || !strcmp(f->name, "cosf");
    long long bad = 0;
    float bad_x = 0, bad_got = 0;
    uint64_t u = 0;
    while (u <= 0xffffffffull) {
        int n = 0;
        for (; n < CHUNK && u <= 0xffffffffull; u += stride) xs[n++] = fbits((uint32_t)u);
        f->run(xs, ys, n);
        for (int i = 0; i < n; i++) {
            float x = xs[i];
            if (trig && x == x && (x >= TRIG_LIMIT || x <= -TRIG_LIMIT)) {
                int ok = (x == INFINITY || x == -INFINITY) ? ys[i] != ys[i] : (ys[i] >= -1.0f && ys[i] <= 1.0f);
                if (!ok && bad++ == 0) bad_x = x, bad_got = ys[i];
                continue;
            }
            note(&w, x, 0.0f, ys[i], f->ref(x));
        }
    }
    print_worst(f->name, &w);
    if (trig) printf("RANGE %s %lld %08x %08x\n", f->name, bad, bits(bad_x), bits(bad_got));
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}

/* powf: (a) random positive finite x with y chosen so that x^y lands anywhere from underflow to overflow;
 * (b) random negative x with integer y; (c) every STRIDE-th x with y in a small set of integers and halves. */
static void sweep_pow(uint32_t stride) {
    static float xs[CHUNK], ys[CHUNK], zs[CHUNK];
    struct worst w = {0};
    const long long pairs = 4000000;
    for (long long done = 0; done < pairs;) {
        int n = 0;
        for (; n < CHUNK; n++) {
            float x = fbits(rng() % 0x7f800000u);
            float t = -160.0f + 300.0f * (float)(rng() >> 8) / 16777216.0f;
            float y;
            if (n & 1) {
                x = -x;
                y = (float)((int)(rng() % 81) - 40);
            } else {
                double l = log2((double)x);
                y = l == 0.0 ? t : (float)(t / l);
            }
            xs[n] = x;
            ys[n] = y;
        }
        run_powf(xs, ys, zs, n);
        for (int i = 0; i < n; i++) note(&w, xs[i], ys[i], zs[i], ref_pow(xs[i], ys[i]));
        done += n;
    }
    static const float YS[] = {2.0f, -2.0f, 3.0f, -1.0f, 0.5f, -0.5f, 1.5f, 0.25f, 7.0f, -3.5f};
    for (unsigned k = 0; k < sizeof YS / sizeof YS[0]; k++) {
        uint64_t u = 0;
        while (u <= 0xffffffffull) {
            int n = 0;
            for (; n < CHUNK && u <= 0xffffffffull; u += stride) xs[n] = fbits((uint32_t)u), ys[n++] = YS[k];
            run_powf(xs, ys, zs, n);
            for (int i = 0; i < n; i++) note(&w, xs[i], ys[i], zs[i], ref_pow(xs[i], ys[i]));
        }
    }
    print_worst("powf", &w);
}

static const uint32_t SPECIAL[] = {
    0x7fc00000u, 0xffc00000u, 0x7f800001u, /* NaNs, one signalling */
    0x7f800000u, 0xff800000u,              /* +-inf */
    0x00000000u, 0x80000000u,              /* +-0 */
    0x00000001u, 0x80000001u, 0x00400000u, 0x80400000u, 0x007fffffu, 0x807fffffu, /* subnormals */
    0x00800000u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu,                           /* min normal, max */
    0x3f800000u, 0xbf800000u, 0x3f000000u, 0xbf000000u, 0x40000000u, 0xc0000000u, /* +-1, +-0.5, +-2 */
    0x40400000u, 0xc0400000u, 0x40200000u, 0xc0200000u, /* +-3, +-2.5 */
    0x42b17218u, 0x42b17219u, 0xc2ce8ed0u, 0xc2cff1b5u, 0xc2d00000u, /* exp overflow / underflow edges */
    0x4b000001u, 0xcb000001u, 0x4b800000u, 0x4f000000u, 0xcf000000u, /* large integers, odd and even */
    0x3e800000u, 0x41200000u,                                        /* 0.25, 10 */
};
#define NSPECIAL (sizeof SPECIAL / sizeof SPECIAL[0])

static void specials(void) {
    for (unsigned k = 0; k < NUNARY; k++) {
        const struct unary *f = &UNARY[k];
        for (unsigned i = 0; i < NSPECIAL; i++) {
            float x = fbits(SPECIAL[i]), got;
            f->run(&x, &got, 1);
            printf("SPEC %s %08x 00000000 %08x %08x\n", f->name, SPECIAL[i], bits(got), bits(f->ref(x)));
        }
    }
    for (unsigned i = 0; i < NSPECIAL; i++)
        for (unsigned j = 0; j < NSPECIAL; j++) {
            float x = fbits(SPECIAL[i]), y = fbits(SPECIAL[j]), got;
            run_powf(&x, &y, &got, 1);
            printf("SPEC powf %08x %08x %08x %08x\n", SPECIAL[i], SPECIAL[j], bits(got), bits(ref_pow(x, y)));
        }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* The best of 5 runs over n elements, in ns per element. */
#define TIME(expr)                                                                                                  \
    do {                                                                                                           \
        best = 1e30;                                                                                               \
        for (int rep = 0; rep < 5; rep++) {                                                                        \
            double t0 = now();                                                                                     \
            expr;                                                                                                  \
            double t = (now() - t0) * 1e9 / n;                                                                     \
            best = t < best ? t : best;                                                                            \
        }                                                                                                          \
    } while (0)

static void bench(int n) {
    float *x = malloc(n * sizeof *x), *x2 = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    volatile float sink = 0;
    double best;
    for (int i = 0; i < n; i++) {
        x[i] = -10.0f + 20.0f * (float)(rng() >> 8) / 16777216.0f;
        x2[i] = 0.01f + 10.0f * (float)(rng() >> 8) / 16777216.0f; /* positive, for log and pow */
    }
    for (unsigned k = 0; k < NUNARY; k++) {
        const struct unary *f = &UNARY[k];
        const float *in = (!strcmp(f->name, "logf") || !strcmp(f->name, "log1pf")) ? x2 : x;
        TIME(f->run(in, y, n));
        double ours = best;
        sink += y[n / 2];
        double lib = 0, dbl = 0;
        if (f->lib) {
            TIME(for (int i = 0; i < n; i++) y[i] = f->lib(in[i]));
            lib = best;
            sink += y[n / 2];
        }
        TIME(for (int i = 0; i < n; i++) y[i] = f->ref(in[i]));
        dbl = best;
        sink += y[n / 2];
        printf("BENCH %-9s ff %6.2f ns  libm-f32 %6.2f ns  libm-f64 %6.2f ns\n", f->name, ours, lib, dbl);
    }
    TIME(run_powf(x2, x, y, n));
    double ours = best;
    TIME(for (int i = 0; i < n; i++) y[i] = powf(x2[i], x[i]));
    double lib = best;
    TIME(for (int i = 0; i < n; i++) y[i] = ref_pow(x2[i], x[i]));
    printf("BENCH %-9s ff %6.2f ns  libm-f32 %6.2f ns  libm-f64 %6.2f ns\n", "powf", ours, lib, best);
    free(x), free(x2), free(y);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "sweep")) {
        uint32_t stride = (uint32_t)strtoul(argv[2], NULL, 10);
        if (stride == 0) return 2;
        for (unsigned k = 0; k < NUNARY; k++) sweep_unary(&UNARY[k], stride);
        sweep_pow(stride);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "special")) {
        specials();
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "bench")) {
        bench(atoi(argv[2]));
        return 0;
    }
    fprintf(stderr, "usage: harness sweep STRIDE | special | bench N\n");
    return 2;
}
