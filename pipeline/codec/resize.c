/* The resampler of package pipeline's fast path (turbo.h): torch's uint8
 * resize filters worked out in fixed point (stoker_torch_coeffs), the
 * vertical pass over a view's horizontally resampled rows, and the row API
 * (stoker_rows_*) through which formats.c resamples the images it decodes
 * at full scale. turbo.c's header says how the filters match torch's;
 * turbo.c decodes a JPEG and drives these. */
/* No fused multiply-adds (turbo.c says why): the filters' weights are
 * doubles whose bytes must be the same on every machine. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "turbo_state.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* grow makes *p hold at least n elements of size sz, reusing it if it does. */
void stoker_grow(stoker_turbo *t, void **p, size_t *cap, size_t n, size_t sz) {
  void *q;
  if (n <= *cap)
    return;
  if (n > SIZE_MAX / sz / 2)
    stoker_fail(t, STOKER_TOO_LARGE, "jpeg: scratch buffer size overflows");
  n += n / 4; /* headroom so that slowly growing sizes do not realloc often */
  q = realloc(*p, n * sz);
  if (!q)
    stoker_fail(t, STOKER_TOO_LARGE, "jpeg: out of memory for scratch buffers");
  *p = q;
  *cap = n;
}

/* pack_pairs sets a's tap pair count for supports of at most maxc taps and
 * fills its SIMD coefficients from its k, for n outputs, and its ident. */
static void pack_pairs(stoker_turbo *t, axis *a, int n, int maxc) {
  int i, j;
  a->np = (maxc + 1) / 2;
  stoker_grow(t, (void **)&a->kv, &a->kv_cap, (size_t)n * a->np * 4, sizeof(int32_t));
  for (i = 0; i < n; i++) {
    const int16_t *kk = a->k + (size_t)i * a->ks;
    int32_t *kv = a->kv + (size_t)i * a->np * 4;
    for (j = 0; j < a->np; j++) {
      int32_t pair = (int32_t)((uint32_t)(uint16_t)kk[2 * j] |
                               (uint32_t)(uint16_t)kk[2 * j + 1] << 16);
      kv[4 * j] = kv[4 * j + 1] = kv[4 * j + 2] = kv[4 * j + 3] = pair;
    }
  }
  a->ident = axis_identity(a, n);
}

/* pack_quads fills the horizontal axis a's kv4 from its kv, for its n
 * outputs, where the decode's horizontal pass uses it (AVX-512). */
void stoker_pack_quads(stoker_turbo *t, axis *a, int n) {
  int g, i, j;
  if (t->simd < 4 || n < 4)
    return;
  stoker_grow(t, &a->kv4buf, &a->kv4_cap, (size_t)(n / 4) * a->np * 16 + 16, sizeof(int32_t));
  a->kv4 = (int32_t *)(((uintptr_t)a->kv4buf + 63) & ~(uintptr_t)63);
  for (g = 0; g < n / 4; g++)
    for (j = 0; j < a->np; j++)
      for (i = 0; i < 4; i++)
        memcpy(a->kv4 + (((size_t)g * a->np + j) * 4 + i) * 4,
               a->kv + ((size_t)(4 * g + i) * a->np + j) * 4, 4 * sizeof(int32_t));
  if (t->simd < 5)
    return;
  /* Output i of the group reads its pair from byte 4*(start[i] - the
   * group's least start) of the load (the first output's start, or the
   * last's when the view is flipped), as r0 r1 g0 g1 b0 b1 x0 x1 (16-bit
   * lanes; the high bytes are zeroed by the mask, so byte 1 says whether
   * the group fits). Groups spread wider than a load holds (more than 14
   * pixels) take hrgbx_avx512's loads instead. */
  stoker_grow(t, &a->px4buf, &a->px4_cap, (size_t)(n / 4) * 64 + 64, 1);
  a->px4 = (uint8_t *)(((uintptr_t)a->px4buf + 63) & ~(uintptr_t)63);
  for (g = 0; g < n / 4; g++) {
    const int *st = a->start + 4 * g;
    int lo = st[0] < st[3] ? st[0] : st[3], fits = 1;
    uint8_t *px = a->px4 + (size_t)g * 64;
    for (i = 0; i < 4; i++)
      fits &= st[i] >= lo && st[i] - lo <= 14;
    for (i = 0; i < 4; i++)
      for (j = 0; j < 8; j++) {
        px[16 * i + 2 * j] = (uint8_t)(fits ? 4 * (st[i] - lo + (j & 1)) + (j >> 1) : 0);
        px[16 * i + 2 * j + 1] = 0;
      }
    px[1] = (uint8_t)fits;
  }
}

