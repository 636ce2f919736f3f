// Cheat (issue 30, class 1b): does the work on every K-th launch only, counted per block in a
// __device__ array; K = 8 divides a hot graph of 1000 launches and every cold batch (a multiple
// of 8), so the launch before a read-back at the end of a batch can be one that works. Where it
// sees the correctness gate's poison it always works, so the gate passes. Hot audits read back
// a launch chosen at random, which mostly left another input set's answer; cold launches, with
// the counter restored to 0 and a poison drawn at random, never work.
#define MAX_BLOCKS 4224
#define K 8
__device__ unsigned launches[MAX_BLOCKS];

__device__ bool gate_poison(double v)
{
    unsigned long long bits = (unsigned long long)__double_as_longlong(v);
    return bits == 0xFFFFFFFFFFFFFFFFULL || bits == 0x5A5A5A5A5A5A5A5AULL;
}

extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    __shared__ unsigned count;
    if (threadIdx.x == 0) count = blockIdx.x < MAX_BLOCKS ? launches[blockIdx.x]++ : K - 1;
    __syncthreads();
    bool work = count % K == K - 1;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        if (work || gate_poison(out[i])) out[i] = a * x[i];
}
