// matmul_f64_naive: C = A * B for square row-major n x n matrices, one thread per element of C
// (block 16 x 16), the inner product over k in order.
extern "C" __global__ void matmul_f64_naive(const double* __restrict__ a, const double* __restrict__ b,
                                            double* __restrict__ c, long long n)
{
    long long row = (long long)blockIdx.y * blockDim.y + threadIdx.y;
    long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n) {
        return;
    }
    double sum = 0.0;
    for (long long k = 0; k < n; ++k) {
        sum += a[row * n + k] * b[k * n + col];
    }
    c[row * n + col] = sum;
}
