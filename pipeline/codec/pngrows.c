/* The common PNG, decoded without libpng: 8-bit gray, gray+alpha, RGB or
 * RGBA, not interlaced (what photo tools and PIL write). stoker_png_rows
 * walks the chunks, inflates the image data with zlib a row at a time,
 * undoes the row filters (Paeth with SSE2: libpng as Debian builds it runs
 * a byte-wise loop there, a quarter of a decode) and hands rows to the
 * resampler, stopping after the last row a view reads. Everything else
 * (palettes, other depths, Adam7, chunks it does not expect) goes to
 * libpng (formats.c), which gives the same bytes.
 *
 * Checks: each chunk's CRC up to the last one read, as libpng checks
 * them; not zlib's Adler-32 of the whole stream, which is at its end,
 * after the rows a crop stops at (libpng cannot check it then either). */
#include "turbo.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A walk over the IDAT chunks' data, chunk by chunk. */
typedef struct {
  const unsigned char *data;
  size_t len, pos; /* pos: the next chunk's start */
} chunks;

/* next_idat points z at the next IDAT's data and returns 1, or returns 0
 * when the image data ended (another chunk), -1 on a bad chunk or CRC. */
static int next_idat(chunks *c, z_stream *z) {
  uint32_t n;
  if (c->pos + 12 > c->len)
    return -1;
  n = be32(c->data + c->pos);
  if (n > c->len - c->pos - 12)
    return -1;
  if (memcmp(c->data + c->pos + 4, "IDAT", 4) != 0)
    return 0;
  if (crc32(0, c->data + c->pos + 4, n + 4) != be32(c->data + c->pos + 8 + n))
    return -1;
  z->next_in = (unsigned char *)c->data + c->pos + 8;
  z->avail_in = n;
  c->pos += (size_t)n + 12;
  return 1;
}

/* paeth is the Paeth predictor, as the PNG specification writes it. */
static inline int paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

#if defined(__SSE2__)
static inline __m128i abs16(__m128i x) { return _mm_max_epi16(x, _mm_sub_epi16(_mm_setzero_si128(), x)); }

static inline __m128i pick(__m128i m, __m128i x, __m128i y) {
  return _mm_or_si128(_mm_and_si128(m, x), _mm_andnot_si128(m, y));
}

/* rgbx_sse2 undoes filter ft on a row of w pixels of bpp (3 or 4) bytes
 * at src into RGBX pixels at dst, given the row above in RGBX (zeros for
 * the first): one pixel's channels at a time in 16-bit lanes, the
 * filters that read the pixel to the left being serial. Out of place, so
 * that no load waits on the store before it; loads read 4 bytes (src has
 * a byte of slack), stores write 4 (the X, whatever it is, is never
 * weighed). ft and bpp are constants where it is inlined. */
static inline __attribute__((always_inline)) void
rgbx_sse2(const unsigned char *src, const unsigned char *prev, unsigned char *dst, int w, const int ft,
          const int bpp) {
  const __m128i zero = _mm_setzero_si128(), ff = _mm_set1_epi16(0xFF);
  __m128i a = zero, c = zero;
  int x;
  for (x = 0; x < w; x++) {
    uint32_t wb, wd, o;
    __m128i b, d, pa, pb, pc, lo;
    memcpy(&wb, prev + 4 * (size_t)x, 4);
    memcpy(&wd, src + (size_t)bpp * x, 4);
    b = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)wb), zero);
    d = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)wd), zero);
    switch (ft) {
    case 1:
      d = _mm_add_epi16(d, a);
      break;
    case 2:
      d = _mm_add_epi16(d, b);
      break;
    case 3:
      d = _mm_add_epi16(d, _mm_srli_epi16(_mm_add_epi16(a, b), 1));
      break;
    case 4:
      pa = _mm_sub_epi16(b, c);
      pb = _mm_sub_epi16(a, c);
      pc = abs16(_mm_add_epi16(pa, pb));
      pa = abs16(pa);
      pb = abs16(pb);
      lo = _mm_min_epi16(pc, _mm_min_epi16(pa, pb));
      d = _mm_add_epi16(d, pick(_mm_cmpeq_epi16(lo, pa), a, pick(_mm_cmpeq_epi16(lo, pb), b, c)));
      break;
    }
    d = _mm_and_si128(d, ff);
    o = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(d, d));
    memcpy(dst + 4 * (size_t)x, &o, 4);
    a = d;
    c = b;
  }
}

