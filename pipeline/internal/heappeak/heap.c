//go:build linux && cgo

/* malloc and its kin, replaced for a test binary (glibc supports this:
 * "Replacing malloc" in its manual): each calls glibc's own, and on a
 * thread that armed the count (heappeak_arm) adds or takes the block's
 * usable size and keeps the most held. Blocks freed on that thread but
 * taken before it armed make the count go below its start: the peak is
 * measured from the arming, what the function took beyond what it gave
 * back. */
#include <malloc.h>
#include <stddef.h>

#include "heap.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static __thread int armed;
static __thread long long held, peak, blocks;

static void add(void *p) {
  if (!armed || !p)
    return;
  held += (long long)malloc_usable_size(p);
  blocks++;
  if (held > peak)
    peak = held;
}

static void sub(void *p) {
  if (armed && p)
    held -= (long long)malloc_usable_size(p);
}

void *malloc(size_t n) {
  void *p = __libc_malloc(n);
  add(p);
  return p;
}

void *calloc(size_t n, size_t m) {
  void *p = __libc_calloc(n, m);
  add(p);
  return p;
}

void *realloc(void *q, size_t n) {
  void *p;
  sub(q);
  p = __libc_realloc(q, n);
  add(p ? p : q);
  return p;
}

void free(void *p) {
  sub(p);
  __libc_free(p);
}

void heappeak_arm(void) {
  held = peak = blocks = 0;
  armed = 1;
}

long long heappeak_disarm(long long *nblocks) {
  armed = 0;
  if (nblocks)
    *nblocks = blocks;
  return peak;
}
