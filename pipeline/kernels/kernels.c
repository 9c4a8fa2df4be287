/* The photometric kernels' C versions, twins of blur.go, color.go, hue.go
 * and point.go: integer math only, so each gives its Go twin's bytes
 * (TestExactBlurCgoSameBytes, TestExactColourKernelsCgoSameBytes), with SSE2 (every
 * x86-64), AVX2 or AVX-512 where the CPU has it. */
#include "kernels.h"

#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STOKER_X86 1
#endif

/* The blur's fixed point (blur.go): Q14 weights, a Q7 pass
 * between the directions, rounding half up. */
#define BLUR_PREC 14
#define BLUR_MID 7
#define BLUR_HSHIFT (BLUR_PREC - BLUR_MID)
#define BLUR_VSHIFT (BLUR_PREC + BLUR_MID)

/* reflect is blur.go's reflect: torch's reflect padding, mirrored
 * again beyond, a one-pixel side its own padding. */
static inline int reflect(int i, int n) {
  int period;
  if (i >= 0 && i < n)
    return i;
  if (n == 1)
    return 0;
  period = 2 * (n - 1);
  i %= period;
  if (i < 0)
    i += period;
  if (i >= n)
    i = period - i;
  return i;
}

/* blur_pad writes row's pixels with r+1 reflected on each side into pad
 * (pad[r+1] is row[0]) and zeros after them, for the vector loads. */
static void blur_pad(const uint8_t *row, int w, int r, int16_t *pad) {
  int i, R = r + 1, n = stoker_blur_pad(w, r);
  for (i = 0; i < R; i++) {
    pad[i] = row[reflect(i - R, w)];
    pad[R + w + i] = row[reflect(w + i, w)];
  }
  for (i = 0; i < w; i++)
    pad[R + i] = row[i];
  for (i = w + 2 * R; i < n; i++)
    pad[i] = 0;
}

/* hsum is one horizontal output, Q7: p points at the pixel in the pad. */
static inline int16_t hsum(const int16_t *p, const int32_t *wx, int r) {
  int32_t acc = wx[0] * p[0];
  int t;
  for (t = 1; t <= r; t++)
    acc += wx[t] * (p[-t] + p[t]);
  return (int16_t)((acc + (1 << (BLUR_HSHIFT - 1))) >> BLUR_HSHIFT);
}

/* vsum is one vertical output: c points at the pixel in mid, off[j] is
 * the offset of row y-r+j from row y. */
static inline uint8_t vsum(const int16_t *c, const int32_t *wy, int r, const int32_t *off) {
  int32_t acc = wy[0] * c[0];
  int t;
  for (t = 1; t <= r; t++)
    acc += wy[t] * (c[off[r - t]] + c[off[r + t]]);
  return (uint8_t)((acc + (1 << (BLUR_VSHIFT - 1))) >> BLUR_VSHIFT);
}

/* The vector passes, once per instruction set: N 16-bit lanes per vector.
 * Horizontal: the taps -t and t are added in 16 bits (at most 510), two
 * such sums interleaved and multiplied-added with their two weights
 * (pmaddwd), into 32-bit sums. Vertical: rows y-t and y+t interleaved and
 * multiplied-added with (w[t], w[t]). Unpack and pack both work within
 * 128-bit halves, so with AVX2 they undo each other and the lanes stay in
 * order. The sums are exact: the same as hsum's and vsum's. */
