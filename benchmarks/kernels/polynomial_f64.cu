// polynomial_f64: y[i] = p(x[i]) for a fixed polynomial of degree `degree` (coefficients c[0] is
// the leading one), evaluated with Horner's rule: pure f64 arithmetic, grid-stride loop.
extern "C" __global__ void polynomial_f64(const double* __restrict__ x, const double* __restrict__ c,
                                          double* __restrict__ y, long long degree, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double xi = x[i];
        double acc = c[0];
        for (long long k = 1; k <= degree; ++k) {
            acc = acc * xi + c[k];
        }
        y[i] = acc;
    }
}
