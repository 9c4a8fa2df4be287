/* The resampler's passes (passes.h): the horizontal pass over a decoded
 * row, the vertical pass over the horizontally resampled rows. Every SIMD
 * level computes the same integer sums as the scalar code, lane for lane,
 * so the bytes never depend on the CPU (TestExactFastSIMDSame). No floating
 * point here: nothing for a fused multiply-add to change. */
#include "passes.h"
#include "turbo.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <tmmintrin.h>
#include <immintrin.h>
#endif

static inline uint8_t clip8(int32_t v, int prec) {
  v >>= prec;
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

#if defined(__x86_64__) || defined(__i386__)
/* The horizontal pass takes SSSE3 (pshufb) where the CPU has it: every
 * x86-64 CPU of the last fifteen years; the others run the scalar code. */
/* hsum_ssse3 is the sum for one RGBX output of np pairs of taps from p,
 * plus half, shifted back by sh: r g b x in four 32-bit lanes. A pair of
 * pixels r0 g0 b0 x0 r1 g1 b1 x1 is shuffled into r0 r1 g0 g1 b0 b1 x0 x1 as
 * 16-bit lanes (lo from the first 8 bytes of a load, hi from the next 8),
 * and pmaddwd with the broadcast coefficient pair k0 k1 sums each channel's
 * two products. */
__attribute__((target("ssse3"))) static inline __attribute__((always_inline)) __m128i
hsum_ssse3(const uint8_t *p, const __m128i *kv, const int np, __m128i lo,
           __m128i hi, __m128i half, __m128i sh) {
  __m128i acc = half, w;
  int j;
  for (j = 0; j + 2 <= np; j += 2) {
    w = _mm_loadu_si128((const __m128i *)(p + 8 * j));
    acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_shuffle_epi8(w, lo), _mm_loadu_si128(kv + j)));
    acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_shuffle_epi8(w, hi), _mm_loadu_si128(kv + j + 1)));
  }
  if (j < np) {
    w = _mm_loadl_epi64((const __m128i *)(p + 8 * j));
    acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_shuffle_epi8(w, lo), _mm_loadu_si128(kv + j)));
  }
  return _mm_sra_epi32(acc, sh);
}

/* put4_ssse3 stores outputs i..i+3, packed to the 16 bytes v, as planar
 * (three planes of n bytes) or interleaved RGB (one 16-byte store, whose
 * last 4 bytes the next group or the row's slack takes), after shuffling
 * them by to_planar or to_rgb, which also undo the order they were packed
 * in. */
__attribute__((target("ssse3"))) static inline __attribute__((always_inline)) void
put4_ssse3(__m128i v, uint8_t *dst, int i, int n, int planar, __m128i to_planar, __m128i to_rgb) {
  if (planar) {
    uint32_t r, g, b;
    v = _mm_shuffle_epi8(v, to_planar);
    r = (uint32_t)_mm_cvtsi128_si32(v);
    g = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(v, 4));
    b = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(v, 8));
    memcpy(dst + i, &r, 4);
    memcpy(dst + n + i, &g, 4);
    memcpy(dst + 2 * n + i, &b, 4);
  } else {
    _mm_storeu_si128((__m128i *)(dst + 3 * i), _mm_shuffle_epi8(v, to_rgb));
  }
}

/* hrgbx_ssse3 is hpass_rgbx with SSSE3, np pairs of taps per output; np is
 * a constant where it is inlined, so that the tap loop unrolls. Four
 * outputs at a time are packed to bytes r0 g0 b0 x0 r1 ... and shuffled
 * into r0 r1 r2 r3 g0 ... b3 (planar) or r0 g0 b0 r1 ... b3 (interleaved). */
__attribute__((target("ssse3"))) static inline __attribute__((always_inline)) void
hrgbx_ssse3(const axis *a, int n, const uint8_t *src, uint8_t *dst, int planar,
            const int np) {
  const __m128i lo = _mm_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1);
  const __m128i hi = _mm_setr_epi8(8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1);
  const __m128i to_planar = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i to_rgb = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m128i half = _mm_set1_epi32(1 << (a->prec - 1)), sh = _mm_cvtsi32_si128(a->prec);
  const __m128i *kv = (const __m128i *)a->kv;
  const int *st = a->start;
  int i = 0;
  for (; i + 4 <= n; i += 4, kv += 4 * np) {
    __m128i s0 = hsum_ssse3(src + (size_t)st[i] * 4, kv, np, lo, hi, half, sh);
    __m128i s1 = hsum_ssse3(src + (size_t)st[i + 1] * 4, kv + np, np, lo, hi, half, sh);
    __m128i s2 = hsum_ssse3(src + (size_t)st[i + 2] * 4, kv + 2 * np, np, lo, hi, half, sh);
    __m128i s3 = hsum_ssse3(src + (size_t)st[i + 3] * 4, kv + 3 * np, np, lo, hi, half, sh);
    put4_ssse3(_mm_packus_epi16(_mm_packs_epi32(s0, s1), _mm_packs_epi32(s2, s3)), dst, i, n, planar,
               to_planar, to_rgb);
  }
  for (; i < n; i++, kv += np) {
    __m128i s = hsum_ssse3(src + (size_t)st[i] * 4, kv, np, lo, hi, half, sh);
    uint32_t px;
    s = _mm_packs_epi32(s, s);
    px = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(s, s));
    if (planar) {
      dst[i] = (uint8_t)px;
      dst[n + i] = (uint8_t)(px >> 8);
      dst[2 * n + i] = (uint8_t)(px >> 16);
    } else {
      memcpy(dst + 3 * i, &px, 4); /* the 4th byte is overwritten next */
    }
  }
}

