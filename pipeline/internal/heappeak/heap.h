#ifndef HEAPPEAK_H
#define HEAPPEAK_H
/* heappeak_arm starts counting this thread's heap from zero;
 * heappeak_disarm stops and returns the most it held (and the blocks
 * taken). */
void heappeak_arm(void);
long long heappeak_disarm(long long *nblocks);
#endif
