/* The libjpeg-turbo fast path of package pipeline/codec.
 *
 * stoker_decode does one image in one call: it reads the header, picks a DCT
 * scale, decodes only the columns and rows the resampling filter can touch
 * (jpeg_crop_scanline, jpeg_skip_scanlines, and an abort after the last
 * needed row), resamples each decoded row horizontally as it arrives, then
 * resamples vertically into the caller's buffer in CHW or HWC order. The
 * horizontal flip is folded into the horizontal filter's coefficient table.
 * This file is the JPEG decode; the filters, the vertical pass and the row
 * API are resize.c's, the passes passes.c's (their shared state:
 * turbo_state.h).
 *
 * Resampling is torch's uint8 resize kernels (aten's UpSampleKernel.cpp and
 * UpSampleKernelAVXAntialias.h, which torchvision's resize and resized_crop
 * run on uint8 tensors): for every filter (nearest, bilinear, bicubic, with
 * or without antialias) stoker_torch_coeffs computes torch's tap ranges and
 * weights, in the same order of double operations, and puts them in int16
 * fixed point with torch's precision (14 to 22 fractional bits, the most
 * that keep the axis' largest weight under 2^15; each axis its own). As
 * torch does, the horizontal pass comes first and is rounded and clamped to
 * 8 bits, then the vertical pass reads those rows; each sum starts at half
 * and is shifted back arithmetically. So the bytes are torch's, at full
 * scale. The vertical pass uses SSE2 where the compiler targets it (every
 * x86-64), AVX2 and AVX-512 where the CPU has them, the horizontal pass
 * SSSE3, AVX2 and AVX-512, and plain C otherwise, with identical results.
 *
 * Chroma is upsampled as libjpeg does by default ("fancy", triangle), which
 * is what PIL and so torchvision get: stoker's output then matches
 * torchvision's within a few hundredths of a level. The job can ask for
 * replication (libjpeg's merged upsampler, what image/jpeg does), which is
 * a little faster and closer to the pure-Go reference path.
 *
 * libjpeg errors longjmp back to stoker_decode, never across Go frames. A
 * corrupt-data warning is an error: decoding stops at the first one. */
/* No fused multiply-adds: a sample must be the same bytes on every machine,
 * and a fused a*b+c rounds once where the C source rounds twice. GCC fuses
 * by default in GNU C mode wherever the target has the instructions (arm64,
 * or x86-64 built with -mfma), clang within an expression. The flag for
 * this, -ffp-contract=off, is not on cgo's allowlist of #cgo CFLAGS (the
 * build refuses it), so these pragmas say it here, before anything is
 * included. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "turbo_state.h"

#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#if JPEG_LIB_VERSION >= 70
#define MIN_DCT_V_SCALED(ci) ((ci)->min_DCT_v_scaled_size)
#define MIN_DCT_H_SCALED(ci) ((ci)->min_DCT_h_scaled_size)
#else
#define MIN_DCT_V_SCALED(ci) ((ci)->min_DCT_scaled_size)
#define MIN_DCT_H_SCALED(ci) ((ci)->min_DCT_scaled_size)
#endif

/* The decoder index's default checkpoint spacing, in source pixels: every
 * 4th MCU of 4:2:0 and 4:2:2, every 8th of 4:4:4 and gray. Measured in
 * BENCHMARKS.md against row starts alone and other spacings. */
#define STOKER_IX_PX 64

/* A job of this many views or more runs at the CPU's best SIMD level,
 * AVX-512 included on Intel, where fewer take stoker_simd_default's AVX2:
 * its resampling outweighs its decode. Measured on a Sapphire-Rapids-class
 * Xeon (BENCHMARKS.md): one view (imagenet-train) and two (simclr) faster
 * per CPU-second with AVX2, ten (dinov2) with AVX-512. */
#define STOKER_SIMD_VIEWS 3

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <tmmintrin.h>
#include <immintrin.h>
#endif


int stoker_stopped(const stoker_turbo *t) { return t->stop && *t->stop; }

void stoker_set_stop(stoker_turbo *t, const volatile int *stop) { t->stop = stop; }

