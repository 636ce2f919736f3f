// kernelgap internal kernels: device input generator, output comparison, L2 flush, host-released
// spin.
//
// The PTX next to this file is generated from it (`python -m runner.device`) and committed, so
// the GPU box needs no compiler for these. runner/generator.py holds the numpy twin of the
// generator; the two must produce identical bits (tests/runner/gpu/test_generator.py compiles
// the shared part below as host code and compares).
//
// Host builds (tests only) must disable floating-point contraction (-ffp-contract=off), as the
// device build does with -fmad=false: a fused multiply-add would change the rounding.

#ifdef __CUDACC__
#define KG_HD __host__ __device__ __forceinline__
#else
// Plain C++ build of the shared section below (g++ -x c++): no kernels, host math only.
#include <math.h>
#include <string.h>
#define KG_HD static inline
#endif

typedef unsigned long long kg_u64;

// ---- shared generator (host and device) --------------------------------------------------------

#define KG_GOLDEN 0x9E3779B97F4A7C15ULL

enum { KG_F32 = 0, KG_F64 = 1, KG_I32 = 2, KG_U32 = 3, KG_I64 = 4, KG_U64 = 5 };

// splitmix64 finalizer (Steele, Lea, Flood 2014): a bijection on uint64 with full avalanche.
KG_HD kg_u64 kg_mix64(kg_u64 z) {
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z;
}

// Per-(seed, stream) key; hoisted out of the element loop.
KG_HD kg_u64 kg_key(kg_u64 seed, kg_u64 stream) { return kg_mix64(seed ^ kg_mix64(stream + KG_GOLDEN)); }

// bits(seed, stream, index) = mix64(key(seed, stream) + index * golden), wrapping.
KG_HD kg_u64 kg_bits_at(kg_u64 key, kg_u64 index) { return kg_mix64(key + index * KG_GOLDEN); }

KG_HD kg_u64 kg_bits(kg_u64 seed, kg_u64 stream, kg_u64 index) {
    return kg_bits_at(kg_key(seed, stream), index);
}

// v = lo + (hi - lo) * u with u = (bits >> 11) * 2^-53 in [0, 1), each step rounded to nearest
// and never fused; a v that rounded up to hi is moved one ulp down so v lies in [lo, hi).
KG_HD double kg_uniform_f64(kg_u64 bits, double lo, double hi) {
    double u = (double)(bits >> 11) * 0x1.0p-53;
#ifdef __CUDA_ARCH__
    double v = __dadd_rn(lo, __dmul_rn(__dsub_rn(hi, lo), u));
#else
    double v = lo + (hi - lo) * u;
#endif
    return v >= hi ? nextafter(v, -HUGE_VAL) : v;
}

// The f64 value rounded to nearest f32, then stepped one f32 ulp back inside [lo, hi) where the
// rounding crossed a bound (bounds need not be f32 values; runner/generator.py checks that some
// f32 lies in [lo, hi)).
KG_HD float kg_uniform_f32(kg_u64 bits, double lo, double hi) {
    double v = kg_uniform_f64(bits, lo, hi);
#ifdef __CUDA_ARCH__
    float f = __double2float_rn(v);
#else
    float f = (float)v;
#endif
    if ((double)f >= hi) f = nextafterf(f, -HUGE_VALF);
    if ((double)f < lo) f = nextafterf(f, HUGE_VALF);
    return f;
}

// ilo + bits mod span (wrapping; span 0 = all 2^64 values); the caller keeps the low bits.
KG_HD kg_u64 kg_integer(kg_u64 bits, kg_u64 ilo, kg_u64 span) {
    return ilo + (span ? bits % span : bits);
}

// ---- the "edges" distribution: the second input set of the correctness gate ----------------------
//
// Each element takes one of 16 classes from the low 4 bits of bits(i): +0, -0, the range's two
// ends and their neighbours one step inside, or (10 of 16) a value of random sign whose magnitude
// is spread over every binade of the range (floats) or every bit width (integers). A class that
// the range does not allow falls through to the spread. Built from bit patterns and comparisons
// only, so the host and device builds agree bit for bit.

