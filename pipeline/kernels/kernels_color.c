/* The colour kernels in C with AVX2, twins of color.go,
 * hue.go, point.go and adjust_sharpness: each computes
 * what its Go twin computes, with the same roundings (IEEE float32 and
 * float64 operations whose products are exact, and integer math), so the
 * bytes are the same (TestExactColourKernelsCgoSameBytes compares them, on every
 * colour where a kernel reads one pixel). Without AVX2 the Go twins run.
 *
 * Each loop does 8 or 16 pixels at a time; the last few go through the
 * same code in a zero-padded buffer.
 *
 * No fused multiply-adds (see turbo.c): the products here are exact, so
 * fusing could not change a result, but the rule is the package's. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "kernels.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* load8 widens 8 bytes to int32 lanes; pack16 narrows two vectors of
 * int32 lanes in 0..255 to 16 bytes, in order. */
AVX2 static inline __m256i load8(const uint8_t *p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

AVX2 static inline void store8(uint8_t *p, __m256i v) {
  __m256i w = _mm256_packs_epi32(v, v); /* 0-3 0-3 | 4-7 4-7 as int16 */
  __m128i q = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  /* q's bytes: 0-3 0-3 4-7 4-7; its dwords 0 and 2 are 0-7 */
  _mm_storel_epi64((__m128i *)p, _mm_shuffle_epi32(q, 0x08));
}

/* clamp_trunc is clampTrunc on 8 float32 lanes: clamp to [0, 255] (NaN
 * to 0), truncate. */
AVX2 static inline __m256i clamp_trunc(__m256 x) {
  x = _mm256_max_ps(x, _mm256_setzero_ps()); /* NaN: the second operand, 0 */
  x = _mm256_min_ps(x, _mm256_set1_ps(255.0f));
  return _mm256_cvttps_epi32(x);
}

/* add_round32 is float32(a + b) of two float64 vectors of 4 as 8 lanes. */
AVX2 static inline __m256 add_round32(__m256d a_lo, __m256d a_hi, __m256d b_lo, __m256d b_hi) {
  return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_add_pd(a_hi, b_hi)), _mm256_cvtpd_ps(_mm256_add_pd(a_lo, b_lo)));
}

AVX2 static inline __m256d lo_pd(__m256 x) { return _mm256_cvtps_pd(_mm256_castps256_ps128(x)); }
AVX2 static inline __m256d hi_pd(__m256 x) { return _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)); }
AVX2 static inline __m256d lo_pdi(__m256i x) { return _mm256_cvtepi32_pd(_mm256_castsi256_si128(x)); }
AVX2 static inline __m256d hi_pdi(__m256i x) { return _mm256_cvtepi32_pd(_mm256_extracti128_si256(x, 1)); }

/* gray8 is grayFloat on 8 pixels: r*wr rounded to float32, then + g*wg and
 * + b*wb, each sum exact in float64 and rounded to float32, truncated. */
AVX2 static inline __m256i gray8(__m256i r, __m256i g, __m256i b) {
  const __m256d wg = _mm256_set1_pd((double)0.587f), wb = _mm256_set1_pd((double)0.114f);
  __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(r), _mm256_set1_ps(0.2989f));
  s = add_round32(lo_pd(s), hi_pd(s), _mm256_mul_pd(lo_pdi(g), wg), _mm256_mul_pd(hi_pdi(g), wg));
  s = add_round32(lo_pd(s), hi_pd(s), _mm256_mul_pd(lo_pdi(b), wb), _mm256_mul_pd(hi_pdi(b), wb));
  return _mm256_cvttps_epi32(s);
}

/* gray's exact integer sum (color.go) on 16 pixels, its weights
 * (float32 times 2**30) split at 15 bits, W = hi << 15 | lo, for pmaddwd:
 * the sum is hi_sum << 15 + lo_sum, and its floor over 2**30 is
 * (hi_sum + lo_sum >> 15) >> 15. */
#define GRAY_WR_HI 9794
#define GRAY_WR_LO 11648
#define GRAY_WG_HI 19234
#define GRAY_WG_LO 26752
#define GRAY_WB_HI 3735
#define GRAY_WB_LO 18088

