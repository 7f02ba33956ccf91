// The one place that includes cpp-httplib. Debian's libcpp-httplib-dev is the split build (the
// implementation lives in libcpp-httplib.so), compiled with OpenSSL, zlib and brotli support;
// the same macros are defined here so the declarations match the library's.
#pragma once
#if __has_include(<openssl/ssl.h>) && !defined(CPPHTTPLIB_OPENSSL_SUPPORT)
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#if __has_include(<zlib.h>) && !defined(CPPHTTPLIB_ZLIB_SUPPORT)
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#if __has_include(<brotli/decode.h>) && !defined(CPPHTTPLIB_BROTLI_SUPPORT)
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>
