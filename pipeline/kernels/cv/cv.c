/* cv.c: the YOLO kernels' inner loops in C, each the same bytes as its Go
 * twin (the ...Go functions of warp.go and hsv.go; c_test.go compares):
 *
 * - warp: warp.go's resampling (OpenCV 5's float warps), eight output
 *   pixels at a time with AVX2 and FMA where the CPU has them, one at a
 *   time otherwise. Its fused multiply-adds are warp.go's fma32, float
 *   operands fused in double and the sum rounded to float, through fma()
 *   (an instruction with FMA, libm's exact fma elsewhere); nothing else
 *   fuses (the pragmas below). The vector path takes the float fused
 *   multiply-add instead where the exact sum is a double (then the two
 *   round the same): the coordinates where stoker_cv_fma_exact says so
 *   for the row, the lerps where the pixel's source coordinates are >= 1
 *   (cv_warp.h's lerp8f and blend8ff say why).
 * - hsv: hsv.go's BGR to HSV, the three tables, HSV to BGR, every float
 *   operation hsv.go's: sixteen pixels at a time with AVX-512 VBMI (the
 *   tables read by byte permutes), eight with AVX2 (by gathers), one at a
 *   time otherwise and for the tail. */
/* No fused multiply-adds but the explicit ones (see turbo.c). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "cv.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* round_sat is warp.go's roundSat: nearest, ties to even, saturated to
 * 0..255; NaN and values from 2^31 up give 0. Between 0.5 and 254.5 the
 * float sum with 1.5*2^23 rounds to an integer in the default rounding
 * mode (nearest even), the mode Go runs C in. */
static inline uint8_t round_sat(float v) {
  if (!(v > 0.5f) || v >= 2147483648.0f)
    return 0;
  if (v > 254.5f)
    return 255;
  return (uint8_t)(int)((v + 12582912.0f) - 12582912.0f); /* 1.5 * 2^23 */
}

/* floor_int is warp.go's floorInt: the floor as an int32, INT32_MIN for
 * NaN, infinities and values past int32. */
static inline int32_t floor_int(float v) {
  float f = floorf(v);
  if (!(f >= -2147483648.0f && f < 2147483648.0f))
    return INT32_MIN;
  return (int32_t)f;
}

/* pixel_or is the pixel at (x, y) of the w x h plane p, or bv outside. */
static inline float pixel_or(const uint8_t *p, int w, int h, int64_t x, int64_t y, float bv) {
  if ((uint64_t)x < (uint64_t)w && (uint64_t)y < (uint64_t)h)
    return (float)p[y * w + x];
  return bv;
}

/* FMA32 is warp.go's fma32. */
#define FMA32(a, b, c) ((float)fma((double)(a), (double)(b), (double)(c)))

/* WARP_PIXEL blends output pixel (x, y) from source coordinates (sx, sy),
 * as warp.go's loop body does. */
#define WARP_PIXEL(x, sx, sy)                                                                          \
  do {                                                                                                 \
    int64_t ix = floor_int(sx), iy = floor_int(sy);                                                    \
    float ax = (sx) - (float)ix, ay = (sy) - (float)iy;                                                \
    int inside = (uint32_t)ix < (uint32_t)(sw - 1) && (uint32_t)iy < (uint32_t)(sh - 1);               \
    int outside = (uint64_t)(ix + 1) >= (uint64_t)(sw + 1) || (uint64_t)(iy + 1) >= (uint64_t)(sh + 1); \
    for (int c = 0; c < 3; c++) {                                                                      \
      const uint8_t *sp = src + (size_t)c * n;                                                         \
      float p00, p01, p10, p11;                                                                        \
      if (inside) {                                                                                    \
        const uint8_t *o = sp + iy * sw + ix;                                                          \
        p00 = o[0], p01 = o[1], p10 = o[sw], p11 = o[sw + 1];                                          \
      } else if (outside) {                                                                            \
        p00 = p01 = p10 = p11 = bv;                                                                    \
      } else {                                                                                         \
        p00 = pixel_or(sp, sw, sh, ix, iy, bv), p01 = pixel_or(sp, sw, sh, ix + 1, iy, bv);            \
        p10 = pixel_or(sp, sw, sh, ix, iy + 1, bv), p11 = pixel_or(sp, sw, sh, ix + 1, iy + 1, bv);    \
      }                                                                                                \
      float v0 = FMA32(ax, p01 - p00, p00), v1 = FMA32(ax, p11 - p10, p10);                            \
      dst[(size_t)c * dn + (size_t)y * dw + (x)] = round_sat(FMA32(ay, v1 - v0, v0));                  \
    }                                                                                                  \
  } while (0)