/* gray16 is gray on the 16 pixels at pr, pg, pb: 16-bit lanes, in order.
 * Where a sum's fraction is under 2**13 units of 2**-30 but not 0 (gray's
 * test: a few pixels in a million), all 16 take gray8's float steps, which
 * agree with the integer sum everywhere else. */
AVX2 static inline __m256i gray16(const uint8_t *pr, const uint8_t *pg, const uint8_t *pb) {
  const __m256i zero = _mm256_setzero_si256(), m15 = _mm256_set1_epi32(0x7fff), near = _mm256_set1_epi32(1 << 13);
  const __m256i khi = _mm256_set1_epi32(GRAY_WR_HI | GRAY_WG_HI << 16);
  const __m256i klo = _mm256_set1_epi32(GRAY_WR_LO | GRAY_WG_LO << 16);
  const __m256i bhi = _mm256_set1_epi32(GRAY_WB_HI), blo = _mm256_set1_epi32(GRAY_WB_LO);
  __m256i r = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)pr));
  __m256i g = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)pg));
  __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)pb));
  __m256i rg0 = _mm256_unpacklo_epi16(r, g), rg1 = _mm256_unpackhi_epi16(r, g);
  __m256i b0 = _mm256_unpacklo_epi16(b, zero), b1 = _mm256_unpackhi_epi16(b, zero);
  __m256i lo0 = _mm256_add_epi32(_mm256_madd_epi16(rg0, klo), _mm256_madd_epi16(b0, blo));
  __m256i lo1 = _mm256_add_epi32(_mm256_madd_epi16(rg1, klo), _mm256_madd_epi16(b1, blo));
  __m256i s0 = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(rg0, khi), _mm256_madd_epi16(b0, bhi)),
                                _mm256_srli_epi32(lo0, 15));
  __m256i s1 = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(rg1, khi), _mm256_madd_epi16(b1, bhi)),
                                _mm256_srli_epi32(lo1, 15));
  __m256i f0 = _mm256_and_si256(lo0, m15), f1 = _mm256_and_si256(lo1, m15);
  __m256i n0 = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_and_si256(s0, m15), zero),
                                _mm256_and_si256(_mm256_cmpgt_epi32(near, f0), _mm256_cmpgt_epi32(f0, zero)));
  __m256i n1 = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_and_si256(s1, m15), zero),
                                _mm256_and_si256(_mm256_cmpgt_epi32(near, f1), _mm256_cmpgt_epi32(f1, zero)));
  __m256i any = _mm256_or_si256(n0, n1);
  if (__builtin_expect(!_mm256_testz_si256(any, any), 0)) {
    __m256i ya = gray8(load8(pr), load8(pg), load8(pb)), yb = gray8(load8(pr + 8), load8(pg + 8), load8(pb + 8));
    return _mm256_permute4x64_epi64(_mm256_packs_epi32(ya, yb), 0xD8);
  }
  /* unpack then pack within 128-bit halves: the lanes come back in order */
  return _mm256_packs_epi32(_mm256_srli_epi32(s0, 15), _mm256_srli_epi32(s1, 15));
}

/* lo8 and hi8 are pixels 0-7 and 8-15 of 16 16-bit lanes as 32-bit lanes. */
AVX2 static inline __m256i lo8(__m256i y) { return _mm256_cvtepi16_epi32(_mm256_castsi256_si128(y)); }
AVX2 static inline __m256i hi8(__m256i y) { return _mm256_cvtepi16_epi32(_mm256_extracti128_si256(y, 1)); }

/* store16 narrows 16 16-bit lanes in 0..255 to 16 bytes. */
AVX2 static inline void store16(uint8_t *p, __m256i y) {
  __m256i b = _mm256_permute4x64_epi64(_mm256_packus_epi16(y, y), 0x08);
  _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(b));
}

/* Elementwise loops over three planes (or one) of n pixels, B at a time,
 * the tail in a zero-padded copy. */
