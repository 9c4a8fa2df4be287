/* The resampler's two passes over one axis' filter, torch's uint8
 * antialiasing kernels in fixed point (resize.c works out the filters, turbo.c
 * and resize.c drive the passes; passes.c holds them, scalar, SSE2, SSSE3, AVX2,
 * AVX-512 and AVX-512 VBMI/VNNI, all with the same sums). */
#ifndef STOKER_PASSES_H
#define STOKER_PASSES_H

#include <stddef.h>
#include <stdint.h>

/* Filter coefficients are fixed point with an axis' prec fractional bits
 * (torch's precision, at most 22 with int16 weights), so that a pixel times
 * a coefficient fits in 16x16->32-bit multiplies (pmaddwd) and a sum of
 * them in 32 bits. The scalar code computes the same sums: output is the
 * same bytes with or without SIMD. */

/* One axis' filter: output i reads 2*np source pixels from start[i], with
 * coefficients k[i*ks ...] (prec fractional bits; zero past the support)
 * and, for SIMD, the same coefficients in pairs, each pair broadcast to four
 * 32-bit lanes: kv[(i*np + j)*4 ...] = k[2j] | k[2j+1] << 16. The tap count
 * is the same for every output of an image (the widest support, rounded up
 * to even), which keeps the inner loops branch-predictable. */
typedef struct {
  int *start;
  int16_t *k;
  int32_t *kv;
  /* kv4: with AVX-512, kv again, four outputs' pairs side by side: for
   * outputs 4g..4g+3, pair j at kv4[((g*np + j)*4 + o)*4 ...], so that one
   * 512-bit load holds a pair for each of them (whole groups only). */
  int32_t *kv4;
  /* kv4buf, px4buf: what kv4 and px4 lie in, each at its first 64-byte
   * boundary: a 64-byte load that straddles two cache lines costs two. */
  void *kv4buf, *px4buf;
  /* px4: with AVX-512 VBMI, for each group of four outputs, the byte
   * permutation that takes one pair of taps for each of them out of one
   * 64-byte load at its first output's start (hrgbx_vbmi). */
  uint8_t *px4;
  double *w;
  size_t s_cap, k_cap, kv_cap, kv4_cap, px4_cap, w_cap;
  int ks, np;
  int prec; /* fractional bits of k */
  /* ident: each output is one source pixel at weight one (1 << prec, its
   * other taps zero), the next after the one before (axis_identity): the
   * passes then copy, the same bytes (p << prec plus half, shifted back,
   * is p). */
  int ident;
} axis;

/* axis_identity is whether a's n outputs make ident so. */
int axis_identity(const axis *a, int n);

/* hpass_rgbx resamples one decoded RGBX row into dst: interleaved RGB
 * (with 4 bytes of slack after it) or, when planar, three planes of n
 * bytes, at SIMD level simd (turbo.c's stoker_begin_decode). */
void hpass_rgbx(const axis *a, int n, const uint8_t *src, uint8_t *dst, int planar, int simd);
/* hpass_rgbx2 is hpass_rgbx for two rows. */
void hpass_rgbx2(const axis *a, int n, const uint8_t *src0, const uint8_t *src1, uint8_t *dst0,
                 uint8_t *dst1, int planar, int simd);
/* hpass_gray resamples one gray row. */
void hpass_gray(const axis *a, int n, const uint8_t *src, uint8_t *dst);
/* vrow computes n bytes of one output row from bytes [off, off+n) of the
 * rows taps[0..2*np), with coefficients k (prec fractional bits) and kv
 * (broadcast pairs). */
void vrow(const uint8_t *const *taps, size_t off, const int16_t *k, const int32_t *kv, int np, int prec,
          int n, uint8_t *dst, int simd);

#endif
