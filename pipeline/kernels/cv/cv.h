/* cv.h: the YOLO kernels' inner loops in C (cv.c). */
#ifndef STOKER_CV_H
#define STOKER_CV_H

#include <stddef.h>
#include <stdint.h>

/* stoker_cv_simd is the best vector path stoker_cv_warp has here: 0 none,
 * 1 AVX2 and FMA, 2 those and AVX-512F, 3 those and AVX-512BW and VBMI
 * (x86-64 with them). */
int stoker_cv_simd(void);

/* stoker_cv_warp is warp.go's warp: dst, three dw x dh planes, resampled
 * from src, three sw x sh planes, by the inverse matrix m (nine floats,
 * row-major; the last row read only when persp), border outside; simd the
 * best vector path to take (0: scalar), at most what the CPU has. */
void stoker_cv_warp(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int sh, const float *m, int persp,
                    int border, int simd);

/* stoker_cv_fma_exact reports whether a*x + c is exactly a double for
 * every integer x in [0, n] (the vector warp's coordinates are then one
 * float fused multiply-add; exported for the tests). */
int stoker_cv_fma_exact(float a, int n, float c);

/* stoker_cv_hsv is hsv.go's hsvPixelsGo on pix, three planes (R, G, B)
 * of n bytes, in place: luts the hue, saturation and value tables (256
 * each), sdiv and hdiv hsv.go's division tables, frac, sector and over its
 * hsvBack. With AVX2 (simd >= 1 and the CPU's) eight pixels at a time,
 * with AVX-512BW and VBMI (simd >= 2 and the CPU's) sixteen (the same
 * bytes). */
void stoker_cv_hsv(uint8_t *pix, size_t n, const uint8_t *luts, const int32_t *sdiv, const int32_t *hdiv,
                   const float *frac, const uint8_t *sector, const float *over, int simd);

/* stoker_cv_resize is resize.go's ResizeLinear past its copy and halving:
 * dst, three dw x dh planes, from src, three sw x sh planes, by the taps
 * (resize.go's linearTaps: the columns' with their edge, the rows'); rows
 * is scratch of 3*dw words. With AVX2 (simd >= 1 and the CPU's) the
 * columns' pass is eight sums at a time (the same integers). */
void stoker_cv_resize(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int sh, const int32_t *xofs,
                      const int16_t *xw0, const int16_t *xw1, int edge, const int32_t *yofs, const int16_t *yw0,
                      const int16_t *yw1, int32_t *rows, int simd);

#endif
