// Kernels captured into CUDA graphs by the probe runtime: summaries of probed values
// written into the session's record table (a row per point in flight, a column per site;
// pinned host memory mapped into the device, so the host reads a point's row where the
// kernels wrote it, once the point's event completed), and copies of probed values into
// device rings (the history a flight recorder keeps, or, with a depth of 1, the latest
// value).
//
// Compiled at first use by NVRTC (see nvrtc.rs). The host side mirrors every struct here
// with #[repr(C)] types in summary.rs; the two must stay in step. The marker below is
// replaced by the exact decoding tables of tcgd-tensor, so device and host decode every
// float8 byte to the same double.

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#define THREADS 256
#ifndef UNROLL
#define UNROLL 4  // 16-byte loads a thread has in flight
#endif

// dtype codes (DeviceDtype in summary.rs)
#define DT_F64 0
#define DT_F32 1
#define DT_F16 2
#define DT_BF16 3
#define DT_F8_E4M3FN 4
#define DT_F8_E4M3FNUZ 5
#define DT_F8_E5M2 6
#define DT_F8_E5M2FNUZ 7
#define DT_F8_E8M0FNU 8
#define DT_I8 9
#define DT_I16 10
#define DT_I32 11
#define DT_I64 12
#define DT_U8 13
#define DT_U16 14
#define DT_U32 15
#define DT_U64 16
#define DT_BOOL 17
#define DT_ANY 99  // a batch of mixed dtypes: dispatch per site

#define TRIGGER_NONFINITE 1u
#define TRIGGER_ABS_MAX 2u

// @FLOAT8_TABLES@

// What one thread has seen. Every thread of a site accumulates around the same shift `c`
// (the site's first element when it is finite, else 0): s1 = sum(x - c), s2 = sum((x - c)^2)
// and ssq = sum(x^2) are then plain sums, so partials of threads, warps and blocks merge by
// addition, with no division anywhere until the record is written. `V` is the type the
// element is classified and compared in: float for every dtype float32 holds exactly (the
// 16-bit floats, float8, small integers), double otherwise; the sums are always double.
template <typename V> struct Acc {
    u32 nan, pinf, ninf, zero, n;
    V min, max;
    double s1, s2, ssq;
};

// A block's or a site's partial (counts beyond 2^32 need 64 bits here).
struct Partial {
    u64 nan, pinf, ninf, zero, n;
    double min, max, s1, s2, ssq;
};

// One summary as the host reads it (112 bytes), tagged with the point and the replay
// that wrote it: a row holds stale records of graphs that did not replay in the point.
struct Record {
    u64 numel, nan, pinf, ninf, zero, finite;
    double min, max, mean, m2, ssq;
    u64 point;
    u64 flags;
    u64 replay;
};

struct SummarySite {
    const u8* src;
    u64 numel;
    u32 column;        // the site's column in the record table
    u32 dtype;
    u32 first_block;
    u32 blocks;
    u8* ring;          // history ring slot 0, copied into while summarising (null: none);
                       // slot k at ring + k * bytes, each slot as aligned as src
    u64* tags;         // (replay, point) each ring slot holds
};

struct SummaryBatch {
    const u64* replay;     // the capture's replay counter
    const u32* point;      // the session's current point number
    u64* frozen_at;        // history rings stop after this point (u64 max: armed)
    Partial* scratch;      // one partial per block of the launch
    u32* done;             // blocks finished, per site of the launch
    Record* table;         // rows x columns records
    u32 rows;
    u32 columns;
    double abs_max;
    u32 trigger;
    u32 nsites;
    u64 depth;             // slots of the history rings
    SummarySite sites[MAX_SITES];
};

struct CopySite {
    const u8* src;
    u8* dst;               // ring slot 0; slot k is at dst + k * nbytes
    u64* tags;             // device: (replay, point) each ring slot holds (null: none)
    u64 nbytes;
    u32 first_block;
    u32 blocks;
};

struct CopyBatch {
    const u64* replay;
    const u32* point;
    const u64* frozen_at;  // null: never frozen
    u64 depth;
    u32 nsites;
    u32 pad;
    CopySite sites[MAX_SITES];
};

