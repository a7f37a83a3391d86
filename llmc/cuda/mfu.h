// mfu.h: model FLOPs utilization. Peak dense bf16 tensor-core throughput by GPU name
// (no sparsity), and MFU = flops per token * tokens per second / peak.
#ifndef LLMC_MFU_H
#define LLMC_MFU_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

// Peak dense bf16 FLOP/s of the current device, or 0 when the GPU is not in the table.
// *name receives the device name (at least 256 bytes) when not NULL.
static inline double mfu_peak_bf16_flops(char *name) {
    cudaDeviceProp p;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        if (name) strcpy(name, "unknown");
        return 0.0;
    }
    if (name) snprintf(name, 256, "%s", p.name);
    const char *n = p.name;
    // Order matters: specific variants before the family name.
    if (strstr(n, "H100") && strstr(n, "PCIe")) return 756e12;
    if (strstr(n, "H100") && strstr(n, "NVL")) return 835e12;
    if (strstr(n, "H100") || strstr(n, "H200") || strstr(n, "H800") || strstr(n, "GH200")) return 989e12;
    if (strstr(n, "A100") || strstr(n, "A800")) return 312e12;
    return 0.0;
}

// MFU in [0, 1]; 0 when the peak is unknown.
static inline double mfu(double flops_per_token, double tokens_per_second, double peak_flops) {
    return peak_flops > 0.0 ? flops_per_token * tokens_per_second / peak_flops : 0.0;
}

#endif