/* WARP_TAIL is warp.go's coordinates for the last dw%16 pixels of a row
 * (OpenCV's scalar loop) and the blend of pixel x. */
#define WARP_TAIL(x)                                                       \
  do {                                                                     \
    float fx = (float)(x);                                                 \
    float sx = FMA32(fx, m[0], (float)(fy * m[1])) + m[2];                 \
    float sy = FMA32(fx, m[3], (float)(fy * m[4])) + m[5];                 \
    if (persp) {                                                           \
      float w = FMA32(fx, m[6], (float)(fy * m[7])) + m[8];                \
      sx = sx / w, sy = sy / w;                                            \
    }                                                                      \
    WARP_PIXEL(x, sx, sy);                                                 \
  } while (0)

/* warp_scalar is warp.go's warp, one pixel at a time. */
static void warp_scalar(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int sh, const float *m, int persp,
                        int border) {
  size_t n = (size_t)sw * sh, dn = (size_t)dw * dh;
  float bv = (float)border;
  int tail = dw - dw % 16;
  for (int y = 0; y < dh; y++) {
    float fy = (float)y;
    float mx = (float)(fy * m[1]) + m[2], my = (float)(fy * m[4]) + m[5], mw = (float)(fy * m[7]) + m[8];
    int x = 0;
    for (; x < tail; x++) {
      float fx = (float)x;
      float sx = FMA32(m[0], fx, mx), sy = FMA32(m[3], fx, my);
      if (persp) {
        float w = FMA32(m[6], fx, mw);
        sx = sx / w, sy = sy / w;
      }
      WARP_PIXEL(x, sx, sy);
    }
    for (; x < dw; x++)
      WARP_TAIL(x);
  }
}

/* ulp_exp is the exponent of v's last mantissa bit as a normal float (for
 * a subnormal lower than its true one; v finite, not zero). */
static int ulp_exp(float v) {
  int e;
  frexpf(v, &e);
  return e - 24;
}

/* stoker_cv_fma_exact reports whether a*x + c is a double for every integer x in
 * [0, n]: then FMA32(a, x, c), fused in double and rounded to float,
 * rounds the exact sum once, as the float fused multiply-add does (the
 * vector warp's coordinates then take one instruction, not five). The
 * sum is a multiple of 2^lo (lo the lower of a's and c's last bits) under
 * |a|*n + |c|; it is a double where that is under 2^(lo+53) (asked for
 * under 2^(lo+52): the bound's own sum may round). */
int stoker_cv_fma_exact(float a, int n, float c) {
  if (!isfinite(a) || !isfinite(c))
    return 0;
  int lo = INT32_MAX;
  if (a != 0)
    lo = ulp_exp(a);
  if (c != 0 && ulp_exp(c) < lo)
    lo = ulp_exp(c);
  if (lo == INT32_MAX)
    return 1;
  return fabs((double)a) * n + fabs((double)c) < ldexp(1, lo + 52);
}

#if defined(__x86_64__)

static int cpu_simd; /* 0 none, 1 AVX2 and FMA, 2 those and AVX-512F */
static int cpu_vbmi; /* AVX-512BW and VBMI (byte permutes): HSV's 512-bit path */

__attribute__((constructor)) static void cv_cpu_init(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    cpu_simd = __builtin_cpu_supports("avx512f") ? 2 : 1;
  cpu_vbmi = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
}

/* The AVX2 path's double arithmetic: eight lanes as two halves. */
typedef struct {
  __m256d lo, hi;
} wd_avx2;

/* of is eight floats as double, ofi eight int32s, fmad a*b + c fused,
 * tof back to float (rounded). */
