/* The libjpeg-turbo fast path: one call decodes a JPEG's needed region, at a
 * DCT scale when allowed, and resamples, flips and packs it into the caller's
 * buffer. See fast_cgo.go for the Go side and turbo.c for the details. */
#ifndef STOKER_TURBO_H
#define STOKER_TURBO_H

#include <stddef.h>

/* Result codes of stoker_decode; they map onto the package's sentinels. */
enum {
  STOKER_OK = 0,
  STOKER_CORRUPT = 1,
  STOKER_TOO_LARGE = 2,
  STOKER_UNSUPPORTED = 3
};

/* DCT scaling modes (the Go side maps DCTScaling onto these). */
enum { STOKER_SCALE_POW2 = 0, STOKER_SCALE_OFF = 1, STOKER_SCALE_ANY = 2 };

/* One image's job. Go fills it in (it lives in C memory, inside the scratch)
 * before each stoker_decode call, so that the call passes no Go struct. */
typedef struct {
  /* Geometry, in source pixels: the box maps onto the output; the filter's
   * support is clipped to [x0,x1) x [y0,y1). */
  double bx, by, bw, bh;
  int x0, y0, x1, y1;
  int src_w, src_h, comps; /* what the Go header parser saw */
  int out_w, out_h;
  int flip; /* mirror x */
  int hwc;  /* 1: interleaved HWC, 0: planar CHW */
  int scaling;
  int max_scans;
  long long max_memory; /* libjpeg's max_memory_to_use */
  /* Tuning and test knobs; all 0 by default. */
  int fancy;     /* do_fancy_upsampling = TRUE (triangle chroma upsampling) */
  int ifast;     /* dct_method = JDCT_IFAST */
  int no_region; /* decode whole rows from the top, no crop or skip (tests) */
  int libjpeg_huff; /* use libjpeg's own Huffman decoder, not huff.c's */
  int simd_max;  /* 0: SIMD where built (SSE2 on x86-64); -1: none (tests:
                    the bytes must not change) */
  /* Written back by stoker_decode, for tests and benchmarks. */
  int scale_m;      /* the DCT scale used, in eighths */
  int rows_decoded; /* scanlines read (not skipped) */
  int cols_decoded; /* width of each scanline read */
  int simd_used;    /* 0 none, 1 SSE2 */
  int huff_used;    /* 1: huff.c decoded the entropy-coded data */
} stoker_job;

typedef struct stoker_turbo stoker_turbo;

/* stoker_new returns fresh scratch or NULL when out of memory. */
stoker_turbo *stoker_new(void);
/* stoker_free frees everything stoker_new and stoker_decode allocated. */
void stoker_free(stoker_turbo *t);
stoker_job *stoker_job_of(stoker_turbo *t);
/* stoker_msg is the message of the last failed decode. */
const char *stoker_msg(stoker_turbo *t);
/* stoker_decode decodes data per the job into out (3*out_w*out_h bytes). */
int stoker_decode(stoker_turbo *t, const unsigned char *data, size_t len,
                  unsigned char *out);

#endif