#define PLANES3(B, n, r, g, b, ...)                                                                         \
  do {                                                                                                      \
    int i_;                                                                                                 \
    for (i_ = 0; i_ + (B) <= (n); i_ += (B)) {                                                              \
      uint8_t *pr = (r) + i_, *pg = (g) + i_, *pb = (b) + i_;                                               \
      __VA_ARGS__;                                                                                          \
    }                                                                                                       \
    if (i_ < (n)) {                                                                                         \
      uint8_t tr[B] = {0}, tg[B] = {0}, tb[B] = {0}, *pr = tr, *pg = tg, *pb = tb;                          \
      int k_ = (n) - i_;                                                                                    \
      memcpy(tr, (r) + i_, k_), memcpy(tg, (g) + i_, k_), memcpy(tb, (b) + i_, k_);                         \
      __VA_ARGS__;                                                                                          \
      memcpy((r) + i_, tr, k_), memcpy((g) + i_, tg, k_), memcpy((b) + i_, tb, k_);                         \
    }                                                                                                       \
  } while (0)

#define PLANE1(B, n, p, ...)                                                                                \
  do {                                                                                                      \
    int i_;                                                                                                 \
    for (i_ = 0; i_ + (B) <= (n); i_ += (B)) {                                                              \
      uint8_t *pp = (p) + i_;                                                                               \
      __VA_ARGS__;                                                                                          \
    }                                                                                                       \
    if (i_ < (n)) {                                                                                         \
      uint8_t tp[B] = {0}, *pp = tp;                                                                        \
      int k_ = (n) - i_;                                                                                    \
      memcpy(tp, (p) + i_, k_);                                                                             \
      __VA_ARGS__;                                                                                          \
      memcpy((p) + i_, tp, k_);                                                                             \
    }                                                                                                       \
  } while (0)

AVX2 void stoker_gray_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n) {
  PLANES3(16, n, r, g, b, {
    __m256i y = gray16(pr, pg, pb);
    store16(pr, y), store16(pg, y), store16(pb, y);
  });
}

AVX2 int64_t stoker_gray_sum_avx2(const uint8_t *r, const uint8_t *g, const uint8_t *b, int n) {
  /* Each 32-bit lane sums at most n/8 + 2 grays of at most 254: under
   * 2**31 for n up to 4096 * 4096. The padding, black, adds 0 (and the
   * tail copied back is the same bytes). */
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc = _mm256_setzero_si256();
  int32_t lanes[8];
  int64_t sum = 0;
  int i;
  PLANES3(16, n, (uint8_t *)r, (uint8_t *)g, (uint8_t *)b,
          acc = _mm256_add_epi32(acc, _mm256_madd_epi16(gray16(pr, pg, pb), ones)));
  _mm256_storeu_si256((__m256i *)lanes, acc);
  for (i = 0; i < 8; i++)
    sum += lanes[i];
  return sum;
}

/* blend8 is clampTrunc(float32(float32(v*ratio) + o)), o in float64. */
AVX2 static inline __m256i blend8(__m256i v, __m256 ratio, __m256d o_lo, __m256d o_hi) {
  __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(v), ratio);
  return clamp_trunc(add_round32(lo_pd(a), hi_pd(a), o_lo, o_hi));
}

AVX2 void stoker_blend_const_avx2(uint8_t *p, int n, float ratio, double c) {
  const __m256 rv = _mm256_set1_ps(ratio);
  const __m256d cv = _mm256_set1_pd(c);
  PLANE1(8, n, p, store8(pp, blend8(load8(pp), rv, cv, cv)));
}

AVX2 void stoker_blend_const32_avx2(uint8_t *p, int n, float ratio, float c) {
  const __m256 rv = _mm256_set1_ps(ratio), cv = _mm256_set1_ps(c);
  PLANE1(8, n, p, store8(pp, clamp_trunc(_mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(load8(pp)), rv), cv))));
}

AVX2 int stoker_minmax_avx2(const uint8_t *p, int n) {
  __m256i vlo = _mm256_set1_epi8((char)0xff), vhi = _mm256_setzero_si256();
  uint8_t l[32], h[32], a = 255, b = 0;
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
    vlo = _mm256_min_epu8(vlo, v), vhi = _mm256_max_epu8(vhi, v);
  }
  _mm256_storeu_si256((__m256i *)l, vlo), _mm256_storeu_si256((__m256i *)h, vhi);
  for (int k = 0; k < 32; k++)
    a = l[k] < a ? l[k] : a, b = h[k] > b ? h[k] : b;
  for (; i < n; i++)
    a = p[i] < a ? p[i] : a, b = p[i] > b ? p[i] : b;
  return a | b << 8;
}

