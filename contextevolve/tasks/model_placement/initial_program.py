"""Model placement: put every model on one GPU so that the worst KV-cache pressure is small."""

GPU_MEM_SIZE = 80  # GB of memory per GPU

# EVOLVE-BLOCK-START


def compute_model_placement(gpu_num, models):
    """Place each model on exactly one GPU, minimising the maximum KV-cache pressure (KVPR).

    KVPR of a GPU = sum(req_rate / slo) of its models / (GPU_MEM_SIZE - sum(model_size)).

    Args:
        gpu_num: number of GPUs, ids 0 .. gpu_num - 1.
        models: objects with model_name, model_size (GB), req_rate, slo, cur_gpu_id.

    Returns:
        dict {gpu_id: [model, ...]} holding every given model object exactly once.
    """
    # Greedy: most demanding models first (largest req_rate / slo), each onto the GPU
    # whose current KVPR is lowest among those with room for it.
    ordered = sorted(models, key=lambda m: m.req_rate / m.slo, reverse=True)
    placement = {gpu_id: [] for gpu_id in range(gpu_num)}
    free_mem = [GPU_MEM_SIZE] * gpu_num
    load = [0.0] * gpu_num  # sum of req_rate / slo per GPU

    for model in ordered:
        best_gpu, best_kvpr = None, float("inf")
        for gpu_id in range(gpu_num):
            if model.model_size <= free_mem[gpu_id] and free_mem[gpu_id] > 0:
                kvpr = load[gpu_id] / free_mem[gpu_id]
                if kvpr < best_kvpr:
                    best_gpu, best_kvpr = gpu_id, kvpr
        if best_gpu is None:
            raise ValueError(f"no GPU has {model.model_size} GB free for {model.model_name}")
        placement[best_gpu].append(model)
        load[best_gpu] += model.req_rate / model.slo
        free_mem[best_gpu] -= model.model_size

    return placement


# EVOLVE-BLOCK-END
