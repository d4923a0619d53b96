/*
 * lamer_blas: row-major single-precision matrix products through the system's CBLAS (OpenBLAS),
 * for the tfjs wasm backend's BatchMatMul kernel (src/model/blas.ts). The operands are Float32Array
 * views of the wasm heap, so nothing is copied: the product is written straight into the output
 * tensor's heap memory.
 *
 * sgemmBatched(a, b, c, batch, aBatched, bBatched, m, n, k, transA, transB)
 *   For i in [0, batch): C_i[m, n] = op(A_i) @ op(B_i), where op(X) is X or X^T.
 *   a: Float32Array holding `aBatched ? batch : 1` matrices of [m, k] ([k, m] when transA);
 *   b: likewise [k, n] ([n, k] when transB); c: batch matrices of [m, n]. A and B with
 *   aBatched / bBatched false are shared by every i (a broadcast batch dimension of 1).
 *   Throws TypeError on wrong argument types and RangeError when an array is too short.
 * setThreads(n): OpenBLAS threads per call (openblas_set_num_threads).
 * info(): { config, corename, threads } of the loaded OpenBLAS.
 */
#include <node_api.h>
#include <cblas.h>
#include <stdbool.h>
#include <stddef.h>

#define CHECK(call)                                                   \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error(env, NULL, "lamer_blas: N-API call failed");   \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

static bool floats(napi_env env, napi_value v, float** data, size_t* length) {
  bool is_typed = false;
  if (napi_is_typedarray(env, v, &is_typed) != napi_ok || !is_typed) return false;
  napi_typedarray_type type;
  void* raw = NULL;
  if (napi_get_typedarray_info(env, v, &type, length, &raw, NULL, NULL) != napi_ok) return false;
  if (type != napi_float32_array) return false;
  *data = (float*)raw;
  return true;
}

static bool whole(napi_env env, napi_value v, int* out) {
  int32_t x = 0;
  if (napi_get_value_int32(env, v, &x) != napi_ok || x < 0) return false;
  *out = x;
  return true;
}

static napi_value SgemmBatched(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value argv[11];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 11) {
    napi_throw_type_error(env, NULL, "sgemmBatched takes 11 arguments");
    return NULL;
  }
  float *a, *b, *c;
  size_t alen, blen, clen;
  if (!floats(env, argv[0], &a, &alen) || !floats(env, argv[1], &b, &blen) || !floats(env, argv[2], &c, &clen)) {
    napi_throw_type_error(env, NULL, "sgemmBatched: a, b and c must be Float32Arrays");
    return NULL;
  }
  int batch, m, n, k;
  bool a_batched, b_batched, trans_a, trans_b;
  if (!whole(env, argv[3], &batch) || !whole(env, argv[6], &m) || !whole(env, argv[7], &n) || !whole(env, argv[8], &k)) {
    napi_throw_type_error(env, NULL, "sgemmBatched: batch, m, n and k must be int32 >= 0");
    return NULL;
  }
  if (napi_get_value_bool(env, argv[4], &a_batched) != napi_ok || napi_get_value_bool(env, argv[5], &b_batched) != napi_ok ||
      napi_get_value_bool(env, argv[9], &trans_a) != napi_ok || napi_get_value_bool(env, argv[10], &trans_b) != napi_ok) {
    napi_throw_type_error(env, NULL, "sgemmBatched: aBatched, bBatched, transA and transB must be booleans");
    return NULL;
  }
  const size_t mk = (size_t)m * (size_t)k, kn = (size_t)k * (size_t)n, mn = (size_t)m * (size_t)n;
  if (alen < (a_batched ? (size_t)batch : 1) * mk || blen < (b_batched ? (size_t)batch : 1) * kn || clen < (size_t)batch * mn) {
    napi_throw_range_error(env, NULL, "sgemmBatched: an array is shorter than its shape");
    return NULL;
  }
  for (int i = 0; i < batch; i++) {
    float* ci = c + (size_t)i * mn;
    if (k == 0) {
      for (size_t j = 0; j < mn; j++) ci[j] = 0.0f;
      continue;
    }
    if (m == 0 || n == 0) continue;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                a + (a_batched ? (size_t)i * mk : 0), trans_a ? m : k, b + (b_batched ? (size_t)i * kn : 0), trans_b ? k : n,
                0.0f, ci, n);
  }
  return NULL;
}

static napi_value SetThreads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int n = 0;
  if (argc != 1 || !whole(env, argv[0], &n) || n < 1) {
    napi_throw_type_error(env, NULL, "setThreads takes one int32 >= 1");
    return NULL;
  }
  openblas_set_num_threads(n);
  return NULL;
}

static napi_value Info(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out, config, corename, threads;
  CHECK(napi_create_object(env, &out));
  CHECK(napi_create_string_utf8(env, openblas_get_config(), NAPI_AUTO_LENGTH, &config));
  CHECK(napi_create_string_utf8(env, openblas_get_corename(), NAPI_AUTO_LENGTH, &corename));
  CHECK(napi_create_int32(env, openblas_get_num_threads(), &threads));
  CHECK(napi_set_named_property(env, out, "config", config));
  CHECK(napi_set_named_property(env, out, "corename", corename));
  CHECK(napi_set_named_property(env, out, "threads", threads));
  return out;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
    { "sgemmBatched", NULL, SgemmBatched, NULL, NULL, NULL, napi_default, NULL },
    { "setThreads", NULL, SetThreads, NULL, NULL, NULL, napi_default, NULL },
    { "info", NULL, Info, NULL, NULL, NULL, napi_default, NULL },
  };
  if (napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props) != napi_ok) return NULL;
  return exports;
}
