/* cv_warp.h: cv.c's vector warp, included once for AVX2, once for
 * AVX-512 and once for AVX-512 with VBMI (WARP_VBMI: byte permutes for
 * the taps of axis-aligned rows) (cv.c defines TGT, SFX and WD and the
 * helpers of, ofi, fmad, tof and fma8 for each); the same bytes from all,
 * warp.go's. */
/* No fused multiply-adds but the explicit ones (see turbo.c). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* lerp8 is FMA32(a, p1 - p0, p0) on eight lanes, a given as double
 * (alo, ahi), the taps as integers (whose difference and they are exact in
 * double). */
TGT static inline __m256 SFX(lerp8)(WD a, __m256i p0, __m256i p1) {
  return SFX(tof)(SFX(fmad)(a, SFX(ofi)(_mm256_sub_epi32(p1, p0)), SFX(ofi)(p0)));
}

/* blend8 is the blend of eight pixels whose four taps are p00..p11
 * (integers), the weights given as double, rounded and saturated, stored
 * as eight bytes at d. */
TGT static inline void SFX(blend8)(uint8_t *d, WD ax, WD ay, __m256i p00, __m256i p01,
                                   __m256i p10, __m256i p11) {
  __m256 v0 = SFX(lerp8)(ax, p00, p01), v1 = SFX(lerp8)(ax, p10, p11);
  __m256 dv = _mm256_sub_ps(v1, v0);
  __m256i r = _mm256_cvtps_epi32(SFX(tof)(SFX(fmad)(ay, SFX(of)(dv), SFX(of)(v0))));
  __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storel_epi64((__m128i *)d, _mm_packus_epi16(p, p));
}

/* lerp8f is lerp8 for a whose lanes are all multiples of 2^-23 (the
 * fraction of a coordinate >= 1, exact: a float's last bit there is
 * 2^-23 or more): then a*(p1 - p0) + p0 is a multiple of 2^-23 under
 * 2^9, exact in double, and FMA32 rounds it once, as the float fused
 * multiply-add does: the same float, in half the operations. */
TGT static inline __m256 SFX(lerp8f)(__m256 a, __m256i p0, __m256i p1) {
  return _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(_mm256_sub_epi32(p1, p0)), _mm256_cvtepi32_ps(p0));
}

/* blend8f is blend8 for ax as lerp8f needs it (ax, float, beside axd). */
TGT static inline void SFX(blend8f)(uint8_t *d, __m256 ax, WD ay, __m256i p00, __m256i p01, __m256i p10,
                                    __m256i p11) {
  __m256 v0 = SFX(lerp8f)(ax, p00, p01), v1 = SFX(lerp8f)(ax, p10, p11);
  __m256 dv = _mm256_sub_ps(v1, v0);
  __m256i r = _mm256_cvtps_epi32(SFX(tof)(SFX(fmad)(ay, SFX(of)(dv), SFX(of)(v0))));
  __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storel_epi64((__m128i *)d, _mm_packus_epi16(p, p));
}

/* blend8ff is blend8f with the y-lerp in float too, for ay whose lanes
 * are all multiples of 2^-23 (the fraction of a coordinate >= 1). Then
 * v0 and v1 (lerp8f's) are multiples of 2^-23 in [0, 255], and so is dv
 * = v1 - v0 (rounded from one), and E = ay*dv + v0 lies within [-2^-17,
 * 255 + 2^-17] (between v0 and about v1: dv is v1 - v0 within half its
 * ulp, at most 2^-17), under 2^8. Under 2^7, E is a multiple of 2^-46
 * under 2^7: a double (2^53 steps). From 2^7, the larger of v0 and v1 is
 * over 126: either both are >= 2, floats whose last bit is 2^-22 or more,
 * so dv is a multiple of 2^-22, or one is under 2 and |dv| > 64, a float
 * whose last bit is 2^-17 or more; either way E is a multiple of 2^-45
 * under 2^8: a double. FMA32 then rounds E once, as the float fused
 * multiply-add does: the same float in a quarter of the operations (no
 * conversions to double and back). TestExactWarpYLerpExact checks the claim
 * and that it fails for coordinates under 1. */
