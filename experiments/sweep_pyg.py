"""PyTorch Geometric models for the sweep: the GNNs of ``torch_geometric.nn.models``, a graph
classifier as its tutorials write one (GCN, ``global_mean_pool``, a linear head), the global
aggregations of ``torch_geometric.nn.aggr`` and the top-k style pooling layers, each with
small widths (16 node features, 32 hidden), random weights, eval mode.

Left out: models over 3D points (SchNet, DimeNet, ViSNet: their radius graph needs pyg-lib,
which PyPI does not carry), and models of one fixed graph or of a training procedure
(Node2Vec, LINKX, LightGCN, label propagation, GAE and kin).

Examples: random graphs as PyG batches them, node features, ``edge_index`` and the batch
vector: one graph of 10 nodes first, then 3 graphs (6, 9 and 5 nodes), then 2 graphs (12
and 7 nodes), each with about 3 edges per node.
"""

from __future__ import annotations

import torch
from sweep_libs import Built, construct

FEATURES, HIDDEN, OUT, EDGE_FEATURES = 16, 32, 8, 4
GRAPHS = ((10,), (6, 9, 5), (12, 7))  # nodes of each graph, per example

# name -> (what it is made from, its inputs)
MODELS: dict[str, tuple[str, str]] = {
    **{name: ("models", "x_edges") for name in
       ("GCN", "GraphSAGE", "GIN", "GAT", "GATv2", "PNA", "EdgeCNN", "GCN_jk", "PMLP",
        "RECT_L")},
    **{name: ("models", "x_edges_batch") for name in
       ("GraphUNet", "NeuralFingerprint", "SGFormer", "Polynormer", "GCNClassifier")},
    "AttentiveFP": ("models", "x_edges_attr_batch"),
    **{name: ("aggr", "x_index") for name in
       ("SumAggregation", "MeanAggregation", "MaxAggregation", "MedianAggregation",
        "StdAggregation", "SoftmaxAggregation", "PowerMeanAggregation",
        "AttentionalAggregation", "Set2Set", "SortAggregation", "GraphMultisetTransformer",
        "SetTransformerAggregation", "DeepSetsAggregation")},
    **{name: ("pool", "x_edges_batch") for name in
       ("TopKPooling", "SAGPooling", "ASAPooling", "EdgePooling")},
    "MemPooling": ("pool", "x_batch"),
}


class GCNClassifier(torch.nn.Module):
    """A graph classifier as PyG's introduction writes one."""

    def __init__(self) -> None:
        from torch_geometric.nn import GCNConv

        super().__init__()
        self.conv1, self.conv2 = GCNConv(FEATURES, HIDDEN), GCNConv(HIDDEN, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, OUT)

    def forward(self, x, edge_index, batch):
        from torch_geometric.nn import global_mean_pool

        x = self.conv2(self.conv1(x, edge_index).relu(), edge_index).relu()
        return self.head(global_mean_pool(x, batch))


def architectures() -> dict[str, str]:
    return {name: family for name, (family, _) in sorted(MODELS.items())}


def _make(name: str) -> torch.nn.Module:
    from torch_geometric.nn import aggr, models, pool

    lin = torch.nn.Linear
    gnn = (FEATURES, HIDDEN)
    made = {
        "GATv2": lambda: models.GAT(*gnn, 2, OUT, heads=2, v2=True),
        "GAT": lambda: models.GAT(*gnn, 2, OUT, heads=2),
        "GCN_jk": lambda: models.GCN(*gnn, 2, OUT, jk="cat"),
        "PNA": lambda: models.PNA(*gnn, 2, OUT, aggregators=["mean", "min", "max", "std"],
                                  scalers=["identity", "amplification", "attenuation"],
                                  deg=torch.tensor([0, 4, 6, 3, 1])),
        "PMLP": lambda: models.PMLP(*gnn, OUT, num_layers=2),
        "RECT_L": lambda: models.RECT_L(*gnn),
        "GraphUNet": lambda: models.GraphUNet(*gnn, OUT, depth=2),
        "NeuralFingerprint": lambda: models.NeuralFingerprint(*gnn, OUT, num_layers=2),
        "SGFormer": lambda: models.SGFormer(*gnn, OUT),
        "Polynormer": lambda: models.Polynormer(*gnn, OUT),
        "GCNClassifier": GCNClassifier,
        "AttentiveFP": lambda: models.AttentiveFP(*gnn, OUT, edge_dim=EDGE_FEATURES,
                                                  num_layers=2, num_timesteps=2),
        "SoftmaxAggregation": lambda: aggr.SoftmaxAggregation(learn=True),
        "PowerMeanAggregation": lambda: aggr.PowerMeanAggregation(learn=True),
        "AttentionalAggregation": lambda: aggr.AttentionalAggregation(lin(FEATURES, 1)),
        "Set2Set": lambda: aggr.Set2Set(FEATURES, processing_steps=2),
        "SortAggregation": lambda: aggr.SortAggregation(k=4),
        "GraphMultisetTransformer": lambda: aggr.GraphMultisetTransformer(FEATURES, k=4,
                                                                          heads=2),
        "SetTransformerAggregation": lambda: aggr.SetTransformerAggregation(FEATURES,
                                                                            heads=2),
        "DeepSetsAggregation": lambda: aggr.DeepSetsAggregation(lin(FEATURES, HIDDEN),
                                                                lin(HIDDEN, OUT)),
        "MemPooling": lambda: pool.MemPooling(FEATURES, OUT, heads=2, num_clusters=3),
    }
    if name in made:
        return made[name]()
    family = MODELS[name][0]
    if family == "models":  # GCN, GraphSAGE, GIN, EdgeCNN: (in, hidden, layers, out)
        return getattr(models, name)(*gnn, 2, OUT)
    if family == "pool":
        return getattr(pool, name)(FEATURES)
    return getattr(aggr, name)()


def build(name: str) -> Built:
    model = construct(_make, name)
    kind = MODELS[name][1]
    return Built(model, [inputs(kind, sizes, seed) for seed, sizes in enumerate(GRAPHS)])


def graphs(sizes: tuple[int, ...], seed: int) -> dict[str, torch.Tensor]:
    """One batch of random graphs, as ``torch_geometric.data.Batch`` lays them out: nodes
    of graph i after those of graph i - 1, edges within a graph, the batch vector."""
    g = torch.Generator().manual_seed(seed)
    edges, batch, start = [], [], 0
    for i, n in enumerate(sizes):
        edges.append(torch.randint(0, n, (2, 3 * n), generator=g) + start)
        batch.append(torch.full((n,), i))
        start += n
    edge_index = torch.cat(edges, 1)
    return {"x": torch.randn(start, FEATURES, generator=g), "edge_index": edge_index,
            "batch": torch.cat(batch),
            "edge_attr": torch.randn(edge_index.shape[1], EDGE_FEATURES, generator=g)}


def inputs(kind: str, sizes: tuple[int, ...], seed: int) -> tuple[tuple, dict]:
    gr = graphs(sizes, seed)
    if kind == "x_edges":
        return (gr["x"], gr["edge_index"]), {}
    if kind == "x_edges_batch":
        return (gr["x"], gr["edge_index"]), {"batch": gr["batch"]}
    if kind == "x_edges_attr_batch":
        return (gr["x"], gr["edge_index"], gr["edge_attr"], gr["batch"]), {}
    if kind == "x_index":
        return (gr["x"],), {"index": gr["batch"]}
    if kind == "x_batch":
        return (gr["x"], gr["batch"]), {}
    raise KeyError(kind)
