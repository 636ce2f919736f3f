// The honest kernel of the cheats suite under the runner's internal prefix: out[i] = a * x[i].
// The runner must time it like any other kernel (its own are known by function, not by name).
extern "C" __global__ void kg_scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i];
}
