/* The entropy decoders' bit reader and code lookup (huff.c's baseline
 * decoder, phuff.c's progressive one): a 64-bit buffer, MSB first, refilled
 * eight bytes at a time where no 0xFF is among them. */
#ifndef STOKER_BITS_H
#define STOKER_BITS_H

#include "huff.h"

#include <string.h>

/* Zigzag to natural order, padded with 63s (huff.c). */
extern const int stoker_natural[64 + 32];

static inline void refill_slow(stoker_bits *b) {
  while (b->n < 56) {
    unsigned c = 0;
    if (!b->marker && b->p < b->end) {
      c = *b->p;
      if (c != 0xFF) {
        b->p++;
      } else if (b->p + 1 < b->end && b->p[1] == 0x00) {
        b->p += 2; /* stuffed 0xFF */
      } else {
        b->marker = 1; /* a marker: stop before it */
        c = 0;
        b->fake += 8;
      }
    } else {
      b->marker = 1;
      b->fake += 8;
    }
    b->buf |= (uint64_t)c << (56 - b->n);
    b->n += 8;
  }
}

/* refill makes 56 <= n <= 63 (huff.c refills whatever n is left: n at 64
 * would shift by 64). The fast path loads eight bytes and, when none is
 * 0xFF, takes as many whole bytes as fit; the bits it loads past those are
 * the stream's own next bits, so loading them again later changes nothing
 * (F. Giesen, "Reading bits in far too many ways", variant 4). */
static inline void refill(stoker_bits *b) {
  if (!b->marker && b->end - b->p >= 8) {
    uint64_t x, v;
    memcpy(&x, b->p, 8);
    x = __builtin_bswap64(x);
    v = ~x;
    if (!((v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL)) {
      b->buf |= x >> b->n;
      b->p += (63 - b->n) >> 3;
      b->n |= 56;
      return;
    }
  }
  refill_slow(b);
}

static inline unsigned peek(const stoker_bits *b, int n) {
  return (unsigned)(b->buf >> (64 - n));
}

static inline void consume(stoker_bits *b, int n) {
  b->buf <<= n;
  b->n -= n;
}

static inline int extend(unsigned v, int s) {
  return v < (1u << (s - 1)) ? (int)v - (1 << s) + 1 : (int)v;
}

static inline int decode_sym(stoker_bits *b, const stoker_htab *t, int *bad) {
  unsigned e = t->lut[peek(b, STOKER_LB)];
  int l;
  if (e >> 8) {
    consume(b, (int)(e >> 8));
    return (int)(e & 0xFF);
  }
  for (l = STOKER_LB + 1; l <= 16; l++) {
    int32_t code = (int32_t)peek(b, l);
    if (code <= t->maxcode[l]) {
      consume(b, l);
      return t->huffval[(code + t->valoff[l]) & 0xFF];
    }
  }
  *bad = 1;
  return 0;
}

#endif
