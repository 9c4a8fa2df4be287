/* geom.c: geometric kernels in C, each with a Go twin that gives the same
 * bytes (geom.go, affine.go; geom_cgo_test.go compares):
 *
 * - rows swapped (vertical_flip), with SSE2 where the compiler targets it;
 * - rows reversed (horizontal_flip, rotate by 180), with SSSE3 where the
 *   CPU has it;
 * - rotate's and affine's resampling, with AVX2 and FMA where the CPU has
 *   them, eight output pixels at a time, with the arithmetic of
 *   torchvision's tensor path (affine.go says which: its float32
 *   grid, grid_sample's fused unnormalization and tap sums, the fill
 *   blended through the mask, rounding half to even), so that its bytes
 *   are torch's; bicubic as bicubic.go computes it, every
 *   operation rounded. The image is first interleaved into one word per
 *   pixel (R, G, B, 0) so that one gather fetches a tap's three channels. */
/* No fused multiply-adds but the explicit ones (see turbo.c). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "geom.h"

#include <string.h>

#if defined(__SSE2__) || defined(__x86_64__)
#include <immintrin.h>
#endif

/* swap swaps the n bytes at a and at b. */
static inline void swap(uint8_t *a, uint8_t *b, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    __m128i x = _mm_loadu_si128((const __m128i *)(a + i)), y = _mm_loadu_si128((const __m128i *)(b + i));
    _mm_storeu_si128((__m128i *)(a + i), y);
    _mm_storeu_si128((__m128i *)(b + i), x);
  }
#endif
  for (; i < n; i++) {
    uint8_t t = a[i];
    a[i] = b[i];
    b[i] = t;
  }
}

void stoker_flip_rows(uint8_t *pix, int w, int h, int planes) {
  for (int c = 0; c < planes; c++) {
    uint8_t *p = pix + (size_t)c * w * h;
    for (int r = 0; r < h / 2; r++)
      swap(p + (size_t)r * w, p + (size_t)(h - 1 - r) * w, (size_t)w);
  }
}

#if defined(__x86_64__)

static int cpu_avx2_fma, cpu_ssse3;

__attribute__((constructor)) static void geom_cpu_init(void) {
  __builtin_cpu_init();
  cpu_avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu_ssse3 = __builtin_cpu_supports("ssse3");
}

int stoker_affine_ok(void) { return cpu_avx2_fma; }

int stoker_reverse_ok(void) { return cpu_ssse3; }

/* reverse_row reverses b[0..n) in place: sixteen bytes from each end at a
 * time, then the middle as two overlapping blocks (each byte of the overlap
 * gets the same value from both), then bytes. */
__attribute__((target("ssse3"))) static inline void reverse_row(uint8_t *b, int n) {
  const __m128i rev = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  int i = 0, j = n;
  for (; j - i >= 32; i += 16, j -= 16) {
    __m128i lo = _mm_loadu_si128((const __m128i *)(b + i)), hi = _mm_loadu_si128((const __m128i *)(b + j - 16));
    _mm_storeu_si128((__m128i *)(b + i), _mm_shuffle_epi8(hi, rev));
    _mm_storeu_si128((__m128i *)(b + j - 16), _mm_shuffle_epi8(lo, rev));
  }
  if (j - i >= 16) {
    __m128i lo = _mm_loadu_si128((const __m128i *)(b + i)), hi = _mm_loadu_si128((const __m128i *)(b + j - 16));
    _mm_storeu_si128((__m128i *)(b + i), _mm_shuffle_epi8(hi, rev));
    _mm_storeu_si128((__m128i *)(b + j - 16), _mm_shuffle_epi8(lo, rev));
    return;
  }
  for (j--; i < j; i++, j--) {
    uint8_t t = b[i];
    b[i] = b[j];
    b[j] = t;
  }
}

__attribute__((target("ssse3"))) void stoker_reverse_rows(uint8_t *pix, int w, int rows) {
  for (int r = 0; r < rows; r++)
    reverse_row(pix + (size_t)r * w, w);
}

