# emu.mk (included by the Makefile): `make emu` builds the project's CUDA programs against the
# emulated device (dev/cuda_emu/README.md) into build/emu/. The sources are the ones nvcc
# builds: rewrite_launch.py copies them into build/emu/src with the launch syntax rewritten,
# g++ compiles them with cuda_emu.h force-included, and they link with the emulated
# runtime, cuBLASLt, cuDNN and NCCL instead of NVIDIA's libraries. The C sources are the
# normal objects. The launch limits come from nvcc --resource-usage of the same sources.
# EMU: another folder (with EMU_SAN) for a sanitizer build of the same programs. EMU_PTX:
# the real build's resource usage, shared by every emulated build.
EMU ?= $(BUILD)/emu
EMU_PTX := $(BUILD)/emu/ptxas
EMU_SRC_DIR := $(EMU)/src
EMU_CXX ?= g++
EMU_SAN ?=
# -fno-strict-aliasing: the CUDA sources move 16-byte vectors through int4 casts, as CUDA
# code does; the device compiler allows it, ISO C++ does not.
EMU_CXXFLAGS := -std=c++17 -O3 -march=native -g -fopenmp -ffp-contract=off -fno-strict-aliasing -Wall -Wextra \
                -Wno-attributes -Wno-unknown-pragmas \
                -I$(EMU_SRC_DIR) -Idev/cuda_emu -I$(CUDA_HOME)/include $(NV_INC) $(EMU_SAN)
# The CUDA sources' loads and stores call the kernel engine's memory checks (bounds,
# alignment, races: kernels.cpp) through gcc's ThreadSanitizer instrumentation, whose
# entry points the engine defines itself (no ThreadSanitizer runtime is linked). Not with
# a sanitizer build (EMU_SAN), which AddressSanitizer checks instead.
# Only sources that define kernels: in the others (the trainers' mains, the tests' host
# references) it would only slow host code down. -fno-tree-sra: gcc would otherwise split a
# 16-byte vector copy (int4, float4 through __ldcs and the like) into 4-byte accesses before
# instrumenting them, and their checks would pass a vector a GPU faults on as misaligned.
EMU_CHECKS := $(if $(EMU_SAN),,-fsanitize=thread --param tsan-instrument-func-entry-exit=0 -Wno-tsan -fno-tree-sra)
EMU_HOST_CU := train_gpt2.cu train_gpt2_zero.cu test_gpt2_zero.cu dev/test/cuda/gpu_attention_cudnn.cu dev/bench/bench_gpt2cu.cu
$(patsubst %.cu,$(EMU)/obj/%.cu.o,$(EMU_HOST_CU)): EMU_CHECKS :=
EMU_LDLIBS = -rdynamic $(MPI_LDFLAGS) -lm -lz -lpcre2-8 -lcjson $(URING_LIBS) $(CRYPTO_LIBS) -lgomp -lpthread -ldl $(EMU_SAN)

