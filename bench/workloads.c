/*
 * workloads.c: the records and index plans of the four benchmark
 * workloads, made here once so that every backend stores identical bytes
 * and gathers by identical plans.
 *
 * Vision: CHW RGB uint8 images from one smooth spatial model, deterministic
 * from a seed. Each image is a luminance field of four plane waves (2 to 10
 * grey levels, at most one cycle across the image), mixed into three
 * channels with their own base level (70..180), gain (0.6..1.2), gradient
 * (up to 10 levels across the image) and one extra wave (1 to 4 levels),
 * plus mild noise: one pixel in 200 moves one grey level up or down. zstd
 * at level 3 shrinks such images about 8x. Dense images are (3, 224, 224);
 * Ragged images draw H and W independently from a lognormal with median 224
 * and sigma 0.4, clipped to 64..512.
 *
 * Tokens: word-level ids from the real text installed on this machine: the
 * files under /usr/share/doc and /usr/share/common-licenses and the English
 * manual pages in /usr/share/man/man1..man8 (gzip-compressed files are read
 * through zcat), in sorted path order, skipping image, PDF, font and archive
 * files by name. A token is a run of ASCII letters, digits and non-ASCII
 * bytes, or a single ASCII punctuation character. Ids are frequency ranks
 * (0 is the most common token, ties broken by first appearance), so they
 * follow the corpus's Zipf-like law. Dense token blocks pack the stream into
 * int32[512] records, ignoring text boundaries; Ragged records keep the
 * paragraphs (a blank line, or a man-page paragraph or section macro, ends
 * one), join fragments shorter than 16 tokens to the next and split at 512.
 * When the corpus is shorter than a workload needs, it is read again from
 * its start; the report says how many times.
 *
 * A workload holds a given number of records, or (struct sizes' bytes,
 * for the cold benchmark's stores of several GiB) as many as fill that
 * many payload bytes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t rng_below(uint64_t *state, uint64_t n)
{
    /* Lemire's multiply-shift with rejection. */
    uint64_t x = splitmix64(state);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        while (l < t) {
            x = splitmix64(state);
            m = (__uint128_t)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static double rng_unit(uint64_t *state)
{
    return (double)(splitmix64(state) >> 11) * 0x1.0p-53;
}

static double rng_range(uint64_t *state, double lo, double hi)
{
    return lo + (hi - lo) * rng_unit(state);
}

static double rng_normal(uint64_t *state)
{
    double u = rng_unit(state), v = rng_unit(state);
    return sqrt(-2.0 * log(u > 0 ? u : 0x1.0p-53)) * cos(2.0 * M_PI * v);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "zrbench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "zrbench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return q;
}

/* ---- Images ------------------------------------------------------------ */

#define WAVES 4
#define WAVE_AMP_LO 2.0    /* luminance wave amplitudes, grey levels */
#define WAVE_AMP_HI 10.0
#define WAVE_FREQ 1.0      /* at most one cycle per image side */
#define CHAN_AMP_LO 1.0    /* each channel's own wave */
#define CHAN_AMP_HI 4.0
#define GRADIENT 10.0      /* each channel's gradient, levels across the image */
#define NOISE_SHARE 0.005  /* share of pixels moved by one grey level */

/* One plane wave a * sin(2 pi (fx x / W + fy y / H) + phase), evaluated
 * separably: sin(A + B) = sin A cos B + cos A sin B. */
struct wave {
    float amp;
    float *sx, *cx; /* sin and cos of the x part, W entries */
    float *sy, *cy; /* the y part with the phase, H entries */
};

static void wave_init(struct wave *v, uint64_t *rng, double amp_lo, double amp_hi,
                      double fmax, uint32_t h, uint32_t w)
{
    v->amp = (float)rng_range(rng, amp_lo, amp_hi);
    double fx = rng_range(rng, -fmax, fmax), fy = rng_range(rng, -fmax, fmax);
    double ph = rng_range(rng, 0, 2 * M_PI);
    v->sx = xmalloc(w * sizeof(float));
    v->cx = xmalloc(w * sizeof(float));
    v->sy = xmalloc(h * sizeof(float));
    v->cy = xmalloc(h * sizeof(float));
    for (uint32_t x = 0; x < w; x++) {
        double a = 2 * M_PI * fx * x / w;
        v->sx[x] = (float)sin(a);
        v->cx[x] = (float)cos(a);
    }
    for (uint32_t y = 0; y < h; y++) {
        double b = 2 * M_PI * fy * y / h + ph;
        v->sy[y] = (float)sin(b);
        v->cy[y] = (float)cos(b);
    }
}

static void wave_free(struct wave *v)
{
    free(v->sx);
    free(v->cx);
    free(v->sy);
    free(v->cy);
}

/* Add wave v of row y, scaled by g, to row[0..w). */
static void wave_add_row(const struct wave *v, uint32_t y, float g, float *row, uint32_t w)
{
    float p = g * v->amp * v->cy[y], q = g * v->amp * v->sy[y];
    for (uint32_t x = 0; x < w; x++)
        row[x] += p * v->sx[x] + q * v->cx[x];
}

/* Generate one (3, h, w) image into out from its own seed. */
static void make_image(uint8_t *out, uint32_t h, uint32_t w, uint64_t seed)
{
    uint64_t rng = seed;
    struct wave lum[WAVES], chan[3];
    for (int k = 0; k < WAVES; k++)
        wave_init(&lum[k], &rng, WAVE_AMP_LO, WAVE_AMP_HI, WAVE_FREQ, h, w);
    float base[3], gain[3], gx[3], gy[3];
    for (int c = 0; c < 3; c++) {
        base[c] = (float)rng_range(&rng, 70, 180);
        gain[c] = (float)rng_range(&rng, 0.6, 1.2);
        gx[c] = (float)rng_range(&rng, -GRADIENT, GRADIENT);
        gy[c] = (float)rng_range(&rng, -GRADIENT, GRADIENT);
        wave_init(&chan[c], &rng, CHAN_AMP_LO, CHAN_AMP_HI, WAVE_FREQ, h, w);
    }
    float *L = xmalloc((size_t)h * w * sizeof(float));
    for (uint32_t y = 0; y < h; y++) {
        float *row = L + (size_t)y * w;
        memset(row, 0, w * sizeof(float));
        for (int k = 0; k < WAVES; k++)
            wave_add_row(&lum[k], y, 1.0f, row, w);
    }
    float *row = xmalloc(w * sizeof(float));
    uint64_t noise = splitmix64(&rng);
    for (int c = 0; c < 3; c++) {
        for (uint32_t y = 0; y < h; y++) {
            const float *l = L + (size_t)y * w;
            float yb = base[c] + gy[c] * ((float)y / (float)h - 0.5f);
            for (uint32_t x = 0; x < w; x++)
                row[x] = yb + gx[c] * ((float)x / (float)w - 0.5f) + gain[c] * l[x];
            wave_add_row(&chan[c], y, 1.0f, row, w);
            uint8_t *o = out + ((size_t)c * h + y) * w;
            uint64_t r = 0;
            for (uint32_t x = 0; x < w; x++) {
                if ((x & 1) == 0)
                    r = splitmix64(&noise);
                /* Sparse noise: a few pixels one grey level up or down. */
                float n = (float)(r & 0xffff) < (float)(NOISE_SHARE * 65536.0)
                              ? ((r & 0x10000) ? 1.0f : -1.0f)
                              : 0.0f;
                r >>= 32;
                float v = row[x] + n + 0.5f;
                o[x] = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
            }
        }
    }
    free(row);
    free(L);
    for (int k = 0; k < WAVES; k++)
        wave_free(&lum[k]);
    for (int c = 0; c < 3; c++)
        wave_free(&chan[c]);
}

static void make_plan(struct workload *w, uint64_t seed)
{
    uint64_t rng = seed ^ 0x5eed5eed5eed5eedull;
    size_t total = w->batch * w->nbatches;
    w->plan = xmalloc(total * sizeof *w->plan);
    w->plan_logical = 0;
    for (size_t k = 0; k < total; k++) {
        w->plan[k] = rng_below(&rng, w->n);
        w->plan_logical += wl_bytes(w, w->plan[k]);
    }
}

static uint64_t image_seed(uint64_t seed, size_t k)
{
    uint64_t s = seed * 0x100000001b3ull + k;
    return splitmix64(&s);
}

/* Images are made on every CPU, each from its own seed, so the result
 * does not depend on the thread count. */
struct image_job {
    struct workload *w;
    uint64_t seed;
    size_t per_shard;
};

static void image_shard(void *arg, size_t s)
{
    struct image_job *j = arg;
    struct workload *w = j->w;
    size_t a = s * j->per_shard, e = a + j->per_shard < w->n ? a + j->per_shard : w->n;
    for (size_t k = a; k < e; k++) {
        uint32_t h = w->ragged ? (uint32_t)w->shape[3 * k + 1] : 224;
        uint32_t wd = w->ragged ? (uint32_t)w->shape[3 * k + 2] : 224;
        make_image(w->data + w->off[k], h, wd, image_seed(j->seed, k));
    }
}

static void make_images(struct workload *w, uint64_t seed)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct image_job j = {.w = w, .seed = seed, .per_shard = 64};
    team_run(team_get(cpus > 0 ? (int)cpus : 1), (w->n + j.per_shard - 1) / j.per_shard,
             image_shard, &j);
}

