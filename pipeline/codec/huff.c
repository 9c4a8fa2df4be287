/* A faster Huffman decoder for baseline JPEG, plugged into libjpeg-turbo.
 *
 * On the photos stoker serves (high quality, sensor noise), libjpeg-turbo
 * spends most of its time in Huffman decoding: its fast path looks up 8 bits
 * at a time, so the long AC codes that large coefficients need fall into a
 * bit-at-a-time loop. This decoder looks up LB bits at once and, when the
 * code and the coefficient's magnitude bits fit in them, decodes both in one
 * table lookup; it refills its 64-bit buffer eight bytes at a time when no
 * 0xFF byte (stuffing or a marker) is among them. Everything else (headers,
 * table validation, IDCT, upsampling, color conversion, region cropping and
 * row skipping) stays libjpeg's: the decoder is installed through
 * cinfo->entropy after jpeg_start_decompress, for single-scan baseline
 * Huffman files only, and must produce the very coefficients libjpeg's own
 * would (tested byte for byte on the decoded output).
 *
 * Corrupt data (a bad code, a missing restart marker, data ending before the
 * last needed MCU) sets insufficient_data and h->corrupt; the caller turns
 * that into an error, as it does libjpeg's corrupt-data warnings. */
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

#include "huff.h"
#include "bits.h"

#include <limits.h>
#include <string.h>

/* Zigzag to natural order, padded so that corrupt runs past 63 stay inside
 * the block (as libjpeg's jpeg_natural_order is). */
const int stoker_natural[64 + 32] = {
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
    12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
    35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
    58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
};

/* ---- Tables ---- */

/* Fast entries (uint64). AC: one table lookup decodes one coefficient, or
 * two, or one and the end of the block, in one format so that the hot loop
 * does not branch on which:
 *   bits 0-4 total bits (bit 5 zero: see consume_e), 6-10 bits of the
 *   first symbol alone, 11-14 run 1, 15-18 run 2, bit 19 a second
 *   coefficient (k advances past it), bit 20 the end of the block follows,
 *   bit 21 set in every entry but raw ones, bit 22 raw (below), 23-26 the
 *   code's length, 27-30 the magnitude's bits, bit 31 (F_GO) set in the
 *   entries the decoder's run of lookups takes (F_OK without the end of
 *   the block), 32-47 value 1, 48-63 value 2 (0 without a second
 *   coefficient: it is stored at the next position, which is zero anyway).
 * The end of a block alone is a zero stored at the next position and the
 * end flag; ZRL is a zero after a run of 15.
 * Raw: the code fits in LB bits but its magnitude bits do not (a large
 * coefficient with a long code: most of what the LB-bit lookup misses on
 * photos). The entry has the code's length and the magnitude's bit count,
 * and the value is read from the bit buffer past the code, which holds
 * them (at least 32 bits are loaded, and a code and an AC magnitude take
 * at most 11 + 10, a DC one 11 + 11). F_OK is clear in it: the decoder
 * takes entries with F_OK in its hot loop and raw ones on a path of their
 * own (a decode that reads past a block uses the skip entries, below).
 * DC: bits 0-4 total bits, bit 21 set, bits 32-47 the difference; or raw. */
#define F_TWO (1ull << 19)
#define F_EOB (1ull << 20)
#define F_OK (1ull << 21)
#define F_RAW (1ull << 22)
#define F_GO (1ull << 31)

static uint64_t entry(int total, int len1, int r1, int r2, int two, int eob,
                      int v1, int v2) {
  return (uint64_t)total | (uint64_t)len1 << 6 | (uint64_t)r1 << 11 |
         (uint64_t)r2 << 15 | (two ? F_TWO : 0) | (eob ? F_EOB : F_GO) | F_OK |
         (uint64_t)(uint16_t)v1 << 32 | (uint64_t)(uint16_t)v2 << 48;
}

/* raw_entry: a symbol of code length l, run r and s magnitude bits whose
 * magnitude lies past the LB-bit window. */
static uint64_t raw_entry(int l, int r, int s) {
  return (entry(l + s, l + s, r, 0, 0, 0, 0, 0) & ~(F_OK | F_GO)) | F_RAW |
         (uint64_t)l << 23 | (uint64_t)s << 27;
}

/* sym decodes the code at the top of the LB-bit window w of which avail
 * bits are real; -1 when it is not complete there. */
static int sym(const stoker_htab *t, unsigned w, int avail, int *len) {
  unsigned e = t->lut[w & ((1u << STOKER_LB) - 1)];
  int l = (int)(e >> 8);
  if (!l || l > avail)
    return -1;
  *len = l;
  return (int)(e & 0xFF);
}

static uint64_t fast_dc(const stoker_htab *t, unsigned i) {
  int l, s = sym(t, i, STOKER_LB, &l);
  unsigned v;
  if (s < 0 || s > 11)
    return 0; /* a long code, or a size no 8-bit scan has: the general path */
  if (l + s > STOKER_LB)
    return raw_entry(l, 0, s);
  v = s ? (i >> (STOKER_LB - l - s)) & ((1u << s) - 1) : 0;
  return entry(l + s, l + s, 0, 0, 0, 0, s ? extend(v, s) : 0, 0);
}

