// A Node-API addon for glibc's malloc, built by build.ts; Linux with glibc only.
//
// trim(): malloc_trim(0), which hands the free pages inside every malloc arena back to the
// system. Freeing alone returns only the top of an arena, so the memory that ended worker
// threads, OpenSSL and message buffers freed stays resident without it (bench/README.md § idle).
//
// setTrimThreshold(bytes): mallopt(M_TRIM_THRESHOLD). malloc_trim never shrinks the free top of a
// thread's arena, only the main one's; a thread's own free() does, once the top is over the
// threshold. glibc raises that threshold to twice the largest mapped block freed so far (up to
// 64 MiB), so after one big buffer a thread's freed tops stayed resident. Setting it fixes it
// (and the mapping threshold at its value then, 128 KiB unless configured).
#include <malloc.h>
#include <node_api.h>

static napi_value trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value released;
  napi_get_boolean(env, malloc_trim(0) == 1, &released);
  return released;
}

static napi_value set_trim_threshold(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int64_t bytes = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int64(env, argv[0], &bytes) != napi_ok) bytes = -1;
  napi_value set;
  napi_get_boolean(env, bytes >= 0 && bytes <= 0x7fffffff && mallopt(M_TRIM_THRESHOLD, (int)bytes) == 1, &set);
  return set;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "trim", NAPI_AUTO_LENGTH, trim, NULL, &fn);
  napi_set_named_property(env, exports, "trim", fn);
  napi_create_function(env, "setTrimThreshold", NAPI_AUTO_LENGTH, set_trim_threshold, NULL, &fn);
  napi_set_named_property(env, exports, "setTrimThreshold", fn);
  return exports;
}
