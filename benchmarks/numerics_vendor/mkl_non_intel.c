/* MKL's own CPU questions answered as on an AMD Zen CPU: not Intel's, a Zen. MKL then runs its non-Intel path
   (its generic and Zen kernels) whatever MKL_CBWR says. Loaded with LD_PRELOAD: MKL, linked into libtorch_cpu,
   asks these through the dynamic linker, so the answers here are the ones it gets. */
int mkl_serv_intel_cpu_true(void) { return 0; }
int mkl_serv_intel_cpu(void) { return 0; }
int mkl_serv_cpuiszen(void) { return 1; }