/* unfilter_rgbx is rgbx_sse2 with ft and bpp made constants. */
static int unfilter_rgbx(const unsigned char *src, const unsigned char *prev, unsigned char *dst, int w, int ft,
                         int bpp) {
#define RGBX_CASE(f)                                                                                         \
  case f:                                                                                                    \
    if (bpp == 3)                                                                                            \
      rgbx_sse2(src, prev, dst, w, f, 3);                                                                    \
    else                                                                                                     \
      rgbx_sse2(src, prev, dst, w, f, 4);                                                                    \
    return 1;
  switch (ft) {
    RGBX_CASE(0)
    RGBX_CASE(1)
    RGBX_CASE(2)
    RGBX_CASE(3)
    RGBX_CASE(4)
  }
#undef RGBX_CASE
  return 0;
}
#endif

/* unfilter undoes row's filter (its first byte, ft) given the row above
 * (zeros for the first). Rows are n bytes after the filter byte. */
static int unfilter(unsigned char *row, const unsigned char *prev, size_t n, int bpp, int ft) {
  size_t i;
  switch (ft) {
  case 0:
    return 1;
  case 1:
    for (i = (size_t)bpp; i < n; i++)
      row[i] = (unsigned char)(row[i] + row[i - bpp]);
    return 1;
  case 2:
    for (i = 0; i < n; i++)
      row[i] = (unsigned char)(row[i] + prev[i]);
    return 1;
  case 3:
    for (i = 0; i < (size_t)bpp; i++)
      row[i] = (unsigned char)(row[i] + (prev[i] >> 1));
    for (; i < n; i++)
      row[i] = (unsigned char)(row[i] + ((row[i - bpp] + prev[i]) >> 1));
    return 1;
  case 4:
    for (i = 0; i < (size_t)bpp; i++)
      row[i] = (unsigned char)(row[i] + prev[i]);
    for (; i < n; i++)
      row[i] = (unsigned char)(row[i] + paeth(row[i - bpp], prev[i], prev[i - bpp]));
    return 1;
  }
  return 0;
}

/* to_rows makes the resampler's row from a decoded one: gray as is, gray
 * and alpha's gray, RGB as RGBX; RGBA is RGBX already (the X ignored). */
static const unsigned char *to_rows(const unsigned char *src, unsigned char *dst, int w, int ct) {
  int x;
  switch (ct) {
  case 4:
    for (x = 0; x < w; x++)
      dst[x] = src[2 * x];
    return dst;
  case 2:
    for (x = 0; x < w; x++) {
      dst[4 * x] = src[3 * x];
      dst[4 * x + 1] = src[3 * x + 1];
      dst[4 * x + 2] = src[3 * x + 2];
      dst[4 * x + 3] = 0xFF;
    }
    return dst;
  }
  return src;
}

/* The work of one decode: the buffers, freed by fail or at the end, all
 * taken from hp (counted and capped: turbo.h's stoker_heap). */
typedef struct {
  z_stream z;
  int zinit;
  unsigned char *buf;
  stoker_heap *hp;
} png_job;

static void release(png_job *j) {
  if (j->zinit)
    inflateEnd(&j->z);
  j->zinit = 0;
  stoker_heap_free(j->hp, j->buf);
  j->buf = NULL;
}

static int fail(stoker_turbo *t, png_job *j, int code, const char *msg) {
  int over = j->hp->over != 0;
  release(j);
  if (over)
    return stoker_heap_fail(t, j->hp, "png");
  stoker_fail_msg(t, code, msg);
  return code;
}

/* zlib's state and window, from the decode's heap. */
static voidpf z_alloc(voidpf hp, uInt items, uInt size) {
  return stoker_heap_alloc((stoker_heap *)hp, (size_t)items * size);
}

static void z_free(voidpf hp, voidpf p) { stoker_heap_free((stoker_heap *)hp, p); }

/* inflate_row fills dst with the next n bytes of image data. */
static int inflate_row(png_job *j, chunks *c, unsigned char *dst, size_t n) {
  z_stream *z = &j->z;
  z->next_out = dst;
  z->avail_out = (uInt)n;
  while (z->avail_out > 0) {
    int r;
    if (z->avail_in == 0 && next_idat(c, z) != 1)
      return 0;
    r = inflate(z, Z_SYNC_FLUSH);
    if (r == Z_STREAM_END && z->avail_out > 0)
      return 0;
    if (r != Z_OK && r != Z_STREAM_END && !(r == Z_BUF_ERROR && z->avail_in == 0))
      return 0;
  }
  return 1;
}