__attribute__((target("avx2,fma"))) static inline wd_avx2 of_avx2(__m256 v) {
  return (wd_avx2){_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))};
}
__attribute__((target("avx2,fma"))) static inline wd_avx2 ofi_avx2(__m256i v) {
  return (wd_avx2){_mm256_cvtepi32_pd(_mm256_castsi256_si128(v)), _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1))};
}
__attribute__((target("avx2,fma"))) static inline wd_avx2 fmad_avx2(wd_avx2 a, wd_avx2 b, wd_avx2 c) {
  return (wd_avx2){_mm256_fmadd_pd(a.lo, b.lo, c.lo), _mm256_fmadd_pd(a.hi, b.hi, c.hi)};
}
__attribute__((target("avx2,fma"))) static inline __m256 tof_avx2(wd_avx2 v) {
  return _mm256_set_m128(_mm256_cvtpd_ps(v.hi), _mm256_cvtpd_ps(v.lo));
}

/* The AVX-512 path's: eight lanes of double in one register. */
__attribute__((target("avx512f,avx2,fma"))) static inline __m512d of_avx512(__m256 v) { return _mm512_cvtps_pd(v); }
__attribute__((target("avx512f,avx2,fma"))) static inline __m512d ofi_avx512(__m256i v) { return _mm512_cvtepi32_pd(v); }
__attribute__((target("avx512f,avx2,fma"))) static inline __m512d fmad_avx512(__m512d a, __m512d b, __m512d c) {
  return _mm512_fmadd_pd(a, b, c);
}
__attribute__((target("avx512f,avx2,fma"))) static inline __m256 tof_avx512(__m512d v) { return _mm512_cvtpd_ps(v); }

/* And the VBMI path's: AVX-512's, for its target. */
#define VBMIT __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2,fma")))
VBMIT static inline __m512d of_vbmi(__m256 v) { return _mm512_cvtps_pd(v); }
VBMIT static inline __m512d ofi_vbmi(__m256i v) { return _mm512_cvtepi32_pd(v); }
VBMIT static inline __m512d fmad_vbmi(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
VBMIT static inline __m256 tof_vbmi(__m512d v) { return _mm512_cvtpd_ps(v); }

/* fma8 is FMA32 on eight lanes: each fused in double, rounded to float. */
#define FMA8(sfx)                                                                                  \
  static inline __m256 fma8_##sfx(__m256 a, __m256 b, __m256 c) {                                  \
    return tof_##sfx(fmad_##sfx(of_##sfx(a), of_##sfx(b), of_##sfx(c)));                           \
  }
__attribute__((target("avx2,fma"))) FMA8(avx2)
__attribute__((target("avx512f,avx2,fma"))) FMA8(avx512)
VBMIT FMA8(vbmi)

/* cv_warp.h is the vector warp, once for each (TGT the target, SFX the
 * names' suffix, WD the double type). */
#define TGT __attribute__((target("avx2,fma")))
#define SFX(f) f##_avx2
#define WD wd_avx2
#include "cv_warp.h"
#undef TGT
#undef SFX
#undef WD
#define TGT __attribute__((target("avx512f,avx2,fma")))
#define SFX(f) f##_avx512
#define WD __m512d
#include "cv_warp.h"
#undef TGT
#undef SFX
#undef WD
#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2,fma")))
#define SFX(f) f##_vbmi
#define WD __m512d
#define WARP_VBMI 1
#include "cv_warp.h"
#undef WARP_VBMI
#undef TGT
#undef SFX
#undef WD

int stoker_cv_simd(void) { return cpu_simd == 2 && cpu_vbmi ? 3 : cpu_simd; }

#else

int stoker_cv_simd(void) { return 0; }

#endif

void stoker_cv_warp(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int sh, const float *m, int persp,
                    int border, int simd) {
#if defined(__x86_64__)
  if (simd >= 3 && cpu_simd >= 2 && cpu_vbmi) {
    warp_vbmi(dst, dw, dh, src, sw, sh, m, persp, border);
    return;
  }
  if (simd >= 2 && cpu_simd >= 2) {
    warp_avx512(dst, dw, dh, src, sw, sh, m, persp, border);
    return;
  }
  if (simd >= 1 && cpu_simd >= 1) {
    warp_avx2(dst, dw, dh, src, sw, sh, m, persp, border);
    return;
  }
#endif
  (void)simd;
  warp_scalar(dst, dw, dh, src, sw, sh, m, persp, border);
}

