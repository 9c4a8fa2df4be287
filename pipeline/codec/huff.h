/* A faster baseline Huffman decoder installed into libjpeg-turbo; see huff.c. */
#ifndef STOKER_HUFF_H
#define STOKER_HUFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

/* Lookahead bits of the code tables (libjpeg-turbo's is 8). */
#define STOKER_LB 11

typedef struct {
  uint16_t lut[1 << STOKER_LB];     /* code length << 8 | symbol; 0: longer */
  /* AC: one or two coefficients (or one and the end of the block) whose
   * codes and magnitude bits fit in LB bits; DC: a difference. See huff.c
   * for the layout. 0: none. */
  uint64_t fast[1 << STOKER_LB];
  /* AC, for reading past a block (its coefficients not kept): as many
   * whole symbols as fit in LB bits, to the end of the block at most. See
   * huff.c for the layout (none: S_NONE there). */
  uint16_t skip[1 << STOKER_LB];
  int32_t maxcode[18];              /* largest code of each length, -1: none */
  int32_t valoff[17];               /* huffval index minus code, per length */
  uint8_t huffval[256];
} stoker_htab;

typedef struct {
  const uint8_t *p, *end;
  uint64_t buf; /* MSB first */
  int n;        /* valid bits in buf */
  int fake;     /* zero bits made up past a marker or the end */
  int marker;   /* reading stopped at a marker or the end */
} stoker_bits;

/* An index of entropy-decoder states (zlib's zran.c, for a JPEG scan):
 * checkpoints at every stride-th MCU of every MCU row, each the bit
 * position in the scan and the DC predictors there. With it, decoding
 * starts at the checkpoint nearest above and left of what the crop needs,
 * and skips what lies right of it. It is built as a by-product of decoding
 * (whatever the decoder passes through is recorded) and verified as it is
 * used (a known checkpoint the decoder passes must agree with it).
 *
 * A checkpoint is sure (HIX_SURE) when this process's decoder recorded it,
 * or reached it and agreed with it, by decoding from a sure state: the
 * scan's start, a restart marker or a sure checkpoint. Decoding starts
 * only at sure checkpoints. One read from a file is not sure: its DC
 * predictors are sums over every block before it, which nothing short of
 * decoding from the scan's start can check (a file whose predictors are
 * all shifted by one amount past some checkpoint agrees with itself
 * everywhere else). A decode that passes it compares it: agreement makes
 * it sure, disagreement is noted (lied) and the decoder's own state
 * recorded instead. See huff.c for its layout as bytes and the checks a
 * blob passes before it is used. */
#define HIX_SURE 0x80000000u /* in pos: recorded or confirmed here */
#define HIX_POS 0x7FFFFFFFu  /* in pos: the bit position + 1 */

typedef struct {
  uint32_t *pos; /* bit position + 1 of each checkpoint, | HIX_SURE; 0: not known */
  int16_t *dc;   /* the DC predictors at each, ncomp apiece */
  int mpr, rows, stride, cpr, ncomp, n;
  int dcmax[MAX_COMPS_IN_SCAN]; /* |DC predictor| an 8-bit scan can have */
  int changed; /* checkpoints were added or became sure */
  int bad;     /* a sure checkpoint disagreed with the decoder */
  int lied;    /* one not sure did (it now holds the decoder's state) */
} stoker_hix;

/* The coefficient cache of one file (coefs.c): each MCU's coefficients,
 * stored compactly once decoded. Allocated by stoker_coefs_new, grown by
 * the decodes that use it (one at a time), freed by stoker_coefs_free. */
typedef struct {
  const uint8_t **at; /* per MCU: its bytes; NULL: not stored */
  uint8_t **seg;      /* the blocks they are in, one per decode that added */
  int nseg, segcap;
  size_t bytes; /* in seg */
  long nmcu;
  int blocks; /* blocks per MCU */
} stoker_coefs;

/* A decode's MCUs to store, encoded, until it has succeeded (a decoder's,
 * reused). */
typedef struct {
  uint8_t *buf;
  size_t len, cap;
  struct {
    long m;
    size_t off;
  } *mcu;
  size_t n, mcap;
  int simd; /* the decode's SIMD level (turbo.c): SSSE3 packs and unpacks
             * from 2, AVX-512 VBMI2's compress and expand from 5 */
} stoker_coefbuf;

stoker_coefs *stoker_coefs_new(void);
void stoker_coefs_free(stoker_coefs *c);
/* stoker_coefs_bytes is the memory c holds. */
size_t stoker_coefs_bytes(const stoker_coefs *c);
void stoker_coefbuf_free(stoker_coefbuf *b);
/* coefs_attach sets c up for a scan of nmcu MCUs of blocks blocks (taking
 * its table from room), or checks that it is set up for one, and empties
 * b, which packs by the decode's SIMD level simd (every way makes the same
 * form); 0: c cannot serve this scan. */
int coefs_attach(stoker_coefs *c, stoker_coefbuf *b, long nmcu, int blocks,
                 int simd, size_t *room);
/* coefs_put encodes an MCU's blocks into b if they fit in room (bytes the
 * decode may still add); 1: stored. When they do not, room becomes 0. */
int coefs_put(stoker_coefbuf *b, long mcu, int blocks, JBLOCKROW *data,
              size_t *room);
/* stoker_coefs_form writes n blocks' form (64 coefficients each, natural
 * order) into out (n * (2 + 8 + 63 * 2 + 8) bytes) as coefs_put stores it
 * at SIMD level simd, and returns its length: for tests, that every level
 * makes the same bytes. */
