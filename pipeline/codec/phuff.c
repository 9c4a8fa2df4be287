/* A faster Huffman decoder for progressive JPEG, plugged into libjpeg-turbo.
 *
 * libjpeg reads every scan of a progressive file into the whole image's
 * coefficients in jpeg_start_decompress, before the first scanline: on
 * large photos that entropy decoding is nine tenths of a decode's time
 * (BENCHMARKS.md), and libjpeg's progressive decoder looks codes up 8 bits
 * at a time and refills its bit buffer a byte at a time. This one uses
 * huff.c's reader and tables (bits.h: 11-bit lookups, eight bytes a
 * refill) and decodes each scan only down to the last iMCU row the views
 * use (and a margin): the rest of the scan is passed over by looking for
 * its end marker, leaving those coefficients zero, where no output row
 * reads them. The coefficients it makes are libjpeg's (jdphuff.c, the
 * same operations in the same order; tested byte for byte on the output).
 *
 * It is installed through cinfo->entropy in the progress monitor's first
 * call (stoker_phuff_hook), which jpeg_start_decompress (turbo.c) and
 * jpeg_read_coefficients (transcode.c) make after libjpeg started the
 * first scan (its start_pass ran) and before it read any of its data. libjpeg's own start_pass still runs for every later scan: it
 * checks the scan's parameters and keeps cinfo->coef_bits (which block
 * smoothing reads). Corrupt data is reported as libjpeg reports it, a
 * corrupt-data warning (which turbo.c and transcode.c turn into an error),
 * after which the scan's remaining MCUs are left zero. */
#include "phuff.h"
#include "bits.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <jerror.h>

/* DSTATE_PRELOAD and DSTATE_RDCOEFS (jpegint.h): inside
 * jpeg_start_decompress, reading the scans of a multi-scan file, and
 * inside jpeg_read_coefficients. */
#define PHUFF_PRELOAD 203
#define PHUFF_RDCOEFS 209

static void warn(j_decompress_ptr ci, int code, int p0, int p1) {
  ci->err->msg_code = code;
  ci->err->msg_parm.i[0] = p0;
  ci->err->msg_parm.i[1] = p1;
  (*ci->err->emit_message)((j_common_ptr)ci, -1);
}

static const stoker_htab *table(stoker_phuff *p, int ac, int no, const JHUFF_TBL *src) {
  stoker_htab *t = &p->tabs[ac][no];
  if (!p->built[ac][no] || memcmp(p->def[ac][no].bits, src->bits, sizeof src->bits) ||
      memcmp(p->def[ac][no].huffval, src->huffval, sizeof src->huffval)) {
    stoker_htab_build(t, src, ac);
    memcpy(p->def[ac][no].bits, src->bits, sizeof src->bits);
    memcpy(p->def[ac][no].huffval, src->huffval, sizeof src->huffval);
    p->built[ac][no] = 1;
  }
  return t;
}

/* skip_rest moves libjpeg's source to the marker that ends the scan
 * (restart markers are the scan's own), without decoding. */
static void skip_rest(stoker_phuff *p, j_decompress_ptr ci) {
  const uint8_t *q = p->b.p, *end = p->b.end, *f;
  while (end - q >= 2 && (f = memchr(q, 0xFF, (size_t)(end - q - 1))) != NULL) {
    if (f[1] == 0x00 || (f[1] >= 0xD0 && f[1] <= 0xD7)) {
      q = f + 2; /* stuffed 0xFF, or RSTn */
    } else if (f[1] == 0xFF) {
      q = f + 1; /* fill before a marker */
    } else {
      q = f;
      break;
    }
  }
  if (end - q < 2)
    q = end;
  ci->src->next_input_byte = q;
  ci->src->bytes_in_buffer = (size_t)(end - q);
  p->skipped = 1;
}

/* scan_end is where the scan's data ends after its last MCU: past the
 * byte of the last bit read, the whole bytes the reader holds unread given
 * back (a stuffed 0xFF 0x00 is one data byte, and 0xFF is followed by
 * 0x00 nowhere else in entropy-coded data), so that libjpeg's marker
 * reader finds any bytes between the data and the next marker and reports
 * them, as corrupt data. */
