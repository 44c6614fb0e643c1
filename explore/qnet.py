"""The Q-network direction chooser (sec. 5.1): a four-layer ReLU network, replay and training.

X maps a point's encoding to one Q-value per direction of the whole space. Each transition
(p, d, e, r) with r = (E_e - E_p) / E_p is kept; every few trials X is trained towards
target = alpha * max Y(e) + r with mean squared error and AdaDelta, Y being a copy of X made
after the previous training round (the target network that keeps training stable), and then
Y takes X's new parameters.

Two readings of the paper's text: the loss is on X(p)[d], the Q-value of the direction taken
(the paper writes X(e), which would not tie the label to the move that earned it); and a failed
e (E_e = 0, so r = -1) is terminal: its target is r alone, since a failed point is never a start.
Everything is seeded: the same seed and the same transitions give the same network.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@contextlib.contextmanager
def one_thread():
    """The network is tiny: more threads only spin against the measurement worker and other jobs."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class QNetwork(nn.Module):
    """Four fully connected layers with ReLU between them: encoding -> one Q-value per direction."""

    def __init__(self, input_length, num_directions, hidden=64):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(input_length, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, num_directions),
        )

    def forward(self, features):
        return self.layers(features)


@dataclass(frozen=True)
class Transition:
    start: np.ndarray     # encoding of p
    direction: int
    end: np.ndarray       # encoding of e
    reward: float         # (E_e - E_p) / E_p
    terminal: bool        # e failed: no future value


class QLearner:
    """Network X, target network Y, the replay memory and the training step."""

    def __init__(self, input_length, num_directions, seed=0, hidden=64, alpha=0.5, learning_rate=1.0,
                 epochs=4, batch_size=32, memory=2048):
        with torch.random.fork_rng(devices=[]):  # seeded without disturbing the caller's torch RNG
            torch.manual_seed(seed)
            self.network = QNetwork(input_length, num_directions, hidden)
        self.target = copy.deepcopy(self.network)
        self.optimizer = torch.optim.Adadelta(self.network.parameters(), lr=learning_rate)
        self.alpha = alpha
        self.epochs = epochs
        self.batch_size = batch_size
        self.memory = memory
        self.transitions: list[Transition] = []
        self._rng = np.random.default_rng([seed, 1])
        self.training_rounds = 0

    def q_values(self, encoding):
        """X's Q-value for every direction of the space at this point."""
        with torch.no_grad(), one_thread():
            return self.network(torch.from_numpy(np.asarray(encoding, np.float32))[None])[0].numpy()

    def remember(self, start, direction, end, reward, terminal):
        self.transitions.append(Transition(np.asarray(start, np.float32), int(direction),
                                           np.asarray(end, np.float32), float(reward), bool(terminal)))
        if len(self.transitions) > self.memory:
            del self.transitions[0]

    def train(self):
        """Some epochs of minibatches over the memory towards alpha * max Y(e) + r; then Y = X."""
        if not self.transitions:
            return None
        with one_thread():
            return self._train()

    def _train(self):
        starts = torch.from_numpy(np.stack([t.start for t in self.transitions]))
        ends = torch.from_numpy(np.stack([t.end for t in self.transitions]))
        directions = torch.tensor([t.direction for t in self.transitions])
        rewards = torch.tensor([t.reward for t in self.transitions], dtype=torch.float32)
        alive = torch.tensor([not t.terminal for t in self.transitions], dtype=torch.float32)
        with torch.no_grad():
            labels = rewards + self.alpha * alive * self.target(ends).max(dim=1).values
        losses = []
        for _ in range(self.epochs):
            order = self._rng.permutation(len(self.transitions))
            for begin in range(0, len(order), self.batch_size):
                batch = torch.from_numpy(order[begin:begin + self.batch_size])
                predicted = self.network(starts[batch]).gather(1, directions[batch, None])[:, 0]
                loss = nn.functional.mse_loss(predicted, labels[batch])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                losses.append(loss.item())
        self.target.load_state_dict(self.network.state_dict())
        self.training_rounds += 1
        return float(np.mean(losses))