/* BY_NP calls f with np a constant for the common tap counts (1 to 3
 * pairs: bilinear and bicubic at most 1.5x down), so their loops unroll. */
#define BY_NP(f, a, n, src, dst, planar)                                                           \
  switch ((a)->np) {                                                                               \
  case 1:                                                                                          \
    f(a, n, src, dst, planar, 1);                                                                  \
    return;                                                                                        \
  case 2:                                                                                          \
    f(a, n, src, dst, planar, 2);                                                                  \
    return;                                                                                        \
  case 3:                                                                                          \
    f(a, n, src, dst, planar, 3);                                                                  \
    return;                                                                                        \
  default:                                                                                         \
    f(a, n, src, dst, planar, (a)->np);                                                            \
    return;                                                                                        \
  }

__attribute__((target("ssse3"))) static void
hpass_rgbx_ssse3(const axis *a, int n, const uint8_t *src, uint8_t *dst,
                 int planar) {
  BY_NP(hrgbx_ssse3, a, n, src, dst, planar)
}

/* hrgbx_tail is the outputs from i to n (fewer than four) of a wider
 * pass, through hrgbx_ssse3: planar, into three planes of n bytes. */
__attribute__((target("ssse3"))) static inline __attribute__((always_inline)) void
hrgbx_tail(const axis *a, int i, int n, const uint8_t *src, uint8_t *dst, int planar, const int np) {
  axis rest = *a;
  rest.start = a->start + i;
  rest.kv = a->kv + (size_t)i * np * 4;
  if (planar) {
    uint8_t tail[3 * 4];
    hrgbx_ssse3(&rest, n - i, src, tail, 1, np);
    memcpy(dst + i, tail, (size_t)(n - i));
    memcpy(dst + n + i, tail + (n - i), (size_t)(n - i));
    memcpy(dst + 2 * n + i, tail + 2 * (n - i), (size_t)(n - i));
  } else {
    hrgbx_ssse3(&rest, n - i, src, dst + 3 * i, 0, np);
  }
}

/* hsum2_avx2 is hsum_ssse3 for two outputs at once, one in each 128-bit
 * lane: output 0 from p0 with coefficients k0, output 1 from p1 with k1
 * (pshufb and pmaddwd work within lanes, so each lane is hsum_ssse3's
 * arithmetic, in the same order: the same sums). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256i
hsum2_avx2(const uint8_t *p0, const uint8_t *p1, const __m128i *k0,
           const __m128i *k1, const int np, __m256i lo, __m256i hi,
           __m256i half, __m128i sh) {
  __m256i acc = half, w;
  int j;
  for (j = 0; j + 2 <= np; j += 2) {
    w = _mm256_loadu2_m128i((const __m128i *)(p1 + 8 * j), (const __m128i *)(p0 + 8 * j));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(w, lo),
                                                  _mm256_loadu2_m128i(k1 + j, k0 + j)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(w, hi),
                                                  _mm256_loadu2_m128i(k1 + j + 1, k0 + j + 1)));
  }
  if (j < np) {
    w = _mm256_set_m128i(_mm_loadl_epi64((const __m128i *)(p1 + 8 * j)),
                         _mm_loadl_epi64((const __m128i *)(p0 + 8 * j)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(w, lo),
                                                  _mm256_loadu2_m128i(k1 + j, k0 + j)));
  }
  return _mm256_sra_epi32(acc, sh);
}

/* The AVX2 horizontal passes' shuffles: each 128-bit lane's first (LO) or
 * last (HI) two RGBX pixels widened to 16 bits, a channel's two taps side
 * by side for madd. */
#define RGBX_LO_AVX2                                                                              \
  _mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1, 0, -1, 4, -1, 1, -1, 5, \
                   -1, 2, -1, 6, -1, 3, -1, 7, -1)
#define RGBX_HI_AVX2                                                                              \
  _mm256_setr_epi8(8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1, 8, -1, 12, -1, 9, \
                   -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1)

/* hrgbx_avx2 is hrgbx_ssse3 two outputs to a register. Four outputs
 * packed to bytes come out as r0 g0 b0 x0 r2 ... x2 r1 ... x1 r3 ... x3
 * (the packs work within lanes), so the shuffles to planar or RGB take
 * that order. The outputs past the last four are hrgbx_ssse3's. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
hrgbx_avx2(const axis *a, int n, const uint8_t *src, uint8_t *dst, int planar,
           const int np) {
  const __m256i lo = RGBX_LO_AVX2, hi = RGBX_HI_AVX2;
  const __m128i to_planar = _mm_setr_epi8(0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15);
  const __m128i to_rgb = _mm_setr_epi8(0, 1, 2, 8, 9, 10, 4, 5, 6, 12, 13, 14, -1, -1, -1, -1);
  const __m256i half = _mm256_set1_epi32(1 << (a->prec - 1));
  const __m128i sh = _mm_cvtsi32_si128(a->prec);
  const __m128i *kv = (const __m128i *)a->kv;
  const int *st = a->start;
  int i = 0;
  for (; i + 4 <= n; i += 4, kv += 4 * np) {
    __m256i s01 = hsum2_avx2(src + (size_t)st[i] * 4, src + (size_t)st[i + 1] * 4, kv, kv + np,
                             np, lo, hi, half, sh);
    __m256i s23 = hsum2_avx2(src + (size_t)st[i + 2] * 4, src + (size_t)st[i + 3] * 4,
                             kv + 2 * np, kv + 3 * np, np, lo, hi, half, sh);
    __m256i p = _mm256_packs_epi32(s01, s23); /* s0 s2 | s1 s3 */
    put4_ssse3(_mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)), dst, i, n,
               planar, to_planar, to_rgb);
  }
  if (i < n)
    hrgbx_tail(a, i, n, src, dst, planar, np);
}

