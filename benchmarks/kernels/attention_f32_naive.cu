// attention_f32_naive: causal single-head attention, O = softmax(Q K^T / sqrt(d), causal) V.
// f32 inputs and output, f64 arithmetic inside. One block per query row, one thread per key
// (blockDim.x == seq); the scores live in static shared memory of MAX_SEQ doubles (seq <= 1024,
// which the block size already implies). Version 2 of the case: version 1 used dynamic shared
// memory (seq doubles), which WarpForth cannot express, so the baseline now matches what it can.
#define MAX_SEQ 1024
extern "C" __global__ void attention_f32_naive(const float* __restrict__ q, const float* __restrict__ k,
                                               const float* __restrict__ v, float* __restrict__ o,
                                               long long seq, long long d)
{
    __shared__ double scores[MAX_SEQ];
    __shared__ double row_max;
    __shared__ double row_sum;
    long long query = blockIdx.x;
    long long key = threadIdx.x;
    double root_d = sqrt((double)d);

    double dot = 0.0;
    for (long long j = 0; j < d; ++j) {
        dot += (double)q[query * d + j] * (double)k[key * d + j];
    }
    scores[key] = key > query ? -1e30 : dot / root_d;
    __syncthreads();

    if (threadIdx.x == 0) {
        double m = scores[0];
        for (long long j = 1; j < seq; ++j) {
            m = scores[j] > m ? scores[j] : m;
        }
        row_max = m;
    }
    __syncthreads();

    scores[key] = exp(scores[key] - row_max);
    __syncthreads();

    if (threadIdx.x == 0) {
        double s = 0.0;
        for (long long j = 0; j < seq; ++j) {
            s += scores[j];
        }
        row_sum = s;
    }
    __syncthreads();

    scores[key] = scores[key] / row_sum;
    __syncthreads();

    for (long long j = threadIdx.x; j < d; j += blockDim.x) {
        double acc = 0.0;
        for (long long t = 0; t < seq; ++t) {
            acc += scores[t] * (double)v[t * d + j];
        }
        o[query * d + j] = (float)acc;
    }
}
