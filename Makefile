# Makefile: every target lands in the repo root.
#   make                 CPU trainer and tokenizer (always), CUDA targets when nvcc exists
#   make test            CPU test suite (plus the GPU suite when a GPU is present)
#   make train_gpt2cu    unsharded CUDA trainer (bf16)
#   make bench_adamw_cpu CPU AdamW GB/s against a memory copy
#   make bench_quant     CPU block quantization GB/s against a memory copy
#   make check-layout    zero/ and llmc/ against their layering (no circles, nothing upward)
CC ?= gcc
BUILD := build
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

# -ffp-contract=off: no silent FMA contraction, so CPU numerics are reproducible and
# match the GPU's separately rounded AdamW (llmc/numerics/adamw.h).
CFLAGS ?= -O3 -march=native
CFLAGS += -std=c11 -D_GNU_SOURCE -fopenmp -ffp-contract=off -Wall -Wextra -I.
# liburing: zero/io/nvme.c's io_uring engine; without it nvme.c builds with threads only.
URING_LIBS := $(shell printf '\043include <liburing.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo -luring)
# libcrypto (OpenSSL): zero/comm/bootstrap_tcp.c authenticates the bootstrap without MPI.
CRYPTO_LIBS := -lcrypto
LDLIBS = -lm -lz -lpcre2-8 -lcjson $(URING_LIBS) $(CRYPTO_LIBS)
# MPI: zero/ starts under mpirun/srun through it. Without an MPI installation (some GPU
# images) everything builds against zero/comm/mpi_stub and ranks start from RANK/WORLD_SIZE.
MPICC ?= mpicc
ifeq ($(shell command -v $(MPICC) 2>/dev/null),)
override MPICC := $(CC) -Izero/comm/mpi_stub
MPI_STUB_OBJ := $(BUILD)/zero/comm/mpi_stub/mpi_stub.o
$(info note: no MPI compiler wrapper found: building against zero/comm/mpi_stub (launch with RANK/WORLD_SIZE))
endif

CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
NVCCFLAGS ?= -O3 --use_fast_math
NVCCFLAGS += -std=c++17 $(CUDA_ARCHS) -I. -Xcompiler -Wall,-Wextra,-fopenmp \
             -Wno-deprecated-gpu-targets
# NCCL and cuDNN may live under the CUDA tree or in Python's site-packages (device image)
NV_SITE := $(wildcard /usr/local/lib/python3*/*-packages/nvidia /usr/lib/python3/dist-packages/nvidia)
NV_INC := $(foreach d,$(NV_SITE),$(addprefix -I,$(wildcard $(d)/cudnn/include $(d)/nccl/include)))
NV_LIB := $(foreach d,$(NV_SITE),$(addprefix -L,$(wildcard $(d)/cudnn/lib $(d)/nccl/lib)))
NVCCFLAGS += -I$(CUDA_HOME)/include $(NV_INC)
CUDA_LDLIBS = -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib $(NV_LIB) -lcublas -lcublasLt -lcudnn -lnccl \
              -lm -lz -lpcre2-8 -lcjson $(URING_LIBS) $(CRYPTO_LIBS) -lgomp

# llmc/: the host folders make libllmc.a, llmc/cuda/ the CUDA objects (llmc/README.md)
HOST_SRC := $(wildcard llmc/*.c llmc/numerics/*.c llmc/model/*.c llmc/data/*.c llmc/run/*.c llmc/cpu/*.c)
HOST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(HOST_SRC))
CUDA_SRC := $(wildcard llmc/cuda/*.cu)
CUDA_OBJ := $(patsubst %.cu,$(BUILD)/%.cu.o,$(CUDA_SRC))
HEADERS := $(wildcard llmc/*.h llmc/*/*.h llmc/*/*.cuh)
# zero/: everything but cuda/ makes libzero.a, cuda/ libzero_cuda.a (zero/README.md)
ZERO_HOST_DIRS := zero zero/kernels zero/io zero/comm zero/host
ZERO_SRC := $(wildcard $(addsuffix /*.c,$(ZERO_HOST_DIRS)))
ZERO_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(ZERO_SRC)) $(MPI_STUB_OBJ)
ZERO_HEADERS := $(wildcard zero/*.h zero/*/*.h) llmc/numerics/adamw.h llmc/numerics/adamw_cpu.h llmc/numerics/rand.h
# dev/test/: the tests in folders by area (dev/test/README.md); the binaries in one folder
TEST_SRC := $(wildcard dev/test/*/test_*.c)
TEST_BIN := $(addprefix $(BUILD)/tests/,$(basename $(notdir $(TEST_SRC))))
vpath test_%.c $(sort $(dir $(TEST_SRC)))

HAVE_NVCC := $(shell test -x "$(NVCC)" && echo 1)
CPU_TARGETS := train_gpt2 tokenize zero_consolidate zero_to_model
CUDA_TARGETS := train_gpt2cu train_gpt2_zero test_gpt2_zero bench_gpt2cu $(BUILD)/gpu_attention_cudnn $(BUILD)/gpu_zero_toy \
                $(BUILD)/gpu_zero_quant $(BUILD)/gpu_backend_ops bench_wire_cuda

.PHONY: all cpu cuda test test-programs clean check-layout
all: cpu $(if $(HAVE_NVCC),cuda)
cpu: $(CPU_TARGETS)
cuda: $(CUDA_TARGETS)

$(BUILD)/libllmc.a: $(HOST_OBJ)
	@mkdir -p $(dir $@)
	ar rcs $@ $^

# zero/ is built with mpicc (the host backend's collectives are MPI)
$(BUILD)/zero/comm/mpi_stub/%.o: zero/comm/mpi_stub/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Izero/comm/mpi_stub -c $< -o $@

$(BUILD)/zero/%.o: zero/%.c $(ZERO_HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -c $< -o $@

$(BUILD)/libzero.a: $(ZERO_OBJ)
	ar rcs $@ $^

# zero/'s CUDA backend and NCCL: no --use_fast_math (it would flush subnormals, and the
# CUDA kernels must match the host backend bit for bit).
ZERO_CUDA_OBJ := $(patsubst %.cu,$(BUILD)/%.cu.o,$(wildcard zero/cuda/*.cu)) \
                 $(patsubst %.c,$(BUILD)/%.o,$(wildcard zero/cuda/*.c))
ZERO_NVCCFLAGS = -O3 -std=c++17 $(CUDA_ARCHS) -I. -I$(CUDA_HOME)/include $(NV_INC) \
                 -Xcompiler -Wall,-Wextra -Wno-deprecated-gpu-targets
MPI_LDFLAGS := $(if $(MPI_STUB_OBJ),,$(shell $(MPICC) --showme:link 2>/dev/null))
MPI_CFLAGS := $(if $(MPI_STUB_OBJ),-Izero/comm/mpi_stub,$(shell $(MPICC) --showme:compile 2>/dev/null))
$(BUILD)/zero/%.cu.o: zero/%.cu $(ZERO_HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(ZERO_NVCCFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(BUILD)/libzero_cuda.a: $(ZERO_CUDA_OBJ)
	ar rcs $@ $^

# GPU test of zero/'s CUDA backend against the host backend (skips without a GPU)
$(BUILD)/gpu_zero_toy: dev/test/zero/gpu_zero_toy.c dev/test/zero/mpi_zero_toy.c dev/test/zero/zero_group_cases.h $(BUILD)/libzero_cuda.a \
                      $(BUILD)/libzero.a
	$(MPICC) $(CFLAGS) -I$(CUDA_HOME)/include $(NV_INC) -c $< -o $(BUILD)/gpu_zero_toy.o
	$(NVCC) -o $@ $(BUILD)/gpu_zero_toy.o $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a \
	    -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib $(NV_LIB) -lnccl $(MPI_LDFLAGS) -lcjson -lz $(URING_LIBS) $(CRYPTO_LIBS) -lgomp -lpthread -lm

# GPU test of zero/'s quantization kernels against the C reference (skips without a GPU)
$(BUILD)/gpu_zero_quant: dev/test/zero/gpu_zero_quant.c dev/test/zero/quant_cases.h $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a
	$(CC) $(CFLAGS) -I$(CUDA_HOME)/include -c $< -o $(BUILD)/gpu_zero_quant.o
	$(NVCC) -o $@ $(BUILD)/gpu_zero_quant.o $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a -L$(CUDA_HOME)/lib64 $(CRYPTO_LIBS) -lgomp -lm

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# GPT-2 on ZeRO: the glue both ZeRO trainers share (it includes llmc/ and zero/)
$(BUILD)/gpt2_zero.o: gpt2_zero.c gpt2_zero.h $(HEADERS) $(ZERO_HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -c $< -o $@

# The CPU trainer's ZeRO hooks: the glue above, the host backend, the CPU model
$(BUILD)/gpt2_zero_cpu.o: gpt2_zero_cpu.c gpt2_zero_cpu.h gpt2_zero.h $(HEADERS) $(ZERO_HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -c $< -o $@

# The CPU trainer drives zero/ over MPI (-z), so it is linked with mpicc.
CPU_ZERO_OBJ := $(BUILD)/gpt2_zero_cpu.o $(BUILD)/gpt2_zero.o
train_gpt2: train_gpt2.c gpt2_zero_cpu.h $(CPU_ZERO_OBJ) $(BUILD)/libllmc.a $(BUILD)/libzero.a
	$(MPICC) $(CFLAGS) $< $(CPU_ZERO_OBJ) $(BUILD)/libzero.a $(BUILD)/libllmc.a $(LDLIBS) -o $@

tokenize: tokenize.c $(BUILD)/libllmc.a
	$(CC) $(CFLAGS) $< $(BUILD)/libllmc.a $(LDLIBS) -o $@

# (--trace: zero/'s timeline and its GPU tracks, nothing else of zero/)
TRACE_OBJ := $(BUILD)/zero/trace.o $(BUILD)/zero/cuda/trace_gpu.cu.o
train_gpt2cu: train_gpt2.cu $(CUDA_OBJ) $(TRACE_OBJ) $(BUILD)/libllmc.a
	$(NVCC) $(NVCCFLAGS) $< $(CUDA_OBJ) $(TRACE_OBJ) $(BUILD)/libllmc.a $(CUDA_LDLIBS) -o $@

# The CUDA trainer with zero/ (CUDA backend + NCCL; MPI for mpirun start-up)
train_gpt2_zero: train_gpt2_zero.cu $(BUILD)/gpt2_zero.o $(CUDA_OBJ) $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a $(BUILD)/libllmc.a
	$(NVCC) $(NVCCFLAGS) $(MPI_CFLAGS) $< $(BUILD)/gpt2_zero.o $(CUDA_OBJ) $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a \
	    $(BUILD)/libllmc.a $(CUDA_LDLIBS) $(MPI_LDFLAGS) -o $@

test_gpt2_zero: test_gpt2_zero.cu dev/ref/gpt2_ref.h $(CUDA_OBJ) $(BUILD)/libllmc.a
	$(NVCC) $(NVCCFLAGS) $< $(CUDA_OBJ) $(BUILD)/libllmc.a $(CUDA_LDLIBS) -o $@

# CPU AdamW GB/s per SIMD path and thread count against a memory copy (and PyTorch's, if installed)
bench_adamw_cpu: dev/bench/bench_adamw_cpu.c llmc/numerics/adamw.h llmc/numerics/adamw_cpu.h llmc/numerics/rand.h
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

bench_gpt2cu: dev/bench/bench_gpt2cu.cu $(CUDA_OBJ) $(BUILD)/libllmc.a
	$(NVCC) $(NVCCFLAGS) $< $(CUDA_OBJ) $(BUILD)/libllmc.a $(CUDA_LDLIBS) -o $@

# Every ZeroBackend kernel on the host and CUDA backends against its C reference (skips without a GPU)
$(BUILD)/gpu_backend_ops: dev/test/zero/test_backend_ops.c dev/test/zero/wire_ref.h dev/test/zero/quant_cases.h \
                         $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a
	$(MPICC) $(CFLAGS) -DZERO_TEST_CUDA -I$(CUDA_HOME)/include $(NV_INC) -c $< -o $(BUILD)/gpu_backend_ops.o
	$(NVCC) -o $@ $(BUILD)/gpu_backend_ops.o $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a \
	    -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib $(NV_LIB) -lnccl $(MPI_LDFLAGS) -lcjson -lz $(URING_LIBS) $(CRYPTO_LIBS) -lgomp -lpthread -lm

# GPU test of the cuDNN attention against a host reference (skips without a GPU)
$(BUILD)/gpu_attention_cudnn: dev/test/cuda/gpu_attention_cudnn.cu $(BUILD)/llmc/cuda/attention_cudnn.cu.o
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $^ $(CUDA_LDLIBS) -o $@

# GPT-2-agnostic: sharded checkpoint -> raw fp32 + JSON index (no MPI needed)
zero_consolidate: zero/tools/zero_consolidate_main.c zero/io/consolidate.c zero/io/zckpt.c zero/io/zfile.c zero/partition.c $(ZERO_HEADERS)
	$(CC) $(CFLAGS) $(filter %.c,$^) -lcjson -lz -lm -o $@

# GPT-2: sharded checkpoint -> one llm.c model file
zero_to_model: dev/tools/zero_to_model.c $(BUILD)/libzero.a $(BUILD)/libllmc.a
	$(MPICC) $(CFLAGS) $< $(BUILD)/libzero.a $(BUILD)/libllmc.a $(LDLIBS) -o $@

# Block quantization GB/s against a memory copy: make bench_quant; ./bench_quant [elements] [repeats] [threads...]
bench_quant: dev/bench/bench_quant.c zero/kernels/quant.c zero/kernels/quant.h zero/kernels/quant_element.h zero/kernels/wire.c \
             zero/kernels/wire.h llmc/numerics/adamw.h llmc/numerics/rand.h
	$(CC) $(CFLAGS) dev/bench/bench_quant.c zero/kernels/quant.c zero/kernels/wire.c -lm -o $@

# ZeRO++ wire kernels on the GPU, GB/s against a device copy: make bench_wire_cuda; ./bench_wire_cuda [elements] [repeats] [block]
bench_wire_cuda: dev/bench/bench_wire_cuda.cu $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a
	$(NVCC) $(ZERO_NVCCFLAGS) $< $(BUILD)/libzero_cuda.a $(BUILD)/libzero.a -L$(CUDA_HOME)/lib64 $(CRYPTO_LIBS) -lgomp -lm -o $@

# NVMe engine throughput against plain O_DIRECT I/O: make bench_nvme; ./bench_nvme [DIR] [-s GiB]
bench_nvme: dev/bench/bench_nvme.c zero/io/nvme.c zero/io/nvme.h
	$(CC) $(CFLAGS) dev/bench/bench_nvme.c zero/io/nvme.c $(URING_LIBS) -lpthread -o $@

$(BUILD)/model_diff: dev/tools/model_diff.c $(BUILD)/libllmc.a
	$(CC) $(CFLAGS) $< $(BUILD)/libllmc.a $(LDLIBS) -o $@

$(BUILD)/model_bf16: dev/tools/model_bf16.c $(BUILD)/libllmc.a
	$(CC) $(CFLAGS) $< $(BUILD)/libllmc.a $(LDLIBS) -o $@

# Each test records what it includes (-MMD: a zero/ source some include directly, headers),
# so that it rebuilds when any of them changes.
$(BUILD)/tests/%: %.c dev/test/common/test_util.h $(BUILD)/libllmc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d $< $(BUILD)/libllmc.a $(LDLIBS) -lcmocka -o $@
-include $(wildcard $(BUILD)/tests/*.d)

# The PyTorch reference's reader.
$(BUILD)/tests/test_gpt2_ref: dev/ref/gpt2_ref.h

# Unit tests that call zero/'s host backend link libzero.a, hence MPI.
ZERO_TEST_BIN := $(BUILD)/tests/test_bf16_rounding $(BUILD)/tests/test_grad_norm $(BUILD)/tests/test_zero_quant \
                 $(BUILD)/tests/test_zero_wire $(BUILD)/tests/test_backend_ops $(BUILD)/tests/test_zero_buckets \
                 $(BUILD)/tests/test_dir_sync $(BUILD)/tests/test_zfile_crc
$(BUILD)/tests/test_zero_wire $(BUILD)/tests/test_backend_ops: dev/test/zero/wire_ref.h dev/test/zero/quant_cases.h
$(ZERO_TEST_BIN): $(BUILD)/tests/%: %.c dev/test/common/test_util.h $(BUILD)/libzero.a $(BUILD)/libllmc.a
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -MMD -MP -MF $@.d $< $(BUILD)/libzero.a $(BUILD)/libllmc.a $(LDLIBS) -lcmocka -o $@

# The CPU suite: unit tests (cmocka) and end-to-end trainer checks (shell), one summary.
# the emulated device: make emu (dev/cuda_emu/)
include dev/cuda_emu/emu.mk

EMU_TESTS := $(if $(HAVE_NVCC),emu $(EMU)/test_cublaslt_emu $(EMU)/test_cudnn_emu $(EMU)/test_nccl_emu)
# The programs build side by side on every core, unless make was given -j; then the tests
# run (dev/test/run_tests.sh; most of them side by side, TEST_JOBS).
NPROC := $(shell nproc 2>/dev/null || echo 1)
test:
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC)) test-programs
	@EMU_DIR=$(if $(HAVE_NVCC),$(EMU)) bash dev/test/run_tests.sh $(TEST_BIN)
test-programs: $(TEST_BIN) $(CPU_TARGETS) $(BUILD)/model_diff $(BUILD)/model_bf16 $(EMU_TESTS)

# zero/ and llmc/ keep their shape (dev/tools/check_layout.py; make test runs it too)
check-layout: $(HOST_OBJ) $(ZERO_OBJ)
	python3 dev/tools/check_layout.py

clean:
	rm -rf $(BUILD) $(CPU_TARGETS) $(CUDA_TARGETS) bench_nvme bench_adamw_cpu bench_quant

