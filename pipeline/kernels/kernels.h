/* The photometric kernels' C versions (kernels.c): integer math, the same
 * bytes as their Go twins (blur.go, color.go, hue.go, point.go), with SIMD
 * where the CPU has it. See kernels_cgo.go for the Go side. */
#ifndef STOKER_KERNELS_H
#define STOKER_KERNELS_H

#include <stdint.h>

/* stoker_blur blurs three w x h planes (CHW) in place: rows with the Q14
 * taps wx[0..rx] (wx[t] for taps -t and t), then columns with wy[0..ry],
 * reflecting at the borders, as blurPlanesGo does. Scratch: mid, w*h
 * int16 (the Q7 pass between the two); pad, stoker_blur_pad(w, rx)
 * int16; ints, stoker_blur_ints(rx, ry) int32. simd: 0 scalar, else the
 * best the build and the CPU have. stop (NULL: none) is polled once a row:
 * when it is set the blur returns at once, its planes half made (the
 * sample's work was abandoned: the caller throws them away). */
void stoker_blur(uint8_t *pix, int w, int h, const int32_t *wx, int rx,
                 const int32_t *wy, int ry, int16_t *mid, int16_t *pad,
                 int32_t *ints, int simd, const volatile int *stop);

/* Scratch sizes for stoker_blur. */
static inline int stoker_blur_pad(int w, int rx) { return w + 2 * rx + 32; }
static inline int stoker_blur_ints(int rx, int ry) { return rx / 2 + 2 + 2 * ry + 1; }

/* stoker_kernels_simd is the best SIMD level kernels.c has on this CPU:
 * 0 none, 1 SSE2, 2 AVX2. */
int stoker_kernels_simd(void);

/* The colour kernels with AVX2 (kernels_color.c), twins of the Go loops
 * of the same names; call them only where stoker_kernels_simd() is 2.
 * r, g, b are planes of n pixels; pl one of w x h. */
void stoker_gray_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n);
int64_t stoker_gray_sum_avx2(const uint8_t *r, const uint8_t *g, const uint8_t *b, int n);
void stoker_blend_const_avx2(uint8_t *p, int n, float ratio, double c);
/* the same with c a float32 that blendConst32 found gives the same bytes */
void stoker_blend_const32_avx2(uint8_t *p, int n, float ratio, float c);
int stoker_minmax_avx2(const uint8_t *p, int n); /* min | max << 8 */
void stoker_saturate_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n, float ratio, double alpha);
void stoker_hue_avx2(uint8_t *r, uint8_t *g, uint8_t *b, int n, int32_t shift);
void stoker_sharpen_avx2(uint8_t *pl, int w, int h, double alpha, uint8_t *prev, uint8_t *cur);
void stoker_xor_avx2(uint8_t *p, int n, uint8_t m);
void stoker_and_avx2(uint8_t *p, int n, uint8_t m);
void stoker_solarize_avx2(uint8_t *p, int n, int k);           /* invert v >= k */
void stoker_add_below_avx2(uint8_t *p, int n, int k, int a);   /* v < k: v + a, saturated */
/* Table lookups with AVX-512 VBMI, where stoker_cpu_vbmi says the CPU has
 * it: each byte of p replaced by lut[byte]. */
/* Saturation and hue with AVX-512 (F, DQ, BW, VL), where
 * stoker_kernels_simd is 3: the same bytes as the AVX2 versions. */
void stoker_saturate_avx512(uint8_t *r, uint8_t *g, uint8_t *b, int n, float ratio, double alpha);
void stoker_hue_avx512(uint8_t *r, uint8_t *g, uint8_t *b, int n, int32_t shift);
typedef struct {
  uint8_t b[256];
} stoker_lut; /* by value, so that Go's table stays on its stack */
void stoker_lut_vbmi(uint8_t *p, int n, stoker_lut lut);
int stoker_cpu_vbmi(void);

#endif
