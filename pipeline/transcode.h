/* Lossless transcoding of progressive JPEGs to sequential (baseline) ones
 * at the coefficient level, jpegtran's way (transcode.c). */
#ifndef STOKER_TRANSCODE_H
#define STOKER_TRANSCODE_H

#include <stddef.h>

/* stoker_transcode's results. */
enum {
  STOKER_TC_OK = 0,
  STOKER_TC_FAILED = 1,     /* libjpeg refused the file (an error or a warning) */
  STOKER_TC_INCOMPLETE = 2, /* a coefficient never fully coded: libjpeg smooths such files */
  STOKER_TC_TOO_BIG = 3,    /* the output would pass max_out bytes */
  STOKER_TC_NOT_PROGRESSIVE = 4,
  STOKER_TC_STOPPED = 5 /* the sample's work was abandoned */
};

/* stoker_transcode rewrites the progressive JPEG data[0:len] as a
 * sequential Huffman-coded JPEG with the same quantized DCT coefficients,
 * quantization tables, sampling factors and color space, into a malloc'd
 * buffer (*out, *out_len; free with stoker_transcode_free) of at most
 * max_out bytes. libjpeg may allocate at most max_memory bytes, reads at
 * most max_scans scans, and stops when *stop (if not NULL) turns nonzero.
 * On anything but STOKER_TC_OK, *out is NULL and msg says why.
 *
 * coefs (a stoker_coefs, huff.h; NULL: none), empty, is filled with the
 * sequential file's coefficients, every MCU as huff.c would decode it from
 * *out, taking at most coefs_room bytes (past that it holds the MCUs that
 * fitted): a decode of *out with it as its coefficient cache decodes no
 * entropy-coded data. *coefs_mcus is how many MCUs it holds. */
int stoker_transcode(const unsigned char *data, size_t len, int max_scans,
                     long long max_memory, size_t max_out, const int *stop,
                     void *coefs, long long coefs_room, long *coefs_mcus,
                     unsigned char **out, size_t *out_len, char *msg,
                     size_t msg_len);
void stoker_transcode_free(unsigned char *p);

#endif