static const uint8_t *scan_end(const stoker_bits *b) {
  const uint8_t *q = b->p;
  int k, real = b->n - b->fake;
  for (k = real > 0 ? real >> 3 : 0; k > 0; k--)
    q -= (q[-1] == 0x00 && q[-2] == 0xFF) ? 2 : 1;
  return q;
}

/* restart reads the expected RSTn marker (only the last byte's padding
 * may be left unread before it) and resets the predictors and the EOB
 * run; 0 when it is not there. */
static int restart(stoker_phuff *p, j_decompress_ptr ci) {
  stoker_bits *b = &p->b;
  int i;
  if (b->n - b->fake >= 8)
    return 0;
  while (b->end - b->p >= 2 && b->p[0] == 0xFF && b->p[1] == 0xFF)
    b->p++;
  if (b->end - b->p < 2 || b->p[0] != 0xFF || b->p[1] != 0xD0 + p->next_rst)
    return 0;
  b->p += 2;
  b->buf = 0;
  b->n = b->fake = b->marker = 0;
  p->next_rst = (p->next_rst + 1) & 7;
  p->restarts_to_go = (int)ci->restart_interval;
  p->eobrun = 0;
  for (i = 0; i < MAX_COMPS_IN_SCAN; i++)
    p->pred[i] = 0;
  return 1;
}

/* The four kinds of scan, as jdphuff.c's decode_mcu_DC_first,
 * decode_mcu_AC_first, decode_mcu_DC_refine and decode_mcu_AC_refine.
 * Each returns 1 for a bad code, 2 for a DC coefficient out of range. */

static int dc_first(stoker_phuff *p, j_decompress_ptr ci, stoker_bits *b, JBLOCKROW *data) {
  int blkn, bad = 0;
  for (blkn = 0; blkn < ci->blocks_in_MCU; blkn++) {
    int c = ci->MCU_membership[blkn], s, pr = p->pred[c];
    if (b->n < 32)
      refill(b);
    s = decode_sym(b, p->dc[blkn], &bad);
    if (s) {
      unsigned v = peek(b, s);
      consume(b, s);
      s = extend(v, s);
    }
    if ((pr >= 0 && s > INT_MAX - pr) || (pr < 0 && s < INT_MIN - pr))
      return 2;
    pr += s;
    p->pred[c] = pr;
    data[blkn][0][0] = (JCOEF)(uint16_t)((unsigned)pr << p->Al);
  }
  return bad;
}

static int ac_first(stoker_phuff *p, stoker_bits *b, JBLOCKROW *data) {
  JCOEF *blk = data[0][0];
  int k, bad = 0;
  if (p->eobrun > 0) {
    p->eobrun--;
    return 0;
  }
  for (k = p->Ss; k <= p->Se; k++) {
    int rs, r, s;
    if (b->n < 32)
      refill(b);
    rs = decode_sym(b, p->ac, &bad);
    r = rs >> 4;
    s = rs & 15;
    if (s) {
      unsigned v;
      k += r;
      v = peek(b, s);
      consume(b, s);
      blk[stoker_natural[k]] = (JCOEF)(uint16_t)((unsigned)extend(v, s) << p->Al);
    } else if (r == 15) {
      k += 15; /* ZRL */
    } else {
      unsigned run = 1u << r; /* EOBr: 2^r + r appended bits */
      if (r) {
        run += peek(b, r);
        consume(b, r);
      }
      p->eobrun = run - 1; /* this block is the first */
      break;
    }
  }
  return bad;
}

static void dc_refine(stoker_phuff *p, j_decompress_ptr ci, stoker_bits *b, JBLOCKROW *data) {
  int blkn;
  for (blkn = 0; blkn < ci->blocks_in_MCU; blkn++) {
    if (b->n < 1)
      refill(b);
    if (peek(b, 1))
      data[blkn][0][0] |= (JCOEF)(1 << p->Al);
    consume(b, 1);
  }
}

