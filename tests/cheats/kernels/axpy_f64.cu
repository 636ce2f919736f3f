// The honest f64 axpy of the gate cheats: out[i] = a * x[i] + y[i] in f64 (contracted into an
// FMA), a grid-stride loop.
extern "C" __global__ void axpy_f64(const double* __restrict__ x, const double* __restrict__ y, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + y[i];
}
