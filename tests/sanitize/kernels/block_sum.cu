// Honest control: block b sums x[b*256 .. b*256+255] as a tree in shared memory, a barrier
// between levels, and writes out[b].
#define BLOCK 256

extern "C" __global__ void block_sum(const double* __restrict__ x, double* __restrict__ out, long long n)
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
