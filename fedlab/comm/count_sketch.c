/* The count sketch's two passes on float32 activations [N, D] in row-major order (ELSA Eq. 12-13), AVX2.

   compress:    S[n, y, h_y(i)] += s_y(i) * x[n, i]          over i in index order    (Eq. 12)
   decompress:  x^[n, i] = median_y s_y(i) * S[n, y, h_y(i)]                          (Eq. 13)

   Each pass reads its input once and writes its output once, in the callers' layouts: a tile of 8 rows is
   transposed in registers (8 x 8 blocks), so that one vector holds one column of the tile, and every bucket
   of the tile is a vector of 8 rows. Compress adds each signed column into its Y buckets, in index order from
   zero, which is the order of the bucket's own sum: the result does not depend on the vector width or the
   machine. The sign s_y(i) = -1 flips the sign bit, as a product by -1 does. Decompress takes the median of
   three by min/max, a NaN in a bucket giving NaN where that bucket is read.

   Tables, per index i and row y (i-major): off[i * Y + y] = 8 * (y * Z + h_y(i)), the bucket's place in the
   tile buffer; flip[i * Y + y] = 0x80000000 where s_y(i) = -1, else 0; soff[i * Y + y] = off[i * Y + y], plus
   8 * K8 (K8 = Y * Z rounded up to a multiple of 8) where s_y(i) = -1. Built by fedlab.comm.native with the
   system's C compiler, -O3 -mavx2 -ffp-contract=off. */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int cs_has_avx2(void) { return __builtin_cpu_supports("avx2"); }

/* r[l] = row l of an 8 x 8 block -> r[j] = column j */
static inline void transpose8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20); r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20); r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31); r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31); r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* 8 floats from src, of which the first `n` are real (the rest 0) */
static inline __m256 load_part(const float *src, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(src);
  float tmp[8] = {0};
  for (int64_t k = 0; k < n; k++) tmp[k] = src[k];
  return _mm256_loadu_ps(tmp);
}

/* the first `n` of v's 8 floats to dst */
static inline void store_part(float *dst, __m256 v, int64_t n) {
  if (n >= 8) { _mm256_storeu_ps(dst, v); return; }
  float tmp[8];
  _mm256_storeu_ps(tmp, v);
  for (int64_t k = 0; k < n; k++) dst[k] = tmp[k];
}

static inline __m256 sign_of(uint32_t flip) { return _mm256_castsi256_ps(_mm256_set1_epi32((int)flip)); }

/* a buffer of K8 buckets x 8 rows, 32-byte aligned; NULL when out of memory */
static float *tile_buffer(int64_t K8) { return aligned_alloc(32, sizeof(float) * 8 * (size_t)K8); }

static inline __attribute__((always_inline)) int compress_rows(
    const float *x, int64_t N, int64_t D, const int32_t *off, const uint32_t *flip, const int Y, int64_t K,
    float *out) {
  const int64_t K8 = (K + 7) / 8 * 8;
  float *acc = tile_buffer(K8);
  if (!acc) return 1;
  for (int64_t n0 = 0; n0 < N; n0 += 8) {
    const int64_t rows = N - n0 < 8 ? N - n0 : 8;
    memset(acc, 0, sizeof(float) * 8 * (size_t)K8);
    for (int64_t d0 = 0; d0 < D; d0 += 8) {
      const int64_t cols = D - d0 < 8 ? D - d0 : 8;
      __m256 r[8];
      for (int l = 0; l < 8; l++) r[l] = l < rows ? load_part(x + (n0 + l) * D + d0, cols) : _mm256_setzero_ps();
      transpose8(r);
      const int32_t *o = off + Y * d0;
      const uint32_t *f = flip + Y * d0;
      for (int64_t j = 0; j < cols; j++)
        for (int y = 0; y < Y; y++) {
          float *a = acc + o[Y * j + y];
          _mm256_store_ps(a, _mm256_add_ps(_mm256_load_ps(a), _mm256_xor_ps(r[j], sign_of(f[Y * j + y]))));
        }
    }
    for (int64_t k0 = 0; k0 < K8; k0 += 8) {
      __m256 r[8];
      for (int j = 0; j < 8; j++) r[j] = _mm256_load_ps(acc + 8 * (k0 + j));
      transpose8(r);
      for (int64_t l = 0; l < rows; l++) store_part(out + (n0 + l) * K + k0, r[l], K - k0);
    }
  }
  free(acc);
  return 0;
}

