// The honest integer kernel: out[i] = x[i] / 4, C division (truncates toward zero).
extern "C" __global__ void div4_i64(const long long* __restrict__ x, long long* __restrict__ out, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = x[i] / 4;
}
