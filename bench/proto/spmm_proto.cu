// Hand-written SpMM kernels (C = A·B, A CSR f32, B and C row-major n×k) against cuSPARSE on
// generated matrices of the shapes lb-bench's medium corpus uses (and `lognormal`/`bimodal` like
// scripts/gen-unseen-mtx.py's): a probe of which mapping the code generator should emit, not
// part of lb. Results: docs/spmm.md ("A hand-written probe", "Registers and occupancy").
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -o spmm_proto spmm_proto.cu -lcusparse
//   ./spmm_proto [rmat,power,lognormal,bimodal,regular,stencil] [k,k,..]   (default: all, 8,32,128)
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

static Csr lognormal(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0, 1);
  std::uniform_int_distribution<int> col(0, n - 1);
  std::vector<std::vector<int>> rows(n);
  for (int i = 0; i < n; i++) {
    long len = std::min<long>(20000, (long)std::exp(std::log(12.0) + 1.3 * z(rng)));
    for (long j = 0; j < len; j++) rows[i].push_back(col(rng));
  }
  return from_rows("lognormal-" + std::to_string(n), n, rows, rng);
}

static Csr bimodal(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> col(0, n - 1), lng(60, 600), sht(1, 4);
  std::vector<std::vector<int>> rows(n);
  for (int i = 0; i < n; i++) {
    int len = u(rng) < 0.1 ? lng(rng) : sht(rng);
    for (int j = 0; j < len; j++) rows[i].push_back(col(rng));
  }
  return from_rows("bimodal-" + std::to_string(n), n, rows, rng);
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

// U consecutive atoms from `j`: their values and, for each, the four lanes of B's row at its
// column that thread `g` owns.
template <int G, int U>
__device__ __forceinline__ void trip(int j, int k, int g, const int* __restrict__ col,
                                     const float* __restrict__ val, const float* __restrict__ B,
                                     float (&v)[U], float4 (&x)[U]) {
  int c[U];
#pragma unroll
  for (int u = 0; u < U; u++) {
    c[u] = __ldg(col + j + u);
    v[u] = __ldg(val + j + u);
  }
#pragma unroll
  for (int u = 0; u < U; u++) x[u] = __ldg((const float4*)(B + (size_t)c[u] * k) + g);
}

// acc += the atoms b..e, U a trip and then one at a time; `after(j + 1)` runs after atom j's.
template <int G, int U, class F>
__device__ __forceinline__ void walk(int b, int e, int k, int g, const int* __restrict__ col,
                                     const float* __restrict__ val, const float* __restrict__ B,
                                     float4& acc, F after) {
  int j = b;
  for (; j + U <= e; j += U) {
    float v[U];
    float4 x[U];
    trip<G, U>(j, k, g, col, val, B, v, x);
#pragma unroll
    for (int u = 0; u < U; u++) {
      fma4(acc, v[u], x[u]);
      after(j + u + 1);
    }
  }
  for (; j < e; j++) {
    fma4(acc, __ldg(val + j), __ldg((const float4*)(B + (size_t)__ldg(col + j) * k) + g));
    after(j + 1);
  }
}

// A segment's or row's atoms b..e into acc.
template <int G, int U>
__device__ __forceinline__ void walk(int b, int e, int k, int g, const int* __restrict__ col,
                                     const float* __restrict__ val, const float* __restrict__ B,
                                     float4& acc) {
  walk<G, U>(b, e, k, g, col, val, B, acc, [](int) {});
}

__device__ __forceinline__ void atomic_add4(float4* at, float4 v) {
  float* p = (float*)at;
  atomicAdd(p, v.x);
  atomicAdd(p + 1, v.y);
  atomicAdd(p + 2, v.z);
  atomicAdd(p + 3, v.w);
}

// Rows `first, first + stride, ..` below `rows`, each walked for the thread's lanes and stored
// (`B` and `C` point at the lanes' first column).
template <int G, int U>
__device__ __forceinline__ void rows_from(long first, long stride, int rows, int k, int g,
                                          const int* __restrict__ off, const int* __restrict__ col,
                                          const float* __restrict__ val,
                                          const float* __restrict__ B, float* __restrict__ C) {
  for (long row = first; row < rows; row += stride) {
    int b = __ldg(off + row), e = __ldg(off + row + 1);
    float4 acc = make_float4(0, 0, 0, 0);
    walk<G, U>(b, e, k, g, col, val, B, acc);
    ((float4*)(C + (size_t)row * k))[g] = acc;
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
  rows_from<G, U>(t / G, stride, rows, k, g, off, col, val, B, C);
}

// Segment `s`'s row (sign bit: a cut row), and its atoms walked into `acc` for the thread's lanes
// of B (`B` points at the lanes' first column).
template <int G, int U>
__device__ __forceinline__ int segment(long s, int k, int g, const int* __restrict__ seg_row,
                                       const int* __restrict__ seg_begin,
                                       const int* __restrict__ seg_end, const int* __restrict__ col,
                                       const float* __restrict__ val, const float* __restrict__ B,
                                       float4& acc) {
  int rowc = __ldg(seg_row + s);
  int b = __ldg(seg_begin + s), e = __ldg(seg_end + s);
  acc = make_float4(0, 0, 0, 0);
  walk<G, U>(b, e, k, g, col, val, B, acc);
  return rowc;
}

// `acc` into row `rowc`'s lanes of C: added with atomics for a cut row (sign bit), else stored.
__device__ __forceinline__ void store_or_add(float* C, int rowc, int k, int g, float4 acc) {
  float4* cr = (float4*)(C + (size_t)(rowc & 0x7fffffff) * k) + g;
  if (rowc < 0) {
    atomic_add4(cr, acc);
  } else {
    *cr = acc;
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
    float4 acc;
    int rowc = segment<G, U>(s, k, g, seg_row, seg_begin, seg_end, col, val, B, acc);
    store_or_add(C, rowc, k, g, acc);
  }
}


// seg_vec4 without atomic arithmetic: a cut row's segments store their partials, and the last of
// them to arrive (one counter per thread of the row's first segment) adds them in segment order.
template <int G, int U>
__global__ void seg_det_vec4(int segs, int k, const int* __restrict__ seg_row,
                             const int* __restrict__ seg_begin, const int* __restrict__ seg_end,
                             const int* __restrict__ seg_first, const int* __restrict__ col,
                             const float* __restrict__ val, const float* __restrict__ B,
                             float* __restrict__ C, float* partials, int* counters) {
  int g = threadIdx.x % G;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x / G;
  for (long s = t / G; s < segs; s += stride) {
    float4 acc;
    int rowc = segment<G, U>(s, k, g, seg_row, seg_begin, seg_end, col, val, B, acc);
    float4* cr = (float4*)(C + (size_t)(rowc & 0x7fffffff) * k) + g;
    if (rowc < 0) {
      int first = __ldg(seg_first + s);
      ((float4*)(partials + (size_t)s * k))[g] = acc;
      __threadfence();
      // seg_first[segs + first]: how many segments the row has.
      int total = __ldg(seg_first + segs + first);
      int seen = atomicAdd(counters + (size_t)first * G + g, 1);
      if (seen == total - 1) {
        __threadfence();
        float4 sum = make_float4(0, 0, 0, 0);
        for (int i = 0; i < total; i++) {
          float4 p = __ldcg((const float4*)(partials + (size_t)(first + i) * k) + g);
          sum.x += p.x;
          sum.y += p.y;
          sum.z += p.z;
          sum.w += p.w;
        }
        *cr = sum;
        counters[(size_t)first * G + g] = 0;
      }
    } else {
      *cr = acc;
    }
  }
}

// Merge-based lanes: each group of G threads (float4 lanes) takes a contiguous run of `chunk`
// atoms whatever the rows, finds the row of its first atom by a binary search, and walks U atoms
// a trip; a row that ends inside the run is stored when the run holds all of it, and added with
// atomics when it started in an earlier run or goes on past this one (C zeroed first).
template <int G, int U>
__global__ void nz_vec4(int rows, int nnz, int chunk, int k, const int* __restrict__ off,
                        const int* __restrict__ col, const float* __restrict__ val,
                        const float* __restrict__ B, float* __restrict__ C) {
  int g = threadIdx.x % G;
  long grp = ((long)blockIdx.x * blockDim.x + threadIdx.x) / G;
  long groups = (long)gridDim.x * blockDim.x / G;
  for (long ch = grp; ch * chunk < nnz; ch += groups) {
    int a0 = (int)(ch * chunk), a1 = min(nnz, a0 + chunk);
    int lo = 0, hi = rows;
    while (lo < hi) {
      int mid = (lo + hi) >> 1;
      if (__ldg(off + mid + 1) <= a0) lo = mid + 1; else hi = mid;
    }
    int r = lo;
    int next = __ldg(off + r + 1);
    bool cut = __ldg(off + r) < a0;
    int since = a0;
    float4 acc = make_float4(0, 0, 0, 0);
    auto flush = [&](int e) {
      float4* cr = (float4*)(C + (size_t)r * k) + g;
      if (cut) {
        atomic_add4(cr, acc);
      } else {
        *cr = acc;
      }
      acc = make_float4(0, 0, 0, 0);
      cut = false;
      since = e;
      r++;
      while (r < rows && __ldg(off + r + 1) == e) r++;
      next = r < rows ? __ldg(off + r + 1) : 0x7fffffff;
    };
    walk<G, U>(a0, a1, k, g, col, val, B, acc, [&](int end) {
      if (end == next) flush(end);
    });
    if (since < a1) atomic_add4((float4*)(C + (size_t)r * k) + g, acc);
  }
}

// Lane panels: the k lanes cut into panels of P = 4·G lanes (G threads of float4 a row). Every
// thread walks its rows for panel 0, then for panel 1, and so on, so that at any time the grid
// gathers from one panel's slice of B (cols × P floats), which L2 can hold where the whole of B
// (cols × k floats) does not. A row's column indices and values are read once per panel.
template <int G, int U>
__global__ void panel_rows(int rows, int k, const int* __restrict__ off,
                           const int* __restrict__ col, const float* __restrict__ val,
                           const float* __restrict__ B, float* __restrict__ C) {
  int g = threadIdx.x % G;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x / G;
  for (int p0 = 0; p0 < k; p0 += 4 * G)
    rows_from<G, U>(t / G, stride, rows, k, g, off, col, val, B + p0, C + p0);
}

// Lane panels by block: blocks `panel · per_panel ..` take panel `panel`, one row per thread
// group; the GPU starts blocks in index order, so the panels run nearly one after another.
template <int G, int U>
__global__ void panel_blocks(int rows, int k, int per_panel, const int* __restrict__ off,
                             const int* __restrict__ col, const float* __restrict__ val,
                             const float* __restrict__ B, float* __restrict__ C) {
  int g = threadIdx.x % G;
  int p0 = (blockIdx.x / per_panel) * 4 * G;
  long t = (long)(blockIdx.x % per_panel) * blockDim.x + threadIdx.x;
  long stride = (long)per_panel * blockDim.x / G;
  rows_from<G, U>(t / G, stride, rows, k, g, off, col, val, B + p0, C + p0);
}

// Segments (rows cut at S atoms, cut rows added with atomics) in lane panels by block.
template <int G, int U>
__global__ void panel_segs(int segs, int k, int per_panel, const int* __restrict__ seg_row,
                           const int* __restrict__ seg_begin, const int* __restrict__ seg_end,
                           const int* __restrict__ col, const float* __restrict__ val,
                           const float* __restrict__ B, float* __restrict__ C) {
  int g = threadIdx.x % G;
  int p0 = (blockIdx.x / per_panel) * 4 * G;
  long t = (long)(blockIdx.x % per_panel) * blockDim.x + threadIdx.x;
  long stride = (long)per_panel * blockDim.x / G;
  for (long s = t / G; s < segs; s += stride) {
    float4 acc;
    int rowc = segment<G, U>(s, k, g, seg_row, seg_begin, seg_end, col, val, B + p0, acc);
    store_or_add(C + p0, rowc, k, g, acc);
  }
}

// Segments of at most S atoms, deterministic in two kernels and without atomics: a segment of a
// cut row stores its partial in its own slot (`partials[s·k ..]`); `fold_cut_rows` then adds each
// cut row's partials in segment order. The segment kernel holds no counter state, so it keeps the
// registers of `seg_vec4`.
template <int G, int U>
__global__ void seg_part_vec4(int segs, int k, const int* __restrict__ seg_row,
                              const int* __restrict__ seg_begin, const int* __restrict__ seg_end,
                              const int* __restrict__ col, const float* __restrict__ val,
                              const float* __restrict__ B, float* __restrict__ C,
                              float* __restrict__ partials) {
  int g = threadIdx.x % G;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x / G;
  for (long s = t / G; s < segs; s += stride) {
    float4 acc;
    int rowc = segment<G, U>(s, k, g, seg_row, seg_begin, seg_end, col, val, B, acc);
    float* dst = rowc < 0 ? partials + (size_t)s * k : C + (size_t)rowc * k;
    ((float4*)dst)[g] = acc;
  }
}

// For each cut row (its first segment and segment count), the partials added in segment order.
template <int G>
__global__ void fold_cut_rows(int cuts, int k, const int* __restrict__ cut_first,
                              const int* __restrict__ cut_count, const int* __restrict__ seg_row,
                              const float* __restrict__ partials, float* __restrict__ C) {
  int g = threadIdx.x % G;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x / G;
  for (long c = t / G; c < cuts; c += stride) {
    int first = __ldg(cut_first + c), n = __ldg(cut_count + c);
    int row = __ldg(seg_row + first) & 0x7fffffff;
    float4 sum = make_float4(0, 0, 0, 0);
    for (int i = 0; i < n; i++) {
      float4 p = ((const float4*)(partials + (size_t)(first + i) * k))[g];
      sum.x += p.x;
      sum.y += p.y;
      sum.z += p.z;
      sum.w += p.w;
    }
    ((float4*)(C + (size_t)row * k))[g] = sum;
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

// A segment list on the device: each segment's row (sign bit: a cut row), first and end atom,
// and for the deterministic kernel `first`: each segment's row's first segment, then (indexed
// by that) the row's segment count.
struct Segs {
  int *row = nullptr, *begin = nullptr, *end = nullptr, *first = nullptr;
  std::vector<int> sr, sb, se;
  Segs(const Csr& a, int S) {
    segments_of(a, S, sr, sb, se);
    int n = count();
    std::vector<int> sf(2 * (size_t)n, 0);
    for (int i = 0; i < n;) {
      int j = i + 1;
      if (sr[i] < 0)
        while (j < n && sr[j] == sr[i]) j++;
      for (int q = i; q < j; q++) sf[q] = i;
      sf[n + i] = j - i;
      i = j;
    }
    row = upload(sr);
    begin = upload(sb);
    end = upload(se);
    first = upload(sf);
  }
  ~Segs() {
    CK(cudaFree(row));
    CK(cudaFree(begin));
    CK(cudaFree(end));
    CK(cudaFree(first));
  }
  int count() const { return (int)sr.size(); }
  static int* upload(const std::vector<int>& v) {
    int* p;
    CK(cudaMalloc(&p, 4 * v.size() + 4));
    CK(cudaMemcpy(p, v.data(), 4 * v.size(), cudaMemcpyHostToDevice));
    return p;
  }
};

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

  // Segments: rows longer than S cut into pieces of S. `smem` > 0: that much dynamic shared
  // memory a block, only to cap the blocks an SM.
  auto launch_segs = [&](auto kern, int G, int S, const char* name, int smem = 0) {
    Segs sg(a, S);
    int segs = sg.count();
    long cap = (long)blocks_wave * 4;
    char full[80];
    snprintf(full, sizeof full, "%s S=%d", name, S);
    if (smem > 0) {
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, block, smem));
      cap = (long)sms * per_sm * 4;
      snprintf(full, sizeof full, "%s S=%d %dblk/SM", name, S, per_sm);
    }
    long grid = std::min<long>(((long)segs * G + block - 1) / block, cap);
    poison();
    float ms = median_ms([&] {
      CK(cudaMemsetAsync(C, 0, sizeof(float) * nc));
      kern<<<grid, block, smem>>>(segs, k, sg.row, sg.begin, sg.end, d.col, d.val, B, C);
    });
    report(full, ms);
  };
  // Deterministic segments: partials and a last-arriver fold, no atomics on values, no memset.
  auto launch_det = [&](auto kern, int G, int S, const char* name) {
    Segs sg(a, S);
    int segs = sg.count();
    int *cnt;
    float* part;
    CK(cudaMalloc(&cnt, 4 * (size_t)segs * G));
    CK(cudaMalloc(&part, 4 * (size_t)segs * k));
    CK(cudaMemset(cnt, 0, 4 * (size_t)segs * G));
    long grid = std::min<long>(((long)segs * G + block - 1) / block, (long)blocks_wave * 4);
    poison();
    float ms = median_ms([&] {
      kern<<<grid, block>>>(segs, k, sg.row, sg.begin, sg.end, sg.first, d.col, d.val, B, C,
                            part, cnt);
    });
    char full[64];
    snprintf(full, sizeof full, "%s S=%d", name, S);
    report(full, ms);
    CK(cudaFree(cnt));
    CK(cudaFree(part));
  };

  auto launch_nz = [&](auto kern, int G, int chunk, const char* name) {
    long groups_wave = (long)blocks_wave * block / G;
    long chunks = (a.nnz() + chunk - 1) / chunk;
    long grid = std::min<long>((chunks * G + block - 1) / block, blocks_wave);
    if (chunk == 0) {
      chunk = (int)((a.nnz() + groups_wave - 1) / groups_wave);
      grid = blocks_wave;
    }
    poison();
    float ms = median_ms([&] {
      CK(cudaMemsetAsync(C, 0, sizeof(float) * nc));
      kern<<<grid, block>>>(a.rows, (int)a.nnz(), chunk, k, d.off, d.col, d.val, B, C);
    });
    char full[64];
    snprintf(full, sizeof full, "%s chunk=%d", name, chunk);
    report(full, ms);
  };
  // Lane panels of P = 4·G lanes: `panel_rows` (every thread walks the panels in turn on a grid
  // of `waves` full waves) and `panel_blocks` (a block per panel's share of rows, panel-major).
  auto launch_panels = [&](auto rows_kern, auto blocks_kern, int G, const char* tag) {
    char full[64];
    long threads = (long)a.rows * G;
    long grid = std::min<long>((threads + block - 1) / block, (long)blocks_wave);
    poison();
    float ms = median_ms([&] { rows_kern<<<grid, block>>>(a.rows, k, d.off, d.col, d.val, B, C); });
    snprintf(full, sizeof full, "panel_rows %s", tag);
    report(full, ms);
    int per_panel = (int)((threads + block - 1) / block);
    int panels = k / (4 * G);
    poison();
    ms = median_ms([&] {
      blocks_kern<<<(long)per_panel * panels, block>>>(a.rows, k, per_panel, d.off, d.col, d.val,
                                                       B, C);
    });
    snprintf(full, sizeof full, "panel_blocks %s", tag);
    report(full, ms);
  };
  auto launch_panel_segs = [&](auto kern, int G, int S, const char* tag) {
    Segs sg(a, S);
    int segs = sg.count();
    int per_panel = (int)(((long)segs * G + block - 1) / block);
    int panels = k / (4 * G);
    poison();
    float ms = median_ms([&] {
      CK(cudaMemsetAsync(C, 0, sizeof(float) * nc));
      kern<<<(long)per_panel * panels, block>>>(segs, k, per_panel, sg.row, sg.begin, sg.end,
                                                d.col, d.val, B, C);
    });
    char full[64];
    snprintf(full, sizeof full, "panel_segs %s S=%d", tag, S);
    report(full, ms);
  };
  // Two-kernel deterministic segments: `seg_part_vec4`, then `fold_cut_rows`. `waves`: the
  // segment kernel's grid in full waves of eight blocks an SM (0: one group per segment).
  auto launch_part = [&](auto kern, auto fold, int G, int S, int waves, const char* name) {
    Segs sg(a, S);
    int segs = sg.count();
    std::vector<int> cf, cc;
    for (int i = 0; i < segs;) {
      int j = i + 1;
      if (sg.sr[i] < 0) {
        while (j < segs && sg.sr[j] == sg.sr[i]) j++;
        cf.push_back(i), cc.push_back(j - i);
      }
      i = j;
    }
    int cuts = (int)cf.size();
    int* d_cf = Segs::upload(cf);
    int* d_cc = Segs::upload(cc);
    float* part;
    CK(cudaMalloc(&part, 4 * (size_t)segs * k));
    long grid = ((long)segs * G + block - 1) / block;
    if (waves > 0) grid = std::min<long>(grid, (long)blocks_wave * waves);
    long fgrid = std::max<long>(1, ((long)cuts * G + block - 1) / block);
    poison();
    float ms = median_ms([&] {
      kern<<<grid, block>>>(segs, k, sg.row, sg.begin, sg.end, d.col, d.val, B, C, part);
      if (cuts > 0) fold<<<fgrid, block>>>(cuts, k, d_cf, d_cc, sg.row, part, C);
    });
    char full[80];
    snprintf(full, sizeof full, "%s S=%d w=%d", name, S, waves);
    report(full, ms);
    CK(cudaFree(part));
    CK(cudaFree(d_cf));
    CK(cudaFree(d_cc));
  };
  auto zero_only = [&] {
    float ms = median_ms([&] { CK(cudaMemsetAsync(C, 0, sizeof(float) * nc)); });
    printf("%-28s k=%-4d %-22s %9.1f us\n", a.name.c_str(), k, "memset C", ms * 1000);
  };
  zero_only();
  if (k == 8) {
    launch_rows(row_vec4<2, 4>, 2, "row_vec4 G=2 U=4", 1);
    launch_segs(seg_vec4<2, 4>, 2, 32, "seg_vec4 G=2 U=4");
    for (int S : {32, 64}) launch_det(seg_det_vec4<2, 4>, 2, S, "seg_det G=2 U=4");
    for (int c : {64, 128}) launch_nz(nz_vec4<2, 4>, 2, c, "nz_vec4 G=2 U=4");
    for (int S : {16, 32}) launch_part(seg_part_vec4<2, 4>, fold_cut_rows<2>, 2, S, 4, "seg_part G=2 U=4");
  } else if (k == 32) {
    launch_rows(row_vec4<8, 4>, 8, "row_vec4 G=8 U=4", 1);
    for (int S : {32, 64}) launch_segs(seg_vec4<8, 4>, 8, S, "seg_vec4 G=8 U=4");
    for (int smem : {40000, 50000, 60000})
      launch_segs(seg_vec4<8, 4>, 8, 32, "seg_vec4 G=8 U=4", smem);
    for (int S : {32, 64, 128}) launch_det(seg_det_vec4<8, 4>, 8, S, "seg_det G=8 U=4");
    for (int c : {64, 128, 256}) launch_nz(nz_vec4<8, 4>, 8, c, "nz_vec4 G=8 U=4");
    for (int S : {16, 32, 64})
      for (int w : {0, 4})
        launch_part(seg_part_vec4<8, 4>, fold_cut_rows<8>, 8, S, w, "seg_part G=8 U=4");
  } else if (k == 64) {
    launch_rows(row_vec4<16, 4>, 16, "row_vec4 G=16 U=4", 1);
    launch_segs(seg_vec4<16, 4>, 16, 64, "seg_vec4 G=16 U=4");
    launch_panels(panel_rows<8, 4>, panel_blocks<8, 4>, 8, "P=32 U=4");
    launch_panels(panel_rows<4, 4>, panel_blocks<4, 4>, 4, "P=16 U=4");
    launch_panel_segs(panel_segs<8, 4>, 8, 64, "P=32 U=4");
  } else if (k == 128) {
    launch_rows(row_vec4<32, 4>, 32, "row_vec4 G=32 U=4", 1);
    launch_segs(seg_vec4<32, 4>, 32, 64, "seg_vec4 G=32 U=4");
    for (int S : {64, 128}) launch_det(seg_det_vec4<32, 4>, 32, S, "seg_det G=32 U=4");
    launch_nz(nz_vec4<32, 4>, 32, 128, "nz_vec4 G=32 U=4");
    launch_panels(panel_rows<8, 4>, panel_blocks<8, 4>, 8, "P=32 U=4");
    launch_panels(panel_rows<4, 4>, panel_blocks<4, 4>, 4, "P=16 U=4");
    launch_panels(panel_rows<16, 4>, panel_blocks<16, 4>, 16, "P=64 U=4");
    launch_panel_segs(panel_segs<8, 4>, 8, 64, "P=32 U=4");
    launch_panel_segs(panel_segs<4, 4>, 4, 64, "P=16 U=4");
    for (int S : {32, 64}) launch_part(seg_part_vec4<32, 4>, fold_cut_rows<32>, 32, S, 4, "seg_part G=32 U=4");
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

int main(int argc, char** argv) {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<Csr> ms;
  std::string only = argc > 1 ? argv[1] : "";
  // Second argument: the k values, comma-separated (default 8,32,128).
  std::vector<int> ks;
  for (const char* p = argc > 2 ? argv[2] : "8,32,128"; *p;) {
    ks.push_back(atoi(p));
    while (*p && *p != ',') p++;
    if (*p) p++;
  }
  auto want = [&](const char* n) { return only.empty() || only.find(n) != std::string::npos; };
  if (want("rmat")) ms.push_back(rmat(18, 8, 42));
  if (want("power")) ms.push_back(power_law(500000, 8, 100, 100000, 42));
  if (want("lognormal")) ms.push_back(lognormal(200000, 1));
  if (want("bimodal")) ms.push_back(bimodal(200000, 1));
  if (want("regular")) ms.push_back(regular(250000, 16, 42));
  if (want("stencil")) ms.push_back(stencil7(80, 42));
  for (auto& a : ms) {
    int mx = 0;
    for (int r = 0; r < a.rows; r++) mx = std::max(mx, a.off[r + 1] - a.off[r]);
    printf("# %s rows %d nnz %ld max_row %d\n", a.name.c_str(), a.rows, a.nnz(), mx);
    for (int k : ks) run(a, k, sms);
  }
}
