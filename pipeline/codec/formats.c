/* PNG (pngrows.c for the common kinds, libpng for the rest) and WebP
 * through libwebp, for package pipeline's fast path (formats_cgo.go): each
 * decodes only what the job's views read and
 * hands its rows to resize.c's resampler (stoker_rows_*), so that the
 * decoded image is never a whole copy in memory and the rows are resampled
 * while they are in cache.
 *
 * The pixels are torchvision's decode_image(..., ImageReadMode.RGB)'s
 * (torchvision/csrc/io/image/cpu/decode_png.cpp and decode_webp.cpp):
 * - PNG: palettes expanded to RGB, gray of 1, 2 or 4 bits expanded to 8,
 *   alpha (a channel, or a palette's tRNS) dropped, no gamma or color
 *   profile applied; 16-bit samples cut to their high byte (torchvision
 *   returns them as uint16, and ToDtype(uint8, scale=True) shifts them right
 *   by 8). Gray stays one channel here: the resampler spreads it to three.
 *   Rows below the last one a view reads are never decompressed; the rows
 *   above must be (each row's filter reads the one before). Interlaced
 *   files are read whole (their passes cover every row).
 * - WebP: lossy and lossless, with or without alpha (dropped), through
 *   WebPDecode with its fancy chroma upsampling (WebPDecodeRGB's default),
 *   cropped to the views' columns and rows with a two-pixel margin on each
 *   side: libwebp's upsampler treats a crop's first and last rows and
 *   columns as image edges, so the margin keeps those out of every tap,
 *   and the pixels inside are the whole image's. Macroblock rows below the
 *   crop are never decoded. Animated files are refused, as torchvision
 *   refuses them.
 *
 * Errors return a STOKER_* code with a message; libpng's longjmp stays in
 * this file, never crossing Go frames. */
#include "turbo.h"

#include <png.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>

/* ---- A decode's own heap, counted and capped (turbo.h) ---- */

/* Each block carries its size in a 16-byte header (malloc's alignment
 * kept), so that a free knows what to give back. */
enum { HEAP_HDR = 16 };

void stoker_heap_begin(stoker_heap *m, long long limit) {
  m->limit = limit;
  m->held = m->peak = m->over = 0;
}

void *stoker_heap_alloc(stoker_heap *m, size_t n) {
  long long held;
  unsigned char *p;
  if (n > (size_t)1 << 48)
    return NULL;
  held = m->held + (long long)n + HEAP_HDR;
  if (m->limit > 0 && held > m->limit) {
    if (held > m->over)
      m->over = held;
    return NULL;
  }
  p = malloc(n + HEAP_HDR);
  if (!p)
    return NULL;
  memcpy(p, &n, sizeof n);
  m->held = held;
  if (held > m->peak)
    m->peak = held;
  return p + HEAP_HDR;
}

void *stoker_heap_calloc(stoker_heap *m, size_t n) {
  void *p = stoker_heap_alloc(m, n);
  if (p)
    memset(p, 0, n);
  return p;
}

void stoker_heap_free(stoker_heap *m, void *q) {
  unsigned char *p;
  size_t n;
  if (!q)
    return;
  p = (unsigned char *)q - HEAP_HDR;
  memcpy(&n, p, sizeof n);
  m->held -= (long long)n + HEAP_HDR;
  free(p);
}

int stoker_heap_fail(stoker_turbo *t, const stoker_heap *m, const char *what) {
  char msg[200];
  snprintf(msg, sizeof msg,
           "%s: the decoder's own memory for the image would reach %lld bytes, over the %lld reserved "
           "for it from its header",
           what, m->over, m->limit);
  stoker_fail_msg(t, STOKER_TOO_LARGE, msg);
  return STOKER_TOO_LARGE;
}

/* ---- PNG ---- */

/* A PNG decode's state, reached from libpng's callbacks. */
typedef struct {
  const unsigned char *data;
  size_t len, pos;
  char msg[200];
} png_src;

