// A Node-API addon with one function, trim(): glibc's malloc_trim(0), which hands the free pages
// inside every malloc arena back to the system. Freeing alone returns only the top of an arena, so
// the memory that ended worker threads, OpenSSL and message buffers freed stays resident without
// it (bench/README.md § idle). Built by build.ts; Linux with glibc only.
#include <malloc.h>
#include <node_api.h>

static napi_value trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value released;
  napi_get_boolean(env, malloc_trim(0) == 1, &released);
  return released;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "trim", NAPI_AUTO_LENGTH, trim, NULL, &fn);
  napi_set_named_property(env, exports, "trim", fn);
  return exports;
}