__attribute__((target("avx2"))) static void
hpass_rgbx_avx2(const axis *a, int n, const uint8_t *src, uint8_t *dst,
                int planar) {
  BY_NP(hrgbx_avx2, a, n, src, dst, planar)
}

#define AVX512RS __attribute__((target("avx2,avx512f,avx512bw")))

/* load4x is four 16-byte loads (or 8-byte ones, zero-extended, when
 * half) side by side in one register. */
AVX512RS static inline __attribute__((always_inline)) __m512i
load4x(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3, int half) {
  __m512i v;
  if (half) {
    v = _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)p0));
    v = _mm512_inserti32x4(v, _mm_loadl_epi64((const __m128i *)p1), 1);
    v = _mm512_inserti32x4(v, _mm_loadl_epi64((const __m128i *)p2), 2);
    return _mm512_inserti32x4(v, _mm_loadl_epi64((const __m128i *)p3), 3);
  }
  v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p0));
  v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p1), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p2), 2);
  return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p3), 3);
}

/* hsum4_avx512 is hsum_ssse3 for four outputs, one in each 128-bit lane,
 * their coefficients from kv4 (the same arithmetic, lane for lane). */
AVX512RS static inline __attribute__((always_inline)) __m512i
hsum4_avx512(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3,
             const __m512i *k4, const int np, __m512i lo, __m512i hi, __m512i half, __m128i sh) {
  __m512i acc = half, w;
  int j;
  for (j = 0; j + 2 <= np; j += 2) {
    w = load4x(p0 + 8 * j, p1 + 8 * j, p2 + 8 * j, p3 + 8 * j, 0);
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_shuffle_epi8(w, lo), _mm512_loadu_si512(k4 + j)));
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_shuffle_epi8(w, hi), _mm512_loadu_si512(k4 + j + 1)));
  }
  if (j < np) {
    w = load4x(p0 + 8 * j, p1 + 8 * j, p2 + 8 * j, p3 + 8 * j, 1);
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_shuffle_epi8(w, lo), _mm512_loadu_si512(k4 + j)));
  }
  return _mm512_sra_epi32(acc, sh);
}

/* HRGBX512_CONSTS declares the AVX-512 horizontal passes' constants for
 * axis a: hsum4_avx512's shuffles (lo, hi), put4_ssse3's orders
 * (to_planar, to_rgb), the rounding half, zero and the shift sh. */
#define HRGBX512_CONSTS(a)                                                                                        \
  const __m512i lo = _mm512_broadcast_i32x4(_mm_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1));   \
  const __m512i hi = _mm512_broadcast_i32x4(_mm_setr_epi8(8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1)); \
  const __m128i to_planar = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);                      \
  const __m128i to_rgb = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);                       \
  const __m512i half = _mm512_set1_epi32(1 << ((a)->prec - 1)), zero = _mm512_setzero_si512();                       \
  const __m128i sh = _mm_cvtsi32_si128((a)->prec)

/* hrgbx_avx512 is hrgbx_ssse3 four outputs to a register: the sums clamped
 * to 0..255 (as packs then packus do) and narrowed in order, r0 g0 b0 x0 r1
 * ... x3, as hrgbx_ssse3 packs them. The outputs past the last four are
 * hrgbx_avx2's. */
AVX512RS static inline __attribute__((always_inline)) void
hrgbx_avx512(const axis *a, int n, const uint8_t *src, uint8_t *dst, int planar, const int np) {
  HRGBX512_CONSTS(a);
  const __m512i *k4 = (const __m512i *)a->kv4;
  const int *st = a->start;
  int i = 0;
  for (; i + 4 <= n; i += 4, k4 += np) {
    __m512i s = hsum4_avx512(src + (size_t)st[i] * 4, src + (size_t)st[i + 1] * 4, src + (size_t)st[i + 2] * 4,
                             src + (size_t)st[i + 3] * 4, k4, np, lo, hi, half, sh);
    put4_ssse3(_mm512_cvtusepi32_epi8(_mm512_max_epi32(s, zero)), dst, i, n, planar, to_planar, to_rgb);
  }
  if (i < n)
    hrgbx_tail(a, i, n, src, dst, planar, np);
}

AVX512RS static void
hpass_rgbx_avx512(const axis *a, int n, const uint8_t *src, uint8_t *dst,
                  int planar) {
  BY_NP(hrgbx_avx512, a, n, src, dst, planar)
}

#define VBMIRS __attribute__((target("avx2,avx512f,avx512bw,avx512vbmi,avx512vnni")))

/* hrgbx_vbmi is hrgbx_avx512 with one load and one byte permutation (vpermb,
 * which zero-extends through its mask) per pair of taps for four outputs,
 * where hsum4_avx512 takes four loads, three inserts and a shuffle: the
 * group's outputs start within 14 pixels of each other whenever the filter
 * scales by less than about 4.5, so one 64-byte load holds a pair of taps
 * for all four. The coefficients are kv4's and the sums are formed lane for
 * lane as there: the same bytes. A group spread wider takes hsum4_avx512. */