static void png_on_error(png_structp p, png_const_charp msg) {
  png_src *s = (png_src *)png_get_error_ptr(p);
  snprintf(s->msg, sizeof s->msg, "png: %s", msg);
  png_longjmp(p, 1);
}

static void png_on_warning(png_structp p, png_const_charp msg) {
  (void)p;
  (void)msg; /* benign: libpng goes on, as torchvision's does */
}

/* libpng's allocator: the decode's heap (png_create_read_struct_2). */
static png_voidp png_heap_alloc(png_structp p, png_alloc_size_t n) {
  return stoker_heap_alloc((stoker_heap *)png_get_mem_ptr(p), n);
}

static void png_heap_free(png_structp p, png_voidp q) { stoker_heap_free((stoker_heap *)png_get_mem_ptr(p), q); }

static void png_on_read(png_structp p, png_bytep dst, size_t n) {
  png_src *s = (png_src *)png_get_io_ptr(p);
  if (n > s->len - s->pos)
    png_error(p, "truncated");
  memcpy(dst, s->data + s->pos, n);
  s->pos += n;
}

/* png_complete reports whether the file's chunks, walked by their lengths
 * from the signature, reach an IEND: decoding stops after the last row a
 * view reads, and would not see a file cut short otherwise (Go's
 * image/png, the reference path, refuses those). */
static int png_complete(const unsigned char *p, size_t n) {
  size_t pos = 8;
  while (pos + 12 <= n) {
    uint32_t len = (uint32_t)p[pos] << 24 | (uint32_t)p[pos + 1] << 16 | (uint32_t)p[pos + 2] << 8 | p[pos + 3];
    if (memcmp(p + pos + 4, "IEND", 4) == 0)
      return 1;
    if (len > n - pos - 12)
      return 0;
    pos += (size_t)len + 12;
  }
  return 0;
}

/* Ancillary chunks torchvision does not use: skipped, not decompressed
 * (iCCP, zTXt and iTXt are zlib streams). */
static const png_byte png_ignored[] = {
    'b', 'K', 'G', 'D', 0, 'c', 'H', 'R', 'M', 0, 'e', 'X', 'I', 'f', 0, 'g', 'A', 'M', 'A', 0,
    'h', 'I', 'S', 'T', 0, 'i', 'C', 'C', 'P', 0, 'i', 'T', 'X', 't', 0, 'o', 'F', 'F', 's', 0,
    'p', 'C', 'A', 'L', 0, 'p', 'H', 'Y', 's', 0, 's', 'B', 'I', 'T', 0, 's', 'C', 'A', 'L', 0,
    's', 'P', 'L', 'T', 0, 's', 'R', 'G', 'B', 0, 't', 'E', 'X', 't', 0, 't', 'I', 'M', 'E', 0,
    'z', 'T', 'X', 't', 0};

/* png_setup reads the header and sets libpng's transformations to
 * torchvision's RGB mode (see the top of the file), gray kept as one
 * channel, color as RGBX. It returns whether the rows are gray. */
static int png_setup(png_structp p, png_infop info) {
  int ct, depth, gray;
  png_set_keep_unknown_chunks(p, PNG_HANDLE_CHUNK_NEVER, png_ignored, (int)(sizeof png_ignored / 5));
  png_read_info(p, info);
  ct = png_get_color_type(p, info);
  depth = png_get_bit_depth(p, info);
  gray = (ct & PNG_COLOR_MASK_COLOR) == 0;
  if (depth == 16)
    png_set_strip_16(p);
  if (ct == PNG_COLOR_TYPE_PALETTE)
    png_set_palette_to_rgb(p); /* with a tRNS, RGBA: stripped below */
  else if (gray && depth < 8)
    png_set_expand_gray_1_2_4_to_8(p);
  if ((ct & PNG_COLOR_MASK_ALPHA) ||
      (ct == PNG_COLOR_TYPE_PALETTE && png_get_valid(p, info, PNG_INFO_tRNS)))
    png_set_strip_alpha(p);
  if (!gray)
    png_set_filler(p, 0xFF, PNG_FILLER_AFTER);
  png_set_interlace_handling(p);
  png_read_update_info(p, info);
  return gray;
}

