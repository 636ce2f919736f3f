// Planted fault: the thread of the last element also reads x[n], one element past the end. The
// value only enters as 0 * x[n], so the answer is usually right; memcheck sees the read.
extern "C" __global__ void scale_past_end(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double past = i == n - 1 ? x[i + 1] : 0.0;
        out[i] = a * x[i] + 0.0 * past;
    }
}