/* hsum4_vbmi is hsum4_avx512's sums for the group of four outputs at i:
 * one load and one vpermb per pair of taps where the group fits in a load
 * (px[1]), hsum4_avx512's loads where it does not. */
VBMIRS static inline __attribute__((always_inline)) __m512i
hsum4_vbmi(const axis *a, int i, const uint8_t *src, const __m512i *k4, const uint8_t *px,
           const int np, __m512i lo, __m512i hi, __m512i half, __m128i sh) {
  const int *st = a->start;
  __m512i acc = half;
  int j;
  if (px[1]) {
    const uint8_t *p = src + (size_t)(st[i] < st[i + 3] ? st[i] : st[i + 3]) * 4;
    const __m512i perm = _mm512_load_si512((const void *)px);
    for (j = 0; j < np; j++)
      acc = _mm512_dpwssd_epi32(acc, _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, perm,
                                                                   _mm512_loadu_si512((const void *)(p + 8 * j))),
                                _mm512_load_si512(k4 + j));
    return _mm512_sra_epi32(acc, sh);
  }
  return hsum4_avx512(src + (size_t)st[i] * 4, src + (size_t)st[i + 1] * 4, src + (size_t)st[i + 2] * 4,
                      src + (size_t)st[i + 3] * 4, k4, np, lo, hi, half, sh);
}

/* hrgbx_vbmi is hrgbx_avx512 with hsum4_vbmi's sums, formed lane for lane
 * as hsum4_avx512 forms them from kv4's coefficients: the same bytes. (Two
 * groups a step, narrowed together and ordered by one more vpermb, measured
 * no faster.) */
VBMIRS static inline __attribute__((always_inline)) void
hrgbx_vbmi(const axis *a, int n, const uint8_t *src, uint8_t *dst, int planar, const int np) {
  HRGBX512_CONSTS(a);
  const __m512i *k4 = (const __m512i *)a->kv4;
  const uint8_t *px = a->px4;
  int i = 0;
  for (; i + 4 <= n; i += 4, k4 += np, px += 64) {
    __m512i s = hsum4_vbmi(a, i, src, k4, px, np, lo, hi, half, sh);
    put4_ssse3(_mm512_cvtusepi32_epi8(_mm512_max_epi32(s, zero)), dst, i, n, planar, to_planar, to_rgb);
  }
  if (i < n)
    hrgbx_tail(a, i, n, src, dst, planar, np);
}

VBMIRS static void
hpass_rgbx_vbmi(const axis *a, int n, const uint8_t *src, uint8_t *dst, int planar) {
  BY_NP(hrgbx_vbmi, a, n, src, dst, planar)
}

/* hrgbx2_vbmi is hrgbx_vbmi for two rows at once, src0 into dst0 and src1
 * into dst1: each group's permutation and each pair's coefficients are
 * loaded once for both (the loads were the pass's bound). The same sums
 * row by row. Groups that do not fit a load go row by row through
 * hsum4_vbmi. */
VBMIRS static inline __attribute__((always_inline)) void
hrgbx2_vbmi(const axis *a, int n, const uint8_t *src0, const uint8_t *src1, uint8_t *dst0, uint8_t *dst1,
            int planar, const int np) {
  HRGBX512_CONSTS(a);
  const __m512i *k4 = (const __m512i *)a->kv4;
  const uint8_t *px = a->px4;
  const int *st = a->start;
  int i = 0, j;
  for (; i + 4 <= n; i += 4, k4 += np, px += 64) {
    __m512i s0, s1;
    if (px[1]) {
      size_t o = (size_t)(st[i] < st[i + 3] ? st[i] : st[i + 3]) * 4;
      const uint8_t *p0 = src0 + o, *p1 = src1 + o;
      const __m512i perm = _mm512_load_si512((const void *)px);
      s0 = s1 = half;
      for (j = 0; j < np; j++) {
        const __m512i k = _mm512_load_si512(k4 + j);
        s0 = _mm512_dpwssd_epi32(s0, _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, perm,
                                                                   _mm512_loadu_si512((const void *)(p0 + 8 * j))), k);
        s1 = _mm512_dpwssd_epi32(s1, _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, perm,
                                                                   _mm512_loadu_si512((const void *)(p1 + 8 * j))), k);
      }
      s0 = _mm512_sra_epi32(s0, sh);
      s1 = _mm512_sra_epi32(s1, sh);
    } else {
      s0 = hsum4_vbmi(a, i, src0, k4, px, np, lo, hi, half, sh);
      s1 = hsum4_vbmi(a, i, src1, k4, px, np, lo, hi, half, sh);
    }
    put4_ssse3(_mm512_cvtusepi32_epi8(_mm512_max_epi32(s0, zero)), dst0, i, n, planar, to_planar, to_rgb);
    put4_ssse3(_mm512_cvtusepi32_epi8(_mm512_max_epi32(s1, zero)), dst1, i, n, planar, to_planar, to_rgb);
  }
  if (i < n) {
    hrgbx_tail(a, i, n, src0, dst0, planar, np);
    hrgbx_tail(a, i, n, src1, dst1, planar, np);
  }
}