KG_HD kg_u64 kg_f64_bits(double v) {
#ifdef __CUDA_ARCH__
    return (kg_u64)__double_as_longlong(v);
#else
    kg_u64 b;
    memcpy(&b, &v, 8);
    return b;
#endif
}

KG_HD double kg_bits_f64(kg_u64 b) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)b);
#else
    double v;
    memcpy(&v, &b, 8);
    return v;
#endif
}

KG_HD unsigned int kg_f32_bits(float v) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(v);
#else
    unsigned int b;
    memcpy(&b, &v, 4);
    return b;
#endif
}

KG_HD float kg_bits_f32(unsigned int b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float v;
    memcpy(&v, &b, 4);
    return v;
#endif
}

// A magnitude in [mlo, mhi] (0 <= mlo <= mhi, f64 values): a random binade between theirs
// (subnormals share the lowest normal binade), random mantissa bits, clamped into the range.
KG_HD double kg_spread_f64(kg_u64 bits, kg_u64 more, double mlo, double mhi) {
    kg_u64 ehi = kg_f64_bits(mhi) >> 52, elo = kg_f64_bits(mlo) >> 52;
    if (elo < 1) elo = 1;
    if (ehi < elo) return mhi;
    kg_u64 e = elo + (bits >> 5) % (ehi - elo + 1);
    double v = kg_bits_f64((e << 52) | (more & 0xFFFFFFFFFFFFFULL));
    return v > mhi ? mhi : (v < mlo ? mlo : v);
}

KG_HD float kg_spread_f32(kg_u64 bits, kg_u64 more, float mlo, float mhi) {
    unsigned int ehi = kg_f32_bits(mhi) >> 23, elo = kg_f32_bits(mlo) >> 23;
    if (elo < 1) elo = 1;
    if (ehi < elo) return mhi;
    unsigned int e = elo + (unsigned int)((bits >> 5) % (kg_u64)(ehi - elo + 1));
    float v = kg_bits_f32((e << 23) | (unsigned int)(more & 0x7FFFFF));
    return v > mhi ? mhi : (v < mlo ? mlo : v);
}

// lo_t, hi_t: the range's ends as values of the element type (inside [lo, hi]).
KG_HD double kg_edges_f64(kg_u64 bits, double lo_t, double hi_t) {
    int cls = (int)(bits & 15);
    int has_zero = lo_t <= 0.0 && hi_t >= 0.0;
    if (cls == 0 && has_zero) return 0.0;
    if (cls == 1 && has_zero) return -0.0;
    if (cls == 2) return lo_t;
    if (cls == 3) return hi_t;
    if (cls == 4) {
        double v = nextafter(lo_t, HUGE_VAL);
        return v > hi_t ? hi_t : v;
    }
    if (cls == 5) {
        double v = nextafter(hi_t, -HUGE_VAL);
        return v < lo_t ? lo_t : v;
    }
    int neg_ok = lo_t < 0.0, pos_ok = hi_t > 0.0;
    if (!neg_ok && !pos_ok) return lo_t;
    int neg = ((bits >> 4) & 1) ? neg_ok : !pos_ok;
    kg_u64 more = kg_mix64(bits);
    if (neg) return -kg_spread_f64(bits, more, hi_t < 0.0 ? -hi_t : 0.0, -lo_t);
    return kg_spread_f64(bits, more, lo_t > 0.0 ? lo_t : 0.0, hi_t);
}

