// Hand-written SpMM kernels (C = A·B, A CSR f32, B and C row-major n×k) against cuSPARSE on
// generated matrices of the shapes lb-bench's medium corpus uses: a probe of which mapping the
// code generator should emit, not part of lb.
//
//   nvcc -O3 -arch=sm_90 -o spmm_proto spmm_proto.cu -lcusparse && ./spmm_proto
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e = (x);                                                        \
    if (e != cudaSuccess) {                                                     \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)
#define CS(x)                                                    \
  do {                                                           \
    cusparseStatus_t s = (x);                                    \
    if (s != CUSPARSE_STATUS_SUCCESS) {                          \
      fprintf(stderr, "%s:%d cusparse %d\n", __FILE__, __LINE__, \
              (int)s);                                           \
      exit(1);                                                   \
    }                                                            \
  } while (0)

struct Csr {
  std::string name;
  int rows = 0, cols = 0;
  std::vector<int> off, col;
  std::vector<float> val;
  long nnz() const { return (long)col.size(); }
};

static Csr from_rows(const std::string& name, int cols, std::vector<std::vector<int>>& rows,
                     std::mt19937_64& rng) {
  Csr a;
  a.name = name;
  a.rows = (int)rows.size();
  a.cols = cols;
  a.off.push_back(0);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& r : rows) {
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    for (int c : r) {
      a.col.push_back(c);
      a.val.push_back(u(rng));
    }
    a.off.push_back((int)a.col.size());
  }
  return a;
}

static Csr rmat(int scale, int ef, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  int n = 1 << scale;
  std::vector<std::vector<int>> rows(n);
  for (long e = 0; e < (long)n * ef; e++) {
    int r = 0, c = 0;
    for (int l = 0; l < scale; l++) {
      double p = u(rng);
      int dr = 0, dc = 0;
      if (p < 0.57) {
      } else if (p < 0.76) {
        dc = 1;
      } else if (p < 0.95) {
        dr = 1;
      } else {
        dr = dc = 1;
      }
      r = r * 2 + dr;
      c = c * 2 + dc;
    }
    rows[r].push_back(c);
  }
  return from_rows("rmat-" + std::to_string(scale) + "-ef" + std::to_string(ef), n, rows, rng);
}

static Csr power_law(int n, double mean, double sd, int maxlen, uint64_t seed) {
  std::mt19937_64 rng(seed);
  double s2 = std::log(1 + (sd / mean) * (sd / mean)), mu = std::log(mean) - s2 / 2;
  std::normal_distribution<double> z(0, 1);
  std::uniform_int_distribution<int> col(0, n - 1);
  std::vector<std::vector<int>> rows(n);
  for (int i = 0; i < n; i++) {
    long len = std::min<long>(maxlen, std::lround(std::exp(mu + std::sqrt(s2) * z(rng))));
    for (long j = 0; j < len; j++) rows[i].push_back(col(rng));
  }
  return from_rows("power_law-" + std::to_string(n), n, rows, rng);
}

static Csr regular(int n, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> col(0, n - 1);
  std::vector<std::vector<int>> rows(n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < k; j++) rows[i].push_back(col(rng));
  return from_rows("regular-" + std::to_string(n) + "x" + std::to_string(k), n, rows, rng);
}

static Csr stencil7(int m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int n = m * m * m;
  std::vector<std::vector<int>> rows(n);
  for (int z = 0; z < m; z++)
    for (int y = 0; y < m; y++)
      for (int x = 0; x < m; x++) {
        int i = (z * m + y) * m + x;
        auto& r = rows[i];
        r.push_back(i);
        if (x > 0) r.push_back(i - 1);
        if (x + 1 < m) r.push_back(i + 1);
        if (y > 0) r.push_back(i - m);
        if (y + 1 < m) r.push_back(i + m);
        if (z > 0) r.push_back(i - m * m);
        if (z + 1 < m) r.push_back(i + m * m);
      }
  return from_rows("stencil7-" + std::to_string(m), n, rows, rng);
}