#define BY_NP2(f, a, n, s0, s1, d0, d1, planar)                                                    \
  switch ((a)->np) {                                                                               \
  case 1:                                                                                          \
    f(a, n, s0, s1, d0, d1, planar, 1);                                                            \
    return;                                                                                        \
  case 2:                                                                                          \
    f(a, n, s0, s1, d0, d1, planar, 2);                                                            \
    return;                                                                                        \
  case 3:                                                                                          \
    f(a, n, s0, s1, d0, d1, planar, 3);                                                            \
    return;                                                                                        \
  default:                                                                                         \
    f(a, n, s0, s1, d0, d1, planar, (a)->np);                                                      \
    return;                                                                                        \
  }

VBMIRS static void
hpass2_rgbx_vbmi(const axis *a, int n, const uint8_t *s0, const uint8_t *s1, uint8_t *d0, uint8_t *d1,
                 int planar) {
  BY_NP2(hrgbx2_vbmi, a, n, s0, s1, d0, d1, planar)
}

/* hsum2r_avx2 is hsum_ssse3 for one output of two rows at once: row 0's
 * (from p0) in the low 128-bit lane, row 1's (p1) in the high, both with
 * the output's coefficients k, loaded once (each lane is hsum_ssse3's
 * arithmetic, in the same order: the same sums). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256i
hsum2r_avx2(const uint8_t *p0, const uint8_t *p1, const __m128i *k, const int np, __m256i lo,
            __m256i hi, __m256i half, __m128i sh) {
  __m256i acc = half, w;
  int j;
  for (j = 0; j + 2 <= np; j += 2) {
    w = _mm256_loadu2_m128i((const __m128i *)(p1 + 8 * j), (const __m128i *)(p0 + 8 * j));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(w, lo),
                                                  _mm256_broadcastsi128_si256(_mm_loadu_si128(k + j))));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(w, hi),
                                                  _mm256_broadcastsi128_si256(_mm_loadu_si128(k + j + 1))));
  }
  if (j < np) {
    w = _mm256_set_m128i(_mm_loadl_epi64((const __m128i *)(p1 + 8 * j)),
                         _mm_loadl_epi64((const __m128i *)(p0 + 8 * j)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(w, lo),
                                                  _mm256_broadcastsi128_si256(_mm_loadu_si128(k + j))));
  }
  return _mm256_sra_epi32(acc, sh);
}

/* hrgbx2_avx2 is hrgbx_avx2 for two rows into planes: each register holds
 * one output of both rows, so that an output's start and coefficients
 * are loaded once for the two. Four outputs packed to bytes come out as
 * row 0's r0 g0 b0 x0 ... x3 in the low lane and row 1's in the high. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
hrgbx2_avx2(const axis *a, int n, const uint8_t *src0, const uint8_t *src1, uint8_t *dst0,
            uint8_t *dst1, int planar, const int np) {
  const __m256i lo = RGBX_LO_AVX2, hi = RGBX_HI_AVX2;
  const __m128i to_planar = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i to_rgb = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i half = _mm256_set1_epi32(1 << (a->prec - 1));
  const __m128i sh = _mm_cvtsi32_si128(a->prec);
  const __m128i *kv = (const __m128i *)a->kv;
  const int *st = a->start;
  int i = 0;
  for (; i + 4 <= n; i += 4, kv += 4 * np) {
    size_t o0 = (size_t)st[i] * 4, o1 = (size_t)st[i + 1] * 4;
    size_t o2 = (size_t)st[i + 2] * 4, o3 = (size_t)st[i + 3] * 4;
    __m256i s0 = hsum2r_avx2(src0 + o0, src1 + o0, kv, np, lo, hi, half, sh);
    __m256i s1 = hsum2r_avx2(src0 + o1, src1 + o1, kv + np, np, lo, hi, half, sh);
    __m256i s2 = hsum2r_avx2(src0 + o2, src1 + o2, kv + 2 * np, np, lo, hi, half, sh);
    __m256i s3 = hsum2r_avx2(src0 + o3, src1 + o3, kv + 3 * np, np, lo, hi, half, sh);
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(s0, s1), _mm256_packs_epi32(s2, s3));
    put4_ssse3(_mm256_castsi256_si128(b), dst0, i, n, planar, to_planar, to_rgb);
    put4_ssse3(_mm256_extracti128_si256(b, 1), dst1, i, n, planar, to_planar, to_rgb);
  }
  if (i < n) {
    hrgbx_tail(a, i, n, src0, dst0, planar, np);
    hrgbx_tail(a, i, n, src1, dst1, planar, np);
  }
}

__attribute__((target("avx2"))) static void
hpass2_rgbx_avx2(const axis *a, int n, const uint8_t *s0, const uint8_t *s1, uint8_t *d0, uint8_t *d1,
                 int planar) {
  BY_NP2(hrgbx2_avx2, a, n, s0, s1, d0, d1, planar)
}
#endif

int axis_identity(const axis *a, int n) {
  int i, j;
  if (n < 1 || a->np < 1 || 2 * a->np > a->ks)
    return 0;
  for (i = 0; i < n; i++) {
    const int16_t *kk = a->k + (size_t)i * a->ks;
    if (a->start[i] != a->start[0] + i || kk[0] != (1 << a->prec))
      return 0;
    for (j = 1; j < 2 * a->np; j++)
      if (kk[j] != 0)
        return 0;
  }
  return 1;
}

/* hcopy_rgbx is hpass_rgbx for an identity axis into planes: the R, G and
 * B bytes of src's n pixels from a->start[0] on, sixteen at a time by one
 * byte permute with VBMI. */