KG_HD float kg_edges_f32(kg_u64 bits, float lo_t, float hi_t) {
    int cls = (int)(bits & 15);
    int has_zero = lo_t <= 0.0f && hi_t >= 0.0f;
    if (cls == 0 && has_zero) return 0.0f;
    if (cls == 1 && has_zero) return -0.0f;
    if (cls == 2) return lo_t;
    if (cls == 3) return hi_t;
    if (cls == 4) {
        float v = nextafterf(lo_t, HUGE_VALF);
        return v > hi_t ? hi_t : v;
    }
    if (cls == 5) {
        float v = nextafterf(hi_t, -HUGE_VALF);
        return v < lo_t ? lo_t : v;
    }
    int neg_ok = lo_t < 0.0f, pos_ok = hi_t > 0.0f;
    if (!neg_ok && !pos_ok) return lo_t;
    int neg = ((bits >> 4) & 1) ? neg_ok : !pos_ok;
    kg_u64 more = kg_mix64(bits);
    if (neg) return -kg_spread_f32(bits, more, hi_t < 0.0f ? -hi_t : 0.0f, -lo_t);
    return kg_spread_f32(bits, more, lo_t > 0.0f ? lo_t : 0.0f, hi_t);
}

// The f32 ends of [lo, hi]: the smallest f32 >= lo and the largest f32 <= hi.
KG_HD float kg_f32_at_least(double lo) {
#ifdef __CUDA_ARCH__
    float f = __double2float_rn(lo);
#else
    float f = (float)lo;
#endif
    return (double)f < lo ? nextafterf(f, HUGE_VALF) : f;
}

KG_HD float kg_f32_at_most(double hi) {
#ifdef __CUDA_ARCH__
    float f = __double2float_rn(hi);
#else
    float f = (float)hi;
#endif
    return (double)f > hi ? nextafterf(f, -HUGE_VALF) : f;
}

// Integers in [ilo, ilo + span - 1] (wrapping; span 0 = every value), compared as signed for
// i32/i64: 0, -1, both ends, their inner neighbours, or a random value of random bit width and
// sign; a value outside the range is replaced by the uniform draw ilo + bits mod span.
KG_HD kg_u64 kg_edges_int(kg_u64 bits, int dtype, kg_u64 ilo, kg_u64 span) {
    int is_signed = dtype == KG_I32 || dtype == KG_I64;
    int width = (dtype == KG_I32 || dtype == KG_U32) ? 32 : 64;
    kg_u64 ihi = ilo + span - 1;
    int cls = (int)(bits & 15);
    kg_u64 v;
    if (cls == 0) v = 0;
    else if (cls == 1) v = (is_signed || width == 64) ? ~0ULL : 0xFFFFFFFFULL;  // -1, or the top
    else if (cls == 2) v = ilo;
    else if (cls == 3) v = ihi;
    else if (cls == 4) v = ilo == ihi ? ilo : ilo + 1;
    else if (cls == 5) v = ilo == ihi ? ihi : ihi - 1;
    else {
        kg_u64 m = kg_mix64(bits) >> (64 - width);  // width random bits
        m >>= (bits >> 4) % (kg_u64)width;          // of a random bit width
        if (is_signed) {
            m >>= 1;
            v = ((bits >> 10) & 1) ? (kg_u64)0 - m : m;
        } else {
            v = m;
        }
    }
    int inside = is_signed ? ((long long)v >= (long long)ilo && (long long)v <= (long long)ihi)
                           : (v >= ilo && v <= ihi);
    return inside ? v : kg_integer(bits, ilo, span);
}

enum { KG_KIND_DRAW = 0, KG_KIND_EDGES = 1 };

