// Cheat: an f32 axpy computed through bfloat16 intermediates (x, y and a rounded to bf16, one
// bf16 FMA, widened back).
#include <cuda_bf16.h>

extern "C" __global__ void axpy_f32(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out, float a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    __nv_bfloat16 ab = __float2bfloat16_rn(a);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = __bfloat162float(__hfma(ab, __float2bfloat16_rn(x[i]), __float2bfloat16_rn(y[i])));
}