#if defined(__x86_64__) || defined(__i386__)
VBMIRS static int hcopy_rgbx_vbmi(int n, const uint8_t *src, uint8_t *dst) {
  const __m512i idx = _mm512_set_epi8(63, 59, 55, 51, 47, 43, 39, 35, 31, 27, 23, 19, 15, 11, 7, 3,
                                      62, 58, 54, 50, 46, 42, 38, 34, 30, 26, 22, 18, 14, 10, 6, 2,
                                      61, 57, 53, 49, 45, 41, 37, 33, 29, 25, 21, 17, 13, 9, 5, 1,
                                      60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
  int i;
  for (i = 0; i + 16 <= n; i += 16) {
    __m512i v = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512((const void *)(src + 4 * (size_t)i)));
    _mm_storeu_si128((__m128i *)(dst + i), _mm512_castsi512_si128(v));
    _mm_storeu_si128((__m128i *)(dst + n + i), _mm512_extracti32x4_epi32(v, 1));
    _mm_storeu_si128((__m128i *)(dst + 2 * (size_t)n + i), _mm512_extracti32x4_epi32(v, 2));
  }
  return i;
}
#endif

static void hcopy_rgbx(const axis *a, int n, const uint8_t *src, uint8_t *dst, int simd) {
  int i = 0;
  src += (size_t)a->start[0] * 4;
#if defined(__x86_64__) || defined(__i386__)
  if (simd >= 5)
    i = hcopy_rgbx_vbmi(n, src, dst);
#endif
  (void)simd;
  for (; i < n; i++) {
    dst[i] = src[4 * (size_t)i];
    dst[n + i] = src[4 * (size_t)i + 1];
    dst[2 * (size_t)n + i] = src[4 * (size_t)i + 2];
  }
}

/* hpass_rgbx resamples one decoded RGBX row into dst: interleaved RGB (with
 * 4 bytes of slack after it) or, when planar, three planes of n bytes.
 * Taps past an output's support have zero coefficients and may read past
 * the decoded pixels: the row buffer has zeroed slack for that. */
void hpass_rgbx(const axis *a, int n, const uint8_t *src, uint8_t *dst,
                       int planar, int simd) {
  int i, j;
  if (a->ident && planar) {
    hcopy_rgbx(a, n, src, dst, simd);
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  if (simd >= 5 && n >= 4) {
    hpass_rgbx_vbmi(a, n, src, dst, planar);
    return;
  }
  if (simd >= 4 && n >= 4) {
    hpass_rgbx_avx512(a, n, src, dst, planar);
    return;
  }
  if (simd >= 3) {
    hpass_rgbx_avx2(a, n, src, dst, planar);
    return;
  }
  if (simd >= 2) {
    hpass_rgbx_ssse3(a, n, src, dst, planar);
    return;
  }
#endif
  (void)simd;
  for (i = 0; i < n; i++) {
    const uint8_t *p = src + (size_t)a->start[i] * 4;
    const int16_t *kk = a->k + (size_t)i * a->ks;
    int32_t r = 1 << (a->prec - 1), g = r, b = r;
    for (j = 0; j < 2 * a->np; j++) {
      r += p[4 * j] * kk[j];
      g += p[4 * j + 1] * kk[j];
      b += p[4 * j + 2] * kk[j];
    }
    if (planar) {
      dst[i] = clip8(r, a->prec);
      dst[n + i] = clip8(g, a->prec);
      dst[2 * n + i] = clip8(b, a->prec);
    } else {
      dst[3 * i] = clip8(r, a->prec);
      dst[3 * i + 1] = clip8(g, a->prec);
      dst[3 * i + 2] = clip8(b, a->prec);
    }
  }
}

/* hpass_rgbx2 is hpass_rgbx for two rows, in one pass where the SIMD
 * level has one for two (VBMI; AVX2 and AVX-512 without VBMI take AVX2's,
 * which loads each output's start and coefficients once for both rows)
 * and the rows are planar, else one row after the other (an interleaved row's last store reaches 4 bytes into the
 * next, which must come after it). */
void hpass_rgbx2(const axis *a, int n, const uint8_t *src0, const uint8_t *src1, uint8_t *dst0,
                        uint8_t *dst1, int planar, int simd) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd >= 5 && n >= 4 && planar && !a->ident) {
    hpass2_rgbx_vbmi(a, n, src0, src1, dst0, dst1, planar);
    return;
  }
  if (simd >= 3 && n >= 4 && planar && !a->ident) {
    hpass2_rgbx_avx2(a, n, src0, src1, dst0, dst1, planar);
    return;
  }
#endif
  hpass_rgbx(a, n, src0, dst0, planar, simd);
  hpass_rgbx(a, n, src1, dst1, planar, simd);
}

void hpass_gray(const axis *a, int n, const uint8_t *src,
                       uint8_t *dst) {
  int i, j;
  for (i = 0; i < n; i++) {
    const uint8_t *p = src + a->start[i];
    const int16_t *kk = a->k + (size_t)i * a->ks;
    int32_t v = 1 << (a->prec - 1);
    for (j = 0; j < 2 * a->np; j++)
      v += p[j] * kk[j];
    dst[i] = clip8(v, a->prec);
  }
}

/* vrow computes n bytes of one output row from bytes [off, off+n) of the
 * rows taps[0..2*np), with coefficients k (prec fractional bits) and kv
 * (broadcast pairs). */
