/* A limit on libjpeg's own memory (memlim.h). libjpeg's memory manager
 * (jmemmgr.c) is reached through cinfo->mem's method pointers by every
 * other module; the methods that allocate are wrapped here, and each
 * request is counted before it is passed on: a row array as libjpeg-turbo
 * makes it (its rows rounded up to 64 bytes, a pointer a row), a virtual
 * array (a progressive file's coefficients, 128 bytes a block) when it is
 * realized, all in memory (libjpeg-turbo has no backing store). The count
 * leaves out the pools' own slop and headers (a few KB), which the caller's
 * bound allows for (codec.Header.LibBytes). The permanent pool lives as
 * long as the decompress object; the image pool is emptied by
 * jpeg_abort_decompress and jpeg_finish_decompress (free_pool). */
#include "memlim.h"

#include <jerror.h>

static stoker_memlim *ml_of(j_common_ptr c) { return (stoker_memlim *)c->client_data; }

/* take counts n more bytes in pool id, or fails c with JERR_OUT_OF_MEMORY
 * when they would take the pools past the limit. */
static void take(j_common_ptr c, int id, long long n) {
  stoker_memlim *m = ml_of(c);
  long long held = m->pool[0] + m->pool[1] + n;
  if (m->limit > 0 && held > m->limit) {
    m->over = held;
    ERREXIT1(c, JERR_OUT_OF_MEMORY, 90);
  }
  if (id == JPOOL_PERMANENT || id == JPOOL_IMAGE)
    m->pool[id] += n;
  if (held > m->peak)
    m->peak = held;
}

static long long rows_bytes(long long per_row, JDIMENSION rows) {
  return (long long)rows * (long long)sizeof(void *) + (long long)rows * per_row;
}

static void *ml_small(j_common_ptr c, int id, size_t n) {
  take(c, id, (long long)n);
  return ml_of(c)->alloc_small(c, id, n);
}

static void *ml_large(j_common_ptr c, int id, size_t n) {
  take(c, id, (long long)n);
  return ml_of(c)->alloc_large(c, id, n);
}

static JSAMPARRAY ml_sarray(j_common_ptr c, int id, JDIMENSION w, JDIMENSION rows) {
  take(c, id, rows_bytes(((long long)w * (long long)sizeof(JSAMPLE) + 63) & ~63LL, rows));
  return ml_of(c)->alloc_sarray(c, id, w, rows);
}

static JBLOCKARRAY ml_barray(j_common_ptr c, int id, JDIMENSION w, JDIMENSION rows) {
  take(c, id, rows_bytes((long long)w * (long long)sizeof(JBLOCK), rows));
  return ml_of(c)->alloc_barray(c, id, w, rows);
}

static jvirt_sarray_ptr ml_vsarray(j_common_ptr c, int id, boolean z, JDIMENSION w,
                                   JDIMENSION rows, JDIMENSION acc) {
  jvirt_sarray_ptr p = ml_of(c)->request_virt_sarray(c, id, z, w, rows, acc);
  ml_of(c)->pending += rows_bytes(((long long)w * (long long)sizeof(JSAMPLE) + 63) & ~63LL, rows);
  return p;
}

static jvirt_barray_ptr ml_vbarray(j_common_ptr c, int id, boolean z, JDIMENSION w,
                                   JDIMENSION rows, JDIMENSION acc) {
  jvirt_barray_ptr p = ml_of(c)->request_virt_barray(c, id, z, w, rows, acc);
  ml_of(c)->pending += rows_bytes((long long)w * (long long)sizeof(JBLOCK), rows);
  return p;
}

static void ml_realize(j_common_ptr c) {
  stoker_memlim *m = ml_of(c);
  long long n = m->pending;
  m->pending = 0;
  take(c, JPOOL_IMAGE, n);
  m->realize_virt_arrays(c);
}

static void ml_free(j_common_ptr c, int id) {
  stoker_memlim *m = ml_of(c);
  m->free_pool(c, id);
  if (id == JPOOL_PERMANENT || id == JPOOL_IMAGE)
    m->pool[id] = 0;
  if (id == JPOOL_IMAGE)
    m->pending = 0;
}

void stoker_memlim_install(stoker_memlim *m, j_common_ptr c) {
  struct jpeg_memory_mgr *mem = c->mem;
  m->alloc_small = mem->alloc_small;
  m->alloc_large = mem->alloc_large;
  m->alloc_sarray = mem->alloc_sarray;
  m->alloc_barray = mem->alloc_barray;
  m->request_virt_sarray = mem->request_virt_sarray;
  m->request_virt_barray = mem->request_virt_barray;
  m->realize_virt_arrays = mem->realize_virt_arrays;
  m->free_pool = mem->free_pool;
  mem->alloc_small = ml_small;
  mem->alloc_large = ml_large;
  mem->alloc_sarray = ml_sarray;
  mem->alloc_barray = ml_barray;
  mem->request_virt_sarray = ml_vsarray;
  mem->request_virt_barray = ml_vbarray;
  mem->realize_virt_arrays = ml_realize;
  mem->free_pool = ml_free;
  c->client_data = m;
}

void stoker_memlim_begin(stoker_memlim *m, long long limit) {
  m->limit = limit;
  m->pool[JPOOL_IMAGE] = 0;
  m->pending = 0;
  m->peak = m->pool[JPOOL_PERMANENT];
  m->over = 0;
}

void stoker_memlim_msg(const stoker_memlim *m, char *buf, size_t n) {
  snprintf(buf, n,
           "libjpeg's own scratch for the image would reach %lld bytes, over the %lld reserved "
           "for it from its header",
           m->over, m->limit);
}
