/* A libjpeg encoder for package pipeline's tests (see doc.go). libjpeg
 * errors longjmp back to jpegenc_encode, never across Go frames. */
#include "enc.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
} enc_err;

static void enc_error(j_common_ptr c) { longjmp(((enc_err *)c->err)->jb, 1); }

static void enc_output(j_common_ptr c) { (void)c; }

unsigned char *jpegenc_encode(const unsigned char *pix, int w, int h, int nc,
                              int quality, int hs, int vs, int progressive,
                              int restart_rows, int rgb,
                              unsigned long *out_len) {
  struct jpeg_compress_struct c;
  enc_err e;
  unsigned char *buf = NULL;
  c.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = enc_error;
  e.pub.output_message = enc_output;
  if (setjmp(e.jb)) {
    /* buf is not freed: after a grow, libjpeg-turbo's memory destination
     * has already freed the buffer buf last pointed to. A test helper's
     * error path may leak instead. */
    jpeg_destroy_compress(&c);
    return NULL;
  }
  jpeg_create_compress(&c);
  *out_len = 0;
  jpeg_mem_dest(&c, &buf, out_len);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = nc;
  c.in_color_space = nc == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (rgb)
    jpeg_set_colorspace(&c, JCS_RGB);
  c.comp_info[0].h_samp_factor = hs;
  c.comp_info[0].v_samp_factor = vs;
  if (progressive)
    jpeg_simple_progression(&c);
  c.restart_in_rows = restart_rows;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW r = (JSAMPROW)(pix + (size_t)c.next_scanline * w * nc);
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return buf;
}

void jpegenc_free(unsigned char *p) { free(p); }