int wl_dense_vision(struct workload *w, const struct sizes *sz, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->name = "dense-vision";
    w->title = "Dense vision: (3, 224, 224) uint8 images";
    w->dtype = "|u1";
    w->itemsize = 1;
    w->ndim = 3;
    w->item_shape[0] = 3;
    w->item_shape[1] = 224;
    w->item_shape[2] = 224;
    w->width = 3 * 224 * 224;
    w->n = sz->bytes ? (size_t)((sz->bytes + w->width - 1) / w->width) : sz->images;
    w->data = big_alloc(w->n * w->width);
    w->off = xmalloc((w->n + 1) * sizeof *w->off);
    for (size_t k = 0; k <= w->n; k++)
        w->off[k] = k * w->width;
    make_images(w, seed);
    w->logical = w->n * w->width;
    w->batch = BENCH_BATCH;
    w->nbatches = sz->vision_batches;
    make_plan(w, seed);
    snprintf(w->note, sizeof w->note,
             "%zu images of (3, 224, 224) uint8, %.1f KiB each, %.1f MiB in all; "
             "%zu random batches of %zu (with replacement).",
             w->n, w->width / 1024.0, w->logical / 1048576.0, w->nbatches, w->batch);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of n values (sorted in place). */
static uint64_t quantile(uint64_t *v, size_t n, double q)
{
    qsort(v, n, sizeof *v, cmp_u64);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i];
}

