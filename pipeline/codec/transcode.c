/* Lossless transcoding of progressive JPEGs to sequential ones, at the
 * coefficient level: the quantized DCT coefficients are read whole
 * (jpeg_read_coefficients, its scans through phuff.c) and stored in a
 * coefficient-cache entry (coefs.c) as the MCUs of one interleaved
 * Huffman-coded scan of the same coefficients, quantization tables,
 * sampling factors and color space: what jpegtran would write, as huff.c
 * would decode it. The scan itself is not written (transcode.go makes its
 * headers; every MCU comes from the entry), so no Huffman encoding and
 * decoding again. The decoder then sees the same coefficients, so it makes
 * the same pixels, with one exception refused here: libjpeg smooths the
 * blocks of a progressive file whose coefficients were not all coded to
 * full precision (block smoothing, jdcoefct.c), and would not smooth them
 * in a sequential one.
 *
 * Memory is bounded three ways: libjpeg's own allocations (the whole
 * image's coefficients, 128 bytes per block) by max_memory, every one
 * counted (memlim.c), the entry by
 * its room, and the work by the scan cap. libjpeg errors and corrupt-data
 * warnings longjmp back here, never across Go frames. */
#include "transcode.h"
#include "phuff.h"
#include "memlim.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

typedef struct {
  struct jpeg_error_mgr pub;
  struct jpeg_progress_mgr prog;
  jmp_buf jb;
  int code;
  int max_scans;
  const int *stop;
  char *msg;
  size_t msg_len;
  stoker_phuff *ph; /* the progressive decoder (phuff.c) reading the scans */
  stoker_job job;   /* its settings (every MCU) and counters */
  stoker_coefbuf cb; /* fill_coefs's MCUs, until committed */
  stoker_memlim ml;  /* libjpeg's own memory, counted and capped */
} tc_err;

static void tc_fail(tc_err *e, int code, const char *msg) {
  e->code = code;
  snprintf(e->msg, e->msg_len, "%s", msg);
  longjmp(e->jb, 1);
}

static void tc_error(j_common_ptr c) {
  tc_err *e = (tc_err *)c->err;
  char buf[JMSG_LENGTH_MAX + 96];
  if (e->ml.over)
    stoker_memlim_msg(&e->ml, buf, sizeof buf);
  else
    (*c->err->format_message)(c, buf);
  tc_fail(e, STOKER_TC_FAILED, buf);
}

/* Level -1 is a corrupt-data warning: the decoder (turbo.c) fails on it,
 * so the transcode does too. Levels >= 0 are traces. */
static void tc_emit(j_common_ptr c, int level) {
  if (level < 0)
    tc_error(c);
}

static void tc_output(j_common_ptr c) { (void)c; }

static void tc_progress(j_common_ptr c) {
  tc_err *e = (tc_err *)c->err;
  if (e->stop && __atomic_load_n(e->stop, __ATOMIC_RELAXED))
    tc_fail(e, STOKER_TC_STOPPED, "the sample's work was abandoned");
  if (!c->is_decompressor)
    return;
  j_decompress_ptr d = (j_decompress_ptr)c;
  if (d->input_scan_number > e->max_scans)
    tc_fail(e, STOKER_TC_FAILED, "more scans than the cap");
  if (e->ph)
    stoker_phuff_hook(e->ph, d);
}

/* complete reports whether every coefficient of every component was coded
 * to full precision (coef_bits all 0): then libjpeg does not smooth. */
static int complete(j_decompress_ptr s) {
  int ci, k;
  if (!s->coef_bits)
    return 0;
  for (ci = 0; ci < s->num_components; ci++)
    for (k = 0; k < DCTSIZE2; k++)
      if (s->coef_bits[ci][k] != 0)
        return 0;
  return 1;
}

/* fill_coefs stores in cc, within room bytes, the MCUs of the sequential
 * scan jpegtran would write from coefs: one interleaved scan of
 * every component (or one component's blocks, each its own MCU), each MCU's
 * blocks in scan order, and the dummy blocks past the right and bottom
 * edges as the encoder made them (jctrans.c's compress_output: no AC, the
 * DC of the block before), so that each MCU is what huff.c would decode
 * from the scan. Returns the MCUs stored, all of the scan's, or 0 when they
 * did not all fit in room or memory (cc then holds some of them: the
 * caller frees it). */
