// Honest control (issue 30): keeps a launch counter in a __device__ variable and still does the
// whole work on every launch; restoring its module state must not change its answer or its time.
__device__ unsigned long long launched;

extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launched, 1ULL);
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i];
}
