"""Quantized weights: linear layers in int8, int4 and w8a8 (kernels), the 4-bit grids read from GGUF files (grids,
grid_cache), the CPU's features (cpu), and the one function that converts a model (weights.apply_weight_format)."""