/* span is the bits [k, t) of a 64-bit mask, zigzag positions. */
static inline uint64_t span(int k, int t) {
  uint64_t hi = t >= 64 ? ~0ull : (1ull << t) - 1;
  return k >= 64 ? 0 : hi & ~((1ull << k) - 1);
}

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PHUFF_X86 1
/* nth_set keeps the r+1-th set bit of x (BMI2's pdep: one instruction). */
__attribute__((target("bmi2"))) static inline uint64_t nth_set_bmi2(uint64_t x, int r) {
  return _pdep_u64(1ull << r, x);
}
#endif

/* zz_of[j][v]: the bits of byte j of a natural-order mask of a block's
 * coefficients (bit n: coefficient n), v, in zigzag order. */
static uint64_t zz_of[8][256];

__attribute__((constructor)) static void zz_init(void) {
  int inv[64], k, j, v, i;
  for (k = 0; k < 64; k++)
    inv[stoker_natural[k]] = k;
  for (j = 0; j < 8; j++)
    for (v = 0; v < 256; v++)
      for (i = 0; i < 8; i++)
        if (v >> i & 1)
          zz_of[j][v] |= 1ull << inv[8 * j + i];
}

/* nonzero is the mask of blk's nonzero coefficients, in zigzag order. */
static inline uint64_t nonzero(const JCOEF *blk) {
  uint64_t m = 0, zz = 0;
  int i;
#if defined(__SSE2__)
  const __m128i z = _mm_setzero_si128();
  for (i = 0; i < 4; i++) {
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(blk + 16 * i));
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(blk + 16 * i + 8));
    __m128i e = _mm_packs_epi16(_mm_cmpeq_epi16(a, z), _mm_cmpeq_epi16(b, z));
    m |= (uint64_t)(uint16_t)~_mm_movemask_epi8(e) << (16 * i);
  }
#else
  for (i = 0; i < 64; i++)
    m |= (uint64_t)(blk[i] != 0) << i;
#endif
  for (i = 0; i < 8; i++)
    zz |= zz_of[i][(m >> (8 * i)) & 255];
  return zz;
}

/* correct appends a correction bit to each already nonzero coefficient of
 * the mask cm (zigzag positions), in order: 1 makes its magnitude one p1
 * larger, unless that bit is set already. The bits are read up to 32 at a
 * time and applied without branching on them. */
__attribute__((always_inline)) static inline void correct(stoker_bits *b, JCOEF *blk, uint64_t cm, int p1, int m1) {
  while (cm) {
    int n = __builtin_popcountll(cm), j;
    unsigned bits;
    if (n > 32)
      n = 32;
    if (b->n < 32)
      refill(b);
    bits = peek(b, n);
    consume(b, n);
    for (j = n - 1; j >= 0; j--) {
      JCOEF *c = blk + stoker_natural[__builtin_ctzll(cm)];
      int up = (int)((bits >> j) & 1) & ((*c & p1) == 0);
      cm &= cm - 1;
      *c = (JCOEF)(*c + (up ? (*c >= 0 ? p1 : m1) : 0));
    }
  }
}

/* ac_refine walks the band with a mask of its nonzero coefficients (in
 * zigzag order) where jdphuff.c steps through every position: the same
 * coefficients get the same correction bits, in the same order. */
__attribute__((always_inline)) static inline int ac_refine(stoker_phuff *p, stoker_bits *b,
                                                          JBLOCKROW *data, int bmi2) {
  JCOEF *blk = data[0][0];
  int p1 = 1 << p->Al, m1 = (int)(~0u << p->Al), k = p->Ss, Se = p->Se, bad = 0, i;
  uint64_t nz = nonzero(blk) & span(k, Se + 1);
  if (p->eobrun == 0) {
    for (; k <= Se; k++) {
      int rs, r, s, t;
      uint64_t zeros;
      if (b->n < 32)
        refill(b);
      rs = decode_sym(b, p->ac, &bad);
      r = rs >> 4;
      s = rs & 15;
      if (s) {
        if (s != 1) /* a newly nonzero coefficient is always 1 in size */
          bad = 1;
        s = peek(b, 1) ? p1 : m1;
        consume(b, 1);
      } else if (r != 15) {
        p->eobrun = 1u << r;
        if (r) {
          p->eobrun += peek(b, r);
          consume(b, r);
        }
        break; /* the rest of the block: the EOB run's */
      }
      /* Past the already nonzero coefficients (a correction bit each) and
       * r zero ones, to the one that becomes nonzero (s; none for ZRL):
       * the r+1-th zero from k, or past the band. */
      zeros = ~nz & span(k, Se + 1);
#ifdef PHUFF_X86
      if (bmi2)
        zeros = nth_set_bmi2(zeros, r);
      else
#endif
        for (i = 0; i < r && zeros; i++)
          zeros &= zeros - 1;
      t = zeros ? __builtin_ctzll(zeros) : Se + 1;
      correct(b, blk, nz & span(k, t), p1, m1);
      k = t;
      if (s) {
        blk[stoker_natural[k]] = (JCOEF)s;
        if (k < 64)
          nz |= 1ull << k;
      }
    }
  }
  if (p->eobrun > 0) {
    correct(b, blk, nz & span(k, Se + 1), p1, m1);
    p->eobrun--;
  }
  return bad;
}