void stoker_fail(stoker_turbo *t, int code, const char *msg) {
  t->code = code;
  snprintf(t->msg, sizeof t->msg, "%s", msg);
  longjmp(t->jb, 1);
}

static int code_of(int msg_code) {
  switch (msg_code) {
  case JERR_OUT_OF_MEMORY:
  case JERR_NO_BACKING_STORE:
  case JERR_IMAGE_TOO_BIG:
    return STOKER_TOO_LARGE;
  case JERR_SOF_UNSUPPORTED:
  case JERR_NOTIMPL:
  case JERR_NOT_COMPILED:
  case JERR_CONVERSION_NOTIMPL:
    return STOKER_UNSUPPORTED;
  default:
    return STOKER_CORRUPT;
  }
}

static void on_error(j_common_ptr c) {
  stoker_turbo *t = (stoker_turbo *)c;
  char buf[JMSG_LENGTH_MAX + 96];
  if (t->ml.over)
    stoker_memlim_msg(&t->ml, buf, sizeof buf);
  else
    (*c->err->format_message)(c, buf);
  t->code = code_of(c->err->msg_code);
  snprintf(t->msg, sizeof t->msg, "jpeg: %s", buf);
  longjmp(t->jb, 1);
}

/* Level -1 is a corrupt-data warning: stop there. Levels >= 0 are traces. */
static void on_emit(j_common_ptr c, int level) {
  stoker_turbo *t = (stoker_turbo *)c;
  char buf[JMSG_LENGTH_MAX];
  if (level >= 0)
    return;
  (*c->err->format_message)(c, buf);
  t->code = STOKER_CORRUPT;
  snprintf(t->msg, sizeof t->msg, "jpeg: %s", buf);
  longjmp(t->jb, 1);
}

static void on_output(j_common_ptr c) { (void)c; }

/* Called once per iMCU row of every scan while a multi-scan file is read,
 * and once per scanline after: refuse progressive files over the scan cap
 * as soon as the first scan over it starts. */
static void on_progress(j_common_ptr c) {
  stoker_turbo *t = (stoker_turbo *)c;
  j_decompress_ptr d = (j_decompress_ptr)c;
  if (stoker_stopped(t))
    stoker_fail(t, STOKER_CORRUPT, "jpeg: the sample's work was abandoned");
  if (d->progressive_mode && d->input_scan_number > t->max_scans) {
    t->code = STOKER_TOO_LARGE;
    snprintf(t->msg, sizeof t->msg,
             "jpeg: progressive jpeg has more than %d scans, over the cap",
             t->max_scans);
    longjmp(t->jb, 1);
  }
  stoker_phuff_hook(&t->ph, d);
}

stoker_turbo *stoker_new(void) {
  stoker_turbo *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->cinfo.err = jpeg_std_error(&t->jerr);
  t->jerr.error_exit = on_error;
  t->jerr.emit_message = on_emit;
  t->jerr.output_message = on_output;
  if (setjmp(t->jb)) {
    free(t);
    return NULL;
  }
  jpeg_create_decompress(&t->cinfo);
  stoker_memlim_install(&t->ml, (j_common_ptr)&t->cinfo);
  t->prog.progress_monitor = on_progress;
  t->cinfo.progress = &t->prog;
  return t;
}

static void free_axis(axis *a) {
  free(a->start);
  free(a->k);
  free(a->kv);
  free(a->kv4buf);
  free(a->px4buf);
  free(a->w);
}

static long long axis_bytes(const axis *a) {
  return (long long)(a->s_cap * sizeof(int) + a->k_cap * sizeof(int16_t) + a->kv_cap * sizeof(int32_t) +
                     a->kv4_cap * sizeof(int32_t) + a->px4_cap + a->w_cap * sizeof(double));
}

long long stoker_resampler_bytes(const stoker_turbo *t) {
  long long n = (long long)(t->row_cap + t->taps_cap * sizeof *t->taps + t->line_cap);
  int v;
  for (v = 0; v < STOKER_MAX_VIEWS; v++)
    n += (long long)t->vs[v].mid_cap + axis_bytes(&t->vs[v].ax) + axis_bytes(&t->vs[v].ay);
  return n;
}