/* hsv_sector is hsv.go's hsvSector: for each sector, which of (v, v(1-s),
 * v(1-sh), v(1-s(1-h))) is b, g and r. */
static const uint8_t hsv_sector[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1}, {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};

/* hsv_scalar is hsvPixelsGo on pixels i0..n-1. */
static void hsv_scalar(uint8_t *rp, uint8_t *gp, uint8_t *bp, size_t i0, size_t n, const uint8_t *luts,
                       const int32_t *sdiv, const int32_t *hdiv, const float *frac, const uint8_t *sector,
                       const float *over) {
  const uint8_t *hue = luts, *sat = luts + 256, *val = luts + 512;
  for (size_t i = i0; i < n; i++) {
    /* hsvFromRGB */
    int32_t r = rp[i], g = gp[i], b = bp[i];
    int32_t v = r > g ? r : g, vmin = r < g ? r : g;
    v = v > b ? v : b, vmin = vmin < b ? vmin : b;
    int32_t diff = v - vmin, h;
    int32_t s = (diff * sdiv[v] + (1 << 11)) >> 12;
    if (v == r)
      h = g - b;
    else if (v == g)
      h = b - r + 2 * diff;
    else
      h = r - g + 4 * diff;
    h = (h * hdiv[diff] + (1 << 11)) >> 12; /* arithmetic shift, as Go's */
    if (h < 0)
      h += 180;
    /* the tables, then rgbFromHSV */
    uint8_t hh = hue[h], ss = sat[s], vv = val[v];
    float fs = over[ss], fv = over[vv], fr, fg, fb;
    if (fs == 0) {
      fb = fg = fr = fv;
    } else {
      float fh = frac[hh];
      float tab[4] = {fv, fv * (1 - fs), fv * (1 - fs * fh), fv * (1 - fs * (1 - fh))};
      const uint8_t *sec = hsv_sector[sector[hh]];
      fb = tab[sec[0]], fg = tab[sec[1]], fr = tab[sec[2]];
    }
    rp[i] = round_sat(fr * 255), gp[i] = round_sat(fg * 255), bp[i] = round_sat(fb * 255);
  }
}

#if defined(__x86_64__)
/* hsv_pick_avx2 is, in each lane, t[k] for the two bits k of idx at bit
 * (the sign bits of idx shifted, as blendv reads them). */
__attribute__((target("avx2"))) static inline __m256 hsv_pick_avx2(__m256i idx, int bit, __m256 t0, __m256 t1,
                                                                   __m256 t2, __m256 t3) {
  __m256 m0 = _mm256_castsi256_ps(_mm256_sllv_epi32(idx, _mm256_set1_epi32(31 - bit)));
  __m256 m1 = _mm256_castsi256_ps(_mm256_sllv_epi32(idx, _mm256_set1_epi32(30 - bit)));
  __m256 lo = _mm256_blendv_ps(t0, t1, m0), hi = _mm256_blendv_ps(t2, t3, m0);
  return _mm256_blendv_ps(lo, hi, m1);
}

/* hsv_store_avx2 stores eight lanes of floats times 255, rounded to
 * nearest even and saturated to 0..255 as round_sat (NaN gives 0 there
 * too: cvtps gives INT32_MIN, packus 0), at p. */
__attribute__((target("avx2"))) static inline void hsv_store_avx2(uint8_t *p, __m256 f) {
  __m256i x = _mm256_cvtps_epi32(_mm256_mul_ps(f, _mm256_set1_ps(255)));
  x = _mm256_permute4x64_epi64(_mm256_packus_epi32(x, x), 0x08);
  __m128i y = _mm256_castsi256_si128(x);
  _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(y, y));
}

