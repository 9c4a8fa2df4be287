/* Lossless transcoding of progressive JPEGs to sequential ones at the
 * coefficient level, into a coefficient-cache entry (transcode.c). */
#ifndef STOKER_TRANSCODE_H
#define STOKER_TRANSCODE_H

#include <stddef.h>

/* stoker_transcode's results. */
enum {
  STOKER_TC_OK = 0,
  STOKER_TC_FAILED = 1,     /* libjpeg refused the file (an error or a warning) */
  STOKER_TC_INCOMPLETE = 2, /* a coefficient never fully coded: libjpeg smooths such files */
  STOKER_TC_TOO_BIG = 3,    /* the coefficients would pass cc_room bytes */
  STOKER_TC_NOT_PROGRESSIVE = 4,
  STOKER_TC_STOPPED = 5 /* the sample's work was abandoned */
};

/* stoker_transcode reads the progressive JPEG data[0:len] whole and stores
 * in cc (a stoker_coefs, huff.h; empty) the MCUs of the sequential
 * Huffman-coded JPEG with the same quantized DCT coefficients,
 * quantization tables, sampling factors and color space: one interleaved
 * scan of every component (a gray file's blocks one to an MCU), each MCU as
 * huff.c would decode it from that scan, all of them within cc_room bytes.
 * libjpeg may allocate at most max_memory bytes (all its allocations
 * counted, memlim.c; 0: no limit), reads at most max_scans scans, and
 * stops when *stop (if not NULL) turns nonzero. On anything but
 * STOKER_TC_OK, msg says why and cc may hold some MCUs (free it).
 * *lib_peak (if not NULL) is set to the most libjpeg's allocations held. */
int stoker_transcode(const unsigned char *data, size_t len, int max_scans,
                     long long max_memory, const int *stop, void *cc,
                     long long cc_room, char *msg, size_t msg_len, long long *lib_peak);

#endif
