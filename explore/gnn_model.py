"""A small graph network over a candidate's loop nest (GraphSAGE layers, after the TPU cost-model paper).

Nodes are the kernel's loops, allocations, statements and accesses (codegen.features.kernel_graph);
each layer mixes a node's own features with the mean of its neighbours' (parents and children), and
the graph's score is an MLP of the sum and the max of the node embeddings. The loss is pairwise
within a task (a logistic loss on the score difference of every ordered pair, as the paper does),
or the squared error on the relative speed for comparison.
"""

from __future__ import annotations

import numpy as np

from .cost_model import CostModel, CostModelError, relative_speed

HIDDEN = 64
LAYERS = 3
EPOCHS = 60
PAIRS_PER_GROUP = 256   # ordered pairs drawn per task and epoch
LEARNING_RATE = 3e-3


def _torch():
    import torch

    return torch


class _one_thread:
    """Run torch on one thread: these graphs are small, and a second thread would fight the measurements."""

    def __enter__(self):
        torch = _torch()
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc_info):
        _torch().set_num_threads(self.threads)


def _network(width, hidden=HIDDEN, layers=LAYERS):
    torch = _torch()
    nn = torch.nn

    class Sage(nn.Module):
        """GraphSAGE (mean aggregator) layers, a sum-and-max readout and a scoring MLP."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(width, hidden)
            self.own = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
            self.neighbours = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(layers))
            self.score = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

        def forward(self, nodes, edges, degree, graph_of, graphs):
            h = torch.relu(self.embed(nodes))
            for own, neighbours in zip(self.own, self.neighbours):
                mean = torch.zeros_like(h).index_add_(0, edges[:, 1], h[edges[:, 0]]) / degree
                h = torch.relu(own(h) + neighbours(mean))
                h = h / h.norm(dim=1, keepdim=True).clamp_min(1e-6)
            total = torch.zeros(graphs, h.shape[1]).index_add_(0, graph_of, h)
            peak = torch.full((graphs, h.shape[1]), -1e9).scatter_reduce(
                0, graph_of[:, None].expand_as(h), h, reduce="amax")
            return self.score(torch.cat([total, peak], dim=1)).squeeze(1)

    return Sage()


class GnnModel(CostModel):
    """GraphSAGE over CandidateFeatures (nodes, edges), trained with a pairwise rank loss or MSE."""

    name = "gnn"

    def __init__(self, loss="rank", epochs=EPOCHS, seed=0):
        if loss not in ("rank", "mse"):
            raise CostModelError(f"gnn loss '{loss}': choose rank or mse")
        self.loss = loss
        self.epochs = epochs
        self.seed = seed
        self._net = None
        self._width = None
        self._scale = None   # per-feature scale of the node features (from the first fit)

    @property
    def trained(self):
        return self._net is not None

    def _batch(self, features):
        """The graphs of features as one disconnected graph (tensors the network takes)."""
        torch = _torch()
        widths = {f.nodes.shape[1] for f in features}
        if self._width is not None and widths != {self._width}:
            raise CostModelError(f"the model was trained on {self._width} features per node, these have "
                                 f"{sorted(widths)}: train it again with this flexsched")
        nodes, edges, graph_of, offset = [], [], [], 0
        for index, f in enumerate(features):
            nodes.append(f.nodes)
            both = np.concatenate([f.edges, f.edges[:, ::-1]]) + offset   # messages flow both ways
            edges.append(both)
            graph_of.append(np.full(len(f.nodes), index))
            offset += len(f.nodes)
        nodes = torch.from_numpy(np.concatenate(nodes) / self._scale).float()
        edges = torch.from_numpy(np.concatenate(edges)).long()
        degree = torch.zeros(len(nodes)).index_add_(0, edges[:, 1], torch.ones(len(edges))).clamp_min(1)[:, None]
        return nodes, edges, degree, torch.from_numpy(np.concatenate(graph_of)).long(), len(features)

    def fit(self, samples):
        if not samples:
            return
        with _one_thread():
            self._fit(samples)

    def _fit(self, samples):
        torch = _torch()
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        if self._net is None:
            stacked = np.concatenate([s.features.nodes for s in samples])
            self._width = stacked.shape[1]
            self._scale = np.maximum(1.0, np.abs(stacked).max(axis=0)).astype(np.float32)
            self._net = _network(self._width)
        target = torch.from_numpy(relative_speed(samples))
        groups = {}
        for index, sample in enumerate(samples):
            groups.setdefault(sample.group, []).append(index)
        batch = self._batch([s.features for s in samples])
        optimiser = torch.optim.Adam(self._net.parameters(), lr=LEARNING_RATE)
        self._net.train()
        for _ in range(self.epochs):
            optimiser.zero_grad()
            scores = self._net(*batch)
            if self.loss == "mse":
                loss = torch.mean((scores - target) ** 2)
            else:
                first, second = _pairs(groups, target.numpy(), rng)
                if not len(first):
                    break
                loss = torch.nn.functional.softplus(-(scores[first] - scores[second])).mean()
            loss.backward()
            optimiser.step()
        self._net.eval()

    def scores(self, features):
        if not self.trained:
            return np.zeros(len(features), dtype=np.float32)
        torch = _torch()
        with _one_thread(), torch.no_grad():
            return self._net(*self._batch(features)).numpy()

    def state(self):
        weights = None if self._net is None else {k: v.tolist() for k, v in self._net.state_dict().items()}
        return {"loss": self.loss, "epochs": self.epochs, "seed": self.seed, "width": self._width,
                "scale": None if self._scale is None else self._scale.tolist(), "weights": weights}

    def restore(self, state):
        torch = _torch()
        self.loss, self.epochs, self.seed = state["loss"], int(state["epochs"]), int(state["seed"])
        self._width = state.get("width")
        self._net = None
        if state.get("weights") is not None:
            self._scale = np.asarray(state["scale"], dtype=np.float32)
            self._net = _network(self._width)
            self._net.load_state_dict({k: torch.tensor(v) for k, v in state["weights"].items()})
            self._net.eval()


def _pairs(groups, target, rng):
    """Index arrays (faster, slower) of ordered pairs within each group, a sample of PAIRS_PER_GROUP each."""
    first, second = [], []
    for members in groups.values():
        members = np.asarray(members)
        if len(members) < 2:
            continue
        a = rng.choice(members, PAIRS_PER_GROUP)
        b = rng.choice(members, PAIRS_PER_GROUP)
        keep = target[a] != target[b]
        a, b = a[keep], b[keep]
        faster = target[a] > target[b]
        first.append(np.where(faster, a, b))
        second.append(np.where(faster, b, a))
    if not first:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(first), np.concatenate(second)


MODEL = GnnModel
