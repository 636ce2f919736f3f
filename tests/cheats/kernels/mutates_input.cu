// Broken: the right output, but the input is used as scratch space (overwritten with the
// output), in a case that declares x an input and no reset.
extern "C" __global__ void scale_f64(double* x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double y = a * x[i];
        out[i] = y;
        x[i] = y;
    }
}
