// Kernels for the runner's GPU tests (tests/runner/execution/test_suite_run_gpu.py): one correct kernel and
// planted faults. out[i] = a * x[i] for i < n, grid-stride loops.
#define GRID_STRIDE(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    GRID_STRIDE(i, n) out[i] = a * x[i];
}

// The same result with twice the memory traffic: two full passes, kept apart by a compiler barrier.
extern "C" __global__ void scale_f64_twice(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    GRID_STRIDE(i, n) out[i] = a * x[i];
    asm volatile("" ::: "memory");
    GRID_STRIDE(i, n) out[i] = a * x[i];
}

// Planted fault: writes far outside the buffer (CUDA_ERROR_ILLEGAL_ADDRESS).
extern "C" __global__ void scale_f64_oob(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    GRID_STRIDE(i, n) out[i + (1LL << 40)] = a * x[i];
}

// Planted hang: waits for an input value that never comes.
extern "C" __global__ void scale_f64_hang(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    volatile const double* vx = x;
    while (vx[0] < 1e300) {
    }
    GRID_STRIDE(i, n) out[i] = a * x[i];
}

// Planted bug: leaves every odd element unwritten.
extern "C" __global__ void scale_f64_half(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    GRID_STRIDE(i, n) if ((i & 1) == 0) out[i] = a * x[i];
}

// Planted bug: right output, but scribbles on its input.
extern "C" __global__ void scale_f64_writes_input(double* x, double* __restrict__ out, double a, long long n)
{
    GRID_STRIDE(i, n) { out[i] = a * x[i]; x[i] = 0.0; }
}

// Writes to stdout from the kernel (at the correctness size only): must not disturb the runner.
extern "C" __global__ void scale_f64_printf(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    if (n < 10000 && blockIdx.x == 0 && threadIdx.x == 0) {
        printf("{\"event\": \"result\", \"record\": {\"status\": \"forged by printf\"}}\n");
    }
    GRID_STRIDE(i, n) out[i] = a * x[i];
}

// Planted bug: an off-by-one bound writes one element past the end of `out`.
extern "C" __global__ void scale_f64_past_end(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    GRID_STRIDE(i, n + 1) out[i] = a * (i < n ? x[i] : 0.0);
}

// Planted bug: right at the correctness size, wrong from 2^20 elements on (as a miscompiled
// loop that only runs at large sizes would be).
extern "C" __global__ void scale_f64_large_only(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    GRID_STRIDE(i, n) out[i] = (n >= (1LL << 20) && i == n - 7) ? 0.0 : a * x[i];
}
