/* vmath.h: vectorizable f32 math for funcfuse's C kernels.
 *
 * Every function takes and returns float, is branch-free (selects only: no libm calls, no loops, no tables). The hot
 * ones (ff_expf, ff_expm1f, ff_logf, ff_log1pf, ff_tanhf, ff_sigmoidf, ff_erff) compute in float lanes (16 per
 * AVX-512 vector, 8 per AVX2): range reduction with ln 2 in two parts (Cody-Waite), minimax polynomials (fitted
 * once with a reweighted least-squares (Lawson) iteration in 40-digit arithmetic, rounded to float), 2^k built from
 * exponent bits. The others (ff_sinf, ff_cosf, ff_rsqrtf, ff_powf) compute in double, so that the one rounding to
 * float at the end gives a result within 1 ulp. Subnormal inputs and outputs, overflow to inf and underflow to 0 are
 * handled without special cases (see each function). Bit casts go through memcpy. Written so that GCC -O3
 * -march=native -fno-math-errno -ffp-contract=off vectorizes a loop calling them (32-bit integer adds/shifts, float
 * arithmetic and blends; float<->double conversions and 64-bit integers for the double ones). Polynomial steps are
 * FF__MADD: fused where the target has FMA, else a product and a sum; nothing else relies on either.
 *
 * Stated bounds (ulp distance to libm's double result rounded to float; NaN in gives NaN out), each the maximum over
 * all 2^32 inputs for the unfused form (checked once by hand); tests/vmath.rs checks every 307th f32 bit pattern and
 * the special values, for both forms (the fused one has been swept only that way):
 *   ff_expf, ff_logf, ff_tanhf: <= 1 ulp.
 *   ff_sigmoidf, ff_expm1f, ff_log1pf, ff_erff: <= 2 ulp.
 *   ff_powf, ff_rsqrtf: <= 1 ulp (powf on structured sets of pairs). For sqrt itself use sqrtf: exact, and
 *   vectorized under -fno-math-errno.
 *   ff_sinf, ff_cosf: <= 1 ulp for |x| < 2^30 (about 1.07e9; Cody-Waite reduction with a 3-part pi/2); larger finite
 *   |x| give a value in [-1, 1] that is not accurate; +-inf give NaN.
 * Signed zeros follow C: expm1f, log1pf, tanhf, erff, sinf keep -0; rsqrtf(-0) = -inf. ff_powf follows C99's powf
 * special cases (pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN, a negative base with an odd integer exponent keeps
 * its sign, with a non-integer one gives NaN, and the zero and infinity cases).
 * Needs IEEE semantics: -ffinite-math-only would fold away the NaN and infinity selects and -fassociative-math the
 * rounding tricks, so -ffast-math is refused at compile time.
 */
#ifndef FF_VMATH_H
#define FF_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef FF_FN
#define FF_FN static inline
#endif

#if defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__)
#error "vmath.h needs IEEE semantics: compile without -ffast-math / -ffinite-math-only"
#endif