static uint64_t fast_ac(const stoker_htab *t, unsigned i) {
  int l1, l2, rs1 = sym(t, i, STOKER_LB, &l1), rs2, s1, s2, used, v1 = 0;
  if (rs1 < 0)
    return 0; /* a code longer than LB bits: the general path */
  s1 = rs1 & 15;
  if (!s1 && rs1 != 0xF0)
    /* End of block (libjpeg takes any run/0 but ZRL as one): a zero stored
     * where a zero is, then the loop ends. */
    return entry(l1, l1, 0, 0, 0, 1, 0, 0);
  if (l1 + s1 > STOKER_LB)
    return s1 <= 10 ? raw_entry(l1, rs1 >> 4, s1) : 0;
  /* ZRL is a coefficient of value zero after a run of 15: sixteen zeros. */
  if (s1)
    v1 = extend((i >> (STOKER_LB - l1 - s1)) & ((1u << s1) - 1), s1);
  used = l1 + s1;
  /* A second symbol in the bits left: a coefficient or the end of block. */
  rs2 = sym(t, i << used, STOKER_LB - used, &l2);
  if (rs2 == 0)
    return entry(used + l2, used, rs1 >> 4, 0, 0, 1, v1, 0);
  if (rs2 > 0 && (s2 = rs2 & 15) && used + l2 + s2 <= STOKER_LB) {
    int v2 = extend(((i << used) >> (STOKER_LB - l2 - s2)) & ((1u << s2) - 1), s2);
    return entry(used + l2 + s2, used, rs1 >> 4, rs2 >> 4, 1, 0, v1, v2);
  }
  return entry(used, used, rs1 >> 4, 0, 0, 0, v1, 0);
}

/* Skip entries (uint16), AC only: the symbols at the start of an LB-bit
 * window, as many as are whole in it (or one whose magnitude runs past
 * it), up to and with the end of the block:
 *   bits 0-4 their bits, 5-10 the last coefficient's offset from k (ZRL is
 *   a coefficient of value zero after a run of 15), bit 11 the end of the
 *   block follows it.
 * k advances past the last coefficient. The decoder takes an entry only
 * when that coefficient lands before 63 (one there ends the block, and
 * what follows is the next block's). None (a code longer than LB): 0 bits,
 * the offset 63 (S_NONE), so that the test of where the last coefficient
 * lands sends it to the general path. A coefficient alone whose magnitude
 * runs past the window (more bits than a run of lookups may take between
 * refills) is S_NONE too, with its bits and, in bits 12-15, its run: the
 * general path takes it from there. */
#define S_EOB (1u << 11)
#define S_NONE (63u << 5)

static uint16_t skip_ac(const stoker_htab *t, unsigned i) {
  int used = 0, pos = 0, last = 0, n = 0, eob = 0, l, rs, r, s;
  for (;;) {
    rs = sym(t, i << used, STOKER_LB - used, &l);
    if (rs < 0)
      break;
    r = rs >> 4;
    s = rs & 15;
    if (!s && rs != 0xF0) { /* the end of the block */
      used += l;
      eob = 1;
      break;
    }
    if (used + l + s > STOKER_LB || pos + r > 61) {
      if (!n && s <= 10) /* alone, its magnitude past the window */
        return (uint16_t)((l + s) | S_NONE | r << 12);
      break;
    }
    used += l + s;
    last = pos + r;
    pos = last + 1;
    n++;
  }
  if (!n && !eob)
    return S_NONE;
  return (uint16_t)(used | last << 5 | (eob ? S_EOB : 0));
}

void stoker_htab_build(stoker_htab *t, const JHUFF_TBL *src, int ac) {
  unsigned code = 0;
  int k = 0, l, i;
  memset(t, 0, sizeof *t);
  memcpy(t->huffval, src->huffval, sizeof t->huffval);
  for (l = 1; l <= 16; l++) {
    int n = src->bits[l];
    t->maxcode[l] = -1;
    if (n) {
      t->valoff[l] = k - (int)code;
      for (i = 0; i < n; i++, k++, code++) {
        /* libjpeg validated the table: code < 1 << l, k < 256. */
        if (l <= STOKER_LB) {
          unsigned lo = code << (STOKER_LB - l), hi = (code + 1) << (STOKER_LB - l);
          uint16_t e = (uint16_t)(l << 8 | src->huffval[k]);
          for (; lo < hi; lo++)
            t->lut[lo] = e;
        }
      }
      t->maxcode[l] = (int32_t)code - 1;
    }
    code <<= 1;
  }
  t->maxcode[17] = 0x7FFFFFFF; /* no valid code is longer: stop the search */
  for (i = 0; i < (1 << STOKER_LB); i++)
    t->fast[i] = ac ? fast_ac(t, (unsigned)i) : fast_dc(t, (unsigned)i);
  if (ac)
    for (i = 0; i < (1 << STOKER_LB); i++)
      t->skip[i] = skip_ac(t, (unsigned)i);
}