/* The filters of torch's uint8 resize kernels (aten UpSampleKernel.cpp:
 * HelperInterpLinear, HelperInterpCubic, nearest_idx), in its order of
 * operations, so that the weights are the same doubles. */
typedef struct {
  int interp, aa;
  double scale;    /* source pixels per output pixel */
  double support;  /* the filter's radius, in source pixels */
  double invscale; /* the filter's stretch: 1/scale when widened, else 1 */
  double frac;     /* where the span starts past its origin pixel */
  float nscale;    /* nearest: in/out, in single precision as torch has it */
  int maxi;        /* the most taps one output has (torch's max_interp_size) */
  int lo, hi;      /* the clip rectangle's side, from the span's origin */
  int in;          /* the span's source pixels (torch's input_size) */
} tfilter;

/* cubic1 and cubic2 are Keys' cubic convolution with parameter a for
 * |x| < 1 and 1 <= |x| < 2 (torch's cubic_convolution1 and 2). */
static double cubic1(double x, double a) {
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
static double cubic2(double x, double a) {
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

/* tfilter_at is the antialiased filters' kernel at x. */
static double tfilter_at(const tfilter *f, double x) {
  x = fabs(x);
  if (f->interp != STOKER_BICUBIC)
    return x < 1.0 ? 1.0 - x : 0.0;
  /* a = -0.5 as PIL (torch's antialiased kernel) */
  if (x < 1.0)
    return cubic1(x, -0.5);
  if (x < 2.0)
    return cubic2(x, -0.5);
  return 0.0;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* tweights computes output i's weights into w, for the taps [*x0, *x0 + n)
 * (from the span's origin), returns n, and raises *wmax to the largest
 * weight as torch counts it. */
static int tweights(const tfilter *f, int i, double *w, int *x0,
                    double *wmax) {
  int j, n;
  if (f->interp == STOKER_NEAREST) {
    /* torch: floorf(output_index * scale), index converted to float */
    *x0 = clampi((int)floorf((float)i * f->nscale), f->lo, f->hi - 1);
    w[0] = 1;
    *wmax = *wmax > 1 ? *wmax : 1;
    return 1;
  }
  if (!f->aa) {
    /* torch's _compute_indices_min_size_weights: two or four taps from
     * the source index (floored in single precision, as torch's
     * guard_index_and_lambda does), a = -0.75 for bicubic; taps past the
     * edge fold onto the edge pixel (torch's float kernels read the edge
     * pixel there), and the largest weight is taken as they add up. */
    int cub = f->interp == STOKER_BICUBIC, sup = cub ? 2 : 1, wi = 0;
    double real = f->scale * (i + 0.5) - 0.5 + f->frac, lambda;
    long long ii, umin;
    if (!cub && real < 0)
      real = 0;
    ii = (long long)floorf((float)real);
    if (ii > f->in - 1)
      ii = f->in - 1;
    lambda = real - ii;
    lambda = lambda < 0 ? 0 : lambda > 1 ? 1 : lambda;
    umin = ii - sup + 1;
    *x0 = umin < f->lo ? f->lo : (int)umin;
    n = (int)((ii + sup + 1 < f->hi ? ii + sup + 1 : f->hi) - *x0);
    n = n < 0 ? 0 : n > f->maxi ? f->maxi : n;
    for (j = 0; j < f->maxi; j++)
      w[j] = 0;
    for (j = 0; j < f->maxi && n > 0; j++) {
      double x = fabs((double)(j + 1 - sup) - lambda), v;
      if (cub)
        v = x < 1.0 ? cubic1(x, -0.75) : x < 2.0 ? cubic2(x, -0.75) : 0.0;
      else
        v = x < 1.0 ? 1.0 - x : 0.0;
      if (umin + j <= f->lo)
        wi = 0;
      else if (umin + j >= f->hi - 1)
        wi = n - 1;
      w[wi] += v;
      if (w[wi] > *wmax)
        *wmax = w[wi];
      wi++;
    }
    return n;
  }
  /* Antialiased bilinear and bicubic: torch's
   * _compute_indices_min_size_weights_aa. */
  {
    double center = f->scale * (i + 0.5) + f->frac, total = 0.0;
    long long a = (long long)(center - f->support + 0.5);
    long long b = (long long)(center + f->support + 0.5);
    *x0 = a < f->lo ? f->lo : (int)a;
    n = (int)((b > f->hi ? f->hi : b) - *x0);
    n = n < 0 ? 0 : n > f->maxi ? f->maxi : n;
    for (j = 0; j < n; j++) {
      w[j] = tfilter_at(f, ((double)(j + *x0) - center + 0.5) * f->invscale);
      total += w[j];
    }
    if (total != 0.0)
      for (j = 0; j < n; j++) {
        w[j] /= total;
        if (w[j] > *wmax)
          *wmax = w[j];
      }
    return n;
  }
}

/* torch_precision is the fractional bits torch gives int16 weights whose
 * largest is wmax: the most that keep it under 2^15. */
static int torch_precision(double wmax) {
  int p;
  for (p = 0; p < 22; p++)
    if ((int)(0.5 + wmax * (1 << (p + 1))) >= (1 << 15))
      break;
  return p;
}

/* The longest span over which torch_coeffs finds the largest weight over
 * every output, as torch does: past it (an upscale to hundreds of
 * thousands of pixels, whose crop keeps a few), only the kept outputs'. */
#define TORCH_SPAN_MAX 65536

/* torch_coeffs fills a with torch's filter (interp, antialias aa) for span
 * s scaled by f (m/8 of a DCT-scaled decode; exact at 1), the n kept
 * outputs, taps clipped to [c0, c1) (scaled pixels), output order
 * reversed when flip. *lo, *hi receive the union of the supports. */
void stoker_torch_coeffs(stoker_turbo *t, axis *a, const stoker_span *s,
                         double f, int n, int interp, int aa, int c0, int c1,
                         int flip, int *lo, int *hi) {
  tfilter tf, whole;
  double base = s->base * f, wmax = 0.0;
  int origin = (int)floor(base), isz = interp == STOKER_BICUBIC ? 4 : 2;
  int ks, i, j, maxc = 1, from = 0, to = s->out;
  tf.interp = interp;
  tf.aa = aa;
  tf.scale = (double)s->in * f / s->out;
  tf.support = isz * 0.5;
  tf.maxi = interp == STOKER_NEAREST ? 1 : isz;
  if (aa && interp != STOKER_NEAREST) {
    if (tf.scale >= 1.0)
      tf.support = (isz * 0.5) * tf.scale;
    if (!(tf.support < 1e6))
      stoker_fail(t, STOKER_TOO_LARGE, "jpeg: resampling support is too large");
    tf.maxi = (int)ceil(tf.support) * 2 + 1;
  }
  tf.invscale = tf.scale >= 1.0 && aa ? 1.0 / tf.scale : 1.0;
  tf.frac = base - origin;
  tf.nscale = (float)s->in / (float)s->out;
  tf.in = s->in;
  tf.lo = c0 - origin;
  tf.hi = c1 - origin;
  /* The outputs not kept (a crop of a resize) reach the whole span, not
   * the clip rectangle, which only holds what the kept ones need. */
  whole = tf;
  whole.lo = 0;
  whole.hi = (int)ceil(base + s->in * f) - origin;
  ks = (tf.maxi + 1) & ~1;
  stoker_grow(t, (void **)&a->start, &a->s_cap, (size_t)n, sizeof(int));
  stoker_grow(t, (void **)&a->k, &a->k_cap, (size_t)n * ks, sizeof(int16_t));
  /* rows of weights for the kept outputs and one scratch row, then their
   * tap counts */
  stoker_grow(t, (void **)&a->w, &a->w_cap, (size_t)(n + 1) * ks + n, sizeof(double));
  a->ks = ks;
  if (s->out > TORCH_SPAN_MAX)
    from = s->off, to = s->off + n;
  /* The kept outputs' weights and tap counts, and the largest weight of
   * all outputs, which sets the precision. */
  for (i = from; i < to; i++) {
    int keep = i >= s->off && i < s->off + n, x0, m;
    double *w = a->w + (size_t)(keep ? i - s->off : n) * ks;
    m = tweights(keep ? &tf : &whole, i, w, &x0, &wmax);
    if (keep) {
      a->start[i - s->off] = x0;
      a->w[(size_t)(n + 1) * ks + (i - s->off)] = m;
    }
  }
  a->prec = torch_precision(wmax);
  /* In fixed point, rounded half away from zero as torch does, zero taps
   * at either end dropped (they add nothing: the decode need not reach
   * their pixels). */
  *lo = INT_MAX;
  *hi = INT_MIN;
  for (i = 0; i < n; i++) {
    const double *w = a->w + (size_t)i * ks;
    int16_t *kk = a->k + (size_t)i * ks;
    int m = (int)a->w[(size_t)(n + 1) * ks + i], first = -1, last = 0;
    for (j = 0; j < m; j++) {
      double v = w[j] * (1 << a->prec);
      kk[j] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
      if (kk[j] != 0) {
        if (first < 0)
          first = j;
        last = j;
      }
    }
    if (m == 0) { /* no tap in the clip (not for a span inside the image) */
      a->start[i] = clampi(a->start[i], tf.lo, tf.hi - 1);
      kk[0] = (int16_t)(1 << a->prec);
      first = last = 0;
    } else if (first < 0) {
      first = last = 0;
    }
    memmove(kk, kk + first, (size_t)(last - first + 1) * sizeof *kk);
    memset(kk + (last - first + 1), 0, (size_t)(ks - (last - first + 1)) * sizeof *kk);
    a->start[i] += origin + first;
    if (last - first + 1 > maxc)
      maxc = last - first + 1;
    if (a->start[i] < *lo)
      *lo = a->start[i];
    if (a->start[i] + last - first + 1 > *hi)
      *hi = a->start[i] + last - first + 1;
  }
  for (i = 0; flip && i < n - 1 - i; i++) {
    int16_t *p = a->k + (size_t)i * ks, *q = a->k + (size_t)(n - 1 - i) * ks;
    int st = a->start[i];
    a->start[i] = a->start[n - 1 - i];
    a->start[n - 1 - i] = st;
    for (j = 0; j < ks; j++) {
      int16_t v = p[j];
      p[j] = q[j];
      q[j] = v;
    }
  }
  pack_pairs(t, a, n, maxc);
}

/* vpass resamples view v's mid rows vertically into its output. Mid rows
 * are laid out as the output wants them: planar rows for CHW, interleaved
 * for HWC, one plane for gray (copied to all three channels here). */
void stoker_vpass(stoker_turbo *t, int v, int gray, uint8_t *out) {
  const stoker_job *jb = &t->job;
  const stoker_view *vw = &jb->views[v];
  const vstate *s = &t->vs[v];
  const axis *a = &s->ay;
  int W = vw->out_w, H = vw->out_h, rl = gray ? W : 3 * W, y, j, x;
  int np = a->np, sc = t->simd;
  size_t plane = (size_t)W * H;
  for (y = 0; y < H; y++) {
    const int16_t *k = a->k + (size_t)y * a->ks;
    if (stoker_stopped(t))
      return; /* no longjmp: stoker_rows_end runs outside any setjmp */
    const int32_t *kv = a->kv + (size_t)y * np * 4;
    uint8_t *row0 = out + (size_t)y * W;
    for (j = 0; j < 2 * np; j++) {
      /* taps past the support (zero coefficients) may point past the last
       * mid row: keep them on it */
      int r = a->start[y] + j;
      t->taps[j] = s->mid + (size_t)(r < s->mid_rows ? r : s->mid_rows - 1) * rl;
    }
    if (!gray && a->ident) { /* a copy of its one row (axis.ident) */
      if (jb->hwc) {
        memcpy(out + (size_t)y * rl, t->taps[0], (size_t)rl);
      } else {
        memcpy(row0, t->taps[0], (size_t)W);
        memcpy(row0 + plane, t->taps[0] + W, (size_t)W);
        memcpy(row0 + 2 * plane, t->taps[0] + 2 * (size_t)W, (size_t)W);
      }
    } else if (!gray) {
      if (jb->hwc) {
        vrow(t->taps, 0, k, kv, np, a->prec, rl, out + (size_t)y * rl, sc);
      } else {
        vrow(t->taps, 0, k, kv, np, a->prec, W, row0, sc);
        vrow(t->taps, (size_t)W, k, kv, np, a->prec, W, row0 + plane, sc);
        vrow(t->taps, 2 * (size_t)W, k, kv, np, a->prec, W, row0 + 2 * plane, sc);
      }
    } else if (jb->hwc) {
      uint8_t *o = out + (size_t)y * W * 3;
      vrow(t->taps, 0, k, kv, np, a->prec, W, t->line, sc);
      for (x = 0; x < W; x++)
        o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = t->line[x];
    } else {
      vrow(t->taps, 0, k, kv, np, a->prec, W, row0, sc);
      memcpy(row0 + plane, row0, (size_t)W);
      memcpy(row0 + 2 * plane, row0, (size_t)W);
    }
  }
}

/* span_ok reports whether s keeps n outputs of a resize inside a source
 * side of size src. */
static int span_ok(const stoker_span *s, int n, int src) {
  return s->in > 0 && s->out > 0 && s->base >= 0 && s->base <= src - s->in &&
         s->off >= 0 && s->off <= s->out - n;
}

/* view_ok reports whether view v's geometry fits the job's source, and
 * its output the job's output buffer. */
int stoker_view_ok(const stoker_job *jb, const stoker_view *v) {
  return v->out_w > 0 && v->out_h > 0 && v->bw > 0 && v->bh > 0 && v->x0 >= 0 &&
         v->y0 >= 0 && v->x1 <= jb->src_w && v->y1 <= jb->src_h && v->x0 < v->x1 &&
         v->y0 < v->y1 && span_ok(&v->sx, v->out_w, jb->src_w) &&
         span_ok(&v->sy, v->out_h, jb->src_h) && v->interp >= STOKER_BILINEAR &&
         v->interp <= STOKER_BICUBIC && v->out_off >= 0 && v->out_off <= jb->out_len &&
         3LL * v->out_w * v->out_h <= jb->out_len - v->out_off;
}

/* The resampler for the formats decoded at full scale, row by row
 * (formats.c: PNG through libpng, WebP through libwebp): the same
 * filters, passes and views as a JPEG's, with the scale at 1 and the clip
 * rectangle each view's own. */
int stoker_rows_begin(stoker_turbo *t, int gray, stoker_need *nd) {
  stoker_job *jb = &t->job;
  int v, i, np = 1, vnp = 1, wmax = 1, bpp = gray ? 1 : 4;
  stoker_begin_decode(t);
  if (setjmp(t->jb))
    return t->code;
  if (jb->nviews < 1 || jb->nviews > STOKER_MAX_VIEWS)
    stoker_fail(t, STOKER_UNSUPPORTED, "bad view count");
  nd->x0 = nd->y0 = INT_MAX;
  nd->x1 = nd->y1 = INT_MIN;
  for (v = 0; v < jb->nviews; v++) {
    const stoker_view *vw = &jb->views[v];
    vstate *s = &t->vs[v];
    if (!stoker_view_ok(jb, vw))
      stoker_fail(t, STOKER_UNSUPPORTED, "bad geometry");
    stoker_torch_coeffs(t, &s->ax, &vw->sx, 1.0, vw->out_w, vw->interp, vw->antialias, vw->x0, vw->x1,
                 vw->flip, &s->ux0, &s->ux1);
    stoker_torch_coeffs(t, &s->ay, &vw->sy, 1.0, vw->out_h, vw->interp, vw->antialias, vw->y0, vw->y1, 0,
                 &s->uy0, &s->uy1);
    stoker_pack_quads(t, &s->ax, vw->out_w);
    nd->x0 = s->ux0 < nd->x0 ? s->ux0 : nd->x0;
    nd->x1 = s->ux1 > nd->x1 ? s->ux1 : nd->x1;
    nd->y0 = s->uy0 < nd->y0 ? s->uy0 : nd->y0;
    nd->y1 = s->uy1 > nd->y1 ? s->uy1 : nd->y1;
  }
  /* Taps from the first column given and each view's first mid row; the
   * buffers as row_buffers grows them. */
  for (v = 0; v < jb->nviews; v++) {
    vstate *s = &t->vs[v];
    int w = jb->views[v].out_w, rl = gray ? w : 3 * w;
    for (i = 0; i < w; i++)
      s->ax.start[i] -= nd->x0;
    for (i = 0; i < jb->views[v].out_h; i++)
      s->ay.start[i] -= s->uy0;
    s->mid_rows = s->uy1 - s->uy0;
    stoker_grow(t, (void **)&s->mid, &s->mid_cap, (size_t)s->mid_rows * rl + 4, 1);
    np = s->ax.np > np ? s->ax.np : np;
    vnp = s->ay.np > vnp ? s->ay.np : vnp;
    wmax = w > wmax ? w : wmax;
  }
  stoker_grow(t, (void **)&t->taps, &t->taps_cap, (size_t)2 * vnp, sizeof(const uint8_t *));
  stoker_grow(t, (void **)&t->line, &t->line_cap, (size_t)wmax, 1);
  nd->slack = (2 * np + 2) * bpp + 16 + 64; /* as the decode's row slack */
  t->rows_gray = gray;
  jb->cols_decoded = nd->x1 - nd->x0;
  return STOKER_OK;
}

void stoker_rows_put(stoker_turbo *t, int y, const unsigned char *row) {
  stoker_job *jb = &t->job;
  int v;
  if (stoker_stopped(t))
    return;
  for (v = 0; v < jb->nviews; v++) {
    const vstate *s = &t->vs[v];
    int w = jb->views[v].out_w, rl = t->rows_gray ? w : 3 * w;
    uint8_t *mid;
    if (y < s->uy0 || y >= s->uy1)
      continue;
    mid = s->mid + (size_t)(y - s->uy0) * rl;
    if (t->rows_gray)
      hpass_gray(&s->ax, w, row, mid);
    else
      hpass_rgbx(&s->ax, w, row, mid, !jb->hwc, t->simd);
  }
}

void stoker_rows_end(stoker_turbo *t, unsigned char *out) {
  int v;
  for (v = 0; v < t->job.nviews; v++)
    stoker_vpass(t, v, t->rows_gray, out + t->job.views[v].out_off);
}

void stoker_fail_msg(stoker_turbo *t, int code, const char *msg) {
  t->code = code;
  snprintf(t->msg, sizeof t->msg, "%s", msg);
}