__device__ __forceinline__ double bits_to_double(u64 b) { return __longlong_as_double((long long)b); }

// Which type an element is classified in (see Acc).
template <u32 DT> struct Kind { typedef float V; static constexpr int size = 1; };
template <> struct Kind<DT_F64> { typedef double V; static constexpr int size = 8; };
template <> struct Kind<DT_F32> { typedef float V; static constexpr int size = 4; };
template <> struct Kind<DT_F16> { typedef float V; static constexpr int size = 2; };
template <> struct Kind<DT_BF16> { typedef float V; static constexpr int size = 2; };
template <> struct Kind<DT_I16> { typedef float V; static constexpr int size = 2; };
template <> struct Kind<DT_U16> { typedef float V; static constexpr int size = 2; };
template <> struct Kind<DT_I32> { typedef double V; static constexpr int size = 4; };
template <> struct Kind<DT_U32> { typedef double V; static constexpr int size = 4; };
template <> struct Kind<DT_I64> { typedef double V; static constexpr int size = 8; };
template <> struct Kind<DT_U64> { typedef double V; static constexpr int size = 8; };

__device__ __forceinline__ float half_to_float(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// Element `k` of the 16 bytes in `w`, exactly (64-bit integers beyond 2^53 round as they
// do on the host).
template <u32 DT> __device__ __forceinline__ typename Kind<DT>::V decode(const uint4& w, int k) {
    const u8* b = (const u8*)&w;
    if constexpr (DT == DT_F64) return ((const double*)b)[k];
    else if constexpr (DT == DT_F32) return ((const float*)b)[k];
    else if constexpr (DT == DT_F16) return half_to_float(((const u16*)b)[k]);
    else if constexpr (DT == DT_BF16) return __uint_as_float(((u32)((const u16*)b)[k]) << 16);
    else if constexpr (DT == DT_F8_E4M3FN) return (float)bits_to_double(F8_E4M3FN[b[k]]);
    else if constexpr (DT == DT_F8_E4M3FNUZ) return (float)bits_to_double(F8_E4M3FNUZ[b[k]]);
    else if constexpr (DT == DT_F8_E5M2) return (float)bits_to_double(F8_E5M2[b[k]]);
    else if constexpr (DT == DT_F8_E5M2FNUZ) return (float)bits_to_double(F8_E5M2FNUZ[b[k]]);
    else if constexpr (DT == DT_F8_E8M0FNU) return (float)bits_to_double(F8_E8M0FNU[b[k]]);
    else if constexpr (DT == DT_I8) return (float)((const signed char*)b)[k];
    else if constexpr (DT == DT_I16) return (float)((const short*)b)[k];
    else if constexpr (DT == DT_I32) return (double)((const int*)b)[k];
    else if constexpr (DT == DT_I64) return (double)((const long long*)b)[k];
    else if constexpr (DT == DT_U8) return (float)b[k];
    else if constexpr (DT == DT_U16) return (float)((const u16*)b)[k];
    else if constexpr (DT == DT_U32) return (double)((const u32*)b)[k];
    else if constexpr (DT == DT_U64) return (double)((const u64*)b)[k];
    else return b[k] != 0 ? 1.0f : 0.0f;  // bool
}

// Element `i` of `src` for the unaligned head and the tail, through the same decoder.
template <u32 DT> __device__ __forceinline__ typename Kind<DT>::V element(const u8* src, u64 i) {
    constexpr int size = Kind<DT>::size;
    uint4 w;
    u8* b = (u8*)&w;
#pragma unroll
    for (int j = 0; j < size; j++) b[j] = src[i * size + j];
    return decode<DT>(w, 0);
}

// Element `i` of `src` copied to `dst` byte by byte (the unaligned head and the tail).
template <u32 DT> __device__ __forceinline__ void copy_element(const u8* src, u8* dst, u64 i) {
    constexpr int size = Kind<DT>::size;
#pragma unroll
    for (int j = 0; j < size; j++) dst[i * size + j] = src[i * size + j];
}

template <typename V> __device__ __forceinline__ void acc_init(Acc<V>& a) {
    a.nan = a.pinf = a.ninf = a.zero = a.n = 0;
    a.min = (V)__longlong_as_double(0x7ff0000000000000LL);   // +inf
    a.max = (V)__longlong_as_double(0xfff0000000000000LL);   // -inf
    a.s1 = a.s2 = a.ssq = 0.0;
}

template <typename V> __device__ __forceinline__ void acc_add(Acc<V>& a, V x, double c) {
    if (isnan(x)) { a.nan++; return; }
    if (isinf(x)) { if (x > 0) a.pinf++; else a.ninf++; return; }
    if (x == (V)0) a.zero++;
    a.n++;
    a.min = x < a.min ? x : a.min;
    a.max = x > a.max ? x : a.max;
    const double xd = (double)x;
    const double d = xd - c;
    a.s1 += d;
    a.s2 = fma(d, d, a.s2);
    a.ssq = fma(xd, xd, a.ssq);
}

// The 16 bytes of `w`, element by element. When every element is finite (the usual case,
// and uniform across a warp in practice) the counts of NaN and infinities stay as they
// are and no element branches: the per-element work is then what the moments need (a
// conversion to double, two adds and two fused multiply-adds) and the counts, min and max,
// which keeps the kernel at the memory's pace instead of the instruction issue's.
template <u32 DT>
__device__ __forceinline__ void acc_vector(Acc<typename Kind<DT>::V>& a, const uint4& w, double c) {
    typedef typename Kind<DT>::V V;
    constexpr int per = 16 / Kind<DT>::size;
    V x[per];
    bool finite = true;
#pragma unroll
    for (int k = 0; k < per; k++) {
        x[k] = decode<DT>(w, k);
        finite = finite && isfinite(x[k]);
    }
    if (!finite) {
#pragma unroll
        for (int k = 0; k < per; k++) acc_add(a, x[k], c);
        return;
    }
    a.n += per;
#pragma unroll
    for (int k = 0; k < per; k++) {
        a.zero += x[k] == (V)0 ? 1u : 0u;
        a.min = fmin(x[k], a.min);  // no NaN here: one min/max instruction each
        a.max = fmax(x[k], a.max);
        const double xd = (double)x[k];
        const double d = xd - c;
        a.s1 += d;
        a.s2 = fma(d, d, a.s2);
        a.ssq = fma(xd, xd, a.ssq);
    }
}

template <typename V> __device__ __forceinline__ Partial acc_finish(const Acc<V>& a) {
    Partial p;
    p.nan = a.nan; p.pinf = a.pinf; p.ninf = a.ninf; p.zero = a.zero; p.n = a.n;
    p.min = (double)a.min; p.max = (double)a.max;
    p.s1 = a.s1; p.s2 = a.s2; p.ssq = a.ssq;
    return p;
}

__device__ __forceinline__ Partial empty_partial() {
    Partial p;
    p.nan = p.pinf = p.ninf = p.zero = p.n = 0;
    p.min = __longlong_as_double(0x7ff0000000000000LL);
    p.max = __longlong_as_double(0xfff0000000000000LL);
    p.s1 = p.s2 = p.ssq = 0.0;
    return p;
}

// Partials around the same shift add up; the order of merges is fixed by the caller, so a
// summary does not depend on scheduling.
__device__ __forceinline__ Partial merge(const Partial& a, const Partial& b) {
    Partial r;
    r.nan = a.nan + b.nan; r.pinf = a.pinf + b.pinf; r.ninf = a.ninf + b.ninf;
    r.zero = a.zero + b.zero; r.n = a.n + b.n;
    r.min = fmin(a.min, b.min); r.max = fmax(a.max, b.max);
    r.s1 = a.s1 + b.s1; r.s2 = a.s2 + b.s2; r.ssq = a.ssq + b.ssq;
    return r;
}

// The shift every thread of a site accumulates around: its first element, if finite.
template <u32 DT> __device__ __forceinline__ double site_shift(const u8* src, u64 numel) {
    if (numel == 0) return 0.0;
    const double c = (double)element<DT>(src, 0);
    return isfinite(c) ? c : 0.0;
}

// This thread's share of a site: 16-byte loads (two in flight) over the aligned body,
// element loads over the unaligned head and the tail.
template <u32 DT>
__device__ __forceinline__ Partial accumulate(const u8* src, u64 numel, u64 thread, u64 threads,
                                              u8* dst) {
    typedef typename Kind<DT>::V V;
    constexpr int size = Kind<DT>::size;
    constexpr int per = 16 / size;
    Acc<V> a;
    acc_init(a);
    const double c = site_shift<DT>(src, numel);
    const u64 misalign = ((u64)src & 15) / size;
    const u64 head = ((u64)src & (size - 1)) != 0 ? numel
                   : (misalign == 0 ? 0 : (per - misalign < numel ? per - misalign : numel));
    for (u64 i = thread; i < head; i += threads) {
        acc_add(a, element<DT>(src, i), c);
        if (dst) copy_element<DT>(src, dst, i);
    }
    const uint4* body = (const uint4*)(src + head * size);
    uint4* copy = dst ? (uint4*)(dst + head * size) : nullptr;  // aligned as body is
    const u64 vectors = (numel - head) / per;
    // UNROLL loads issued before any of their elements is used: the loads of a thread
    // are in flight together, which is what keeps the memory system busy.
    u64 j = thread;
    for (; j + (UNROLL - 1) * threads < vectors; j += UNROLL * threads) {
        uint4 w[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) w[u] = body[j + u * threads];
        if (copy) {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) copy[j + u * threads] = w[u];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc_vector<DT>(a, w[u], c);
    }
    for (; j < vectors; j += threads) {
        const uint4 w = body[j];
        if (copy) copy[j] = w;
        acc_vector<DT>(a, w, c);
    }
    for (u64 i = head + vectors * per + thread; i < numel; i += threads) {
        acc_add(a, element<DT>(src, i), c);
        if (dst) copy_element<DT>(src, dst, i);
    }
    return acc_finish(a);
}

// One switch per thread, not per element: the dtype is the same for the whole site.
__device__ Partial accumulate_any(u32 dtype, const u8* src, u64 numel, u64 thread, u64 threads,
                                  u8* dst) {
    switch (dtype) {
    case DT_F64: return accumulate<DT_F64>(src, numel, thread, threads, dst);
    case DT_F32: return accumulate<DT_F32>(src, numel, thread, threads, dst);
    case DT_F16: return accumulate<DT_F16>(src, numel, thread, threads, dst);
    case DT_BF16: return accumulate<DT_BF16>(src, numel, thread, threads, dst);
    case DT_F8_E4M3FN: return accumulate<DT_F8_E4M3FN>(src, numel, thread, threads, dst);
    case DT_F8_E4M3FNUZ: return accumulate<DT_F8_E4M3FNUZ>(src, numel, thread, threads, dst);
    case DT_F8_E5M2: return accumulate<DT_F8_E5M2>(src, numel, thread, threads, dst);
    case DT_F8_E5M2FNUZ: return accumulate<DT_F8_E5M2FNUZ>(src, numel, thread, threads, dst);
    case DT_F8_E8M0FNU: return accumulate<DT_F8_E8M0FNU>(src, numel, thread, threads, dst);
    case DT_I8: return accumulate<DT_I8>(src, numel, thread, threads, dst);
    case DT_I16: return accumulate<DT_I16>(src, numel, thread, threads, dst);
    case DT_I32: return accumulate<DT_I32>(src, numel, thread, threads, dst);
    case DT_I64: return accumulate<DT_I64>(src, numel, thread, threads, dst);
    case DT_U8: return accumulate<DT_U8>(src, numel, thread, threads, dst);
    case DT_U16: return accumulate<DT_U16>(src, numel, thread, threads, dst);
    case DT_U32: return accumulate<DT_U32>(src, numel, thread, threads, dst);
    case DT_U64: return accumulate<DT_U64>(src, numel, thread, threads, dst);
    default: return accumulate<DT_BOOL>(src, numel, thread, threads, dst);
    }
}

__device__ __forceinline__ Partial shuffle_down(const Partial& p, int offset) {
    Partial q;
    q.nan = __shfl_down_sync(0xffffffffu, p.nan, offset);
    q.pinf = __shfl_down_sync(0xffffffffu, p.pinf, offset);
    q.ninf = __shfl_down_sync(0xffffffffu, p.ninf, offset);
    q.zero = __shfl_down_sync(0xffffffffu, p.zero, offset);
    q.n = __shfl_down_sync(0xffffffffu, p.n, offset);
    q.min = __shfl_down_sync(0xffffffffu, p.min, offset);
    q.max = __shfl_down_sync(0xffffffffu, p.max, offset);
    q.s1 = __shfl_down_sync(0xffffffffu, p.s1, offset);
    q.s2 = __shfl_down_sync(0xffffffffu, p.s2, offset);
    q.ssq = __shfl_down_sync(0xffffffffu, p.ssq, offset);
    return q;
}

// Reduction of one Partial per thread, in a fixed order (warps by shuffles, then the
// warps' results by the first warp); thread 0 returns the block's result.
__device__ Partial block_reduce(Partial mine) {
    __shared__ Partial warps[THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) mine = merge(mine, shuffle_down(mine, offset));
    __syncthreads();  // `warps` may still be read by an earlier call
    if (lane == 0) warps[warp] = mine;
    __syncthreads();
    if (warp == 0) {
        mine = lane < THREADS / 32 ? warps[lane] : empty_partial();
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            Partial other = shuffle_down(mine, offset);
            if (lane + offset < THREADS / 32) mine = merge(mine, other);
        }
    }
    return mine;
}