// ---- kernels -----------------------------------------------------------------------------

__device__ __forceinline__ void fma4(float4& a, float v, float4 b) {
  a.x = fmaf(v, b.x, a.x);
  a.y = fmaf(v, b.y, a.y);
  a.z = fmaf(v, b.z, a.z);
  a.w = fmaf(v, b.w, a.w);
}

// Scalar lanes strided by TPR (lb's current layout): thread owns lanes g, g+G, g+2G, g+3G.
template <int G>
__global__ void row_scalar(int rows, int k, const int* __restrict__ off, const int* __restrict__ col,
                           const float* __restrict__ val, const float* __restrict__ B,
                           float* __restrict__ C) {
  int g = threadIdx.x % G;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x / G;
  for (long row = t / G; row < rows; row += stride) {
    int b = __ldg(off + row), e = __ldg(off + row + 1);
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (int j = b; j < e; j++) {
      const float* br = B + (size_t)__ldg(col + j) * k + g;
      float v = __ldg(val + j);
      a0 = fmaf(v, __ldg(br), a0);
      a1 = fmaf(v, __ldg(br + G), a1);
      a2 = fmaf(v, __ldg(br + 2 * G), a2);
      a3 = fmaf(v, __ldg(br + 3 * G), a3);
    }
    float* cr = C + (size_t)row * k + g;
    cr[0] = a0;
    cr[G] = a1;
    cr[2 * G] = a2;
    cr[3 * G] = a3;
  }
}

// float4 lanes: G = k / 4 threads per row, thread g owns lanes 4g..4g+3. U atoms per trip.
template <int G, int U>
__global__ void row_vec4(int rows, int k, const int* __restrict__ off, const int* __restrict__ col,
                         const float* __restrict__ val, const float* __restrict__ B,
                         float* __restrict__ C) {
  int g = threadIdx.x % G;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x / G;
  for (long row = t / G; row < rows; row += stride) {
    int b = __ldg(off + row), e = __ldg(off + row + 1);
    float4 acc = make_float4(0, 0, 0, 0);
    int j = b;
    for (; j + U <= e; j += U) {
      int c[U];
      float v[U];
      float4 x[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        c[u] = __ldg(col + j + u);
        v[u] = __ldg(val + j + u);
      }
#pragma unroll
      for (int u = 0; u < U; u++) x[u] = __ldg((const float4*)(B + (size_t)c[u] * k) + g);
#pragma unroll
      for (int u = 0; u < U; u++) fma4(acc, v[u], x[u]);
    }
    for (; j < e; j++) fma4(acc, __ldg(val + j), __ldg((const float4*)(B + (size_t)__ldg(col + j) * k) + g));
    ((float4*)(C + (size_t)row * k))[g] = acc;
  }
}

// Segments of at most S atoms (a row longer than S is cut into several); segments of a cut row
// add into C with atomics (C zeroed first), the others store.
template <int G, int U>
__global__ void seg_vec4(int segs, int k, const int* __restrict__ seg_row,
                         const int* __restrict__ seg_begin, const int* __restrict__ seg_end,
                         const int* __restrict__ col, const float* __restrict__ val,
                         const float* __restrict__ B, float* __restrict__ C) {
  int g = threadIdx.x % G;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x / G;
  for (long s = t / G; s < segs; s += stride) {
    int rowc = __ldg(seg_row + s);
    int row = rowc & 0x7fffffff;
    int b = __ldg(seg_begin + s), e = __ldg(seg_end + s);
    float4 acc = make_float4(0, 0, 0, 0);
    int j = b;
    for (; j + U <= e; j += U) {
      int c[U];
      float v[U];
      float4 x[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        c[u] = __ldg(col + j + u);
        v[u] = __ldg(val + j + u);
      }
#pragma unroll
      for (int u = 0; u < U; u++) x[u] = __ldg((const float4*)(B + (size_t)c[u] * k) + g);
#pragma unroll
      for (int u = 0; u < U; u++) fma4(acc, v[u], x[u]);
    }
    for (; j < e; j++) fma4(acc, __ldg(val + j), __ldg((const float4*)(B + (size_t)__ldg(col + j) * k) + g));
    float4* cr = (float4*)(C + (size_t)row * k) + g;
    if (rowc < 0) {
      float* p = (float*)cr;
      atomicAdd(p, acc.x);
      atomicAdd(p + 1, acc.y);
      atomicAdd(p + 2, acc.z);
      atomicAdd(p + 3, acc.w);
    } else {
      *cr = acc;
    }
  }
}


