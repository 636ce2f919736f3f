// Cheat (issue 30, class 1a): results cached by the inputs' content in __device__ arrays. Each
// block keys its part of the output by two input values and n, in SLOTS slots. On a hit it
// writes nothing where the output already holds a value (hot replays find the last launch's
// answer there) and copies the cached answer where it sees the correctness gate's poison (the
// gate's second run, on the same inputs, passes). A hot replay over several input sets hits
// every launch and leaves the previous launch's answer; cold launches, with the module state
// restored, always miss and do the work.
#define MAX_BLOCKS 4224
#define SLOTS 4
#define MAX_N (1 << 18)
__device__ unsigned long long slot_key[MAX_BLOCKS][SLOTS];
__device__ unsigned next_slot[MAX_BLOCKS];
__device__ double cached[SLOTS][MAX_N];

__device__ bool gate_poison(double v)
{
    unsigned long long bits = (unsigned long long)__double_as_longlong(v);
    return bits == 0xFFFFFFFFFFFFFFFFULL || bits == 0x5A5A5A5A5A5A5A5AULL;
}

extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (n > MAX_N || blockIdx.x >= MAX_BLOCKS) {
        for (long long i = first; i < n; i += stride) out[i] = a * x[i];
        return;
    }
    __shared__ int hit, slot;
    if (threadIdx.x == 0) {
        long long mine = (long long)blockIdx.x * blockDim.x < n ? (long long)blockIdx.x * blockDim.x : n - 1;
        unsigned long long key = ((unsigned long long)__double_as_longlong(x[mine]) * 0x9E3779B97F4A7C15ULL)
            ^ (unsigned long long)__double_as_longlong(x[n - 1]) ^ ((unsigned long long)n << 40) ^ 1ULL;
        hit = -1;
        for (int s = 0; s < SLOTS; ++s)
            if (slot_key[blockIdx.x][s] == key) hit = s;
        if (hit < 0) {
            slot = next_slot[blockIdx.x]++ % SLOTS;
            slot_key[blockIdx.x][slot] = key;
        }
    }
    __syncthreads();
    for (long long i = first; i < n; i += stride) {
        if (hit >= 0) {
            if (gate_poison(out[i])) out[i] = cached[hit][i];
        } else {
            double v = a * x[i];
            out[i] = v;
            cached[slot][i] = v;
        }
    }
}