/* png_rows decodes rows [0, nd->y1) (all of them when interlaced) and
 * gives rows [nd->y0, nd->y1) to the resampler. buf is the caller's, to be
 * freed whatever happens. */
static void png_rows(stoker_turbo *t, png_structp p, png_infop info, const stoker_need *nd,
                     int bpp, stoker_heap *hp, unsigned char *volatile *buf) {
  stoker_job *jb = stoker_job_of(t);
  size_t rb = png_get_rowbytes(p, info), stride = rb + (size_t)nd->slack;
  int y, h = jb->src_h;
  if (rb != (size_t)jb->src_w * bpp)
    png_error(p, "unexpected row size after transformations");
  if (png_get_interlace_type(p, info) != PNG_INTERLACE_NONE) {
    /* one block, the row pointers first, so that a longjmp out of
     * png_read_image leaks nothing: the caller frees *buf. The rows lie
     * end to end, the taps' slack after the last one alone (a row's taps
     * past its end read the next row's bytes, weighed 0), so that the
     * block is the image's bytes and one slack (codec.Header.LibBytes). */
    png_bytep *rows;
    unsigned char *pix;
    if (rb + sizeof *rows > ((size_t)1 << 48) / (size_t)h)
      png_error(p, "an interlaced image too large to hold");
    *buf = stoker_heap_calloc(hp, (size_t)h * (rb + sizeof *rows) + (size_t)nd->slack);
    if (!*buf)
      png_error(p, "out of memory for an interlaced image");
    rows = (png_bytep *)*buf;
    pix = *buf + (size_t)h * sizeof *rows;
    for (y = 0; y < h; y++)
      rows[y] = pix + (size_t)y * rb;
    png_read_image(p, rows);
    jb->rows_decoded = h;
    for (y = nd->y0; y < nd->y1; y++)
      stoker_rows_put(t, y, rows[y] + (size_t)nd->x0 * bpp);
    return;
  }
  *buf = stoker_heap_calloc(hp, stride);
  if (!*buf)
    png_error(p, "out of memory for a row");
  for (y = 0; y < nd->y1; y++) {
    if (stoker_stopped(t))
      png_error(p, "png: the sample's work was abandoned");
    png_read_row(p, *buf, NULL);
    if (y >= nd->y0)
      stoker_rows_put(t, y, *buf + (size_t)nd->x0 * bpp);
  }
  jb->rows_decoded = nd->y1;
}