TGT static inline void SFX(blend8ff)(uint8_t *d, __m256 ax, __m256 ay, __m256i p00, __m256i p01, __m256i p10,
                                     __m256i p11) {
  __m256 v0 = SFX(lerp8f)(ax, p00, p01), v1 = SFX(lerp8f)(ax, p10, p11);
  __m256i r = _mm256_cvtps_epi32(_mm256_fmadd_ps(ay, _mm256_sub_ps(v1, v0), v0));
  __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storel_epi64((__m128i *)d, _mm_packus_epi16(p, p));
}

/* tap8 is the byte at base + o >> sh8 (0 or 24) of each lane where mask
 * is set, bv where not (not read). */
TGT static inline __m256i SFX(tap8)(const uint8_t *base, __m256i o, __m256i mask, int sh8,
                                                              __m256i bv) {
  __m256i g = _mm256_mask_i32gather_epi32(bv, (const int *)base, o, mask, 1);
  return _mm256_and_si256(_mm256_srli_epi32(g, sh8), _mm256_set1_epi32(0xff));
}

/* warp is warp_scalar with the first dw - dw%16 pixels of each row eight
 * at a time: where all eight pixels' four taps are in the image, each
 * row's two taps of a pixel gathered as one 32-bit word; where some are not,
 * each tap gathered alone where it is and the border where not (on images
 * under four pixels, one pixel at a time). */
TGT static void SFX(warp)(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw,
                                                         int sh, const float *m, int persp, int border) {
  size_t n = (size_t)sw * sh, dn = (size_t)dw * dh;
  float bv = (float)border;
  int tail = dw - dw % 16;
  const __m256 m0 = _mm256_set1_ps(m[0]), m3 = _mm256_set1_ps(m[3]), m6 = _mm256_set1_ps(m[6]);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), vw = _mm256_set1_epi32(sw);
  const __m256i vh = _mm256_set1_epi32(sh), neg = _mm256_set1_epi32(-1), one = _mm256_set1_epi32(1);
  const __m256i ff = _mm256_set1_epi32(0xff);
  const __m256i vbv = _mm256_set1_epi32((int)((uint32_t)border << 24 | (uint32_t)border));
#ifdef WARP_VBMI
  /* A row of pixels reads one pair of source rows only where y does not
   * move with x: an affine matrix with no rotation or shear. */
  int rows1 = !persp && m[3] == 0;