/* hsv_avx2 is hsv_scalar eight pixels at a time up to a multiple of 8,
 * with the call's tables composed per input byte and read by four
 * gathers: sdiv[v] | val[v] << 20 (sdiv is below 2^20), hdiv[diff],
 * over[sat[s]] and hue[h]; the value over 255 and the hue's fraction and
 * sector computed as hsvBack computes them (frac[1] is its 6/180 as a
 * float; the mod 6 of a float below 12 is it less 6 from 6 on, exactly).
 * Its float operations are hsv_scalar's, unfused (no FMA in its target);
 * it takes no branch for a saturation of 0: then v(1-s), v(1-sh) and
 * v(1-s(1-h)) are v exactly. Returns where it stopped. */
__attribute__((target("avx2"))) static size_t hsv_avx2(uint8_t *rp, uint8_t *gp, uint8_t *bp, size_t n,
                                                        const uint8_t *luts, const int32_t *sdiv,
                                                        const int32_t *hdiv, const float *frac,
                                                        const uint8_t *sector, const float *over) {
  int32_t vT[256], hT[256];
  float fsT[256];
  for (int i = 0; i < 256; i++)
    vT[i] = sdiv[i] | (int32_t)luts[512 + i] << 20, hT[i] = luts[i], fsT[i] = over[luts[256 + i]];
  int32_t picks[8] = {0};
  for (int k = 0; k < 6; k++)
    picks[k] = hsv_sector[k][0] | hsv_sector[k][1] << 2 | hsv_sector[k][2] << 4;
  (void)sector;
  const __m256i half = _mm256_set1_epi32(1 << 11), h180 = _mm256_set1_epi32(180), zero = _mm256_setzero_si256();
  const __m256i low20 = _mm256_set1_epi32((1 << 20) - 1), pickv = _mm256_loadu_si256((const __m256i *)picks);
  const __m256 one = _mm256_set1_ps(1), six = _mm256_set1_ps(6), over1 = _mm256_set1_ps(over[1]);
  const __m256 frac1 = _mm256_set1_ps(frac[1]);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i r = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(rp + i)));
    __m256i g = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(gp + i)));
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(bp + i)));
    __m256i v = _mm256_max_epi32(_mm256_max_epi32(r, g), b);
    __m256i diff = _mm256_sub_epi32(v, _mm256_min_epi32(_mm256_min_epi32(r, g), b));
    __m256i vt = _mm256_i32gather_epi32((const int *)vT, v, 4);
    __m256i s = _mm256_mullo_epi32(diff, _mm256_and_si256(vt, low20));
    s = _mm256_srai_epi32(_mm256_add_epi32(s, half), 12);
    __m256i hr = _mm256_sub_epi32(g, b);
    __m256i hg = _mm256_add_epi32(_mm256_sub_epi32(b, r), _mm256_slli_epi32(diff, 1));
    __m256i hb = _mm256_add_epi32(_mm256_sub_epi32(r, g), _mm256_slli_epi32(diff, 2));
    __m256i h = _mm256_blendv_epi8(hb, hg, _mm256_cmpeq_epi32(v, g));
    h = _mm256_blendv_epi8(h, hr, _mm256_cmpeq_epi32(v, r));
    h = _mm256_mullo_epi32(h, _mm256_i32gather_epi32((const int *)hdiv, diff, 4));
    h = _mm256_srai_epi32(_mm256_add_epi32(h, half), 12);
    h = _mm256_add_epi32(h, _mm256_and_si256(_mm256_cmpgt_epi32(zero, h), h180));
    __m256 fs = _mm256_i32gather_ps(fsT, s, 4);
    __m256 fv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(vt, 20)), over1);
    __m256 fh = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_i32gather_epi32((const int *)hT, h, 4)), frac1);
    fh = _mm256_sub_ps(fh, _mm256_and_ps(_mm256_cmp_ps(fh, six, _CMP_GE_OQ), six));
    __m256 fl = _mm256_floor_ps(fh);
    fh = _mm256_sub_ps(fh, fl);
    __m256i idx = _mm256_permutevar8x32_epi32(pickv, _mm256_cvttps_epi32(fl));
    __m256 t1 = _mm256_mul_ps(fv, _mm256_sub_ps(one, fs));
    __m256 t2 = _mm256_mul_ps(fv, _mm256_sub_ps(one, _mm256_mul_ps(fs, fh)));
    __m256 t3 = _mm256_mul_ps(fv, _mm256_sub_ps(one, _mm256_mul_ps(fs, _mm256_sub_ps(one, fh))));
    hsv_store_avx2(bp + i, hsv_pick_avx2(idx, 0, fv, t1, t2, t3));
    hsv_store_avx2(gp + i, hsv_pick_avx2(idx, 2, fv, t1, t2, t3));
    hsv_store_avx2(rp + i, hsv_pick_avx2(idx, 4, fv, t1, t2, t3));
  }
  return i;
}
#define HSV512 __attribute__((target("avx512f,avx512bw,avx512vbmi,avx2")))