static int decode_png(stoker_turbo *t, const unsigned char *data, size_t len, unsigned char *out,
                      stoker_heap *hp) {
  stoker_job *jb = stoker_job_of(t);
  png_src src = {data, len, 0, {0}};
  png_structp p;
  png_infop info = NULL;
  unsigned char *volatile buf = NULL;
  volatile int rc = STOKER_CORRUPT;
  if (len < 8 || png_sig_cmp(data, 0, 8) != 0) {
    stoker_fail_msg(t, STOKER_CORRUPT, "png: bad signature");
    return STOKER_CORRUPT;
  }
  if (!png_complete(data, len)) {
    stoker_fail_msg(t, STOKER_CORRUPT, "png: truncated: no IEND chunk after the image data");
    return STOKER_CORRUPT;
  }
  rc = stoker_png_rows(t, data, len, out, hp);
  if (rc >= 0)
    return rc;
  rc = STOKER_CORRUPT;
  /* Every block libpng takes (its structs too) comes from hp: counted,
   * and refused past the job's limit (libpng then fails, out of memory). */
  p = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning, hp, png_heap_alloc,
                               png_heap_free);
  if (p)
    info = png_create_info_struct(p);
  if (!info) {
    png_destroy_read_struct(&p, NULL, NULL);
    if (hp->over)
      return stoker_heap_fail(t, hp, "png");
    stoker_fail_msg(t, STOKER_TOO_LARGE, "png: out of memory for the decoder");
    return STOKER_TOO_LARGE;
  }
  if (setjmp(png_jmpbuf(p))) {
    png_destroy_read_struct(&p, &info, NULL);
    stoker_heap_free(hp, buf);
    if (hp->over)
      return stoker_heap_fail(t, hp, "png");
    stoker_fail_msg(t, rc, src.msg);
    return rc;
  }
  png_set_read_fn(p, &src, png_on_read);
  png_set_crc_action(p, PNG_CRC_DEFAULT, PNG_CRC_DEFAULT);
  /* The image's sides are the header's (checked below); no chunk's data
   * is kept past what the limit allows (the heap refuses it first). */
  png_set_user_limits(p, (png_uint_32)jb->src_w, (png_uint_32)jb->src_h);
#ifdef PNG_IGNORE_ADLER32
  /* the stream's checksum is at its end, past the rows a crop stops at */
  png_set_option(p, PNG_IGNORE_ADLER32, PNG_OPTION_ON);
#endif
  {
    int gray = png_setup(p, info);
    stoker_need nd;
    if ((int)png_get_image_width(p, info) != jb->src_w || (int)png_get_image_height(p, info) != jb->src_h) {
      snprintf(src.msg, sizeof src.msg, "png: IHDR disagrees with the parsed header");
      png_longjmp(p, 1);
    }
    rc = stoker_rows_begin(t, gray, &nd);
    if (rc != STOKER_OK) {
      png_destroy_read_struct(&p, &info, NULL);
      return rc; /* stoker_rows_begin set the message */
    }
    rc = STOKER_CORRUPT;
    png_rows(t, p, info, &nd, gray ? 1 : 4, hp, &buf);
  }
  png_destroy_read_struct(&p, &info, NULL);
  stoker_heap_free(hp, buf);
  stoker_rows_end(t, out);
  return STOKER_OK;
}

/* ---- WebP ---- */

static int webp_fail(stoker_turbo *t, int code, const char *what, VP8StatusCode st) {
  static const char *const why[] = {"ok", "out of memory", "invalid parameter", "corrupt or truncated data",
                                    "unsupported feature", "suspended", "user abort", "not enough data"};
  char msg[160];
  snprintf(msg, sizeof msg, "webp: %s: %s", what,
           st >= 0 && st < (int)(sizeof why / sizeof *why) ? why[st] : "unknown error");
  stoker_fail_msg(t, code, msg);
  return code;
}

static int webp_code(VP8StatusCode st) {
  switch (st) {
  case VP8_STATUS_OUT_OF_MEMORY:
    return STOKER_TOO_LARGE;
  case VP8_STATUS_UNSUPPORTED_FEATURE:
    return STOKER_UNSUPPORTED;
  default:
    return STOKER_CORRUPT;
  }
}