static const stoker_htab *table(stoker_huff *h, int ac, int no,
                                const JHUFF_TBL *src) {
  stoker_htab *t = &h->tabs[ac][no];
  /* Tables rarely change between images of one dataset: rebuild only when
   * the definition does. */
  if (!h->built[ac][no] || memcmp(h->def[ac][no].bits, src->bits, sizeof src->bits) ||
      memcmp(h->def[ac][no].huffval, src->huffval, sizeof src->huffval)) {
    stoker_htab_build(t, src, ac);
    memcpy(h->def[ac][no].bits, src->bits, sizeof src->bits);
    memcpy(h->def[ac][no].huffval, src->huffval, sizeof src->huffval);
    h->built[ac][no] = 1;
  }
  return t;
}

/* ---- Decoding ---- */

/* restart reads an expected RSTn marker and resets the predictors. */
static int restart(stoker_huff *h, j_decompress_ptr ci) {
  stoker_bits *b = &h->b;
  int i;
  /* Only the last byte's padding may be left unread. */
  if (b->n - b->fake >= 8)
    return 0;
  while (b->p < b->end && *b->p == 0xFF && b->p + 1 < b->end && b->p[1] == 0xFF)
    b->p++; /* fill bytes */
  if (b->end - b->p < 2 || b->p[0] != 0xFF || b->p[1] != 0xD0 + h->next_rst)
    return 0;
  b->p += 2;
  b->buf = 0;
  b->n = b->fake = b->marker = 0;
  h->next_rst = (h->next_rst + 1) & 7;
  h->restarts_to_go = (int)ci->restart_interval;
  for (i = 0; i < MAX_COMPS_IN_SCAN; i++)
    h->pred[i] = 0;
  return 1;
}

/* consume_e consumes a fast entry's total bits (bits 0-4; bit 5 is
 * zero). The shift takes the entry as it is (x86 shifts mask the count to
 * six bits, so the compiler drops the mask): one instruction less between
 * a lookup and the next. The bit count takes the count masked otherwise,
 * so that the two do not share one masked value. */
static inline void consume_e(stoker_bits *b, uint64_t e) {
  b->buf <<= (e & 63);
  b->n -= (int)(e & 31);
}

/* raw_value is a raw entry's value (see the fast entries): the magnitude
 * bits after its code, at the top of the buffer. */
static inline int raw_value(const stoker_bits *b, uint64_t e) {
  int l = (int)(e >> 23) & 15, s = (int)(e >> 27) & 15;
  return extend((unsigned)((b->buf << l) >> (64 - s)), s);
}

/* decode_blocks_ decodes the MCU at the reader into MCU_data (store 0:
 * only reads past it); inlined with store 0 and 1 by decode_blocks, so
 * that reading past an MCU (most of a first decode's, on small photos)
 * tests for its blocks nowhere and reads past them with the skip
 * entries. */