#define BLUR_SIMD(SFX, TARGET, V, N, LOAD, STORE16, ADD16, ADD32, MADD, UNLO, UNHI, SET1, SRAI, PACKS, ZERO, \
                  STORE8)                                                                                    \
  TARGET static int hpass_##SFX(const int16_t *pad, int w, const int32_t *kp, int r, int16_t *out) {         \
    int x = 0, t;                                                                                            \
    for (; x + N <= w; x += N) {                                                                             \
      const int16_t *p = pad + r + 1 + x;                                                                    \
      V lo = SET1(1 << (BLUR_HSHIFT - 1)), hi = lo, s0, s1, k;                                               \
      for (t = 0; t <= r; t += 2) {                                                                          \
        s0 = t == 0 ? LOAD(p) : ADD16(LOAD(p - t), LOAD(p + t));                                             \
        s1 = ADD16(LOAD(p - t - 1), LOAD(p + t + 1));                                                        \
        k = SET1(kp[t / 2]);                                                                                 \
        lo = ADD32(lo, MADD(UNLO(s0, s1), k));                                                               \
        hi = ADD32(hi, MADD(UNHI(s0, s1), k));                                                               \
      }                                                                                                      \
      STORE16(out + x, PACKS(SRAI(lo, BLUR_HSHIFT), SRAI(hi, BLUR_HSHIFT)));                                 \
    }                                                                                                        \
    return x;                                                                                                \
  }                                                                                                          \
  TARGET static int vpass_##SFX(const int16_t *c, int w, const int32_t *wy, int r, const int32_t *off,        \
                                uint8_t *out) {                                                              \
    int x = 0, t;                                                                                            \
    for (; x + N <= w; x += N) {                                                                             \
      V lo = SET1(1 << (BLUR_VSHIFT - 1)), hi = lo, a, b, k, m = LOAD(c + x);                                \
      k = SET1(wy[0]);                                                                                       \
      lo = ADD32(lo, MADD(UNLO(m, ZERO), k));                                                                \
      hi = ADD32(hi, MADD(UNHI(m, ZERO), k));                                                                \
      for (t = 1; t <= r; t++) {                                                                             \
        a = LOAD(c + off[r - t] + x);                                                                        \
        b = LOAD(c + off[r + t] + x);                                                                        \
        k = SET1(wy[t] | wy[t] << 16);                                                                       \
        lo = ADD32(lo, MADD(UNLO(a, b), k));                                                                 \
        hi = ADD32(hi, MADD(UNHI(a, b), k));                                                                 \
      }                                                                                                      \
      STORE8(out + x, PACKS(SRAI(lo, BLUR_VSHIFT), SRAI(hi, BLUR_VSHIFT)));                                  \
    }                                                                                                        \
    return x;                                                                                                \
  }

#if defined(__SSE2__)
#define SSE_LOAD(p) _mm_loadu_si128((const __m128i *)(p))
#define SSE_STORE16(p, v) _mm_storeu_si128((__m128i *)(p), v)
#define SSE_STORE8(p, v) _mm_storel_epi64((__m128i *)(p), _mm_packus_epi16(v, v))
BLUR_SIMD(sse2, , __m128i, 8, SSE_LOAD, SSE_STORE16, _mm_add_epi16, _mm_add_epi32, _mm_madd_epi16,
          _mm_unpacklo_epi16, _mm_unpackhi_epi16, _mm_set1_epi32, _mm_srai_epi32, _mm_packs_epi32,
          _mm_setzero_si128(), SSE_STORE8)
#endif

#if defined(STOKER_X86)
#define AVX_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define AVX_STORE16(p, v) _mm256_storeu_si256((__m256i *)(p), v)
/* packus within halves gives bytes 0-7 at 0 and 8-15 at 16: gather them. */
#define AVX_STORE8(p, v)                                                                                     \
  _mm_storeu_si128((__m128i *)(p),                                                                           \
                   _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi16(v, v), 0x08)))
#define AVX2 __attribute__((target("avx2")))
BLUR_SIMD(avx2, AVX2, __m256i, 16, AVX_LOAD, AVX_STORE16, _mm256_add_epi16, _mm256_add_epi32,
          _mm256_madd_epi16, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16, _mm256_set1_epi32,
          _mm256_srai_epi32, _mm256_packs_epi32, _mm256_setzero_si256(), AVX_STORE8)
#endif

#if defined(STOKER_X86)
/* AVX-512 (F, BW): 32 lanes. The store clamps to 0..255 as packus does. */
#define AVX512_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define AVX512_STORE16(p, v) _mm512_storeu_si512((void *)(p), v)
#define AVX512_STORE8(p, v)                                                                                  \
  _mm256_storeu_si256((__m256i *)(p), _mm512_cvtusepi16_epi8(_mm512_max_epi16(v, _mm512_setzero_si512())))