int wl_ragged_vision(struct workload *w, const struct sizes *sz, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->name = "ragged-vision";
    w->title = "Ragged vision: (3, H, W) uint8 images, H and W lognormal in 64..512";
    w->ragged = true;
    w->dtype = "|u1";
    w->itemsize = 1;
    w->ndim = 3;
    /* By count, or (sz->bytes) until the payloads reach that many bytes. */
    size_t cap = sz->bytes ? 1024 : sz->images;
    w->off = xmalloc((cap + 1) * sizeof *w->off);
    w->shape = xmalloc(cap * 3 * sizeof *w->shape);
    uint64_t rng = seed ^ 0x4a3b2c1d00ff00ffull;
    w->off[0] = 0;
    for (size_t k = 0; sz->bytes ? w->off[k] < sz->bytes : k < sz->images; k++) {
        if (k == cap) {
            cap *= 2;
            w->off = xrealloc(w->off, (cap + 1) * sizeof *w->off);
            w->shape = xrealloc(w->shape, cap * 3 * sizeof *w->shape);
        }
        w->n = k + 1;
        uint64_t d[2];
        for (int j = 0; j < 2; j++) {
            double v = round(224.0 * exp(0.4 * rng_normal(&rng)));
            d[j] = v < 64 ? 64 : v > 512 ? 512 : (uint64_t)v;
        }
        w->shape[3 * k] = 3;
        w->shape[3 * k + 1] = d[0];
        w->shape[3 * k + 2] = d[1];
        w->off[k + 1] = w->off[k] + 3 * d[0] * d[1];
    }
    w->logical = w->off[w->n];
    w->data = big_alloc(w->logical);
    make_images(w, seed);
    w->batch = BENCH_BATCH;
    w->nbatches = sz->vision_batches;
    make_plan(w, seed + 1);
    uint64_t *hs = xmalloc(w->n * sizeof *hs), *ws = xmalloc(w->n * sizeof *ws);
    for (size_t k = 0; k < w->n; k++) {
        hs[k] = w->shape[3 * k + 1];
        ws[k] = w->shape[3 * k + 2];
    }
    snprintf(w->note, sizeof w->note,
             "%zu images of (3, H, W) uint8, H and W independently round(224 * exp(0.4 N(0,1))) "
             "clipped to 64..512 (medians %llu and %llu), %.1f MiB in all; "
             "%zu random batches of %zu (with replacement).",
             w->n, (unsigned long long)quantile(hs, w->n, 0.5),
             (unsigned long long)quantile(ws, w->n, 0.5), w->logical / 1048576.0, w->nbatches,
             w->batch);
    free(hs);
    free(ws);
    return 0;
}