static inline __attribute__((always_inline)) void
decode_blocks_(stoker_huff *h, j_decompress_ptr ci, JBLOCKROW *MCU_data,
               const int store) {
  stoker_bits b;
  int blkn, bad = 0;
  b = h->b; /* a local copy keeps the reader in registers */
  for (blkn = 0; blkn < ci->blocks_in_MCU; blkn++) {
    JCOEF *block = store ? MCU_data[blkn][0] : NULL;
    const stoker_htab *dc = h->dc[blkn], *ac = h->ac[blkn];
    int c = ci->MCU_membership[blkn], s, k;
    unsigned x = 0;
    uint64_t e = 0;
    if (b.n < 32)
      refill(&b);
    e = dc->fast[peek(&b, STOKER_LB)];
    if (e) {
      int d = (int16_t)(e >> 32);
      if (e & F_RAW)
        d = raw_value(&b, e);
      consume_e(&b, e);
      h->pred[c] += d;
    } else {
      s = decode_sym(&b, dc, &bad);
      if (s) {
        unsigned v = peek(&b, s);
        consume(&b, s);
        h->pred[c] += extend(v, s);
      }
    }
    if (store)
      block[0] = (JCOEF)h->pred[c];
    for (k = 1; k < 64;) {
      int rs, r, at;
      /* At least 56 bits after a refill: a run of five lookups of up to
       * LB bits each, with no test of the bits left between them (a
       * branch the data decides, where the lookups' chain waits on every
       * misprediction). An entry that is not one of those (raw, longer
       * codes, the end of the block) leaves the run for the paths below,
       * which refill as they need. */
      refill(&b);
      if (!store) {
        /* The skip entries: an entry that is none has its last
         * coefficient at 63, so that one test sends it and a block's last
         * coefficient to the general path. k stays below 63 here. */
#define SKIP_STEP                                                              \
  x = ac->skip[peek(&b, STOKER_LB)];                                           \
  if (k + (int)((x >> 5) & 63) >= 63)                                          \
    goto general;                                                              \
  consume(&b, (int)(x & 31));                                                  \
  k += (int)((x >> 5) & 63) + 1;                                               \
  if (x & S_EOB)                                                               \
    break;
        SKIP_STEP SKIP_STEP SKIP_STEP SKIP_STEP SKIP_STEP
#undef SKIP_STEP
        continue;
      }
      /* The coefficient entries that go on (F_GO): one or two
       * coefficients, no end of block. A first coefficient at 63 (or past
       * it, corrupt) ends the block, as does k at 64 from the entry
       * before (a second coefficient at 63): both go to last. */
#define STORE_STEP                                                             \
  e = ac->fast[peek(&b, STOKER_LB)];                                           \
  if (!(e & F_GO))                                                             \
    goto slow;                                                                 \
  at = k + ((int)(e >> 11) & 15);                                              \
  if (at >= 63)                                                                \
    goto last;                                                                 \
  block[stoker_natural[at]] = (JCOEF)(int16_t)(e >> 32);                       \
  consume_e(&b, e);                                                            \
  k = at + 1 + ((int)(e >> 15) & 15);                                          \
  block[stoker_natural[k]] = (JCOEF)(int16_t)(e >> 48);                        \
  k += (int)(e >> 19) & 1;
      if (store) {
        STORE_STEP STORE_STEP STORE_STEP STORE_STEP STORE_STEP
        continue;
      }
#undef STORE_STEP
    last:
      if (k >= 64)
        break;
      block[stoker_natural[at]] = (JCOEF)(int16_t)(e >> 32);
      consume(&b, (int)(e >> 6) & 31); /* what follows is not ours */
      k = at + 1;
      break;
    slow:
      if (k >= 64)
        break;
      if (b.n < 32)
        refill(&b);
      if (e & F_OK) { /* the end of the block follows */
        k += (int)(e >> 11) & 15;
        block[stoker_natural[k]] = (JCOEF)(int16_t)(e >> 32);
        if (++k >= 64) { /* the block ended: what follows is not ours */
          consume(&b, (int)(e >> 6) & 31);
          break;
        }
        consume_e(&b, e);
        break;
      }
      if (e & F_RAW) {
        k += (int)(e >> 11) & 15;
        block[stoker_natural[k]] = (JCOEF)raw_value(&b, e);
        consume_e(&b, e);
        k++;
        continue;
      }
    general:
      if (b.n < 32)
        refill(&b);
      if (!store && (x & S_NONE) == S_NONE && (x & 31) && k + (int)(x >> 12) < 63) {
        /* a coefficient whose magnitude runs past the window */
        consume(&b, (int)(x & 31));
        k += (int)(x >> 12) + 1;
        continue;
      }
      rs = decode_sym(&b, ac, &bad);
      r = rs >> 4;
      s = rs & 15;
      if (s) {
        unsigned v;
        k += r;
        v = peek(&b, s);
        consume(&b, s);
        if (store)
          block[stoker_natural[k]] = (JCOEF)extend(v, s);
        k++;
      } else {
        if (r != 15)
          break;
        k += 16;
      }
    }
    /* A run past the block's end is corrupt data, not a coefficient. */
    if (k > 64)
      bad = 1;
  }
  h->b = b;
  /* Data that ran out (zero bits read past a marker or the end) or a code
   * no table has is corrupt. */
  if (bad || b.n < b.fake) {
    h->corrupt = 1;
    h->pub.insufficient_data = TRUE;
  }
  ci->src->next_input_byte = b.p;
  ci->src->bytes_in_buffer = (size_t)(b.end - b.p);
}

static void decode_blocks(stoker_huff *h, j_decompress_ptr ci, JBLOCKROW *MCU_data) {
  if (MCU_data)
    decode_blocks_(h, ci, MCU_data, 1);
  else
    decode_blocks_(h, ci, NULL, 0);
}

/* ---- Positions, checkpoints and seeks ----
 *
 * The reader is "at" MCU pos: what it would decode next. Its state there
 * is the bit position of its next bit in the scan and the DC predictors;
 * the restart counters follow from pos alone. At an MCU that starts a
 * restart interval the state is the one after the marker (byte-aligned,
 * predictors zero), whichever way the reader got there. */

static void corrupt(stoker_huff *h) {
  h->corrupt = 1;
  h->pub.insufficient_data = TRUE;
}

/* reader_bits is the bit position of the reader's next bit, counted from
 * the scan's first byte; -1 when it has read past the data. The bits in
 * the buffer came from the data bytes just before b.p (a stuffed 0xFF 0x00
 * is one data byte, and 0xFF is followed by 0x00 nowhere else inside a
 * restart interval), so walking back over as many data bytes as it holds
 * finds the byte of its next bit. */
static long reader_bits(const stoker_huff *h) {
  const stoker_bits *b = &h->b;
  const uint8_t *p = b->p;
  int real = b->n - b->fake, k;
  if (real < 0)
    return -1;
  for (k = (real + 7) >> 3; k > 0; k--)
    p -= (p - h->scan >= 2 && p[-1] == 0x00 && p[-2] == 0xFF) ? 2 : 1;
  return (long)(p - h->scan) * 8 + ((8 - (real & 7)) & 7);
}