/* hsv_lut512 is, in every byte, t[x] for the byte x of idx: t 256 bytes in
 * four vectors, two 128-byte lookups (vpermt2b) and bit 7 picking. */
HSV512 static inline __m512i hsv_lut512(const __m512i *t, __m512i idx) {
  __m512i lo = _mm512_permutex2var_epi8(t[0], idx, t[1]), hi = _mm512_permutex2var_epi8(t[2], idx, t[3]);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}

/* hsv_word512 is the word table whose bytes are t[0..k-1] (256 bytes
 * each) at the index in each lane (0..255), the bytes past k 0. */
HSV512 static inline __m512i hsv_word512(const __m512i (*t)[4], int k, __m512i idx) {
  const __m512i bcast = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0x00000000);
  idx = _mm512_shuffle_epi8(idx, bcast);
  __m512i w = _mm512_setzero_si512();
  for (int j = 0; j < k; j++)
    w = _mm512_mask_blend_epi8((__mmask64)(0x1111111111111111ULL << j), w, hsv_lut512(t[j], idx));
  return w;
}

/* hsv_pick512 is hsv_pick_avx2 with AVX-512 masks. */
HSV512 static inline __m512 hsv_pick512(__m512i idx, int bit, __m512 t0, __m512 t1, __m512 t2, __m512 t3) {
  __mmask16 m0 = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(1 << bit));
  __mmask16 m1 = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(2 << bit));
  return _mm512_mask_blend_ps(m1, _mm512_mask_blend_ps(m0, t0, t1), _mm512_mask_blend_ps(m0, t2, t3));
}

/* hsv_store512 is hsv_store_avx2 on sixteen lanes (below 0 and NaN give
 * 0, past 255 255, as round_sat). */
HSV512 static inline void hsv_store512(uint8_t *p, __m512 f) {
  __m512i x = _mm512_cvtps_epi32(_mm512_mul_ps(f, _mm512_set1_ps(255)));
  _mm_storeu_si128((__m128i *)p, _mm512_cvtusepi32_epi8(_mm512_max_epi32(x, _mm512_setzero_si512())));
}

/* hsv_avx512 is hsv_avx2 sixteen pixels at a time with AVX-512 VBMI: its
 * tables read by byte lookups in registers (vpermt2b), not gathers. */