/* ---- Tokens ------------------------------------------------------------ */

/* The corpus, with the binary files that some packages ship skipped by
 * name. LC_ALL=C keeps the order independent of the locale. */
static const char CORPUS_CMD[] =
    "find /usr/share/doc /usr/share/common-licenses /usr/share/man/man1 /usr/share/man/man2 "
    "/usr/share/man/man3 /usr/share/man/man4 /usr/share/man/man5 /usr/share/man/man6 "
    "/usr/share/man/man7 /usr/share/man/man8 -type f "
    "! -iname '*.png' ! -iname '*.gif' ! -iname '*.jpg' ! -iname '*.jpeg' ! -iname '*.ico' "
    "! -iname '*.pdf' ! -iname '*.svgz' ! -iname '*.ttf' ! -iname '*.otf' ! -iname '*.woff*' "
    "! -iname '*.tar.gz' ! -iname '*.tgz' ! -iname '*.zip' ! -iname '*.bz2' ! -iname '*.xz' "
    "! -iname '*.jar' ! -iname '*.mo' ! -iname '*.gpg' ! -iname '*.db' "
    "-print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 zcat -f -- 2>/dev/null";

/* Interned tokens: an open-addressing table over an arena of bytes. */
struct vocab {
    uint32_t *slots;      /* id + 1, or 0 for empty */
    size_t nslots;
    uint64_t *pos;        /* arena offset of token id */
    uint32_t *len;
    uint64_t *count;
    size_t n, cap;
    char *arena;
    size_t alen, acap;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static void vocab_grow(struct vocab *v)
{
    size_t ns = v->nslots ? v->nslots * 2 : 1u << 16;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots) {
        fprintf(stderr, "zrbench: out of memory\n");
        exit(1);
    }
    for (size_t id = 0; id < v->n; id++) {
        size_t i = hash_bytes(v->arena + v->pos[id], v->len[id]) & (ns - 1);
        while (slots[i])
            i = (i + 1) & (ns - 1);
        slots[i] = (uint32_t)id + 1;
    }
    free(v->slots);
    v->slots = slots;
    v->nslots = ns;
}

static uint32_t vocab_id(struct vocab *v, const char *s, size_t n)
{
    if (2 * (v->n + 1) > v->nslots)
        vocab_grow(v);
    size_t i = hash_bytes(s, n) & (v->nslots - 1);
    while (v->slots[i]) {
        uint32_t id = v->slots[i] - 1;
        if (v->len[id] == n && memcmp(v->arena + v->pos[id], s, n) == 0) {
            v->count[id]++;
            return id;
        }
        i = (i + 1) & (v->nslots - 1);
    }
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 1u << 16;
        v->pos = xrealloc(v->pos, v->cap * sizeof *v->pos);
        v->len = xrealloc(v->len, v->cap * sizeof *v->len);
        v->count = xrealloc(v->count, v->cap * sizeof *v->count);
    }
    if (v->alen + n > v->acap) {
        v->acap = (v->acap + n) * 2;
        v->arena = xrealloc(v->arena, v->acap);
    }
    memcpy(v->arena + v->alen, s, n);
    uint32_t id = (uint32_t)v->n++;
    v->pos[id] = v->alen;
    v->len[id] = (uint32_t)n;
    v->count[id] = 1;
    v->alen += n;
    v->slots[i] = id + 1;
    return id;
}