/* interleave writes rgbx[i] = R | G << 8 | B << 16 from the planes. */
__attribute__((target("avx2"))) static void interleave(const uint8_t *pix, uint32_t *rgbx, int n) {
  const uint8_t *r = pix, *g = pix + n, *b = pix + 2 * (size_t)n;
  const __m128i z = _mm_setzero_si128();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i vr = _mm_loadu_si128((const __m128i *)(r + i));
    __m128i vg = _mm_loadu_si128((const __m128i *)(g + i));
    __m128i vb = _mm_loadu_si128((const __m128i *)(b + i));
    __m128i rg0 = _mm_unpacklo_epi8(vr, vg), rg1 = _mm_unpackhi_epi8(vr, vg);
    __m128i b0 = _mm_unpacklo_epi8(vb, z), b1 = _mm_unpackhi_epi8(vb, z);
    _mm_storeu_si128((__m128i *)(rgbx + i), _mm_unpacklo_epi16(rg0, b0));
    _mm_storeu_si128((__m128i *)(rgbx + i + 4), _mm_unpackhi_epi16(rg0, b0));
    _mm_storeu_si128((__m128i *)(rgbx + i + 8), _mm_unpacklo_epi16(rg1, b1));
    _mm_storeu_si128((__m128i *)(rgbx + i + 12), _mm_unpackhi_epi16(rg1, b1));
  }
  for (; i < n; i++)
    rgbx[i] = r[i] | (uint32_t)g[i] << 8 | (uint32_t)b[i] << 16;
}

/* store8 writes the low bytes of v's first cnt lanes (values 0..255). */
__attribute__((target("avx2"))) static inline void store8(uint8_t *dst, __m256i v, int cnt) {
  __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  p = _mm_packus_epi16(p, p);
  if (cnt == 8) {
    _mm_storel_epi64((__m128i *)dst, p);
  } else {
    uint8_t tmp[16];
    _mm_storeu_si128((__m128i *)tmp, p);
    memcpy(dst, tmp, (size_t)cnt);
  }
}

/* channel is byte c of each word, as float. */
__attribute__((target("avx2"))) static inline __m256 channel(__m256i v, int c) {
  return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * c), _mm256_set1_epi32(0xff)));
}

/* round_u8 rounds half to even and keeps the low byte, as torch casts. */
__attribute__((target("avx2"))) static inline __m256i round_u8(__m256 v) {
  __m256i i = _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return _mm256_and_si256(i, _mm256_set1_epi32(0xff));
}

/* grid holds one row's constants; fused is affineGrid's (MKL's order:
 * fma(Y, r1, X*r0) + r2; else (X*r0 + Y*r1) + r2, rx and ry the row's
 * Y*r1). */
typedef struct {
  __m256 r0x, r1x, r2x, r0y, r1y, r2y, Y, rx, ry, halfW, halfH;
  int fused;
} grid;

/* TORCH_BLAS_POINTS is affine.go's torchBLASPoints: the fewest output
 * points whose grid torch's bmm sums in MKL's order. */
#define TORCH_BLAS_POINTS 67

/* points returns the points output pixels x..x+7 of the row sample
 * (affineGrid.at). */
__attribute__((target("avx2,fma"))) static inline void points(const grid *g, float x0, __m256 *ix, __m256 *iy) {
  const __m256 one = _mm256_set1_ps(1.0f), mhalf = _mm256_set1_ps(-0.5f);
  __m256 X = _mm256_add_ps(_mm256_set1_ps(x0), _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7)); /* exact */
  __m256 gx, gy;
  if (g->fused) {
    gx = _mm256_add_ps(_mm256_fmadd_ps(g->Y, g->r1x, _mm256_mul_ps(X, g->r0x)), g->r2x);
    gy = _mm256_add_ps(_mm256_fmadd_ps(g->Y, g->r1y, _mm256_mul_ps(X, g->r0y)), g->r2y);
  } else {
    gx = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(X, g->r0x), g->rx), g->r2x);
    gy = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(X, g->r0y), g->ry), g->r2y);
  }
  *ix = _mm256_fmadd_ps(_mm256_add_ps(gx, one), g->halfW, mhalf);
  *iy = _mm256_fmadd_ps(_mm256_add_ps(gy, one), g->halfH, mhalf);
}

