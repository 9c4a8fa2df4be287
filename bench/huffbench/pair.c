/* huffbench's pair mode: two JPEG scans entropy-decoded at once, in one
 * loop, against huff.c's decoder decoding them one after the other.
 *
 * huff.c's stored path is bound by one serial chain (each lookup's
 * position depends on the previous code's length) and by the branches the
 * data decides (the end of each block). Two independent scans decoded in
 * one loop interleave two chains, which an out-of-order core may overlap.
 * This measures how much, before any plumbing: every file's scan is set
 * up first (libjpeg parses the headers, huff.c builds the tables, shared
 * between files with the same ones), then each decoder goes through every
 * MCU of every file, timed as a whole (CPU time of the thread):
 *
 *   prod   huff.c's decode_blocks, one MCU a call (what a decode runs);
 *   solo   this file's copy of it, one stream (the same steps, a lane's
 *          state in a struct: that the copy costs what the original does);
 *   blk    two streams, a block of one then a block of the other;
 *   lk     two streams, a lookup of one then a lookup of the other in one
 *          run of five (each its own bit buffer, block and position); one
 *          that leaves the run, for a slow path or the end of its block,
 *          is handled inline alone and both runs start again;
 *   lkc    lk with one test a step for both lanes' ways out of the run;
 *   lk3    lk with only the runs inline, the hot state in scalars (GCC
 *          keeps much of lk's on the stack), every exit out of line;
 *   lk4    lk3 with the common exits inline again: a block's end, the
 *          next block's DC, raw AC values, a read-past lane's long
 *          magnitudes; the rest (long codes, an MCU's end) out of line.
 *
 * Stream A decodes files 0, 2, 4..., stream B 1, 3, 5... By default a
 * stream whose file ends takes its next one at once; "-pairs": files 2i
 * and 2i+1 start together and the one left decodes alone to its end (what
 * a worker that pairs two samples would do). Each file's MCUs are all
 * stored (ss), all read past (pp), or A's stored and B's read past (sp: a
 * first decode does both, the crop's MCUs stored and those above and
 * beside it read past). Checksums per file (coefficients of stored MCUs,
 * DC predictors of the others, the bit position and corrupt flag at the
 * end) must be the same for every decoder; pair_main exits 1 if one is
 * not (the untimed first pass).
 *
 *   huffbench pair ROUNDS FILE...
 *
 * prints each round's ns per MCU (both streams' MCUs; the configurations'
 * order alternates between rounds), the medians, and prod's time over
 * each (of the medians, and the median of the rounds' ratios).
 * PAIR_DAMAGE=seed changes four bytes of each scan (pseudo-random from
 * seed) after the set-up: the decoders must agree on damaged data too.
 * PAIR_ONLY=v,c runs variant v's configuration c alone (0-based, in the
 * order printed; prod's too in the checksum pass): for counting
 * instructions under valgrind. Built with -DPAIR_COUNT, solo counts its
 * lookups and exits per MCU. */

typedef struct {
  const uint8_t *p0, *end; /* the scan's first byte, the data's end */
  int blocks, memb[D_MAX_BLOCKS_IN_MCU];
  const stoker_htab *dc[D_MAX_BLOCKS_IN_MCU], *ac[D_MAX_BLOCKS_IN_MCU];
  long nmcu;
  int mpr;
} pfile;

typedef struct {
  stoker_bits b;
  int pred[MAX_COMPS_IN_SCAN];
  int bad, corrupt;
  const pfile *f;
  long m;   /* the MCU it decodes */
  int blkn; /* the block of that MCU */
  JBLOCK *blk;
  uint64_t sum;
  int check;
} lane;

static pfile *pf;
static int npf, ncorrupt; /* files prod's checksum pass found corrupt */
static uint64_t *fsum;

/* ---- Tables shared between files with the same definitions ---- */

static struct {
  JHUFF_TBL def;
  int ac;
  stoker_htab *t;
} pool[64];
static int npool;

static const stoker_htab *pooled(const JHUFF_TBL *src, int ac) {
  int i;
  for (i = 0; i < npool; i++)
    if (pool[i].ac == ac && !memcmp(pool[i].def.bits, src->bits, sizeof src->bits) &&
        !memcmp(pool[i].def.huffval, src->huffval, sizeof src->huffval))
      return pool[i].t;
  if (npool == 64) {
    fprintf(stderr, "huffbench: more than 64 tables\n");
    exit(1);
  }
  pool[npool].t = aligned_alloc(64, (sizeof(stoker_htab) + 63) / 64 * 64);
  if (!pool[npool].t)
    exit(1);
  stoker_htab_build(pool[npool].t, src, ac);
  pool[npool].def = *src;
  pool[npool].ac = ac;
  return pool[npool++].t;
}

/* ---- One lane: huff.c's decode_blocks_, one block at a time ---- */

/* bits.h's and huff.c's bit reader, always inlined: GCC inlines them
 * into huff.c's decoder but not into every copy of the two-lane loops
 * below, and a call with a lane's bit buffer's address keeps it in memory
 * (a store a lookup). The same steps; the checksums show the same
 * results. */