static long fill_coefs(j_decompress_ptr s, jvirt_barray_ptr *coefs, stoker_coefs *cc,
                       stoker_coefbuf *b, size_t room) {
  JBLOCK dummy[D_MAX_BLOCKS_IN_MCU];
  JBLOCKROW data[D_MAX_BLOCKS_IN_MCU];
  JBLOCKARRAY rows[MAX_COMPS_IN_SCAN];
  int nc = s->num_components, single = nc == 1, blocks = 0, ci;
  long mpr, mrows, mr, mc, n = 0;
  if (!cc || nc < 1 || nc > MAX_COMPS_IN_SCAN)
    return 0;
  if (single) {
    mpr = (long)s->comp_info[0].width_in_blocks;
    mrows = (long)s->comp_info[0].height_in_blocks;
    blocks = 1;
  } else {
    long mw = 8L * s->max_h_samp_factor, mh = 8L * s->max_v_samp_factor;
    mpr = ((long)s->image_width + mw - 1) / mw;
    mrows = ((long)s->image_height + mh - 1) / mh;
    for (ci = 0; ci < nc; ci++)
      blocks += s->comp_info[ci].h_samp_factor * s->comp_info[ci].v_samp_factor;
  }
  if (blocks > D_MAX_BLOCKS_IN_MCU)
    return 0;
  memset(dummy, 0, sizeof dummy);
  if (!coefs_attach(cc, b, mpr * mrows, blocks, stoker_simd_default(), &room))
    return 0;
  for (mr = 0; mr < mrows && room; mr++) {
    for (ci = 0; ci < nc; ci++) {
      int v = single ? 1 : s->comp_info[ci].v_samp_factor;
      rows[ci] = (*s->mem->access_virt_barray)((j_common_ptr)s, coefs[ci],
                                               (JDIMENSION)(mr * v), (JDIMENSION)v, FALSE);
    }
    for (mc = 0; mc < mpr; mc++) {
      int blkn = 0;
      if (single)
        data[blkn++] = rows[0][0] + mc;
      for (ci = 0; ci < nc && !single; ci++) {
        const jpeg_component_info *cp = &s->comp_info[ci];
        int h = cp->h_samp_factor, v = cp->v_samp_factor, x, y;
        int lastc = (int)(cp->width_in_blocks % (JDIMENSION)h), lastr =
            (int)(cp->height_in_blocks % (JDIMENSION)v);
        int cnt = mc < mpr - 1 ? h : lastc ? lastc : h;
        for (y = 0; y < v; y++) {
          x = 0;
          if (mr < mrows - 1 || y < (lastr ? lastr : v))
            for (; x < cnt; x++)
              data[blkn++] = rows[ci][y] + mc * h + x;
          for (; x < h; x++, blkn++) {
            dummy[blkn][0] = data[blkn - 1][0][0];
            data[blkn] = &dummy[blkn];
          }
        }
      }
      if (!coefs_put(b, mr * mpr + mc, blocks, data, &room))
        break;
      n++;
    }
    /* Committed a megabyte at a time: the buffer stays small and in cache,
     * where one block of the whole file would be grown and copied. */
    if (b->len >= (1u << 20) && !coefs_commit(cc, b))
      return 0;
  }
  return coefs_commit(cc, b) && n == mpr * mrows ? n : 0;
}

int stoker_transcode(const unsigned char *data, size_t len, int max_scans,
                     long long max_memory, const int *stop, void *cc,
                     long long cc_room, char *msg, size_t msg_len, long long *lib_peak) {
  struct jpeg_decompress_struct s;
  /* volatile: read after a longjmp */
  volatile int have_s = 0;
  tc_err e;
  jvirt_barray_ptr *coefs;
  long want;

  if (msg_len)
    msg[0] = 0;
  memset(&e, 0, sizeof e);
  e.code = STOKER_TC_FAILED;
  e.max_scans = max_scans;
  e.stop = stop;
  e.msg = msg;
  e.msg_len = msg_len;
  e.prog.progress_monitor = tc_progress;
  if (setjmp(e.jb)) {
    if (lib_peak)
      *lib_peak = e.ml.peak;
    if (have_s)
      jpeg_destroy_decompress(&s);
    free(e.ph);
    stoker_coefbuf_free(&e.cb);
    return e.code;
  }
  s.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = tc_error;
  e.pub.emit_message = tc_emit;
  e.pub.output_message = tc_output;
  jpeg_create_decompress(&s);
  have_s = 1;
  stoker_memlim_install(&e.ml, (j_common_ptr)&s);
  stoker_memlim_begin(&e.ml, max_memory);
  s.progress = &e.prog;
  s.mem->max_memory_to_use = max_memory > 0 ? (long)max_memory + (1L << 20) : 0;
  jpeg_mem_src(&s, data, (unsigned long)len);
  jpeg_read_header(&s, TRUE);
  if (!s.progressive_mode)
    tc_fail(&e, STOKER_TC_NOT_PROGRESSIVE, "not a progressive jpeg");
  if (s.arith_code || s.data_precision != 8 || s.num_components > MAX_COMPS_IN_SCAN)
    tc_fail(&e, STOKER_TC_FAILED, "not an 8-bit Huffman-coded jpeg of at most 4 components");
  /* Every MCU of every scan: the whole image is stored. Without memory
   * for it, libjpeg's decoder reads the scans. */
  e.ph = calloc(1, sizeof *e.ph);
  e.job.no_region = 1;
  if (e.ph)
    stoker_phuff_arm(e.ph, &s, &e.job);
  coefs = jpeg_read_coefficients(&s);
  if (!complete(&s))
    tc_fail(&e, STOKER_TC_INCOMPLETE,
            "some coefficients not coded to full precision (block smoothing)");
  want = fill_coefs(&s, coefs, (stoker_coefs *)cc, &e.cb, cc_room > 0 ? (size_t)cc_room : 0);
  if (want <= 0)
    tc_fail(&e, STOKER_TC_TOO_BIG, "the coefficients would pass their bound");
  if (lib_peak)
    *lib_peak = e.ml.peak;
  jpeg_destroy_decompress(&s);
  stoker_coefbuf_free(&e.cb);
  free(e.ph);
  return STOKER_TC_OK;
}