static inline __m256 min_nan(__m256 a, __m256 b) { return _mm256_or_ps(_mm256_min_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q)); }
static inline __m256 max_nan(__m256 a, __m256 b) { return _mm256_or_ps(_mm256_max_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q)); }

/* The tile buffer holds the tile's buckets and, after them, their negatives: soff[i * Y + y] points at
   s_y(i) * S[., y, h_y(i)] directly, so no sign is applied per entry. */
static inline __attribute__((always_inline)) int decompress_rows(
    const float *S, int64_t N, int64_t K, const int32_t *soff, const int Y, int64_t D, float *out) {
  const int64_t K8 = (K + 7) / 8 * 8;
  float *st = tile_buffer(2 * K8);
  if (!st) return 1;
  const __m256 sign_bit = sign_of(0x80000000u);
  for (int64_t n0 = 0; n0 < N; n0 += 8) {
    const int64_t rows = N - n0 < 8 ? N - n0 : 8;
    __m256 nan = _mm256_setzero_ps();
    for (int64_t k0 = 0; k0 < K8; k0 += 8) {
      __m256 r[8];
      for (int l = 0; l < 8; l++) {
        r[l] = l < rows ? load_part(S + (n0 + l) * K + k0, K - k0) : _mm256_setzero_ps();
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(r[l], r[l], _CMP_UNORD_Q));
      }
      transpose8(r);
      for (int j = 0; j < 8; j++) {
        _mm256_store_ps(st + 8 * (k0 + j), r[j]);
        _mm256_store_ps(st + 8 * (K8 + k0 + j), _mm256_xor_ps(r[j], sign_bit));
      }
    }
    const int any_nan = _mm256_movemask_ps(nan) != 0;   /* min/max that carry NaN only where the tile has one */
    for (int64_t d0 = 0; d0 < D; d0 += 8) {
      const int64_t cols = D - d0 < 8 ? D - d0 : 8;
      const int32_t *q = soff + Y * d0;
      __m256 o[8];
      for (int j = 0; j < 8; j++) {
        if (j >= cols) { o[j] = _mm256_setzero_ps(); continue; }
        __m256 a = _mm256_load_ps(st + q[Y * j]);
        if (Y == 1) { o[j] = a; continue; }
        __m256 b = _mm256_load_ps(st + q[Y * j + 1]), c = _mm256_load_ps(st + q[Y * j + 2]);
        o[j] = any_nan ? max_nan(min_nan(a, b), min_nan(max_nan(a, b), c))
                       : _mm256_max_ps(_mm256_min_ps(a, b), _mm256_min_ps(_mm256_max_ps(a, b), c));
      }
      transpose8(o);
      for (int64_t l = 0; l < rows; l++) store_part(out + (n0 + l) * D + d0, o[l], cols);
    }
  }
  free(st);
  return 0;
}

/* Y = 1 and Y = 3, each with its row count a constant; 0 on success, 1 when out of memory */
int cs_compress_y1(const float *x, int64_t N, int64_t D, const int32_t *off, const uint32_t *flip, int64_t K, float *out) {
  return compress_rows(x, N, D, off, flip, 1, K, out);
}
int cs_compress_y3(const float *x, int64_t N, int64_t D, const int32_t *off, const uint32_t *flip, int64_t K, float *out) {
  return compress_rows(x, N, D, off, flip, 3, K, out);
}
int cs_decompress_y1(const float *S, int64_t N, int64_t K, const int32_t *soff, int64_t D, float *out) {
  return decompress_rows(S, N, K, soff, 1, D, out);
}
int cs_decompress_y3(const float *S, int64_t N, int64_t K, const int32_t *soff, int64_t D, float *out) {
  return decompress_rows(S, N, K, soff, 3, D, out);
}