AVX2 static inline void saturate8(uint8_t *pr, uint8_t *pg, uint8_t *pb, __m256i y, __m256 rv, __m256d av) {
  __m256d o_lo = _mm256_mul_pd(lo_pdi(y), av), o_hi = _mm256_mul_pd(hi_pdi(y), av);
  store8(pr, blend8(load8(pr), rv, o_lo, o_hi));
  store8(pg, blend8(load8(pg), rv, o_lo, o_hi));
  store8(pb, blend8(load8(pb), rv, o_lo, o_hi));
}

AVX2 void stoker_saturate_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n, float ratio, double alpha) {
  const __m256 rv = _mm256_set1_ps(ratio);
  const __m256d av = _mm256_set1_pd(alpha);
  PLANES3(16, n, r, g, b, {
    __m256i y = gray16(pr, pg, pb);
    saturate8(pr, pg, pb, lo8(y), rv, av);
    saturate8(pr + 8, pg + 8, pb + 8, hi8(y), rv, av);
  });
}

#define HUE_FRAC 20
#define HUE_EPS 16432

/* hue8 is hueShift on 8 pixels. The sextant is counted by comparisons
 * (x >= j*unit for j = 1..5) rather than divided out. */
AVX2 static inline void hue8(uint8_t *pr, uint8_t *pg, uint8_t *pb, __m256i shift) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i r = load8(pr), g = load8(pg), b = load8(pb);
  __m256i hi = _mm256_max_epi32(_mm256_max_epi32(r, g), b), lo = _mm256_min_epi32(_mm256_min_epi32(r, g), b);
  __m256i d = _mm256_sub_epi32(hi, lo);
  __m256i mr = _mm256_cmpeq_epi32(hi, r), mg = _mm256_andnot_si256(mr, _mm256_cmpeq_epi32(hi, g));
  __m256i d2 = _mm256_add_epi32(d, d), d4 = _mm256_add_epi32(d2, d2);
  __m256i h = _mm256_add_epi32(d4, _mm256_sub_epi32(r, g));
  h = _mm256_blendv_epi8(h, _mm256_add_epi32(d2, _mm256_sub_epi32(b, r)), mg);
  h = _mm256_blendv_epi8(h, _mm256_sub_epi32(g, b), mr);
  __m256i unit = _mm256_slli_epi32(d, HUE_FRAC);
  __m256i six = _mm256_add_epi32(_mm256_slli_epi32(d4, HUE_FRAC), _mm256_slli_epi32(d2, HUE_FRAC));
  __m256i x = _mm256_add_epi32(_mm256_slli_epi32(h, HUE_FRAC), _mm256_mullo_epi32(d, shift));
  x = _mm256_add_epi32(x, _mm256_and_si256(_mm256_cmpgt_epi32(zero, x), six));
  x = _mm256_sub_epi32(x, _mm256_andnot_si256(_mm256_cmpgt_epi32(six, x), six));
  /* k = #{j in 1..5: x >= j*unit}; rem = x - k*unit */
  __m256i k = zero, rem = x, ju = unit;
  int j;
  for (j = 1; j <= 5; j++) {
    __m256i ge = _mm256_cmpgt_epi32(x, _mm256_sub_epi32(ju, _mm256_set1_epi32(1)));
    k = _mm256_sub_epi32(k, ge);
    rem = _mm256_sub_epi32(rem, _mm256_and_si256(ge, unit));
    ju = _mm256_add_epi32(ju, unit);
  }
  __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(k, _mm256_set1_epi32(1)), _mm256_set1_epi32(1));
  __m256i mid = _mm256_blendv_epi8(_mm256_add_epi32(_mm256_slli_epi32(lo, HUE_FRAC), rem),
                                   _mm256_sub_epi32(_mm256_slli_epi32(hi, HUE_FRAC), rem), odd);
  mid = _mm256_add_epi32(mid, _mm256_srai_epi32(
                                  _mm256_mullo_epi32(_mm256_srai_epi32(mid, 12), _mm256_set1_epi32(HUE_EPS)), 10));
  mid = _mm256_srai_epi32(mid, HUE_FRAC);
  /* Sextants 0..5: r is hi mid lo lo mid hi, g mid hi hi mid lo lo, b lo lo
   * mid hi hi mid. */
  __m256i k0 = _mm256_cmpeq_epi32(k, zero), k1 = _mm256_cmpeq_epi32(k, _mm256_set1_epi32(1));
  __m256i k2 = _mm256_cmpeq_epi32(k, _mm256_set1_epi32(2)), k3 = _mm256_cmpeq_epi32(k, _mm256_set1_epi32(3));
  __m256i k4 = _mm256_cmpeq_epi32(k, _mm256_set1_epi32(4)), k5 = _mm256_cmpeq_epi32(k, _mm256_set1_epi32(5));
  __m256i ro = _mm256_blendv_epi8(lo, hi, _mm256_or_si256(k0, k5));
  ro = _mm256_blendv_epi8(ro, mid, _mm256_or_si256(k1, k4));
  __m256i go = _mm256_blendv_epi8(lo, hi, _mm256_or_si256(k1, k2));
  go = _mm256_blendv_epi8(go, mid, _mm256_or_si256(k0, k3));
  __m256i bo = _mm256_blendv_epi8(lo, hi, _mm256_or_si256(k3, k4));
  bo = _mm256_blendv_epi8(bo, mid, _mm256_or_si256(k2, k5));
  store8(pr, ro), store8(pg, go), store8(pb, bo);
}

