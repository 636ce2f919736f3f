// The third pass's honest controls (issue 50): kernels that must pass the gate unflagged and
// keep their true gap. tests/cheats/honest_third.toml says which case each one serves.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

// out[i] = sum over k = 1..16 of sin(k x[i]) / k, f32. Built once as it is and once with
// --use_fast_math (sin.approx, one SFU op against a range reduction and a polynomial): the
// fast build is within the case's tolerance and faster, compute-bound.
extern "C" __global__ void sines_f32(const float* __restrict__ x, float* __restrict__ out, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i], acc = 0.0f;
#pragma unroll
        for (int k = 1; k <= 16; ++k) acc += sinf((float)k * v) * (1.0f / (float)k);
        out[i] = acc;
    }
}

// C = A * B for square row-major n x n matrices, one thread per element of C (block 16 x 16):
// the inner product over k in order, from global memory (the baseline of matmul_f64_naive).
extern "C" __global__ void matmul_naive_f64(const double* __restrict__ a, const double* __restrict__ b,
                                            double* __restrict__ c, long long n)
{
    long long row = (long long)blockIdx.y * blockDim.y + threadIdx.y;
    long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n) return;
    double sum = 0.0;
    for (long long k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];
    c[row * n + col] = sum;
}

// The same product through 16 x 16 shared-memory tiles (matmul_f64_tiled's kernel): a faster
// algorithm, in the same order over k, so the two agree to the last bit or two.
#define TILE 16

extern "C" __global__ void matmul_tiled_f64(const double* __restrict__ a, const double* __restrict__ b,
                                            double* __restrict__ c, long long n)
{
    __shared__ double ta[TILE][TILE];
    __shared__ double tb[TILE][TILE];
    long long row = (long long)blockIdx.y * TILE + threadIdx.y;
    long long col = (long long)blockIdx.x * TILE + threadIdx.x;
    double sum = 0.0;
    for (long long t = 0; t < n; t += TILE) {
        long long ka = t + threadIdx.x, kb = t + threadIdx.y;
        ta[threadIdx.y][threadIdx.x] = (row < n && ka < n) ? a[row * n + ka] : 0.0;
        tb[threadIdx.y][threadIdx.x] = (kb < n && col < n) ? b[kb * n + col] : 0.0;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) c[row * n + col] = sum;
}

// out[b] = the sum of x[256 b .. 256 b + 255]: a tree in static shared memory, a barrier
// between levels (reduce_sum_f64's kernel).
#define BLOCK 256

extern "C" __global__ void block_sums_tree_f64(const double* __restrict__ x, double* __restrict__ out, long long n)
{
    __shared__ double partial[BLOCK];
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0;
    __syncthreads();
    for (int width = BLOCK / 2; width > 0; width /= 2) {
        if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// The same sums with cooperative groups: each warp (a tiled_partition of the block) reduces its
// 32 values by shuffles, writes its partial to dynamic shared memory (the case's shared_bytes),
// the block syncs, and the first warp reduces the partials.
extern "C" __global__ void block_sums_cg_f64(const double* __restrict__ x, double* __restrict__ out, long long n)
{
    extern __shared__ double warp_sums[];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    double v = cg::reduce(warp, i < n ? x[i] : 0.0, cg::plus<double>());
    if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = v;
    block.sync();
    if (warp.meta_group_rank() == 0) {
        double w = warp.thread_rank() < warp.meta_group_size() ? warp_sums[warp.thread_rank()] : 0.0;
        w = cg::reduce(warp, w, cg::plus<double>());
        if (warp.thread_rank() == 0) out[blockIdx.x] = w;
    }
}

// out[i] = a * x[i] after a chain of STEPS dependent FMAs that leave x as it is (x * one + zero,
// with one = 1 and zero = -0 given at run time, so no compiler folds them): exact, and
// compute-bound while the data sits in the L2. The candidate runs 3/4 of the baseline's chain,
// so it is faster in plain hot replay and at par once both read from DRAM (issue 50 item 10).
template <int STEPS>
__device__ void chain_scale(const double* __restrict__ x, double* __restrict__ out, double a, double one,
                            double zero, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double v = x[i];
#pragma unroll
        for (int s = 0; s < STEPS; ++s) v = fma(v, one, zero);
        out[i] = a * v;
    }
}

extern "C" __global__ void chain64_f64(const double* __restrict__ x, double* __restrict__ out, double a,
                                       double one, double zero, long long n)
{
    chain_scale<64>(x, out, a, one, zero, n);
}

extern "C" __global__ void chain48_f64(const double* __restrict__ x, double* __restrict__ out, double a,
                                       double one, double zero, long long n)
{
    chain_scale<48>(x, out, a, one, zero, n);
}

// y[i] = a * y[i] in place: one read and one write of a buffer near the L2's size.
extern "C" __global__ void scale_in_place_f64(double* __restrict__ y, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = a * y[i];
}