/* seek_bits puts the reader at bit position v - 1 of the scan (v as the
 * index stores it), which the caller has checked lies inside the scan. */
static void seek_bits(stoker_huff *h, uint32_t v) {
  stoker_bits *b = &h->b;
  uint32_t at = v - 1;
  b->p = h->scan + (at >> 3);
  b->buf = 0;
  b->n = b->fake = b->marker = 0;
  refill(b);
  consume(b, (int)(at & 7));
}

/* set_pos says the reader is at MCU m: its column and next checkpoint. */
static void set_pos(stoker_huff *h, long m) {
  h->pos = m;
  h->pos_col = (int)(m % h->mpr);
  if (h->ix) {
    int s = h->ix->stride, j = (h->pos_col + s - 1) / s;
    h->next_ck = j * s; /* >= mpr: none left in this row */
    h->ck = (int)(m / h->mpr) * h->ix->cpr + j;
  }
}

/* set_restarts sets the restart counters of a reader at MCU m (after the
 * marker that starts m's interval, if one does). */
static void set_restarts(stoker_huff *h, j_decompress_ptr ci, long m) {
  long r = (long)ci->restart_interval;
  if (!r)
    return;
  h->restarts_to_go = (int)(r - m % r);
  h->next_rst = (int)((m / r) & 7);
}

/* checkpoint records the reader's state as checkpoint h->ck, or checks it
 * against what is recorded there. The reader's state is sure (decoding
 * starts only at sure states): a sure checkpoint that disagrees means the
 * index is not this file's, and the decode stops (ix->bad); one not sure
 * that agrees becomes sure, one that disagrees is replaced (ix->lied). */
static void checkpoint(stoker_huff *h) {
  stoker_hix *ix = h->ix;
  int k = h->ck, nc = ix->ncomp, c;
  long at;
  uint32_t v;
  if (k < 0 || k >= ix->n)
    return;
  at = reader_bits(h);
  if (at < 0 || at >= (long)HIX_POS)
    return;
  v = ix->pos[k];
  if (v) {
    int same = (v & HIX_POS) == (uint32_t)at + 1;
    for (c = 0; c < nc && same; c++)
      same = ix->dc[(size_t)k * nc + c] == h->pred[c];
    if (same) {
      if (!(v & HIX_SURE)) {
        ix->pos[k] = v | HIX_SURE;
        ix->changed = 1;
      }
      return;
    }
    if (v & HIX_SURE) {
      ix->bad = 1;
      corrupt(h);
      return;
    }
    ix->lied = 1;
    ix->pos[k] = 0;
  }
  for (c = 0; c < nc; c++)
    if (h->pred[c] < -ix->dcmax[c] || h->pred[c] > ix->dcmax[c])
      return; /* a predictor no checkpoint may have (the index's layout, below): leave it */
  ix->pos[k] = ((uint32_t)at + 1) | HIX_SURE;
  for (c = 0; c < nc; c++)
    ix->dc[(size_t)k * nc + c] = (int16_t)h->pred[c];
  ix->changed = 1;
}

/* step decodes the MCU at the reader into data (NULL: reads past it):
 * first the restart marker that starts its interval, if one does, then the
 * checkpoint there, if it is one. */
static inline void step(stoker_huff *h, j_decompress_ptr ci, JBLOCKROW *data) {
  if (ci->restart_interval && h->restarts_to_go == 0 && !restart(h, ci)) {
    corrupt(h);
    return;
  }
  if (h->ix && h->pos_col == h->next_ck) {
    checkpoint(h);
    h->ck++;
    h->next_ck += h->ix->stride;
    if (h->corrupt)
      return;
  }
  if (ci->restart_interval)
    h->restarts_to_go--;
  if (h->cc && h->cc_room && !h->cc->at[h->pos]) {
    /* store it in the coefficient cache: decoded in passing, into scratch */
    if (!data) {
      memset(h->scratch, 0, (size_t)ci->blocks_in_MCU * sizeof(JBLOCK));
      data = h->scratch_rows;
    }
    decode_blocks(h, ci, data);
    if (!h->corrupt && coefs_put(h->cb, h->pos, ci->blocks_in_MCU, data, &h->cc_room))
      h->cc_stored++;
  } else {
    decode_blocks(h, ci, data);
  }
  h->decoded++;
  h->pos++;
  if (++h->pos_col == h->mpr) {
    h->pos_col = 0;
    h->next_ck = 0;
  }
}

/* seek_checkpoint moves the reader forward to the last sure checkpoint
 * at or before the MCU at (row, col), if there is one past it. */
