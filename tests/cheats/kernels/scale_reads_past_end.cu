// Cheat (or accident): out[i] = a * x[i] + 0.0 * x[i + 1], which reads one element past the end
// of x at i = n - 1. Inside the allocation's padding such a read goes unseen; the gate's guard
// band there holds a NaN, and 0.0 * NaN is NaN.
extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + 0.0 * x[i + 1];
}