#if defined(__x86_64__) || defined(__i386__)
/* VROW_SIMD defines vrow_SFX, vrow's SSE2 loop B bytes at a time (n >= B)
 * with the vector type V: AVX2 (32) and AVX-512 (64). The unpacks and
 * packs work within 128-bit lanes and undo each other's order, so each
 * byte's sum is the SSE2 loop's. */
#define VROW_ACC_MADD(P, acc, a, k) P##_add_epi32(acc, P##_madd_epi16(a, k))
#define VROW_ACC_VNNI(P, acc, a, k) P##_dpwssd_epi32(acc, a, k)
#define VROW_SIMD(SFX, TARGET, V, B, P, SI, BCAST, ACC)                                                   \
  __attribute__((target(TARGET))) static void vrow_##SFX(const uint8_t *const *taps, size_t off,   \
                                                         const int32_t *kv, int np, int prec, int n, \
                                                         uint8_t *dst) {                            \
    const V zero = P##_setzero_##SI(), half = P##_set1_epi32(1 << (prec - 1));                  \
    const __m128i sh = _mm_cvtsi32_si128(prec);                                                      \
    const __m128i *kp = (const __m128i *)kv;                                                         \
    int x = 0, j;                                                                                    \
    for (;;) {                                                                                       \
      V a0 = half, a1 = half, a2 = half, a3 = half;                                                  \
      if (x > n - B)                                                                             \
        x = n - B; /* the last block overlaps the one before */                                  \
      for (j = 0; j < np; j++) {                                                                     \
        V va = P##_loadu_##SI((const void *)(taps[2 * j] + off + x));                           \
        V vb = P##_loadu_##SI((const void *)(taps[2 * j + 1] + off + x));                       \
        V kk = BCAST(_mm_loadu_si128(kp + j));                                            \
        V lo = P##_unpacklo_epi8(va, vb), hi = P##_unpackhi_epi8(va, vb);                            \
        a0 = ACC(P, a0, P##_unpacklo_epi8(lo, zero), kk);                                             \
        a1 = ACC(P, a1, P##_unpackhi_epi8(lo, zero), kk);                                             \
        a2 = ACC(P, a2, P##_unpacklo_epi8(hi, zero), kk);                                             \
        a3 = ACC(P, a3, P##_unpackhi_epi8(hi, zero), kk);                                             \
      }                                                                                              \
      a0 = P##_packs_epi32(P##_sra_epi32(a0, sh), P##_sra_epi32(a1, sh));                            \
      a2 = P##_packs_epi32(P##_sra_epi32(a2, sh), P##_sra_epi32(a3, sh));                            \
      P##_storeu_##SI((void *)(dst + x), P##_packus_epi16(a0, a2));                             \
      x += B;                                                                                    \
      if (x >= n)                                                                                    \
        return;                                                                                      \
    }                                                                                                \
  }
VROW_SIMD(avx2, "avx2", __m256i, 32, _mm256, si256, _mm256_broadcastsi128_si256, VROW_ACC_MADD)
/* vrow_avx2n is vrow_avx2 with np a constant (inlined by vrow_avx2k for
 * 1 to 3 pairs of taps, bilinear and bicubic at most 1.5x down): the
 * coefficients broadcast once a row and kept in registers, the tap rows'
 * pointers too, the tap loop unrolled (3% fewer instructions a first
 * decode). The same arithmetic in the same order: the same bytes. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
vrow_avx2n(const uint8_t *const *taps, size_t off, const int32_t *kv, const int np, int prec, int n,
           uint8_t *dst) {
  const __m256i zero = _mm256_setzero_si256(), half = _mm256_set1_epi32(1 << (prec - 1));
  const __m128i sh = _mm_cvtsi32_si128(prec);
  const __m128i *kp = (const __m128i *)kv;
  __m256i kk[3];
  const uint8_t *ta[3], *tb[3];
  int x = 0, j;
  for (j = 0; j < np; j++) {
    kk[j] = _mm256_broadcastsi128_si256(_mm_loadu_si128(kp + j));
    ta[j] = taps[2 * j] + off;
    tb[j] = taps[2 * j + 1] + off;
  }
  for (;;) {
    __m256i a0 = half, a1 = half, a2 = half, a3 = half;
    if (x > n - 32)
      x = n - 32;
    for (j = 0; j < np; j++) {
      __m256i va = _mm256_loadu_si256((const void *)(ta[j] + x));
      __m256i vb = _mm256_loadu_si256((const void *)(tb[j] + x));
      __m256i lo = _mm256_unpacklo_epi8(va, vb), hi = _mm256_unpackhi_epi8(va, vb);
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), kk[j]));
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), kk[j]));
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), kk[j]));
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), kk[j]));
    }
    a0 = _mm256_packs_epi32(_mm256_sra_epi32(a0, sh), _mm256_sra_epi32(a1, sh));
    a2 = _mm256_packs_epi32(_mm256_sra_epi32(a2, sh), _mm256_sra_epi32(a3, sh));
    _mm256_storeu_si256((void *)(dst + x), _mm256_packus_epi16(a0, a2));
    x += 32;
    if (x >= n)
      return;
  }
}

__attribute__((target("avx2"))) static void vrow_avx2k(const uint8_t *const *taps, size_t off,
                                                       const int32_t *kv, int np, int prec, int n,
                                                       uint8_t *dst) {
  switch (np) {
  case 1:
    vrow_avx2n(taps, off, kv, 1, prec, n, dst);
    return;
  case 2:
    vrow_avx2n(taps, off, kv, 2, prec, n, dst);
    return;
  case 3:
    vrow_avx2n(taps, off, kv, 3, prec, n, dst);
    return;
  default:
    vrow_avx2(taps, off, kv, np, prec, n, dst);
  }
}
VROW_SIMD(avx512, "avx2,avx512f,avx512bw", __m512i, 64, _mm512, si512, _mm512_broadcast_i32x4, VROW_ACC_MADD)
/* vrow_vnni: vrow_avx512 with each multiply-add and its sum in one vpdpwssd
 * (the same 32-bit sums: no pair of products here comes near the one input,
 * -32768 * -32768 twice, where pmaddwd wraps) */
VROW_SIMD(vnni, "avx2,avx512f,avx512bw,avx512vnni", __m512i, 64, _mm512, si512, _mm512_broadcast_i32x4,
          VROW_ACC_VNNI)
#endif

void vrow(const uint8_t *const *taps, size_t off, const int16_t *k,
                 const int32_t *kv, int np, int prec, int n, uint8_t *dst,
                 int simd) {
  int x = 0, j;
#if defined(__x86_64__) || defined(__i386__)
  if (n >= 64 && simd >= 5) {
    vrow_vnni(taps, off, kv, np, prec, n, dst);
    return;
  }
  if (n >= 64 && simd >= 4) {
    vrow_avx512(taps, off, kv, np, prec, n, dst);
    return;
  }
  if (n >= 32 && simd >= 3) {
    vrow_avx2k(taps, off, kv, np, prec, n, dst);
    return;
  }
#endif
#if defined(__SSE2__)
  if (n >= 16 && simd >= 1) {
    const __m128i zero = _mm_setzero_si128(), half = _mm_set1_epi32(1 << (prec - 1));
    const __m128i sh = _mm_cvtsi32_si128(prec);
    const __m128i *kp = (const __m128i *)kv;
    for (;;) {
      __m128i a0 = half, a1 = half, a2 = half, a3 = half;
      if (x > n - 16)
        x = n - 16; /* the last block overlaps the one before */
      for (j = 0; j < np; j++) {
        __m128i va = _mm_loadu_si128((const __m128i *)(taps[2 * j] + off + x));
        __m128i vb =
            _mm_loadu_si128((const __m128i *)(taps[2 * j + 1] + off + x));
        __m128i kk = _mm_loadu_si128(kp + j);
        __m128i lo = _mm_unpacklo_epi8(va, vb), hi = _mm_unpackhi_epi8(va, vb);
        a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), kk));
        a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), kk));
        a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), kk));
        a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), kk));
      }
      a0 = _mm_packs_epi32(_mm_sra_epi32(a0, sh), _mm_sra_epi32(a1, sh));
      a2 = _mm_packs_epi32(_mm_sra_epi32(a2, sh), _mm_sra_epi32(a3, sh));
      _mm_storeu_si128((__m128i *)(dst + x), _mm_packus_epi16(a0, a2));
      x += 16;
      if (x >= n)
        return;
    }
  }
