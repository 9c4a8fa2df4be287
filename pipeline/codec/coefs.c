/* The coefficient cache: each MCU's quantized DCT coefficients, kept in a
 * compact form once huff.c has entropy-decoded them, so that a later crop
 * of the same file copies them out instead of decoding them again.
 *
 * The form is made for decoding speed, not size: per 8x8 block, its DC
 * coefficient (two bytes), a 64-bit mask of its nonzero AC coefficients
 * (natural order; bit 0, the DC's, says "wide") and then their values, one
 * byte each, or two each in a wide block (one with an AC coefficient
 * outside [-127, 127]). It takes about twice the JPEG's bytes (Huffman
 * coding is denser). With SSSE3, each group of 8 coefficients is packed and
 * unpacked by one byte shuffle chosen by its byte of the mask: no branch
 * per coefficient either way, where Huffman decoding is a table lookup, a
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

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <tmmintrin.h> /* SSSE3, for functions built for it (run if the CPU has it) */
#endif
#if defined(__x86_64__)
#include <immintrin.h> /* AVX-512 VBMI2, likewise */
#endif

/* The most bytes one block can take: its DC, its mask, 63 wide values,
 * and the 8 bytes an SSSE3 store writes past what it keeps. */
#define BLOCK_MAX (2 + 8 + 63 * 2 + 8)
/* Bytes after a stored segment that an SSSE3 load may read past its end. */
#define SEG_SLACK 16
#define WIDE 1ull /* the mask's bit 0 */

/* Byte-shuffle controls for a group of 8 coefficients, by its byte m of the
 * mask: compact_tab[m] gathers the set lanes to the front, expand_tab[m]
 * spreads the first count_tab[m] bytes back to them (0x80: a zero). */
static uint64_t compact_tab[256], expand_tab[256];
static uint8_t count_tab[256];
/* The CPU has AVX-512 VBMI2 (vpcompressb, vpexpandb). */
static int cpu_vbmi2;

__attribute__((constructor)) static void coefs_init(void) {
  int m, j, n;
  for (m = 0; m < 256; m++) {
    uint64_t c = 0, e = 0x8080808080808080ull;
    for (j = n = 0; j < 8; j++) {
      if (!(m >> j & 1))
        continue;
      c |= (uint64_t)j << (8 * n);
      e = (e & ~(0xFFull << (8 * j))) | (uint64_t)n << (8 * j);
      n++;
    }
    compact_tab[m] = c;
    expand_tab[m] = e;
    count_tab[m] = (uint8_t)n;
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  cpu_vbmi2 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vbmi2");
#endif
}

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
                 int simd, size_t *room) {
  b->len = b->n = 0;
  b->simd = simd >= 5 && cpu_vbmi2 ? 5 : simd >= 2 ? 2 : 0;
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

/* grow makes *p hold at least need elements of size bytes (*cap now),
 * doubling; 0 when out of memory or when want * size would not fit a
 * size_t (the doubling or the product wrapping round to a small buffer). */
static int grow(void **p, size_t *cap, size_t need, size_t size) {
  size_t want = *cap ? *cap : 4096 / size;
  void *q;
  if (need <= *cap)
    return 1;
  if (size == 0 || need > SIZE_MAX / size)
    return 0;
  if (want < 1)
    want = 1;
  while (want < need)
    want = want > SIZE_MAX / 2 ? need : want * 2;
  if (want > SIZE_MAX / size)
    want = need;
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

/* wide reports whether an AC coefficient of c is outside [-127, 127]. */
static inline int wide(const JCOEF *c) {
#if defined(__SSE2__)
  const __m128i hi = _mm_set1_epi16(127), lo = _mm_set1_epi16(-127);
  __m128i bad = _mm_setzero_si128();
  int i;
  for (i = 0; i < 8; i++) {
    __m128i v = _mm_loadu_si128((const __m128i *)(c + 8 * i));
    if (i == 0)
      v = _mm_insert_epi16(v, 0, 0); /* not the DC */
    bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpgt_epi16(v, hi), _mm_cmplt_epi16(v, lo)));
  }
  return _mm_movemask_epi8(bad) != 0;
#else
  int i;
  for (i = 1; i < 64; i++)
    if (c[i] < -127 || c[i] > 127)
      return 1;
  return 0;
#endif
}

