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

// Class 4, a cheat: launched within 20 us of the previous launch's end (back to back, as in hot
// replay) it is right only for the main distribution (x clamped to [-4, 4]); launched alone (the
// gate, the edges set) it is exact. The last block of a launch records its end, so every block
// of one launch judges by the same previous end.
__device__ unsigned long long kg_cadence_last_end;
__device__ unsigned int kg_cadence_done;

extern "C" __global__ void scale_cadence_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    unsigned long long last = *(volatile unsigned long long*)&kg_cadence_last_end;
    bool back_to_back = last != 0 && now > last && now - last < 20000ull;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double v = x[i];
        out[i] = a * (back_to_back ? fmin(fmax(v, -4.0), 4.0) : v);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&kg_cadence_done, 1u) == gridDim.x - 1) {
            unsigned long long end;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
            kg_cadence_last_end = end;
            kg_cadence_done = 0;
            __threadfence();
        }
    }
}

// Class 7, a cheat (or a plausible bug): adds what its shared scratch holds before it writes it,
// right wherever that memory happens to be zero. The gate poisons every SM's shared memory first.
extern "C" __global__ void scale_shared_uninit_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    __shared__ double scratch[256];
    double leftover = ((volatile double*)scratch)[threadIdx.x];
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + leftover;
    ((volatile double*)scratch)[threadIdx.x] = 0.0;
}

// Class 7, the device heap: adds what a block's `malloc`ed scratch holds before it writes it,
// right wherever the heap happens to hold zeros. The gate poisons the heap first.
extern "C" __global__ void scale_heap_uninit_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    __shared__ double* scratch;
    if (threadIdx.x == 0) scratch = (double*)malloc(blockDim.x * sizeof(double));
    __syncthreads();
    double leftover = scratch ? ((volatile double*)scratch)[threadIdx.x] : 0.0;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + leftover;
    __syncthreads();
    if (threadIdx.x == 0 && scratch) free(scratch);
}

// An honest control: the same heap scratch written before it is read.
extern "C" __global__ void scale_heap_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    __shared__ double* scratch;
    if (threadIdx.x == 0) scratch = (double*)malloc(blockDim.x * sizeof(double));
    __syncthreads();
    if (scratch) ((volatile double*)scratch)[threadIdx.x] = a;
    __syncthreads();
    double factor = scratch ? ((volatile double*)scratch)[threadIdx.x] : a;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = factor * x[i];
    __syncthreads();
    if (threadIdx.x == 0 && scratch) free(scratch);
}

// The honest f32 square root: NaN for a negative x.
extern "C" __global__ void sqrt_f32(const float* __restrict__ x, float* __restrict__ out, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = sqrtf(x[i]);
}

// A cheat on the timed-size check's poison: above the check size it leaves every element whose
// answer is NaN unwritten. Under one all-ones poison for every launch (NaN as f32) the leftover
// matched the baseline's NaN; each launch now has a finite poison of its own.
extern "C" __global__ void sqrt_skip_nan_f32(const float* __restrict__ x, float* __restrict__ out, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i];
        if (n > 65536 && v < 0.0f) continue;
        out[i] = sqrtf(v);
    }
}