// Elements first, first + step, ... < n of `out`; the kernel passes its grid stride, the host
// test passes (0, 1). Unknown dtype codes write nothing (the Python side validates them).
// kind KG_KIND_DRAW: uniform floats in [lo, hi), integers in [ilo, ilo + span); KG_KIND_EDGES:
// the edges distribution over [lo, hi] (floats) or the same integer range.
KG_HD void kg_fill_strided(void* out, kg_u64 n, kg_u64 first, kg_u64 step, kg_u64 seed,
                           kg_u64 stream, int dtype, double lo, double hi, kg_u64 ilo,
                           kg_u64 span, int kind) {
    kg_u64 key = kg_key(seed, stream);
    kg_u64 i;
    if (kind == KG_KIND_EDGES) {
        switch (dtype) {
            case KG_F32: {
                float lo_t = kg_f32_at_least(lo), hi_t = kg_f32_at_most(hi);
                for (i = first; i < n; i += step)
                    ((float*)out)[i] = kg_edges_f32(kg_bits_at(key, i), lo_t, hi_t);
                break;
            }
            case KG_F64:
                for (i = first; i < n; i += step)
                    ((double*)out)[i] = kg_edges_f64(kg_bits_at(key, i), lo, hi);
                break;
            case KG_I32:
            case KG_U32:
                for (i = first; i < n; i += step)
                    ((unsigned int*)out)[i] =
                        (unsigned int)kg_edges_int(kg_bits_at(key, i), dtype, ilo, span);
                break;
            case KG_I64:
            case KG_U64:
                for (i = first; i < n; i += step)
                    ((kg_u64*)out)[i] = kg_edges_int(kg_bits_at(key, i), dtype, ilo, span);
                break;
            default:
                break;
        }
        return;
    }
    switch (dtype) {
        case KG_F32:
            for (i = first; i < n; i += step)
                ((float*)out)[i] = kg_uniform_f32(kg_bits_at(key, i), lo, hi);
            break;
        case KG_F64:
            for (i = first; i < n; i += step)
                ((double*)out)[i] = kg_uniform_f64(kg_bits_at(key, i), lo, hi);
            break;
        case KG_I32:
        case KG_U32:
            for (i = first; i < n; i += step)
                ((unsigned int*)out)[i] = (unsigned int)kg_integer(kg_bits_at(key, i), ilo, span);
            break;
        case KG_I64:
        case KG_U64:
            for (i = first; i < n; i += step)
                ((kg_u64*)out)[i] = kg_integer(kg_bits_at(key, i), ilo, span);
            break;
        default:
            break;
    }
}

// ---- comparison of two outputs (the device twin of runner.measurement.gate.compare) --------------
//
// One element of `got` against `want` (same dtype): |got - want| <= atol + rtol * |want| in
// float64, or exactly (integers always; floats under an exact tolerance, the sign of zero
// included); NaN matches only NaN. Integers' difference is taken in the unsigned type of their
// width, then rounded to float64, as numpy's twin does. The accumulator's words: KG_CMP_*.

enum {
    KG_CMP_MISMATCHES = 0,    // elements outside the tolerance
    KG_CMP_NONFINITE = 1,     // of those, the ones whose difference is not finite
    KG_CMP_MAX_ABS = 2,       // bits of the largest finite |got - want| (>= 0: ordered as u64)
    KG_CMP_MAX_REL = 3,       // bits of the largest finite |got - want| / |want|
    KG_CMP_FIRST = 4,         // index of the first mismatch (all ones: none)
    KG_CMP_FINITE_ABS = 5,    // elements with a finite difference
    KG_CMP_FINITE_REL = 6,    // elements with a finite relative difference
    KG_CMP_BITS_DIFFER = 7,   // elements whose bytes differ
    KG_CMP_WORDS = 8
};

typedef struct {
    int bad, bits_differ, finite_abs, finite_rel;
    double abs_err, rel_err;
} kg_cmp_t;

KG_HD kg_cmp_t kg_cmp_floats(double g, double w, int bits_differ, int exact, double atol,
                             double rtol) {
    kg_cmp_t r;
    int both_nan = isnan(g) && isnan(w);
    r.abs_err = g == w ? 0.0 : fabs(g - w);
    if (exact)
        r.bad = !((g == w && signbit(g) == signbit(w)) || both_nan);
    else  // non-finite values compare by class: inf only with itself, finite never with either
        r.bad = !(r.abs_err <= atol + rtol * fabs(w) || both_nan) ||
                ((!isfinite(g) || !isfinite(w)) && !(g == w || both_nan));
    r.rel_err = w != 0.0 ? r.abs_err / fabs(w) : (r.abs_err == 0.0 ? 0.0 : HUGE_VAL);
    r.finite_abs = isfinite(r.abs_err);
    r.finite_rel = isfinite(r.rel_err);
    r.bits_differ = bits_differ;
    return r;
}