static int decode_webp(stoker_turbo *t, const unsigned char *data, size_t len, unsigned char *out,
                       stoker_heap *hp) {
  stoker_job *jb = stoker_job_of(t);
  WebPDecoderConfig cfg;
  VP8StatusCode st;
  stoker_need nd;
  int rc, cl, ct, cr, cb, cw, ch, y;
  size_t stride, used;
  uint8_t *buf;
  if (!WebPInitDecoderConfig(&cfg)) {
    stoker_fail_msg(t, STOKER_UNSUPPORTED, "webp: libwebp's ABI differs from the one built against");
    return STOKER_UNSUPPORTED;
  }
  st = WebPGetFeatures(data, len, &cfg.input);
  if (st != VP8_STATUS_OK)
    return webp_fail(t, webp_code(st), "reading the header", st);
  if (cfg.input.has_animation) {
    stoker_fail_msg(t, STOKER_UNSUPPORTED, "webp: animated images are not supported (as in torchvision)");
    return STOKER_UNSUPPORTED;
  }
  if (cfg.input.width != jb->src_w || cfg.input.height != jb->src_h) {
    stoker_fail_msg(t, STOKER_CORRUPT, "webp: the bitstream's size disagrees with the parsed header");
    return STOKER_CORRUPT;
  }
  rc = stoker_rows_begin(t, 0, &nd);
  if (rc != STOKER_OK)
    return rc;
  /* The crop with its margin (see the top of the file); libwebp takes
   * crop_left and crop_top even. */
  cl = nd.x0 - 2 > 0 ? (nd.x0 - 2) & ~1 : 0;
  ct = nd.y0 - 2 > 0 ? (nd.y0 - 2) & ~1 : 0;
  cr = nd.x1 + 2 < jb->src_w ? nd.x1 + 2 : jb->src_w;
  cb = nd.y1 + 2 < jb->src_h ? nd.y1 + 2 : jb->src_h;
  cw = cr - cl;
  ch = cb - ct;
  /* The rows end to end (64-byte aligned), the taps' slack after the
   * last one alone (a row's taps past its end read the next row's bytes,
   * weighed 0): the block is the crop's bytes and one slack
   * (codec.Header.LibBytes). It comes from the decode's heap, capped;
   * libwebp's own allocations have no hook (they are bounded from the
   * header, LibBytes). */
  used = (size_t)cw * 4;
  stride = (used + 63) & ~(size_t)63;
  buf = stoker_heap_alloc(hp, stride * (size_t)ch + (size_t)nd.slack);
  if (!buf) {
    if (hp->over)
      return stoker_heap_fail(t, hp, "webp");
    stoker_fail_msg(t, STOKER_TOO_LARGE, "webp: out of memory for the decoded rows");
    return STOKER_TOO_LARGE;
  }
  for (y = 0; y < ch; y++) /* the taps' slack: read, never weighed */
    memset(buf + (size_t)y * stride + used, 0, stride - used);
  memset(buf + stride * (size_t)ch, 0, (size_t)nd.slack);
  if (cl > 0 || ct > 0 || cw < jb->src_w || ch < jb->src_h) {
    cfg.options.use_cropping = 1;
    cfg.options.crop_left = cl;
    cfg.options.crop_top = ct;
    cfg.options.crop_width = cw;
    cfg.options.crop_height = ch;
  }
  cfg.output.colorspace = MODE_RGBA;
  cfg.output.is_external_memory = 1;
  cfg.output.u.RGBA.rgba = buf;
  cfg.output.u.RGBA.stride = (int)stride;
  cfg.output.u.RGBA.size = stride * (size_t)ch;
  st = WebPDecode(data, len, &cfg);
  WebPFreeDecBuffer(&cfg.output);
  if (st != VP8_STATUS_OK) {
    stoker_heap_free(hp, buf);
    return webp_fail(t, webp_code(st), "decoding", st);
  }
  jb->rows_decoded = cb;
  for (y = nd.y0; y < nd.y1; y++)
    stoker_rows_put(t, y, buf + (size_t)(y - ct) * stride + (size_t)(nd.x0 - cl) * 4);
  stoker_heap_free(hp, buf);
  stoker_rows_end(t, out);
  return STOKER_OK;
}

/* The entry points: stop is the sample's abandoned flag for the call
 * (turbo.h); libwebp's decode is one call, not polled inside. */
int stoker_decode_png(stoker_turbo *t, const unsigned char *data, size_t len, unsigned char *out,
                      const volatile int *stop) {
  stoker_heap hp;
  int rc;
  stoker_heap_begin(&hp, stoker_job_of(t)->max_memory);
  stoker_set_stop(t, stop);
  rc = decode_png(t, data, len, out, &hp);
  stoker_set_stop(t, NULL);
  stoker_job_of(t)->lib_peak = hp.peak;
  return rc;
}

