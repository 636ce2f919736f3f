// matmul_f64_tiled: C = A * B for square row-major n x n matrices with 16 x 16 shared-memory tiles
// (block 16 x 16, one thread per element of C); tiles past the edge are padded with zeros.
#define TILE 16

extern "C" __global__ void matmul_f64_tiled(const double* __restrict__ a, const double* __restrict__ b,
                                            double* __restrict__ c, long long n)
{
    __shared__ double ta[TILE][TILE];
    __shared__ double tb[TILE][TILE];
    long long row = (long long)blockIdx.y * TILE + threadIdx.y;
    long long col = (long long)blockIdx.x * TILE + threadIdx.x;
    double sum = 0.0;
    for (long long t = 0; t < n; t += TILE) {
        long long ka = t + threadIdx.x;
        long long kb = t + threadIdx.y;
        ta[threadIdx.y][threadIdx.x] = (row < n && ka < n) ? a[row * n + ka] : 0.0;
        tb[threadIdx.y][threadIdx.x] = (kb < n && col < n) ? b[kb * n + col] : 0.0;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) {
            sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        }
        __syncthreads();
    }
    if (row < n && col < n) {
        c[row * n + col] = sum;
    }
}