struct u32vec {
    uint32_t *v;
    size_t n, cap;
};

static void push32(struct u32vec *a, uint32_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 1u << 20;
        a->v = xrealloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = x;
}

struct u64vec {
    uint64_t *v;
    size_t n, cap;
};

static void push64(struct u64vec *a, uint64_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 1u << 16;
        a->v = xrealloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = x;
}

static bool is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* A line that ends a paragraph: blank, or a man-page paragraph or section
 * macro (man: .SH .SS .PP .LP .P .TP .IP; mdoc: .Sh .Ss .Pp). */
static bool is_break(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    if (i == n)
        return true;
    if (s[0] != '.' && s[0] != '\'')
        return false;
    static const char *const macros[] = {"SH", "SS", "PP", "LP", "P", "TP", "IP", "Sh", "Ss", "Pp"};
    size_t m = 1;
    while (m < n && (s[m] == ' ' || s[m] == '\t'))
        m++;
    size_t e = m;
    while (e < n && s[e] != ' ' && s[e] != '\t' && s[e] != '\n' && s[e] != '\r')
        e++;
    for (size_t k = 0; k < sizeof macros / sizeof *macros; k++)
        if (strlen(macros[k]) == e - m && memcmp(s + m, macros[k], e - m) == 0)
            return true;
    return false;
}

struct corpus {
    struct vocab voc;
    struct u32vec stream;  /* token ids (first-appearance order, then ranks) */
    struct u64vec paras;   /* start of each paragraph in stream */
    uint64_t bytes;        /* text bytes read */
    bool partial;          /* stopped before the end of the corpus */
};

