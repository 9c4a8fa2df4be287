/* A faster progressive Huffman decoder installed into libjpeg-turbo; see
 * phuff.c. */
#ifndef STOKER_PHUFF_H
#define STOKER_PHUFF_H

#include "huff.h"
#include "turbo.h"

/* libjpeg's entropy decoder object's layout (jpegint.h's struct
 * jpeg_entropy_decoder, incomplete in jpeglib.h; as huff.h's). */
typedef struct {
  void (*start_pass)(j_decompress_ptr);
  boolean (*decode_mcu)(j_decompress_ptr, JBLOCKROW *);
  boolean insufficient_data;
} stoker_entropy;

typedef struct {
  stoker_entropy pub; /* must be first: libjpeg calls through cinfo->entropy */
  /* libjpeg's own progressive decoder: its start_pass still checks each
   * scan's parameters and keeps cinfo->coef_bits. */
  stoker_entropy *lib;
  stoker_job *jb; /* counters (prog_*) */
  int armed, installed;
  int bmi2; /* the CPU has BMI2 and POPCNT (ac_refine's faster build),
             * and the job allows SIMD (simd_max >= 0) */
  long lim; /* the last iMCU row any view needs, with a margin; LONG_MAX: all */
  /* The scan. */
  stoker_bits b;
  int Ss, Se, Al, Ah;
  int pred[MAX_COMPS_IN_SCAN];
  unsigned eobrun;
  int restarts_to_go, next_rst;
  long call, stop_at; /* the next call's MCU; the first one not decoded */
  long total;         /* the scan's MCUs */
  int skipped;        /* the reader was moved to the scan's end */
  const stoker_htab *dc[D_MAX_BLOCKS_IN_MCU], *ac;
  stoker_htab tabs[2][NUM_HUFF_TBLS];
  JHUFF_TBL def[2][NUM_HUFF_TBLS]; /* what tabs were built from */
  int built[2][NUM_HUFF_TBLS];
} stoker_phuff;

/* stoker_phuff_arm readies p for a decode of jb after jpeg_read_header:
 * a progressive, Huffman-coded 8-bit file gets p's decoder (unless jb asks
 * for libjpeg's), which entropy-decodes each scan's MCUs only down to the
 * last iMCU row the views need (all of them with jb->no_region), and a
 * margin for fancy upsampling and block smoothing. */
void stoker_phuff_arm(stoker_phuff *p, j_decompress_ptr ci, stoker_job *jb);

/* stoker_phuff_hook installs an armed p, from the progress monitor's first
 * call in jpeg_start_decompress or jpeg_read_coefficients: after libjpeg
 * started the first scan and before it read any of its data. */
void stoker_phuff_hook(stoker_phuff *p, j_decompress_ptr ci);

#endif
