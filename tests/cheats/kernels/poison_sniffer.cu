// Cheat (issue 30, class 2): tells kernelgap's timing poison from real data. It skips element i
// when out[i] holds one byte repeated (a memset poison) other than the correctness gate's two
// (all-ones and 0x5A), and computes everywhere else: the gate passes, hot replays (real data in
// the output, or the all-ones poison of the output-dependence replay) see an honest kernel, and
// cold launches, each poisoned first, do no work unless the read-backs come at guessable places.
extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long bits = (unsigned long long)__double_as_longlong(out[i]);
        bool memset_pattern = bits == (bits & 0xFFULL) * 0x0101010101010101ULL;
        bool gate = bits == 0xFFFFFFFFFFFFFFFFULL || bits == 0x5A5A5A5A5A5A5A5AULL;
        if (memset_pattern && !gate) continue;
        out[i] = a * x[i];
    }
}
