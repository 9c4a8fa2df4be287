/* What turbo.c (the JPEG decode) and resize.c (the resampler and the row
 * API) share: a decode's scratch, and the steps one calls in the other.
 * Private to the two. */
#ifndef STOKER_TURBO_STATE_H
#define STOKER_TURBO_STATE_H

#include "turbo.h"
#include "huff.h"
#include "passes.h"
#include "phuff.h"
#include "memlim.h"

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

/* axis (the filters) and the passes: passes.h, passes.c. */

/* One view's state in a decode: its filters, its horizontally resampled
 * rows (mid: the scaled rows [uy0, uy1) its vertical taps read) and the
 * scaled pixels its taps use. */
typedef struct {
  axis ax, ay;
  uint8_t *mid;
  size_t mid_cap;
  int mid_rows;
  int ux0, ux1, uy0, uy1;
} vstate;

struct stoker_turbo {
  struct jpeg_decompress_struct cinfo; /* first: error hooks cast back */
  struct jpeg_error_mgr jerr;
  struct jpeg_progress_mgr prog;
  jmp_buf jb;
  int code;
  int max_scans;
  char msg[JMSG_LENGTH_MAX + 96];
  stoker_job job;
  vstate vs[STOKER_MAX_VIEWS];
  uint8_t *row; /* one decoded scanline */
  size_t row_cap;
  int simd; /* this decode's SIMD level: 0 none, 1 SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512, 5 AVX-512 VBMI and VNNI */
  stoker_huff huff; /* the faster baseline Huffman decoder (huff.c) */
  stoker_phuff ph;  /* and the progressive one (phuff.c) */
  const uint8_t **taps; /* vertical pass: row pointers of one output row */
  size_t taps_cap;
  uint8_t *line; /* vertical pass: one gray output row */
  size_t line_cap;
  /* The decoder index being used and extended (huff.c's layout): a
   * copy of the one given, or a fresh one. */
  uint8_t *ixbuf;
  size_t ix_cap, ix_len;
  stoker_hix hix;
  stoker_coefbuf cbuf; /* MCUs to store in the coefficient cache */
  int rows_gray; /* stoker_rows_*: the rows given are gray (else RGBX) */
  stoker_memlim ml; /* libjpeg's own memory, counted and capped (memlim.c) */
  /* The sample's abandoned flag, for one call (stoker_decode's stop). */
  const volatile int *stop;
};

/* turbo.c: stoker_fail sets the code and message of the failed call and
 * longjmps back to its setjmp; stoker_begin_decode readies t for its job
 * (its SIMD level, its reports zeroed). */
void stoker_fail(stoker_turbo *t, int code, const char *msg);
void stoker_begin_decode(stoker_turbo *t);

/* resize.c: the filters and the vertical pass (stoker_grow, the scratch's
 * buffers, fails through stoker_fail). */
void stoker_grow(stoker_turbo *t, void **p, size_t *cap, size_t n, size_t sz);
void stoker_torch_coeffs(stoker_turbo *t, axis *a, const stoker_span *s, double f, int n,
                         int interp, int aa, int c0, int c1, int flip, int *lo, int *hi);
void stoker_pack_quads(stoker_turbo *t, axis *a, int n);
void stoker_vpass(stoker_turbo *t, int v, int gray, uint8_t *out);
int stoker_view_ok(const stoker_job *jb, const stoker_view *v);

#endif