FF_FN uint32_t ff__f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
FF_FN float ff__u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
FF_FN uint64_t ff__d2u(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
FF_FN double ff__u2d(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}
/* Selects as bit masks: GCC turns `c ? a : b` with a constant arm into branches (jump threading) that, with
 * -ftrapping-math, it then refuses to if-convert, and the loop stays scalar. A mask blend stays a blend. */
FF_FN double ff__seld(int c, double a, double b) {
    uint64_t m = -(uint64_t)(c != 0);
    return ff__u2d((ff__d2u(a) & m) | (ff__d2u(b) & ~m));
}
FF_FN float ff__self(int c, float a, float b) {
    uint32_t m = -(uint32_t)(c != 0);
    return ff__u2f((ff__f2u(a) & m) | (ff__f2u(b) & ~m));
}
/* |x| by clearing the sign bit. */
FF_FN double ff__absd(double x) { return ff__u2d(ff__d2u(x) & 0x7fffffffffffffffull); }
/* x with the sign bit of s (a float) added: x must be non-negative. */
FF_FN float ff__orsign(float x, float s) { return ff__u2f(ff__f2u(x) | (ff__f2u(s) & 0x80000000u)); }

/* One step of a polynomial in Horner form, a * b + c: fused (one rounding) where the target has FMA, which makes the
 * float-lane functions about a quarter faster; else a product and a sum. Both forms are within the bounds above
 * (tests/vmath.rs checks the form its compiler picks for this machine, and the unfused one with -mno-fma), and a
 * kernel library is compiled for one CPU (the cache key holds its flags), so its results are deterministic. */
#if defined(__FMA__)
#define FF__MADD(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define FF__MADD(a, b, c) ((a) * (b) + (c))
#endif

/* ln 2 in two parts for Cody-Waite reduction in float: FF__LN2_HI has 15 significant bits, so k * FF__LN2_HI is
 * exact for |k| < 2^9 (every k here is within [-150, 129]) and x - k * FF__LN2_HI is exact (Sterbenz); FF__LN2_LO is
 * ln 2 - FF__LN2_HI rounded to float. */
#define FF__LN2_HI 0x1.62e4p-1f
#define FF__LN2_LO 0x1.7f7d1cp-20f

/* e^r - 1 for x = k ln 2 + r, in float lanes: k = round(x / ln 2) (the 0x1.8p23 shift leaves k in the low mantissa
 * bits; stored to *k in two's complement), r = x - k ln 2 with |r| <= ln 2 / 2 (Cody-Waite, two constants), and
 * e^r - 1 = r + r^2 P(r) with P a degree-4 minimax fit (relative error 3.1e-9 before rounding). |x| <= 104; NaN
 * propagates into the result (k is then garbage). k = 0 (|x| < ln 2 / 2) leaves r = x exactly. */
FF_FN float ff__expf_red(float x, uint32_t *k) {
    const float shift = 0x1.8p23f;
    float kf = FF__MADD(x, 0x1.715476p+0f, shift);
    *k = ff__f2u(kf) - 0x4b400000u;
    kf -= shift;
    float r = FF__MADD(-kf, FF__LN2_HI, x);
    r = FF__MADD(-kf, FF__LN2_LO, r);
    float p = 0x1.6a2448p-10f;
    p = FF__MADD(p, r, 0x1.1239d4p-7f);
    p = FF__MADD(p, r, 0x1.5558f2p-5f);
    p = FF__MADD(p, r, 0x1.555492p-3f);
    p = FF__MADD(p, r, 0x1.fffffcp-2f);
    return FF__MADD(r * r, p, r);
}

/* (1 + p) 2^k with 2^k built from exponent bits in two halves (k in [-150, 128]), so that 2^128 and the subnormal
 * results need no special case: (1 + p) 2^(k/2) is exact and the second product rounds once. */
FF_FN float ff__scale(float p, uint32_t k) {
    uint32_t k1 = (uint32_t)((int32_t)k >> 1);
    uint32_t k2 = k - k1;
    float s1 = ff__u2f((k1 + 127u) << 23);
    float s2 = ff__u2f((k2 + 127u) << 23);
    return ((1.0f + p) * s1) * s2;
}

/* e^x in float lanes. x is clamped to 89, beyond which every result is inf; below -104 (-inf too) the result is 0,
 * computed on x = 0 and then replaced: the scaling of a clamped x would go through subnormal products, which cost
 * x86 cores a microcode assist per lane (softmax's masked -inf logits ran at half speed). NaN propagates (the
 * comparisons are false). */
FF_FN float ff__expf_core(float x) {
    int tiny = x < -104.0f;
    x = ff__self(x > 89.0f, 89.0f, x);
    x = ff__self(tiny, 0.0f, x);
    uint32_t k;
    float p = ff__expf_red(x, &k);
    return ff__self(tiny, 0.0f, ff__scale(p, k));
}

/* ln(1 + f) for f in [sqrt(2)/2 - 1, sqrt(2) - 1], in float lanes: s = f / (2 + f), ln(1 + f) = 2 atanh(s)
 * = f - s f + 2 s z Q(z) with z = s^2 <= 0.0295 and Q a degree-2 minimax fit of (atanh(s)/s - 1)/z (error 8e-10).
 * Keeps f's sign when f is a zero. */
FF_FN float ff__log1pf_red(float f) {
    float s = f / (2.0f + f);
    float z = s * s;
    float q = 0x1.31e2f4p-3f;
    q = FF__MADD(q, z, 0x1.995ebap-3f);
    q = FF__MADD(q, z, 0x1.55557ap-2f);
    return f + s * ((2.0f * z) * q - f);
}

/* e^x in double, relative error below 1e-9 (Taylor degree 8 after reduction by ln2). x is clamped to [-200, 200],
 * which is far beyond every float result (0 or inf after the final rounding); NaN propagates. */
FF_FN double ff__exp_d(double x) {
    const double shift = 0x1.8p52;
    x = ff__seld(x > 200.0, 200.0, x);
    x = ff__seld(x < -200.0, -200.0, x);
    double kd = x * 0x1.71547652b82fep+0 + shift; /* round(x / ln2) in the low bits */
    uint64_t ki = ff__d2u(kd);
    kd -= shift;
    double r = x - kd * 0x1.62e42fefa39efp-1; /* |r| <= ln2 / 2 */
    double p = 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    double scale = ff__u2d((ki + 1023u) << 52); /* 2^k: the low 11 bits of ki hold k + 1023 */
    return p * scale;
}

/* ln(x) in double for a positive, finite, normal double x, relative error near 1e-16: x = 2^k m with m in
 * [sqrt(2)/2, sqrt(2)), ln(m) = 2 atanh(s) with s = (m - 1) / (m + 1), |s| < 0.172. Other inputs give garbage. */
FF_FN double ff__log_d(double x) {
    uint64_t u = ff__d2u(x);
    uint64_t t = u + (0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull);
    uint64_t kb = t >> 52; /* k + 1023 */
    double m = ff__u2d(u - (t & 0xfff0000000000000ull) + 0x3ff0000000000000ull);
    double kd = ff__u2d(0x4330000000000000ull | kb) - (0x1p52 + 1023.0);
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double p = 1.0 / 19.0;
    p = p * z + 1.0 / 17.0;
    p = p * z + 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z + 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z + 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z + 1.0 / 3.0;
    double lm = 2.0 * s + (2.0 * s) * (z * p);
    return kd * 0x1.62e42fefa39efp-1 + lm;
}

FF_FN float ff_expf(float x) { return ff__expf_core(x); }

/* e^x - 1 in float lanes from e^r - 1 (ff__expf_red): 2^k (e^r - 1) + (2^k - 1), both terms exact for
 * k in [-29, 25] so one rounding; for k > 25 the 1 is below half an ulp and e^x itself is returned. x is clamped to
 * [-20, 89] (e^-20 - 1 rounds to -1). */
FF_FN float ff_expm1f(float x) {
    float xc = ff__self(x > 89.0f, 89.0f, x);
    xc = ff__self(xc < -20.0f, -20.0f, xc);
    uint32_t k;
    float p = ff__expf_red(xc, &k);
    float s = ff__u2f((k + 127u) << 23); /* 2^k where it is used */
    float r = ff__self((int32_t)k > 25, ff__scale(p, k), p * s + (s - 1.0f));
    return ff__self(x == 0.0f, x, r); /* -0 stays -0 */
}

/* ln x in float lanes: subnormal x scaled by 2^23 first; x = 2^k m with m in [sqrt(2)/2, sqrt(2)), ln(m) from
 * ff__log1pf_red(m - 1) (m - 1 is exact), and k ln 2 added in two parts. */
FF_FN float ff_logf(float x) {
    int sub = x < 0x1p-126f; /* zero and negative x too: replaced below */
    float xs = ff__self(sub, x * 0x1p23f, x);
    uint32_t u = ff__f2u(xs);
    uint32_t t = u + (0x3f800000u - 0x3f3504f3u);
    float m = ff__u2f(u - (t & 0xff800000u) + 0x3f800000u);
    float kf = (float)((int32_t)(t >> 23) - 127 - (int32_t)(23u & -(uint32_t)sub));
    float r = kf * FF__LN2_HI + (kf * FF__LN2_LO + ff__log1pf_red(m - 1.0f));
    r = ff__self(x == 0.0f, -INFINITY, r);
    r = ff__self(x < 0.0f, NAN, r);
    r = ff__self(x == INFINITY, INFINITY, r);
    r = ff__self(x != x, x, r);
    return r;
}

/* ln(1 + x) in float lanes: u = 1 + x rounded and c its exact rounding error (Fast2Sum, the larger operand first),
 * u = 2^k m as in ff_logf, and then 1 + x = 2^k (m + c 2^-k), so f = (m - 1) + c 2^-k goes to ff__log1pf_red (for
 * k = 0 that is x itself). u >= 2^-24 is normal. */
FF_FN float ff_log1pf(float x) {
    float u = 1.0f + x;
    float c = ff__self(x > 1.0f, 1.0f - (u - x), x - (u - 1.0f));
    uint32_t w = ff__f2u(u);
    uint32_t t = w + (0x3f800000u - 0x3f3504f3u);
    uint32_t kb = t >> 23; /* k + 127 */
    float m = ff__u2f(w - (t & 0xff800000u) + 0x3f800000u);
    uint32_t kc = kb < 254u ? kb : 254u; /* 2^-k is only needed while c matters: keep it finite */
    float f = (m - 1.0f) + c * ff__u2f((254u - kc) << 23);
    float kf = (float)((int32_t)kb - 127);
    float r = kf * FF__LN2_HI + (kf * FF__LN2_LO + ff__log1pf_red(f));
    r = ff__self(x == -1.0f, -INFINITY, r);
    r = ff__self(x < -1.0f, NAN, r);
    r = ff__self(x == INFINITY, INFINITY, r);
    r = ff__self(x == 0.0f, x, r);
    r = ff__self(x != x, x, r);
    return r;
}

/* tanh in float lanes: for |x| < atanh(1/2), |x| + |x| z P(z) with z = x^2 and P a degree-4 minimax fit of
 * (tanh(x)/x - 1)/z (error 1e-9; subnormal x come back unchanged); above, 1 - 2 / (e^(2|x|) + 1), which is >= 1/2
 * so the subtraction loses nothing. 2|x| is clamped to 19 (tanh rounds to 1 from 9.01 on), so 2^k (k <= 28) is one
 * exponent field. The sign goes back on last (-0 stays -0). */
FF_FN float ff_tanhf(float x) {
    float a = ff__u2f(ff__f2u(x) & 0x7fffffffu);
    float z = a * a;
    float p = -0x1.9b87eep-8f;
    p = FF__MADD(p, z, 0x1.594b94p-6f);
    p = FF__MADD(p, z, -0x1.b92a20p-5f);
    p = FF__MADD(p, z, 0x1.110d30p-3f);
    p = FF__MADD(p, z, -0x1.55554ap-2f);
    float small = a + a * (z * p);
    uint32_t k;
    float pm = ff__expf_red(ff__self(a > 9.5f, 19.0f, 2.0f * a), &k);
    float e = (1.0f + pm) * ff__u2f((k + 127u) << 23);
    float big = 1.0f - 2.0f / (e + 1.0f);
    float r = ff__self(a < 0x1.193ea8p-1f, small, big);
    return ff__orsign(r, x); /* NaN stays NaN */
}

/* 1 / (1 + e^-x) in float lanes from e = e^-|x| <= 1 (no overflow): 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0
 * (tiny and subnormal results come from e itself). e is built as (1 + p) 2^(k+64), exact and normal for every k here
 * ([-150, 0]), and then scaled by 2^-64, which rounds once where e is subnormal: the bits of ff__scale with a single
 * exponent field. Below -104 e is 0, computed on y = 0 and replaced (no subnormal products; see ff__expf_core). */
FF_FN float ff_sigmoidf(float x) {
    float y = -ff__u2f(ff__f2u(x) & 0x7fffffffu); /* <= 0: only the lower bound of ff__expf_core applies */
    int tiny = y < -104.0f;
    uint32_t k;
    float p = ff__expf_red(ff__self(tiny, 0.0f, y), &k);
    float e = ff__self(tiny, 0.0f, ((1.0f + p) * ff__u2f((k + 191u) << 23)) * 0x1p-64f);
    return ff__self(x < 0.0f, e, 1.0f) / (1.0f + e);
}

/* erf in float lanes. |x| < 1: x + x (P(x^2) - 1) with P a degree-6 minimax fit of erf(x)/x (relative error 1.2e-9).
 * 1 <= |x|: 1 - Q(|x| - 2.5) with Q a degree-14 minimax fit of erfc on [1, 4] (absolute error 9.4e-9); erf rounds to
 * 1 from |x| = 3.92 on, so |x| is clamped to 4 (NaN propagates). */
FF_FN float ff_erff(float x) {
    float a = ff__u2f(ff__f2u(x) & 0x7fffffffu);
    float t = x * x;
    float p = 0x1.4ae4c6p-14f;
    p = FF__MADD(p, t, -0x1.a485e8p-11f);
    p = FF__MADD(p, t, 0x1.5419f4p-8f);
    p = FF__MADD(p, t, -0x1.b7fbb4p-6f);
    p = FF__MADD(p, t, 0x1.ce2d20p-4f);
    p = FF__MADD(p, t, -0x1.81273ep-2f);
    p = FF__MADD(p, t, 0x1.06eba8p-3f);
    float small = x + x * p; /* P - 1: the 1 kept exact */
    float s = ff__self(a > 4.0f, 4.0f, a) - 2.5f;
    float q = -0x1.e11bf2p-21f;
    q = FF__MADD(q, s, -0x1.11731cp-21f);
    q = FF__MADD(q, s, 0x1.088b06p-16f);
    q = FF__MADD(q, s, -0x1.28a644p-16f);
    q = FF__MADD(q, s, -0x1.54d0a0p-14f);
    q = FF__MADD(q, s, 0x1.1b886ap-12f);
    q = FF__MADD(q, s, -0x1.0f0964p-12f);
    q = FF__MADD(q, s, -0x1.25a288p-11f);
    q = FF__MADD(q, s, 0x1.6ea774p-9f);
    q = FF__MADD(q, s, -0x1.906118p-8f);
    q = FF__MADD(q, s, 0x1.1a8c54p-7f);
    q = FF__MADD(q, s, -0x1.11ab44p-7f);
    q = FF__MADD(q, s, 0x1.64e34ap-8f);
    q = FF__MADD(q, s, -0x1.1d7fe4p-9f);
    q = FF__MADD(q, s, 0x1.aab886p-12f);
    float big = ff__orsign(1.0f - q, x);
    return ff__self(a < 1.0f, small, big);
}

/* sin (cos_shift = 0) or cos (cos_shift = 1) of x: x - k pi/2 with pi/2 in three parts (the first two of 24 bits,
 * so k pi/2 is exact for |k| < 2^30), then Taylor polynomials on |r| <= pi/4 and the quadrant by selects. */
FF_FN float ff__sincos(float x, uint64_t cos_shift) {
    const double shift = 0x1.8p52;
    double xd = (double)x;
    double kd = xd * 0x1.45f306dc9c883p-1 + shift;
    uint64_t n = ff__d2u(kd) + cos_shift;
    kd -= shift;
    double r = xd - kd * 0x1.921fb4p+0;
    r = r - kd * 0x1.4442d0p-24;
    r = r - kd * 0x1.8469898cc5170p-48;
    /* |r| <= pi/4 within range; beyond it, keep the polynomials finite (the result is then only in [-1, 1]) */
    r = ff__seld(r > 0.8, 0.8, r);
    r = ff__seld(r < -0.8, -0.8, r);
    double z = r * r;
    double sp = -1.0 / 39916800.0;
    sp = sp * z + 1.0 / 362880.0;
    sp = sp * z - 1.0 / 5040.0;
    sp = sp * z + 1.0 / 120.0;
    sp = sp * z - 1.0 / 6.0;
    double sv = r + r * (z * sp);
    double cp = 1.0 / 479001600.0;
    cp = cp * z - 1.0 / 3628800.0;
    cp = cp * z + 1.0 / 40320.0;
    cp = cp * z - 1.0 / 720.0;
    cp = cp * z + 1.0 / 24.0;
    double cv = (1.0 - 0.5 * z) + (z * z) * cp;
    double v = ff__seld((int)(n & 1u), cv, sv);
    v = ff__seld((int)(n & 2u), -v, v);
    return (float)v;
}

FF_FN float ff_sinf(float x) {
    float r = ff__sincos(x, 0);
    return ff__self(x == 0.0f, x, r); /* sin(-0) = -0 */
}

FF_FN float ff_cosf(float x) { return ff__sincos(x, 1); }

/* 1 / sqrt(x): the bit-shift estimate of 1/sqrt in double (relative error < 3.5%) and three Newton steps
 * (1.8e-3, 4.6e-6, 3.2e-11). */
FF_FN float ff_rsqrtf(float x) {
    double d = (double)x;
    double y = ff__u2d(0x5fe6eb50c7b537a9ull - (ff__d2u(d) >> 1));
    double h = 0.5 * d;
    y = y * (1.5 - h * y * y);
    y = y * (1.5 - h * y * y);
    y = y * (1.5 - h * y * y);
    float r = (float)y;
    r = ff__self(x == 0.0f, ff__orsign(INFINITY, x), r); /* 1 / sqrt(-0) = -inf */
    r = ff__self(x < 0.0f, NAN, r);
    r = ff__self(x == INFINITY, 0.0f, r);
    r = ff__self(x != x, x, r);
    return r;
}

/* x^y as exp(y ln|x|) in double, then C99's special cases by selects. */
FF_FN float ff_powf(float x, float y) {
    double ax = ff__absd((double)x);
    double l = ff__log_d(ax);
    l = ff__seld(ax == 0.0, -(double)INFINITY, l);
    l = ff__seld(ax == (double)INFINITY, (double)INFINITY, l);
    float r = (float)ff__exp_d((double)y * l);
    float ay = ff__u2f(ff__f2u(y) & 0x7fffffffu);
    float rounded = (ay + 0x1p23f) - 0x1p23f;
    int is_int = (ay >= 0x1p23f) | (rounded == ay); /* +-inf count as even integers */
    float low = ff__self(ay < 0x1p24f, ay, 0.0f); /* floats from 2^24 on are even */
    int odd = is_int & ((int32_t)low & 1);
    int neg = (ff__f2u(x) >> 31) != 0;
    r = ff__self(neg & odd, -r, r);
    r = ff__self((x < 0.0f) & (x > -INFINITY) & !is_int, NAN, r); /* negative base, non-integer exponent */
    r = ff__self((x != x) | (y != y), NAN, r);
    r = ff__self((x == -1.0f) & (ay == INFINITY), 1.0f, r);
    r = ff__self(x == 1.0f, 1.0f, r);
    r = ff__self(y == 0.0f, 1.0f, r);
    return r;
}

#endif /* FF_VMATH_H */