void stoker_free(stoker_turbo *t) {
  int v;
  if (!t)
    return;
  jpeg_destroy_decompress(&t->cinfo);
  for (v = 0; v < STOKER_MAX_VIEWS; v++) {
    free_axis(&t->vs[v].ax);
    free_axis(&t->vs[v].ay);
    free(t->vs[v].mid);
  }
  free(t->row);
  free(t->taps);
  free(t->line);
  free(t->ixbuf);
  stoker_coefbuf_free(&t->cbuf);
  free(t);
}

stoker_job *stoker_job_of(stoker_turbo *t) { return &t->job; }

const char *stoker_msg(stoker_turbo *t) { return t->msg; }

/* choose_scale returns the DCT scale in eighths: the smallest allowed one
 * at which the box still covers the output on both sides. A scaled IDCT
 * averages pixels: only an antialiased filter may follow it. */
static int choose_scale(const stoker_job *jb, const stoker_view *j) {
  static const int pow2[] = {1, 2, 4}, any[] = {1, 2, 3, 4, 5, 6, 7};
  const int *m;
  int n, i;
  if (j->interp == STOKER_NEAREST || !j->antialias)
    return 8;
  switch (jb->scaling) {
  case STOKER_SCALE_POW2:
    m = pow2, n = 3;
    break;
  case STOKER_SCALE_ANY:
    m = any, n = 7;
    break;
  default:
    return 8;
  }
  for (i = 0; i < n; i++)
    if (j->bw * m[i] / 8 >= j->out_w && j->bh * m[i] / 8 >= j->out_h)
      return m[i];
  return 8;
}

/* has_eoi reports whether an EOI marker follows the first scan's header.
 * Entropy-coded data never holds 0xFF 0xD9, so a file without one was cut
 * short. Region decoding stops early and would miss that otherwise; this
 * keeps a truncated file an error whatever its crop. Trailing bytes after
 * the EOI (some cameras append data) are allowed. */
static int has_eoi(const uint8_t *p, size_t n) {
  size_t i;
  for (i = n; i >= 2; i--)
    if (p[i - 1] == 0xD9 && p[i - 2] == 0xFF)
      return 1;
  return 0;
}

/* ix_open gives huff.c's decoder the file's index: a copy of the one
 * given if it fits the file, a fresh one otherwise. Called after
 * stoker_huff_install succeeded. */
static void ix_open(stoker_turbo *t, const uint8_t *data, size_t len,
                    const uint8_t *ix, size_t ix_len) {
  j_decompress_ptr ci = &t->cinfo;
  stoker_job *jb = &t->job;
  stoker_hix *h = &t->hix;
  size_t off = (size_t)(t->huff.scan - data), size;
  int mcu_px = ci->comps_in_scan == 1 ? 8 : 8 * ci->max_h_samp_factor;
  int px = jb->ix_px > 0 ? jb->ix_px : STOKER_IX_PX;
  int c, v = 0;
  /* positions are 31-bit, in bits (the top bit is HIX_SURE) */
  if (off > len || len - off > 0x0FFFFFFF)
    return;
  size = hix_geometry(h, ci, px / mcu_px);
  if (!size)
    return;
  /* The DC predictors an 8-bit scan can have: a DC coefficient is at most
   * 1024 in magnitude before quantization (huff.c). */
  for (c = 0; c < h->ncomp; c++) {
    JQUANT_TBL *q = ci->cur_comp_info[c]->quant_table;
    int qv = q ? q->quantval[0] : 0;
    h->dcmax[c] = qv > 0 ? 1024 / qv + 1 : INT16_MAX;
  }
  stoker_grow(t, (void **)&t->ixbuf, &t->ix_cap, size, 1);
  t->ix_len = size;
  if (ix)
    v = hix_valid(ix, ix_len, h, (int)ci->restart_interval, (uint32_t)off,
                  (uint32_t)(len - off), t->huff.scan, ci->blocks_in_MCU);
  if (v > 0) {
    memcpy(t->ixbuf, ix, size);
    jb->ix_state = STOKER_IX_USED;
  } else {
    memset(t->ixbuf, 0, size);
    hix_header(t->ixbuf, h, (int)ci->restart_interval, (uint32_t)off,
               (uint32_t)(len - off), 0);
    jb->ix_state = !ix ? STOKER_IX_FRESH : v < 0 ? STOKER_IX_BAD : STOKER_IX_STALE;
  }
  hix_attach(h, t->ixbuf);
  t->huff.ix = h;
}