/* nearest8 writes output pixels o..o+cnt-1 (nearestAffine). */
__attribute__((target("avx2,fma"))) static inline void nearest8(const grid *g, const uint32_t *rgbx, uint8_t *pix, int w,
                                                                int h, int n, float x0, int o, int cnt, __m256i fillw) {
  __m256 ix, iy;
  points(g, x0, &ix, &iy);
  __m256 ok = _mm256_and_ps(
      _mm256_and_ps(_mm256_cmp_ps(ix, _mm256_set1_ps(-0.5f), _CMP_GE_OQ),
                    _mm256_cmp_ps(ix, _mm256_set1_ps((float)w - 0.5f), _CMP_LE_OQ)),
      _mm256_and_ps(_mm256_cmp_ps(iy, _mm256_set1_ps(-0.5f), _CMP_GE_OQ),
                    _mm256_cmp_ps(iy, _mm256_set1_ps((float)h - 0.5f), _CMP_LE_OQ)));
  __m256i xi = _mm256_cvttps_epi32(_mm256_round_ps(ix, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i yi = _mm256_cvttps_epi32(_mm256_round_ps(iy, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i m = _mm256_and_si256(_mm256_castps_si256(ok), _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(w), xi),
                                                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(h), yi)));
  __m256i idx = _mm256_add_epi32(_mm256_mullo_epi32(yi, _mm256_set1_epi32(w)), xi);
  __m256i v = _mm256_mask_i32gather_epi32(fillw, (const int *)rgbx, idx, m, 4);
  const __m256i ff = _mm256_set1_epi32(0xff);
  store8(pix + o, _mm256_and_si256(v, ff), cnt);
  store8(pix + n + o, _mm256_and_si256(_mm256_srli_epi32(v, 8), ff), cnt);
  store8(pix + 2 * (size_t)n + o, _mm256_srli_epi32(v, 16), cnt);
}

/* inside is the lanes where 0 <= i < size. */
__attribute__((target("avx2"))) static inline __m256i inside(__m256i i, int size) {
  return _mm256_and_si256(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(-1)), _mm256_cmpgt_epi32(_mm256_set1_epi32(size), i));
}

/* bilinear8 writes output pixels o..o+cnt-1 (bilinearAffine). */
__attribute__((target("avx2,fma"))) static inline void bilinear8(const grid *g, const uint32_t *rgbx, uint8_t *pix, int w,
                                                                 int h, int n, float x0, int o, int cnt, const __m256 *f,
                                                                 int nofill) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 ix, iy;
  points(g, x0, &ix, &iy);
  __m256 any = _mm256_and_ps(
      _mm256_and_ps(_mm256_cmp_ps(ix, _mm256_set1_ps(-1.0f), _CMP_GT_OQ),
                    _mm256_cmp_ps(ix, _mm256_set1_ps((float)w), _CMP_LT_OQ)),
      _mm256_and_ps(_mm256_cmp_ps(iy, _mm256_set1_ps(-1.0f), _CMP_GT_OQ),
                    _mm256_cmp_ps(iy, _mm256_set1_ps((float)h), _CMP_LT_OQ)));
  __m256 fx = _mm256_floor_ps(ix), fy = _mm256_floor_ps(iy);
  __m256 we = _mm256_sub_ps(ix, fx), no = _mm256_sub_ps(iy, fy);
  __m256 ea = _mm256_sub_ps(one, we), so = _mm256_sub_ps(one, no);
  __m256 wt[4] = {_mm256_mul_ps(so, ea), _mm256_mul_ps(so, we), _mm256_mul_ps(no, ea), _mm256_mul_ps(no, we)};
  __m256i xi = _mm256_cvttps_epi32(fx), yi = _mm256_cvttps_epi32(fy);
  __m256i one_i = _mm256_set1_epi32(1);
  __m256i mx0 = inside(xi, w), mx1 = inside(_mm256_add_epi32(xi, one_i), w);
  __m256i my0 = inside(yi, h), my1 = inside(_mm256_add_epi32(yi, one_i), h);
  __m256i m[4] = {_mm256_and_si256(mx0, my0), _mm256_and_si256(mx1, my0), _mm256_and_si256(mx0, my1),
                  _mm256_and_si256(mx1, my1)};
  __m256i idx = _mm256_add_epi32(_mm256_mullo_epi32(yi, _mm256_set1_epi32(w)), xi);
  __m256i off[4] = {idx, _mm256_add_epi32(idx, one_i), _mm256_add_epi32(idx, _mm256_set1_epi32(w)),
                    _mm256_add_epi32(idx, _mm256_set1_epi32(w + 1))};
  __m256i t[4];
  for (int k = 0; k < 4; k++)
    t[k] = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)rgbx, off[k], m[k], 4);
  /* the mask channel: ones where a tap is inside, summed like the pixels */
  __m256 mask = _mm256_mul_ps(_mm256_and_ps(_mm256_castsi256_ps(m[0]), one), wt[0]);
  for (int k = 1; k < 4; k++)
    mask = _mm256_fmadd_ps(_mm256_and_ps(_mm256_castsi256_ps(m[k]), one), wt[k], mask);
  for (int c = 0; c < 3; c++) {
    __m256 v = _mm256_mul_ps(channel(t[0], c), wt[0]);
    for (int k = 1; k < 4; k++)
      v = _mm256_fmadd_ps(channel(t[k], c), wt[k], v);
    if (!nofill)
      v = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(v, f[c]), mask), f[c]);
    v = _mm256_blendv_ps(f[c], v, any); /* no tap inside: the fill */
    store8(pix + (size_t)c * n + o, round_u8(v), cnt);
  }
}