int stoker_decode_webp(stoker_turbo *t, const unsigned char *data, size_t len, unsigned char *out,
                       const volatile int *stop) {
  stoker_heap hp;
  int rc;
  stoker_heap_begin(&hp, stoker_job_of(t)->max_memory);
  stoker_set_stop(t, stop);
  rc = decode_webp(t, data, len, out, &hp);
  stoker_set_stop(t, NULL);
  stoker_job_of(t)->lib_peak = hp.peak;
  return rc;
}

/* ---- A RandomZoomOut's canvas ---- */

/* stoker_canvas is detgeom.go's resizeCanvas through the resampler: the
 * job's one view resizes a src_w x src_h crop of a canvas of fill (RGB),
 * on which the w x h image src (3 bytes a pixel: interleaved when src_hwc,
 * else three planes) lies at (left, top) of the crop, the crop's columns
 * reversed first when mirror (a flip before the resize). Only the rows and
 * columns the view's taps read are made, one row at a time; a row of
 * fill alone once (its horizontal pass for each row: skipping those
 * measured within the noise). */
int stoker_canvas(stoker_turbo *t, const unsigned char *src, int w, int h, int src_hwc, int left,
                  int top, int mirror, const unsigned char *fill, unsigned char *out) {
  stoker_job *jb = stoker_job_of(t);
  stoker_need nd;
  size_t plane = (size_t)w * h, rl;
  int kw = jb->src_w, y, x, a, b, n, rc;
  unsigned char *row, *frow;
  stoker_set_stop(t, NULL);
  rc = stoker_rows_begin(t, 0, &nd);
  if (rc != STOKER_OK)
    return rc;
  n = nd.x1 - nd.x0;
  rl = (size_t)n * 4 + (size_t)nd.slack;
  row = malloc(2 * rl);
  if (!row) {
    stoker_fail_msg(t, STOKER_TOO_LARGE, "canvas: out of memory for a row");
    return STOKER_TOO_LARGE;
  }
  frow = row + rl;
  memset(frow, 0, rl);
  for (x = 0; x < n; x++) {
    frow[4 * x] = fill[0];
    frow[4 * x + 1] = fill[1];
    frow[4 * x + 2] = fill[2];
    frow[4 * x + 3] = 255;
  }
  memcpy(row, frow, rl);
  /* the crop's columns [a, b) are the image's, the others the fill's */
  a = mirror ? kw - left - w : left;
  b = a + w;
  a = a > nd.x0 ? a : nd.x0;
  b = b < nd.x1 ? b : nd.x1;
  for (y = nd.y0; y < nd.y1; y++) {
    int iy = y - top;
    unsigned char *p = row + 4 * (size_t)(a - nd.x0);
    if (iy < 0 || iy >= h || a >= b) {
      stoker_rows_put(t, y, frow);
      continue;
    }
    if (src_hwc && !mirror) {
      const unsigned char *s = src + 3 * ((size_t)iy * w + (size_t)(a - left));
      for (x = a; x < b; x++, p += 4, s += 3)
        p[0] = s[0], p[1] = s[1], p[2] = s[2];
    } else {
      for (x = a; x < b; x++, p += 4) {
        size_t o = (size_t)iy * w + (size_t)(mirror ? kw - 1 - left - x : x - left);
        if (src_hwc)
          p[0] = src[3 * o], p[1] = src[3 * o + 1], p[2] = src[3 * o + 2];
        else
          p[0] = src[o], p[1] = src[plane + o], p[2] = src[2 * plane + o];
      }
    }
    stoker_rows_put(t, y, row);
  }
  free(row);
  stoker_rows_end(t, out);
  return STOKER_OK;
}