/* ac_refine's two builds: with BMI2 and POPCNT where the CPU has them
 * (pdep in place of the loop: the refinement scans in three quarters of
 * the time, BENCHMARKS.md), and without. */
static int ac_refine_any(stoker_phuff *p, stoker_bits *b, JBLOCKROW *data) {
  return ac_refine(p, b, data, 0);
}
#ifdef PHUFF_X86
__attribute__((target("bmi2,popcnt"))) static int ac_refine_bmi2(stoker_phuff *p, stoker_bits *b,
                                                                 JBLOCKROW *data) {
  return ac_refine(p, b, data, 1);
}
#endif

static boolean decode_mcu(j_decompress_ptr ci, JBLOCKROW *data) {
  stoker_phuff *p = (stoker_phuff *)ci->entropy;
  stoker_bits b;
  long m = p->call++;
  int bad = 0;
  if (m >= p->stop_at) {
    if (!p->skipped)
      skip_rest(p, ci);
    return TRUE;
  }
  if (p->pub.insufficient_data)
    return TRUE;
  if (ci->restart_interval) {
    if (p->restarts_to_go == 0 && !restart(p, ci)) {
      /* Whole bytes unread before the marker (libjpeg's decoder drops
       * those it read ahead, and reports the rest), or another marker. */
      int unread = (p->b.n - p->b.fake) >> 3, found = p->b.end - p->b.p >= 2 ? p->b.p[1] : 0;
      p->pub.insufficient_data = TRUE;
      if (unread > 0)
        warn(ci, JWRN_EXTRANEOUS_DATA, unread, found);
      else
        warn(ci, JWRN_MUST_RESYNC, found, p->next_rst);
      return TRUE;
    }
    p->restarts_to_go--;
  }
  b = p->b; /* a local copy keeps the reader in registers */
  if (p->Ss == 0) {
    if (p->Ah == 0)
      bad = dc_first(p, ci, &b, data);
    else
      dc_refine(p, ci, &b, data);
  } else {
#ifdef PHUFF_X86
    if (p->Ah != 0 && p->bmi2)
      bad = ac_refine_bmi2(p, &b, data);
    else
#endif
      bad = p->Ah == 0 ? ac_first(p, &b, data) : ac_refine_any(p, &b, data);
  }
  p->b = b;
  p->jb->prog_decoded++;
  if (p->call == p->total)
    b.p = scan_end(&b);
  ci->src->next_input_byte = b.p;
  ci->src->bytes_in_buffer = (size_t)(b.end - b.p);
  if (bad == 2)
    ERREXIT(ci, JERR_BAD_DCT_COEF);
  if (bad || b.n < b.fake) {
    /* A code no table has, or data that ran out (zero bits read past a
     * marker or the end): libjpeg's own warnings for them. */
    p->pub.insufficient_data = TRUE;
    warn(ci, bad ? JWRN_HUFF_BAD_CODE : JWRN_HIT_MARKER, 0, 0);
  }
  return TRUE;
}

