// Cheat: writes zeros, which a loose enough tolerance accepts (KernelBench issue #165:
// returning zeros passed 4 of 60 level-1 problems).
extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = 0.0;
}
