/* A limit on libjpeg's own memory: its memory manager's allocation methods
 * wrapped, every byte they are asked for counted against a limit before
 * libjpeg's allocator runs (memlim.c). */
#ifndef STOKER_MEMLIM_H
#define STOKER_MEMLIM_H

#include <stddef.h>
#include <stdio.h>

#include <jpeglib.h>

typedef struct {
  /* libjpeg's own methods, called through. */
  void *(*alloc_small)(j_common_ptr, int, size_t);
  void *(*alloc_large)(j_common_ptr, int, size_t);
  JSAMPARRAY (*alloc_sarray)(j_common_ptr, int, JDIMENSION, JDIMENSION);
  JBLOCKARRAY (*alloc_barray)(j_common_ptr, int, JDIMENSION, JDIMENSION);
  jvirt_sarray_ptr (*request_virt_sarray)(j_common_ptr, int, boolean, JDIMENSION, JDIMENSION,
                                          JDIMENSION);
  jvirt_barray_ptr (*request_virt_barray)(j_common_ptr, int, boolean, JDIMENSION, JDIMENSION,
                                          JDIMENSION);
  void (*realize_virt_arrays)(j_common_ptr);
  void (*free_pool)(j_common_ptr, int);
  long long limit;   /* the most the pools may hold; 0: no limit */
  long long pool[2]; /* bytes held: JPOOL_PERMANENT, JPOOL_IMAGE */
  long long pending; /* virtual arrays requested, not realized yet */
  long long peak;    /* the most held at once since stoker_memlim_begin */
  long long over;    /* a refused request would have made the pools this
                        large (0: none refused) */
} stoker_memlim;

/* stoker_memlim_install wraps c's memory manager (just created) with m,
 * which c->client_data then points to. */
void stoker_memlim_install(stoker_memlim *m, j_common_ptr c);

/* stoker_memlim_begin starts an image: at most limit bytes (0: none) held
 * from now on, counting what the permanent pool holds already. A request
 * over it fails through c's error_exit with JERR_OUT_OF_MEMORY and m->over
 * set, before libjpeg allocates anything of it. */
void stoker_memlim_begin(stoker_memlim *m, long long limit);

/* stoker_memlim_msg writes the error of a request m refused. */
void stoker_memlim_msg(const stoker_memlim *m, char *buf, size_t n);

#endif
