/* huffbench times huff.c's entropy decoding alone: every MCU of each JPEG
 * given, stored (as libjpeg asks for the crop's MCUs), read past (the rows
 * above a crop and the columns beside it) or half and half, in CPU time of
 * this thread, and prints a checksum of the coefficients (stored), DC
 * predictors and bit positions, so that two builds of huff.c can be shown
 * to decode the same. Build and run from the repository's root:
 *
 *   cc -O3 -Ipipeline/codec -o /tmp/huffbench bench/huffbench/huffbench.c pipeline/codec/coefs.c -ljpeg
 *   /tmp/huffbench MODE REPS FILE...    # MODE 0 store, 1 read past, 2 half
 *
 * (-I the directory that holds huff.c, huff.h, bits.h and coefs.c). The
 * first pass is untimed (it computes the checksum); the others are timed.
 *
 *   /tmp/huffbench pair ROUNDS FILE...  # two scans at once: see pair.c */
#include "huff.c"

#include <stdlib.h>
#include <time.h>

static unsigned char *slurp(const char *fn, size_t *n) {
  FILE *f = fopen(fn, "rb");
  unsigned char *b;
  if (!f || fseek(f, 0, SEEK_END) || (long)(*n = (size_t)ftell(f)) < 0 ||
      fseek(f, 0, SEEK_SET) || !(b = malloc(*n)) || fread(b, 1, *n, f) != *n) {
    fprintf(stderr, "huffbench: cannot read %s\n", fn);
    exit(1);
  }
  fclose(f);
  return b;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

#include "pair.c"

int main(int argc, char **argv) {
  static stoker_huff h;
  static JBLOCK blk[D_MAX_BLOCKS_IN_MCU];
  JBLOCKROW rows[D_MAX_BLOCKS_IN_MCU];
  struct jpeg_decompress_struct ci;
  struct jpeg_error_mgr jerr;
  unsigned char **d;
  size_t *len;
  uint64_t sum = 0;
  double ns = 0;
  long mcus = 0;
  int mode, reps, nf, r, i;
  if (argc >= 4 && !strcmp(argv[1], "pair"))
    return pair_main(atoi(argv[2]), argc - 3, argv + 3);
  if (argc < 4) {
    fprintf(stderr, "usage: huffbench MODE(0 store, 1 read past, 2 half) REPS FILE...\n"
                    "       huffbench pair ROUNDS FILE...   (two streams at once: pair.c)\n");
    return 2;
  }
  mode = atoi(argv[1]);
  reps = atoi(argv[2]);
  nf = argc - 3;
  d = malloc((size_t)nf * sizeof *d);
  len = malloc((size_t)nf * sizeof *len);
  for (i = 0; i < nf; i++)
    d[i] = slurp(argv[3 + i], &len[i]);
  for (i = 0; i < D_MAX_BLOCKS_IN_MCU; i++)
    rows[i] = &blk[i];
  ci.err = jpeg_std_error(&jerr);
  jpeg_create_decompress(&ci);
  for (r = 0; r <= reps; r++)
    for (i = 0; i < nf; i++) {
      long n, m;
      int mpr, b, k;
      double t0;
      jpeg_mem_src(&ci, d[i], (unsigned long)len[i]);
      jpeg_read_header(&ci, TRUE);
      jpeg_start_decompress(&ci);
      if (!stoker_huff_install(&h, &ci)) {
        if (r == 0)
          fprintf(stderr, "huffbench: %s: not a single-scan baseline file, left out\n", argv[3 + i]);
        jpeg_abort_decompress(&ci);
        continue;
      }
      n = (long)ci.MCUs_per_row * (long)ci.MCU_rows_in_scan;
      mpr = (int)ci.MCUs_per_row;
      t0 = now();
      for (m = 0; m < n; m++) {
        if (mode == 0 || (mode == 2 && m % mpr >= mpr / 2)) {
          memset(blk, 0, sizeof(JBLOCK) * (size_t)ci.blocks_in_MCU);
          decode_blocks(&h, &ci, rows);
          if (r == 0)
            for (b = 0; b < ci.blocks_in_MCU; b++)
              for (k = 0; k < 64; k++)
                sum = sum * 31 + (uint16_t)blk[b][k];
        } else {
          decode_blocks(&h, &ci, NULL);
          if (r == 0)
            sum = sum * 31 + (uint64_t)(h.pred[0] + 7 * h.pred[1] + 13 * h.pred[2]);
        }
      }
      if (r > 0) {
        ns += now() - t0;
        mcus += n;
      } else {
        sum = sum * 31 + (uint64_t)reader_bits(&h) + (uint64_t)h.corrupt;
      }
      jpeg_abort_decompress(&ci);
    }
  printf("checksum %016llx MCUs %ld ns/MCU %.1f\n", (unsigned long long)sum, mcus,
         mcus ? ns / (double)mcus : 0);
  return 0;
}
