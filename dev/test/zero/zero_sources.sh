# zero_sources.sh (sourced): zero/'s sources by folder, for the tests that build the plugin
# themselves with flags of their own. The Makefile's ZERO_HOST_DIRS names the same folders.
ZERO_HOST_SRC=(zero/*.c zero/kernels/*.c zero/io/*.c zero/comm/*.c zero/host/*.c)
ZERO_CUDA_SRC=(zero/cuda/*.c zero/cuda/*.cu)