#if defined(__SSE2__)
__attribute__((target("ssse3"))) static uint8_t *put_narrow_ssse3(uint8_t *p, const JCOEF *c, uint64_t m) {
  int g;
  for (g = 0; g < 8; g += 2) {
    __m128i b = _mm_packs_epi16(_mm_loadu_si128((const __m128i *)(c + 8 * g)),
                                _mm_loadu_si128((const __m128i *)(c + 8 * g + 8)));
    unsigned m0 = (unsigned)(m >> (8 * g)) & 0xFF, m1 = (unsigned)(m >> (8 * g + 8)) & 0xFF;
    _mm_storel_epi64((__m128i *)p, _mm_shuffle_epi8(b, _mm_cvtsi64_si128((long long)compact_tab[m0])));
    p += count_tab[m0];
    _mm_storel_epi64((__m128i *)p, _mm_shuffle_epi8(_mm_srli_si128(b, 8), _mm_cvtsi64_si128((long long)compact_tab[m1])));
    p += count_tab[m1];
  }
  return p;
}

__attribute__((target("ssse3"))) static const uint8_t *get_narrow_ssse3(const uint8_t *p, JCOEF *c, uint64_t m) {
  const __m128i zero = _mm_setzero_si128();
  int g;
  for (g = 0; g < 8; g++) {
    unsigned mg = (unsigned)(m >> (8 * g)) & 0xFF;
    __m128i x = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)p),
                                 _mm_cvtsi64_si128((long long)expand_tab[mg]));
    /* sign-extended to 16 bits: all 8 coefficients of the group */
    _mm_storeu_si128((__m128i *)(c + 8 * g), _mm_unpacklo_epi8(x, _mm_cmpgt_epi8(zero, x)));
    p += count_tab[mg];
  }
  return p;
}
#endif

#if defined(__x86_64__)
#define VBMI2 __attribute__((target("popcnt,avx2,avx512f,avx512bw,avx512vbmi2")))

/* low_bytes is a mask of the first n bytes (n < 64). */
VBMI2 static inline __mmask64 low_bytes(int n) { return n ? ~0ull >> (64 - n) : 0; }

/* put_narrow_vbmi2 is put_narrow_ssse3 for the whole block at once: its
 * 64 coefficients narrowed to bytes (they fit: the block is not wide), the
 * nonzero ones gathered by one vpcompressb, stored in a masked store of
 * just their bytes. */
VBMI2 static uint8_t *put_narrow_vbmi2(uint8_t *p, const JCOEF *c, uint64_t m) {
  int n = __builtin_popcountll(m);
  __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_loadu_si512((const void *)c))),
                                 _mm512_cvtepi16_epi8(_mm512_loadu_si512((const void *)(c + 32))), 1);
  _mm512_mask_storeu_epi8(p, low_bytes(n), _mm512_maskz_compress_epi8(m, b));
  return p + n;
}

/* get_narrow_vbmi2 is get_narrow_ssse3 for the whole block at once: a
 * masked load of its n bytes, one vpexpandb to their places (zeros
 * elsewhere), sign-extended to 16 bits. */
VBMI2 static const uint8_t *get_narrow_vbmi2(const uint8_t *p, JCOEF *c, uint64_t m) {
  int n = __builtin_popcountll(m);
  __m512i x = _mm512_maskz_expand_epi8(m, _mm512_maskz_loadu_epi8(low_bytes(n), p));
  _mm512_storeu_si512((void *)c, _mm512_cvtepi8_epi16(_mm512_castsi512_si256(x)));
  _mm512_storeu_si512((void *)(c + 32), _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(x, 1)));
  return p + n;
}
#endif

/* put_block appends c's form at p and returns the end; at SIMD level 2 or
 * more (coefs_attach), by byte shuffles, at 5 by compressing bytes. */