unsigned stoker_index_copy(stoker_turbo *t, unsigned char *dst) {
  /* the known count in the header, for whoever reads the blob */
  uint32_t unsure, known = hix_known(&t->hix, &unsure);
  memcpy(t->ixbuf + 20, &known, 4);
  memcpy(dst, t->ixbuf, t->ix_len);
  return unsure;
}

/* What a decode works out as it goes, from one step to the next. */
typedef struct {
  int gray, bpp;           /* grayscale; bytes per decoded pixel */
  int m;                   /* the scale: m/8 */
  int ow, oh;              /* the scaled image's size */
  int ux0, ux1, uy0, uy1;  /* the scaled pixels the views' taps use */
  JDIMENSION xoff;         /* the first decoded column */
  int nrows;               /* rows read per call */
  size_t stride;           /* between them */
  uint8_t *rowbase;        /* the first */
} decode_geom;

/* begin_decode readies t for the job: its SIMD level (0 none, 1 SSE2: the
 * vertical pass, 2 SSSE3: the horizontal pass and the coefficient packing
 * too, 3 AVX2: both passes, two outputs or 32 bytes a step, 4 AVX-512:
 * four outputs or 64 bytes, 5 AVX-512 VBMI and VNNI: the horizontal pass
 * with one load and a byte permutation per pair of taps, both passes
 * multiplying and adding in one instruction; each measured faster than
 * the level below, BENCHMARKS.md, pass for pass; the default is AVX2 on
 * Intel, stoker_simd_default, but the best for a job of STOKER_SIMD_VIEWS
 * views or more), and its reports zeroed. */
void stoker_begin_decode(stoker_turbo *t) {
  stoker_job *jb = &t->job;
  int best = stoker_simd_best(), simd = jb->nviews >= STOKER_SIMD_VIEWS ? best : stoker_simd_default();
  if (jb->simd_max < 0)
    simd = 0;
  else if (jb->simd_max > 0)
    simd = jb->simd_max < best ? jb->simd_max : best;
  t->simd = jb->simd_used = simd;
  t->msg[0] = 0;
  t->ml.over = 0;
  jb->lib_peak = 0;
  t->code = STOKER_CORRUPT;
  t->max_scans = jb->max_scans;
  jb->scale_m = 8;
  jb->row_skew = 0;
  jb->rows_decoded = jb->cols_decoded = 0;
  jb->ix_state = jb->ix_changed = 0;
  jb->ix_bytes = jb->mcus_total = jb->mcus_decoded = 0;
  jb->ck_seeks = jb->rst_seeks = jb->ix_lied = 0;
  jb->mcus_wanted = jb->coefs_hits = jb->coefs_stored = 0;
  t->ix_len = 0;
  t->huff.ix = NULL;
}

/* open_image checks the job's geometry and the file's header against it,
 * and starts decompressing at the scale that serves every view: the
 * finest any one of them needs. */
