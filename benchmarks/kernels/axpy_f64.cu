// axpy_f64: y[i] = a * x[i] + y[i] for i < n, grid-stride loop.
// The CUDA baseline of case axpy_f64 (benchmarks/cases.toml).
extern "C" __global__ void axpy_f64(const double* __restrict__ x, double* __restrict__ y, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a * x[i] + y[i];
    }
}