static void seek_checkpoint(stoker_huff *h, j_decompress_ptr ci, long row,
                            int col) {
  stoker_hix *ix = h->ix;
  int s = ix->stride, j = col / s, c;
  long r = row;
  if (row >= ix->rows)
    return;
  for (;;) {
    long at = r * h->mpr + (long)j * s, k = r * ix->cpr + j;
    if (at <= h->pos)
      return; /* nothing known between the reader and m */
    if (ix->pos[k] & HIX_SURE) {
      seek_bits(h, ix->pos[k] & HIX_POS);
      for (c = 0; c < ix->ncomp; c++)
        h->pred[c] = ix->dc[(size_t)k * ix->ncomp + c];
      set_restarts(h, ci, at);
      set_pos(h, at);
      h->ck_seeks++;
      return;
    }
    if (j > 0) {
      j--;
    } else {
      if (r == 0)
        return;
      r--;
      j = ix->cpr - 1;
    }
  }
}

/* seek_restart moves the reader forward to the restart marker that starts
 * MCU m's interval, if that is past it, by looking for markers in the
 * bytes (no decoding): past the q-th RSTn marker of the scan the interval
 * q begins, at MCU q * restart_interval, byte-aligned, with zero
 * predictors. Anything unexpected (another marker, one out of sequence,
 * the end) leaves the reader where it was, to find the error by decoding. */
static void seek_restart(stoker_huff *h, j_decompress_ptr ci, long m) {
  long r = (long)ci->restart_interval, at = m / r * r, q = m / r, num;
  const uint8_t *p = h->b.p, *end = h->b.end;
  int i;
  if (at <= h->pos)
    return;
  /* The number of the next marker ahead of the reader's bytes: at the
   * start of an interval whose marker is still to be read (restarts_to_go
   * 0), that interval's own; otherwise the next interval's. */
  num = h->restarts_to_go == 0 ? h->pos / r : h->pos / r + 1;
  while (end - p >= 2) {
    const uint8_t *f = memchr(p, 0xFF, (size_t)(end - p - 1));
    if (!f)
      return;
    if (f[1] == 0x00) { /* stuffed 0xFF */
      p = f + 2;
      continue;
    }
    if (f[1] == 0xFF) { /* fill before a marker */
      p = f + 1;
      continue;
    }
    if (f[1] != 0xD0 + ((num - 1) & 7))
      return;
    if (num == q) {
      stoker_bits *b = &h->b;
      b->p = f + 2;
      b->buf = 0;
      b->n = b->fake = b->marker = 0;
      for (i = 0; i < MAX_COMPS_IN_SCAN; i++)
        h->pred[i] = 0;
      set_restarts(h, ci, at);
      set_pos(h, at);
      h->rst_seeks++;
      return;
    }
    num++;
    p = f + 2;
  }
}

/* catch_up brings the reader from its MCU to MCU m (column col): it jumps
 * to the nearest sure checkpoint or restart marker before m, if either is
 * past the reader, then decodes the MCUs left in between without keeping
 * their coefficients. */
static void catch_up(stoker_huff *h, j_decompress_ptr ci, long m, int col) {
  if (h->ix)
    seek_checkpoint(h, ci, m / h->mpr, col);
  if (ci->restart_interval)
    seek_restart(h, ci, m);
  while (h->pos < m && !h->corrupt)
    step(h, ci, NULL);
}

static boolean decode_mcu(j_decompress_ptr ci, JBLOCKROW *MCU_data) {
  stoker_huff *h = (stoker_huff *)ci->entropy;
  long m = h->call++;
  int col = h->call_col;
  if (++h->call_col == h->mpr)
    h->call_col = 0;
  if (h->corrupt)
    return TRUE; /* leave the blocks zero, as libjpeg does past bad data */
  /* Lazy: libjpeg discards calls without a buffer (skipped rows) and
   * inverse-transforms only columns [fc, lc]. */
  if (h->lazy && (!MCU_data || col < h->fc || col > h->lc))
    return TRUE;
  if (MCU_data)
    h->wanted++;
  if (h->cc && MCU_data && h->cc->at[m]) {
    coefs_get(h->cc, h->cb, m, MCU_data);
    h->cc_hits++;
    return TRUE;
  }
  if (h->coefs_only) {
    if (MCU_data)
      h->corrupt = 1;
    return TRUE;
  }
  if (h->pos != m)
    catch_up(h, ci, m, col);
  if (!h->corrupt)
    step(h, ci, MCU_data);
  return TRUE;
}

static void start_pass(j_decompress_ptr ci) {
  /* Only single-scan files get this decoder: a second scan is corrupt. */
  stoker_huff *h = (stoker_huff *)ci->entropy;
  h->corrupt = 1;
  h->pub.insufficient_data = TRUE;
}

