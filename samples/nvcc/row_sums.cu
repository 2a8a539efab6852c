// row_sums: out[r] = sum of row r of x (rows x cols, float32, row-major), one CTA a row.
// A kernel to instrument in an nvcc build (see trace_host.cu): a strided loop, a warp
// shuffle reduction, __syncthreads, then thread 0 adds the warps' partial sums.
extern "C" __global__ void row_sums(const float* x, float* out, int cols) {
  __shared__ float partial[32];
  const float* row = x + static_cast<size_t>(blockIdx.x) * cols;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < blockDim.x / 32; ++w) total += partial[w];
    out[blockIdx.x] = total;
  }
}