/* setup readies p for the scan libjpeg has just started. */
static void setup(stoker_phuff *p, j_decompress_ptr ci) {
  long rows = (long)ci->MCU_rows_in_scan, per = 1;
  int blkn, i;
  p->Ss = ci->Ss;
  p->Se = ci->Se;
  p->Ah = ci->Ah;
  p->Al = ci->Al;
  for (blkn = 0; blkn < ci->blocks_in_MCU; blkn++) {
    jpeg_component_info *comp = ci->cur_comp_info[ci->MCU_membership[blkn]];
    /* libjpeg's start_pass made sure the tables the scan uses exist. */
    if (ci->Ss == 0 && ci->Ah == 0)
      p->dc[blkn] = table(p, 0, comp->dc_tbl_no, ci->dc_huff_tbl_ptrs[comp->dc_tbl_no]);
    if (ci->Ss != 0)
      p->ac = table(p, 1, comp->ac_tbl_no, ci->ac_huff_tbl_ptrs[comp->ac_tbl_no]);
  }
  memset(&p->b, 0, sizeof p->b);
  p->b.p = ci->src->next_input_byte;
  p->b.end = ci->src->next_input_byte + ci->src->bytes_in_buffer;
  for (i = 0; i < MAX_COMPS_IN_SCAN; i++)
    p->pred[i] = 0;
  p->eobrun = 0;
  p->restarts_to_go = (int)ci->restart_interval;
  p->next_rst = 0;
  p->call = 0;
  p->skipped = 0;
  p->pub.insufficient_data = FALSE;
  /* A scan of one component has that component's block rows, v_samp of
   * them an iMCU row; an interleaved scan one MCU row an iMCU row. */
  if (ci->comps_in_scan == 1)
    per = ci->cur_comp_info[0]->v_samp_factor;
  p->total = p->stop_at = (long)ci->MCUs_per_row * rows;
  if (p->lim < rows / per + 1)
    p->stop_at = (long)ci->MCUs_per_row * ((p->lim + 1) * per < rows ? (p->lim + 1) * per : rows);
  p->jb->prog_total += (long)ci->MCUs_per_row * rows;
}

static void start_pass(j_decompress_ptr ci) {
  stoker_phuff *p = (stoker_phuff *)ci->entropy;
  ci->entropy = (struct jpeg_entropy_decoder *)(void *)p->lib;
  (*p->lib->start_pass)(ci);
  ci->entropy = (struct jpeg_entropy_decoder *)(void *)&p->pub;
  setup(p, ci);
}

void stoker_phuff_arm(stoker_phuff *p, j_decompress_ptr ci, stoker_job *jb) {
  int v, y1 = 0, px;
  jb->prog_used = 0;
  jb->prog_total = jb->prog_decoded = 0;
  p->jb = jb;
  p->installed = 0;
  p->armed = ci->progressive_mode && !ci->arith_code && ci->data_precision == 8 &&
             !jb->libjpeg_huff;
  p->lim = LONG_MAX;
#ifdef PHUFF_X86
  __builtin_cpu_init();
  p->bmi2 = jb->simd_max >= 0 && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
#endif
  if (!p->armed || jb->no_region)
    return;
  for (v = 0; v < jb->nviews; v++)
    if (jb->views[v].y1 > y1)
      y1 = jb->views[v].y1;
  /* The iMCU row of the last source row any view reads, two more: fancy
   * upsampling reads the next iMCU row's first rows, and block smoothing
   * (jdcoefct.c, where a file's coefficients are not all complete) the
   * blocks two rows below; and one for safety. */
  px = 8 * ci->max_v_samp_factor;
  if (y1 > 0 && px > 0)
    p->lim = (long)((y1 - 1) / px) + 3;
}

void stoker_phuff_hook(stoker_phuff *p, j_decompress_ptr ci) {
  if (!p->armed || p->installed)
    return;
  p->armed = 0;
  if ((ci->global_state != PHUFF_PRELOAD && ci->global_state != PHUFF_RDCOEFS) ||
      ci->input_scan_number != 1 || !ci->entropy)
    return; /* not where it can take over: libjpeg's decoder stays */
  p->lib = (stoker_entropy *)(void *)ci->entropy;
  p->installed = 1;
  p->jb->prog_used = 1;
  p->pub.start_pass = start_pass;
  p->pub.decode_mcu = decode_mcu;
  ci->entropy = (struct jpeg_entropy_decoder *)(void *)&p->pub;
  setup(p, ci);
}