// Integers, as two's-complement bits of `width` bytes (`is_signed`): compared exactly.
KG_HD kg_cmp_t kg_cmp_integers(kg_u64 g, kg_u64 w, int width, int is_signed) {
    kg_cmp_t r;
    kg_u64 mask = width == 8 ? ~0ULL : 0xFFFFFFFFULL;
    g &= mask;
    w &= mask;
    long long gs = width == 8 ? (long long)g : (long long)(int)(unsigned int)g;
    long long ws = width == 8 ? (long long)w : (long long)(int)(unsigned int)w;
    int g_above = is_signed ? gs > ws : g > w;
    kg_u64 span = ((g_above ? g - w : w - g)) & mask;
    double wd = is_signed ? (double)ws : (double)w;
    r.bad = r.bits_differ = g != w;
    r.abs_err = (double)span;
    r.rel_err = wd != 0.0 ? r.abs_err / fabs(wd) : (r.abs_err == 0.0 ? 0.0 : HUGE_VAL);
    r.finite_abs = 1;
    r.finite_rel = isfinite(r.rel_err);
    return r;
}

KG_HD kg_cmp_t kg_cmp_at(const void* got, const void* want, kg_u64 i, int dtype, int exact,
                         double atol, double rtol) {
    switch (dtype) {
        case KG_F32: {
            float g = ((const float*)got)[i], w = ((const float*)want)[i];
            unsigned int gb, wb;
            memcpy(&gb, &g, 4);
            memcpy(&wb, &w, 4);
            return kg_cmp_floats((double)g, (double)w, gb != wb, exact, atol, rtol);
        }
        case KG_F64: {
            double g = ((const double*)got)[i], w = ((const double*)want)[i];
            kg_u64 gb, wb;
            memcpy(&gb, &g, 8);
            memcpy(&wb, &w, 8);
            return kg_cmp_floats(g, w, gb != wb, exact, atol, rtol);
        }
        case KG_I32:
        case KG_U32:
            return kg_cmp_integers(((const unsigned int*)got)[i], ((const unsigned int*)want)[i],
                                   4, dtype == KG_I32);
        default:
            return kg_cmp_integers(((const kg_u64*)got)[i], ((const kg_u64*)want)[i], 8,
                                   dtype == KG_I64);
    }
}

// ---- kernels (device build only) ---------------------------------------------------------------

#ifdef __CUDACC__

#define KG_FLUSH_MAGIC 0x6B65726E656C6761ULL  // "kernelga": never the XOR of a real flush buffer

extern "C" __global__ void kg_fill_random(void* out, kg_u64 n, kg_u64 seed, kg_u64 stream,
                                          int dtype, double lo, double hi, kg_u64 ilo,
                                          kg_u64 span, int kind) {
    kg_u64 first = (kg_u64)blockIdx.x * blockDim.x + threadIdx.x;
    kg_u64 step = (kg_u64)gridDim.x * blockDim.x;
    kg_fill_strided(out, n, first, step, seed, stream, dtype, lo, hi, ilo, span, kind);
}

