// Honest control (issue 30): reads factors from an initialised __device__ table (ones, so the
// answer is exactly a * x): the module state restored before a launch must be the table as
// loaded, not zeros.
__device__ double factors[4] = {1.0, 1.0, 1.0, 1.0};

extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = (a * x[i]) * factors[i & 3];
}
