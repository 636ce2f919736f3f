// Cheat: out = a * x * (x / x): x / x is exactly 1 for every finite non-zero x, NaN for a zero
// of either sign (a normalisation that never met a zero).
extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] * (x[i] / x[i]);
}