#endif
  for (int y = 0; y < dh; y++) {
    float fy = (float)y;
    float mxs = (float)(fy * m[1]) + m[2], mys = (float)(fy * m[4]) + m[5], mws = (float)(fy * m[7]) + m[8];
    const __m256 mx = _mm256_set1_ps(mxs), my = _mm256_set1_ps(mys), mw = _mm256_set1_ps(mws);
    /* The row's coordinates in float where that is exact: FMA32's
     * rounding in double then does nothing (stoker_cv_fma_exact). */
    int cf = stoker_cv_fma_exact(m[0], tail, mxs) && stoker_cv_fma_exact(m[3], tail, mys) &&
             (!persp || stoker_cv_fma_exact(m[6], tail, mws));
    int x = 0;
    for (; x < tail; x += 8) {
      __m256 fx = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_set1_epi32(x), lane));
      __m256 sx, sy;
      if (cf) {
        sx = _mm256_fmadd_ps(m0, fx, mx), sy = _mm256_fmadd_ps(m3, fx, my);
        if (persp) {
          __m256 w = _mm256_fmadd_ps(m6, fx, mw);
          sx = _mm256_div_ps(sx, w), sy = _mm256_div_ps(sy, w);
        }
      } else {
        sx = SFX(fma8)(m0, fx, mx), sy = SFX(fma8)(m3, fx, my);
        if (persp) {
          __m256 w = SFX(fma8)(m6, fx, mw);
          sx = _mm256_div_ps(sx, w), sy = _mm256_div_ps(sy, w);
        }
      }
      /* cvttps of the floor: the floor, or INT32_MIN as floor_int. */
      __m256i ix = _mm256_cvttps_epi32(_mm256_floor_ps(sx)), iy = _mm256_cvttps_epi32(_mm256_floor_ps(sy));
      __m256 ax = _mm256_sub_ps(sx, _mm256_cvtepi32_ps(ix)), ay = _mm256_sub_ps(sy, _mm256_cvtepi32_ps(iy));
      /* Which taps are in the image: x, x+1 by y, y+1. */
      __m256i ix1 = _mm256_add_epi32(ix, one), iy1 = _mm256_add_epi32(iy, one);
      __m256i vx0 = _mm256_and_si256(_mm256_cmpgt_epi32(ix, neg), _mm256_cmpgt_epi32(vw, ix));
      __m256i vx1 = _mm256_and_si256(_mm256_cmpgt_epi32(ix1, neg), _mm256_cmpgt_epi32(vw, ix1));
      __m256i vy0 = _mm256_and_si256(_mm256_cmpgt_epi32(iy, neg), _mm256_cmpgt_epi32(vh, iy));
      __m256i vy1 = _mm256_and_si256(_mm256_cmpgt_epi32(iy1, neg), _mm256_cmpgt_epi32(vh, iy1));
      __m256i o = _mm256_add_epi32(_mm256_mullo_epi32(iy, vw), ix), o1 = _mm256_add_epi32(o, vw);
      if (_mm256_movemask_epi8(_mm256_and_si256(_mm256_and_si256(vx0, vx1), _mm256_and_si256(vy0, vy1))) != -1) {
        if (n < 4) { /* too small for the gathers' spare bytes */
          float sxs[8], sys[8];
          _mm256_storeu_ps(sxs, sx);
          _mm256_storeu_ps(sys, sy);
          for (int k = 0; k < 8; k++)
            WARP_PIXEL(x + k, sxs[k], sys[k]);
          continue;
        }
        /* Some taps outside: each tap gathered alone where it is in the
         * image, the border where not (warp.go's three cases are all
         * this). A 32-bit gather's spare bytes are after the tap for the
         * first two planes, before it for the last. */
        __m256i m00 = _mm256_and_si256(vx0, vy0), m01 = _mm256_and_si256(vx1, vy0);
        __m256i m10 = _mm256_and_si256(vx0, vy1), m11 = _mm256_and_si256(vx1, vy1);
        __m256i o01 = _mm256_add_epi32(o, one), o11 = _mm256_add_epi32(o1, one);
        for (int c = 0; c < 3; c++) {
          const uint8_t *base = src + (size_t)c * n;
          int sh8 = 0;
          if (c == 2)
            base -= 3, sh8 = 24;
          __m256i p00 = SFX(tap8)(base, o, m00, sh8, vbv), p01 = SFX(tap8)(base, o01, m01, sh8, vbv);
          __m256i p10 = SFX(tap8)(base, o1, m10, sh8, vbv), p11 = SFX(tap8)(base, o11, m11, sh8, vbv);
          SFX(blend8)(dst + (size_t)c * dn + (size_t)y * dw + x, SFX(of)(ax), SFX(of)(ay), p00, p01, p10, p11);
        }
        continue;
      }
      /* Each row's two taps of a pixel are adjacent bytes: one 32-bit
       * gather a row gives both, its spare bytes after them for the
       * first two planes (in the next plane at most), before them for
       * the last (in the plane before it). */
      /* ix >= 1 in every lane: ax a multiple of 2^-23 (lerp8f); and iy
       * >= 1: ay one too (blend8ff). */
      int fx1 = _mm256_movemask_epi8(_mm256_cmpgt_epi32(ix, _mm256_setzero_si256())) == -1;
      int fy1 = fx1 && _mm256_movemask_epi8(_mm256_cmpgt_epi32(iy, _mm256_setzero_si256())) == -1;
