/* The libjpeg-turbo fast path: one call decodes a JPEG's needed region, at a
 * DCT scale when allowed, and resamples, flips and packs it into the caller's
 * buffer. See fast_cgo.go for the Go side, turbo.c (the JPEG decode) and
 * resize.c (the resampler and the row API) for the details. */
#ifndef STOKER_TURBO_H
#define STOKER_TURBO_H

#include <stddef.h>

/* Result codes of stoker_decode; they map onto the package's sentinels. */
enum {
  STOKER_OK = 0,
  STOKER_CORRUPT = 1,
  STOKER_TOO_LARGE = 2,
  STOKER_UNSUPPORTED = 3,
  /* The decoder index given disagreed with the file as it was decoded:
   * the output is not to be trusted; decode again without it. */
  STOKER_INDEX_BAD = 4
};

/* What stoker_decode did with the decoder index (job.ix_state). */
enum {
  STOKER_IX_NONE = 0,  /* none asked for, or the file cannot have one */
  STOKER_IX_FRESH = 1, /* none given: an empty one, filled as decoded */
  STOKER_IX_USED = 2,  /* the one given, extended as decoded */
  STOKER_IX_STALE = 3, /* the one given does not fit the file: a fresh one */
  STOKER_IX_BAD = 4    /* the one given has a checkpoint that cannot be
                          right (huff.c): a fresh one */
};

/* DCT scaling modes (the Go side maps DCTScaling onto these). */
enum { STOKER_SCALE_POW2 = 0, STOKER_SCALE_OFF = 1, STOKER_SCALE_ANY = 2 };

/* Interpolations: pipeline.Interpolation's values. */
enum { STOKER_BILINEAR = 0, STOKER_NEAREST = 1, STOKER_BICUBIC = 2 };

/* One axis of a resize as torch does it: the source pixels [base, base+in)
 * are resized to out pixels, of which [off, off + out_w or out_h) are
 * kept. */
typedef struct {
  int base, in, out, off;
} stoker_span;

/* The most views one decode makes (pipeline.MaxViews). */
#define STOKER_MAX_VIEWS 32

/* One output of a decode: a view's geometry, in source pixels (the box
 * maps onto the output; the filter's support is clipped to
 * [x0,x1) x [y0,y1)), and where its 3*out_w*out_h bytes go in the output
 * buffer. */
typedef struct {
  double bx, by, bw, bh;
  int x0, y0, x1, y1;
  int out_w, out_h;
  /* The filter (STOKER_BILINEAR ...) and whether it widens when
   * downscaling: torch's uint8 kernel on the spans sx, sy, never at a DCT
   * scale unless antialiased (the box above then chooses the scale). */
  int interp, antialias;
  stoker_span sx, sy;
  int flip; /* mirror x */
  long long out_off;
} stoker_view;

/* One image's job. Go fills it in (it lives in C memory, inside the scratch)
 * before each stoker_decode call, so that the call passes no Go struct. One
 * decode makes nviews views of the image: the union of their regions is
 * decoded once, at the coarsest DCT scale that serves every view, and each
 * view resampled from the same decoded rows. */