# every CUDA source of the project, as nvcc sees them
EMU_CU := $(wildcard llmc/cuda/*.cu zero/cuda/*.cu) train_gpt2.cu train_gpt2_zero.cu test_gpt2_zero.cu \
          dev/test/cuda/gpu_attention_cudnn.cu dev/cuda_emu/test/emu_selftest.cu dev/bench/bench_gpt2cu.cu
# The sources nvcc builds with --use_fast_math (NVCCFLAGS: all but zero/cuda/, whose rule
# leaves it out, and the emulator's own test): their approximate intrinsics flush
# subnormals (cuda_emu.h).
EMU_FAST_MATH_CU := $(filter-out zero/cuda/% dev/cuda_emu/%,$(EMU_CU))
$(patsubst %.cu,$(EMU)/obj/%.cu.o,$(EMU_FAST_MATH_CU)): EMU_MATH := $(if $(findstring use_fast_math,$(NVCCFLAGS)),-DEMU_FAST_MATH)
EMU_CU_HEADERS := $(wildcard *.h llmc/*.h llmc/*/*.h llmc/*/*.cuh zero/*.h zero/*/*.h dev/ref/*.h)
# the emulated libraries present (cublaslt.cpp and cudnn.cpp join as they land)
EMU_RUNTIME := $(patsubst dev/cuda_emu/%.cpp,%,$(wildcard dev/cuda_emu/*.cpp))
EMU_RUNTIME_OBJ := $(addprefix $(EMU)/rt/,$(addsuffix .o,$(EMU_RUNTIME))) $(EMU)/rt/cuda_errors.o \
                   $(EMU)/rt/launch_limits.o

# the mirror: one rewrite of every CUDA source and header (only changed files are written)
$(EMU)/src.stamp: $(EMU_CU) $(EMU_CU_HEADERS) dev/cuda_emu/rewrite_launch.py
	@mkdir -p $(EMU_SRC_DIR)
	python3 dev/cuda_emu/rewrite_launch.py $(EMU_SRC_DIR) $(EMU_CU) $(EMU_CU_HEADERS)
	@touch $@

$(EMU)/obj/%.cu.o: $(EMU)/src.stamp dev/cuda_emu/cuda_emu.h dev/cuda_emu/device.h dev/cuda_emu/emu.h
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) $(EMU_CHECKS) $(EMU_MATH) $(MPI_CFLAGS) -x c++ -include cuda_emu.h -c $(EMU_SRC_DIR)/$*.cu -o $@

$(EMU)/rt/%.o: dev/cuda_emu/%.cpp dev/cuda_emu/emu.h dev/cuda_emu/device.h
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) -c $< -o $@

$(EMU)/rt/cuda_errors.cpp: dev/cuda_emu/gen_errors.py
	@mkdir -p $(dir $@)
	python3 dev/cuda_emu/gen_errors.py $(CUDA_HOME)/include $@

$(EMU)/rt/cuda_errors.o: $(EMU)/rt/cuda_errors.cpp
	$(EMU_CXX) $(EMU_CXXFLAGS) -c $< -o $@

# Launch limits: each CUDA source compiled as the real build compiles it, with
# --resource-usage (registers and shared memory per kernel, sm_80 and sm_90).
EMU_PTXAS := $(patsubst %.cu,$(EMU_PTX)/%.txt,$(EMU_CU))
$(EMU_PTX)/%.txt: %.cu $(HEADERS) $(ZERO_HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(if $(filter zero/%,$<),$(ZERO_NVCCFLAGS),$(NVCCFLAGS)) $(MPI_CFLAGS) --resource-usage -c $< \
	    -o $(EMU_PTX)/$*.o > $@ 2>&1 || { cat $@; rm -f $@; exit 1; }
$(EMU)/rt/launch_limits.cpp: $(EMU_PTXAS) dev/cuda_emu/launch_limits.py
	python3 dev/cuda_emu/launch_limits.py table $@ $(EMU_PTXAS) -- $(EMU_CU)
$(EMU)/rt/launch_limits.o: $(EMU)/rt/launch_limits.cpp
	$(EMU_CXX) $(EMU_CXXFLAGS) -c $< -o $@

$(EMU)/libcudaemu.a: $(EMU_RUNTIME_OBJ)
	ar rcs $@ $^

EMU_LLMC_OBJ := $(patsubst %.cu,$(EMU)/obj/%.cu.o,$(wildcard llmc/cuda/*.cu))
EMU_ZERO_OBJ := $(patsubst %.cu,$(EMU)/obj/%.cu.o,$(wildcard zero/cuda/*.cu)) $(patsubst %.c,$(BUILD)/%.o,$(wildcard zero/cuda/*.c))
EMU_PROGRAMS := $(EMU)/gpu_zero_quant $(EMU)/gpu_backend_ops $(EMU)/emu_selftest $(EMU)/gpu_zero_toy $(EMU)/test_gpt2_zero \
                $(EMU)/gpu_attention_cudnn $(EMU)/train_gpt2cu $(EMU)/train_gpt2_zero $(EMU)/bench_gpt2cu

$(EMU)/gpu_zero_quant: dev/test/zero/gpu_zero_quant.c dev/test/zero/quant_cases.h $(EMU_ZERO_OBJ) $(BUILD)/libzero.a $(EMU)/libcudaemu.a
	$(CC) $(CFLAGS) -I$(CUDA_HOME)/include -c $< -o $(EMU)/gpu_zero_quant.o
	$(EMU_CXX) -o $@ $(EMU)/gpu_zero_quant.o $(EMU_ZERO_OBJ) $(BUILD)/libzero.a $(EMU)/libcudaemu.a $(EMU_LDLIBS)

# the emulator's own tests of its kernel engine and runtime (barriers, shuffles, streams)
$(EMU)/emu_selftest: $(EMU)/obj/dev/cuda_emu/test/emu_selftest.cu.o $(EMU)/libcudaemu.a
	$(EMU_CXX) -o $@ $^ $(EMU_LDLIBS)

# the emulated libraries' own tests (host C++ against the emulated runtime, no kernels of their own)
$(EMU)/test_%: dev/cuda_emu/test/test_%.cpp $(EMU)/libcudaemu.a
	$(EMU_CXX) $(EMU_CXXFLAGS) $< $(EMU)/libcudaemu.a $(EMU_LDLIBS) -o $@

.PHONY: emu
emu: $(EMU_PROGRAMS)

# every ZeroBackend kernel on the host and the emulated CUDA backend (test_backend_ops.c)
$(EMU)/gpu_backend_ops: dev/test/zero/test_backend_ops.c dev/test/zero/wire_ref.h dev/test/zero/quant_cases.h \
                        $(EMU_ZERO_OBJ) $(BUILD)/libzero.a $(EMU)/libcudaemu.a
	$(MPICC) $(CFLAGS) -DZERO_TEST_CUDA -I$(CUDA_HOME)/include $(NV_INC) -c $< -o $(EMU)/gpu_backend_ops.o
	$(EMU_CXX) -o $@ $(EMU)/gpu_backend_ops.o $(EMU_ZERO_OBJ) $(BUILD)/libzero.a $(EMU)/libcudaemu.a $(EMU_LDLIBS)

# zero/'s CUDA backend against the host backend and the toy model (gpu_zero_toy.c)
$(EMU)/gpu_zero_toy: dev/test/zero/gpu_zero_toy.c dev/test/zero/mpi_zero_toy.c dev/test/zero/zero_group_cases.h dev/test/zero/zero_toy_model.h \
                     $(EMU_ZERO_OBJ) $(BUILD)/libzero.a $(EMU)/libcudaemu.a
	$(MPICC) $(CFLAGS) -I$(CUDA_HOME)/include $(NV_INC) -c $< -o $(EMU)/gpu_zero_toy.o
	$(EMU_CXX) -o $@ $(EMU)/gpu_zero_toy.o $(EMU_ZERO_OBJ) $(BUILD)/libzero.a $(EMU)/libcudaemu.a $(EMU_LDLIBS)

# The CUDA model, its tests and both CUDA trainers
$(EMU)/test_gpt2_zero: $(EMU)/obj/test_gpt2_zero.cu.o $(EMU_LLMC_OBJ) $(BUILD)/libllmc.a $(EMU)/libcudaemu.a
	$(EMU_CXX) -o $@ $^ $(EMU_LDLIBS)
$(EMU)/gpu_attention_cudnn: $(EMU)/obj/dev/test/cuda/gpu_attention_cudnn.cu.o $(EMU)/obj/llmc/cuda/attention_cudnn.cu.o \
                            $(BUILD)/libllmc.a $(EMU)/libcudaemu.a
	$(EMU_CXX) -o $@ $^ $(EMU_LDLIBS)
$(EMU)/bench_gpt2cu: $(EMU)/obj/dev/bench/bench_gpt2cu.cu.o $(EMU_LLMC_OBJ) $(BUILD)/libllmc.a $(EMU)/libcudaemu.a
	$(EMU_CXX) -o $@ $^ $(EMU_LDLIBS)
$(EMU)/train_gpt2cu: $(EMU)/obj/train_gpt2.cu.o $(EMU_LLMC_OBJ) $(BUILD)/zero/trace.o $(EMU)/obj/zero/cuda/trace_gpu.cu.o \
                     $(BUILD)/libllmc.a $(EMU)/libcudaemu.a
	$(EMU_CXX) -o $@ $^ $(EMU_LDLIBS)
$(EMU)/train_gpt2_zero: $(EMU)/obj/train_gpt2_zero.cu.o $(BUILD)/gpt2_zero.o $(EMU_LLMC_OBJ) $(EMU_ZERO_OBJ) \
                        $(BUILD)/libzero.a $(BUILD)/libllmc.a $(EMU)/libcudaemu.a
	$(EMU_CXX) -o $@ $^ $(EMU_LDLIBS)

# The mutation score of the emulated suite (dev/cuda_emu/mutate.py; README "Mutation score").
.PHONY: mutate
mutate:
	python3 dev/cuda_emu/mutate.py $(MUTATE_ARGS)
