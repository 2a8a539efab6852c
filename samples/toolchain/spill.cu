// A kernel that spills: 48 accumulators live across a loop, at most 32 registers
// (__maxnreg__), and a local array indexed at run time. samples/toolchain/spill.ptx is
//   nvcc -arch=sm_90a -ptx -lineinfo spill.cu
// with the .file path made relative.
extern "C" __global__ void __maxnreg__(32) spill(const float* __restrict__ in, float* out, int n)
{
    float acc[48];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = in[t + i * n];
    for (int j = 0; j < n; ++j) {
#pragma unroll
        for (int i = 0; i < 48; ++i) acc[i] = acc[i] * acc[(i + 7) % 48] + in[j];
    }
    float s = 0;
#pragma unroll
    for (int i = 0; i < 48; ++i) s += acc[i];
    out[t] = s;
}

extern "C" __global__ void local_array(const float* in, float* out, int k, int n)
{
    float buf[64];
    int t = threadIdx.x;
    for (int i = 0; i < 64; ++i) buf[(t * 7 + i * k) & 63] = in[t + i];
    float s = 0;
    for (int i = 0; i < n; ++i) s += buf[(i * k + t) & 63];
    out[t] = s;
}