// Reads every word so the L2 ends up holding clean lines of `buf` (dirty lines of the previous
// kernel are written back here, not during the next timed kernel); the store is never taken but
// keeps the loads alive.
extern "C" __global__ void kg_flush_l2(const kg_u64* buf, kg_u64 n_words, kg_u64* sink) {
    kg_u64 acc = 0;
    kg_u64 step = (kg_u64)gridDim.x * blockDim.x;
    for (kg_u64 i = (kg_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n_words; i += step)
        acc ^= buf[i];
    if (acc == KG_FLUSH_MAGIC) *sink = acc;
}

// Stream kernels (after BabelStream): the device's read-only, write-only and copy bandwidth,
// 16-byte accesses in a grid-stride loop over buffers several times the L2
// (runner.measurement.environment.measure_stream_bandwidth). The read's store is never taken.
extern "C" __global__ void kg_stream_read(const ulonglong2* buf, kg_u64 n_pairs, kg_u64* sink) {
    kg_u64 acc = 0;
    kg_u64 step = (kg_u64)gridDim.x * blockDim.x;
    for (kg_u64 i = (kg_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n_pairs; i += step) {
        ulonglong2 v = buf[i];
        acc ^= v.x ^ v.y;
    }
    if (acc == KG_FLUSH_MAGIC) *sink = acc;
}

extern "C" __global__ void kg_stream_write(ulonglong2* buf, kg_u64 n_pairs, kg_u64 value) {
    kg_u64 step = (kg_u64)gridDim.x * blockDim.x;
    for (kg_u64 i = (kg_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n_pairs; i += step)
        buf[i] = make_ulonglong2(value, i);
}

extern "C" __global__ void kg_stream_copy(const ulonglong2* src, ulonglong2* dst, kg_u64 n_pairs) {
    kg_u64 step = (kg_u64)gridDim.x * blockDim.x;
    for (kg_u64 i = (kg_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n_pairs; i += step)
        dst[i] = src[i];
}

__device__ __forceinline__ kg_u64 kg_double_bits(double v) { return (kg_u64)__double_as_longlong(v); }

// Compares n elements of `got` with `want` (kg_cmp_at) and adds what it finds to `acc`
// (KG_CMP_WORDS words, zeroed but for KG_CMP_FIRST at all ones before the launch): each
// thread sums its elements of a grid-stride loop, each warp its threads', one atomic per word.
extern "C" __global__ void kg_compare(const void* got, const void* want, kg_u64 n, int dtype,
                                      int exact, double atol, double rtol, kg_u64* acc) {
    kg_u64 counts[4] = {0, 0, 0, 0};  // mismatches, nonfinite, finite abs, finite rel
    kg_u64 differ = 0, first = ~0ULL, max_abs = 0, max_rel = 0;
    kg_u64 step = (kg_u64)gridDim.x * blockDim.x;
    for (kg_u64 i = (kg_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        kg_cmp_t r = kg_cmp_at(got, want, i, dtype, exact, atol, rtol);
        differ += r.bits_differ;
        counts[0] += r.bad;
        counts[1] += r.bad && !r.finite_abs;
        counts[2] += r.finite_abs;  // over every element, as numpy's max over finite ones
        counts[3] += r.finite_rel;
        if (r.bad && i < first) first = i;
        if (r.finite_abs) max_abs = max(max_abs, kg_double_bits(r.abs_err));
        if (r.finite_rel) max_rel = max(max_rel, kg_double_bits(r.rel_err));
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        for (int k = 0; k < 4; ++k) counts[k] += __shfl_down_sync(0xFFFFFFFFu, counts[k], offset);
        differ += __shfl_down_sync(0xFFFFFFFFu, differ, offset);
        first = min(first, __shfl_down_sync(0xFFFFFFFFu, first, offset));
        max_abs = max(max_abs, __shfl_down_sync(0xFFFFFFFFu, max_abs, offset));
        max_rel = max(max_rel, __shfl_down_sync(0xFFFFFFFFu, max_rel, offset));
    }
    if ((threadIdx.x & 31) != 0) return;
    const int count_words[4] = {KG_CMP_MISMATCHES, KG_CMP_NONFINITE, KG_CMP_FINITE_ABS,
                                KG_CMP_FINITE_REL};
    for (int k = 0; k < 4; ++k)
        if (counts[k]) atomicAdd(&acc[count_words[k]], counts[k]);
    if (differ) atomicAdd(&acc[KG_CMP_BITS_DIFFER], differ);
    if (first != ~0ULL) atomicMin(&acc[KG_CMP_FIRST], first);
    if (max_abs) atomicMax(&acc[KG_CMP_MAX_ABS], max_abs);
    if (max_rel) atomicMax(&acc[KG_CMP_MAX_REL], max_rel);
}

__device__ __forceinline__ kg_u64 kg_globaltimer_ns() {
    kg_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Holds the stream until the host sets *flag (mapped pinned memory), so launches queued behind
// it start back to back; gives up after timeout_ns and reports it in *status (1 timed out, 0 not).
extern "C" __global__ void kg_spin(volatile unsigned int* flag, kg_u64 timeout_ns,
                                   unsigned int* status) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    kg_u64 start = kg_globaltimer_ns();
    unsigned int timed_out = 0;
    while (*flag == 0) {
        if (kg_globaltimer_ns() - start > timeout_ns) {
            timed_out = 1;
            break;
        }
        __nanosleep(100);
    }
    *status = timed_out;
}

// Fills each block's `words` of dynamic shared memory with all ones (NaN as floats), launched
// over every SM before the gate's launches: a kernel that reads shared memory before writing it
// finds poison there, not the zeros it happens to hold (issue 50 class 7). Volatile: the stores
// are the whole point, so they must not be dropped as dead.
extern "C" __global__ void kg_poison_shared(unsigned int words) {
    extern __shared__ unsigned int kg_shared_words[];
    volatile unsigned int* shared = kg_shared_words;
    for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) shared[i] = 0xFFFFFFFFu;
}

// Fills the device heap (`malloc` in a kernel) with all ones, for the same reason. Each block's
// first thread allocates chunks of `chunk_bytes`, halving the size whenever malloc fails down to
// 16 bytes (so the heap ends up allocated to its last fragment); the block fills each chunk, and
// the chunks are linked through their first word into heads[block]. kg_free_heap, launched
// after it, frees them: freeing only once every block has allocated keeps the heap whole.
extern "C" __global__ void kg_poison_heap(kg_u64 chunk_bytes, kg_u64* heads) {
    __shared__ kg_u64* chunk;
    __shared__ kg_u64 size;
    kg_u64* head = 0;  // thread 0's
    if (threadIdx.x == 0) size = chunk_bytes & ~15ULL;
    for (;;) {
        if (threadIdx.x == 0) {
            kg_u64* got = 0;
            while (size >= 16 && (got = (kg_u64*)malloc(size)) == 0) size = (size >> 1) & ~15ULL;
            chunk = got;
        }
        __syncthreads();
        kg_u64* mine = chunk;
        kg_u64 words = size / 8;
        if (mine == 0) break;  // the same for the whole block
        for (kg_u64 i = 1 + threadIdx.x; i < words; i += blockDim.x) mine[i] = ~0ULL;
        if (threadIdx.x == 0) {
            mine[0] = (kg_u64)head;
            head = mine;
        }
        __syncthreads();  // every thread has read chunk and size before thread 0 moves on
    }
    if (threadIdx.x == 0) heads[blockIdx.x] = (kg_u64)head;
}

// Frees what kg_poison_heap allocated (one thread a block of it), each chunk's link word
// poisoned first (volatile: a store just before free would otherwise be dropped as dead).
extern "C" __global__ void kg_free_heap(kg_u64* heads) {
    if (threadIdx.x != 0) return;
    kg_u64* chunk = (kg_u64*)heads[blockIdx.x];
    while (chunk != 0) {
        kg_u64* next = (kg_u64*)chunk[0];
        *(volatile kg_u64*)chunk = ~0ULL;
        free(chunk);
        chunk = next;
    }
    heads[blockIdx.x] = 0;
}

#endif  // __CUDACC__