HSV512 static size_t hsv_avx512(uint8_t *rp, uint8_t *gp, uint8_t *bp, size_t n, const uint8_t *luts,
                                 const int32_t *sdiv, const int32_t *hdiv, const float *frac, const float *over) {
  uint8_t tb[9][256];
  for (int i = 0; i < 256; i++) {
    uint32_t vt = (uint32_t)sdiv[i] | (uint32_t)luts[512 + i] << 20;
    for (int j = 0; j < 4; j++)
      tb[j][i] = (uint8_t)(vt >> 8 * j);
    for (int j = 0; j < 3; j++)
      tb[4 + j][i] = (uint8_t)((uint32_t)hdiv[i] >> 8 * j);
    tb[7][i] = luts[256 + i], tb[8][i] = luts[i];
  }
  __m512i t[9][4];
  for (int j = 0; j < 9; j++)
    for (int q = 0; q < 4; q++)
      t[j][q] = _mm512_loadu_si512((const void *)(tb[j] + 64 * q));
  int32_t picks[16] = {0};
  for (int k = 0; k < 6; k++)
    picks[k] = hsv_sector[k][0] | hsv_sector[k][1] << 2 | hsv_sector[k][2] << 4;
  const __m512i half = _mm512_set1_epi32(1 << 11), h180 = _mm512_set1_epi32(180), zero = _mm512_setzero_si512();
  const __m512i low20 = _mm512_set1_epi32((1 << 20) - 1), low8 = _mm512_set1_epi32(0xff);
  const __m512i pickv = _mm512_loadu_si512((const void *)picks);
  const __m512 one = _mm512_set1_ps(1), six = _mm512_set1_ps(6), over1 = _mm512_set1_ps(over[1]);
  const __m512 frac1 = _mm512_set1_ps(frac[1]);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i r = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(rp + i)));
    __m512i g = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(gp + i)));
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(bp + i)));
    __m512i v = _mm512_max_epi32(_mm512_max_epi32(r, g), b);
    __m512i diff = _mm512_sub_epi32(v, _mm512_min_epi32(_mm512_min_epi32(r, g), b));
    __m512i vt = hsv_word512(t, 4, v);
    __m512i s = _mm512_mullo_epi32(diff, _mm512_and_si512(vt, low20));
    s = _mm512_srai_epi32(_mm512_add_epi32(s, half), 12);
    __m512i hr = _mm512_sub_epi32(g, b);
    __m512i hg = _mm512_add_epi32(_mm512_sub_epi32(b, r), _mm512_slli_epi32(diff, 1));
    __m512i hb = _mm512_add_epi32(_mm512_sub_epi32(r, g), _mm512_slli_epi32(diff, 2));
    __m512i h = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(v, g), hb, hg);
    h = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(v, r), h, hr);
    h = _mm512_mullo_epi32(h, hsv_word512(t + 4, 3, diff));
    h = _mm512_srai_epi32(_mm512_add_epi32(h, half), 12);
    h = _mm512_mask_add_epi32(h, _mm512_cmplt_epi32_mask(h, zero), h, h180);
    __m512 fs = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(hsv_lut512(t[7], s), low8)), over1);
    __m512 fv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(vt, 20)), over1);
    __m512 fh = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(hsv_lut512(t[8], h), low8)), frac1);
    fh = _mm512_mask_sub_ps(fh, _mm512_cmp_ps_mask(fh, six, _CMP_GE_OQ), fh, six);
    __m512 fl = _mm512_roundscale_ps(fh, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    fh = _mm512_sub_ps(fh, fl);
    __m512i idx = _mm512_permutexvar_epi32(_mm512_cvttps_epi32(fl), pickv);
    __m512 t1 = _mm512_mul_ps(fv, _mm512_sub_ps(one, fs));
    __m512 t2 = _mm512_mul_ps(fv, _mm512_sub_ps(one, _mm512_mul_ps(fs, fh)));
    __m512 t3 = _mm512_mul_ps(fv, _mm512_sub_ps(one, _mm512_mul_ps(fs, _mm512_sub_ps(one, fh))));
    hsv_store512(bp + i, hsv_pick512(idx, 0, fv, t1, t2, t3));
    hsv_store512(gp + i, hsv_pick512(idx, 2, fv, t1, t2, t3));
    hsv_store512(rp + i, hsv_pick512(idx, 4, fv, t1, t2, t3));
  }
  return i;
}
#endif

void stoker_cv_hsv(uint8_t *pix, size_t n, const uint8_t *luts, const int32_t *sdiv, const int32_t *hdiv,
                   const float *frac, const uint8_t *sector, const float *over, int simd) {
  uint8_t *rp = pix, *gp = pix + n, *bp = pix + 2 * n;
  size_t i = 0;
#if defined(__x86_64__)
  if (simd >= 2 && cpu_simd >= 2 && cpu_vbmi)
    i = hsv_avx512(rp, gp, bp, n, luts, sdiv, hdiv, frac, over);
  else if (simd >= 1 && cpu_simd >= 1)
    i = hsv_avx2(rp, gp, bp, n, luts, sdiv, hdiv, frac, sector, over);
#endif
  (void)simd;
  hsv_scalar(rp, gp, bp, i, n, luts, sdiv, hdiv, frac, sector, over);
}

/* resize_hrow is resize.go's hrow: the horizontal pass of source row src
 * into row, dw sums; from x on (the vector pass did those before). */