// Segments of at most S atoms taken by a whole warp: its 32 / G groups split the segment's atoms
// round robin and meet by shuffles (a fixed tree); cut rows add into C with atomics.
template <int G, int U>
__global__ void seg_warp_vec4(int segs, int k, const int* __restrict__ seg_row,
                              const int* __restrict__ seg_begin, const int* __restrict__ seg_end,
                              const int* __restrict__ col, const float* __restrict__ val,
                              const float* __restrict__ B, float* __restrict__ C) {
  constexpr int NG = 32 / G;
  int g = threadIdx.x % G, sub = (threadIdx.x % 32) / G;
  long w = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  long warps = (long)gridDim.x * blockDim.x / 32;
  for (long s = w; s < segs; s += warps) {
    int rowc = __ldg(seg_row + s);
    int row = rowc & 0x7fffffff;
    int b = __ldg(seg_begin + s), e = __ldg(seg_end + s);
    float4 acc = make_float4(0, 0, 0, 0);
    int base = b;
    for (; base + NG * U <= e; base += NG * U) {
      int j = base + sub * U;
      int c[U];
      float v[U];
      float4 x[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        c[u] = __ldg(col + j + u);
        v[u] = __ldg(val + j + u);
      }
#pragma unroll
      for (int u = 0; u < U; u++) x[u] = __ldg((const float4*)(B + (size_t)c[u] * k) + g);
#pragma unroll
      for (int u = 0; u < U; u++) fma4(acc, v[u], x[u]);
    }
    for (int t = base + sub; t < e; t += NG)
      fma4(acc, __ldg(val + t), __ldg((const float4*)(B + (size_t)__ldg(col + t) * k) + g));
#pragma unroll
    for (int d = G; d < 32; d *= 2) {
      acc.x += __shfl_xor_sync(0xffffffffu, acc.x, d);
      acc.y += __shfl_xor_sync(0xffffffffu, acc.y, d);
      acc.z += __shfl_xor_sync(0xffffffffu, acc.z, d);
      acc.w += __shfl_xor_sync(0xffffffffu, acc.w, d);
    }
    if (sub == 0) {
      float4* cr = (float4*)(C + (size_t)row * k) + g;
      if (rowc < 0) {
        float* p = (float*)cr;
        atomicAdd(p, acc.x);
        atomicAdd(p + 1, acc.y);
        atomicAdd(p + 2, acc.z);
        atomicAdd(p + 3, acc.w);
      } else {
        *cr = acc;
      }
    }
  }
}

// ---- harness -----------------------------------------------------------------------------

// Rows longer than S cut into pieces of S (cut rows flagged by the sign bit); empty rows kept.
static void segments_of(const Csr& a, int S, std::vector<int>& sr, std::vector<int>& sb,
                        std::vector<int>& se) {
  for (int r = 0; r < a.rows; r++) {
    int b = a.off[r], e = a.off[r + 1];
    bool cut = e - b > S;
    if (b == e) {
      sr.push_back(r), sb.push_back(b), se.push_back(e);
      continue;
    }
    for (int s = b; s < e; s += S)
      sr.push_back(cut ? (int)(r | 0x80000000u) : r), sb.push_back(s),
          se.push_back(std::min(e, s + S));
  }
}

