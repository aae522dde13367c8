/* Every CPUID instruction of this process answered as an AMD EPYC of family 17h (Zen 2) would: vendor
   AuthenticAMD, no AVX-512, AMD's cache leaves. Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, on CPUs
   that offer it: the cpuid_fault flag) turns each CPUID into a SIGSEGV, answered here from a table made before
   faulting starts; threads started later inherit it. Loaded with LD_PRELOAD, so every library the process
   loads — MKL, ATen's cpuinfo, oneDNN — sees the AMD CPU. $AMD_CPUID_SIGNATURE (hex, CPUID leaf 1's EAX)
   picks another family or model. Instructions are not emulated: the CPU's own arithmetic still runs. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef ARCH_SET_CPUID
#define ARCH_SET_CPUID 0x1012
#endif

typedef struct { uint32_t a, b, c, d; } regs;
static struct sigaction previous;
static uint32_t signature = 0x00830F10;

static void real(uint32_t leaf, uint32_t sub, regs *r) { __cpuid_count(leaf, sub, r->a, r->b, r->c, r->d); }

static regs basic[0x21][8];
static regs ext1;

static void emulate(uint32_t leaf, uint32_t sub, regs *r) {
    memset(r, 0, sizeof *r);
    const uint32_t AUTH = 0x68747541, ENTI = 0x69746e65, CAMD = 0x444d4163;
    if (leaf == 0) { r->a = 0x10; r->b = AUTH; r->d = ENTI; r->c = CAMD; return; }
    if (leaf <= 0x10) {
        if (leaf == 4) return;                                  /* reserved on AMD */
        *r = basic[leaf][sub < 8 ? sub : 7];
        if (leaf == 1) {
            r->a = signature;                                   /* default: family 17h, model 31h, stepping 0 */
            r->c &= ~((1u << 5) | (1u << 6) | (1u << 7) | (1u << 8) | (1u << 10) | (1u << 14) | (1u << 15) |
                      (1u << 18));                              /* VMX SMX EST TM2 CNXT xTPR PDCM DCA */
        }
        if (leaf == 7) {
            if (sub != 0) { memset(r, 0, sizeof *r); return; }
            r->a = 0;
            /* keep FSGSBASE BMI1 AVX2 SMEP BMI2 RDSEED ADX SMAP CLFLUSHOPT CLWB SHA */
            {
            r->b &= (1u << 0) | (1u << 3) | (1u << 5) | (1u << 7) | (1u << 8) | (1u << 18) | (1u << 19) |
                    (1u << 20) | (1u << 23) | (1u << 24) | (1u << 29);
            r->c &= (1u << 2) | (1u << 22);                      /* UMIP RDPID */
            }
            r->d = 0;
        }
        if (leaf == 0xd && sub == 0) { r->a &= 0x7; }            /* x87 SSE AVX state only */
        if (leaf == 0xd && sub > 1 && sub != 2) { memset(r, 0, sizeof *r); }
        if (leaf == 0xa) memset(r, 0, sizeof *r);
        return;
    }
    if (leaf == 0x80000000) { r->a = 0x80000020; r->b = AUTH; r->d = ENTI; r->c = CAMD; return; }
    if (leaf == 0x80000001) {
        r->a = signature; r->b = 0;
        r->c = (1u << 0) | (1u << 1) | (1u << 5) | (1u << 6) | (1u << 7) | (1u << 8) | (1u << 22) | (1u << 23);
        r->d = ext1.d | (1u << 22) | (1u << 25);
        return;
    }
    if (leaf >= 0x80000002 && leaf <= 0x80000004) {
        static const char brand[48] = "AMD EPYC 7B12 64-Core Processor";
        memcpy(r, brand + 16 * (leaf - 0x80000002), 16);
        return;
    }
    if (leaf == 0x80000005) { r->a = 0xFF40FF40; r->b = 0xFF40FF40; r->c = 0x20080140; r->d = 0x20080140; return; }
    if (leaf == 0x80000006) { r->a = 0x48006400; r->b = 0x68006400; r->c = 0x02006140; r->d = 0x00809140; return; }
    if (leaf == 0x80000007) { r->d = 1u << 8; return; }
    if (leaf == 0x80000008) { r->a = 0x3030; r->b = 0; r->c = 0x1001; return; }
    if (leaf == 0x8000001D) {
        static const regs caches[4] = {{0x121, 0x01C0003F, 0x3F, 0}, {0x122, 0x01C0003F, 0x3F, 0},
                                       {0x143, 0x01C0003F, 0x3FF, 2}, {0x163, 0x03C0003F, 0x3FFF, 1}};
        if (sub < 4) *r = caches[sub];
        return;
    }
    if (leaf == 0x8000001E) { r->b = 0x100; return; }
}

static void on_segv(int sig, siginfo_t *info, void *ctx) {
    ucontext_t *uc = ctx;
    uint8_t *ip = (uint8_t *)uc->uc_mcontext.gregs[REG_RIP];
    if (ip[0] == 0x0F && ip[1] == 0xA2) {
        regs r;
        emulate((uint32_t)uc->uc_mcontext.gregs[REG_RAX], (uint32_t)uc->uc_mcontext.gregs[REG_RCX], &r);
        uc->uc_mcontext.gregs[REG_RAX] = r.a; uc->uc_mcontext.gregs[REG_RBX] = r.b;
        uc->uc_mcontext.gregs[REG_RCX] = r.c; uc->uc_mcontext.gregs[REG_RDX] = r.d;
        uc->uc_mcontext.gregs[REG_RIP] += 2;
        return;
    }
    if (previous.sa_flags & SA_SIGINFO) { previous.sa_sigaction(sig, info, ctx); return; }
    if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
        signal(SIGSEGV, SIG_DFL);
        return;                                                 /* re-executes and dies by default */
    }
    previous.sa_handler(sig);
}


__attribute__((constructor)) static void start(void) {
    if (getenv("AMD_CPUID_SIGNATURE")) signature = (uint32_t)strtoul(getenv("AMD_CPUID_SIGNATURE"), 0, 16);
    for (uint32_t l = 1; l <= 0x10; l++)
        for (uint32_t s = 0; s < 8; s++) real(l, s, &basic[l][s]);
    real(0x80000001, 0, &ext1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, &previous);
    if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) { perror("cpuid_amd: ARCH_SET_CPUID"); exit(3); }
}