static inline void resize_hrow(int32_t *row, const uint8_t *src, int x, int dw, const int32_t *xofs,
                               const int16_t *xw0, const int16_t *xw1, int edge) {
  for (; x < edge; x++) {
    int32_t s = xofs[x];
    row[x] = (int32_t)src[s] * xw0[x] + (int32_t)src[s + 1] * xw1[x];
  }
  for (; x < dw; x++)
    row[x] = (int32_t)src[xofs[x]] * 2048;
}

#if defined(__x86_64__)
/* resize_hrow_avx2 is resize_hrow eight sums at a time up to the edge:
 * each output's two source bytes read as one 16-bit word, widened, and
 * multiplied and added with its weights (wp: w0 | w1 << 16) by pmaddwd,
 * the same integer sums. */
__attribute__((target("avx2"))) static void resize_hrow_avx2(int32_t *row, const uint8_t *src, int dw,
                                                            const int32_t *xofs, const int16_t *xw0,
                                                            const int16_t *xw1, int edge, const int32_t *wp) {
  int x = 0;
  for (; x + 8 <= edge; x += 8) {
    uint16_t t[8];
    for (int k = 0; k < 8; k++)
      memcpy(&t[k], src + xofs[x + k], 2);
    __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)t));
    __m256i w = _mm256_loadu_si256((const __m256i *)(wp + x));
    _mm256_storeu_si256((__m256i *)(row + x), _mm256_madd_epi16(v, w));
  }
  resize_hrow(row, src, x, dw, xofs, xw0, xw1, edge);
}
#endif

void stoker_cv_resize(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int sh, const int32_t *xofs,
                      const int16_t *xw0, const int16_t *xw1, int edge, const int32_t *yofs, const int16_t *yw0,
                      const int16_t *yw1, int32_t *rows, int simd) {
  size_t n = (size_t)sw * sh, dn = (size_t)dw * dh;
  int32_t *wp = rows + 2 * (size_t)dw;
  for (int x = 0; x < dw; x++)
    wp[x] = (int32_t)((uint32_t)(uint16_t)xw0[x] | (uint32_t)(uint16_t)xw1[x] << 16);
  for (int c = 0; c < 3; c++) {
    const uint8_t *sp = src + (size_t)c * n;
    uint8_t *dp = dst + (size_t)c * dn;
    int have[2] = {-1, -1};
    for (int dy = 0; dy < dh; dy++) {
      int sy = yofs[dy], sy1 = yofs[dy] + 1;
      sy = sy < 0 ? 0 : sy > sh - 1 ? sh - 1 : sy;
      sy1 = sy1 < 0 ? 0 : sy1 > sh - 1 ? sh - 1 : sy1;
      int32_t *r[2];
      int want[2] = {sy, sy1};
      for (int k = 0; k < 2; k++) {
        int i = have[0] == want[k] ? 0 : have[1] == want[k] ? 1 : -1;
        if (i < 0) {
          /* replace the row not wanted now (resize.go's hrow: the lower) */
          i = have[1] < have[0] ? 1 : 0;
          if (k == 1 && have[i] == want[0])
            i = 1 - i;
          have[i] = want[k];
          int32_t *row = rows + (size_t)i * dw;
          const uint8_t *srow = sp + (size_t)want[k] * sw;
#if defined(__x86_64__)
          if (simd >= 1 && cpu_simd >= 1)
            resize_hrow_avx2(row, srow, dw, xofs, xw0, xw1, edge, wp);
          else
#endif
            resize_hrow(row, srow, 0, dw, xofs, xw0, xw1, edge);
          (void)simd;
        }
        r[k] = rows + (size_t)i * dw;
      }
      const int32_t *r0 = r[0], *r1 = r[1];
      int32_t b0 = yw0[dy], b1 = yw1[dy];
      uint8_t *out = dp + (size_t)dy * dw;
      for (int x = 0; x < dw; x++)
        out[x] = (uint8_t)((((b0 * (r0[x] >> 4)) >> 16) + ((b1 * (r1[x] >> 4)) >> 16) + 2) >> 2);
    }
  }
}
