"""Model placement heuristic baseline: round robin (model i onto GPU i mod gpu_num).

This is what a naive serving scheduler does.
"""


def compute_model_placement(gpu_num, models):
    """Deal the models to the GPUs in arrival order; there are 2 models per GPU, so memory always fits."""
    placement = {g: [] for g in range(gpu_num)}
    for i, model in enumerate(models):
        placement[i % gpu_num].append(model)
    return placement
