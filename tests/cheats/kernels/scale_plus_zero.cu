// Cheat: out = a * x + 0.0, exact for every input but -0.0 (whose product -0.0 becomes +0.0),
// under an exact tolerance that includes the sign of zero.
extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + 0.0;
}