/* cubic_coeffs is bicubic.go's cubicCoeffs: grid_sample's cubic
 * weights at fraction t, every operation rounded (no fusing). */
__attribute__((target("avx2"))) static inline void cubic_coeffs(__m256 t, __m256 c[4]) {
  const __m256 a = _mm256_set1_ps(-0.75f), one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
  const __m256 a5 = _mm256_set1_ps(-3.75f), a8 = _mm256_set1_ps(-6.0f), a4 = _mm256_set1_ps(-3.0f);
  const __m256 a2 = _mm256_set1_ps(1.25f), a3 = _mm256_set1_ps(2.25f);
  __m256 x[4] = {_mm256_add_ps(t, one), t, _mm256_sub_ps(one, t), _mm256_sub_ps(two, t)};
  for (int k = 0; k < 4; k += 3) /* 1 < x < 2 */
    c[k] = _mm256_sub_ps(
        _mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(a, x[k]), a5), x[k]), a8), x[k]), a4);
  for (int k = 1; k < 3; k++) /* x <= 1 */
    c[k] = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(a2, x[k]), a3), x[k]), x[k]), one);
}

/* cubic_sum is bicubic.go's cubicSum. */
__attribute__((target("avx2"))) static inline __m256 cubic_sum(const __m256 c[4], __m256 v0, __m256 v1, __m256 v2,
                                                               __m256 v3) {
  return _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(c[0], v0), _mm256_mul_ps(c[1], v1)), _mm256_mul_ps(c[2], v2)),
      _mm256_mul_ps(c[3], v3));
}

/* bicubic8 writes output pixels o..o+cnt-1 (bicubicAffine). */
__attribute__((target("avx2,fma"))) static inline void bicubic8(const grid *g, const uint32_t *rgbx, uint8_t *pix, int w,
                                                                int h, int n, float x0, int o, int cnt, const __m256 *f,
                                                                int nofill) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 ix, iy;
  points(g, x0, &ix, &iy);
  __m256 any = _mm256_and_ps(
      _mm256_and_ps(_mm256_cmp_ps(ix, _mm256_set1_ps(-2.0f), _CMP_GE_OQ),
                    _mm256_cmp_ps(ix, _mm256_set1_ps((float)w + 1), _CMP_LT_OQ)),
      _mm256_and_ps(_mm256_cmp_ps(iy, _mm256_set1_ps(-2.0f), _CMP_GE_OQ),
                    _mm256_cmp_ps(iy, _mm256_set1_ps((float)h + 1), _CMP_LT_OQ)));
  __m256 fx = _mm256_floor_ps(ix), fy = _mm256_floor_ps(iy);
  __m256 cx[4], cy[4];
  cubic_coeffs(_mm256_sub_ps(ix, fx), cx);
  cubic_coeffs(_mm256_sub_ps(iy, fy), cy);
  __m256i xi = _mm256_cvttps_epi32(fx), yi = _mm256_cvttps_epi32(fy);
  __m256i mx[4], wv = _mm256_set1_epi32(w);
  for (int k = 0; k < 4; k++)
    mx[k] = inside(_mm256_add_epi32(xi, _mm256_set1_epi32(k - 1)), w);
  __m256 rows[3][4], mrow[4];
  for (int r = 0; r < 4; r++) {
    __m256i y = _mm256_add_epi32(yi, _mm256_set1_epi32(r - 1));
    __m256i my = inside(y, h);
    __m256i base = _mm256_add_epi32(_mm256_mullo_epi32(y, wv), xi);
    __m256 v[3][4], m[4];
    for (int k = 0; k < 4; k++) {
      __m256i mk = _mm256_and_si256(mx[k], my);
      __m256i t = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)rgbx,
                                              _mm256_add_epi32(base, _mm256_set1_epi32(k - 1)), mk, 4);
      m[k] = _mm256_and_ps(_mm256_castsi256_ps(mk), one);
      for (int c = 0; c < 3; c++)
        v[c][k] = channel(t, c);
    }
    mrow[r] = cubic_sum(cx, m[0], m[1], m[2], m[3]);
    for (int c = 0; c < 3; c++)
      rows[c][r] = cubic_sum(cx, v[c][0], v[c][1], v[c][2], v[c][3]);
  }
  __m256 mask = cubic_sum(cy, mrow[0], mrow[1], mrow[2], mrow[3]);
  const __m256 zero = _mm256_setzero_ps(), max = _mm256_set1_ps(255.0f);
  for (int c = 0; c < 3; c++) {
    __m256 v = cubic_sum(cy, rows[c][0], rows[c][1], rows[c][2], rows[c][3]);
    if (!nofill)
      v = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(v, f[c]), mask), f[c]);
    v = _mm256_blendv_ps(f[c], v, any); /* no tap inside: the fill */
    v = _mm256_min_ps(_mm256_max_ps(v, zero), max);
    store8(pix + (size_t)c * n + o, round_u8(v), cnt);
  }
}