// Summaries of every site of the batch: the blocks of a site each reduce a strided share
// of its elements; the last block to finish (counted in `done`) merges the block partials
// in block order and writes the site's record into its ring at replay % capacity.
template <u32 DT> __device__ __forceinline__ Partial site_share(u32 dtype, const u8* src, u64 numel,
                                                           u64 thread, u64 threads, u8* dst) {
    if constexpr (DT == DT_ANY) return accumulate_any(dtype, src, numel, thread, threads, dst);
    else return accumulate<DT>(src, numel, thread, threads, dst);
}

__device__ __forceinline__ u64 dtype_size(u32 dtype) {
    switch (dtype) {
    case DT_F64: case DT_I64: case DT_U64: return 8;
    case DT_F32: case DT_I32: case DT_U32: return 4;
    case DT_F16: case DT_BF16: case DT_I16: case DT_U16: return 2;
    default: return 1;
    }
}

// Where this replay's copy of a site goes: slot (replay % depth) of its history ring, or
// nowhere (no ring; or the rings froze at an earlier point, after a trigger, so that the
// history holds the points up to and including the trigger's). Block 0 of the site tags
// the slot.
__device__ __forceinline__ u8* ring_slot(const SummaryBatch& batch, const SummarySite& site,
                                         u32 local) {
    if (site.ring == 0) return nullptr;
    const u64 point = *batch.point;
    if (batch.frozen_at != 0 && point > *batch.frozen_at) return nullptr;
    const u64 replay = *batch.replay;
    const u64 slot = batch.depth > 1 ? replay % batch.depth : 0;
    if (local == 0 && threadIdx.x == 0) {
        site.tags[2 * slot] = replay;
        site.tags[2 * slot + 1] = point;
    }
    return site.ring + slot * site.numel * dtype_size(site.dtype);
}

