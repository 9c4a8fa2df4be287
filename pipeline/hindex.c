/* The decoder index of one JPEG as bytes: what the Go side keeps in its
 * cache and writes to disk, and what stoker_decode reads and extends. See
 * huff.h (stoker_hix) for what a checkpoint is and huff.c for how they are
 * made and used.
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
#include "huff.h"

#include <limits.h>
#include <string.h>

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
