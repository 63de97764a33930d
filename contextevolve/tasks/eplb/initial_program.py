"""Expert-parallel load balancer: replicate hot MoE experts and place the replicas on GPUs."""

import torch

# EVOLVE-BLOCK-START


def balanced_packing(weight, num_packs):
    """Split the items of each row into ``num_packs`` packs of equal size with balanced weight.

    Greedy: heaviest item first, into the lightest pack that still has room.
    weight: [rows, items] float tensor. Returns (pack_index, rank_in_pack), both [rows, items] int64.
    """
    rows, items = weight.shape
    per_pack = items // num_packs
    pack_index = torch.full((rows, items), -1, dtype=torch.int64)
    rank_in_pack = torch.full((rows, items), -1, dtype=torch.int64)
    for r in range(rows):
        loads = [0.0] * num_packs
        counts = [0] * num_packs
        for item in torch.argsort(weight[r], descending=True).tolist():
            pack = min((p for p in range(num_packs) if counts[p] < per_pack), key=lambda p: loads[p])
            pack_index[r, item] = pack
            rank_in_pack[r, item] = counts[pack]
            loads[pack] += float(weight[r, item])
            counts[pack] += 1
    return pack_index, rank_in_pack


def replicate_experts(weight, num_physical):
    """Give each logical expert one replica, then add replicas to the highest load per replica.

    Repeatedly adds one replica to the expert with the highest load per replica.
    weight: [rows, n_logical]. Returns (phy2log, rank, logcnt).
    """
    rows, n_logical = weight.shape
    phy2log = torch.arange(num_physical, dtype=torch.int64).repeat(rows, 1)
    rank = torch.zeros(rows, num_physical, dtype=torch.int64)
    logcnt = torch.ones(rows, n_logical, dtype=torch.int64)
    for p in range(n_logical, num_physical):
        for r in range(rows):
            expert = int(torch.argmax(weight[r] / logcnt[r]))
            phy2log[r, p] = expert
            rank[r, p] = logcnt[r, expert]
            logcnt[r, expert] += 1
    return phy2log, rank, logcnt


def rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus):
    """Hierarchical load balancing (DeepSeek EPLB).

    Expert groups go to nodes, replicas are made within nodes, and replicas go to GPUs.

    Args:
        weight: [layers, num_logical_experts] load of each logical expert (tokens).
        num_replicas: physical expert slots per layer (a multiple of num_gpus).
        num_groups: expert groups (experts of a group stay on one node).
        num_nodes: server nodes.
        num_gpus: GPUs in total (slot p lives on GPU p // (num_replicas // num_gpus)).

    Returns:
        phy2log [layers, num_replicas]: logical expert of each physical slot;
        log2phy [layers, num_logical_experts, X]: the slots of each logical expert, padded with -1;
        logcnt [layers, num_logical_experts]: number of replicas of each logical expert (>= 1).
    """
    weight = weight.float()
    layers, n_logical = weight.shape
    group_size = n_logical // num_groups
    groups_per_node = num_groups // num_nodes
    phys_per_node = num_replicas // num_nodes
    gpus_per_node = num_gpus // num_nodes
    # 1. groups -> nodes
    group_load = weight.view(layers, num_groups, group_size).sum(-1)
    group_pack, group_rank = balanced_packing(group_load, num_nodes)
    # logical expert order with each node's experts contiguous
    log2mlog = torch.empty(layers, n_logical, dtype=torch.int64)
    for r in range(layers):
        for g in range(num_groups):
            slot = group_pack[r, g] * groups_per_node + group_rank[r, g]
            for j in range(group_size):
                log2mlog[r, g * group_size + j] = slot * group_size + j
    mlog2log = torch.argsort(log2mlog, dim=1)
    # 2. replicate within each node
    node_weight = weight.gather(1, mlog2log).view(layers * num_nodes, n_logical // num_nodes)
    phy2mlog, phyrank, mlogcnt = replicate_experts(node_weight, phys_per_node)
    # 3. replicas -> GPUs within each node
    replica_load = node_weight.gather(1, phy2mlog) / mlogcnt.gather(1, phy2mlog)
    gpu_pack, gpu_rank = balanced_packing(replica_load, gpus_per_node)
    per_gpu = phys_per_node // gpus_per_node
    slot_of = gpu_pack * per_gpu + gpu_rank
    pphy2mlog = torch.empty_like(phy2mlog)
    pphy2mlog.scatter_(1, slot_of, phy2mlog)
    offsets = torch.arange(num_nodes, dtype=torch.int64).view(1, -1, 1) * (n_logical // num_nodes)
    pphy2mlog = (pphy2mlog.view(layers, num_nodes, -1) + offsets).view(layers, -1)
    phy2log = mlog2log.gather(1, pphy2mlog)
    # 4. inverse map
    logcnt = torch.zeros(layers, n_logical, dtype=torch.int64)
    width = int(torch.bincount(phy2log.flatten()
                               + n_logical * torch.arange(layers).repeat_interleave(num_replicas)).max())
    log2phy = torch.full((layers, n_logical, width), -1, dtype=torch.int64)
    for r in range(layers):
        for p in range(num_replicas):
            e = int(phy2log[r, p])
            log2phy[r, e, logcnt[r, e]] = p
            logcnt[r, e] += 1
    return phy2log, log2phy, logcnt


# EVOLVE-BLOCK-END