template <u32 DT>
__device__ __forceinline__ double site_shift_any(u32 dtype, const u8* src, u64 numel) {
    if constexpr (DT != DT_ANY) {
        return site_shift<DT>(src, numel);
    } else {
        switch (dtype) {
        case DT_F64: return site_shift<DT_F64>(src, numel);
        case DT_F32: return site_shift<DT_F32>(src, numel);
        case DT_F16: return site_shift<DT_F16>(src, numel);
        case DT_BF16: return site_shift<DT_BF16>(src, numel);
        case DT_F8_E4M3FN: return site_shift<DT_F8_E4M3FN>(src, numel);
        case DT_F8_E4M3FNUZ: return site_shift<DT_F8_E4M3FNUZ>(src, numel);
        case DT_F8_E5M2: return site_shift<DT_F8_E5M2>(src, numel);
        case DT_F8_E5M2FNUZ: return site_shift<DT_F8_E5M2FNUZ>(src, numel);
        case DT_F8_E8M0FNU: return site_shift<DT_F8_E8M0FNU>(src, numel);
        case DT_I8: return site_shift<DT_I8>(src, numel);
        case DT_I16: return site_shift<DT_I16>(src, numel);
        case DT_I32: return site_shift<DT_I32>(src, numel);
        case DT_I64: return site_shift<DT_I64>(src, numel);
        case DT_U8: return site_shift<DT_U8>(src, numel);
        case DT_U16: return site_shift<DT_U16>(src, numel);
        case DT_U32: return site_shift<DT_U32>(src, numel);
        case DT_U64: return site_shift<DT_U64>(src, numel);
        default: return site_shift<DT_BOOL>(src, numel);
        }
    }
}