/* affine_avx2 samples rgbx (w x h) into pix (ow x oh: rotate's expand
 * makes it larger; else the same), the grid centred on the output. */
__attribute__((target("avx2,fma"))) static void affine_avx2(const uint32_t *rgbx, uint8_t *pix, int w, int h, int ow,
                                                              int oh, const float *prm, int nofill, int mode,
                                                              const volatile int *stop) {
  const int n = ow * oh;
  const float cx = (float)((ow - 1) * 0.5), cy = (float)((oh - 1) * 0.5); /* exact */
  grid g = {
      .r0x = _mm256_set1_ps(prm[0]),
      .r1x = _mm256_set1_ps(prm[1]),
      .r2x = _mm256_set1_ps(prm[2]),
      .r0y = _mm256_set1_ps(prm[3]),
      .r1y = _mm256_set1_ps(prm[4]),
      .r2y = _mm256_set1_ps(prm[5]),
      .fused = (long long)ow * oh >= TORCH_BLAS_POINTS,
      .halfW = _mm256_set1_ps((float)w / 2),
      .halfH = _mm256_set1_ps((float)h / 2),
  };
  __m256 f[3];
  uint32_t fw = 0;
  for (int c = 0; c < 3; c++) {
    f[c] = _mm256_set1_ps(prm[6 + c]);
    /* the fill as a byte, rounded half to even */
    fw |= (uint32_t)(uint8_t)_mm_cvtss_si32(_mm_round_ss(_mm_setzero_ps(), _mm_set_ss(prm[6 + c]),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
          << (8 * c);
  }
  const __m256i fillw = _mm256_set1_epi32((int)fw);
  for (int y = 0; y < oh; y++) {
    float Y = (float)y - cy; /* exact */
    if (stop && *stop)
      return;
    float rx = Y * prm[1], ry = Y * prm[4];
    g.Y = _mm256_set1_ps(Y);
    g.rx = _mm256_set1_ps(rx);
    g.ry = _mm256_set1_ps(ry);
    for (int x = 0; x < ow; x += 8) {
      int cnt = ow - x < 8 ? ow - x : 8;
      if (mode == STOKER_NEAREST)
        nearest8(&g, rgbx, pix, w, h, n, (float)x - cx, y * ow + x, cnt, fillw);
      else if (mode == STOKER_BICUBIC)
        bicubic8(&g, rgbx, pix, w, h, n, (float)x - cx, y * ow + x, cnt, f, nofill);
      else
        bilinear8(&g, rgbx, pix, w, h, n, (float)x - cx, y * ow + x, cnt, f, nofill);
    }
  }
}

void stoker_affine(uint32_t *rgbx, uint8_t *pix, int w, int h, const float *prm, int nofill, int mode,
                   const volatile int *stop) {
  interleave(pix, rgbx, w * h);
  affine_avx2(rgbx, pix, w, h, w, h, prm, nofill, mode, stop);
}

void stoker_affine_to(uint32_t *rgbx, uint8_t *pix, int w, int h, uint8_t *out, int ow, int oh, const float *prm,
                      int nofill, int mode, const volatile int *stop) {
  interleave(pix, rgbx, w * h);
  affine_avx2(rgbx, out, w, h, ow, oh, prm, nofill, mode, stop);
}

#else

int stoker_affine_ok(void) { return 0; }

int stoker_reverse_ok(void) { return 0; }

void stoker_reverse_rows(uint8_t *pix, int w, int rows) { (void)pix, (void)w, (void)rows; }

void stoker_affine(uint32_t *rgbx, uint8_t *pix, int w, int h, const float *prm, int nofill, int mode,
                   const volatile int *stop) {
  (void)rgbx, (void)pix, (void)w, (void)h, (void)prm, (void)nofill, (void)mode, (void)stop;
}

void stoker_affine_to(uint32_t *rgbx, uint8_t *pix, int w, int h, uint8_t *out, int ow, int oh, const float *prm,
                      int nofill, int mode, const volatile int *stop) {
  (void)rgbx, (void)pix, (void)w, (void)h, (void)out, (void)ow, (void)oh, (void)prm, (void)nofill, (void)mode,
      (void)stop;
}

#endif