#define AVX512 __attribute__((target("avx2,avx512f,avx512bw")))
BLUR_SIMD(avx512, AVX512, __m512i, 32, AVX512_LOAD, AVX512_STORE16, _mm512_add_epi16, _mm512_add_epi32,
          _mm512_madd_epi16, _mm512_unpacklo_epi16, _mm512_unpackhi_epi16, _mm512_set1_epi32,
          _mm512_srai_epi32, _mm512_packs_epi32, _mm512_setzero_si512(), AVX512_STORE8)
#endif

int stoker_kernels_simd(void) {
  int simd = 0;
#if defined(__SSE2__)
  simd = 1;
#endif
#if defined(STOKER_X86)
  __builtin_cpu_init();
  if (simd && __builtin_cpu_supports("avx2"))
    simd = 2;
  /* 3: the blur's passes need F and BW, saturation and hue DQ and VL too */
  if (simd == 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    simd = 3;
#endif
  return simd;
}

/* hpass and vpass run the widest vector pass the level allows, then the
 * next narrower one on what is left, and return where they stopped. */
static int hpass(int simd, const int16_t *pad, int w, const int32_t *kp, int r, int16_t *out) {
  (void)pad, (void)w, (void)kp, (void)r, (void)out;
#if defined(STOKER_X86)
  if (simd >= 3) {
    int x = hpass_avx512(pad, w, kp, r, out);
    return x + hpass_avx2(pad + x, w - x, kp, r, out + x);
  }
  if (simd >= 2)
    return hpass_avx2(pad, w, kp, r, out);
#endif
#if defined(__SSE2__)
  if (simd >= 1)
    return hpass_sse2(pad, w, kp, r, out);
#endif
  return 0;
}

static int vpass(int simd, const int16_t *c, int w, const int32_t *wy, int r, const int32_t *off, uint8_t *out) {
  (void)c, (void)w, (void)wy, (void)r, (void)off, (void)out;
#if defined(STOKER_X86)
  if (simd >= 3) {
    int x = vpass_avx512(c, w, wy, r, off, out);
    return x + vpass_avx2(c + x, w - x, wy, r, off, out + x);
  }
  if (simd >= 2)
    return vpass_avx2(c, w, wy, r, off, out);
#endif
#if defined(__SSE2__)
  if (simd >= 1)
    return vpass_sse2(c, w, wy, r, off, out);
#endif
  return 0;
}

void stoker_blur(uint8_t *pix, int w, int h, const int32_t *wx, int rx, const int32_t *wy, int ry,
                 int16_t *mid, int16_t *pad, int32_t *ints, int simd, const volatile int *stop) {
  int32_t *kp = ints, *off = ints + rx / 2 + 2;
  size_t n = (size_t)w * h;
  int c, x, y, t;
  /* kp[j]: the horizontal weights of taps 2j and 2j+1 as an int16 pair
   * (0 past rx), for pmaddwd. */
  for (t = 0; t <= rx; t += 2)
    kp[t / 2] = (wx[t] & 0xffff) | (t + 1 <= rx ? wx[t + 1] : 0) << 16;
  for (c = 0; c < 3; c++) {
    uint8_t *pl = pix + c * n;
    for (y = 0; y < h; y++) {
      int16_t *m = mid + (size_t)y * w;
      if (stop && *stop)
        return;
      blur_pad(pl + (size_t)y * w, w, rx, pad);
      for (x = hpass(simd, pad, w, kp, rx, m); x < w; x++)
        m[x] = hsum(pad + rx + 1 + x, wx, rx);
    }
    for (y = 0; y < h; y++) {
      const int16_t *cy = mid + (size_t)y * w;
      uint8_t *o = pl + (size_t)y * w;
      if (stop && *stop)
        return;
      for (t = -ry; t <= ry; t++)
        off[t + ry] = (reflect(y + t, h) - y) * w;
      for (x = vpass(simd, cy, w, wy, ry, off, o); x < w; x++)
        o[x] = vsum(cy + x, wy, ry, off);
    }
  }
}
