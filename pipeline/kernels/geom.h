/* geom.h: geometric kernels in C (geom.c): rotate's and affine's
 * resampling, rows reversed, rows swapped. */
#ifndef STOKER_GEOM_H
#define STOKER_GEOM_H

#include <stdint.h>

/* stoker_affine_ok reports whether stoker_affine runs here (x86-64 with
 * AVX2 and FMA). */
int stoker_affine_ok(void);

/* The resampling modes of stoker_affine. */
enum { STOKER_BILINEAR = 0, STOKER_NEAREST = 1, STOKER_BICUBIC = 2 };

/* stoker_affine resamples pix, three w x h planes, in place: prm holds the
 * grid (r0x, r1x, r2x, r0y, r1y, r2y: affine.go's affineGrid) and
 * the fill (three values, 0..255); rgbx is scratch of w*h words. stop
 * (NULL: none) is polled once a row: set, the call returns with pix half
 * made (the sample's work was abandoned). */
void stoker_affine(uint32_t *rgbx, uint8_t *pix, int w, int h, const float *prm, int nofill, int mode,
                   const volatile int *stop);

/* stoker_affine_to is stoker_affine from pix (w x h) into out (ow x oh,
 * which may be pix's bytes: rotate's expand), the grid centred on out. */
void stoker_affine_to(uint32_t *rgbx, uint8_t *pix, int w, int h, uint8_t *out, int ow, int oh, const float *prm,
                      int nofill, int mode, const volatile int *stop);

/* stoker_reverse_ok reports whether stoker_reverse_rows runs here (x86-64
 * with SSSE3). */
int stoker_reverse_ok(void);

/* stoker_reverse_rows reverses each of the rows rows of w bytes at pix, in
 * place. */
void stoker_reverse_rows(uint8_t *pix, int w, int rows);

/* stoker_flip_rows puts the h rows of w bytes of each of planes planes at
 * pix in the opposite order, in place. */
void stoker_flip_rows(uint8_t *pix, int w, int h, int planes);

#endif
