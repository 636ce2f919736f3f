// The third pass's PTX cheats (issue 50) and their honest twins: out[i] = a * x[i], grid-stride.

// Class 5, a cheat: exact at the check size, off by 1.5 x the case's rtol above it, where the
// timed size was compared only with the baseline at twice the tolerance.
extern "C" __global__ void scale_drift_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    double drift = n > 65536 ? 1.0 + 1.5e-9 : 1.0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] * drift;
}

// The honest f32 scale.
extern "C" __global__ void scale_f32(const float* __restrict__ x, float* __restrict__ out, float a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i];
}

// Class 6, a cheat: the largest finite value where the answer overflows to an infinity
// (|FLT_MAX - inf| = inf <= rtol * inf held).
extern "C" __global__ void scale_inf_as_max_f32(const float* __restrict__ x, float* __restrict__ out, float a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float r = a * x[i];
        out[i] = isinf(r) ? copysignf(3.402823466e38f, r) : r;
    }
}

// An honest control: reads %globaltimer for diagnostics (kept in a .global), computes exactly.
__device__ unsigned long long kg_third_last_ns;

extern "C" __global__ void scale_timer_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (blockIdx.x == 0 && threadIdx.x == 0) kg_third_last_ns = now;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i];
}