static void open_image(stoker_turbo *t, const unsigned char *data, size_t len,
                       decode_geom *g) {
  j_decompress_ptr ci = &t->cinfo;
  stoker_job *jb = &t->job;
  size_t pos;
  int v;
  if (jb->nviews < 1 || jb->nviews > STOKER_MAX_VIEWS)
    stoker_fail(t, STOKER_UNSUPPORTED, "jpeg: bad view count");
  for (v = 0; v < jb->nviews; v++)
    if (!stoker_view_ok(jb, &jb->views[v]))
      stoker_fail(t, STOKER_UNSUPPORTED, "jpeg: bad geometry");
  /* Every allocation counted against the job's limit (memlim.c); libjpeg's
   * own cap on its virtual arrays a little above it (it counts its pools'
   * slop), a second guard. */
  stoker_memlim_begin(&t->ml, jb->max_memory);
  ci->mem->max_memory_to_use = jb->max_memory > 0 ? (long)jb->max_memory + (1L << 20) : 0;
  jpeg_mem_src(ci, data, (unsigned long)len);
  jpeg_read_header(ci, TRUE);
  if ((int)ci->image_width != jb->src_w || (int)ci->image_height != jb->src_h ||
      ci->num_components != jb->comps)
    stoker_fail(t, STOKER_CORRUPT, "jpeg: frame header disagrees with the parsed header");
  pos = (size_t)(ci->src->next_input_byte - data);
  if (pos > len || !has_eoi(data + pos, len - pos))
    stoker_fail(t, STOKER_CORRUPT,
         "jpeg: truncated: no end-of-image marker after the scan data");

  /* Color decodes to RGBX: 4-byte pixels suit the SIMD horizontal pass. */
  g->gray = ci->num_components == 1;
  g->bpp = g->gray ? 1 : 4;
  ci->out_color_space = g->gray ? JCS_GRAYSCALE : JCS_EXT_RGBX;
  g->m = 1;
  for (v = 0; v < jb->nviews; v++) {
    int m = choose_scale(jb, &jb->views[v]);
    if (m > g->m)
      g->m = m;
  }
  ci->scale_num = (unsigned int)g->m;
  ci->scale_denom = 8;
  ci->dct_method = jb->ifast ? JDCT_IFAST : JDCT_ISLOW;
  ci->do_fancy_upsampling = jb->fancy ? TRUE : FALSE;
  stoker_phuff_arm(&t->ph, ci, jb);
  jpeg_start_decompress(ci);
}

/* attach_huff puts huff.c's entropy decoder in libjpeg's place (unless the
 * job asks for libjpeg's), with the job's decoder index, cache, coefs_only. */
static void attach_huff(stoker_turbo *t, const unsigned char *data, size_t len,
                        const unsigned char *ix, size_t ix_len) {
  j_decompress_ptr ci = &t->cinfo;
  stoker_job *jb = &t->job;
  t->huff.coefs_only = jb->coefs_only; /* kept by stoker_huff_install */
  jb->huff_used = !jb->libjpeg_huff && stoker_huff_install(&t->huff, ci);
  if (jb->huff_used && jb->index)
    ix_open(t, data, len, ix, ix_len);
  if (jb->huff_used && jb->coefs) {
    size_t room = jb->coefs_room > 0 ? (size_t)jb->coefs_room : 0;
    if (coefs_attach((stoker_coefs *)jb->coefs, &t->cbuf,
                     (long)ci->MCUs_per_row * (long)ci->MCU_rows_in_scan,
                     ci->blocks_in_MCU, t->simd, &room)) {
      t->huff.cc = (stoker_coefs *)jb->coefs;
      t->huff.cb = &t->cbuf;
      t->huff.cc_room = room;
    }
  }
}

/* crop_columns works out the job in scaled pixels, the resampling taps,
 * and the columns to decode: libjpeg's crop (unless the job asks for whole
 * rows) and, with huff.c, the MCU columns it entropy-decodes. */