int stoker_png_rows(stoker_turbo *t, const unsigned char *data, size_t len, unsigned char *out,
                    stoker_heap *hp) {
  stoker_job *jb = stoker_job_of(t);
  const unsigned char *ih = data + 16;
  png_job j;
  chunks c = {data, len, 33};
  stoker_need nd;
  int w, h, ct, bpp, gray, y, rc;
  size_t rb, stride;
  unsigned char *cur, *prev, *rec;
  if (len < 33 || be32(data + 8) != 13 || memcmp(data + 12, "IHDR", 4) != 0 ||
      crc32(0, data + 12, 17) != be32(data + 29))
    return -1;
  /* PNG sides are 1 to 2^31-1 (a larger one reads as negative here):
   * checked here, not trusted to the caller's parse */
  if (be32(ih) < 1 || be32(ih) > INT_MAX || be32(ih + 4) < 1 || be32(ih + 4) > INT_MAX)
    return -1;
  w = (int)be32(ih);
  h = (int)be32(ih + 4);
  ct = ih[9];
  if (ih[8] != 8 || (ct != 0 && ct != 2 && ct != 4 && ct != 6) || ih[10] || ih[11] || ih[12] ||
      w != jb->src_w || h != jb->src_h)
    return -1; /* libpng's: it decodes or refuses these */
  /* Up to the first IDAT: ancillary chunks and PLTE (a suggestion for
   * RGB) are skipped; any other critical chunk is libpng's to judge. */
  for (;;) {
    uint32_t n;
    const unsigned char *k;
    if (c.pos + 12 > len)
      return -1;
    n = be32(data + c.pos);
    k = data + c.pos + 4;
    if (n > len - c.pos - 12)
      return -1;
    if (memcmp(k, "IDAT", 4) == 0)
      break;
    if (!(k[0] & 0x20) && memcmp(k, "PLTE", 4) != 0)
      return -1;
    c.pos += (size_t)n + 12;
  }
  bpp = ct == 0 ? 1 : ct == 4 ? 2 : ct == 2 ? 3 : 4;
  gray = ct == 0 || ct == 4;
  memset(&j, 0, sizeof j);
  j.hp = hp;
  rc = stoker_rows_begin(t, gray, &nd);
  if (rc != STOKER_OK)
    return rc;
  rb = (size_t)w * bpp;
  /* Rows: the filtered one (a filter byte, the row, 4 bytes of slack for
   * 4-byte loads), and two reconstructed ones, this row's and the one
   * above (zeros for the first), each with the resampler's slack. */
  stride = (rb + 1 + (size_t)nd.slack + 4 + (size_t)w + 15) & ~(size_t)15;
  j.buf = stoker_heap_calloc(hp, 3 * stride);
  if (!j.buf)
    return fail(t, &j, STOKER_TOO_LARGE, "png: out of memory for rows");
  cur = j.buf;
  prev = j.buf + stride;
  rec = j.buf + 2 * stride;
  j.z.zalloc = z_alloc;
  j.z.zfree = z_free;
  j.z.opaque = hp;
  if (inflateInit(&j.z) != Z_OK)
    return fail(t, &j, STOKER_TOO_LARGE, "png: zlib could not start");
  j.zinit = 1;
#if ZLIB_VERNUM >= 0x1290
  inflateValidate(&j.z, 0);
#endif
  for (y = 0; y < nd.y1; y++) {
    const unsigned char *row;
    unsigned char *tmp;
    int ok;
    if (stoker_stopped(t))
      return fail(t, &j, STOKER_CORRUPT, "png: the sample's work was abandoned");
    if (!inflate_row(&j, &c, cur, rb + 1))
      return fail(t, &j, STOKER_CORRUPT, "png: corrupt or truncated image data");
#if defined(__SSE2__)
    if (!gray) {
      /* RGB and RGBA: unfiltered straight into RGBX */
      ok = unfilter_rgbx(cur + 1, prev, rec, w, cur[0], bpp);
      row = rec;
      tmp = prev, prev = rec, rec = tmp;
    } else
#endif
    {
      /* in place, the row above kept as decoded */
      ok = unfilter(cur + 1, prev + 1, rb, bpp, cur[0]);
      row = to_rows(cur + 1, rec, w, ct);
      tmp = prev, prev = cur, cur = tmp;
    }
    if (!ok)
      return fail(t, &j, STOKER_CORRUPT, "png: bad row filter type");
    if (y >= nd.y0)
      stoker_rows_put(t, y, row + (size_t)nd.x0 * (gray ? 1 : 4));
  }
  jb->rows_decoded = nd.y1;
  release(&j);
  stoker_rows_end(t, out);
  return STOKER_OK;
}