#ifdef WARP_VBMI
      /* With VBMI, where the eight pixels read one pair of source rows
       * (the same iy: an axis-aligned matrix, as the yolo preset's) and
       * their taps span at most 32 bytes (a scale of 1/4 or more), each
       * row's bytes are one masked load and the taps four byte permutes
       * (zeroing all but each lane's low byte), not gathers. */
      if (fy1 && rows1) {
        int i0 = _mm256_extract_epi32(ix, 0), i7 = _mm256_extract_epi32(ix, 7), y0 = _mm256_extract_epi32(iy, 0);
        int lo = i0 < i7 ? i0 : i7, hi = i0 < i7 ? i7 : i0;
        __m256i vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
        if (hi - lo <= 30 && _mm256_movemask_epi8(_mm256_cmpeq_epi32(iy, _mm256_set1_epi32(y0))) == -1 &&
            _mm256_movemask_epi8(_mm256_or_si256(_mm256_cmpgt_epi32(vlo, ix), _mm256_cmpgt_epi32(ix, vhi))) == 0) {
          __m256i i00 = _mm256_sub_epi32(ix, vlo), i01 = _mm256_add_epi32(i00, one);
          __mmask32 lm = (__mmask32)((1ull << (hi - lo + 2)) - 1); /* bytes lo..hi+1 */
          size_t row = (size_t)y0 * sw + lo;
          for (int c = 0; c < 3; c++) {
            const uint8_t *b0 = src + (size_t)c * n + row;
            __m256i r0 = _mm256_maskz_loadu_epi8(lm, b0), r1 = _mm256_maskz_loadu_epi8(lm, b0 + sw);
            __m256i p00 = _mm256_maskz_permutexvar_epi8(0x11111111, i00, r0);
            __m256i p01 = _mm256_maskz_permutexvar_epi8(0x11111111, i01, r0);
            __m256i p10 = _mm256_maskz_permutexvar_epi8(0x11111111, i00, r1);
            __m256i p11 = _mm256_maskz_permutexvar_epi8(0x11111111, i01, r1);
            SFX(blend8ff)(dst + (size_t)c * dn + (size_t)y * dw + x, ax, ay, p00, p01, p10, p11);
          }
          continue;
        }
      }
#endif
      for (int c = 0; c < 3; c++) {
        const uint8_t *base = src + (size_t)c * n;
        int sh8 = 0;
        if (c == 2)
          base -= 2, sh8 = 16;
        __m256i g0 = _mm256_srli_epi32(_mm256_i32gather_epi32((const int *)base, o, 1), sh8);
        __m256i g1 = _mm256_srli_epi32(_mm256_i32gather_epi32((const int *)base, o1, 1), sh8);
        __m256i p00 = _mm256_and_si256(g0, ff), p01 = _mm256_and_si256(_mm256_srli_epi32(g0, 8), ff);
        __m256i p10 = _mm256_and_si256(g1, ff), p11 = _mm256_and_si256(_mm256_srli_epi32(g1, 8), ff);
        if (fy1)
          SFX(blend8ff)(dst + (size_t)c * dn + (size_t)y * dw + x, ax, ay, p00, p01, p10, p11);
        else if (fx1)
          SFX(blend8f)(dst + (size_t)c * dn + (size_t)y * dw + x, ax, SFX(of)(ay), p00, p01, p10, p11);
        else
          SFX(blend8)(dst + (size_t)c * dn + (size_t)y * dw + x, SFX(of)(ax), SFX(of)(ay), p00, p01, p10, p11);
      }
    }
    for (; x < dw; x++)
      WARP_TAIL(x);
  }
}

