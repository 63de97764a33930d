"""EPLB, human state of the art: DeepSeek EPLB's global policy, vectorised over layers.

Replication: every expert gets one replica, then each extra slot goes to the expert with
the highest load per replica (one tensor argmax over all layers per slot). Placement:
replicas sorted by load are dealt to GPUs in serpentine order so that each GPU gets the
same number of slots and a similar load.
"""

import torch


def rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus):
    """DeepSeek EPLB global policy (vectorised); same contract as the initial program."""
    weight = weight.float()
    layers, n_logical = weight.shape
    rows = torch.arange(layers)
    logcnt = torch.ones(layers, n_logical, dtype=torch.int64)
    replicas = [torch.arange(n_logical).repeat(layers, 1)]
    for _ in range(num_replicas - n_logical):
        expert = torch.argmax(weight / logcnt, dim=1)
        logcnt[rows, expert] += 1
        replicas.append(expert.unsqueeze(1))
    experts = torch.cat(replicas, dim=1)  # [layers, num_replicas], unordered
    load = weight.gather(1, experts) / logcnt.gather(1, experts)
    order = torch.argsort(load, dim=1, descending=True)
    per_gpu = num_replicas // num_gpus
    k = torch.arange(num_replicas)
    lap, pos = k // num_gpus, k % num_gpus
    gpu = torch.where(lap % 2 == 0, pos, num_gpus - 1 - pos)
    slot = gpu * per_gpu + lap  # serpentine deal: k-th heaviest replica -> its slot
    phy2log = torch.empty_like(experts)
    phy2log.scatter_(1, slot.repeat(layers, 1), experts.gather(1, order))
    by_expert = torch.argsort(phy2log * num_replicas + k, dim=1)  # slots grouped by expert, ascending
    width = int(logcnt.max())
    start = torch.cumsum(logcnt, dim=1) - logcnt
    rank = k.repeat(layers, 1) - start.gather(1, phy2log.gather(1, by_expert))
    log2phy = torch.full((layers, n_logical, width), -1, dtype=torch.int64)
    log2phy[rows.unsqueeze(1), phy2log.gather(1, by_expert), rank] = by_expert
    return phy2log, log2phy, logcnt
