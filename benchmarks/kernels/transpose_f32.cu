// transpose_f32: out (cols x rows) = transpose of in (rows x cols), row-major, through a 32 x 33
// shared-memory tile so both the read and the write are coalesced; block 32 x 8, each thread moves
// 4 elements; tiles past the edges are bounds-checked.
#define TILE 32
#define ROWS 8

extern "C" __global__ void transpose_f32(const float* __restrict__ in, float* __restrict__ out, long long rows,
                                         long long cols)
{
    __shared__ float tile[TILE][TILE + 1];
    long long x = (long long)blockIdx.x * TILE + threadIdx.x;
    long long y = (long long)blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (x < cols && y + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
        }
    }
    __syncthreads();
    x = (long long)blockIdx.y * TILE + threadIdx.x;
    y = (long long)blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (x < rows && y + j < cols) {
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
