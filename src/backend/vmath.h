/* vmath.h: vectorizable f32 math for funcfuse's C kernels.
 *
 * Every function takes and returns float, is branch-free (selects only: no libm calls, no loops, no tables) and
 * computes in double internally, so that the one rounding to float at the end gives a result within 1 ulp of the
 * correctly rounded one (stated bounds below; tests/vmath.rs checks them on every 307th f32 bit pattern and on the
 * special values). Subnormal inputs and outputs, overflow to inf and underflow to 0 all come from that final
 * conversion. Bit casts go through memcpy. Written so that GCC -O3 -march=native -fno-math-errno -ffp-contract=off
 * vectorizes a loop calling them (float<->double conversions, 64-bit integer adds/shifts and blends); nothing relies
 * on fused multiply-add.
 *
 * Stated bounds (ulp distance to libm's double result rounded to float; NaN in gives NaN out):
 *   ff_expf, ff_expm1f, ff_logf, ff_log1pf, ff_tanhf, ff_sigmoidf, ff_erff, ff_powf, ff_rsqrtf: <= 1 ulp on all
 *   inputs (checked once on all 2^32 inputs for the unary ones; powf on structured sets of pairs). For sqrt itself
 *   use sqrtf: exact, and vectorized under -fno-math-errno.
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

/* e^x - 1 in double, relative error below 1e-9: a Taylor polynomial of (e^x - 1) / x near 0, e^x - 1 elsewhere.
 * Keeps the sign of a zero. */
FF_FN double ff__expm1_d(double x) {
    double p = 1.0 / 3628800.0;
    p = p * x + 1.0 / 362880.0;
    p = p * x + 1.0 / 40320.0;
    p = p * x + 1.0 / 5040.0;
    p = p * x + 1.0 / 720.0;
    p = p * x + 1.0 / 120.0;
    p = p * x + 1.0 / 24.0;
    p = p * x + 1.0 / 6.0;
    p = p * x + 0.5;
    p = p * x + 1.0;
    double small = x * p;
    double big = ff__exp_d(x) - 1.0;
    return ff__seld(ff__absd(x) < 0.35, small, big);
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

FF_FN float ff_expf(float x) { return (float)ff__exp_d((double)x); }

FF_FN float ff_expm1f(float x) { return (float)ff__expm1_d((double)x); }

FF_FN float ff_logf(float x) {
    float r = (float)ff__log_d((double)x); /* doubles from floats are normal */
    r = ff__self(x == 0.0f, -INFINITY, r);
    r = ff__self(x < 0.0f, NAN, r);
    r = ff__self(x == INFINITY, INFINITY, r);
    r = ff__self(x != x, x, r);
    return r;
}

FF_FN float ff_log1pf(float x) {
    double xd = (double)x;
    double u = 1.0 + xd;
    double c = xd - (u - 1.0); /* the rounding error of 1 + x (exact when |x| <= 1) */
    float r = (float)(ff__log_d(u) + c / u);
    r = ff__self(x == -1.0f, -INFINITY, r);
    r = ff__self(x < -1.0f, NAN, r);
    r = ff__self(x == INFINITY, INFINITY, r);
    r = ff__self(x == 0.0f, x, r);
    r = ff__self(x != x, x, r);
    return r;
}

FF_FN float ff_tanhf(float x) {
    double a = ff__absd((double)x);
    a = ff__seld(a > 20.0, 20.0, a); /* tanh rounds to 1 from 9.01 on */
    double t = ff__expm1_d(2.0 * a);
    float r = (float)(t / (t + 2.0));
    return ff__orsign(r, x); /* NaN stays NaN */
}

FF_FN float ff_sigmoidf(float x) { return (float)(1.0 / (1.0 + ff__exp_d(-(double)x))); }

FF_FN float ff_erff(float x) {
    double xd = (double)x;
    double a = ff__absd(xd);
    /* |x| < 1: erf(x) = x P(x^2), P fitted (Chebyshev least squares) to erf(x)/x, relative error 1e-12. */
    double t = xd * xd;
    double p = 0x1.1c6a2e6156874p-20;
    p = p * t - 0x1.d2cc9a598f998p-17;
    p = p * t + 0x1.f582bd29fc18ep-14;
    p = p * t - 0x1.bfe1c8912f63dp-11;
    p = p * t + 0x1.565891c44c514p-8;
    p = p * t - 0x1.b82cbb52a7333p-6;
    p = p * t + 0x1.ce2f20aa9e775p-4;
    p = p * t - 0x1.812746adee0adp-2;
    p = p * t + 0x1.20dd750428d0cp+0;
    double small = xd * p;
    /* 1 <= |x| <= 4: erf(|x|) = 1 - Q(|x| - 2.5), Q fitted to erfc, absolute error 6.3e-10; erf rounds to 1 from
     * |x| = 3.92 on, so |x| is clamped to 4 (NaN propagates). */
    double c = ff__seld(a > 4.0, 4.0, a);
    double s = c - 2.5;
    double q = 0x1.79345f90f5ad7p-22;
    q = q * s - 0x1.dde38493692ebp-21;
    q = q * s - 0x1.d0bfe03117004p-19;
    q = q * s + 0x1.07b9c10e5f9efp-16;
    q = q * s - 0x1.04435bb2dc3fbp-17;
    q = q * s - 0x1.5428f840fc748p-14;
    q = q * s + 0x1.09bc08e5d0a34p-12;
    q = q * s - 0x1.0f4c564666fb9p-12;
    q = q * s - 0x1.1d7e17f11b47ap-11;
    q = q * s + 0x1.6eae5bc9ff7a0p-9;
    q = q * s - 0x1.90db4f8856aa3p-8;
    q = q * s + 0x1.1a8ba5bb85428p-7;
    q = q * s - 0x1.119ea73e24512p-7;
    q = q * s + 0x1.64e37eaa9ade5p-8;
    q = q * s - 0x1.1d82e5df7b4c6p-9;
    q = q * s + 0x1.aab871c42ea54p-12;
    float big = ff__orsign((float)(1.0 - q), x);
    return ff__self(a < 1.0, (float)small, big);
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