template <u32 DT> __device__ __forceinline__ void summarize(const SummaryBatch& batch) {
    u32 s = 0;
    while (s + 1 < batch.nsites && blockIdx.x >= batch.sites[s + 1].first_block) s++;
    const SummarySite& site = batch.sites[s];
    const u32 local = blockIdx.x - site.first_block;

    const u64 threads = (u64)site.blocks * THREADS;
    u8* dst = ring_slot(batch, site, local);
    Partial block = block_reduce(site_share<DT>(site.dtype, site.src, site.numel,
                                                (u64)local * THREADS + threadIdx.x, threads, dst));

    __shared__ bool last;
    if (threadIdx.x == 0) {
        batch.scratch[blockIdx.x] = block;
        __threadfence();
        last = atomicAdd(&batch.done[s], 1u) == site.blocks - 1;
    }
    __syncthreads();
    if (!last) return;

    // Every block of the site has published its partial; read them past the L1 cache.
    __threadfence();
    Partial mine = empty_partial();
    for (u32 b = threadIdx.x; b < site.blocks; b += THREADS) {
        volatile Partial* v = (volatile Partial*)&batch.scratch[site.first_block + b];
        Partial p;
        p.nan = v->nan; p.pinf = v->pinf; p.ninf = v->ninf; p.zero = v->zero; p.n = v->n;
        p.min = v->min; p.max = v->max; p.s1 = v->s1; p.s2 = v->s2; p.ssq = v->ssq;
        mine = merge(mine, p);
    }
    Partial total = block_reduce(mine);
    if (threadIdx.x != 0) return;

    batch.done[s] = 0;  // ready for the next replay
    const u64 replay = *batch.replay;
    const u64 finite = total.n;
    bool hit = false;
    if ((batch.trigger & TRIGGER_NONFINITE) && (total.nan + total.pinf + total.ninf) > 0) hit = true;
    if ((batch.trigger & TRIGGER_ABS_MAX) &&
        ((total.pinf + total.ninf) > 0 ||
         (finite > 0 && fmax(fabs(total.min), fabs(total.max)) > batch.abs_max))) hit = true;
    const u64 point = *batch.point;
    // Points, not replays, freeze the history: they are shared by every graph of the
    // session, while each graph counts its own replays.
    if (hit && batch.frozen_at != 0) atomicMin(batch.frozen_at, point);

    Record* r = &batch.table[(u64)(point % batch.rows) * batch.columns + site.column];
    r->numel = site.numel;
    r->nan = total.nan; r->pinf = total.pinf; r->ninf = total.ninf;
    r->zero = total.zero; r->finite = finite;
    // Mean and squared deviations from the shifted sums, once per site.
    double mean = 0.0, m2 = 0.0;
    if (finite > 0) {
        const double c = site_shift_any<DT>(site.dtype, site.src, site.numel);
        const double mean_d = total.s1 / (double)finite;
        mean = c + mean_d;
        m2 = fmax(total.s2 - total.s1 * mean_d, 0.0);
    }
    r->min = total.min; r->max = total.max; r->mean = mean; r->m2 = m2;
    r->ssq = total.ssq;
    r->point = point;
    r->flags = hit ? 1 : 0;
    r->replay = replay;
}

