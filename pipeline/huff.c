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
#include "huff.h"

#include <string.h>

/* Zigzag to natural order, padded so a corrupt run past 63 stays inside the
 * block (as libjpeg's jpeg_natural_order is). */
static const int natural[64 + 17] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12,
    19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42,
    49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52,
    45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

/* ---- Bit reader ---- */

static void refill_slow(stoker_bits *b) {
  while (b->n <= 56) {
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

/* refill makes n >= 56. The fast path loads eight bytes and, when none is
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

/* ---- Tables ---- */

static void build(stoker_htab *t, const JHUFF_TBL *src, int ac) {
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
  if (!ac)
    return;
  /* Combined entries: code and magnitude bits within LB. */
  for (i = 0; i < (1 << STOKER_LB); i++) {
    int len = t->lut[i] >> 8, rs = t->lut[i] & 0xFF, r = rs >> 4, s = rs & 15;
    if (len && s && len + s <= STOKER_LB) {
      unsigned v = ((unsigned)i >> (STOKER_LB - len - s)) & ((1u << s) - 1);
      t->fast_ac[i] = (int32_t)((uint32_t)extend(v, s) << 16) | r << 8 | (len + s);
    }
  }
}

static const stoker_htab *table(stoker_huff *h, int ac, int no,
                                const JHUFF_TBL *src) {
  stoker_htab *t = &h->tabs[ac][no];
  /* Tables rarely change between images of one dataset: rebuild only when
   * the definition does. */
  if (!h->built[ac][no] || memcmp(h->def[ac][no].bits, src->bits, sizeof src->bits) ||
      memcmp(h->def[ac][no].huffval, src->huffval, sizeof src->huffval)) {
    build(t, src, ac);
    memcpy(h->def[ac][no].bits, src->bits, sizeof src->bits);
    memcpy(h->def[ac][no].huffval, src->huffval, sizeof src->huffval);
    h->built[ac][no] = 1;
  }
  return t;
}

/* ---- Decoding ---- */

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

static boolean decode_mcu(j_decompress_ptr ci, JBLOCKROW *MCU_data) {
  stoker_huff *h = (stoker_huff *)ci->entropy;
  stoker_bits b;
  int blkn, bad = 0;
  if (h->corrupt)
    return TRUE; /* leave the blocks zero, as libjpeg does past bad data */
  if (ci->restart_interval) {
    if (h->restarts_to_go == 0 && !restart(h, ci)) {
      h->corrupt = 1;
      h->pub.insufficient_data = TRUE;
      return TRUE;
    }
    h->restarts_to_go--;
  }
  b = h->b; /* a local copy keeps the reader in registers */
  for (blkn = 0; blkn < ci->blocks_in_MCU; blkn++) {
    JCOEF *block = MCU_data ? MCU_data[blkn][0] : NULL;
    const stoker_htab *dc = h->dc[blkn], *ac = h->ac[blkn];
    int c = ci->MCU_membership[blkn], s, k;
    if (b.n < 32)
      refill(&b);
    s = decode_sym(&b, dc, &bad);
    if (s) {
      unsigned v = peek(&b, s);
      consume(&b, s);
      h->pred[c] += extend(v, s);
    }
    if (block) {
      block[0] = (JCOEF)h->pred[c];
      for (k = 1; k < 64;) {
        int32_t e;
        int rs, r;
        if (b.n < 32)
          refill(&b);
        e = ac->fast_ac[peek(&b, STOKER_LB)];
        if (e) {
          k += (e >> 8) & 15;
          consume(&b, e & 0xFF);
          block[natural[k]] = (JCOEF)(e >> 16);
          k++;
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
          block[natural[k]] = (JCOEF)extend(v, s);
          k++;
        } else {
          if (r != 15)
            break;
          k += 16;
        }
      }
    } else {
      /* Skipped rows: find the block's end, compute nothing. */
      for (k = 1; k < 64;) {
        int32_t e;
        int rs;
        if (b.n < 32)
          refill(&b);
        e = ac->fast_ac[peek(&b, STOKER_LB)];
        if (e) {
          k += ((e >> 8) & 15) + 1;
          consume(&b, e & 0xFF);
          continue;
        }
        rs = decode_sym(&b, ac, &bad);
        s = rs & 15;
        if (s) {
          k += (rs >> 4) + 1;
          consume(&b, s);
        } else {
          if ((rs >> 4) != 15)
            break;
          k += 16;
        }
      }
    }
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
      ci->Ah != 0 || ci->Al != 0 || ci->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU)
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