size_t stoker_coefs_form(const JCOEF *blocks, int n, int simd, uint8_t *out);
/* coefs_get writes a stored MCU's coefficients into zeroed blocks, as the
 * decode's b unpacks them. */
void coefs_get(const stoker_coefs *c, const stoker_coefbuf *b, long mcu,
               JBLOCKROW *data);
/* coefs_commit moves b's MCUs into c; 0: out of memory (nothing moved). */
int coefs_commit(stoker_coefs *c, stoker_coefbuf *b);

typedef struct {
  /* Must be first: libjpeg calls through cinfo->entropy. Its type is
   * libjpeg's (incomplete in jpeglib.h, completed in huff.c); here it is
   * only storage of the same size. */
  struct {
    void (*start_pass)(j_decompress_ptr);
    boolean (*decode_mcu)(j_decompress_ptr, JBLOCKROW *);
    boolean insufficient_data;
  } pub;
  stoker_bits b;
  int pred[MAX_COMPS_IN_SCAN];
  int restarts_to_go, next_rst;
  int corrupt;
  const stoker_htab *dc[D_MAX_BLOCKS_IN_MCU], *ac[D_MAX_BLOCKS_IN_MCU];
  stoker_htab tabs[2][NUM_HUFF_TBLS];
  JHUFF_TBL def[2][NUM_HUFF_TBLS]; /* what tabs were built from */
  int built[2][NUM_HUFF_TBLS];

  /* Where libjpeg is and where the reader is. libjpeg calls decode_mcu
   * once per MCU in scan order; the reader decodes only what is needed
   * (lazy, below), so it may lag behind. */
  const uint8_t *scan; /* the first byte of entropy-coded data */
  int mpr;             /* MCUs per row */
  long call;           /* the MCU of libjpeg's next call */
  int call_col;        /* its column */
  long pos;            /* the MCU the reader is at */
  int pos_col;         /* its column */
  int next_ck;         /* column of the next checkpoint in pos's row */
  int ck;              /* that checkpoint's number */
  /* lazy: decode an MCU only when libjpeg will use its coefficients (a
   * call with a buffer, in columns [fc, lc], which it inverse-transforms);
   * otherwise return at once and catch up (from a checkpoint or restart
   * marker, when one is nearer) when an MCU is needed. */
  int lazy, fc, lc;
  stoker_hix *ix; /* NULL: no index */
  /* The file's coefficient cache (NULL: none): MCUs stored there are
   * copied out instead of decoded; MCUs decoded are stored, within room
   * bytes. scratch holds an MCU decoded in passing, to store it. */
  stoker_coefs *cc;
  stoker_coefbuf *cb;
  size_t cc_room;
  /* coefs_only: the scan has no entropy-coded data (a progressive file's
   * transcode, transcode.go): every MCU libjpeg uses must come from cc;
   * one that does not makes the decode corrupt. Set by the caller before
   * stoker_huff_install, which keeps it. */
  int coefs_only;
  JBLOCK scratch[D_MAX_BLOCKS_IN_MCU];
  JBLOCKROW scratch_rows[D_MAX_BLOCKS_IN_MCU];
  long cc_hits;   /* MCUs copied from the cache */
  long cc_stored; /* MCUs stored in it */
  long wanted;    /* MCUs libjpeg asked for with a buffer */
  /* Counters for tests and benchmarks. */
  long decoded;   /* MCUs entropy-decoded */
  int ck_seeks;   /* jumps to a checkpoint */
  int rst_seeks;  /* jumps to a restart marker */
} stoker_huff;

/* stoker_htab_build fills t from libjpeg's validated table src: the
 * lookups, and fast entries for a DC (ac 0) or baseline AC (ac 1) table. */
void stoker_htab_build(stoker_htab *t, const JHUFF_TBL *src, int ac);

/* stoker_huff_install replaces cinfo's entropy decoder with h's, after
 * jpeg_start_decompress and before any scanline is read. It returns 0 (and
 * changes nothing) for files it does not handle: progressive, arithmetic,
 * multi-scan or not 8-bit. The decoder starts eager (every call decoded)
 * and without an index: see stoker_huff_lazy and the index functions. */
int stoker_huff_install(stoker_huff *h, j_decompress_ptr cinfo);

/* stoker_huff_lazy makes the decoder decode only MCUs libjpeg uses: calls
 * without a buffer (jpeg_skip_scanlines) and columns outside [fc, lc] are
 * skipped. */
void stoker_huff_lazy(stoker_huff *h, int fc, int lc);

/* hix_geometry fills ix's geometry for cinfo's scan (checkpoints every
 * stride MCUs of a row) and reports its size in bytes as huff.c lays it
 * out; 0 when the scan cannot be indexed. */
size_t hix_geometry(stoker_hix *ix, j_decompress_ptr cinfo, int stride);
/* The rest of the index as bytes (huff.c): a blob's header, arrays, validity, known count. */
void hix_header(uint8_t *buf, const stoker_hix *ix, int restart,
                uint32_t scan_off, uint32_t scan_len, uint32_t known);
void hix_attach(stoker_hix *ix, uint8_t *buf);
/* hix_valid checks blob against the scan (see huff.c): 1 usable, 0 its
 * header is another scan's, -1 a checkpoint in it cannot be right. */
int hix_valid(const uint8_t *blob, size_t len, const stoker_hix *ix,
              int restart, uint32_t scan_off, uint32_t scan_len,
              const uint8_t *scan, int blocks);
/* hix_known counts ix's known checkpoints, and those not sure in *unsure. */
uint32_t hix_known(const stoker_hix *ix, uint32_t *unsure);

#endif
