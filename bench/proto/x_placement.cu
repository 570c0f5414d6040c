//! Probe: does where the gathered vector `x` lives change a gather-bound SpMV's time? One
//! matrix (16 random, skewed columns per row), the same kernel, `x` in buffers allocated
//! several ways (cudaMalloc, the stream-ordered pool, physical memory mapped with the
//! recommended and the 2 MiB granularity, and at offsets inside a larger buffer); each timed
//! several times, in two passes of opposite order, so drift shows as a difference between
//! passes rather than between buffers.
//!
//! Build: nvcc -O3 -arch=sm_90 -o x_placement x_placement.cu -lcuda
//! Run:   ./x_placement [rows] [reps]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                     \
  do {                                                                            \
    cudaError_t e = (x);                                                          \
    if (e != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)
#define CU(x)                                                      \
  do {                                                             \
    CUresult r = (x);                                              \
    if (r != CUDA_SUCCESS) {                                       \
      fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, r); \
      exit(1);                                                     \
    }                                                              \
  } while (0)

constexpr int kPerRow = 16;

__device__ unsigned hash(unsigned long long i) {
  unsigned long long z = i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (unsigned)((z ^ (z >> 31)) >> 32);
}

// Columns skewed towards low indices (u^3), as R-MAT's are: a hot head that stays in L2 and a
// long tail that does not.
__global__ void make(unsigned* col, float* val, long long nnz, unsigned n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nnz;
       i += (long long)gridDim.x * blockDim.x) {
    double u = hash(i) * (1.0 / 4294967296.0);
    col[i] = (unsigned)(u * u * u * n);
    val[i] = 1.0f + (hash(i + nnz) & 255) * (1.0f / 256);
  }
}

__global__ void fill(float* x, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = (hash(i + 77) & 1023) * (1.0f / 1024);
}

// Sixteen lanes per row: coalesced loads of the row's columns and values, a gather of x each,
// a shuffle reduction.
__global__ void spmv(const unsigned* __restrict__ col, const float* __restrict__ val,
                     const float* __restrict__ x, float* __restrict__ y, unsigned rows) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned row = t / kPerRow, lane = t % kPerRow;
  if (row >= rows) return;
  size_t i = (size_t)row * kPerRow + lane;
  float s = __ldcs(&val[i]) * __ldg(&x[__ldcs(&col[i])]);
  for (int o = kPerRow / 2; o > 0; o /= 2) s += __shfl_down_sync(0xffffffff, s, o, kPerRow);
  if (lane == 0) y[row] = s;
}

struct Placement {
  std::string name;
  float* x;
};

static float time_one(const unsigned* col, const float* val, const float* x, float* y,
                      unsigned rows, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  unsigned threads = rows * kPerRow, block = 256;
  spmv<<<(threads + block - 1) / block, block>>>(col, val, x, y, rows);
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a));
    spmv<<<(threads + block - 1) / block, block>>>(col, val, x, y, rows);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000);
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

// Physical memory mapped at a fresh address with `granularity` (the driver's minimum or
// recommended one).
static float* mapped(size_t bytes, bool recommended) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t g;
  CU(cuMemGetAllocationGranularity(
      &g, &prop,
      recommended ? CU_MEM_ALLOC_GRANULARITY_RECOMMENDED : CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t size = (bytes + g - 1) / g * g;
  CUdeviceptr p;
  CU(cuMemAddressReserve(&p, size, g, 0, 0));
  CUmemGenericAllocationHandle h;
  CU(cuMemCreate(&h, size, &prop, 0));
  CU(cuMemMap(p, size, 0, h, 0));
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(p, size, &acc, 1));
  printf("granularity %s: %zu bytes\n", recommended ? "recommended" : "minimum", g);
  return (float*)p;
}

int main(int argc, char** argv) {
  unsigned rows = argc > 1 ? atoi(argv[1]) : 8388608;
  int reps = argc > 2 ? atoi(argv[2]) : 15;
  long long nnz = (long long)rows * kPerRow;
  size_t xb = (size_t)rows * sizeof(float);
  CU(cuInit(0));
  CK(cudaFree(0));
  unsigned* col;
  float *val, *y;
  CK(cudaMalloc(&col, nnz * sizeof(unsigned)));
  CK(cudaMalloc(&val, nnz * sizeof(float)));
  CK(cudaMalloc(&y, xb));
  make<<<4096, 256>>>(col, val, nnz, rows);
  std::vector<Placement> xs;
  for (int i = 0; i < 3; ++i) {
    float* p;
    CK(cudaMalloc(&p, xb));
    xs.push_back({"cudaMalloc #" + std::to_string(i), p});
  }
  for (int i = 0; i < 3; ++i) {
    float* p;
    CK(cudaMallocAsync(&p, xb, 0));
    xs.push_back({"cudaMallocAsync #" + std::to_string(i), p});
  }
  for (int i = 0; i < 2; ++i) xs.push_back({"mapped, minimum #" + std::to_string(i), mapped(xb, false)});
  for (int i = 0; i < 2; ++i)
    xs.push_back({"mapped, recommended #" + std::to_string(i), mapped(xb, true)});
  // The pool after a program's life: large and odd-sized buffers allocated and some freed, as
  // a benchmark's matrices, outputs and temporaries leave it, then x allocated in what is left.
  {
    std::vector<void*> keep, drop;
    size_t sizes[] = {xb * 16, xb + 4096, 3 * xb / 7, 12345678, xb, 1 << 20, 777777, xb * 2 + 65536};
    int n = 0;
    for (int round = 0; round < 3; ++round)
      for (size_t s : sizes) {
        void* p;
        CK(cudaMallocAsync(&p, s, 0));
        (n++ % 2 ? drop : keep).push_back(p);
      }
    for (void* p : drop) CK(cudaFreeAsync(p, 0));
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < 4; ++i) {
      float* p;
      CK(cudaMallocAsync(&p, xb, 0));
      xs.push_back({"cudaMallocAsync, used pool #" + std::to_string(i), p});
      void* gap;
      CK(cudaMallocAsync(&gap, 3 * 65536 + i * 8192, 0));
    }
  }
  float* big;
  CK(cudaMalloc(&big, xb + (8 << 20)));
  for (size_t off : {size_t(0), size_t(4096), size_t(65536), size_t(1 << 20), size_t(3 << 20)})
    xs.push_back({"cudaMalloc + " + std::to_string(off) + " B", big + off / sizeof(float)});
  for (auto& p : xs) fill<<<4096, 256>>>(p.x, rows);
  CK(cudaDeviceSynchronize());
  printf("rows %u, nnz %lld, x %.1f MB\n", rows, nnz, xb / 1e6);
  std::vector<std::vector<float>> t(xs.size());
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < xs.size(); ++k) {
      size_t i = pass == 0 ? k : xs.size() - 1 - k;
      t[i].push_back(time_one(col, val, xs[i].x, y, rows, reps));
    }
  }
  for (size_t i = 0; i < xs.size(); ++i)
    printf("%-32s x at %#14llx  %8.1f us  %8.1f us\n", xs[i].name.c_str(),
           (unsigned long long)xs[i].x, t[i][0], t[i][1]);
  return 0;
}