AVX2 void stoker_hue_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n, int32_t shift) {
  const __m256i sv = _mm256_set1_epi32(shift);
  PLANES3(8, n, r, g, b, hue8(pr, pg, pb, sv));
}

/* sharpen8 is sharpenRow on 8 pixels at x of a row: up, at, down point
 * at x in the rows as they were. */
AVX2 static inline void sharpen8(uint8_t *out, const uint8_t *up, const uint8_t *at, const uint8_t *down,
                                 __m256d alpha) {
  __m256i c = load8(at);
  __m256i n = _mm256_add_epi32(_mm256_add_epi32(load8(up - 1), load8(up)), load8(up + 1));
  n = _mm256_add_epi32(n, _mm256_add_epi32(load8(at - 1), load8(at + 1)));
  n = _mm256_add_epi32(n, _mm256_add_epi32(_mm256_add_epi32(load8(down - 1), load8(down)), load8(down + 1)));
  n = _mm256_add_epi32(n, _mm256_mullo_epi32(c, _mm256_set1_epi32(5)));
  /* (2n + 13) / 26 as (2n + 13) * ceil(2**20 / 26) >> 20: exact below
   * 2**18, and 2n + 13 is at most 6643. */
  __m256i blur = _mm256_srli_epi32(
      _mm256_mullo_epi32(_mm256_add_epi32(_mm256_add_epi32(n, n), _mm256_set1_epi32(13)), _mm256_set1_epi32(40330)),
      20);
  __m256i d = _mm256_sub_epi32(blur, c);
  __m256 x = add_round32(lo_pdi(c), hi_pdi(c), _mm256_mul_pd(lo_pdi(d), alpha), _mm256_mul_pd(hi_pdi(d), alpha));
  store8(out, clamp_trunc(x));
}

AVX2 void stoker_sharpen_avx2(uint8_t *pl, int w, int h, double alpha, uint8_t *prev, uint8_t *cur) {
  const __m256d av = _mm256_set1_pd(alpha);
  int y, x;
  /* prev and cur are rows y-1 and y as they were (w bytes each); groups
   * of 8 read x-1 .. x+8 inside the row, the last few go through copies. */
  memcpy(prev, pl, w);
  memcpy(cur, pl + w, w);
  for (y = 1; y < h - 1; y++) {
    uint8_t *row = pl + (size_t)y * w, *next = row + w;
    for (x = 1; x + 8 <= w - 1; x += 8)
      sharpen8(row + x, prev + x, cur + x, next + x, av);
    if (x < w - 1) {
      uint8_t u[24] = {0}, a[24] = {0}, dn[24] = {0}, o[24] = {0};
      int k = w - 1 - x; /* 1..7 outputs, reading x-1 .. x+k */
      memcpy(u, prev + x - 1, k + 2), memcpy(a, cur + x - 1, k + 2), memcpy(dn, next + x - 1, k + 2);
      sharpen8(o + 1, u + 1, a + 1, dn + 1, av);
      memcpy(row + x, o + 1, k);
    }
    {
      uint8_t *t = prev;
      prev = cur, cur = t;
      memcpy(cur, next, w);
    }
  }
}

