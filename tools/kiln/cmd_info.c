/* `kiln info`: how this kiln was built and what it finds on this machine. */
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/conv_onednn.h"
#include "backends/cpu/gemm_provider.h"
#include "backends/cpu/onednn.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln_build_config.h"

int kiln_cmd_info(int argc, char **argv) {
    if (argc > 1) {
        bool help = kiln_wants_help(argc, argv);
        fprintf(help ? stdout : stderr,
                "usage: kiln info\n"
                "  how this kiln was built (compiler, sanitizers, CUDA, MPI, NCCL, BLAS, oneDNN) and what it\n"
                "  finds: the matmul and convolution providers per dtype (and oneDNN's effective ISA), threads,\n"
                "  mode, shadow, default device, devices. It takes no options; the environment sets what it reports\n"
                "  (KILN_THREADS, KILN_MODE, KILN_SHADOW, KILN_DEVICE, KILN_GEMM; kiln help lists them).\n");
        return help ? 0 : 2;
    }
    printf("kiln %s (%s build, %s)\n", kn_version(), KILN_BUILD_TYPE, KILN_BUILD_DATE);
    printf("compiler:      %s\n", KILN_C_COMPILER);
    printf("tuned native:  %s\n", KILN_BUILD_NATIVE);
    printf("sanitizers:    %s\n", KILN_BUILD_SANITIZE);
    printf("CUDA toolkit:  %s (found at build time; the CUDA backend is not built yet)\n", KILN_BUILD_CUDA_TOOLKIT);
    printf("MPI:           %s\n", KILN_BUILD_MPI);
    printf("NCCL:          %s\n", KILN_BUILD_NCCL);
    printf("BLAS:          %s\n", openblas_get_config());
    if (strcmp(KILN_BUILD_ONEDNN, "ON") == 0)
        printf("oneDNN:        ON (effective ISA %s, AMX permission %s)\n", kn_onednn_isa(), kn_onednn_amx());
    else
        printf("oneDNN:        OFF (not built in)\n");
    const kn_dtype dts[] = {KN_F32, KN_F64, KN_BF16, KN_F16};
    kn_gemm_provider chosen[4];
    bool chose = true;
    for (int i = 0; i < 4 && chose; i++) chose = kn_gemm_choice(dts[i], &chosen[i]) == KN_OK;
    if (chose)
        printf("matmul:        f32 %s, f64 %s, bf16 %s, f16 %s (KILN_GEMM forces one)\n",
               kn_gemm_provider_name(chosen[0]), kn_gemm_provider_name(chosen[1]), kn_gemm_provider_name(chosen[2]),
               kn_gemm_provider_name(chosen[3]));
    else
        printf("matmul:        %s\n", kn_last_error());
    char conv[4][96];
    for (int i = 0; i < 4 && chose; i++) chose = kn_conv_choice(dts[i], conv[i], sizeof conv[i]) == KN_OK;
    if (chose)
        printf("conv:          f32 %s, f64 %s, bf16 %s, f16 %s\n", conv[0], conv[1], conv[2], conv[3]);
    printf("threads:       %d\n", kn_get_num_threads());
    printf("mode:          %s\n", kn_mode_name(kn_get_mode()));
    const char *shadow = kn_get_shadow();
    printf("shadow:        %s\n", shadow ? shadow : "off (KILN_SHADOW=cpu checks every debug-mode op in float64)");
    kn_device def = kn_default_device();
    printf("default device: %s:%d\n", kn_device_type_name(def.type), def.index);
    printf("devices:\n");
    for (int t = 0; t < KN_DEVICE_TYPE_COUNT; t++) {
        kn_device d = {(kn_device_type)t, 0};
        printf("  %-5s %s\n", kn_device_type_name(d.type), kn_device_available(d) ? "available" : "not available");
    }
    if (kn_last_status() != KN_OK) {
        fprintf(stderr, "kiln info: %s\n", kn_last_error());
        return 1;
    }
    return 0;
}