static int corpus_read(struct corpus *c, size_t want_tokens)
{
    FILE *p = popen(CORPUS_CMD, "r");
    if (!p) {
        perror("zrbench: starting the corpus reader");
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    bool open_para = false;
    while ((n = getline(&line, &cap, p)) > 0) {
        c->bytes += (uint64_t)n;
        if (is_break(line, (size_t)n)) {
            open_para = false;
            if (line[0] != '.' && line[0] != '\'')
                continue;
        }
        for (ssize_t i = 0; i < n;) {
            unsigned char ch = (unsigned char)line[i];
            ssize_t j = i + 1;
            if (is_word_byte(ch)) {
                while (j < n && is_word_byte((unsigned char)line[j]))
                    j++;
            } else if (ch <= ' ' || ch == 0x7f) {
                i = j;
                continue;
            }
            if (!open_para) {
                push64(&c->paras, c->stream.n);
                open_para = true;
            }
            push32(&c->stream, vocab_id(&c->voc, line + i, (size_t)(j - i)));
            i = j;
        }
        if (want_tokens && c->stream.n >= want_tokens) {
            c->partial = true;
            break;
        }
    }
    free(line);
    /* Stopping early closes the pipe under the reader: its exit status is
     * then the broken pipe, not a failure of the corpus. */
    int st = pclose(p);
    if (c->stream.n == 0) {
        fprintf(stderr, "zrbench: no text found for the token workloads (status %d)\n", st);
        return -1;
    }
    return 0;
}

static const uint64_t *g_counts;

static int cmp_rank(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (g_counts[x] != g_counts[y])
        return g_counts[x] > g_counts[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Replace first-appearance ids by frequency ranks. */
static void corpus_rank(struct corpus *c)
{
    size_t v = c->voc.n;
    uint32_t *order = xmalloc(v * sizeof *order), *rank = xmalloc(v * sizeof *rank);
    for (size_t k = 0; k < v; k++)
        order[k] = (uint32_t)k;
    g_counts = c->voc.count;
    qsort(order, v, sizeof *order, cmp_rank);
    for (size_t r = 0; r < v; r++)
        rank[order[r]] = (uint32_t)r;
    for (size_t k = 0; k < c->stream.n; k++)
        c->stream.v[k] = rank[c->stream.v[k]];
    free(order);
    free(rank);
}

static void corpus_free(struct corpus *c)
{
    free(c->voc.slots);
    free(c->voc.pos);
    free(c->voc.len);
    free(c->voc.count);
    free(c->voc.arena);
    free(c->stream.v);
    free(c->paras.v);
}

#define TOK_BLOCK 512
#define TOK_MIN 16

/* Dense token blocks: the stream packed into int32[512] records. */
static void make_dense_tokens(struct workload *dense, const struct corpus *c,
                              const struct sizes *sz, uint64_t seed)
{
    size_t L = c->stream.n;
    memset(dense, 0, sizeof *dense);
    dense->name = "dense-tokens";
    dense->title = "Dense tokens: int32[512] blocks";
    dense->dtype = "<i4";
    dense->itemsize = 4;
    dense->ndim = 1;
    dense->item_shape[0] = TOK_BLOCK;
    dense->width = TOK_BLOCK * 4;
    dense->n = sz->bytes ? (size_t)((sz->bytes + dense->width - 1) / dense->width) : sz->tokens;
    size_t need = dense->n * TOK_BLOCK;
    dense->data = big_alloc(dense->n * dense->width);
    dense->off = xmalloc((dense->n + 1) * sizeof *dense->off);
    int32_t *dt = (int32_t *)dense->data;
    for (size_t k = 0; k < need; k++)
        dt[k] = (int32_t)c->stream.v[k % L];
    for (size_t k = 0; k <= dense->n; k++)
        dense->off[k] = k * dense->width;
    dense->logical = dense->n * dense->width;
    dense->batch = BENCH_BATCH;
    dense->nbatches = sz->token_batches;
    make_plan(dense, seed + 2);
    snprintf(dense->note, sizeof dense->note,
             "%zu records of int32[512] (2 KiB each), %.1f MiB in all, packed from the token "
             "stream ignoring text boundaries (the stream covers %.2f passes over the corpus "
             "text read); %zu random batches of %zu (with replacement).",
             dense->n, dense->logical / 1048576.0, (double)need / (double)L, dense->nbatches,
             dense->batch);
}

/* Ragged token records: the paragraphs, short ones joined to the next and
 * long ones split at 512 tokens, as runs (start, length) over the stream,
 * wrapping to the first paragraph if the corpus runs out. */
static void make_ragged_tokens(struct workload *ragged, const struct corpus *c,
                               const struct sizes *sz, uint64_t seed)
{
    size_t L = c->stream.n;
    memset(ragged, 0, sizeof *ragged);
    ragged->name = "ragged-tokens";
    ragged->title = "Ragged tokens: int32 records of 16..512 tokens";
    ragged->ragged = true;
    ragged->dtype = "<i4";
    ragged->itemsize = 4;
    ragged->ndim = 1;
    /* By count, or (sz->bytes) until the payloads reach that many bytes. */
    size_t cap = sz->bytes ? 1u << 16 : sz->tokens;
    ragged->shape = xmalloc(cap * sizeof *ragged->shape);
    uint64_t *rstart = xmalloc(cap * sizeof *rstart);
    size_t made = 0, para = 0, wraps = 0;
    uint64_t cur_start = 0, cur_len = 0, bytes = 0;
#define MORE (sz->bytes ? bytes < sz->bytes : made < sz->tokens)
    while (MORE) {
        uint64_t ps = c->paras.v[para];
        uint64_t pe = para + 1 < c->paras.n ? c->paras.v[para + 1] : L;
        if (++para == c->paras.n) {
            para = 0;
            wraps++;
        }
        if (cur_len == 0)
            cur_start = ps;
        else if (cur_start + cur_len != ps) {
            /* Wrapped to the first paragraph: the short fragment left at
             * the end of the corpus is dropped. */
            cur_start = ps;
            cur_len = 0;
        }
        cur_len += pe - ps;
        while (cur_len >= TOK_MIN && MORE) {
            uint64_t take = cur_len > TOK_BLOCK ? TOK_BLOCK : cur_len;
            if (made == cap) {
                cap *= 2;
                ragged->shape = xrealloc(ragged->shape, cap * sizeof *ragged->shape);
                rstart = xrealloc(rstart, cap * sizeof *rstart);
            }
            rstart[made] = cur_start;
            ragged->shape[made] = take;
            made++;
            bytes += 4 * take;
            cur_start += take;
            cur_len -= take;
        }
    }
#undef MORE
    ragged->n = made;
    ragged->off = xmalloc((ragged->n + 1) * sizeof *ragged->off);
    ragged->off[0] = 0;
    for (size_t k = 0; k < ragged->n; k++)
        ragged->off[k + 1] = ragged->off[k] + 4 * ragged->shape[k];
    ragged->logical = ragged->off[ragged->n];
    ragged->data = big_alloc(ragged->logical);
    for (size_t k = 0; k < ragged->n; k++) {
        int32_t *o = (int32_t *)(ragged->data + ragged->off[k]);
        for (uint64_t t = 0; t < ragged->shape[k]; t++)
            o[t] = (int32_t)c->stream.v[rstart[k] + t];
    }
    free(rstart);
    ragged->batch = BENCH_BATCH;
    ragged->nbatches = sz->token_batches;
    make_plan(ragged, seed + 3);
    uint64_t *lens = xmalloc(ragged->n * sizeof *lens);
    memcpy(lens, ragged->shape, ragged->n * sizeof *lens);
    double mean = (double)ragged->logical / 4.0 / (double)ragged->n;
    snprintf(ragged->note, sizeof ragged->note,
             "%zu records of 16..512 int32 tokens (p10 %llu, median %llu, mean %.1f, p90 %llu), "
             "%.1f MiB in all, built from the corpus paragraphs%s; "
             "%zu random batches of %zu (with replacement).",
             ragged->n, (unsigned long long)quantile(lens, ragged->n, 0.1),
             (unsigned long long)quantile(lens, ragged->n, 0.5), mean,
             (unsigned long long)quantile(lens, ragged->n, 0.9), ragged->logical / 1048576.0,
             wraps ? " (the corpus was reused from its start)" : "", ragged->nbatches,
             ragged->batch);
    free(lens);
}

int wl_tokens(struct workload *dense, struct workload *ragged, const struct sizes *sz,
              uint64_t seed, char *corpus_note, size_t note_len)
{
    struct corpus c = {0};
    /* Read only what the records need; the Ragged records average well
     * under 512 tokens, so the Dense need covers them too. */
    size_t need = sz->bytes ? (size_t)(sz->bytes / 4) + TOK_BLOCK : sz->tokens * TOK_BLOCK;
    if (corpus_read(&c, need) != 0) {
        corpus_free(&c);
        return -1;
    }
    corpus_rank(&c);
    size_t L = c.stream.n;
    if (dense)
        make_dense_tokens(dense, &c, sz, seed);
    if (ragged)
        make_ragged_tokens(ragged, &c, sz, seed);

    /* How Zipf-like the ids are: the share of the most common tokens. */
    uint64_t top10 = 0, top1000 = 0;
    for (size_t k = 0; k < L; k++) {
        top10 += c.stream.v[k] < 10;
        top1000 += c.stream.v[k] < 1000;
    }
    snprintf(corpus_note, note_len,
             "%.1f MiB of text%s, %zu tokens, %zu distinct (ids are frequency ranks: the 10 "
             "most common cover %.1f%% of the stream, the 1000 most common %.1f%%), "
             "%zu paragraphs.",
             c.bytes / 1048576.0, c.partial ? " (read only as far as this run needs)" : "", L,
             c.voc.n, 100.0 * (double)top10 / (double)L, 100.0 * (double)top1000 / (double)L,
             c.paras.n);
    corpus_free(&c);
    return 0;
}

void wl_free(struct workload *w)
{
    free(w->data);
    free(w->off);
    free(w->shape);
    free(w->plan);
    memset(w, 0, sizeof *w);
}