typedef struct {
  int nviews; /* 1..STOKER_MAX_VIEWS */
  stoker_view views[STOKER_MAX_VIEWS];
  int src_w, src_h, comps; /* what the Go header parser saw */
  int hwc;  /* 1: interleaved HWC, 0: planar CHW */
  int scaling;
  int max_scans;
  long long max_memory; /* the most libjpeg's own allocations may hold,
                           all counted (memlim.c); 0: no limit */
  long long out_len;    /* the output buffer's bytes: each view's
                           3*out_w*out_h at out_off must fit in them */
  /* Tuning and test knobs; all 0 by default. */
  int fancy;     /* do_fancy_upsampling = TRUE (triangle chroma upsampling) */
  int ifast;     /* dct_method = JDCT_IFAST */
  int no_region; /* decode whole rows from the top, no crop or skip (tests) */
  int libjpeg_huff; /* use libjpeg's own Huffman decoder, not huff.c's */
  int simd_max;  /* 0: the default level (stoker_simd_default; the best
                    for a job of 3 views or more, turbo.c); n > 0:
                    level n, at most the CPU's best; -1: none (tests: the
                    bytes must not change) */
  int index;     /* 1: keep a decoder index (baseline files through huff.c) */
  int ix_px;     /* checkpoint spacing in pixels; 0: the default */
  /* The file's coefficient cache (a stoker_coefs, huff.h; NULL: none) and
   * the bytes this decode may add to it. */
  void *coefs;
  long long coefs_room;
  /* 1: the scan has no entropy-coded data; every MCU used must come from
   * coefs (a progressive file's transcode: transcode.go). */
  int coefs_only;
  /* Written back by stoker_decode, for tests and benchmarks. */
  int scale_m;      /* the DCT scale used, in eighths */
  int rows_decoded; /* scanlines read (not skipped) */
  int cols_decoded; /* width of each scanline read */
  int simd_used;    /* 0 none, 1 SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512, 5 VBMI+VNNI (turbo.c) */
  int row_skew;     /* where decoded rows start, modulo 64 bytes */
  int huff_used;    /* 1: huff.c decoded the entropy-coded data */
  int ix_state;     /* STOKER_IX_* */
  int ix_changed;   /* the index gained checkpoints: copy it out */
  int ix_lied;      /* a checkpoint not sure disagreed with the decoder
                       (the output is right: decoding starts only at sure
                       checkpoints; the index given is not to be kept) */
  long long ix_bytes; /* its size (stoker_index_copy) */
  long long mcus_total, mcus_decoded; /* MCUs in the scan, entropy-decoded */
  int ck_seeks, rst_seeks; /* jumps to a checkpoint, to a restart marker */
  long long mcus_wanted;    /* MCUs libjpeg inverse-transformed */
  long long coefs_hits;     /* of those, copied from the coefficient cache */
  long long coefs_stored;   /* MCUs stored in the coefficient cache */
  /* A progressive file (phuff.c): its scans decoded by phuff.c (else
   * libjpeg's decoder), their MCUs in all and those entropy-decoded (the
   * rest lie below the views' last rows). */
  int prog_used;
  long long prog_total, prog_decoded;
  /* The most libjpeg's own allocations held at once (memlim.c's count). */
  long long lib_peak;
} stoker_job;

typedef struct stoker_turbo stoker_turbo;

/* stoker_new returns fresh scratch or NULL when out of memory. */
stoker_turbo *stoker_new(void);
/* stoker_free frees everything stoker_new and stoker_decode allocated. */
void stoker_free(stoker_turbo *t);
stoker_job *stoker_job_of(stoker_turbo *t);
/* stoker_msg is the message of the last failed decode. */
const char *stoker_msg(stoker_turbo *t);
/* stoker_decode decodes data per the job into out: each view's
 * 3*out_w*out_h bytes at its out_off.
 * With job.index, ix (ix_len bytes, huff.c's layout; NULL for none) is
 * the file's decoder index from an earlier decode: decoding starts at its
 * checkpoints, and adds the ones it passes to a copy, which
 * stoker_index_copy returns when job.ix_changed. */
int stoker_decode(stoker_turbo *t, const unsigned char *data, size_t len,
                  unsigned char *out, const unsigned char *ix, size_t ix_len,
                  const volatile int *stop);
/* stop (NULL: none), given to stoker_decode, stoker_decode_png and
 * stoker_decode_webp, is the sample's flag that its work was abandoned:
 * polled while scans are read (once an iMCU row), once a row decoded or
 * resampled, and when set the call returns early with an error, its output
 * half made. It is kept only for the call. stoker_stopped says whether the
 * current call's flag is set (formats.c, pngrows.c poll it). */
int stoker_stopped(const stoker_turbo *t);
/* stoker_simd_best is the best SIMD level of this CPU (a job's simd_max
 * may ask for any level up to it); stoker_simd_default the level
 * stoker_decode uses by default (stoker_job.simd_used): the best, but AVX2
 * (3) at most on Intel CPUs (passes.c). */
int stoker_simd_best(void);
int stoker_simd_default(void);
/* stoker_resampler_bytes is what t's resampler keeps between decodes,
 * grown to the largest asked of it: each view's filters (their taps and
 * weights) and horizontally resampled rows, the decoded rows and the
 * vertical pass's; what the memory budget counts of t
 * (pipeline/header.go). */
