/* A libjpeg encoder for package pipeline's tests (see doc.go). */
#ifndef STOKER_JPEGENC_H
#define STOKER_JPEGENC_H

/* jpegenc_encode encodes w x h pixels (nc = 1 gray or 3 RGB, interleaved)
 * with the given luma sampling factors (chroma is 1x1), optionally
 * progressive, with a restart interval in MCU rows, or (rgb) in the RGB
 * color space, with no YCbCr transform. Returns a malloc'd buffer (free
 * with jpegenc_free) or NULL. */
unsigned char *jpegenc_encode(const unsigned char *pix, int w, int h, int nc,
                              int quality, int hs, int vs, int progressive,
                              int restart_rows, int rgb,
                              unsigned long *out_len);
void jpegenc_free(unsigned char *p);

#endif
