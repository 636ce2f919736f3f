// scale_i64: y[i] = k * x[i] + c for i < n (int64, wrapping), grid-stride loop.
// Address arithmetic and 64-bit global loads/stores; no floating point.
extern "C" __global__ void scale_i64(const long long* __restrict__ x, long long* __restrict__ y, long long k,
                                     long long c, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = k * x[i] + c;
    }
}
