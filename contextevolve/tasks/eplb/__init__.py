"""Expert-parallel load balancing (LB, ADRS EPLB): replicate and place MoE experts on GPUs."""