AVX2 void stoker_xor_avx2(uint8_t *p, int n, uint8_t m) {
  const __m256i mv = _mm256_set1_epi8((char)m);
  int i = 0;
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256((__m256i *)(p + i), _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + i)), mv));
  for (; i < n; i++)
    p[i] ^= m;
}

AVX2 void stoker_solarize_avx2(uint8_t *p, int n, int k) {
  const __m256i kv = _mm256_set1_epi8((char)(k > 255 ? 255 : k)), ones = _mm256_set1_epi8((char)0xff);
  int i = 0;
  if (k > 255)
    return;
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
    __m256i ge = _mm256_cmpeq_epi8(_mm256_max_epu8(v, kv), v); /* v >= k */
    _mm256_storeu_si256((__m256i *)(p + i), _mm256_xor_si256(v, _mm256_and_si256(ge, ones)));
  }
  for (; i < n; i++)
    if (p[i] >= k)
      p[i] = (uint8_t)~p[i];
}

AVX2 void stoker_add_below_avx2(uint8_t *p, int n, int k, int a) {
  const __m256i av = _mm256_set1_epi8((char)(a < 0 ? -a : a));
  const __m256i kv = _mm256_set1_epi8((char)(k < 1 ? 0 : k > 256 ? 255 : k - 1));
  int i = 0;
  if (k < 1 || a == 0)
    return;
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
    __m256i lt = _mm256_cmpeq_epi8(_mm256_min_epu8(v, kv), v); /* v <= k-1 */
    __m256i s = a > 0 ? _mm256_adds_epu8(v, av) : _mm256_subs_epu8(v, av);
    _mm256_storeu_si256((__m256i *)(p + i), _mm256_blendv_epi8(v, s, lt));
  }
  for (; i < n; i++)
    if (p[i] < k) {
      int x = p[i] + a;
      p[i] = (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : x);
    }
}

AVX2 void stoker_and_avx2(uint8_t *p, int n, uint8_t m) {
  const __m256i mv = _mm256_set1_epi8((char)m);
  int i = 0;
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256((__m256i *)(p + i), _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + i)), mv));
  for (; i < n; i++)
    p[i] &= m;
}

/* The saturation and hue kernels with AVX-512 (F, DQ, BW, VL: kernels.c's
 * level 3), 16 pixels a
 * step: saturate8 and hue8 lane for lane, their compares as masks and
 * their blends as masked moves. The same operations in the same order on
 * each pixel, so the same bytes (the test runs both against Go). */
#define AVX512 __attribute__((target("avx2,avx512f,avx512dq,avx512bw,avx512vl")))

AVX512 static inline __m512i load16(const uint8_t *p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* store16x narrows 16 int32 lanes in 0..255 to 16 bytes. */
AVX512 static inline void store16x(uint8_t *p, __m512i v) {
  _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8(v));
}

/* blend16 is blend8 on 16 lanes: clampTrunc(float32(float32(v*ratio) +
 * o)), o in float64 (lanes 0-7 in o_lo, 8-15 in o_hi). */
AVX512 static inline __m512i blend16(__m512i v, __m512 ratio, __m512d o_lo, __m512d o_hi) {
  __m512 a = _mm512_mul_ps(_mm512_cvtepi32_ps(v), ratio);
  __m512d a_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a)), a_hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1));
  __m512 x = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_add_pd(a_lo, o_lo))),
                                _mm512_cvtpd_ps(_mm512_add_pd(a_hi, o_hi)), 1);
  x = _mm512_max_ps(x, _mm512_setzero_ps()); /* NaN: the second operand, 0 */
  x = _mm512_min_ps(x, _mm512_set1_ps(255.0f));
  return _mm512_cvttps_epi32(x);
}

