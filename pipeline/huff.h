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
} stoker_huff;

/* stoker_huff_install replaces cinfo's entropy decoder with h's, after
 * jpeg_start_decompress and before any scanline is read. It returns 0 (and
 * changes nothing) for files it does not handle: progressive, arithmetic,
 * multi-scan or not 8-bit. */
int stoker_huff_install(stoker_huff *h, j_decompress_ptr cinfo);

#endif