#define AI static inline __attribute__((always_inline))
AI unsigned p_peek(const stoker_bits *b, int n) { return (unsigned)(b->buf >> (64 - n)); }
AI void p_consume(stoker_bits *b, int n) {
  b->buf <<= n;
  b->n -= n;
}
AI void p_consume_e(stoker_bits *b, uint64_t e) {
  b->buf <<= (e & 63);
  b->n -= (int)(e & 31);
}
AI int p_raw_value(const stoker_bits *b, uint64_t e) {
  int l = (int)(e >> 23) & 15, s = (int)(e >> 27) & 15;
  return extend((unsigned)((b->buf << l) >> (64 - s)), s);
}
AI void p_refill_slow(stoker_bits *b) {
  while (b->n < 56) {
    unsigned c = 0;
    if (!b->marker && b->p < b->end) {
      c = *b->p;
      if (c != 0xFF) {
        b->p++;
      } else if (b->p + 1 < b->end && b->p[1] == 0x00) {
        b->p += 2;
      } else {
        b->marker = 1;
        c = 0;
        b->fake += 8;
      }
    } else {
      b->marker = 1;
      b->fake += 8;
    }
    b->buf |= (uint64_t)c << (56 - b->n);
    b->n += 8;
  }
}
AI void p_refill(stoker_bits *b) {
  if (!b->marker && b->end - b->p >= 8) {
    uint64_t x, v;
    memcpy(&x, b->p, 8);
    x = __builtin_bswap64(x);
    v = ~x;
    if (!((v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL)) {
      b->buf |= x >> b->n;
      b->p += (63 - b->n) >> 3;
      b->n |= 56;
      return;
    }
  }
  p_refill_slow(b);
}
AI int p_decode_sym(stoker_bits *b, const stoker_htab *t, int *bad) {
  unsigned e = t->lut[p_peek(b, STOKER_LB)];
  int l;
  if (e >> 8) {
    p_consume(b, (int)(e >> 8));
    return (int)(e & 0xFF);
  }
  for (l = STOKER_LB + 1; l <= 16; l++) {
    int32_t code = (int32_t)p_peek(b, l);
    if (code <= t->maxcode[l]) {
      p_consume(b, l);
      return t->huffval[(code + t->valoff[l]) & 0xFF];
    }
  }
  *bad = 1;
  return 0;
}

static long lane_bits(const lane *L) {
  const uint8_t *p = L->b.p;
  int real = L->b.n - L->b.fake, k;
  if (real < 0)
    return -1;
  for (k = (real + 7) >> 3; k > 0; k--)
    p -= (p - L->f->p0 >= 2 && p[-1] == 0x00 && p[-2] == 0xFF) ? 2 : 1;
  return (long)(p - L->f->p0) * 8 + ((8 - (real & 7)) & 7);
}

static void lane_start(lane *L, const pfile *f, int store) {
  memset(&L->b, 0, sizeof L->b);
  L->b.p = f->p0;
  L->b.end = f->end;
  memset(L->pred, 0, sizeof L->pred);
  L->bad = L->corrupt = 0;
  L->f = f;
  L->m = 0;
  L->blkn = 0;
  L->sum = 0;
  if (store)
    memset(L->blk, 0, sizeof(JBLOCK) * (size_t)f->blocks);
}

static uint64_t lane_sum(const lane *L) {
  uint64_t s = L->sum;
  s = s * 31 + (uint64_t)lane_bits(L);
  return s * 31 + (uint64_t)L->corrupt;
}

/* The DC of block blkn (block: where it goes, store 1). */
static inline __attribute__((always_inline)) void lane_dc(lane *L, stoker_bits *b,
                                                          JCOEF *block, const int store) {
  const stoker_htab *dc = L->f->dc[L->blkn];
  int c = L->f->memb[L->blkn], s;
  uint64_t e;
  if (b->n < 32)
    p_refill(b);
  e = dc->fast[p_peek(b, STOKER_LB)];
  if (e) {
    int d = (int16_t)(e >> 32);
    if (e & F_RAW)
      d = p_raw_value(b, e);
    p_consume_e(b, e);
    L->pred[c] += d;
  } else {
    s = p_decode_sym(b, dc, &L->bad);
    if (s) {
      unsigned v = p_peek(b, s);
      p_consume(b, s);
      L->pred[c] += extend(v, s);
    }
  }
  if (store)
    block[0] = (JCOEF)L->pred[c];
}

/* What decode_blocks_ does when an entry leaves the run: from its label
 * last (where 0), slow (1) or general (2). 1: the block ended. */
static inline __attribute__((always_inline)) int
lane_after(stoker_bits *b, int *bad, int *kp, JCOEF *block, const stoker_htab *ac,
           uint64_t e, unsigned x, int at, const int where, const int store) {
  int k = *kp, rs, r, s;
  if (where == 0)
    goto last;
  if (where == 1)
    goto slow;
  goto general;
last:
  if (k >= 64)
    goto ended;
  block[stoker_natural[at]] = (JCOEF)(int16_t)(e >> 32);
  p_consume(b, (int)(e >> 6) & 31);
  k = at + 1;
  goto ended;
slow:
  if (k >= 64)
    goto ended;
  if (b->n < 32)
    p_refill(b);
  if (e & F_OK) {
    k += (int)(e >> 11) & 15;
    block[stoker_natural[k]] = (JCOEF)(int16_t)(e >> 32);
    if (++k >= 64) {
      p_consume(b, (int)(e >> 6) & 31);
      goto ended;
    }
    p_consume_e(b, e);
    goto ended;
  }
  if (e & F_RAW) {
    k += (int)(e >> 11) & 15;
    block[stoker_natural[k]] = (JCOEF)p_raw_value(b, e);
    p_consume_e(b, e);
    k++;
    goto cont;
  }
general:
  if (b->n < 32)
    p_refill(b);
  if (!store && (x & S_NONE) == S_NONE && (x & 31) && k + (int)(x >> 12) < 63) {
    p_consume(b, (int)(x & 31));
    k += (int)(x >> 12) + 1;
    goto cont;
  }
  rs = p_decode_sym(b, ac, bad);
  r = rs >> 4;
  s = rs & 15;
  if (s) {
    unsigned v;
    k += r;
    v = p_peek(b, s);
    p_consume(b, s);
    if (store)
      block[stoker_natural[k]] = (JCOEF)extend(v, s);
    k++;
  } else {
    if (r != 15)
      goto ended;
    k += 16;
  }
cont:
  *kp = k;
  return k >= 64;
ended:
  *kp = k;
  return 1;
}

/* The end of a block that ended at k; 1: the lane's file is done. */
static inline __attribute__((always_inline)) int lane_end_block(lane *L, stoker_bits *bt,
                                                                int k, const int store) {
  int b, i;
  if (k > 64)
    L->bad = 1;
  if (++L->blkn < L->f->blocks)
    return 0;
  if (L->bad || bt->n < bt->fake)
    L->corrupt = 1;
  L->bad = 0;
  if (L->check) {
    if (store)
      for (b = 0; b < L->f->blocks; b++)
        for (i = 0; i < 64; i++)
          L->sum = L->sum * 31 + (uint16_t)L->blk[b][i];
    else
      L->sum = L->sum * 31 + (uint64_t)(L->pred[0] + 7 * L->pred[1] + 13 * L->pred[2]);
  }
  L->blkn = 0;
  if (++L->m == L->f->nmcu)
    return 1;
  if (store)
    memset(L->blk, 0, sizeof(JBLOCK) * (size_t)L->f->blocks);
  return 0;
}

/* The steps of decode_blocks_'s runs (L a lane, the rest its registers). */
#define LOOKUP(L, st, e, x, ac)                                                \
  do {                                                                         \
    if (st)                                                                    \
      e = (ac)->fast[p_peek(&(L), STOKER_LB)];                                 \
    else                                                                       \
      x = (ac)->skip[p_peek(&(L), STOKER_LB)];                                 \
  } while (0)
#define STORE_APPLY(L, e, k, at, bl, SLOW, LAST)                               \
  if (!((e) & F_GO))                                                           \
    goto SLOW;                                                                 \
  at = k + ((int)((e) >> 11) & 15);                                            \
  if (at >= 63)                                                                \
    goto LAST;                                                                 \
  bl[stoker_natural[at]] = (JCOEF)(int16_t)((e) >> 32);                        \
  p_consume_e(&(L), e);                                                        \
  k = at + 1 + ((int)((e) >> 15) & 15);                                        \
  bl[stoker_natural[k]] = (JCOEF)(int16_t)((e) >> 48);                         \
  k += (int)((e) >> 19) & 1;
#define SKIP_APPLY(L, x, k, GENERAL, END)                                      \
  if (k + (int)(((x) >> 5) & 63) >= 63)                                        \
    goto GENERAL;                                                              \
  p_consume(&(L), (int)((x) & 31));                                            \
  k += (int)(((x) >> 5) & 63) + 1;                                             \
  if ((x) & S_EOB)                                                             \
    goto END;
#define APPLY(L, st, e, x, k, at, bl, SLOW, LAST, GENERAL, END)                \
  if (st) {                                                                    \
    STORE_APPLY(L, e, k, at, bl, SLOW, LAST)                                   \
  } else {                                                                     \
    SKIP_APPLY(L, x, k, GENERAL, END)                                          \
  }

/* Built with -DPAIR_COUNT, the solo decoder counts what it does (printed
 * per MCU with the checksums): runs of lookups begun, lookups taken in
 * them, and the exits from them (last, slow, general, a skip entry's end
 * of block). */
#ifdef PAIR_COUNT
static long cnt[8];
#define CNT(i) (cnt[i]++)
#else
#define CNT(i) ((void)0)
#endif

/* The rest of a block from coefficient k (its DC done): decode_blocks_'s
 * loop; the k where it ended. */
static inline __attribute__((always_inline)) int lane_rest(lane *L, stoker_bits *bp, int k,
                                                           JCOEF *bl, const stoker_htab *ac,
                                                           const int store) {
  int at = 0;
  uint64_t e = 0;
  unsigned x = 0;
  stoker_bits b = *bp;
  for (;;) {
    p_refill(&b);
    CNT(0);
#define STEP                                                                   \
  LOOKUP(b, store, e, x, ac);                                                  \
  APPLY(b, store, e, x, k, at, bl, slow, last, general, end)                   \
  CNT(1);
    STEP STEP STEP STEP STEP
#undef STEP
    continue;
  last:
    CNT(2);
    if (lane_after(&b, &L->bad, &k, bl, ac, e, x, at, 0, store))
      break;
    continue;
  slow:
    CNT(3);
    if (lane_after(&b, &L->bad, &k, bl, ac, e, x, at, 1, store))
      break;
    continue;
  general:
    CNT(4);
    if (lane_after(&b, &L->bad, &k, bl, ac, e, x, at, 2, store))
      break;
    continue;
  end:
    CNT(5);
    break;
  }
  *bp = b;
  return k;
}

/* One block of a lane, as decode_blocks_ decodes it; 1: its file is done. */
static inline __attribute__((always_inline)) int lane_block(lane *L, const int store) {
  JCOEF *bl = store ? L->blk[L->blkn] : NULL;
  const stoker_htab *ac = L->f->ac[L->blkn];
  stoker_bits b = L->b;
  int k;
  lane_dc(L, &b, bl, store);
  k = lane_rest(L, &b, 1, bl, ac, store);
  L->b = b;
  return lane_end_block(L, &b, k, store);
}

static inline __attribute__((always_inline)) void solo_(lane *pl, const int store) {
  lane L = *pl;
  while (!lane_block(&L, store))
    ;
  *pl = L;
}

static __attribute__((noinline)) void solo(lane *L, int store) {
  if (store)
    solo_(L, 1);
  else
    solo_(L, 0);
}

/* ---- Two lanes ---- */

/* A block of A, then one of B, until one's file is done (0: A's, 1: B's). */
static inline __attribute__((always_inline)) int blk_(lane *pa, lane *pb, const int sa,
                                                      const int sb) {
  lane A = *pa, B = *pb;
  int who;
  for (;;) {
    if (lane_block(&A, sa)) {
      who = 0;
      break;
    }
    if (lane_block(&B, sb)) {
      who = 1;
      break;
    }
  }
  *pa = A;
  *pb = B;
  return who;
}

/* A lookup of A, then one of B, in one run of five; a lane that leaves
 * the run is handled alone (decode_blocks_'s paths), then both runs start
 * again. Until one's file is done (0: A's, 1: B's). */
static inline __attribute__((always_inline)) int lk_(lane *pa, lane *pb, const int sa,
                                                     const int sb) {
  lane A = *pa, B = *pb;
  JCOEF *blA = sa ? A.blk[A.blkn] : NULL, *blB = sb ? B.blk[B.blkn] : NULL;
  const stoker_htab *acA = A.f->ac[A.blkn], *acB = B.f->ac[B.blkn];
  int kA = 1, kB = 1, atA = 0, atB = 0, who;
  uint64_t eA = 0, eB = 0;
  unsigned xA = 0, xB = 0;
  stoker_bits bA = A.b, bB = B.b;
  lane_dc(&A, &bA, blA, sa);
  lane_dc(&B, &bB, blB, sb);
  for (;;) {
    p_refill(&bA);
    p_refill(&bB);
#define STEP2                                                                  \
  LOOKUP(bA, sa, eA, xA, acA);                                                  \
  LOOKUP(bB, sb, eB, xB, acB);                                                  \
  APPLY(bA, sa, eA, xA, kA, atA, blA, a_slow, a_last, a_general, a_end)         \
  APPLY(bB, sb, eB, xB, kB, atB, blB, b_slow, b_last, b_general, b_end)
    STEP2 STEP2 STEP2 STEP2 STEP2
#undef STEP2
    continue;
#define AFTER(L, bt, k, at, e, x, bl, ac, st, W, END)                          \
  if (lane_after(&bt, &(L).bad, &k, bl, ac, e, x, at, W, st))                   \
    goto END;                                                                  \
  continue;
  a_last:
    AFTER(A, bA, kA, atA, eA, xA, blA, acA, sa, 0, a_end)
  a_slow:
    AFTER(A, bA, kA, atA, eA, xA, blA, acA, sa, 1, a_end)
  a_general:
    AFTER(A, bA, kA, atA, eA, xA, blA, acA, sa, 2, a_end)
  b_last:
    AFTER(B, bB, kB, atB, eB, xB, blB, acB, sb, 0, b_end)
  b_slow:
    AFTER(B, bB, kB, atB, eB, xB, blB, acB, sb, 1, b_end)
  b_general:
    AFTER(B, bB, kB, atB, eB, xB, blB, acB, sb, 2, b_end)
#undef AFTER
  a_end:
    if (lane_end_block(&A, &bA, kA, sa)) {
      A.b = bA;
      who = 0;
      break;
    }
    blA = sa ? A.blk[A.blkn] : NULL;
    acA = A.f->ac[A.blkn];
    kA = 1;
    lane_dc(&A, &bA, blA, sa);
    continue;
  b_end:
    if (lane_end_block(&B, &bB, kB, sb)) {
      B.b = bB;
      who = 1;
      break;
    }
    blB = sb ? B.blk[B.blkn] : NULL;
    acB = B.f->ac[B.blkn];
    kB = 1;
    lane_dc(&B, &bB, blB, sb);
    continue;
  }
  /* The other lane is mid-block: finish it alone, so that both leave at a
   * block's start (its state is in A or B, its position in kX). */
  if (who == 0) {
    *pa = A;
    for (;;) {
      p_refill(&bB);
#define STEPB                                                                  \
  LOOKUP(bB, sb, eB, xB, acB);                                                  \
  APPLY(bB, sb, eB, xB, kB, atB, blB, f_slow, f_last, f_general, f_end)
      STEPB STEPB STEPB STEPB STEPB
#undef STEPB
      continue;
    f_last:
      if (lane_after(&bB, &B.bad, &kB, blB, acB, eB, xB, atB, 0, sb))
        break;
      continue;
    f_slow:
      if (lane_after(&bB, &B.bad, &kB, blB, acB, eB, xB, atB, 1, sb))
        break;
      continue;
    f_general:
      if (lane_after(&bB, &B.bad, &kB, blB, acB, eB, xB, atB, 2, sb))
        break;
      continue;
    f_end:
      break;
    }
    B.b = bB;
    if (lane_end_block(&B, &bB, kB, sb))
      who = 2; /* both done */
    *pb = B;
  } else {
    *pb = B;
    for (;;) {
      p_refill(&bA);
#define STEPA                                                                  \
  LOOKUP(bA, sa, eA, xA, acA);                                                  \
  APPLY(bA, sa, eA, xA, kA, atA, blA, g_slow, g_last, g_general, g_end)
      STEPA STEPA STEPA STEPA STEPA
#undef STEPA
      continue;
    g_last:
      if (lane_after(&bA, &A.bad, &kA, blA, acA, eA, xA, atA, 0, sa))
        break;
      continue;
    g_slow:
      if (lane_after(&bA, &A.bad, &kA, blA, acA, eA, xA, atA, 1, sa))
        break;
      continue;
    g_general:
      if (lane_after(&bA, &A.bad, &kA, blA, acA, eA, xA, atA, 2, sa))
        break;
      continue;
    g_end:
      break;
    }
    A.b = bA;
    if (lane_end_block(&A, &bA, kA, sa))
      who = 2;
    *pa = A;
  }
  return who;
}

/* lk_ with one test a step for both lanes' ways out of the run (a store
 * lane's entry that does not go on or whose coefficient lands at 63, a
 * read-past lane's last coefficient at 63): fewer branches; the step with
 * one goes through lk_'s tests, which find the lane. */
#define PRE(st, e, x, k, at)                                                   \
  ((st) ? (!((e) & F_GO) | ((at = k + ((int)((e) >> 11) & 15)) >= 63))          \
        : (k + (int)(((x) >> 5) & 63) >= 63))
#define APPLY_GO(L, st, e, x, k, at, bl, END)                                  \
  if (st) {                                                                    \
    bl[stoker_natural[at]] = (JCOEF)(int16_t)((e) >> 32);                      \
    p_consume_e(&(L), e);                                                        \
    k = at + 1 + ((int)((e) >> 15) & 15);                                      \
    bl[stoker_natural[k]] = (JCOEF)(int16_t)((e) >> 48);                       \
    k += (int)((e) >> 19) & 1;                                                 \
  } else {                                                                     \
    p_consume(&(L), (int)((x) & 31));                                            \
    k += (int)(((x) >> 5) & 63) + 1;                                           \
    if ((x) & S_EOB)                                                           \
      goto END;                                                                \
  }
static inline __attribute__((always_inline)) int lkc_(lane *pa, lane *pb, const int sa,
                                                     const int sb) {
  lane A = *pa, B = *pb;
  JCOEF *blA = sa ? A.blk[A.blkn] : NULL, *blB = sb ? B.blk[B.blkn] : NULL;
  const stoker_htab *acA = A.f->ac[A.blkn], *acB = B.f->ac[B.blkn];
  int kA = 1, kB = 1, atA = 0, atB = 0, who;
  uint64_t eA = 0, eB = 0;
  unsigned xA = 0, xB = 0;
  stoker_bits bA = A.b, bB = B.b;
  lane_dc(&A, &bA, blA, sa);
  lane_dc(&B, &bB, blB, sb);
  for (;;) {
    p_refill(&bA);
    p_refill(&bB);
#define STEP2                                                                  \
  LOOKUP(bA, sa, eA, xA, acA);                                                 \
  LOOKUP(bB, sb, eB, xB, acB);                                                 \
  if (PRE(sa, eA, xA, kA, atA) | PRE(sb, eB, xB, kB, atB))                     \
    goto sortout;                                                              \
  APPLY_GO(bA, sa, eA, xA, kA, atA, blA, a_end)                                \
  APPLY_GO(bB, sb, eB, xB, kB, atB, blB, b_end)
    STEP2 STEP2 STEP2 STEP2 STEP2
#undef STEP2
    continue;
  sortout:
    APPLY(bA, sa, eA, xA, kA, atA, blA, a_slow, a_last, a_general, a_end)
    APPLY(bB, sb, eB, xB, kB, atB, blB, b_slow, b_last, b_general, b_end)
    continue;
#define AFTER(L, bt, k, at, e, x, bl, ac, st, W, END)                          \
  if (lane_after(&bt, &(L).bad, &k, bl, ac, e, x, at, W, st))                   \
    goto END;                                                                  \
  continue;
  a_last:
    AFTER(A, bA, kA, atA, eA, xA, blA, acA, sa, 0, a_end)
  a_slow:
    AFTER(A, bA, kA, atA, eA, xA, blA, acA, sa, 1, a_end)
  a_general:
    AFTER(A, bA, kA, atA, eA, xA, blA, acA, sa, 2, a_end)
  b_last:
    AFTER(B, bB, kB, atB, eB, xB, blB, acB, sb, 0, b_end)
  b_slow:
    AFTER(B, bB, kB, atB, eB, xB, blB, acB, sb, 1, b_end)
  b_general:
    AFTER(B, bB, kB, atB, eB, xB, blB, acB, sb, 2, b_end)
#undef AFTER
  a_end:
    if (lane_end_block(&A, &bA, kA, sa)) {
      A.b = bA;
      who = 0;
      break;
    }
    blA = sa ? A.blk[A.blkn] : NULL;
    acA = A.f->ac[A.blkn];
    kA = 1;
    lane_dc(&A, &bA, blA, sa);
    continue;
  b_end:
    if (lane_end_block(&B, &bB, kB, sb)) {
      B.b = bB;
      who = 1;
      break;
    }
    blB = sb ? B.blk[B.blkn] : NULL;
    acB = B.f->ac[B.blkn];
    kB = 1;
    lane_dc(&B, &bB, blB, sb);
    continue;
  }
  /* The other lane is mid-block: finish it alone, so that both leave at a
   * block's start (its state is in A or B, its position in kX). */
  if (who == 0) {
    *pa = A;
    for (;;) {
      p_refill(&bB);
#define STEPB                                                                  \
  LOOKUP(bB, sb, eB, xB, acB);                                                  \
  APPLY(bB, sb, eB, xB, kB, atB, blB, f_slow, f_last, f_general, f_end)
      STEPB STEPB STEPB STEPB STEPB
#undef STEPB
      continue;
    f_last:
      if (lane_after(&bB, &B.bad, &kB, blB, acB, eB, xB, atB, 0, sb))
        break;
      continue;
    f_slow:
      if (lane_after(&bB, &B.bad, &kB, blB, acB, eB, xB, atB, 1, sb))
        break;
      continue;
    f_general:
      if (lane_after(&bB, &B.bad, &kB, blB, acB, eB, xB, atB, 2, sb))
        break;
      continue;
    f_end:
      break;
    }
    B.b = bB;
    if (lane_end_block(&B, &bB, kB, sb))
      who = 2; /* both done */
    *pb = B;
  } else {
    *pb = B;
    for (;;) {
      p_refill(&bA);
#define STEPA                                                                  \
  LOOKUP(bA, sa, eA, xA, acA);                                                  \
  APPLY(bA, sa, eA, xA, kA, atA, blA, g_slow, g_last, g_general, g_end)
      STEPA STEPA STEPA STEPA STEPA
#undef STEPA
      continue;
    g_last:
      if (lane_after(&bA, &A.bad, &kA, blA, acA, eA, xA, atA, 0, sa))
        break;
      continue;
    g_slow:
      if (lane_after(&bA, &A.bad, &kA, blA, acA, eA, xA, atA, 1, sa))
        break;
      continue;
    g_general:
      if (lane_after(&bA, &A.bad, &kA, blA, acA, eA, xA, atA, 2, sa))
        break;
      continue;
    g_end:
      break;
    }
    A.b = bA;
    if (lane_end_block(&A, &bA, kA, sa))
      who = 2;
    *pa = A;
  }
  return who;
}

#undef PRE
#undef APPLY_GO

/* ---- Two lanes, the hot state in scalars ----
 *
 * lk_ as GCC compiles it keeps much of both lanes' state on the stack
 * (one bit buffer shifted in memory, a store-to-load forward on the
 * chain), as it has the whole of both lanes' slow paths inline. lk3_ has
 * only the two runs inline, each lane's bit buffer, count, byte pointer,
 * position, block and table in scalars; a lane that leaves its run (or
 * needs a slow refill) writes them to its lreg, and lane_exit (out of
 * line) takes it from there as decode_blocks_ would. */
typedef struct {
  stoker_bits b;
  int k;
  JCOEF *bl;
  const stoker_htab *ac;
} lreg;

/* What the lane that left its run does: w 0-2 lane_after's last, slow,
 * general; 3 a skip entry's end of the block. Then, if the block ended,
 * the next one's DC. 1: the lane's file is done. */
static inline __attribute__((always_inline)) int lane_exit_(lane *L, lreg *R, uint64_t e,
                                                            unsigned x, int at, int w,
                                                            const int store) {
  int k = R->k, ended = 1;
  if (w == 5) { /* the DC of the block R is at (lk4_) */
    lane_dc(L, &R->b, R->bl, store);
    R->k = 1;
    return 0;
  }
  if (w == 0)
    ended = lane_after(&R->b, &L->bad, &k, R->bl, R->ac, e, x, at, 0, store);
  else if (w == 1)
    ended = lane_after(&R->b, &L->bad, &k, R->bl, R->ac, e, x, at, 1, store);
  else if (w == 2)
    ended = lane_after(&R->b, &L->bad, &k, R->bl, R->ac, e, x, at, 2, store);
  R->k = k;
  if (!ended)
    return 0;
  L->b = R->b;
  if (lane_end_block(L, &R->b, k, store))
    return 1;
  R->bl = store ? L->blk[L->blkn] : NULL;
  R->ac = L->f->ac[L->blkn];
  R->k = 1;
  lane_dc(L, &R->b, R->bl, store);
  return 0;
}

static __attribute__((noinline)) int lane_exit(lane *L, lreg *R, uint64_t e, unsigned x,
                                               int at, int w, int store) {
  return store ? lane_exit_(L, R, e, x, at, w, 1) : lane_exit_(L, R, e, x, at, w, 0);
}

/* The rest of the lane's block alone, then its end; 1: its file is done. */
static __attribute__((noinline)) int lane_finish(lane *L, lreg *R, int store) {
  int k = store ? lane_rest(L, &R->b, R->k, R->bl, R->ac, 1)
                : lane_rest(L, &R->b, R->k, R->bl, R->ac, 0);
  L->b = R->b;
  return store ? lane_end_block(L, &R->b, k, 1) : lane_end_block(L, &R->b, k, 0);
}

static __attribute__((noinline)) void lane_begin(lane *L, lreg *R, int store) {
  R->b = L->b;
  R->bl = store ? L->blk[L->blkn] : NULL;
  R->ac = L->f->ac[L->blkn];
  R->k = 1;
  if (store)
    lane_dc(L, &R->b, R->bl, 1);
  else
    lane_dc(L, &R->b, R->bl, 0);
}

#define SYNC_OUT(R, BUF, N, P, K) (R.b.buf = BUF, R.b.n = N, R.b.p = P, R.k = K)
#define SYNC_IN(R, BUF, N, P, K, BL, FA, SK)                                   \
  (BUF = R.b.buf, N = R.b.n, P = R.b.p, K = R.k, BL = R.bl, FA = R.ac->fast,     \
   SK = R.ac->skip)
/* p_refill on the scalars (the lane's marker and end in R) */
#define REFILL3(R, BUF, N, P)                                                  \
  do {                                                                         \
    uint64_t x_, v_;                                                           \
    if (!R.b.marker && R.b.end - P >= 8) {                                     \
      memcpy(&x_, P, 8);                                                       \
      x_ = __builtin_bswap64(x_);                                              \
      v_ = ~x_;                                                                \
      if (!((v_ - 0x0101010101010101ULL) & ~v_ & 0x8080808080808080ULL)) {     \
        BUF |= x_ >> N;                                                        \
        P += (63 - N) >> 3;                                                    \
        N |= 56;                                                               \
        break;                                                                 \
      }                                                                        \
    }                                                                          \
    R.b.buf = BUF;                                                             \
    R.b.n = N;                                                                 \
    R.b.p = P;                                                                 \
    p_refill_slow(&R.b);                                                       \
    BUF = R.b.buf;                                                             \
    N = R.b.n;                                                                 \
    P = R.b.p;                                                                 \
  } while (0)
#define LOOKUP3(st, e, x, fa, sk, buf)                                         \
  do {                                                                         \
    if (st)                                                                    \
      e = fa[(buf) >> 53];                                                     \
    else                                                                       \
      x = sk[(buf) >> 53];                                                     \
  } while (0)
#define APPLY3(st, e, x, k, at, bl, buf, n, SLOW, LAST, GEN, END)              \
  if (st) {                                                                    \
    if (!((e) & F_GO))                                                         \
      goto SLOW;                                                               \
    at = k + ((int)((e) >> 11) & 15);                                          \
    if (at >= 63)                                                              \
      goto LAST;                                                               \
    bl[stoker_natural[at]] = (JCOEF)(int16_t)((e) >> 32);                      \
    buf <<= ((e) & 63);                                                        \
    n -= (int)((e) & 31);                                                      \
    k = at + 1 + ((int)((e) >> 15) & 15);                                      \
    bl[stoker_natural[k]] = (JCOEF)(int16_t)((e) >> 48);                       \
    k += (int)((e) >> 19) & 1;                                                 \
  } else {                                                                     \
    if (k + (int)(((x) >> 5) & 63) >= 63)                                      \
      goto GEN;                                                                \
    buf <<= ((x) & 31);                                                        \
    n -= (int)((x) & 31);                                                      \
    k += (int)(((x) >> 5) & 63) + 1;                                           \
    if ((x) & S_EOB)                                                           \
      goto END;                                                                \
  }

/* Until one lane's file is done: 0 A's, 1 B's, 2 both (the other lane's
 * block finished alone, so that both leave at a block's start). */
static inline __attribute__((always_inline)) int lk3_(lane *pa, lane *pb, const int sa,
                                                      const int sb) {
  lreg RA, RB;
  uint64_t bufA, bufB, eA = 0, eB = 0;
  const uint64_t *faA, *faB;
  const uint16_t *skA, *skB;
  const uint8_t *pA, *pB;
  JCOEF *blA, *blB;
  unsigned xA = 0, xB = 0;
  int nA, nB, kA, kB, atA = 0, atB = 0, w, who;
  lane_begin(pa, &RA, sa);
  lane_begin(pb, &RB, sb);
  SYNC_IN(RA, bufA, nA, pA, kA, blA, faA, skA);
  SYNC_IN(RB, bufB, nB, pB, kB, blB, faB, skB);
  for (;;) {
    REFILL3(RA, bufA, nA, pA);
    REFILL3(RB, bufB, nB, pB);
#define STEP3                                                                  \
  LOOKUP3(sa, eA, xA, faA, skA, bufA);                                         \
  LOOKUP3(sb, eB, xB, faB, skB, bufB);                                         \
  APPLY3(sa, eA, xA, kA, atA, blA, bufA, nA, a_slow, a_last, a_gen, a_end)     \
  APPLY3(sb, eB, xB, kB, atB, blB, bufB, nB, b_slow, b_last, b_gen, b_end)
    STEP3 STEP3 STEP3 STEP3 STEP3
#undef STEP3
    continue;
  a_last:
    w = 0;
    goto a_exit;
  a_slow:
    w = 1;
    goto a_exit;
  a_gen:
    w = 2;
    goto a_exit;
  a_end:
    w = 3;
  a_exit:
    SYNC_OUT(RA, bufA, nA, pA, kA);
    if (lane_exit(pa, &RA, eA, xA, atA, w, sa)) {
      who = 0;
      break;
    }
    SYNC_IN(RA, bufA, nA, pA, kA, blA, faA, skA);
    continue;
  b_last:
    w = 0;
    goto b_exit;
  b_slow:
    w = 1;
    goto b_exit;
  b_gen:
    w = 2;
    goto b_exit;
  b_end:
    w = 3;
  b_exit:
    SYNC_OUT(RB, bufB, nB, pB, kB);
    if (lane_exit(pb, &RB, eB, xB, atB, w, sb)) {
      who = 1;
      break;
    }
    SYNC_IN(RB, bufB, nB, pB, kB, blB, faB, skB);
    continue;
  }
  if (who == 0) {
    SYNC_OUT(RB, bufB, nB, pB, kB);
    if (lane_finish(pb, &RB, sb))
      who = 2;
  } else {
    SYNC_OUT(RA, bufA, nA, pA, kA);
    if (lane_finish(pa, &RA, sa))
      who = 2;
  }
  return who;
}
/* lk3_ with the end of a block (a store lane's end-of-block entry, a
 * read-past lane's skip entry with the end) and the next block's DC (a
 * fast entry or a raw one) inline, in the scalars: lane_exit only for the
 * rest (raw AC values, long codes, a coefficient at 63, an MCU's end). */
#define NEXT_BLOCK(L, R, ST, BUF, N, P, K, BL, FA, SK, W, EXIT)                \
  do {                                                                         \
    const stoker_htab *dc_;                                                    \
    uint64_t d_;                                                               \
    int c_;                                                                    \
    if (K > 64)                                                                \
      (L)->bad = 1;                                                            \
    if ((L)->blkn + 1 >= (L)->f->blocks) {                                     \
      W = 3; /* an MCU's end: lane_end_block */                                \
      goto EXIT;                                                               \
    }                                                                          \
    (L)->blkn++;                                                               \
    BL = (ST) ? (L)->blk[(L)->blkn] : NULL;                                    \
    R.bl = BL;                                                                 \
    R.ac = (L)->f->ac[(L)->blkn];                                              \
    FA = R.ac->fast;                                                           \
    SK = R.ac->skip;                                                           \
    K = 1;                                                                     \
    dc_ = (L)->f->dc[(L)->blkn];                                               \
    c_ = (L)->f->memb[(L)->blkn];                                              \
    if (N < 32)                                                                \
      REFILL3(R, BUF, N, P);                                                   \
    d_ = dc_->fast[(BUF) >> 53];                                               \
    if (!d_) {                                                                 \
      W = 5; /* a long code: lane_dc */                                        \
      goto EXIT;                                                               \
    }                                                                          \
    {                                                                          \
      int v_ = (int16_t)(d_ >> 32);                                            \
      if (d_ & F_RAW) {                                                        \
        int l_ = (int)(d_ >> 23) & 15, s_ = (int)(d_ >> 27) & 15;              \
        v_ = extend((unsigned)((BUF << l_) >> (64 - s_)), s_);                 \
      }                                                                        \
      BUF <<= (d_ & 63);                                                       \
      N -= (int)(d_ & 31);                                                     \
      (L)->pred[c_] += v_;                                                     \
      if (ST)                                                                  \
        BL[0] = (JCOEF)(L)->pred[c_];                                          \
    }                                                                          \
  } while (0)
/* A store lane's entry that left the run: the end of its block or a raw
 * value (lane_after's slow path for them), or lane_exit. A block, not a
 * do-while: a raw value's continue starts the runs again. */
#define SLOW4(R, st, e, buf, n, p, k, bl, w, NEXT, EXIT)                       \
  {                                                                            \
    if (!(st) || k >= 64) {                                                    \
      w = 1;                                                                   \
      goto EXIT;                                                               \
    }                                                                          \
    if (n < 32)                                                                \
      REFILL3(R, buf, n, p);                                                   \
    if ((e) & F_OK) {                                                          \
      k += (int)((e) >> 11) & 15;                                              \
      bl[stoker_natural[k]] = (JCOEF)(int16_t)((e) >> 32);                     \
      if (++k >= 64) {                                                         \
        buf <<= (int)((e) >> 6) & 31;                                          \
        n -= (int)((e) >> 6) & 31;                                             \
      } else {                                                                 \
        buf <<= ((e) & 63);                                                    \
        n -= (int)((e) & 31);                                                  \
      }                                                                        \
      goto NEXT;                                                               \
    }                                                                          \
    if (!((e) & F_RAW)) {                                                      \
      w = 1;                                                                   \
      goto EXIT;                                                               \
    }                                                                          \
    {                                                                          \
      int l_ = (int)((e) >> 23) & 15, s_ = (int)((e) >> 27) & 15;              \
      k += (int)((e) >> 11) & 15;                                              \
      bl[stoker_natural[k]] = (JCOEF)extend((unsigned)((buf << l_) >> (64 - s_)), s_); \
      buf <<= ((e) & 63);                                                      \
      n -= (int)((e) & 31);                                                    \
      if (++k >= 64)                                                           \
        goto NEXT;                                                             \
      continue;                                                                \
    }                                                                          \
  }
/* A read-past lane's skip entry that left the run: a coefficient whose
 * magnitude runs past the window (lane_after's general path for it), or
 * lane_exit. */
#define GEN4(R, st, x, buf, n, p, k, w, EXIT)                                  \
  {                                                                            \
    if (n < 32)                                                                \
      REFILL3(R, buf, n, p);                                                   \
    if (!(st) && ((x) & S_NONE) == S_NONE && ((x) & 31) && k + (int)((x) >> 12) < 63) { \
      buf <<= ((x) & 31);                                                      \
      n -= (int)((x) & 31);                                                    \
      k += (int)((x) >> 12) + 1;                                               \
      continue;                                                                \
    }                                                                          \
    w = 2;                                                                     \
    goto EXIT;                                                                 \
  }
static inline __attribute__((always_inline)) int lk4_(lane *pa, lane *pb, const int sa,
                                                      const int sb) {
  lreg RA, RB;
  uint64_t bufA, bufB, eA = 0, eB = 0;
  const uint64_t *faA, *faB;
  const uint16_t *skA, *skB;
  const uint8_t *pA, *pB;
  JCOEF *blA, *blB;
  unsigned xA = 0, xB = 0;
  int nA, nB, kA, kB, atA = 0, atB = 0, w, who;
  lane_begin(pa, &RA, sa);
  lane_begin(pb, &RB, sb);
  SYNC_IN(RA, bufA, nA, pA, kA, blA, faA, skA);
  SYNC_IN(RB, bufB, nB, pB, kB, blB, faB, skB);
  for (;;) {
    REFILL3(RA, bufA, nA, pA);
    REFILL3(RB, bufB, nB, pB);
#define STEP3                                                                  \
  LOOKUP3(sa, eA, xA, faA, skA, bufA);                                         \
  LOOKUP3(sb, eB, xB, faB, skB, bufB);                                         \
  APPLY3(sa, eA, xA, kA, atA, blA, bufA, nA, a_slow, a_last, a_gen, a_end)     \
  APPLY3(sb, eB, xB, kB, atB, blB, bufB, nB, b_slow, b_last, b_gen, b_end)
    STEP3 STEP3 STEP3 STEP3 STEP3
#undef STEP3
    continue;
  a_last:
    w = 0;
    goto a_exit;
  a_slow:
    SLOW4(RA, sa, eA, bufA, nA, pA, kA, blA, w, a_next, a_exit);
  a_gen:
    GEN4(RA, sa, xA, bufA, nA, pA, kA, w, a_exit)
  a_end:
  a_next:
    NEXT_BLOCK(pa, RA, sa, bufA, nA, pA, kA, blA, faA, skA, w, a_exit);
    continue;
  a_exit:
    SYNC_OUT(RA, bufA, nA, pA, kA);
    if (lane_exit(pa, &RA, eA, xA, atA, w, sa)) {
      who = 0;
      break;
    }
    SYNC_IN(RA, bufA, nA, pA, kA, blA, faA, skA);
    continue;
  b_last:
    w = 0;
    goto b_exit;
  b_slow:
    SLOW4(RB, sb, eB, bufB, nB, pB, kB, blB, w, b_next, b_exit);
  b_gen:
    GEN4(RB, sb, xB, bufB, nB, pB, kB, w, b_exit)
  b_end:
  b_next:
    NEXT_BLOCK(pb, RB, sb, bufB, nB, pB, kB, blB, faB, skB, w, b_exit);
    continue;
  b_exit:
    SYNC_OUT(RB, bufB, nB, pB, kB);
    if (lane_exit(pb, &RB, eB, xB, atB, w, sb)) {
      who = 1;
      break;
    }
    SYNC_IN(RB, bufB, nB, pB, kB, blB, faB, skB);
    continue;
  }
  if (who == 0) {
    SYNC_OUT(RB, bufB, nB, pB, kB);
    if (lane_finish(pb, &RB, sb))
      who = 2;
  } else {
    SYNC_OUT(RA, bufA, nA, pA, kA);
    if (lane_finish(pa, &RA, sa))
      who = 2;
  }
  return who;
}
#undef NEXT_BLOCK
#undef SLOW4
#undef GEN4
#undef SYNC_OUT
#undef SYNC_IN
#undef REFILL3
#undef LOOKUP3
#undef APPLY3

/* blk_ leaves both lanes at a block's start; so must lk_ (above): 0 A's
 * file done, 1 B's, 2 both. blk_'s answer is 0 or 1. */
#define SPECIALIZE(name, fn)                                                   \
  static __attribute__((noinline)) int name##_11(lane *a, lane *b) { return fn(a, b, 1, 1); } \
  static __attribute__((noinline)) int name##_10(lane *a, lane *b) { return fn(a, b, 1, 0); } \
  static __attribute__((noinline)) int name##_01(lane *a, lane *b) { return fn(a, b, 0, 1); } \
  static __attribute__((noinline)) int name##_00(lane *a, lane *b) { return fn(a, b, 0, 0); } \
  static int name(lane *a, lane *b, int sa, int sb) {                          \
    return sa ? (sb ? name##_11(a, b) : name##_10(a, b))                       \
              : (sb ? name##_01(a, b) : name##_00(a, b));                      \
  }
SPECIALIZE(blk2, blk_)
SPECIALIZE(lk2, lk_)
SPECIALIZE(lkc2, lkc_)
SPECIALIZE(lk32, lk3_)
SPECIALIZE(lk42, lk4_)
#undef SPECIALIZE

/* ---- Drivers ---- */

enum { K_PROD, K_SOLO, K_BLK, K_LK, K_LKC, K_LK3, K_LK4, NKIND };
static const char *kname[NKIND] = {"prod", "solo", "blk", "lk", "lkc", "lk3", "lk4"};
enum { V_SS, V_PP, V_SP, NVAR };
static const char *vname[NVAR] = {"ss", "pp", "sp"};

static int stores(int var, int i) { return var == V_SS || (var == V_SP && i % 2 == 0); }

static void run_prod(int var, int check) {
  static stoker_huff h;
  static JBLOCK blk[D_MAX_BLOCKS_IN_MCU];
  static struct jpeg_decompress_struct ci;
  static struct jpeg_source_mgr src;
  JBLOCKROW rows[D_MAX_BLOCKS_IN_MCU];
  int i, b, k;
  for (i = 0; i < D_MAX_BLOCKS_IN_MCU; i++)
    rows[i] = &blk[i];
  ci.src = &src;
  for (i = 0; i < npf; i++) {
    const pfile *f = &pf[i];
    int st = stores(var, i);
    uint64_t sum = 0;
    long m;
    lane L;
    memset(&h.b, 0, sizeof h.b);
    h.b.p = f->p0;
    h.b.end = f->end;
    memset(h.pred, 0, sizeof h.pred);
    h.corrupt = 0;
    ci.blocks_in_MCU = f->blocks;
    for (b = 0; b < f->blocks; b++) {
      ci.MCU_membership[b] = f->memb[b];
      h.dc[b] = f->dc[b];
      h.ac[b] = f->ac[b];
    }
    for (m = 0; m < f->nmcu; m++) {
      if (st) {
        memset(blk, 0, sizeof(JBLOCK) * (size_t)f->blocks);
        decode_blocks(&h, &ci, rows);
        if (check)
          for (b = 0; b < f->blocks; b++)
            for (k = 0; k < 64; k++)
              sum = sum * 31 + (uint16_t)blk[b][k];
      } else {
        decode_blocks(&h, &ci, NULL);
        if (check)
          sum = sum * 31 + (uint64_t)(h.pred[0] + 7 * h.pred[1] + 13 * h.pred[2]);
      }
    }
    if (check) {
      L.b = h.b;
      L.f = f;
      L.sum = sum;
      L.corrupt = h.corrupt;
      fsum[i] = lane_sum(&L);
      ncorrupt += h.corrupt != 0;
    }
  }
}

static void run_lanes(int kind, int var, int pairs, int check) {
  static JBLOCK ba[D_MAX_BLOCKS_IN_MCU], bb[D_MAX_BLOCKS_IN_MCU];
  lane A, B;
  int ia = 0, ib = 1, i;
  A.blk = ba;
  B.blk = bb;
  A.check = B.check = check;
  if (kind == K_SOLO) {
    for (i = 0; i < npf; i++) {
      lane_start(&A, &pf[i], stores(var, i));
      solo(&A, stores(var, i));
      if (check)
        fsum[i] = lane_sum(&A);
    }
    return;
  }
  /* (stores(var, i) is the same for every i of one parity) */
  if (ia < npf)
    lane_start(&A, &pf[ia], stores(var, 0));
  if (ib < npf)
    lane_start(&B, &pf[ib], stores(var, 1));
  while (ia < npf && ib < npf) {
    int who = kind == K_BLK  ? blk2(&A, &B, stores(var, 0), stores(var, 1))
              : kind == K_LK  ? lk2(&A, &B, stores(var, 0), stores(var, 1))
              : kind == K_LKC ? lkc2(&A, &B, stores(var, 0), stores(var, 1))
              : kind == K_LK3 ? lk32(&A, &B, stores(var, 0), stores(var, 1))
                              : lk42(&A, &B, stores(var, 0), stores(var, 1));
    if (who != 1) { /* A's file done */
      if (check)
        fsum[ia] = lane_sum(&A);
      if (pairs && who == 0) { /* B's to its end, alone */
        solo(&B, stores(var, 1));
        who = 2;
      }
    }
    if (who != 0) { /* B's file done */
      if (check)
        fsum[ib] = lane_sum(&B);
      if (pairs && who == 1) {
        solo(&A, stores(var, 0));
        if (check)
          fsum[ia] = lane_sum(&A);
        who = 2;
      }
    }
    if (who != 1 && (ia += 2) < npf)
      lane_start(&A, &pf[ia], stores(var, 0));
    if (who != 0 && (ib += 2) < npf)
      lane_start(&B, &pf[ib], stores(var, 1));
  }
  /* the lane left, alone: mid-file (queue) or at a file's start */
  for (; ia < npf; ia += 2) {
    solo(&A, stores(var, 0));
    if (check)
      fsum[ia] = lane_sum(&A);
    if (ia + 2 < npf)
      lane_start(&A, &pf[ia + 2], stores(var, 0));
  }
  for (; ib < npf; ib += 2) {
    solo(&B, stores(var, 1));
    if (check)
      fsum[ib] = lane_sum(&B);
    if (ib + 2 < npf)
      lane_start(&B, &pf[ib + 2], stores(var, 1));
  }
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int pair_main(int rounds, int nf, char **fn) {
  static stoker_huff h;
  struct jpeg_decompress_struct ci;
  struct jpeg_error_mgr jerr;
  /* configurations: (kind, pairs) for each variant */
  static const int ck[] = {K_PROD, K_SOLO, K_BLK, K_LK, K_LKC, K_LK3, K_LK4, K_LK4};
  static const int cp[] = {0, 0, 0, 0, 0, 0, 0, 1};
  enum { NC = 8 };
  double *ns[NVAR][NC];
  /* PAIR_ONLY=v,c runs variant v's configuration c alone (0-based, in
   * the order printed): for counting instructions under valgrind. */
  const char *only = getenv("PAIR_ONLY"), *dmg = getenv("PAIR_DAMAGE");
  uint64_t seed = dmg ? (uint64_t)strtoull(dmg, NULL, 10) : 0;
  int damage = dmg != NULL;
  int ov = -1, oc = -1;
  uint64_t ref[NVAR];
  long mcus = 0;
  int i, r, v, c, bad = 0;
  if (rounds < 0 || nf < 1) {
    fprintf(stderr, "usage: huffbench pair ROUNDS(>= 0) FILE...\n");
    return 2;
  }
  pf = calloc((size_t)nf, sizeof *pf);
  fsum = calloc((size_t)nf, sizeof *fsum);
  ci.err = jpeg_std_error(&jerr);
  jpeg_create_decompress(&ci);
  for (i = 0; i < nf; i++) {
    size_t len;
    unsigned char *d = slurp(fn[i], &len);
    pfile *f = &pf[npf];
    int b;
    jpeg_mem_src(&ci, d, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    jpeg_start_decompress(&ci);
    if (!stoker_huff_install(&h, &ci) || ci.restart_interval) {
      fprintf(stderr, "huffbench: %s: not a single-scan baseline file without restarts, left out\n", fn[i]);
      jpeg_abort_decompress(&ci);
      continue;
    }
    f->p0 = h.b.p;
    f->end = h.b.end;
    if (damage && f->end - f->p0 > 2) {
      /* four bytes of the scan changed (PAIR_DAMAGE=seed): every
       * decoder must still agree, corrupt flags and bit positions too */
      int q;
      for (q = 0; q < 4; q++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        d[(f->p0 - d) + (long)((seed >> 33) % (uint64_t)(f->end - f->p0 - 2))] =
            (unsigned char)(seed >> 25);
      }
    }
    f->blocks = ci.blocks_in_MCU;
    for (b = 0; b < ci.blocks_in_MCU; b++) {
      jpeg_component_info *comp = ci.cur_comp_info[ci.MCU_membership[b]];
      f->memb[b] = ci.MCU_membership[b];
      f->dc[b] = pooled(ci.dc_huff_tbl_ptrs[comp->dc_tbl_no], 0);
      f->ac[b] = pooled(ci.ac_huff_tbl_ptrs[comp->ac_tbl_no], 1);
    }
    f->mpr = (int)ci.MCUs_per_row;
    f->nmcu = (long)ci.MCUs_per_row * (long)ci.MCU_rows_in_scan;
    mcus += f->nmcu;
    npf++;
    jpeg_abort_decompress(&ci);
  }
  printf("files %d MCUs %ld tables %d\n", npf, mcus, npool);
  if (only && sscanf(only, "%d,%d", &ov, &oc) != 2)
    ov = oc = -1;
  /* the checksums, untimed */
  for (v = 0; v < NVAR; v++)
    for (c = 0; c < NC; c++) {
      uint64_t s = 0;
      ns[v][c] = calloc((size_t)rounds, sizeof(double));
      if (ov >= 0 && (v != ov || (c != oc && c != 0)))
        continue;
#ifdef PAIR_COUNT
      memset(cnt, 0, sizeof cnt);
#endif
      ncorrupt = 0;
      if (ck[c] == K_PROD)
        run_prod(v, 1);
      else
        run_lanes(ck[c], v, cp[c], 1);
      for (i = 0; i < npf; i++)
        s = s * 1000003 + fsum[i];
      if (c == 0)
        ref[v] = s;
      printf("%s %s%s checksum %016llx%s", vname[v], kname[ck[c]], cp[c] ? "-pairs" : "",
             (unsigned long long)s, s == ref[v] ? "" : " DIFFERS");
      if (ck[c] == K_PROD)
        printf(" (%d files corrupt)", ncorrupt);
      printf("\n");
      bad |= s != ref[v];
#ifdef PAIR_COUNT
      if (ck[c] == K_SOLO)
        printf("%s per MCU: runs %.2f lookups in runs %.2f, exits last %.2f slow %.2f general %.2f skip-eob %.2f\n",
               vname[v], (double)cnt[0] / mcus, (double)cnt[1] / mcus, (double)cnt[2] / mcus,
               (double)cnt[3] / mcus, (double)cnt[4] / mcus, (double)cnt[5] / mcus);
#endif
    }
  for (r = 0; r < rounds; r++) {
    for (v = 0; v < NVAR; v++)
      for (i = 0; i < NC; i++) {
        double t0;
        c = r % 2 ? NC - 1 - i : i; /* the order alternates */
        if (ov >= 0 && (v != ov || c != oc))
          continue;
        t0 = now();
        if (ck[c] == K_PROD)
          run_prod(v, 0);
        else
          run_lanes(ck[c], v, cp[c], 0);
        ns[v][c][r] = (now() - t0) / (double)mcus;
      }
    printf("round %d:", r + 1);
    for (v = 0; v < NVAR; v++) {
      printf(" %s", vname[v]);
      for (c = 0; c < NC; c++)
        printf(" %.1f", ns[v][c][r]);
    }
    printf("\n");
    fflush(stdout);
  }
  if (rounds < 1)
    return bad; /* the checksums only */
  printf("medians, ns per MCU (both streams' MCUs); prod / it: of the medians, and the median of the rounds' ratios:\n");
  for (v = 0; v < NVAR; v++) {
    double med[NC], mr[NC], *ratio = calloc((size_t)rounds, sizeof(double));
    for (c = 0; c < NC; c++) { /* the rounds' ratios first: the sorts below reorder */
      for (r = 0; r < rounds; r++)
        ratio[r] = ns[v][0][r] / ns[v][c][r];
      qsort(ratio, (size_t)rounds, sizeof(double), cmpd);
      mr[c] = rounds % 2 ? ratio[rounds / 2] : (ratio[rounds / 2 - 1] + ratio[rounds / 2]) / 2;
    }
    for (c = 0; c < NC; c++) {
      qsort(ns[v][c], (size_t)rounds, sizeof(double), cmpd);
      med[c] = rounds % 2 ? ns[v][c][rounds / 2]
                          : (ns[v][c][rounds / 2 - 1] + ns[v][c][rounds / 2]) / 2;
      printf("%s %-10s %6.1f  %.3fx  %.3fx\n", vname[v], cp[c] ? "lk4-pairs" : kname[ck[c]],
             med[c], med[0] / med[c], mr[c]);
    }
    free(ratio);
  }
  return bad;
}