AVX512 void stoker_saturate_avx512(uint8_t *r, uint8_t *g, uint8_t *b, int n, float ratio, double alpha) {
  const __m512 rv = _mm512_set1_ps(ratio);
  const __m512d av = _mm512_set1_pd(alpha);
  PLANES3(16, n, r, g, b, {
    __m512i y = _mm512_cvtepi16_epi32(gray16(pr, pg, pb));
    __m512d o_lo = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(y)), av);
    __m512d o_hi = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(y, 1)), av);
    store16x(pr, blend16(load16(pr), rv, o_lo, o_hi));
    store16x(pg, blend16(load16(pg), rv, o_lo, o_hi));
    store16x(pb, blend16(load16(pb), rv, o_lo, o_hi));
  });
}

/* hue16 is hue8 on 16 pixels. */
AVX512 static inline void hue16(uint8_t *pr, uint8_t *pg, uint8_t *pb, __m512i shift) {
  const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
  __m512i r = load16(pr), g = load16(pg), b = load16(pb);
  __m512i hi = _mm512_max_epi32(_mm512_max_epi32(r, g), b), lo = _mm512_min_epi32(_mm512_min_epi32(r, g), b);
  __m512i d = _mm512_sub_epi32(hi, lo);
  __mmask16 mr = _mm512_cmpeq_epi32_mask(hi, r);
  __mmask16 mg = _kandn_mask16(mr, _mm512_cmpeq_epi32_mask(hi, g));
  __m512i d2 = _mm512_add_epi32(d, d), d4 = _mm512_add_epi32(d2, d2);
  __m512i h = _mm512_add_epi32(d4, _mm512_sub_epi32(r, g));
  h = _mm512_mask_blend_epi32(mg, h, _mm512_add_epi32(d2, _mm512_sub_epi32(b, r)));
  h = _mm512_mask_blend_epi32(mr, h, _mm512_sub_epi32(g, b));
  __m512i unit = _mm512_slli_epi32(d, HUE_FRAC);
  __m512i six = _mm512_add_epi32(_mm512_slli_epi32(d4, HUE_FRAC), _mm512_slli_epi32(d2, HUE_FRAC));
  __m512i x = _mm512_add_epi32(_mm512_slli_epi32(h, HUE_FRAC), _mm512_mullo_epi32(d, shift));
  x = _mm512_mask_add_epi32(x, _mm512_cmpgt_epi32_mask(zero, x), x, six);
  x = _mm512_mask_sub_epi32(x, _knot_mask16(_mm512_cmpgt_epi32_mask(six, x)), x, six);
  /* k = #{j in 1..5: x >= j*unit}; rem = x - k*unit */
  __m512i k = zero, rem = x, ju = unit;
  int j;
  for (j = 1; j <= 5; j++) {
    __mmask16 ge = _mm512_cmpgt_epi32_mask(x, _mm512_sub_epi32(ju, one));
    k = _mm512_mask_add_epi32(k, ge, k, one);
    rem = _mm512_mask_sub_epi32(rem, ge, rem, unit);
    ju = _mm512_add_epi32(ju, unit);
  }
  __mmask16 odd = _mm512_test_epi32_mask(k, one);
  __m512i mid = _mm512_mask_blend_epi32(odd, _mm512_add_epi32(_mm512_slli_epi32(lo, HUE_FRAC), rem),
                                        _mm512_sub_epi32(_mm512_slli_epi32(hi, HUE_FRAC), rem));
  mid = _mm512_add_epi32(mid, _mm512_srai_epi32(
                                  _mm512_mullo_epi32(_mm512_srai_epi32(mid, 12), _mm512_set1_epi32(HUE_EPS)), 10));
  mid = _mm512_srai_epi32(mid, HUE_FRAC);
  /* Sextants 0..5: r is hi mid lo lo mid hi, g mid hi hi mid lo lo, b lo lo
   * mid hi hi mid. */
  __mmask16 k0 = _mm512_cmpeq_epi32_mask(k, zero), k1 = _mm512_cmpeq_epi32_mask(k, one);
  __mmask16 k2 = _mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(2)), k3 = _mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(3));
  __mmask16 k4 = _mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(4)), k5 = _mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(5));
  __m512i ro = _mm512_mask_blend_epi32(_kor_mask16(k0, k5), lo, hi);
  ro = _mm512_mask_blend_epi32(_kor_mask16(k1, k4), ro, mid);
  __m512i go = _mm512_mask_blend_epi32(_kor_mask16(k1, k2), lo, hi);
  go = _mm512_mask_blend_epi32(_kor_mask16(k0, k3), go, mid);
  __m512i bo = _mm512_mask_blend_epi32(_kor_mask16(k3, k4), lo, hi);
  bo = _mm512_mask_blend_epi32(_kor_mask16(k2, k5), bo, mid);
  store16x(pr, ro), store16x(pg, go), store16x(pb, bo);
}