static void crop_columns(stoker_turbo *t, decode_geom *g) {
  j_decompress_ptr ci = &t->cinfo;
  stoker_job *jb = &t->job;
  int m = g->m, i, v;
  JDIMENSION w;
  double f;
  jb->scale_m = m;
  g->ow = (int)ci->output_width;
  g->oh = (int)ci->output_height;
  if (ci->output_components != g->bpp)
    stoker_fail(t, STOKER_UNSUPPORTED, "jpeg: unexpected output components");

  /* The views in scaled pixels. A scaled pixel j covers source pixels
   * [j*8/m, (j+1)*8/m): the scale is exactly m/8 (output_width rounds the
   * last, partial block up). */
  f = m / 8.0;
  g->ux0 = g->uy0 = INT_MAX;
  g->ux1 = g->uy1 = INT_MIN;
  for (v = 0; v < jb->nviews; v++) {
    const stoker_view *vw = &jb->views[v];
    vstate *s = &t->vs[v];
    int cx0 = (int)floor(vw->x0 * f), cx1 = (int)ceil(vw->x1 * f);
    int cy0 = (int)floor(vw->y0 * f), cy1 = (int)ceil(vw->y1 * f);
    if (cx1 > g->ow)
      cx1 = g->ow;
    if (cy1 > g->oh)
      cy1 = g->oh;
    if (cx0 >= cx1 || cy0 >= cy1)
      stoker_fail(t, STOKER_UNSUPPORTED, "jpeg: empty clip rectangle");
    stoker_torch_coeffs(t, &s->ax, &vw->sx, f, vw->out_w, vw->interp, vw->antialias,
                 cx0, cx1, vw->flip, &s->ux0, &s->ux1);
    stoker_torch_coeffs(t, &s->ay, &vw->sy, f, vw->out_h, vw->interp, vw->antialias,
                 cy0, cy1, 0, &s->uy0, &s->uy1);
    stoker_pack_quads(t, &s->ax, vw->out_w);
    if (s->ux0 < g->ux0)
      g->ux0 = s->ux0;
    if (s->ux1 > g->ux1)
      g->ux1 = s->ux1;
    if (s->uy0 < g->uy0)
      g->uy0 = s->uy0;
    if (s->uy1 > g->uy1)
      g->uy1 = s->uy1;
  }

  /* Columns: one spare pixel each side, so that the pixels next to the crop
   * edge (where fancy upsampling lacks its neighbour) go unused, and at
   * least 16 in all: libjpeg's fancy upsampling of a crop one chroma
   * sample wide gives other pixels than a whole row's (seen on a crop of
   * column 0 alone). The library widens the crop to the left to an iMCU
   * boundary. */
  g->xoff = 0;
  w = (JDIMENSION)g->ow;
  if (!jb->no_region) {
    int rx0 = g->ux0 > 0 ? g->ux0 - 1 : 0, rx1 = g->ux1 < g->ow ? g->ux1 + 1 : g->ow;
    if (rx1 - rx0 < 16) {
      rx1 = rx0 + 16 < g->ow ? rx0 + 16 : g->ow;
      rx0 = rx1 - 16 > 0 ? rx1 - 16 : 0;
    }
    if (rx1 - rx0 < g->ow) {
      g->xoff = (JDIMENSION)rx0;
      w = (JDIMENSION)(rx1 - rx0);
      jpeg_crop_scanline(ci, &g->xoff, &w);
    }
  }
  /* Each view's taps from its own first column and row: the decoded
   * row's first pixel and its own first mid row. */
  for (v = 0; v < jb->nviews; v++) {
    vstate *s = &t->vs[v];
    for (i = 0; i < jb->views[v].out_w; i++)
      s->ax.start[i] -= (int)g->xoff;
    for (i = 0; i < jb->views[v].out_h; i++)
      s->ay.start[i] -= s->uy0;
  }
  jb->cols_decoded = (int)ci->output_width;
  /* The MCU columns libjpeg inverse-transforms (jpeg_crop_scanline's
   * first_iMCU_col and last_iMCU_col, which it keeps where the API does
   * not show them): huff.c's decoder skips the others. */
  if (jb->huff_used && !jb->no_region) {
    int align = MIN_DCT_H_SCALED(ci) *
                (ci->comps_in_scan == 1 && ci->num_components == 1 ? 1 : ci->max_h_samp_factor);
    int fc = 0, lc = (int)ci->MCUs_per_row - 1;
    if ((int)ci->output_width < g->ow) {
      fc = (int)g->xoff / align;
      lc = ((int)g->xoff + (int)ci->output_width + align - 1) / align - 1;
    }
    stoker_huff_lazy(&t->huff, fc, lc);
  }
}

/* row_buffers grows t's buffers for the decoded rows, each view's
 * horizontal pass output (its mid rows) and the vertical pass's taps. */