static inline uint8_t *put_block(uint8_t *p, const JCOEF *c, int simd) {
  uint64_t m = nonzero(c) & ~WIDE, k;
  int16_t dc = c[0];
  int w = wide(c);
  memcpy(p, &dc, 2);
  k = m | (w ? WIDE : 0);
  memcpy(p + 2, &k, 8);
  p += 10;
  if (w) {
    while (m) {
      int16_t v = c[__builtin_ctzll(m)];
      m &= m - 1;
      memcpy(p, &v, 2);
      p += 2;
    }
    return p;
  }
#if defined(__x86_64__)
  if (simd >= 5)
    return put_narrow_vbmi2(p, c, m);
#endif
#if defined(__SSE2__)
  if (simd >= 2)
    return put_narrow_ssse3(p, c, m);
#endif
  while (m) {
    *p++ = (uint8_t)(int8_t)c[__builtin_ctzll(m)];
    m &= m - 1;
  }
  return p;
}

/* get_block writes the block stored at p into c (zeroed by libjpeg) and
 * returns the end of its form; at SIMD level 2 or more, by byte shuffles,
 * at 5 by expanding bytes (every way reads and writes the same form). */
static inline const uint8_t *get_block(const uint8_t *p, JCOEF *c, int simd) {
  uint64_t m;
  int16_t dc;
  memcpy(&dc, p, 2);
  memcpy(&m, p + 2, 8);
  p += 10;
  if (m & WIDE) {
    m &= ~WIDE;
    while (m) {
      int16_t v;
      memcpy(&v, p, 2);
      p += 2;
      c[__builtin_ctzll(m)] = v;
      m &= m - 1;
    }
  } else {
#if defined(__x86_64__)
    if (simd >= 5) {
      p = get_narrow_vbmi2(p, c, m);
      c[0] = dc;
      return p;
    }
#endif
#if defined(__SSE2__)
    if (simd >= 2) {
      p = get_narrow_ssse3(p, c, m);
      c[0] = dc;
      return p;
    }
#endif
    while (m) {
      c[__builtin_ctzll(m)] = (int8_t)*p++;
      m &= m - 1;
    }
  }
  c[0] = dc;
  return p;
}

int coefs_put(stoker_coefbuf *b, long mcu, int blocks, JBLOCKROW *data,
              size_t *room) {
  size_t need = (size_t)blocks * BLOCK_MAX;
  uint8_t *p;
  int blk;
  /* a stored MCU is at most need bytes: stop while that still fits (the
   * sum cannot wrap: len is at most *room, need small) */
  if (blocks < 1 || blocks > D_MAX_BLOCKS_IN_MCU || b->len > *room ||
      need + SEG_SLACK > *room - b->len) {
    *room = 0;
    return 0;
  }
  if (!grow((void **)&b->buf, &b->cap, b->len + need, 1) ||
      !grow((void **)&b->mcu, &b->mcap, b->n + 1, sizeof *b->mcu)) {
    *room = 0;
    return 0;
  }
  p = b->buf + b->len;
  for (blk = 0; blk < blocks; blk++)
    p = put_block(p, data[blk][0], b->simd);
  b->mcu[b->n].m = mcu;
  b->mcu[b->n].off = b->len;
  b->n++;
  b->len = (size_t)(p - b->buf);
  return 1;
}

size_t stoker_coefs_form(const JCOEF *blocks, int n, int simd, uint8_t *out) {
  int level = simd >= 5 && cpu_vbmi2 ? 5 : simd >= 2 ? 2 : 0, i;
  uint8_t *p = out;
  for (i = 0; i < n; i++)
    p = put_block(p, blocks + 64 * i, level);
  return (size_t)(p - out);
}

void coefs_get(const stoker_coefs *c, const stoker_coefbuf *b, long mcu,
               JBLOCKROW *data) {
  const uint8_t *p = c->at[mcu];
  int blk;
  for (blk = 0; blk < c->blocks; blk++)
    p = get_block(p, data[blk][0], b->simd);
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
  seg = malloc(b->len + SEG_SLACK);
  if (!seg)
    return 0;
  memcpy(seg, b->buf, b->len);
  memset(seg + b->len, 0, SEG_SLACK);
  c->seg[c->nseg++] = seg;
  c->bytes += b->len + SEG_SLACK;
  for (i = 0; i < b->n; i++)
    c->at[b->mcu[i].m] = seg + b->mcu[i].off;
  b->len = b->n = 0;
  return 1;
}