AVX512 void stoker_hue_avx512(uint8_t *r, uint8_t *g, uint8_t *b, int n, int32_t shift) {
  const __m512i sv = _mm512_set1_epi32(shift);
  PLANES3(16, n, r, g, b, hue16(pr, pg, pb, sv));
}


/* stoker_lut_vbmi maps each of the n bytes at p through the 256-byte lut,
 * 64 bytes a step: vpermi2b looks a byte up in 128 entries (two
 * registers), once in each half of the table, and the byte's top bit picks
 * between the two. The last bytes go through masked loads and stores. */
#define VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))

VBMI static inline __m512i lut64(__m512i v, __m512i t0, __m512i t1, __m512i t2, __m512i t3) {
  __m512i a = _mm512_permutex2var_epi8(t0, v, t1), b = _mm512_permutex2var_epi8(t2, v, t3);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), a, b);
}

VBMI void stoker_lut_vbmi(uint8_t *p, int n, stoker_lut lut) {
  const __m512i t0 = _mm512_loadu_si512(lut.b), t1 = _mm512_loadu_si512(lut.b + 64);
  const __m512i t2 = _mm512_loadu_si512(lut.b + 128), t3 = _mm512_loadu_si512(lut.b + 192);
  int i = 0;
  for (; i + 64 <= n; i += 64)
    _mm512_storeu_si512(p + i, lut64(_mm512_loadu_si512(p + i), t0, t1, t2, t3));
  if (i < n) {
    __mmask64 k = _cvtu64_mask64((1ULL << (n - i)) - 1); /* n - i is 1..63 */
    _mm512_mask_storeu_epi8(p + i, k, lut64(_mm512_maskz_loadu_epi8(k, p + i), t0, t1, t2, t3));
  }
}

int stoker_cpu_vbmi(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vbmi");
}

#else

/* Without x86 there is no AVX2 version: kernelsSIMD < 2 and Go runs. */
void stoker_lut_vbmi(uint8_t *p, int n, stoker_lut lut) {}
void stoker_saturate_avx512(uint8_t *r, uint8_t *g, uint8_t *b, int n, float ratio, double alpha) {}
void stoker_hue_avx512(uint8_t *r, uint8_t *g, uint8_t *b, int n, int32_t shift) {}
int stoker_cpu_vbmi(void) { return 0; }
void stoker_gray_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n) {}
int64_t stoker_gray_sum_avx2(const uint8_t *r, const uint8_t *g, const uint8_t *b, int n) { return 0; }
void stoker_blend_const_avx2(uint8_t *p, int n, float ratio, double c) {}
void stoker_blend_const32_avx2(uint8_t *p, int n, float ratio, float c) {}
int stoker_minmax_avx2(const uint8_t *p, int n) { return 0; }
void stoker_saturate_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n, float ratio, double alpha) {}
void stoker_hue_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n, int32_t shift) {}
void stoker_sharpen_avx2(uint8_t *pl, int w, int h, double alpha, uint8_t *prev, uint8_t *cur) {}
void stoker_xor_avx2(uint8_t *p, int n, uint8_t m) {}
void stoker_and_avx2(uint8_t *p, int n, uint8_t m) {}
void stoker_solarize_avx2(uint8_t *p, int n, int k) {}
void stoker_add_below_avx2(uint8_t *p, int n, int k, int a) {}

#endif
