// Planted race: the tree's barriers stop below width 128 and the rest runs "warp-synchronously"
// through a volatile pointer, with no __syncwarp and no __syncthreads. At width 32, warp 0 reads
// partial[32..63], which warp 1 wrote at width 64: a cross-warp read-after-write hazard that
// usually still gives the right sum. Only racecheck sees it.
#define BLOCK 256

extern "C" __global__ void block_sum_racy(const double* __restrict__ x, double* __restrict__ out, long long n)
{
    __shared__ double partial[BLOCK];
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0;
    __syncthreads();
    if (threadIdx.x < 128) partial[threadIdx.x] += partial[threadIdx.x + 128];
    __syncthreads();
    volatile double* p = partial;
    for (int width = 64; width > 0; width /= 2) {
        if (threadIdx.x < width) p[threadIdx.x] += p[threadIdx.x + width];
    }
    if (threadIdx.x == 0) out[blockIdx.x] = p[0];
}