#endif
  (void)kv;
  (void)simd;
  for (; x < n; x++) {
    int32_t v = 1 << (prec - 1);
    for (j = 0; j < 2 * np; j++)
      v += taps[j][off + x] * k[j];
    dst[x] = clip8(v, prec);
  }
}

/* cpu_ssse3, cpu_avx2 and cpu_avx512 are whether the CPU has SSSE3, AVX2
 * and AVX-512 F and BW (0 off x86): the horizontal pass and the
 * coefficient cache's packing use SSSE3, the horizontal and vertical
 * passes AVX2 and AVX-512, at the decode's SIMD level. */
static int cpu_ssse3, cpu_avx2, cpu_avx512, cpu_vbmi, cpu_intel;

__attribute__((constructor)) static void cpu_init(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  cpu_ssse3 = __builtin_cpu_supports("ssse3");
  cpu_avx2 = __builtin_cpu_supports("avx2");
  cpu_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  cpu_vbmi = cpu_avx512 && __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
  cpu_intel = __builtin_cpu_is("intel");
#endif
}

int stoker_simd_best(void) {
  int simd = 0;
#if defined(__SSE2__)
  simd = 1;
#endif
  if (simd && cpu_ssse3)
    simd = 2;
  if (simd == 2 && cpu_avx2)
    simd = 3;
  if (simd == 3 && cpu_avx512)
    simd = 4;
  if (simd == 4 && cpu_vbmi)
    simd = 5;
  return simd;
}

/* stoker_simd_default is the best level, but AVX2 (3) at most on Intel
 * CPUs. There the AVX-512 levels, faster pass for pass, cost a job of one
 * or two views more CPU in all than they save: on a Sapphire-Rapids-class
 * Xeon (AMX, AVX-512 FP16) `imagenet-train` ran its first epoch and its
 * later ones faster per CPU-second with AVX2 (BENCHMARKS.md), the Huffman
 * decoder and libjpeg's IDCT included, which use no AVX-512: most likely
 * the core runs them at a lower clock after 512-bit multiplies. Jobs of
 * many views, mostly resampling, run at the best level (turbo.c,
 * STOKER_SIMD_VIEWS). AMD's Zen 4 keeps its clock: the best level there. */
int stoker_simd_default(void) {
  int simd = stoker_simd_best();
  return cpu_intel && simd > 3 ? 3 : simd;
}