long long stoker_resampler_bytes(const stoker_turbo *t);
/* stoker_index_copy copies the last decode's index (job.ix_bytes) to dst
 * and returns how many of its known checkpoints are not sure. */
unsigned stoker_index_copy(stoker_turbo *t, unsigned char *dst);

/* The rows a job's views read from an image decoded at full scale
 * (stoker_rows_begin): columns [x0, x1) and rows [y0, y1), and the bytes
 * of readable slack each row given must have after column x1's pixel
 * (taps past a support have zero weights but are read). */
typedef struct {
  int x0, x1, y0, y1;
  int slack;
} stoker_need;

/* The resampler for images decoded row by row at full scale (formats.c):
 * stoker_rows_begin readies t for its job's views over rows of gray
 * (1 byte) or RGBX (4 bytes) pixels and says what they need; then each row
 * y in [y0, y1), in order, goes to stoker_rows_put from its column x0;
 * stoker_rows_end writes the views into out. begin returns STOKER_OK or
 * an error code (stoker_msg); stoker_fail_msg sets the message of a
 * decode that failed outside them. */
int stoker_rows_begin(stoker_turbo *t, int gray, stoker_need *nd);
void stoker_rows_put(stoker_turbo *t, int y, const unsigned char *row);
void stoker_rows_end(stoker_turbo *t, unsigned char *out);
void stoker_fail_msg(stoker_turbo *t, int code, const char *msg);

/* stoker_decode_png and stoker_decode_webp decode a PNG through libpng or
 * a WebP through libwebp per the job into out, as stoker_decode does a
 * JPEG: torchvision's decode_image pixels (ImageReadMode.RGB: alpha
 * dropped, gray and palettes expanded, 16 bits cut to their high byte),
 * only the rows (and, for WebP, the columns) the views read. */
int stoker_decode_png(stoker_turbo *t, const unsigned char *data, size_t len, unsigned char *out,
                      const volatile int *stop);
int stoker_decode_webp(stoker_turbo *t, const unsigned char *data, size_t len, unsigned char *out,
                       const volatile int *stop);
/* stoker_set_stop sets the flag stoker_stopped reads (formats.c, for the
 * length of one call; NULL after it). */
void stoker_set_stop(stoker_turbo *t, const volatile int *stop);
/* A PNG decode's own heap, counted and capped (formats.c): libpng's
 * allocations (its structs, rows, zlib's state and window, chunks' data,
 * through png_create_read_struct_2's allocator), pngrows.c's (its rows,
 * zlib's through zalloc) and the rows formats.c keeps. Each block is
 * counted with a 16-byte header before malloc runs; one that would take
 * the bytes held past limit (> 0) is refused (NULL) and over set to what
 * they would have been. */
typedef struct {
  long long limit, held, peak, over;
} stoker_heap;
void stoker_heap_begin(stoker_heap *m, long long limit);
void *stoker_heap_alloc(stoker_heap *m, size_t n);
void *stoker_heap_calloc(stoker_heap *m, size_t n);
void stoker_heap_free(stoker_heap *m, void *p);
/* stoker_heap_fail sets t's error for a block m refused (STOKER_TOO_LARGE,
 * naming what and the bytes) and returns STOKER_TOO_LARGE. */
int stoker_heap_fail(stoker_turbo *t, const stoker_heap *m, const char *what);
/* stoker_png_rows is stoker_decode_png for 8-bit, non-interlaced gray,
 * gray+alpha, RGB and RGBA without libpng (pngrows.c), its memory taken
 * from hp; it returns -1, having done nothing, for the files libpng is to
 * decode. */
int stoker_png_rows(stoker_turbo *t, const unsigned char *data, size_t len, unsigned char *out,
                    stoker_heap *hp);
/* stoker_canvas resizes a RandomZoomOut's canvas per the job's one view
 * (formats.c; detgeom.go's resizeCanvas): the view's source, src_w x
 * src_h, is a crop of a canvas of fill (3 bytes) on which the w x h image
 * src (3 bytes a pixel, interleaved when src_hwc, else three planes) lies
 * at (left, top) of the crop, the crop's columns reversed first when
 * mirror. Only the rows and columns the view reads are made. */
int stoker_canvas(stoker_turbo *t, const unsigned char *src, int w, int h, int src_hwc, int left,
                  int top, int mirror, const unsigned char *fill, unsigned char *out);

#endif