int stoker_huff_install(stoker_huff *h, j_decompress_ptr ci) {
  int blkn, i;
  if (ci->progressive_mode || ci->arith_code || ci->data_precision != 8 ||
      ci->comps_in_scan != ci->num_components || ci->Ss != 0 || ci->Se != 63 ||
      ci->Ah != 0 || ci->Al != 0 || ci->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU ||
      ci->MCUs_per_row < 1)
    return 0;
  for (blkn = 0; blkn < ci->blocks_in_MCU; blkn++) {
    jpeg_component_info *comp = ci->cur_comp_info[ci->MCU_membership[blkn]];
    JHUFF_TBL *dc = ci->dc_huff_tbl_ptrs[comp->dc_tbl_no];
    JHUFF_TBL *ac = ci->ac_huff_tbl_ptrs[comp->ac_tbl_no];
    if (!dc || !ac)
      return 0;
    h->dc[blkn] = table(h, 0, comp->dc_tbl_no, dc);
    h->ac[blkn] = table(h, 1, comp->ac_tbl_no, ac);
  }
  memset(&h->b, 0, sizeof h->b);
  h->scan = ci->src->next_input_byte;
  h->mpr = (int)ci->MCUs_per_row;
  h->call = h->pos = 0;
  h->call_col = h->pos_col = h->next_ck = h->ck = 0;
  h->lazy = 0;
  h->fc = 0;
  h->lc = h->mpr - 1;
  h->ix = NULL;
  h->cc = NULL;
  h->cb = NULL;
  h->cc_room = 0;
  h->cc_hits = h->cc_stored = h->wanted = 0;
  for (i = 0; i < D_MAX_BLOCKS_IN_MCU; i++)
    h->scratch_rows[i] = &h->scratch[i];
  h->decoded = 0;
  h->ck_seeks = h->rst_seeks = 0;
  h->b.p = ci->src->next_input_byte;
  h->b.end = ci->src->next_input_byte + ci->src->bytes_in_buffer;
  for (i = 0; i < MAX_COMPS_IN_SCAN; i++)
    h->pred[i] = 0;
  h->restarts_to_go = (int)ci->restart_interval;
  h->next_rst = 0;
  h->corrupt = 0;
  h->pub.start_pass = start_pass;
  h->pub.decode_mcu = decode_mcu;
  h->pub.insufficient_data = FALSE;
  /* stoker_huff.pub has the layout of libjpeg's entropy decoder object
   * (jpegint.h, not installed; the same since libjpeg 6b). */
  ci->entropy = (struct jpeg_entropy_decoder *)(void *)&h->pub;
  return 1;
}

void stoker_huff_lazy(stoker_huff *h, int fc, int lc) {
  h->lazy = 1;
  h->fc = fc;
  h->lc = lc;
}

/* ---- The decoder index as bytes ----
 *
 * The decoder index of one JPEG as bytes: what the Go side keeps in its
 * cache and writes to disk, and what stoker_decode reads and extends. See
 * huff.h (stoker_hix) for what a checkpoint is and the code above for how
 * they are made and used.
 *
 * Layout, in the machine's byte order (little-endian on every platform
 * stoker builds for; a big-endian machine would read a foreign magic and
 * start cold):
 *
 *   0  u32 magic "SIX1"
 *   4  u16 MCUs per row         6  u16 MCU rows
 *   8  u8  components in scan   9  u8  stride (MCUs between checkpoints)
 *   10 u16 restart interval
 *   12 u32 offset of the scan's data in the file
 *   16 u32 bytes from there to the end of the file
 *   20 u32 checkpoints known    24 8 bytes zero
 *   32 u32 pos[n]               (bit position in the scan + 1; 0 unknown;
 *                                the top bit, HIX_SURE, only in memory)
 *      i16 dc[n * components]
 *
 * with n = rows * ceil(MCUs per row / stride), checkpoint k at MCU row
 * k / cpr, column (k % cpr) * stride. Everything but the checkpoints is
 * what the file's headers say: a blob whose header disagrees with the
 * file's is not used (stale). Its checkpoints are checked too, as far as
 * the file's bytes allow without decoding (bad if one fails):
 *
 *   - positions inside the scan and increasing, by at least 2 bits per
 *     block of the MCUs between two (a DC code and an end of block);
 *   - and, for those not sure (a checkpoint a decode here recorded or
 *     confirmed is sure; one read from a file is not): DC predictors an 8-bit scan with the file's quantization can
 *     have (|dc| <= 1024 / q + 1, q the component's DC quantizer); the
 *     checkpoint at MCU 0 at bit 0 with zero predictors; one at the start
 *     of a restart interval byte-aligned just after the marker of that
 *     number, with zero predictors.
 *
 * What bytes cannot show (a predictor off by a little, a position from
 * another file that happens to fit) the decoder finds when it passes the
 * checkpoint, decoding from a sure state; it never starts at one not sure
 * (huff.h, stoker_hix). */
#define HIX_MAGIC 0x31584953u /* "SIX1" */
#define HIX_HEADER 32