// One kernel per dtype, so that a launch runs (and the SMs fetch) only its dtype's code;
// tcgd_summarize takes batches of mixed dtypes.
#define TCGD_SUMMARIZE(NAME, DT) \
    extern "C" __global__ void __launch_bounds__(THREADS) NAME(const SummaryBatch batch) { \
        summarize<DT>(batch); \
    }
TCGD_SUMMARIZE(tcgd_summarize, DT_ANY)
TCGD_SUMMARIZE(tcgd_summarize_0, DT_F64)
TCGD_SUMMARIZE(tcgd_summarize_1, DT_F32)
TCGD_SUMMARIZE(tcgd_summarize_2, DT_F16)
TCGD_SUMMARIZE(tcgd_summarize_3, DT_BF16)
TCGD_SUMMARIZE(tcgd_summarize_4, DT_F8_E4M3FN)
TCGD_SUMMARIZE(tcgd_summarize_5, DT_F8_E4M3FNUZ)
TCGD_SUMMARIZE(tcgd_summarize_6, DT_F8_E5M2)
TCGD_SUMMARIZE(tcgd_summarize_7, DT_F8_E5M2FNUZ)
TCGD_SUMMARIZE(tcgd_summarize_8, DT_F8_E8M0FNU)
TCGD_SUMMARIZE(tcgd_summarize_9, DT_I8)
TCGD_SUMMARIZE(tcgd_summarize_10, DT_I16)
TCGD_SUMMARIZE(tcgd_summarize_11, DT_I32)
TCGD_SUMMARIZE(tcgd_summarize_12, DT_I64)
TCGD_SUMMARIZE(tcgd_summarize_13, DT_U8)
TCGD_SUMMARIZE(tcgd_summarize_14, DT_U16)
TCGD_SUMMARIZE(tcgd_summarize_15, DT_U32)
TCGD_SUMMARIZE(tcgd_summarize_16, DT_U64)
TCGD_SUMMARIZE(tcgd_summarize_17, DT_BOOL)

