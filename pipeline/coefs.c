/* The coefficient cache: each MCU's quantized DCT coefficients, kept in a
 * compact form once huff.c has entropy-decoded them, so that a later crop
 * of the same file copies them out instead of decoding them again.
 *
 * The form is made for decoding speed, not size: per 8x8 block, its DC
 * coefficient (two bytes), a 64-bit mask of its nonzero AC coefficients
 * (natural order) and then their values, one byte each, or 0x80 and two
 * bytes for the few outside [-127, 127]. It
 * takes about two to three times the JPEG's bytes (Huffman coding is
 * denser); expanding it is a load, a count of trailing zeros and a store
 * per nonzero coefficient, where Huffman decoding is a table lookup, a
 * shift and a branch per code, and a refill every few.
 *
 * An MCU is stored whenever huff.c decodes it, whichever way the decoder
 * came to it (for the crop, or in passing, catching up to a crop), and
 * never changes after: the cache of a file fills over its first epochs and
 * then only serves. A decode's new MCUs are encoded into the decoder's
 * reused buffer and copied, once the decode has succeeded, into one block
 * of their own (no growing a file's block in place, no memory touched for
 * a decode that fails). The caller (Go) owns the budget: a decode may add
 * at most its "room" of bytes, and past that stores nothing more. */
#include "huff.h"

#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The most bytes one block can take: its DC, its mask and 63 escaped AC
 * values. */
#define BLOCK_MAX (2 + 8 + 63 * 3)

stoker_coefs *stoker_coefs_new(void) { return calloc(1, sizeof(stoker_coefs)); }

void stoker_coefs_free(stoker_coefs *c) {
  int i;
  if (!c)
    return;
  for (i = 0; i < c->nseg; i++)
    free(c->seg[i]);
  free(c->seg);
  free(c->at);
  free(c);
}

size_t stoker_coefs_bytes(const stoker_coefs *c) {
  return sizeof *c + c->bytes + (size_t)c->nmcu * sizeof *c->at +
         (size_t)c->segcap * sizeof *c->seg;
}

void stoker_coefbuf_free(stoker_coefbuf *b) {
  free(b->buf);
  free(b->mcu);
  memset(b, 0, sizeof *b);
}

int coefs_attach(stoker_coefs *c, stoker_coefbuf *b, long nmcu, int blocks,
                 size_t *room) {
  b->len = b->n = 0;
  if (c->at)
    return c->nmcu == nmcu && c->blocks == blocks;
  if (nmcu <= 0 || blocks <= 0 || (size_t)nmcu * sizeof *c->at > *room)
    return 0;
  c->at = calloc((size_t)nmcu, sizeof *c->at);
  if (!c->at)
    return 0;
  *room -= (size_t)nmcu * sizeof *c->at;
  c->nmcu = nmcu;
  c->blocks = blocks;
  return 1;
}

/* grow makes room for n more bytes in *p (of *cap), doubling. */
static int grow(void **p, size_t *cap, size_t need, size_t size) {
  size_t want = *cap ? *cap : 4096 / size;
  void *q;
  if (need <= *cap)
    return 1;
  while (want < need)
    want *= 2;
  q = realloc(*p, want * size);
  if (!q)
    return 0;
  *p = q;
  *cap = want;
  return 1;
}

/* nonzero returns the mask of b's nonzero coefficients. */
static inline uint64_t nonzero(const JCOEF *b) {
#if defined(__SSE2__)
  const __m128i z = _mm_setzero_si128();
  uint64_t m = 0;
  int i;
  for (i = 0; i < 4; i++) {
    __m128i lo = _mm_loadu_si128((const __m128i *)(b + 16 * i));
    __m128i hi = _mm_loadu_si128((const __m128i *)(b + 16 * i + 8));
    /* saturating: a nonzero 16-bit value packs to a nonzero byte */
    __m128i p = _mm_packs_epi16(lo, hi);
    unsigned eq = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(p, z));
    m |= (uint64_t)(~eq & 0xFFFFu) << (16 * i);
  }
  return m;
#else
  uint64_t m = 0;
  int i;
  for (i = 0; i < 64; i++)
    m |= (uint64_t)(b[i] != 0) << i;
  return m;
#endif
}

int coefs_put(stoker_coefbuf *b, long mcu, int blocks, JBLOCKROW *data,
              size_t *room) {
  size_t need = (size_t)blocks * BLOCK_MAX;
  uint8_t *p;
  int blk;
  /* a stored MCU is at most need bytes: stop while that still fits */
  if (b->len + need > *room) {
    *room = 0;
    return 0;
  }
  if (!grow((void **)&b->buf, &b->cap, b->len + need, 1) ||
      !grow((void **)&b->mcu, &b->mcap, b->n + 1, sizeof *b->mcu)) {
    *room = 0;
    return 0;
  }
  p = b->buf + b->len;
  for (blk = 0; blk < blocks; blk++) {
    const JCOEF *c = data[blk][0];
    uint64_t m = nonzero(c) & ~1ull;
    int16_t dc = c[0];
    memcpy(p, &dc, 2);
    memcpy(p + 2, &m, 8);
    p += 10;
    while (m) {
      int i = __builtin_ctzll(m), v = c[i];
      m &= m - 1;
      *p++ = (uint8_t)(int8_t)v;
      if (__builtin_expect(v < -127 || v > 127, 0)) {
        int16_t w = (int16_t)v;
        p[-1] = 0x80;
        memcpy(p, &w, 2);
        p += 2;
      }
    }
  }
  b->mcu[b->n].m = mcu;
  b->mcu[b->n].off = b->len;
  b->n++;
  b->len = (size_t)(p - b->buf);
  return 1;
}

void coefs_get(const stoker_coefs *c, long mcu, JBLOCKROW *data) {
  const uint8_t *p = c->at[mcu];
  int blk;
  for (blk = 0; blk < c->blocks; blk++) {
    JCOEF *b = data[blk][0];
    uint64_t m;
    int16_t dc;
    /* libjpeg zeroes a block before asking for it; set what is not zero */
    memcpy(&dc, p, 2);
    memcpy(&m, p + 2, 8);
    p += 10;
    b[0] = dc;
    while (m) {
      int i = __builtin_ctzll(m), v = (int8_t)*p++;
      m &= m - 1;
      if (__builtin_expect(v == -128, 0)) {
        int16_t w;
        memcpy(&w, p, 2);
        p += 2;
        v = w;
      }
      b[i] = (JCOEF)v;
    }
  }
}

int coefs_commit(stoker_coefs *c, stoker_coefbuf *b) {
  uint8_t *seg;
  size_t i;
  if (!b->n)
    return 1;
  if (c->nseg == c->segcap) {
    int n = c->segcap ? 2 * c->segcap : 4;
    uint8_t **q = realloc(c->seg, (size_t)n * sizeof *q);
    if (!q)
      return 0;
    c->seg = q;
    c->segcap = n;
  }
  seg = malloc(b->len);
  if (!seg)
    return 0;
  memcpy(seg, b->buf, b->len);
  c->seg[c->nseg++] = seg;
  c->bytes += b->len;
  for (i = 0; i < b->n; i++)
    c->at[b->mcu[i].m] = seg + b->mcu[i].off;
  b->len = b->n = 0;
  return 1;
}
