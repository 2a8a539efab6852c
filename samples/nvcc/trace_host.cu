// The host side of an instrumented nvcc build: load the cubin that ptxkit-ptxas made,
// point the kernel's buffer variable at a zero-filled buffer, launch, and write the
// buffer to a file for `ptxkit trace`. The recipe (docs/instrument.md, section 4):
//
//   nvcc -arch=sm_90a -ptx row_sums.cu -o row_sums.ptx
//   PTXKIT_PASSES="timeline --buffer global --points function --points barrier --capacity 256" \
//       ptxkit-ptxas -arch=sm_90a row_sums.ptx -o row_sums.cubin   # and row_sums.cubin.ptxkit.json
//   nvcc -arch=sm_90a trace_host.cu -o trace_host
//   ./trace_host row_sums.cubin 256 row_sums.trace.bin           # 256: the --capacity given
//   ptxkit trace row_sums.trace.bin --layout row_sums.cubin.ptxkit.json --chrome row_sums.json
//
// With `count` instead of `timeline`, the buffer is (rows of) one u64 per counter: size it
// from the layout ("counters" x 8 bytes per CTA), and pass 0 as the capacity argument.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t status = (call);                                                      \
    if (status != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                   cudaGetErrorString(status));                                       \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s KERNEL.cubin CAPACITY TRACE.bin\n", argv[0]);
    return 2;
  }
  const int rows = 512, cols = 4096, threads = 256;
  const size_t capacity = std::strtoul(argv[2], nullptr, 10);

  cudaLibrary_t library;
  CHECK(cudaLibraryLoadFromFile(&library, argv[1], nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel;
  CHECK(cudaLibraryGetKernel(&kernel, library, "row_sums"));

  // 1. The buffer: one region of 32 + capacity x 8 bytes per CTA, zero-filled.
  const size_t trace_bytes = static_cast<size_t>(rows) * (32 + capacity * 8);
  void* trace = nullptr;
  CHECK(cudaMalloc(&trace, trace_bytes));
  CHECK(cudaMemset(trace, 0, trace_bytes));
  // 2. Its address into the variable the pass declared: ptxkit_trace_<kernel>.
  void* variable = nullptr;
  size_t variable_bytes = 0;
  CHECK(cudaLibraryGetGlobal(&variable, &variable_bytes, library, "ptxkit_trace_row_sums"));
  CHECK(cudaMemcpy(variable, &trace, sizeof trace, cudaMemcpyHostToDevice));

  std::vector<float> x(static_cast<size_t>(rows) * cols), out(rows);
  std::mt19937 random(std::random_device{}());
  std::normal_distribution<float> normal;
  for (float& value : x) value = normal(random);
  float *device_x = nullptr, *device_out = nullptr;
  CHECK(cudaMalloc(&device_x, x.size() * sizeof(float)));
  CHECK(cudaMalloc(&device_out, out.size() * sizeof(float)));
  CHECK(cudaMemcpy(device_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  int columns = cols;
  void* arguments[] = {&device_x, &device_out, &columns};  // the kernel's own arguments, as always
  CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(rows), dim3(threads), arguments, 0, nullptr));
  CHECK(cudaDeviceSynchronize());

  // 3. The buffer back to the host, into a file for `ptxkit trace`.
  std::vector<unsigned char> bytes(trace_bytes);
  CHECK(cudaMemcpy(bytes.data(), trace, trace_bytes, cudaMemcpyDeviceToHost));
  FILE* file = std::fopen(argv[3], "wb");
  if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
    std::perror(argv[3]);
    return 1;
  }
  std::fclose(file);

  CHECK(cudaMemcpy(out.data(), device_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double worst = 0.0;
  for (int r = 0; r < rows; ++r) {
    double exact = 0.0, magnitude = 0.0;
    for (int c = 0; c < cols; ++c) {
      exact += x[static_cast<size_t>(r) * cols + c];
      magnitude += std::fabs(x[static_cast<size_t>(r) * cols + c]);
    }
    worst = std::fmax(worst, std::fabs(out[r] - exact) / magnitude);
  }
  std::printf("rows %d, largest error %.3g of the sum of |x|\n", rows, worst);
  return worst < 1e-5 ? 0 : 1;
}