static void row_buffers(stoker_turbo *t, decode_geom *g) {
  j_decompress_ptr ci = &t->cinfo;
  stoker_job *jb = &t->job;
  int v, np = 1, vnp = 1, wmax = 1;
  for (v = 0; v < jb->nviews; v++) {
    vstate *s = &t->vs[v];
    int w = jb->views[v].out_w, rl = g->gray ? w : 3 * w;
    s->mid_rows = s->uy1 - s->uy0;
    stoker_grow(t, (void **)&s->mid, &s->mid_cap, (size_t)s->mid_rows * rl + 4, 1);
    np = s->ax.np > np ? s->ax.np : np;
    vnp = s->ay.np > vnp ? s->ay.np : vnp;
    wmax = w > wmax ? w : wmax;
  }
  /* Slack: taps past a support read up to 2*np pixels (and an 8-byte load)
   * past the decoded row, hrgbx_vbmi's 64-byte loads 56 bytes more; an
   * interleaved mid row is written 4 bytes at a time. */
  /* Rows are read rec_outbuf_height at a time (2 for h2v2 merged
   * upsampling), so that libjpeg need not copy a spare row per call. */
  g->nrows = ci->rec_outbuf_height < 1 ? 1 : ci->rec_outbuf_height > 4 ? 4 : ci->rec_outbuf_height;
  /* Two at least for colour: libjpeg's fancy h2v2 upsampling makes a row
   * group of two, and one call then converts both (one call a row cost
   * about 1% more instructions a first decode); the VBMI horizontal pass
   * takes the two rows at once. */
  if (!g->gray && g->nrows < 2)
    g->nrows = 2;
  /* Where rows go: libjpeg-turbo's SIMD color conversion stores an output
   * row with non-temporal (cache-bypassing) stores when the row is 16-byte
   * aligned (32 with AVX2), and ends with sfence; the row would then go out
   * to memory just before the horizontal pass reads it back. Rows start 4
   * bytes past a 64-byte boundary, so that they take its ordinary stores
   * and stay in cache (measured in BENCHMARKS.md). */
  {
    size_t slack = (size_t)(2 * np + 2) * g->bpp + 16 + 64;
    size_t used = (size_t)ci->output_width * g->bpp;
    int r;
    g->stride = (used + slack + 63) & ~(size_t)63;
    stoker_grow(t, (void **)&t->row, &t->row_cap, g->stride * (size_t)g->nrows + 64 + 4, 1);
    g->rowbase = (uint8_t *)(((uintptr_t)t->row + 63) & ~(uintptr_t)63) + 4;
    jb->row_skew = (int)((uintptr_t)g->rowbase & 63);
    for (r = 0; r < g->nrows; r++)
      memset(g->rowbase + g->stride * (size_t)r + used, 0, g->stride - used);
  }
  stoker_grow(t, (void **)&t->taps, &t->taps_cap, (size_t)2 * vnp, sizeof(const uint8_t *));
  stoker_grow(t, (void **)&t->line, &t->line_cap, (size_t)wmax, 1);
}

/* read_rows decodes the rows the crop uses and runs the horizontal pass
 * on each: the rows above are skipped, then the rest are read
 * rec_outbuf_height at a time. With fancy upsampling, libjpeg skips to a
 * row inside an iMCU row by skipping the whole iMCU rows above it and
 * decoding (without colour conversion) that row's first lines; to an
 * iMCU row's first line, by decoding the whole iMCU row above it too,
 * whose last chroma row the first line's upsampling needs. So the skip
 * goes to the crop's first row itself: from the rows above an iMCU row
 * that does not start the crop, only the first line of the crop's iMCU
 * row takes them as context, and that line is skipped (TestExactFastRegionExact
 * checks the bytes against decoding whole rows from the top). Without
 * fancy upsampling (the merged upsampler keeps a spare row), whole iMCU
 * rows only. */
