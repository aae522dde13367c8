/* The single-precision entry points of MKL's vector math that ATen calls for element-wise functions
   (torch.sqrt, exp, log, sin, cos, tanh, ...), computed in double precision by the C library and rounded to
   float once: no approximate instruction, so the same bits on every x86-64 CPU with the same C library.
   Loaded with LD_PRELOAD (MKL's entry points are resolved through the dynamic linker). The MKL_INT64 mode
   argument (accuracy, denormals, errors) is ignored. */
#include <math.h>
#include <stdint.h>

#define ROUNDED(name, fn)                                                                      \
    void name(int n, const float *a, float *r, long long mode) {                              \
        (void)mode;                                                                            \
        for (int i = 0; i < n; i++) r[i] = (float)fn((double)a[i]);                            \
    }                                                                                          \
    void name##_64(int64_t n, const float *a, float *r, long long mode) {                     \
        (void)mode;                                                                            \
        for (int64_t i = 0; i < n; i++) r[i] = (float)fn((double)a[i]);                        \
    }

ROUNDED(vmsSqrt, sqrt)
ROUNDED(vmsExp, exp)
ROUNDED(vmsExpm1, expm1)
ROUNDED(vmsLn, log)
ROUNDED(vmsLog1p, log1p)
ROUNDED(vmsLog10, log10)
ROUNDED(vmsLog2, log2)
ROUNDED(vmsCos, cos)
ROUNDED(vmsSin, sin)
ROUNDED(vmsTan, tan)
ROUNDED(vmsTanh, tanh)
ROUNDED(vmsAcos, acos)
ROUNDED(vmsAsin, asin)
ROUNDED(vmsAtan, atan)
ROUNDED(vmsErf, erf)
ROUNDED(vmsErfc, erfc)
ROUNDED(vmsTrunc, trunc)
ROUNDED(vmsLGamma, lgamma)