size_t hix_geometry(stoker_hix *ix, j_decompress_ptr ci, int stride) {
  long mpr = (long)ci->MCUs_per_row, rows = (long)ci->MCU_rows_in_scan;
  if (mpr < 1 || rows < 1 || mpr > 65535 || rows > 65535 ||
      ci->restart_interval > 65535 || ci->comps_in_scan < 1 ||
      ci->comps_in_scan > MAX_COMPS_IN_SCAN)
    return 0;
  if (stride < 1)
    stride = 1;
  if (stride > mpr)
    stride = (int)mpr;
  if (stride > 255)
    stride = 255;
  ix->mpr = (int)mpr;
  ix->rows = (int)rows;
  ix->ncomp = ci->comps_in_scan;
  ix->stride = stride;
  ix->cpr = (int)((mpr + stride - 1) / stride);
  /* rows x cpr is up to 65535 x 65535: more than an int holds */
  if ((long long)ix->rows * ix->cpr > INT_MAX)
    return 0;
  ix->n = ix->rows * ix->cpr;
  return HIX_HEADER + (size_t)ix->n * (4 + 2 * (size_t)ix->ncomp);
}

static uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint16_t rd16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static void wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* hix_header writes buf's header for ix and the scan at scan_off, scan_len. */
void hix_header(uint8_t *buf, const stoker_hix *ix, int restart,
                uint32_t scan_off, uint32_t scan_len, uint32_t known) {
  memset(buf, 0, HIX_HEADER);
  wr32(buf, HIX_MAGIC);
  wr16(buf + 4, (uint16_t)ix->mpr);
  wr16(buf + 6, (uint16_t)ix->rows);
  buf[8] = (uint8_t)ix->ncomp;
  buf[9] = (uint8_t)ix->stride;
  wr16(buf + 10, (uint16_t)restart);
  wr32(buf + 12, scan_off);
  wr32(buf + 16, scan_len);
  wr32(buf + 20, known);
}

/* hix_attach points ix's arrays into buf (laid out as above). */
void hix_attach(stoker_hix *ix, uint8_t *buf) {
  ix->pos = (uint32_t *)(void *)(buf + HIX_HEADER);
  ix->dc = (int16_t *)(void *)(buf + HIX_HEADER + (size_t)ix->n * 4);
  ix->changed = ix->bad = ix->lied = 0;
}

/* hix_valid checks blob (len bytes) against a scan with ix's geometry
 * (hix_geometry) and dcmax, restart interval restart, blocks per MCU
 * blocks, and data at scan_off, scan_len (scan: its first byte), as the
 * layout's comment says: 1 usable, 0 another scan's header, -1 a
 * checkpoint that cannot be right. */
int hix_valid(const uint8_t *blob, size_t len, const stoker_hix *ix,
              int restart, uint32_t scan_off, uint32_t scan_len,
              const uint8_t *scan, int blocks) {
  size_t size = HIX_HEADER + (size_t)ix->n * (4 + 2 * (size_t)ix->ncomp);
  uint64_t limit = (uint64_t)scan_len * 8 + 1, prev = 0;
  const uint8_t *dc = blob + HIX_HEADER + (size_t)ix->n * 4;
  long prev_m = -1, row_m = -(long)ix->mpr, m;
  int k, c, col = ix->cpr - 1;
  if (!blob || len != size || rd32(blob) != HIX_MAGIC ||
      rd16(blob + 4) != ix->mpr || rd16(blob + 6) != ix->rows ||
      blob[8] != ix->ncomp || blob[9] != ix->stride ||
      rd16(blob + 10) != restart || rd32(blob + 12) != scan_off ||
      rd32(blob + 16) != scan_len)
    return 0;
  for (k = 0; k < ix->n; k++) {
    uint32_t v = rd32(blob + HIX_HEADER + (size_t)k * 4), p = v & HIX_POS;
    int zero = 1;
    if (++col == ix->cpr) { /* (k's MCU, without a division per k) */
      col = 0;
      row_m += ix->mpr;
    }
    m = row_m + (long)col * ix->stride;
    if (!p) {
      if (v)
        return -1;
      continue;
    }
    if (p > limit || p <= prev ||
        (prev_m >= 0 && p - prev < (uint64_t)(m - prev_m) * 2 * (uint64_t)blocks))
      return -1;
    prev = p;
    prev_m = m;
    if (v & HIX_SURE)
      continue;
    for (c = 0; c < ix->ncomp; c++) {
      int d = (int16_t)rd16(dc + ((size_t)k * ix->ncomp + c) * 2);
      if (d > ix->dcmax[c] || d < -ix->dcmax[c])
        return -1;
      zero &= d == 0;
    }
    if (m == 0 && (p != 1 || !zero))
      return -1;
    if (m > 0 && restart && m % restart == 0) {
      uint32_t at = (p - 1) >> 3;
      if ((p - 1) & 7 || !zero || at < 2 || scan[at - 2] != 0xFF ||
          scan[at - 1] != 0xD0 + ((m / restart - 1) & 7))
        return -1;
    }
  }
  return 1;
}

/* hix_known counts ix's known checkpoints, and in *unsure those not sure. */
uint32_t hix_known(const stoker_hix *ix, uint32_t *unsure) {
  uint32_t n = 0, u = 0;
  int k;
  for (k = 0; k < ix->n; k++) {
    n += ix->pos[k] != 0;
    u += ix->pos[k] != 0 && !(ix->pos[k] & HIX_SURE);
  }
  *unsure = u;
  return n;
}