// Copies every site of the batch into slot (replay % depth) of its ring, unless the ring
// is frozen at an earlier point (a trigger fired): the history then holds the points up
// to and including the trigger's.
extern "C" __global__ void __launch_bounds__(THREADS) tcgd_copy_ring(const CopyBatch batch) {
    u32 s = 0;
    while (s + 1 < batch.nsites && blockIdx.x >= batch.sites[s + 1].first_block) s++;
    const CopySite& site = batch.sites[s];
    const u64 replay = *batch.replay;
    const u64 point = *batch.point;
    if (batch.frozen_at != 0 && point > *batch.frozen_at) return;
    const u64 slot = batch.depth > 1 ? replay % batch.depth : 0;
    u8* dst = site.dst + slot * site.nbytes;
    const u32 local = blockIdx.x - site.first_block;
    const u64 step = (u64)site.blocks * THREADS;
    const u64 start = (u64)local * THREADS + threadIdx.x;
    if ((((u64)site.src | (u64)dst | site.nbytes) & 15) == 0) {
        const uint4* from = (const uint4*)site.src;
        uint4* to = (uint4*)dst;
#pragma unroll 4
        for (u64 i = start; i < site.nbytes / 16; i += step) to[i] = from[i];
    } else {
        for (u64 i = start; i < site.nbytes; i += step) dst[i] = site.src[i];
    }
    if (local == 0 && threadIdx.x == 0 && site.tags != 0) {
        site.tags[2 * slot] = replay;
        site.tags[2 * slot + 1] = point;
    }
}
