#pragma once
// The one header that includes the vendor's <cblas.h>, and everything that differs
// between BLAS libraries: what to call the library in the device description and how to
// set its thread count.
//
// OpenBLAS is recognised by the macro its cblas.h defines (OPENBLAS_VERSION, from
// openblas_config.h): its thread count is set with openblas_set_num_threads, and the
// description names the kernel family it picked when it loaded (openblas_get_corename),
// which is where a slow fallback kernel shows (docs/backends/blas.md, OPENBLAS_CORETYPE).
// Any other cblas works too; it then runs on the threads its own settings give it
// (MKL_NUM_THREADS, BLIS_NUM_THREADS, ...).
//
// Note that including this header brings the vendor's macros with it (OpenBLAS defines a
// few short names such as BLASFUNC and xdouble): only <backplane/backends/blas.hpp>
// includes it, never the umbrella <backplane/backplane.hpp>.

#include <cblas.h>

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>

// OpenBLAS's own functions (openblas_set_num_threads, openblas_get_corename) are used
// when its cblas.h is the one included, unless BACKPLANE_BLAS_NO_OPENBLAS_API says the
// library linked lacks them (the CMake target defines it for Debian's OpenBLAS-built
// libblas.so.3, which exports the cblas functions only).
#if defined(OPENBLAS_VERSION) && !defined(BACKPLANE_BLAS_NO_OPENBLAS_API)
#define BACKPLANE_BLAS_OPENBLAS_API 1
#else
#define BACKPLANE_BLAS_OPENBLAS_API 0
#endif

namespace backplane::blas::detail {

/// True when the library is OpenBLAS and its own functions are available.
inline constexpr bool is_openblas = BACKPLANE_BLAS_OPENBLAS_API != 0;

/// The largest dimension or leading dimension cblas takes (its integers are int here,
/// 64-bit only in ILP64 builds; int is what every build accepts).
inline constexpr std::int64_t max_blas_int = INT_MAX;

/// "OpenBLAS 0.3.21, core SkylakeX" (the kernels chosen when the library loaded), or
/// "cblas" for another library.
inline std::string library_description() {
#ifdef OPENBLAS_VERSION
    std::string_view version = OPENBLAS_VERSION; // " OpenBLAS 0.3.21 "
    while (!version.empty() && version.front() == ' ') version.remove_prefix(1);
    while (!version.empty() && version.back() == ' ') version.remove_suffix(1);
    std::string s(version);
#if BACKPLANE_BLAS_OPENBLAS_API
    if (const char* core = openblas_get_corename(); core != nullptr && *core != '\0') {
        s += ", core ";
        s += core;
    }
#endif
    return s;
#else
    return "cblas";
#endif
}

/// Asks the library to use n threads from now on. OpenBLAS keeps one process-wide
/// setting, so each backend calls this before its products; another cblas is left alone.
inline void set_library_threads(int n) noexcept {
#if BACKPLANE_BLAS_OPENBLAS_API
    openblas_set_num_threads(n);
#else
    (void)n;
#endif
}

/// c = b * a^T in row-major terms: b is n rows of k (stride ldb), a is m rows of k (stride
/// lda), c is n rows of m (stride ldc); c is overwritten, never read (beta = 0).
/// Every argument fits in an int (the caller checked: supports.hpp).
inline void sgemm_b_at(int n, int m, int k, const float* b, int ldb, const float* a, int lda, float* c,
                       int ldc) noexcept {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, b, ldb, a, lda, 0.0f, c, ldc);
}

} // namespace backplane::blas::detail