struct Dev {
  int *off, *col;
  float* val;
};

template <class F>
static float median_ms(F f, int reps = 20) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) f();
  std::vector<float> t;
  for (int i = 0; i < reps; i++) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); i++) {
    double d = (double)got[i] - want[i];
    if (std::isnan(got[i])) return INFINITY;
    num += d * d;
    den += (double)want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

static void run(const Csr& a, int k, int sms) {
  size_t nb = (size_t)a.cols * k, nc = (size_t)a.rows * k;
  std::vector<float> hb(nb);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : hb) x = u(rng);
  Dev d;
  float *B, *C;
  CK(cudaMalloc(&d.off, sizeof(int) * a.off.size()));
  CK(cudaMalloc(&d.col, sizeof(int) * a.col.size()));
  CK(cudaMalloc(&d.val, sizeof(float) * a.val.size()));
  CK(cudaMalloc(&B, sizeof(float) * nb));
  CK(cudaMalloc(&C, sizeof(float) * nc));
  CK(cudaMemcpy(d.off, a.off.data(), sizeof(int) * a.off.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.col, a.col.data(), sizeof(int) * a.col.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.val, a.val.data(), sizeof(float) * a.val.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(B, hb.data(), sizeof(float) * nb, cudaMemcpyHostToDevice));

  // cuSPARSE reference and timings.
  cusparseHandle_t h;
  CS(cusparseCreate(&h));
  cusparseSpMatDescr_t ma;
  cusparseDnMatDescr_t mb, mc;
  CS(cusparseCreateCsr(&ma, a.rows, a.cols, a.nnz(), d.off, d.col, d.val, CUSPARSE_INDEX_32I,
                       CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  CS(cusparseCreateDnMat(&mb, a.cols, k, k, B, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  CS(cusparseCreateDnMat(&mc, a.rows, k, k, C, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  float one = 1, zero = 0;
  std::vector<float> want(nc), got(nc);
  float best_cu = 1e30;
  const char* best_name = "";
  for (int variant = 0; variant < 3; variant++) {
    auto alg = variant == 0 ? CUSPARSE_SPMM_CSR_ALG2 : CUSPARSE_SPMM_CSR_ALG3;
    bool pre = variant == 2;
    size_t ws = 0;
    CS(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                               &one, ma, mb, &zero, mc, CUDA_R_32F, alg, &ws));
    void* w = nullptr;
    CK(cudaMalloc(&w, ws + 1));
    if (pre)
      CS(cusparseSpMM_preprocess(h, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                 CUSPARSE_OPERATION_NON_TRANSPOSE, &one, ma, mb, &zero, mc,
                                 CUDA_R_32F, alg, w));
    float ms = median_ms([&] {
      CS(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one,
                      ma, mb, &zero, mc, CUDA_R_32F, alg, w));
    });
    CK(cudaDeviceSynchronize());
    if (alg == CUSPARSE_SPMM_CSR_ALG2)
      CK(cudaMemcpy(want.data(), C, sizeof(float) * nc, cudaMemcpyDeviceToHost));
    const char* nm = variant == 0 ? "cusparse-alg2" : variant == 1 ? "cusparse-alg3-nopre" : "cusparse-alg3+pre";
    printf("%-28s k=%-4d %-22s %9.1f us\n", a.name.c_str(), k, nm, ms * 1000);
    if (variant != 1 && ms < best_cu) best_cu = ms, best_name = nm;
    CK(cudaFree(w));
  }

  auto report = [&](const char* name, float ms) {
    CK(cudaMemcpy(got.data(), C, sizeof(float) * nc, cudaMemcpyDeviceToHost));
    double err = rel_err(got, want);
    printf("%-28s k=%-4d %-22s %9.1f us  x%.2f vs %s  err %.1e%s\n", a.name.c_str(), k, name,
           ms * 1000, best_cu / ms, best_name, err, err > 1e-5 ? "  WRONG" : "");
  };
  auto poison = [&] { CK(cudaMemset(C, 0xff, sizeof(float) * nc)); };
  int block = 256;
  int blocks_wave = sms * 8;  // 2048 threads per SM

  auto launch_rows = [&](auto kern, int G, const char* name, int waves) {
    long threads = (long)a.rows * G;
    long grid = std::min<long>((threads + block - 1) / block, (long)blocks_wave * waves);
    poison();
    float ms = median_ms([&] { kern<<<grid, block>>>(a.rows, k, d.off, d.col, d.val, B, C); });
    report(name, ms);
  };

  // Segments: rows longer than S cut into pieces of S.
  auto launch_segs_t = [&](auto kern, int G, int S, const char* name, int per_seg) {
    std::vector<int> sr, sb, se;
    segments_of(a, S, sr, sb, se);
    int *dr, *db, *de;
    CK(cudaMalloc(&dr, 4 * sr.size()));
    CK(cudaMalloc(&db, 4 * sr.size()));
    CK(cudaMalloc(&de, 4 * sr.size()));
    CK(cudaMemcpy(dr, sr.data(), 4 * sr.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, sb.data(), 4 * sr.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(de, se.data(), 4 * sr.size(), cudaMemcpyHostToDevice));
    int segs = (int)sr.size();
    long threads = (long)segs * per_seg;
    long grid = std::min<long>((threads + block - 1) / block, (long)blocks_wave * 4);
    poison();
    float ms = median_ms([&] {
      CK(cudaMemsetAsync(C, 0, sizeof(float) * nc));
      kern<<<grid, block>>>(segs, k, dr, db, de, d.col, d.val, B, C);
    });
    char full[64];
    snprintf(full, sizeof full, "%s S=%d", name, S);
    report(full, ms);
    CK(cudaFree(dr));
    CK(cudaFree(db));
    CK(cudaFree(de));
  };
  auto launch_segs = [&](auto kern, int G, int S, const char* name) {
    launch_segs_t(kern, G, S, name, G);
  };

  if (k == 32) {
    launch_rows(row_scalar<8>, 8, "row_scalar G=8", 1);
    launch_rows(row_vec4<8, 1>, 8, "row_vec4 G=8 U=1", 1);
    launch_rows(row_vec4<8, 2>, 8, "row_vec4 G=8 U=2", 1);
    launch_rows(row_vec4<8, 4>, 8, "row_vec4 G=8 U=4", 1);
    launch_rows(row_vec4<8, 2>, 8, "row_vec4 G=8 U=2 4w", 4);
    for (int S : {32, 128, 512}) launch_segs(seg_vec4<8, 2>, 8, S, "seg_vec4 G=8 U=2");
    for (int S : {32, 128}) launch_segs(seg_vec4<8, 4>, 8, S, "seg_vec4 G=8 U=4");
    for (int S : {32, 128, 512}) launch_segs_t(seg_warp_vec4<8, 2>, 8, S, "seg_warp G=8 U=2", 32);
    for (int S : {64, 256}) launch_segs(seg_vec4<8, 4>, 8, S, "seg_vec4 G=8 U=4");
  } else if (k == 128) {
    launch_rows(row_scalar<32>, 32, "row_scalar G=32", 1);
    launch_rows(row_vec4<32, 1>, 32, "row_vec4 G=32 U=1", 1);
    launch_rows(row_vec4<32, 2>, 32, "row_vec4 G=32 U=2", 1);
    launch_rows(row_vec4<32, 4>, 32, "row_vec4 G=32 U=4", 1);
    for (int S : {32, 128, 512}) launch_segs(seg_vec4<32, 2>, 32, S, "seg_vec4 G=32 U=2");
    for (int S : {32, 128}) launch_segs(seg_vec4<32, 4>, 32, S, "seg_vec4 G=32 U=4");
    for (int S : {16, 64}) launch_segs(seg_vec4<32, 4>, 32, S, "seg_vec4 G=32 U=4");
  }
  cusparseDestroySpMat(ma);
  cusparseDestroyDnMat(mb);
  cusparseDestroyDnMat(mc);
  cusparseDestroy(h);
  CK(cudaFree(d.off));
  CK(cudaFree(d.col));
  CK(cudaFree(d.val));
  CK(cudaFree(B));
  CK(cudaFree(C));
}

// cuSPARSE SpMV, both CSR algorithms, with and without cusparseSpMV_preprocess.
static void spmv_cusparse(const Csr& a) {
  int *off, *col;
  float *val, *x, *y;
  CK(cudaMalloc(&off, 4 * a.off.size()));
  CK(cudaMalloc(&col, 4 * a.col.size()));
  CK(cudaMalloc(&val, 4 * a.val.size()));
  CK(cudaMalloc(&x, 4 * (size_t)a.cols));
  CK(cudaMalloc(&y, 4 * (size_t)a.rows));
  CK(cudaMemcpy(off, a.off.data(), 4 * a.off.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(col, a.col.data(), 4 * a.col.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(val, a.val.data(), 4 * a.val.size(), cudaMemcpyHostToDevice));
  CK(cudaMemset(x, 0, 4 * (size_t)a.cols));
  cusparseHandle_t h;
  CS(cusparseCreate(&h));
  cusparseSpMatDescr_t ma;
  cusparseDnVecDescr_t vx, vy;
  CS(cusparseCreateCsr(&ma, a.rows, a.cols, a.nnz(), off, col, val, CUSPARSE_INDEX_32I,
                       CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  CS(cusparseCreateDnVec(&vx, a.cols, x, CUDA_R_32F));
  CS(cusparseCreateDnVec(&vy, a.rows, y, CUDA_R_32F));
  float one = 1, zero = 0;
  for (auto alg : {CUSPARSE_SPMV_CSR_ALG1, CUSPARSE_SPMV_CSR_ALG2})
    for (int pre = 0; pre < 2; pre++) {
      size_t ws = 0;
      CS(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, ma, vx, &zero, vy,
                                 CUDA_R_32F, alg, &ws));
      void* w;
      CK(cudaMalloc(&w, ws + 1));
      if (pre)
        CS(cusparseSpMV_preprocess(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, ma, vx, &zero, vy,
                                   CUDA_R_32F, alg, w));
      float ms = median_ms([&] {
        CS(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, ma, vx, &zero, vy, CUDA_R_32F,
                        alg, w));
      });
      printf("%-28s spmv   %s%s %9.1f us\n", a.name.c_str(),
             alg == CUSPARSE_SPMV_CSR_ALG1 ? "alg1" : "alg2", pre ? "+pre " : "     ", ms * 1000);
      CK(cudaFree(w));
    }
  cusparseDestroySpMat(ma);
  cusparseDestroyDnVec(vx);
  cusparseDestroyDnVec(vy);
  cusparseDestroy(h);
  CK(cudaFree(off));
  CK(cudaFree(col));
  CK(cudaFree(val));
  CK(cudaFree(x));
  CK(cudaFree(y));
}

int main(int argc, char** argv) {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<Csr> ms;
  ms.push_back(rmat(18, 8, 42));
  ms.push_back(power_law(500000, 8, 100, 100000, 42));
  ms.push_back(regular(250000, 16, 42));
  ms.push_back(stencil7(80, 42));
  for (auto& a : ms) {
    int mx = 0;
    for (int r = 0; r < a.rows; r++) mx = std::max(mx, a.off[r + 1] - a.off[r]);
    printf("# %s rows %d nnz %ld max_row %d\n", a.name.c_str(), a.rows, a.nnz(), mx);
    spmv_cusparse(a);
    for (int k : {32, 128}) run(a, k, sms);
  }
}
