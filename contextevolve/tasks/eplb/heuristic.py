"""EPLB heuristic baseline: one extra replica for each of the heaviest experts, slots in expert order."""

import torch


def rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus):
    """Static replication: the (num_replicas - experts) heaviest experts get a second replica."""
    layers, n_logical = weight.shape
    extra = num_replicas - n_logical
    hottest = torch.argsort(weight.float(), dim=1, descending=True)[:, :extra]
    phy2log = torch.cat([torch.arange(n_logical).repeat(layers, 1), hottest], dim=1)
    logcnt = torch.ones(layers, n_logical, dtype=torch.int64)
    logcnt.scatter_add_(1, hottest, torch.ones_like(hottest))
    log2phy = torch.full((layers, n_logical, 2), -1, dtype=torch.int64)
    log2phy[:, :, 0] = torch.arange(n_logical)
    log2phy.scatter_(1, hottest.unsqueeze(-1).expand(-1, -1, 2),
                     torch.stack([hottest, n_logical + torch.arange(extra).repeat(layers, 1)], dim=-1))
    return phy2log, log2phy, logcnt