static void read_rows(stoker_turbo *t, const decode_geom *g) {
  j_decompress_ptr ci = &t->cinfo;
  stoker_job *jb = &t->job;
  int y, v;
  if (!jb->no_region) {
    int l = ci->max_v_samp_factor * MIN_DCT_V_SCALED(ci);
    JDIMENSION s = (JDIMENSION)((g->uy0 / l) * l);
    if (ci->do_fancy_upsampling)
      s = (JDIMENSION)g->uy0; /* see above */
    if (s > 0 && jpeg_skip_scanlines(ci, s) != s)
      stoker_fail(t, STOKER_CORRUPT, "jpeg: could not skip to the crop");
  }
  while ((y = (int)ci->output_scanline) < g->uy1) {
    JSAMPROW rows[4];
    if (stoker_stopped(t))
      stoker_fail(t, STOKER_CORRUPT, "jpeg: the sample's work was abandoned");
    int r, want = g->uy1 - y < g->nrows ? g->uy1 - y : g->nrows;
    JDIMENSION got;
    for (r = 0; r < want; r++)
      rows[r] = g->rowbase + g->stride * (size_t)r;
    got = jpeg_read_scanlines(ci, rows, (JDIMENSION)want);
    if (got == 0)
      stoker_fail(t, STOKER_CORRUPT, "jpeg: no progress reading scanlines");
    jb->rows_decoded += (int)got;
    for (v = 0; v < jb->nviews; v++) {
      const vstate *s = &t->vs[v];
      int w = jb->views[v].out_w, rl = g->gray ? w : 3 * w, yr = y;
      for (r = 0; r < (int)got; r++, yr++) {
        uint8_t *mid;
        if (yr < s->uy0 || yr >= s->uy1)
          continue;
        mid = s->mid + (size_t)(yr - s->uy0) * rl;
        if (g->gray) {
          hpass_gray(&s->ax, w, rows[r], mid);
        } else if (r + 1 < (int)got && yr + 1 < s->uy1) {
          hpass_rgbx2(&s->ax, w, rows[r], rows[r + 1], mid, mid + rl, !jb->hwc, t->simd);
          r++, yr++;
        } else {
          hpass_rgbx(&s->ax, w, rows[r], mid, !jb->hwc, t->simd);
        }
      }
    }
    y += (int)got;
  }
}

/* end_scan reports what huff.c did, fails a decode whose index or
 * entropy-coded data was bad, and keeps the MCUs stored for the
 * coefficient cache now that the decode has succeeded. */
static void end_scan(stoker_turbo *t) {
  j_decompress_ptr ci = &t->cinfo;
  stoker_job *jb = &t->job;
  if (!jb->huff_used)
    return;
  jb->mcus_total = (long long)ci->MCUs_per_row * ci->MCU_rows_in_scan;
  jb->mcus_decoded = t->huff.decoded;
  jb->ck_seeks = t->huff.ck_seeks;
  jb->rst_seeks = t->huff.rst_seeks;
  jb->mcus_wanted = t->huff.wanted;
  jb->coefs_hits = t->huff.cc_hits;
  jb->coefs_stored = t->huff.cc_stored;
  if (t->huff.ix && t->hix.bad)
    stoker_fail(t, STOKER_INDEX_BAD, "jpeg: the decoder index disagrees with the file");
  if (t->huff.corrupt)
    stoker_fail(t, STOKER_CORRUPT, "jpeg: corrupt or truncated entropy-coded data");
  if (t->huff.ix) {
    jb->ix_lied = t->hix.lied;
    jb->ix_changed = t->hix.changed;
    jb->ix_bytes = (long long)t->ix_len;
  }
  if (t->huff.cc && !coefs_commit(t->huff.cc, &t->cbuf))
    jb->coefs_stored = 0;
}

static int decode_jpeg(stoker_turbo *t, const unsigned char *data, size_t len,
                       unsigned char *out, const unsigned char *ix, size_t ix_len) {
  decode_geom g;
  int v;
  stoker_begin_decode(t);
  /* Every step fails by longjmp back here (fail), with t->code set. */
  if (setjmp(t->jb)) {
    t->job.lib_peak = t->ml.peak;
    jpeg_abort_decompress(&t->cinfo);
    return t->code;
  }
  open_image(t, data, len, &g);
  attach_huff(t, data, len, ix, ix_len);
  crop_columns(t, &g);
  row_buffers(t, &g);
  read_rows(t, &g);
  end_scan(t);
  t->job.lib_peak = t->ml.peak;
  jpeg_abort_decompress(&t->cinfo);
  for (v = 0; v < t->job.nviews; v++)
    stoker_vpass(t, v, g.gray, out + t->job.views[v].out_off);
  return STOKER_OK;
}

int stoker_decode(stoker_turbo *t, const unsigned char *data, size_t len,
                  unsigned char *out, const unsigned char *ix, size_t ix_len,
                  const volatile int *stop) {
  int rc;
  t->stop = stop;
  rc = decode_jpeg(t, data, len, out, ix, ix_len);
  t->stop = NULL; /* a Go pointer: not kept past the call */
  return rc;
}
