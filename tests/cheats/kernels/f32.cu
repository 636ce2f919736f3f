// Cheat: an f64 case computed in f32 (a quarter of the arithmetic cost, and a compiler's or a
// port's plausible accident).
extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = (double)((float)a * (float)x[i]);
}
